/*
 * reduce.c - the element-wise reduction kernels and the dtype/op names.
 * Pure: plain loops over typed, non-overlapping buffers that the compiler
 * vectorises.  Signed integer sums and products wrap (computed unsigned),
 * as every rank computes them in the same order.
 */
#include <string.h>

#include "reduce.h"

static const struct {
	const char *name;
	size_t size;
} dtypes[SR_DTYPE_COUNT] = {
	[SR_F64] = { "f64", 8 }, [SR_F32] = { "f32", 4 },
	[SR_I64] = { "i64", 8 }, [SR_I32] = { "i32", 4 },
	[SR_U64] = { "u64", 8 }, [SR_U32] = { "u32", 4 },
};

static const char *const ops[SR_OP_COUNT] = {
	[SR_SUM] = "sum", [SR_MAX] = "max", [SR_MIN] = "min", [SR_PROD] = "prod",
};

size_t
sr_dtype_size(enum sr_dtype dtype)
{
	return (unsigned)dtype < SR_DTYPE_COUNT ? dtypes[dtype].size : 0;
}

const char *
sr_dtype_name(enum sr_dtype dtype)
{
	return (unsigned)dtype < SR_DTYPE_COUNT ? dtypes[dtype].name : "?";
}

const char *
sr_op_name(enum sr_op op)
{
	return (unsigned)op < SR_OP_COUNT ? ops[op] : "?";
}

int
sr_dtype_parse(const char *name, enum sr_dtype *out)
{
	for (int i = 0; i < SR_DTYPE_COUNT; i++)
		if (strcmp(name, dtypes[i].name) == 0) {
			*out = (enum sr_dtype)i;
			return 0;
		}
	return -1;
}

int
sr_op_parse(const char *name, enum sr_op *out)
{
	for (int i = 0; i < SR_OP_COUNT; i++)
		if (strcmp(name, ops[i]) == 0) {
			*out = (enum sr_op)i;
			return 0;
		}
	return -1;
}

/*
 * Each kernel comes three times: out of place (three distinct buffers),
 * in place (dst is a) and in place the other way (dst is b), so that
 * every pointer can be restrict and the loop vectorises.  Element-wise
 * operations give the same bits at any vector width, so on x86-64 a
 * clone for AVX-512 and one for AVX2 are picked at load time by what the
 * processor has.
 */
#if defined(__x86_64__) && defined(__GNUC__) && !defined(__clang__)
#define CLONES __attribute__((target_clones("avx512f", "avx2", "default")))
#else
#define CLONES
#endif

#define KERNEL(fn, type, expr)                                                 \
	CLONES static void fn(type *restrict d, const type *restrict x,        \
	    const type *restrict y, size_t n)                                  \
	{                                                                      \
		for (size_t i = 0; i < n; i++) {                               \
			type a = x[i], b = y[i];                               \
			d[i] = (expr);                                         \
		}                                                              \
	}                                                                      \
	CLONES static void fn##_in(type *restrict d, const type *restrict y,   \
	    size_t n)                                                          \
	{                                                                      \
		for (size_t i = 0; i < n; i++) {                               \
			type a = d[i], b = y[i];                               \
			d[i] = (expr);                                         \
		}                                                              \
	}                                                                      \
	CLONES static void fn##_rin(type *restrict d, const type *restrict x,  \
	    size_t n)                                                          \
	{                                                                      \
		for (size_t i = 0; i < n; i++) {                               \
			type a = x[i], b = d[i];                               \
			d[i] = (expr);                                         \
		}                                                              \
	}

#define KERNELS(suffix, type, utype)                                           \
	KERNEL(sum_##suffix, type, (type)((utype)a + (utype)b))                \
	KERNEL(prod_##suffix, type, (type)((utype)a * (utype)b))               \
	KERNEL(max_##suffix, type, a > b ? a : b)                              \
	KERNEL(min_##suffix, type, a < b ? a : b)

KERNELS(f64, double, double)
KERNELS(f32, float, float)
KERNELS(i64, int64_t, uint64_t)
KERNELS(i32, int32_t, uint32_t)
KERNELS(u64, uint64_t, uint64_t)
KERNELS(u32, uint32_t, uint32_t)

#define CALL(fn)                                                               \
	do {                                                                   \
		if (dst == a)                                                  \
			fn##_in(dst, b, count);                                \
		else if (dst == b)                                             \
			fn##_rin(dst, a, count);                               \
		else                                                           \
			fn(dst, a, b, count);                                  \
	} while (0)

#define DISPATCH(suffix, type)                                                 \
	switch (op) {                                                          \
	case SR_SUM:                                                           \
		CALL(sum_##suffix);                                             \
		break;                                                         \
	case SR_PROD:                                                          \
		CALL(prod_##suffix);                                            \
		break;                                                         \
	case SR_MAX:                                                           \
		CALL(max_##suffix);                                             \
		break;                                                         \
	case SR_MIN:                                                           \
		CALL(min_##suffix);                                             \
		break;                                                         \
	default:                                                               \
		break;                                                         \
	}                                                                      \
	break

void
sr_reduce(void *dst, const void *a, const void *b, size_t count,
    enum sr_dtype dtype, enum sr_op op)
{
	switch (dtype) {
	case SR_F64:
		DISPATCH(f64, double);
	case SR_F32:
		DISPATCH(f32, float);
	case SR_I64:
		DISPATCH(i64, int64_t);
	case SR_I32:
		DISPATCH(i32, int32_t);
	case SR_U64:
		DISPATCH(u64, uint64_t);
	case SR_U32:
		DISPATCH(u32, uint32_t);
	default:
		break;
	}
}
