/*
 * group.c - collectives within a group of a mesh's ranks (silvic_ring.h,
 * "groups"), each written as a transfer for the engine on the links
 * between the members: on a mesh links[r] leads to rank r, so member j's
 * link is its rank (on a plain ring of 4, whose halving runs here too,
 * the link to that neighbour: member_link).  Nothing here touches a
 * socket; the engine moves the bytes, and a failure fails the whole ring
 * (sr_ring_fail), as on the ring.
 *
 * Every frame names its kind, the group's id and the group's own count of
 * collectives (seq, from 1), so a frame of another group, or a later
 * collective of this one, waits on a link this rank is idle on (the
 * engine parks it) and is judged when its turn comes.  The step says
 * which path a frame belongs to, so members that took different paths
 * for one size (they passed different lengths) are out of step instead
 * of reading one path's frame as another's:
 *
 *	step			path
 *	0 (+ root)		direct: one hop, every member to every other
 *				(an allgather; a broadcast's star from its
 *				root)
 *	0x100 ...		recursive doubling: 0x100 the pairing of a
 *				non-power-of-two group, 0x101 + h hop h,
 *				then the result back to the paired members
 *	0x200 ...		recursive halving, then doubling (the whole
 *				ring, mid sizes: a mesh of a power of two
 *				from 8, or 4 ranks on a plain ring or a
 *				mesh): 0x200 + 2h the
 *				length and 0x201 + 2h the halves of halving
 *				hop h, 0x200 + 2 log2(n) + k doubling hop k
 *	0x300 ...		by blocks (a mesh's whole ring on shared
 *				cores, small): 0x300 a member's input to its
 *				block's leader, 0x301 the leaders' exchange,
 *				0x302 the result back
 *	0x80000000		the ring inside the group: the length
 *	0x80000001 + k		its steps (a broadcast's chain: + root)
 *
 * The transfers list, besides the partners' links, the links to this
 * rank's ring neighbours: a rank waiting on this one in a ring collective
 * then hears its heartbeats and does not time out while it is busy in a
 * group, and an abort or a close from a neighbour is seen at once.
 */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "engine.h"
#include "error.h"
#include "plan.h"
#include "reduce.h"
#include "ring.h"
#include "transport.h"
#include "wire.h"

#define STEP_DIRECT 0u
#define STEP_DOUBLING 0x100u
#define STEP_HALVING 0x200u
#define STEP_RING 0x80000000u

/*
 * Small reductions (and barriers) take recursive doubling, large ones the
 * ring inside the group.  Measured on this machine (2 shared cores,
 * loopback TCP, the n ranks on those cores; the median over 6 blocks of
 * 300 calls of each path, the two alternating in one mesh; three runs),
 * doubling against a direct exchange (every member sends its input to
 * every other, one hop, and folds the n inputs in member order):
 *
 *	members	bytes	direct		doubling	(us per call)
 *	3	8	14 - 19		12 - 14
 *	3	4096	19 - 23		14 - 24
 *	4	8	30 - 37		24 - 37
 *	4	4096	36 - 40		31 - 32
 *	8	8	127 - 172	80 - 101
 *	8	4096	172 - 198	100 - 126
 *
 * Doubling won but once (level, 3 members at 4 KiB), at 3 members too,
 * where its path has 3 hops (pairing, one hop, back) against 1: the
 * direct exchange's n-1 frames each way cost every rank more system calls
 * than the hops cost.  Then doubling against the ring (medians of 6
 * blocks of 40 calls, us; doubling / ring):
 *
 *	members	32 KiB	64 KiB		96 KiB		128 KiB	256 KiB	1 MiB
 *	3	28/57	44-49/57-69	-		218/94	199/125	1657/1645
 *	4	54/97	118/121		171-183/117-131	354/158	486/254	3960/2290
 *	8	131/283	330-651/386-481	-		620/380	1160/723 5954/3365
 *
 * Doubling moves each member's whole input at every hop, the ring
 * 2(n-1)/n of it in all; so doubling while bytes x hops is at most
 * GROUP_DOUBLING_MOVES (43 KiB at 3 and 8 members, 64 KiB at 4).
 */
#define GROUP_DOUBLING_MOVES (128u << 10)

struct sr_group {
	struct sr_ring *ring;
	struct sr_group *next;	/* the ring's list of this rank's groups */
	uint32_t id;
	uint32_t n;		/* members */
	uint32_t index;		/* this rank's */
	uint32_t *ranks;	/* member order */
	uint64_t seq;		/* collectives begun on this group */
	uint32_t *links;	/* room for a transfer's links: n + 2 */
};

/* The hops of recursive doubling among n members (see doubling_reduce),
 * and the largest power of two p <= n. */
static uint32_t
doubling_hops(uint32_t n, uint32_t *p)
{
	uint32_t hops = 0;

	for (*p = 1; *p <= n / 2; *p *= 2)
		hops++;
	return *p < n ? hops + 2 : hops;
}

static bool
doubling_fits(uint32_t n, size_t bytes)
{
	uint32_t p;

	return bytes <= GROUP_DOUBLING_MOVES / doubling_hops(n, &p);
}

/* ------------------------------------------------------------ the group */

/* "0 2 3", or the first ranks and "... (N ranks)". */
static void
format_ranks(const uint32_t *ranks, size_t n, char *buf, size_t size)
{
	size_t used = 0;

	buf[0] = '\0';
	for (size_t i = 0; i < n && used + 16 < size; i++) {
		if (i == 8 && n > 9) {
			snprintf(buf + used, size - used, " ... (%zu ranks)", n);
			return;
		}
		used += (size_t)snprintf(buf + used, size - used, "%s%u",
		    i > 0 ? " " : "", ranks[i]);
	}
}

static int
config_error(struct sr_ring *ring, struct sr_error *err, const char *what)
{
	sr_error_set(err, SR_ECONFIG, SR_PHASE_CONFIG, "%s", what);
	err->rank = ring != NULL ? (int64_t)ring->rank : -1;
	return -1;
}

