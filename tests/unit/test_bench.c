/*
 * test_bench.c - the pure parts of `silvic-ring bench`: nccl-tests'
 * bandwidth arithmetic for known sizes and times, the sweep's sizes and
 * counts, adaptive iteration counts, the timing summary, the inputs and
 * their exact expected results against a naive fold for every op x dtype
 * and world sizes 1..40, the checks catching what they must, the option
 * values, and the link verdict.
 */
#include <math.h>
#include <stdint.h>
#include <string.h>

#include "check.h"
#include "bench_data.h"

static bool
near(double a, double b)
{
	return fabs(a - b) <= 1e-12 * (fabs(a) + fabs(b) + 1);
}

static void
test_bandwidth(void)
{
	/* 1 GB in one second on four ranks. */
	CHECK(near(bench_algbw(1000000000, 1.0), 1.0));
	CHECK(near(bench_busbw(BENCH_ALLREDUCE, 1000000000, 1.0, 4), 1.5));
	CHECK(near(bench_busbw(BENCH_ALLGATHER, 1000000000, 1.0, 4), 0.75));
	CHECK(near(bench_busbw(BENCH_BROADCAST, 1000000000, 1.0, 4), 1.0));
	/* 64 MiB in 10 ms on eight ranks: 6.7108864 GB/s, x 14/8. */
	CHECK(near(bench_algbw(67108864, 0.010), 6.7108864));
	CHECK(near(bench_busbw(BENCH_ALLREDUCE, 67108864, 0.010, 8),
	    6.7108864 * 1.75));
	/* 8 B in 1 us. */
	CHECK(near(bench_algbw(8, 1e-6), 0.008));
	/* A world of one: nccl-tests' factors give 0, but broadcast's 1. */
	CHECK(bench_bus_factor(BENCH_ALLREDUCE, 1) == 0);
	CHECK(bench_bus_factor(BENCH_ALLGATHER, 1) == 0);
	CHECK(bench_bus_factor(BENCH_BROADCAST, 1) == 1);
	CHECK(near(bench_bus_factor(BENCH_ALLREDUCE, 3), 4.0 / 3));
	CHECK(near(bench_bus_factor(BENCH_ALLGATHER, 3), 2.0 / 3));
	/* Never a division by zero, never NaN. */
	CHECK(bench_algbw(1024, 0) == 0);
	CHECK(bench_algbw(1024, -1) == 0);
	CHECK(bench_algbw(1024, NAN) == 0);
	CHECK(bench_busbw(BENCH_ALLREDUCE, 1024, 0, 4) == 0);
	CHECK(bench_bus_factor(BENCH_ALLREDUCE, 0) == 0);
}

static void
test_sizes(void)
{
	uint64_t n = 0, last = 0;

	for (uint64_t s = 8; s != 0; s = bench_next_size(s, 64u << 20, 2, 0))
		n++, last = s;
	CHECK(n == 24);
	CHECK(last == 64u << 20);
	/* A maximum that is not a step ends below it. */
	n = 0;
	for (uint64_t s = 8; s != 0; s = bench_next_size(s, 100, 4, 0))
		n++, last = s;
	CHECK(n == 2 && last == 32);
	/* Additive steps. */
	n = 0;
	for (uint64_t s = 1000; s != 0; s = bench_next_size(s, 5000, 1, 1000))
		n++, last = s;
	CHECK(n == 5 && last == 5000);
	/* No overflow near the top, no endless loop. */
	CHECK(bench_next_size(UINT64_MAX / 2 + 1, UINT64_MAX, 2, 0) == 0);
	CHECK(bench_next_size(UINT64_MAX - 1, UINT64_MAX, 1, 5) == 0);
	CHECK(bench_next_size(8, 8, 2, 0) == 0);
	CHECK(bench_next_size(8, 100, 1, 0) == 0);
	CHECK(bench_next_size(0, 100, 2, 0) == 0);
}

