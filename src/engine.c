/*
 * engine.c - the transfer engine: drives one collective's frames on both
 * ring sockets at once with poll(2).
 *
 * A transfer is a list of frames to send and a list to receive, each on
 * one side (next or previous rank).  Per side, sends go out in list order
 * and receives come in in list order; a send may be gated on a receive,
 * so it forwards bytes as soon as they have arrived (and been folded).
 * Both sockets are watched the whole time, so a step sends and receives at
 * once, large buffers cannot deadlock, and an abort or a close from either
 * neighbour is seen even while this rank is blocked sending.
 *
 * Every header is checked against the frame this rank expects before a
 * byte of its payload is read: nothing is ever sized by the wire.
 *
 * Silence is judged per side.  A rank in a collective sends each
 * neighbour it has sent nothing to for a while a heartbeat (every quarter
 * timeout, at most a second apart; never on a side data flows on), saying
 * it is alive and whom it waits on.  A side this rank waits on (a receive due from it, or a send
 * it does not drain) that stays silent, heartbeats included, for the
 * timeout fails the collective naming that peer.  So when a rank stops or
 * a link freezes, only the ranks next to it time out, and their abort
 * names it to everyone else, instead of every rank's timer expiring at
 * once naming whichever neighbour it happened to wait on.  Ranks that are
 * all alive but all wait (a deadlock of out-of-step calls) fail after
 * twice the timeout without progress.
 */
#include <errno.h>
#include <poll.h>
#include <sched.h>
#include <stdio.h>
#include <string.h>
#include <sys/socket.h>
#include <sys/uio.h>

#include "clock.h"
#include "crc32c.h"
#include "engine.h"
#include "error.h"
#include "reduce.h"
#include "ring.h"
#include "sock.h"
#include "wire.h"

struct cursor {
	int send;	/* current send on this side, or -1 */
	int recv;	/* current receive on this side, or -1 */
	uint64_t rx_off;	/* payload bytes received of the current receive */
	uint8_t *segment;	/* this side's SR_SEGMENT bytes for reductions */
	size_t fill;	/* reduction bytes waiting in the segment */
	bool blocked_out;	/* the socket said EAGAIN on send */
	/* The socket had nothing more to read (EAGAIN, or a read came up
	 * short): no read is tried until poll reports it readable. */
	bool dry;
	bool parked;	/* a later collective's header waits in the peer */
	bool heard;	/* a control frame came (not counted as moved) */
	/* The send side failed (EPIPE, reset): nothing more is sent, but
	 * the side is read on, for an abort the peer sent before it went. */
	int out_errno;
};

struct run {
	struct sr_ring *ring;
	struct sr_transfer *x;
	struct cursor side[2];
	size_t esize;
	uint64_t frame_max;	/* payload bytes a frame carries at most */
	int64_t heartbeat_ns;	/* a waiting rank's heartbeat period */
	int64_t progress_ns;	/* when payload last moved */
};

static int
next_send(const struct run *r, int from, enum sr_side side)
{
	for (int i = from; i < r->x->nsends; i++)
		if (r->x->sends[i].side == side)
			return i;
	return -1;
}

static int
next_recv(const struct run *r, int from, enum sr_side side)
{
	for (int i = from; i < r->x->nrecvs; i++)
		if (r->x->recvs[i].side == side)
			return i;
	return -1;
}

/* ------------------------------------------------------------ the errors */

static void
peer_error(struct run *r, enum sr_side side, enum sr_code code,
    struct sr_error *err, const char *fmt, ...) SR_PRINTF(5, 6);

static void
peer_error(struct run *r, enum sr_side side, enum sr_code code,
    struct sr_error *err, const char *fmt, ...)
{
	struct sr_peer *p = &r->ring->peer[side];
	char what[300], where[160] = "";
	struct sr_frame frame;
	bool have = true;
	va_list ap;

	va_start(ap, fmt);
	vsnprintf(what, sizeof(what), fmt, ap);
	va_end(ap);
	if (r->side[side].recv >= 0) {
		frame = r->x->recvs[r->side[side].recv].frame;
		frame.length = r->x->recvs[r->side[side].recv].len;
	} else if (r->side[side].send >= 0) {
		frame = r->x->sends[r->side[side].send].frame;
		frame.length = r->x->sends[r->side[side].send].len;
	} else if (r->x->nrecvs > 0) {
		frame = r->x->recvs[0].frame;
		frame.length = r->x->recvs[0].len;
	} else if (r->x->nsends > 0) {
		frame = r->x->sends[0].frame;
		frame.length = r->x->sends[0].len;
	} else {
		have = false;
	}
	if (have)
		sr_frame_describe(&frame, where, sizeof(where));
	sr_error_set(err, code, SR_PHASE_COLLECTIVE, "%s rank %u (%s)%s%s",
	    what, p->rank, p->address, where[0] ? " in " : "", where);
	err->peer = p->rank;
	snprintf(err->peer_address, sizeof(err->peer_address), "%s", p->address);
	if (have)
		err->step = frame.step;
}

