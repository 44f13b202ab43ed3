/*
 * collectives.c - allreduce, allgather, broadcast, barrier and the link
 * tests, each written as a transfer (frames to send and to receive) for
 * the engine.
 *
 * Allreduce is a reduce-scatter then an allgather around the ring (see
 * schedule.c for which block moves at each step); a small one (see
 * small_enough) is one allgather and a local fold in rank order:
 * ceil((n-1)/2) hops instead of 2(n-1); at world 3 four frames in
 * three hops where the ranks share cores, at world 4 two hops of
 * recursive doubling, or by blocks where the ranks share cores (to 256
 * KiB, the barrier too).  Each way every element is folded in one fixed
 * order, so results are the same on every rank, to the bit but for the
 * payload a sum of two NaNs keeps (silvic_ring.h).  The frames of a
 * call live in the ring's plan (sr_ring_plan): nothing is allocated per
 * call or per step.
 */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "clock.h"
#include "engine.h"
#include "error.h"
#include "place.h"
#include "plan.h"
#include "reduce.h"
#include "ring.h"
#include "schedule.h"
#include "transport.h"
#include "wire.h"

/* A small allreduce moves at most this much per rank, and one this
 * small is always small (see small_enough). */
#define SR_SMALL_MOVES (128u << 10)
#define SR_SMALL_ALWAYS 4096u

/* Fails at once on a broken ring (or none); else counts the collective
 * this call starts (ring->seq, the frames' seq) and runs the rank where
 * path wants it. */
static int
begin_on(struct sr_ring *ring, enum sr_path path, struct sr_error *err)
{
	sr_error_clear(err);
	if (ring == NULL) {
		sr_error_set(err, SR_ECONFIG, SR_PHASE_COLLECTIVE,
		    "no ring (sr_ring_connect failed or was not called)");
		return -1;
	}
	if (ring->failed)
		return sr_ring_fail_again(ring, err);
	ring->seq++;
	sr_place(ring, path);
	return 0;
}

/* Every collective but the allreduce keeps the rank where it is: only
 * the allreduce's placements were measured (place.c). */
static int
begin(struct sr_ring *ring, struct sr_error *err)
{
	return begin_on(ring, SR_PATH_KEEP, err);
}

static int
run(struct sr_ring *ring, struct sr_transfer *x, struct sr_error *err)
{
	if (sr_engine_run(ring->engine, x, err) == 0)
		return 0;
	err->rank = ring->rank;
	sr_ring_fail(ring, err);
	return -1;
}

static int
nomem(struct sr_ring *ring, struct sr_error *err)
{
	sr_error_set(err, SR_ENOMEM, SR_PHASE_COLLECTIVE, "out of memory");
	err->rank = ring->rank;
	sr_ring_fail(ring, err);
	return -1;
}

/* A transfer set up by hand runs on the ring's two links, in the
 * collective under way. */
static void
ring_links(const struct sr_ring *ring, struct sr_transfer *x)
{
	x->links = ring->ring_links;
	x->nlinks = ring->nring_links;
	x->seq = ring->seq;
}

static struct sr_frame
frame_of(const struct sr_ring *ring, uint8_t kind, uint32_t step)
{
	struct sr_frame f = { .kind = kind, .step = step, .seq = ring->seq };

	return f;
}

/*
 * A direction round the ring (plan.h).  Forward sends to the next rank and
 * receives from the previous one; backward is the same ring with the ranks
 * numbered the other way (rank r sits at place world-1-r), so its "next"
 * is the previous rank.
 */
static struct sr_direction
direction_of(const struct sr_ring *ring, bool backward)
{
	struct sr_direction d = { ring->next, ring->prev, ring->rank };

	if (backward) {
		d.to = ring->prev;
		d.from = ring->next;
		d.place = ring->world - 1 - ring->rank;
	}
	return d;
}

void
sr_plan_step(struct sr_transfer *x, const struct sr_direction *d,
    struct sr_frame frame, const uint8_t *send, uint64_t send_len,
    bool gated, uint8_t *recv, uint64_t recv_len, const uint8_t *local)
{
	int i = x->nsends;

	x->sends[i] = (struct sr_send){ .link = d->to, .data = send,
		.len = send_len, .frame = frame, .gate = gated ? i - 1 : -1 };
	/* Out of place (local apart from recv), the fold may go straight
	 * into recv: decided here, once, not on every read. */
	bool apart = local != NULL && ((uintptr_t)recv + recv_len <=
	    (uintptr_t)local || (uintptr_t)local + recv_len <= (uintptr_t)recv);

	x->recvs[i] = (struct sr_recv){ .link = d->from, .data = recv,
		.len = recv_len, .frame = frame, .reduce = local != NULL,
		.local = local, .straight = apart };
	x->nsends++;
	x->nrecvs++;
}

uint64_t
sr_plan_frame(uint64_t bytes, uint32_t n, bool shared_cores)
{
	uint64_t block = n > 0 ? bytes / n : bytes;

	if (shared_cores && block > SR_PLAN_FRAME && block < 4 * SR_PLAN_FRAME)
		return SR_PLAN_FRAME / 2;
	return SR_PLAN_FRAME;
}

