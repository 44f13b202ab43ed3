/*
 * test_place.c - where a rank of ranks that share a host's CPUs runs
 * (place.c): the measured table, and the binding as the kernel reports
 * it, on a ring of no links built by hand.
 */
#include <sched.h>
#include <stdbool.h>
#include <stdint.h>
#include <string.h>

#include "check.h"
#include "place.h"
#include "ring.h"

static const char *const addresses[4] = { "127.0.0.1:1", "127.0.0.1:2",
	"127.0.0.1:3", "127.0.0.1:4" };

static void
table_is_the_measured_one(void)
{
	/* World 4's pairs second partners on one core (0-1, 2-3), its
	 * blocks each block (3-0, 1-2). */
	static const int small4[4] = { 0, 0, 1, 1 }, ring4[4] = { 0, 1, 0, 1 };
	static const int blocks4[4] = { 0, 1, 1, 0 }, ring3[3] = { 0, 1, 1 };
	/* World 4's halving: its first partners (3-0, 1-2) across, its
	 * second (0-1, 3-2) on one core. */
	static const int halving4[4] = { 0, 0, 1, 1 };
	static const enum sr_path paths[] = { SR_PATH_RING, SR_PATH_LARGE,
		SR_PATH_SMALL, SR_PATH_BLOCKS, SR_PATH_DOUBLING,
		SR_PATH_HALVING };

	for (uint32_t r = 0; r < 4; r++) {
		CHECK(sr_place_index(4, 2, r, SR_PATH_HALVING) == halving4[r]);
		CHECK(sr_place_index(4, 2, r, SR_PATH_SMALL) == small4[r]);
		CHECK(sr_place_index(4, 2, r, SR_PATH_BLOCKS) == blocks4[r]);
		CHECK(sr_place_index(4, 2, r, SR_PATH_RING) == ring4[r]);
		/* From 8 MiB the kernel's, as world 3's. */
		CHECK(sr_place_index(4, 2, r, SR_PATH_LARGE) == -1);
	}
	for (uint32_t r = 0; r < 3; r++) {
		CHECK(sr_place_index(3, 2, r, SR_PATH_RING) == ring3[r]);
		CHECK(sr_place_index(3, 2, r, SR_PATH_SMALL) == -1);
		CHECK(sr_place_index(3, 2, r, SR_PATH_BLOCKS) == -1);
		CHECK(sr_place_index(3, 2, r, SR_PATH_LARGE) == -1);
		CHECK(sr_place_index(3, 2, r, SR_PATH_HALVING) == -1);
	}
	/* Two ranks, each on its own CPU, whatever the path. */
	for (uint32_t r = 0; r < 2; r++)
		for (size_t p = 0; p < sizeof(paths) / sizeof(*paths); p++)
			CHECK(sr_place_index(2, 2, r, paths[p]) == (int)r);
	/* World 8's doubling over a mesh: by rank bit 2. */
	for (uint32_t r = 0; r < 8; r++) {
		CHECK(sr_place_index(8, 2, r, SR_PATH_DOUBLING) == (r >= 4));
		CHECK(sr_place_index(8, 2, r, SR_PATH_SMALL) == -1);
		CHECK(sr_place_index(8, 2, r, SR_PATH_BLOCKS) == -1);
		CHECK(sr_place_index(8, 2, r, SR_PATH_RING) == -1);
		CHECK(sr_place_index(8, 2, r, SR_PATH_LARGE) == -1);
		CHECK(sr_place_index(8, 2, r, SR_PATH_HALVING) == -1);
	}
	/* Nothing else was measured: left to the kernel. */
	for (uint32_t w = 2; w <= 16; w++)
		for (uint32_t c = 1; c <= 8; c++)
			for (size_t p = 0; p < sizeof(paths) / sizeof(*paths);
			    p++)
				for (uint32_t r = 0; r < w; r++)
					CHECK(sr_place_index(w, c, r,
					    paths[p]) == -1 ||
					    (c == 2 && (w <= 4 ||
					    (w == 8 &&
					    paths[p] == SR_PATH_DOUBLING))));
	for (size_t p = 0; p < sizeof(paths) / sizeof(*paths); p++) {
		CHECK(sr_place_index(2, 2, 2, paths[p]) == -1);
		CHECK(sr_place_index(4, 2, 4, paths[p]) == -1);
		CHECK(sr_place_index(8, 2, 8, paths[p]) == -1);
	}
	/* Worlds 3 and 4 have no doubling over a mesh; KEEP binds no one. */
	for (uint32_t w = 3; w <= 4; w++)
		for (uint32_t r = 0; r < w; r++)
			CHECK(sr_place_index(w, 2, r, SR_PATH_DOUBLING) == -1);
	for (uint32_t w = 2; w <= 16; w++)
		for (uint32_t r = 0; r < w; r++)
			CHECK(sr_place_index(w, 2, r, SR_PATH_KEEP) == -1);
	CHECK(sr_place_bulk((8u << 20) - 1) == SR_PATH_RING);
	CHECK(sr_place_bulk(8u << 20) == SR_PATH_LARGE);
}