static void
io_error(struct run *r, enum sr_side side, ssize_t n, struct sr_error *err)
{
	/* The end of a stream whose send side broke first: the send's
	 * error (a reset) says more than the EOF that followed it. */
	if (n == 0 && r->side[side].out_errno != 0) {
		errno = r->side[side].out_errno;
		n = -1;
	}
	if (n == 0)
		peer_error(r, side, SR_EPEER_CLOSED, err,
		    "lost the connection (closed by the peer) to");
	else if (errno == ECONNRESET || errno == EPIPE)
		peer_error(r, side, SR_EPEER_CLOSED, err,
		    "lost the connection (%s) to", strerror(errno));
	else if (errno == ETIMEDOUT)
		peer_error(r, side, SR_ETIMEOUT, err,
		    "no acknowledgement within the timeout (%s) from",
		    strerror(errno));
	else
		peer_error(r, side, SR_EIO, err, "socket error (%s) with",
		    strerror(errno));
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
	return r->ring->integrity ? g->verified : g->done;
}

/*
 * Queues the header of the next piece once the whole piece is ready (for
 * an empty frame, once the gate is complete).  A frame under way thus
 * always has its bytes in hand: a rank that fails mid-frame finishes it
 * with real data before its abort (ring.c), never with filler a neighbour
 * could take for a result.
 */
static bool
start_piece(struct run *r, struct sr_peer *p, struct sr_send *s)
{
	struct sr_frame frame = s->frame;
	uint64_t piece = s->len - s->off;

	if (piece > r->frame_max)
		piece = r->frame_max;
	if (piece == 0 ? !(s->gate < 0 || r->x->recvs[s->gate].complete) :
	    send_ready(r, s) < s->off + piece)
		return false;
	frame.length = piece;
	sr_frame_encode(&frame, p->tx_header);
	p->tx_header_left = SR_FRAME_HEADER_LEN;
	p->tx_payload_left = piece;
	p->tx_data = s->data + s->off;
	if (r->ring->integrity) {
		p->tx_crc = sr_crc32c(0, p->tx_header, SR_FRAME_HEADER_LEN);
		/* An empty frame's trailer is due at once. */
		if (piece == 0) {
			sr_put_u32le(p->tx_trailer, p->tx_crc);
			p->tx_trailer_left = SR_TRAILER_LEN;
		}
	}
	s->started = true;
	return true;
}

/* Accounts n bytes sent of the frame under way: header, payload, trailer. */
static void
frame_sent(struct run *r, struct sr_peer *p, struct sr_send *s, size_t n)
{
	size_t part = n < p->tx_header_left ? n : p->tx_header_left;

	p->tx_header_left -= part;
	n -= part;
	part = n < p->tx_payload_left ? n : (size_t)p->tx_payload_left;
	if (part > 0) {
		if (r->ring->integrity)
			p->tx_crc = sr_crc32c(p->tx_crc, p->tx_data, part);
		p->tx_data += part;
		s->off += part;
		p->tx_payload_left -= part;
		n -= part;
		if (r->ring->integrity && p->tx_payload_left == 0) {
			sr_put_u32le(p->tx_trailer, p->tx_crc);
			p->tx_trailer_left = SR_TRAILER_LEN;
		}
	}
	p->tx_trailer_left -= n < p->tx_trailer_left ? n : p->tx_trailer_left;
}

/*
 * A send failed: a peer that failed first sent its abort before it went,
 * and the abort may be queued here still (the reset that broke the send
 * came after it).  Its words name the rank that really failed, so the
 * side is read on until the abort or the end of the stream comes; only
 * then is the failure this rank's own.
 */
static int
send_failed(struct run *r, enum sr_side side, ssize_t n,
    struct sr_error *err)
{
	if (n < 0 && (errno == EPIPE || errno == ECONNRESET)) {
		r->side[side].out_errno = errno;
		r->side[side].dry = false;
		return 0;
	}
	io_error(r, side, n, err);
	return -1;
}

/* Sends the rest of a control frame (a heartbeat's header): 1 when it is
 * out, 0 when the socket is full, -1 on error. */
static int
control_out(struct run *r, enum sr_side side, struct sr_error *err)
{
	struct sr_peer *p = &r->ring->peer[side];

	while (p->tx_header_left > 0) {
		ssize_t n = send(p->fd, p->tx_header + SR_FRAME_HEADER_LEN -
		    p->tx_header_left, p->tx_header_left,
		    MSG_NOSIGNAL | MSG_DONTWAIT);

		if (n < 0 && errno == EINTR)
			continue;
		if (n < 0 && errno == EAGAIN) {
			r->side[side].blocked_out = true;
			return 0;
		}
		if (n <= 0)
			return send_failed(r, side, n, err) < 0 ? -1 : 0;
		p->tx_header_left -= (size_t)n;
	}
	p->tx_control = false;
	return 1;
}

