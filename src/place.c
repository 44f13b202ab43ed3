/*
 * place.c - where a rank runs when the world's ranks share one host's
 * few cores (sr_ring_options.cpus): bound to one of those CPUs, chosen by
 * the path its collective takes, or left to the kernel.
 *
 * With more ranks than cores the kernel moves spinning ranks about, and
 * which ranks share a core decides what a hop costs: two ranks on one
 * core hand a frame over with one context switch, two on different cores
 * need both to be running at once.  With as many ranks as cores (two on
 * two) the kernel now and then leaves both on one core for a whole
 * launch, where each hop waits for the other rank's time slice.  The
 * ring wants every link across cores (both ends of each link busy
 * together); world 4's small path (recursive doubling) wants its second
 * partners on one core, so does its halving (its first, which move half
 * the buffer, across), world 8's doubling and halving over the mesh
 * their first two, and the blocks of worlds 4 and 8 (shared cores) each
 * block on one core.  Measured on 2
 * cores (docs/performance.md, "Ranks that share cores", "World 8 on a
 * mesh", "World 2's slow launches" and "World 4's mid sizes by
 * halving"), each rank's core set by hand or
 * by this table against left to the kernel:
 *
 *   path                        CPU of ranks 0..  against the kernel's
 *   world 2, every path         0 1               medians 1.00-1.05x from
 *                                                 8 B to 256 MiB; the
 *                                                 kernel left both on one
 *                                                 CPU, at 2-3x the time,
 *                                                 in 13 of 460 launches,
 *                                                 bound in none
 *   world 4, small (up to 32 KiB)   0 0 1 1   by symmetry: 0 1 1 0
 *     (recursive doubling, without            measured 1.15-1.56x when
 *     shared cores)                           its first partners were
 *                                             0-1 and 2-3, not since
 *   world 4, by blocks (shared      0 1 1 0   1.16-1.54x from 8 B to
 *     cores, 8 B-256 KiB)                     64 KiB, 256 KiB level
 *   world 4, ring (128 KiB-8 MiB)   0 1 0 1   1.19-1.26x to 2 MiB
 *   world 4, from 8 MiB             the kernel's (0 1 0 1 in two sets
 *                                             of 8 and 10 rounds: 8 MiB
 *                                             0.86-1.06x, 32 MiB
 *                                             0.97-1.04x, 128 MiB
 *                                             0.78-0.82x, 256 MiB
 *                                             0.80-0.97x; level outside
 *                                             the machine's slow spells,
 *                                             slower in them)
 *   world 4, halving (256 KiB-4     0 0 1 1   0.99-1.09x (1.07-1.09x
 *     MiB; group.c)                           from 512 KiB to 2 MiB);
 *                                             against the ring's 0 1 0
 *                                             1 1.05-1.32x
 *   world 3, small                  the kernel's (0 1 1: 8 B level)
 *   world 3, ring (128 KiB-2 MiB)   0 1 1     1.05-1.28x
 *   world 3, from 8 MiB             the kernel's (0 1 1: 32 MiB 0.89x)
 *   world 8, doubling (8 B-32 KiB)  0 0 0 0 1 1 1 1   1.05-1.36x
 *   world 8, halving (128-256 KiB)  0 0 0 0 1 1 1 1   1.03-1.09x
 *   world 8, by blocks (shared      0 0 0 0 1 1 1 1   the kernel's:
 *     cores, 8 B-256 KiB; group.c)                    level; bound:
 *                                                     1.27-1.77x the
 *                                                     paths above
 *   world 8, ring                   the kernel's (nothing better seen)
 *
 * Nothing else is bound (world 4's small path is the one row inferred,
 * from the blocks' measured placement, not measured itself), and only an
 * allreduce moves a rank: every other collective leaves it where it is.
 */
#include <sched.h>
#include <stdlib.h>
#include <string.h>

#include "place.h"
#include "ring.h"

int
sr_place_index(uint32_t world, uint32_t ncpus, uint32_t rank,
    enum sr_path path)
{
	static const int four_small[4] = { 0, 0, 1, 1 };
	static const int four_halving[4] = { 0, 0, 1, 1 };
	static const int four_blocks[4] = { 0, 1, 1, 0 };
	static const int four_ring[4] = { 0, 1, 0, 1 };
	static const int three_ring[3] = { 0, 1, 1 };