/* What is wrong with the group, in words; "" when nothing is. */
static void
check_group(const struct sr_ring *ring, uint32_t id, const uint32_t *ranks,
    size_t nranks, char *why, size_t size)
{
	char list[160];
	bool member = false;

	why[0] = '\0';
	if (!ring->mesh) {
		snprintf(why, size, "group %u needs a mesh (a link from every "
		    "rank to every other); this ring has links to its two "
		    "neighbours only", id);
		return;
	}
	if (id == 0) {
		snprintf(why, size, "group id 0 is the whole ring's; a group "
		    "needs another id");
		return;
	}
	for (const struct sr_group *g = ring->groups; g != NULL; g = g->next)
		if (g->id == id) {
			snprintf(why, size, "group id %u is already used by a "
			    "group of this rank's (free it first)", id);
			return;
		}
	if (nranks == 0 || ranks == NULL) {
		snprintf(why, size, "group %u has no ranks", id);
		return;
	}
	format_ranks(ranks, nranks, list, sizeof(list));
	for (size_t i = 0; i < nranks; i++) {
		if (ranks[i] >= ring->world) {
			snprintf(why, size, "group %u: rank %u (member %zu of "
			    "'%s') is out of range for a world of %u", id,
			    ranks[i], i, list, ring->world);
			return;
		}
		for (size_t j = 0; j < i; j++)
			if (ranks[j] == ranks[i]) {
				snprintf(why, size, "group %u: rank %u is listed "
				    "twice (members %zu and %zu of '%s')", id,
				    ranks[i], j, i, list);
				return;
			}
		member = member || ranks[i] == ring->rank;
		if (ranks[i] != ring->rank && (ranks[i] >= ring->nlinks ||
		    ring->links[ranks[i]].fd < 0)) {
			snprintf(why, size, "group %u: this rank has no link "
			    "to rank %u", id, ranks[i]);
			return;
		}
	}
	if (!member)
		snprintf(why, size, "group %u: this rank (%u) is not among its "
		    "ranks '%s'", id, ring->rank, list);
}

int
sr_group_new(struct sr_group **out, struct sr_ring *ring, uint32_t id,
    const uint32_t *ranks, size_t nranks, struct sr_error *err)
{
	char why[sizeof(err->message)];
	struct sr_group *g;

	*out = NULL;
	sr_error_clear(err);
	if (ring == NULL)
		return config_error(ring, err, "no ring (sr_ring_connect "
		    "failed or was not called)");
	check_group(ring, id, ranks, nranks, why, sizeof(why));
	if (why[0] != '\0')
		return config_error(ring, err, why);
	if ((g = calloc(1, sizeof(*g))) == NULL ||
	    (g->ranks = calloc(nranks, sizeof(*g->ranks))) == NULL ||
	    (g->links = calloc(nranks + 2, sizeof(*g->links))) == NULL) {
		sr_group_free(g);
		sr_error_set(err, SR_ENOMEM, SR_PHASE_CONFIG, "out of memory");
		err->rank = ring->rank;
		return -1;
	}
	g->ring = ring;
	g->id = id;
	g->n = (uint32_t)nranks;
	memcpy(g->ranks, ranks, nranks * sizeof(*ranks));
	for (uint32_t i = 0; i < g->n; i++)
		if (ranks[i] == ring->rank)
			g->index = i;
	g->next = ring->groups;
	ring->groups = g;
	*out = g;
	return 0;
}

void
sr_group_free(struct sr_group *g)
{
	if (g == NULL)
		return;
	if (g->ring != NULL)
		for (struct sr_group **p = &g->ring->groups; *p != NULL;
		    p = &(*p)->next)
			if (*p == g) {
				*p = g->next;
				break;
			}
	free(g->ranks);
	free(g->links);
	free(g);
}

uint32_t
sr_group_size(const struct sr_group *g)
{
	return g->n;
}

uint32_t
sr_group_index(const struct sr_group *g)
{
	return g->index;
}

uint32_t
sr_group_id(const struct sr_group *g)
{
	return g->id;
}

uint32_t
sr_group_rank(const struct sr_group *g, uint32_t index)
{
	return index < g->n ? g->ranks[index] : SR_NO_RANK;
}

/* ------------------------------------------------------ the transfers */

/* The link to the member k places after this one (k may be negative). */
static uint32_t
link_at(const struct sr_group *g, int64_t k)
{
	int64_t n = g->n;

	return g->ranks[(((int64_t)g->index + k) % n + n) % n];
}

/* The link to member m: on a mesh its rank's; on a plain ring, whichever
 * of the two leads to it.  Only world 4's halving runs a group on a plain
 * ring, and its member order (whole_ring) makes every partner a ring
 * neighbour; any other member would be the previous rank's link. */
static uint32_t
member_link(const struct sr_group *g, uint32_t m)
{
	const struct sr_ring *ring = g->ring;

	if (ring->mesh)
		return g->ranks[m];
	return ring->links[ring->next].rank == g->ranks[m] ? ring->next :
	    ring->prev;
}

/* Fails at once on a broken ring; else counts the collective this call
 * starts (the group's seq, its frames'). */
static int
begin(struct sr_group *g, struct sr_error *err)
{
	sr_error_clear(err);
	if (g == NULL) {
		sr_error_set(err, SR_ECONFIG, SR_PHASE_COLLECTIVE,
		    "no group (sr_group_new failed or was not called)");
		return -1;
	}
	if (g->ring->failed)
		return sr_ring_fail_again(g->ring, err);
	g->seq++;
	return 0;
}

static int
fail_ring(struct sr_group *g, struct sr_error *err)
{
	err->rank = g->ring->rank;
	sr_ring_fail(g->ring, err);
	return -1;
}

static int
nomem(struct sr_group *g, struct sr_error *err)
{
	sr_error_set(err, SR_ENOMEM, SR_PHASE_COLLECTIVE, "out of memory");
	return fail_ring(g, err);
}

static int
bad_call(struct sr_group *g, struct sr_error *err)
{
	err->rank = g->ring->rank;
	return -1;
}

static struct sr_frame
frame_of(const struct sr_group *g, uint8_t kind, uint32_t step)
{
	struct sr_frame f = { .kind = kind, .step = step, .seq = g->seq,
		.group = g->id };

	return f;
}

/* An empty transfer of the collective under way with room for `steps`
 * sends and as many receives (the ring's plan); -1 on ENOMEM. */