/* Sends what it can on one side; returns bytes moved or -1 on error. */
static int64_t
pump_out(struct run *r, enum sr_side side, struct sr_error *err)
{
	struct cursor *c = &r->side[side];
	struct sr_peer *p = &r->ring->peer[side];
	int64_t moved = 0;
	int rc;

	c->blocked_out = false;
	if (c->out_errno != 0 && (c->parked || p->eof)) {
		/* Nothing more will be read there: the send's error stands. */
		errno = c->out_errno;
		io_error(r, side, -1, err);
		return -1;
	}
	if (c->out_errno != 0)
		return 0;
	if (p->tx_control && (rc = control_out(r, side, err)) != 1)
		return rc;
	while (c->send >= 0) {
		struct sr_send *s = &r->x->sends[c->send];
		struct iovec iov[3];
		struct msghdr msg = { .msg_iov = iov };
		size_t payload;
		ssize_t n;

		if (p->tx_header_left == 0 && p->tx_payload_left == 0 &&
		    p->tx_trailer_left == 0) {
			if (s->started && s->off == s->len) {
				c->send = next_send(r, c->send + 1, side);
				continue;
			}
			if (!start_piece(r, p, s))
				break;	/* waiting for the gate */
		}
		payload = p->tx_payload_left > SR_IO_MAX ? SR_IO_MAX :
		    (size_t)p->tx_payload_left;
		if (p->tx_header_left > 0) {
			iov[msg.msg_iovlen].iov_base = p->tx_header +
			    (SR_FRAME_HEADER_LEN - p->tx_header_left);
			iov[msg.msg_iovlen++].iov_len = p->tx_header_left;
		}
		if (payload > 0) {
			iov[msg.msg_iovlen].iov_base = (void *)p->tx_data;
			iov[msg.msg_iovlen++].iov_len = payload;
		} else if (p->tx_trailer_left > 0) {
			iov[msg.msg_iovlen].iov_base = p->tx_trailer +
			    (SR_TRAILER_LEN - p->tx_trailer_left);
			iov[msg.msg_iovlen++].iov_len = p->tx_trailer_left;
		}
		n = sendmsg(p->fd, &msg, MSG_NOSIGNAL | MSG_DONTWAIT);
		if (n < 0 && errno == EINTR)
			continue;
		if (n < 0 && errno == EAGAIN) {
			c->blocked_out = true;
			break;
		}
		if (n < 0)
			return send_failed(r, side, n, err) < 0 ? -1 : moved;
		moved += n;
		frame_sent(r, p, s, (size_t)n);
	}
	return moved;
}

/* ------------------------------------------------------------ receiving */

/*
 * Reads into buf until len bytes are there (*got counts them across
 * calls).  1 when full, 0 to poll again, -1 with *last the failing recv's
 * result (0 at EOF, -1 with errno set).
 */
static int
fill(int fd, uint8_t *buf, size_t len, size_t *got, ssize_t *last)
{
	while (*got < len) {
		ssize_t n = recv(fd, buf + *got, len - *got, MSG_DONTWAIT);

		if (n < 0 && errno == EINTR)
			continue;
		if (n < 0 && errno == EAGAIN)
			return 0;
		if (n <= 0) {
			*last = n;
			return -1;
		}
		*got += (size_t)n;
	}
	return 1;
}

/* Reads the abort frame's payload and turns it into this rank's error. */
static int
read_abort(struct run *r, enum sr_side side, struct sr_error *err)
{
	struct sr_peer *p = &r->ring->peer[side];
	struct sr_abort abort;
	ssize_t n = 0;
	int rc = fill(p->fd, p->abort_buf, (size_t)p->abort_len, &p->abort_got,
	    &n);

	if (rc == 0)
		return 0;
	if (rc < 0) {
		io_error(r, side, n, err);
		return -1;
	}
	sr_abort_decode(p->abort_buf, (size_t)p->abort_len, &abort);
	sr_ring_heard_abort(r->ring, &abort, err);
	return -1;
}

/* Whether a failed read (n: its result) is the end of a peer that said
 * goodbye and owes nothing more: a close, or the reset of a close that
 * found a heartbeat of this rank unread. */
static bool
clean_end(const struct sr_peer *p, ssize_t n)
{
	return p->bye && p->header_got == 0 &&
	    (n == 0 || errno == ECONNRESET);
}

/*
 * A heartbeat came: the peer is alive and waits on the rank it names.
 * Unless it waits on this very rank while this rank cannot send to it:
 * then the link this way is what is stuck (a blackhole, a frozen
 * direction), and the heartbeat does not excuse the silence of the
 * peer's receive side.
 */
static void
heartbeat_in(struct run *r, enum sr_side side, const struct sr_frame *got)
{
	struct sr_peer *p = &r->ring->peer[side];

	p->header_got = 0;
	p->waits_on = got->step;
	if (!(got->step == r->ring->rank && r->side[side].blocked_out))
		r->side[side].heard = true;
}

/*
 * Reads and classifies a header on a side.  Returns 1 when a header that
 * matches `want` (or, with want NULL, one of a later collective) is ready,
 * 0 when more bytes are needed, -1 on failure.
 */
static int
read_header(struct run *r, enum sr_side side, const struct sr_frame *want,
    struct sr_error *err)
{
	struct sr_peer *p = &r->ring->peer[side];
	struct sr_frame got;
	char saw[160], expected[160];
	ssize_t n = 0;
	int rc;

