/*
 * test_group.c - groups on a mesh: real ranks (forked, ranks.h) on a mesh
 * built by hand, with no formation: the parent opens a socketpair for
 * every pair of ranks, and each child builds its ring with sr_ring_new,
 * marks it a mesh and opens a link to every other rank (links[r] leads to
 * rank r).  Covers mixed group and ring collectives with exact results,
 * broadcast from every member, members out of step, reductions of
 * different lengths, a member that exits, a group of one, the
 * configuration errors, and (one process playing the peers with raw
 * frames) frames of another group, or of a later collective, parked on a
 * link the collective is idle on.
 */
#include <errno.h>
#include <poll.h>
#include <sched.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>
#include <sys/ioctl.h>
#include <sys/socket.h>
#include <sys/wait.h>
#include <unistd.h>

#include "check.h"
#include "ranks.h"
#include "ring.h"
#include "transport.h"
#include "wire.h"

#define TOKEN 0x6e5e0000c0ffee15ULL
#define MEMBERS_MAX RANKS_MAX

/* pair_fd[a][b]: rank a's end of its link to rank b. */
static int pair_fd[RANKS_MAX][RANKS_MAX];
static bool mesh_integrity;
static const char *const mesh_addresses[RANKS_MAX] = { "rank-0", "rank-1",
	"rank-2", "rank-3", "rank-4", "rank-5", "rank-6", "rank-7" };

static int
mesh_pairs(uint32_t world)
{
	for (uint32_t a = 0; a < RANKS_MAX; a++)
		for (uint32_t b = 0; b < RANKS_MAX; b++)
			pair_fd[a][b] = -1;
	for (uint32_t a = 0; a < world; a++)
		for (uint32_t b = a + 1; b < world; b++) {
			int sv[2];

			if (socketpair(AF_UNIX, SOCK_STREAM, 0, sv) != 0) {
				CHECKF(0, "socketpair: %s", strerror(errno));
				return -1;
			}
			pair_fd[a][b] = sv[0];
			pair_fd[b][a] = sv[1];
		}
	return 0;
}

/* Closes every end but rank keep's (keep >= world: all of them). */
static void
mesh_close_pairs(uint32_t keep)
{
	for (uint32_t a = 0; a < RANKS_MAX; a++)
		for (uint32_t b = 0; b < RANKS_MAX; b++)
			if (a != keep && pair_fd[a][b] >= 0) {
				close(pair_fd[a][b]);
				pair_fd[a][b] = -1;
			}
}

/* What a mesh's formation would build, from one end of each pair. */
static struct sr_ring *
mesh_ring(uint32_t rank, uint32_t world, const int *fds,
    const struct sr_ring_options *options)
{
	struct sr_ring_options o = *options;
	struct sr_ring *ring;

	/* The option lists every link for the close and the abort. */
	o.mesh = true;
	if ((ring = sr_ring_new(rank, world, mesh_addresses, TOKEN, &o,
	    world)) == NULL)
		return NULL;
	/* Before any link opens: a mesh's links carry wide headers. */
	ring->mesh = true;
	for (uint32_t r = 0; r < world; r++)
		if (r != rank)
			sr_ring_set_link(ring, r, fds[r], r, NULL);
	sr_ring_set_neighbours(ring, (rank + 1) % world,
	    (rank + world - 1) % world);
	return ring;
}

/* ranks.h's join: this child's mesh. */
static int
mesh_join(struct rank_ctx *ctx, const struct sr_ring_options *options,
    struct sr_error *err)
{
	struct sr_ring_options o = *options;

	mesh_close_pairs(ctx->rank);
	o.integrity = mesh_integrity;
	ctx->ring = mesh_ring(ctx->rank, ctx->world, pair_fd[ctx->rank], &o);
	if (ctx->ring != NULL)
		return 0;
	sr_error_set(err, SR_ENOMEM, SR_PHASE_CONFIG, "out of memory");
	return -1;
}

/* Forks the job's ranks on a fresh mesh; -1 when that failed (checked). */
static int
mesh_start(struct ranks *r, struct ranks_job *job)
{
	int rc;

	job->join = mesh_join;
	if (job->deadline_ms == 0)
		job->deadline_ms = 120000;
	if (mesh_pairs(job->world) != 0) {
		mesh_close_pairs(RANKS_MAX);
		return -1;
	}
	rc = ranks_open(r, job) == 0 ? ranks_start(r) : -1;
	mesh_close_pairs(RANKS_MAX);
	return rc;
}

/* Runs scenario (with arg) on a fresh mesh of world ranks to its end;
 * false when the ranks could not start (a failed check). */
static bool
mesh_run(struct ranks *r, uint32_t world, int (*scenario)(struct rank_ctx *),
    const void *arg)
{
	struct ranks_job job = { .world = world, .scenario = scenario,
		.arg = arg };

	if (mesh_start(r, &job) != 0)
		return false;
	ranks_finish(r);
	return true;
}

/* ------------------------------------------------------- values, groups */

struct group_def {
	uint32_t id;
	uint32_t n;
	uint32_t ranks[MEMBERS_MAX];
};

static bool
is_member(const struct group_def *d, uint32_t rank, uint32_t *index)
{
	for (uint32_t i = 0; i < d->n; i++)
		if (d->ranks[i] == rank) {
			if (index != NULL)
				*index = i;
			return true;
		}
	return false;
}

/* Rank r's input element k for op: small integers, exact in every dtype
 * whatever the fold order (non-negative for the unsigned ones). */
static int64_t
input(enum sr_op op, enum sr_dtype dtype, uint32_t r, uint64_t k)
{
	bool unsig = dtype == SR_U64 || dtype == SR_U32;
	uint64_t h = r * 5 + k * 3;

	if (op == SR_PROD) {
		static const int64_t f[3] = { 2, -1, 1 };

		return unsig ? (int64_t)(h % 3) + 1 : f[h % 3];
	}
	return (int64_t)(h % 7) - (unsig ? 0 : 3);
}

static void
put_elem(void *buf, enum sr_dtype dtype, size_t i, int64_t v)
{
	switch (dtype) {
	case SR_F64: ((double *)buf)[i] = (double)v; break;
	case SR_F32: ((float *)buf)[i] = (float)v; break;
	case SR_I64: ((int64_t *)buf)[i] = v; break;
	case SR_I32: ((int32_t *)buf)[i] = (int32_t)v; break;
	case SR_U64: ((uint64_t *)buf)[i] = (uint64_t)v; break;
	default: ((uint32_t *)buf)[i] = (uint32_t)v; break;
	}
}

static int64_t
get_elem(const void *buf, enum sr_dtype dtype, size_t i)
{
	switch (dtype) {
	case SR_F64: return (int64_t)((const double *)buf)[i];
	case SR_F32: return (int64_t)((const float *)buf)[i];
	case SR_I64: return ((const int64_t *)buf)[i];
	case SR_I32: return ((const int32_t *)buf)[i];
	case SR_U64: return (int64_t)((const uint64_t *)buf)[i];
	default: return (int64_t)((const uint32_t *)buf)[i];
	}
}

