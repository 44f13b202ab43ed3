/*
 * ring_setup.c - a rank's life up to a formed ring, shared by run and
 * bench: the ring options, then bind, publish, obtain the list, find the
 * rank and world, derive the token, form the ring.
 */
#include <errno.h>
#include <signal.h>
#include <getopt.h>
#include <stdio.h>
#include <sched.h>
#include <stdlib.h>
#include <fcntl.h>
#include <libgen.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "cli.h"
#include "discover.h"
#include "rendezvous.h"

#define DEFAULT_TIMEOUT 60.0
#define DEFAULT_PROGRESS 10.0
#define PROGRESS_MAX 86400	/* s: a longer interval is a day */
/* A key file is a secret, not a document: anything longer is a mistake. */
#define KEY_MAX 4096

const char cli_ring_help[] =
"Ring options:\n"
"      --peers SOURCE       the address list: FILE (one host:port a line, or\n"
"                           an MLX hostfile), env:VAR, dir:PATH, or an\n"
"                           http(s):// URL (default: the launcher, then\n"
"                           $SILVIC_RING_PEERS, then $MLX_HOSTFILE; none:\n"
"                           a usage error, unless --world 1)\n"
"      --rank N             this rank (default: the launcher's environment,\n"
"                           else this rank's address found in the list)\n"
"      --world N            the world size (default: the launcher's, else\n"
"                           the length of the list)\n"
"      --host HOST          listen on HOST (default 0.0.0.0; 127.0.0.1 under\n"
"                           launch; a static list's own entry)\n"
"      --advertise IP|IFNAME  the address other ranks dial (default: HOST if\n"
"                           specific, else the first non-loopback address)\n"
"      --port PORT          listen on PORT instead of an ephemeral one\n"
"      --token TOKEN        job token: a decimal or 0x hex number, or any\n"
"                           text (default: $SILVIC_RING_TOKEN, else derived\n"
"                           from the list)\n"
"      --timeout SECONDS    bounds the rendezvous and every silent wait\n"
"                           (default 60)\n"
"      --print-address      print this rank's ip:port first on stdout\n"
"      --address-file FILE  write this rank's ip:port to FILE (atomically)\n"
"      --dry-run            resolve everything, print the plan, connect to\n"
"                           nothing\n"
"      --key-file FILE      authenticate every link with the pre-shared key\n"
"                           in FILE, at least 16 bytes, the same on every\n"
"                           rank (default: $SILVIC_RING_KEY_FILE; none: no\n"
"                           authentication)\n"
"      --integrity          check a CRC-32C on every frame (every rank must\n"
"                           agree; off by default)\n"
"      --mesh               connect every pair of ranks, not only ring\n"
"                           neighbours (every rank must agree; groups and\n"
"                           pair tests need it)\n"
"      --streams K          open K TCP connections per link (1-8, default 1;\n"
"                           every rank must agree): while a rank waits on\n"
"                           its links, their data goes on whichever\n"
"                           connection can take it first; a rank that\n"
"                           never waits keeps it on the first\n"
"      --shared-cores       the ranks share CPU cores (a host runs more\n"
"                           ranks than it has cores): small allreduces\n"
"                           then take fewer frames, in more hops at world 3\n"
"                           and by blocks at world 4 and on a mesh of 8\n"
"                           (every rank must agree; default:\n"
"                           $SILVIC_RING_SHARED_CORES yes or no, which\n"
"                           launch -n sets, else no)\n"
"      --no-shared-cores    each rank has a core (overrides\n"
"                           SILVIC_RING_SHARED_CORES)\n"
"      --cpus LIST          the CPUs of one host that all the ranks share\n"
"                           (as taskset -c lists them, e.g. 0,1; or none):\n"
"                           with as many ranks as CPUs or more each binds\n"
"                           itself to one, by the path of each allreduce\n"
"                           (2, 3 or 4 ranks on 2 CPUs, or 8 on a mesh;\n"
"                           otherwise none is bound; default:\n"
"                           $SILVIC_RING_CPUS, which launch -n sets when\n"
"                           its ranks fill or outnumber its CPUs, else\n"
"                           none)\n"
"      --tcp-congestion NAME  the links' TCP congestion control: auto (the\n"
"                           default: reno where the system runs bbr, whose\n"
"                           pacing slows the ring), system, or a name the\n"
"                           kernel offers (reno, cubic, ...)\n"
"      --json               JSON lines on stdout\n"
"  -v, --verbose            status lines on stderr (-vv: debug)\n"
"      --progress-interval SECONDS  while waiting for the list or the\n"
"                           neighbours, say who is there and who is missing\n"
"                           this often (default 10; shown with -v or when\n"
"                           stderr is a terminal)\n";

void
cli_ring_init(struct cli_ring *opts)
{
	memset(opts, 0, sizeof(*opts));
	opts->port = -1;
	opts->rank = -1;
	opts->world = -1;
	opts->timeout = DEFAULT_TIMEOUT;
	opts->congestion = "auto";
	opts->progress = DEFAULT_PROGRESS;
	opts->streams = 1;
	opts->shared_cores = -1;
}

/* 1 for yes, 0 for no, -1 for anything else. */
static int
yes_no(const char *text)
{
	return strcmp(text, "yes") == 0 ? 1 : strcmp(text, "no") == 0 ? 0 : -1;
}

