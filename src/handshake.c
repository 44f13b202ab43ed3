/*
 * handshake.c - ring formation: connect to the next rank, accept the
 * previous one, and run the silvic-net handshake on both links at once.
 *
 * One poll loop drives the connector (connect with backoff, send the
 * hello, await the verdict) and the acceptor (accept every pending
 * connection, read each hello with its own short deadline, judge it).
 * Strays are dropped and the wait goes on, so a silent or foreign
 * connection never holds up the real previous rank queued behind it.
 * Nothing here reads a byte beyond the fixed-size hello and verdict.
 */
#include <errno.h>
#include <netinet/in.h>
#include <poll.h>
#include <stdio.h>
#include <string.h>
#include <sys/socket.h>
#include <unistd.h>

#include "internal.h"

/* A rank sends its hello right after connecting; a connection that stays
 * silent this long is a stray. */
#define HELLO_TIMEOUT_NS (5LL * 1000000000)
#define BACKOFF_FIRST_NS (10LL * 1000000)
#define BACKOFF_MAX_NS (250LL * 1000000)
/* Handshakes read at once; more connections wait in the kernel backlog. */
#define PENDING_MAX 16

enum connector_state {
	CONNECT_BACKOFF,
	CONNECT_IN_PROGRESS,
	CONNECT_SEND_HELLO,
	CONNECT_AWAIT_VERDICT,
	CONNECT_DONE
};

struct connector {
	enum connector_state state;
	int fd;
	struct sr_sockaddr addr;
	const char *address;
	uint32_t peer;
	int64_t retry_at;
	int64_t backoff;
	uint8_t hello[SR_HELLO_LEN];
	uint8_t verdict[SR_VERDICT_LEN];
	size_t done;
	int attempts;
	char last_error[160];
};

struct pending {
	int fd;
	int64_t deadline;
	size_t got;
	uint8_t hello[SR_HELLO_LEN];
	char address[SR_ADDR_MAX];
};

struct acceptor {
	int listen_fd;
	uint32_t expected;
	int prev_fd;
	struct pending pending[PENDING_MAX];
	int npending;
	unsigned long rejected;
	char last_from[SR_ADDR_MAX];
	char last_reason[200];
};

struct formation {
	uint32_t rank, world;
	uint64_t token;
	const struct sr_ring_options *options;
	int64_t started, deadline;
	struct connector c;
	struct acceptor a;
};

static void
close_fd(int *fd)
{
	if (*fd >= 0)
		close(*fd);
	*fd = -1;
}

/* ---------------------------------------------------------- the connector */

static void
connector_retry(struct formation *f, const char *why)
{
	struct connector *c = &f->c;

	close_fd(&c->fd);
	snprintf(c->last_error, sizeof(c->last_error), "%s", why);
	c->state = CONNECT_BACKOFF;
	c->retry_at = sr_clock_ns() + c->backoff;
	c->backoff = c->backoff * 2 > BACKOFF_MAX_NS ? BACKOFF_MAX_NS :
	    c->backoff * 2;
}

static void
connector_start(struct formation *f)
{
	struct connector *c = &f->c;
	struct sr_hello hello = { f->rank, f->world, f->token };

	c->attempts++;
	c->fd = socket(c->addr.ss.ss_family,
	    SOCK_STREAM | SOCK_NONBLOCK | SOCK_CLOEXEC, 0);
	if (c->fd < 0) {
		connector_retry(f, strerror(errno));
		return;
	}
	sr_hello_encode(&hello, c->hello);
	c->done = 0;
	if (connect(c->fd, (struct sockaddr *)&c->addr.ss, c->addr.len) == 0)
		c->state = CONNECT_SEND_HELLO;
	else if (errno == EINPROGRESS)
		c->state = CONNECT_IN_PROGRESS;
	else
		connector_retry(f, strerror(errno));
}