static int64_t
fold(enum sr_op op, int64_t a, int64_t b)
{
	switch (op) {
	case SR_SUM: return a + b;
	case SR_MAX: return a > b ? a : b;
	case SR_MIN: return a < b ? a : b;
	default: return a * b;
	}
}

static uint8_t
byte_of(uint32_t rank, size_t i, uint32_t salt)
{
	return (uint8_t)(rank * 31 + i * 7 + salt * 13 + (i >> 8));
}

/* Creates the group d on this rank, or NULL (a failed check). */
static struct sr_group *
make_group(struct rank_ctx *ctx, const struct group_def *d)
{
	struct sr_group *g = NULL;
	struct sr_error err;
	uint32_t index = 0;

	if (!is_member(d, ctx->rank, &index))
		return NULL;
	RCHECK(ctx, sr_group_new(&g, ctx->ring, d->id, d->ranks, d->n,
	    &err) == 0, "group %u: %s", d->id, err.message);
	if (g != NULL) {
		RCHECK(ctx, sr_group_size(g) == d->n && sr_group_index(g) ==
		    index && sr_group_id(g) == d->id &&
		    sr_group_rank(g, index) == ctx->rank,
		    "group %u: size %u index %u", d->id, sr_group_size(g),
		    sr_group_index(g));
	}
	return g;
}

/* A scenario's end: with rc 0 the close (every rank must agree), then
 * its groups and buffers go. */
static int
scenario_end(struct rank_ctx *ctx, struct sr_group **g, int n, void *a,
    void *b, int rc)
{
	struct sr_error err;

	if (rc == 0 && sr_ring_finish(ctx->ring, &err) != 0)
		rc = rank_fail(ctx, &err);
	for (int i = 0; i < n; i++)
		sr_group_free(g[i]);
	free(a);
	free(b);
	return rc;
}

/* A collective failed: recorded, and the scenario stops. */
#define STOP_ON(ctx, call, err)                                                \
	do {                                                                   \
		if ((call) != 0)                                               \
			return rank_fail((ctx), &(err));                       \
	} while (0)

/* ------------------------------------------------ mixed collectives */

/* The four groups of the 4-rank mesh, interleaved with the ring's own
 * collectives: ranks 1 and 3 share C and D, 0 and 2 share A and B, and
 * every rank skips some, so frames of a group a rank is not in yet wait
 * on its links. */
static const struct group_def mixed[4] = {
	{ 1, 4, { 0, 1, 2, 3 } },
	{ 2, 2, { 0, 2 } },
	{ 3, 3, { 1, 2, 3 } },
	{ 4, 2, { 3, 1 } },
};

/* The sizes a mixed run walks; the last takes the large paths (and its
 * byte collectives 300000 bytes: a broadcast's chain). */
struct mixed_plan {
	const size_t *counts;
	size_t n;
};

static const size_t full_counts[] = { 1, 7, 3001, 40001 };
static const size_t trailer_counts[] = { 7, 40001 };

/*
 * One allreduce of count elements on g (NULL: the ring itself), checked
 * element by element against the fold over the members' inputs.
 */
static int
reduce_checked(struct rank_ctx *ctx, struct sr_group *g,
    const struct group_def *d, size_t count, enum sr_dtype dtype,
    enum sr_op op, bool in_place, uint8_t *send, uint8_t *recv)
{
	struct sr_error err;
	size_t wrong = 0, first = 0;
	int64_t want_first = 0;
	uint32_t n = d != NULL ? d->n : ctx->world;

	for (size_t k = 0; k < count; k++)
		put_elem(send, dtype, k, input(op, dtype, ctx->rank, k));
	if (in_place)
		memcpy(recv, send, count * sr_dtype_size(dtype));
	if (g != NULL)
		STOP_ON(ctx, sr_group_allreduce(g, in_place ? recv : send, recv,
		    count, dtype, op, &err), err);
	else
		STOP_ON(ctx, sr_allreduce(ctx->ring, in_place ? recv : send, recv,
		    count, dtype, op, &err), err);
	for (size_t k = 0; k < count; k++) {
		int64_t want = 0;

		for (uint32_t i = 0; i < n; i++) {
			int64_t v = input(op, dtype, d != NULL ? d->ranks[i] : i,
			    k);

			want = i == 0 ? v : fold(op, want, v);
		}
		if (get_elem(recv, dtype, k) != want && wrong++ == 0) {
			first = k;
			want_first = want;
		}
	}
	RCHECK(ctx, wrong == 0, "group %u allreduce %s %s of %zu: %zu wrong, "
	    "element %zu is %lld, expected %lld", d != NULL ? d->id : 0,
	    sr_op_name(op), sr_dtype_name(dtype), count, wrong, first,
	    (long long)get_elem(recv, dtype, first), (long long)want_first);
	return 0;
}

/* An f64 sum and max of inexact values: each member's bitwise result
 * goes into its report (aux[group]), to be compared across members. */
static int
reduce_inexact(struct rank_ctx *ctx, struct sr_group *g, uint32_t slot,
    size_t count, double *send, double *recv)
{
	struct sr_error err;

	for (size_t k = 0; k < count; k++)
		send[k] = 0.1 * ctx->rank + 1e-3 * (double)k +
		    1.0 / (ctx->rank + 3.0 + (double)k);
	for (int op = SR_SUM; op <= SR_MAX; op++) {
		STOP_ON(ctx, sr_group_allreduce(g, send, recv, count, SR_F64,
		    (enum sr_op)op, &err), err);
		ctx->report->aux[slot] = (int64_t)fnv1a64(
		    (uint64_t)ctx->report->aux[slot], recv, count * 8);
	}
	return 0;
}

/* Allgather, broadcast from every member, shift, link test and barrier
 * on g, of `bytes` each, every byte checked. */
