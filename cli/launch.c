/*
 * launch.c - `silvic-ring launch`: its options, the check of the
 * command the ranks run (once, before any starts), and stdin read whole
 * for the ranks that read it; then the ranks start on this machine
 * (launch_ranks.c) or over ssh on the hosts of --hosts (launch_ssh.c).
 * `launch --agent` is the other end of that ssh (launch_agent.c).
 */
#include <errno.h>
#include <fcntl.h>
#include <getopt.h>
#include <poll.h>
#include <sched.h>
#include <stdlib.h>
#include <string.h>
#include <sys/wait.h>
#include <unistd.h>

#include "cli.h"
#include "launch.h"
#include "rendezvous.h"
#include "usage.h"

#define FANOUT		32		/* hosts connecting at once */
#define FANOUT_MAX	1024
#define CONNECT_TIMEOUT	10.0
#define KEEPALIVE	10.0

enum {
	OPT_GRACE = OPT_COMMAND_BASE, OPT_NO_TAG, OPT_HOSTFILE, OPT_SSH,
	OPT_REMOTE_PATH, OPT_FANOUT, OPT_CONNECT_TIMEOUT, OPT_KEEPALIVE,
	OPT_LAUNCHER_ADDRESS, OPT_AGENT
};

const char usage_launch[] =
"usage: silvic-ring launch -n N [OPTIONS] [--] COMMAND [ARGS...]\n"
"       silvic-ring launch --hosts LIST | --hostfile FILE [-n N] [OPTIONS]\n"
"           [--] COMMAND [ARGS...]\n"
"\n"
"Runs N ranks of 'silvic-ring COMMAND ARGS...' on this machine, or over\n"
"ssh on the hosts --hosts or --hostfile name, hands them each other's\n"
"addresses, gives each the same stdin (if it reads it: run without\n"
"--script or --dry-run; others get /dev/null), and forwards their output\n"
"line by line, each human-readable line prefixed with \"[RANK] \".\n"
"Machine output (--json, --csv, the bench table) is rank 0's stdout\n"
"alone, untagged and byte for byte.  The command's options are checked\n"
"once before any rank starts.  Exits with the status of the first rank\n"
"that failed; the others then get the grace period, SIGTERM, and SIGKILL\n"
"1s later.  Ranks of run or bench that have not all published their\n"
"address within their --timeout plus 5s are stopped the same way (status\n"
"3).  Across hosts, every host must answer before any rank starts (a\n"
"host that does not is named, status 3), and a host's ranks stop when\n"
"the launcher is gone.\n"
"\n"
"  -n, --ranks N            how many ranks to start (1 to 1024 on this\n"
"                           machine; with --hosts at most their slots, and\n"
"                           all of them by default)\n"
"  -H, --hosts LIST         start the ranks on these hosts, in this order,\n"
"                           consecutive ranks on each: HOST or HOST:SLOTS,\n"
"                           comma-separated, with ranges (node[01-16]:4)\n"
"      --hostfile FILE      the hosts from FILE, one a line: HOST, 'HOST\n"
"                           slots=N' or 'HOST:N'; '#' starts a comment\n"
"      --ssh CMD            the remote shell, words separated by spaces\n"
"                           (default ssh; to ssh launch adds -o\n"
"                           BatchMode=yes -o ConnectTimeout=...)\n"
"      --remote-path PATH   silvic-ring on the hosts (default: the path of\n"
"                           this binary)\n"
"      --fanout K           how many hosts connect at once (default 32)\n"
"      --connect-timeout SECONDS  ssh's connect timeout (default 10); a\n"
"                           host that has not answered 10s later is named\n"
"                           and no rank starts\n"
"      --keepalive SECONDS  a host silent this long is gone, and so is the\n"
"                           launcher to a host, whose ranks then stop\n"
"                           (default 10)\n"
"      --launcher-address HOST[:PORT]  where the hosts reach the launcher\n"
"                           back (default: the address their ssh came\n"
"                           from, on a port the launcher picks)\n"
"  -l, --tag-output         prefix every human-readable line with its rank\n"
"                           (the default with -n; across hosts only when\n"
"                           asked)\n"
"      --no-tag-output      forward the ranks' lines as they are\n"
"      --grace SECONDS      how long the other ranks have to fail on their\n"
"                           own once one failed (default 3)\n"
"  -v, --verbose            the launcher's status lines: when the hosts\n"
"                           answered, when the address list was complete\n"
"      --agent              what launch runs on each host, its orders on\n"
"                           stdin; not for use by hand\n"
"  -h, --help               this text\n"
"\n";