/* Returns -1 (err filled) on a failure no retry can mend. */
static int
connector_progress(struct formation *f, short revents, struct sr_error *err)
{
	struct connector *c = &f->c;
	enum sr_verdict verdict;
	uint32_t acceptor;
	socklen_t len = sizeof(int);
	ssize_t n;
	int soerr = 0;

	switch (c->state) {
	case CONNECT_BACKOFF:
		if (sr_clock_ns() >= c->retry_at)
			connector_start(f);
		return 0;
	case CONNECT_IN_PROGRESS:
		if (revents == 0)
			return 0;
		if (getsockopt(c->fd, SOL_SOCKET, SO_ERROR, &soerr, &len) != 0)
			soerr = errno;
		if (soerr != 0) {
			connector_retry(f, strerror(soerr));
			return 0;
		}
		/* A fresh socket takes the 32 bytes at once. */
		c->state = CONNECT_SEND_HELLO;
		__attribute__((fallthrough));
	case CONNECT_SEND_HELLO:
		n = send(c->fd, c->hello + c->done, SR_HELLO_LEN - c->done,
		    MSG_NOSIGNAL);
		if (n < 0 && (errno == EAGAIN || errno == EINTR))
			return 0;
		if (n < 0) {
			connector_retry(f, strerror(errno));
			return 0;
		}
		c->done += (size_t)n;
		if (c->done == SR_HELLO_LEN) {
			c->state = CONNECT_AWAIT_VERDICT;
			c->done = 0;
		}
		return 0;
	case CONNECT_AWAIT_VERDICT:
		if (revents == 0)
			return 0;
		n = recv(c->fd, c->verdict + c->done, SR_VERDICT_LEN - c->done, 0);
		if (n < 0 && (errno == EAGAIN || errno == EINTR))
			return 0;
		if (n <= 0) {
			/*
			 * Closed before any verdict: the acceptor was busy
			 * with strays or restarting.  Try again; a verdict,
			 * once given, is final.
			 */
			connector_retry(f, n == 0 ?
			    "the connection closed before the handshake answer" :
			    strerror(errno));
			return 0;
		}
		c->done += (size_t)n;
		if (c->done < SR_VERDICT_LEN)
			return 0;
		if (sr_verdict_decode(c->verdict, &verdict, &acceptor) != 0) {
			sr_err_set(err, SR_EHANDSHAKE, SR_PHASE_HANDSHAKE,
			    "the listener at %s is not a silvic rank (its "
			    "answer to the hello is not a verdict)", c->address);
			return -1;
		}
		if (verdict != SR_VERDICT_ACCEPTED) {
			sr_err_set(err, SR_EREJECTED, SR_PHASE_HANDSHAKE,
			    "rank %u at %s rejected this rank: %s", c->peer,
			    c->address, sr_verdict_reason(verdict));
			return -1;
		}
		if (acceptor != c->peer) {
			sr_err_set(err, SR_EHANDSHAKE, SR_PHASE_HANDSHAKE,
			    "the listener at %s is rank %u, not rank %u",
			    c->address, acceptor, c->peer);
			return -1;
		}
		c->state = CONNECT_DONE;
		return 0;
	case CONNECT_DONE:
		return 0;
	}
	return 0;
}

/* ----------------------------------------------------------- the acceptor */

static void
reject(struct formation *f, const char *from, const char *fmt, ...)
    SR_PRINTF(3, 4);

static void
reject(struct formation *f, const char *from, const char *fmt, ...)
{
	struct acceptor *a = &f->a;
	va_list ap;

	a->rejected++;
	snprintf(a->last_from, sizeof(a->last_from), "%s", from);
	va_start(ap, fmt);
	vsnprintf(a->last_reason, sizeof(a->last_reason), fmt, ap);
	va_end(ap);
	if (f->options->on_stray != NULL)
		f->options->on_stray(f->options->stray_arg, from, a->last_reason);
}

/* Keeps the others in accept order: the first to arrive is judged first. */
static void
pending_drop(struct acceptor *a, int i)
{
	close_fd(&a->pending[i].fd);
	memmove(&a->pending[i], &a->pending[i + 1],
	    (size_t)(a->npending - i - 1) * sizeof(a->pending[0]));
	a->npending--;
}

static void
acceptor_accept(struct formation *f)
{
	struct acceptor *a = &f->a;
	struct sr_sockaddr peer;
	struct pending *p;
	int fd;

	for (;;) {
		peer.len = sizeof(peer.ss);
		fd = accept4(a->listen_fd, (struct sockaddr *)&peer.ss, &peer.len,
		    SOCK_NONBLOCK | SOCK_CLOEXEC);
		if (fd < 0)
			return; /* EAGAIN, or a stray that reset: keep waiting */
		if (a->npending == PENDING_MAX) {
			/* The oldest pending handshake makes room: it has had
			 * the longest to speak. */
			char from[SR_ADDR_MAX];

			snprintf(from, sizeof(from), "%s", a->pending[0].address);
			pending_drop(a, 0);
			reject(f, from, "too many pending handshakes; dropped "
			    "the oldest");
		}
		p = &a->pending[a->npending++];
		memset(p, 0, sizeof(*p));
		p->fd = fd;
		p->deadline = sr_clock_ns() + HELLO_TIMEOUT_NS;
		sr_sock_format(&peer, p->address, sizeof(p->address));
	}
}

