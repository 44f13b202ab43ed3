/*
 * launch.c - `silvic-ring launch`: starts N ranks of a command on this
 * machine, hands them each other's addresses and forwards their output.
 *
 * One poll(2) loop owns every descriptor: the ranks' stdout and stderr
 * pipes, their address sockets, their stdin pipes and a self-pipe the
 * signal handlers write to.  Nothing in it blocks on a rank: a rank that
 * stops reading its stdin or its address list only stalls its own bytes.
 * Output goes through launch_io.c, which looks at what the ranks print
 * only to find line ends and JSON records; nothing here touches the core.
 */
#include <errno.h>
#include <fcntl.h>
#include <getopt.h>
#include <limits.h>
#include <poll.h>
#include <stdlib.h>
#include <string.h>
#include <sys/prctl.h>
#include <sys/resource.h>
#include <sys/socket.h>
#include <sys/wait.h>
#include <unistd.h>

#include "cli.h"
#include "launch_io.h"
#include "usage.h"

#define RANKS_MAX	1024
#define ADDRESS_MAX	256		/* "host:port", newline excluded */
#define INPUT_MAX	(64u << 20)
#define KILL_AFTER_NS	1000000000LL	/* from SIGTERM to SIGKILL */
#define DRAIN_NS	1000000000LL	/* output a grandchild holds open */
#define DRAIN_READS	64		/* 4 MiB: more than a pipe holds */
#define RANK_TIMEOUT	60.0		/* the ranks' default --timeout */
#define ADDRESS_SLACK	5.0		/* the launcher waits this much longer */

enum { OPT_GRACE = OPT_COMMAND_BASE, OPT_NO_TAG };

const char usage_launch[] =
"usage: silvic-ring launch -n N [-l|--no-tag-output] [--grace SECONDS] [--]\n"
"           COMMAND [ARGS...]\n"
"\n"
"Runs N ranks of 'silvic-ring COMMAND ARGS...' on this machine, hands\n"
"them each other's addresses, gives each the same stdin (if it reads it:\n"
"run without --script or --dry-run; others get /dev/null), and forwards\n"
"their output line by line, each human-readable line prefixed with\n"
"\"[RANK] \".  Machine output (--json, --csv, the bench table) is rank\n"
"0's stdout alone, untagged and byte for byte.  The command's options are\n"
"checked once before any rank starts.  Exits with the status of the first\n"
"rank that failed; the others then get the grace period, SIGTERM, and\n"
"SIGKILL 1s later.  Ranks of run or bench that have not all published\n"
"their address within their --timeout plus 5s are stopped the same way\n"
"(status 3).\n"
"\n"
"  -n, --ranks N            how many ranks to start (1 to 1024)\n"
"  -l, --tag-output         prefix every human-readable line with its rank\n"
"                           (the default)\n"
"      --no-tag-output      forward the ranks' lines as they are\n"
"      --grace SECONDS      how long the other ranks have to fail on their\n"
"                           own once one failed (default 3)\n"
"  -h, --help               this text\n"
"\n";

struct rank {
	pid_t pid;		/* 0 once reaped */
	int status;
	struct launch_stream out, err;
	int ctl;		/* our end of its address socket, -1 once closed */
	char addr[ADDRESS_MAX + 2];
	size_t addr_len;
	bool published;
	size_t list_off;	/* bytes of the list it has been sent */
	int in;			/* write end of its stdin pipe, -1 once done */
	size_t in_off;
};

struct launch {
	int world, started, alive;
	double grace;
	char **argv;		/* the ranks' argv */
	struct rank *ranks;
	bool share_stdin;	/* else the ranks get /dev/null */
	char *input;
	size_t input_len;
	char *list;		/* the address list, once list_len > 0 */
	size_t list_len;
	int published;
	double address_s;	/* the ranks have to publish; 0: no limit */
	bool tag;		/* --tag-output (the default) */
	bool machine;		/* stdout is rank 0's, byte for byte */
	struct cli_preflight command;	/* the command's options, checked */
	bool bad_address, bad_output, interrupted;
	bool broken_pipe;	/* our stdout's reader went away */
	int status;		/* of the first rank that failed, or 0 */
	/* The self-pipe, then each rank's stdout, stderr, address socket
	 * and stdin; -1 where there is nothing to wait for. */
	struct pollfd *pfd;
	struct rlimit nofile;	/* the caller's limit, given back to ranks */
	int64_t term_at, kill_at, drain_at, address_at;	/* 0: not due */
};

