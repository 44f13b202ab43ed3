/*
 * test_ring.c - multi-rank tests: real ranks, forked, over loopback with
 * port 0 (ranks.h does the forking, the reports and the deadlines).
 *
 * Every collective against values each rank computes itself; bitwise
 * reproducibility across ranks and runs; strays that must not stop the
 * ring from forming; a rejected connector; a rank SIGKILLed or SIGSTOPped
 * mid-collective; ranks out of step; a world of one, bad configurations
 * and IPv6; a clean close.  Timings are asserted only where the library
 * promises them (a failure noticed at once, a timeout honoured).
 */
#include <arpa/inet.h>
#include <math.h>
#include <netinet/in.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>

#include "check.h"
#include "ranks.h"

#define MiB (1024u * 1024u)

static void *
xmalloc(size_t bytes)
{
	void *p = malloc(bytes > 0 ? bytes : 1);

	if (p == NULL) {
		printf("# out of memory allocating %zu bytes\n", bytes);
		_exit(4);
	}
	return p;
}

/* Bytes no two ranks (nor two salts) share at the same offset. */
static void
pattern(uint8_t *p, size_t bytes, uint32_t rank, uint32_t salt)
{
	for (size_t j = 0; j < bytes; j++)
		p[j] = (uint8_t)(rank * 37 + j * 11 + (j >> 8) * 3 + salt * 101 + 1);
}

static size_t
first_difference(const uint8_t *a, const uint8_t *b, size_t bytes)
{
	for (size_t j = 0; j < bytes; j++)
		if (a[j] != b[j])
			return j;
	return bytes;
}

/* ------------------------------------------------ 1. every collective */

static bool
dtype_signed(enum sr_dtype dtype)
{
	return dtype != SR_U64 && dtype != SR_U32;
}

/* Integer-valued inputs, so every result is exact in every dtype. */
static int64_t
input(enum sr_op op, enum sr_dtype dtype, uint32_t rank, size_t i)
{
	int64_t v;

	switch (op) {
	case SR_SUM:
		return (int64_t)(rank + 1) * (int64_t)(i % 97 + 1);
	case SR_PROD:
		/* |product| <= 3^8: exact even in f32. */
		v = 1 + (int64_t)((rank + i) % 3);
		return dtype_signed(dtype) && (rank * 3 + i) % 7 == 0 ? -v : v;
	default:
		v = (int64_t)((rank * 7 + i * 13) % 101);
		return dtype_signed(dtype) ? v - 50 : v;
	}
}

static int64_t
fold(enum sr_op op, int64_t a, int64_t b)
{
	switch (op) {
	case SR_SUM:
		return a + b;
	case SR_PROD:
		return a * b;
	case SR_MAX:
		return a > b ? a : b;
	default:
		return a < b ? a : b;
	}
}

static void
store(enum sr_dtype dtype, void *buf, size_t i, int64_t v)
{
	switch (dtype) {
	case SR_F64:
		((double *)buf)[i] = (double)v;
		break;
	case SR_F32:
		((float *)buf)[i] = (float)v;
		break;
	case SR_I64:
		((int64_t *)buf)[i] = v;
		break;
	case SR_I32:
		((int32_t *)buf)[i] = (int32_t)v;
		break;
	case SR_U64:
		((uint64_t *)buf)[i] = (uint64_t)v;
		break;
	case SR_U32:
		((uint32_t *)buf)[i] = (uint32_t)v;
		break;
	default:
		break;
	}
}

/* One allreduce, checked exactly; -1 when the call itself failed. */
static int
check_allreduce(struct rank_ctx *ctx, enum sr_dtype dtype, enum sr_op op,
    size_t count, bool in_place)
{
	size_t es = sr_dtype_size(dtype), bytes = count * es, bad;
	uint8_t *send = xmalloc(bytes), *orig = xmalloc(bytes);
	uint8_t *recv = in_place ? send : xmalloc(bytes), *want = xmalloc(bytes);
	struct sr_error err;
	int rc;

	for (size_t i = 0; i < count; i++) {
		int64_t e = input(op, dtype, 0, i);

		store(dtype, send, i, input(op, dtype, ctx->rank, i));
		for (uint32_t r = 1; r < ctx->world; r++)
			e = fold(op, e, input(op, dtype, r, i));
		store(dtype, want, i, e);
	}
	memcpy(orig, send, bytes);
	if (!in_place)
		memset(recv, 0xa5, bytes);
	rc = sr_allreduce(ctx->ring, send, recv, count, dtype, op, &err);
	RCHECK(ctx, rc == 0, "allreduce %s %s of %zu (%s): %s", sr_op_name(op),
	    sr_dtype_name(dtype), count, in_place ? "in place" : "out of place",
	    err.message);
	if (rc != 0) {
		rank_fail(ctx, &err);
	} else {
		bad = first_difference(recv, want, bytes);
		RCHECK(ctx, bad == bytes, "allreduce %s %s of %zu (%s): element "
		    "%zu differs from the expected value", sr_op_name(op),
		    sr_dtype_name(dtype), count,
		    in_place ? "in place" : "out of place", bad / es);
		if (!in_place)
			RCHECK(ctx, memcmp(send, orig, bytes) == 0,
			    "allreduce %s %s of %zu changed its send buffer",
			    sr_op_name(op), sr_dtype_name(dtype), count);
		ctx->report->hash = fnv1a64(ctx->report->hash, recv, bytes);
	}
	if (!in_place)
		free(recv);
	free(send);
	free(orig);
	free(want);
	return rc;
}

static int
check_allreduces(struct rank_ctx *ctx)
{
	static const enum sr_dtype dtypes[] = { SR_F64, SR_F32, SR_I64, SR_I32,
		SR_U64, SR_U32 };
	static const enum sr_op ops[] = { SR_SUM, SR_MAX, SR_MIN, SR_PROD };
	uint32_t w = ctx->world;
	/* Counts below the world and not divisible by it, and one whose
	 * blocks span several frames and reduction segments. */
	size_t awkward[] = { w > 1 ? w - 1 : 2, w + 1, 3 * (size_t)w + 1, 10007 };

	for (size_t d = 0; d < sizeof(dtypes) / sizeof(dtypes[0]); d++) {
		size_t es = sr_dtype_size(dtypes[d]);
		/*
		 * The small path runs while it moves under 128 KiB a rank,
		 * (n-1) x the buffer (2 x at world 4, 1 x at world 3 on
		 * shared cores), and always below 4 KiB: counts either side
		 * of both limits.
		 */
		size_t moves = w == 4 ? 2 : w == 3 && ctx->job->shared_cores ?
		    1 : w - 1;
		size_t limit = w > 1 ? (128u << 10) / moves / es : 1024;
		/* On a mesh where recursive doubling pays (from 8 ranks: its
		 * hops, log2 of the largest power of two p <= n, 2 more when
		 * n is not p, under n/2), it runs while hops x the buffer is
		 * at most 128 KiB, before the small path's limit: counts
		 * either side of that too. */
		size_t p = 1, hops = 0, dlimit = limit, hlimit = limit;

		while (p <= w / 2)
			p *= 2, hops++;
		hops += p < w ? 2 : 0;
		if (ctx->job->mesh && w > 4 && hops < w / 2)
			dlimit = (128u << 10) / hops / es;
		/* Then, on a power of two from 8, recursive halving and
		 * doubling up to 384 KiB: its limit, and a count whose
		 * blocks are not all alike. */
		if (ctx->job->mesh && w >= 8 && p == w)
			hlimit = (384u << 10) / es;
		/* On shared cores, 8 ranks of a mesh and 4 of a ring go by
		 * blocks up to 256 KiB: counts either side of that limit (the
		 * same counts run without shared cores too).  Past it 4 ranks
		 * take recursive halving to 4 MiB (its limits: test_group's
		 * test_ring4_halving), as blimit + 1 and 300007 below do. */
		size_t blimit = (ctx->job->mesh && w == 8) || w == 4 ?
		    (256u << 10) / es : limit;
		size_t counts[] = { 0, 1, 4096 / es - 1, 4096 / es,
			4096 / es + 1, limit - 1, limit, limit + 1, dlimit,
			dlimit + 1, hlimit - 3, hlimit, hlimit + 1, blimit,
			blimit + 1 };
		size_t ncounts = sizeof(counts) / sizeof(counts[0]);

		for (size_t o = 0; o < sizeof(ops) / sizeof(ops[0]); o++) {
			for (int place = 0; place < 2; place++) {
				for (size_t c = 0; c < ncounts; c++)
					if (check_allreduce(ctx, dtypes[d], ops[o],
						counts[c], place) != 0)
						return -1;
				for (size_t c = 0; c < 4; c++)
					if (check_allreduce(ctx, dtypes[d], ops[o],
						awkward[c], place) != 0)
						return -1;
			}
		}
		if (check_allreduce(ctx, dtypes[d], SR_SUM, 300007, d % 2) != 0)
			return -1;
	}
	return 0;
}

static const size_t byte_sizes[] = { 0, 1, 4095, 4096, 4097, MiB + 3 };
#define NSIZES (sizeof(byte_sizes) / sizeof(byte_sizes[0]))

static int
check_allgathers(struct rank_ctx *ctx)
{
	struct sr_error err;

	for (size_t s = 0; s < NSIZES; s++) {
		size_t bytes = byte_sizes[s], all = bytes * ctx->world;

		for (int place = 0; place < 2; place++) {
			uint8_t *mine = xmalloc(bytes), *recv = xmalloc(all);
			uint8_t *want = xmalloc(all);
			const uint8_t *send = mine;
			int rc;

			for (uint32_t r = 0; r < ctx->world; r++)
				pattern(want + r * bytes, bytes, r, (uint32_t)s);
			pattern(mine, bytes, ctx->rank, (uint32_t)s);
			memset(recv, 0x5a, all);
			if (place) {
				memcpy(recv + ctx->rank * bytes, mine, bytes);
				send = recv + ctx->rank * bytes;
			}
			rc = sr_allgather(ctx->ring, send, bytes, recv, &err);
			RCHECK(ctx, rc == 0, "allgather of %zu bytes: %s", bytes,
			    err.message);
			if (rc == 0) {
				size_t bad = first_difference(recv, want, all);

				RCHECK(ctx, bad == all, "allgather of %zu bytes (%s): "
				    "byte %zu of rank %zu's slot differs", bytes,
				    place ? "in place" : "out of place",
				    bytes ? bad % bytes : 0, bytes ? bad / bytes : 0);
				ctx->report->hash = fnv1a64(ctx->report->hash, recv,
				    all);
			}
			free(mine);
			free(recv);
			free(want);
			if (rc != 0)
				return rank_fail(ctx, &err);
		}
	}
	return 0;
}