static int
plan(struct sr_group *g, uint32_t steps, struct sr_transfer *x)
{
	if (sr_ring_plan(g->ring, (int)steps, x) != 0)
		return -1;
	x->seq = g->seq;
	x->group = g->id;
	x->links = g->links;
	x->nlinks = 0;
	x->dtype = SR_U32;
	x->op = SR_SUM;
	return 0;
}

static void
add_link(struct sr_group *g, struct sr_transfer *x, uint32_t link)
{
	for (int i = 0; i < x->nlinks; i++)
		if (g->links[i] == link)
			return;
	g->links[x->nlinks++] = link;
}

/* The transfer's links: the receives' (in order; the last with a
 * receive due is whom a heartbeat says this rank waits on), the sends',
 * then the ring neighbours' that formed (a probe's mesh may lack some). */
static void
list_links(struct sr_group *g, struct sr_transfer *x)
{
	for (int i = 0; i < x->nrecvs; i++)
		add_link(g, x, x->recvs[i].link);
	for (int i = 0; i < x->nsends; i++)
		add_link(g, x, x->sends[i].link);
	for (int i = 0; i < g->ring->nring_links; i++)
		if (g->ring->links[g->ring->ring_links[i]].fd >= 0)
			add_link(g, x, g->ring->ring_links[i]);
}

static int
run(struct sr_group *g, struct sr_transfer *x, struct sr_error *err)
{
	list_links(g, x);
	if (sr_engine_run(g->ring->engine, x, err) == 0)
		return 0;
	return fail_ring(g, err);
}

static void
add_send(struct sr_transfer *x, uint32_t link, const uint8_t *data,
    uint64_t len, struct sr_frame frame, int gate)
{
	x->sends[x->nsends++] = (struct sr_send){ .link = link, .data = data,
		.len = len, .frame = frame, .gate = gate };
}

/* Returns the receive's index (a send may be gated on it). */
static int
add_recv(struct sr_transfer *x, uint32_t link, uint8_t *data, uint64_t len,
    struct sr_frame frame)
{
	x->recvs[x->nrecvs] = (struct sr_recv){ .link = link, .data = data,
		.len = len, .frame = frame };
	return x->nrecvs++;
}

/* ------------------------------------------------------ the reductions */

/*
 * Recursive doubling among the largest power of two p <= n members, the
 * standard way for the others (r = n - p): members 2i and 2i+1, i < r,
 * pair first (2i+1 folds 2i's input and stands for both), and get the
 * result back at the end.  Hop h exchanges with the member whose virtual
 * place differs in bit h.  Each member then holds the fold of a run of
 * members in order, and op puts the lower run first, so every member
 * folds the same tree, e.g. at 6 members (virtual places v):
 *
 *	pairing	0 -> 1, 2 -> 3		v0 = x0x1, v1 = x2x3, v2 = x4, v3 = x5
 *	hop 0	v0 <-> v1, v2 <-> v3	(x0x1)(x2x3) and x4x5
 *	hop 1	v0 <-> v2, v1 <-> v3	((x0x1)(x2x3))(x4x5) on every one
 *	back	1 -> 0, 3 -> 2
 *
 * log2(p) hops, + 2 when p < n; each frame is the whole input.
 */
static uint32_t
member_of_place(uint32_t v, uint32_t r)
{
	return v < r ? 2 * v + 1 : v + r;
}

/*
 * One hop of doubling with the member on `link`: cur goes to it while its
 * value comes into `into`, folded with cur (theirs first when
 * theirs_first); with back >= 0, the result then goes on to that link as
 * it is folded.  A hop is a transfer of its own: the next hop's fold
 * reads this one's result, which must be whole first (the next partner's
 * frame may come before this partner's, and then waits: next_step).
 */
static int
hop(struct sr_group *g, struct sr_frame frame, uint32_t link,
    const uint8_t *cur, uint8_t *into, size_t bytes, bool theirs_first,
    int64_t back, bool last, struct sr_error *err)
{
	struct sr_transfer x;
	int got;

	if (plan(g, 2, &x) != 0)
		return nomem(g, err);
	if (!last)
		x.next_step = frame.step + 1;
	x.dtype = (enum sr_dtype)frame.dtype;
	x.op = (enum sr_op)frame.op;
	x.whole = bytes <= SR_FRAME_MAX;
	add_send(&x, link, cur, bytes, frame, -1);
	got = add_recv(&x, link, into, bytes, frame);
	x.recvs[got].reduce = true;
	x.recvs[got].swap = theirs_first;
	x.recvs[got].local = cur;
	if (back >= 0) {
		frame.step++;
		add_send(&x, (uint32_t)back, into, bytes, frame, got);
	}
	return run(g, &x, err);
}

static int
doubling_reduce(struct sr_group *g, struct sr_frame frame,
    const uint8_t *send, uint8_t *recv, size_t count, enum sr_dtype dtype,
    enum sr_op op, struct sr_error *err)
{
	size_t bytes = count * sr_dtype_size(dtype);
	uint32_t n = g->n, i = g->index, p, hops, r, v;
	uint8_t *buf, *cur;
	struct sr_transfer x;
	int64_t back = -1;

	hops = doubling_hops(n, &p);
	r = n - p;
	if (r > 0)
		hops -= 2;
	/* The input and two values a hop's send and receive alternate on:
	 * a hop's send is out once its transfer returns. */
	buf = sr_ring_scratch(g->ring, 3 * bytes);
	if (buf == NULL)
		return nomem(g, err);
	if (bytes > 0)
		memcpy(buf, send, bytes);
	cur = buf;
	frame.dtype = (uint8_t)dtype;
	frame.op = (uint8_t)op;
	if (i < 2 * r && i % 2 == 0) {
		/* Paired, and left out of the hops: the partner folds. */
		if (plan(g, 1, &x) != 0)
			return nomem(g, err);
		x.whole = bytes <= SR_FRAME_MAX;
		frame.step = STEP_DOUBLING;
		add_send(&x, g->ranks[i + 1], cur, bytes, frame, -1);
		frame.step = STEP_DOUBLING + hops + 1;
		add_recv(&x, g->ranks[i + 1], recv, bytes, frame);
		return run(g, &x, err);
	}
	if (i < 2 * r) {
		if (plan(g, 1, &x) != 0)
			return nomem(g, err);
		x.dtype = dtype;
		x.op = op;
		x.whole = bytes <= SR_FRAME_MAX;
		frame.step = STEP_DOUBLING;
		x.next_step = STEP_DOUBLING + 1;
		add_recv(&x, g->ranks[i - 1], buf + bytes, bytes, frame);
		x.recvs[0].reduce = true;
		x.recvs[0].swap = true;		/* member i-1's first */
		x.recvs[0].local = cur;
		if (run(g, &x, err) != 0)
			return -1;
		cur = buf + bytes;
		back = g->ranks[i - 1];
	}
	v = i < 2 * r ? i / 2 : i - r;
	for (uint32_t h = 0; h < hops; h++) {
		uint32_t pv = v ^ (1u << h);
		uint8_t *into = h + 1 == hops ? recv :
		    cur == buf + bytes ? buf + 2 * bytes : buf + bytes;

		frame.step = STEP_DOUBLING + 1 + h;
		if (hop(g, frame, g->ranks[member_of_place(pv, r)], cur, into,
		    bytes, pv < v, h + 1 == hops ? back : -1, h + 1 == hops,
		    err) != 0)
			return -1;
		cur = into;
	}
	return 0;
}