struct options {
	struct launch_job job;
	struct launch_remote remote;
	const char *ranks;	/* -n as given */
	const char *remote_only;	/* an option only --hosts uses, given */
	bool tag_set;		/* -l or --no-tag-output given */
};

static bool
remote(const struct options *o)
{
	return o->remote.hosts != NULL || o->remote.hostfile != NULL;
}

/* One option of launch's own; 0, or the status of a usage error. */
static int
option(struct options *o, int c, const char *arg)
{
	static const struct {
		int c;
		const char *name;
	} remote_only[] = { { OPT_SSH, "--ssh" },
		{ OPT_REMOTE_PATH, "--remote-path" }, { OPT_FANOUT, "--fanout" },
		{ OPT_CONNECT_TIMEOUT, "--connect-timeout" },
		{ OPT_KEEPALIVE, "--keepalive" },
		{ OPT_LAUNCHER_ADDRESS, "--launcher-address" } };
	struct launch_remote *r = &o->remote;
	uint64_t n;

	for (size_t i = 0; i < sizeof(remote_only) / sizeof(*remote_only); i++)
		if (c == remote_only[i].c)
			o->remote_only = remote_only[i].name;
	switch (c) {
	case 'n':
		o->ranks = arg;
		return 0;
	case 'l':
	case OPT_NO_TAG:
		o->job.tag = c == 'l';
		o->tag_set = true;
		return 0;
	case OPT_GRACE:
		return cli_parse_seconds(arg, &o->job.grace) == 0 ? 0 :
		    cli_usage_error("launch: --grace '%s' is not a number of "
		    "seconds", arg);
	case 'H':
		r->hosts = arg;
		return 0;
	case 'v':
		cli_verbosity++;
		return 0;
	case OPT_HOSTFILE:
		r->hostfile = arg;
		return 0;
	case OPT_SSH:
		if (strspn(arg, " \t") == strlen(arg))
			return cli_usage_error("launch: --ssh is empty");
		r->ssh = arg;
		return 0;
	case OPT_REMOTE_PATH:
		if (arg[0] == '\0')
			return cli_usage_error("launch: --remote-path is empty");
		r->remote_path = arg;
		return 0;
	case OPT_FANOUT:
		if (cli_parse_uint(arg, 1, FANOUT_MAX, &n) != 0)
			return cli_usage_error("launch: --fanout '%s' is not a "
			    "number of hosts from 1 to %d", arg, FANOUT_MAX);
		r->fanout = (int)n;
		return 0;
	case OPT_CONNECT_TIMEOUT:
	case OPT_KEEPALIVE:
		if (cli_parse_seconds(arg, c == OPT_KEEPALIVE ? &r->keepalive :
			&r->connect_timeout) != 0)
			return cli_usage_error("launch: --%s '%s' is not a "
			    "number of seconds", c == OPT_KEEPALIVE ? "keepalive" :
			    "connect-timeout", arg);
		return 0;
	case OPT_LAUNCHER_ADDRESS:
		if (arg[0] == '\0')
			return cli_usage_error("launch: --launcher-address is "
			    "empty");
		r->launcher_address = arg;
		return 0;
	default:
		return cli_usage_error("launch: --agent is what launch runs on "
		    "each host, alone");
	}
}

/* The options that only mean something across hosts, when there are
 * none; -n against what this machine allows. */
