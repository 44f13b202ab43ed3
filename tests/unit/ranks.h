/*
 * ranks.h - forks real ranks over loopback for test_ring.c.
 *
 * The parent opens every rank's listener (port 0), so every address is
 * known before a single rank runs; then it forks one child per rank.  A
 * child closes what is not its own, joins the ring, runs the test's
 * scenario and sends the parent a fixed-size report through its pipe
 * before it _exit()s.  A child may also send events ("connected", "inside
 * the loop") with a CLOCK_MONOTONIC timestamp, which is the same clock in
 * every process, and the parent may send it a byte ("finish").
 *
 * The parent never waits without a deadline: when one passes it SIGKILLs
 * the children it forked (and only those), reaps them and fails the test.
 * Include after check.h.
 */
#ifndef SR_RANKS_H
#define SR_RANKS_H

#include <errno.h>
#include <poll.h>
#include <signal.h>
#include <stdarg.h>
#include <stdbool.h>
#include <stdint.h>
#include <stdio.h>
#include <string.h>
#include <sys/prctl.h>
#include <sys/types.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

#include "silvic_ring.h"

#define RANKS_MAX 8
#define RANK_EVENTS 8
#define RANK_AUX 12
#define RANKS_PARENT_FDS 16

/* Events a child may send; the parent keeps when each first came and how
 * many came. */
enum rank_event {
	RANK_EV_CONNECTED = 0,
	RANK_EV_LOOP = 1,	/* inside its loop of collectives */
	RANK_EV_ITER = 2,	/* finished the loop's first collective */
	RANK_EV_ENTER = 3,	/* about to make the loop's second call */
	RANK_EV_STRAY = 4,	/* its acceptor rejected a connection */
};

/* What a child sends the parent once, before it exits. */
struct rank_report {
	int32_t rank;
	int32_t rc;		/* the scenario's result: 0 or -1 */
	int32_t failed_checks;
	int32_t strays;		/* connections its acceptor rejected */
	struct sr_error err;	/* the failure, when rc is -1 */
	int64_t t_start_ns;	/* before sr_ring_connect */
	int64_t t_connected_ns;
	int64_t t_fail_ns;	/* when the failing call returned */
	int64_t t_end_ns;
	uint64_t hash;
	int64_t aux[RANK_AUX];
	char first_failure[256];
	char text[1024];	/* the strays' reasons, '|'-separated */
};

enum rank_msg_type { RANK_MSG_EVENT = 1, RANK_MSG_REPORT = 2 };

/* Under PIPE_BUF, so each write reaches the parent whole. */
struct rank_msg {
	int32_t type;
	int32_t event;
	int64_t t_ns;
	struct rank_report report;
};

_Static_assert(sizeof(struct rank_msg) <= 4096, "a message fits PIPE_BUF");

struct ranks_job;

/* What a scenario sees, in the child. */
struct rank_ctx {
	uint32_t rank, world;
	const struct ranks_job *job;
	struct sr_ring *ring;	/* set to NULL when the scenario closes it */
	struct rank_report *report;
	int out_fd;		/* to the parent */
	int in_fd;		/* from the parent */
	struct sr_probe_link *probe;	/* a probe's report, RANKS_MAX */
};

struct ranks_job {
	uint32_t world;
	const char *host;	/* NULL: 127.0.0.1 */
	int64_t timeout_ms;	/* the ring's; 0: 10 s */
	uint64_t token;		/* 0: a default */
	uint64_t token_of[RANKS_MAX];	/* non-zero: this rank's own token */
	/* Returns 0 or -1 (then report->err and t_fail_ns are set). */
	int (*scenario)(struct rank_ctx *ctx);
	const void *arg;
	int64_t deadline_ms;	/* the whole job, from the first fork */
	/* Ranks that wait for the parent's byte (ranks_tell) before they
	 * join the ring. */
	uint32_t hold_mask;
	const char *congestion;	/* the ring option; NULL: the kernel's */
	bool mesh;		/* form a mesh (sr_ring_options.mesh) */
	bool integrity;		/* frames checked (sr_ring_options.integrity) */
	bool shared_cores;	/* sr_ring_options.shared_cores */
	uint32_t streams;	/* connections per link (0: one) ... */
	uint32_t streams_of[RANKS_MAX];	/* ... unless non-zero here */
	uint32_t ring_mask;	/* ranks that form a plain ring all the same */
	int64_t probe_ms;	/* probe (sr_ring_options.probe_ms) */
	const uint8_t *key;	/* authenticate with this key ... */
	size_t key_len;
	uint32_t keyless_mask;	/* ... but not these ranks */
	/* When set, the child's ring is built by this instead of
	 * sr_ring_connect (a mesh by hand, say: 0 with ctx->ring set, or -1
	 * with err), and the parent opens no listeners: the addresses are
	 * placeholders ("rank-N"). */
	int (*join)(struct rank_ctx *ctx, const struct sr_ring_options *options,
	    struct sr_error *err);
};

