/*
 * engine_recv.c - the engine's receiving half: each link's next frame
 * judged against the one this rank expects, its payload copied, folded
 * or discarded where the transfer says, its trailer checked.
 *
 * A header is judged before a byte of its payload is read (the link
 * hands it over whole, transport.c), so a frame this rank did not expect
 * writes nothing anywhere, and a header of a later collective waits in
 * its link until that collective.
 */
#include <stdio.h>
#include <string.h>

#include "engine_impl.h"
#include "reduce.h"
#include "transport.h"
#include "wire.h"

void
sr_engine_abort_heard(struct run *r, const struct sr_abort *abort,
    struct sr_error *err)
{
	struct sr_engine *e = r->e;

	if (!e->heard_abort) {
		e->heard = *abort;
		e->heard_abort = true;
	}
	sr_error_set(err, sr_wire_to_code(abort->wire_class),
	    SR_PHASE_COLLECTIVE, "rank %u reported: %s", abort->origin,
	    abort->reason);
	err->origin = abort->origin;
	err->peer = -1;
	err->peer_address[0] = '\0';
	if (abort->culprit != SR_NO_RANK) {
		err->peer = abort->culprit;
		if (abort->culprit < e->c.world)
			snprintf(err->peer_address, sizeof(err->peer_address),
			    "%s", e->c.addresses[abort->culprit]);
	} else if (abort->origin < e->c.world) {
		err->peer = abort->origin;
		snprintf(err->peer_address, sizeof(err->peer_address), "%s",
		    e->c.addresses[abort->origin]);
	}
}

/* Whether got is the frame want but for its length. */
static bool
only_length(const struct sr_frame *got, const struct sr_frame *want)
{
	return got->kind == want->kind && got->dtype == want->dtype &&
	    got->op == want->op && got->step == want->step &&
	    got->seq == want->seq && got->group == want->group &&
	    got->length != want->length;
}

/*
 * A whole contribution of another length (sr_transfer.whole): "out of
 * step: reductions of different lengths, 8 bytes (1 f64) on this rank,
 * 16 bytes (2 f64) on rank 3 (...) in ...".
 */
static int
length_mismatch(struct run *r, uint32_t link, const struct sr_frame *got,
    const struct sr_frame *want, struct sr_error *err)
{
	char mine[64] = "", theirs[64] = "";
	size_t es = sr_dtype_size((enum sr_dtype)want->dtype);

	if (want->kind == SR_FRAME_ALLREDUCE && es > 0) {
		snprintf(mine, sizeof(mine), " (%llu %s)",
		    (unsigned long long)(want->length / es),
		    sr_dtype_name((enum sr_dtype)want->dtype));
		snprintf(theirs, sizeof(theirs), " (%llu%s %s)",
		    (unsigned long long)(got->length / es),
		    got->length % es != 0 ? " and a part" : "",
		    sr_dtype_name((enum sr_dtype)want->dtype));
	}
	sr_engine_peer_error(r, link, SR_EOUT_OF_STEP, err, "out of step: %s "
	    "of different lengths, %llu bytes%s on this rank, %llu bytes%s on",
	    want->kind == SR_FRAME_ALLREDUCE ? "reductions" : "contributions",
	    (unsigned long long)want->length, mine,
	    (unsigned long long)got->length, theirs);
	return -1;
}

/* The header a link holds is not the frame expected: why, in words. */
static int
mismatch(struct run *r, uint32_t link, const struct sr_frame *got,
    const struct sr_frame *want, struct sr_error *err)
{
	char saw[160], expected[160];

	if (r->x->whole && only_length(got, want))
		return length_mismatch(r, link, got, want, err);
	sr_frame_describe(got, saw, sizeof(saw));
	if (want->kind == SR_FRAME_BYE && got->kind == SR_FRAME_BYE &&
	    got->step == want->step && got->seq != want->seq) {
		sr_engine_peer_error(r, link, SR_EOUT_OF_STEP, err,
		    "out of step at the close: this rank ran %llu "
		    "collective(s), and %llu were run by",
		    (unsigned long long)want->seq, (unsigned long long)got->seq);
		return -1;
	}
	if (want->kind == SR_FRAME_BYE && got->kind != SR_FRAME_BYE) {
		sr_engine_peer_error(r, link, SR_EOUT_OF_STEP, err,
		    "out of step at the close: after its %llu collective(s) "
		    "this rank still had unread a frame (%s) from",
		    (unsigned long long)want->seq, saw);
		return -1;
	}
	sr_frame_describe(want, expected, sizeof(expected));
	sr_engine_peer_error(r, link, SR_EOUT_OF_STEP, err,
	    "out of step: expected %s, got %s from", expected, saw);
	return -1;
}

