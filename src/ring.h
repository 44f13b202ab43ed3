/*
 * ring.h - the ring object and its failure path (ring.c), shared by the engine and
 * the collectives.
 */
#ifndef SR_RING_H
#define SR_RING_H

#include <sched.h>
#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "engine.h"
#include "error.h"
#include "silvic_ring.h"
#include "transport.h"
#include "wire.h"

/* The links of a plain ring: to the next rank and from the previous one. */
enum { SR_NEXT = 0, SR_PREV = 1 };

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
	/* Every link of this rank, and which of them lead to its ring
	 * neighbours (SR_NEXT and SR_PREV on a plain ring).  With several
	 * streams per link, links holds nlinks * streams connections:
	 * stream s of link i is links[i + s * nlinks] (sr_ring_stream), so
	 * links[i] is each link's first. */
	struct sr_link *links;
	uint32_t nlinks;
	uint32_t streams;	/* connections per link, >= 1 */
	uint32_t next, prev;
	/* Both neighbours' links, next first, each once: what a ring
	 * collective runs on (engine.h, sr_transfer.links). */
	uint32_t ring_links[2];
	int nring_links;
	/* Every link that formed: what the close (goodbyes, drain) runs
	 * on.  The ring's two, or a mesh's world - 1 from the next rank
	 * round to the previous one. */
	uint32_t *all_links;
	int nall_links;
	char **addresses;
	uint8_t *scratch;
	size_t scratch_size;
	/* The frames of the collective under way, kept between calls. */
	struct sr_send *plan_sends;
	struct sr_recv *plan_recvs;
	size_t plan_size;
	struct sr_engine *engine;	/* the engine's state, per link */
	bool integrity;		 /* frames carry a CRC-32C trailer */
	bool mesh;		 /* a link to every rank (links[r] leads to rank
				  * r), with wide frame headers */
	bool shared_cores;	 /* sr_ring_options.shared_cores */
	bool probe;		 /* a probe's mesh (sr_ring_options.probe_ms),
				  * which may lack links */
	/* The CPUs the world's ranks share (sr_ring_options.cpus; none
	 * when the world has fewer ranks), and the index into them this rank
	 * is bound to: -1 none (its own CPUs), SR_PLACED_NEVER not yet
	 * (place.c). */
	int *cpus;
	uint32_t ncpus;
	int placed;
	cpu_set_t own;		/* the thread's CPUs before the first binding */
	char congestion[SR_CONGESTION_MAX];	/* the next link's */
	/* This rank's groups on a mesh (group.c), so that no two share an
	 * id. */
	struct sr_group *groups;
	/* The whole ring as a group of its mesh (id 0, the ring's own
	 * count), for its small and mid-size allreduces
	 * (sr_mesh_allreduce), and at 4 ranks, on a plain ring too, for
	 * its halving (sr_halving4_allreduce); made on first use. */
	struct sr_group *whole;
};


/*
 * A ring of `nlinks` unopened links, as sr_ring_connect builds it before
 * forming (tests build one by hand with it); NULL on ENOMEM.  Freed by
 * sr_ring_close.
 */
struct sr_ring *sr_ring_new(uint64_t rank, uint64_t world,
    const char *const *addresses, uint64_t token,
    const struct sr_ring_options *options, uint32_t nlinks);
/* Stream s of link i. */
static inline struct sr_link *
sr_ring_stream(struct sr_ring *ring, uint32_t i, uint32_t s)
{
	return &ring->links[i + s * ring->nlinks];
}

/* Which links lead to the ring's next and previous ranks (at world 2 of
 * a mesh, the same one); the ring collectives run on them. */
void sr_ring_set_neighbours(struct sr_ring *ring, uint32_t next,
    uint32_t prev);
/* Opens connection `index` of ring->links (a stream's: i + s * nlinks)
 * on fd (non-blocking, tuned) to rank peer. */
void sr_ring_set_link(struct sr_ring *ring, uint32_t index, int fd,
    uint32_t peer, const char *congestion);
/*
 * group.c: on a mesh, whether an allreduce of count elements, `bytes`,
 * at `world` ranks takes the mesh's links (recursive doubling, fewer
 * hops than the ring's small path, or recursive halving then doubling,
 * fewer than the ring's); and that allreduce, a ring collective (group
 * 0, the ring's seq, already counted), failing the ring on failure.
 */
bool sr_mesh_allreduce_pays(uint32_t world, size_t count, size_t bytes);
int sr_mesh_allreduce(struct sr_ring *ring, const uint8_t *send,
    uint8_t *recv, size_t count, enum sr_dtype dtype, enum sr_op op,
    struct sr_error *err);
/*
 * group.c: whether an allreduce of count elements, `bytes`, at 4 ranks
 * takes recursive halving then doubling (mid sizes), on a plain ring or
 * a mesh, over the ring's links (0-3 and 1-2, then 0-1 and 3-2); and
 * that allreduce, a ring collective as sr_mesh_allreduce is.
 */
bool sr_halving4_pays(size_t count, size_t bytes);
int sr_halving4_allreduce(struct sr_ring *ring, const uint8_t *send,
    uint8_t *recv, size_t count, enum sr_dtype dtype, enum sr_op op,
    struct sr_error *err);
/* A barrier over the mesh's links (an allreduce of nothing by recursive
 * doubling), where sr_mesh_allreduce_pays(world, 0, 0). */
int sr_mesh_barrier(struct sr_ring *ring, struct sr_error *err);

/* The failure of a broken ring copied into err (code kept). */
int sr_ring_fail_again(struct sr_ring *ring, struct sr_error *err);
/* Records err as the ring's failure, sends the abort on every link
 * (the origin's, verbatim, when err came from one), shuts the write
 * sides and lingers, bounded, until the peers' kernels have it. */
void sr_ring_fail(struct sr_ring *ring, const struct sr_error *err);
/* Scratch space of at least size bytes owned by the ring; NULL on ENOMEM. */
uint8_t *sr_ring_scratch(struct sr_ring *ring, size_t size);
/* An empty transfer x of the collective under way, on the ring's two
 * links, with room for `steps` sends and as many receives owned by the
 * ring (allocated once, reused by every call); -1 on ENOMEM. */
int sr_ring_plan(struct sr_ring *ring, int steps, struct sr_transfer *x);

#endif