struct ranks {
	struct ranks_job job;
	struct sr_listener *listener[RANKS_MAX];
	char address[RANKS_MAX][SR_ADDR_MAX];
	const char *addresses[RANKS_MAX];
	pid_t pid[RANKS_MAX];
	int from[RANKS_MAX];	/* read end of each child's pipe */
	int to[RANKS_MAX];	/* write end of each child's control pipe */
	unsigned char buf[RANKS_MAX][sizeof(struct rank_msg)];
	size_t got[RANKS_MAX];
	int64_t event_ns[RANKS_MAX][RANK_EVENTS];
	int event_count[RANKS_MAX][RANK_EVENTS];
	bool reported[RANKS_MAX];
	bool reaped[RANKS_MAX];
	int wstatus[RANKS_MAX];
	struct rank_report report[RANKS_MAX];
	int parent_fds[RANKS_PARENT_FDS];
	int nparent_fds;
	int64_t deadline_ns;
	bool killed_at_deadline;
};

static inline int64_t
ranks_now_ns(void)
{
	struct timespec ts;

	clock_gettime(CLOCK_MONOTONIC, &ts);
	return (int64_t)ts.tv_sec * 1000000000 + ts.tv_nsec;
}

static inline int
ranks_left_ms(int64_t until_ns)
{
	int64_t left = until_ns - ranks_now_ns();

	if (left <= 0)
		return 0;
	left = (left + 999999) / 1000000;
	return left > 0x7fffffff ? 0x7fffffff : (int)left;
}

static inline double
ranks_ms(int64_t ns)
{
	return (double)ns / 1e6;
}

static inline uint64_t
fnv1a64(uint64_t hash, const void *data, size_t len)
{
	const unsigned char *p = data;

	for (size_t i = 0; i < len; i++) {
		hash ^= p[i];
		hash *= 0x100000001b3ULL;
	}
	return hash;
}

#define FNV_OFFSET 0xcbf29ce484222325ULL

/* ------------------------------------------------------------ the child */

static void rank_check_failed(struct rank_ctx *ctx, const char *file,
    int line, const char *cond, const char *fmt, ...)
    __attribute__((format(printf, 5, 6)));

static inline void
rank_check_failed(struct rank_ctx *ctx, const char *file, int line,
    const char *cond, const char *fmt, ...)
{
	struct rank_report *rep = ctx->report;
	va_list ap;
	int n;

	if (rep->failed_checks++ > 0)
		return;
	n = snprintf(rep->first_failure, sizeof(rep->first_failure),
	    "%s:%d: %s: ", file, line, cond);
	if (n < 0 || (size_t)n >= sizeof(rep->first_failure))
		return;
	va_start(ap, fmt);
	vsnprintf(rep->first_failure + n, sizeof(rep->first_failure) - (size_t)n,
	    fmt, ap);
	va_end(ap);
}

/* CHECKF for the child: the first failure travels in the report. */
#define RCHECK(ctx, cond, ...)                                                 \
	do {                                                                   \
		if (!(cond))                                                   \
			rank_check_failed((ctx), __FILE__, __LINE__, #cond,    \
			    __VA_ARGS__);                                      \
	} while (0)

