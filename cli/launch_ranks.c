/*
 * launch_ranks.c - the ranks one process starts on its own machine: for
 * `launch -n N`, and for each host's agent under `launch --hosts`.
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
#include "launch.h"

#define DRAIN_NS	1000000000LL	/* output a grandchild holds open */
#define DRAIN_READS	64		/* 4 MiB: more than a pipe holds */

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

void
launch_fd_close(int *fd)
{
	if (*fd >= 0)
		close(*fd);
	*fd = -1;
}

int
launch_signals_init(void)
{
	struct sigaction sa = { .sa_handler = on_signal };
	int fd;

	/* A closed 0, 1 or 2 would go to a pipe the child's dup2s clobber. */
	while ((fd = open("/dev/null", O_RDWR)) >= 0 && fd <= 2)
		;
	if (fd > 2)
		close(fd);
	if (wake[0] < 0 && pipe2(wake, O_CLOEXEC | O_NONBLOCK) != 0) {
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
	return 0;
}

const char *
launch_ranks_text(int base, int count)
{
	static char buf[48];

	if (count == 1)
		snprintf(buf, sizeof(buf), "rank %d", base);
	else
		snprintf(buf, sizeof(buf), "ranks %d-%d", base, base + count - 1);
	return buf;
}

int
launch_wake_fd(void)
{
	return wake[0];
}

void
launch_wake_drain(void)
{
	char junk[64];

	while (read(wake[0], junk, sizeof(junk)) > 0)
		;
}

void
launch_nofile_raise(size_t n, struct rlimit *saved)
{
	struct rlimit raised;

	getrlimit(RLIMIT_NOFILE, saved);
	raised = *saved;
	if (raised.rlim_cur < n + 64) {
		raised.rlim_cur = n + 64 < raised.rlim_max ? n + 64 :
		    raised.rlim_max;
		setrlimit(RLIMIT_NOFILE, &raised);
	}
}

/* ------------------------------------------------------------ output */

/*
 * Once our stdout's reader is gone (| head) the job ends as a pipeline
 * does: every rank gets SIGPIPE, which run and bench die of quietly (a
 * rank that ignores it is killed a second later), and so does the
 * launcher, at the end.  What the ranks write from now on is dropped:
 * a rank can see another die of the signal, and say so, before its own
 * signal lands (seen once in a chroot's .ci/run: "rank 1: ... lost the
 * connection (closed by the peer) to rank 0").
 */
static void
broken_pipe(struct launch *l)
{
	if (l->broken_pipe)
		return;
	l->broken_pipe = true;
	for (int r = 0; r < l->started; r++) {
		launch_stream_drop(&l->ranks[r].out);
		launch_stream_drop(&l->ranks[r].err);
		if (l->ranks[r].pid > 0)
			kill(l->ranks[r].pid, SIGPIPE);
	}
	l->term_at = 0;
	l->kill_at = sr_clock_ns() + LAUNCH_KILL_AFTER_NS;
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
void
launch_ranks_abandon(struct launch *l)
{
	for (int r = 0; r < l->started; r++)
		launch_fd_close(&l->ranks[r].ctl);
}

/* The list of every rank's address, once all have published here. */
static void
list_build(struct launch *l)
{
	size_t len = 1;

	for (int i = 0; i < l->count; i++)
		len += l->ranks[i].addr_len;
	if ((l->list = malloc(len)) == NULL) {
		cli_error("out of memory for the address list");
		l->status = l->status != 0 ? l->status : EXIT_INTERNAL;
		l->term_at = sr_clock_ns();
		launch_ranks_abandon(l);
		return;
	}
	for (int i = 0; i < l->count; i++) {
		memcpy(l->list + l->list_len, l->ranks[i].addr,
		    l->ranks[i].addr_len);
		l->list_len += l->ranks[i].addr_len;
	}
	l->list[l->list_len++] = '\n';
}

static void
address_read(struct launch *l, int r)
{
	struct launch_rank *k = &l->ranks[r];
	char *nl;
	ssize_t n;

	n = read(k->ctl, k->addr + k->addr_len,
	    LAUNCH_ADDRESS_MAX + 1 - k->addr_len);
	if (n < 0 && (errno == EINTR || errno == EAGAIN))
		return;
	if (n <= 0) {
		launch_ranks_abandon(l);
		return;
	}
	k->addr_len += (size_t)n;
	if ((nl = memchr(k->addr, '\n', k->addr_len)) == NULL) {
		if (k->addr_len <= LAUNCH_ADDRESS_MAX)
			return;
		cli_error("rank %d published an address longer than %d bytes",
		    l->base + r, LAUNCH_ADDRESS_MAX);
	} else if (nl + 1 != k->addr + k->addr_len ||
	    !address_valid(k->addr, (size_t)(nl - k->addr))) {
		cli_error("rank %d published '%.*s', not host:port", l->base + r,
		    (int)(nl - k->addr), k->addr);
	} else {
		k->published = true;
		if (++l->published < l->count)
			return;
		l->address_at = 0;
		if (!l->upstream)
			list_build(l);
		return;
	}
	l->bad_address = true;
	launch_ranks_abandon(l);
}

int
launch_ranks_set_list(struct launch *l, const char *text, size_t len)
{
	char *copy = malloc(len);

	if (copy == NULL)
		return -1;
	memcpy(copy, text, len);
	free(l->list);
	l->list = copy;
	l->list_len = len;
	return 0;
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
		launch_fd_close(fd);
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
	struct launch_rank *k = &l->ranks[r];

	/* A rank SIGINT reached along with the launcher is no failure,
	 * nor one that died of the pipe we closed on it, nor one stopped. */
	if (l->status != 0 || cli_interrupted || l->broken_pipe || l->stopping)
		return;
	l->status = k->status;
	if (k->addr_len == 0 && l->job->world > 1 && !l->bad_address)
		cli_error("rank %d exited with status %d before publishing its "
		    "address", l->base + r, k->status);
	/* Under a launcher elsewhere, that launcher tells and decides. */
	if (l->upstream)
		return;
	cli_error("rank %d failed with status %d%s", l->base + r, k->status,
	    l->alive > 0 ? "; stopping the others" : "");
	l->term_at = sr_clock_ns() + (int64_t)(l->job->grace * 1e9);
}

static void
reap(struct launch *l)
{
	struct launch_rank *k;
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
		launch_fd_close(&k->in);
		if (k->ctl >= 0 && !k->published)
			address_read(l, r);
		if (k->status != 0)
			fail(l, r);
		if (!k->published)
			launch_ranks_abandon(l);
	}
	/* Not before any started: an agent waits for its start here. */
	if (l->alive == 0 && l->started > 0 && l->drain_at == 0)
		l->drain_at = sr_clock_ns() + DRAIN_NS;
}

pid_t
launch_fork(void)
{
	static const int signals[] = { SIGCHLD, SIGINT, SIGTERM, SIGALRM };
	sigset_t block, saved;
	pid_t launcher = getpid(), pid;

	sigemptyset(&block);
	for (size_t i = 0; i < sizeof(signals) / sizeof(*signals); i++)
		sigaddset(&block, signals[i]);
	/* Blocked until the child has its default handlers back, so a
	 * SIGTERM meant for it is not lost to ours. */
	sigprocmask(SIG_BLOCK, &block, &saved);
	if ((pid = fork()) != 0) {
		sigprocmask(SIG_SETMASK, &saved, NULL);
		return pid;
	}
	/* Dies with the launcher, even one killed before this line. */
	if (prctl(PR_SET_PDEATHSIG, SIGKILL) != 0 || getppid() != launcher)
		_exit(EXIT_INTERNAL);
	for (size_t i = 0; i < sizeof(signals) / sizeof(*signals); i++)
		signal(signals[i], SIG_DFL);
	signal(SIGPIPE, SIG_DFL);
	sigprocmask(SIG_SETMASK, &saved, NULL);
	return 0;
}

static void __attribute__((noreturn))
child(struct launch *l, int r, int *fds)
{
	char num[3][24];

	if (!l->job->share_stdin)
		fds[0] = open("/dev/null", O_RDONLY | O_CLOEXEC);
	snprintf(num[0], sizeof(num[0]), "%d", l->base + r);
	snprintf(num[1], sizeof(num[1]), "%d", l->job->world);
	snprintf(num[2], sizeof(num[2]), "%d", fds[7]);
	/* Every descriptor is close-on-exec but the four it keeps; fds 0-2
	 * were open in the launcher, so the pipes are all above them. */
	if (fds[0] < 0 || dup2(fds[0], 0) < 0 || dup2(fds[3], 1) < 0 ||
	    dup2(fds[5], 2) < 0 || fcntl(fds[7], F_SETFD, 0) < 0 ||
	    setenv("SILVIC_RING_RANK", num[0], 1) != 0 ||
	    setenv("SILVIC_RING_WORLD", num[1], 1) != 0 ||
	    setenv("SILVIC_RING_LAUNCH_FD", num[2], 1) != 0 ||
	    (l->bind_host != NULL &&
	    setenv("SILVIC_RING_LAUNCH_HOST", l->bind_host, 1) != 0) ||
	    (l->shared_cores &&
	    setenv("SILVIC_RING_SHARED_CORES", "yes", 1) != 0) ||
	    (l->cpus[0] != '\0' &&
	    setenv("SILVIC_RING_CPUS", l->cpus, 1) != 0))
		_exit(EXIT_INTERNAL);
	setrlimit(RLIMIT_NOFILE, &l->nofile);
	execv(l->exe, l->job->argv);
	dprintf(2, "silvic-ring: cannot run %s: %s\n", l->exe,
	    strerror(errno));
	_exit(EXIT_INTERNAL);
}

/* fds: stdin r/w, stdout r/w, stderr r/w, address socket ours/its. */
static int
spawn(struct launch *l, int r)
{
	static const int theirs[] = { 0, 3, 5, 7 }, ours[] = { 1, 2, 4, 6 };
	struct launch_rank *k = &l->ranks[r];
	int fds[8] = { -1, -1, -1, -1, -1, -1, -1, -1 };
	pid_t pid = -1;

	if ((!l->job->share_stdin || pipe2(fds, O_CLOEXEC) == 0) &&
	    pipe2(fds + 2, O_CLOEXEC) == 0 && pipe2(fds + 4, O_CLOEXEC) == 0 &&
	    socketpair(AF_UNIX, SOCK_STREAM | SOCK_CLOEXEC, 0, fds + 6) == 0 &&
	    (pid = launch_fork()) == 0)
		child(l, r, fds);
	if (pid < 0)
		cli_error("cannot start rank %d: %s", l->base + r,
		    strerror(errno));
	for (int i = 0; i < 4; i++) {
		launch_fd_close(&fds[theirs[i]]);
		if (pid < 0)
			launch_fd_close(&fds[ours[i]]);
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

void
launch_ranks_start(struct launch *l)
{
	for (int r = 0; r < l->count && !cli_interrupted && !l->stopping; r++)
		if (spawn(l, r) != 0) {
			l->status = EXIT_INTERNAL;
			l->term_at = sr_clock_ns();
			launch_ranks_abandon(l);
			return;
		}
	if (l->job->address_s > 0)
		l->address_at = sr_clock_ns() +
		    (int64_t)(l->job->address_s * 1e9);
}

void
launch_ranks_stop(struct launch *l)
{
	if (l->stopping)
		return;
	l->stopping = true;
	l->term_at = sr_clock_ns();
}

/* -------------------------------------------------------------- loop */

nfds_t
launch_ranks_watch(struct launch *l)
{
	l->pfd[0] = (struct pollfd){ .fd = wake[0], .events = POLLIN };
	for (int r = 0; r < l->started; r++) {
		struct launch_rank *k = &l->ranks[r];
		struct pollfd *p = &l->pfd[1 + 4 * r];

		p[0] = (struct pollfd){ .fd = k->out.fd, .events = POLLIN };
		p[1] = (struct pollfd){ .fd = k->err.fd, .events = POLLIN };
		/* Never an fd with nothing to wait for: poll would report
		 * its hang-up forever. */
		p[2] = (struct pollfd){ .fd = k->published && l->list_len == 0 ?
		    -1 : k->ctl, .events = k->published ? POLLOUT : POLLIN };
		p[3] = (struct pollfd){ .fd = k->in, .events = POLLOUT };
	}
	return (nfds_t)(1 + 4 * l->started);
}

static void
dispatch_one(struct launch *l, int r, int which)
{
	struct launch_rank *k = &l->ranks[r];

	if (which == 0)
		forward(l, &k->out, 1);
	else if (which == 1)
		forward(l, &k->err, 1);
	else if (which == 2 && k->ctl >= 0 && !k->published)
		address_read(l, r);
	else if (which == 2 && k->ctl >= 0)
		feed(&k->ctl, &k->list_off, l->list, l->list_len);
	else if (which == 3 && k->in >= 0)
		feed(&k->in, &k->in_off, l->job->input, l->job->input_len);
}

void
launch_ranks_dispatch(struct launch *l)
{
	if (l->pfd[0].revents != 0)
		launch_wake_drain();
	for (int i = 1; i < 1 + 4 * l->started; i++)
		if (l->pfd[i].revents != 0)
			dispatch_one(l, (i - 1) / 4, (i - 1) % 4);
	reap(l);
}

/* The ranks time out waiting for each other, but nothing else notices
 * one that hangs before it publishes its address. */
static void
address_deadline(struct launch *l, int64_t now)
{
	if (l->address_at == 0 || now < l->address_at)
		return;
	l->address_at = 0;
	if (l->status != 0 || cli_interrupted || l->stopping)
		return;
	for (int r = 0; r < l->started; r++)
		if (!l->ranks[r].published)
			cli_error("rank %d did not publish its address within "
			    "%gs", l->base + r, l->job->address_s);
	l->status = EXIT_RENDEZVOUS;
	l->term_at = now + (int64_t)(l->job->grace * 1e9);
	launch_ranks_abandon(l);
}

void
launch_ranks_escalate(struct launch *l, int64_t now)
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
		l->kill_at = now + LAUNCH_KILL_AFTER_NS;
	}
	if (l->kill_at != 0 && now >= l->kill_at) {
		signal_all(l, SIGKILL);
		l->kill_at = 0;
	}
}

/* Until the next deadline; once the ranks have their addresses none, as
 * they carry their own timeouts and any exit wakes the loop. */
int
launch_ranks_timeout(const struct launch *l, int64_t now)
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

bool
launch_ranks_finished(const struct launch *l, int64_t now)
{
	if (l->alive > 0)
		return false;
	for (int r = 0; r < l->started && now < l->drain_at; r++)
		if (l->ranks[r].out.fd >= 0 || l->ranks[r].err.fd >= 0)
			return false;
	return true;
}

int
launch_ranks_run(struct launch *l)
{
	int64_t now = sr_clock_ns();

	launch_ranks_start(l);
	while (!launch_ranks_finished(l, now)) {
		nfds_t n;

		launch_ranks_escalate(l, now);
		n = launch_ranks_watch(l);
		if (poll(l->pfd, n, launch_ranks_timeout(l, now)) < 0 &&
		    errno != EINTR) {
			cli_error("poll: %s; killing the ranks", strerror(errno));
			l->status = l->status != 0 ? l->status : EXIT_INTERNAL;
			signal_all(l, SIGKILL);
			for (nfds_t i = 0; i < n; i++)
				l->pfd[i].revents = 0;
		}
		launch_ranks_dispatch(l);
		now = sr_clock_ns();
	}
	return launch_ranks_outcome(l);
}

int
launch_ranks_outcome(const struct launch *l)
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

/* ------------------------------------------------------------ set-up */

int
launch_ranks_init(struct launch *l, const struct launch_job *job, int base,
    int count, int extra)
{
	const enum launch_mode human = job->tag ? LAUNCH_TAG : LAUNCH_PLAIN;

	memset(l, 0, sizeof(*l));
	l->job = job;
	l->base = base;
	l->count = count;
	launch_nofile_raise((size_t)count * 4 + 1 + (size_t)extra, &l->nofile);
	l->ranks = calloc((size_t)count, sizeof(*l->ranks));
	l->pfd = calloc((size_t)count * 4 + 1 + (size_t)extra, sizeof(*l->pfd));
	if (l->ranks == NULL || l->pfd == NULL) {
		cli_error("out of memory for %d ranks", count);
		return EXIT_INTERNAL;
	}
	/* Found once, here: a rank runs the very binary its launcher is,
	 * through /proc/self/exe (that file even if replaced since), or by
	 * its path where /proc is not mounted. */
	l->exe = access("/proc/self/exe", X_OK) == 0 ?
	    strdup("/proc/self/exe") : cli_self_path();
	if (l->exe == NULL) {
		cli_self_path_error("to run the ranks", "");
		return EXIT_INTERNAL;
	}
	for (int r = 0; r < count; r++) {
		int g = base + r;

		launch_stream_init(&l->ranks[r].out, g, 1, !job->machine ? human :
		    g == 0 ? LAUNCH_RAW : LAUNCH_DROP);
		launch_stream_init(&l->ranks[r].err, g, 2, human);
		l->ranks[r].ctl = l->ranks[r].in = -1;
	}
	return 0;
}

void
launch_ranks_fini(struct launch *l)
{
	for (int r = 0; l->ranks != NULL && r < l->count; r++) {
		launch_stream_fini(&l->ranks[r].out);
		launch_stream_fini(&l->ranks[r].err);
		launch_fd_close(&l->ranks[r].ctl);
		launch_fd_close(&l->ranks[r].in);
	}
	free(l->ranks);
	free(l->pfd);
	free(l->list);
	free(l->exe);
	l->exe = NULL;
	l->ranks = NULL;
	l->pfd = NULL;
	l->list = NULL;
}