int
cli_ring_option(struct cli_ring *opts, int c, const char *arg)
{
	struct sr_error err;
	uint64_t v;

	switch (c) {
	case OPT_HOST:
		opts->host = arg;
		return 1;
	case OPT_ADVERTISE:
		opts->advertise = arg;
		return 1;
	case OPT_PORT:
		if (cli_parse_uint(arg, 0, 65535, &v) != 0) {
			cli_usage_error("--port '%s' is not a port (0-65535)", arg);
			return -1;
		}
		opts->port = (int64_t)v;
		return 1;
	case OPT_PEERS:
		opts->peers = arg;
		return 1;
	case OPT_RANK:
		if (cli_parse_uint(arg, 0, LIST_MAX_RANKS - 1, &v) != 0) {
			cli_usage_error("--rank '%s' is not a rank number (0-%d)",
			    arg, LIST_MAX_RANKS - 1);
			return -1;
		}
		opts->rank = (int64_t)v;
		return 1;
	case OPT_WORLD:
		if (cli_parse_uint(arg, 1, LIST_MAX_RANKS, &v) != 0) {
			cli_usage_error("--world '%s' is not a world size "
			    "(1-%d)", arg, LIST_MAX_RANKS);
			return -1;
		}
		opts->world = (int64_t)v;
		return 1;
	case OPT_TOKEN:
		if (arg[0] == '\0') {
			cli_usage_error("--token is empty");
			return -1;
		}
		opts->token = arg;
		return 1;
	case OPT_TIMEOUT:
		if (cli_parse_seconds(arg, &opts->timeout) != 0) {
			cli_usage_error("--timeout '%s' is not a positive number "
			    "of seconds", arg);
			return -1;
		}
		return 1;
	case OPT_PRINT_ADDRESS:
		opts->print_address = true;
		return 1;
	case OPT_ADDRESS_FILE:
		opts->address_file = arg;
		return 1;
	case OPT_DRY_RUN:
		opts->dry_run = true;
		return 1;
	case OPT_JSON:
		opts->json = true;
		return 1;
	case OPT_KEY_FILE:
		opts->key_file = arg;
		return 1;
	case OPT_INTEGRITY:
		opts->integrity = true;
		return 1;
	case OPT_MESH:
		opts->mesh = true;
		return 1;
	case OPT_STREAMS:
		if (cli_parse_uint(arg, 1, SR_RING_STREAMS_MAX, &v) != 0) {
			cli_usage_error("--streams '%s' is not a number of "
			    "connections per link (1-%d)", arg,
			    SR_RING_STREAMS_MAX);
			return -1;
		}
		opts->streams = (uint32_t)v;
		return 1;
	case OPT_SHARED_CORES:
	case OPT_NO_SHARED_CORES:
		opts->shared_cores = c == OPT_SHARED_CORES;
		return 1;
	case OPT_CPUS: {
		int cpus[CLI_CPUS_MAX];
		uint32_t n;
		char why[128];

		if (cli_parse_cpus(arg, cpus, &n, why, sizeof(why)) != 0) {
			cli_usage_error("--cpus '%s': %s", arg, why);
			return -1;
		}
		opts->cpus = arg;
		return 1;
	}
	case OPT_TCP_CONGESTION:
		opts->congestion = strcmp(arg, "system") == 0 ? NULL : arg;
		if (sr_congestion_check(opts->congestion, &err) != 0) {
			cli_usage_error("--tcp-congestion: %s", err.message);
			return -1;
		}
		return 1;
	case OPT_VERBOSE:
		cli_verbosity++;
		return 1;
	case OPT_PROGRESS_INTERVAL:
		if (cli_parse_seconds(arg, &opts->progress) != 0) {
			cli_usage_error("--progress-interval '%s' is not a "
			    "positive number of seconds", arg);
			return -1;
		}
		return 1;
	default:
		return 0;
	}
}

/* --tcp-congestion as given: NULL stands for "system". */
static const char *
congestion_name(const struct cli_ring *opts)
{
	return opts->congestion != NULL ? opts->congestion : "system";
}

/* ------------------------------------------------------------ the state */

struct setup {
	struct cli_ring *opts;
	struct rendezvous rdv;
	struct peer_list list;
	struct discovered env;
	int64_t rank, world;
	const char *rank_source, *world_source;
	int64_t deadline;
	struct sr_listener *listener;
	uint64_t token;
	const char *token_source;
	struct sr_error err;
	uint8_t key[KEY_MAX];
	size_t key_len;
	char bearer[65];	/* the key's HTTP token */
	char job[32];		/* dir: file key from --token */
	bool shared_cores;
	const char *shared_cores_source;
	int cpus[CLI_CPUS_MAX];	/* --cpus, else $SILVIC_RING_CPUS */
	uint32_t ncpus;
	const char *cpus_text, *cpus_source;
};

/* ------------------------------------------------------- rank and world */

static int
resolve_rank(struct setup *s)
{
	char why[300];

	if (discover_rank(&s->env, why, sizeof(why)) != 0)
		return sr_error_set(&s->err, SR_ECONFIG, SR_PHASE_CONFIG, "%s",
		    why);
	s->rank = s->opts->rank;
	s->rank_source = "--rank";
	if (s->rank < 0) {
		s->rank = s->env.rank;
		s->rank_source = s->env.rank_source;
	}
	s->world = s->opts->world;
	s->world_source = "--world";
	if (s->world < 0) {
		s->world = s->env.world;
		s->world_source = s->env.world_source;
	}
	if (s->rank >= 0 && s->world >= 0 && s->rank >= s->world)
		return sr_error_set(&s->err, SR_ECONFIG, SR_PHASE_CONFIG,
		    "rank %lld (%s) is out of range for a world of %lld (%s)",
		    (long long)s->rank, s->rank_source, (long long)s->world,
		    s->world_source);
	return 0;
}

/* --shared-cores, else what launch -n said (it says yes on every rank
 * when they outnumber this machine's cores), else no. */