/*
 * Whether got, a collective's frame, may wait for its turn: it belongs
 * to a later collective, or to a later part of this one.  On a mesh a
 * later collective may be another group's: groups count their
 * collectives each on their own, so any seq of another group may wait
 * (its own collective judges it, or the close does).
 */
static bool
later(const struct sr_transfer *x, const struct sr_frame *got)
{
	if (got->kind < SR_FRAME_ALLREDUCE || got->kind > SR_FRAME_LINK)
		return false;
	if (got->group != x->group || got->seq > x->seq)
		return true;
	return got->seq == x->seq && x->next_step != 0 &&
	    got->step >= x->next_step;
}

/*
 * Nothing is expected on this link: only a frame of a later collective,
 * or the peer's goodbye, may wait here for its turn (a peer that finished
 * this collective may start the next, or close).
 */
static int
unexpected(struct run *r, uint32_t link, const struct sr_frame *got,
    struct sr_error *err)
{
	char saw[160];

	if (later(r->x, got) || (got->kind == SR_FRAME_BYE && !r->x->drain))
		return 1;
	sr_frame_describe(got, saw, sizeof(saw));
	sr_engine_peer_error(r, link, SR_EOUT_OF_STEP, err,
	    "out of step: an unexpected frame (%s) came from", saw);
	return -1;
}

/* Whether every stream of link has ended cleanly (after the goodbye). */
static bool
link_ended(const struct run *r, uint32_t link)
{
	for (uint32_t s = 0; s < r->e->streams; s++)
		if (run_link(r, run_conn(r, link, s))->rx != SR_RX_CLOSED)
			return false;
	return true;
}

/* Reads a header on connection k: 1 when one is ready to be judged (in
 * the link's rx_frame), 0 when more bytes are needed, -1 on failure (an
 * abort, the end of the stream; a clean close with want NULL is 0). */
static int
header_in(struct run *r, uint32_t k, const struct sr_frame *want,
    size_t ahead, struct sr_error *err)
{
	struct sr_abort abort;

	switch (sr_link_header(run_link(r, k), ahead, &abort)) {
	case SR_LINK_AGAIN:
		return 0;
	case SR_LINK_CLOSED:
		/* A clean close, nothing owed; or, on a link of several
		 * streams, one stream's end that overtook what another still
		 * carries (a peer shuts every stream once its last frame is
		 * in the kernel): only the link's last end cuts it short. */
		if (want == NULL || !link_ended(r, run_link_of(r, k)))
			return 0;
		sr_engine_peer_error(r, k, SR_EOUT_OF_STEP, err,
		    "out of step: the ring was closed (it finished its "
		    "collectives) by");
		return -1;
	case SR_LINK_EOF:
		sr_engine_io_error(r, k, SR_IO_EOF, err);
		return -1;
	case SR_LINK_ERROR:
		sr_engine_io_error(r, k, SR_IO_ERROR, err);
		return -1;
	case SR_LINK_ABORT:
		sr_engine_abort_heard(r, &abort, err);
		return -1;
	case SR_LINK_READY:
		break;
	}
	return 1;
}

/*
 * Judges the header connection k holds against `want` (or, with want
 * NULL, as one of a later collective): 1 when it matches (or may wait),
 * -1 on failure.
 */
static int
judge(struct run *r, uint32_t k, const struct sr_frame *want,
    struct sr_error *err)
{
	const struct sr_frame *got = &run_link(r, k)->rx_frame;