static int
bytes_checked(struct rank_ctx *ctx, struct sr_group *g,
    const struct group_def *d, size_t bytes, uint8_t *send, uint8_t *recv)
{
	struct sr_error err;
	uint32_t me = sr_group_index(g), n = d->n;
	size_t wrong = 0;

	for (size_t i = 0; i < bytes; i++)
		send[i] = byte_of(ctx->rank, i, 1);
	STOP_ON(ctx, sr_group_allgather(g, send, bytes, recv, &err), err);
	for (uint32_t j = 0; j < n; j++)
		for (size_t i = 0; i < bytes; i++)
			wrong += recv[j * bytes + i] != byte_of(d->ranks[j], i, 1);
	RCHECK(ctx, wrong == 0, "group %u allgather of %zu: %zu wrong bytes",
	    d->id, bytes, wrong);
	for (uint32_t root = 0; root < n; root++) {
		for (size_t i = 0; i < bytes; i++)
			recv[i] = me == root ? byte_of(ctx->rank, i, 2 + root) :
			    0xee;
		STOP_ON(ctx, sr_group_broadcast(g, recv, bytes, root, &err),
		    err);
		wrong = 0;
		for (size_t i = 0; i < bytes; i++)
			wrong += recv[i] != byte_of(d->ranks[root], i, 2 + root);
		RCHECK(ctx, wrong == 0, "group %u broadcast of %zu from member "
		    "%u: %zu wrong bytes", d->id, bytes, root, wrong);
	}
	STOP_ON(ctx, sr_group_shift(g, send, recv, bytes, &err), err);
	wrong = 0;
	for (size_t i = 0; i < bytes; i++)
		wrong += recv[i] != byte_of(d->ranks[(me + n - 1) % n], i, 1);
	RCHECK(ctx, wrong == 0, "group %u shift of %zu: %zu wrong bytes",
	    d->id, bytes, wrong);
	for (uint32_t from = 0; from < n; from++) {
		size_t echo = bytes / 2;

		for (size_t i = 0; i < bytes; i++)
			recv[i] = byte_of(ctx->rank, i, 40 + from);
		STOP_ON(ctx, sr_group_link_transfer(g, from, recv, bytes, echo,
		    &err), err);
		wrong = 0;
		/* The receiver holds the sender's bytes; the sender gets
		 * them back, the first `echo` of them. */
		if (n > 1 && me == (from + 1) % n)
			for (size_t i = 0; i < bytes; i++)
				wrong += recv[i] != byte_of(d->ranks[from], i,
				    40 + from);
		else if (n > 1 && me == from)
			for (size_t i = 0; i < echo; i++)
				wrong += recv[i] != byte_of(ctx->rank, i,
				    40 + from);
		RCHECK(ctx, wrong == 0, "group %u link test from member %u: "
		    "%zu wrong bytes", d->id, from, wrong);
	}
	STOP_ON(ctx, sr_group_barrier(g, &err), err);
	return 0;
}

static int
mixed_scenario(struct rank_ctx *ctx)
{
	const struct mixed_plan *plan = ctx->job->arg;
	struct sr_group *g[4];
	size_t big = 40001 * 8 * 4;
	uint8_t *send = malloc(big), *recv = malloc(big);
	struct sr_error err;
	int rc = 0;

	for (int i = 0; i < 4; i++)
		g[i] = make_group(ctx, &mixed[i]);
	for (size_t c = 0; c < plan->n && rc == 0; c++) {
		size_t count = plan->counts[c];

		for (int dt = 0; dt < SR_DTYPE_COUNT && rc == 0; dt++)
			for (int op = 0; op < SR_OP_COUNT && rc == 0; op++) {
				bool in_place = (c + (size_t)dt + (size_t)op) % 2;

				/* The whole ring's group first, then the
				 * ring's own allreduce, then the others. */
				for (int i = -1; i < 4 && rc == 0; i++) {
					int k = i < 0 ? 0 : i;

					if (i == 0 || g[k] == NULL)
						continue;
					rc = reduce_checked(ctx, i < 0 ? g[0] :
					    g[k], &mixed[k], count,
					    (enum sr_dtype)dt, (enum sr_op)op,
					    in_place, send, recv);
					if (rc == 0 && i < 0)
						rc = reduce_checked(ctx, NULL,
						    NULL, count,
						    (enum sr_dtype)dt,
						    (enum sr_op)op, !in_place,
						    send, recv);
				}
			}
		for (int i = 0; i < 4 && rc == 0; i++)
			if (g[i] != NULL)
				rc = reduce_inexact(ctx, g[i], (uint32_t)i, count,
				    (double *)send, (double *)recv);
		/* Bytes: a star and (300000 bytes) a chain for broadcasts. */
		for (int i = 0; i < 4 && rc == 0; i++)
			if (g[i] != NULL)
				rc = bytes_checked(ctx, g[i], &mixed[i],
				    c + 1 < plan->n ? count : 300000, send,
				    recv);
		if (rc == 0 && sr_barrier(ctx->ring, &err) != 0)
			rc = rank_fail(ctx, &err);
	}
	return scenario_end(ctx, g, 4, send, recv, rc);
}

/* Every member's inexact results were bitwise the same. */
static void
check_identical(const struct ranks *r, const struct group_def *defs, int n)
{
	for (int k = 0; k < n; k++) {
		uint32_t first = defs[k].ranks[0];

		for (uint32_t i = 1; i < defs[k].n; i++)
			CHECKF(r->report[defs[k].ranks[i]].aux[k] ==
			    r->report[first].aux[k], "group %u: rank %u's "
			    "results differ from rank %u's", defs[k].id,
			    defs[k].ranks[i], first);
	}
}

/* With integrity trailers on every frame too (fewer sizes: every path
 * once). */
static void
test_mixed_groups(void)
{
	static const struct mixed_plan plans[2] = {
		{ full_counts, sizeof(full_counts) / sizeof(full_counts[0]) },
		{ trailer_counts,
		    sizeof(trailer_counts) / sizeof(trailer_counts[0]) },
	};

	for (int integrity = 0; integrity < 2; integrity++) {
		struct ranks r;

		mesh_integrity = integrity;
		if (!mesh_run(&r, 4, mixed_scenario, &plans[integrity]))
			break;
		ranks_check_clean(&r, 0xf, true);
		check_identical(&r, mixed, 4);
	}
	mesh_integrity = false;
}


/* --------------------------------------- groups of 5 to 8 members */

/* Recursive doubling with 1, 2 and 3 paired members and 8 in all, and
 * the ring inside groups of those sizes, on an 8-rank mesh; members in
 * another order than the ranks'. */
static const struct group_def wide[4] = {
	{ 11, 5, { 0, 1, 2, 3, 4 } },
	{ 12, 6, { 7, 6, 5, 4, 3, 2 } },
	{ 13, 7, { 1, 3, 5, 7, 0, 2, 4 } },
	{ 14, 8, { 0, 1, 2, 3, 4, 5, 6, 7 } },
};

static int
wide_scenario(struct rank_ctx *ctx)
{
	static const size_t counts[] = { 3, 1025, 20001 };
	struct sr_group *g[4];
	uint8_t *send = malloc(20001 * 8), *recv = malloc(20001 * 8);
	struct sr_error err;
	int rc = 0;

	for (int i = 0; i < 4; i++)
		g[i] = make_group(ctx, &wide[i]);
	for (size_t c = 0; c < 3 && rc == 0; c++)
		for (int i = 0; i < 4 && rc == 0; i++) {
			if (g[i] == NULL)
				continue;
			for (int op = 0; op < SR_OP_COUNT && rc == 0; op++)
				rc = reduce_checked(ctx, g[i], &wide[i],
				    counts[c], op % 2 ? SR_I32 : SR_F64,
				    (enum sr_op)op, op == SR_MAX, send, recv);
			if (rc == 0)
				rc = reduce_inexact(ctx, g[i], (uint32_t)i,
				    counts[c], (double *)send, (double *)recv);
			if (rc == 0 && sr_group_barrier(g[i], &err) != 0)
				rc = rank_fail(ctx, &err);
		}
	return scenario_end(ctx, g, 4, send, recv, rc);
}

static void
test_wide_groups(void)
{
	struct ranks r;

	if (!mesh_run(&r, 8, wide_scenario, NULL))
		return;
	ranks_check_clean(&r, 0xff, true);
	check_identical(&r, wide, 4);
}

/* ------------------------------------------------------ failures */

static bool
contains(const char *haystack, const char *needle)
{
	return strstr(haystack, needle) != NULL;
}

