/*
 * engine.c - the transfer engine: drives one collective's frames on every
 * link of a transfer at once with poll(2).  Receiving is engine_recv.c's.
 *
 * A transfer is a list of frames to send and a list to receive, each on
 * one link (transport.h).  Per link, sends go out in list order and
 * receives come in in list order; a send may be gated on a receive, so it
 * forwards bytes as soon as they have arrived (and been folded).  Every
 * link of the transfer is watched the whole time, so a step sends and
 * receives at once, large buffers cannot deadlock, and an abort or a
 * close from any peer is seen even while this rank is blocked sending.
 * The engine decides what goes where and when; the links (transport.c)
 * move the bytes and own their state.
 *
 * Every header is checked against the frame this rank expects before a
 * byte of its payload is read: nothing is ever sized by the wire.
 *
 * Silence is judged per link.  A rank in a collective sends each peer it
 * has sent nothing to for a while a heartbeat (every quarter timeout, at
 * most a second apart; never on a link data flows on), saying it is alive
 * and whom it waits on.  A link this rank waits on (a receive due from
 * it, or a send it does not drain) that stays silent, heartbeats
 * included, for the timeout fails the collective naming that peer.  So
 * when a rank stops or a link freezes, only the ranks next to it time
 * out, and their abort names it to everyone else, instead of every rank's
 * timer expiring at once naming whichever peer it happened to wait on.
 * Ranks that are all alive but all wait (a deadlock of out-of-step calls)
 * fail after twice the timeout without progress.
 */
#include <errno.h>
#include <poll.h>
#include <sched.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "clock.h"
#include "engine_impl.h"
#include "error.h"
#include "reduce.h"
#include "transport.h"
#include "wire.h"

struct sr_engine *
sr_engine_new(const struct sr_engine_config *config)
{
	struct sr_engine *e = calloc(1, sizeof(*e));
	uint32_t streams = config->streams > 0 ? config->streams : 1;
	size_t n = config->nlinks > 0 ? config->nlinks : 1;

	if (e == NULL)
		return NULL;
	e->cursor = calloc(n, sizeof(*e->cursor));
	e->stream = calloc(n * streams, sizeof(*e->stream));
	if (e->cursor == NULL || e->stream == NULL) {
		free(e->cursor);
		free(e->stream);
		free(e);
		return NULL;
	}
	e->c = *config;
	e->streams = streams;
	e->spin_ns = SR_SPIN_NS;
	sr_spread_init(&e->spread);
	return e;
}

void
sr_engine_free(struct sr_engine *e)
{
	if (e == NULL)
		return;
	for (uint32_t i = 0; i < e->c.nlinks; i++)
		free(e->cursor[i].pieces);
	for (uint32_t i = 0; i < e->c.nlinks * e->streams; i++)
		free(e->stream[i].segment);
	free(e->cursor);
	free(e->stream);
	free(e);
}

void
sr_engine_set_timeout(struct sr_engine *e, int64_t timeout_ms)
{
	e->c.timeout_ms = timeout_ms;
}

struct sr_spread *
sr_engine_spread(struct sr_engine *e)
{
	return &e->spread;
}

const struct sr_abort *
sr_engine_heard(const struct sr_engine *e)
{
	return e->heard_abort ? &e->heard : NULL;
}

static int
next_send(const struct run *r, int from, uint32_t link)
{
	for (int i = from; i < r->x->nsends; i++)
		if (r->x->sends[i].link == link)
			return i;
	return -1;
}

int
sr_engine_next_recv(const struct run *r, int from, uint32_t link)
{
	for (int i = from; i < r->x->nrecvs; i++)
		if (r->x->recvs[i].link == link)
			return i;
	return -1;
}

/* ------------------------------------------------------------ the errors */

/* The frame a failure on link is described by: the one due there, else
 * the transfer's first; false when the transfer has none. */
