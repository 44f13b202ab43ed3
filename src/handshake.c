/*
 * handshake.c - formation: connect to the next rank and accept the
 * previous one (acceptor.c), or on a mesh connect to every rank this one
 * dials and accept every rank that dials it, and run the silvic-net
 * handshake on every link at once.
 *
 * One poll loop drives the connectors (connect with backoff, then the
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

/*
 * The next attempt after a failed one, backing off.  A mesh's many
 * connectors to one rank that is not up yet would otherwise retry in
 * step: each waits a quarter more or less, by its peer's rank, so their
 * retries spread out.
 */
static void
connector_retry(struct formation *f, struct connector *c, const char *why)
{
	int64_t wait = c->backoff;

	if (f->mesh)
		wait += wait / 4 * (int64_t)((f->rank + c->peer) % 3) - wait / 4;
	sr_close_fd(&c->fd);
	snprintf(c->last_error, sizeof(c->last_error), "%s", why);
	c->state = CONNECT_BACKOFF;
	c->retry_at = sr_clock_ns() + wait;
	c->backoff = c->backoff * 2 > BACKOFF_MAX_NS ? BACKOFF_MAX_NS :
	    c->backoff * 2;
}

static void
connector_start(struct formation *f, struct connector *c)
{
	struct sr_hello hello = { f->rank, f->world, f->token,
		(f->keyed ? SR_HELLO_AUTH : 0) |
		    (f->options->integrity ? SR_HELLO_CRC : 0) |
		    (f->mesh ? SR_HELLO_MESH : 0) |
		    (f->probe ? SR_HELLO_PROBE : 0) |
		    (f->streams > 1 ? SR_HELLO_STREAMS(f->streams, c->stream) :
		    0) };

	c->fd = socket(c->addr.ss.ss_family,
	    SOCK_STREAM | SOCK_NONBLOCK | SOCK_CLOEXEC, 0);
	if (c->fd < 0) {
		connector_retry(f, c, strerror(errno));
		return;
	}
	if (c->bind_local && bind(c->fd, (struct sockaddr *)&c->local.ss,
	    c->local.len) != 0) {
		char local[SR_ADDR_MAX], why[SR_ADDR_MAX + 80];

		sr_sock_format(&c->local, local, sizeof(local));
		snprintf(why, sizeof(why), "binding this rank's address %s to "
		    "dial from: %s", local, strerror(errno));
		connector_retry(f, c, why);
		return;
	}
	sr_hello_encode(&hello, c->x.out);
	sr_exchange_expect(&c->x, STAGE_HELLO, SR_HELLO_LEN, SR_VERDICT_LEN);
	c->attempts++;
	c->attempt_ns = c->connected_ns = sr_clock_ns();
	if (connect(c->fd, (struct sockaddr *)&c->addr.ss, c->addr.len) == 0)
		c->state = CONNECT_TALK;
	else if (errno == EINPROGRESS)
		c->state = CONNECT_IN_PROGRESS;
	else if (errno == EINVAL)
		/* What Linux says to a connect whose route is a blackhole. */
		connector_retry(f, c, "Invalid argument (its route discards "
		    "everything: a blackhole route?)");
	else
		connector_retry(f, c, strerror(errno));
}

/* What a probe's connection saw, once its handshake is through. */
static void
probe_record(struct formation *f, const struct connector *c)
{
	struct sr_probe_link *p = &f->report[c->peer];
	struct sr_path_info path;

	sr_sock_path_info(c->fd, &path);
	p->reached = true;
	p->error[0] = '\0';
	p->connect_us = (c->connected_ns - c->attempt_ns) / 1000;
	p->handshake_us = (sr_clock_ns() - c->connected_ns) / 1000;
	p->rtt_us = path.rtt_us;
	p->rtt_var_us = path.rtt_var_us;
	p->mtu = path.mtu;
	snprintf(p->local, sizeof(p->local), "%s", path.local);
	snprintf(p->iface, sizeof(p->iface), "%s", path.iface);
}

/* The link formed: watched for an early failure of its peer, but not in a
 * probe, where a peer done probing closes the links it does not keep. */
static void
connector_done(struct formation *f, struct connector *c)
{
	c->state = CONNECT_DONE;
	c->watch = !f->probe;
	if (f->probe)
		probe_record(f, c);
}