	switch (sr_frame_check(got, want != NULL ? want : got)) {
	case SR_FRAME_IS_BYE:
		sr_engine_peer_error(r, k, SR_EOUT_OF_STEP, err,
		    "out of step: the ring was closed (it finished its "
		    "collectives, %llu of them, and said goodbye) by",
		    (unsigned long long)got->seq);
		return -1;
	case SR_FRAME_BAD_ABORT:
	case SR_FRAME_IS_ABORT:
		sr_engine_peer_error(r, k, SR_EOUT_OF_STEP, err,
		    "an abort frame of %llu bytes (not a silvic frame) came from",
		    (unsigned long long)got->length);
		return -1;
	case SR_FRAME_IS_HEARTBEAT:
	case SR_FRAME_MISMATCH:
		if (want == NULL)
			return unexpected(r, k, got, err);
		return mismatch(r, k, got, want, err);
	case SR_FRAME_MATCH:
		break;
	}
	return want != NULL ? 1 : unexpected(r, k, got, err);
}

/*
 * Reads and classifies a header on connection k.  Returns 1 when a header
 * that matches `want` (or, with want NULL, one of a later collective) is
 * ready, 0 when more bytes are needed, -1 on failure.  ahead: as for
 * sr_link_header.
 */
static int
read_header(struct run *r, uint32_t k, const struct sr_frame *want,
    size_t ahead, struct sr_error *err)
{
	int rc = header_in(r, k, want, ahead, err);

	return rc <= 0 ? rc : judge(r, k, want, err);
}

/*
 * Whether a fold's payload is read straight into its place in data and
 * folded there (v->straight, local another buffer: an out-of-place ring
 * allreduce), not staged in the stream's segment (in place, or a small
 * path, whose ranks each fold every element and must fold it with the
 * same kernel).  Straight in, the kernel's copy brings into cache the
 * lines the fold then writes, where a fold from the segment into data
 * must fetch each line it writes besides the two it reads.  World 2,
 * out of place over in place in one process (the in-place half
 * unchanged, the control), medians of 5 launches, before -> after: 512
 * KiB 1.45 -> 1.13, 32 MiB 1.45 -> 1.35, 128 MiB 1.21 -> 1.14; world 4
 * level (docs/performance.md).
 */
static bool
straight_in(const struct sr_recv *v)
{
	return v->straight && v->data != NULL;
}

/* Folds the complete elements waiting (in the stream's segment, or in
 * place) into the receive, where its piece has got to. */
static void
fold(struct run *r, struct sr_stream *st, struct sr_recv *v)
{
	size_t elements = st->fill / r->esize, bytes = elements * r->esize;
	uint64_t at = st->base + st->final;
	uint8_t *seg = straight_in(v) ? v->data + at : st->segment;

	if (elements == 0)
		return;
	if (v->swap)
		sr_reduce(v->data + at, seg, v->local + at, elements,
		    r->x->dtype, r->x->op);
	else
		sr_reduce(v->data + at, v->local + at, seg, elements,
		    r->x->dtype, r->x->op);
	st->final += bytes;
	st->fill -= bytes;
	if (st->fill > 0 && seg == st->segment)
		memmove(seg, seg + bytes, st->fill);
}

void
sr_engine_recv_start(struct run *r, uint32_t link, int recv)
{
	struct sr_cursor *c = &r->cursor[link];

	c->recv = recv;
	c->prefix = 0;
	if (recv >= 0 && r->e->streams > 1)
		memset(c->pieces, 0, (size_t)(run_pieces(r,
		    r->x->recvs[recv].len) + 7) / 8);
}

static bool
piece_in(const struct sr_cursor *c, uint64_t p)
{
	return c->pieces[p / 8] & (1u << (p % 8));
}

/*
 * The bytes of the current receive final in place, from the start: the
 * pieces all in, and of the next one what stream st has of it (one
 * stream reads its pieces in order, so a forward of them can go as
 * they come), verified the pieces all in.
 */
static void
note_done(struct run *r, struct sr_cursor *c, const struct sr_stream *st,
    struct sr_recv *v)
{
	uint64_t whole = c->prefix * r->frame_max;

	if (whole > v->len)
		whole = v->len;
	v->verified = whole;
	v->done = whole;
	if (st != NULL && st->active && st->piece == c->prefix)
		v->done += st->final;
}