static int
check_broadcasts(struct rank_ctx *ctx)
{
	struct sr_error err;

	for (size_t s = 0; s < NSIZES; s++) {
		size_t bytes = byte_sizes[s];
		uint8_t *buf = xmalloc(bytes), *want = xmalloc(bytes);

		for (uint32_t root = 0; root < ctx->world; root++) {
			int rc;

			pattern(want, bytes, root, 7);
			if (ctx->rank == root)
				memcpy(buf, want, bytes);
			else
				memset(buf, 0xee, bytes);
			rc = sr_broadcast(ctx->ring, buf, bytes, root, &err);
			RCHECK(ctx, rc == 0, "broadcast of %zu bytes from %u: %s",
			    bytes, root, err.message);
			if (rc != 0) {
				free(buf);
				free(want);
				return rank_fail(ctx, &err);
			}
			RCHECK(ctx, memcmp(buf, want, bytes) == 0, "broadcast of "
			    "%zu bytes from rank %u: byte %zu differs", bytes, root,
			    first_difference(buf, want, bytes));
			ctx->report->hash = fnv1a64(ctx->report->hash, buf, bytes);
		}
		free(buf);
		free(want);
	}
	return 0;
}

/* The link tests: a shift of the whole ring, then each link alone. */
static int
check_links(struct rank_ctx *ctx)
{
	uint32_t w = ctx->world, prev = (ctx->rank + w - 1) % w;
	struct sr_error err;

	for (size_t s = 0; s < NSIZES; s++) {
		size_t bytes = byte_sizes[s];
		uint8_t *send = xmalloc(bytes), *recv = xmalloc(bytes);
		uint8_t *want = xmalloc(bytes);
		int rc;

		pattern(send, bytes, ctx->rank, 3);
		pattern(want, bytes, prev, 3);
		memset(recv, 0x11, bytes);
		rc = sr_ring_shift(ctx->ring, send, recv, bytes, &err);
		RCHECK(ctx, rc == 0, "shift of %zu bytes: %s", bytes, err.message);
		if (rc == 0)
			RCHECK(ctx, memcmp(recv, want, bytes) == 0, "shift of %zu "
			    "bytes: byte %zu is not rank %u's", bytes,
			    first_difference(recv, want, bytes), prev);
		for (uint32_t from = 0; rc == 0 && from < w; from++) {
			uint32_t to = (from + 1) % w;

			pattern(send, bytes, ctx->rank == from ? from : ctx->rank,
			    ctx->rank == from ? 4 : 5);
			pattern(want, bytes, ctx->rank == from || ctx->rank == to ?
			    from : ctx->rank, ctx->rank == from || ctx->rank == to ?
			    4 : 5);
			if (w == 1)
				pattern(want, bytes, ctx->rank, 4);
			rc = sr_link_transfer(ctx->ring, from, send, bytes,
			    bytes / 2, &err);
			RCHECK(ctx, rc == 0, "link test from rank %u of %zu bytes: %s",
			    from, bytes, err.message);
			if (rc == 0)
				RCHECK(ctx, memcmp(send, want, bytes) == 0, "link test "
				    "from rank %u of %zu bytes: byte %zu differs", from,
				    bytes, first_difference(send, want, bytes));
		}
		free(send);
		free(recv);
		free(want);
		if (rc != 0)
			return rank_fail(ctx, &err);
	}
	return 0;
}

static int
check_barriers(struct rank_ctx *ctx)
{
	struct sr_error err;

	/* The last rank comes late, so a barrier that lets anyone through
	 * early shows in the times the parent compares; the delay is the
	 * stimulus, not a synchronisation. */
	if (ctx->rank == ctx->world - 1 && ctx->world > 1) {
		struct timespec late = { 0, 30 * 1000000 };

		nanosleep(&late, NULL);
	}
	ctx->report->aux[0] = ranks_now_ns();
	if (sr_barrier(ctx->ring, &err) != 0) {
		RCHECK(ctx, 0, "barrier: %s", err.message);
		return rank_fail(ctx, &err);
	}
	ctx->report->aux[1] = ranks_now_ns();
	for (int i = 0; i < 5; i++)
		if (sr_barrier(ctx->ring, &err) != 0) {
			RCHECK(ctx, 0, "barrier %d: %s", i + 2, err.message);
			return rank_fail(ctx, &err);
		}
	return 0;
}

static int
collectives_scenario(struct rank_ctx *ctx)
{
	ctx->report->hash = FNV_OFFSET;
	if (check_allreduces(ctx) != 0 || check_allgathers(ctx) != 0 ||
	    check_broadcasts(ctx) != 0 || check_links(ctx) != 0 ||
	    check_barriers(ctx) != 0)
		return -1;
	return 0;
}

/* No rank left check_barriers' first barrier before the last rank
 * entered it. */
static void
barrier_held(const struct ranks *r, uint32_t world, const char *what)
{
	int64_t last_enter = 0;

	for (uint32_t i = 0; i < world; i++)
		if (r->report[i].aux[0] > last_enter)
			last_enter = r->report[i].aux[0];
	for (uint32_t i = 0; i < world; i++)
		CHECKF(r->report[i].aux[1] >= last_enter, "%s: rank %u left "
		    "the barrier %.1f ms before the last rank entered", what, i,
		    ranks_ms(last_enter - r->report[i].aux[1]));
}

static void
test_collectives_every_world(void)
{
	for (uint32_t w = 1; w <= 8; w++) {
		struct ranks_job job = { .world = w, .timeout_ms = 20000,
			.scenario = collectives_scenario, .deadline_ms = 40000 };
		static struct ranks r;
		char what[32];
		int64_t t0 = ranks_now_ns();

		if (ranks_open(&r, &job) != 0 || ranks_start(&r) != 0)
			return;
		ranks_finish(&r);
		ranks_check_clean(&r, 0xff, true);
		for (uint32_t i = 0; i < w; i++)
			CHECKF(r.report[i].hash == r.report[0].hash,
			    "world %u: rank %u's results differ from rank 0's", w, i);
		snprintf(what, sizeof(what), "world %u", w);
		barrier_held(&r, w, what);
		printf("# world %u: every collective in %.0f ms\n", w,
		    ranks_ms(ranks_now_ns() - t0));
	}
}

/*
 * Runs collectives_scenario as job: every rank clean and its results the
 * same as rank 0's; *hash gets rank 0's.  what names the case.
 */
static void
every_collective(const struct ranks_job *job, const char *what,
    uint64_t *hash)
{
	static struct ranks r;
	int64_t t0 = ranks_now_ns();

	*hash = 0;
	if (ranks_open(&r, job) != 0 || ranks_start(&r) != 0)
		return;
	ranks_finish(&r);
	ranks_check_clean(&r, 0xff, true);
	for (uint32_t i = 0; i < job->world; i++)
		CHECKF(r.report[i].hash == r.report[0].hash, "%s: rank %u's "
		    "results differ from rank 0's", what, i);
	barrier_held(&r, job->world, what);
	*hash = r.report[0].hash;
	printf("# %s: every collective in %.0f ms\n", what,
	    ranks_ms(ranks_now_ns() - t0));
}

/* Worlds 3 and 4 on their paths for shared cores (world 3's four
 * frames, world 4's blocks): every collective exact and the same on
 * every rank, with and without frame checks.  That they fold as the
 * paths without shared cores do (max and min to the bit, at 800 B) is
 * test_fold_order_is_the_same_on_every_rank's. */
static void
test_collectives_shared_cores(void)
{
	uint64_t hash;
	char what[64];

	for (uint32_t w = 3; w <= 4; w++)
		for (int checked = 0; checked < 2; checked++) {
			struct ranks_job job = { .world = w,
				.timeout_ms = 20000,
				.scenario = collectives_scenario,
				.deadline_ms = 40000, .shared_cores = true,
				.integrity = checked };

			snprintf(what, sizeof(what), "world %u, shared cores%s",
			    w, checked ? ", checked" : "");
			every_collective(&job, what, &hash);
		}
}

/*
 * Several connections per link: every collective exact, the same on every
 * rank and as with one, on plain rings of 2 to 4 and a mesh of 3 (frame
 * checks on every other case), and a 64 MiB allreduce whose pieces spread
 * over the streams.
 */
static void
test_streams_every_count(void)
{
	static const uint32_t counts[] = { 1, 2, 4, 8 };
	uint64_t one[5] = { 0 }, hash;
	char what[64];

	for (size_t c = 0; c < sizeof(counts) / sizeof(counts[0]); c++)
		for (uint32_t w = 2; w <= 5; w++) {
			struct ranks_job job = { .world = w == 5 ? 3 : w,
				.timeout_ms = 20000, .mesh = w == 5,
				.scenario = collectives_scenario,
				.deadline_ms = 60000, .streams = counts[c],
				.integrity = (c + w) % 2 == 1 };

			snprintf(what, sizeof(what), "%u stream(s), world %u%s%s",
			    counts[c], job.world, job.mesh ? " (mesh)" : "",
			    job.integrity ? ", checked" : "");
			every_collective(&job, what, &hash);
			if (c == 0)
				one[w - 1] = hash;
			CHECKF(hash == one[w - 1], "%s: results differ from one "
			    "stream's", what);
		}
}

/* On a mesh of 8, small allreduces take recursive doubling over the
 * mesh's links (group 0), mid sizes recursive halving then doubling:
 * every collective still exact and the same on every rank, with one
 * stream and with two (frames checked). */