static void
test_counts(void)
{
	CHECK(bench_count(BENCH_ALLREDUCE, 8, 4, 4) == 2);
	CHECK(bench_count(BENCH_ALLREDUCE, 8, 8, 4) == 1);
	CHECK(bench_count(BENCH_ALLREDUCE, 4, 8, 4) == 0);
	CHECK(bench_count(BENCH_BROADCAST, 1024, 4, 3) == 256);
	/* allgather: size is everything gathered, count is per rank. */
	CHECK(bench_count(BENCH_ALLGATHER, 1024, 4, 4) == 64);
	CHECK(bench_row_bytes(BENCH_ALLGATHER, 64, 4, 4) == 1024);
	CHECK(bench_count(BENCH_ALLGATHER, 64, 8, 3) == 2);
	CHECK(bench_row_bytes(BENCH_ALLGATHER, 2, 8, 3) == 48);
	CHECK(bench_count(BENCH_ALLGATHER, 8, 8, 3) == 0);
	CHECK(bench_row_bytes(BENCH_ALLREDUCE, 3, 8, 9) == 24);
}

static void
test_adapt(void)
{
	CHECK(!bench_adapts(64u << 10, 0.1));
	CHECK(bench_adapts((64u << 10) - 1, 0.1));
	CHECK(!bench_adapts(8, 0));
	/* Large rows and --min-time 0 run exactly -n. */
	CHECK(bench_adapt_iters(1u << 20, 20, 0.1, 1e-6) == 20);
	CHECK(bench_adapt_iters(8, 20, 0, 1e-6) == 20);
	/* 1 ms an iteration fills 0.1 s with 100. */
	CHECK(bench_adapt_iters(8, 20, 0.1, 1e-3) == 100);
	/* Capped at 1000, never below -n. */
	CHECK(bench_adapt_iters(8, 20, 0.1, 1e-7) == BENCH_ADAPT_MAX);
	CHECK(bench_adapt_iters(8, 20, 0.1, 0) == BENCH_ADAPT_MAX);
	CHECK(bench_adapt_iters(8, 20, 0.1, 1.0) == 20);
	CHECK(bench_adapt_iters(8, 5000, 0.1, 1e-7) == 5000);
}

static void
test_timing(void)
{
	/* Three ranks, two iterations: rank-major seconds. */
	const double times[] = {
		1.0, 3.0,	/* rank 0: total 4 */
		2.0, 1.0,	/* rank 1: total 3 */
		0.5, 4.0,	/* rank 2: total 4.5 */
	};
	double v[] = { 5, 1, 4, 2, 3 }, w[] = { 4, 1, 3, 2 };
	struct bench_timing t;

	bench_timing_summarize(times, 3, 2, &t);
	/* Slowest per iteration: 2.0 and 4.0. */
	CHECK(near(t.time, 3.0));
	CHECK(t.slowest == 2);
	CHECK(near(t.spread_pct, (4.5 - 3.0) / 4.5 * 100));
	bench_timing_summarize(times, 1, 2, &t);
	CHECK(near(t.time, 2.0) && t.slowest == 0 && t.spread_pct == 0);
	CHECK(bench_median(v, 5) == 3);
	CHECK(bench_median(w, 4) == 2.5);
}

/* The result the ring must produce, folded naively over every rank. */
static int64_t
naive(uint64_t seed, enum sr_op op, uint32_t world, uint64_t index)
{
	int64_t acc = bench_value(seed, 0, index);

	for (uint32_t r = 1; r < world; r++) {
		int64_t v = bench_value(seed, r, index);

		if (op == SR_SUM)
			acc += v;
		else if (op == SR_MAX ? v > acc : v < acc)
			acc = v;
	}
	return acc;
}