static bool
frame_due(const struct run *r, uint32_t link, struct sr_frame *frame)
{
	const struct sr_cursor *c = &r->cursor[link];

	if (c->recv >= 0) {
		*frame = r->x->recvs[c->recv].frame;
		frame->length = r->x->recvs[c->recv].len;
	} else if (c->send >= 0) {
		*frame = r->x->sends[c->send].frame;
		frame->length = r->x->sends[c->send].len;
	} else if (r->x->nrecvs > 0) {
		*frame = r->x->recvs[0].frame;
		frame->length = r->x->recvs[0].len;
	} else if (r->x->nsends > 0) {
		*frame = r->x->sends[0].frame;
		frame->length = r->x->sends[0].len;
	} else {
		return false;
	}
	return true;
}

void
sr_engine_peer_error(struct run *r, uint32_t link, enum sr_code code,
    struct sr_error *err, const char *fmt, ...)
{
	struct sr_link *l = run_link(r, link);
	char what[300], where[160] = "", stream[40] = "";
	struct sr_frame frame;
	bool have = frame_due(r, run_link_of(r, link), &frame);
	va_list ap;

	va_start(ap, fmt);
	vsnprintf(what, sizeof(what), fmt, ap);
	va_end(ap);
	if (have)
		sr_frame_describe(&frame, where, sizeof(where));
	if (r->e->streams > 1)
		snprintf(stream, sizeof(stream), " on stream %u of %u",
		    run_stream_of(r, link), r->e->streams);
	sr_error_set(err, code, SR_PHASE_COLLECTIVE, "%s rank %u (%s)%s%s%s",
	    what, l->rank, l->address, stream, where[0] ? " in " : "", where);
	err->peer = l->rank;
	snprintf(err->peer_address, sizeof(err->peer_address), "%s",
	    l->address);
	if (have)
		err->step = frame.step;
}

void
sr_engine_io_error(struct run *r, uint32_t link, int rc, struct sr_error *err)
{
	int tx_errno = run_link(r, link)->tx_errno;

	/* The end of a stream whose send side broke first: the send's
	 * error (a reset) says more than the EOF that followed it. */
	if (rc == SR_IO_EOF && tx_errno != 0) {
		errno = tx_errno;
		rc = SR_IO_ERROR;
	}
	if (rc == SR_IO_EOF)
		sr_engine_peer_error(r, link, SR_EPEER_CLOSED, err,
		    "lost the connection (closed by the peer) to");
	else if (errno == ECONNRESET || errno == EPIPE)
		sr_engine_peer_error(r, link, SR_EPEER_CLOSED, err,
		    "lost the connection (%s) to", strerror(errno));
	else if (errno == ETIMEDOUT)
		sr_engine_peer_error(r, link, SR_ETIMEOUT, err,
		    "no acknowledgement within the timeout (%s) from",
		    strerror(errno));
	else
		sr_engine_peer_error(r, link, SR_EIO, err,
		    "socket error (%s) with", strerror(errno));
}

/* -------------------------------------------------------------- sending */

/*
 * Bytes of s that may go: all of them, or for a send that forwards a
 * receive, what that receive has finished (folded, and with integrity
 * checks, verified against its trailer: nothing unverified is passed on).
 */
static uint64_t
send_ready(const struct run *r, const struct sr_send *s)
{
	const struct sr_recv *g;

	if (s->gate < 0)
		return s->len;
	g = &r->x->recvs[s->gate];
	if (g->complete)
		return s->len;
	return r->e->c.integrity ? g->verified : g->done;
}

/*
 * Queues the next piece of s once the whole piece is ready (for an empty
 * frame, once the gate is complete).  A frame under way thus always has
 * its bytes in hand: a rank that fails mid-frame finishes it with real
 * data before its abort (sr_link_last_words), never with filler a
 * neighbour could take for a result.
 */
static bool
start_piece(struct run *r, struct sr_link *l, struct sr_send *s)
{
	struct sr_frame frame = s->frame;
	uint64_t piece = s->len - s->off;

	if (piece > r->frame_max)
		piece = r->frame_max;
	if (piece == 0 ? !(s->gate < 0 || r->x->recvs[s->gate].complete) :
	    send_ready(r, s) < s->off + piece)
		return false;
	frame.length = piece;
	if (r->e->streams > 1)
		frame.piece = (uint32_t)(s->off / r->frame_max);
	sr_link_put_frame(l, &frame, s->data + s->off);
	s->off += piece;
	s->started = true;
	return true;
}