static void
test_mesh_doubling_world_8(void)
{
	char what[64];
	uint64_t hash, one = 0;

	for (uint32_t k = 1; k <= 2; k++) {
		struct ranks_job job = { .world = 8, .timeout_ms = 20000,
			.mesh = true, .scenario = collectives_scenario,
			.deadline_ms = 60000, .streams = k,
			.integrity = k == 2 };

		snprintf(what, sizeof(what), "mesh of 8, %u stream(s)%s", k,
		    job.integrity ? ", checked" : "");
		every_collective(&job, what, &hash);
		if (k == 1)
			one = hash;
		CHECKF(hash == one, "%s: results differ from one stream's",
		    what);
	}
}

/* On a mesh of 8 on shared cores, small and mid allreduces and the
 * barrier go by blocks (group.c): every collective exact, the same on
 * every rank, with one stream and two (frames checked), and the same
 * results as doubling and halving gave. */
static void
test_mesh_blocks_world_8(void)
{
	char what[64];
	uint64_t hash, apart = 0;
	struct ranks_job job = { .world = 8, .timeout_ms = 20000,
		.mesh = true, .scenario = collectives_scenario,
		.deadline_ms = 60000 };

	every_collective(&job, "mesh of 8", &apart);
	for (uint32_t k = 1; k <= 2; k++) {
		job.shared_cores = true;
		job.streams = k;
		job.integrity = k == 2;
		snprintf(what, sizeof(what), "mesh of 8, shared cores, %u "
		    "stream(s)%s", k, job.integrity ? ", checked" : "");
		every_collective(&job, what, &hash);
		CHECKF(hash == apart, "%s: results differ from those of ranks "
		    "that do not share cores", what);
	}
}

static int small_sum_scenario(struct rank_ctx *ctx);

/* A rank that opens another number of streams is refused at the
 * handshake, and the refusal names both numbers. */
static void
test_streams_mismatch_refused(void)
{
	struct ranks_job job = { .world = 2, .timeout_ms = 3000,
		.scenario = small_sum_scenario, .deadline_ms = 20000,
		.streams = 2 };
	static struct ranks r;
	bool named = false;

	job.streams_of[1] = 4;
	if (ranks_open(&r, &job) != 0 || ranks_start(&r) != 0)
		return;
	ranks_finish(&r);
	ranks_check_clean(&r, 0xff, false);
	for (uint32_t i = 0; i < 2; i++) {
		const struct sr_error *e = &r.report[i].err;

		CHECKF(r.report[i].rc != 0, "rank %u formed a ring of 2 and 4 "
		    "streams", i);
		CHECKF(e->code == SR_EREJECTED || e->code == SR_ETIMEOUT,
		    "rank %u: %s", i, sr_code_name(e->code));
		printf("# rank %u: %s\n", i, e->message);
		if (strstr(e->message, "(--streams 2)") != NULL &&
		    strstr(e->message, "(--streams 4)") != NULL)
			named = true;
	}
	CHECKF(named, "no rank named both stream counts");
	CHECKF(r.report[1].err.code == SR_EREJECTED ||
	    r.report[0].err.code == SR_EREJECTED, "no rank was rejected");
}

/* 64 MiB and three f64s, out of place then in place, every element
 * checked: long blocks of uneven length, at world 4 the second and the
 * fourth starting off a 16-byte boundary. */
static int
big_allreduce_scenario(struct rank_ctx *ctx)
{
	size_t count = 64 * MiB / sizeof(double) + 3;
	double *send = xmalloc(count * sizeof(double));
	double *recv = xmalloc(count * sizeof(double));
	double total = (double)ctx->world * (ctx->world + 1) / 2;
	struct sr_error err;
	size_t bad = count, changed = count;
	int64_t t0;

	for (size_t i = 0; i < count; i++)
		send[i] = (double)(ctx->rank + 1) * (double)(i % 97 + 1);
	t0 = ranks_now_ns();
	if (sr_allreduce(ctx->ring, send, recv, count, SR_F64, SR_SUM, &err) != 0) {
		free(send);
		free(recv);
		return rank_fail(ctx, &err);
	}
	ctx->report->aux[0] = ranks_now_ns() - t0;
	for (size_t i = count; i-- > 0;) {
		if (recv[i] != total * (double)(i % 97 + 1))
			bad = i;
		if (send[i] != (double)(ctx->rank + 1) * (double)(i % 97 + 1))
			changed = i;
	}
	RCHECK(ctx, bad == count, "element %zu is %.17g, not %.17g", bad,
	    bad < count ? recv[bad] : 0.0, total * (double)(bad % 97 + 1));
	RCHECK(ctx, changed == count, "the send buffer changed at %zu", changed);
	if (sr_allreduce(ctx->ring, send, send, count, SR_F64, SR_SUM, &err) != 0) {
		free(send);
		free(recv);
		return rank_fail(ctx, &err);
	}
	RCHECK(ctx, memcmp(send, recv, count * sizeof(double)) == 0,
	    "in place, element %zu differs from out of place",
	    first_difference((const uint8_t *)send, (const uint8_t *)recv,
	    count * sizeof(double)) / sizeof(double));
	free(send);
	free(recv);
	return 0;
}

static void
test_allreduce_64mib(void)
{
	/* Then with the pieces spread over several streams. */
	static const uint32_t worlds[] = { 2, 4, 2, 4 };
	static const uint32_t streams[] = { 1, 1, 4, 8 };

	for (size_t k = 0; k < 4; k++) {
		struct ranks_job job = { .world = worlds[k], .timeout_ms = 30000,
			.scenario = big_allreduce_scenario, .deadline_ms = 40000,
			.streams = streams[k] };
		static struct ranks r;

		if (ranks_open(&r, &job) != 0 || ranks_start(&r) != 0)
			return;
		ranks_finish(&r);
		ranks_check_clean(&r, 0xff, true);
		printf("# world %u, %u stream(s): 64 MiB f64 allreduce in "
		    "%.0f ms\n", worlds[k], streams[k],
		    ranks_ms(r.report[0].aux[0]));
	}
}

/* ---------------------------------------------- 2. bitwise identical */

static const size_t repro_counts[] = { 1000, 100000 };

static int
reproducible_scenario(struct rank_ctx *ctx)
{
	struct sr_error err;

	for (int k = 0; k < 2; k++) {
		size_t count = repro_counts[k];
		double *v = xmalloc(count * sizeof(double));
		double worst = 0;

		for (size_t i = 0; i < count; i++)
			v[i] = sin((double)(ctx->rank + 1) * (double)i * 0.37 +
			    ctx->rank * 0.5);
		if (sr_allreduce_sum_f64(ctx->ring, v, count, &err) != 0) {
			free(v);
			return rank_fail(ctx, &err);
		}
		/* Close to the plain sum: the bits must mean something. */
		for (size_t i = 0; i < count; i++) {
			double ref = 0;

			for (uint32_t r = 0; r < ctx->world; r++)
				ref += sin((double)(r + 1) * (double)i * 0.37 + r * 0.5);
			if (fabs(v[i] - ref) > worst)
				worst = fabs(v[i] - ref);
		}
		RCHECK(ctx, worst < 1e-12, "%zu elements: off the plain sum by %g",
		    count, worst);
		ctx->report->aux[k] = (int64_t)fnv1a64(FNV_OFFSET, v,
		    count * sizeof(double));
		free(v);
	}
	return 0;
}

static void
test_bitwise_identical(void)
{
	static const uint32_t worlds[] = { 3, 5, 7 };

	for (size_t k = 0; k < 3; k++) {
		int64_t first[2] = { 0, 0 };

		for (int run = 0; run < 2; run++) {
			struct ranks_job job = { .world = worlds[k],
				.scenario = reproducible_scenario,
				.deadline_ms = 20000 };
			static struct ranks r;

			if (ranks_open(&r, &job) != 0 || ranks_start(&r) != 0)
				return;
			ranks_finish(&r);
			ranks_check_clean(&r, 0xff, true);
			for (int c = 0; c < 2; c++) {
				for (uint32_t i = 1; i < worlds[k]; i++)
					CHECKF(r.report[i].aux[c] == r.report[0].aux[c],
					    "world %u, %zu elements: rank %u's bits "
					    "differ from rank 0's", worlds[k],
					    repro_counts[c], i);
				if (run == 0)
					first[c] = r.report[0].aux[c];
				else
					CHECKF(r.report[0].aux[c] == first[c],
					    "world %u, %zu elements: the second run's "
					    "bits differ (%016llx, %016llx)", worlds[k],
					    repro_counts[c],
					    (unsigned long long)first[c],
					    (unsigned long long)r.report[0].aux[c]);
			}
		}
	}
}

/*
 * Max and min pick by operand order where values compare equal (+0 and
 * -0) or not at all (NaN), and a sum of two NaNs keeps the first one's
 * payload: so every rank must fold in one order for results to agree.
 */
static double
order_input(uint32_t rank, size_t i)
{
	uint64_t nan_bits = 0x7ff8000000000000ull | (rank + 1) * 0x1111ull;
	double nan;

	memcpy(&nan, &nan_bits, sizeof(nan));
	switch ((i + rank * (i / 5 + 1)) % 5) {
	case 0:
		return 0.0;
	case 1:
		return -0.0;
	case 2:
		return nan;
	case 3:
		return 1.0;
	default:
		return -1.0;
	}
}

static const size_t order_counts[] = { 100, 100003 };
static const enum sr_op order_ops[] = { SR_MAX, SR_MIN, SR_SUM };

