/*
 * handshake.c - ring formation: connect to the next rank, accept the
 * previous one, and run the silvic-net handshake on both links at once.
 *
 * One poll loop drives the connector (connect with backoff, then the
 * exchange: hello and verdict, and with a key the challenge, response,
 * proof and result of auth.c) and the acceptor (accept every pending
 * connection and run each one's side of the exchange with its own short
 * deadline).  Strays are dropped and the wait goes on, so a silent or
 * foreign connection never holds up the real previous rank queued behind
 * it.  Nothing here reads a byte beyond the fixed-size messages.
 */
#include <errno.h>
#include <netinet/in.h>
#include <poll.h>
#include <stdio.h>
#include <string.h>
#include <sys/socket.h>
#include <unistd.h>

#include "internal.h"

/* A rank speaks right after connecting; a connection that has not
 * finished its handshake this long after being accepted is a stray. */
#define HELLO_TIMEOUT_NS (5LL * 1000000000)
#define BACKOFF_FIRST_NS (10LL * 1000000)
#define BACKOFF_MAX_NS (250LL * 1000000)
/* Handshakes read at once; more connections wait in the kernel backlog. */
#define PENDING_MAX 16
#define MESSAGE_MAX SR_RESPONSE_LEN
/* Out of descriptors, the listener rests this long before accepting. */
#define ACCEPT_PAUSE_NS (100LL * 1000000)

/* One message to send, then one to receive, on a socket. */
struct exchange {
	uint8_t out[MESSAGE_MAX];
	size_t out_len, out_done;
	uint8_t in[MESSAGE_MAX];
	size_t in_len, in_got;
	int stage;
};

enum connector_state {
	CONNECT_BACKOFF,
	CONNECT_IN_PROGRESS,
	CONNECT_TALK,
	CONNECT_DONE
};

/* Exchange stages, on both sides. */
enum { STAGE_HELLO, STAGE_CHALLENGE, STAGE_PROOF };

struct connector {
	enum connector_state state;
	int fd;
	struct sr_sockaddr addr;
	const char *address;
	uint32_t peer;
	int64_t retry_at;
	int64_t backoff;
	struct exchange x;
	struct sr_auth auth;
	char last_error[160];
};

struct pending {
	int fd;
	int64_t deadline;
	struct exchange x;
	struct sr_auth auth;
	char address[SR_ADDR_MAX];
};

struct acceptor {
	int listen_fd;
	uint32_t expected;
	int prev_fd;
	struct pending pending[PENDING_MAX];
	int npending;
	unsigned long rejected;
	int64_t paused_until;	/* out of descriptors: accept later */
	bool last_was_auth;
	char last_from[SR_ADDR_MAX];
	char last_reason[200];
};