/* Stream st's piece is in, and verified where trailers are checked. */
static void
piece_done(struct run *r, uint32_t k, struct sr_recv *v)
{
	uint32_t link = run_link_of(r, k);
	struct sr_cursor *c = &r->cursor[link];
	struct sr_stream *st = &r->e->stream[k];

	st->active = false;
	st->fill = 0;
	if (r->e->streams == 1) {
		c->prefix++;	/* one stream: pieces come in order */
	} else {
		c->pieces[st->piece / 8] |= (uint8_t)(1u << (st->piece % 8));
		while (c->prefix < run_pieces(r, v->len) &&
		    piece_in(c, c->prefix))
			c->prefix++;
	}
	note_done(r, c, NULL, v);
	if (c->prefix == run_pieces(r, v->len)) {
		v->complete = true;
		sr_engine_recv_start(r, link,
		    sr_engine_next_recv(r, c->recv + 1, link));
	}
}

/*
 * Where up to `want` payload bytes of stream st's piece go: straight to
 * their place, or for a fold (or a discard) into the stream's segment.
 */
static uint8_t *
payload_room(struct sr_stream *st, const struct sr_recv *v, uint64_t *want)
{
	if (v->data == NULL || (v->reduce && !straight_in(v))) {
		if (*want > SR_SEGMENT - st->fill)
			*want = SR_SEGMENT - st->fill;
		return st->segment + st->fill;
	}
	return v->data + st->base + st->got;
}

/* Reads payload of the current piece; bytes moved, 0 to poll again, -1. */
static int64_t
read_payload(struct run *r, uint32_t k, struct sr_recv *v,
    struct sr_error *err)
{
	struct sr_stream *st = &r->e->stream[k];
	struct sr_link *l = run_link(r, k);
	uint64_t want = l->rx_payload_left;
	uint8_t *into = payload_room(st, v, &want);
	ssize_t n = sr_link_read(l, into, want > SR_IO_MAX ? SR_IO_MAX :
	    (size_t)want);

	if (n == SR_IO_AGAIN)
		return 0;
	if (n < 0) {
		sr_engine_io_error(r, k, (int)n, err);
		return -1;
	}
	st->got += (uint64_t)n;
	if (v->reduce) {
		st->fill += (size_t)n;
		fold(r, st, v);
	} else {
		st->final += (uint64_t)n;
	}
	note_done(r, &r->cursor[run_link_of(r, k)], st, v);
	return n;
}

/* Reads a frame's CRC trailer: 1 when it matches, 0 for more, -1. */
static int
read_trailer(struct run *r, uint32_t k, struct sr_error *err)
{
	uint32_t got, computed;

	switch (sr_link_trailer(run_link(r, k), &got, &computed)) {
	case SR_TRAILER_AGAIN:
		return 0;
	case SR_TRAILER_OK:
		return 1;
	case SR_TRAILER_CORRUPT:
		sr_engine_peer_error(r, k, SR_ECORRUPT, err, "integrity check "
		    "failed (CRC-32C 0x%08x, computed 0x%08x) on a frame from",
		    got, computed);
		return -1;
	case SR_TRAILER_EOF:
		sr_engine_io_error(r, k, SR_IO_EOF, err);
		return -1;
	case SR_TRAILER_ERROR:
		break;
	}
	sr_engine_io_error(r, k, SR_IO_ERROR, err);
	return -1;
}

/* The payload bytes of piece p of receive v. */
static uint64_t
piece_len(const struct run *r, const struct sr_recv *v, uint64_t p)
{
	uint64_t at = p * r->frame_max;

	return v->len - at > r->frame_max ? r->frame_max : v->len - at;
}

/* Whether a stream of link is reading piece p. */
static bool
piece_under_way(const struct run *r, uint32_t link, uint32_t p)
{
	for (uint32_t s = 0; s < r->e->streams; s++) {
		const struct sr_stream *st =
		    &r->e->stream[run_conn(r, link, s)];

		if (st->active && st->piece == p)
			return true;
	}
	return false;
}

/* Whether got, on a link of several streams, is a frame of this
 * transfer's next receives there: it waits until that receive's turn
 * (the sender went on to it on another stream). */
static bool
ahead_here(const struct run *r, uint32_t link, const struct sr_frame *got)
{
	for (int i = sr_engine_next_recv(r, r->cursor[link].recv + 1, link);
	    i >= 0; i = sr_engine_next_recv(r, i + 1, link)) {
		const struct sr_frame *f = &r->x->recvs[i].frame;

		if (f->kind == got->kind && f->seq == got->seq &&
		    f->group == got->group && f->step == got->step)
			return true;
	}
	return false;
}