static int
fold_order_scenario(struct rank_ctx *ctx)
{
	struct sr_error err;
	int k = 0;

	for (size_t c = 0; c < 2; c++)
		for (size_t o = 0; o < 3; o++, k++) {
			size_t count = order_counts[c];
			double *v = xmalloc(count * sizeof(double));

			for (size_t i = 0; i < count; i++)
				v[i] = order_input(ctx->rank, i);
			if (sr_allreduce(ctx->ring, v, v, count, SR_F64,
				order_ops[o], &err) != 0) {
				free(v);
				return rank_fail(ctx, &err);
			}
			ctx->report->aux[k] = (int64_t)fnv1a64(FNV_OFFSET, v,
			    count * sizeof(double));
			free(v);
		}
	/* Out of place too, max and min: aux[6 + 2c + o]. */
	for (size_t c = 0; c < 2; c++)
		for (size_t o = 0; o < 2; o++) {
			size_t count = order_counts[c];
			double *in = xmalloc(count * sizeof(double));
			double *out = xmalloc(count * sizeof(double));
			int rc;

			for (size_t i = 0; i < count; i++)
				in[i] = order_input(ctx->rank, i);
			rc = sr_allreduce(ctx->ring, in, out, count, SR_F64,
			    order_ops[o], &err);
			if (rc == 0)
				ctx->report->aux[6 + 2 * c + o] = (int64_t)
				    fnv1a64(FNV_OFFSET, out, count *
				    sizeof(double));
			free(in);
			free(out);
			if (rc != 0)
				return rank_fail(ctx, &err);
		}
	return 0;
}

static void
test_fold_order_is_the_same_on_every_rank(void)
{
	int64_t bits[11][6] = { { 0 } };	/* rank 0's, by j */

	/*
	 * j = 9: world 3 again, on its path for shared cores, which folds
	 * in rank order as the both-way path does: max and min pick the same
	 * operands on both paths.  A sum of two NaNs keeps one payload or
	 * the other by the order the compiler gave a kernel's operands (C
	 * leaves it open), and the two paths call different kernels (in
	 * place and out of place), so sums agree only within a path.
	 * j = 10: world 4 on shared cores, by blocks, which folds as the
	 * pairs of j = 4 do: max and min the same bits (and at 100003 f64,
	 * where both take the ring).  Not sums: a fold runs over what each
	 * read brought, and where a read ends decides which elements the
	 * compiler's widest loop folds and which its narrower tails, whose
	 * operand order for a commutative add may differ (GCC 12's AVX2
	 * sum_f64_in swaps them in its 2-wide step); so which payload
	 * a sum of two NaNs keeps can change from run to run, on any path
	 * (a chroot's run of this test saw it at 100003 f64, on the ring).
	 */
	for (uint32_t j = 2; j <= 10; j++) {
		uint32_t w = j == 9 ? 3 : j == 10 ? 4 : j;
		struct ranks_job job = { .world = w, .shared_cores = j >= 9,
			.scenario = fold_order_scenario, .deadline_ms = 20000 };
		static struct ranks r;

		if (ranks_open(&r, &job) != 0 || ranks_start(&r) != 0)
			return;
		ranks_finish(&r);
		ranks_check_clean(&r, (1u << w) - 1, true);
		for (int k = 0; k < 6; k++)
			for (uint32_t i = 1; i < w; i++)
				CHECKF(r.report[i].aux[k] == r.report[0].aux[k],
				    "world %u, %s of %zu f64 with signed zeros "
				    "and NaNs%s: rank %u's bits differ from rank "
				    "0's", w, sr_op_name(order_ops[k % 3]),
				    order_counts[k / 3], job.shared_cores ?
				    " (shared cores)" : "", i);
		/* Out of place, max and min pick the same operands as in
		 * place: the ring's payload folded where it lands, or staged. */
		for (int k = 0; k < 4; k++)
			for (uint32_t i = 0; i < w; i++)
				CHECKF(r.report[i].aux[6 + k] ==
				    r.report[i].aux[(k / 2) * 3 + k % 2],
				    "world %u%s, rank %u: %s of %zu f64 with signed "
				    "zeros and NaNs out of place differs from in "
				    "place", w, job.shared_cores ? " (shared cores)" :
				    "", i, sr_op_name(order_ops[k % 2]),
				    order_counts[k / 2]);
		for (int k = 0; k < 6; k++)
			bits[j][k] = r.report[0].aux[k];
	}
	for (int k = 0; k < 6; k++) {
		CHECKF(k >= 2 || bits[9][k] == bits[3][k], "world 3, %s of %zu "
		    "f64 with signed zeros and NaNs: the bits on shared cores "
		    "differ from the both-way path's", sr_op_name(order_ops[k % 3]),
		    order_counts[0]);
		CHECKF(k % 3 == 2 || bits[10][k] == bits[4][k], "world 4, %s "
		    "of %zu f64 with signed zeros and NaNs: the bits by blocks "
		    "differ from those of recursive doubling",
		    sr_op_name(order_ops[k % 3]), order_counts[k / 3]);
	}
}

/* ------------------------------------------------ congestion control */

/* The kernel's default congestion control, "" when it does not say. */
static void
system_congestion(char *buf, size_t size)
{
	FILE *f = fopen("/proc/sys/net/ipv4/tcp_congestion_control", "r");
	size_t n = 0;

	if (f != NULL) {
		n = fread(buf, 1, size - 1, f);
		fclose(f);
	}
	while (n > 0 && buf[n - 1] == '\n')
		n--;
	buf[n] = '\0';
}

static int small_sum_scenario(struct rank_ctx *ctx);

static int
congestion_scenario(struct rank_ctx *ctx)
{
	const char *want = ctx->job->arg;

	RCHECK(ctx, strcmp(sr_ring_congestion(ctx->ring), want) == 0,
	    "the links run '%s', not '%s'", sr_ring_congestion(ctx->ring),
	    want);
	return small_sum_scenario(ctx);
}

static void
test_congestion_control(void)
{
	char sys_cc[SR_CONGESTION_MAX], autos[SR_CONGESTION_MAX];
	const char *options[3] = { "reno", "auto", NULL };
	const char *expect[3] = { "reno", autos, sys_cc };
	struct sr_error err;

	system_congestion(sys_cc, sizeof(sys_cc));
	CHECKF(sys_cc[0] != '\0', "this kernel does not name its TCP "
	    "congestion control");
	snprintf(autos, sizeof(autos), "%s",
	    strncmp(sys_cc, "bbr", 3) == 0 ? "reno" : sys_cc);
	for (int k = 0; k < 3; k++) {
		struct ranks_job job = { .world = 3,
			.scenario = congestion_scenario, .deadline_ms = 15000,
			.congestion = options[k], .arg = expect[k] };
		static struct ranks r;

		if (ranks_open(&r, &job) != 0 || ranks_start(&r) != 0)
			return;
		ranks_finish(&r);
		ranks_check_clean(&r, 0x7, true);
	}
	CHECK(sr_congestion_check(NULL, &err) == 0);
	CHECK(sr_congestion_check("auto", &err) == 0);
	CHECK(sr_congestion_check("reno", &err) == 0);
	CHECK(sr_congestion_check("no-such-cc", &err) != 0);
	CHECKF(err.code == SR_ECONFIG && strstr(err.message, "no-such-cc") &&
	    strstr(err.message, "reno"), "%s: \"%s\"", sr_code_name(err.code),
	    err.message);
	CHECK(sr_congestion_check("a-name-too-long-for-tcp", &err) != 0 &&
	    err.code == SR_ECONFIG);
}

/* ------------------------------------------------------- 3. strays */

static void
put32le(uint8_t *p, uint32_t v)
{
	for (int i = 0; i < 4; i++)
		p[i] = (uint8_t)(v >> (8 * i));
}

static uint32_t
get32le(const uint8_t *p)
{
	return (uint32_t)p[0] | (uint32_t)p[1] << 8 | (uint32_t)p[2] << 16 |
	    (uint32_t)p[3] << 24;
}

/* The seed's hello, written here from the contract, not by the library. */
static void
hello_bytes(uint8_t out[32], uint32_t rank, uint32_t world, uint64_t token,
    bool swap_bom)
{
	uint32_t bom = swap_bom ? 0x04030201u : 0x01020304u;

	memcpy(out, "silvicn\x01", 8);
	memcpy(out + 8, &bom, 4);
	put32le(out + 12, rank);
	put32le(out + 16, world);
	put32le(out + 20, 0);
	put32le(out + 24, (uint32_t)token);
	put32le(out + 28, (uint32_t)(token >> 32));
}

/* Connects to "ip:port" (IPv4) within the deadline; -1 on failure. */
static int
tcp_connect(const char *address, int64_t until_ns)
{
	struct sockaddr_in sin = { .sin_family = AF_INET };
	const char *colon = strrchr(address, ':');
	char host[64];
	int fd, soerr = 0;
	socklen_t len = sizeof(soerr);
	struct pollfd pfd;

	if (colon == NULL || (size_t)(colon - address) >= sizeof(host))
		return -1;
	memcpy(host, address, (size_t)(colon - address));
	host[colon - address] = '\0';
	sin.sin_port = htons((uint16_t)atoi(colon + 1));
	if (inet_pton(AF_INET, host, &sin.sin_addr) != 1)
		return -1;
	fd = socket(AF_INET, SOCK_STREAM | SOCK_NONBLOCK, 0);
	if (fd < 0)
		return -1;
	if (connect(fd, (struct sockaddr *)&sin, sizeof(sin)) != 0 &&
	    errno != EINPROGRESS) {
		close(fd);
		return -1;
	}
	pfd = (struct pollfd){ .fd = fd, .events = POLLOUT };
	if (poll(&pfd, 1, ranks_left_ms(until_ns)) != 1 ||
	    getsockopt(fd, SOL_SOCKET, SO_ERROR, &soerr, &len) != 0 ||
	    soerr != 0) {
		close(fd);
		return -1;
	}
	return fd;
}

static bool
send_all(int fd, const void *data, size_t len)
{
	/* A fresh loopback socket takes 32 bytes at once. */
	return send(fd, data, len, MSG_NOSIGNAL) == (ssize_t)len;
}