	if (p->abort_len > 0)
		return read_abort(r, side, err);
	for (;;) {
		rc = fill(p->fd, p->header, SR_FRAME_HEADER_LEN, &p->header_got,
		    &n);
		if (rc == 0)
			return 0;
		if (rc < 0 && clean_end(p, n)) {
			if (want == NULL) {
				p->eof = true;	/* a clean close, nothing owed */
				return 0;
			}
			peer_error(r, side, SR_EOUT_OF_STEP, err, "out of step: "
			    "the ring was closed (it finished its collectives) by");
			return -1;
		}
		if (rc < 0) {
			io_error(r, side, n, err);
			return -1;
		}
		sr_frame_decode(p->header, &got);
		if (sr_frame_check(&got, want != NULL ? want : &got) !=
		    SR_FRAME_IS_HEARTBEAT)
			break;
		heartbeat_in(r, side, &got);
	}
	switch (sr_frame_check(&got, want != NULL ? want : &got)) {
	case SR_FRAME_IS_ABORT:
		p->header_got = 0;
		p->abort_len = got.length;
		p->abort_got = 0;
		return read_abort(r, side, err);
	case SR_FRAME_IS_BYE:
		peer_error(r, side, SR_EOUT_OF_STEP, err, "out of step: the "
		    "ring was closed (it finished its collectives, %llu of "
		    "them, and said goodbye) by", (unsigned long long)got.seq);
		return -1;
	case SR_FRAME_BAD_ABORT:
		peer_error(r, side, SR_EOUT_OF_STEP, err,
		    "an abort frame of %llu bytes (not a silvic frame) came from",
		    (unsigned long long)got.length);
		return -1;
	case SR_FRAME_IS_HEARTBEAT:
	case SR_FRAME_MISMATCH:
		sr_frame_describe(&got, saw, sizeof(saw));
		if (want != NULL && want->kind == SR_FRAME_BYE &&
		    got.kind == SR_FRAME_BYE && got.step == want->step &&
		    got.seq != want->seq) {
			peer_error(r, side, SR_EOUT_OF_STEP, err,
			    "out of step at the close: this rank ran %llu "
			    "collective(s), and %llu were run by",
			    (unsigned long long)want->seq,
			    (unsigned long long)got.seq);
			return -1;
		}
		if (want != NULL && want->kind == SR_FRAME_BYE &&
		    got.kind != SR_FRAME_BYE) {
			peer_error(r, side, SR_EOUT_OF_STEP, err,
			    "out of step at the close: after its %llu "
			    "collective(s) this rank still had unread a frame "
			    "(%s) from", (unsigned long long)want->seq, saw);
			return -1;
		}
		sr_frame_describe(want, expected, sizeof(expected));
		peer_error(r, side, SR_EOUT_OF_STEP, err,
		    "out of step: expected %s, got %s from", expected, saw);
		return -1;
	case SR_FRAME_MATCH:
		if (want != NULL)
			return 1;
		/* Nothing is expected on this side: only a frame of a later
		 * collective, or the peer's goodbye, may wait here for its
		 * turn (a neighbour that finished this one may start the
		 * next, or close). */
		if ((got.seq > r->ring->seq &&
		    got.kind >= SR_FRAME_ALLREDUCE && got.kind <= SR_FRAME_LINK) ||
		    (got.kind == SR_FRAME_BYE && !r->x->drain))
			return 1;
		sr_frame_describe(&got, saw, sizeof(saw));
		peer_error(r, side, SR_EOUT_OF_STEP, err,
		    "out of step: an unexpected frame (%s) came from", saw);
		return -1;
	}
	return -1;
}

/* Folds the complete elements waiting in the segment buffer. */
static void
fold(struct run *r, struct cursor *c, struct sr_recv *v)
{
	size_t elements = c->fill / r->esize, bytes = elements * r->esize;
	uint8_t *seg = c->segment;

	if (elements == 0)
		return;
	if (v->swap)
		sr_reduce(v->data + v->done, seg, v->local + v->done, elements,
		    r->x->dtype, r->x->op);
	else
		sr_reduce(v->data + v->done, v->local + v->done, seg, elements,
		    r->x->dtype, r->x->op);
	v->done += bytes;
	c->fill -= bytes;
	if (c->fill > 0)
		memmove(seg, seg + bytes, c->fill);
}

static void
recv_complete(struct run *r, enum sr_side side)
{
	struct cursor *c = &r->side[side];

	r->x->recvs[c->recv].complete = true;
	c->recv = next_recv(r, c->recv + 1, side);
	c->rx_off = 0;
	c->fill = 0;
}

/*
 * Where up to `want` payload bytes of the current receive go: straight to
 * their place, or for a fold (or a discard) into the side's segment.
 */
static uint8_t *
payload_room(struct run *r, struct cursor *c, const struct sr_recv *v,
    uint64_t *want)
{
	if (*want > SR_IO_MAX)
		*want = SR_IO_MAX;
	if (v->reduce || v->data == NULL) {
		if (*want > SR_SEGMENT - c->fill)
			*want = SR_SEGMENT - c->fill;
		return c->segment + c->fill;
	}
	return v->data + c->rx_off;
}

