/*
 * plan.h - the step builders the ring's collectives (collectives.c) and
 * the groups' (group.c) share: a transfer written as steps in one
 * direction round a ring of links, and the ring allreduce in those
 * steps.  Pure: they fill a transfer, nothing more.
 */
#ifndef SR_PLAN_H
#define SR_PLAN_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "engine.h"
#include "wire.h"

/*
 * A direction round a ring: send on link `to`, receive on link `from`,
 * this rank sitting at `place` of the ring's n places (the schedule's
 * rank, schedule.h).
 */
struct sr_direction {
	uint32_t to, from;	/* links */
	uint32_t place;
};

/*
 * Appends one step in direction d: send_len bytes at send go on, and
 * recv_len bytes come into recv (folded with local when it is not NULL).
 * A gated step forwards what the step appended before it receives, so
 * steps of one direction are appended in order, without another between.
 */
void sr_plan_step(struct sr_transfer *x, const struct sr_direction *d,
    struct sr_frame frame, const uint8_t *send, uint64_t send_len,
    bool gated, uint8_t *recv, uint64_t recv_len, const uint8_t *local);

/*
 * The 2(n-1) steps of a ring allreduce of count elements (at send, into
 * recv) in direction d round n places, numbered from frame.step: a
 * reduce-scatter whose every send after the first forwards the block
 * just folded, then an allgather of the folded blocks.
 */
void sr_plan_allreduce(struct sr_transfer *x, const struct sr_direction *d,
    struct sr_frame frame, const uint8_t *send, uint8_t *recv, size_t count,
    size_t es, uint32_t n);

/* The frame size for ring steps of `block` bytes (see collectives.c). */
uint64_t sr_plan_frame_size(size_t block);

#endif