/* Reads up to len bytes, stopping at EOF or the deadline; *eof tells. */
static size_t
read_until(int fd, uint8_t *buf, size_t len, int64_t until_ns, bool *eof)
{
	size_t got = 0;

	*eof = false;
	while (got < len || len == 0) {
		struct pollfd pfd = { .fd = fd, .events = POLLIN };
		uint8_t sink[64];
		ssize_t n;

		if (poll(&pfd, 1, ranks_left_ms(until_ns)) != 1)
			break;
		n = len ? recv(fd, buf + got, len - got, 0) :
		    recv(fd, sink, sizeof(sink), 0);
		if (n < 0 && errno == EINTR)
			continue;
		if (n < 0 && errno == EAGAIN)
			continue;
		if (n <= 0) {
			*eof = true;	/* a reset counts as the close it is */
			break;
		}
		got += (size_t)n;
	}
	return got;
}

static int
small_sum_scenario(struct rank_ctx *ctx)
{
	int64_t v[1000];
	int64_t total = (int64_t)ctx->world * (ctx->world + 1) / 2;
	struct sr_error err;

	for (int i = 0; i < 1000; i++)
		v[i] = (int64_t)(ctx->rank + 1) * (i + 1);
	if (sr_allreduce_sum_i64(ctx->ring, v, 1000, &err) != 0)
		return rank_fail(ctx, &err);
	for (int i = 0; i < 1000; i++)
		RCHECK(ctx, v[i] == total * (i + 1), "element %d is %lld", i,
		    (long long)v[i]);
	return 0;
}

enum stray_kind {
	STRAY_SILENT,
	STRAY_GARBAGE,
	STRAY_TOKEN,
	STRAY_WORLD,
	STRAY_RANK,
	STRAY_BYTE_ORDER,
	STRAY_HTTP,
	STRAY_COUNT
};

/*
 * Strays queued on rank 1's listener before any rank runs.  When rank 1
 * goes first, rank 0 joins only once rank 1 has judged them.  Otherwise
 * rank 1 waits until rank 0's connection is queued behind the strays, so
 * it accepts them all at once: each stray must still be judged.
 */
static void
strays_case(bool rank1_first)
{
	static const char *const reasons[] = { "job token mismatch",
		"world size mismatch", "rank mismatch", "not a silvic rank",
		"byte order" };
	struct ranks_job job = { .world = 3, .timeout_ms = 10000,
		.scenario = small_sum_scenario, .deadline_ms = 20000,
		.hold_mask = rank1_first ? 0x1 : 0x2 };
	static struct ranks r;
	const uint64_t token = 0x5eed0000c0ffee01ULL;
	int fd[STRAY_COUNT], late = -1, signal_fd = -1;
	uint8_t bytes[32], verdict[16];
	int64_t until;
	bool eof;
	size_t n;

	job.token = token;
	for (int k = 0; k < STRAY_COUNT; k++)
		fd[k] = -1;
	if (ranks_open(&r, &job) != 0)
		return;
	/* Rank 1 accepts rank 0.  Every stray is queued on its listener
	 * before any rank runs, so the real rank 0 arrives behind them all:
	 * the silent one is still pending when it does, and must not hold
	 * it up for the 5 s a hello may take. */
	until = ranks_now_ns() + 5000000000LL;
	for (int k = 0; k < STRAY_COUNT; k++) {
		fd[k] = tcp_connect(r.address[1], until);
		CHECKF(fd[k] >= 0, "stray %d could not connect to %s", k,
		    r.address[1]);
		if (fd[k] < 0)
			goto out;
		ranks_parent_fd(&r, fd[k]);
	}
	memset(bytes, 'x', sizeof(bytes));
	CHECK(send_all(fd[STRAY_GARBAGE], bytes, 32));
	hello_bytes(bytes, 0, 3, token ^ 0xdead, false);
	CHECK(send_all(fd[STRAY_TOKEN], bytes, 32));
	hello_bytes(bytes, 0, 4, token, false);
	CHECK(send_all(fd[STRAY_WORLD], bytes, 32));
	hello_bytes(bytes, 2, 3, token, false);
	CHECK(send_all(fd[STRAY_RANK], bytes, 32));
	hello_bytes(bytes, 0, 3, token, true);
	CHECK(send_all(fd[STRAY_BYTE_ORDER], bytes, 32));
	memset(bytes, ' ', sizeof(bytes));
	memcpy(bytes, "GET / HTTP/1.1\r\nHost: x\r\n\r\n", 27);
	CHECK(send_all(fd[STRAY_HTTP], bytes, 32));
	if (!rank1_first) {
		/* Rank 0 judges this one in the poll round after it has
		 * connected to rank 1 and sent its hello: its on_stray event
		 * says rank 0 is queued on rank 1's listener. */
		signal_fd = tcp_connect(r.address[0], until);
		CHECKF(signal_fd >= 0, "could not connect to rank 0");
		if (signal_fd < 0)
			goto out;
		ranks_parent_fd(&r, signal_fd);
		memset(bytes, 'y', sizeof(bytes));
		CHECK(send_all(signal_fd, bytes, 32));
	}

	if (ranks_start(&r) != 0)
		goto out;
	if (!rank1_first) {
		CHECKF(ranks_wait_event(&r, 0x1, RANK_EV_STRAY, 1,
		    ranks_now_ns() + 5000000000LL), "rank 0 never judged its "
		    "stray");
		ranks_tell(&r, 1);
	}
	/* And one while the ring forms, to another rank. */
	late = tcp_connect(r.address[2], until);
	if (late >= 0) {
		hello_bytes(bytes, 1, 3, token + 1, false);
		send_all(late, bytes, 32);
	}

	CHECKF(ranks_wait_event(&r, 0x2, RANK_EV_STRAY, STRAY_COUNT - 1,
	    ranks_now_ns() + 5000000000LL), "rank 1 judged %d of the %d "
	    "strays that sent 32 bytes", r.event_count[1][RANK_EV_STRAY],
	    STRAY_COUNT - 1);
	/* Verdicts: status and the acceptor's rank, little-endian. */
	{
		static const struct {
			int stray;
			uint32_t status;
		} answered[] = { { STRAY_TOKEN, 1 }, { STRAY_WORLD, 2 },
			{ STRAY_RANK, 3 } };

		for (int k = 0; k < 3; k++) {
			n = read_until(fd[answered[k].stray], verdict, 16,
			    ranks_now_ns() + 5000000000LL, &eof);
			CHECKF(n == 16, "stray %d: %zu verdict bytes", answered[k].stray,
			    n);
			if (n != 16)
				continue;
			CHECK(memcmp(verdict, "silvicn\x01", 8) == 0);
			CHECKF(get32le(verdict + 8) == answered[k].status,
			    "stray %d: status %u, want %u", answered[k].stray,
			    get32le(verdict + 8), answered[k].status);
			CHECKF(get32le(verdict + 12) == 1, "stray %d: acceptor "
			    "rank %u, want 1", answered[k].stray,
			    get32le(verdict + 12));
		}
	}
	if (rank1_first)
		ranks_tell(&r, 0);
	/* A stray that is not a silvic rank gets no verdict, just a close;
	 * the silent one is closed once the ring has formed. */
	{
		static const int unanswered[] = { STRAY_GARBAGE, STRAY_BYTE_ORDER,
			STRAY_HTTP, STRAY_SILENT };

		for (int k = 0; k < 4; k++) {
			n = read_until(fd[unanswered[k]], NULL, 0,
			    ranks_now_ns() + 5000000000LL, &eof);
			CHECKF(n == 0 && eof, "stray %d: %zu bytes, %s", unanswered[k],
			    n, eof ? "then closed" : "and not closed within 5 s");
		}
	}
	ranks_finish(&r);
	ranks_check_clean(&r, 0xff, true);
	if (r.reported[1]) {
		const struct rank_report *rep = &r.report[1];
		double formed = ranks_ms(rep->t_connected_ns - rep->t_start_ns);

		/* When rank 1 waited for rank 0 to be let in, time the
		 * formation from rank 0's start. */
		if (rank1_first && r.reported[0])
			formed = ranks_ms(rep->t_connected_ns -
			    r.report[0].t_start_ns);
		printf("# rank 1 formed its links in %.1f ms past %d strays: %s\n",
		    formed, rep->strays, rep->text);
		/* Held up, it forms once the stray's hello deadline (5 s,
		 * acceptor.c's HELLO_TIMEOUT_NS) from its accept has passed:
		 * half that is far from both, loaded machine or not. */
		CHECKF(formed < 2500, "the silent stray held rank 1 up: the ring "
		    "took %.0f ms to form", formed);
		CHECKF(rep->strays >= STRAY_COUNT - 1, "rank 1 rejected %d "
		    "connection(s), want at least %d", rep->strays,
		    STRAY_COUNT - 1);
		for (size_t k = 0; k < sizeof(reasons) / sizeof(reasons[0]); k++)
			CHECKF(strstr(rep->text, reasons[k]) != NULL,
			    "rank 1 never said \"%s\"", reasons[k]);
	}
out:
	ranks_close_listeners(&r);
	for (int k = 0; k < STRAY_COUNT; k++)
		if (fd[k] >= 0)
			close(fd[k]);
	if (late >= 0)
		close(late);
	if (signal_fd >= 0)
		close(signal_fd);
}

static void
test_strays_judged_before_the_rank(void)
{
	strays_case(true);
}

static void
test_strays_queued_with_the_rank(void)
{
	strays_case(false);
}

/* ------------------------------------------------ 4. connector rejected */