static int
resolve_shared_cores(struct setup *s)
{
	const char *v = getenv("SILVIC_RING_SHARED_CORES");
	int yes = s->opts->shared_cores;

	s->shared_cores_source = yes == 1 ? "--shared-cores" :
	    "--no-shared-cores";
	if (yes < 0 && v != NULL && v[0] != '\0') {
		s->shared_cores_source = "SILVIC_RING_SHARED_CORES";
		if ((yes = yes_no(v)) < 0)
			return sr_error_set(&s->err, SR_ECONFIG,
			    SR_PHASE_CONFIG, "SILVIC_RING_SHARED_CORES='%s' is "
			    "not yes or no", v);
	}
	if (yes < 0) {
		s->shared_cores_source = "the default";
		yes = 0;
	}
	s->shared_cores = yes == 1;
	return 0;
}

/* --cpus, else what launch -n said (the CPUs its ranks share, when they
 * fill or outnumber them), else none. */
static int
resolve_cpus(struct setup *s)
{
	const char *v = getenv("SILVIC_RING_CPUS");
	char why[128];
	cpu_set_t mine;

	s->cpus_text = "none";
	s->cpus_source = "the default";
	if (s->opts->cpus != NULL) {
		s->cpus_text = s->opts->cpus;
		s->cpus_source = "--cpus";
	} else if (v != NULL && v[0] != '\0') {
		s->cpus_text = v;
		s->cpus_source = "SILVIC_RING_CPUS";
	}
	if (cli_parse_cpus(s->cpus_text, s->cpus, &s->ncpus, why,
	    sizeof(why)) != 0)
		return sr_error_set(&s->err, SR_ECONFIG, SR_PHASE_CONFIG,
		    "SILVIC_RING_CPUS='%s': %s", v, why);
	if (sched_getaffinity(0, sizeof(mine), &mine) != 0)
		return 0;
	for (uint32_t i = 0; i < s->ncpus; i++)
		if (!CPU_ISSET(s->cpus[i], &mine))
			return sr_error_set(&s->err, SR_ECONFIG,
			    SR_PHASE_CONFIG, "%s'%s': this rank may not run "
			    "on CPU %d", s->opts->cpus != NULL ? "--cpus " :
			    "SILVIC_RING_CPUS=", s->cpus_text, s->cpus[i]);
	return 0;
}

/* The world the list gives must agree with what a launcher said. */
static int
check_world(struct setup *s)
{
	const char *name = s->rdv.source != NULL ? s->rdv.source : "the list";

	if (s->world >= 0 && (uint64_t)s->world != s->list.n)
		return sr_error_set(&s->err, SR_ECONFIG, SR_PHASE_CONFIG, "the "
		    "world size is %lld (%s) but %s lists %llu addresses",
		    (long long)s->world, s->world_source, name,
		    (unsigned long long)s->list.n);
	s->world = (int64_t)s->list.n;
	if (s->world_source == NULL)
		s->world_source = "the length of the list";
	if (s->rank >= s->world)
		return sr_error_set(&s->err, SR_ECONFIG, SR_PHASE_CONFIG,
		    "rank %lld (%s) is out of range for the %lld addresses of "
		    "%s", (long long)s->rank, s->rank_source,
		    (long long)s->world, name);
	return 0;
}

/* This rank's index in the list: its advertised address, textually or
 * as the same socket address. */
static int
find_self(struct setup *s, const char *address)
{
	for (uint64_t i = 0; i < s->list.n; i++)
		if (strcmp(s->list.addr[i], address) == 0) {
			s->rank = (int64_t)i;
			s->rank_source = "this rank's address in the list";
			return 0;
		}
	return sr_error_set(&s->err, SR_ECONFIG, SR_PHASE_RENDEZVOUS, "this "
	    "rank's address %s is not in %s; pass --rank, or advertise the "
	    "address the list names (--advertise)", address, s->rdv.source);
}

/* -------------------------------------------------------------- binding */

static int
advertised(struct setup *s, const char *host, char *out, size_t size)
{
	const char *a = s->opts->advertise;

	if (a != NULL && a[0] != '\0') {
		if (discover_is_interface(a)) {
			if (discover_interface(a, out, size) != 0)
				return sr_error_set(&s->err, SR_ECONFIG,
				    SR_PHASE_BIND, "--advertise '%s': the "
				    "interface has no usable address", a);
			cli_status("advertising %s (interface %s)", out, a);
			return 0;
		}
		snprintf(out, size, "%s", a);
		return 0;
	}
	if (strcmp(host, "0.0.0.0") != 0 && strcmp(host, "::") != 0 &&
	    strcmp(host, "[::]") != 0) {
		snprintf(out, size, "%s", host);
		return 0;
	}
	if (discover_interface(NULL, out, size) == 0) {
		cli_status("advertising %s (the first non-loopback address of "
		    "an up interface)", out);
		return 0;
	}
	snprintf(out, size, "127.0.0.1");
	cli_warn("no non-loopback interface is up; advertising 127.0.0.1, "
	    "which only ranks on this host can reach");
	return 0;
}

/* Opens the listener, resolving names within what is left of --timeout. */
static int
listen_on(struct setup *s, const char *host, const char *advertise,
    uint16_t port, struct sr_error *err)
{
	/* A dry run's rendezvous looks once, but a name still gets --timeout
	 * to resolve. */
	int64_t left_ms = s->opts->dry_run ? (int64_t)(s->opts->timeout * 1000) :
	    (s->deadline - sr_clock_ns()) / 1000000;

	return sr_listener_open_within(&s->listener, host, advertise, port,
	    left_ms > 0 ? left_ms : 1, &cli_interrupted, err);
}

static int
bind_ephemeral(struct setup *s)
{
	const char *host = s->opts->host;
	char adv[256];

	/* Under launch: loopback, or on another host (launch --hosts) the
	 * address the launcher reached that host at. */
	if (host == NULL)
		host = discover_launch_host();
	if (host == NULL)
		host = discover_launched() ? "127.0.0.1" : "0.0.0.0";
	if (advertised(s, host, adv, sizeof(adv)) != 0)
		return -1;
	if (listen_on(s, host, adv, (uint16_t)(s->opts->port > 0 ?
		s->opts->port : 0), &s->err) != 0)
		return -1;
	cli_status("listening on %s", sr_listener_address(s->listener));
	return 0;
}