/* Accounts n payload bytes that arrived at `into` (from payload_room). */
static void
payload_in(struct run *r, enum sr_side side, struct sr_recv *v,
    const uint8_t *into, size_t n)
{
	struct cursor *c = &r->side[side];
	struct sr_peer *p = &r->ring->peer[side];

	p->rx_payload_left -= n;
	c->rx_off += n;
	if (r->ring->integrity)
		p->rx_crc = sr_crc32c(p->rx_crc, into, n);
	if (v->reduce) {
		c->fill += n;
		fold(r, c, v);
	} else {
		v->done += n;
	}
}

/* Reads payload of the current piece; bytes moved, 0 to poll again, -1. */
static int64_t
read_payload(struct run *r, enum sr_side side, struct sr_recv *v,
    struct sr_error *err)
{
	uint64_t want = r->ring->peer[side].rx_payload_left;
	uint8_t *into = payload_room(r, &r->side[side], v, &want);
	ssize_t n;

	do
		n = recv(r->ring->peer[side].fd, into, (size_t)want, MSG_DONTWAIT);
	while (n < 0 && errno == EINTR);
	if (n < 0 && errno == EAGAIN)
		return 0;
	if (n <= 0) {
		io_error(r, side, n, err);
		return -1;
	}
	payload_in(r, side, v, into, (size_t)n);
	if ((uint64_t)n < want)
		r->side[side].dry = true;
	return n;
}

/* The header just read is the frame expected: its payload comes next. */
static void
header_taken(struct run *r, enum sr_side side, uint64_t length)
{
	struct sr_peer *p = &r->ring->peer[side];

	if (r->ring->integrity)
		p->rx_crc = sr_crc32c(0, p->header, SR_FRAME_HEADER_LEN);
	p->header_got = 0;
	p->rx_payload_left = length;
}

/*
 * A small frame's header and payload in one read: a syscall saved per
 * frame, which is much of a small message's cost.  The payload waits in
 * the peer's stage until the header has been checked (a frame this rank
 * did not expect writes nothing anywhere), and no byte past the frame
 * expected is read.  Like read_header, but on a match the payload that
 * came along has been taken in and rx_payload_left counts the rest.
 */
static int
read_small(struct run *r, enum sr_side side, struct sr_recv *v,
    const struct sr_frame *want, struct sr_error *err)
{
	struct sr_peer *p = &r->ring->peer[side];
	struct iovec iov[2] = { { p->header, SR_FRAME_HEADER_LEN },
		{ p->stage, (size_t)want->length } };
	struct sr_frame got;
	size_t ahead, at = 0;
	ssize_t n;
	int rc;

	do
		n = readv(p->fd, iov, 2);
	while (n < 0 && errno == EINTR);
	if (n < 0 && errno == EAGAIN)
		return 0;
	if (n < 0) {
		io_error(r, side, n, err);
		return -1;
	}
	if ((size_t)n < SR_FRAME_HEADER_LEN + want->length)
		r->side[side].dry = true;
	/* End of file, or a header still short: read_header goes on. */
	p->header_got = (size_t)n < SR_FRAME_HEADER_LEN ? (size_t)n :
	    SR_FRAME_HEADER_LEN;
	ahead = (size_t)n - p->header_got;
	/* Heartbeats before the frame: taken, and what followed them moved
	 * up into the header. */
	while (p->header_got == SR_FRAME_HEADER_LEN) {
		size_t take = ahead < SR_FRAME_HEADER_LEN ? ahead :
		    SR_FRAME_HEADER_LEN;

		sr_frame_decode(p->header, &got);
		if (sr_frame_check(&got, want) != SR_FRAME_IS_HEARTBEAT)
			break;
		heartbeat_in(r, side, &got);
		memcpy(p->header, p->stage, take);
		memmove(p->stage, p->stage + take, ahead - take);
		ahead -= take;
		p->header_got = take;
	}
	if (ahead > 0) {
		sr_frame_decode(p->header, &got);
		if (sr_frame_check(&got, want) == SR_FRAME_IS_ABORT) {
			/* An abort in its place: its reason came with it. */
			p->header_got = 0;
			p->abort_len = got.length;
			p->abort_got = ahead < got.length ? ahead :
			    (size_t)got.length;
			memcpy(p->abort_buf, p->stage, p->abort_got);
			return read_abort(r, side, err);
		}
	}
	rc = read_header(r, side, want, err);
	if (rc != 1)
		return rc;
	header_taken(r, side, want->length);
	while (at < ahead) {
		uint64_t room = ahead - at;
		uint8_t *into = payload_room(r, &r->side[side], v, &room);

		memcpy(into, p->stage + at, (size_t)room);
		payload_in(r, side, v, into, (size_t)room);
		at += (size_t)room;
	}
	return 1;
}