static void
test_connector_rejected(void)
{
	struct ranks_job job = { .world = 3, .timeout_ms = 5000,
		.scenario = small_sum_scenario, .deadline_ms = 20000,
		.hold_mask = 1u << 2 };
	static struct ranks r;
	char text[SR_MESSAGE_MAX + 32];

	/* Rank 0 belongs to another job: rank 1 turns it away.  Rank 2
	 * joins only once rank 0 has reported: were it first, rank 0 would
	 * turn it away, rank 1 hear of that on its link to rank 2 and leave
	 * before rank 0 dialled it, and rank 0 time out (beside two busy
	 * processes, 2 runs of 40 did). */
	job.token_of[0] = 0x0123456789abcdefULL;
	if (ranks_open(&r, &job) != 0 || ranks_start(&r) != 0)
		return;
	ranks_wait_reports(&r, 0x1, r.deadline_ns);
	ranks_tell(&r, 2);
	ranks_finish(&r);
	ranks_check_clean(&r, 0xff, false);
	if (r.reported[0]) {
		const struct rank_report *rep = &r.report[0];
		double took = ranks_ms(rep->t_fail_ns - rep->t_start_ns);

		printf("# rank 0 was rejected after %.1f ms: %s\n", took,
		    sr_error_format(&rep->err, text, sizeof(text)));
		CHECKF(rep->rc != 0 && rep->err.code == SR_EREJECTED,
		    "rank 0: %s, want rejected", sr_code_name(rep->err.code));
		CHECKF(strstr(rep->err.message, "job token mismatch") != NULL,
		    "rank 0: \"%s\"", rep->err.message);
		CHECKF(rep->err.peer == 1, "rank 0 blames rank %lld",
		    (long long)rep->err.peer);
		/* Told by the verdict, not by its own timeout. */
		CHECKF(took < job.timeout_ms, "rank 0 learnt of its rejection "
		    "after %.0f ms (the timeout is %lld ms)", took,
		    (long long)job.timeout_ms);
	}
	/* The rank that rejected it waits in vain, and says why; or, when
	 * rank 2 (timed out dialling rank 0, or turned away by it) fails
	 * first, hears that failure on its formed link and fails with its
	 * class (still naming its own rejections). */
	if (r.reported[1]) {
		CHECKF(r.report[1].rc != 0 &&
		    (r.report[1].err.code == SR_ETIMEOUT ||
		    r.report[1].err.code == SR_EHANDSHAKE ||
		    r.report[1].err.code == SR_EREJECTED),
		    "rank 1: %s, want timeout, handshake or rank 2's rejection",
		    sr_code_name(r.report[1].err.code));
		CHECKF(strstr(r.report[1].err.message, "job token mismatch") != NULL,
		    "rank 1: \"%s\"", r.report[1].err.message);
	}
	CHECKF(r.report[2].rc != 0, "rank 2 joined a ring whose rank 0 is "
	    "of another job");
}

/* ---------------------------------------------- 5, 6. lost ranks */

struct loop_arg {
	size_t count;		/* f64 elements per allreduce */
	int64_t max_ms;		/* give up (and fail) after this long */
};

/*
 * Allreduces (max, so the values stay put) until one fails or the parent
 * says "finish"; the decision to finish is itself reduced, so every rank
 * stops after the same call.
 * aux[0]: rounds made; aux[1]: the longest round (both calls), in ns.
 */
static int
loop_scenario(struct rank_ctx *ctx)
{
	const struct loop_arg *a = ctx->job->arg;
	double *v = xmalloc(a->count * sizeof(double));
	int64_t start = ranks_now_ns(), longest = 0;
	struct sr_error err;
	int rc = 0;

	for (size_t i = 0; i < a->count; i++)
		v[i] = (double)(ctx->rank + 1);
	rank_event(ctx, RANK_EV_LOOP);
	for (int64_t it = 0;; it++) {
		int64_t t0 = ranks_now_ns();
		int32_t finish;

		ctx->report->aux[0] = it;
		if (it == 1)
			rank_event(ctx, RANK_EV_ENTER);
		if (sr_allreduce(ctx->ring, v, v, a->count, SR_F64, SR_MAX,
			&err) != 0) {
			rc = rank_fail(ctx, &err);
			break;
		}
		RCHECK(ctx, v[0] == (double)ctx->world &&
		    v[a->count - 1] == (double)ctx->world, "round %lld: max %g",
		    (long long)it, v[0]);
		if (it == 0)
			rank_event(ctx, RANK_EV_ITER);
		finish = rank_told(ctx);
		if (sr_allreduce(ctx->ring, &finish, &finish, 1, SR_I32, SR_MAX,
			&err) != 0) {
			rc = rank_fail(ctx, &err);
			break;
		}
		if (ranks_now_ns() - t0 > longest)
			longest = ranks_now_ns() - t0;
		if (finish)
			break;
		if (ranks_now_ns() - start > a->max_ms * 1000000) {
			RCHECK(ctx, 0, "still looping after %lld ms",
			    (long long)a->max_ms);
			break;
		}
	}
	ctx->report->aux[1] = longest;
	free(v);
	return rc;
}

static bool
names_rank(const struct sr_error *err, uint32_t rank)
{
	char needle[32];

	snprintf(needle, sizeof(needle), "rank %u", rank);
	return err->peer == (int64_t)rank || strstr(err->message, needle) != NULL;
}

static void
test_sigkill_mid_allreduce(void)
{
	static const struct loop_arg arg = { 64 * MiB / sizeof(double), 30000 };
	struct ranks_job job = { .world = 4, .timeout_ms = 60000,
		.scenario = loop_scenario, .arg = &arg, .deadline_ms = 50000 };
	static struct ranks r;
	char text[SR_MESSAGE_MAX + 32];
	int64_t killed;

	if (ranks_open(&r, &job) != 0 || ranks_start(&r) != 0)
		return;
	/* Every rank has finished one 64 MiB allreduce and is entering the
	 * next, which takes far longer than a signal does to land. */
	if (!ranks_wait_event(&r, 0xf, RANK_EV_ENTER, 1,
		ranks_now_ns() + 30000000000LL)) {
		CHECKF(0, "the ranks never reached their second allreduce");
		ranks_finish(&r);
		return;
	}
	killed = ranks_kill(&r, 2, SIGKILL);
	ranks_finish(&r);
	ranks_check_clean(&r, 0xb, false);
	CHECKF(WIFSIGNALED(r.wstatus[2]) && WTERMSIG(r.wstatus[2]) == SIGKILL,
	    "rank 2's wait status is %#x", r.wstatus[2]);
	for (uint32_t i = 0; i < 4; i++) {
		const struct rank_report *rep = &r.report[i];
		double after;

		if (i == 2 || !r.reported[i])
			continue;
		after = ranks_ms(rep->t_fail_ns - killed);
		CHECKF(rep->rc != 0, "rank %u did not notice rank 2's death", i);
		if (rep->rc == 0)
			continue;
		printf("# rank %u noticed the SIGKILL after %.1f ms\n", i, after);
		printf("#   in call %lld: %s [%s]\n", (long long)rep->aux[0],
		    sr_error_format(&rep->err, text, sizeof(text)),
		    sr_code_name(rep->err.code));
		/* Half the 60 s timeout: the reset told it, not the silence. */
		CHECKF(after >= 0 && after <= job.timeout_ms / 2, "rank %u "
		    "noticed after %.0f ms", i, after);
		CHECKF(names_rank(&rep->err, 2), "rank %u blames rank %lld: %s", i,
		    (long long)rep->err.peer, rep->err.message);
	}
}

static void
test_sigstop_times_out(void)
{
	static const struct loop_arg arg = { 65536, 15000 };
	struct ranks_job job = { .world = 3, .timeout_ms = 3000,
		.scenario = loop_scenario, .arg = &arg, .deadline_ms = 30000 };
	static struct ranks r;
	char text[SR_MESSAGE_MAX + 32];
	int64_t stopped;

	if (ranks_open(&r, &job) != 0 || ranks_start(&r) != 0)
		return;
	if (!ranks_wait_event(&r, 0x7, RANK_EV_ITER, 1,
		ranks_now_ns() + 10000000000LL)) {
		CHECKF(0, "the ranks never finished their first allreduce");
		ranks_finish(&r);
		return;
	}
	stopped = ranks_kill(&r, 1, SIGSTOP);
	ranks_wait_reports(&r, 0x5, stopped + 8000000000LL);
	ranks_kill(&r, 1, SIGKILL);
	ranks_finish(&r);
	ranks_check_clean(&r, 0x5, false);
	CHECKF(WIFSIGNALED(r.wstatus[1]) && WTERMSIG(r.wstatus[1]) == SIGKILL,
	    "rank 1's wait status is %#x", r.wstatus[1]);
	for (uint32_t i = 0; i < 3; i += 2) {
		const struct rank_report *rep = &r.report[i];
		double after = ranks_ms(rep->t_fail_ns - stopped);

		if (!r.reported[i])
			continue;
		CHECKF(rep->rc != 0, "rank %u went on past a stopped rank 1", i);
		if (rep->rc == 0)
			continue;
		printf("# rank %u gave up %.1f ms after the SIGSTOP: %s [%s]\n", i,
		    after, sr_error_format(&rep->err, text, sizeof(text)),
		    sr_code_name(rep->err.code));
		CHECKF(rep->err.code == SR_ETIMEOUT, "rank %u: %s, want timeout",
		    i, sr_code_name(rep->err.code));
		/* Not before the timeout, less a second rank 1 may have been
		 * descheduled before its stop; by the timeout plus 2 s. */
		CHECKF(after >= job.timeout_ms - 1000 &&
		    after <= job.timeout_ms + 2000, "rank %u gave up %.0f ms "
		    "after the stop (timeout %lld ms)", i, after,
		    (long long)job.timeout_ms);
	}
}

static void
test_sigstop_resumed(void)
{
	/* 10x the stop: a busy machine, or TCP's zero-window probes backing
	 * off while rank 1 is stopped, stretch the silence it causes. */
	static const struct loop_arg arg = { 65536, 15000 };
	struct ranks_job job = { .world = 3, .timeout_ms = 6000,
		.scenario = loop_scenario, .arg = &arg, .deadline_ms = 30000 };
	static struct ranks r;
	int64_t stopped, resumed;

	if (ranks_open(&r, &job) != 0 || ranks_start(&r) != 0)
		return;
	if (!ranks_wait_event(&r, 0x7, RANK_EV_ITER, 1,
		ranks_now_ns() + 10000000000LL)) {
		CHECKF(0, "the ranks never finished their first allreduce");
		ranks_finish(&r);
		return;
	}
	stopped = ranks_kill(&r, 1, SIGSTOP);
	/* The stop's length is the stimulus: listen to the pipes meanwhile. */
	ranks_pump(&r, stopped + 600000000LL, NULL, NULL);
	resumed = ranks_kill(&r, 1, SIGCONT);
	for (uint32_t i = 0; i < 3; i++)
		ranks_tell(&r, i);
	ranks_finish(&r);
	ranks_check_clean(&r, 0xff, true);
	printf("# rank 1 was stopped for %.0f ms\n", ranks_ms(resumed - stopped));
	for (uint32_t i = 0; i < 3; i += 2)
		CHECKF(r.report[i].aux[1] >= 500000000LL, "rank %u's longest "
		    "round took %.0f ms: the stop never held it up", i,
		    ranks_ms(r.report[i].aux[1]));
}

