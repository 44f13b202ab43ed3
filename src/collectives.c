/*
 * collectives.c - allreduce, allgather, broadcast, barrier and the link
 * tests, each written as a transfer (frames to send and to receive) for
 * the engine.
 *
 * Allreduce is a reduce-scatter then an allgather around the ring (see
 * schedule.c for which block moves at each step); below SR_SMALL_BYTES it
 * is one allgather and a local fold in rank order, which saves 2(n-1)
 * round trips of latency.  Either way every element is folded in one
 * fixed order, so results are bitwise identical on every rank.
 */
#include <stdlib.h>
#include <string.h>

#include "internal.h"

#define SR_SMALL_BYTES 4096

/* Fails at once on a broken ring; else starts collective `kind`. */
static int
begin(struct sr_ring *ring, struct sr_error *err)
{
	sr_error_clear(err);
	if (ring == NULL) {
		sr_err_set(err, SR_ECONFIG, SR_PHASE_COLLECTIVE,
		    "no ring (sr_ring_connect failed or was not called)");
		return -1;
	}
	if (ring->failed)
		return sr_ring_fail_again(ring, err);
	ring->seq++;
	return 0;
}

static int
run(struct sr_ring *ring, struct sr_transfer *x, struct sr_error *err)
{
	if (sr_engine_run(ring, x, err) == 0)
		return 0;
	err->rank = ring->rank;
	sr_ring_fail(ring, err);
	return -1;
}

static int
nomem(struct sr_ring *ring, struct sr_error *err)
{
	sr_err_set(err, SR_ENOMEM, SR_PHASE_COLLECTIVE, "out of memory");
	err->rank = ring->rank;
	sr_ring_fail(ring, err);
	return -1;
}

static struct sr_frame
frame_of(const struct sr_ring *ring, uint8_t kind, uint32_t step)
{
	struct sr_frame f = { .kind = kind, .step = step, .seq = ring->seq };

	return f;
}

/*
 * Steps of a ring pass over `world` blocks: at step k this rank sends block
 * send_block(k) and receives block recv_block(k); every send after the
 * first forwards what the previous step received.
 */
static void
ring_pass(struct sr_transfer *x, int first, struct sr_frame frame,
    uint32_t steps, uint32_t step0, const uint8_t *const *send_at,
    const uint64_t *send_len, uint8_t *const *recv_at,
    const uint64_t *recv_len, const uint8_t *const *local_at, bool reduce)
{
	for (uint32_t k = 0; k < steps; k++) {
		struct sr_send *s = &x->sends[first + (int)k];
		struct sr_recv *v = &x->recvs[first + (int)k];

		frame.step = step0 + k;
		*s = (struct sr_send){ .side = SR_NEXT, .data = send_at[k],
			.len = send_len[k], .frame = frame,
			.gate = first + (int)k - 1 };
		*v = (struct sr_recv){ .side = SR_PREV, .data = recv_at[k],
			.len = recv_len[k], .frame = frame, .reduce = reduce,
			.local = local_at != NULL ? local_at[k] : NULL };
	}
}

static int
ring_allreduce(struct sr_ring *ring, const uint8_t *send, uint8_t *recv,
    size_t count, enum sr_dtype dtype, enum sr_op op, struct sr_error *err)
{
	uint32_t n = ring->world, r = ring->rank, steps = n - 1;
	size_t es = sr_dtype_size(dtype);
	struct sr_transfer x = { .dtype = dtype, .op = op };
	struct sr_frame frame = frame_of(ring, SR_FRAME_ALLREDUCE, 0);
	const uint8_t **send_at, **local_at;
	uint8_t **recv_at;
	uint64_t *send_len, *recv_len;
	void *mem;
	int rc;

	frame.dtype = (uint8_t)dtype;
	frame.op = (uint8_t)op;
	mem = calloc(2 * (size_t)steps, sizeof(struct sr_send) +
	    sizeof(struct sr_recv) + 3 * sizeof(void *) + 2 * sizeof(uint64_t));
	if (mem == NULL)
		return nomem(ring, err);
	x.sends = mem;
	x.recvs = (struct sr_recv *)(x.sends + 2 * steps);
	send_at = (const uint8_t **)(x.recvs + 2 * steps);
	local_at = send_at + 2 * steps;
	recv_at = (uint8_t **)(local_at + 2 * steps);
	send_len = (uint64_t *)(recv_at + 2 * steps);
	recv_len = send_len + 2 * steps;
	x.nsends = x.nrecvs = (int)(2 * steps);
	for (uint32_t k = 0; k < steps; k++) {
		uint32_t sb = sr_sched_rs_send(r, n, k);
		uint32_t rb = sr_sched_rs_recv(r, n, k);
		size_t so = sr_block_offset(count, n, sb) * es;
		size_t ro = sr_block_offset(count, n, rb) * es;

		/* Step 0 sends this rank's own input; later steps forward the
		 * block just folded, which lives in recv. */
		send_at[k] = (k == 0 ? send : recv) + so;
		send_len[k] = sr_block_count(count, n, sb) * es;
		recv_at[k] = recv + ro;
		local_at[k] = send + ro;
		recv_len[k] = sr_block_count(count, n, rb) * es;
	}
	ring_pass(&x, 0, frame, steps, 0, send_at, send_len, recv_at, recv_len,
	    local_at, true);
	for (uint32_t k = 0; k < steps; k++) {
		uint32_t sb = sr_sched_ag_send(r, n, k);
		uint32_t rb = sr_sched_ag_recv(r, n, k);

		send_at[steps + k] = recv + sr_block_offset(count, n, sb) * es;
		send_len[steps + k] = sr_block_count(count, n, sb) * es;
		recv_at[steps + k] = recv + sr_block_offset(count, n, rb) * es;
		recv_len[steps + k] = sr_block_count(count, n, rb) * es;
	}
	ring_pass(&x, (int)steps, frame, steps, steps, send_at + steps,
	    send_len + steps, recv_at + steps, recv_len + steps, NULL, false);
	rc = run(ring, &x, err);
	free(mem);
	return rc;
}