/* Reads a frame's CRC trailer: 1 when it matches, 0 for more, -1. */
static int
read_trailer(struct run *r, enum sr_side side, struct sr_error *err)
{
	struct sr_peer *p = &r->ring->peer[side];
	size_t got = SR_TRAILER_LEN - p->rx_trailer_left;
	ssize_t n = 0;
	int rc = fill(p->fd, p->rx_trailer, SR_TRAILER_LEN, &got, &n);

	p->rx_trailer_left = SR_TRAILER_LEN - got;
	if (rc == 0)
		return 0;
	if (rc < 0) {
		io_error(r, side, n, err);
		return -1;
	}
	if (sr_get_u32le(p->rx_trailer) != p->rx_crc) {
		peer_error(r, side, SR_ECORRUPT, err, "integrity check failed "
		    "(CRC-32C 0x%08x, computed 0x%08x) on a frame from",
		    sr_get_u32le(p->rx_trailer), p->rx_crc);
		return -1;
	}
	return 1;
}

/* A frame's payload is in: its trailer is next, else the receive may be
 * complete. */
static void
piece_done(struct run *r, enum sr_side side, const struct sr_recv *v)
{
	if (r->ring->integrity)
		r->ring->peer[side].rx_trailer_left = SR_TRAILER_LEN;
	else if (r->side[side].rx_off == v->len)
		recv_complete(r, side);
}

/* Receives what it can on one side; returns bytes moved or -1 on error. */
static int64_t
pump_in(struct run *r, enum sr_side side, struct sr_error *err)
{
	struct cursor *c = &r->side[side];
	struct sr_peer *p = &r->ring->peer[side];
	int64_t moved = 0, n;

	while (c->recv >= 0 && !c->dry) {
		struct sr_recv *v = &r->x->recvs[c->recv];
		int rc;

		if (p->rx_trailer_left > 0) {
			rc = read_trailer(r, side, err);
			if (rc < 0)
				return -1;
			if (rc == 0) {
				c->dry = true;
				break;
			}
			moved += SR_TRAILER_LEN;
			v->verified = c->rx_off;
			if (c->rx_off == v->len)
				recv_complete(r, side);
			continue;
		}
		if (p->rx_payload_left == 0) {
			struct sr_frame want = v->frame;
			uint64_t left = v->len - c->rx_off;

			want.length = left > r->frame_max ? r->frame_max :
			    left;
			/* A small frame comes in whole, unless a trailer must
			 * be checked or a header is half in. */
			if (!r->ring->integrity && p->header_got == 0 &&
			    p->abort_len == 0 && want.length <= SR_STAGE) {
				rc = read_small(r, side, v, &want, err);
			} else {
				rc = read_header(r, side, &want, err);
				if (rc == 1)
					header_taken(r, side, want.length);
			}
			if (rc < 0)
				return -1;
			if (rc == 0) {
				c->dry = true;
				break;
			}
			moved += SR_FRAME_HEADER_LEN +
			    (int64_t)(want.length - p->rx_payload_left);
			if (p->rx_payload_left == 0)
				piece_done(r, side, v);
			continue;
		}
		n = read_payload(r, side, v, err);
		if (n < 0)
			return -1;
		if (n == 0) {
			c->dry = true;
			break;
		}
		moved += n;
		if (p->rx_payload_left == 0)
			piece_done(r, side, v);
	}
	return moved;
}

/*
 * With nothing to receive on a side, it is still watched for an abort, a
 * goodbye or a close; a later collective's header may wait here (parked)
 * for its turn.  Only once the collective cannot finish without waiting:
 * an abort right behind its last bytes belongs to the next call.
 */
static int
watch_idle(struct run *r, enum sr_side side, struct sr_error *err)
{
	struct cursor *c = &r->side[side];
	int rc;

	if (c->recv >= 0 || c->parked || c->dry || r->ring->peer[side].eof)
		return 0;
	rc = read_header(r, side, NULL, err);
	if (rc < 0)
		return -1;
	if (rc == 1 && r->x->drain) {
		char saw[160];
		struct sr_frame got;

		sr_frame_decode(r->ring->peer[side].header, &got);
		sr_frame_describe(&got, saw, sizeof(saw));
		peer_error(r, side, SR_EOUT_OF_STEP, err, "out of step: after "
		    "every rank agreed to close, a frame (%s) came from", saw);
		return -1;
	}
	if (rc == 1)
		c->parked = true;
	else
		c->dry = true;
	return 0;
}

/* ---------------------------------------------------------- the poll loop */

static bool
finished(const struct run *r)
{
	return r->side[SR_NEXT].send < 0 && r->side[SR_PREV].send < 0 &&
	    r->side[SR_NEXT].recv < 0 && r->side[SR_PREV].recv < 0 &&
	    (!r->x->drain || (r->ring->peer[SR_NEXT].eof &&
	    r->ring->peer[SR_PREV].eof));
}

/* Whether this rank waits on side s: a receive is due from it, it does
 * not drain what this rank sends, or (closing) its end is still due. */
static bool
waits_on(const struct run *r, int s)
{
	const struct cursor *c = &r->side[s];

	return c->recv >= 0 || c->blocked_out || c->out_errno != 0 ||
	    (r->x->drain && !r->ring->peer[s].eof);
}