struct formation {
	uint32_t rank, world;
	uint64_t token;
	const struct sr_ring_options *options;
	bool keyed;
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

static void
expect_message(struct exchange *x, int stage, size_t out_len, size_t in_len)
{
	x->stage = stage;
	x->out_len = out_len;
	x->out_done = 0;
	x->in_len = in_len;
	x->in_got = 0;
}

/*
 * Moves an exchange on: sends what is queued, then reads what is expected.
 * 1 when the expected message is complete, 0 to poll again, -1 on a socket
 * error or EOF (why says which).
 */
static int
exchange_progress(int fd, struct exchange *x, const char **why)
{
	ssize_t n;

	while (x->out_done < x->out_len) {
		n = send(fd, x->out + x->out_done, x->out_len - x->out_done,
		    MSG_NOSIGNAL | MSG_DONTWAIT);
		if (n < 0 && errno == EINTR)
			continue;
		if (n < 0 && errno == EAGAIN)
			return 0;
		if (n < 0) {
			*why = strerror(errno);
			return -1;
		}
		x->out_done += (size_t)n;
	}
	while (x->in_got < x->in_len) {
		n = recv(fd, x->in + x->in_got, x->in_len - x->in_got,
		    MSG_DONTWAIT);
		if (n < 0 && errno == EINTR)
			continue;
		if (n < 0 && errno == EAGAIN)
			return 0;
		if (n <= 0) {
			*why = n == 0 ? "the connection closed" : strerror(errno);
			return -1;
		}
		x->in_got += (size_t)n;
	}
	return 1;
}

static short
exchange_events(const struct exchange *x)
{
	return x->out_done < x->out_len ? POLLOUT : POLLIN;
}

static void
auth_init(struct formation *f, struct sr_auth *a, uint32_t connector,
    uint32_t acceptor)
{
	memset(a, 0, sizeof(*a));
	a->key = f->options->key;
	a->key_len = f->options->key_len;
	a->connector = connector;
	a->acceptor = acceptor;
	a->world = f->world;
	a->token = f->token;
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
	struct sr_hello hello = { f->rank, f->world, f->token,
		(f->keyed ? SR_HELLO_AUTH : 0) |
		    (f->options->integrity ? SR_HELLO_CRC : 0) };

	c->fd = socket(c->addr.ss.ss_family,
	    SOCK_STREAM | SOCK_NONBLOCK | SOCK_CLOEXEC, 0);
	if (c->fd < 0) {
		connector_retry(f, strerror(errno));
		return;
	}
	sr_hello_encode(&hello, c->x.out);
	expect_message(&c->x, STAGE_HELLO, SR_HELLO_LEN, SR_VERDICT_LEN);
	if (connect(c->fd, (struct sockaddr *)&c->addr.ss, c->addr.len) == 0)
		c->state = CONNECT_TALK;
	else if (errno == EINPROGRESS)
		c->state = CONNECT_IN_PROGRESS;
	else
		connector_retry(f, strerror(errno));
}

static int
connector_verdict(struct formation *f, struct sr_error *err)
{
	struct connector *c = &f->c;
	enum sr_verdict verdict;
	uint32_t acceptor;

	if (sr_verdict_decode(c->x.in, &verdict, &acceptor) != 0) {
		sr_err_set(err, SR_EHANDSHAKE, SR_PHASE_HANDSHAKE,
		    "the listener at %s is not a silvic rank (its answer to "
		    "the hello is not a verdict)", c->address);
		return -1;
	}
	if (verdict != SR_VERDICT_ACCEPTED) {
		bool auth = verdict == SR_VERDICT_AUTH_REQUIRED ||
		    verdict == SR_VERDICT_NO_KEY;

		sr_err_set(err, auth ? SR_EAUTH : SR_EREJECTED,
		    SR_PHASE_HANDSHAKE, "rank %u at %s rejected this rank: %s",
		    c->peer, c->address, sr_verdict_reason(verdict));
		return -1;
	}
	if (acceptor != c->peer) {
		sr_err_set(err, SR_EHANDSHAKE, SR_PHASE_HANDSHAKE,
		    "the listener at %s is rank %u, not rank %u", c->address,
		    acceptor, c->peer);
		return -1;
	}
	if (!f->keyed) {
		c->state = CONNECT_DONE;
		return 0;
	}
	auth_init(f, &c->auth, f->rank, c->peer);
	if (sr_auth_nonce(c->auth.nonce_connector) != 0) {
		sr_err_set(err, SR_EAUTH, SR_PHASE_HANDSHAKE,
		    "no random bytes for the challenge: %s", strerror(errno));
		return -1;
	}
	memcpy(c->x.out, SR_AUTH_MAGIC, SR_MAGIC_LEN);
	memcpy(c->x.out + SR_MAGIC_LEN, c->auth.nonce_connector, SR_NONCE_LEN);
	expect_message(&c->x, STAGE_CHALLENGE, SR_CHALLENGE_LEN,
	    SR_RESPONSE_LEN);
	return 0;
}

static int
auth_failed(struct sr_error *err, uint32_t peer, const char *address,
    const char *what)
{
	sr_err_set(err, SR_EAUTH, SR_PHASE_HANDSHAKE,
	    "authentication with rank %u at %s failed: %s", peer, address, what);
	return -1;
}

/* The acceptor's response: prove this rank in turn, then check it. */
static int
connector_response(struct formation *f, struct sr_error *err)
{
	struct connector *c = &f->c;
	uint8_t mac[SR_MAC_LEN];
	bool valid;

	if (memcmp(c->x.in, SR_AUTH_MAGIC, SR_MAGIC_LEN) != 0)
		return auth_failed(err, c->peer, c->address,
		    "its answer to the challenge is not an authentication "
		    "message");
	memcpy(c->auth.nonce_acceptor, c->x.in + SR_MAGIC_LEN, SR_NONCE_LEN);
	valid = sr_auth_verify(&c->auth, SR_AUTH_ACCEPTOR,
	    c->x.in + SR_MAGIC_LEN + SR_NONCE_LEN);
	if (sr_auth_mac(&c->auth, SR_AUTH_CONNECTOR, mac) != 0)
		return auth_failed(err, c->peer, c->address,
		    "computing the MAC failed");
	memcpy(c->x.out, SR_AUTH_MAGIC, SR_MAGIC_LEN);
	memcpy(c->x.out + SR_MAGIC_LEN, mac, SR_MAC_LEN);
	expect_message(&c->x, STAGE_PROOF, SR_PROOF_LEN, SR_RESULT_LEN);
	if (!valid) {
		/* Send the proof anyway (it reveals nothing), so the peer can
		 * say "wrong key" too rather than "closed". */
		send(c->fd, c->x.out, SR_PROOF_LEN, MSG_NOSIGNAL | MSG_DONTWAIT);
		return auth_failed(err, c->peer, c->address,
		    "its proof does not match this rank's key (another key?)");
	}
	return 0;
}

static int
connector_result(struct formation *f, struct sr_error *err)
{
	struct connector *c = &f->c;

	if (memcmp(c->x.in, SR_AUTH_MAGIC, SR_MAGIC_LEN) != 0 ||
	    sr_get_u32le(c->x.in + SR_MAGIC_LEN) != 0)
		return auth_failed(err, c->peer, c->address,
		    "it rejected this rank's proof (another key?)");
	c->state = CONNECT_DONE;
	return 0;
}

/* Returns -1 (err filled) on a failure no retry can mend. */
static int
connector_progress(struct formation *f, short revents, struct sr_error *err)
{
	struct connector *c = &f->c;
	socklen_t len = sizeof(int);
	const char *why = NULL;
	int soerr = 0, rc;

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
		c->state = CONNECT_TALK;
		return connector_progress(f, revents, err);
	case CONNECT_TALK:
		rc = exchange_progress(c->fd, &c->x, &why);
		if (rc == 0)
			return 0;
		if (rc < 0 && c->x.stage == STAGE_HELLO) {
			/*
			 * Closed before any verdict: the acceptor was busy
			 * with strays or restarting.  Try again; a verdict,
			 * once given, is final.
			 */
			connector_retry(f, strcmp(why, "the connection closed") ?
			    why : "the connection closed before the handshake "
			    "answer");
			return 0;
		}
		if (rc < 0) {
			/* Closed before its verdict on this rank's proof: the
			 * acceptor dropped the link (a flood of strays, or it
			 * restarted).  A rejection would have come as one. */
			connector_retry(f, why);
			return 0;
		}
		if (c->x.stage == STAGE_HELLO)
			rc = connector_verdict(f, err);
		else if (c->x.stage == STAGE_CHALLENGE)
			rc = connector_response(f, err);
		else
			rc = connector_result(f, err);
		if (rc != 0 || c->state == CONNECT_DONE)
			return rc;
		return connector_progress(f, 0, err);
	case CONNECT_DONE:
		return 0;
	}
	return 0;
}

