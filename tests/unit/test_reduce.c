/*
 * test_reduce.c - the reduction kernels against a naive reference, every op
 * x dtype, counts around the vector widths, out of place and in place into
 * either operand; the integer wrap-around; the dtype and op names.
 */
#include <stdint.h>
#include <string.h>

#include "check.h"
#include "reduce.h"

/* Elements past `count` that must stay untouched. */
#define GUARD 4
#define GUARD_BYTE 0xa5

static const size_t counts[] = { 0, 1, 2, 3, 7, 8, 9, 63, 64, 65, 1000 };
#define NCOUNTS (sizeof(counts) / sizeof(counts[0]))

static uint64_t
mix(uint64_t x)
{
	/* splitmix64: fixed, so a failure reproduces. */
	x += UINT64_C(0x9e3779b97f4a7c15);
	x = (x ^ (x >> 30)) * UINT64_C(0xbf58476d1ce4e5b9);
	x = (x ^ (x >> 27)) * UINT64_C(0x94d049bb133111eb);
	return x ^ (x >> 31);
}

/*
 * Fills n elements.  Integers take every bit pattern (so sums and products
 * overflow and wrap); floats are small multiples of 1/4, never NaN, never
 * -0 (max and min of 0 and -0 would depend on the argument order).
 */
static void
fill(void *buf, size_t n, enum sr_dtype dtype, uint64_t seed)
{
	for (size_t i = 0; i < n; i++) {
		uint64_t r = mix(seed * 1000003 + i);
		double f = (double)((int64_t)(r % 2001) - 1000) / 4.0;

		/* Every fourth element repeats a value, to test ties. */
		if (i % 4 == 3)
			r = mix(i), f = (double)(i % 9);
		switch (dtype) {
		case SR_F64:
			((double *)buf)[i] = f;
			break;
		case SR_F32:
			((float *)buf)[i] = (float)f;
			break;
		case SR_I64:
		case SR_U64:
			memcpy((uint64_t *)buf + i, &r, 8);
			break;
		case SR_I32:
		case SR_U32:
			((uint32_t *)buf)[i] = (uint32_t)r;
			break;
		default:
			break;
		}
	}
}

#define REFERENCE(type, utype)                                                 \
	do {                                                                   \
		const type *x = a, *y = b;                                     \
		type *d = dst;                                                 \
		for (size_t i = 0; i < count; i++) {                           \
			type r;                                                \
			if (op == SR_SUM)                                      \
				r = (type)((utype)x[i] + (utype)y[i]);         \
			else if (op == SR_PROD)                                \
				r = (type)((utype)x[i] * (utype)y[i]);         \
			else if (op == SR_MAX)                                 \
				r = y[i] < x[i] ? x[i] : y[i];                 \
			else                                                   \
				r = x[i] < y[i] ? x[i] : y[i];                 \
			d[i] = r;                                              \
		}                                                              \
	} while (0)

/* One element at a time, one branch per op: slow and obvious. */
static void
reference(void *dst, const void *a, const void *b, size_t count,
    enum sr_dtype dtype, enum sr_op op)
{
	switch (dtype) {
	case SR_F64:
		REFERENCE(double, double);
		break;
	case SR_F32:
		REFERENCE(float, float);
		break;
	case SR_I64:
		REFERENCE(int64_t, uint64_t);
		break;
	case SR_I32:
		REFERENCE(int32_t, uint32_t);
		break;
	case SR_U64:
		REFERENCE(uint64_t, uint64_t);
		break;
	case SR_U32:
		REFERENCE(uint32_t, uint32_t);
		break;
	default:
		break;
	}
}

static bool
guard_intact(const uint8_t *p, size_t bytes)
{
	for (size_t i = 0; i < bytes; i++)
		if (p[i] != GUARD_BYTE)
			return false;
	return true;
}

/* Returns the index of the first element that differs, or count. */
static size_t
first_difference(const uint8_t *x, const uint8_t *y, size_t count,
    size_t es)
{
	for (size_t i = 0; i < count; i++)
		if (memcmp(x + i * es, y + i * es, es) != 0)
			return i;
	return count;
}