static void
silence_error(struct run *r, enum sr_side side, struct sr_error *err)
{
	char took[32];

	/*
	 * A peer that does not drain what this rank has ready to send (its
	 * buffers stayed full the whole time: it is stuck, or its link is),
	 * or that sends nothing, not even a heartbeat, while this rank waits
	 * for its data.
	 */
	sr_clock_format_ms(r->ring->timeout_ms, took, sizeof(took));
	peer_error(r, side, SR_ETIMEOUT, err, "timed out after %s of silence %s",
	    took, r->side[side].recv < 0 && r->side[side].blocked_out ?
	    "waiting to send to" : "waiting for data from");
}

/* Every side this rank waits on is alive, yet nothing moved for twice
 * the timeout: the ranks wait on one another. */
static void
stall_error(struct run *r, struct sr_error *err)
{
	char took[32], also[64] = "";
	enum sr_side side = r->side[SR_PREV].recv >= 0 ||
	    r->side[SR_PREV].blocked_out ? SR_PREV : SR_NEXT;
	uint32_t next = r->ring->peer[side].waits_on;

	if (next != SR_NO_RANK)
		snprintf(also, sizeof(also), " (it waits on rank %u)", next);
	sr_clock_format_ms(2 * r->ring->timeout_ms, took, sizeof(took));
	peer_error(r, side, SR_ETIMEOUT, err, "timed out after %s without "
	    "progress, every rank alive but waiting (out of step?)%s; this "
	    "rank waits on", took, also);
}

/*
 * The silence checks: -1 with err when a side this rank waits on stayed
 * silent for the timeout, or nothing moved for twice the timeout.  Else
 * *wake is when the next check is due.
 */
static int
check_silence(struct run *r, int64_t now, int64_t *wake,
    struct sr_error *err)
{
	int64_t timeout = r->ring->timeout_ms * 1000000;
	int64_t quietest = INT64_MAX;
	int side = -1;

	*wake = r->progress_ns + 2 * timeout;
	for (int s = 0; s < 2; s++) {
		int64_t heard = r->ring->peer[s].heard_ns;

		if (!waits_on(r, s))
			continue;
		if (heard < quietest) {
			quietest = heard;
			side = s;
		}
		if (heard + timeout < *wake)
			*wake = heard + timeout;
	}
	if (side >= 0 && now - quietest >= timeout) {
		silence_error(r, (enum sr_side)side, err);
		return -1;
	}
	if (now - r->progress_ns >= 2 * timeout) {
		stall_error(r, err);
		return -1;
	}
	return 0;
}

/*
 * Tells each neighbour this rank has sent nothing to for a heartbeat
 * period that it is alive, and whom it waits on, when the link is between
 * frames.  Lowers *wake to the next heartbeat due.
 */
static int
heartbeats(struct run *r, int64_t now, int64_t *wake, struct sr_error *err)
{
	uint32_t on = SR_NO_RANK;

	if (r->x->drain)
		return 0;
	if (r->side[SR_PREV].recv >= 0)
		on = r->ring->peer[SR_PREV].rank;
	else if (r->side[SR_NEXT].recv >= 0)
		on = r->ring->peer[SR_NEXT].rank;
	for (int s = 0; s < 2; s++) {
		struct sr_peer *p = &r->ring->peer[s];

		if (r->side[s].out_errno != 0)
			continue;
		if (now - p->sent_ns < r->heartbeat_ns) {
			if (p->sent_ns + r->heartbeat_ns < *wake)
				*wake = p->sent_ns + r->heartbeat_ns;
			continue;
		}
		if (p->tx_header_left > 0 || p->tx_payload_left > 0 ||
		    p->tx_trailer_left > 0)
			continue;	/* mid-frame: its bytes are the news */
		sr_heartbeat_encode(on, r->ring->seq, p->tx_header);
		p->tx_header_left = SR_FRAME_HEADER_LEN;
		p->tx_control = true;
		p->sent_ns = now;
		if (control_out(r, (enum sr_side)s, err) < 0)
			return -1;
		if (now + r->heartbeat_ns < *wake)
			*wake = now + r->heartbeat_ns;
	}
	return 0;
}

/* What this rank waits for on each side, for poll. */
static void
wait_for(const struct run *r, struct pollfd *fds)
{
	for (int s = 0; s < 2; s++) {
		fds[s].fd = r->ring->peer[s].fd;
		fds[s].events = (r->side[s].parked || r->ring->peer[s].eof) &&
		    r->side[s].recv < 0 ? 0 : POLLIN;
		if (r->side[s].blocked_out)
			fds[s].events |= POLLOUT;
		/* An idle side would still report POLLHUP: leave it out, or
		 * poll would spin. */
		if (fds[s].events == 0)
			fds[s].fd = -1;
		fds[s].revents = 0;
	}
}

/*
 * A blocking wake-up costs tens of microseconds, so until spin_until the
 * sockets are polled without sleeping.  poll reads a socket's state
 * without taking its lock, which a recv would hold against the
 * neighbour's kernel delivering the very bytes awaited.  Each try yields
 * the core: a rank waited for may share it (more ranks than cores, or the
 * scheduler put two ranks together), and a pure spin would hold it for a
 * whole time slice.  Returns poll's count (0: nothing came; sleep now).
 */
