/*
 * acceptor.c - the accepting side of formation: accept every connection,
 * run each one's side of the exchange (hello and verdict, and with a key
 * the challenge, response, proof and result of auth.c) with its own short
 * deadline, and take the link once one proves to be a rank this one
 * awaits (a ring's previous rank; on a mesh, each rank that dials this
 * one, once).  Strays are dropped and the wait goes on.
 *
 * Slots for pending handshakes are few, and a stranger needs only the job
 * token (sent in clear) to get past the hello.  So no stage of the
 * exchange holds a slot for sure: a new connection evicts the one that
 * has waited longest on its peer since its last message (of its own host
 * once that host holds PER_HOST_MAX), and the real rank, which answers
 * each message at once, is never the one that waited longest.  A
 * connection that has proven the key is not pending at all: it is the
 * link.
 */
#include <errno.h>
#include <stdio.h>
#include <string.h>
#include <sys/socket.h>

#include "handshake.h"

/* A rank speaks right after connecting; a connection that has not
 * finished its handshake this long after being accepted is a stray. */
#define HELLO_TIMEOUT_NS (5LL * 1000000000)
/* Connections accepted per turn of the poll loop, so those already
 * pending get their turn between bursts. */
#define ACCEPT_BURST 4
/* Out of descriptors, the listener rests this long before accepting. */
#define ACCEPT_PAUSE_NS (100LL * 1000000)

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
void
sr_acceptor_drop(struct acceptor *a, int i)
{
	sr_close_fd(&a->pending[i].fd);
	memset(&a->pending[i].auth, 0, sizeof(a->pending[i].auth));
	memmove(&a->pending[i], &a->pending[i + 1],
	    (size_t)(a->npending - i - 1) * sizeof(a->pending[0]));
	a->npending--;
}

static const char *
stage_name(const struct pending *p)
{
	static const char *const names[] = { "hello", "challenge", "proof" };

	return names[p->x.stage];
}

/* Pending handshakes from host's address (all of them for NULL): how many,
 * and the one that has kept this rank waiting longest (-1 for none). */
static int
pending_stalest(const struct acceptor *a, const struct sr_sockaddr *host,
    int *count)
{
	int best = -1;

	*count = 0;
	for (int i = 0; i < a->npending; i++) {
		if (host != NULL && !sr_sock_same_host(&a->pending[i].peer, host))
			continue;
		(*count)++;
		if (best < 0 || a->pending[i].since < a->pending[best].since)
			best = i;
	}
	return best;
}

/*
 * Makes room for a connection just accepted from peer: when its host holds
 * PER_HOST_MAX slots, that host's stalest goes; else, when every slot is
 * taken, the stalest of all.  At any stage: past the hello a stranger with
 * the token stalls as well as before it.
 */
static void
make_room(struct formation *f, const struct sr_sockaddr *peer, int64_t now)
{
	struct acceptor *a = &f->a;
	char from[SR_ADDR_MAX], waited[32];
	char why[96];
	struct pending *p;
	int n, victim = pending_stalest(a, peer, &n);

	if (n >= a->per_host_max) {
		snprintf(why, sizeof(why), "its host holds %d of the %d pending "
		    "handshakes, the most one host may", n, a->npending);
	} else if (a->npending == a->pending_max) {
		snprintf(why, sizeof(why), "all %d pending handshakes are "
		    "taken", a->pending_max);
		victim = pending_stalest(a, NULL, &n);
	} else {
		return;
	}
	p = &a->pending[victim];
	snprintf(from, sizeof(from), "%s", p->address);
	sr_clock_format_ms((now - p->since) / 1000000, waited, sizeof(waited));
	reject(f, from, false, "evicted after waiting %s for its %s, to make "
	    "room for a newer connection: %s", waited, stage_name(p), why);
	a->evicted++;
	sr_acceptor_drop(a, victim);
}

/* What a pending handshake's complete message leads to. */
enum pending_step {
	PENDING_NEXT,	/* the answer is queued: the exchange goes on */
	PENDING_DROP,	/* rejected (reject() says why) */
	PENDING_TAKE	/* it is a rank awaited: the link is taken */
};

/*
 * Sends a verdict that ends the exchange, best effort, and drops p's
 * connection with reason.  A rank that leaves has told its previous rank
 * once such a verdict reached a hello that claims to be it.
 */
static enum pending_step
answer_and_reject(struct formation *f, struct pending *p,
    enum sr_verdict verdict, bool auth, const char *reason)
{
	sr_verdict_encode(verdict, f->rank, p->x.out);
	if (sr_exchange_send_last(p->fd, p->x.out, SR_VERDICT_LEN) == 0 &&
	    p->claims_prev)
		sr_formation_told(f, p->claims);
	reject(f, p->address, auth, "%s", reason);
	return PENDING_DROP;
}