/*
 * Doubling takes ceil(log2 n) hops (2 more when n is not a power of two),
 * the ring's small path (collectives.c) ceil((n-1)/2): on a mesh, whose
 * links join any two ranks, doubling pays from 8 ranks on (3 hops against
 * 4; at 5 to 7 ranks it takes 4 against 2 or 3), while it moves little
 * enough (doubling_fits).  Measured at 8 ranks on a mesh, the two
 * alternating call by call (medians of 300, the slowest rank's time,
 * ring's small path -> doubling): 8 B 190 -> 96 and 148 -> 97 us, 1 KiB
 * 215 -> 113, 4 KiB 214 -> 127 and 147 -> 93, 16 KiB 328 -> 185.  It is
 * asked before the small path's limit (collectives.c), which at 8 ranks
 * sends 18 KiB and up round the ring: doubling instead, alternating
 * launches (`launch -n 8 bench allreduce --mesh`, 200 calls, 6 pairs,
 * medians; the ring -> doubling), 24 KiB 393 -> 246 us, 32 KiB 406 ->
 * 334, 40 KiB 447 -> 344.
 */
static bool
mesh_doubling_pays(uint32_t world, size_t bytes)
{
	uint32_t p;

	return world > 4 && doubling_hops(world, &p) < world / 2 &&
	    doubling_fits(world, bytes);
}

/* The whole ring as a group, id 0: every rank in rank order, but 0 3 1 2
 * at 4 ranks, so that halving's partners (v ^ 1, then v ^ 2) are ring
 * neighbours, 0-3 and 1-2, then 0-1 and 3-2, on a plain ring or a mesh
 * (which then fold alike). */
static struct sr_group *
whole_ring(struct sr_ring *ring)
{
	static const uint32_t four[4] = { 0, 3, 1, 2 };
	struct sr_group *g = ring->whole;

	if (g != NULL)
		return g;
	if ((g = calloc(1, sizeof(*g))) == NULL ||
	    (g->ranks = calloc(ring->world, sizeof(*g->ranks))) == NULL ||
	    (g->links = calloc(ring->world + 2, sizeof(*g->links))) == NULL) {
		sr_group_free(g);
		return NULL;
	}
	g->ring = ring;
	g->n = ring->world;
	for (uint32_t i = 0; i < g->n; i++) {
		g->ranks[i] = ring->world == 4 ? four[i] : i;
		if (g->ranks[i] == ring->rank)
			g->index = i;
	}
	ring->whole = g;
	return g;
}

/* The lengths members announce (on `link`, in the length frame) differ:
 * "... 8 bytes (1 f64) on this rank, 16 bytes (2 f64) on rank P
 * (address) in allreduce sum f64 step N seq S", with " group G" on a
 * group's, as the engine says it of whole frames. */
static int
ring_length_error(struct sr_group *g, const struct sr_frame *frame,
    uint32_t link, uint64_t mine, uint64_t theirs, enum sr_dtype dtype,
    struct sr_error *err)
{
	const struct sr_link *l = &g->ring->links[link];
	size_t es = sr_dtype_size(dtype);
	const char *name = sr_dtype_name(dtype);
	char group[24] = "";

	if (frame->group != 0)
		snprintf(group, sizeof(group), " group %u", frame->group);
	sr_error_set(err, SR_EOUT_OF_STEP, SR_PHASE_COLLECTIVE, "out of step: "
	    "reductions of different lengths, %llu bytes (%llu %s) on this "
	    "rank, %llu bytes (%llu %s) on rank %u (%s) in allreduce %s %s "
	    "step %u seq %llu%s", (unsigned long long)(mine * es),
	    (unsigned long long)mine, name, (unsigned long long)(theirs * es),
	    (unsigned long long)theirs, name, l->rank, l->address,
	    sr_op_name((enum sr_op)frame->op), name, frame->step,
	    (unsigned long long)frame->seq, group);
	err->peer = l->rank;
	err->origin = -1;
	snprintf(err->peer_address, sizeof(err->peer_address), "%s",
	    l->address);
	return fail_ring(g, err);
}

/* Runs x, whose receive 0 is the partner's count (into theirs) from
 * link: a count other than this member's is failed as such, named with
 * both lengths, unless the run failed for another reason first. */
static int
run_counted(struct sr_group *g, struct sr_transfer *x,
    const struct sr_frame *length, uint32_t link, size_t count,
    const uint8_t *theirs, enum sr_dtype dtype, struct sr_error *err)
{
	int rc;

	list_links(g, x);
	rc = sr_engine_run(g->ring->engine, x, err);
	if (x->recvs[0].complete && sr_get_u64le(theirs) != count &&
	    (rc == 0 || err->origin < 0))
		return ring_length_error(g, length, link, count,
		    sr_get_u64le(theirs), dtype, err);
	return rc == 0 ? 0 : fail_ring(g, err);
}