/* An allgather whose frames say `frame` (kind, and dtype and op for a
 * small allreduce, so ranks that disagree on them are out of step). */
static int
gather(struct sr_ring *ring, struct sr_frame frame, const uint8_t *send,
    size_t bytes, uint8_t *recv, struct sr_error *err)
{
	uint32_t n = ring->world, r = ring->rank, steps = n - 1;
	struct sr_transfer x = { .dtype = SR_U32, .op = SR_SUM };
	void *mem;
	int rc;

	if (send != recv + (size_t)r * bytes && bytes > 0)
		memmove(recv + (size_t)r * bytes, send, bytes);
	mem = calloc(steps, sizeof(struct sr_send) + sizeof(struct sr_recv));
	if (mem == NULL)
		return nomem(ring, err);
	x.sends = mem;
	x.recvs = (struct sr_recv *)(x.sends + steps);
	x.nsends = x.nrecvs = (int)steps;
	for (uint32_t k = 0; k < steps; k++) {
		frame.step = k;
		x.sends[k] = (struct sr_send){ .side = SR_NEXT, .frame = frame,
			.data = recv + (size_t)sr_sched_rs_send(r, n, k) * bytes,
			.len = bytes, .gate = (int)k - 1 };
		x.recvs[k] = (struct sr_recv){ .side = SR_PREV, .frame = frame,
			.data = recv + (size_t)sr_sched_rs_recv(r, n, k) * bytes,
			.len = bytes };
	}
	rc = run(ring, &x, err);
	free(mem);
	return rc;
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

int
sr_allreduce(struct sr_ring *ring, const void *send, void *recv, size_t count,
    enum sr_dtype dtype, enum sr_op op, struct sr_error *err)
{
	size_t es = sr_dtype_size(dtype);

	if (begin(ring, err) != 0)
		return -1;
	if (es == 0 || (unsigned)op >= SR_OP_COUNT) {
		sr_err_set(err, SR_ECONFIG, SR_PHASE_COLLECTIVE,
		    "unknown dtype %d or op %d", (int)dtype, (int)op);
		err->rank = ring->rank;
		return -1;
	}
	if (count > SIZE_MAX / es / ring->world) {
		sr_err_set(err, SR_ECONFIG, SR_PHASE_COLLECTIVE,
		    "%zu elements are more than this machine can address", count);
		err->rank = ring->rank;
		return -1;
	}
	if (ring->world == 1) {
		if (send != recv && count > 0)
			memmove(recv, send, count * es);
		return 0;
	}
	if (count * es < SR_SMALL_BYTES)
		return small_allreduce(ring, send, recv, count, dtype, op, err);
	return ring_allreduce(ring, send, recv, count, dtype, op, err);
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
		sr_err_set(err, SR_ECONFIG, SR_PHASE_COLLECTIVE,
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
		sr_err_set(err, SR_ECONFIG, SR_PHASE_COLLECTIVE,
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
	s = (struct sr_send){ .side = SR_NEXT, .data = buf, .len = bytes,
		.frame = frame, .gate = ring->rank == root ? -1 : 0 };
	v = (struct sr_recv){ .side = SR_PREV, .data = buf, .len = bytes,
		.frame = frame };
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
	s = (struct sr_send){ .side = SR_NEXT, .data = send, .len = bytes,
		.frame = frame, .gate = -1 };
	v = (struct sr_recv){ .side = SR_PREV, .data = recv, .len = bytes,
		.frame = frame };
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
		sr_err_set(err, SR_ECONFIG, SR_PHASE_COLLECTIVE,
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
		s = (struct sr_send){ .side = SR_NEXT, .data = buf,
			.len = bytes, .frame = there, .gate = -1 };
		v = (struct sr_recv){ .side = SR_NEXT, .data = buf, .len = echo,
			.frame = back };
	} else {
		v = (struct sr_recv){ .side = SR_PREV, .data = buf,
			.len = bytes, .frame = there };
		s = (struct sr_send){ .side = SR_PREV, .data = buf, .len = echo,
			.frame = back, .gate = 0 };
	}
	return run(ring, &x, err);
}