/* ------------------------------------------------------ 7. out of step */

enum step_variant {
	STEP_ALLGATHER,		/* rank 1 gathers while the others reduce */
	STEP_ALLGATHER_SMALL,
	STEP_LENGTH_1001,	/* rank 1 reduces one element more */
	STEP_LENGTH_100001,
	STEP_OP,		/* rank 1 takes the max, the others the sum */
	STEP_OP_SMALL,
	STEP_DTYPE,		/* rank 1 sums i64, the others f64 */
	STEP_DTYPE_SMALL,
	STEP_VARIANTS
};

static const char *const step_names[] = { "allgather vs allreduce",
	"small allgather vs allreduce", "count 20001 vs 20000",
	"count 100001 vs 100000", "max vs sum", "max vs sum (10 elements)",
	"i64 vs f64", "i64 vs f64 (10 elements)" };

static int
out_of_step_scenario(struct rank_ctx *ctx)
{
	enum step_variant variant = *(const enum step_variant *)ctx->job->arg;
	bool odd = ctx->rank == 1;
	size_t count = variant == STEP_LENGTH_100001 ? 100000 :
	    variant == STEP_ALLGATHER_SMALL || variant == STEP_OP_SMALL ||
	    variant == STEP_DTYPE_SMALL ? 10 : 20000;
	/* Room for an allgather of count elements behind count + 1. */
	double *v = xmalloc((count + 1) * sizeof(double) * (ctx->world + 1));
	struct sr_error err, again;
	int64_t t0;
	int rc;

	for (size_t i = 0; i < (count + 1) * ctx->world; i++)
		v[i] = (double)i;
	if (sr_allreduce_sum_f64(ctx->ring, v, 10, &err) != 0) {
		/*
		 * The warm-up may end early only one way: its neighbours
		 * finished it, went on, and the abort of the next call
		 * reached this rank before the warm-up's last bytes.  An
		 * abort carries no sequence number, so the library fails
		 * whatever collective this rank is still in.
		 */
		RCHECK(ctx, err.code == SR_EOUT_OF_STEP && err.origin >= 0 &&
		    err.origin != (int64_t)ctx->rank, "the warm-up failed: %s",
		    err.message);
		ctx->report->aux[1] = 1;
		free(v);
		return rank_fail(ctx, &err);
	}
	t0 = ranks_now_ns();
	switch (variant) {
	case STEP_ALLGATHER:
	case STEP_ALLGATHER_SMALL:
		rc = odd ? sr_allgather(ctx->ring, v, count * sizeof(double), v +
		    count + 1, &err) : sr_allreduce_sum_f64(ctx->ring, v, count,
		    &err);
		break;
	case STEP_LENGTH_1001:
	case STEP_LENGTH_100001:
		rc = sr_allreduce_sum_f64(ctx->ring, v, count + odd, &err);
		break;
	case STEP_OP:
	case STEP_OP_SMALL:
		rc = sr_allreduce(ctx->ring, v, v, count, SR_F64,
		    odd ? SR_MAX : SR_SUM, &err);
		break;
	default:
		rc = sr_allreduce(ctx->ring, v, v, count, odd ? SR_I64 : SR_F64,
		    SR_SUM, &err);
		break;
	}
	ctx->report->aux[0] = ranks_now_ns() - t0;
	RCHECK(ctx, rc != 0, "the out-of-step call succeeded");
	if (rc == 0) {
		free(v);
		return 0;
	}
	rank_fail(ctx, &err);
	/* The ring stays broken, with the same error. */
	RCHECK(ctx, sr_barrier(ctx->ring, &again) != 0 && again.code == err.code,
	    "after the failure a barrier gave %s", sr_code_name(again.code));
	free(v);
	return -1;
}

static void
test_out_of_step(void)
{
	/* World 3 takes the both-way allgather for small calls, world 4
	 * recursive doubling between neighbours. */
	for (uint32_t w = 3; w <= 4; w++)
		for (int k = 0; k < STEP_VARIANTS; k++) {
			enum step_variant variant = (enum step_variant)k;
			struct ranks_job job = { .world = w, .timeout_ms = 10000,
				.scenario = out_of_step_scenario,
				.arg = &variant, .deadline_ms = 15000 };
			static struct ranks r;
			char text[SR_MESSAGE_MAX + 32];

			if (ranks_open(&r, &job) != 0 || ranks_start(&r) != 0)
				return;
			ranks_finish(&r);
			ranks_check_clean(&r, 0xff, false);
			for (uint32_t i = 0; i < w; i++) {
				const struct rank_report *rep = &r.report[i];

				if (!r.reported[i])
					continue;
				if (i == 2)
					printf("# world %u, %s: %s\n", w,
					    step_names[k], sr_error_format(&rep->err,
					    text, sizeof(text)));
				CHECKF(rep->rc != 0 &&
				    rep->err.code == SR_EOUT_OF_STEP,
				    "world %u, %s: rank %u: %s: %s", w,
				    step_names[k], i, sr_code_name(rep->err.code),
				    rep->err.message);
				/* Half the timeout: told, not timed out. */
				CHECKF(rep->aux[0] < job.timeout_ms * 500000LL,
				    "world %u, %s: rank %u took %.0f ms to fail", w,
				    step_names[k], i, ranks_ms(rep->aux[0]));
				if (rep->aux[1])
					printf("# world %u, %s: rank %u learnt of the "
					    "abort while still finishing the call "
					    "before\n", w, step_names[k], i);
			}
		}
}

/* --------------------------------------------- 8. edges of the config */

static void
test_world_of_one(void)
{
	struct sr_ring *ring = NULL;
	struct sr_error err;
	double v[5] = { 1, 2, 3, 4, 5 }, w[5] = { 0 };
	uint8_t bytes[7] = "abcdef", out[7] = { 0 };
	const char *addresses[1] = { "127.0.0.1:1" };

	CHECKF(sr_ring_connect(&ring, NULL, 0, NULL, 1, 7, NULL, &err) == 0,
	    "%s", err.message);
	if (ring == NULL)
		return;
	CHECK(sr_ring_rank(ring) == 0 && sr_ring_world(ring) == 1);
	CHECK(sr_allreduce(ring, v, w, 5, SR_F64, SR_SUM, &err) == 0);
	CHECK(memcmp(v, w, sizeof(v)) == 0);
	CHECK(sr_allreduce(ring, v, v, 5, SR_F64, SR_PROD, &err) == 0);
	CHECK(v[4] == 5);
	CHECK(sr_allreduce_max_f64(ring, v, 5, &err) == 0 && v[2] == 3);
	CHECK(sr_allgather(ring, bytes, 7, out, &err) == 0);
	CHECK(memcmp(bytes, out, 7) == 0);
	CHECK(sr_broadcast(ring, bytes, 7, 0, &err) == 0);
	CHECK(memcmp(bytes, "abcdef", 7) == 0);
	CHECK(sr_barrier(ring, &err) == 0);
	memset(out, 0, sizeof(out));
	CHECK(sr_ring_shift(ring, bytes, out, 7, &err) == 0);
	CHECK(memcmp(bytes, out, 7) == 0);
	CHECK(sr_broadcast(ring, bytes, 7, 1, &err) != 0 &&
	    err.code == SR_ECONFIG);
	sr_ring_close(ring);

	/* With an address list too. */
	CHECKF(sr_ring_connect(&ring, NULL, 0, addresses, 1, 7, NULL, &err) == 0,
	    "%s", err.message);
	sr_ring_close(ring);
}

static void
test_bad_configuration(void)
{
	const char *addresses[2] = { "127.0.0.1:1", "127.0.0.1:2" };
	struct sr_ring *ring = (struct sr_ring *)&ring;
	struct sr_listener *l = NULL;
	struct sr_error err;

	CHECK(sr_ring_connect(&ring, NULL, 2, addresses, 2, 7, NULL, &err) != 0);
	CHECKF(err.code == SR_ECONFIG, "rank 2 of 2: %s", sr_code_name(err.code));
	CHECK(ring == NULL);
	CHECK(sr_ring_connect(&ring, NULL, 5, addresses, 2, 7, NULL, &err) != 0 &&
	    err.code == SR_ECONFIG);
	CHECK(sr_ring_connect(&ring, NULL, 0, addresses, 0, 7, NULL, &err) != 0);
	CHECKF(err.code == SR_ECONFIG, "world 0: %s", sr_code_name(err.code));
	CHECK(ring == NULL);
	/* An unknown congestion control fails before any connection. */
	if (sr_listener_open(&l, "127.0.0.1", NULL, 0, &err) == 0) {
		struct sr_ring_options o;

		sr_ring_options_init(&o);
		o.congestion = "no-such-cc";
		CHECK(sr_ring_connect(&ring, l, 0, addresses, 2, 7, &o, &err) !=
		    0);
		CHECKF(err.code == SR_ECONFIG && err.phase == SR_PHASE_CONFIG &&
		    strstr(err.message, "no-such-cc") != NULL, "%s: %s",
		    sr_code_name(err.code), err.message);
		CHECK(ring == NULL);
	}
	/* A listener passed with a bad rank is still consumed. */
	if (sr_listener_open(&l, "127.0.0.1", NULL, 0, &err) == 0)
		CHECK(sr_ring_connect(&ring, l, 3, addresses, 2, 7, NULL, &err) !=
		    0 && err.code == SR_ECONFIG);

	l = NULL;
	CHECK(sr_listener_open(&l, "0.0.0.0", "0.0.0.0", 0, &err) != 0);
	CHECKF(err.code == SR_ECONFIG, "advertising 0.0.0.0: %s",
	    sr_code_name(err.code));
	CHECKF(strstr(err.message, "advertise") != NULL &&
	    strstr(err.message, "address") != NULL,
	    "the message does not say to advertise the node's address: \"%s\"",
	    err.message);
	CHECK(l == NULL);
	/* Listening on 0.0.0.0 without saying what to advertise is the same. */
	CHECK(sr_listener_open(&l, "0.0.0.0", NULL, 0, &err) != 0 &&
	    err.code == SR_ECONFIG);
	CHECK(sr_listener_open(&l, "::", "::", 0, &err) != 0 &&
	    err.code == SR_ECONFIG);
	/* Listening everywhere but advertising loopback is fine. */
	if (sr_listener_open(&l, "0.0.0.0", "127.0.0.1", 0, &err) == 0) {
		CHECKF(strncmp(sr_listener_address(l), "127.0.0.1:", 10) == 0,
		    "advertised %s", sr_listener_address(l));
		CHECK(sr_listener_port(l) != 0);
		sr_listener_close(l);
	} else {
		CHECKF(0, "0.0.0.0 advertised as 127.0.0.1: %s", err.message);
	}
}