void
sr_plan_allreduce(struct sr_transfer *x, const struct sr_direction *d,
    struct sr_frame frame, const uint8_t *send, uint8_t *recv, size_t count,
    size_t es, uint32_t n)
{
	uint32_t p = d->place, steps = n - 1, base = frame.step;

	for (uint32_t k = 0; k < steps; k++) {
		uint32_t sb = sr_sched_rs_send(p, n, k);
		uint32_t rb = sr_sched_rs_recv(p, n, k);
		size_t ro = sr_block_offset(count, n, rb) * es;

		frame.step = base + k;
		/* Step 0 sends this rank's own input; later steps forward the
		 * block just folded, which lives in recv. */
		sr_plan_step(x, d, frame,
		    (k == 0 ? send : recv) + sr_block_offset(count, n, sb) * es,
		    sr_block_count(count, n, sb) * es, k > 0, recv + ro,
		    sr_block_count(count, n, rb) * es, send + ro);
	}
	for (uint32_t k = 0; k < steps; k++) {
		uint32_t sb = sr_sched_ag_send(p, n, k);
		uint32_t rb = sr_sched_ag_recv(p, n, k);

		frame.step = base + steps + k;
		sr_plan_step(x, d, frame, recv + sr_block_offset(count, n, sb) * es,
		    sr_block_count(count, n, sb) * es, true,
		    recv + sr_block_offset(count, n, rb) * es,
		    sr_block_count(count, n, rb) * es, NULL);
	}
}

/*
 * One direction only: halves each way (MLX's bidirectional ring) measured
 * 10-20% slower on loopback, where the copies, not the links, are the
 * limit, and a ring already keeps every NIC busy both ways.
 */
static int
ring_allreduce(struct sr_ring *ring, const uint8_t *send, uint8_t *recv,
    size_t count, enum sr_dtype dtype, enum sr_op op, struct sr_error *err)
{
	struct sr_transfer x;
	struct sr_frame frame = frame_of(ring, SR_FRAME_ALLREDUCE, 0);
	struct sr_direction d = direction_of(ring, false);

	if (sr_ring_plan(ring, 2 * (int)(ring->world - 1), &x) != 0)
		return nomem(ring, err);
	x.dtype = dtype;
	x.op = op;
	x.frame_max = sr_plan_frame((uint64_t)count * sr_dtype_size(dtype),
	    ring->world, ring->shared_cores);
	frame.dtype = (uint8_t)dtype;
	frame.op = (uint8_t)op;
	sr_plan_allreduce(&x, &d, frame, send, recv, count, sr_dtype_size(dtype),
	    ring->world);
	return run(ring, &x, err);
}

/*
 * An allgather of `bytes` from every rank into recv, its frames saying
 * `frame` (kind, and dtype and op for a small allreduce, so ranks that
 * disagree on them are out of step; steps count from frame.step).  Both directions at once: forward
 * brings the blocks of ranks r-1, r-2, ..., backward those of r+1, r+2,
 * ..., so it takes ceil((n-1)/2) hops, not n-1.
 */
static int
gather(struct sr_ring *ring, struct sr_frame frame, const uint8_t *send,
    size_t bytes, uint8_t *recv, struct sr_error *err)
{
	uint32_t n = ring->world, r = ring->rank;
	uint32_t ahead = n / 2, behind = (n - 1) / 2, base = frame.step;
	struct sr_transfer x;
	struct sr_direction d;

	if (send != recv + (size_t)r * bytes && bytes > 0)
		memmove(recv + (size_t)r * bytes, send, bytes);
	if (sr_ring_plan(ring, (int)(n - 1), &x) != 0)
		return nomem(ring, err);
	x.dtype = SR_U32;
	x.op = SR_SUM;
	d = direction_of(ring, false);
	for (uint32_t k = 0; k < ahead; k++) {
		frame.step = base + k;
		sr_plan_step(&x, &d, frame, recv + (size_t)(((uint64_t)r + n - k) % n) * bytes,
		    bytes, k > 0, recv + (size_t)(((uint64_t)r + n - 1 - k) % n) * bytes,
		    bytes, NULL);
	}
	d = direction_of(ring, true);
	for (uint32_t k = 0; k < behind; k++) {
		frame.step = base + k;
		sr_plan_step(&x, &d, frame, recv + (size_t)(((uint64_t)r + k) % n) * bytes,
		    bytes, k > 0, recv + (size_t)(((uint64_t)r + 1 + k) % n) * bytes,
		    bytes, NULL);
	}
	return run(ring, &x, err);
}

static int
small_allreduce(struct sr_ring *ring, const uint8_t *send, uint8_t *recv,
    size_t count, enum sr_dtype dtype, enum sr_op op, struct sr_error *err)
{
	size_t bytes = count * sr_dtype_size(dtype);
	uint8_t *all = sr_ring_scratch(ring, bytes * ring->world);

	struct sr_frame frame = frame_of(ring, SR_FRAME_ALLREDUCE, 0);

	if (all == NULL)
		return nomem(ring, err);
	frame.dtype = (uint8_t)dtype;
	frame.op = (uint8_t)op;
	if (gather(ring, frame, send, bytes, all, err) != 0)
		return -1;
	/* Fold in rank order 0, 1, ..., n-1 on every rank. */
	memcpy(recv, all, bytes);
	for (uint32_t i = 1; i < ring->world; i++)
		sr_reduce(recv, recv, all + (size_t)i * bytes, count, dtype, op);
	return 0;
}

/*
 * The plan of a small allreduce of two frames a rank each way (x), its
 * frame (kind, dtype and op; step 0) and `scratch` bytes of scratch at
 * *mine.  0, or -1 after nomem.
 */