/*
 * A send failed.  A peer that failed first sent its abort before it went,
 * and the abort may be queued here still (the reset that broke the send
 * came after it).  Its words name the rank that really failed, so after a
 * reset or a broken pipe the link is read on until the abort or the end
 * of the stream comes; only then is the failure this rank's own.
 */
static int
send_failed(struct run *r, uint32_t link, struct sr_error *err)
{
	int e = run_link(r, link)->tx_errno;

	if (e == EPIPE || e == ECONNRESET)
		return 0;
	errno = e;
	sr_engine_io_error(r, link, SR_IO_ERROR, err);
	return -1;
}

/*
 * Which stream of link takes the next piece of send s, connection k
 * being idle: with one stream, or a send of one piece, k; k too while
 * its kernel holds less than a quarter frame unacknowledged (it keeps
 * up); else the idle stream whose kernel holds the least.  ring.c keeps
 * what a stream holds unsent to a frame, but an idle stream may still
 * hold much in flight: a capped, slow or stalled one holds the most and
 * is handed the fewest pieces.  With every flow capped (scripts/bench-
 * streams, 4 streams, 16 MiB at world 2, the ratio to one stream, medians
 * of 3 runs) the first idle stream taking each piece gave 2.55-3.33x
 * (one stream handed three of a step's eight pieces, another one), this
 * 3.91x and 3.96x; on loopback it measured the same as the first idle
 * stream (alternating call by call, 16 MiB and 256 MiB, within 2%).  A
 * transfer that does not spread (spread.c) keeps every piece on k, which
 * pump_out makes its link's first stream.
 */
static uint32_t
least_queued(const struct run *r, uint32_t link, uint32_t k,
    const struct sr_send *s)
{
	uint64_t best = 0;

	if (r->e->streams == 1 || s->len <= r->frame_max || !r->spread)
		return k;
	best = sr_link_queued(run_link(r, k));
	if (best < r->frame_max / 4)
		return k;
	for (uint32_t j = 0; j < r->e->streams && best > 0; j++) {
		uint32_t c = run_conn(r, link, j);
		const struct sr_link *l = run_link(r, c);
		uint64_t q;

		if (c == k || !sr_link_tx_idle(l) || l->tx_errno != 0)
			continue;
		if ((q = sr_link_queued(l)) < best) {
			best = q;
			k = c;
		}
	}
	return k;
}

/*
 * Sends what it can on connection k; returns bytes moved or -1 on error.
 * Each time the connection has handed its frame to the kernel the link's
 * next piece goes out: with several streams, on the idle one that holds
 * the least (least_queued), pushed there at once, until k takes one or
 * the socket it went to is full.
 */
static int64_t
pump_out(struct run *r, uint32_t k, struct sr_error *err)
{
	uint32_t link = run_link_of(r, k);
	struct sr_cursor *c = &r->cursor[link];
	struct sr_stream *st = &r->e->stream[k];
	struct sr_link *l = run_link(r, k);
	int64_t moved = 0;

	if (l->tx_errno != 0) {
		/* Nothing more will be read there: the send's error stands. */
		if (l->eof) {
			errno = l->tx_errno;
			sr_engine_io_error(r, k, SR_IO_ERROR, err);
			return -1;
		}
		/* A parked frame hides what came behind it. */
		if (l->rx == SR_RX_READY || st->dropping)
			return sr_engine_drop_to_abort(r, k, err);
		return 0;
	}
	for (;;) {
		uint64_t payload;
		uint32_t to;

		if (sr_link_tx_idle(l)) {
			struct sr_send *s;

			st->carrying = false;
			if (c->send < 0)
				break;
			s = &r->x->sends[c->send];
			if (s->started && s->off == s->len) {
				c->send = next_send(r, c->send + 1, link);
				continue;
			}
			/* Unspread, the link's other streams take no
			 * piece; what they carry goes on. */
			if (!r->spread && run_stream_of(r, k) != 0)
				break;
			if ((to = least_queued(r, link, k, s)) != k) {
				if (!start_piece(r, run_link(r, to), s))
					break;
				r->e->stream[to].carrying = true;
				moved += sr_link_push(run_link(r, to), &payload);
				if (run_link(r, to)->tx_errno != 0)
					return send_failed(r, to, err) < 0 ? -1 :
					    moved;
				continue;
			}
			if (!start_piece(r, l, s))
				break;	/* waiting for the gate */
			st->carrying = true;
		}
		moved += sr_link_push(l, &payload);
		if (l->tx_errno != 0)
			return send_failed(r, k, err) < 0 ? -1 : moved;
		if (!sr_link_tx_idle(l))
			break;	/* the socket is full */
	}
	return moved;
}