static void
test_expected(void)
{
	static const enum sr_op ops[] = { SR_SUM, SR_MAX, SR_MIN };
	int lo = 0, hi = 0;

	for (uint32_t r = 0; r < 40; r++)
		for (uint64_t i = 0; i < 200; i++) {
			int v = bench_value(7, r, i);

			lo = v < lo ? v : lo;
			hi = v > hi ? v : hi;
		}
	CHECK(lo == -8 && hi == 8);
	for (uint32_t world = 1; world <= 40; world++)
		for (size_t o = 0; o < 3; o++) {
			struct bench_expect e;
			uint64_t bad = 0;

			bench_expect_init(&e, 3, ops[o], world);
			for (uint64_t i = 0; i < 500; i++)
				bad += bench_expect_at(&e, i) !=
				    naive(3, ops[o], world, i);
			CHECKF(bad == 0, "world %u op %s: %llu wrong", world,
			    sr_op_name(ops[o]), (unsigned long long)bad);
		}
	/* Sums over whole cycles of 17 ranks vanish: f32 stays exact for
	 * any world. */
	for (uint64_t i = 0; i < 17; i++)
		CHECK(naive(5, SR_SUM, 17 * 1000, i) == 0);
	/* Another seed, other inputs. */
	{
		int same = 0;

		for (uint64_t i = 0; i < 100; i++)
			same += bench_value(1, 0, i) == bench_value(2, 0, i);
		CHECK(same < 50);
	}
}

/* What a correct allreduce leaves: each rank's inputs folded with op. */
static void
reduce_locally(void *out, uint64_t count, enum sr_dtype dtype,
    enum sr_op op, uint32_t world, uint64_t seed)
{
	for (uint64_t i = 0; i < count; i++) {
		int64_t v = naive(seed, op, world, i);

		if (dtype == SR_F64)
			((double *)out)[i] = (double)v;
		else if (dtype == SR_F32)
			((float *)out)[i] = (float)v;
		else if (dtype == SR_I64)
			((int64_t *)out)[i] = v;
		else
			((int32_t *)out)[i] = (int32_t)v;
	}
}

static void
test_check_reduce(void)
{
	static const enum sr_dtype dtypes[] = {
		SR_F64, SR_F32, SR_I64, SR_I32
	};
	static const enum sr_op ops[] = { SR_SUM, SR_MAX, SR_MIN };
	static double buf[300];

	for (size_t d = 0; d < 4; d++)
		for (size_t o = 0; o < 3; o++)
			for (uint32_t world = 1; world <= 5; world++) {
				enum sr_dtype dt = dtypes[d];
				size_t es = sr_dtype_size(dt);
				struct bench_expect e;
				struct bench_mismatch m;

				bench_expect_init(&e, 9, ops[o], world);
				reduce_locally(buf, 300, dt, ops[o], world, 9);
				CHECK(bench_check_reduce(buf, 300, dt, &e, &m) ==
				    0);
				bench_corrupt_element(buf, 123, es);
				CHECK(bench_check_reduce(buf, 300, dt, &e, &m) ==
				    1);
				CHECK(m.element == 123 && m.byte == 123 * es);
				bench_corrupt_element(buf, 7, es);
				CHECK(bench_check_reduce(buf, 300, dt, &e, &m) ==
				    2);
				CHECK(m.element == 7);
			}
	/* The poison the bench writes before the check is never right. */
	memset(buf, 0x7f, sizeof(buf));
	for (size_t d = 0; d < 4; d++) {
		struct bench_expect e;

		bench_expect_init(&e, 1, SR_SUM, 4);
		CHECK(bench_check_reduce(buf, 100, dtypes[d], &e, NULL) == 100);
	}
	/* One rank's inputs are the result of a world of one. */
	{
		struct bench_expect e;
		struct bench_mismatch m;

		bench_fill(buf, 50, SR_F32, 4, 0);
		bench_expect_init(&e, 4, SR_SUM, 1);
		CHECK(bench_check_reduce(buf, 50, SR_F32, &e, &m) == 0);
		((float *)buf)[3] += 1;
		CHECK(bench_check_reduce(buf, 50, SR_F32, &e, &m) == 1);
		CHECK(m.element == 3 && strcmp(m.got, m.expected) != 0);
	}
}