static int
two_frames(struct sr_ring *ring, size_t scratch, enum sr_dtype dtype,
    enum sr_op op, struct sr_transfer *x, struct sr_frame *frame,
    uint8_t **mine, struct sr_error *err)
{
	*mine = sr_ring_scratch(ring, scratch);
	if (*mine == NULL || sr_ring_plan(ring, 2, x) != 0)
		return nomem(ring, err);
	x->dtype = dtype;
	x->op = op;
	*frame = frame_of(ring, SR_FRAME_ALLREDUCE, 0);
	frame->dtype = (uint8_t)dtype;
	frame->op = (uint8_t)op;
	return 0;
}

/*
 * World 4, small: recursive doubling, whose partners at world 4 are ring
 * neighbours.  Ranks 3-0 and 1-2 exchange their inputs and fold them,
 * then 0-1 and 2-3 exchange those pairs' results: two hops like the
 * both-way allgather, but one frame a hop instead of three frames in
 * all, which on shared cores is most of a small message's cost.  The
 * pairs are those of world 4's blocks (blocks_allreduce), so the two
 * paths fold alike.
 *
 *   hop   rank 0         rank 1         rank 2         rank 3
 *   1     x3 <-> x0 with rank 3 (prev)  x1 <-> x2 with rank 2 (next)
 *         holds x3+x0    holds x1+x2    holds x1+x2    holds x3+x0
 *   2     with rank 1    with rank 0    with rank 3    with rank 2
 *         (next)         (prev)         (next)         (prev)
 *         all four       all four       all four       all four
 *
 * Every rank folds in the order op(op(x3, x0), op(x1, x2)) (swap puts
 * rank 3's and rank 1's input first on their partners), so results stay
 * bitwise identical for max and min too.
 */
static int
pairs_allreduce(struct sr_ring *ring, const uint8_t *send, uint8_t *recv,
    size_t count, enum sr_dtype dtype, enum sr_op op, struct sr_error *err)
{
	size_t bytes = count * sr_dtype_size(dtype);
	uint8_t *mine, *theirs;
	struct sr_frame frame;
	bool even = ring->rank % 2 == 0;
	uint32_t first = even ? ring->prev : ring->next;
	uint32_t second = even ? ring->next : ring->prev;
	struct sr_transfer x;

	if (two_frames(ring, 2 * bytes, dtype, op, &x, &frame, &mine, err) != 0)
		return -1;
	theirs = mine + bytes;
	/* The partner's input, folded rank 3's or rank 1's first. */
	x.sends[0] = (struct sr_send){ .link = first, .data = send,
		.len = bytes, .frame = frame, .gate = -1 };
	x.recvs[0] = (struct sr_recv){ .link = first, .data = mine,
		.len = bytes, .frame = frame, .reduce = true, .local = send,
		.swap = even };
	/* The pair's result goes on as it is folded. */
	frame.step = 1;
	x.sends[1] = (struct sr_send){ .link = second, .data = mine,
		.len = bytes, .frame = frame, .gate = 0 };
	x.recvs[1] = (struct sr_recv){ .link = second, .data = theirs,
		.len = bytes, .frame = frame };
	x.nsends = x.nrecvs = 2;
	if (run(ring, &x, err) != 0)
		return -1;
	if (ring->rank == 0 || ring->rank == 3)
		sr_reduce(recv, mine, theirs, count, dtype, op);
	else
		sr_reduce(recv, theirs, mine, count, dtype, op);
	return 0;
}

/*
 * World 4 on shared cores, by blocks: ranks 3 and 0 on one core and 1
 * and 2 on the other (place.c binds them so at an allreduce), each pair
 * a block whose leader (rank 0, rank 1) takes its member's input over
 * their ring link and folds it in; the two leaders exchange those folds
 * and fold them, and each sends the result back to its member as it is
 * folded:
 *
 *   step    rank 3          rank 0            rank 1            rank 2
 *   0x300   x3 -> rank 0    x3+x0 <- x3       x1+x2 <- x2       x2 -> rank 1
 *   0x301                   A = x3+x0 <-> B = x1+x2
 *   0x302   result <-       A+B -> rank 3     A+B -> rank 2     -> result
 *
 * Every rank gets op(op(x3, x0), op(x1, x2)), the fold of world 4's
 * recursive doubling (pairs_allreduce): below 64 KiB, where ranks that do
 * not share cores take that path, the same values either way, and for max
 * and min the same bits (test_ring).  On a core that runs one rank at a
 * time a frame costs a switch between ranks: here a member runs twice a
 * call and only the leaders' exchange crosses cores, where recursive
 * doubling runs all four ranks at both of its hops and the ring at its six
 * steps.  Alternating launches of `launch -n 4 bench allreduce -d f64`
 * against the code before it (recursive doubling under 64 KiB, then the
 * ring; the gather's barrier), 7 pairs, the median of the pairs' ratios of
 * the timed call (of the whole process): bound as place.c binds (0 1 1 0),
 * 8 B 1.73x (1.42x), 128 B 1.58x, 2 KiB 1.42x, 8 KiB 1.59x, 32 KiB 1.66x,
 * 64 KiB 2.53x (1.92x), 128 KiB 1.24x, 256 KiB 1.13x; left to the kernel
 * (--cpus none), 8 B 1.51x, 64 KiB 2.63x, 256 KiB 1.57x.  Past that (a
 * first version, 5 pairs), bound, 1 MiB 1.21x, 2 MiB 1.20x, 4 MiB 1.05x,
 * 16 MiB 0.87x, 64 MiB 0.92x, and unbound 1 MiB 0.79x: blocks stop at
 * SR_BLOCKS_MAX, where they win bound or not.  The barrier is this with no
 * data (kind SR_FRAME_BARRIER), run where the last allreduce put the rank:
 * in that version's 3 launches each at 8 B, the barrier alone took 1.32x
 * less whole-process time, the allreduce alone 1.05x, the two 1.37x.
 */