/* The first two CPUs this process may run on (these tests need two),
 * and the whole set, to put back. */
static void
two_cpus(int cpus[2], cpu_set_t *all)
{
	int n = 0;

	cpus[0] = cpus[1] = 0;
	CHECK(sched_getaffinity(0, sizeof(*all), all) == 0);
	for (int c = 0; c < CPU_SETSIZE && n < 2; c++)
		if (CPU_ISSET(c, all))
			cpus[n++] = c;
	CHECKF(n == 2, "this process may run on %d CPU(s); the tests need 2",
	    n);
}

static struct sr_ring *
ring_of(uint32_t rank, uint32_t world, const int *cpus, uint32_t ncpus)
{
	struct sr_ring_options options;

	sr_ring_options_init(&options);
	options.cpus = cpus;
	options.ncpus = ncpus;
	return sr_ring_new(rank, world, addresses, 7, &options, 2);
}

/* Rank of world on two CPUs this process may run on (into cpus), and
 * the process's CPUs into all; NULL after a failed check. */
static struct sr_ring *
ring_on_two(uint32_t rank, uint32_t world, int cpus[2], cpu_set_t *all)
{
	struct sr_ring *ring;

	two_cpus(cpus, all);
	ring = ring_of(rank, world, cpus, 2);
	CHECK(ring != NULL);
	return ring;
}

/* Whether the thread runs on all the CPUs it had. */
static bool
on_all(const cpu_set_t *all)
{
	cpu_set_t now;

	return sched_getaffinity(0, sizeof(now), &now) == 0 &&
	    CPU_EQUAL(&now, all);
}

static void
rank_2_of_4_moves_by_path_and_keeps_for_small_transfers(void)
{
	int cpus[2];
	cpu_set_t all;
	struct sr_ring *ring = ring_on_two(2, 4, cpus, &all);

	if (ring == NULL)
		return;
	CHECK(sr_ring_bound_cpu(ring) == -1);	/* not before a collective */
	sr_place(ring, SR_PATH_KEEP);
	CHECK(sr_ring_bound_cpu(ring) == -1);
	sr_place(ring, SR_PATH_SMALL);
	CHECK(sr_ring_bound_cpu(ring) == cpus[1]);
	CHECK(sched_getcpu() == cpus[1]);
	sr_place(ring, SR_PATH_KEEP);
	CHECK(sr_ring_bound_cpu(ring) == cpus[1]);
	sr_place(ring, SR_PATH_RING);
	CHECK(sr_ring_bound_cpu(ring) == cpus[0]);
	/* From 8 MiB left to the kernel: every CPU the thread had. */
	sr_place(ring, SR_PATH_LARGE);
	CHECK(sr_ring_bound_cpu(ring) == -1);
	CHECK(on_all(&all));
	sr_place(ring, SR_PATH_RING);
	CHECK(sr_ring_bound_cpu(ring) == cpus[0]);
	/* Closed, the ring gives the thread its CPUs back. */
	sr_ring_close(ring);
	CHECK(on_all(&all));
}

static void
world_3_large_goes_back_to_every_cpu(void)
{
	int cpus[2];
	cpu_set_t all;
	struct sr_ring *ring = ring_on_two(1, 3, cpus, &all);

	if (ring == NULL)
		return;
	/* The small path first: nothing to move, then the ring's. */
	sr_place(ring, SR_PATH_SMALL);
	CHECK(sr_ring_bound_cpu(ring) == -1);
	CHECK(on_all(&all));
	sr_place(ring, SR_PATH_RING);
	CHECK(sr_ring_bound_cpu(ring) == cpus[1]);
	/* Left to the kernel: the CPUs the thread had, not only the two. */
	sr_place(ring, SR_PATH_LARGE);
	CHECK(sr_ring_bound_cpu(ring) == -1);
	CHECK(on_all(&all));
	sr_place(ring, SR_PATH_RING);
	sr_ring_close(ring);	/* bound, then closed: its CPUs back */
	CHECK(on_all(&all));
}