static int
connector_verdict(struct formation *f, struct connector *c,
    struct sr_error *err)
{
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
		if (verdict >= SR_VERDICT_STREAMS &&
		    verdict <= SR_VERDICT_STREAMS_LAST) {
			uint32_t theirs = verdict - SR_VERDICT_STREAMS + 1;

			sr_error_set(err, SR_EREJECTED, SR_PHASE_HANDSHAKE,
			    "rank %u at %s rejected this rank: it opens %u "
			    "stream(s) per link (--streams %u) and this rank %u "
			    "(--streams %u); every rank must give the same "
			    "--streams", c->peer, c->address, theirs, theirs,
			    f->streams, f->streams);
			return -1;
		}
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
		connector_done(f, c);
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
connector_response(struct connector *c, struct sr_error *err)
{
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
connector_result(struct formation *f, struct connector *c,
    struct sr_error *err)
{
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
	connector_done(f, c);
	return 0;
}

/* The connection attempt ended: true once connected, else it is retried
 * (false). */
static bool
connector_connected(struct formation *f, struct connector *c)
{
	socklen_t len = sizeof(int);
	int soerr = 0;

	if (getsockopt(c->fd, SOL_SOCKET, SO_ERROR, &soerr, &len) != 0)
		soerr = errno;
	if (soerr != 0) {
		connector_retry(f, c, strerror(soerr));
		return false;
	}
	c->connected_ns = sr_clock_ns();
	return true;
}

/*
 * Moves the exchange on and reads the acceptor's message once it is
 * complete: 1 when the next message is queued (or the link formed), 0 to
 * poll again (a retry is then scheduled if the connection failed), -1
 * (err filled) on a failure no retry can mend.
 */
static int
connector_talk(struct formation *f, struct connector *c, struct sr_error *err)
{
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
		connector_retry(f, c, strcmp(why, "the connection closed") ?
		    why : "the connection closed before the handshake answer");
		return 0;
	}
	if (rc < 0) {
		/* Closed before its verdict on this rank's proof: the acceptor
		 * dropped the link (a flood of strays, or it restarted).  A
		 * rejection would have come as one. */
		connector_retry(f, c, why);
		return 0;
	}
	switch (c->x.stage) {
	case STAGE_HELLO:
		rc = connector_verdict(f, c, err);
		break;
	case STAGE_CHALLENGE:
		rc = connector_response(c, err);
		break;
	case STAGE_PROOF:
		rc = connector_result(f, c, err);
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
connector_progress(struct formation *f, struct connector *c, short revents,
    struct sr_error *err)
{
	int rc;

	for (;;) {
		switch (c->state) {
		case CONNECT_BACKOFF:
			/* A fresh connection is polled before it talks. */
			if (sr_clock_ns() >= c->retry_at)
				connector_start(f, c);
			return 0;
		case CONNECT_IN_PROGRESS:
			if (revents == 0 || !connector_connected(f, c))
				return 0;
			c->state = CONNECT_TALK;
			break;
		case CONNECT_TALK:
			if ((rc = connector_talk(f, c, err)) < 0 &&
			    err->phase == SR_PHASE_HANDSHAKE && err->origin < 0)
				sr_err_peer(err, c->peer, c->address);
			if (rc <= 0)
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
 * A formed link's peer sent something before this rank's formation ended:
 * its first collective's frame (the watch ends), or the abort it sends
 * when another of its links failed (formation_abort).  1 when an abort is
 * still only partly here.
 */
static int
early_frame(struct formation *f, int fd, struct sr_error *err)
{
	uint8_t buf[SR_FRAME_HEADER_MAX + SR_ABORT_MAX];
	size_t header = f->mesh ? SR_FRAME_WIDE_LEN : SR_FRAME_HEADER_LEN;
	struct sr_frame frame;
	struct sr_abort abort;
	char rejected[480];
	ssize_t n = sr_io_peek(fd, buf, sizeof(buf));

	if (n < (ssize_t)header) {
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
	if ((size_t)n < header + frame.length)
		return 1;
	sr_abort_decode(buf + header, (size_t)frame.length, &abort);
	sr_acceptor_rejections(f, rejected, sizeof(rejected));
	/* Its failure, with its class: the first failure's status. */
	sr_error_set(err, sr_wire_to_code(abort.wire_class), SR_PHASE_HANDSHAKE,
	    "rank %u reported: %s%s", abort.origin, abort.reason, rejected);
	err->origin = abort.origin;
	if (f->mesh) {
		/* Forwarded to the links formed (formation_abort), and the
		 * rank it blames named. */
		f->heard = abort;
		f->heard_abort = true;
		err->peer = abort.culprit != SR_NO_RANK ? abort.culprit :
		    abort.origin;
		if (err->peer < f->world)
			snprintf(err->peer_address, sizeof(err->peer_address),
			    "%s", f->addresses[err->peer]);
	}
	return -1;
}

/*
 * A link formed, and formation goes on.  Its peer never closes it before
 * its own formation has ended unless it failed (its authentication with
 * another rank, say): then this rank fails at once too, not at the
 * timeout.  Early bytes on it (the peer formed and speaks first) stay
 * for the engine.  *watch ends once the peer has spoken.
 */
static int
link_watch(struct formation *f, int fd, uint32_t peer, const char *address,
    bool *watch, struct sr_error *err)
{
	char rejected[480], waited[64];
	uint8_t byte;
	ssize_t n = sr_io_peek(fd, &byte, 1);

	if (n > 0) {
		int rc = early_frame(f, fd, err);

		if (rc < 0)
			return -1;
		if (rc == 0)
			*watch = false;
		return 0;
	}
	if (n == SR_IO_AGAIN)
		return 0;
	sr_acceptor_rejections(f, rejected, sizeof(rejected));
	if (f->mesh)
		snprintf(waited, sizeof(waited), "%u other link(s)",
		    f->a.missing);
	else
		snprintf(waited, sizeof(waited), "rank %u to connect",
		    f->a.expected);
	/* Its failure is likely this one's too: a link of this rank failed
	 * authentication, or the formation failed. */
	sr_error_set(err, f->a.rejected > 0 && f->a.last_was_auth ? SR_EAUTH :
	    SR_EHANDSHAKE, SR_PHASE_HANDSHAKE, "rank %u at %s %s before the "
	    "%s formed (it failed to form %s link) while this rank waited "
	    "for %s%s", peer, address, n == SR_IO_EOF ? "closed its link" :
	    strerror(errno), f->mesh ? "mesh" : "ring", f->mesh ? "another" :
	    "its other", waited, rejected);
	sr_err_peer(err, peer, address);
	return -1;
}

/* Appends ", 3, 7" (at most a line's worth) to buf. */
static void
add_rank(char *buf, size_t size, uint32_t rank, int *listed)
{
	size_t n = strlen(buf);

	if (*listed == 12)
		snprintf(buf + n, size - n, ", ...");
	else if (*listed < 12)
		snprintf(buf + n, size - n, "%s%u", *listed ? ", " : "", rank);
	(*listed)++;
}

/* What a mesh still waits for: "connections to ranks 3, 5 (last error:
 * ...) and for ranks 6, 7 to connect". */
static void
mesh_waited(struct formation *f, char *buf, size_t size, struct sr_error *err)
{
	char dial[160] = "", accept[160] = "";
	const struct connector *first = NULL;
	int ndial = 0, naccept = 0;
	size_t n;

	for (int i = 0; i < f->nconns; i++) {
		const struct connector *c = &f->conns[i];

		if (c->state == CONNECT_DONE)
			continue;
		if (first == NULL)
			first = c;
		/* A link's other streams name the same rank. */
		if (i > 0 && f->conns[i - 1].peer == c->peer &&
		    f->conns[i - 1].state != CONNECT_DONE)
			continue;
		add_rank(dial, sizeof(dial), c->peer, &ndial);
	}
	for (uint32_t r = 0; r < f->world; r++)
		if (sr_acceptor_awaits(f, r)) {
			if (naccept == 0 && first == NULL)
				sr_err_peer(err, r, f->addresses[r]);
			add_rank(accept, sizeof(accept), r, &naccept);
		}
	buf[0] = '\0';
	if (first != NULL) {
		snprintf(buf, size, "%s rank%s %s at %s%s%s%s",
		    first->state == CONNECT_TALK && ndial == 1 ?
		    "an answer to the handshake from" : "connections to",
		    ndial > 1 ? "s" : "", dial, ndial > 1 ? "(first) " : "",
		    first->address, first->last_error[0] ? " (last error: " : "",
		    first->last_error);
		n = strlen(buf);
		if (first->last_error[0])
			snprintf(buf + n, size - n, ")");
		sr_err_peer(err, first->peer, first->address);
	}
	if (naccept > 0) {
		n = strlen(buf);
		snprintf(buf + n, size - n, "%srank%s %s to connect",
		    n ? " and for " : "", naccept > 1 ? "s" : "", accept);
	}
}

static void
timeout_message(struct formation *f, struct sr_error *err)
{
	char took[32], waited[400] = "", rejected[480] = "";
	const struct connector *c = &f->conns[0];
	bool dialled = true;

	sr_clock_format_ms(f->options->timeout_ms, took, sizeof(took));
	for (int i = f->nconns - 1; i >= 0; i--) {
		dialled = dialled && f->conns[i].state == CONNECT_DONE;
		if (f->conns[i].state != CONNECT_DONE)
			c = &f->conns[i];	/* the first stream not formed */
	}
	if (f->mesh) {
		mesh_waited(f, waited, sizeof(waited), err);
	} else {
		if (c->state != CONNECT_DONE) {
			const char *what = c->state == CONNECT_TALK ?
			    "an answer to the handshake from" :
			    "a connection to";

			snprintf(waited, sizeof(waited), "%s rank %u at %s%s%s%s",
			    what, c->peer, c->address,
			    c->last_error[0] ? " (last error: " : "",
			    c->last_error, c->last_error[0] ? ")" : "");
			sr_err_peer(err, c->peer, c->address);
		}
		if (sr_acceptor_awaits(f, f->a.expected)) {
			size_t n = strlen(waited);

			snprintf(waited + n, sizeof(waited) - n,
			    "%srank %u to connect", n ? " and for " : "",
			    f->a.expected);
			sr_err_peer(err, f->a.expected, NULL);
		}
	}
	sr_acceptor_rejections(f, rejected, sizeof(rejected));
	/* Formation that never ended because a peer had no key, or another
	 * one, failed authentication; say so in the status too. */
	sr_error_set(err, f->a.rejected > 0 && f->a.last_was_auth ? SR_EAUTH :
	    SR_ETIMEOUT, !dialled ? SR_PHASE_CONNECT : SR_PHASE_ACCEPT,
	    "timed out after %s waiting for %s%s", took, waited, rejected);
}

/*
 * A connector failed for good (err), or a rank it formed with reported
 * that its own formation failed.  When authentication failed and a rank
 * it awaits (a ring's previous rank; on a mesh, any) has not been let in,
 * the rank stays for LEAVE_NS at most to tell them so (pending_hello,
 * pending_proof): true to stay.  A rank midway through its handshake then
 * learns it from the handshake itself, instead of finding this rank gone
 * and dialling it again until the timeout.
 */
static bool
form_leave(struct formation *f, const struct sr_error *err)
{
	if (err->code != SR_EAUTH || !sr_acceptor_open(f) || f->leaving ||
	    f->told_prev)
		return false;
	for (int i = 0; i < f->nconns; i++) {
		if (f->mesh && f->conns[i].state == CONNECT_DONE)
			continue;	/* formed: its abort comes at the end */
		sr_close_fd(&f->conns[i].fd);
		f->conns[i].state = CONNECT_FAILED;
	}
	f->leave_peer = err->peer >= 0 ? (uint32_t)err->peer : f->conns[0].peer;
	f->leaving = true;
	f->leave_by = sr_clock_ns() + LEAVE_NS;
	if (f->leave_by > f->deadline)
		f->leave_by = f->deadline;
	return true;
}

/*
 * A connector failed for good (err): in a probe, that is its report, and
 * formation goes on (true); else form_leave decides.
 */
static bool
connector_lost(struct formation *f, struct connector *c,
    const struct sr_error *err)
{
	struct sr_probe_link *p;

	if (!f->probe)
		return form_leave(f, err);
	p = &f->report[c->peer];
	p->reached = false;
	snprintf(p->error, sizeof(p->error), "%.199s", err->message);
	sr_close_fd(&c->fd);
	c->state = CONNECT_FAILED;
	return true;
}

/* Whether every rank this one awaits has been told it leaves. */
static bool
everyone_told(const struct formation *f)
{
	if (!f->mesh)
		return f->told_prev;
	for (uint32_t r = 0; r < f->world; r++)
		if (sr_acceptor_awaits(f, r) && !f->told[r])
			return false;
	return true;
}

/* Whether the link to rank r formed (a mesh's, or a ring's neighbour). */
static bool
formed_with(const struct formation *f, uint32_t r)
{
	bool dialled = false;

	if (!f->mesh ? r == f->a.expected : !sr_mesh_dials(f->rank, r, f->world))
		return !sr_acceptor_awaits(f, r);
	/* Every stream of the link. */
	for (int i = 0; i < f->nconns; i++)
		if (f->conns[i].peer == r) {
			if (f->conns[i].state != CONNECT_DONE)
				return false;
			dialled = true;
		}
	return dialled;
}

/* Tells the caller where formation stands, every progress_ms; returns
 * when the loop must wake up for the next time (or INT64_MAX). */
static int64_t
progress(struct formation *f, int64_t now)
{
	const struct sr_ring_options *o = f->options;
	const struct connector *next = &f->conns[0];
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
	p.next = (f->rank + 1) % f->world;
	p.prev = (f->rank + f->world - 1) % f->world;
	p.next_address = f->next_address;
	p.prev_address = f->prev_address;
	p.next_connected = !f->mesh || next->peer == p.next ?
	    next->state == CONNECT_TALK || next->state == CONNECT_DONE :
	    formed_with(f, p.next);
	p.next_ready = formed_with(f, p.next);
	p.prev_ready = formed_with(f, p.prev);
	p.pending = f->a.npending;
	p.rejected = f->a.rejected;
	p.elapsed_ms = (now - f->started) / 1000000;
	p.left_ms = (f->deadline - now) / 1000000;
	if (f->mesh) {
		p.links_total = f->world - 1;
		for (uint32_t r = 0; r < f->world; r++)
			p.links_formed += r != f->rank && formed_with(f, r);
	}
	o->on_progress(o->progress_arg, &p);
	while (f->progress_at <= now)
		f->progress_at += o->progress_ms * 1000000;
	return f->progress_at;
}

/* Whether every link has formed (a probe: every connection has had its
 * answer, or the probe's time is up). */
static bool
formed(const struct formation *f, int64_t now)
{
	if (f->probe && now >= f->probe_deadline)
		return true;
	for (int i = 0; i < f->nconns; i++)
		if (f->conns[i].state != CONNECT_DONE &&
		    !(f->probe && f->conns[i].state == CONNECT_FAILED))
			return false;
	return !sr_acceptor_open(f);
}

/* One descriptor of the poll set, and what it stands for. */
enum slot_kind { SLOT_CONNECTOR, SLOT_WATCH, SLOT_ACCEPTED, SLOT_LISTENER,
	SLOT_PENDING };

struct poll_set {
	struct pollfd *fds;
	enum slot_kind *kind;
	uint32_t *index;	/* the connector, the rank, or the pending fd */
	int n;
};

static void
poll_add(struct poll_set *ps, int fd, short events, enum slot_kind kind,
    uint32_t index)
{
	ps->fds[ps->n] = (struct pollfd){ .fd = fd, .events = events };
	ps->kind[ps->n] = kind;
	ps->index[ps->n++] = index;
}

/* What the loop waits for: every connector, the links formed and still
 * watched, and while links are due the listener and the pending
 * handshakes.  Lowers *wake to the next deadline. */
static void
wait_set(struct formation *f, struct poll_set *ps, int64_t now, int64_t *wake)
{
	struct acceptor *a = &f->a;

	ps->n = 0;
	for (int i = 0; i < f->nconns; i++) {
		struct connector *c = &f->conns[i];

		if (c->state == CONNECT_BACKOFF && c->retry_at < *wake)
			*wake = c->retry_at;
		if (c->state == CONNECT_DONE && c->watch)
			poll_add(ps, c->fd, POLLIN, SLOT_WATCH, (uint32_t)i);
		else if (c->state == CONNECT_IN_PROGRESS ||
		    c->state == CONNECT_TALK)
			poll_add(ps, c->fd, c->state == CONNECT_TALK ?
			    sr_exchange_events(&c->x) : POLLOUT,
			    SLOT_CONNECTOR, (uint32_t)i);
	}
	for (uint32_t r = 0; f->mesh && r < f->world; r++)
		if (a->fds[r] >= 0 && a->watch[r])
			poll_add(ps, a->fds[r], POLLIN, SLOT_ACCEPTED, r);
	if (!sr_acceptor_open(f))
		return;
	for (int i = 0; i < a->nlisten; i++)
		poll_add(ps, now < a->paused_until ? -1 : a->listen_fds[i],
		    POLLIN, SLOT_LISTENER, (uint32_t)i);
	if (now < a->paused_until && a->paused_until < *wake)
		*wake = a->paused_until;
	for (int i = 0; i < a->npending; i++) {
		poll_add(ps, a->pending[i].fd,
		    sr_exchange_events(&a->pending[i].x), SLOT_PENDING,
		    (uint32_t)a->pending[i].fd);
		if (a->pending[i].deadline < *wake)
			*wake = a->pending[i].deadline;
	}
}

/* A connector whose backoff ended starts its next attempt. */
static int
retry_due(struct formation *f, int64_t now, struct sr_error *err)
{
	for (int i = 0; i < f->nconns; i++) {
		struct connector *c = &f->conns[i];

		if (c->state == CONNECT_BACKOFF && now >= c->retry_at &&
		    connector_progress(f, c, 0, err) != 0 &&
		    !connector_lost(f, c, err))
			return -1;
	}
	return 0;
}

/* Serves what poll reported on slot i; -1 when formation fails. */
static int
serve_slot(struct formation *f, const struct poll_set *ps, int i,
    struct sr_error *err)
{
	struct acceptor *a = &f->a;
	uint32_t k = ps->index[i];
	struct connector *c;

	switch (ps->kind[i]) {
	case SLOT_WATCH:
		c = &f->conns[k];
		if (c->state == CONNECT_DONE && c->watch &&
		    link_watch(f, c->fd, c->peer, c->address, &c->watch,
		    err) != 0 && !form_leave(f, err))
			return -1;
		return 0;
	case SLOT_CONNECTOR:
		c = &f->conns[k];
		if (connector_progress(f, c, ps->fds[i].revents, err) != 0 &&
		    !connector_lost(f, c, err))
			return -1;
		return 0;
	case SLOT_ACCEPTED:
		return link_watch(f, a->fds[k], k, f->addresses[k],
		    &a->watch[k], err);
	case SLOT_PENDING:
		/* Slots move as others drop: found by descriptor. */
		for (int slot = 0; slot < a->npending &&
		    sr_acceptor_open(f); slot++)
			if (a->pending[slot].fd == (int)k) {
				sr_acceptor_progress(f, slot);
				break;
			}
		return 0;
	case SLOT_LISTENER:
		break;
	}
	return 0;
}

static int
form_loop(struct formation *f, struct sr_error *err)
{
	int max = f->nconns + (f->mesh ? (int)f->world : 0) + f->a.nlisten +
	    f->a.pending_max;
	struct pollfd fds[max];
	enum slot_kind kind[max];
	uint32_t index[max];
	struct poll_set ps = { fds, kind, index, 0 };

	for (;;) {
		int64_t now = sr_clock_ns(), next;
		int64_t wake = f->leaving ? f->leave_by : f->probe ?
		    f->probe_deadline : f->deadline;
		int rc, listener = -1;

		if (formed(f, now))
			return 0;
		/* err holds why this rank leaves. */
		if (f->leaving && (everyone_told(f) || now >= f->leave_by))
			return -1;
		if (f->options->cancel != NULL && *f->options->cancel) {
			sr_error_set(err, SR_EINTERRUPTED, SR_PHASE_CONNECT,
			    "interrupted while forming the %s",
			    f->mesh ? "mesh" : "ring");
			return -1;
		}
		if (now >= f->deadline) {
			timeout_message(f, err);
			return -1;
		}
		sr_acceptor_expire(f, now);
		if ((next = progress(f, now)) < wake)
			wake = next;
		if (retry_due(f, now, err) != 0)
			return -1;
		wait_set(f, &ps, now, &wake);
		rc = poll(fds, (nfds_t)ps.n, sr_clock_left_ms(wake));
		if (rc < 0 && errno != EINTR) {
			if (!f->leaving)
				sr_error_set(err, SR_EIO, SR_PHASE_CONNECT,
				    "poll: %s", strerror(errno));
			return -1;
		}
		/* In poll order, so strays queued ahead of a real rank get
		 * their verdict too. */
		for (int i = 0; rc > 0 && i < ps.n; i++) {
			if (fds[i].revents == 0)
				continue;
			if (kind[i] == SLOT_LISTENER)
				listener = i;
			else if (serve_slot(f, &ps, i, err) != 0)
				return -1;
		}
		if (listener >= 0 && sr_acceptor_open(f))
			sr_acceptor_accept(f);
	}
}

static void
send_abort(int fd, const uint8_t *frame, size_t len)
{
	(void)sr_exchange_send_last(fd, frame, len);
	shutdown(fd, SHUT_WR);
}

/*
 * Formation failed: a link that did form gets an abort frame (a
 * collective's, with step SR_ABORT_FORMING) before it closes, so the
 * rank at its other end fails with this failure's class (an
 * authentication failure is 7 on every rank), not with "closed its link".
 * Best effort: a fresh link's send buffer is empty, and nothing waits.
 */
static void
formation_abort(struct formation *f, const struct sr_error *err)
{
	uint8_t out[SR_FRAME_HEADER_MAX + SR_ABORT_MAX];
	size_t header = f->mesh ? SR_FRAME_WIDE_LEN : SR_FRAME_HEADER_LEN;
	struct sr_frame frame = { .kind = SR_FRAME_ABORT,
		.step = SR_ABORT_FORMING };
	struct sr_abort abort;

	if (err->origin >= 0 && f->heard_abort) {
		/* A mesh forwards the origin's own words to every link. */
		abort = f->heard;
	} else if (err->origin >= 0) {
		return;		/* a ring neighbour's failure, heard: not ours */
	} else {
		memset(&abort, 0, sizeof(abort));
		abort.origin = f->rank;
		abort.wire_class = sr_wire_from_code(err->code);
		abort.culprit = err->peer >= 0 ? (uint32_t)err->peer :
		    SR_NO_RANK;
		snprintf(abort.reason, sizeof(abort.reason), "%.400s",
		    err->message);
	}
	frame.length = sr_abort_encode(&abort, out + header, SR_ABORT_MAX);
	if (f->mesh)
		sr_frame_encode_wide(&frame, out);
	else
		sr_frame_encode(&frame, out);
	for (int i = 0; i < f->nconns; i++)
		if (f->conns[i].state == CONNECT_DONE)
			send_abort(f->conns[i].fd, out, header + frame.length);
	for (uint32_t r = 0; r < f->world; r++)
		for (uint32_t s = 0; s < f->streams; s++)
			if ((f->mesh || r == f->a.expected) &&
			    *sr_acceptor_slot(&f->a, f->mesh, f->streams, r, s) >= 0)
				send_abort(*sr_acceptor_slot(&f->a, f->mesh,
				    f->streams, r, s), out, header + frame.length);
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

/* Rank r's address for stream s: its s-th (modulo how many it has). */
static const char *
nic_address(const struct formation *f, uint32_t r, uint32_t s, uint32_t *n)
{
	*n = 0;
	if (f->nics != NULL && f->nics[r] != NULL)
		while (f->nics[r][*n] != NULL)
			(*n)++;
	return *n > 0 ? f->nics[r][s % *n] : f->addresses[r];
}

/* With several addresses of its own, stream s leaves from its s-th. */
static int
connector_local(struct formation *f, struct connector *c, uint32_t s,
    char *why, size_t size)
{
	char host[SR_ADDR_MAX];
	uint16_t port;
	uint32_t n;
	const char *mine = nic_address(f, f->rank, s, &n);

	if (n < 2)
		return 0;
	c->bind_local = true;
	return sr_sock_split(mine, host, sizeof(host), &port, why, size) == 0 &&
	    sr_sock_resolve_within(host, 0, 1, f->deadline, f->options->cancel,
	    &c->local, why, size) == 0 ? 0 : -1;
}

/* A connector to rank peer, its address resolved; -1 with err. */
static int
connector_init(struct formation *f, struct connector *c, uint32_t peer,
    uint32_t stream, struct sr_error *err)
{
	char host[SR_ADDR_MAX], why[256];
	uint16_t port;
	uint32_t n;

	memset(c, 0, sizeof(*c));
	c->fd = -1;
	c->peer = peer;
	c->stream = stream;
	c->address = nic_address(f, peer, stream, &n);
	c->backoff = BACKOFF_FIRST_NS;
	c->state = CONNECT_BACKOFF;
	c->retry_at = f->started;
	if (sr_sock_split(c->address, host, sizeof(host), &port, why,
		sizeof(why)) == 0 &&
	    sr_sock_resolve_within(host, port, 0, f->deadline,
		f->options->cancel, &c->addr, why, sizeof(why)) == 0 &&
	    connector_local(f, c, stream, why, sizeof(why)) == 0)
		return 0;
	sr_error_set(err, f->options->cancel != NULL && *f->options->cancel ?
	    SR_EINTERRUPTED : SR_ECONFIG, SR_PHASE_CONNECT,
	    "the address of rank %u is unusable: %s", peer, why);
	sr_err_peer(err, peer, c->address);
	return -1;
}

/* The formation's state for a ring (one connector, one rank accepted)
 * or a mesh; -1 with err. */
static int
formation_init(struct formation *f, const struct sr_listener *listener,
    uint32_t rank,
    uint32_t world, uint64_t token, const char *const *addresses,
    const struct sr_ring_options *options, bool mesh, struct sr_error *err)
{
	struct acceptor *a = &f->a;
	uint32_t dials = 0, accepts = 0;

	memset(f, 0, sizeof(*f));
	f->rank = rank;
	f->world = world;
	f->token = token;
	f->options = options;
	f->addresses = addresses;
	f->keyed = options->key != NULL;
	f->mesh = mesh;
	f->started = sr_clock_ns();
	f->deadline = f->started + options->timeout_ms * 1000000;
	f->next_address = addresses[(rank + 1) % world];
	f->prev_address = addresses[(rank + world - 1) % world];
	a->listen_fds[a->nlisten++] = listener->fd;
	for (int i = 0; i < listener->nalso; i++)
		a->listen_fds[a->nlisten++] = listener->also[i];
	f->nics = options->nic_addresses;
	a->prev_fd = -1;
	a->expected = (rank + world - 1) % world;
	f->probe = mesh && options->probe_ms > 0;
	f->streams = f->probe || options->streams == 0 ? 1 : options->streams;
	f->report = options->probe;
	f->probe_deadline = f->started + (f->probe && options->probe_ms <
	    options->timeout_ms ? options->probe_ms : options->timeout_ms) *
	    1000000;
	for (uint32_t r = 0; mesh && r < world; r++) {
		dials += f->probe ? r != rank : sr_mesh_dials(rank, r, world);
		accepts += f->probe ? r != rank : sr_mesh_dials(r, rank, world);
	}
	f->nconns = (mesh ? (int)dials : 1) * (int)f->streams;
	a->missing = (mesh ? accepts : 1) * f->streams;
	a->pending_max = PENDING_MAX + (int)(mesh ? accepts * f->streams :
	    f->streams - 1);
	a->per_host_max = PER_HOST_MAX + (int)(mesh ? accepts * f->streams :
	    f->streams - 1);
	f->conns = calloc((size_t)(f->nconns > 0 ? f->nconns : 1),
	    sizeof(*f->conns));
	a->pending = calloc((size_t)a->pending_max, sizeof(*a->pending));
	if (f->streams > 1 && (a->extra = malloc(world * (f->streams - 1) *
	    sizeof(*a->extra))) != NULL)
		for (uint32_t i = 0; i < world * (f->streams - 1); i++)
			a->extra[i] = -1;
	if (mesh) {
		a->fds = malloc(world * sizeof(*a->fds));
		a->watch = calloc(world, sizeof(*a->watch));
		f->told = calloc(world, sizeof(*f->told));
	}
	if (f->conns == NULL || a->pending == NULL ||
	    (f->streams > 1 && a->extra == NULL) || (mesh &&
	    (a->fds == NULL || a->watch == NULL || f->told == NULL))) {
		sr_error_set(err, SR_ENOMEM, SR_PHASE_CONNECT, "out of memory");
		return -1;
	}
	for (uint32_t r = 0; mesh && r < world; r++)
		a->fds[r] = -1;
	for (uint32_t s = 0; !mesh && s < f->streams; s++)
		if (connector_init(f, &f->conns[s], (rank + 1) % world, s,
		    err) != 0)
			return -1;
	if (!mesh)
		return 0;
	for (uint32_t r = 0, i = 0; r < world; r++) {
		if (f->probe && r < world) {
			memset(&f->report[r], 0, sizeof(f->report[r]));
			f->report[r].peer = r;
		}
		if (!(f->probe ? r != rank : sr_mesh_dials(rank, r, world)))
			continue;
		for (uint32_t s = 1; s < f->streams; s++)
			if (connector_init(f, &f->conns[i + s], r, s, err) != 0)
				return -1;
		if (connector_init(f, &f->conns[i], r, 0, err) != 0) {
			if (!f->probe)
				return -1;
			/* An address that does not resolve is the probe's
			 * finding for that rank. */
			snprintf(f->report[r].error, sizeof(f->report[r].error),
			    "%.199s", err->message);
			f->conns[i].state = CONNECT_FAILED;
			sr_error_clear(err);
		}
		i += f->streams;
	}
	return 0;
}

/* Closes what formation holds but did not hand over, and frees it. */
static void
formation_fini(struct formation *f)
{
	for (int i = 0; i < f->nconns; i++) {
		sr_close_fd(&f->conns[i].fd);
		memset(&f->conns[i].auth, 0, sizeof(f->conns[i].auth));
	}
	while (f->a.npending > 0)
		sr_acceptor_drop(&f->a, 0);
	sr_close_fd(&f->a.prev_fd);
	for (uint32_t r = 0; f->a.fds != NULL && r < f->world; r++)
		sr_close_fd(&f->a.fds[r]);
	for (uint32_t i = 0; f->a.extra != NULL &&
	    i < f->world * (f->streams - 1); i++)
		sr_close_fd(&f->a.extra[i]);
	free(f->a.extra);
	free(f->conns);
	free(f->a.pending);
	free(f->a.fds);
	free(f->a.watch);
	free(f->told);
}

/* Runs formation to its end; on failure the links formed are told, then
 * closed with the rest (formation_fini). */
static int
form(struct formation *f, struct sr_error *err)
{
	int rc;

	for (int i = 0; i < f->a.nlisten; i++)
		if (sr_sock_nonblocking(f->a.listen_fds[i]) != 0)
			return sr_error_set(err, SR_EIO, SR_PHASE_ACCEPT,
			    "configuring the listener: %s", strerror(errno));
	rc = form_loop(f, err);
	while (f->a.npending > 0)
		sr_acceptor_drop(&f->a, 0);
	if (rc != 0)
		formation_abort(f, err);
	return rc;
}

int
sr_handshake_form(const struct sr_listener *listener, uint32_t rank, uint32_t world, uint64_t token,
    const char *const *addresses, const struct sr_ring_options *options,
    int *next_fds, int *prev_fds, struct sr_error *err)
{
	struct formation f;
	int rc = -1;

	if (check_key(options, err) == 0 &&
	    formation_init(&f, listener, rank, world, token, addresses,
	    options, false, err) == 0 && form(&f, err) == 0) {
		for (uint32_t s = 0; s < f.streams; s++) {
			int *prev = sr_acceptor_slot(&f.a, false, f.streams,
			    f.a.expected, s);

			next_fds[s] = f.conns[s].fd;
			prev_fds[s] = *prev;
			f.conns[s].fd = *prev = -1;
		}
		rc = 0;
	}
	formation_fini(&f);
	return rc;
}

/* Why a probe's connection to c->peer never got through, at its end. */
static void
probe_unanswered(struct formation *f, const struct connector *c)
{
	struct sr_probe_link *p = &f->report[c->peer];
	char took[32];

	p->attempts = c->attempts;
	if (c->state == CONNECT_DONE || c->state == CONNECT_FAILED)
		return;
	sr_clock_format_ms((f->probe_deadline - f->started) / 1000000, took,
	    sizeof(took));
	if (c->state == CONNECT_TALK)
		snprintf(p->error, sizeof(p->error), "no answer to the "
		    "handshake within %s", took);
	else if (c->state == CONNECT_IN_PROGRESS && c->last_error[0] == '\0')
		snprintf(p->error, sizeof(p->error), "the connection was not "
		    "answered within %s (no reply to its SYN)", took);
	else
		snprintf(p->error, sizeof(p->error), "no connection within %s "
		    "(last error: %.120s)", took, c->last_error);
}

/*
 * A probe ends with up to two connections a pair, one each way.  Both
 * ends keep the same one, by the mesh's rule: the one the mesh would
 * dial, or else the other; the rest are closed.
 */
static void
probe_finish(struct formation *f)
{
	for (int i = 0; i < f->nconns; i++) {
		struct connector *c = &f->conns[i];
		uint32_t r = c->peer;
		bool mine = c->state == CONNECT_DONE, theirs = f->a.fds[r] >= 0;

		probe_unanswered(f, c);
		if (mine && theirs && sr_mesh_dials(f->rank, r, f->world))
			sr_close_fd(&f->a.fds[r]);
		else if (mine && theirs)
			sr_close_fd(&c->fd);
		if (!mine)
			sr_close_fd(&c->fd);
	}
}

int
sr_mesh_form(const struct sr_listener *listener, uint32_t rank, uint32_t world, uint64_t token,
    const char *const *addresses, const struct sr_ring_options *options,
    int *fds, struct sr_error *err)
{
	struct formation f;
	int rc = -1;

	if (check_key(options, err) == 0 &&
	    formation_init(&f, listener, rank, world, token, addresses,
	    options, true, err) == 0 && form(&f, err) == 0) {
		if (f.probe)
			probe_finish(&f);
		for (uint32_t r = 0; r < world; r++)
			for (uint32_t s = 0; s < f.streams; s++) {
				int *slot = sr_acceptor_slot(&f.a, true,
				    f.streams, r, s);

				fds[s * world + r] = *slot;
				*slot = -1;
			}
		for (int i = 0; i < f.nconns; i++) {
			if (f.conns[i].state != CONNECT_DONE ||
			    f.conns[i].fd < 0)
				continue;
			fds[f.conns[i].stream * world + f.conns[i].peer] =
			    f.conns[i].fd;
			f.conns[i].fd = -1;
		}
		rc = 0;
	}
	formation_fini(&f);
	return rc;
}