/* Reads and judges pending handshake i; returns true when it was dropped
 * or accepted (the slot changed). */
static bool
pending_progress(struct formation *f, int i)
{
	struct acceptor *a = &f->a;
	struct pending *p = &a->pending[i];
	struct sr_hello hello;
	uint8_t answer[SR_VERDICT_LEN];
	enum sr_verdict verdict;
	const char *why;
	ssize_t n;

	n = recv(p->fd, p->hello + p->got, SR_HELLO_LEN - p->got, 0);
	if (n < 0 && (errno == EAGAIN || errno == EINTR))
		return false;
	if (n <= 0) {
		reject(f, p->address, "closed after %zu of %d handshake bytes%s%s",
		    p->got, SR_HELLO_LEN, n < 0 ? ": " : "",
		    n < 0 ? strerror(errno) : "");
		pending_drop(a, i);
		return true;
	}
	p->got += (size_t)n;
	if (p->got < SR_HELLO_LEN)
		return false;
	if (sr_hello_decode(p->hello, &hello, &why) != 0) {
		reject(f, p->address, "%s", why);
		pending_drop(a, i);
		return true;
	}
	verdict = sr_hello_judge(&hello, f->token, f->world, a->expected);
	sr_verdict_encode(verdict, f->rank, answer);
	/* A fresh socket's buffer takes 16 bytes at once; to a rejected peer
	 * the answer is best effort, as it is dropped either way. */
	n = send(p->fd, answer, sizeof(answer), MSG_NOSIGNAL);
	if (verdict != SR_VERDICT_ACCEPTED) {
		reject(f, p->address, "%s (it claims rank %u of %u)",
		    sr_verdict_reason(verdict), hello.rank, hello.world);
		pending_drop(a, i);
		return true;
	}
	if (n != (ssize_t)sizeof(answer)) {
		reject(f, p->address, "answering its handshake failed: %s",
		    n < 0 ? strerror(errno) : "short write");
		pending_drop(a, i);
		return true;
	}
	a->prev_fd = p->fd;
	p->fd = -1;
	pending_drop(a, i);
	return true;
}

static void
pending_expire(struct formation *f, int64_t now)
{
	struct acceptor *a = &f->a;

	for (int i = 0; i < a->npending;) {
		struct pending *p = &a->pending[i];

		if (now < p->deadline) {
			i++;
			continue;
		}
		reject(f, p->address, "sent %zu of %d handshake bytes in 5s",
		    p->got, SR_HELLO_LEN);
		pending_drop(a, i);
	}
}

/* ---------------------------------------------------------- the poll loop */

static void
timeout_message(struct formation *f, struct sr_error *err)
{
	char took[32], waited[300] = "", rejected[400] = "";
	const char *next_addr = f->c.address;

	sr_clock_format_ms(f->options->timeout_ms, took, sizeof(took));
	if (f->c.state != CONNECT_DONE) {
		const char *what = f->c.state == CONNECT_AWAIT_VERDICT ?
		    "an answer to the handshake from" : "a connection to";

		snprintf(waited, sizeof(waited), "%s rank %u at %s%s%s%s", what,
		    f->c.peer, next_addr, f->c.last_error[0] ? " (last error: " : "",
		    f->c.last_error, f->c.last_error[0] ? ")" : "");
		sr_err_peer(err, f->c.peer, next_addr);
	}
	if (f->a.prev_fd < 0) {
		size_t n = strlen(waited);

		snprintf(waited + n, sizeof(waited) - n, "%srank %u to connect",
		    n ? " and for " : "", f->a.expected);
		sr_err_peer(err, f->a.expected, NULL);
	}
	if (f->a.rejected > 0)
		snprintf(rejected, sizeof(rejected),
		    "; rejected %lu connection(s), the last from %s: %s",
		    f->a.rejected, f->a.last_from, f->a.last_reason);
	sr_err_set(err, SR_ETIMEOUT,
	    f->c.state != CONNECT_DONE ? SR_PHASE_CONNECT : SR_PHASE_ACCEPT,
	    "timed out after %s waiting for %s%s", took, waited, rejected);
}