/* Entry i's other addresses (an MLX hostfile's several a rank): each
 * listened on too, but where --host is a wildcard that covers it. */
static int
bind_others(struct setup *s, uint64_t i, uint16_t first, struct sr_error *err)
{
	const char *h = s->opts->host;
	bool wildcard = h != NULL && (strcmp(h, "0.0.0.0") == 0 ||
	    strcmp(h, "::") == 0 || strcmp(h, "[::]") == 0);

	for (size_t k = 1; i < s->list.nics_n && s->list.nics[i] != NULL &&
	    s->list.nics[i][k] != NULL; k++) {
		char host[SR_ADDR_MAX], why[SR_ADDR_MAX + 64];
		uint16_t port;

		if (sr_address_split(s->list.nics[i][k], host, sizeof(host),
		    &port, why, sizeof(why)) != SR_ADDRESS_OK)
			return sr_error_set(err, SR_ECONFIG, SR_PHASE_BIND, "%s",
			    why);
		if (wildcard && port == first)
			continue;
		if (sr_listener_also(s->listener, host, port, err) != 0)
			return -1;
		cli_status("listening on %s too", s->list.nics[i][k]);
	}
	return 0;
}

/* Binds list entry i (on --host when given) and advertises the entry. */
static int
bind_entry(struct setup *s, uint64_t i, struct sr_error *err)
{
	char host[SR_ADDR_MAX], why[SR_ADDR_MAX + 64];
	uint16_t port;

	/* Every list was checked (list_parse): only a bug fails here. */
	if (sr_address_split(s->list.addr[i], host, sizeof(host), &port, why,
		sizeof(why)) != SR_ADDRESS_OK)
		return sr_error_set(err, SR_ECONFIG, SR_PHASE_BIND, "%s", why);
	if (listen_on(s, s->opts->host != NULL ? s->opts->host : host, host,
	    port, err) != 0)
		return -1;
	if (bind_others(s, i, port, err) == 0)
		return 0;
	sr_listener_close(s->listener);
	s->listener = NULL;
	return -1;
}

/* With a static list: bind this rank's own entry, or, with no rank known,
 * the first entry this host can bind (that is this rank). */
static int
bind_static(struct setup *s)
{
	if (s->rank >= 0) {
		if (bind_entry(s, (uint64_t)s->rank, &s->err) != 0)
			return -1;
		cli_status("listening on %s", sr_listener_address(s->listener));
		return 0;
	}
	for (uint64_t i = 0; i < s->list.n; i++) {
		struct sr_error ignored;

		sr_error_clear(&ignored);
		if (bind_entry(s, i, &ignored) == 0) {
			s->rank = (int64_t)i;
			s->rank_source = "the first entry of the list this host "
			    "could bind";
			cli_status("listening on %s",
			    sr_listener_address(s->listener));
			return 0;
		}
	}
	return sr_error_set(&s->err, SR_ECONFIG, SR_PHASE_BIND, "no address in "
	    "%s can be bound on this host (all in use or not local); pass "
	    "--rank", s->rdv.source);
}

/*
 * After waiting: a complete list that does not hold the address this rank
 * published was not made from what the ranks published (a list served
 * read-only by a web server, with fixed ports): this rank binds its own
 * entry, as with a static file, or fails at once.  A list that holds it
 * at another rank's place fails at once too.
 */
static int
bind_listed(struct setup *s)
{
	char mine[SR_ADDR_MAX], why[600], line[SR_ADDR_MAX + 2];
	uint64_t i;

	/* A dry run published nothing, and binds nobody's entry. */
	if (s->opts->dry_run)
		return 0;
	snprintf(mine, sizeof(mine), "%s", sr_listener_address(s->listener));
	for (i = 0; i < s->list.n && strcmp(s->list.addr[i], mine) != 0; i++)
		;
	if (i < s->list.n) {
		if (s->rank >= 0 && (uint64_t)s->rank != i)
			return sr_error_set(&s->err, SR_ECONFIG,
			    SR_PHASE_RENDEZVOUS, "%s lists this rank's address "
			    "%s as rank %llu, but this is rank %lld (%s)",
			    s->rdv.source, mine, (unsigned long long)i,
			    (long long)s->rank, s->rank_source);
		return 0;
	}
	cli_status("%s does not list this rank's address %s: binding this "
	    "rank's own entry, as for a static list", s->rdv.source, mine);
	sr_listener_close(s->listener);
	s->listener = NULL;
	if (bind_static(s) != 0) {
		if (s->rank >= 0)
			snprintf(s->err.message + strlen(s->err.message),
			    sizeof(s->err.message) - strlen(s->err.message),
			    "; %s does not list this rank's address %s, and its "
			    "entry for rank %lld cannot be bound here",
			    s->rdv.source, mine, (long long)s->rank);
		return -1;
	}
	if (s->opts->address_file != NULL) {
		snprintf(line, sizeof(line), "%s\n",
		    sr_listener_address(s->listener));
		if (write_atomically(s->opts->address_file, line, why,
			sizeof(why)) != 0)
			return sr_error_set(&s->err, SR_ECONFIG,
			    SR_PHASE_RENDEZVOUS, "--address-file: %s", why);
	}
	return 0;
}

/* ------------------------------------------------------------ publishing */