/* ---------------------------------------------------------- the poll loop */

/* The connections of the transfer: each link's streams, link by link. */
static int
nconns(const struct run *r)
{
	return r->x->nlinks * (int)r->e->streams;
}

/* The i-th of them: stream i % streams of the transfer's link i /
 * streams. */
static uint32_t
conn(const struct run *r, int i)
{
	uint32_t streams = r->e->streams;

	if (streams == 1)
		return r->x->links[i];
	return run_conn(r, r->x->links[i / (int)streams],
	    (uint32_t)(i % (int)streams));
}

static bool
finished(const struct run *r)
{
	for (int i = 0; i < r->x->nlinks; i++) {
		const struct sr_cursor *c = &r->cursor[r->x->links[i]];

		if (c->send >= 0 || c->recv >= 0)
			return false;
	}
	/* One stream: its send ends only once the link is idle. */
	if (r->e->streams == 1 && !r->x->drain)
		return true;
	for (int i = 0; i < nconns(r); i++) {
		uint32_t k = conn(r, i);
		const struct sr_link *l = run_link(r, k);

		if ((r->e->stream[k].carrying && !sr_link_tx_idle(l)) ||
		    (r->x->drain && !l->eof))
			return false;
	}
	return true;
}

/* Whether this rank waits on connection k by itself: it does not drain
 * what this rank sends, a piece is half read from it, or (closing) its
 * end is still due.  (A receive due on its link, with no piece under
 * way, is waited for on the link's freshest stream: check_silence.) */
static bool
waits_on(const struct run *r, uint32_t k)
{
	const struct sr_link *l = run_link(r, k);

	return sr_link_tx_blocked(l) || l->tx_errno != 0 ||
	    (r->x->drain && !l->eof) || (r->cursor[run_link_of(r, k)].recv >=
	    0 && (r->e->streams == 1 || r->e->stream[k].active));
}

/* Whether a stream of link L has a frame stuck in a full socket. */
static bool
link_blocked(const struct run *r, uint32_t link)
{
	for (uint32_t s = 0; s < r->e->streams; s++)
		if (sr_link_tx_blocked(run_link(r, run_conn(r, link, s))))
			return true;
	return false;
}

/* The link this rank waits on: the last of the transfer's with a
 * receive due (or, with blocked too, a send stuck), else its first. */
static uint32_t
waited_link(const struct run *r, bool blocked)
{
	for (int i = r->x->nlinks - 1; i >= 0; i--) {
		uint32_t k = r->x->links[i];

		if (r->cursor[k].recv >= 0 || (blocked && link_blocked(r, k)))
			return k;
	}
	return r->x->links[0];
}

static void
silence_error(struct run *r, uint32_t k, struct sr_error *err)
{
	char took[32];

	/*
	 * A peer that does not drain what this rank has ready to send (its
	 * buffers stayed full the whole time: it is stuck, or its link is),
	 * or that sends nothing, not even a heartbeat, while this rank waits
	 * for its data.
	 */
	sr_clock_format_ms(r->e->c.timeout_ms, took, sizeof(took));
	sr_engine_peer_error(r, k, SR_ETIMEOUT, err,
	    "timed out after %s of silence %s", took,
	    r->cursor[run_link_of(r, k)].recv < 0 &&
	    sr_link_tx_blocked(run_link(r, k)) ?
	    "waiting to send to" : "waiting for data from");
}