static int wake[2] = { -1, -1 };

static void
on_signal(int sig)
{
	int saved = errno;

	if (sig != SIGCHLD)
		cli_interrupted = sig;
	if (write(wake[1], "", 1) < 0) {
		/* full: a wake-up is pending anyway */
	}
	errno = saved;
}

static void
close_fd(int *fd)
{
	if (*fd >= 0)
		close(*fd);
	*fd = -1;
}

/* ------------------------------------------------------------ output */

/*
 * Once our stdout's reader is gone (| head) the job ends as a pipeline
 * does: every rank gets SIGPIPE, which run and bench die of quietly (a
 * rank that ignores it is killed a second later), and so does the
 * launcher, at the end.
 */
static void
broken_pipe(struct launch *l)
{
	if (l->broken_pipe)
		return;
	l->broken_pipe = true;
	for (int r = 0; r < l->started; r++)
		if (l->ranks[r].pid > 0)
			kill(l->ranks[r].pid, SIGPIPE);
	l->term_at = 0;
	l->kill_at = sr_clock_ns() + KILL_AFTER_NS;
}

static void
forward(struct launch *l, struct launch_stream *s, int reads)
{
	if (launch_stream_read(s, reads) == 0)
		return;
	if (s->broken && s->to == 1)
		broken_pipe(l);
	else
		l->bad_output = true;
}

/* ---------------------------------------------------- address exchange */

static bool
address_valid(const char *a, size_t n)
{
	const char *colon = memrchr(a, ':', n);
	unsigned long port = 0;

	for (size_t i = 0; i < n; i++)
		if ((unsigned char)a[i] <= ' ' || a[i] == 0x7f)
			return false;
	if (colon == NULL || colon == a || colon + 1 == a + n)
		return false;
	for (const char *p = colon + 1; p < a + n; p++)
		if (*p < '0' || *p > '9' || (port = port * 10 +
		    (unsigned long)(*p - '0')) > 65535)
			return false;
	return port > 0;
}

/* Once a rank is gone without an address the list can never be complete;
 * closing the sockets tells the waiting ranks now, not at their timeout. */
static void
exchange_abandon(struct launch *l)
{
	for (int r = 0; r < l->started; r++)
		close_fd(&l->ranks[r].ctl);
}

static void
address_read(struct launch *l, int r)
{
	struct rank *k = &l->ranks[r];
	char *nl;
	ssize_t n;

	n = read(k->ctl, k->addr + k->addr_len, ADDRESS_MAX + 1 - k->addr_len);
	if (n < 0 && (errno == EINTR || errno == EAGAIN))
		return;
	if (n <= 0) {
		exchange_abandon(l);
		return;
	}
	k->addr_len += (size_t)n;
	if ((nl = memchr(k->addr, '\n', k->addr_len)) == NULL) {
		if (k->addr_len <= ADDRESS_MAX)
			return;
		cli_error("rank %d published an address longer than %d bytes",
		    r, ADDRESS_MAX);
	} else if (nl + 1 != k->addr + k->addr_len ||
	    !address_valid(k->addr, (size_t)(nl - k->addr))) {
		cli_error("rank %d published '%.*s', not host:port", r,
		    (int)(nl - k->addr), k->addr);
	} else {
		k->published = true;
		if (++l->published < l->world)
			return;
		l->address_at = 0;
		for (int i = 0; i < l->world; i++) {
			memcpy(l->list + l->list_len, l->ranks[i].addr,
			    l->ranks[i].addr_len);
			l->list_len += l->ranks[i].addr_len;
		}
		l->list[l->list_len++] = '\n';
		return;
	}
	l->bad_address = true;
	exchange_abandon(l);
}

/* Writes what the descriptor takes of data[*off..len); closes it when all
 * is written or the reader is gone (its exit status tells why). */
static void
feed(int *fd, size_t *off, const char *data, size_t len)
{
	ssize_t n = write(*fd, data + *off, len - *off);

	if (n < 0 && (errno == EAGAIN || errno == EINTR))
		return;
	if (n > 0)
		*off += (size_t)n;
	if (n < 0 || *off == len)
		close_fd(fd);
}

