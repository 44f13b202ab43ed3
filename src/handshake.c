/*
 * handshake.c - ring formation: connect to the next rank, accept the
 * previous one (acceptor.c), and run the silvic-net handshake on both
 * links at once.
 *
 * One poll loop drives the connector (connect with backoff, then the
 * exchange: hello and verdict, and with a key the challenge, response,
 * proof and result of auth.c) and the acceptor.  Nothing here reads a
 * byte beyond the fixed-size messages.
 *
 * A rank whose own authentication fails does not vanish at once: until
 * its previous rank has been answered (LEAVE_NS at most) it still answers
 * it, with a verdict that says so, so that rank fails at once too instead
 * of at the timeout.
 */
#include <errno.h>
#include <netinet/in.h>
#include <stdio.h>
#include <string.h>
#include <sys/socket.h>

#include "handshake.h"

#define BACKOFF_FIRST_NS (10LL * 1000000)
#define BACKOFF_MAX_NS (250LL * 1000000)
/* How long a rank whose authentication failed stays to tell its previous
 * rank (which retries its connection every 250 ms at most). */
#define LEAVE_NS (2LL * 1000000000)

void
sr_exchange_expect(struct exchange *x, enum exchange_stage stage,
    size_t out_len, size_t in_len)
{
	x->stage = stage;
	x->out_len = out_len;
	x->out_done = 0;
	x->in_len = in_len;
	x->in_got = 0;
}

int
sr_exchange_progress(int fd, struct exchange *x, const char **why)
{
	int rc = sr_io_flush(fd, x->out, x->out_len, &x->out_done);

	if (rc == 0)
		rc = sr_io_fill(fd, x->in, x->in_len, &x->in_got);
	if (rc == 0)
		return 1;
	if (rc == SR_IO_AGAIN)
		return 0;
	*why = rc == SR_IO_EOF ? "the connection closed" : strerror(errno);
	return -1;
}

int
sr_exchange_send_last(int fd, const void *buf, size_t len)
{
	size_t done = 0;

	return sr_io_flush(fd, buf, len, &done);
}

void
sr_formation_auth_init(struct formation *f, struct sr_auth *a,
    uint32_t connector, uint32_t acceptor)
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

	sr_close_fd(&c->fd);
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
	sr_exchange_expect(&c->x, STAGE_HELLO, SR_HELLO_LEN, SR_VERDICT_LEN);
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
	struct sr_challenge challenge;
	enum sr_verdict verdict;
	uint32_t acceptor;

	if (sr_verdict_decode(c->x.in, &verdict, &acceptor) != 0) {
		sr_error_set(err, SR_EHANDSHAKE, SR_PHASE_HANDSHAKE,
		    "the listener at %s is not a silvic rank (its answer to "
		    "the hello is not a verdict)", c->address);
		return -1;
	}
	if (verdict != SR_VERDICT_ACCEPTED) {
		bool auth = verdict == SR_VERDICT_AUTH_REQUIRED ||
		    verdict == SR_VERDICT_NO_KEY ||
		    verdict == SR_VERDICT_NEXT_AUTH;
		char sent[48] = "";

		/* c->x.out still holds the hello. */
		if (verdict == SR_VERDICT_UNKNOWN_FLAGS)
			snprintf(sent, sizeof(sent), " (this rank sent flags "
			    "0x%x)",
			    sr_get_u32le(c->x.out + SR_HELLO_OFF_FLAGS));
		sr_error_set(err, auth ? SR_EAUTH : SR_EREJECTED,
		    SR_PHASE_HANDSHAKE, "rank %u at %s rejected this rank: %s%s",
		    c->peer, c->address, sr_verdict_reason(verdict), sent);
		return -1;
	}
	if (acceptor != c->peer) {
		sr_error_set(err, SR_EHANDSHAKE, SR_PHASE_HANDSHAKE,
		    "the listener at %s is rank %u, not rank %u", c->address,
		    acceptor, c->peer);
		return -1;
	}
	if (!f->keyed) {
		c->state = CONNECT_DONE;
		c->watch = true;
		return 0;
	}
	sr_formation_auth_init(f, &c->auth, f->rank, c->peer);
	if (sr_auth_nonce(c->auth.nonce_connector) != 0) {
		sr_error_set(err, SR_EAUTH, SR_PHASE_HANDSHAKE,
		    "no random bytes for the challenge: %s", strerror(errno));
		return -1;
	}
	memcpy(challenge.nonce, c->auth.nonce_connector, SR_NONCE_LEN);
	sr_challenge_encode(&challenge, c->x.out);
	sr_exchange_expect(&c->x, STAGE_CHALLENGE, SR_CHALLENGE_LEN,
	    SR_RESPONSE_LEN);
	return 0;
}