/* --address-file's directory gets dir:'s check (rendezvous_check_dir). */
static int
check_address_dir(struct setup *s)
{
	char *copy = strdup(s->opts->address_file), why[600];
	int rc;

	if (copy == NULL)
		return sr_error_set(&s->err, SR_ENOMEM, SR_PHASE_CONFIG,
		    "out of memory");
	rc = rendezvous_check_dir(dirname(copy), "the --address-file "
	    "directory", s->key_len > 0, why, sizeof(why));
	free(copy);
	if (rc < 0)
		return sr_error_set(&s->err, SR_ECONFIG, SR_PHASE_CONFIG, "%s; "
		    "refused because a key is configured (write the address "
		    "file where only this user can)", why);
	return 0;
}

static int
publish(struct setup *s)
{
	const char *address = sr_listener_address(s->listener);
	char why[600], line[SR_ADDR_MAX + 2];

	if (s->opts->print_address && s->opts->json) {
		fputs("{\"type\":\"address\",\"rank\":", stdout);
		if (s->rank >= 0)
			printf("%lld", (long long)s->rank);
		else
			fputs("null", stdout);
		fputs(",\"address\":", stdout);
		json_string(stdout, address);
		fputs("}\n", stdout);
		fflush(stdout);
	} else if (s->opts->print_address) {
		printf("%s\n", address);
		fflush(stdout);
	}
	if (s->opts->address_file != NULL) {
		if (check_address_dir(s) != 0)
			return -1;
		snprintf(line, sizeof(line), "%s\n", address);
		if (write_atomically(s->opts->address_file, line, why,
			sizeof(why)) != 0)
			return sr_error_set(&s->err, SR_ECONFIG,
			    SR_PHASE_RENDEZVOUS, "--address-file: %s", why);
	}
	/* A dry run takes no place in a shared rendezvous. */
	if (s->rdv.backend == NULL || (s->opts->dry_run &&
	    !s->rdv.backend->dry_run_exchanges))
		return 0;
	if (s->rdv.backend->publish(&s->rdv, address, &s->rank, s->world,
		&s->err) != 0)
		return -1;
	if (s->rank >= 0 && s->rank_source == NULL)
		s->rank_source = "assigned by the rendezvous server";
	return 0;
}

/* ---------------------------------------------------------------- token */

/*
 * A token that is a number: decimal (leading zeros and all: "010" is
 * ten, never octal) or 0x hex.  0 with *v, or -1 when it is text.
 */
static int
token_number(const char *text, unsigned long long *v)
{
	bool hex = text[0] == '0' && (text[1] == 'x' || text[1] == 'X');
	const char *digits = hex ? text + 2 : text;
	char *end;

	if (digits[0] == '\0' ||
	    strspn(digits, hex ? "0123456789abcdefABCDEF" : "0123456789") !=
	    strlen(digits))
		return -1;
	errno = 0;
	*v = strtoull(digits, &end, hex ? 16 : 10);
	return errno == 0 && *end == '\0' ? 0 : -1;
}

static int
derive_token(struct setup *s)
{
	const char *text = s->opts->token;
	char *joined;
	size_t len = 1;

	s->token_source = "--token";
	if (text == NULL) {
		text = discover_token();
		s->token_source = "SILVIC_RING_TOKEN";
	}
	if (text != NULL) {
		unsigned long long v;

		s->token = token_number(text, &v) == 0 ? v : discover_hash(text);
		return 0;
	}
	/* Derived from the list: ranks that read different lists, or two
	 * jobs, can never join each other's ring. */
	for (uint64_t i = 0; i < s->list.n; i++)
		len += strlen(s->list.addr[i]) + 1;
	if ((joined = malloc(len)) == NULL)
		return sr_error_set(&s->err, SR_ENOMEM, SR_PHASE_CONFIG,
		    "out of memory");
	joined[0] = '\0';
	for (uint64_t i = 0; i < s->list.n; i++) {
		strcat(joined, s->list.addr[i]);
		strcat(joined, "\n");
	}
	s->token = discover_hash(joined);
	s->token_source = "derived from the address list";
	free(joined);
	return 0;
}

/* ------------------------------------------------------------- the plan */

static void
print_plan(struct setup *s)
{
	uint64_t n = s->list.n, r = (uint64_t)s->rank;
	FILE *o = stdout;

	if (s->opts->json) {
		fprintf(o, "{\"type\":\"plan\",\"rank\":%llu,\"world\":%llu,"
		    "\"rank_source\":", (unsigned long long)r,
		    (unsigned long long)n);
		json_string(o, s->rank_source);
		fputs(",\"address\":", o);
		json_string(o, s->list.addr[r]);
		fputs(",\"peers\":", o);
		json_string(o, s->rdv.source != NULL ? s->rdv.source : "none");
		fprintf(o, ",\"token\":\"0x%016llx\",\"token_source\":",
		    (unsigned long long)s->token);
		json_string(o, s->token_source);
		fprintf(o, ",\"next\":%llu,\"prev\":%llu,\"timeout_s\":",
		    (unsigned long long)((r + 1) % n),
		    (unsigned long long)((r + n - 1) % n));
		json_number(o, s->opts->timeout);
		fputs(",\"tcp_congestion\":", o);
		json_string(o, congestion_name(s->opts));
		fprintf(o, ",\"shared_cores\":%s,\"shared_cores_source\":",
		    s->shared_cores ? "true" : "false");
		json_string(o, s->shared_cores_source);
		fputs(",\"cpus\":[", o);
		for (uint32_t i = 0; i < s->ncpus; i++)
			fprintf(o, "%s%d", i ? "," : "", s->cpus[i]);
		fputs("],\"cpus_source\":", o);
		json_string(o, s->cpus_source);
		fputs(",\"addresses\":[", o);
		for (uint64_t i = 0; i < n; i++) {
			fputs(i ? "," : "", o);
			json_string(o, s->list.addr[i]);
		}
		fputs("]}\n", o);
		return;
	}
	fprintf(o, "rank %llu of %llu (%s)\n", (unsigned long long)r,
	    (unsigned long long)n, s->rank_source);
	fprintf(o, "address list: %s (%s)\n", s->rdv.backend != NULL &&
	    s->rdv.backend->plan_source != NULL ? s->rdv.backend->plan_source :
	    s->rdv.source ? s->rdv.source : "none",
	    s->rdv.origin ? s->rdv.origin : "a world of one");
	fprintf(o, "listening on: %s\n", s->list.addr[r]);
	fprintf(o, "next: rank %llu at %s\n", (unsigned long long)((r + 1) % n),
	    s->list.addr[(r + 1) % n]);
	fprintf(o, "previous: rank %llu at %s\n",
	    (unsigned long long)((r + n - 1) % n), s->list.addr[(r + n - 1) % n]);
	fprintf(o, "token: 0x%016llx (%s)\n", (unsigned long long)s->token,
	    s->token_source);
	fprintf(o, "timeout: %gs\n", s->opts->timeout);
	fprintf(o, "tcp congestion control: %s\n", congestion_name(s->opts));
	fprintf(o, "shared cores: %s (%s)\n", s->shared_cores ? "yes" : "no",
	    s->shared_cores_source);
	fprintf(o, "cpus: %s (%s)\n", s->cpus_text, s->cpus_source);
	fflush(o);
}