/* A member of world 4's blocks (rank 3 or 2): its input to its leader
 * (rank 0 or 1), the result back. */
static int
blocks_member(struct sr_ring *ring, struct sr_transfer *x,
    struct sr_frame frame, const uint8_t *send, uint8_t *recv, size_t bytes,
    struct sr_error *err)
{
	uint32_t leader = ring->rank == 3 ? ring->next : ring->prev;

	x->whole = bytes <= SR_FRAME_MAX;
	frame.step = SR_STEP_BLOCKS;
	x->sends[0] = (struct sr_send){ .link = leader, .data = send,
		.len = bytes, .frame = frame, .gate = -1 };
	frame.step = SR_STEP_BLOCKS + 2;
	x->recvs[0] = (struct sr_recv){ .link = leader, .data = recv,
		.len = bytes, .frame = frame };
	x->nsends = x->nrecvs = 1;
	return run(ring, x, err);
}

/*
 * A leader of world 4's blocks (rank 0 leads rank 3, its prev; rank 1
 * rank 2, its next): the member's input folded into mine, in a transfer
 * of its own (the other leader's fold may come first, and waits its
 * turn: next_step), then the exchange with the other leader, whose fold
 * goes on to the member as it is folded.
 */
static int
blocks_leader(struct sr_ring *ring, struct sr_transfer *x,
    struct sr_frame frame, const uint8_t *send, uint8_t *recv, uint8_t *mine,
    size_t bytes, struct sr_error *err)
{
	bool zero = ring->rank == 0;
	uint32_t member = zero ? ring->prev : ring->next;
	uint32_t other = zero ? ring->next : ring->prev;
	enum sr_dtype dtype = x->dtype;
	enum sr_op op = x->op;

	x->whole = bytes <= SR_FRAME_MAX;
	x->next_step = SR_STEP_BLOCKS + 1;
	frame.step = SR_STEP_BLOCKS;
	x->recvs[0] = (struct sr_recv){ .link = member, .data = mine,
		.len = bytes, .frame = frame, .reduce = true, .local = send,
		.swap = zero };
	x->nrecvs = 1;
	x->nsends = 0;
	if (run(ring, x, err) != 0)
		return -1;
	if (sr_ring_plan(ring, 2, x) != 0)
		return nomem(ring, err);
	x->dtype = dtype;
	x->op = op;
	x->whole = bytes <= SR_FRAME_MAX;
	frame.step = SR_STEP_BLOCKS + 1;
	x->sends[0] = (struct sr_send){ .link = other, .data = mine,
		.len = bytes, .frame = frame, .gate = -1 };
	x->recvs[0] = (struct sr_recv){ .link = other, .data = recv,
		.len = bytes, .frame = frame, .reduce = true, .local = mine,
		.swap = !zero };
	frame.step = SR_STEP_BLOCKS + 2;
	x->sends[1] = (struct sr_send){ .link = member, .data = recv,
		.len = bytes, .frame = frame, .gate = 0 };
	x->nsends = 2;
	x->nrecvs = 1;
	return run(ring, x, err);
}

/* World 4's blocks: each rank its part (see above). */
static int
blocks_allreduce(struct sr_ring *ring, const uint8_t *send, uint8_t *recv,
    size_t count, enum sr_dtype dtype, enum sr_op op, uint8_t kind,
    struct sr_error *err)
{
	size_t bytes = count * sr_dtype_size(dtype);
	uint32_t r = ring->rank;
	uint8_t *mine;
	struct sr_transfer x;
	struct sr_frame frame;

	/* Only a leader needs scratch, for its fold. */
	if (two_frames(ring, r < 2 ? bytes : 0, dtype, op, &x, &frame, &mine,
	    err) != 0)
		return -1;
	frame.kind = kind;
	if (r >= 2)
		return blocks_member(ring, &x, frame, send, recv, bytes, err);
	return blocks_leader(ring, &x, frame, send, recv, mine, bytes, err);
}

/* Whether an allreduce of `bytes` (0: a barrier) goes by blocks. */
static bool
blocks_pay(const struct sr_ring *ring, size_t bytes)
{
	return ring->world == 4 && ring->shared_cores &&
	    bytes <= SR_BLOCKS_MAX;
}