static int
check_options(struct options *o, int argc, char **argv)
{
	uint64_t n;

	if (o->remote.hosts != NULL && o->remote.hostfile != NULL)
		return cli_usage_error("launch: --hosts and --hostfile both "
		    "name the hosts; give one");
	if (!remote(o) && o->remote_only != NULL)
		return cli_usage_error("launch: %s is for ranks on other hosts: "
		    "add --hosts or --hostfile", o->remote_only);
	if (o->ranks != NULL && cli_parse_uint(o->ranks, 1, remote(o) ?
		LIST_MAX_RANKS : LAUNCH_RANKS_MAX, &n) != 0)
		return cli_usage_error("launch: -n '%s' is not a number of ranks "
		    "from 1 to %d", o->ranks, remote(o) ? LIST_MAX_RANKS :
		    LAUNCH_RANKS_MAX);
	o->job.world = o->ranks != NULL ? (int)n : 0;
	if (o->job.world == 0 && !remote(o))
		return cli_usage_error("launch: missing -n N, the number of "
		    "ranks to start (or --hosts)");
	if (optind >= argc)
		return cli_usage_error("launch: missing the command the ranks "
		    "run, as in 'launch -n %d run'", o->job.world > 0 ?
		    o->job.world : 4);
	if (strcmp(argv[optind], "launch") == 0)
		return cli_usage_error("launch: the ranks cannot run 'launch' "
		    "themselves");
	return 0;
}

/* 0 to go on, -1 after --help, else the status of a usage error. */
static int
parse(struct options *o, int argc, char **argv)
{
	static const struct option longopts[] = {
		{ "ranks", required_argument, NULL, 'n' },
		{ "tag-output", no_argument, NULL, 'l' },
		{ "no-tag-output", no_argument, NULL, OPT_NO_TAG },
		{ "grace", required_argument, NULL, OPT_GRACE },
		{ "hosts", required_argument, NULL, 'H' },
		{ "hostfile", required_argument, NULL, OPT_HOSTFILE },
		{ "ssh", required_argument, NULL, OPT_SSH },
		{ "remote-path", required_argument, NULL, OPT_REMOTE_PATH },
		{ "fanout", required_argument, NULL, OPT_FANOUT },
		{ "connect-timeout", required_argument, NULL,
		    OPT_CONNECT_TIMEOUT },
		{ "keepalive", required_argument, NULL, OPT_KEEPALIVE },
		{ "launcher-address", required_argument, NULL,
		    OPT_LAUNCHER_ADDRESS },
		{ "verbose", no_argument, NULL, 'v' },
		{ "agent", no_argument, NULL, OPT_AGENT },
		{ "help", no_argument, NULL, 'h' },
		{ NULL, 0, NULL, 0 }
	};
	char shortopt[3] = "-?";
	int c, rc;

	opterr = 0;
	optind = 0;	/* glibc: start afresh, reading the '+' */
	while ((c = getopt_long(argc, argv, "+:n:lhH:v", longopts, NULL)) != -1) {
		if (c == 'h') {
			fputs(usage_launch, stdout);
			return -1;
		} else if (c == ':') {
			return cli_usage_error("launch: %s needs a value",
			    argv[optind - 1]);
		} else if (c == '?') {
			shortopt[1] = (char)optopt;
			return cli_usage_error("launch: unknown option '%s'",
			    optopt != 0 ? shortopt : argv[optind - 1]);
		} else if ((rc = option(o, c, optarg)) != 0) {
			return rc;
		}
	}
	if ((rc = check_options(o, argc, argv)) != 0)
		return rc;
	if ((o->job.argv = calloc((size_t)(argc - optind) + 2,
	    sizeof(*o->job.argv))) == NULL) {
		cli_error("out of memory");
		return EXIT_INTERNAL;
	}
	o->job.argv[0] = (char *)"silvic-ring";
	memcpy(o->job.argv + 1, argv + optind, (size_t)(argc - optind) *
	    sizeof(*o->job.argv));
	return 0;
}

/* main.c's: the preflight parses the command exactly as a rank would. */
int main(int argc, char **argv);

/* A --port other than 0 binds on each host: refused where one host runs
 * more than one rank, as only one of them could bind it. */
static int
check_port(const struct options *o)
{
	const struct launch_job *j = &o->job;
	int most = remote(o) ? o->remote.busiest : j->world;

	if (!j->command.reached || j->command.port <= 0 || most <= 1)
		return 0;
	if (!remote(o))
		return cli_usage_error("launch: --port %lld would be the same "
		    "for all %d ranks, and only one of them can bind it; leave "
		    "it out (each rank then binds a free port)",
		    (long long)j->command.port, j->world);
	return cli_usage_error("launch: --port %lld would be the same for the "
	    "%d ranks of one host, and only one of them can bind it; leave it "
	    "out (each rank then binds a free port), or give each host one "
	    "slot", (long long)j->command.port, most);
}