/* ------------------------------------------------------------------ key */

/*
 * Reads the pre-shared key.  The key never comes from the command line
 * (argv is readable by every user) and is wiped once the ring formed.
 */
static int
load_key(struct setup *s)
{
	const char *path = s->opts->key_file;
	char why[300];
	struct stat st;
	ssize_t n;
	int fd;

	if (path == NULL)
		path = discover_key_file();
	if (path == NULL)
		return 0;
	if (!sr_auth_built_in())
		return sr_error_set(&s->err, SR_ECONFIG, SR_PHASE_CONFIG,
		    "--key-file '%s': this build cannot authenticate; install "
		    "libssl-dev and rebuild", path);
	/* Never a FIFO: its open and read would wait past every deadline. */
	if ((fd = cli_open_regular(path, false, &st, why, sizeof(why))) < 0)
		return sr_error_set(&s->err, SR_ECONFIG, SR_PHASE_CONFIG,
		    "--key-file '%s': %s", path, why);
	if (st.st_mode & (S_IRWXG | S_IRWXO))
		cli_warn("--key-file '%s' is readable by others (mode %03o); "
		    "chmod 600 it", path, (unsigned)(st.st_mode & 0777));
	n = read(fd, s->key, sizeof(s->key));
	close(fd);
	if (n < 0)
		return sr_error_set(&s->err, SR_ECONFIG, SR_PHASE_CONFIG,
		    "--key-file '%s': %s", path, strerror(errno));
	if ((size_t)n == sizeof(s->key))
		return sr_error_set(&s->err, SR_ECONFIG, SR_PHASE_CONFIG,
		    "--key-file '%s' is longer than %d bytes; is it the right "
		    "file?", path, KEY_MAX);
	/* One typed newline is not part of a text key; a random key may
	 * end in 0x0a or 0x0d bytes of its own. */
	n = (ssize_t)cli_key_length(s->key, (size_t)n);
	if (n < SR_KEY_MIN)
		return sr_error_set(&s->err, SR_ECONFIG, SR_PHASE_CONFIG,
		    "--key-file '%s' holds %zd bytes; a key needs at least %d "
		    "(32 random bytes recommended: head -c 32 /dev/urandom > "
		    "FILE)", path, n, SR_KEY_MIN);
	s->key_len = (size_t)n;
	if (sr_key_token(s->key, s->key_len, s->bearer) != 0)
		s->bearer[0] = '\0';
	cli_status("authenticating every link with the key in %s", path);
	return 0;
}

/* ------------------------------------------------------------ the steps */

static unsigned long strays;

static void
on_stray(void *arg, const char *from, const char *reason)
{
	/* Rate-limited: the first ten, then every hundredth. */
	strays++;
	if (strays <= 10 || strays % 100 == 0)
		cli_status("rejected a connection from %s: %s (%lu so far)",
		    from, reason, strays);
}

/* "50s", "2.8s": the time left in a progress line. */
static void
seconds_left(int64_t ms, char *buf, size_t size)
{
	if (ms < 0)
		ms = 0;
	snprintf(buf, size, "%gs", ms >= 10000 ? (double)(ms / 1000) :
	    (double)(ms / 100) / 10);
}

/* Where formation stands (sr_progress_fn): who is there, who is not. */
static void
on_progress(void *arg, const struct sr_progress *p)
{
	char there[300] = "", missing[400] = "", extra[80] = "", left[32];
	size_t n;

	if (p->links_total > 0) {
		/* A mesh: how many of its links are up, and its ring
		 * neighbours' (whose lines say who is there). */
		if (p->pending > 0 || p->rejected > 0)
			snprintf(extra, sizeof(extra), " (%d connection(s) in "
			    "their hello, %lu rejected)", p->pending,
			    p->rejected);
		seconds_left(p->left_ms, left, sizeof(left));
		cli_progress("forming the mesh: %u of %u links up%s; %s left",
		    p->links_formed, p->links_total, extra, left);
		return;
	}
	if (p->next_ready)
		snprintf(there, sizeof(there), "connected to rank %u (%s)",
		    p->next, p->next_address);
	else
		snprintf(missing, sizeof(missing), "rank %u (%s) to %s", p->next,
		    p->next_address, p->next_connected ? "answer the handshake" :
		    "accept a connection");
	if (p->prev_ready) {
		n = strlen(there);
		snprintf(there + n, sizeof(there) - n, "%saccepted rank %u (%s)",
		    n ? ", " : "", p->prev, p->prev_address);
	} else if (missing[0] != '\0' && p->prev == p->next) {
		n = strlen(missing);
		snprintf(missing + n, sizeof(missing) - n, " and to connect");
	} else {
		n = strlen(missing);
		snprintf(missing + n, sizeof(missing) - n, "%srank %u (%s) to "
		    "connect", n ? " and for " : "", p->prev, p->prev_address);
	}
	if (p->pending > 0 || p->rejected > 0)
		snprintf(extra, sizeof(extra), " (%d connection(s) in their "
		    "hello, %lu rejected)", p->pending, p->rejected);
	seconds_left(p->left_ms, left, sizeof(left));
	cli_progress("forming the ring: %s%s%s%s%s; %s left", there,
	    there[0] && missing[0] ? "; " : "", missing[0] ? "waiting for " :
	    "", missing, extra, left);
}