/*
 * Recursive halving, then doubling (Rabenseifner's allreduce), on a
 * power of two n of members, v this one: halving hop h (h = 0, 1, ...)
 * pairs v with v ^ 2^h, the one whose bit h is 0 keeping the lower half
 * of the blocks both hold and folding its partner's copy of that half
 * (the lower member's first, as doubling folds, so every member's result
 * is the same tree); after log2(n) hops each member holds the whole fold
 * of n-th of the elements, and doubling hops in the reverse order give
 * every member every part, copied.  Each member sends 2(n-1)/n of its
 * input, as on the ring, in 2 log2(n) hops against the ring's 2(n-1).
 * A halving hop's transfer first tells its partner the element count,
 * so a member whose blocks do not match is named with both lengths.
 *
 * Measured on 2 cores, 8 ranks on a mesh (`launch -n 8 bench allreduce
 * --mesh`, alternating launches against the ring, 5 pairs, the median
 * of the pairs' ratios ring / halving): 64 KiB 2.23x, 128 KiB 1.90x, 256
 * KiB 1.63x, 384 KiB 1.41x, 448 KiB 1.35x, 512 KiB 0.91x, 1 MiB 0.90x, 2
 * MiB 0.79x; the final code, 7 pairs: 64 KiB 1.63x, 128 KiB 1.48x, 256
 * KiB 1.36x, 384 KiB 1.10x; at 16 ranks, 5 pairs, 64 KiB to 384 KiB
 * 1.82x, 1.96x, 1.34x, 1.21x.  Against doubling (both bound, 7 pairs)
 * it took 1.5-1.6x the time at 24, 32 and 40 KiB.  So it runs from
 * where doubling stops (doubling_fits) to GROUP_HALVING_MAX; larger
 * worlds were not measured.
 */
#define GROUP_HALVING_MAX (384u << 10)

/*
 * At 4 ranks, plain ring or mesh, halving runs on the ring's links (the
 * whole ring's member order 0 3 1 2: partners 0-3 and 1-2, then 0-1 and
 * 3-2), each link used both ways, in 4 hops against the ring's 6 steps,
 * folding every hop into recv (no scratch the size of the buffer: its
 * in-place folds are staged).  It runs past the blocks' 256 KiB (shared
 * cores) and the small path, to 4 MiB.  Measured on 2 cores, alternating
 * launches of `launch -n 4 bench allreduce -d f64 -n 100` (20 from 4
 * MiB) against the ring, 7 pairs, the median of the pairs' ratios ring /
 * halving: 384 KiB 1.37x, 512 KiB 1.48x, 1 MiB 1.52x, 2 MiB 1.62x, 4
 * MiB 1.35x; 5 pairs with halving let run on: 8 MiB 1.04x, 16 MiB
 * 1.00x.  It starts where the blocks stop (256 KiB; 256-384 KiB not
 * measured).  Bound by place.c's 0 0 1 1 (its first partners across
 * cores); the ring's 0 1 0 1 took 1.05-1.32x the time, the kernel's
 * placement 0.99-1.09x (level at 384 KiB and 4 MiB).
 */
#define GROUP_HALVING4_MIN (256u << 10)
#define GROUP_HALVING4_MAX (4u << 20)

static bool
mesh_halving_pays(uint32_t world, size_t count, size_t bytes)
{
	return world >= 8 && (world & (world - 1)) == 0 && count >= world &&
	    !doubling_fits(world, bytes) && bytes <= GROUP_HALVING_MAX;
}

bool
sr_halving4_pays(size_t count, size_t bytes)
{
	return count >= 4 && bytes > GROUP_HALVING4_MIN &&
	    bytes <= GROUP_HALVING4_MAX;
}

/* Byte offset of block b of count elements of es bytes cut in n. */
static size_t
block_at(size_t count, size_t es, uint32_t n, uint32_t b)
{
	return (size_t)((uint64_t)count * b / n) * es;
}

/* Where a member is in halving: its input (or the last hop's result) in
 * src, the blocks [lo, hi) it still reduces, its next result into dst. */
struct halving {
	const uint8_t *src;
	uint8_t *dst;
	uint32_t lo, hi;
};

/* Halving hop h with member v ^ 2^h: keep one half of [lo, hi) (the
 * lower where bit h of v is 0), folded with the partner's copy into
 * dst, send it the other half; hv's range becomes the kept half. */
static int
halving_hop(struct sr_group *g, struct sr_frame frame, uint32_t h,
    struct halving *hv, size_t count, struct sr_error *err)
{
	enum sr_dtype dtype = (enum sr_dtype)frame.dtype;
	size_t es = sr_dtype_size(dtype);
	uint32_t n = g->n, mid = hv->lo + (hv->hi - hv->lo) / 2;
	uint32_t link = member_link(g, g->index ^ (1u << h));
	bool low = (g->index >> h & 1) == 0;
	uint32_t klo = low ? hv->lo : mid, khi = low ? mid : hv->hi;
	uint32_t glo = low ? mid : hv->lo, ghi = low ? hv->hi : mid;
	size_t ko = block_at(count, es, n, klo);
	size_t go = block_at(count, es, n, glo);
	struct sr_frame length = frame;
	uint8_t mine[8], theirs[8];
	struct sr_transfer x;
	int got;

	if (plan(g, 2, &x) != 0)
		return nomem(g, err);
	x.next_step = frame.step + 2;
	x.dtype = dtype;
	x.op = (enum sr_op)frame.op;
	sr_put_u64le(mine, count);
	add_send(&x, link, mine, 8, length, -1);
	add_recv(&x, link, theirs, 8, length);
	frame.step++;
	add_send(&x, link, hv->src + go, block_at(count, es, n, ghi) - go,
	    frame, -1);
	got = add_recv(&x, link, hv->dst + ko, block_at(count, es, n, khi) - ko,
	    frame);
	x.recvs[got].reduce = true;
	x.recvs[got].swap = !low;	/* the lower member's first */
	/* Only this member folds it; in place the payload is staged. */
	x.recvs[got].straight = hv->src != hv->dst;
	x.recvs[got].local = hv->src + ko;
	hv->lo = klo;
	hv->hi = khi;
	return run_counted(g, &x, &length, link, count, theirs, dtype, err);
}

static int
halving_reduce(struct sr_group *g, struct sr_frame frame,
    const uint8_t *send, uint8_t *recv, size_t count, enum sr_dtype dtype,
    enum sr_op op, struct sr_error *err)
{
	size_t es = sr_dtype_size(dtype), bytes = count * es;
	uint32_t n = g->n, v = g->index, hops = 0;
	uint32_t los[32], his[32];
	uint8_t *scratch = NULL;
	struct halving hv = { .src = send, .lo = 0, .hi = n };
	struct sr_transfer x;
	bool copy;