/*
 * World 3, small, on ranks that share cores: rank 0's input to rank 1,
 * which folds it in and exchanges with rank 2; both then hold
 * op(op(x0, x1), x2), the small path's fold in rank order (so the two
 * paths give the same values, and the same bits but for which payload a
 * sum of two NaNs keeps), and rank 2 passes it on to rank 0.  Four
 * frames in three hops, where the both-way allgather sends six frames in
 * one hop: on shared cores every frame costs a context switch, and in
 * alternating launches (3 ranks on 2 cores, medians of 8 pairs) this
 * took 8 B 16.5 against 20.0 us, 512 B 19.1 against 23.3, 8 KiB 23.1
 * against 28.4, 32 KiB 35.9 against 42.9.  Where each rank has a core
 * the three hops are the cost, so it runs only with shared_cores.  Its
 * steps start at 1, the allgather's and the ring's at 0, so ranks that
 * disagree on the path fail out of step at their first frame.
 *
 *   hop   rank 0              rank 1              rank 2
 *   1     x0 -> rank 1 (next) <- x0 (prev)
 *   2                         x0+x1 <-> x2 with rank 2
 *   3     <- result (prev)                        result -> rank 0 (next)
 */
static int
three_allreduce(struct sr_ring *ring, const uint8_t *send, uint8_t *recv,
    size_t count, enum sr_dtype dtype, enum sr_op op, struct sr_error *err)
{
	size_t bytes = count * sr_dtype_size(dtype);
	uint8_t *mine, *theirs;
	struct sr_frame f0, f1, f2;
	struct sr_transfer x;

	if (two_frames(ring, 2 * bytes, dtype, op, &x, &f0, &mine, err) != 0)
		return -1;
	theirs = mine + bytes;
	f0.step = 1;
	f1 = f0;
	f1.step = 2;
	f2 = f0;
	f2.step = 3;
	if (ring->rank == 0) {
		x.sends[0] = (struct sr_send){ .link = ring->next, .data = send,
			.len = bytes, .frame = f0, .gate = -1 };
		x.recvs[0] = (struct sr_recv){ .link = ring->prev, .data = mine,
			.len = bytes, .frame = f2 };
		x.nsends = x.nrecvs = 1;
	} else if (ring->rank == 1) {
		x.recvs[0] = (struct sr_recv){ .link = ring->prev, .data = mine,
			.len = bytes, .frame = f0, .reduce = true, .local = send,
			.swap = true };
		x.sends[0] = (struct sr_send){ .link = ring->next, .data = mine,
			.len = bytes, .frame = f1, .gate = 0 };
		x.recvs[1] = (struct sr_recv){ .link = ring->next,
			.data = theirs, .len = bytes, .frame = f1 };
		x.nsends = 1;
		x.nrecvs = 2;
	} else {
		x.sends[0] = (struct sr_send){ .link = ring->prev, .data = send,
			.len = bytes, .frame = f1, .gate = -1 };
		x.recvs[0] = (struct sr_recv){ .link = ring->prev, .data = mine,
			.len = bytes, .frame = f1, .reduce = true, .local = send,
			.swap = true };
		x.sends[1] = (struct sr_send){ .link = ring->next, .data = mine,
			.len = bytes, .frame = f2, .gate = 0 };
		x.nsends = 2;
		x.nrecvs = 1;
	}
	if (run(ring, &x, err) != 0)
		return -1;
	if (ring->rank == 1)
		sr_reduce(recv, mine, theirs, count, dtype, op);
	else
		memcpy(recv, mine, bytes);
	return 0;
}

/*
 * Whether an allreduce of `bytes` takes a small path: fewer hops than the
 * ring's 2(n-1), but more bytes per rank: the both-way allgather moves
 * (n-1) x bytes, recursive doubling at world 4 2 x bytes, the ring only
 * 2(n-1)/n x bytes.  Measured (the two alternating in one ring), the
 * small path won while it moved under about 128 KiB: world 2 at 64 KiB
 * (22 against 26 us) and level at 128 KiB, world 3 at 32 KiB and level
 * at 48 KiB, world 4 at 32 and 64 KiB, world 8 at 16 KiB; the ring won at
 * world 2, 256 KiB (62 against 127 us) and world 3, 64 KiB.  World 3's
 * path on shared cores (alternating launches, medians of 6 pairs) won at
 * 64 KiB (52 against the ring's 67 us) and lost at 128 KiB (94 against
 * 90) and 256 KiB (266 against 161): it takes what is under 128 KiB (a
 * measured limit; counted as one move).  Below SR_SMALL_ALWAYS the hops
 * decide at any world: the ring's 2(n-1) cost more than the allgather's
 * ceil((n-1)/2) even at hundreds of ranks.
 */
static bool
small_enough(uint32_t world, bool shared_cores, size_t bytes)
{
	uint64_t moves = world == 3 && shared_cores ? 1 : world == 4 ? 2 :
	    world - 1;

	return bytes < SR_SMALL_ALWAYS || bytes < SR_SMALL_MOVES / moves;
}

/* What sr_allreduce does with a call: refuse it, copy (a world of one),
 * or run one of its paths. */
enum allreduce_algo {
	AR_BAD_TYPE,
	AR_TOO_BIG,
	AR_ONE,
	AR_MESH,	/* recursive doubling or halving over the mesh */
	AR_RING,
	AR_HALVING,	/* world 4's recursive halving on the ring's links
			 * (a mesh's too) */
	AR_PAIRS,	/* world 4's recursive doubling */
	AR_BLOCKS,	/* world 4's on shared cores */
	AR_THREE,	/* world 3's on shared cores */
	AR_SMALL	/* the both-way exchange */
};