/*
 * Whether a goodbye on a link of several streams, where a piece of this
 * transfer is due, may wait.  The goodbye is one piece on whichever
 * stream was idle, so it can overtake the collective's last pieces on the
 * others; its seq, the collectives its sender ran, says whether it ran
 * this one (every piece of it is then on its way) or fewer (out of
 * step).  A group counts its collectives apart from the ring's: there the
 * goodbye waits, and the silence timeout judges a piece that never
 * comes.
 */
static bool
bye_overtook(const struct run *r, const struct sr_frame *got)
{
	return got->kind == SR_FRAME_BYE &&
	    (r->x->group != 0 || got->seq >= r->x->seq);
}

/*
 * On a link of several streams: which piece of receive v the header on
 * connection k is.  1 with *p (and want's length) when it is one not yet
 * in, 0 when it waits for a later receive or collective, -1 on failure.
 */
static int
which_piece(struct run *r, uint32_t k, const struct sr_recv *v,
    struct sr_frame *want, uint32_t *p, struct sr_error *err)
{
	uint32_t link = run_link_of(r, k);
	const struct sr_frame *got = &run_link(r, k)->rx_frame;
	uint64_t pieces = run_pieces(r, v->len);

	*p = got->piece;
	want->length = *p < pieces ? piece_len(r, v, *p) : got->length;
	if (sr_frame_check(got, want) != SR_FRAME_MATCH) {
		/* The closing barrier's next step may come before the
		 * goodbye did on another stream. */
		/* While the goodbye or the closing barrier is due, a frame of
		 * another collective is out of step (the peer ran one this
		 * rank did not), as it is on one stream; only the barrier's
		 * next step may wait. */
		if (ahead_here(r, link, got) ||
		    (want->kind != SR_FRAME_BYE && later(r->x, got)) ||
		    (got->kind == SR_FRAME_BYE && want->kind == SR_FRAME_BYE &&
		    got->seq == want->seq && got->step > want->step) ||
		    (want->kind != SR_FRAME_BYE && bye_overtook(r, got)))
			return 0;
		return judge(r, k, want, err);
	}
	if (*p >= pieces || piece_in(&r->cursor[link], *p) ||
	    piece_under_way(r, link, *p)) {
		sr_engine_peer_error(r, k, SR_EOUT_OF_STEP, err, "out of step: "
		    "piece %u of a receive of %llu pieces came %s from", *p,
		    (unsigned long long)pieces, *p >= pieces ? "(past its end)" :
		    "twice");
		return -1;
	}
	return 1;
}

/* The next frame of the current receive: its header read and taken.
 * Bytes moved (the header, and the payload that came with it), 0 to
 * poll again, -1. */
static int64_t
next_piece(struct run *r, uint32_t k, const struct sr_recv *v,
    struct sr_error *err)
{
	struct sr_link *l = run_link(r, k);
	struct sr_stream *st = &r->e->stream[k];
	struct sr_cursor *c = &r->cursor[run_link_of(r, k)];
	struct sr_frame want = v->frame;
	uint32_t p = (uint32_t)c->prefix;
	size_t ahead = 0;
	int rc;

	want.length = piece_len(r, v, p);
	if (r->e->streams > 1) {
		rc = header_in(r, k, &want, 0, err);
		if (rc > 0)
			rc = which_piece(r, k, v, &want, &p, err);
	} else {
		/* A small frame comes in whole, header and payload in one
		 * read: a syscall saved per frame, which is much of a small
		 * message's cost.  Not when a trailer must be checked. */
		if (!r->e->c.integrity && want.length <= SR_STAGE)
			ahead = (size_t)want.length;
		rc = read_header(r, k, &want, ahead, err);
	}
	if (rc <= 0)
		return rc;
	sr_link_take(l);
	st->active = true;
	st->piece = p;
	st->base = (uint64_t)p * r->frame_max;
	st->len = want.length;
	st->got = st->final = 0;
	st->fill = 0;
	return (int64_t)l->header_len;
}