/* The rank that found the failure (this one, or an abort's origin). */
static int64_t
finder(const struct ranks *r, uint32_t i)
{
	return r->report[i].err.origin >= 0 ? r->report[i].err.origin : i;
}

/* Every rank in mask failed with code; returns how many of them found
 * it themselves. */
static int
all_failed(const struct ranks *r, uint32_t mask, enum sr_code code)
{
	int found = 0;

	for (uint32_t i = 0; i < r->job.world; i++) {
		const struct rank_report *rep = &r->report[i];

		if (!(mask >> i & 1))
			continue;
		CHECKF(r->reported[i] && rep->rc == -1 && rep->err.code == code,
		    "rank %u: rc %d code %s: %s", i, rep->rc,
		    sr_code_name(rep->err.code), rep->err.message);
		found += rep->err.origin < 0;
	}
	return found;
}

struct step_plan {
	uint32_t odd;		/* the rank that takes another path */
	int odd_kind;		/* what it runs instead */
};

/*
 * Group {0,1,2,3}: one allreduce, but rank `odd` runs an allgather
 * instead; then a ring barrier, which the failure fails too.
 */
static int
step_scenario(struct rank_ctx *ctx)
{
	const struct step_plan *plan = ctx->job->arg;
	struct sr_group *g = make_group(ctx, &mixed[0]);
	double v[4] = { 1, 2, 3, 4 }, all[16];
	struct sr_error err;
	int rc;

	if (g == NULL)
		return -1;
	if (ctx->rank == plan->odd && plan->odd_kind == SR_FRAME_ALLGATHER)
		rc = sr_group_allgather(g, v, sizeof(v), all, &err);
	else if (ctx->rank == plan->odd)
		rc = sr_group_broadcast(g, v, sizeof(v), 1, &err);
	else
		rc = sr_group_allreduce(g, v, v, 4, SR_F64, SR_SUM, &err);
	if (rc == 0)
		rc = sr_barrier(ctx->ring, &err);
	sr_group_free(g);
	return rc == 0 ? 0 : rank_fail(ctx, &err);
}

static void
test_out_of_step(void)
{
	static const struct step_plan plans[] = {
		{ 3, SR_FRAME_ALLGATHER }, { 0, SR_FRAME_BROADCAST },
	};

	for (size_t p = 0; p < sizeof(plans) / sizeof(plans[0]); p++) {
		uint32_t odd = plans[p].odd;
		const char *kind = plans[p].odd_kind == SR_FRAME_ALLGATHER ?
		    "allgather" : "broadcast";
		struct ranks r;
		int found;

		if (!mesh_run(&r, 4, step_scenario, &plans[p]))
			return;
		ranks_check_clean(&r, 0xf, false);
		found = all_failed(&r, 0xf, SR_EOUT_OF_STEP);
		CHECKF(found > 0, "plan %zu: no rank found the failure itself", p);
		for (uint32_t i = 0; i < 4; i++) {
			const struct sr_error *e = &r.report[i].err;

			/* Who found it, or whom it blames, is the odd one;
			 * the message names both frames. */
			CHECKF(finder(&r, i) == odd || e->peer == odd,
			    "plan %zu: rank %u blames rank %lld (found by %lld): "
			    "%s", p, i, (long long)e->peer,
			    (long long)finder(&r, i), e->message);
			CHECKF(contains(e->message, "out of step") &&
			    contains(e->message, "allreduce sum f64") &&
			    contains(e->message, kind) &&
			    contains(e->message, "group 1"),
			    "plan %zu: rank %u: %s", p, i, e->message);
			if (e->origin < 0 && i != odd)
				CHECKF(e->peer == odd, "plan %zu: rank %u found "
				    "it but names rank %lld", p, i,
				    (long long)e->peer);
		}
	}
}

struct length_plan {
	size_t count, odd_count;
	bool gather;
	uint32_t odd;		/* the rank of odd_count */
};

/* Group {1,2,3} reduces (or gathers) count f64, but rank plan->odd
 * (3) odd_count; rank 0, outside it, then fails in the ring's barrier. */
static int
length_scenario(struct rank_ctx *ctx)
{
	const struct length_plan *plan = ctx->job->arg;
	struct sr_group *g = make_group(ctx, &mixed[2]);
	size_t count = ctx->rank == plan->odd ? plan->odd_count : plan->count;
	double *v = calloc(plan->count + plan->odd_count, 8 * 3);
	struct sr_error err;
	int rc = 0;

	if (g != NULL && plan->gather)
		rc = sr_group_allgather(g, v, count * 8, v + count, &err);
	else if (g != NULL)
		rc = sr_group_allreduce(g, v, v, count, SR_F64, SR_SUM, &err);
	if (rc == 0)
		rc = sr_barrier(ctx->ring, &err);
	sr_group_free(g);
	free(v);
	return rc == 0 ? 0 : rank_fail(ctx, &err);
}

/* After plan p ran on world ranks, odd the one of the other length:
 * every rank failed out of step (one found it itself) with both
 * lengths in its message, and odd is one end of them. */
static void
lengths_named(struct ranks *r, uint32_t world, uint32_t odd,
    const struct length_plan *plan, size_t p)
{
	uint32_t all = (1u << world) - 1;
	char mine[64], theirs[64];

	if (plan->gather) {
		snprintf(mine, sizeof(mine), "%zu bytes on", plan->count * 8);
		snprintf(theirs, sizeof(theirs), "%zu bytes on",
		    plan->odd_count * 8);
	} else {
		snprintf(mine, sizeof(mine), "%zu bytes (%zu f64)",
		    plan->count * 8, plan->count);
		snprintf(theirs, sizeof(theirs), "%zu bytes (%zu f64)",
		    plan->odd_count * 8, plan->odd_count);
	}
	ranks_check_clean(r, all, false);
	CHECKF(all_failed(r, all, SR_EOUT_OF_STEP) > 0, "plan %zu: no rank "
	    "found the failure itself", p);
	for (uint32_t i = 0; i < world; i++) {
		const struct sr_error *e = &r->report[i].err;

		CHECKF(contains(e->message, plan->gather ?
		    "contributions of different lengths" :
		    "reductions of different lengths") &&
		    contains(e->message, mine) && contains(e->message, theirs),
		    "plan %zu: rank %u: %s", p, i, e->message);
		CHECKF(finder(r, i) == odd || e->peer == odd, "plan %zu: "
		    "rank %u: %s", p, i, e->message);
	}
}

/* Every rank, rank 0 too (from the abort), has both lengths. */
static void
test_different_lengths(void)
{
	static const struct length_plan plans[] = {
		{ 1, 2, false, 3 }, { 20000, 20001, false, 3 },
		{ 3, 5, true, 3 },
	};

	for (size_t p = 0; p < sizeof(plans) / sizeof(plans[0]); p++) {
		struct ranks r;

		if (!mesh_run(&r, 4, length_scenario, &plans[p]))
			return;
		lengths_named(&r, 4, 3, &plans[p], p);
	}
}