/* A timeout while ranks gather: say how many were expected, from the
 * list ("the address list (hosts.txt) has 3 entries") or the world
 * size. */
static void
did_you_start(struct setup *s, uint64_t world, bool listed)
{
	size_t n = strlen(s->err.message), left = sizeof(s->err.message) - n;
	unsigned long long w = (unsigned long long)world;

	if (s->err.code != SR_ETIMEOUT || world < 2 ||
	    (s->rdv.backend != NULL && s->rdv.backend->started_ranks))
		return;
	if (listed)
		snprintf(s->err.message + n, left, "; the address list%s%s%s "
		    "has %llu entries: did you start %llu ranks?",
		    s->rdv.source ? " (" : "", s->rdv.source ? s->rdv.source :
		    "", s->rdv.source ? ")" : "", w, w);
	else
		snprintf(s->err.message + n, left, "; the world size is %llu: "
		    "did you start %llu ranks?", w, w);
}

static int
obtain_list(struct setup *s)
{
	const char *source = s->opts->peers, *origin = "--peers";
	int rc;

	if (source == NULL)
		source = discover_peers(&origin);
	if (source == NULL) {
		/* No peers is not a pass: a world of one only when asked. */
		if (s->world < 0)
			return sr_error_set(&s->err, SR_ECONFIG,
			    SR_PHASE_CONFIG, "no address list: pass --peers "
			    "SOURCE (or set SILVIC_RING_PEERS, or start the "
			    "ranks with 'silvic-ring launch -n N'), or --world "
			    "1 for a world of one");
		if (s->world > 1)
			return sr_error_set(&s->err, SR_ECONFIG,
			    SR_PHASE_CONFIG, "the world size is %lld (%s) but "
			    "no address list was given; pass --peers",
			    (long long)s->world, s->world_source);
		/* A world of one: no sockets, unless asked to publish. */
		s->rank = 0;
		if ((s->opts->print_address || s->opts->address_file) &&
		    (bind_ephemeral(s) != 0 || publish(s) != 0))
			return -1;
		if (peer_list_add(&s->list, s->listener != NULL ?
			sr_listener_address(s->listener) : "127.0.0.1:1") != 0)
			return sr_error_set(&s->err, SR_ENOMEM, SR_PHASE_CONFIG,
			    "out of memory");
		s->rank = 0;
		s->rank_source = "a world of one (no address list)";
		s->world = 1;
		return 0;
	}
	cli_debug("address list from %s: %s", origin, source);
	if (rendezvous_open(&s->rdv, source, origin, &s->err) != 0)
		return -1;
	s->rdv.timeout = s->opts->timeout;
	s->rdv.world_source = s->world >= 0 ? s->world_source : NULL;
	s->rdv.dry_run = s->opts->dry_run;
	s->rdv.rank = s->rank;
	s->rdv.deadline_ns = s->deadline;
	s->rdv.keyed = s->key_len > 0;
	if (s->bearer[0] != '\0')
		s->rdv.bearer = s->bearer;
	/* A dry run looks once and waits for nothing, but on an exchange
	 * of this job's alone (the launcher's). */
	if (s->opts->dry_run && !s->rdv.backend->dry_run_exchanges) {
		s->rdv.timeout = 0;
		s->deadline = sr_clock_ns();
	}
	if (s->opts->token != NULL) {
		/* The key names files: the token's hash, never its text. */
		snprintf(s->job, sizeof(s->job), "token-%016llx",
		    (unsigned long long)discover_hash(s->opts->token));
		s->rdv.job = s->job;
	} else {
		s->rdv.job = discover_job();
	}
	rc = s->rdv.backend->preload(&s->rdv, s->world, &s->list, &s->err);
	if (rc < 0)
		return -1;
	if (rc > 0) {
		cli_status("address list %s is complete: %llu addresses",
		    s->rdv.source, (unsigned long long)s->list.n);
		if (check_world(s) != 0 || bind_static(s) != 0)
			return -1;
		return publish(s);
	}
	if (bind_ephemeral(s) != 0 || publish(s) != 0)
		return -1;
	if (s->rdv.backend->wait(&s->rdv, s->world, s->deadline, &s->list,
		&s->err) != 0) {
		if (s->rdv.backend->waits_for_ranks && s->world > 0)
			did_you_start(s, (uint64_t)s->world, false);
		return -1;
	}
	if (check_world(s) != 0 || bind_listed(s) != 0)
		return -1;
	if (s->rank < 0 && find_self(s, sr_listener_address(s->listener)) != 0)
		return -1;
	return 0;
}