	if (ncpus != 2 || rank >= world || path == SR_PATH_KEEP)
		return -1;
	if (world == 2)
		return (int)rank;	/* each its own, as mpirun binds two */
	switch (path) {
	case SR_PATH_SMALL:
		return world == 4 ? four_small[rank] : -1;
	case SR_PATH_BLOCKS:
		return world == 4 ? four_blocks[rank] : -1;
	case SR_PATH_HALVING:
		/* Partners 0-3 and 1-2 (half the buffer) across, then 0-1
		 * and 3-2 (a quarter) on one core. */
		return world == 4 ? four_halving[rank] : -1;
	case SR_PATH_RING:
		return world == 4 ? four_ring[rank] :
		    world == 3 ? three_ring[rank] : -1;
	case SR_PATH_LARGE:
		/* World 3's 0 1 1 leaves one core twice the work of the
		 * other (32 MiB took 0.89x the kernel's time); world 4's 0 1
		 * 0 1 sends every byte across the CPUs, which in the
		 * machine's slow spells cost up to 1.7x a launch. */
		return -1;
	case SR_PATH_DOUBLING:
		/* Partners rank^1, rank^2, then rank^4: the first two hops
		 * on one core, the last across. */
		return world == 8 ? (int)(rank >> 2 & 1) : -1;
	default:
		return -1;
	}
}

int
sr_place_init(struct sr_ring *ring, const int *cpus, uint32_t ncpus)
{
	ring->placed = SR_PLACED_NEVER;
	ring->ncpus = 0;
	/* A world of fewer ranks than CPUs is left to the kernel. */
	if (cpus == NULL || ncpus == 0 || ring->world < ncpus ||
	    ncpus > CPU_SETSIZE)
		return 0;
	for (uint32_t i = 0; i < ncpus; i++)
		if (cpus[i] < 0 || cpus[i] >= CPU_SETSIZE)
			return 0;
	if ((ring->cpus = malloc(ncpus * sizeof(*cpus))) == NULL)
		return -1;
	memcpy(ring->cpus, cpus, ncpus * sizeof(*cpus));
	ring->ncpus = ncpus;
	return 0;
}

/* Puts the thread's own CPUs back, as before the first binding. */
static void
unbind(struct sr_ring *ring)
{
	if (ring->placed != SR_PLACED_NEVER)
		sched_setaffinity(0, sizeof(ring->own), &ring->own);
	ring->placed = SR_PLACED_NEVER;
}

void
sr_place_fini(struct sr_ring *ring)
{
	unbind(ring);
	free(ring->cpus);
	ring->cpus = NULL;
	ring->ncpus = 0;
}

/*
 * Left to the kernel (index -1), the thread gets back the CPUs it had.
 * A binding the kernel refuses (a CPU outside the process's cpuset) is
 * a lost speed-up, not a failure: the rank puts its CPUs back and binds
 * no more, and sr_ring_bound_cpu, which reads the kernel's own mask,
 * says -1.
 */
void
sr_place(struct sr_ring *ring, enum sr_path path)
{
	cpu_set_t set;
	int want;

	if (ring == NULL || ring->ncpus == 0 || path == SR_PATH_KEEP)
		return;
	want = sr_place_index(ring->world, ring->ncpus, ring->rank, path);
	if (want == ring->placed)
		return;
	if (ring->placed == SR_PLACED_NEVER &&
	    sched_getaffinity(0, sizeof(ring->own), &ring->own) != 0) {
		ring->ncpus = 0;
		return;
	}
	if (want < 0 && ring->placed == SR_PLACED_NEVER) {
		ring->placed = -1;	/* it runs on its own CPUs already */
		return;
	}
	if (want < 0) {
		set = ring->own;
	} else {
		CPU_ZERO(&set);
		CPU_SET(ring->cpus[want], &set);
	}
	if (sched_setaffinity(0, sizeof(set), &set) != 0) {
		unbind(ring);
		ring->ncpus = 0;
		return;
	}
	ring->placed = want;
}

int
sr_ring_bound_cpu(const struct sr_ring *ring)
{
	cpu_set_t set;

	if (ring == NULL || ring->placed < 0 ||
	    sched_getaffinity(0, sizeof(set), &set) != 0 ||
	    CPU_COUNT(&set) != 1)
		return -1;
	for (int c = 0; c < CPU_SETSIZE; c++)
		if (CPU_ISSET(c, &set))
			return c;
	return -1;
}