/* Every link this rank waits on is alive, yet nothing moved for twice
 * the timeout: the ranks wait on one another. */
static void
stall_error(struct run *r, struct sr_error *err)
{
	char took[32], also[64] = "";
	uint32_t k = waited_link(r, true);
	uint32_t next = run_link(r, k)->waits_on;

	if (next != SR_NO_RANK)
		snprintf(also, sizeof(also), " (it waits on rank %u)", next);
	sr_clock_format_ms(2 * r->e->c.timeout_ms, took, sizeof(took));
	sr_engine_peer_error(r, k, SR_ETIMEOUT, err, "timed out after %s "
	    "without progress, every rank alive but waiting (out of step?)%s; "
	    "this rank waits on", took, also);
}

/* When link L was last heard on any stream, and the stream. */
static int64_t
link_heard(const struct run *r, uint32_t link, uint32_t *k)
{
	int64_t heard = INT64_MIN;

	for (uint32_t s = 0; s < r->e->streams; s++) {
		uint32_t j = run_conn(r, link, s);

		if (run_link(r, j)->heard_ns > heard) {
			heard = run_link(r, j)->heard_ns;
			*k = j;
		}
	}
	return heard;
}

/*
 * The silence checks: -1 with err when a link this rank waits on stayed
 * silent for the timeout, or nothing moved for twice the timeout.  Else
 * *wake is when the next check is due.  A receive due on a link of
 * several streams is waited for on any of them (the sender may use any),
 * a piece under way on its own stream.
 */
static int
check_silence(struct run *r, int64_t now, int64_t *wake,
    struct sr_error *err)
{
	int64_t timeout = r->e->c.timeout_ms * 1000000;
	int64_t quietest = INT64_MAX;
	int found = -1;

	*wake = r->progress_ns + 2 * timeout;
	for (int i = 0; i < nconns(r) + r->x->nlinks; i++) {
		uint32_t k = 0;
		int64_t heard;

		if (i < nconns(r)) {
			k = conn(r, i);
			if (!waits_on(r, k))
				continue;
			heard = run_link(r, k)->heard_ns;
		} else {
			uint32_t link = r->x->links[i - nconns(r)];

			if (r->e->streams == 1 || r->cursor[link].recv < 0)
				continue;
			heard = link_heard(r, link, &k);
		}
		if (heard < quietest) {
			quietest = heard;
			found = (int)k;
		}
		if (heard + timeout < *wake)
			*wake = heard + timeout;
	}
	if (found >= 0 && now - quietest >= timeout) {
		silence_error(r, (uint32_t)found, err);
		return -1;
	}
	if (now - r->progress_ns >= 2 * timeout) {
		stall_error(r, err);
		return -1;
	}
	return 0;
}

/*
 * Tells each peer of the transfer this rank has sent nothing to for a
 * heartbeat period that it is alive, and whom it waits on, when the link
 * is between frames (each stream its own).  Lowers *wake to the next
 * heartbeat due.
 */
static int
heartbeats(struct run *r, int64_t now, int64_t *wake, struct sr_error *err)
{
	uint32_t waited = waited_link(r, false);
	struct sr_frame beat;

	if (r->x->drain)
		return 0;
	beat = sr_heartbeat_frame(r->cursor[waited].recv >= 0 ?
	    run_link(r, waited)->rank : SR_NO_RANK, r->x->seq);
	for (int i = 0; i < nconns(r); i++) {
		uint32_t k = conn(r, i);
		struct sr_link *l = run_link(r, k);
		uint64_t payload;

		if (l->tx_errno != 0)
			continue;
		if (now - l->sent_ns < r->heartbeat_ns) {
			if (l->sent_ns + r->heartbeat_ns < *wake)
				*wake = l->sent_ns + r->heartbeat_ns;
			continue;
		}
		if (!sr_link_tx_idle(l))
			continue;	/* mid-frame: its bytes are the news */
		sr_link_put_control(l, &beat, NULL);
		sr_link_beat_sent(l, now);
		(void)sr_link_push(l, &payload);
		if (l->tx_errno != 0 && send_failed(r, k, err) < 0)
			return -1;
		if (now + r->heartbeat_ns < *wake)
			*wake = now + r->heartbeat_ns;
	}
	return 0;
}