/* ------------------------------------------------------------- ranks */

static void
signal_all(struct launch *l, int sig)
{
	for (int r = 0; r < l->started; r++)
		if (l->ranks[r].pid > 0)
			kill(l->ranks[r].pid, sig);
}

static void
fail(struct launch *l, int r)
{
	struct rank *k = &l->ranks[r];

	/* A rank SIGINT reached along with the launcher is no failure,
	 * nor one that died of the pipe we closed on it. */
	if (l->status != 0 || cli_interrupted || l->broken_pipe)
		return;
	l->status = k->status;
	if (k->addr_len == 0 && l->world > 1 && !l->bad_address)
		cli_error("rank %d exited with status %d before publishing its "
		    "address", r, k->status);
	cli_error("rank %d failed with status %d%s", r, k->status,
	    l->alive > 0 ? "; stopping the others" : "");
	l->term_at = sr_clock_ns() + (int64_t)(l->grace * 1e9);
}

static void
reap(struct launch *l)
{
	struct rank *k;
	pid_t pid;
	int st, r;

	while ((pid = waitpid(-1, &st, WNOHANG)) > 0) {
		for (r = 0; r < l->started && l->ranks[r].pid != pid; r++)
			;
		if (r == l->started)
			continue;
		k = &l->ranks[r];
		k->pid = 0;
		k->status = WIFEXITED(st) ? WEXITSTATUS(st) :
		    128 + WTERMSIG(st);
		l->alive--;
		/* Its last words come before the launcher's about it. */
		forward(l, &k->out, DRAIN_READS);
		forward(l, &k->err, DRAIN_READS);
		close_fd(&k->in);
		if (k->ctl >= 0 && !k->published)
			address_read(l, r);
		if (k->status != 0)
			fail(l, r);
		if (!k->published)
			exchange_abandon(l);
	}
	if (l->alive == 0 && l->drain_at == 0)
		l->drain_at = sr_clock_ns() + DRAIN_NS;
}

static void __attribute__((noreturn))
child(struct launch *l, int r, int *fds, pid_t launcher, sigset_t *mask)
{
	char num[3][24];

	/* Dies with the launcher, even one killed before this line. */
	if (prctl(PR_SET_PDEATHSIG, SIGKILL) != 0 || getppid() != launcher)
		_exit(EXIT_INTERNAL);
	signal(SIGINT, SIG_DFL);
	signal(SIGTERM, SIG_DFL);
	signal(SIGCHLD, SIG_DFL);
	signal(SIGPIPE, SIG_DFL);
	sigprocmask(SIG_SETMASK, mask, NULL);
	if (!l->share_stdin)
		fds[0] = open("/dev/null", O_RDONLY | O_CLOEXEC);
	snprintf(num[0], sizeof(num[0]), "%d", r);
	snprintf(num[1], sizeof(num[1]), "%d", l->world);
	snprintf(num[2], sizeof(num[2]), "%d", fds[7]);
	/* Every descriptor is close-on-exec but the four it keeps; fds 0-2
	 * were open in the launcher, so the pipes are all above them. */
	if (fds[0] < 0 || dup2(fds[0], 0) < 0 || dup2(fds[3], 1) < 0 ||
	    dup2(fds[5], 2) < 0 || fcntl(fds[7], F_SETFD, 0) < 0 ||
	    setenv("SILVIC_RING_RANK", num[0], 1) != 0 ||
	    setenv("SILVIC_RING_WORLD", num[1], 1) != 0 ||
	    setenv("SILVIC_RING_LAUNCH_FD", num[2], 1) != 0)
		_exit(EXIT_INTERNAL);
	setrlimit(RLIMIT_NOFILE, &l->nofile);
	execv("/proc/self/exe", l->argv);
	dprintf(2, "silvic-ring: cannot run /proc/self/exe: %s\n",
	    strerror(errno));
	_exit(EXIT_INTERNAL);
}