static enum allreduce_algo
allreduce_algo(const struct sr_ring *ring, size_t count, size_t es,
    enum sr_op op)
{
	if (es == 0 || (unsigned)op >= SR_OP_COUNT)
		return AR_BAD_TYPE;
	if (count > SIZE_MAX / es / ring->world)
		return AR_TOO_BIG;
	if (ring->world == 1)
		return AR_ONE;
	/* Before the small path's limit, which at 8 ranks is under half of
	 * doubling's (group.c). */
	if (ring->mesh &&
	    sr_mesh_allreduce_pays(ring->world, count, count * es))
		return AR_MESH;
	if (blocks_pay(ring, count * es))
		return AR_BLOCKS;
	if (ring->world == 4 && sr_halving4_pays(count, count * es))
		return AR_HALVING;
	if (!small_enough(ring->world, ring->shared_cores, count * es))
		return AR_RING;
	if (ring->world == 4)
		return AR_PAIRS;
	if (ring->world == 3 && ring->shared_cores)
		return AR_THREE;
	return AR_SMALL;
}

/* Where the rank of an allreduce of `bytes` by algorithm a runs
 * (place.c): a call refused or copied does not move it. */
static enum sr_path
allreduce_place(enum allreduce_algo a, uint64_t bytes)
{
	switch (a) {
	case AR_RING:
		return sr_place_bulk(bytes);
	case AR_HALVING:
		return SR_PATH_HALVING;
	case AR_MESH:
		return SR_PATH_DOUBLING;
	case AR_BLOCKS:
		return SR_PATH_BLOCKS;
	case AR_PAIRS:
	case AR_THREE:
	case AR_SMALL:
		return SR_PATH_SMALL;
	default:
		return SR_PATH_KEEP;
	}
}

int
sr_allreduce(struct sr_ring *ring, const void *send, void *recv, size_t count,
    enum sr_dtype dtype, enum sr_op op, struct sr_error *err)
{
	size_t es = sr_dtype_size(dtype);
	enum allreduce_algo a = ring != NULL ?
	    allreduce_algo(ring, count, es, op) : AR_BAD_TYPE;

	if (begin_on(ring, allreduce_place(a, (uint64_t)count * es), err) != 0)
		return -1;
	switch (a) {
	case AR_BAD_TYPE:
		sr_error_set(err, SR_ECONFIG, SR_PHASE_COLLECTIVE,
		    "unknown dtype %d or op %d", (int)dtype, (int)op);
		err->rank = ring->rank;
		return -1;
	case AR_TOO_BIG:
		sr_error_set(err, SR_ECONFIG, SR_PHASE_COLLECTIVE,
		    "%zu elements are more than this machine can address", count);
		err->rank = ring->rank;
		return -1;
	case AR_ONE:
		if (send != recv && count > 0)
			memmove(recv, send, count * es);
		return 0;
	case AR_MESH:
		return sr_mesh_allreduce(ring, send, recv, count, dtype, op,
		    err);
	case AR_RING:
		return ring_allreduce(ring, send, recv, count, dtype, op, err);
	case AR_HALVING:
		return sr_halving4_allreduce(ring, send, recv, count, dtype,
		    op, err);
	case AR_PAIRS:
		return pairs_allreduce(ring, send, recv, count, dtype, op, err);
	case AR_BLOCKS:
		return blocks_allreduce(ring, send, recv, count, dtype, op,
		    SR_FRAME_ALLREDUCE, err);
	case AR_THREE:
		return three_allreduce(ring, send, recv, count, dtype, op, err);
	default:
		return small_allreduce(ring, send, recv, count, dtype, op, err);
	}
}

int
sr_allreduce_sum_f64(struct sr_ring *ring, double *values, size_t count,
    struct sr_error *err)
{
	return sr_allreduce(ring, values, values, count, SR_F64, SR_SUM, err);
}

int
sr_allreduce_sum_i64(struct sr_ring *ring, int64_t *values, size_t count,
    struct sr_error *err)
{
	return sr_allreduce(ring, values, values, count, SR_I64, SR_SUM, err);
}

int
sr_allreduce_max_f64(struct sr_ring *ring, double *values, size_t count,
    struct sr_error *err)
{
	return sr_allreduce(ring, values, values, count, SR_F64, SR_MAX, err);
}

int
sr_allgather(struct sr_ring *ring, const void *send, size_t bytes, void *recv,
    struct sr_error *err)
{
	if (begin(ring, err) != 0)
		return -1;
	if (bytes > SIZE_MAX / ring->world) {
		sr_error_set(err, SR_ECONFIG, SR_PHASE_COLLECTIVE,
		    "%zu bytes from each of %u ranks are more than this machine "
		    "can address", bytes, ring->world);
		err->rank = ring->rank;
		return -1;
	}
	if (ring->world == 1) {
		if (send != recv && bytes > 0)
			memmove(recv, send, bytes);
		return 0;
	}
	return gather(ring, frame_of(ring, SR_FRAME_ALLGATHER, 0), send, bytes,
	    recv, err);
}