/* The whole ring reduces count f64, but rank plan->odd odd_count. */
static int
whole_length_scenario(struct rank_ctx *ctx)
{
	const struct length_plan *plan = ctx->job->arg;
	size_t count = ctx->rank == plan->odd ? plan->odd_count : plan->count;
	double *v = calloc(plan->count + plan->odd_count, 8);
	struct sr_error err;
	int rc;

	rc = sr_allreduce(ctx->ring, v, v, count, SR_F64, SR_SUM, &err);
	free(v);
	return rc == 0 ? 0 : rank_fail(ctx, &err);
}

/* On a mesh of 8 (recursive halving, then doubling), lengths whose
 * halves match (8001 elements cut as 8000 are) and whose halves do not:
 * every rank fails out of step with both lengths, and rank 5 is one end
 * of them. */
static void
test_halving_different_lengths(void)
{
	static const struct length_plan plans[] = {
		{ 8000, 8001, false, 5 }, { 8000, 12000, false, 5 },
	};

	for (size_t p = 0; p < sizeof(plans) / sizeof(plans[0]); p++) {
		struct ranks r;

		if (!mesh_run(&r, 8, whole_length_scenario, &plans[p]))
			return;
		lengths_named(&r, 8, 5, &plans[p], p);
	}
}

/* What this rank has sent on the link to the previous rank, every
 * stream of it. */
static uint64_t
sent_to_prev(struct sr_ring *ring)
{
	uint64_t sent = 0;

	for (uint32_t s = 0; s < ring->streams; s++)
		sent += sr_ring_stream(ring, ring->prev, s)->tx_bytes;
	return sent;
}

/* A ring of 4: allreduces either side of halving's limits (256 KiB the
 * ring, from 256 KiB + 8 to 4 MiB halving, past it the ring again),
 * exact out of place and in place, and halving's sends seen on the link
 * to the previous rank, which the ring never sends on. */
static int
ring4_halving_scenario(struct rank_ctx *ctx)
{
	static const size_t counts[] = { 32768, 32769, 300001, 524288,
		524289 };
	struct sr_error err;

	for (size_t c = 0; c < sizeof(counts) / sizeof(counts[0]); c++) {
		size_t n = counts[c];
		bool halving = n > 32768 && n <= 524288;
		double *v = calloc(2 * n, sizeof(*v));
		double *out = v + n;

		RCHECK(ctx, v != NULL, "out of memory");
		if (v == NULL)
			return -1;
		for (int place = 0; place < 2; place++) {
			uint64_t sent = sent_to_prev(ctx->ring);
			double *into = place ? v : out;
			size_t wrong = 0;

			for (size_t i = 0; i < n; i++) {
				v[i] = (double)(ctx->rank * n + i);
				out[i] = -1;
			}
			if (sr_allreduce(ctx->ring, v, into, n, SR_F64, SR_SUM,
			    &err) != 0) {
				free(v);
				return rank_fail(ctx, &err);
			}
			for (size_t i = 0; i < n; i++)
				wrong += into[i] != (double)(6 * n + 4 * i) ||
				    (!place && v[i] != (double)(ctx->rank * n +
				    i));
			RCHECK(ctx, wrong == 0, "%zu f64 (%s): %zu wrong (or "
			    "the input changed)", n, place ? "in place" :
			    "out of place", wrong);
			sent = sent_to_prev(ctx->ring) - sent;
			RCHECK(ctx, (sent >= n * 8 / 4) == halving, "%zu f64: "
			    "%llu bytes to the previous rank, halving %s", n,
			    (unsigned long long)sent, halving ? "expected" :
			    "not expected");
		}
		free(v);
	}
	return 0;
}

/* On a plain ring of 4, with one stream and with three (frames
 * checked), and on a mesh of 4, whose halving takes the same links. */
static void
test_ring4_halving(void)
{
	struct ranks r;

	for (uint32_t k = 1; k <= 3; k += 2) {
		struct ranks_job job = { .world = 4, .deadline_ms = 120000,
			.scenario = ring4_halving_scenario, .streams = k,
			.integrity = k > 1 };

		if (ranks_open(&r, &job) != 0 || ranks_start(&r) != 0)
			return;
		ranks_finish(&r);
		ranks_check_clean(&r, 0xf, true);
	}
	if (!mesh_run(&r, 4, ring4_halving_scenario, NULL))
		return;
	ranks_check_clean(&r, 0xf, true);
}

/* On a plain ring of 4 (from 256 KiB, recursive halving on its links:
 * 0-3 and 1-2, then 0-1 and 3-2), halving's partners find other lengths
 * as a mesh's do: every rank out of step, both lengths named, rank 2 one
 * end of them (40000 and 40001 elements cut into the same blocks, and
 * halves that do not match). */
static void
test_ring4_halving_different_lengths(void)
{
	static const struct length_plan plans[] = {
		{ 40000, 40001, false, 2 }, { 40000, 60000, false, 2 },
	};

	for (size_t p = 0; p < sizeof(plans) / sizeof(plans[0]); p++) {
		struct ranks_job job = { .world = 4, .deadline_ms = 120000,
			.scenario = whole_length_scenario,
			.arg = &plans[p] };
		struct ranks r;

		if (ranks_open(&r, &job) != 0 || ranks_start(&r) != 0)
			return;
		ranks_finish(&r);
		lengths_named(&r, 4, 2, &plans[p], p);
	}
}

/*
 * Group {0,1,2} runs allreduces until one fails; the parent kills rank 2
 * once the first is through.  Rank 3, outside the group, waits in a ring
 * barrier meanwhile (it hears the members' heartbeats on its links).
 */
static int
exit_scenario(struct rank_ctx *ctx)
{
	static const struct group_def trio = { 21, 3, { 0, 1, 2 } };
	struct sr_group *g = make_group(ctx, &trio);
	size_t count = ctx->job->arg != NULL ? 40000 : 3;
	double *v = calloc(count, 8);
	struct sr_error err;
	int rc = 0;

	for (int i = 0; g != NULL && rc == 0 && i < 1000000; i++) {
		rc = sr_group_allreduce(g, v, v, count, SR_F64, SR_MAX, &err);
		if (i == 0)
			rank_event(ctx, RANK_EV_ITER);
	}
	if (g == NULL)
		rc = sr_barrier(ctx->ring, &err);
	sr_group_free(g);
	free(v);
	return rc == 0 ? 0 : rank_fail(ctx, &err);
}

static void
test_member_exits(void)
{
	for (int large = 0; large < 2; large++) {
		struct ranks_job job = { .world = 4, .scenario = exit_scenario,
			.arg = large ? &job : NULL };
		struct ranks r;

		if (mesh_start(&r, &job) != 0)
			return;
		CHECKF(ranks_wait_event(&r, 0x7, RANK_EV_ITER, 1, r.deadline_ns),
		    "the group never finished an allreduce");
		ranks_kill(&r, 2, SIGKILL);
		ranks_finish(&r);
		ranks_check_clean(&r, 0xb, false);
		CHECKF(r.reaped[2] && WIFSIGNALED(r.wstatus[2]), "rank 2 was "
		    "not killed");
		for (uint32_t i = 0; i < 4; i++) {
			const struct sr_error *e = &r.report[i].err;

			if (i == 2)
				continue;
			CHECKF(r.report[i].rc == -1 && e->code ==
			    SR_EPEER_CLOSED && e->peer == 2 &&
			    contains(e->message, "rank 2 (rank-2)"),
			    "large %d: rank %u: %s (%s, peer %lld)", large, i,
			    e->message, sr_code_name(e->code),
			    (long long)e->peer);
		}
	}
}