/* fds: stdin r/w, stdout r/w, stderr r/w, address socket ours/its. */
static int
spawn(struct launch *l, int r)
{
	static const int theirs[] = { 0, 3, 5, 7 }, ours[] = { 1, 2, 4, 6 };
	struct rank *k = &l->ranks[r];
	int fds[8] = { -1, -1, -1, -1, -1, -1, -1, -1 };
	sigset_t block, saved;
	pid_t pid = -1, launcher = getpid();

	sigemptyset(&block);
	sigaddset(&block, SIGCHLD);
	sigaddset(&block, SIGINT);
	sigaddset(&block, SIGTERM);
	if ((!l->share_stdin || pipe2(fds, O_CLOEXEC) == 0) &&
	    pipe2(fds + 2, O_CLOEXEC) == 0 && pipe2(fds + 4, O_CLOEXEC) == 0 &&
	    socketpair(AF_UNIX, SOCK_STREAM | SOCK_CLOEXEC, 0, fds + 6) == 0) {
		/* Blocked until the child has its default handlers back, so
		 * a SIGTERM meant for it is not lost to ours. */
		sigprocmask(SIG_BLOCK, &block, &saved);
		if ((pid = fork()) == 0)
			child(l, r, fds, launcher, &saved);
		sigprocmask(SIG_SETMASK, &saved, NULL);
	}
	if (pid < 0)
		cli_error("cannot start rank %d: %s", r, strerror(errno));
	for (int i = 0; i < 4; i++) {
		close_fd(&fds[theirs[i]]);
		if (pid < 0)
			close_fd(&fds[ours[i]]);
		else if (fds[ours[i]] >= 0)
			fcntl(fds[ours[i]], F_SETFL, O_NONBLOCK |
			    fcntl(fds[ours[i]], F_GETFL));
	}
	if (pid < 0)
		return -1;
	k->in = fds[1];
	k->out.fd = fds[2];
	k->err.fd = fds[4];
	k->ctl = fds[6];
	k->pid = pid;
	l->started++;
	l->alive++;
	return 0;
}

/* -------------------------------------------------------------- loop */

static void
watch_all(struct launch *l)
{
	l->pfd[0] = (struct pollfd){ .fd = wake[0], .events = POLLIN };
	for (int r = 0; r < l->started; r++) {
		struct rank *k = &l->ranks[r];
		struct pollfd *p = &l->pfd[1 + 4 * r];

		p[0] = (struct pollfd){ .fd = k->out.fd, .events = POLLIN };
		p[1] = (struct pollfd){ .fd = k->err.fd, .events = POLLIN };
		/* Never an fd with nothing to wait for: poll would report
		 * its hang-up forever. */
		p[2] = (struct pollfd){ .fd = k->published && l->list_len == 0 ?
		    -1 : k->ctl, .events = k->published ? POLLOUT : POLLIN };
		p[3] = (struct pollfd){ .fd = k->in, .events = POLLOUT };
	}
}

static void
dispatch(struct launch *l, int r, int which)
{
	struct rank *k = &l->ranks[r];

	if (which == 0)
		forward(l, &k->out, 1);
	else if (which == 1)
		forward(l, &k->err, 1);
	else if (which == 2 && k->ctl >= 0 && !k->published)
		address_read(l, r);
	else if (which == 2 && k->ctl >= 0)
		feed(&k->ctl, &k->list_off, l->list, l->list_len);
	else if (which == 3 && k->in >= 0)
		feed(&k->in, &k->in_off, l->input, l->input_len);
}

/* The ranks time out waiting for each other, but nothing else notices
 * one that hangs before it publishes its address. */
static void
address_deadline(struct launch *l, int64_t now)
{
	if (l->address_at == 0 || now < l->address_at)
		return;
	l->address_at = 0;
	if (l->status != 0 || cli_interrupted)
		return;
	for (int r = 0; r < l->started; r++)
		if (!l->ranks[r].published)
			cli_error("rank %d did not publish its address within "
			    "%gs", r, l->address_s);
	l->status = EXIT_RENDEZVOUS;
	l->term_at = now + (int64_t)(l->grace * 1e9);
	exchange_abandon(l);
}

/* SIGTERM when the grace period is over, SIGKILL a second later. */
static void
escalate(struct launch *l, int64_t now)
{
	address_deadline(l, now);
	if (cli_interrupted && !l->interrupted) {
		l->interrupted = true;
		cli_error("interrupted; stopping the ranks");
		l->term_at = now;
	}
	if (l->term_at != 0 && now >= l->term_at) {
		signal_all(l, SIGTERM);
		l->term_at = 0;
		l->kill_at = now + KILL_AFTER_NS;
	}
	if (l->kill_at != 0 && now >= l->kill_at) {
		signal_all(l, SIGKILL);
		l->kill_at = 0;
	}
}