int64_t
sr_engine_pump_in(struct run *r, uint32_t k, struct sr_error *err)
{
	struct sr_cursor *c = &r->cursor[run_link_of(r, k)];
	struct sr_stream *st = &r->e->stream[k];
	struct sr_link *l = run_link(r, k);
	int64_t moved = 0, n;

	if (st->dropping)
		return 0;	/* its send's failure reads it */
	/* A header that waited for its receive's turn is judged whether or
	 * not the socket has more. */
	while (c->recv >= 0 && (l->rx == SR_RX_READY || !sr_link_rx_dry(l))) {
		struct sr_recv *v = &r->x->recvs[c->recv];
		int rc;

		if (l->rx == SR_RX_TRAILER) {
			if ((rc = read_trailer(r, k, err)) < 0)
				return -1;
			if (rc == 0)
				break;
			moved += SR_TRAILER_LEN;
			piece_done(r, k, v);
			continue;
		}
		if (l->rx == SR_RX_PAYLOAD)
			n = read_payload(r, k, v, err);
		else
			n = next_piece(r, k, v, err);
		if (n < 0)
			return -1;
		if (n == 0)
			break;
		moved += n;
		if (st->active && l->rx != SR_RX_PAYLOAD &&
		    l->rx != SR_RX_TRAILER)
			piece_done(r, k, v);
	}
	return moved;
}

/*
 * The peer that failed first queued its abort behind what it had sent
 * (the reset that broke this rank's send came after it), and a frame of
 * a later collective parked ahead of the abort hides it.  The collective
 * cannot finish now, so every frame that comes is read into scratch and
 * dropped, never into a receive, until the abort (its origin's words are
 * the failure) or the end of the stream (then the send's error stands,
 * sr_engine_io_error).  A dropped frame's trailer is still checked: a
 * corrupt one is the failure, named as when a frame is taken.
 */
int64_t
sr_engine_drop_to_abort(struct run *r, uint32_t k, struct sr_error *err)
{
	struct sr_link *l = run_link(r, k);
	uint8_t scratch[SR_STAGE];
	int64_t moved = 0;
	ssize_t n;
	int rc;

	r->e->stream[k].dropping = true;
	for (;;) {
		switch (l->rx) {
		case SR_RX_READY:
			sr_link_take(l);
			break;
		case SR_RX_PAYLOAD:
			n = sr_link_read(l, scratch, sizeof(scratch));
			if (n == SR_IO_AGAIN)
				return moved;
			if (n < 0) {
				sr_engine_io_error(r, k, (int)n, err);
				return -1;
			}
			moved += n;
			break;
		case SR_RX_TRAILER:
			/* A corrupt frame is named as such, as when taken. */
			if ((rc = read_trailer(r, k, err)) <= 0)
				return rc < 0 ? -1 : moved;
			moved += SR_TRAILER_LEN;
			break;
		case SR_RX_CLOSED:
			sr_engine_io_error(r, k, SR_IO_EOF, err);
			return -1;
		default:
			if ((rc = header_in(r, k, NULL, 0, err)) <= 0)
				return rc < 0 ? -1 : moved;
		}
	}
}

int
sr_engine_watch_idle(struct run *r, uint32_t k, struct sr_error *err)
{
	struct sr_link *l = run_link(r, k);
	char saw[160];

	if (r->e->stream[k].dropping)
		return 0;	/* its send's failure reads it */

	/* Only once the collective cannot finish without waiting: an abort
	 * right behind its last bytes belongs to the next call. */
	if (r->cursor[run_link_of(r, k)].recv >= 0)
		return 0;
	/* A header parked for a later collective has none left once every
	 * rank agreed to close (on a link of several streams it may have
	 * come on a stream the goodbye did not). */
	if (l->rx == SR_RX_READY && r->x->drain)
		goto after_close;
	if (l->rx == SR_RX_READY || sr_link_rx_dry(l) || l->eof)
		return 0;
	switch (read_header(r, k, NULL, 0, err)) {
	case -1:
		return -1;
	case 1:
		if (!r->x->drain)
			return 0;	/* parked until its collective */
		goto after_close;
	}
	return 0;
after_close:
	sr_frame_describe(&l->rx_frame, saw, sizeof(saw));
	sr_engine_peer_error(r, k, SR_EOUT_OF_STEP, err, "out of step: after "
	    "every rank agreed to close, a frame (%s) came from", saw);
	return -1;
}