static inline void
rank_send(struct rank_ctx *ctx, const struct rank_msg *msg)
{
	const unsigned char *p = (const unsigned char *)msg;
	size_t left = sizeof(*msg);

	while (left > 0) {
		ssize_t n = write(ctx->out_fd, p, left);

		if (n < 0 && errno == EINTR)
			continue;
		if (n <= 0)
			_exit(3);
		p += n;
		left -= (size_t)n;
	}
}

static inline void
rank_event(struct rank_ctx *ctx, enum rank_event event)
{
	static struct rank_msg msg;

	memset(&msg, 0, sizeof(msg));
	msg.type = RANK_MSG_EVENT;
	msg.event = (int32_t)event;
	msg.t_ns = ranks_now_ns();
	rank_send(ctx, &msg);
}

/* Records the failure of the call that just returned -1. */
static inline int
rank_fail(struct rank_ctx *ctx, const struct sr_error *err)
{
	ctx->report->t_fail_ns = ranks_now_ns();
	ctx->report->err = *err;
	return -1;
}

/* Whether the parent has written its byte ("finish"); never blocks. */
static inline bool
rank_told(struct rank_ctx *ctx)
{
	struct pollfd pfd = { .fd = ctx->in_fd, .events = POLLIN };

	return poll(&pfd, 1, 0) == 1;
}

static inline void
rank_on_stray(void *arg, const char *peer_address, const char *reason)
{
	struct rank_ctx *ctx = arg;
	struct rank_report *rep = ctx->report;
	size_t n = strlen(rep->text);

	(void)peer_address;
	rep->strays++;
	snprintf(rep->text + n, sizeof(rep->text) - n, "%s|", reason);
	rank_event(ctx, RANK_EV_STRAY);
}

/* Waits (with the job's deadline) for the parent's byte, and takes it. */
static inline void
rank_hold(struct rank_ctx *ctx, int64_t deadline_ms)
{
	struct pollfd pfd = { .fd = ctx->in_fd, .events = POLLIN };
	char byte;
	int rc;

	do
		rc = poll(&pfd, 1, (int)deadline_ms);
	while (rc < 0 && errno == EINTR);
	RCHECK(ctx, rc == 1, "the parent never let this rank join");
	if (rc == 1 && read(ctx->in_fd, &byte, 1) != 1)
		RCHECK(ctx, 0, "reading the parent's byte: %s", strerror(errno));
}

static void __attribute__((noreturn))
rank_main(struct ranks *r, uint32_t rank, int out_fd, int in_fd)
{
	static struct rank_report report;
	static struct rank_msg msg;
	static struct sr_probe_link probe[RANKS_MAX];
	struct rank_ctx ctx = { .rank = rank, .world = r->job.world,
		.job = &r->job, .report = &report, .out_fd = out_fd,
		.in_fd = in_fd };
	struct sr_ring_options options;
	struct sr_error err;
	uint64_t token;

	/* Die with the parent; and a backstop should its deadline fail. */
	prctl(PR_SET_PDEATHSIG, SIGKILL);
	alarm((unsigned)(r->job.deadline_ms / 1000 + 10));
	for (uint32_t i = 0; i < r->job.world; i++) {
		if (i != rank)
			sr_listener_close(r->listener[i]);
		if (i < rank) {
			close(r->from[i]);
			close(r->to[i]);
		}
	}
	for (int i = 0; i < r->nparent_fds; i++)
		close(r->parent_fds[i]);

	memset(&report, 0, sizeof(report));
	report.rank = (int32_t)rank;
	sr_error_clear(&report.err);
	sr_ring_options_init(&options);
	options.timeout_ms = r->job.timeout_ms > 0 ? r->job.timeout_ms : 10000;
	options.on_stray = rank_on_stray;
	options.stray_arg = &ctx;
	options.congestion = r->job.congestion;
	options.mesh = r->job.mesh && !(r->job.ring_mask >> rank & 1);
	options.shared_cores = r->job.shared_cores;
	options.integrity = r->job.integrity;
	options.streams = r->job.streams_of[rank] ? r->job.streams_of[rank] :
	    r->job.streams;
	options.probe_ms = r->job.probe_ms;
	options.probe = probe;
	ctx.probe = probe;
	if (r->job.key != NULL && !(r->job.keyless_mask >> rank & 1)) {
		options.key = r->job.key;
		options.key_len = r->job.key_len;
	}
	token = r->job.token_of[rank] ? r->job.token_of[rank] : r->job.token;
	if (r->job.hold_mask >> rank & 1)
		rank_hold(&ctx, r->job.deadline_ms);

	/* Whatever the caller's error held before must not show through. */
	memset(&err, 0x5a, sizeof(err));
	report.t_start_ns = ranks_now_ns();
	if (r->job.join != NULL ? r->job.join(&ctx, &options, &err) != 0 :
	    sr_ring_connect(&ctx.ring, r->listener[rank], rank, r->addresses,
		r->job.world, token, &options, &err) != 0) {
		report.rc = rank_fail(&ctx, &err);
	} else {
		report.t_connected_ns = ranks_now_ns();
		rank_event(&ctx, RANK_EV_CONNECTED);
		report.rc = r->job.scenario(&ctx);
		sr_ring_close(ctx.ring);
	}
	report.t_end_ns = ranks_now_ns();
	memset(&msg, 0, sizeof(msg));
	msg.type = RANK_MSG_REPORT;
	msg.t_ns = report.t_end_ns;
	msg.report = report;
	rank_send(&ctx, &msg);
	_exit(0);
}