/*
 * Runs the command's own option parsing once, in a child that stops
 * right after it (cli_preflight), so that a typo is one error, not one per
 * rank, and options mean what they mean to the ranks, abbreviations
 * included.  0 with job->command filled (reached false for a command that
 * forms no ring: help, --version), else the status to exit with.
 */
static int
preflight(struct options *o)
{
	static const struct option none[] = { { NULL, 0, NULL, 0 } };
	struct launch_job *j = &o->job;
	char *reset[] = { j->argv[0], NULL };
	int fds[2], st, argc = 0;
	ssize_t n = 0, got;
	pid_t pid;

	/* serve has no such stop: parsing it would serve. */
	if (strcmp(j->argv[1], "serve") == 0)
		return 0;
	while (j->argv[argc] != NULL)
		argc++;
	if (pipe2(fds, O_CLOEXEC) != 0) {
		cli_error("cannot create a pipe: %s", strerror(errno));
		return EXIT_INTERNAL;
	}
	fflush(NULL);
	if ((pid = fork()) == 0) {
		struct cli_preflight p = { .port = -1 };
		int null = open("/dev/null", O_WRONLY | O_CLOEXEC);

		/* Help goes nowhere; the ranks print it. */
		if (null < 0 || dup2(null, 1) < 0)
			_exit(EXIT_INTERNAL);
		/* glibc's getopt starts afresh (and forgets our '+') only
		 * when called with optind 0. */
		optind = 0;
		getopt_long(1, reset, "", none, NULL);
		cli_preflight = &p;
		st = main(argc, j->argv);
		fflush(NULL);
		if (write(fds[1], &p, sizeof(p)) != (ssize_t)sizeof(p))
			_exit(EXIT_INTERNAL);
		_exit(st);
	}
	close(fds[1]);
	while (pid > 0 && n < (ssize_t)sizeof(j->command) &&
	    ((got = read(fds[0], (char *)&j->command + n,
	    sizeof(j->command) - (size_t)n)) > 0 || (got < 0 &&
	    errno == EINTR)))
		n += got > 0 ? got : 0;
	close(fds[0]);
	while (pid > 0 && waitpid(pid, &st, 0) < 0 && errno == EINTR)
		;
	if (pid < 0 || !WIFEXITED(st)) {
		cli_error("cannot check the command: %s", pid < 0 ?
		    strerror(errno) : "the check died");
		return EXIT_INTERNAL;
	}
	if (WEXITSTATUS(st) != 0)
		return WEXITSTATUS(st);
	if (n != (ssize_t)sizeof(j->command))
		memset(&j->command, 0, sizeof(j->command));
	return check_port(o);
}

/* Only run reads stdin, for its script; run and bench form a ring and
 * publish an address within their --timeout, and bench's stdout, like
 * --json's and --csv's, is machine output. */
static void
command_inspect(struct launch_job *j)
{
	const struct cli_preflight *c = &j->command;
	const char *first = j->argv[1];
	bool run = strcmp(first, "run") == 0 || first[0] == '-';
	bool bench = strcmp(first, "bench") == 0;

	if (!c->reached)
		return;
	j->share_stdin = run && !isatty(0) && c->script_stdin && !c->dry_run;
	j->address_s = c->timeout + LAUNCH_ADDRESS_SLACK;
	j->machine = !c->dry_run && (c->json || c->csv || bench);
}

/* Every rank gets the same bytes, so they are read whole first. */
static int
input_read(struct launch_job *j)
{
	size_t cap = 0;
	ssize_t n;
	char *grown;

	for (;;) {
		if (j->input_len == cap) {
			cap = cap == 0 ? 65536 : cap * 2;
			cap = cap > LAUNCH_INPUT_MAX + 1 ? LAUNCH_INPUT_MAX + 1 :
			    cap;
			if ((grown = realloc(j->input, cap)) == NULL) {
				cli_error("out of memory reading stdin");
				return EXIT_INTERNAL;
			}
			j->input = grown;
		}
		n = read(0, j->input + j->input_len, cap - j->input_len);
		if (n < 0 && errno == EINTR && cli_interrupted)
			return EXIT_INTERRUPTED;
		if (n < 0 && errno == EAGAIN)
			poll(&(struct pollfd){ .fd = 0, .events = POLLIN }, 1, -1);
		else if (n < 0 && errno != EINTR) {
			cli_error("reading stdin: %s", strerror(errno));
			return EXIT_INTERNAL;
		} else if (n == 0)
			return 0;
		else if (n > 0 && (j->input_len += (size_t)n) >
		    LAUNCH_INPUT_MAX) {
			cli_error("stdin is larger than 64 MiB, the most the "
			    "launcher hands every rank");
			return EXIT_USAGE;
		}
	}
}