static int
auth_failed(struct sr_error *err, uint32_t peer, const char *address,
    const char *what)
{
	sr_error_set(err, SR_EAUTH, SR_PHASE_HANDSHAKE,
	    "authentication with rank %u at %s failed: %s", peer, address, what);
	return -1;
}

/* The acceptor's response: prove this rank in turn, then check it. */
static int
connector_response(struct formation *f, struct sr_error *err)
{
	struct connector *c = &f->c;
	struct sr_response response;
	struct sr_proof proof;
	char what[96];
	const char *why;
	bool valid;

	if (sr_response_decode(c->x.in, &response, &why) != 0) {
		snprintf(what, sizeof(what), "its answer to the challenge is %s",
		    why);
		return auth_failed(err, c->peer, c->address, what);
	}
	memcpy(c->auth.nonce_acceptor, response.nonce, SR_NONCE_LEN);
	valid = sr_auth_verify(&c->auth, SR_AUTH_ACCEPTOR, response.mac);
	if (sr_auth_mac(&c->auth, SR_AUTH_CONNECTOR, proof.mac) != 0)
		return auth_failed(err, c->peer, c->address,
		    "computing the MAC failed");
	sr_proof_encode(&proof, c->x.out);
	sr_exchange_expect(&c->x, STAGE_PROOF, SR_PROOF_LEN, SR_RESULT_LEN);
	if (!valid) {
		/* Send the proof anyway (it reveals nothing), so the peer can
		 * say "wrong key" too rather than "closed". */
		(void)sr_exchange_send_last(c->fd, c->x.out, SR_PROOF_LEN);
		return auth_failed(err, c->peer, c->address,
		    "its proof does not match this rank's key (another key?)");
	}
	return 0;
}

static int
connector_result(struct formation *f, struct sr_error *err)
{
	struct connector *c = &f->c;
	enum sr_auth_result result;

	if (sr_result_decode(c->x.in, &result) != 0)
		return auth_failed(err, c->peer, c->address,
		    "its answer to this rank's proof is not a result");
	if (result == SR_RESULT_REJECTED)
		return auth_failed(err, c->peer, c->address,
		    "it rejected this rank's proof (another key?)");
	if (result == SR_RESULT_NEXT_AUTH)
		return auth_failed(err, c->peer, c->address,
		    "it accepted this rank's proof but leaves: authentication "
		    "failed on its link to its next rank (another key?)");
	c->state = CONNECT_DONE;
	c->watch = true;
	return 0;
}

/* The connection attempt ended: true once connected, else it is retried
 * (false). */
static bool
connector_connected(struct formation *f)
{
	struct connector *c = &f->c;
	socklen_t len = sizeof(int);
	int soerr = 0;

	if (getsockopt(c->fd, SOL_SOCKET, SO_ERROR, &soerr, &len) != 0)
		soerr = errno;
	if (soerr != 0) {
		connector_retry(f, strerror(soerr));
		return false;
	}
	return true;
}

/*
 * Moves the exchange on and reads the acceptor's message once it is
 * complete: 1 when the next message is queued (or the link formed), 0 to
 * poll again (a retry is then scheduled if the connection failed), -1
 * (err filled) on a failure no retry can mend.
 */
