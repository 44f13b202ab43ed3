/*
 * expr.h - the VALUE tokens of `silvic-ring run` scripts: numbers,
 * expressions and N*V lists.
 *
 * A value is one token without spaces: a number (42, -1.5, 2e-3) or an
 * expression over numbers and the variables {rank} and {world} with + - *
 * / % and parentheses, e.g. `({world}-1)/2`.  Compiling checks the syntax;
 * evaluating happens later, once the ring gives rank and world.  Pure: no
 * I/O, no globals.
 *
 * N*V: a token whose text before its first '*' is a bare unsigned count,
 * digits with an optional K, M or G suffix (times 2^10, 2^20, 2^30), means
 * N copies of the value after that '*': `4*1` is four 1s, `1M*0.5` 1048576
 * halves, `2*{rank}+1` two copies of {rank}+1, `2*3*4` two 12s.  Anything
 * else before the first '*' makes the whole token one expression, so
 * `{rank}*2`, `(2)*3`, `(2*3)`, `1.5*2` and `-2*3` multiply.
 *
 * Arithmetic is exact on integers within +-(2^64-1): 7/2 is 3.5 (an exact
 * quotient stays an integer, 6/3 is 2), % takes the sign of the dividend
 * as in C.  A literal or result beyond that range, and anything with a
 * decimal point or an exponent, continues in double precision.  Division
 * by zero and a result that is not finite are errors.
 */
#ifndef SR_EXPR_H
#define SR_EXPR_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "silvic_ring.h"

/* A number: an exact integer (neg, mag; never a negative zero) or f. */
struct expr_num {
	bool integer;
	bool neg;
	uint64_t mag;
	double f;
};

struct expr;

/*
 * Compiles the expression s[0..len) (not NUL-terminated).  0 on success
 * with *out owned by the caller (expr_free).  -1 with *at the offset in s
 * of the offending character (len for "ends early") and why filled:
 * "unexpected ')'", "missing a number at the end", "missing ')'",
 * "unknown variable '{rnak}'", "number '1e999' is too large", "nested too
 * deeply".
 */
int expr_compile(const char *s, size_t len, struct expr **out, size_t *at,
    char *why, size_t why_size);
void expr_free(struct expr *expr);
/* True when the expression uses neither {rank} nor {world}. */
bool expr_constant(const struct expr *expr);
/* 0 with *out set, or -1 with why "divides by zero" or "overflows". */
int expr_eval(const struct expr *expr, uint64_t rank, uint64_t world,
    struct expr_num *out, char *why, size_t why_size);

/* One VALUE token: N copies of expr; text is the token after "N*". */
struct expr_value {
	char *text;
	uint64_t copies;
	struct expr *expr;
};

/* What a value must be. */
enum expr_role {
	EXPR_ELEMENT,	/* one element of a dtype */
	EXPR_ROOT,	/* a rank: a whole number below the world */
	EXPR_SECONDS	/* 0 to EXPR_SECONDS_MAX */
};

#define EXPR_SECONDS_MAX 3600

/*
 * Parses one VALUE token s[0..len).  0 on success (free v with
 * expr_value_fini); -1 with *at the offset in s of the fault and why the
 * whole message: "count '0' is zero", "count '99999999999999999999K' is
 * too large", "malformed value '1+': missing a number at the end".
 */
int expr_value_parse(const char *s, size_t len, struct expr_value *v,
    size_t *at, char *why, size_t why_size);
void expr_value_fini(struct expr_value *v);
/*
 * Evaluates v (one copy) for role: out gets a dtype element (EXPR_ELEMENT,
 * sr_dtype_size(dtype) bytes), a uint32_t rank (EXPR_ROOT; world 0 means
 * not yet known, so only the sign and the integer are checked) or a double
 * (EXPR_SECONDS).  -1 with why: "value '1/0' divides by zero", "value
 * '1.5' is not an integer for i64", "value '{rank}-1' is -1, out of range
 * for u32", "root '{world}' is 1, out of range for a world of 1", "sleep
 * '5000' is out of range (0 to 3600 seconds)".
 */
int expr_value_eval(const struct expr_value *v, enum expr_role role,
    enum sr_dtype dtype, uint64_t rank, uint64_t world, void *out,
    char *why, size_t why_size);

/* The number as a double (nearest). */
double expr_num_double(const struct expr_num *v);
/* Integers in decimal, others as expr_format_double; returns buf. */
char *expr_num_format(const struct expr_num *v, char *buf, size_t size);
/*
 * The shortest "%.Ng" (N up to 17, or 9 with single) that reads back as
 * the same double (float with single); returns buf.
 */
char *expr_format_double(double v, bool single, char *buf, size_t size);

#endif
