/*
 * engine.h - the transfer engine (engine.c, engine_recv.c): one
 * collective's frames on any number of a rank's links at once.
 */
#ifndef SR_ENGINE_H
#define SR_ENGINE_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "silvic_ring.h"
#include "wire.h"

struct sr_link;

/*
 * One frame to send: `len` bytes at data, on link `link` (an index into
 * the ring's links).  When gate >= 0 only the bytes the receive `gate`
 * has already finished may be sent (the data forwards what that receive
 * brings).
 */
struct sr_send {
	uint32_t link;
	const uint8_t *data;
	uint64_t len;
	int gate;
	struct sr_frame frame;
	/* Engine state: payload bytes handed to a link (a piece is handed
	 * whole); whether a piece was. */
	uint64_t off;
	bool started;
};

/*
 * One frame to receive into data (len bytes) from link `link`.  With
 * reduce set the payload is folded into data with (dtype, op) instead of
 * copied.  data may be NULL to discard the payload.
 */
struct sr_recv {
	uint32_t link;
	uint8_t *data;
	uint64_t len;
	/* With reduce: data = op(local, payload); local may be data.  With
	 * swap too: data = op(payload, local) (max and min pick by operand
	 * order: a fold order fixed on every rank keeps results bitwise
	 * identical). */
	const uint8_t *local;
	bool reduce;
	bool swap;
	/* With reduce, local apart from data (the builder checks): the
	 * payload is read straight into data and folded there, not staged
	 * (the ring's reduce-scatter, where one rank folds each element
	 * last and every rank gets its bits, so the kernel that folds it,
	 * which can pick another NaN payload, cannot make ranks disagree). */
	bool straight;
	struct sr_frame frame;
	/* Engine state: payload bytes final in data, of those the ones
	 * whose frame passed its integrity check, and completion. */
	uint64_t done;
	uint64_t verified;
	bool complete;
};

/*
 * A transfer: per link, sends go out in list order and receives come in
 * in list order; links move independently of one another.
 */
struct sr_transfer {
	struct sr_send *sends;
	int nsends;
	struct sr_recv *recvs;
	int nrecvs;
	/*
	 * The links the transfer runs on, each once: every send's and
	 * receive's link, and any other it must watch (for an abort, a
	 * close, or a later collective's frame waiting its turn).  They are
	 * served in this order, and the last with a receive due is the one a
	 * heartbeat says this rank waits on (a ring lists its next rank,
	 * then its previous one: whom a ring step waits on).
	 */
	const uint32_t *links;
	int nlinks;
	enum sr_dtype dtype;
	enum sr_op op;
	/* Payload bytes per frame at most (0: SR_FRAME_MAX); the same on
	 * every rank, as both ends cut a send into frames alike. */
	uint64_t frame_max;
	/* Closing: done only at every link's EOF (after the goodbyes); any
	 * frame but a heartbeat or an abort is out of step. */
	bool drain;
	/* The collective's number (its frames' seq): heartbeats carry it,
	 * and a frame of a higher one may wait for its turn. */
	uint64_t seq;
	/* The group it runs in (its frames' group; 0: the whole ring's),
	 * whose own count seq is: a frame of another group, whatever its
	 * seq, may wait for its turn on a link this transfer is idle on. */
	uint32_t group;
	/* When the collective goes on in a later transfer (a hop of
	 * recursive doubling waits for the one before), the first step of
	 * what follows: a frame of this seq and group from that step on may
	 * wait for its turn too.  0: the collective ends with this one. */
	uint32_t next_step;
	/* Every frame received carries its sender's whole contribution (a
	 * small group collective): one that differs from the frame expected
	 * in its length alone is reported as contributions of different
	 * lengths, naming both. */
	bool whole;
};

/* A waiting rank's heartbeats are a quarter timeout apart, at most this. */
#define SR_HEARTBEAT_MAX_NS (1000LL * 1000000)
/* A rank busy-polls its links this long before it sleeps in poll: a
 * blocking wake-up costs tens of microseconds, a small frame's whole
 * round trip about as much. */
#define SR_SPIN_NS (50LL * 1000)

/* What an engine runs on. */
struct sr_engine_config {
	struct sr_link *links;	/* the transfers' link indexes index these */
	uint32_t nlinks;
	/* Every rank's address, for naming the rank an abort blames. */
	char *const *addresses;
	uint32_t world;
	/* When non-NULL and set non-zero, a wait ends with
	 * SR_EINTERRUPTED at the next wake-up. */
	volatile int *cancel;
	int64_t timeout_ms;	/* the silence timeout, > 0 */
	bool integrity;		/* frames carry a CRC-32C trailer */
	/* Connections per link (0 counts as 1): links holds nlinks x
	 * streams, stream s of link i at i + s * nlinks, and a transfer's
	 * link indexes name links (< nlinks).  With more than one, a send's
	 * pieces go on whichever stream can take one first while this rank
	 * waits on its links, else on each link's first (sr_engine_spread),
	 * each carrying its place (sr_frame.piece, in the wide header). */
	uint32_t streams;
};

/* The engine's state between transfers (a cursor and a reduction
 * segment per link, the first abort heard); NULL on ENOMEM.  The links
 * stay the caller's. */
struct sr_engine;
struct sr_engine *sr_engine_new(const struct sr_engine_config *config);
void sr_engine_free(struct sr_engine *engine);
void sr_engine_set_timeout(struct sr_engine *engine, int64_t timeout_ms);
/* With several streams, whether a transfer's pieces spread over them
 * (spread.h): the engine's verdict, which it keeps up itself; the ring
 * sets `always`, a test the rest. */
struct sr_spread *sr_engine_spread(struct sr_engine *engine);

/*
 * Runs a transfer to completion (0) or failure (-1 with err; the caller
 * then fails the ring).  A peer's abort fails it with the origin's class
 * and words, and the rank it blamed as err's peer.
 */
int sr_engine_run(struct sr_engine *engine, struct sr_transfer *xfer,
    struct sr_error *err);
/* The first abort heard, to be forwarded verbatim, or NULL. */
const struct sr_abort *sr_engine_heard(const struct sr_engine *engine);

/* Frames carry at most this much payload unless a transfer says otherwise:
 * a forwarding rank sends a piece once it has all of it, so this is also
 * the pipelining grain. */
#define SR_FRAME_MAX (256u << 10)
/* A reduction staged in the segment (in place, or a small path) folds
 * received bytes in pieces of at most this size, while they are still in
 * cache; one read straight into place folds what one read brought, at
 * most a frame. */
#define SR_SEGMENT (256u << 10)

#endif
