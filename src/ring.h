/*
 * ring.h - the ring object and its failure path (ring.c), shared by the engine and
 * the collectives.
 */
#ifndef SR_RING_H
#define SR_RING_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "engine.h"
#include "error.h"
#include "silvic_ring.h"
#include "wire.h"

/* Frames of at most this many payload bytes are read whole, header and
 * payload in one call. */
#define SR_STAGE 4096


struct sr_peer {
	int fd;
	uint32_t rank;
	char address[SR_ADDR_MAX];
	/* The peer's goodbye was read (sr_ring_finish); then EOF. */
	bool bye;
	bool eof;
	/* Liveness: when bytes last came from and went to the peer
	 * (monotonic ns), and the rank its last heartbeat said it waits on
	 * (SR_NO_RANK: none heard). */
	int64_t heard_ns;
	int64_t sent_ns;
	uint32_t waits_on;
	/* A control frame (heartbeat) under way: its header is tx_header,
	 * with no payload and no trailer. */
	bool tx_control;
	/* Receive decoder; a header read ahead of its collective stays here. */
	uint8_t header[SR_FRAME_HEADER_LEN];
	size_t header_got;
	uint8_t abort_buf[SR_ABORT_MAX];
	/* A small frame's payload read with its header, until it is checked. */
	uint8_t stage[SR_STAGE];
	size_t abort_got;
	uint64_t abort_len;
	/* Send state of the frame under way: header bytes still to go, and
	 * payload bytes still owed (an abort pads them to stay in frame). */
	uint8_t tx_header[SR_FRAME_HEADER_LEN];
	size_t tx_header_left;
	uint64_t tx_payload_left;
	const uint8_t *tx_data;	/* the payload still owed, in hand */
	/* Receive state of the frame under way. */
	uint64_t rx_payload_left;
	/* With integrity checks: the CRC so far and the trailer. */
	uint32_t tx_crc, rx_crc;
	uint8_t tx_trailer[SR_TRAILER_LEN], rx_trailer[SR_TRAILER_LEN];
	size_t tx_trailer_left, rx_trailer_left;
};

struct sr_ring {
	uint32_t rank;
	uint32_t world;
	uint64_t token;
	int64_t timeout_ms;
	volatile int *cancel;
	uint64_t seq;
	bool failed;
	bool finished;		 /* sr_ring_finish agreed */
	struct sr_error failure;
	/* The abort this rank heard first, forwarded verbatim. */
	struct sr_abort heard;
	bool heard_abort;
	struct sr_peer peer[2];	 /* SR_NEXT, SR_PREV */
	char **addresses;
	uint8_t *scratch;
	size_t scratch_size;
	/* The frames of the collective under way, kept between calls. */
	struct sr_send *plan_sends;
	struct sr_recv *plan_recvs;
	size_t plan_size;
	uint8_t *segment;	 /* SR_SEGMENT bytes a side for reductions */
	int64_t spin_ns;	 /* busy-poll this long before sleeping */
	bool integrity;		 /* frames carry a CRC-32C trailer */
	char congestion[SR_CONGESTION_MAX];	/* the next link's */
};


/* The failure of a broken ring copied into err (code kept). */
int sr_ring_fail_again(struct sr_ring *ring, struct sr_error *err);
/* Records err as the ring's failure, sends the abort to both neighbours
 * (the origin's, verbatim, when err came from one), shuts the write
 * sides and lingers, bounded, until the neighbours' kernels have it. */
void sr_ring_fail(struct sr_ring *ring, const struct sr_error *err);
/* An abort read from a peer: kept (the first one) for forwarding, and
 * turned into err: the origin's class, its words, the rank it blamed. */
void sr_ring_heard_abort(struct sr_ring *ring, const struct sr_abort *abort,
    struct sr_error *err);
/* Scratch space of at least size bytes owned by the ring; NULL on ENOMEM. */
uint8_t *sr_ring_scratch(struct sr_ring *ring, size_t size);
/* An empty transfer x with room for `steps` sends and as many receives,
 * owned by the ring (allocated once, reused by every call); -1 on ENOMEM. */
int sr_ring_plan(struct sr_ring *ring, int steps, struct sr_transfer *x);

#endif