static void
test_ipv6_loopback(void)
{
	struct ranks_job job = { .world = 2, .host = "::1",
		.scenario = small_sum_scenario, .deadline_ms = 15000 };
	static struct ranks r;
	int probe = socket(AF_INET6, SOCK_STREAM, 0);
	struct sockaddr_in6 sin6 = { .sin6_family = AF_INET6,
		.sin6_addr = IN6ADDR_LOOPBACK_INIT };

	/* No IPv6 loopback is a broken machine for this test, not a skip. */
	CHECKF(probe >= 0 && bind(probe, (struct sockaddr *)&sin6,
	    sizeof(sin6)) == 0, "this machine cannot bind [::1]: %s; the IPv6 "
	    "test needs the IPv6 loopback", strerror(errno));
	if (probe >= 0)
		close(probe);
	if (ranks_open(&r, &job) != 0)
		return;
	for (uint32_t i = 0; i < 2; i++)
		CHECKF(strncmp(r.address[i], "[::1]:", 6) == 0 &&
		    strlen(r.address[i]) > 6, "rank %u advertises %s", i,
		    r.address[i]);
	if (ranks_start(&r) != 0)
		return;
	ranks_finish(&r);
	ranks_check_clean(&r, 0xff, true);
}

/* ------------------------------------------------------ 9. clean close */

static int
clean_close_scenario(struct rank_ctx *ctx)
{
	int64_t total = (int64_t)ctx->world * (ctx->world + 1) / 2;
	size_t big = 200003, bcast = 4 * MiB;
	int64_t *v = xmalloc(big * sizeof(int64_t));
	uint8_t *b = xmalloc(bcast), *want = xmalloc(bcast);
	struct sr_error err;
	int64_t t0;
	int rc = 0;

	for (int k = 0; k < 50 && rc == 0; k++) {
		size_t count = k % 5 == 0 ? big : 1000 + (size_t)k * 37;

		for (size_t i = 0; i < count; i++)
			v[i] = (int64_t)(ctx->rank + 1) * (int64_t)(i % 97 + 1) + k;
		rc = sr_allreduce_sum_i64(ctx->ring, v, count, &err);
		RCHECK(ctx, rc == 0, "allreduce %d: %s", k, err.message);
		for (size_t i = 0; rc == 0 && i < count; i++)
			if (v[i] != total * (int64_t)(i % 97 + 1) +
			    (int64_t)ctx->world * k) {
				RCHECK(ctx, 0, "allreduce %d: element %zu is %lld", k,
				    i, (long long)v[i]);
				break;
			}
	}
	/* Ends unevenly: the root is done as soon as its bytes are queued,
	 * its last rank long after; the root's goodbye must not cut the
	 * others' last collective short. */
	pattern(want, bcast, 0, 9);
	if (ctx->rank == 0)
		memcpy(b, want, bcast);
	if (rc == 0) {
		rc = sr_broadcast(ctx->ring, b, bcast, 0, &err);
		RCHECK(ctx, rc == 0, "the last broadcast: %s", err.message);
		RCHECK(ctx, rc != 0 || memcmp(b, want, bcast) == 0,
		    "the last broadcast's bytes differ");
	}
	free(v);
	free(b);
	free(want);
	if (rc != 0)
		return rank_fail(ctx, &err);
	t0 = ranks_now_ns();
	sr_ring_close(ctx->ring);
	ctx->ring = NULL;
	ctx->report->aux[0] = ranks_now_ns() - t0;
	return 0;
}

static void
test_clean_close(void)
{
	struct ranks_job job = { .world = 4, .timeout_ms = 10000,
		.scenario = clean_close_scenario, .deadline_ms = 30000 };
	static struct ranks r;

	if (ranks_open(&r, &job) != 0 || ranks_start(&r) != 0)
		return;
	ranks_finish(&r);
	ranks_check_clean(&r, 0xff, true);
	for (uint32_t i = 0; i < 4; i++)
		/* The close drains to EOF for at most 2 s: reaching that
		 * bound means a neighbour never said goodbye. */
		CHECKF(r.report[i].aux[0] < 1900000000LL, "rank %u's close took "
		    "%.0f ms", i, ranks_ms(r.report[i].aux[0]));
}

/* ------------------------------------------- 10. closing is an agreement */

enum close_variant { CLOSE_AGREE, CLOSE_ROOTS, CLOSE_EXTRA, CLOSE_FEWER,
	CLOSE_VARIANTS };
static const char *const close_names[] = { "the same calls",
	"broadcast roots 0/1/1", "one barrier more on rank 2",
	"one broadcast fewer on rank 1" };

/*
 * A barrier, a broadcast (from 0; from 1 on ranks 1 and 2 with
 * CLOSE_ROOTS), then sr_ring_finish; with CLOSE_EXTRA rank 2 runs one
 * barrier more, with CLOSE_FEWER rank 1 skips the broadcast.  A root only
 * sends, so without the goodbyes each of these calls could return 0.
 */
static int
finish_scenario(struct rank_ctx *ctx)
{
	enum close_variant variant = *(const enum close_variant *)ctx->job->arg;
	uint32_t root = variant == CLOSE_ROOTS && ctx->rank > 0 ? 1 : 0;
	uint8_t buf[64];
	struct sr_error err;

	memset(buf, (int)ctx->rank, sizeof(buf));
	if (sr_barrier(ctx->ring, &err) != 0)
		return rank_fail(ctx, &err);
	if (!(variant == CLOSE_FEWER && ctx->rank == 1) &&
	    sr_broadcast(ctx->ring, buf, sizeof(buf), root, &err) != 0)
		return rank_fail(ctx, &err);
	if (variant == CLOSE_EXTRA && ctx->rank == 2 &&
	    sr_barrier(ctx->ring, &err) != 0)
		return rank_fail(ctx, &err);
	if (sr_ring_finish(ctx->ring, &err) != 0)
		return rank_fail(ctx, &err);
	RCHECK(ctx, buf[0] == 0 && buf[63] == 0, "the broadcast gave %u",
	    buf[0]);
	/* Finished: a second call agrees at once. */
	RCHECK(ctx, sr_ring_finish(ctx->ring, &err) == 0, "again: %s",
	    err.message);
	return 0;
}

static void
test_finish_agrees_or_fails_everywhere(void)
{
	for (int k = 0; k < CLOSE_VARIANTS; k++) {
		enum close_variant variant = (enum close_variant)k;
		struct ranks_job job = { .world = 3, .timeout_ms = 10000,
			.scenario = finish_scenario, .arg = &variant,
			.deadline_ms = 20000 };
		static struct ranks r;

		if (ranks_open(&r, &job) != 0 || ranks_start(&r) != 0)
			return;
		ranks_finish(&r);
		ranks_check_clean(&r, 0x7, variant == CLOSE_AGREE);
		for (uint32_t i = 0; i < 3; i++) {
			const struct rank_report *rep = &r.report[i];

			if (!r.reported[i] || variant == CLOSE_AGREE)
				continue;
			/* Every rank fails, out of step (its own finding or
			 * the abort of the rank that found it). */
			CHECKF(rep->rc != 0 && rep->err.code == SR_EOUT_OF_STEP,
			    "%s: rank %u: %s: %s", close_names[k], i,
			    sr_code_name(rep->err.code), rep->err.message);
		}
	}
}

/* With arguments, runs only the tests named: test_ring test_clean_close */
static bool
wanted(int argc, char **argv, const char *name)
{
	for (int i = 1; i < argc; i++)
		if (strcmp(argv[i], name) == 0)
			return true;
	return argc < 2;
}

#define RUN(fn)                                                                \
	do {                                                                   \
		if (wanted(argc, argv, #fn))                                   \
			TEST_RUN(fn);                                          \
	} while (0)

int
main(int argc, char **argv)
{
	int64_t t0 = ranks_now_ns();

	RUN(test_collectives_every_world);
	RUN(test_collectives_shared_cores);
	RUN(test_allreduce_64mib);
	RUN(test_streams_every_count);
	RUN(test_streams_mismatch_refused);
	RUN(test_mesh_doubling_world_8);
	RUN(test_mesh_blocks_world_8);
	RUN(test_bitwise_identical);
	RUN(test_fold_order_is_the_same_on_every_rank);
	RUN(test_congestion_control);
	RUN(test_strays_judged_before_the_rank);
	RUN(test_strays_queued_with_the_rank);
	RUN(test_connector_rejected);
	RUN(test_sigkill_mid_allreduce);
	RUN(test_sigstop_times_out);
	RUN(test_sigstop_resumed);
	RUN(test_out_of_step);
	RUN(test_world_of_one);
	RUN(test_bad_configuration);
	RUN(test_ipv6_loopback);
	RUN(test_clean_close);
	RUN(test_finish_agrees_or_fails_everywhere);
	printf("# %.1f s in all\n", ranks_ms(ranks_now_ns() - t0) / 1000);
	return TEST_DONE();
}
