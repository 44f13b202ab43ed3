/*
 * engine.h - the transfer engine (engine.c): one collective's frames on a rank's links.
 */
#ifndef SR_ENGINE_H
#define SR_ENGINE_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "silvic_ring.h"
#include "wire.h"

struct sr_ring;

enum sr_side { SR_NEXT = 0, SR_PREV = 1 };

/*
 * One frame to send: `len` bytes at data, on side `side`.  When gate >= 0
 * only the bytes the receive `gate` has already finished may be sent (the
 * data forwards what that receive brings).
 */
struct sr_send {
	enum sr_side side;
	const uint8_t *data;
	uint64_t len;
	int gate;
	struct sr_frame frame;
	/* Engine state: payload bytes sent; whether a header went out. */
	uint64_t off;
	bool started;
};

/*
 * One frame to receive into data (len bytes) from `side`.  With reduce set
 * the payload is folded into data with (dtype, op) instead of copied.
 * data may be NULL to discard the payload.
 */
struct sr_recv {
	enum sr_side side;
	uint8_t *data;
	uint64_t len;
	/* With reduce: data = op(local, payload); local may be data.  With
	 * swap too: data = op(payload, local), and local must not be data
	 * (max and min pick by operand order: a fold order fixed on every
	 * rank keeps results bitwise identical). */
	const uint8_t *local;
	bool reduce;
	bool swap;
	struct sr_frame frame;
	/* Engine state: payload bytes final in data, of those the ones
	 * whose frame passed its integrity check, and completion. */
	uint64_t done;
	uint64_t verified;
	bool complete;
};

struct sr_transfer {
	struct sr_send *sends;
	int nsends;
	struct sr_recv *recvs;
	int nrecvs;
	enum sr_dtype dtype;
	enum sr_op op;
	/* Payload bytes per frame at most (0: SR_FRAME_MAX); the same on
	 * every rank, as both ends cut a send into frames alike. */
	uint64_t frame_max;
	/* Closing: done only at both peers' EOF (after their goodbyes);
	 * any frame but a heartbeat or an abort is out of step. */
	bool drain;
};

/* A waiting rank's heartbeats are a quarter timeout apart, at most this. */
#define SR_HEARTBEAT_MAX_NS (1000LL * 1000000)

/* Runs a transfer to completion or failure (then the ring is failed). */
int sr_engine_run(struct sr_ring *ring, struct sr_transfer *xfer,
    struct sr_error *err);


/* Frames carry at most this much payload unless a transfer says otherwise:
 * a forwarding rank sends a piece once it has all of it, so this is also
 * the pipelining grain. */
#define SR_FRAME_MAX (256u << 10)
/* A reduction folds received bytes in pieces of at most this size, while
 * they are still in cache. */
#define SR_SEGMENT (256u << 10)

#endif