static int
spin(struct pollfd *fds, int64_t spin_until)
{
	int rc = 0;

	while (sr_clock_ns() < spin_until) {
		rc = poll(fds, 2, 0);
		if (rc != 0)
			break;
		sched_yield();
	}
	return rc;
}

/* Liveness of both sides from now; the heartbeat period. */
static void
start_clocks(struct run *r)
{
	int64_t now = sr_clock_ns();

	r->heartbeat_ns = r->ring->timeout_ms * 1000000 / 4;
	if (r->heartbeat_ns > SR_HEARTBEAT_MAX_NS)
		r->heartbeat_ns = SR_HEARTBEAT_MAX_NS;
	r->progress_ns = now;
	for (int s = 0; s < 2; s++) {
		r->ring->peer[s].heard_ns = now;
		r->ring->peer[s].sent_ns = now;
	}
}

int
sr_engine_run(struct sr_ring *ring, struct sr_transfer *xfer,
    struct sr_error *err)
{
	struct run r = { .ring = ring, .x = xfer };
	int64_t spin_until = 0;

	r.esize = sr_dtype_size(xfer->dtype);
	r.frame_max = xfer->frame_max > 0 ? xfer->frame_max : SR_FRAME_MAX;
	if (r.esize == 0)
		r.esize = 1;
	for (int s = 0; s < 2; s++) {
		r.side[s].send = next_send(&r, 0, (enum sr_side)s);
		r.side[s].recv = next_recv(&r, 0, (enum sr_side)s);
		r.side[s].segment = ring->segment + (size_t)s * SR_SEGMENT;
	}
	for (int i = 0; i < xfer->nsends; i++) {
		xfer->sends[i].off = 0;
		xfer->sends[i].started = false;
	}
	for (int i = 0; i < xfer->nrecvs; i++) {
		xfer->recvs[i].done = 0;
		xfer->recvs[i].verified = 0;
		xfer->recvs[i].complete = false;
	}
	start_clocks(&r);
	for (;;) {
		struct pollfd fds[2];
		int64_t moved = 0, in[2], out[2], now = 0, wake = INT64_MAX;
		int rc;

		if (ring->cancel != NULL && *ring->cancel) {
			peer_error(&r, r.side[SR_PREV].recv >= 0 ? SR_PREV :
			    SR_NEXT, SR_EINTERRUPTED, err, "interrupted waiting for");
			err->peer = -1;
			err->peer_address[0] = '\0';
			return -1;
		}

		for (int s = 0; s < 2; s++) {
			in[s] = pump_in(&r, (enum sr_side)s, err);
			if (in[s] < 0)
				return -1;
			out[s] = pump_out(&r, (enum sr_side)s, err);
			if (out[s] < 0)
				return -1;
			moved += in[s] + out[s];
		}
		if (finished(&r))
			return 0;
		if (moved > 0 || r.side[0].heard || r.side[1].heard) {
			now = sr_clock_ns();
			for (int s = 0; s < 2; s++) {
				/* Bytes it sent, or took: it is alive. */
				if (in[s] > 0 || out[s] > 0 || r.side[s].heard)
					ring->peer[s].heard_ns = now;
				if (out[s] > 0)
					ring->peer[s].sent_ns = now;
				r.side[s].heard = false;
			}
		}
		if (moved > 0) {
			r.progress_ns = now;
			spin_until = 0;
			/* A side this rank has nothing to send on hears from it
			 * all the same: one header a period, while data flows
			 * on the other side. */
			if (heartbeats(&r, now, &wake, err) != 0)
				return -1;
			continue;
		}
		/* Only once nothing moves: while data flows, an extra recv on
		 * a quiet socket each pass would be a syscall wasted. */
		for (int s = 0; s < 2; s++)
			if (watch_idle(&r, (enum sr_side)s, err) != 0)
				return -1;
		now = sr_clock_ns();
		for (int s = 0; s < 2; s++)
			if (r.side[s].heard) {
				ring->peer[s].heard_ns = now;
				r.side[s].heard = false;
			}
		if (finished(&r))
			return 0;
		if (check_silence(&r, now, &wake, err) != 0 ||
		    heartbeats(&r, now, &wake, err) != 0)
			return -1;
		wait_for(&r, fds);
		if (ring->spin_ns > 0 && spin_until == 0)
			spin_until = now + ring->spin_ns;
		rc = spin(fds, spin_until);
		if (rc == 0)
			rc = poll(fds, 2, sr_clock_left_ms(wake));
		if (rc < 0 && errno != EINTR) {
			sr_error_set(err, SR_EIO, SR_PHASE_COLLECTIVE,
			    "poll: %s", strerror(errno));
			return -1;
		}
		for (int s = 0; s < 2; s++)
			if (rc > 0 && (fds[s].revents & (POLLIN | POLLHUP |
			    POLLERR)) != 0)
				r.side[s].dry = false;
	}
}