static void
test_check_bytes(void)
{
	enum { PER = 5000, WORLD = 3 };
	static uint8_t all[PER * WORLD], tmp[PER];
	struct bench_mismatch m;

	for (uint32_t r = 0; r < WORLD; r++)
		bench_fill_bytes(all + r * PER, PER, 11, r);
	for (uint64_t i = 0; i < PER; i += 997)
		CHECK(all[PER + i] == bench_byte(11, 1, i));
	CHECK(bench_check_bytes(all, PER, WORLD, 0, 4, 11, &m) == 0);
	/* One flipped element (bytes 4000..4003 of rank 2's segment). */
	bench_corrupt_element(all + 2 * PER, 1000, 4);
	CHECK(bench_check_bytes(all, PER, WORLD, 0, 4, 11, &m) == 1);
	CHECK(m.element == (2 * PER) / 4 + 1000);
	CHECK(m.byte == 2 * PER + 4000);
	bench_corrupt_element(all + 2 * PER, 1000, 4);
	/* Two segments swapped: every element of both is wrong. */
	memcpy(tmp, all, PER);
	memcpy(all, all + PER, PER);
	memcpy(all + PER, tmp, PER);
	CHECK(bench_check_bytes(all, PER, WORLD, 0, 4, 11, &m) == 2 * PER / 4);
	CHECK(m.element == 0);
	/* A result nothing wrote (the poison) is wrong everywhere. */
	for (uint32_t r = 0; r < WORLD; r++)
		bench_poison_bytes(all + r * PER, PER, 11, r);
	CHECK(bench_check_bytes(all, PER, WORLD, 0, 8, 11, &m) ==
	    (PER * WORLD) / 8);
	/* Broadcast: one segment of the root's bytes. */
	bench_fill_bytes(tmp, PER, 11, 0);
	CHECK(bench_check_bytes(tmp, PER, 1, 0, 8, 11, NULL) == 0);
	CHECK(bench_check_bytes(tmp, PER, 1, 0, 8, 12, NULL) > 0);
}

static void
test_parse(void)
{
	double g;
	bool has;
	uint64_t size, index;
	uint32_t rank;
	unsigned mask;
	char buf[32];

	CHECK(bench_min_busbw_parse("10", &g, &has, &size) == 0 && g == 10 &&
	    !has);
	CHECK(bench_min_busbw_parse("2.5@1M", &g, &has, &size) == 0 &&
	    g == 2.5 && has && size == 1u << 20);
	CHECK(bench_min_busbw_parse("0", &g, &has, &size) == -1);
	CHECK(bench_min_busbw_parse("x", &g, &has, &size) == -1);
	CHECK(bench_min_busbw_parse("10@", &g, &has, &size) == -1);
	CHECK(bench_min_busbw_parse("@1M", &g, &has, &size) == -1);
	CHECK(bench_min_busbw_parse("nan", &g, &has, &size) == -1);
	CHECK(bench_min_busbw_parse("10@1Q", &g, &has, &size) == -1);
	CHECK(bench_corrupt_parse("2:5", &rank, &index) == 0 && rank == 2 &&
	    index == 5);
	CHECK(bench_corrupt_parse("2", &rank, &index) == -1);
	CHECK(bench_corrupt_parse(":5", &rank, &index) == -1);
	CHECK(bench_corrupt_parse("2:", &rank, &index) == -1);
	CHECK(bench_corrupt_parse("a:b", &rank, &index) == -1);
	CHECK(bench_corrupt_parse("-1:0", &rank, &index) == -1);
	CHECK(bench_dtype_parse("float", &mask) == 0 && mask == 1u << SR_F32);
	CHECK(bench_dtype_parse("double", &mask) == 0 && mask == 1u << SR_F64);
	CHECK(bench_dtype_parse("i64", &mask) == 0 && mask == 1u << SR_I64);
	CHECK(bench_dtype_parse("all", &mask) == 0 && mask == (1u << SR_F64 |
	    1u << SR_F32 | 1u << SR_I64 | 1u << SR_I32));
	CHECK(bench_dtype_parse("u8", &mask) == -1);
	CHECK(bench_dtype_parse("prod", &mask) == -1);
	CHECK(bench_op_parse("max", &mask) == 0 && mask == 1u << SR_MAX);
	CHECK(bench_op_parse("all", &mask) == 0 && mask == (1u << SR_SUM |
	    1u << SR_PROD | 1u << SR_MAX | 1u << SR_MIN));
	CHECK(bench_op_parse("prod", &mask) == 0 && mask == 1u << SR_PROD);
	CHECK(bench_op_parse("avg", &mask) == -1);
	CHECK(bench_coll_parse("links", &mask) == 0 &&
	    mask == 1u << BENCH_LINKS);
	CHECK(bench_coll_parse("all", &mask) == 0 && mask == 15);
	CHECK(bench_coll_parse("reduce", &mask) == -1);
	CHECK(strcmp(bench_size_format(64u << 20, buf, sizeof(buf)),
	    "64M") == 0);
	CHECK(strcmp(bench_size_format(1000, buf, sizeof(buf)), "1000") == 0);
	CHECK(strcmp(bench_size_format(3072, buf, sizeof(buf)), "3K") == 0);
	CHECK(strcmp(bench_size_format(8, buf, sizeof(buf)), "8") == 0);
}