/* Until the next deadline; once the ranks have their addresses none, as
 * they carry their own timeouts and any exit wakes the loop. */
static int
poll_timeout(struct launch *l, int64_t now)
{
	int64_t next = INT64_MAX, t[4] = { l->term_at, l->kill_at,
	    l->alive == 0 ? l->drain_at : 0, l->address_at };

	for (int i = 0; i < 4; i++)
		if (t[i] != 0 && t[i] < next)
			next = t[i];
	if (next == INT64_MAX)
		return -1;
	/* Rounded up: waking early would spin until the deadline. */
	next = next <= now ? 0 : (next - now + 999999) / 1000000;
	return next > INT_MAX ? INT_MAX : (int)next;
}

static bool
finished(struct launch *l, int64_t now)
{
	if (l->alive > 0)
		return false;
	for (int r = 0; r < l->started && now < l->drain_at; r++)
		if (l->ranks[r].out.fd >= 0 || l->ranks[r].err.fd >= 0)
			return false;
	return true;
}

static void
run_loop(struct launch *l)
{
	int64_t now = sr_clock_ns();
	char junk[64];

	while (!finished(l, now)) {
		escalate(l, now);
		watch_all(l);
		if (poll(l->pfd, (nfds_t)(1 + 4 * l->started),
		    poll_timeout(l, now)) < 0 && errno != EINTR) {
			cli_error("poll: %s; killing the ranks", strerror(errno));
			l->status = l->status != 0 ? l->status : EXIT_INTERNAL;
			signal_all(l, SIGKILL);
		}
		while (read(wake[0], junk, sizeof(junk)) > 0)
			;
		for (int i = 1; i < 1 + 4 * l->started; i++)
			if (l->pfd[i].revents != 0)
				dispatch(l, (i - 1) / 4, (i - 1) % 4);
		reap(l);
		now = sr_clock_ns();
	}
}

/* ------------------------------------------------------------ set-up */

/* 0 to go on, -1 after --help, else the status of a usage error. */
static int
parse(struct launch *l, int argc, char **argv)
{
	static const struct option longopts[] = {
		{ "ranks", required_argument, NULL, 'n' },
		{ "tag-output", no_argument, NULL, 'l' },
		{ "no-tag-output", no_argument, NULL, OPT_NO_TAG },
		{ "grace", required_argument, NULL, OPT_GRACE },
		{ "help", no_argument, NULL, 'h' },
		{ NULL, 0, NULL, 0 }
	};
	char shortopt[3] = "-?";
	uint64_t n;
	int c;

	opterr = 0;
	optind = 0;	/* glibc: start afresh, reading the '+' */
	while ((c = getopt_long(argc, argv, "+:n:lh", longopts, NULL)) != -1) {
		if (c == 'l' || c == OPT_NO_TAG)
			l->tag = c == 'l';
		else if (c == 'n' && cli_parse_uint(optarg, 1, RANKS_MAX, &n) == 0)
			l->world = (int)n;
		else if (c == 'n')
			return cli_usage_error("launch: -n '%s' is not a number "
			    "of ranks from 1 to %d", optarg, RANKS_MAX);
		else if (c == OPT_GRACE && cli_parse_seconds(optarg,
		    &l->grace) != 0)
			return cli_usage_error("launch: --grace '%s' is not a "
			    "number of seconds", optarg);
		else if (c == 'h') {
			fputs(usage_launch, stdout);
			return -1;
		} else if (c == ':')
			return cli_usage_error("launch: %s needs a value",
			    argv[optind - 1]);
		else if (c == '?') {
			shortopt[1] = (char)optopt;
			return cli_usage_error("launch: unknown option '%s'",
			    optopt != 0 ? shortopt : argv[optind - 1]);
		}
	}
	if (l->world == 0)
		return cli_usage_error("launch: missing -n N, the number of "
		    "ranks to start");
	if (optind >= argc)
		return cli_usage_error("launch: missing the command the ranks "
		    "run, as in 'launch -n %d run'", l->world);
	if (strcmp(argv[optind], "launch") == 0)
		return cli_usage_error("launch: the ranks cannot run 'launch' "
		    "themselves");
	if ((l->argv = calloc((size_t)(argc - optind) + 2,
	    sizeof(*l->argv))) == NULL) {
		cli_error("out of memory");
		return EXIT_INTERNAL;
	}
	l->argv[0] = (char *)"silvic-ring";
	memcpy(l->argv + 1, argv + optind, (size_t)(argc - optind) *
	    sizeof(*l->argv));
	return 0;
}