/* ----------------------------------------------------------- the parent */

/* Opens every rank's listener; the addresses are then in r->address. */
static inline int
ranks_open(struct ranks *r, const struct ranks_job *job)
{
	struct sr_error err;

	memset(r, 0, sizeof(*r));
	r->job = *job;
	if (r->job.token == 0)
		r->job.token = 0x5eed0000c0ffee01ULL;
	if (r->job.deadline_ms == 0)
		r->job.deadline_ms = 20000;
	for (int i = 0; i < RANKS_MAX; i++)
		r->from[i] = r->to[i] = -1;
	for (uint32_t i = 0; i < job->world; i++) {
		if (job->join != NULL) {
			snprintf(r->address[i], sizeof(r->address[i]),
			    "rank-%u", i);
			r->addresses[i] = r->address[i];
			continue;
		}
		if (sr_listener_open(&r->listener[i],
			job->host ? job->host : "127.0.0.1", NULL, 0, &err) != 0) {
			CHECKF(0, "rank %u: sr_listener_open: %s", i, err.message);
			for (uint32_t j = 0; j < i; j++)
				sr_listener_close(r->listener[j]);
			return -1;
		}
		snprintf(r->address[i], sizeof(r->address[i]), "%s",
		    sr_listener_address(r->listener[i]));
		r->addresses[i] = r->address[i];
	}
	return 0;
}

/* For a test that gives up between ranks_open and ranks_start. */
static inline void
ranks_close_listeners(struct ranks *r)
{
	for (uint32_t i = 0; i < r->job.world; i++) {
		sr_listener_close(r->listener[i]);
		r->listener[i] = NULL;
	}
}

/* A descriptor of the parent's (a stray) that the children must close. */
static inline void
ranks_parent_fd(struct ranks *r, int fd)
{
	if (r->nparent_fds < RANKS_PARENT_FDS)
		r->parent_fds[r->nparent_fds++] = fd;
}

static inline void
ranks_reap(struct ranks *r, uint32_t i)
{
	if (r->pid[i] <= 0 || r->reaped[i])
		return;
	while (waitpid(r->pid[i], &r->wstatus[i], 0) < 0 && errno == EINTR)
		;
	r->reaped[i] = true;
}