static void
test_options(void)
{
	struct bench_options o;
	char why[256];

	bench_options_init(&o);
	CHECK(o.dtypes == 1u << SR_F32 && o.ops == 1u << SR_SUM);
	CHECK(o.minbytes == 8 && o.maxbytes == 64u << 20 && o.iters == 20);
	CHECK(bench_option_set(&o, 'b', "1K", why, sizeof(why)) == 0 &&
	    o.minbytes == 1024);
	CHECK(bench_option_set(&o, 'e', "12X", why, sizeof(why)) == -1);
	CHECK(strstr(why, "--maxbytes '12X'") != NULL);
	CHECK(bench_option_set(&o, 'd', "f16", why, sizeof(why)) == -1);
	CHECK(strstr(why, "--datatype 'f16'") != NULL);
	CHECK(bench_option_set(&o, 'o', "avg", why, sizeof(why)) == -1);
	CHECK(strstr(why, "--op 'avg'") != NULL);
	CHECK(bench_option_set(&o, 'c', "2", why, sizeof(why)) == -1);
	CHECK(bench_option_set(&o, 'n', "0", why, sizeof(why)) == -1);
	CHECK(bench_option_set(&o, BENCH_OPT_THRESHOLD, "1.5", why,
	    sizeof(why)) == -1);
	CHECK(bench_option_set(&o, BENCH_OPT_THRESHOLD, "0.25", why,
	    sizeof(why)) == 0 && o.threshold == 0.25);
	CHECK(bench_option_set(&o, 'x', "", why, sizeof(why)) == 1);
	CHECK(bench_options_check(&o, why, sizeof(why)) == 0);
	CHECK(bench_option_set(&o, 'e', "512", why, sizeof(why)) == 0);
	CHECK(bench_options_check(&o, why, sizeof(why)) == -1);
	CHECK(strstr(why, "--minbytes 1K is larger than --maxbytes 512") !=
	    NULL);
	bench_options_init(&o);
	CHECK(bench_option_set(&o, 'f', "4", why, sizeof(why)) == 0);
	CHECK(bench_option_set(&o, 'i', "1M", why, sizeof(why)) == 0);
	CHECK(bench_options_check(&o, why, sizeof(why)) == -1);
	bench_options_init(&o);
	CHECK(bench_option_set(&o, BENCH_OPT_CORRUPT, "1:2", why,
	    sizeof(why)) == 0);
	CHECK(bench_option_set(&o, 'c', "0", why, sizeof(why)) == 0);
	CHECK(bench_options_check(&o, why, sizeof(why)) == -1);
}

/* prod's inputs are -1 or 1 and its expected product is exact at any
 * world; --min-busbw refuses a size outside the sweep. */