/* What this rank waits for on each connection of the transfer, for
 * poll.  A stream holding a header of a later frame waits until its
 * turn comes, not for bytes. */
static void
wait_for(const struct run *r, struct pollfd *fds)
{
	for (int i = 0; i < nconns(r); i++) {
		uint32_t k = conn(r, i);
		const struct sr_link *l = run_link(r, k);
		bool idle = l->rx == SR_RX_READY || l->eof;

		fds[i].fd = l->fd;
		/* A stream that ended while another of its link still carries
		 * the receive has nothing more to say. */
		fds[i].events = idle && (r->cursor[run_link_of(r, k)].recv < 0 ||
		    l->rx == SR_RX_READY || l->rx == SR_RX_CLOSED) ? 0 : POLLIN;
		if (sr_link_tx_blocked(l))
			fds[i].events |= POLLOUT;
		/* An idle link would still report POLLHUP: leave it out, or
		 * poll would spin. */
		if (fds[i].events == 0)
			fds[i].fd = -1;
		fds[i].revents = 0;
	}
}

/*
 * A blocking wake-up costs tens of microseconds, so until spin_until the
 * sockets are polled without sleeping.  poll reads a socket's state
 * without taking its lock, which a recv would hold against the peer's
 * kernel delivering the very bytes awaited.  Each try yields the core: a
 * rank waited for may share it (more ranks than cores, or the scheduler
 * put two ranks together), and a pure spin would hold it for a whole
 * time slice.  Returns poll's count (0: nothing came; sleep now).
 */
static int
spin(struct pollfd *fds, nfds_t n, int64_t spin_until)
{
	int rc = 0;

	while (sr_clock_ns() < spin_until) {
		rc = poll(fds, n, 0);
		if (rc != 0)
			break;
		sched_yield();
	}
	return rc;
}

/* Room in c's bitmap for the pieces of every receive of the transfer on
 * the link; -1 on ENOMEM. */
static int
pieces_room(struct run *r, uint32_t link, struct sr_cursor *c)
{
	size_t need = 1;

	for (int i = 0; i < r->x->nrecvs; i++)
		if (r->x->recvs[i].link == link) {
			size_t bytes = (size_t)(run_pieces(r,
			    r->x->recvs[i].len) + 7) / 8;

			if (bytes > need)
				need = bytes;
		}
	if (need <= c->pieces_size)
		return 0;
	free(c->pieces);
	c->pieces_size = 0;
	if ((c->pieces = malloc(need)) == NULL)
		return -1;
	c->pieces_size = need;
	return 0;
}

/* A connection of the transfer: its stream's state and its clocks. */
static int
start_conn(struct run *r, uint32_t k, int64_t now, struct sr_error *err)
{
	struct sr_stream *st = &r->e->stream[k];
	struct sr_cursor *c = &r->cursor[run_link_of(r, k)];
	struct sr_link *l = run_link(r, k);

	if (l->fd < 0) {
		uint32_t peer = run_link_of(r, k);

		sr_error_set(err, SR_EPEER_CLOSED, SR_PHASE_COLLECTIVE,
		    "no link to rank %u (%s): it did not form", peer,
		    peer < r->e->c.world ? r->e->c.addresses[peer] : "?");
		err->peer = peer;
		return -1;
	}
	st->active = false;
	st->carrying = false;
	/* A link whose send broke never sends again: what comes on it is
	 * still dropped, mid-frame or not. */
	if (l->tx_errno == 0)
		st->dropping = false;
	st->fill = 0;
	if (st->segment == NULL && (st->segment = malloc(SR_SEGMENT)) == NULL)
		return sr_error_set(err, SR_ENOMEM, SR_PHASE_COLLECTIVE,
		    "out of memory");
	/* What the transfer moves is read at once; a link it only watches
	 * and last found dry waits for poll to say otherwise, which the
	 * first wait asks before it sleeps.  A recv on each watched link at
	 * each transfer cost a mesh's small collectives a syscall a link a
	 * hop: at 8 ranks, 30 recvs a barrier and allreduce against 22
	 * (strace -c), and 1.06x the time (11 pairs alternating, 8 B). */
	if (c->send >= 0 || c->recv >= 0)
		sr_link_readable(l);
	/*
	 * A link a group's transfer only watches (a ring neighbour's)
	 * keeps its send clock: across a run of short group collectives it
	 * still gets a heartbeat each period, so a neighbour waiting on this
	 * rank in a ring collective hears it.  The ring's own transfers
	 * (group 0) are unchanged.
	 */
	if (r->x->group != 0 && c->send < 0 && c->recv < 0)
		sr_link_alive(l, now, false);
	else
		sr_link_clocks_start(l, now);
	return 0;
}