/* Forks the ranks; -1 when a fork fails (those forked are killed). */
static inline int
ranks_start(struct ranks *r)
{
	/* A write to a rank that has exited must fail, not kill the test. */
	signal(SIGPIPE, SIG_IGN);
	fflush(stdout);
	fflush(stderr);
	r->deadline_ns = ranks_now_ns() + r->job.deadline_ms * 1000000;
	for (uint32_t i = 0; i < r->job.world; i++) {
		int up[2], down[2];

		if (pipe(up) != 0 || pipe(down) != 0) {
			CHECKF(0, "pipe: %s", strerror(errno));
			goto fail;
		}
		r->pid[i] = fork();
		if (r->pid[i] < 0) {
			CHECKF(0, "fork: %s", strerror(errno));
			close(up[0]), close(up[1]), close(down[0]), close(down[1]);
			goto fail;
		}
		if (r->pid[i] == 0) {
			close(up[0]);
			close(down[1]);
			rank_main(r, i, up[1], down[0]);
		}
		close(up[1]);
		close(down[0]);
		r->from[i] = up[0];
		r->to[i] = down[1];
	}
	/* Only the children may accept now: a dead rank's port refuses. */
	for (uint32_t i = 0; i < r->job.world; i++) {
		sr_listener_close(r->listener[i]);
		r->listener[i] = NULL;
	}
	return 0;
fail:
	for (uint32_t i = 0; i < r->job.world; i++) {
		if (r->pid[i] > 0) {
			kill(r->pid[i], SIGKILL);
			ranks_reap(r, i);
		}
		if (r->from[i] >= 0)
			close(r->from[i]);
		if (r->to[i] >= 0)
			close(r->to[i]);
		r->from[i] = r->to[i] = -1;
		sr_listener_close(r->listener[i]);
		r->listener[i] = NULL;
	}
	return -1;
}

static inline void
ranks_message(struct ranks *r, uint32_t i)
{
	struct rank_msg msg;

	memcpy(&msg, r->buf[i], sizeof(msg));
	r->got[i] = 0;
	if (msg.type == RANK_MSG_EVENT && msg.event >= 0 &&
	    msg.event < RANK_EVENTS) {
		if (r->event_ns[i][msg.event] == 0)
			r->event_ns[i][msg.event] = msg.t_ns;
		r->event_count[i][msg.event]++;
	} else if (msg.type == RANK_MSG_REPORT) {
		r->report[i] = msg.report;
		r->reported[i] = true;
	}
}

typedef bool (*ranks_until_fn)(const struct ranks *r, const void *arg);

/*
 * Reads what the children send until done(r, arg) holds, every pipe is
 * closed, or until_ns passes.  A closed pipe is a child gone: it is reaped.
 */
static inline void
ranks_pump(struct ranks *r, int64_t until_ns, ranks_until_fn done,
    const void *arg)
{
	for (;;) {
		struct pollfd fds[RANKS_MAX];
		uint32_t which[RANKS_MAX];
		int n = 0, rc;

		if (done != NULL && done(r, arg))
			return;
		for (uint32_t i = 0; i < r->job.world; i++)
			if (r->from[i] >= 0) {
				fds[n].fd = r->from[i];
				fds[n].events = POLLIN;
				which[n++] = i;
			}
		if (n == 0 || ranks_now_ns() >= until_ns)
			return;
		rc = poll(fds, (nfds_t)n, ranks_left_ms(until_ns));
		if (rc < 0 && errno != EINTR) {
			CHECKF(0, "poll: %s", strerror(errno));
			return;
		}
		for (int k = 0; rc > 0 && k < n; k++) {
			uint32_t i = which[k];
			ssize_t got;

			if (fds[k].revents == 0)
				continue;
			got = read(r->from[i], r->buf[i] + r->got[i],
			    sizeof(struct rank_msg) - r->got[i]);
			if (got < 0 && errno == EINTR)
				continue;
			if (got <= 0) {
				close(r->from[i]);
				r->from[i] = -1;
				ranks_reap(r, i);
				continue;
			}
			r->got[i] += (size_t)got;
			if (r->got[i] == sizeof(struct rank_msg))
				ranks_message(r, i);
		}
	}
}

struct ranks_event_wait {
	uint32_t mask;
	enum rank_event event;
	int times;
};

static inline bool
ranks_have_event(const struct ranks *r, const void *arg)
{
	const struct ranks_event_wait *w = arg;

	for (uint32_t i = 0; i < r->job.world; i++)
		if ((w->mask >> i & 1) && r->event_count[i][w->event] < w->times)
			return false;
	return true;
}

/* Waits until every rank in mask has sent event `times` times; false at
 * the deadline (or when a rank exits without them). */