static int
connector_talk(struct formation *f, struct sr_error *err)
{
	struct connector *c = &f->c;
	const char *why = NULL;
	int rc = sr_exchange_progress(c->fd, &c->x, &why);

	if (rc == 0)
		return 0;
	if (rc < 0 && c->x.stage == STAGE_HELLO) {
		/*
		 * Closed before any verdict: the acceptor was busy with
		 * strays or restarting.  Try again; a verdict, once given, is
		 * final.
		 */
		connector_retry(f, strcmp(why, "the connection closed") ? why :
		    "the connection closed before the handshake answer");
		return 0;
	}
	if (rc < 0) {
		/* Closed before its verdict on this rank's proof: the acceptor
		 * dropped the link (a flood of strays, or it restarted).  A
		 * rejection would have come as one. */
		connector_retry(f, why);
		return 0;
	}
	switch (c->x.stage) {
	case STAGE_HELLO:
		rc = connector_verdict(f, err);
		break;
	case STAGE_CHALLENGE:
		rc = connector_response(f, err);
		break;
	case STAGE_PROOF:
		rc = connector_result(f, err);
		break;
	}
	return rc == 0 ? 1 : -1;
}

/*
 * Moves the connector on as far as it goes without waiting: a loop over
 * its states, each of which advances or returns to poll.  Returns -1
 * (err filled) on a failure no retry can mend.
 */
static int
connector_progress(struct formation *f, short revents, struct sr_error *err)
{
	struct connector *c = &f->c;
	int rc;

	for (;;) {
		switch (c->state) {
		case CONNECT_BACKOFF:
			/* A fresh connection is polled before it talks. */
			if (sr_clock_ns() >= c->retry_at)
				connector_start(f);
			return 0;
		case CONNECT_IN_PROGRESS:
			if (revents == 0 || !connector_connected(f))
				return 0;
			c->state = CONNECT_TALK;
			break;
		case CONNECT_TALK:
			if ((rc = connector_talk(f, err)) <= 0)
				return rc;
			break;
		case CONNECT_DONE:
		case CONNECT_FAILED:
			return 0;
		}
	}
}

/* ---------------------------------------------------------- the poll loop */

/*
 * The next rank sent something before this rank's ring formed: its first
 * collective's frame (the watch ends), or the abort it sends when its
 * other link failed (formation_abort).  1 when an abort is still only
 * partly here.
 */
static int
early_frame(struct formation *f, struct sr_error *err)
{
	struct connector *c = &f->c;
	uint8_t buf[SR_FRAME_HEADER_LEN + SR_ABORT_MAX];
	struct sr_frame frame;
	struct sr_abort abort;
	char rejected[480];
	ssize_t n = sr_io_peek(c->fd, buf, sizeof(buf));

	if (n < SR_FRAME_HEADER_LEN) {
		/* A header still in flight: only an abort's first bytes
		 * would be this short, and poll says when the rest comes. */
		return n > 0 && buf[SR_FRAME_OFF_KIND] == SR_FRAME_ABORT;
	}
	sr_frame_decode(buf, &frame);
	/* A formed ring's abort (step 0) is read by the first collective,
	 * as before: this rank may still form with its other neighbour and
	 * carry it on.  Only a rank that never formed (step
	 * SR_ABORT_FORMING) ends this rank's formation at once. */
	if (frame.kind != SR_FRAME_ABORT || frame.step != SR_ABORT_FORMING ||
	    frame.length > SR_ABORT_MAX || frame.length < SR_ABORT_FIXED)
		return 0;
	if ((size_t)n < SR_FRAME_HEADER_LEN + frame.length)
		return 1;
	sr_abort_decode(buf + SR_FRAME_HEADER_LEN, (size_t)frame.length,
	    &abort);
	sr_acceptor_rejections(f, rejected, sizeof(rejected));
	/* Its failure, with its class: the first failure's status. */
	sr_error_set(err, sr_wire_to_code(abort.wire_class), SR_PHASE_HANDSHAKE,
	    "rank %u reported: %s%s", abort.origin, abort.reason, rejected);
	err->origin = abort.origin;
	return -1;
}