/* The cores this process may run on (its affinity mask), at least 1. */
static int
cores_here(void)
{
	cpu_set_t set;
	long n;

	if (sched_getaffinity(0, sizeof(set), &set) == 0 && CPU_COUNT(&set) > 0)
		return CPU_COUNT(&set);
	n = sysconf(_SC_NPROCESSORS_ONLN);
	return n > 0 ? (int)n : 1;
}

/* The CPUs this process may run on, as taskset -c lists them ("0-3,6"),
 * into buf; "" when the kernel does not say or they do not fit (a list
 * of over a hundred ranges; the ranks are then not bound, which only 2,
 * 3 or 4 ranks, or 8 on a mesh, on 2 CPUs would be). */
static void
cpus_here(char *buf, size_t size)
{
	cpu_set_t set;
	size_t len = 0;

	buf[0] = '\0';
	if (sched_getaffinity(0, sizeof(set), &set) != 0)
		return;
	for (int c = 0; c < CPU_SETSIZE; c++) {
		int last = c, n;

		if (!CPU_ISSET(c, &set))
			continue;
		while (last + 1 < CPU_SETSIZE && CPU_ISSET(last + 1, &set))
			last++;
		n = last == c ? snprintf(buf + len, size - len, "%s%d",
		    len ? "," : "", c) : snprintf(buf + len, size - len,
		    "%s%d-%d", len ? "," : "", c, last);
		if (n < 0 || (size_t)n >= size - len) {
			buf[0] = '\0';
			return;
		}
		len += (size_t)n;
		c = last;
	}
}

static int
run_here(struct launch_job *j)
{
	const char *caller = getenv("SILVIC_RING_SHARED_CORES");
	const char *cpus = getenv("SILVIC_RING_CPUS");
	struct launch l;
	int rc;

	if ((rc = launch_ranks_init(&l, j, 0, j->world, 0)) == 0) {
		int cores = cores_here();
		bool outnumbered = j->world > cores;

		/* Open MPI's mpirun likewise tells oversubscribed ranks
		 * (mpi_yield_when_idle); the caller's own value stands. */
		l.shared_cores = (caller == NULL || caller[0] == '\0') &&
		    outnumbered;
		/* As many ranks as CPUs are bound too (two on two: each to
		 * its own, place.c), so from there on they are told. */
		if ((cpus == NULL || cpus[0] == '\0') &&
		    j->world >= cores)
			cpus_here(l.cpus, sizeof(l.cpus));
		rc = launch_ranks_run(&l);
	}
	launch_ranks_fini(&l);
	return rc;
}

int
cmd_launch(int argc, char **argv)
{
	struct options o;
	int rc;

	if (argc == 2 && strcmp(argv[1], "--agent") == 0)
		return launch_agent_main();
	memset(&o, 0, sizeof(o));
	o.job.grace = 3;
	o.job.tag = true;
	o.remote.fanout = FANOUT;
	o.remote.connect_timeout = CONNECT_TIMEOUT;
	o.remote.keepalive = KEEPALIVE;
	rc = parse(&o, argc, argv);
	/* Ranks on this machine print the same lines, which tags tell
	 * apart; across hosts lines are tagged only when asked. */
	if (!o.tag_set)
		o.job.tag = !remote(&o);
	if (rc == 0 && (!remote(&o) ||
	    (rc = launch_hosts_plan(&o.remote, &o.job.world)) == 0) &&
	    (rc = preflight(&o)) == 0 && (rc = launch_signals_init()) == 0) {
		command_inspect(&o.job);
		if (!o.job.share_stdin || (rc = input_read(&o.job)) == 0)
			rc = remote(&o) ? launch_hosts_run(&o.remote, &o.job) :
			    run_here(&o.job);
	}
	launch_hosts_fini(&o.remote);
	free(o.job.argv);
	free(o.job.input);
	if (rc == EXIT_PIPE)
		return cli_exit_pipe();
	return rc < 0 ? EXIT_OK : rc;
}