/* main.c's: the preflight parses the command exactly as a rank would. */
int main(int argc, char **argv);

/*
 * Runs the command's own option parsing once, in a child that stops
 * right after it (cli_preflight), so that a typo is one error, not one per
 * rank, and options mean what they mean to the ranks, abbreviations
 * included.  0 with l->command filled (reached false for a command that
 * forms no ring: help, --version), else the status to exit with.
 */
static int
preflight(struct launch *l)
{
	static const struct option none[] = { { NULL, 0, NULL, 0 } };
	char *reset[] = { l->argv[0], NULL };
	int fds[2], st, argc = 0;
	ssize_t n = 0, got;
	pid_t pid;

	/* serve has no such stop: parsing it would serve. */
	if (strcmp(l->argv[1], "serve") == 0)
		return 0;
	while (l->argv[argc] != NULL)
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
		st = main(argc, l->argv);
		fflush(NULL);
		if (write(fds[1], &p, sizeof(p)) != (ssize_t)sizeof(p))
			_exit(EXIT_INTERNAL);
		_exit(st);
	}
	close(fds[1]);
	while (pid > 0 && n < (ssize_t)sizeof(l->command) &&
	    ((got = read(fds[0], (char *)&l->command + n,
	    sizeof(l->command) - (size_t)n)) > 0 || (got < 0 &&
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
	if (n != (ssize_t)sizeof(l->command))
		memset(&l->command, 0, sizeof(l->command));
	if (l->command.reached && l->command.port > 0 && l->world > 1)
		return cli_usage_error("launch: --port %lld would be the same "
		    "for all %d ranks, and only one of them can bind it; leave "
		    "it out (each rank then binds a free port)",
		    (long long)l->command.port, l->world);
	return 0;
}

/* Only run reads stdin, for its script; run and bench form a ring and
 * publish an address within their --timeout, and bench's stdout, like
 * --json's and --csv's, is machine output. */
static void
command_inspect(struct launch *l)
{
	const struct cli_preflight *c = &l->command;
	const char *first = l->argv[1];
	bool run = strcmp(first, "run") == 0 || first[0] == '-';
	bool bench = strcmp(first, "bench") == 0;

	if (!c->reached)
		return;
	l->share_stdin = run && !isatty(0) && c->script_stdin && !c->dry_run;
	l->address_s = c->timeout + ADDRESS_SLACK;
	l->machine = !c->dry_run && (c->json || c->csv || bench);
}

/* Every rank gets the same bytes, so they are read whole first. */
static int
input_read(struct launch *l)
{
	size_t cap = 0;
	ssize_t n;
	char *grown;

	for (;;) {
		if (l->input_len == cap) {
			cap = cap == 0 ? 65536 : cap * 2;
			cap = cap > INPUT_MAX + 1 ? INPUT_MAX + 1 : cap;
			if ((grown = realloc(l->input, cap)) == NULL) {
				cli_error("out of memory reading stdin");
				return EXIT_INTERNAL;
			}
			l->input = grown;
		}
		n = read(0, l->input + l->input_len, cap - l->input_len);
		if (n < 0 && errno == EINTR && cli_interrupted)
			return EXIT_INTERRUPTED;
		if (n < 0 && errno == EAGAIN)
			poll(&(struct pollfd){ .fd = 0, .events = POLLIN }, 1, -1);
		else if (n < 0 && errno != EINTR) {
			cli_error("reading stdin: %s", strerror(errno));
			return EXIT_INTERNAL;
		} else if (n == 0)
			return 0;
		else if (n > 0 && (l->input_len += (size_t)n) > INPUT_MAX) {
			cli_error("stdin is larger than 64 MiB, the most the "
			    "launcher hands every rank");
			return EXIT_USAGE;
		}
	}
}

static int
prepare(struct launch *l)
{
	struct sigaction sa = { .sa_handler = on_signal };
	struct rlimit raised;
	size_t slots = (size_t)l->world * 4 + 1;
	int fd, rc;

	/* A closed 0, 1 or 2 would go to a pipe the child's dup2s clobber. */
	while ((fd = open("/dev/null", O_RDWR)) >= 0 && fd <= 2)
		;
	if (fd > 2)
		close(fd);
	getrlimit(RLIMIT_NOFILE, &l->nofile);
	raised = l->nofile;
	if (raised.rlim_cur < slots + 64) {
		raised.rlim_cur = slots + 64 < raised.rlim_max ? slots + 64 :
		    raised.rlim_max;
		setrlimit(RLIMIT_NOFILE, &raised);
	}
	if (pipe2(wake, O_CLOEXEC | O_NONBLOCK) != 0) {
		cli_error("cannot create a pipe: %s", strerror(errno));
		return EXIT_INTERNAL;
	}
	/* No SA_RESTART: reads see EINTR. */
	sa.sa_flags = SA_NOCLDSTOP;
	sigemptyset(&sa.sa_mask);
	sigaction(SIGCHLD, &sa, NULL);
	sigaction(SIGINT, &sa, NULL);
	sigaction(SIGTERM, &sa, NULL);
	signal(SIGPIPE, SIG_IGN);
	command_inspect(l);
	if (l->share_stdin && (rc = input_read(l)) != 0)
		return rc;
	l->ranks = calloc((size_t)l->world, sizeof(*l->ranks));
	l->pfd = calloc(slots, sizeof(*l->pfd));
	l->list = malloc((size_t)l->world * (ADDRESS_MAX + 1) + 1);
	if (l->ranks == NULL || l->pfd == NULL || l->list == NULL) {
		cli_error("out of memory for %d ranks", l->world);
		return EXIT_INTERNAL;
	}
	for (int r = 0; r < l->world; r++) {
		enum launch_mode human = l->tag ? LAUNCH_TAG : LAUNCH_PLAIN;

		launch_stream_init(&l->ranks[r].out, r, 1, !l->machine ? human :
		    r == 0 ? LAUNCH_RAW : LAUNCH_DROP);
		launch_stream_init(&l->ranks[r].err, r, 2, human);
		l->ranks[r].ctl = l->ranks[r].in = -1;
	}
	return 0;
}

static int
outcome(struct launch *l)
{
	if (l->broken_pipe)
		return EXIT_PIPE;
	if (l->interrupted || cli_interrupted)
		return EXIT_INTERRUPTED;
	if (l->status != 0)
		return l->status;
	if (l->bad_address)
		return EXIT_RENDEZVOUS;
	if (l->bad_output) {
		cli_error("could not write all of the ranks' output");
		return EXIT_INTERNAL;
	}
	return EXIT_OK;
}

static void
cleanup(struct launch *l)
{
	for (int r = 0; r < l->started; r++) {
		launch_stream_fini(&l->ranks[r].out);
		launch_stream_fini(&l->ranks[r].err);
		close_fd(&l->ranks[r].ctl);
		close_fd(&l->ranks[r].in);
	}
	close_fd(&wake[0]);
	close_fd(&wake[1]);
	free(l->ranks);
	free(l->pfd);
	free(l->list);
	free(l->argv);
	free(l->input);
}

static void
start_all(struct launch *l)
{
	for (int r = 0; r < l->world && !cli_interrupted; r++)
		if (spawn(l, r) != 0) {
			l->status = EXIT_INTERNAL;
			l->term_at = sr_clock_ns();
			exchange_abandon(l);
			return;
		}
	if (l->address_s > 0)
		l->address_at = sr_clock_ns() + (int64_t)(l->address_s * 1e9);
}

int
cmd_launch(int argc, char **argv)
{
	struct launch l;
	int rc;

	memset(&l, 0, sizeof(l));
	l.grace = 3;
	l.tag = true;
	if ((rc = parse(&l, argc, argv)) == 0 && (rc = preflight(&l)) == 0 &&
	    (rc = prepare(&l)) == 0) {
		start_all(&l);
		run_loop(&l);
		rc = outcome(&l);
	}
	cleanup(&l);
	if (rc == EXIT_PIPE)
		return cli_exit_pipe();
	return rc < 0 ? EXIT_OK : rc;
}