	while ((1u << hops) < n)
		hops++;
	/* Hops alternate between recv and scratch, the last into recv (each
	 * hop's fold straight in); in place, the first must not fold into
	 * the input it reads.  At 4 members, which halve up to
	 * GROUP_HALVING4_MAX, every hop folds into recv, with no scratch
	 * the size of the buffer: a hop whose input is recv (the second
	 * always, the first in place) stages its payload. */
	copy = n > 4 && send == recv && hops % 2 == 1;
	if (n > 4 && (scratch = sr_ring_scratch(g->ring, copy ? 2 * bytes :
	    bytes)) == NULL)
		return nomem(g, err);
	if (copy) {
		memcpy(scratch + bytes, send, bytes);
		hv.src = scratch + bytes;
	}
	frame.dtype = (uint8_t)dtype;
	frame.op = (uint8_t)op;
	for (uint32_t h = 0; h < hops; h++) {
		hv.dst = n == 4 || (hops - 1 - h) % 2 == 0 ? recv : scratch;
		los[h] = hv.lo;
		his[h] = hv.hi;
		frame.step = STEP_HALVING + 2 * h;
		if (halving_hop(g, frame, h, &hv, count, err) != 0)
			return -1;
		hv.src = hv.dst;
	}
	/* Back up: hop k joins this member's blocks and its partner's, the
	 * rest of what both held before halving hop k. */
	for (uint32_t k = hops; k-- > 0;) {
		uint32_t lo = hv.lo, hi = hv.hi;
		uint32_t plo = lo == los[k] ? hi : los[k];
		uint32_t phi = lo == los[k] ? his[k] : lo;
		size_t mo = block_at(count, es, n, lo);
		size_t po = block_at(count, es, n, plo);

		if (plan(g, 1, &x) != 0)
			return nomem(g, err);
		frame.step = STEP_HALVING + 2 * hops + (hops - 1 - k);
		if (k > 0)
			x.next_step = frame.step + 1;
		add_send(&x, member_link(g, v ^ (1u << k)), recv + mo,
		    block_at(count, es, n, hi) - mo, frame, -1);
		add_recv(&x, member_link(g, v ^ (1u << k)), recv + po,
		    block_at(count, es, n, phi) - po, frame);
		if (run(g, &x, err) != 0)
			return -1;
		hv.lo = los[k];
		hv.hi = his[k];
	}
	return 0;
}

/*
 * By blocks, for ranks that share cores: the whole ring cut in two blocks
 * of n/2 ranks (the ranks place.c binds to one CPU each).  Each member
 * sends its input to its block's leader (the block's last rank) and
 * waits; the leader folds its block in rank order, exchanges that with
 * the other leader (the lower block's first, so both fold the same tree
 * (((x0x1)x2)x3)(((x4x5)x6)x7)), and sends the result to its members.
 * On a core that runs one rank at a time the cost is the switches
 * between them: a member runs twice (its input, the result) against
 * doubling's once a hop, log2(n) hops.  Measured at 8 ranks on 2 cores,
 * bound as place.c binds doubling (ranks 0-3 on one CPU, 4-7 on the
 * other), alternating launches of `launch -n 8 bench allreduce --mesh`
 * against doubling and halving (7 pairs, the median of the pairs'
 * ratios, doubling or halving / blocks): 8 B 1.51x, 128 B 1.44x, 2 KiB
 * 1.59x, 8 KiB 1.45x, 16 KiB 1.31x, 32 KiB 1.47x, 40 KiB 1.45x; against
 * halving 64 KiB 1.77x, 128 KiB 1.37x, 256 KiB 1.27x, 384 KiB 1.09x.
 * Left to the kernel (--cpus none) it was level (1.00-1.02x at 8 B, 32
 * and 128 KiB), so it runs on shared cores bound or not, to 256 KiB.  The
 * barrier too (an allreduce of nothing), the calls after it 1.26-1.60x
 * faster than after doubling's barrier.
 */
static bool
mesh_blocks_pay(const struct sr_ring *ring, size_t bytes)
{
	return ring->shared_cores && ring->world == 8 &&
	    bytes <= SR_BLOCKS_MAX;
}

static int
blocks_reduce(struct sr_group *g, struct sr_frame frame,
    const uint8_t *send, uint8_t *recv, size_t count, enum sr_dtype dtype,
    enum sr_op op, struct sr_error *err)
{
	size_t bytes = count * sr_dtype_size(dtype);
	uint32_t half = g->n / 2, first = g->index / half * half;
	uint32_t leader = first + half - 1;
	uint8_t *in, *mine;
	struct sr_transfer x;
	int got;

	frame.dtype = (uint8_t)dtype;
	frame.op = (uint8_t)op;
	if (g->index != leader) {
		if (plan(g, 1, &x) != 0)
			return nomem(g, err);
		x.whole = bytes <= SR_FRAME_MAX;
		frame.step = SR_STEP_BLOCKS;
		add_send(&x, g->ranks[leader], send, bytes, frame, -1);
		frame.step = SR_STEP_BLOCKS + 2;
		add_recv(&x, g->ranks[leader], recv, bytes, frame);
		return run(g, &x, err);
	}
	/* The members' inputs in rank order, then this rank's fold. */
	if ((in = sr_ring_scratch(g->ring, half * bytes)) == NULL ||
	    plan(g, half - 1, &x) != 0)
		return nomem(g, err);
	mine = in + (half - 1) * bytes;
	x.whole = bytes <= SR_FRAME_MAX;
	frame.step = SR_STEP_BLOCKS;
	for (uint32_t j = 0; j + 1 < half; j++)
		add_recv(&x, g->ranks[first + j], in + j * bytes, bytes, frame);
	if (run(g, &x, err) != 0)
		return -1;
	if (bytes > 0) {
		memcpy(mine, in, bytes);
		for (uint32_t j = 1; j < half; j++)
			sr_reduce(mine, mine, j + 1 < half ? in + j * bytes :
			    send, count, dtype, op);
	}
	if (plan(g, half + 1, &x) != 0)
		return nomem(g, err);
	x.dtype = dtype;
	x.op = op;
	x.whole = bytes <= SR_FRAME_MAX;
	frame.step = SR_STEP_BLOCKS + 1;
	add_send(&x, g->ranks[(leader + half) % g->n], mine, bytes, frame, -1);
	got = add_recv(&x, g->ranks[(leader + half) % g->n], recv, bytes,
	    frame);
	x.recvs[got].reduce = true;
	x.recvs[got].swap = first > 0;		/* the lower block's first */
	x.recvs[got].local = mine;
	frame.step = SR_STEP_BLOCKS + 2;
	for (uint32_t j = 0; j + 1 < half; j++)
		add_send(&x, g->ranks[first + j], recv, bytes, frame, got);
	return run(g, &x, err);
}

