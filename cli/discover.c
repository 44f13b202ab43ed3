/*
 * discover.c - the command's one reader of the environment: which rank
 * and world size a launcher gave (Slurm, Open MPI, PMI, PMIx, torchrun,
 * MLX, a Kubernetes Indexed Job, or our own), the default address
 * source, the job token and the job key, the address to advertise when
 * none was given, and bench's progress interval.
 */
#include <arpa/inet.h>
#include <ifaddrs.h>
#include <net/if.h>
#include <netinet/in.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "cli.h"
#include "discover.h"
#include "rendezvous.h"

static const struct {
	const char *rank;
	const char *world;
	const char *name;
} launchers[] = {
	{ "SILVIC_RING_RANK", "SILVIC_RING_WORLD", "SILVIC_RING_RANK" },
	{ "SLURM_PROCID", "SLURM_NTASKS", "Slurm (SLURM_PROCID)" },
	{ "OMPI_COMM_WORLD_RANK", "OMPI_COMM_WORLD_SIZE",
	    "Open MPI (OMPI_COMM_WORLD_RANK)" },
	{ "PMI_RANK", "PMI_SIZE", "PMI (PMI_RANK)" },
	{ "PMIX_RANK", NULL, "PMIx (PMIX_RANK)" },
	{ "RANK", "WORLD_SIZE", "torchrun (RANK)" },
	{ "MLX_RANK", NULL, "MLX (MLX_RANK)" },
	/* Last: a pod may also run one of the launchers above. */
	{ "JOB_COMPLETION_INDEX", NULL,
	    "a Kubernetes Indexed Job (JOB_COMPLETION_INDEX)" },
};

int
discover_rank(struct discovered *d, char *why, size_t why_size)
{
	uint64_t v;

	d->rank = -1;
	d->world = -1;
	d->rank_source = NULL;
	d->world_source = NULL;
	for (size_t i = 0; i < sizeof(launchers) / sizeof(launchers[0]); i++) {
		const char *rank = getenv(launchers[i].rank);
		const char *world = launchers[i].world != NULL ?
		    getenv(launchers[i].world) : NULL;

		if (rank == NULL || rank[0] == '\0')
			continue;
		if (cli_parse_uint(rank, 0, LIST_MAX_RANKS - 1, &v) != 0) {
			snprintf(why, why_size, "%s='%s' is not a rank number "
			    "(0-%d)", launchers[i].rank, rank, LIST_MAX_RANKS - 1);
			return -1;
		}
		d->rank = (int64_t)v;
		d->rank_source = launchers[i].name;
		if (world != NULL && world[0] != '\0') {
			if (cli_parse_uint(world, 1, LIST_MAX_RANKS, &v) != 0) {
				snprintf(why, why_size,
				    "%s='%s' is not a world size (1-%d)",
				    launchers[i].world, world, LIST_MAX_RANKS);
				return -1;
			}
			d->world = (int64_t)v;
			d->world_source = launchers[i].world;
		}
		return 0;
	}
	return 0;
}

const char *
discover_peers(const char **origin)
{
	struct discovered_slurm slurm;
	const char *v;

	if ((v = getenv("SILVIC_RING_LAUNCH_FD")) != NULL && v[0] != '\0') {
		static char source[64];

		snprintf(source, sizeof(source), "launch:%s", v);
		*origin = "the launcher";
		return source;
	}
	if ((v = getenv("SILVIC_RING_PEERS")) != NULL && v[0] != '\0') {
		*origin = "SILVIC_RING_PEERS";
		return v;
	}
	if ((v = getenv("MLX_HOSTFILE")) != NULL && v[0] != '\0') {
		*origin = "MLX_HOSTFILE";
		return v;
	}
	/* A Slurm job step needs nothing more: its nodes and their tasks
	 * make the list. */
	if (discover_slurm(&slurm)) {
		*origin = slurm.nodelist_name;
		return "slurm:";
	}
	*origin = NULL;
	return NULL;
}

const char *
discover_key_file(void)
{
	const char *v = getenv("SILVIC_RING_KEY_FILE");

	return v != NULL && v[0] != '\0' ? v : NULL;
}

const char *
discover_http_token_file(void)
{
	const char *v = getenv("SILVIC_RING_HTTP_TOKEN_FILE");

	return v != NULL && v[0] != '\0' ? v : NULL;
}

const char *
discover_token(void)
{
	const char *v = getenv("SILVIC_RING_TOKEN");

	return v != NULL && v[0] != '\0' ? v : NULL;
}

