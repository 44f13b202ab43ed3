/*
 * test_schedule.c - the block split and the ring allreduce schedule, for
 * world sizes 1..16 and awkward counts.  The ring is simulated in memory:
 * every rank its own buffer, every step's sends snapshotted before any
 * receive is applied, as on the wire.  Then the ring allreduce's frame
 * size by block and shared cores.
 */
#include <stdint.h>
#include <string.h>

#include "check.h"
#include "plan.h"
#include "schedule.h"

#define MAX_WORLD 16

static size_t
counts_for(uint32_t world, size_t out[7])
{
	out[0] = 0;
	out[1] = 1;
	out[2] = world - 1;
	out[3] = world;
	out[4] = (size_t)world + 1;
	out[5] = 10007;		/* a prime: uneven for every world > 1 */
	out[6] = (size_t)1 << 20;
	return 7;
}

static void
blocks_cover_count_contiguously(void)
{
	for (uint32_t n = 1; n <= MAX_WORLD; n++) {
		size_t counts[7], nc = counts_for(n, counts);

		for (size_t c = 0; c < nc; c++) {
			size_t count = counts[c], end = 0;

			for (uint32_t b = 0; b < n; b++) {
				size_t off = sr_block_offset(count, n, b);
				size_t len = sr_block_count(count, n, b);

				CHECKF(off == end, "world %u count %zu block %u "
				    "at %zu, previous ended at %zu", n, count, b,
				    off, end);
				end = off + len;
			}
			CHECKF(end == count, "world %u count %zu: blocks end "
			    "at %zu", n, count, end);
		}
	}
}

static void
blocks_are_even_larger_first(void)
{
	for (uint32_t n = 1; n <= MAX_WORLD; n++) {
		size_t counts[7], nc = counts_for(n, counts);

		for (size_t c = 0; c < nc; c++) {
			size_t count = counts[c];
			size_t small = count / n, large = small + 1;

			for (uint32_t b = 0; b < n; b++) {
				size_t len = sr_block_count(count, n, b);

				/* Exactly count % n blocks of the larger size,
				 * all before the smaller ones. */
				CHECKF(len == (b < count % n ? large : small),
				    "world %u count %zu block %u holds %zu",
				    n, count, b, len);
				if (b > 0)
					CHECKF(sr_block_count(count, n, b - 1) -
					    len <= 1, "world %u count %zu "
					    "block %u", n, count, b);
			}
		}
	}
}

static void
schedule_forwards_what_it_received(void)
{
	for (uint32_t n = 1; n <= MAX_WORLD; n++)
		for (uint32_t r = 0; r < n; r++) {
			uint32_t prev = (r + n - 1) % n;

			/* The reduce-scatter starts with the rank's own block,
			 * so block b is folded starting at rank b. */
			CHECK(sr_sched_rs_send(r, n, 0) == r);
			for (uint32_t k = 0; k + 1 < n; k++) {
				/* What the previous rank sends is what this
				 * rank expects. */
				CHECKF(sr_sched_rs_recv(r, n, k) ==
				    sr_sched_rs_send(prev, n, k),
				    "world %u rank %u rs step %u", n, r, k);
				CHECKF(sr_sched_ag_recv(r, n, k) ==
				    sr_sched_ag_send(prev, n, k),
				    "world %u rank %u ag step %u", n, r, k);
				CHECK(sr_sched_rs_send(r, n, k) < n);
				CHECK(sr_sched_ag_send(r, n, k) < n);
				if (k == 0)
					continue;
				CHECKF(sr_sched_rs_send(r, n, k) ==
				    sr_sched_rs_recv(r, n, k - 1),
				    "world %u rank %u rs step %u", n, r, k);
				CHECKF(sr_sched_ag_send(r, n, k) ==
				    sr_sched_ag_recv(r, n, k - 1),
				    "world %u rank %u ag step %u", n, r, k);
			}
			/* The allgather starts with the block the
			 * reduce-scatter left reduced here. */
			CHECKF(sr_sched_ag_send(r, n, 0) == (r + 1) % n,
			    "world %u rank %u", n, r);
			if (n > 1)
				CHECKF(sr_sched_rs_recv(r, n, n - 2) ==
				    (r + 1) % n, "world %u rank %u", n, r);
		}
}