/* Where the result goes: a third buffer, or over a, or over b. */
enum place { APART, OVER_A, OVER_B };

static void
check_one(enum sr_dtype dtype, enum sr_op op, size_t count, enum place at)
{
	size_t es = sr_dtype_size(dtype), bytes = count * es;
	size_t total = (count + GUARD) * es;
	uint8_t *a = malloc(total), *b = malloc(total), *dst = malloc(total);
	uint8_t *a0 = malloc(total), *b0 = malloc(total), *want = malloc(total);
	size_t bad;

	if (!a || !b || !dst || !a0 || !b0 || !want) {
		CHECK(!"out of memory");
		goto out;
	}
	memset(a, GUARD_BYTE, total);
	memset(b, GUARD_BYTE, total);
	memset(dst, GUARD_BYTE, total);
	fill(a, count, dtype, 1 + (uint64_t)count);
	fill(b, count, dtype, 2 + (uint64_t)count * 7);
	memcpy(a0, a, total);
	memcpy(b0, b, total);
	reference(want, a0, b0, count, dtype, op);

	if (at != APART) {
		uint8_t *d = at == OVER_A ? a : b;
		const char *which = at == OVER_A ? "into a" : "into b";

		sr_reduce(d, a, b, count, dtype, op);
		bad = first_difference(d, want, count, es);
		CHECKF(bad == count, "%s %s count %zu in place %s: element %zu",
		    sr_op_name(op), sr_dtype_name(dtype), count, which, bad);
		CHECKF(guard_intact(d + bytes, GUARD * es),
		    "%s %s count %zu in place %s: wrote past the end",
		    sr_op_name(op), sr_dtype_name(dtype), count, which);
		CHECKF(memcmp(at == OVER_A ? b : a, at == OVER_A ? b0 : a0,
		    total) == 0, "%s %s count %zu in place %s: the other "
		    "operand changed", sr_op_name(op), sr_dtype_name(dtype),
		    count, which);
	} else {
		sr_reduce(dst, a, b, count, dtype, op);
		bad = first_difference(dst, want, count, es);
		CHECKF(bad == count, "%s %s count %zu: element %zu",
		    sr_op_name(op), sr_dtype_name(dtype), count, bad);
		CHECKF(guard_intact(dst + bytes, GUARD * es),
		    "%s %s count %zu: wrote past the end", sr_op_name(op),
		    sr_dtype_name(dtype), count);
		CHECKF(memcmp(a, a0, total) == 0, "%s %s count %zu: a changed",
		    sr_op_name(op), sr_dtype_name(dtype), count);
		CHECKF(memcmp(b, b0, total) == 0, "%s %s count %zu: b changed",
		    sr_op_name(op), sr_dtype_name(dtype), count);
	}
out:
	free(a);
	free(b);
	free(dst);
	free(a0);
	free(b0);
	free(want);
}

static void
every_op_and_dtype(enum place at)
{
	for (int d = 0; d < SR_DTYPE_COUNT; d++)
		for (int o = 0; o < SR_OP_COUNT; o++)
			for (size_t c = 0; c < NCOUNTS; c++)
				check_one((enum sr_dtype)d, (enum sr_op)o,
				    counts[c], at);
}

static void
every_op_and_dtype_out_of_place(void)
{
	every_op_and_dtype(APART);
}

static void
every_op_and_dtype_in_place(void)
{
	every_op_and_dtype(OVER_A);
}

/* dst is b: the fold of a payload read straight into its place. */
static void
every_op_and_dtype_in_place_into_b(void)
{
	every_op_and_dtype(OVER_B);
}

/* A few values whose results are written out by hand, so the reference
 * above cannot hide a shared mistake. */