/* ----------------------------------------------------------- the acceptor */

static void
reject(struct formation *f, const char *from, bool auth, const char *fmt, ...)
    SR_PRINTF(4, 5);

static void
reject(struct formation *f, const char *from, bool auth, const char *fmt, ...)
{
	struct acceptor *a = &f->a;
	va_list ap;

	a->rejected++;
	a->last_was_auth = auth;
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
	memset(&a->pending[i].auth, 0, sizeof(a->pending[i].auth));
	memmove(&a->pending[i], &a->pending[i + 1],
	    (size_t)(a->npending - i - 1) * sizeof(a->pending[0]));
	a->npending--;
}

/*
 * Drops the oldest connection still silent about its hello to make room:
 * it has had the longest to speak.  One past its hello (the real previous
 * rank, likely, mid-authentication) keeps its place.
 */
static bool
make_room(struct formation *f)
{
	struct acceptor *a = &f->a;
	char from[SR_ADDR_MAX];

	for (int i = 0; i < a->npending; i++)
		if (a->pending[i].x.stage == STAGE_HELLO) {
			snprintf(from, sizeof(from), "%s", a->pending[i].address);
			pending_drop(a, i);
			reject(f, from, false, "too many pending handshakes; "
			    "dropped the oldest");
			return true;
		}
	return false;
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
		if (fd < 0 && (errno == EMFILE || errno == ENFILE ||
		    errno == ENOBUFS || errno == ENOMEM)) {
			/* The connection stays queued; polling the listener
			 * now would spin. */
			a->paused_until = sr_clock_ns() + ACCEPT_PAUSE_NS;
			reject(f, "the listener", false, "cannot accept: %s",
			    strerror(errno));
			return;
		}
		if (fd < 0)
			return; /* EAGAIN, or a stray that reset: keep waiting */
		if (a->npending == PENDING_MAX && !make_room(f)) {
			char from[SR_ADDR_MAX];

			sr_sock_format(&peer, from, sizeof(from));
			close(fd);
			reject(f, from, false, "too many pending handshakes");
			continue;
		}
		p = &a->pending[a->npending++];
		memset(p, 0, sizeof(*p));
		p->fd = fd;
		p->deadline = sr_clock_ns() + HELLO_TIMEOUT_NS;
		expect_message(&p->x, STAGE_HELLO, 0, SR_HELLO_LEN);
		sr_sock_format(&peer, p->address, sizeof(p->address));
	}
}