/* Resets the cursors and the transfer's own state; the clocks of every
 * link from now, and the heartbeat period. */
static int
start(struct run *r, struct sr_error *err)
{
	int64_t now = sr_clock_ns();
	struct sr_transfer *x = r->x;

	r->esize = sr_dtype_size(x->dtype);
	if (r->esize == 0)
		r->esize = 1;
	r->frame_max = x->frame_max > 0 ? x->frame_max : SR_FRAME_MAX;
	r->heartbeat_ns = r->e->c.timeout_ms * 1000000 / 4;
	if (r->heartbeat_ns > SR_HEARTBEAT_MAX_NS)
		r->heartbeat_ns = SR_HEARTBEAT_MAX_NS;
	r->progress_ns = now;
	r->start_ns = now;
	r->waited_ns = 0;
	r->spread = r->e->streams > 1 && sr_spread_starts(&r->e->spread);
	r->send_bytes = 0;
	for (int i = 0; i < x->nsends; i++) {
		r->send_bytes += x->sends[i].len;
		x->sends[i].off = 0;
		x->sends[i].started = false;
	}
	for (int i = 0; i < x->nrecvs; i++) {
		x->recvs[i].done = 0;
		x->recvs[i].verified = 0;
		x->recvs[i].complete = false;
	}
	for (int i = 0; i < x->nlinks; i++) {
		uint32_t k = x->links[i];
		struct sr_cursor *c = &r->cursor[k];

		if (r->e->streams > 1 && pieces_room(r, k, c) != 0)
			return sr_error_set(err, SR_ENOMEM, SR_PHASE_COLLECTIVE,
			    "out of memory");
		c->send = next_send(r, 0, k);
		sr_engine_recv_start(r, k, sr_engine_next_recv(r, 0, k));
	}
	for (int i = 0; i < nconns(r); i++)
		if (start_conn(r, conn(r, i), now, err) != 0)
			return -1;
	return 0;
}

/* After a pass that moved bytes (or heard a peer): the links' clocks. */
static void
note_alive(struct run *r, const int64_t *in, const int64_t *out, int64_t now)
{
	for (int i = 0; i < nconns(r); i++)
		if (in[i] > 0 || out[i] > 0)
			sr_link_alive(run_link(r, conn(r, i)), now, out[i] > 0);
}

/* One pass over every connection, receiving then sending; bytes moved
 * or -1. */
static int64_t
pass(struct run *r, int64_t *in, int64_t *out, struct sr_error *err)
{
	int64_t moved = 0;

	for (int i = 0; i < nconns(r); i++) {
		uint32_t k = conn(r, i);

		in[i] = sr_engine_pump_in(r, k, err);
		if (in[i] < 0)
			return -1;
		out[i] = pump_out(r, k, err);
		if (out[i] < 0)
			return -1;
		moved += in[i] + out[i];
	}
	return moved;
}

static int
interrupted(struct run *r, struct sr_error *err)
{
	sr_engine_peer_error(r, waited_link(r, false), SR_EINTERRUPTED, err,
	    "interrupted waiting for");
	err->peer = -1;
	err->peer_address[0] = '\0';
	return -1;
}

/* Nothing moved: the idle links are read, the silence checked and the
 * heartbeats sent; then the rank spins, then sleeps, until a link has
 * news or a deadline is due.  0, 1 when the transfer is finished, -1. */