/* The whole ring as a group for one of the ring's collectives (its
 * frames are the ring's: group 0, the ring's seq); NULL after failing
 * the ring. */
static struct sr_group *
whole_ring_now(struct sr_ring *ring, struct sr_error *err)
{
	struct sr_group *g = whole_ring(ring);

	if (g == NULL) {
		sr_error_set(err, SR_ENOMEM, SR_PHASE_COLLECTIVE,
		    "out of memory");
		err->rank = ring->rank;
		sr_ring_fail(ring, err);
		return NULL;
	}
	g->seq = ring->seq;
	return g;
}

int
sr_halving4_allreduce(struct sr_ring *ring, const uint8_t *send,
    uint8_t *recv, size_t count, enum sr_dtype dtype, enum sr_op op,
    struct sr_error *err)
{
	struct sr_group *g = whole_ring_now(ring, err);
	struct sr_frame frame = { .kind = SR_FRAME_ALLREDUCE,
		.seq = ring->seq };

	if (g == NULL)
		return -1;
	return halving_reduce(g, frame, send, recv, count, dtype, op, err);
}

int
sr_mesh_allreduce(struct sr_ring *ring, const uint8_t *send, uint8_t *recv,
    size_t count, enum sr_dtype dtype, enum sr_op op, struct sr_error *err)
{
	struct sr_group *g = whole_ring_now(ring, err);
	struct sr_frame frame = { .kind = SR_FRAME_ALLREDUCE,
		.seq = ring->seq };
	size_t bytes = count * sr_dtype_size(dtype);

	if (g == NULL)
		return -1;
	if (mesh_blocks_pay(ring, bytes))
		return blocks_reduce(g, frame, send, recv, count, dtype, op,
		    err);
	if (mesh_halving_pays(ring->world, count, bytes))
		return halving_reduce(g, frame, send, recv, count, dtype, op,
		    err);
	return doubling_reduce(g, frame, send, recv, count, dtype, op, err);
}

int
sr_mesh_barrier(struct sr_ring *ring, struct sr_error *err)
{
	struct sr_group *g = whole_ring_now(ring, err);
	struct sr_frame frame = { .kind = SR_FRAME_BARRIER, .seq = ring->seq };
	uint8_t none[1];

	if (g == NULL)
		return -1;
	if (mesh_blocks_pay(ring, 0))
		return blocks_reduce(g, frame, none, none, 0, SR_U32, SR_SUM,
		    err);
	return doubling_reduce(g, frame, none, none, 0, SR_U32, SR_SUM, err);
}

bool
sr_mesh_allreduce_pays(uint32_t world, size_t count, size_t bytes)
{
	return mesh_doubling_pays(world, bytes) ||
	    mesh_halving_pays(world, count, bytes);
}

/*
 * The ring inside the group (plan.h's, as the ring's own): member i
 * sends to member i+1 and receives from member i-1; the reduce-scatter
 * folds each block in the schedule's fixed order, so results are
 * identical on every member.  Its frames are blocks, so first each member
 * tells the next its element count (one more small frame, not a hop): a
 * member whose blocks do not match is then named with both lengths.
 */
static int
ring_reduce(struct sr_group *g, struct sr_frame frame, const uint8_t *send,
    uint8_t *recv, size_t count, enum sr_dtype dtype, enum sr_op op,
    struct sr_error *err)
{
	size_t es = sr_dtype_size(dtype);
	struct sr_direction d = { .to = link_at(g, 1), .from = link_at(g, -1),
		.place = g->index };
	uint8_t mine[8], theirs[8];
	struct sr_transfer x;
	struct sr_frame length = frame;

	if (plan(g, 1 + 2 * (g->n - 1), &x) != 0)
		return nomem(g, err);
	sr_put_u64le(mine, count);
	x.dtype = dtype;
	x.op = op;
	x.frame_max = sr_plan_frame((uint64_t)count * es, g->n,
	    g->ring->shared_cores);
	length.step = STEP_RING;
	sr_plan_step(&x, &d, length, mine, 8, false, theirs, 8, NULL);
	frame.step = STEP_RING + 1;
	sr_plan_allreduce(&x, &d, frame, send, recv, count, es, g->n);
	return run_counted(g, &x, &length, d.from, count, theirs, dtype, err);
}

int
sr_group_allreduce(struct sr_group *g, const void *send, void *recv,
    size_t count, enum sr_dtype dtype, enum sr_op op, struct sr_error *err)
{
	size_t es = sr_dtype_size(dtype);
	struct sr_frame frame;

	if (begin(g, err) != 0)
		return -1;
	if (es == 0 || (unsigned)op >= SR_OP_COUNT) {
		sr_error_set(err, SR_ECONFIG, SR_PHASE_COLLECTIVE,
		    "unknown dtype %d or op %d", (int)dtype, (int)op);
		return bad_call(g, err);
	}
	if (count > SIZE_MAX / es / (g->n + 2)) {
		sr_error_set(err, SR_ECONFIG, SR_PHASE_COLLECTIVE,
		    "%zu elements are more than this machine can address", count);
		return bad_call(g, err);
	}
	if (g->n == 1) {
		if (send != recv && count > 0)
			memmove(recv, send, count * es);
		return 0;
	}
	frame = frame_of(g, SR_FRAME_ALLREDUCE, 0);
	frame.dtype = (uint8_t)dtype;
	frame.op = (uint8_t)op;
	if (doubling_fits(g->n, count * es))
		return doubling_reduce(g, frame, send, recv, count, dtype, op,
		    err);
	return ring_reduce(g, frame, send, recv, count, dtype, op, err);
}