static int
form(struct setup *s, struct sr_ring **ring)
{
	struct sr_ring_options options;
	struct sr_error err;

	sr_ring_options_init(&options);
	options.timeout_ms = (int64_t)(s->opts->timeout * 1000);
	if (options.timeout_ms < 1)
		options.timeout_ms = 1;
	options.cancel = &cli_interrupted;
	options.on_stray = on_stray;
	options.on_progress = on_progress;
	options.progress_ms = cli_progress_ms;
	options.integrity = s->opts->integrity;
	options.mesh = s->opts->mesh;
	options.streams = s->opts->streams;
	options.shared_cores = s->shared_cores;
	options.cpus = s->cpus;
	options.ncpus = s->ncpus;
	/* An MLX hostfile's several addresses a rank: the streams spread
	 * over them (list.c keeps nics as long as the list). */
	if (s->list.nics != NULL && s->list.nics_n == s->list.n)
		options.nic_addresses = (const char *const *const *)s->list.nics;
	if (s->opts->probe > 0 && s->opts->probe_report != NULL) {
		options.probe_ms = (int64_t)(s->opts->probe * 1000);
		if (options.probe_ms < 1)
			options.probe_ms = 1;
		options.probe = calloc(s->list.n, sizeof(*options.probe));
		if (options.probe == NULL)
			return sr_error_set(&s->err, SR_ENOMEM, SR_PHASE_CONFIG,
			    "out of memory");
		*s->opts->probe_report = options.probe;
	}
	options.congestion = s->opts->congestion;
	if (s->key_len > 0) {
		options.key = s->key;
		options.key_len = s->key_len;
	}
	if (sr_ring_connect(ring, s->listener, (uint64_t)s->rank,
		(const char *const *)s->list.addr, s->list.n, s->token, &options,
		&s->err) != 0) {
		s->listener = NULL;
		did_you_start(s, s->list.n, true);
		return -1;
	}
	s->listener = NULL;
	cli_status("connected to rank %llu at %s",
	    (unsigned long long)((s->rank + 1) % s->world),
	    s->list.addr[(s->rank + 1) % s->world]);
	cli_status("accepted rank %llu from %s",
	    (unsigned long long)((s->rank + s->world - 1) % s->world),
	    s->list.addr[(s->rank + s->world - 1) % s->world]);
	cli_status("links run TCP congestion control %s (--tcp-congestion %s)",
	    sr_ring_congestion(*ring)[0] ? sr_ring_congestion(*ring) : "unknown",
	    congestion_name(s->opts));
	if (s->rdv.backend != NULL &&
	    s->rdv.backend->done(&s->rdv, *ring, &err) != 0) {
		s->err = err;
		sr_ring_close(*ring);
		*ring = NULL;
		return -1;
	}
	if (strays > 0)
		cli_status("rejected %lu stray connection(s) while forming the "
		    "ring", strays);
	cli_status("ring ready (world %lld)", (long long)s->world);
	return 0;
}

int
cli_ring_open(struct cli_ring *opts, struct sr_ring **ring, char ***addresses,
    uint64_t *world)
{
	struct setup s;
	int rc = -1;

	/* A rank whose reader went away (| head) ends as cat does, by
	 * SIGPIPE; the core's sockets never raise it (MSG_NOSIGNAL). */
	signal(SIGPIPE, SIG_DFL);
	memset(&s, 0, sizeof(s));
	s.rank = s.world = -1;
	s.opts = opts;
	sr_error_clear(&s.err);
	*ring = NULL;
	s.deadline = sr_clock_ns() + (int64_t)(opts->timeout * 1e9);
	/* Silence for a whole --timeout looks like a hang to a person. */
	if (cli_verbosity >= 1 || isatty(2))
		cli_progress_ms = opts->progress >= PROGRESS_MAX ?
		    PROGRESS_MAX * 1000 : opts->progress < 0.001 ? 1 :
		    (int64_t)(opts->progress * 1000);
	if (load_key(&s) == 0 && resolve_rank(&s) == 0 &&
	    resolve_shared_cores(&s) == 0 && resolve_cpus(&s) == 0 &&
	    obtain_list(&s) == 0 &&
	    derive_token(&s) == 0) {
		cli_rank = s.rank;
		cli_status("rank %lld of %lld (%s; world from %s)",
		    (long long)s.rank, (long long)s.world, s.rank_source,
		    s.world_source);
		if (opts->dry_run) {
			print_plan(&s);
			rc = 0;
		} else {
			rc = form(&s, ring);
		}
	}
	if (rc != 0) {
		if (s.err.rank < 0 && s.rank >= 0)
			s.err.rank = s.rank;
		rc = cli_report(&s.err, opts->json);
	}
	explicit_bzero(s.key, sizeof(s.key));
	explicit_bzero(s.bearer, sizeof(s.bearer));
	sr_listener_close(s.listener);
	if (s.rdv.source != NULL)
		rendezvous_close(&s.rdv);
	if (rc == 0 && addresses != NULL) {
		*addresses = s.list.addr;
		*world = s.list.n;
		s.list.addr = NULL;
		s.list.n = 0;
	}
	peer_list_free(&s.list);
	return rc;
}

void
cli_addresses_free(char **addresses, uint64_t world)
{
	struct peer_list list = { .addr = addresses, .n = world };

	peer_list_free(&list);
}

int
cli_ring_done(struct sr_ring *ring, char **addresses, uint64_t world, int rc,
    bool json)
{
	struct sr_error err;

	/* A ring that failed already has had its say (a verdict reached
	 * without it, bench connect's when the ring broke, stands). */
	if ((rc == EXIT_OK || rc == EXIT_THRESHOLD) && ring != NULL &&
	    !sr_ring_failed(ring) && sr_ring_finish(ring, &err) != 0)
		rc = cli_report(&err, json);
	sr_ring_close(ring);
	cli_addresses_free(addresses, world);
	if (fflush(stdout) != 0 && rc == EXIT_OK) {
		cli_error("writing the results: %s", strerror(errno));
		rc = EXIT_INTERNAL;
	}
	return rc;
}