static inline bool
ranks_wait_event(struct ranks *r, uint32_t mask, enum rank_event event,
    int times, int64_t until_ns)
{
	struct ranks_event_wait w = { mask, event, times };

	if (until_ns > r->deadline_ns)
		until_ns = r->deadline_ns;
	ranks_pump(r, until_ns, ranks_have_event, &w);
	return ranks_have_event(r, &w);
}

static inline bool
ranks_have_reports(const struct ranks *r, const void *arg)
{
	uint32_t mask = *(const uint32_t *)arg;

	for (uint32_t i = 0; i < r->job.world; i++)
		if ((mask >> i & 1) && !r->reported[i] && r->from[i] >= 0)
			return false;
	return true;
}

/* Waits for the reports of the ranks in mask (or their exit). */
static inline void
ranks_wait_reports(struct ranks *r, uint32_t mask, int64_t until_ns)
{
	if (until_ns > r->deadline_ns)
		until_ns = r->deadline_ns;
	ranks_pump(r, until_ns, ranks_have_reports, &mask);
}

/* Writes the rank its byte.  A rank that has already exited cannot be
 * told, which is no failure of the telling (the parent ignores SIGPIPE). */
static inline void
ranks_tell(struct ranks *r, uint32_t rank)
{
	if (r->to[rank] >= 0 && write(r->to[rank], "f", 1) != 1)
		CHECKF(errno == EPIPE, "telling rank %u: %s", rank,
		    strerror(errno));
}

static inline int64_t
ranks_kill(struct ranks *r, uint32_t rank, int sig)
{
	int64_t t = ranks_now_ns();

	if (r->pid[rank] > 0 && !r->reaped[rank])
		CHECKF(kill(r->pid[rank], sig) == 0, "kill rank %u: %s", rank,
		    strerror(errno));
	return t;
}

/*
 * Waits for every child to report and exit, up to the job's deadline;
 * then SIGKILLs the stragglers it forked and fails.  Always reaps.
 */
static inline void
ranks_finish(struct ranks *r)
{
	bool late = false;

	ranks_pump(r, r->deadline_ns, NULL, NULL);
	for (uint32_t i = 0; i < r->job.world; i++) {
		if (r->from[i] < 0)
			continue;
		late = true;
		printf("# rank %u (pid %d) missed the %lld ms deadline; "
		    "killing it\n", i, (int)r->pid[i],
		    (long long)r->job.deadline_ms);
		kill(r->pid[i], SIGKILL);
		/* SIGCONT too: a stopped child dies of SIGKILL all the same,
		 * but say so plainly. */
		kill(r->pid[i], SIGCONT);
	}
	for (uint32_t i = 0; i < r->job.world; i++) {
		if (r->from[i] >= 0) {
			close(r->from[i]);
			r->from[i] = -1;
		}
		ranks_reap(r, i);
		if (r->to[i] >= 0) {
			close(r->to[i]);
			r->to[i] = -1;
		}
	}
	r->killed_at_deadline = late;
	CHECKF(!late, "some rank missed the job's deadline");
}

/* The usual verdict: every rank in mask reported, exited 0 and passed its
 * checks; with want_ok, also succeeded. */
static inline void
ranks_check_clean(const struct ranks *r, uint32_t mask, bool want_ok)
{
	char text[SR_MESSAGE_MAX + 32];

	for (uint32_t i = 0; i < r->job.world; i++) {
		const struct rank_report *rep = &r->report[i];

		if (!(mask >> i & 1))
			continue;

		CHECKF(r->reported[i], "rank %u sent no report", i);
		CHECKF(r->reaped[i] && WIFEXITED(r->wstatus[i]) &&
		    WEXITSTATUS(r->wstatus[i]) == 0,
		    "rank %u ended with wait status %#x", i, r->wstatus[i]);
		if (!r->reported[i])
			continue;
		CHECKF(rep->failed_checks == 0, "rank %u: %d failed check(s), "
		    "the first %s", i, rep->failed_checks, rep->first_failure);
		if (want_ok)
			CHECKF(rep->rc == 0, "rank %u failed: %s (%s)", i,
			    sr_error_format(&rep->err, text, sizeof(text)),
			    sr_code_name(rep->err.code));
	}
}

#endif