const char *
discover_job(void)
{
	static const char *const vars[] = { "SILVIC_RING_JOB", "SLURM_JOB_ID",
		"OMPI_MCA_ess_base_jobid", "OMPI_MCA_orte_ess_jobid",
		"PMIX_NAMESPACE", "TORCHELASTIC_RUN_ID" };
	static char job[256];
	const char *v;

	for (size_t i = 0; i < sizeof(vars) / sizeof(vars[0]); i++)
		if ((v = getenv(vars[i])) != NULL && v[0] != '\0') {
			const char *step = i == 1 ? getenv("SLURM_STEP_ID") : NULL;
			size_t n;

			snprintf(job, sizeof(job), "%s%s%s", v, step ? "." : "",
			    step ? step : "");
			/* The key names a file: keep it to safe characters. */
			for (n = 0; job[n]; n++)
				if (!strchr("abcdefghijklmnopqrstuvwxyzABCDEFGHIJ"
				    "KLMNOPQRSTUVWXYZ0123456789._-", job[n]))
					job[n] = '_';
			return job;
		}
	return NULL;
}

bool
discover_launched(void)
{
	const char *v = getenv("SILVIC_RING_LAUNCH_FD");

	return v != NULL && v[0] != '\0';
}

const char *
discover_launch_host(void)
{
	const char *v = getenv("SILVIC_RING_LAUNCH_HOST");

	return v != NULL && v[0] != '\0' ? v : NULL;
}

int
discover_ssh_connection(char *client, size_t client_size, char *server,
    size_t server_size)
{
	const char *v = getenv("SSH_CONNECTION");
	char a[256], b[256], c[256], d[256];

	if (v == NULL || strlen(v) >= sizeof(a) ||
	    sscanf(v, "%255s %255s %255s %255s", a, b, c, d) != 4)
		return -1;
	snprintf(client, client_size, "%s", a);
	snprintf(server, server_size, "%s", c);
	return 0;
}

/* A number from the environment, or -1 when unset or not one. */
static int64_t
env_number(const char *name)
{
	const char *v = getenv(name);
	uint64_t n;

	return v != NULL && cli_parse_uint(v, 0, INT32_MAX, &n) == 0 ?
	    (int64_t)n : -1;
}

/* The first of two variables that is set, and its name. */
static const char *
env_either(const char *first, const char *second, const char **name)
{
	const char *v = getenv(first);

	*name = first;
	if (v != NULL && v[0] != '\0')
		return v;
	*name = second;
	v = getenv(second);
	return v != NULL && v[0] != '\0' ? v : NULL;
}

int
discover_slurm(struct discovered_slurm *s)
{
	const char *ports = getenv("SLURM_STEP_RESV_PORTS");

	memset(s, 0, sizeof(*s));
	s->nodelist = env_either("SLURM_STEP_NODELIST", "SLURM_JOB_NODELIST",
	    &s->nodelist_name);
	s->tasks = env_either("SLURM_STEP_TASKS_PER_NODE",
	    "SLURM_TASKS_PER_NODE", &s->tasks_name);
	s->ports = ports != NULL && ports[0] != '\0' ? ports : NULL;
	s->procid = env_number("SLURM_PROCID");
	s->nodeid = env_number("SLURM_NODEID");
	s->localid = env_number("SLURM_LOCALID");
	return s->nodelist != NULL && s->procid >= 0;
}

int
discover_interface(const char *name, char *ip, size_t size)
{
	struct ifaddrs *ifs, *i;
	int found = -1;

	if (getifaddrs(&ifs) != 0)
		return -1;
	for (i = ifs; i != NULL && found != 0; i = i->ifa_next) {
		if (i->ifa_addr == NULL || !(i->ifa_flags & IFF_UP))
			continue;
		if (name != NULL ? strcmp(i->ifa_name, name) != 0 :
		    (i->ifa_flags & IFF_LOOPBACK) != 0)
			continue;
		if (i->ifa_addr->sa_family == AF_INET) {
			inet_ntop(AF_INET,
			    &((struct sockaddr_in *)i->ifa_addr)->sin_addr, ip,
			    (socklen_t)size);
			found = 0;
		} else if (name != NULL && i->ifa_addr->sa_family == AF_INET6 &&
		    found != 0) {
			const struct in6_addr *a =
			    &((struct sockaddr_in6 *)i->ifa_addr)->sin6_addr;

			if (IN6_IS_ADDR_LINKLOCAL(a))
				continue;
			inet_ntop(AF_INET6, a, ip, (socklen_t)size);
			found = 1;
		}
	}
	freeifaddrs(ifs);
	return found >= 0 ? 0 : -1;
}

bool
discover_is_interface(const char *name)
{
	return if_nametoindex(name) != 0;
}

int
discover_progress_interval(double *seconds)
{
	const char *v = getenv("SILVIC_RING_PROGRESS_INTERVAL");

	if (v == NULL || v[0] == '\0')
		return -1;
	return cli_parse_seconds(v, seconds);
}

uint64_t
discover_hash(const char *text)
{
	uint64_t h = 0xcbf29ce484222325ull;

	for (; *text; text++) {
		h ^= (unsigned char)*text;
		h *= 0x100000001b3ull;
	}
	return h;
}