/* Judges a hello; queues the verdict.  1 to go on, 0 rejected. */
static int
pending_hello(struct formation *f, struct pending *p)
{
	struct sr_hello hello;
	enum sr_verdict verdict;
	const char *why;

	if (sr_hello_decode(p->x.in, &hello, &why) != 0) {
		reject(f, p->address, false, "%s", why);
		return 0;
	}
	verdict = sr_hello_judge(&hello, f->token, f->world, f->a.expected);
	if (verdict == SR_VERDICT_ACCEPTED && f->keyed &&
	    !(hello.flags & SR_HELLO_AUTH))
		verdict = SR_VERDICT_AUTH_REQUIRED;
	else if (verdict == SR_VERDICT_ACCEPTED && !f->keyed &&
	    (hello.flags & SR_HELLO_AUTH))
		verdict = SR_VERDICT_NO_KEY;
	else if (verdict == SR_VERDICT_ACCEPTED &&
	    !(hello.flags & SR_HELLO_CRC) != !f->options->integrity)
		verdict = SR_VERDICT_INTEGRITY;
	sr_verdict_encode(verdict, f->rank, p->x.out);
	expect_message(&p->x, STAGE_CHALLENGE, SR_VERDICT_LEN,
	    f->keyed ? SR_CHALLENGE_LEN : 0);
	if (verdict == SR_VERDICT_AUTH_REQUIRED) {
		/* The answer to a rejected peer is best effort. */
		send(p->fd, p->x.out, SR_VERDICT_LEN, MSG_NOSIGNAL | MSG_DONTWAIT);
		reject(f, p->address, true, "authentication failed: it has no "
		    "key (claims rank %u of %u)", hello.rank, hello.world);
		return 0;
	}
	if (verdict == SR_VERDICT_NO_KEY) {
		send(p->fd, p->x.out, SR_VERDICT_LEN, MSG_NOSIGNAL | MSG_DONTWAIT);
		reject(f, p->address, true, "authentication failed: it has a "
		    "key and this rank none (claims rank %u of %u)", hello.rank,
		    hello.world);
		return 0;
	}
	if (verdict != SR_VERDICT_ACCEPTED) {
		send(p->fd, p->x.out, SR_VERDICT_LEN, MSG_NOSIGNAL | MSG_DONTWAIT);
		reject(f, p->address, false, "%s (it claims rank %u of %u)",
		    sr_verdict_reason(verdict), hello.rank, hello.world);
		return 0;
	}
	auth_init(f, &p->auth, f->a.expected, f->rank);
	return 1;
}