static void
known_values(void)
{
	double fa[3] = { 1.5, -2.0, 0.25 }, fb[3] = { 2.0, 3.0, -8.0 }, fd[3];
	int32_t ia[3] = { -7, 5, 100 }, ib[3] = { 3, -5, -100 }, id[3];
	uint32_t ua[2] = { 7, 0x80000000u }, ub[2] = { 9, 1 }, ud[2];

	sr_reduce(fd, fa, fb, 3, SR_F64, SR_SUM);
	CHECK(fd[0] == 3.5 && fd[1] == 1.0 && fd[2] == -7.75);
	sr_reduce(fd, fa, fb, 3, SR_F64, SR_PROD);
	CHECK(fd[0] == 3.0 && fd[1] == -6.0 && fd[2] == -2.0);
	sr_reduce(fd, fa, fb, 3, SR_F64, SR_MAX);
	CHECK(fd[0] == 2.0 && fd[1] == 3.0 && fd[2] == 0.25);
	sr_reduce(fd, fa, fb, 3, SR_F64, SR_MIN);
	CHECK(fd[0] == 1.5 && fd[1] == -2.0 && fd[2] == -8.0);
	sr_reduce(id, ia, ib, 3, SR_I32, SR_MAX);
	CHECK(id[0] == 3 && id[1] == 5 && id[2] == 100);
	sr_reduce(id, ia, ib, 3, SR_I32, SR_MIN);
	CHECK(id[0] == -7 && id[1] == -5 && id[2] == -100);
	/* Unsigned compare: 0x80000000 is large, not negative. */
	sr_reduce(ud, ua, ub, 2, SR_U32, SR_MAX);
	CHECK(ud[0] == 9 && ud[1] == 0x80000000u);
	sr_reduce(ud, ua, ub, 2, SR_U32, SR_MIN);
	CHECK(ud[0] == 7 && ud[1] == 1);
}

static void
signed_sum_wraps(void)
{
	int64_t a64[2] = { INT64_MAX, INT64_MIN }, b64[2] = { 1, -1 }, d64[2];
	int32_t a32[2] = { INT32_MAX, INT32_MIN }, b32[2] = { 1, -1 }, d32[2];

	/* Built with -fsanitize=undefined (and no recovery), a signed
	 * overflow in the kernel would stop the test here. */
	sr_reduce(d64, a64, b64, 2, SR_I64, SR_SUM);
	CHECK(d64[0] == INT64_MIN);
	CHECK(d64[1] == INT64_MAX);
	sr_reduce(d32, a32, b32, 2, SR_I32, SR_SUM);
	CHECK(d32[0] == INT32_MIN);
	CHECK(d32[1] == INT32_MAX);
}

static void
signed_prod_wraps(void)
{
	int64_t a64[3] = { INT64_MIN, INT64_MAX, INT64_C(1) << 32 };
	int64_t b64[3] = { -1, 2, INT64_C(1) << 32 }, d64[3];
	int32_t a32[3] = { INT32_MIN, INT32_MAX, 1 << 30 };
	int32_t b32[3] = { -1, 2, 4 }, d32[3];

	sr_reduce(d64, a64, b64, 3, SR_I64, SR_PROD);
	CHECK(d64[0] == INT64_MIN);
	CHECK(d64[1] == -2);
	CHECK(d64[2] == 0);
	sr_reduce(d32, a32, b32, 3, SR_I32, SR_PROD);
	CHECK(d32[0] == INT32_MIN);
	CHECK(d32[1] == -2);
	CHECK(d32[2] == 0);
}

static void
unsigned_wraps(void)
{
	uint64_t a64[2] = { UINT64_MAX, UINT64_MAX }, b64[2] = { 2, 2 }, d64[2];
	uint32_t a32[2] = { UINT32_MAX, 0x10000u }, b32[2] = { 2, 0x10000u };
	uint32_t d32[2];

	sr_reduce(d64, a64, b64, 1, SR_U64, SR_SUM);
	CHECK(d64[0] == 1);
	sr_reduce(d64, a64, b64, 2, SR_U64, SR_PROD);
	CHECK(d64[0] == UINT64_MAX - 1 && d64[1] == UINT64_MAX - 1);
	sr_reduce(d32, a32, b32, 1, SR_U32, SR_SUM);
	CHECK(d32[0] == 1);
	sr_reduce(d32, a32, b32, 2, SR_U32, SR_PROD);
	CHECK(d32[0] == UINT32_MAX - 1 && d32[1] == 0);
}