int
sr_group_barrier(struct sr_group *g, struct sr_error *err)
{
	struct sr_frame frame;
	uint8_t none[1];

	if (begin(g, err) != 0)
		return -1;
	if (g->n == 1)
		return 0;
	/* An allreduce of nothing: through the hops every member has heard
	 * from every other. */
	frame = frame_of(g, SR_FRAME_BARRIER, 0);
	return doubling_reduce(g, frame, none, none, 0, SR_U32, SR_SUM, err);
}

/* ------------------------------------------------ the byte collectives */

/*
 * Direct at every size: each member sends its bytes to every other, one
 * hop, and a member's link carries (n-1) x bytes each way, as many as the
 * ring's allgather moves, so the bandwidth is the ring's.
 */
int
sr_group_allgather(struct sr_group *g, const void *send, size_t bytes,
    void *recv, struct sr_error *err)
{
	uint8_t *all = recv, *own;
	struct sr_transfer x;
	struct sr_frame frame;

	if (begin(g, err) != 0)
		return -1;
	if (bytes > SIZE_MAX / g->n) {
		sr_error_set(err, SR_ECONFIG, SR_PHASE_COLLECTIVE,
		    "%zu bytes from each of %u members are more than this "
		    "machine can address", bytes, g->n);
		return bad_call(g, err);
	}
	own = all + (size_t)g->index * bytes;
	if (send != own && bytes > 0)
		memmove(own, send, bytes);
	if (g->n == 1)
		return 0;
	if (plan(g, g->n - 1, &x) != 0)
		return nomem(g, err);
	frame = frame_of(g, SR_FRAME_ALLGATHER, STEP_DIRECT);
	for (uint32_t k = 1; k < g->n; k++) {
		uint32_t from = (g->index + g->n - k) % g->n;

		add_send(&x, link_at(g, k), own, bytes, frame, -1);
		add_recv(&x, link_at(g, -(int64_t)k), all + (size_t)from * bytes,
		    bytes, frame);
	}
	x.whole = bytes <= SR_FRAME_MAX;
	return run(g, &x, err);
}

/*
 * Small: a star, the root sending to every member at once (one hop).
 * Large: a chain from the root round the group, forwarding each frame as
 * it arrives, so the root's link carries the bytes once instead of n-1
 * times (the ring's broadcast).  The star's root moves (n-1) x bytes:
 * small while that is below SR_FRAME_MAX, as the ring's small allreduce
 * is while it moves under about 128 KiB.
 */
int
sr_group_broadcast(struct sr_group *g, void *buf, size_t bytes,
    uint32_t root, struct sr_error *err)
{
	struct sr_transfer x;
	struct sr_frame frame;
	uint32_t place;

	if (begin(g, err) != 0)
		return -1;
	if (root >= g->n) {
		sr_error_set(err, SR_ECONFIG, SR_PHASE_COLLECTIVE,
		    "broadcast root %u is out of range for group %u of %u "
		    "members", root, g->id, g->n);
		return bad_call(g, err);
	}
	if (g->n == 1)
		return 0;
	if (plan(g, g->n - 1, &x) != 0)
		return nomem(g, err);
	if ((uint64_t)bytes * (g->n - 1) <= SR_FRAME_MAX) {
		frame = frame_of(g, SR_FRAME_BROADCAST, STEP_DIRECT + root);
		if (g->index == root)
			for (uint32_t k = 1; k < g->n; k++)
				add_send(&x, link_at(g, k), buf, bytes, frame,
				    -1);
		else
			add_recv(&x, g->ranks[root], buf, bytes, frame);
		x.whole = bytes <= SR_FRAME_MAX;
		return run(g, &x, err);
	}
	frame = frame_of(g, SR_FRAME_BROADCAST, STEP_RING + root);
	place = (g->index + g->n - root) % g->n;
	if (place > 0)
		add_recv(&x, link_at(g, -1), buf, bytes, frame);
	if (place + 1 < g->n)
		add_send(&x, link_at(g, 1), buf, bytes, frame,
		    place > 0 ? 0 : -1);
	return run(g, &x, err);
}

int
sr_group_shift(struct sr_group *g, const void *send, void *recv,
    size_t bytes, struct sr_error *err)
{
	struct sr_transfer x;
	struct sr_frame frame;

	if (begin(g, err) != 0)
		return -1;
	if (g->n == 1) {
		if (recv != NULL && recv != send && bytes > 0)
			memmove(recv, send, bytes);
		return 0;
	}
	if (plan(g, 1, &x) != 0)
		return nomem(g, err);
	frame = frame_of(g, SR_FRAME_SHIFT, 0);
	add_send(&x, link_at(g, 1), send, bytes, frame, -1);
	add_recv(&x, link_at(g, -1), recv, bytes, frame);
	return run(g, &x, err);
}

int
sr_group_link_transfer(struct sr_group *g, uint32_t from, void *buf,
    size_t bytes, size_t echo, struct sr_error *err)
{
	struct sr_transfer x;
	uint32_t to;

	if (begin(g, err) != 0)
		return -1;
	if (from >= g->n || echo > bytes) {
		sr_error_set(err, SR_ECONFIG, SR_PHASE_COLLECTIVE, "link test "
		    "from member %u (group %u of %u members) echoing %zu of "
		    "%zu bytes", from, g->id, g->n, echo, bytes);
		return bad_call(g, err);
	}
	to = (from + 1) % g->n;
	if (g->n == 1 || (g->index != from && g->index != to))
		return 0;
	if (plan(g, 1, &x) != 0)
		return nomem(g, err);
	if (g->index == from) {
		add_send(&x, g->ranks[to], buf, bytes,
		    frame_of(g, SR_FRAME_LINK, 0), -1);
		add_recv(&x, g->ranks[to], buf, echo,
		    frame_of(g, SR_FRAME_LINK, 1));
	} else {
		add_recv(&x, g->ranks[from], buf, bytes,
		    frame_of(g, SR_FRAME_LINK, 0));
		add_send(&x, g->ranks[from], buf, echo,
		    frame_of(g, SR_FRAME_LINK, 1), 0);
	}
	return run(g, &x, err);
}