/* The connector's challenge: answer with a nonce and this rank's proof. */
static int
pending_challenge(struct formation *f, struct pending *p)
{
	uint8_t *out = p->x.out;

	if (memcmp(p->x.in, SR_AUTH_MAGIC, SR_MAGIC_LEN) != 0) {
		reject(f, p->address, true, "authentication failed: no challenge "
		    "after the hello");
		return 0;
	}
	memcpy(p->auth.nonce_connector, p->x.in + SR_MAGIC_LEN, SR_NONCE_LEN);
	if (sr_auth_nonce(p->auth.nonce_acceptor) != 0 ||
	    sr_auth_mac(&p->auth, SR_AUTH_ACCEPTOR,
		out + SR_MAGIC_LEN + SR_NONCE_LEN) != 0) {
		reject(f, p->address, true, "authentication failed: no random "
		    "bytes or no MAC on this rank");
		return 0;
	}
	memcpy(out, SR_AUTH_MAGIC, SR_MAGIC_LEN);
	memcpy(out + SR_MAGIC_LEN, p->auth.nonce_acceptor, SR_NONCE_LEN);
	expect_message(&p->x, STAGE_PROOF, SR_RESPONSE_LEN, SR_PROOF_LEN);
	return 1;
}

/* The connector's proof: verify, answer, and only then accept the link. */
static int
pending_proof(struct formation *f, struct pending *p)
{
	bool valid = memcmp(p->x.in, SR_AUTH_MAGIC, SR_MAGIC_LEN) == 0 &&
	    sr_auth_verify(&p->auth, SR_AUTH_CONNECTOR,
		p->x.in + SR_MAGIC_LEN);
	uint8_t result[SR_RESULT_LEN];

	memcpy(result, SR_AUTH_MAGIC, SR_MAGIC_LEN);
	sr_put_u32le(result + SR_MAGIC_LEN, valid ? 0 : 1);
	if (send(p->fd, result, sizeof(result), MSG_NOSIGNAL | MSG_DONTWAIT) !=
	    (ssize_t)sizeof(result) && valid) {
		reject(f, p->address, true, "answering its proof failed: %s",
		    strerror(errno));
		return 0;
	}
	if (!valid) {
		reject(f, p->address, true, "authentication failed: its proof "
		    "does not match this rank's key (another key?)");
		return 0;
	}
	return 1;
}