/* Without a key the accepting verdict ends the exchange: it is sent now,
 * or the connection is dropped. */
static enum pending_step
answer_accepted(struct formation *f, struct pending *p)
{
	int rc = sr_exchange_send_last(p->fd, p->x.out, SR_VERDICT_LEN);

	if (rc == 0)
		return PENDING_TAKE;
	reject(f, p->address, false, "answering its hello failed: %s",
	    rc == SR_IO_AGAIN ? "the socket is full" : strerror(errno));
	return PENDING_DROP;
}

/* What kind of link a hello's flags ask for. */
static const char *
link_kind(uint32_t flags)
{
	if (flags & SR_HELLO_PROBE)
		return "bench connect's probe";
	return flags & SR_HELLO_MESH ? "a mesh (--mesh)" : "a ring";
}

/* The verdict on a decoded hello; notes the rank and stream it claims in
 * p. */
static enum sr_verdict
judge_hello(struct formation *f, struct pending *p,
    const struct sr_hello *hello)
{
	enum sr_verdict verdict;
	bool streams_ok, awaited;

	p->claims = hello->rank;
	p->stream = sr_hello_stream(hello->flags);
	streams_ok = sr_hello_streams(hello->flags) == f->streams &&
	    p->stream < f->streams;
	/* A stream of another count is judged as such (below), not as a
	 * rank this one does not await. */
	awaited = streams_ok ? sr_acceptor_awaits_stream(f, hello->rank,
	    p->stream) : sr_acceptor_dialled_by(f, hello->rank);
	verdict = sr_hello_judge(hello, f->token, f->world, awaited ?
	    hello->rank : !f->mesh && hello->rank != f->a.expected ?
	    f->a.expected : SR_NO_RANK);
	p->claims_prev = verdict == SR_VERDICT_ACCEPTED ||
	    verdict == SR_VERDICT_UNKNOWN_FLAGS;
	if (verdict != SR_VERDICT_ACCEPTED)
		return verdict;
	if (!(hello->flags & SR_HELLO_MESH) != !f->mesh ||
	    !(hello->flags & SR_HELLO_PROBE) != !f->probe)
		return SR_VERDICT_MESH;
	if (!streams_ok)
		return (enum sr_verdict)(SR_VERDICT_STREAMS + f->streams - 1);
	if (f->keyed && !(hello->flags & SR_HELLO_AUTH))
		return SR_VERDICT_AUTH_REQUIRED;
	if (!f->keyed && (hello->flags & SR_HELLO_AUTH))
		return SR_VERDICT_NO_KEY;
	if (!(hello->flags & SR_HELLO_CRC) != !f->options->integrity)
		return SR_VERDICT_INTEGRITY;
	if (f->leaving && !f->keyed)
		return SR_VERDICT_NEXT_AUTH;
	return SR_VERDICT_ACCEPTED;
}

/* Writes why a hello was refused with verdict into reason; true when the
 * refusal is of the authentication class. */
static bool
refusal(struct formation *f, const struct sr_hello *hello,
    enum sr_verdict verdict, char *reason, size_t size)
{
	uint32_t streams = sr_hello_streams(hello->flags);

	if (verdict >= SR_VERDICT_STREAMS && verdict <= SR_VERDICT_STREAMS_LAST) {
		snprintf(reason, size, "it opens %u stream(s) per link "
		    "(--streams %u) and this rank %u (--streams %u)%s (it claims "
		    "rank %u of %u)", streams, streams, f->streams, f->streams,
		    streams == f->streams ?
		    "; its connection names a stream past them" : "",
		    hello->rank, hello->world);
		return false;
	}
	switch (verdict) {
	case SR_VERDICT_AUTH_REQUIRED:
		snprintf(reason, size, "authentication failed: it has no key "
		    "(claims rank %u of %u)", hello->rank, hello->world);
		return true;
	case SR_VERDICT_NO_KEY:
		snprintf(reason, size, "authentication failed: it has a key "
		    "and this rank none (claims rank %u of %u)", hello->rank,
		    hello->world);
		return true;
	case SR_VERDICT_UNKNOWN_FLAGS:
		snprintf(reason, size, "its hello sets undefined flag bits 0x%x "
		    "(flags 0x%x; this version defines 0x%x; it claims rank %u "
		    "of %u)", hello->flags & ~SR_HELLO_KNOWN, hello->flags,
		    SR_HELLO_KNOWN, hello->rank, hello->world);
		return false;
	case SR_VERDICT_NEXT_AUTH:
		snprintf(reason, size, "told rank %u that this rank leaves: "
		    "authentication failed on its link to rank %u", hello->rank,
		    f->leave_peer);
		return true;
	case SR_VERDICT_MESH:
		snprintf(reason, size, "it forms %s and this rank %s (it claims "
		    "rank %u of %u)", link_kind(hello->flags),
		    link_kind((f->mesh ? SR_HELLO_MESH : 0) |
		    (f->probe ? SR_HELLO_PROBE : 0)), hello->rank, hello->world);
		return false;
	case SR_VERDICT_WRONG_RANK:
		if (f->mesh) {
			snprintf(reason, size, "%s (it claims rank %u of %u, which "
			    "%s)", sr_verdict_reason(verdict), hello->rank,
			    hello->world, hello->rank >= f->world ?
			    "is out of range" : hello->rank == f->rank ?
			    "is this rank's own" :
			    !sr_mesh_dials(hello->rank, f->rank, f->world) ?
			    "this rank dials itself" : "has its link already");
			return false;
		}
		break;
	default:
		break;
	}
	snprintf(reason, size, "%s (it claims rank %u of %u)",
	    sr_verdict_reason(verdict), hello->rank, hello->world);
	return false;
}

