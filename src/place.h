/*
 * place.h - binding a rank to a CPU by its collective's path (place.c).
 */
#ifndef SR_PLACE_H
#define SR_PLACE_H

#include <stdint.h>

struct sr_ring;

/* The path a collective takes, for where its rank should run. */
enum sr_path {
	SR_PATH_KEEP,	/* not an allreduce (not measured): where it is */
	SR_PATH_RING,	/* the ring allreduce's steps */
	SR_PATH_LARGE,	/* those of SR_PLACE_LARGE bytes and more */
	SR_PATH_SMALL,	/* a small allreduce's own path */
	SR_PATH_BLOCKS,	/* world 4's blocks, on shared cores */
	SR_PATH_HALVING,	/* world 4's recursive halving, mid sizes */
	SR_PATH_DOUBLING	/* over a mesh: doubling, halving or blocks */
};

/* Where a bulk transfer is large: the copies, not the hops, its cost. */
#define SR_PLACE_LARGE (8u << 20)

/* The path of a ring allreduce of `bytes`. */
static inline enum sr_path
sr_place_bulk(uint64_t bytes)
{
	return bytes >= SR_PLACE_LARGE ? SR_PATH_LARGE : SR_PATH_RING;
}

/* ring->placed before the first binding. */
#define SR_PLACED_NEVER (-2)

/*
 * Which of ncpus shared CPUs rank of world runs on under path: an index
 * into them, or -1 for none (the CPUs the thread had).  Pure.
 */
int sr_place_index(uint32_t world, uint32_t ncpus, uint32_t rank,
    enum sr_path path);
/* Keeps ring's copy of the shared CPUs (none when the world has fewer
 * ranks than them, or one is past CPU_SETSIZE); -1 on ENOMEM. */
int sr_place_init(struct sr_ring *ring, const int *cpus, uint32_t ncpus);
/* Puts the thread's CPUs back as they were before the first binding, and
 * frees the copy. */
void sr_place_fini(struct sr_ring *ring);
/* Binds the calling thread for a collective on path, when that moves it. */
void sr_place(struct sr_ring *ring, enum sr_path path);

#endif