/* Moves pending handshake i on; the link is taken once it is complete. */
static void
pending_progress(struct formation *f, int i)
{
	struct acceptor *a = &f->a;
	struct pending *p = &a->pending[i];
	const char *why = NULL;
	int rc = exchange_progress(p->fd, &p->x, &why);

	if (rc == 0)
		return;
	if (rc < 0) {
		reject(f, p->address, p->x.stage != STAGE_HELLO,
		    "%s after %zu of %zu bytes of its %s", why, p->x.in_got,
		    p->x.in_len, p->x.stage == STAGE_HELLO ? "hello" :
		    "authentication");
		pending_drop(a, i);
		return;
	}
	switch (p->x.stage) {
	case STAGE_HELLO:
		rc = pending_hello(f, p);
		break;
	case STAGE_CHALLENGE:
		rc = pending_challenge(f, p);
		break;
	default:
		rc = pending_proof(f, p);
		if (rc == 1) {
			a->prev_fd = p->fd;
			p->fd = -1;
			pending_drop(a, i);
			return;
		}
		break;
	}
	if (rc == 0) {
		pending_drop(a, i);
		return;
	}
	/* Without a key the verdict ends the exchange once it is sent. */
	if (p->x.stage == STAGE_CHALLENGE && p->x.in_len == 0) {
		rc = exchange_progress(p->fd, &p->x, &why);
		if (rc == 1) {
			a->prev_fd = p->fd;
			p->fd = -1;
		} else {
			reject(f, p->address, false, "answering its hello failed: "
			    "%s", rc < 0 ? why : "the socket is full");
		}
		pending_drop(a, i);
		return;
	}
	pending_progress(f, i);
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
		reject(f, p->address, p->x.stage != STAGE_HELLO,
		    "sent %zu of %zu bytes of its %s in 5s", p->x.in_got,
		    p->x.in_len, p->x.stage == STAGE_HELLO ? "hello" :
		    "authentication");
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
		const char *what = f->c.state == CONNECT_TALK ?
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
	/* A ring that never formed because a peer had no key, or another
	 * one, failed authentication; say so in the status too. */
	sr_err_set(err, f->a.rejected > 0 && f->a.last_was_auth ? SR_EAUTH :
	    SR_ETIMEOUT,
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
			fds[nfds++].events = c->state == CONNECT_TALK ?
			    exchange_events(&c->x) : POLLOUT;
		}
		if (a->prev_fd < 0) {
			lidx = nfds;
			fds[nfds].fd = now < a->paused_until ? -1 : a->listen_fd;
			fds[nfds++].events = POLLIN;
			if (now < a->paused_until && a->paused_until < wake)
				wake = a->paused_until;
			for (int i = 0; i < a->npending; i++) {
				fds[nfds].fd = a->pending[i].fd;
				fds[nfds++].events = exchange_events(&a->pending[i].x);
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

static int
check_key(const struct sr_ring_options *options, struct sr_error *err)
{
	if (options->key == NULL)
		return 0;
	if (!sr_auth_available()) {
		sr_err_set(err, SR_ECONFIG, SR_PHASE_CONFIG,
		    "a key was given but this build cannot authenticate "
		    "(rebuild with libcrypto: libssl-dev)");
		return -1;
	}
	if (options->key_len < SR_KEY_MIN) {
		sr_err_set(err, SR_ECONFIG, SR_PHASE_CONFIG,
		    "the key is %zu bytes; at least %d are needed (32 random "
		    "bytes recommended)", options->key_len, SR_KEY_MIN);
		return -1;
	}
	return 0;
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

	if (check_key(options, err) != 0)
		return -1;
	memset(&f, 0, sizeof(f));
	f.rank = rank;
	f.world = world;
	f.token = token;
	f.options = options;
	f.keyed = options->key != NULL;
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
	    sr_sock_resolve_within(host, port, 0, f.deadline, options->cancel,
		&f.c.addr, why, sizeof(why)) != 0) {
		sr_err_set(err, options->cancel != NULL && *options->cancel ?
		    SR_EINTERRUPTED : SR_ECONFIG, SR_PHASE_CONNECT,
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
	memset(&f.c.auth, 0, sizeof(f.c.auth));
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

int
sr_auth_built_in(void)
{
	return sr_auth_available();
}