/*
 * The same, but rank 2 stops (SIGSTOP) instead: the members and rank 3
 * time out on its silence, each naming it, within the 3 s timeout (the
 * others keep one another alive with heartbeats).
 */
static void
test_member_stops(void)
{
	struct ranks_job job = { .world = 4, .scenario = exit_scenario,
		.timeout_ms = 3000 };
	struct ranks r;

	if (mesh_start(&r, &job) != 0)
		return;
	CHECKF(ranks_wait_event(&r, 0x7, RANK_EV_ITER, 1, r.deadline_ns),
	    "the group never finished an allreduce");
	ranks_kill(&r, 2, SIGSTOP);
	ranks_wait_reports(&r, 0xb, r.deadline_ns);
	ranks_kill(&r, 2, SIGKILL);
	ranks_finish(&r);
	ranks_check_clean(&r, 0xb, false);
	for (uint32_t i = 0; i < 4; i++) {
		const struct sr_error *e = &r.report[i].err;

		if (i == 2)
			continue;
		CHECKF(r.report[i].rc == -1 && e->code == SR_ETIMEOUT &&
		    e->peer == 2 && contains(e->message, "rank 2 (rank-2)") &&
		    contains(e->message, "timed out after 3s"),
		    "rank %u: %s (%s, peer %lld)", i, e->message,
		    sr_code_name(e->code), (long long)e->peer);
	}
}

/*
 * Ranks 0, 1 and 2 run group allreduces for 1.2 timeouts while rank 3,
 * outside the group, waits for them in a ring barrier: the members'
 * transfers list their ring neighbours' links, so rank 3 hears their
 * heartbeats and does not time out; then all close cleanly.
 */
static int
busy_scenario(struct rank_ctx *ctx)
{
	static const struct group_def trio = { 22, 3, { 0, 1, 2 } };
	struct sr_group *g = make_group(ctx, &trio);
	int64_t until = ranks_now_ns() + 3600LL * 1000000;
	double done = 0;
	struct sr_error err;
	int rc = 0;

	/* The members stop together: once any of them has seen 3.6 s. */
	while (g != NULL && rc == 0 && done == 0) {
		done = ranks_now_ns() >= until;
		rc = sr_group_allreduce(g, &done, &done, 1, SR_F64, SR_MAX,
		    &err);
	}
	if (rc != 0)
		rank_fail(ctx, &err);
	if (rc == 0 && (rc = sr_barrier(ctx->ring, &err)) != 0)
		rank_fail(ctx, &err);
	return scenario_end(ctx, &g, 1, NULL, NULL, rc);
}

static void
test_heartbeats_across_groups(void)
{
	struct ranks_job job = { .world = 4, .scenario = busy_scenario,
		.timeout_ms = 3000 };
	struct ranks r;

	if (mesh_start(&r, &job) != 0)
		return;
	ranks_finish(&r);
	ranks_check_clean(&r, 0xf, true);
}

/* A group of one copies, and counts its collectives. */
static int
alone_scenario(struct rank_ctx *ctx)
{
	static const struct group_def one = { 31, 1, { 2 } };
	struct sr_group *g = make_group(ctx, &one);
	uint8_t a[16], b[16];
	struct sr_error err;

	if (g != NULL) {
		for (int i = 0; i < 16; i++)
			a[i] = (uint8_t)(i * 3 + 1);
		STOP_ON(ctx, sr_group_allreduce(g, a, b, 2, SR_I64, SR_SUM,
		    &err), err);
		RCHECK(ctx, memcmp(a, b, 16) == 0, "allreduce of one");
		memset(b, 0, 16);
		STOP_ON(ctx, sr_group_allgather(g, a, 16, b, &err), err);
		RCHECK(ctx, memcmp(a, b, 16) == 0, "allgather of one");
		STOP_ON(ctx, sr_group_broadcast(g, b, 16, 0, &err), err);
		STOP_ON(ctx, sr_group_barrier(g, &err), err);
		memset(b, 0, 16);
		STOP_ON(ctx, sr_group_shift(g, a, b, 16, &err), err);
		RCHECK(ctx, memcmp(a, b, 16) == 0, "shift of one");
		STOP_ON(ctx, sr_group_link_transfer(g, 0, b, 16, 4, &err),
		    err);
		RCHECK(ctx, memcmp(a, b, 16) == 0 && sr_group_size(g) == 1 &&
		    sr_group_index(g) == 0, "link test of one");
		RCHECK(ctx, sr_group_broadcast(g, b, 16, 1, &err) == -1 &&
		    err.code == SR_ECONFIG && contains(err.message, "broadcast "
		    "root 1 is out of range for group 31 of 1 members"),
		    "%s", err.message);
	}
	STOP_ON(ctx, sr_barrier(ctx->ring, &err), err);
	STOP_ON(ctx, sr_ring_finish(ctx->ring, &err), err);
	sr_group_free(g);
	return 0;
}

static void
test_group_of_one(void)
{
	struct ranks r;

	if (!mesh_run(&r, 4, alone_scenario, NULL))
		return;
	ranks_check_clean(&r, 0xf, true);
}

/*
 * Group {0,2}: rank 0 broadcasts, rank 2 never takes part; nothing waits
 * on the frame, so only the close can tell: on a mesh it reads every
 * link, and the frame left there fails it.
 */
static int
unread_scenario(struct rank_ctx *ctx)
{
	struct sr_group *g = make_group(ctx, &mixed[1]);
	uint8_t buf[32] = { 0 };
	struct sr_error err;

	if (g != NULL && ctx->rank == 0)
		STOP_ON(ctx, sr_group_broadcast(g, buf, sizeof(buf), 0, &err),
		    err);
	STOP_ON(ctx, sr_barrier(ctx->ring, &err), err);
	sr_group_free(g);
	STOP_ON(ctx, sr_ring_finish(ctx->ring, &err), err);
	return 0;
}

static void
test_unread_at_close(void)
{
	struct ranks r;

	if (!mesh_run(&r, 4, unread_scenario, NULL))
		return;
	ranks_check_clean(&r, 0xf, false);
	all_failed(&r, 0xf, SR_EOUT_OF_STEP);
	CHECKF(contains(r.report[2].err.message, "out of step at the close") &&
	    contains(r.report[2].err.message, "broadcast step 0 seq 1 group 2") &&
	    r.report[2].err.peer == 0, "rank 2: %s", r.report[2].err.message);
}


/* ----------------------------------------- configuration, by hand */

/* Rank 0 of a 4-rank mesh in this process, with links to ranks 1 and 2
 * (far[1], far[2]) and none to rank 3. */