static void
dtype_names_sizes_round_trip(void)
{
	static const struct {
		enum sr_dtype dtype;
		const char *name;
		size_t size;
	} table[] = {
		{ SR_F64, "f64", 8 }, { SR_F32, "f32", 4 },
		{ SR_I64, "i64", 8 }, { SR_I32, "i32", 4 },
		{ SR_U64, "u64", 8 }, { SR_U32, "u32", 4 },
	};

	CHECK(sizeof(table) / sizeof(table[0]) == SR_DTYPE_COUNT);
	for (size_t i = 0; i < sizeof(table) / sizeof(table[0]); i++) {
		enum sr_dtype got = (enum sr_dtype)-1;

		CHECK(strcmp(sr_dtype_name(table[i].dtype), table[i].name) == 0);
		CHECK(sr_dtype_size(table[i].dtype) == table[i].size);
		CHECKF(sr_dtype_parse(table[i].name, &got) == 0, "%s",
		    table[i].name);
		CHECK(got == table[i].dtype);
	}
	CHECK(sr_dtype_size(SR_DTYPE_COUNT) == 0);
	CHECK(strcmp(sr_dtype_name(SR_DTYPE_COUNT), "?") == 0);
	CHECK(strcmp(sr_dtype_name((enum sr_dtype)-1), "?") == 0);
}

static void
op_names_round_trip(void)
{
	static const struct {
		enum sr_op op;
		const char *name;
	} table[] = {
		{ SR_SUM, "sum" }, { SR_MAX, "max" }, { SR_MIN, "min" },
		{ SR_PROD, "prod" },
	};

	CHECK(sizeof(table) / sizeof(table[0]) == SR_OP_COUNT);
	for (size_t i = 0; i < sizeof(table) / sizeof(table[0]); i++) {
		enum sr_op got = (enum sr_op)-1;

		CHECK(strcmp(sr_op_name(table[i].op), table[i].name) == 0);
		CHECKF(sr_op_parse(table[i].name, &got) == 0, "%s",
		    table[i].name);
		CHECK(got == table[i].op);
	}
	CHECK(strcmp(sr_op_name(SR_OP_COUNT), "?") == 0);
}

static void
unknown_names_rejected(void)
{
	static const char *const dtypes[] = { "", "f16", "F64", "f64 ", " f64",
		"i8", "u16", "double", "f6", "f644", "?" };
	static const char *const ops[] = { "", "avg", "Sum", "SUM", "sum ",
		"mul", "product", "maximum", "su", "?" };

	for (size_t i = 0; i < sizeof(dtypes) / sizeof(dtypes[0]); i++) {
		enum sr_dtype got = SR_U32;

		CHECKF(sr_dtype_parse(dtypes[i], &got) == -1, "\"%s\"",
		    dtypes[i]);
		CHECKF(got == SR_U32, "\"%s\" wrote the result", dtypes[i]);
	}
	for (size_t i = 0; i < sizeof(ops) / sizeof(ops[0]); i++) {
		enum sr_op got = SR_PROD;

		CHECKF(sr_op_parse(ops[i], &got) == -1, "\"%s\"", ops[i]);
		CHECKF(got == SR_PROD, "\"%s\" wrote the result", ops[i]);
	}
}

int
main(void)
{
	TEST_RUN(every_op_and_dtype_out_of_place);
	TEST_RUN(every_op_and_dtype_in_place);
	TEST_RUN(every_op_and_dtype_in_place_into_b);
	TEST_RUN(known_values);
	TEST_RUN(signed_sum_wraps);
	TEST_RUN(signed_prod_wraps);
	TEST_RUN(unsigned_wraps);
	TEST_RUN(dtype_names_sizes_round_trip);
	TEST_RUN(op_names_round_trip);
	TEST_RUN(unknown_names_rejected);
	return TEST_DONE();
}