int
sr_barrier(struct sr_ring *ring, struct sr_error *err)
{
	if (begin(ring, err) != 0)
		return -1;
	if (ring->world == 1)
		return 0;
	/* On a mesh where the allreduce takes its links, the barrier does
	 * too (an allreduce of nothing, group.c): at 8 ranks on a mesh,
	 * doubling's 3 hops against the ring's 7 steps took the calls
	 * after it (`launch -n 8 bench allreduce --mesh`, a barrier before
	 * each call, 7 pairs alternating) 1.16x faster at 8 B, 1.21x at 128
	 * B, 1.05x at 2 KiB.  At world 4 two hops of the small path's pairs
	 * (9 pairs) took them 0.98x at 8 B and 0.92x at 128 B: the gather
	 * stays there without shared cores (with them, blocks: below).  A
	 * probe's mesh may lack links: its barrier (after a directory
	 * rendezvous) keeps to the ring's. */
	if (ring->mesh && !ring->probe &&
	    sr_mesh_allreduce_pays(ring->world, 0, 0))
		return sr_mesh_barrier(ring, err);
	/* World 4 on shared cores: by blocks, as its allreduce (see
	 * blocks_allreduce for what that saves). */
	if (blocks_pay(ring, 0)) {
		uint8_t none[1];

		return blocks_allreduce(ring, none, none, 0, SR_U32, SR_SUM,
		    SR_FRAME_BARRIER, err);
	}
	/* An allgather of nothing: after n-1 steps every rank has heard
	 * from every other, so all have entered. */
	return gather(ring, frame_of(ring, SR_FRAME_BARRIER, 0), NULL, 0, NULL,
	    err);
}

int
sr_broadcast(struct sr_ring *ring, void *buf, size_t bytes, uint32_t root,
    struct sr_error *err)
{
	struct sr_frame frame;
	struct sr_send s;
	struct sr_recv v;
	struct sr_transfer x = { .sends = &s, .recvs = &v, .dtype = SR_U32 };
	uint32_t n, last;

	if (begin(ring, err) != 0)
		return -1;
	n = ring->world;
	if (root >= n) {
		sr_error_set(err, SR_ECONFIG, SR_PHASE_COLLECTIVE,
		    "broadcast root %u is out of range for a world of %u", root, n);
		err->rank = ring->rank;
		return -1;
	}
	if (n == 1)
		return 0;
	/* A chain from the root around the ring, forwarding as bytes arrive;
	 * the rank before the root ends it. */
	frame = frame_of(ring, SR_FRAME_BROADCAST, root);
	last = (root + n - 1) % n;
	s = (struct sr_send){ .link = ring->next, .data = buf, .len = bytes,
		.frame = frame, .gate = ring->rank == root ? -1 : 0 };
	v = (struct sr_recv){ .link = ring->prev, .data = buf, .len = bytes,
		.frame = frame };
	ring_links(ring, &x);
	x.nsends = ring->rank == last ? 0 : 1;
	x.nrecvs = ring->rank == root ? 0 : 1;
	return run(ring, &x, err);
}

int
sr_ring_shift(struct sr_ring *ring, const void *send, void *recv, size_t bytes,
    struct sr_error *err)
{
	struct sr_frame frame;
	struct sr_send s;
	struct sr_recv v;
	struct sr_transfer x = { .sends = &s, .recvs = &v, .nsends = 1,
		.nrecvs = 1, .dtype = SR_U32 };

	if (begin(ring, err) != 0)
		return -1;
	if (ring->world == 1) {
		if (recv != NULL && recv != send && bytes > 0)
			memmove(recv, send, bytes);
		return 0;
	}
	frame = frame_of(ring, SR_FRAME_SHIFT, 0);
	s = (struct sr_send){ .link = ring->next, .data = send, .len = bytes,
		.frame = frame, .gate = -1 };
	v = (struct sr_recv){ .link = ring->prev, .data = recv, .len = bytes,
		.frame = frame };
	ring_links(ring, &x);
	return run(ring, &x, err);
}

int
sr_link_transfer(struct sr_ring *ring, uint32_t from, void *buf, size_t bytes,
    size_t echo, struct sr_error *err)
{
	struct sr_frame there, back;
	struct sr_send s;
	struct sr_recv v;
	struct sr_transfer x = { .sends = &s, .recvs = &v, .nsends = 1,
		.nrecvs = 1, .dtype = SR_U32 };
	uint32_t to;

	if (begin(ring, err) != 0)
		return -1;
	if (from >= ring->world || echo > bytes) {
		sr_error_set(err, SR_ECONFIG, SR_PHASE_COLLECTIVE,
		    "link test from rank %u (world %u) echoing %zu of %zu bytes",
		    from, ring->world, echo, bytes);
		err->rank = ring->rank;
		return -1;
	}
	to = (from + 1) % ring->world;
	if (ring->world == 1 || (ring->rank != from && ring->rank != to))
		return 0;
	there = frame_of(ring, SR_FRAME_LINK, 0);
	back = frame_of(ring, SR_FRAME_LINK, 1);
	if (ring->rank == from) {
		s = (struct sr_send){ .link = ring->next, .data = buf,
			.len = bytes, .frame = there, .gate = -1 };
		v = (struct sr_recv){ .link = ring->next, .data = buf, .len = echo,
			.frame = back };
	} else {
		v = (struct sr_recv){ .link = ring->prev, .data = buf,
			.len = bytes, .frame = there };
		s = (struct sr_send){ .link = ring->prev, .data = buf, .len = echo,
			.frame = back, .gate = 0 };
	}
	ring_links(ring, &x);
	return run(ring, &x, err);
}