/*
 * The link to the next rank formed, the previous rank is not in yet.  The
 * next rank never closes that link before the whole ring has formed
 * unless it failed (its authentication with its own next rank, say): then
 * this rank fails at once too, not at the timeout.  Early bytes on it
 * (the next rank formed and speaks first) stay for the engine.
 */
static int
connector_watch(struct formation *f, struct sr_error *err)
{
	struct connector *c = &f->c;
	char rejected[480];
	uint8_t byte;
	ssize_t n = sr_io_peek(c->fd, &byte, 1);

	if (n > 0) {
		int rc = early_frame(f, err);

		if (rc < 0)
			return -1;
		if (rc == 0)
			c->watch = false;
		return 0;
	}
	if (n == SR_IO_AGAIN)
		return 0;
	sr_acceptor_rejections(f, rejected, sizeof(rejected));
	/* Its failure is likely this one's too: a link of this rank failed
	 * authentication, or the ring formation failed. */
	sr_error_set(err, f->a.rejected > 0 && f->a.last_was_auth ? SR_EAUTH :
	    SR_EHANDSHAKE, SR_PHASE_HANDSHAKE, "rank %u at %s %s before the "
	    "ring formed (it failed to form its other link) while this rank "
	    "waited for rank %u to connect%s", c->peer, c->address,
	    n == SR_IO_EOF ? "closed its link" : strerror(errno), f->a.expected,
	    rejected);
	return -1;
}

static void
timeout_message(struct formation *f, struct sr_error *err)
{
	char took[32], waited[300] = "", rejected[480] = "";
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
	sr_acceptor_rejections(f, rejected, sizeof(rejected));
	/* A ring that never formed because a peer had no key, or another
	 * one, failed authentication; say so in the status too. */
	sr_error_set(err, f->a.rejected > 0 && f->a.last_was_auth ? SR_EAUTH :
	    SR_ETIMEOUT,
	    f->c.state != CONNECT_DONE ? SR_PHASE_CONNECT : SR_PHASE_ACCEPT,
	    "timed out after %s waiting for %s%s", took, waited, rejected);
}

/*
 * The connector failed for good (err), or the next rank it formed with
 * reported that its own formation failed.  When authentication failed
 * and the previous rank has not been let in, the rank stays for LEAVE_NS
 * at most to tell it so (pending_hello, pending_proof): true to stay.  A
 * previous rank midway through its handshake then learns it from the
 * handshake itself, instead of finding this rank gone and dialling it
 * again until the timeout.
 */
static bool
form_leave(struct formation *f, const struct sr_error *err)
{
	if (err->code != SR_EAUTH || f->a.prev_fd >= 0 || f->leaving ||
	    f->told_prev)
		return false;
	sr_close_fd(&f->c.fd);
	f->c.state = CONNECT_FAILED;
	f->leaving = true;
	f->leave_by = sr_clock_ns() + LEAVE_NS;
	if (f->leave_by > f->deadline)
		f->leave_by = f->deadline;
	return true;
}

/* Tells the caller where formation stands, every progress_ms; returns
 * when the loop must wake up for the next time (or INT64_MAX). */