/* Judges a hello and queues the verdict. */
static enum pending_step
pending_hello(struct formation *f, struct pending *p)
{
	struct sr_hello hello;
	enum sr_verdict verdict;
	char reason[200];
	const char *why;

	if (sr_hello_decode(p->x.in, &hello, &why) != 0) {
		reject(f, p->address, false, "%s", why);
		return PENDING_DROP;
	}
	verdict = judge_hello(f, p, &hello);
	if (verdict != SR_VERDICT_ACCEPTED) {
		bool auth = refusal(f, &hello, verdict, reason, sizeof(reason));

		return answer_and_reject(f, p, verdict, auth, reason);
	}
	sr_verdict_encode(verdict, f->rank, p->x.out);
	if (!f->keyed)
		return answer_accepted(f, p);
	sr_exchange_expect(&p->x, STAGE_CHALLENGE, SR_VERDICT_LEN,
	    SR_CHALLENGE_LEN);
	sr_formation_auth_init(f, &p->auth, p->claims, f->rank);
	return PENDING_NEXT;
}

/* The connector's challenge: answer with a nonce and this rank's proof. */
static enum pending_step
pending_challenge(struct formation *f, struct pending *p)
{
	struct sr_challenge challenge;
	struct sr_response response;
	const char *why;

	if (sr_challenge_decode(p->x.in, &challenge, &why) != 0) {
		reject(f, p->address, true, "authentication failed: no challenge "
		    "after the hello");
		return PENDING_DROP;
	}
	memcpy(p->auth.nonce_connector, challenge.nonce, SR_NONCE_LEN);
	if (sr_auth_nonce(p->auth.nonce_acceptor) != 0 ||
	    sr_auth_mac(&p->auth, SR_AUTH_ACCEPTOR, response.mac) != 0) {
		reject(f, p->address, true, "authentication failed: no random "
		    "bytes or no MAC on this rank");
		return PENDING_DROP;
	}
	memcpy(response.nonce, p->auth.nonce_acceptor, SR_NONCE_LEN);
	sr_response_encode(&response, p->x.out);
	sr_exchange_expect(&p->x, STAGE_PROOF, SR_RESPONSE_LEN, SR_PROOF_LEN);
	return PENDING_NEXT;
}

/* The connector's proof: verify, answer, and only then accept the link
 * (a rank that leaves answers a valid proof with SR_RESULT_NEXT_AUTH). */
static enum pending_step
pending_proof(struct formation *f, struct pending *p)
{
	struct sr_proof proof;
	const char *why;
	bool valid = sr_proof_decode(p->x.in, &proof, &why) == 0 &&
	    sr_auth_verify(&p->auth, SR_AUTH_CONNECTOR, proof.mac);
	uint8_t result[SR_RESULT_LEN];
	bool sent;

	sr_result_encode(!valid ? SR_RESULT_REJECTED : f->leaving ?
	    SR_RESULT_NEXT_AUTH : SR_RESULT_ACCEPTED, result);
	sent = sr_exchange_send_last(p->fd, result, sizeof(result)) == 0;
	/* A proof means it had this rank's response, and with it the
	 * means to find this rank's key wrong on its own. */
	if (p->claims_prev)
		sr_formation_told(f, p->claims);
	if (!valid) {
		reject(f, p->address, true, "authentication failed: its proof "
		    "does not match this rank's key (another key?)");
		return PENDING_DROP;
	}
	if (f->leaving) {
		reject(f, p->address, true, "told rank %u that this rank leaves: "
		    "authentication failed on its link to rank %u",
		    p->claims, f->leave_peer);
		return PENDING_DROP;
	}
	if (!sent) {
		reject(f, p->address, true, "answering its proof failed: %s",
		    strerror(errno));
		return PENDING_DROP;
	}
	return PENDING_TAKE;
}

