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

/*
 * The ring allreduce's frame size: 1 MiB, so a step's block of up to
 * 1 MiB is one frame, forwarded once it is all folded.  Forwarding
 * sooner, in quarter-block frames of at least 128 KiB (as before) or as
 * the bytes come (cut-through), buys a frame's time per step on a
 * latency-bound link but costs a frame's overhead on every one, and
 * every link of a ring is busy at every step anyway.  Measured in one
 * process, the two alternating call by call (medians of 200-300 calls,
 * quarter blocks -> 1 MiB frames): world 2, 1 MiB 690 -> 566 us and 512
 * -> 431, 2 MiB 1153 -> 1072 and 921 -> 752; world 4, 1 MiB 1816 -> 1583
 * and 2261 -> 2064, 2 MiB 3605 -> 3081 and 4423 -> 3849; world 3, 512
 * KiB 366 -> 324; world 8, 2 MiB 7543 -> 6762; 8 MiB within 4%.
 * Cut-through (a frame started once some of its bytes were folded, its
 * tail sent as the rest was) measured the same as quarter blocks, 128
 * KiB to 2 MiB at worlds 2 and 4 (docs/performance.md).
 */
#define SR_PLAN_FRAME (1u << 20)

/*
 * The frame size of a ring allreduce of `bytes` round n places:
 * SR_PLAN_FRAME, but half of it for a block (bytes / n) over 1 MiB and
 * under 4 MiB on shared cores.  There a block of two or three 1 MiB
 * frames leaves a rank idle while its neighbour on the same core folds
 * a whole frame; in four to seven the two take turns sooner.  Alternating
 * launches, 512 KiB against 1 MiB frames, paired speed out of place / in
 * place (docs/performance.md): world 4 (unbound from 8 MiB) 6 MiB
 * 1.06/1.04, 8 MiB 1.03-1.05/1.08, 10 MiB 1.04-1.10/1.05-1.06, 12 MiB
 * 1.01/1.02; world 3 6 MiB 1.03/1.07, 8 MiB 1.00/0.99; world 8 16 MiB
 * 1.05/1.06, 24 MiB 1.01/1.16.  Blocks of 4 MiB (world 4, 16 MiB) ran
 * level, blocks of 1.25-1.33 MiB mixed (0.97-1.05), and ranks each on a
 * core of their own (world 2, 4 and 8 MiB) level or slower; 256 KiB
 * frames were faster still at world 4, 8 MiB (1.10-1.12) but slower at
 * world 3, 8 MiB and from 12 MiB.  Against the code before, world 4:
 * 8 MiB 1.10/1.06 and 1.10/1.09 (10 and 12 rounds), 10 MiB 0.92/1.09
 * and 0.99/1.00, 12 MiB 1.06/1.06, where 16 MiB, unchanged, ran
 * 1.02/1.06.  Every rank must agree on shared_cores, as on the other
 * paths it chooses: a frame of the other size is out of step.
 */
uint64_t sr_plan_frame(uint64_t bytes, uint32_t n, bool shared_cores);

/*
 * The first step of a reduction by blocks (on shared cores: world 4's on
 * the ring, collectives.c; a mesh of 8's, group.c): + 0 a member's input
 * to its block's leader, + 1 the leaders' exchange, + 2 the result back.
 * Apart from every other path's steps, so ranks that disagree on the
 * path are out of step at their first frame.
 */
#define SR_STEP_BLOCKS 0x300u
/* Blocks take allreduces up to this much: past it the ring or halving
 * won (world 4: collectives.c, blocks_allreduce; a mesh of 8: group.c). */
#define SR_BLOCKS_MAX (256u << 10)

#endif