static int64_t
progress(struct formation *f, int64_t now)
{
	const struct sr_ring_options *o = f->options;
	struct sr_progress p;

	/* Beyond the timeout it would never be due (nor overflow). */
	if (o->on_progress == NULL || o->progress_ms <= 0 ||
	    o->progress_ms > o->timeout_ms)
		return INT64_MAX;
	if (f->progress_at == 0)
		f->progress_at = f->started + o->progress_ms * 1000000;
	if (now < f->progress_at)
		return f->progress_at;
	memset(&p, 0, sizeof(p));
	p.rank = f->rank;
	p.world = f->world;
	p.next = f->c.peer;
	p.prev = f->a.expected;
	p.next_address = f->c.address;
	p.prev_address = f->prev_address;
	p.next_connected = f->c.state == CONNECT_TALK ||
	    f->c.state == CONNECT_DONE;
	p.next_ready = f->c.state == CONNECT_DONE;
	p.prev_ready = f->a.prev_fd >= 0;
	p.pending = f->a.npending;
	p.rejected = f->a.rejected;
	p.elapsed_ms = (now - f->started) / 1000000;
	p.left_ms = (f->deadline - now) / 1000000;
	o->on_progress(o->progress_arg, &p);
	while (f->progress_at <= now)
		f->progress_at += o->progress_ms * 1000000;
	return f->progress_at;
}

static int
form_loop(struct formation *f, struct sr_error *err)
{
	struct pollfd fds[2 + PENDING_MAX];
	struct connector *c = &f->c;
	struct acceptor *a = &f->a;

	for (;;) {
		int64_t now = sr_clock_ns(), next;
		int64_t wake = f->leaving ? f->leave_by : f->deadline;
		int nfds = 0, cidx = -1, lidx = -1, rc;

		if (c->state == CONNECT_DONE && a->prev_fd >= 0)
			return 0;
		/* err holds why this rank leaves. */
		if (f->leaving && (f->told_prev || now >= f->leave_by))
			return -1;
		if (f->options->cancel != NULL && *f->options->cancel) {
			sr_error_set(err, SR_EINTERRUPTED, SR_PHASE_CONNECT,
			    "interrupted while forming the ring");
			return -1;
		}
		if (now >= f->deadline) {
			timeout_message(f, err);
			return -1;
		}
		sr_acceptor_expire(f, now);
		if ((next = progress(f, now)) < wake)
			wake = next;
		if (c->state == CONNECT_BACKOFF) {
			if (now >= c->retry_at) {
				if (connector_progress(f, 0, err) != 0 &&
				    !form_leave(f, err))
					return -1;
				continue;
			}
			if (c->retry_at < wake)
				wake = c->retry_at;
		} else if (c->state == CONNECT_DONE && c->watch) {
			cidx = nfds;
			fds[nfds].fd = c->fd;
			fds[nfds++].events = POLLIN;
		} else if (c->state != CONNECT_DONE &&
		    c->state != CONNECT_FAILED) {
			cidx = nfds;
			fds[nfds].fd = c->fd;
			fds[nfds++].events = c->state == CONNECT_TALK ?
			    sr_exchange_events(&c->x) : POLLOUT;
		}
		if (a->prev_fd < 0) {
			lidx = nfds;
			fds[nfds].fd = now < a->paused_until ? -1 : a->listen_fd;
			fds[nfds++].events = POLLIN;
			if (now < a->paused_until && a->paused_until < wake)
				wake = a->paused_until;
			for (int i = 0; i < a->npending; i++) {
				fds[nfds].fd = a->pending[i].fd;
				fds[nfds++].events = sr_exchange_events(&a->pending[i].x);
				if (a->pending[i].deadline < wake)
					wake = a->pending[i].deadline;
			}
		}
		rc = poll(fds, (nfds_t)nfds, sr_clock_left_ms(wake));
		if (rc < 0 && errno != EINTR) {
			if (!f->leaving)
				sr_error_set(err, SR_EIO, SR_PHASE_CONNECT,
				    "poll: %s", strerror(errno));
			return -1;
		}
		if (rc <= 0)
			continue;
		if (cidx >= 0 && fds[cidx].revents != 0 &&
		    c->state == CONNECT_DONE) {
			if (connector_watch(f, err) != 0 && !form_leave(f, err))
				return -1;
		} else if (cidx >= 0 && fds[cidx].revents != 0 &&
		    connector_progress(f, fds[cidx].revents, err) != 0 &&
		    !form_leave(f, err)) {
			return -1;
		}
		if (lidx < 0)
			continue;
		/* In accept order, so strays queued ahead of the real rank
		 * get their verdict too; slots move as others drop. */
		for (int i = lidx + 1; i < nfds && a->prev_fd < 0; i++) {
			if (fds[i].revents == 0)
				continue;
			for (int slot = 0; slot < a->npending; slot++)
				if (a->pending[slot].fd == fds[i].fd) {
					sr_acceptor_progress(f, slot);
					break;
				}
		}
		if (a->prev_fd < 0 && fds[lidx].revents != 0)
			sr_acceptor_accept(f);
	}
}