static struct sr_ring *
partial_mesh(int far[3], bool mesh)
{
	struct sr_ring_options options;
	struct sr_ring *ring;

	sr_ring_options_init(&options);
	options.timeout_ms = 5000;
	options.mesh = mesh;
	ring = sr_ring_new(0, 4, mesh_addresses, TOKEN, &options, 4);
	if (ring == NULL)
		return NULL;
	for (uint32_t p = 1; p <= 2; p++) {
		int sv[2];

		if (socketpair(AF_UNIX, SOCK_STREAM, 0, sv) != 0)
			return ring;
		sr_ring_set_link(ring, p, sv[0], p, NULL);
		far[p] = sv[1];
	}
	sr_ring_set_neighbours(ring, 1, 3);
	return ring;
}

static void
partial_close(struct sr_ring *ring, int far[3])
{
	for (int p = 1; p <= 2; p++)
		if (far[p] >= 0)
			close(far[p]);
	sr_ring_close(ring);
}

/* sr_group_new fails with SR_ECONFIG and exactly `want`. */
static void
refused(struct sr_ring *ring, uint32_t id, const uint32_t *ranks, size_t n,
    const char *want)
{
	struct sr_group *g = (struct sr_group *)&g;
	struct sr_error err;

	CHECKF(sr_group_new(&g, ring, id, ranks, n, &err) == -1 && g == NULL &&
	    err.code == SR_ECONFIG && err.phase == SR_PHASE_CONFIG &&
	    strcmp(err.message, want) == 0 &&
	    err.rank == (ring != NULL ? 0 : -1),
	    "group %u: got '%s' (%s), want '%s'", id, err.message,
	    sr_code_name(err.code), want);
}

static void
test_config_errors(void)
{
	static const uint32_t pair[2] = { 0, 1 }, other[2] = { 0, 2 };
	int far[3] = { -1, -1, -1 }, plain_far[3] = { -1, -1, -1 };
	struct sr_ring *ring = partial_mesh(far, true);
	struct sr_ring *plain = partial_mesh(plain_far, false);
	struct sr_group *g = NULL, *h = NULL;
	struct sr_error err;
	uint64_t v = 1;

	if (ring == NULL || plain == NULL || far[2] < 0 || plain_far[2] < 0) {
		CHECKF(0, "building the rings: %s", strerror(errno));
		return;
	}
	refused(NULL, 5, pair, 2, "no ring (sr_ring_connect failed or was "
	    "not called)");
	refused(plain, 5, pair, 2, "group 5 needs a mesh (a link from every "
	    "rank to every other); this ring has links to its two neighbours "
	    "only");
	refused(ring, 0, pair, 2, "group id 0 is the whole ring's; a group "
	    "needs another id");
	refused(ring, 5, pair, 0, "group 5 has no ranks");
	refused(ring, 5, NULL, 2, "group 5 has no ranks");
	refused(ring, 5, (const uint32_t[]){ 0, 4 }, 2, "group 5: rank 4 "
	    "(member 1 of '0 4') is out of range for a world of 4");
	refused(ring, 5, (const uint32_t[]){ 0, 1, 0 }, 3, "group 5: rank 0 "
	    "is listed twice (members 0 and 2 of '0 1 0')");
	refused(ring, 5, (const uint32_t[]){ 1, 2 }, 2, "group 5: this rank "
	    "(0) is not among its ranks '1 2'");
	refused(ring, 5, (const uint32_t[]){ 0, 3 }, 2, "group 5: this rank "
	    "has no link to rank 3");
	CHECKF(sr_group_new(&g, ring, 5, pair, 2, &err) == 0 && g != NULL,
	    "group 5: %s", err.message);
	refused(ring, 5, other, 2, "group id 5 is already used by a group of "
	    "this rank's (free it first)");
	CHECKF(sr_group_new(&h, ring, 6, other, 2, &err) == 0, "group 6: %s",
	    err.message);
	sr_group_free(g);
	CHECKF(sr_group_new(&g, ring, 5, other, 2, &err) == 0 &&
	    sr_group_index(g) == 0 && sr_group_rank(g, 1) == 2 &&
	    sr_group_rank(g, 2) == SR_NO_RANK, "group 5 again: %s",
	    err.message);
	/* Calls that cannot be made fail alone, as the ring's do. */
	CHECKF(sr_group_allreduce(NULL, &v, &v, 1, SR_U64, SR_SUM, &err) == -1 &&
	    err.code == SR_ECONFIG && strcmp(err.message, "no group "
	    "(sr_group_new failed or was not called)") == 0, "%s", err.message);
	CHECKF(sr_group_allreduce(g, &v, &v, 1, (enum sr_dtype)99, SR_SUM,
	    &err) == -1 && err.code == SR_ECONFIG && err.rank == 0 &&
	    strcmp(err.message, "unknown dtype 99 or op 0") == 0, "%s",
	    err.message);
	CHECKF(sr_group_link_transfer(g, 2, &v, 8, 0, &err) == -1 &&
	    err.code == SR_ECONFIG && strcmp(err.message, "link test from "
	    "member 2 (group 5 of 2 members) echoing 0 of 8 bytes") == 0, "%s",
	    err.message);
	CHECKF(sr_group_link_transfer(g, 0, &v, 8, 9, &err) == -1 &&
	    err.code == SR_ECONFIG, "%s", err.message);
	CHECK(!ring->failed);
	sr_group_free(g);
	sr_group_free(h);
	sr_group_free(NULL);
	partial_close(ring, far);
	partial_close(plain, plain_far);
}

/* ------------------------------------------------- parked frames */

/* The steps group.c's frames carry (its table): recursive doubling's
 * pairing, hops and result back, and a broadcast star's root. */
#define STEP_PAIRING 0x100u
#define STEP_HOP(h) (0x101u + (h))

static int
put_frame(int fd, struct sr_frame f, const void *payload)
{
	uint8_t buf[SR_FRAME_WIDE_LEN + 64];

	sr_frame_encode_wide(&f, buf);
	memcpy(buf + SR_FRAME_WIDE_LEN, payload, (size_t)f.length);
	return write(fd, buf, SR_FRAME_WIDE_LEN + (size_t)f.length) ==
	    (ssize_t)(SR_FRAME_WIDE_LEN + f.length) ? 0 : -1;
}

/* Reads exactly len bytes within 10 s; -1 otherwise. */
static int
get_bytes(int fd, uint8_t *buf, size_t len)
{
	int64_t deadline = ranks_now_ns() + 10000000000LL;

	while (len > 0) {
		struct pollfd pfd = { .fd = fd, .events = POLLIN };
		ssize_t n;

		if (poll(&pfd, 1, ranks_left_ms(deadline)) != 1)
			return -1;
		if ((n = read(fd, buf, len)) <= 0)
			return -1;
		buf += n;
		len -= (size_t)n;
	}
	return 0;
}

/* The next frame that is not a heartbeat, whose payload is one u64. */
static int
get_frame(int fd, struct sr_frame *f, uint64_t *value)
{
	uint8_t head[SR_FRAME_WIDE_LEN], payload[8];

	do {
		if (get_bytes(fd, head, sizeof(head)) != 0)
			return -1;
		sr_frame_decode_wide(head, f);
	} while (f->kind == SR_FRAME_HEARTBEAT);
	if (f->length != 8 || get_bytes(fd, payload, 8) != 0)
		return -1;
	*value = sr_get_u64le(payload);
	return 0;
}

