/*
 * engine_impl.h - what engine.c (the loop, sending, liveness) and
 * engine_recv.c (receiving) share; nothing else includes it.
 */
#ifndef SR_ENGINE_IMPL_H
#define SR_ENGINE_IMPL_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>
#include <sys/types.h>

#include "engine.h"
#include "error.h"
#include "spread.h"
#include "transport.h"

/*
 * Where a transfer stands on one link (by link index).  A receive comes
 * in pieces of the transfer's frame size, each a frame; with several
 * streams they come on any of the link's connections in any order, so
 * which are in is a bitmap, and the receive's bytes final in place (its
 * done) are the pieces before the first missing one.
 */
struct sr_cursor {
	int send;	/* current send on this link, or -1 */
	int recv;	/* current receive on this link, or -1 */
	uint64_t prefix;	/* pieces of the receive all in, in a row */
	uint8_t *pieces;	/* bit p: piece p of the receive is in */
	size_t pieces_size;	/* bytes of it allocated */
};

/* Where a transfer stands on one connection of a link (by index into
 * the links: stream s of link i is i + s * nlinks). */
struct sr_stream {
	bool active;	/* a piece is being read */
	uint32_t piece;	/* which */
	uint64_t base;	/* where its payload goes in the receive */
	uint64_t len;	/* its payload bytes */
	uint64_t got;	/* of those, read */
	uint64_t final;	/* of those, final in place (copied or folded) */
	bool carrying;	/* the frame under way is a piece of a send */
	uint8_t *segment;	/* SR_SEGMENT bytes for reductions, from the
				 * first transfer that folds on this stream */
	size_t fill;	/* reduction bytes waiting to be folded, in the
			 * segment or (straight in) in place */
	bool dropping;	/* the send broke: what comes is read and dropped
			 * until the abort (sr_engine_drop_to_abort) */
};

struct sr_engine {
	struct sr_engine_config c;
	uint32_t streams;	/* connections per link, >= 1 */
	struct sr_cursor *cursor;	/* by link index */
	struct sr_stream *stream;	/* by connection */
	int64_t spin_ns;	/* busy-poll this long before sleeping */
	struct sr_spread spread;	/* whether pieces go on every stream */
	/* The abort this rank heard first, forwarded verbatim. */
	struct sr_abort heard;
	bool heard_abort;
};

struct run {
	struct sr_engine *e;
	struct sr_transfer *x;
	struct sr_cursor *cursor;
	size_t esize;
	uint64_t frame_max;	/* payload bytes a frame carries at most */
	int64_t heartbeat_ns;	/* a waiting rank's heartbeat period */
	int64_t progress_ns;	/* when payload last moved */
	/* With several streams: whether this transfer's pieces go on every
	 * stream of a link or stay on its first (spread.c), and what it
	 * has spent waiting so far. */
	bool spread;
	int64_t start_ns, waited_ns;
	uint64_t send_bytes;	/* what this rank sends in it */
};

/* The link a connection belongs to, and which of its streams it is. */
static inline uint32_t
run_link_of(const struct run *r, uint32_t k)
{
	return r->e->streams == 1 ? k : k % r->e->c.nlinks;
}

static inline uint32_t
run_stream_of(const struct run *r, uint32_t k)
{
	return r->e->streams == 1 ? 0 : k / r->e->c.nlinks;
}

/* The connection that is stream s of link (run_link_of's inverse). */
static inline uint32_t
run_conn(const struct run *r, uint32_t link, uint32_t s)
{
	return link + s * r->e->c.nlinks;
}

/* The pieces of a receive of len bytes: an empty one is one frame. */
static inline uint64_t
run_pieces(const struct run *r, uint64_t len)
{
	return len == 0 ? 1 : (len + r->frame_max - 1) / r->frame_max;
}

/* Connection k: stream k / nlinks of link k % nlinks (a link's first
 * stream is the link's own index). */
static inline struct sr_link *
run_link(const struct run *r, uint32_t k)
{
	return &r->e->c.links[k];
}

/* Fails err as code, "<what> rank P (address) in <the frame due>";
 * link is a connection's index (its stream named when there are
 * several). */
void sr_engine_peer_error(struct run *r, uint32_t link, enum sr_code code,
    struct sr_error *err, const char *fmt, ...) SR_PRINTF(5, 6);
/* A read or send that failed: rc is SR_IO_EOF or SR_IO_ERROR (errno). */
void sr_engine_io_error(struct run *r, uint32_t link, int rc,
    struct sr_error *err);
int sr_engine_next_recv(const struct run *r, int from, uint32_t link);

/* A peer's abort: kept (the first one) for forwarding, and turned into
 * err (engine_recv.c). */
void sr_engine_abort_heard(struct run *r, const struct sr_abort *abort,
    struct sr_error *err);

/* engine_recv.c.  A receive becomes its link's current one (its pieces
 * none in yet).  Receives what it can on connection k: bytes moved, or
 * -1. */
void sr_engine_recv_start(struct run *r, uint32_t link, int recv);
int64_t sr_engine_pump_in(struct run *r, uint32_t k, struct sr_error *err);
/* A connection with nothing to receive is still read for an abort, a
 * goodbye or a close; a later collective's header may wait there for
 * its turn.  0, or -1 on failure. */
int sr_engine_watch_idle(struct run *r, uint32_t k, struct sr_error *err);
/* This rank's send on k broke with a frame of a later collective parked
 * there: frames are read and dropped until the abort queued behind them,
 * or the stream's end.  Bytes moved, or -1. */
int64_t sr_engine_drop_to_abort(struct run *r, uint32_t k,
    struct sr_error *err);

#endif