static int
wait_idle(struct run *r, int64_t *spin_until, struct sr_error *err)
{
	int n = nconns(r);
	struct pollfd fds[n];
	int64_t now, wake = INT64_MAX;
	int rc;

	for (int i = 0; i < n; i++)
		if (sr_engine_watch_idle(r, conn(r, i), err) != 0)
			return -1;
	if (finished(r))
		return 1;
	now = sr_clock_ns();
	if (check_silence(r, now, &wake, err) != 0 ||
	    heartbeats(r, now, &wake, err) != 0)
		return -1;
	/* Unspread, the transfer spreads once nothing has moved for a while
	 * (waited): a stalled first stream sends no news to wake on. */
	if (!r->spread && r->e->streams > 1 &&
	    r->progress_ns + SR_SPREAD_AFTER_NS < wake)
		wake = r->progress_ns + SR_SPREAD_AFTER_NS;
	wait_for(r, fds);
	if (r->e->spin_ns > 0 && *spin_until == 0)
		*spin_until = now + r->e->spin_ns;
	rc = spin(fds, (nfds_t)n, *spin_until);
	if (rc == 0)
		rc = poll(fds, (nfds_t)n, sr_clock_left_ms(wake));
	if (rc < 0 && errno != EINTR) {
		sr_error_set(err, SR_EIO, SR_PHASE_COLLECTIVE, "poll: %s",
		    strerror(errno));
		return -1;
	}
	for (int i = 0; i < n; i++)
		if (rc > 0 && (fds[i].revents & (POLLIN | POLLHUP | POLLERR)))
			sr_link_readable(run_link(r, conn(r, i)));
	return 0;
}

/* A wait that began at `since` is over: what it adds to the transfer's
 * waiting, and whether an unspread transfer spreads from now on. */
static void
waited(struct run *r, int64_t since)
{
	int64_t now = sr_clock_ns();

	r->waited_ns += now - since;
	if (!r->spread && r->e->streams > 1 &&
	    sr_spread_midway(now - r->start_ns, r->waited_ns,
	    now - r->progress_ns))
		r->spread = true;
}

/* A transfer finished: with several streams, one that sent enough to
 * tell goes into the verdict on the next. */
static int
done(struct run *r)
{
	if (r->e->streams > 1 &&
	    r->send_bytes >= SR_SPREAD_FRAMES * r->frame_max)
		sr_spread_judge(&r->e->spread, sr_clock_ns() - r->start_ns,
		    r->waited_ns);
	return 0;
}

int
sr_engine_run(struct sr_engine *e, struct sr_transfer *xfer,
    struct sr_error *err)
{
	struct run r = { .e = e, .x = xfer, .cursor = e->cursor };
	int n = xfer->nlinks * (int)e->streams;
	int64_t spin_until = 0;
	int64_t in[n > 0 ? n : 1];
	int64_t out[n > 0 ? n : 1];

	if (xfer->nlinks == 0)
		return 0;
	if (start(&r, err) != 0)
		return -1;
	for (;;) {
		int64_t moved, now;
		int rc;

		if (e->c.cancel != NULL && *e->c.cancel)
			return interrupted(&r, err);
		if ((moved = pass(&r, in, out, err)) < 0)
			return -1;
		if (finished(&r))
			return done(&r);
		if (moved > 0) {
			now = sr_clock_ns();
			note_alive(&r, in, out, now);
			r.progress_ns = now;
			spin_until = 0;
			/* A link this rank has nothing to send on hears from
			 * it all the same: one header a period, while data
			 * flows on the others. */
			if (heartbeats(&r, now, &(int64_t){ INT64_MAX },
			    err) != 0)
				return -1;
			continue;
		}
		/* Only once nothing moves: while data flows, an extra recv on
		 * a quiet socket each pass would be a syscall wasted. */
		now = sr_clock_ns();
		rc = wait_idle(&r, &spin_until, err);
		waited(&r, now);
		if (rc != 0)
			return rc < 0 ? -1 : done(&r);
	}
}