/* The neighbour on `link` sent a goodbye this rank cannot agree with. */
static int
bad_goodbye(struct sr_ring *ring, uint32_t link,
    const struct sr_goodbye *bye, struct sr_error *err)
{
	const struct sr_link *p = &ring->links[link];

	sr_error_set(err, SR_EOUT_OF_STEP, SR_PHASE_CLOSE, "out of step at the "
	    "close: rank %u (%s) said goodbye as rank %u of %u after %llu "
	    "collective(s); this rank is rank %u of %u after %llu", p->rank,
	    p->address, bye->rank, bye->world,
	    (unsigned long long)bye->collectives, ring->rank, ring->world,
	    (unsigned long long)ring->seq);
	err->peer = p->rank;
	snprintf(err->peer_address, sizeof(err->peer_address), "%s",
	    p->address);
	err->rank = ring->rank;
	sr_ring_fail(ring, err);
	return -1;
}

/*
 * The goodbyes: one on every link (a ring's two, a mesh's every one), one
 * from each, each saying how many collectives its sender ran.  The engine
 * checks each header against this rank's own goodbye before anything
 * else: a count that differs, or a frame of a collective this rank did
 * not run (say, a broadcast whose root it disagreed on) still unread, is
 * out of step.
 */
static int
exchange_goodbyes(struct sr_ring *ring, struct sr_error *err)
{
	/* A plain ring at world 2 has two links to one rank: a goodbye on
	 * each. */
	const uint32_t two[2] = { ring->next, ring->prev };
	const uint32_t *link = ring->mesh ? ring->all_links : two;
	int n = ring->mesh ? ring->nall_links : 2;
	uint8_t mine[SR_GOODBYE_LEN], *theirs;
	struct sr_goodbye bye = { .collectives = ring->seq,
		.rank = ring->rank, .world = ring->world };
	struct sr_frame frame = { .kind = SR_FRAME_BYE, .seq = ring->seq,
		.length = SR_GOODBYE_LEN };
	struct sr_transfer x;

	if ((theirs = sr_ring_scratch(ring, (size_t)n * SR_GOODBYE_LEN)) ==
	    NULL || sr_ring_plan(ring, n, &x) != 0)
		return nomem(ring, err);
	x.links = ring->all_links;
	x.nlinks = ring->nall_links;
	sr_goodbye_encode(&bye, mine);
	x.dtype = SR_U32;
	for (int s = 0; s < n; s++) {
		x.sends[s] = (struct sr_send){ .link = link[s],
			.data = mine, .len = SR_GOODBYE_LEN, .frame = frame,
			.gate = -1 };
		x.recvs[s] = (struct sr_recv){ .link = link[s],
			.data = theirs + (size_t)s * SR_GOODBYE_LEN,
			.len = SR_GOODBYE_LEN, .frame = frame };
	}
	x.nsends = x.nrecvs = n;
	if (run(ring, &x, err) != 0)
		return -1;
	for (int s = 0; s < n; s++) {
		sr_goodbye_decode(theirs + (size_t)s * SR_GOODBYE_LEN, &bye);
		if (bye.collectives != ring->seq || bye.world != ring->world ||
		    bye.rank != ring->links[link[s]].rank)
			return bad_goodbye(ring, link[s], &bye, err);
		/* From now on its EOF is a clean end, on every stream. */
		for (uint32_t k = 0; k < ring->streams; k++)
			sr_link_goodbye(sr_ring_stream(ring, link[s], k));
	}
	return 0;
}

/*
 * After the barrier every rank has agreed: the write sides are shut and
 * every link read to its EOF, so that no close here resets a peer still
 * finishing (a reset would discard what it has not read yet).  Only
 * heartbeats may come meanwhile; an abort (a failure after the
 * agreement) is reported, anything else is out of step.  A peer that
 * stays silent for the timeout is left: the agreement stands.
 */
static int
drain_to_eof(struct sr_ring *ring, struct sr_error *err)
{
	struct sr_transfer x;

	for (int i = 0; i < ring->nall_links; i++)
		for (uint32_t k = 0; k < ring->streams; k++)
			sr_link_shutdown(sr_ring_stream(ring,
			    ring->all_links[i], k));
	if (sr_ring_plan(ring, 1, &x) != 0)
		return 0;
	x.links = ring->all_links;
	x.nlinks = ring->nall_links;
	x.drain = true;
	x.dtype = SR_U32;
	if (sr_engine_run(ring->engine, &x, err) == 0 ||
	    err->code == SR_ETIMEOUT) {
		sr_error_clear(err);
		return 0;
	}
	err->rank = ring->rank;
	err->phase = SR_PHASE_CLOSE;
	sr_ring_fail(ring, err);
	return -1;
}

int
sr_ring_finish(struct sr_ring *ring, struct sr_error *err)
{
	struct sr_frame frame;

	sr_error_clear(err);
	if (ring == NULL) {
		sr_error_set(err, SR_ECONFIG, SR_PHASE_CLOSE,
		    "no ring (sr_ring_connect failed or was not called)");
		return -1;
	}
	if (ring->failed)
		return sr_ring_fail_again(ring, err);
	if (ring->finished || ring->world == 1) {
		ring->finished = true;
		return 0;
	}
	if (exchange_goodbyes(ring, err) != 0)
		return -1;
	/* The closing barrier, steps 1, 2, ...: once it is through, every
	 * rank has checked both its links. */
	frame = (struct sr_frame){ .kind = SR_FRAME_BYE, .step = 1,
		.seq = ring->seq };
	if (gather(ring, frame, NULL, 0, NULL, err) != 0)
		return -1;
	ring->finished = true;
	return drain_to_eof(ring, err);
}