/*
 * Formation failed: a link that did form gets an abort frame (a
 * collective's, with step SR_ABORT_FORMING) before it closes,
 * so the rank at its other end fails with this failure's class (an
 * authentication failure is 7 on every rank), not with "closed its link".
 * Best effort: a fresh link's send buffer is empty, and nothing waits.
 */
static void
formation_abort(struct formation *f, const struct sr_error *err)
{
	uint8_t out[SR_FRAME_HEADER_LEN + SR_ABORT_MAX];
	struct sr_frame frame = { .kind = SR_FRAME_ABORT,
		.step = SR_ABORT_FORMING };
	struct sr_abort abort;
	int fds[2] = { f->c.state == CONNECT_DONE ? f->c.fd : -1,
	    f->a.prev_fd };

	if (err->origin >= 0)
		return;		/* a neighbour's failure, heard: not ours */
	memset(&abort, 0, sizeof(abort));
	abort.origin = f->rank;
	abort.wire_class = sr_wire_from_code(err->code);
	abort.culprit = err->peer >= 0 ? (uint32_t)err->peer : SR_NO_RANK;
	snprintf(abort.reason, sizeof(abort.reason), "%.400s", err->message);
	frame.length = sr_abort_encode(&abort, out + SR_FRAME_HEADER_LEN,
	    SR_ABORT_MAX);
	sr_frame_encode(&frame, out);
	for (int i = 0; i < 2; i++) {
		if (fds[i] < 0)
			continue;
		(void)sr_exchange_send_last(fds[i], out,
		    SR_FRAME_HEADER_LEN + frame.length);
		shutdown(fds[i], SHUT_WR);
	}
}

static int
check_key(const struct sr_ring_options *options, struct sr_error *err)
{
	if (options->key == NULL)
		return 0;
	if (!sr_auth_available()) {
		sr_error_set(err, SR_ECONFIG, SR_PHASE_CONFIG,
		    "a key was given but this build cannot authenticate "
		    "(rebuild with libcrypto: libssl-dev)");
		return -1;
	}
	if (options->key_len < SR_KEY_MIN) {
		sr_error_set(err, SR_ECONFIG, SR_PHASE_CONFIG,
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
	f.prev_address = addresses[(rank + world - 1) % world];
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
		sr_error_set(err, options->cancel != NULL && *options->cancel ?
		    SR_EINTERRUPTED : SR_ECONFIG, SR_PHASE_CONNECT,
		    "the address of rank %u is unusable: %s", f.c.peer, why);
		sr_err_peer(err, f.c.peer, f.c.address);
		return -1;
	}
	if (sr_sock_nonblocking(listen_fd) != 0) {
		sr_error_set(err, SR_EIO, SR_PHASE_ACCEPT,
		    "configuring the listener: %s", strerror(errno));
		return -1;
	}
	rc = form_loop(&f, err);
	while (f.a.npending > 0)
		sr_acceptor_drop(&f.a, 0);
	memset(&f.c.auth, 0, sizeof(f.c.auth));
	if (rc != 0) {
		if (err->phase == SR_PHASE_HANDSHAKE && err->origin < 0)
			sr_err_peer(err, f.c.peer, f.c.address);
		formation_abort(&f, err);
		sr_close_fd(&f.c.fd);
		sr_close_fd(&f.a.prev_fd);
		return -1;
	}
	*next_fd = f.c.fd;
	*prev_fd = f.a.prev_fd;
	return 0;
}