static int
form_loop(struct formation *f, struct sr_error *err)
{
	struct pollfd fds[2 + PENDING_MAX];
	struct connector *c = &f->c;
	struct acceptor *a = &f->a;

	for (;;) {
		int64_t now = sr_clock_ns(), wake = f->deadline;
		int nfds = 0, cidx = -1, lidx = -1, rc;

		if (c->state == CONNECT_DONE && a->prev_fd >= 0)
			return 0;
		if (f->options->cancel != NULL && *f->options->cancel) {
			sr_err_set(err, SR_EINTERRUPTED, SR_PHASE_CONNECT,
			    "interrupted while forming the ring");
			return -1;
		}
		if (now >= f->deadline) {
			timeout_message(f, err);
			return -1;
		}
		pending_expire(f, now);
		if (c->state == CONNECT_BACKOFF) {
			if (now >= c->retry_at) {
				if (connector_progress(f, 0, err) != 0)
					return -1;
				continue;
			}
			if (c->retry_at < wake)
				wake = c->retry_at;
		} else if (c->state != CONNECT_DONE) {
			cidx = nfds;
			fds[nfds].fd = c->fd;
			fds[nfds++].events = c->state == CONNECT_AWAIT_VERDICT ?
			    POLLIN : POLLOUT;
		}
		if (a->prev_fd < 0) {
			lidx = nfds;
			fds[nfds].fd = a->listen_fd;
			fds[nfds++].events = POLLIN;
			for (int i = 0; i < a->npending; i++) {
				fds[nfds].fd = a->pending[i].fd;
				fds[nfds++].events = POLLIN;
				if (a->pending[i].deadline < wake)
					wake = a->pending[i].deadline;
			}
		}
		rc = poll(fds, (nfds_t)nfds, sr_clock_left_ms(wake));
		if (rc < 0 && errno != EINTR) {
			sr_err_set(err, SR_EIO, SR_PHASE_CONNECT, "poll: %s",
			    strerror(errno));
			return -1;
		}
		if (rc <= 0)
			continue;
		if (cidx >= 0 && fds[cidx].revents != 0 &&
		    connector_progress(f, fds[cidx].revents, err) != 0)
			return -1;
		if (lidx < 0)
			continue;
		/* In accept order, so strays queued ahead of the real rank
		 * get their verdict too; slots move as others drop. */
		for (int i = lidx + 1; i < nfds && a->prev_fd < 0; i++) {
			if (fds[i].revents == 0)
				continue;
			for (int slot = 0; slot < a->npending; slot++)
				if (a->pending[slot].fd == fds[i].fd) {
					pending_progress(f, slot);
					break;
				}
		}
		if (a->prev_fd < 0 && fds[lidx].revents != 0)
			acceptor_accept(f);
	}
}

int
sr_handshake_form(int listen_fd, uint32_t rank, uint32_t world, uint64_t token,
    const char *const *addresses, const struct sr_ring_options *options,
    int *next_fd, int *prev_fd, struct sr_error *err)
{
	struct formation f;
	char host[SR_ADDR_MAX], why[256];
	uint16_t port;
	int rc;

	memset(&f, 0, sizeof(f));
	f.rank = rank;
	f.world = world;
	f.token = token;
	f.options = options;
	f.started = sr_clock_ns();
	f.deadline = f.started + options->timeout_ms * 1000000;
	f.c.fd = -1;
	f.c.peer = (rank + 1) % world;
	f.c.address = addresses[f.c.peer];
	f.c.backoff = BACKOFF_FIRST_NS;
	f.c.state = CONNECT_BACKOFF;
	f.c.retry_at = f.started;
	f.a.listen_fd = listen_fd;
	f.a.prev_fd = -1;
	f.a.expected = (rank + world - 1) % world;

	if (sr_sock_split(f.c.address, host, sizeof(host), &port, why,
		sizeof(why)) != 0 ||
	    sr_sock_resolve(host, port, 0, &f.c.addr, why, sizeof(why)) != 0) {
		sr_err_set(err, SR_ECONFIG, SR_PHASE_CONNECT,
		    "the address of rank %u is unusable: %s", f.c.peer, why);
		sr_err_peer(err, f.c.peer, f.c.address);
		return -1;
	}
	if (sr_sock_nonblocking(listen_fd) != 0) {
		sr_err_set(err, SR_EIO, SR_PHASE_ACCEPT,
		    "configuring the listener: %s", strerror(errno));
		return -1;
	}
	rc = form_loop(&f, err);
	while (f.a.npending > 0)
		pending_drop(&f.a, 0);
	if (rc != 0) {
		if (err->phase == SR_PHASE_HANDSHAKE)
			sr_err_peer(err, f.c.peer, f.c.address);
		close_fd(&f.c.fd);
		close_fd(&f.a.prev_fd);
		return -1;
	}
	*next_fd = f.c.fd;
	*prev_fd = f.a.prev_fd;
	return 0;
}