static void
test_prod_and_gate(void)
{
	struct bench_options o;
	char why[256];

	for (uint32_t world = 1; world <= 40; world++) {
		struct bench_expect e;
		uint64_t bad = 0;

		bench_expect_init(&e, 3, SR_PROD, world);
		for (uint64_t i = 0; i < 500; i++) {
			int64_t p = 1;

			for (uint32_t r = 0; r < world; r++) {
				int v = bench_value_op(SR_PROD, 3, r, i);

				bad += v != -1 && v != 1;
				p *= v;
			}
			bad += bench_expect_at(&e, i) != p;
		}
		CHECKF(bad == 0, "world %u prod: %llu wrong", world,
		    (unsigned long long)bad);
	}
	bench_options_init(&o);
	CHECK(bench_option_set(&o, 'e', "1M", why, sizeof(why)) == 0);
	CHECK(bench_option_set(&o, BENCH_OPT_MIN_BUSBW, "5@16M", why,
	    sizeof(why)) == 0);
	CHECK(bench_options_check(&o, why, sizeof(why)) == -1);
	CHECKF(strcmp(why, "--min-busbw 5@16M: 16M is outside the sweep (8 "
	    "to 1M), so no row would be checked") == 0, "%s", why);
	CHECK(bench_option_set(&o, BENCH_OPT_MIN_BUSBW, "5@1M", why,
	    sizeof(why)) == 0);
	CHECK(bench_options_check(&o, why, sizeof(why)) == 0);
	/* the sweep ends at its last step, not at -e */
	CHECK(bench_option_set(&o, 'e', "1000", why, sizeof(why)) == 0);
	CHECK(bench_last_size(&o) == 512);
	CHECK(bench_option_set(&o, BENCH_OPT_MIN_BUSBW, "5@1000", why,
	    sizeof(why)) == 0);
	CHECK(bench_options_check(&o, why, sizeof(why)) == -1);
	/* without @SIZE: the sweep's last step */
	CHECK(bench_option_set(&o, BENCH_OPT_MIN_BUSBW, "5", why,
	    sizeof(why)) == 0);
	CHECK(bench_options_check(&o, why, sizeof(why)) == 0);
	CHECK(bench_gated(&o, 512, 512) && !bench_gated(&o, 256, 512));
	CHECK(bench_option_set(&o, 'r', "3", why, sizeof(why)) == 0 &&
	    o.root == 3);
	CHECK(bench_option_set(&o, 'r', "-1", why, sizeof(why)) == -1);
	CHECK(strstr(why, "--root '-1'") != NULL);
}

static void
test_below_min(void)
{
	struct bench_options o;

	bench_options_init(&o);
	CHECK(!bench_below_min(&o, 8, 1024, 0));
	/* Without @SIZE only the sweep's last size counts. */
	o.min_busbw_set = true;
	o.min_busbw = 10;
	CHECK(!bench_below_min(&o, 512, 1024, 1));
	CHECK(bench_below_min(&o, 1024, 1024, 9.99));
	CHECK(!bench_below_min(&o, 1024, 1024, 10));
	o.min_busbw_size_set = true;
	o.min_busbw_size = 256;
	CHECK(!bench_below_min(&o, 128, 1024, 1));
	CHECK(bench_below_min(&o, 256, 1024, 1));
	CHECK(bench_below_min(&o, 512, 1024, 1));
}

static void
test_digest(void)
{
	struct bench_options a, b;

	bench_options_init(&a);
	bench_options_init(&b);
	CHECK(bench_options_digest(&a) == bench_options_digest(&b));
	/* Output and the test hook differ between ranks freely. */
	b.json = true;
	b.corrupt = true;
	CHECK(bench_options_digest(&a) == bench_options_digest(&b));
	b.maxbytes = 1024;
	CHECK(bench_options_digest(&a) != bench_options_digest(&b));
	bench_options_init(&b);
	b.seed = 2;
	CHECK(bench_options_digest(&a) != bench_options_digest(&b));
	bench_options_init(&b);
	b.min_time = 0;
	CHECK(bench_options_digest(&a) != bench_options_digest(&b));
}