/* ------------------------------------------------------------ simulation */

struct sim {
	uint32_t n;
	size_t count;
	int64_t *buf[MAX_WORLD];
	/* Which ranks' values each rank's copy of each block holds. */
	uint32_t folded[MAX_WORLD][MAX_WORLD];
	int64_t *wire[MAX_WORLD];	/* each rank's send of this step */
	uint32_t wire_block[MAX_WORLD];
	uint32_t wire_folded[MAX_WORLD];
};

static int64_t
initial(uint32_t rank, size_t i)
{
	return (int64_t)rank * 1000 + (int64_t)i;
}

static int64_t
reduced(uint32_t n, size_t i)
{
	/* sum over ranks of rank*1000 + i */
	return (int64_t)n * (n - 1) / 2 * 1000 + (int64_t)n * (int64_t)i;
}

static bool
block_reduced(const struct sim *s, uint32_t r, uint32_t b, size_t *bad)
{
	size_t off = sr_block_offset(s->count, s->n, b);
	size_t len = sr_block_count(s->count, s->n, b);

	for (size_t i = off; i < off + len; i++)
		if (s->buf[r][i] != reduced(s->n, i)) {
			*bad = i;
			return false;
		}
	return true;
}

/* Every rank puts block sched(r) on the wire; snapshot all first. */
static void
send_all(struct sim *s, uint32_t step,
    uint32_t (*sched)(uint32_t, uint32_t, uint32_t))
{
	for (uint32_t r = 0; r < s->n; r++) {
		uint32_t b = sched(r, s->n, step);
		size_t off = sr_block_offset(s->count, s->n, b);
		size_t len = sr_block_count(s->count, s->n, b);

		s->wire_block[r] = b;
		s->wire_folded[r] = s->folded[r][b];
		memcpy(s->wire[r], s->buf[r] + off, len * sizeof(int64_t));
	}
}

static void
reduce_scatter_step(struct sim *s, uint32_t k)
{
	send_all(s, k, sr_sched_rs_send);
	for (uint32_t from = 0; from < s->n; from++) {
		uint32_t to = (from + 1) % s->n, b = s->wire_block[from];
		size_t off = sr_block_offset(s->count, s->n, b);
		size_t len = sr_block_count(s->count, s->n, b);

		CHECKF(sr_sched_rs_recv(to, s->n, k) == b, "world %u step %u: "
		    "rank %u expects block %u, gets %u", s->n, k, to,
		    sr_sched_rs_recv(to, s->n, k), b);
		CHECKF((s->folded[to][b] & s->wire_folded[from]) == 0,
		    "world %u step %u: rank %u folds block %u twice", s->n, k,
		    to, b);
		s->folded[to][b] |= s->wire_folded[from];
		for (size_t i = 0; i < len; i++)
			s->buf[to][off + i] += s->wire[from][i];
	}
}

static void
allgather_step(struct sim *s, uint32_t k)
{
	send_all(s, k, sr_sched_ag_send);
	for (uint32_t from = 0; from < s->n; from++) {
		uint32_t to = (from + 1) % s->n, b = s->wire_block[from];
		size_t off = sr_block_offset(s->count, s->n, b);
		size_t len = sr_block_count(s->count, s->n, b);

		CHECKF(sr_sched_ag_recv(to, s->n, k) == b, "world %u step %u: "
		    "rank %u expects block %u, gets %u", s->n, k, to,
		    sr_sched_ag_recv(to, s->n, k), b);
		s->folded[to][b] = s->wire_folded[from];
		memcpy(s->buf[to] + off, s->wire[from], len * sizeof(int64_t));
	}
}