/* Until rank 0 has read all but `left` bytes of what came on its end
 * `theirs` (its header parked, the payload behind it); -1 after 10 s.
 * FIONREAD on an AF_UNIX stream counts what is still unread. */
static int
until_read(int theirs, int left)
{
	int64_t deadline = ranks_now_ns() + 10000000000LL;
	int queued = -1;

	while (ioctl(theirs, FIONREAD, &queued) == 0 && queued > left &&
	    ranks_now_ns() < deadline)
		sched_yield();
	return queued >= 0 && queued <= left ? 0 : -1;
}

#define PEER_CHECK(cond)                                                       \
	do {                                                                   \
		if (!(cond)) {                                                 \
			printf("# the peers: line %d: %s\n", __LINE__, #cond); \
			fflush(stdout);                                        \
			_exit(1);                                              \
		}                                                              \
	} while (0)

/*
 * Ranks 1 and 2, played with raw frames on their ends f1 and f2: a frame
 * of group 6 waits on rank 0's link from rank 2 while rank 0 runs group
 * 5's allreduce, then one of group 7's second collective while it runs
 * group 7's first.  Each is written before rank 0 can finish, and the
 * collective's last frame only once rank 0 has read the parked header
 * (seen on rank 0's own end, rank0_end).
 */
static void __attribute__((noreturn))
play_peers(int f1, int f2, int rank0_end, int done)
{
	struct sr_frame got, f;
	uint64_t v, five = 5, answer = 42;
	uint8_t byte;

	f = (struct sr_frame){ .kind = SR_FRAME_BROADCAST, .step = 1, .seq = 1,
		.group = 6, .length = 8 };
	PEER_CHECK(put_frame(f2, f, "parked!!") == 0);
	PEER_CHECK(get_frame(f1, &got, &v) == 0);
	PEER_CHECK(got.kind == SR_FRAME_ALLREDUCE && got.group == 5 &&
	    got.seq == 1 && got.step == STEP_HOP(0) && v == 3);
	PEER_CHECK(until_read(rank0_end, 8) == 0);
	f = got;
	PEER_CHECK(put_frame(f1, f, &five) == 0);

	PEER_CHECK(get_frame(f1, &got, &v) == 0);
	PEER_CHECK(got.kind == SR_FRAME_ALLREDUCE && got.group == 7 &&
	    got.seq == 1 && got.step == STEP_PAIRING && v == 3);
	f = (struct sr_frame){ .kind = SR_FRAME_BROADCAST, .step = 2, .seq = 2,
		.group = 7, .length = 8 };
	PEER_CHECK(put_frame(f2, f, "later..") == 0);
	PEER_CHECK(until_read(rank0_end, 8) == 0);
	/* The result, from the pairing's partner: the step after the hop. */
	f = got;
	f.step = STEP_HOP(1);
	PEER_CHECK(put_frame(f1, f, &answer) == 0);
	/* Until rank 0 has it all: closing sooner could reset the link. */
	PEER_CHECK(get_bytes(done, &byte, 1) == 0);
	_exit(0);
}

static void
test_parked_frames(void)
{
	static const uint32_t g5[2] = { 0, 1 }, g6[2] = { 0, 2 },
		g7[3] = { 0, 1, 2 };
	struct sr_ring_options options;
	struct sr_group *g = NULL, *h = NULL, *k = NULL;
	int fds[3] = { -1, -1, -1 }, far[3] = { -1, -1, -1 }, done[2];
	uint64_t v = 3;
	char text[9] = "";
	struct sr_error err;
	struct sr_link *l;
	pid_t pid;
	int status;

	sr_ring_options_init(&options);
	options.timeout_ms = 10000;
	for (int p = 1; p <= 2; p++) {
		int sv[2];

		if (socketpair(AF_UNIX, SOCK_STREAM, 0, sv) != 0)
			return;
		fds[p] = sv[0];
		far[p] = sv[1];
	}
	if (pipe(done) != 0)
		return;
	fflush(stdout);
	if ((pid = fork()) == 0) {
		/* Rank 0's end from rank 2 stays open here, to be watched
		 * (never read). */
		close(fds[1]);
		close(done[1]);
		play_peers(far[1], far[2], fds[2], done[0]);
	}
	close(far[1]);
	close(far[2]);
	close(done[0]);
	struct sr_ring *ring = mesh_ring(0, 3, fds, &options);

	l = &ring->links[2];
	CHECK(sr_group_new(&g, ring, 5, g5, 2, &err) == 0);
	CHECK(sr_group_new(&h, ring, 6, g6, 2, &err) == 0);
	CHECK(sr_group_new(&k, ring, 7, g7, 3, &err) == 0);
	CHECKF(sr_group_allreduce(g, &v, &v, 1, SR_U64, SR_SUM, &err) == 0 &&
	    v == 8, "group 5: %llu: %s", (unsigned long long)v, err.message);
	CHECKF(l->rx == SR_RX_READY && l->rx_frame.group == 6,
	    "group 6's frame is not parked: rx state %d", (int)l->rx);
	CHECKF(sr_group_broadcast(h, text, 8, 1, &err) == 0 &&
	    strcmp(text, "parked!!") == 0, "group 6: '%s': %s", text,
	    err.message);
	v = 3;
	CHECKF(sr_group_allreduce(k, &v, &v, 1, SR_U64, SR_SUM, &err) == 0 &&
	    v == 42, "group 7: %llu: %s", (unsigned long long)v, err.message);
	CHECKF(l->rx == SR_RX_READY && l->rx_frame.group == 7 &&
	    l->rx_frame.seq == 2, "group 7's second frame is not parked: rx "
	    "state %d", (int)l->rx);
	CHECKF(sr_group_broadcast(k, text, 8, 2, &err) == 0 &&
	    strcmp(text, "later..") == 0, "group 7: '%s': %s", text,
	    err.message);
	CHECK(write(done[1], "d", 1) == 1);
	close(done[1]);
	CHECKF(waitpid(pid, &status, 0) == pid && WIFEXITED(status) &&
	    WEXITSTATUS(status) == 0, "the peers failed (status %#x)", status);
	sr_group_free(g);
	sr_group_free(h);
	sr_group_free(k);
	sr_ring_close(ring);
}

int
main(void)
{
	TEST_RUN(test_mixed_groups);
	TEST_RUN(test_wide_groups);
	TEST_RUN(test_out_of_step);
	TEST_RUN(test_different_lengths);
	TEST_RUN(test_halving_different_lengths);
	TEST_RUN(test_ring4_halving);
	TEST_RUN(test_ring4_halving_different_lengths);
	TEST_RUN(test_member_exits);
	TEST_RUN(test_member_stops);
	TEST_RUN(test_heartbeats_across_groups);
	TEST_RUN(test_group_of_one);
	TEST_RUN(test_unread_at_close);
	TEST_RUN(test_config_errors);
	TEST_RUN(test_parked_frames);
	return TEST_DONE();
}