static void
test_ring_link_time(void)
{
	/* Link 2 -> 3 slow, transfers larger than the socket buffers: rank 2
	 * waits for its send, rank 3 for its receive. */
	const double big[] = { 1, 1, 100, 100 };
	/* The same with buffered sends: only the receiver waits. */
	const double small[] = { 1, 1, 1, 100 };
	/* Every link alike. */
	const double even[] = { 2, 2.1, 1.9, 2 };

	CHECK(bench_ring_link_time(big, 4, 0) == 1);
	CHECK(bench_ring_link_time(big, 4, 1) == 1);
	CHECK(bench_ring_link_time(big, 4, 2) == 100);
	CHECK(bench_ring_link_time(big, 4, 3) == 1);
	CHECK(bench_ring_link_time(small, 4, 0) == 1);
	CHECK(bench_ring_link_time(small, 4, 1) == 1);
	CHECK(bench_ring_link_time(small, 4, 2) == 100);
	CHECK(bench_ring_link_time(small, 4, 3) == 1);
	for (uint32_t i = 0; i < 4; i++)
		CHECK(bench_ring_link_time(even, 4, i) <= 2.1 &&
		    bench_ring_link_time(even, 4, i) >= 1.9);
}

static void
test_link_bytes(void)
{
	uint64_t max = 64u << 20, mb = 1u << 20;

	/* Fast links move --maxbytes. */
	CHECK(bench_link_bytes(max, mb, 0.001, 0.5) == max);
	CHECK(bench_link_bytes(max, mb, 0, 0.5) == max);
	/* 10 Mbit/s: a megabyte in 0.84 s; never less than the probe. */
	CHECK(bench_link_bytes(max, mb, 0.84, 0.5) == mb);
	/* 100 Mbit/s: half a second is 6.25 MB, in whole 4 KiB. */
	CHECK(bench_link_bytes(max, mb, 0.08388608, 0.5) == 6246400);
	CHECK(bench_link_bytes(max, mb, 0.08388608, 0.5) % 4096 == 0);
	/* A small --maxbytes is its own probe. */
	CHECK(bench_link_bytes(4096, 4096, 10, 0.5) == 4096);
}

static void
test_links_verdict(void)
{
	struct bench_link l[4] = {
		{ .gbps_alone = 1.0 }, { .gbps_alone = 1.2 },
		{ .gbps_alone = 0.01 }, { .gbps_alone = 0.9 },
	};
	struct bench_link even[2] = {
		{ .gbps_alone = 1 }, { .gbps_alone = 1 }
	};
	double median;

	CHECK(bench_links_verdict(l, 4, 0.5, &median) == 2);
	CHECK(near(median, 0.95));
	CHECK(!l[0].slow && !l[1].slow && l[2].slow && !l[3].slow);
	/* A threshold of 1 marks everything under the median. */
	bench_links_verdict(l, 4, 1.0, &median);
	CHECK(!l[0].slow && !l[1].slow && l[2].slow && l[3].slow);
	CHECK(bench_links_verdict(even, 2, 0.5, &median) == 0);
	CHECK(!even[0].slow && !even[1].slow);
}

int
main(void)
{
	TEST_RUN(test_bandwidth);
	TEST_RUN(test_sizes);
	TEST_RUN(test_counts);
	TEST_RUN(test_adapt);
	TEST_RUN(test_timing);
	TEST_RUN(test_expected);
	TEST_RUN(test_check_reduce);
	TEST_RUN(test_check_bytes);
	TEST_RUN(test_parse);
	TEST_RUN(test_prod_and_gate);
	TEST_RUN(test_options);
	TEST_RUN(test_below_min);
	TEST_RUN(test_digest);
	TEST_RUN(test_ring_link_time);
	TEST_RUN(test_link_bytes);
	TEST_RUN(test_links_verdict);
	return TEST_DONE();
}