/* Two ranks on two CPUs: each on its own from its first allreduce, on
 * every path, and its CPUs back when the ring closes. */
static void
rank_1_of_2_runs_on_the_second_cpu(void)
{
	int cpus[2];
	cpu_set_t all;
	struct sr_ring *ring = ring_on_two(1, 2, cpus, &all);

	if (ring == NULL)
		return;
	sr_place(ring, SR_PATH_KEEP);
	CHECK(sr_ring_bound_cpu(ring) == -1);
	CHECK(on_all(&all));
	sr_place(ring, SR_PATH_SMALL);
	CHECK(sr_ring_bound_cpu(ring) == cpus[1]);
	CHECK(sched_getcpu() == cpus[1]);
	sr_place(ring, SR_PATH_RING);
	sr_place(ring, SR_PATH_LARGE);
	sr_place(ring, SR_PATH_KEEP);
	CHECK(sr_ring_bound_cpu(ring) == cpus[1]);
	sr_ring_close(ring);
	CHECK(on_all(&all));
}

/* A world of fewer ranks than its CPUs, or no CPUs given: never bound. */
static void
a_world_that_fits_is_not_bound(void)
{
	int cpus[2];
	cpu_set_t all;
	struct sr_ring *fits, *none;

	two_cpus(cpus, &all);
	fits = ring_of(0, 1, cpus, 2);
	none = ring_of(2, 4, NULL, 0);
	CHECK(fits != NULL && none != NULL);
	if (fits != NULL && none != NULL) {
		CHECK(fits->ncpus == 0);	/* the CPUs not kept */
		sr_place(fits, SR_PATH_RING);
		sr_place(none, SR_PATH_SMALL);
		CHECK(sr_ring_bound_cpu(fits) == -1);
		CHECK(sr_ring_bound_cpu(none) == -1);
	}
	sr_ring_close(fits);
	sr_ring_close(none);
	CHECK(sched_setaffinity(0, sizeof(all), &all) == 0);
}

/* A CPU the kernel refuses after one it took: the thread gets its CPUs
 * back and is bound no more. */
static void
a_refused_cpu_after_a_binding_puts_the_cpus_back(void)
{
	int cpus[2];
	cpu_set_t all;
	struct sr_ring *ring = ring_on_two(2, 4, cpus, &all);

	if (ring == NULL)
		return;
	sr_place(ring, SR_PATH_SMALL);
	CHECK(sr_ring_bound_cpu(ring) == cpus[1]);
	ring->cpus[0] = CPU_SETSIZE - 1;	/* as a cpuset shrunk under it */
	CHECK(!CPU_ISSET(CPU_SETSIZE - 1, &all));
	sr_place(ring, SR_PATH_RING);
	CHECK(sr_ring_bound_cpu(ring) == -1);
	CHECK(on_all(&all));
	sr_place(ring, SR_PATH_SMALL);	/* and binds no more */
	CHECK(sr_ring_bound_cpu(ring) == -1);
	sr_ring_close(ring);
}

/* A CPU the kernel refuses ends the binding; it is no error. */
static void
a_refused_cpu_ends_the_binding(void)
{
	int cpus[2] = { CPU_SETSIZE - 1, CPU_SETSIZE - 2 };
	cpu_set_t all;
	struct sr_ring *ring;

	CHECK(sched_getaffinity(0, sizeof(all), &all) == 0);
	/* Two CPUs this process may not run on (the kernel's last ones). */
	CHECK(!CPU_ISSET(CPU_SETSIZE - 1, &all) &&
	    !CPU_ISSET(CPU_SETSIZE - 2, &all));
	ring = ring_of(0, 4, cpus, 2);
	CHECK(ring != NULL);
	if (ring == NULL)
		return;
	sr_place(ring, SR_PATH_SMALL);
	CHECK(sr_ring_bound_cpu(ring) == -1);
	sr_place(ring, SR_PATH_RING);
	CHECK(sr_ring_bound_cpu(ring) == -1);
	CHECK(on_all(&all));
	sr_ring_close(ring);
}

int
main(void)
{
	TEST_RUN(table_is_the_measured_one);
	TEST_RUN(rank_2_of_4_moves_by_path_and_keeps_for_small_transfers);
	TEST_RUN(world_3_large_goes_back_to_every_cpu);
	TEST_RUN(rank_1_of_2_runs_on_the_second_cpu);
	TEST_RUN(a_world_that_fits_is_not_bound);
	TEST_RUN(a_refused_cpu_ends_the_binding);
	TEST_RUN(a_refused_cpu_after_a_binding_puts_the_cpus_back);
	return TEST_DONE();
}