static void
simulate(uint32_t n, size_t count)
{
	struct sim s = { .n = n, .count = count };
	uint32_t all = (UINT32_C(1) << n) - 1;
	size_t widest = sr_block_count(count, n, 0), bad = 0;

	for (uint32_t r = 0; r < n; r++) {
		s.buf[r] = malloc((count + 1) * sizeof(int64_t));
		s.wire[r] = malloc((widest + 1) * sizeof(int64_t));
		if (s.buf[r] == NULL || s.wire[r] == NULL) {
			CHECK(!"out of memory");
			goto out;
		}
		for (size_t i = 0; i < count; i++)
			s.buf[r][i] = initial(r, i);
		for (uint32_t b = 0; b < n; b++)
			s.folded[r][b] = UINT32_C(1) << r;
	}
	for (uint32_t k = 0; k + 1 < n; k++)
		reduce_scatter_step(&s, k);
	for (uint32_t r = 0; r < n; r++) {
		uint32_t owned = (r + 1) % n;

		CHECKF(s.folded[r][owned] == all, "world %u count %zu: rank %u "
		    "holds block %u folded over 0x%x", n, count, r, owned,
		    s.folded[r][owned]);
		CHECKF(block_reduced(&s, r, owned, &bad), "world %u count %zu: "
		    "after reduce-scatter rank %u element %zu is %lld, not %lld",
		    n, count, r, bad, (long long)s.buf[r][bad],
		    (long long)reduced(n, bad));
		CHECK(sr_sched_ag_send(r, n, 0) == owned);
	}
	for (uint32_t k = 0; k + 1 < n; k++)
		allgather_step(&s, k);
	for (uint32_t r = 0; r < n; r++)
		for (uint32_t b = 0; b < n; b++) {
			CHECKF(s.folded[r][b] == all, "world %u count %zu: rank "
			    "%u block %u folded over 0x%x", n, count, r, b,
			    s.folded[r][b]);
			CHECKF(block_reduced(&s, r, b, &bad), "world %u count "
			    "%zu: rank %u element %zu is %lld, not %lld", n,
			    count, r, bad, (long long)s.buf[r][bad],
			    (long long)reduced(n, bad));
		}
out:
	for (uint32_t r = 0; r < n; r++) {
		free(s.buf[r]);
		free(s.wire[r]);
	}
}

static void
ring_allreduce_simulation_sums_exactly(void)
{
	for (uint32_t n = 1; n <= MAX_WORLD; n++) {
		size_t counts[7], nc = counts_for(n, counts);

		for (size_t c = 0; c < nc; c++)
			simulate(n, counts[c]);
	}
}

/* Half-size frames only for blocks over 1 MiB and under 4 MiB, and only
 * on shared cores; the block is the size over the world. */
static void
frame_halves_only_mid_blocks_on_shared_cores(void)
{
	const uint64_t mib = 1u << 20;

	CHECK(sr_plan_frame(8 * mib, 4, true) == mib / 2);
	CHECK(sr_plan_frame(6 * mib, 4, true) == mib / 2);
	CHECK(sr_plan_frame(6 * mib, 3, true) == mib / 2);
	CHECK(sr_plan_frame(24 * mib, 8, true) == mib / 2);
	/* Blocks just inside the bounds halve; of exactly 1 MiB or 4 MiB,
	 * they keep 1 MiB frames. */
	CHECK(sr_plan_frame(16 * mib - 8, 4, true) == mib / 2);
	CHECK(sr_plan_frame(4 * mib + 8, 4, true) == mib / 2);
	CHECK(sr_plan_frame(4 * mib, 4, true) == mib);
	CHECK(sr_plan_frame(16 * mib, 4, true) == mib);
	CHECK(sr_plan_frame(256 * mib, 4, true) == mib);
	CHECK(sr_plan_frame(8, 4, true) == mib);
	/* Ranks each on a core of their own: 1 MiB at every size. */
	CHECK(sr_plan_frame(8 * mib, 4, false) == mib);
	CHECK(sr_plan_frame(4 * mib, 2, false) == mib);
	CHECK(sr_plan_frame(8 * mib, 0, true) == mib);
}

int
main(void)
{
	TEST_RUN(blocks_cover_count_contiguously);
	TEST_RUN(blocks_are_even_larger_first);
	TEST_RUN(schedule_forwards_what_it_received);
	TEST_RUN(ring_allreduce_simulation_sums_exactly);
	TEST_RUN(frame_halves_only_mid_blocks_on_shared_cores);
	return TEST_DONE();
}