/*
 * Moves pending handshake i on as far as it goes without waiting: a loop
 * over its exchange's stages, each of which reads the connector's message
 * and queues the answer, or ends the handshake.  The link is taken once it
 * is complete.
 */
void
sr_acceptor_progress(struct formation *f, int i)
{
	struct acceptor *a = &f->a;
	struct pending *p = &a->pending[i];
	enum pending_step step = PENDING_DROP;
	const char *why = NULL;
	int rc;

	for (;;) {
		rc = sr_exchange_progress(p->fd, &p->x, &why);
		if (rc == 0)
			return;
		if (rc < 0) {
			/* Closed with this rank's response in hand: it found
			 * the key wrong itself. */
			if (p->claims_prev && p->x.stage == STAGE_PROOF)
				sr_formation_told(f, p->claims);
			reject(f, p->address, p->x.stage != STAGE_HELLO,
			    "%s after %zu of %zu bytes of its %s", why,
			    p->x.in_got, p->x.in_len, stage_name(p));
			sr_acceptor_drop(a, i);
			return;
		}
		switch (p->x.stage) {
		case STAGE_HELLO:
			step = pending_hello(f, p);
			break;
		case STAGE_CHALLENGE:
			step = pending_challenge(f, p);
			break;
		case STAGE_PROOF:
			step = pending_proof(f, p);
			break;
		}
		if (step != PENDING_NEXT)
			break;
		p->since = sr_clock_ns();
	}
	if (step == PENDING_TAKE) {
		*sr_acceptor_slot(a, f->mesh, f->streams, p->claims,
		    p->stream) = p->fd;
		a->missing--;
		p->fd = -1;
	}
	sr_acceptor_drop(a, i);
}

void
sr_acceptor_accept(struct formation *f)
{
	struct acceptor *a = &f->a;
	struct sr_sockaddr peer;
	struct pending *p;
	int64_t now;
	int fd;

	for (int burst = 0; burst < ACCEPT_BURST * a->nlisten &&
	    sr_acceptor_open(f); burst++) {
		peer.len = sizeof(peer.ss);
		fd = accept4(a->listen_fds[burst % a->nlisten],
		    (struct sockaddr *)&peer.ss, &peer.len,
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
			continue; /* EAGAIN, or a stray that reset: keep waiting */
		now = sr_clock_ns();
		make_room(f, &peer, now);
		p = &a->pending[a->npending++];
		memset(p, 0, sizeof(*p));
		p->fd = fd;
		p->deadline = now + HELLO_TIMEOUT_NS;
		p->since = now;
		p->peer = peer;
		sr_exchange_expect(&p->x, STAGE_HELLO, 0, SR_HELLO_LEN);
		sr_sock_format(&peer, p->address, sizeof(p->address));
		/* A rank sends its hello as it connects: judge it now, before
		 * the next arrival can take its place. */
		sr_acceptor_progress(f, a->npending - 1);
	}
}

void
sr_acceptor_expire(struct formation *f, int64_t now)
{
	struct acceptor *a = &f->a;
	char limit[32];

	for (int i = 0; i < a->npending;) {
		struct pending *p = &a->pending[i];

		if (now < p->deadline) {
			i++;
			continue;
		}
		sr_clock_format_ms(HELLO_TIMEOUT_NS / 1000000, limit,
		    sizeof(limit));
		reject(f, p->address, p->x.stage != STAGE_HELLO,
		    "sent %zu of %zu bytes of its %s in %s", p->x.in_got,
		    p->x.in_len, stage_name(p), limit);
		sr_acceptor_drop(a, i);
	}
}

void
sr_acceptor_rejections(const struct formation *f, char *buf, size_t size)
{
	buf[0] = '\0';
	if (f->a.rejected > 0 && f->keyed)
		snprintf(buf, size, "; refused %lu unauthenticated "
		    "connection(s) (%lu evicted to make room), the last from "
		    "%s: %s", f->a.rejected, f->a.evicted, f->a.last_from,
		    f->a.last_reason);
	else if (f->a.rejected > 0)
		snprintf(buf, size, "; rejected %lu connection(s), the last "
		    "from %s: %s", f->a.rejected, f->a.last_from,
		    f->a.last_reason);
}
