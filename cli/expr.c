/*
 * expr.c - the VALUE tokens of run scripts: a recursive-descent compiler
 * of expressions to a postfix program, its evaluator, N*V lists and the
 * checks of a value against what it must be.  Pure: no I/O.
 *
 *	sum     := product (('+' | '-') product)*
 *	product := unary (('*' | '/' | '%') unary)*
 *	unary   := ('-' | '+') unary | primary
 *	primary := NUMBER | '{rank}' | '{world}' | '(' sum ')'
 *	NUMBER  := DIGITS ['.' [DIGITS]] [EXP] | '.' DIGITS [EXP]
 *	EXP     := ('e' | 'E') ['+' | '-'] DIGITS
 *
 * Nesting is bounded (EXPR_DEPTH) so that neither the compiler's
 * recursion nor the evaluator's fixed stack can overflow on a 64 KiB line.
 */
#include <float.h>
#include <math.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "expr.h"

#define EXPR_DEPTH 32
#define EXPR_STACK (2 * EXPR_DEPTH + 4)

enum code { PUSH_NUM, PUSH_RANK, PUSH_WORLD, NEG, ADD, SUB, MUL, DIV, MOD };

struct instr {
	enum code code;
	struct expr_num num;
};

struct expr {
	size_t n;
	bool constant;
	struct instr code[];
};

struct compiler {
	const char *s;
	size_t len;
	size_t pos;
	int depth;
	size_t stack;		/* values the program holds at this point */
	struct expr *expr;
	size_t at;
	char *why;
	size_t why_size;
};

static int sum(struct compiler *c);

static int __attribute__((format(printf, 3, 4)))
fail(struct compiler *c, size_t at, const char *fmt, ...)
{
	va_list ap;

	c->at = at;
	va_start(ap, fmt);
	vsnprintf(c->why, c->why_size, fmt, ap);
	va_end(ap);
	return -1;
}

static int
unexpected(struct compiler *c)
{
	if (c->pos >= c->len)
		return fail(c, c->len, "missing a number at the end");
	if (c->s[c->pos] < ' ' || c->s[c->pos] > '~')
		return fail(c, c->pos, "unexpected byte 0x%02x",
		    (unsigned char)c->s[c->pos]);
	return fail(c, c->pos, "unexpected '%c'", c->s[c->pos]);
}

/* Appends one instruction, tracking how deep the evaluator's stack gets. */
static int
emit(struct compiler *c, enum code code, const struct expr_num *num)
{
	struct instr *in = &c->expr->code[c->expr->n++];

	in->code = code;
	if (num != NULL)
		in->num = *num;
	if (code <= PUSH_WORLD && ++c->stack > EXPR_STACK)
		return fail(c, c->pos, "nested too deeply");
	if (code >= ADD)
		c->stack--;
	if (code == PUSH_RANK || code == PUSH_WORLD)
		c->expr->constant = false;
	return 0;
}

static size_t
digits(const char *s, size_t len, size_t pos)
{
	while (pos < len && s[pos] >= '0' && s[pos] <= '9')
		pos++;
	return pos;
}

/* An all-digit literal: exact when it fits in 64 bits. */
static bool
exact_integer(const char *s, size_t len, uint64_t *out)
{
	uint64_t v = 0;

	for (size_t i = 0; i < len; i++) {
		unsigned d = (unsigned)(s[i] - '0');

		if (v > (UINT64_MAX - d) / 10)
			return false;
		v = v * 10 + d;
	}
	*out = v;
	return true;
}

static int
number(struct compiler *c)
{
	struct expr_num num = { .integer = true };
	size_t start = c->pos, end = digits(c->s, c->len, c->pos);
	bool whole = true;
	char *copy;

	if (end < c->len && c->s[end] == '.') {
		whole = false;
		end = digits(c->s, c->len, end + 1);
	}
	if (end == start + 1 && c->s[start] == '.')
		return unexpected(c);
	if (end < c->len && (c->s[end] == 'e' || c->s[end] == 'E')) {
		size_t e = end + 1;

		if (e < c->len && (c->s[e] == '+' || c->s[e] == '-'))
			e++;
		if (digits(c->s, c->len, e) == e) {
			c->pos = end;
			return unexpected(c);
		}
		whole = false;
		end = digits(c->s, c->len, e);
	}
	c->pos = end;
	if (whole && exact_integer(c->s + start, end - start, &num.mag))
		return emit(c, PUSH_NUM, &num);
	if ((copy = strndup(c->s + start, end - start)) == NULL)
		return fail(c, start, "out of memory");
	num.integer = false;
	num.f = strtod(copy, NULL);
	free(copy);
	if (isinf(num.f))
		return fail(c, start, "number '%.*s' is too large",
		    (int)(end - start), c->s + start);
	return emit(c, PUSH_NUM, &num);
}

static int
variable(struct compiler *c)
{
	static const char rank[] = "{rank}", world[] = "{world}";
	const char *s = c->s + c->pos, *close;
	size_t left = c->len - c->pos;

	if (left >= strlen(rank) && memcmp(s, rank, strlen(rank)) == 0) {
		c->pos += strlen(rank);
		return emit(c, PUSH_RANK, NULL);
	}
	if (left >= strlen(world) && memcmp(s, world, strlen(world)) == 0) {
		c->pos += strlen(world);
		return emit(c, PUSH_WORLD, NULL);
	}
	close = memchr(s, '}', left);
	return fail(c, c->pos, "unknown variable '%.*s'",
	    (int)(close != NULL ? (size_t)(close - s) + 1 : left), s);
}

static int
primary(struct compiler *c)
{
	char ch = c->pos < c->len ? c->s[c->pos] : '\0';

	if ((ch >= '0' && ch <= '9') || ch == '.')
		return number(c);
	if (ch == '{')
		return variable(c);
	if (ch != '(')
		return unexpected(c);
	if (++c->depth > EXPR_DEPTH)
		return fail(c, c->pos, "nested too deeply");
	c->pos++;
	if (sum(c) != 0)
		return -1;
	if (c->pos >= c->len)
		return fail(c, c->len, "missing ')'");
	if (c->s[c->pos] != ')')
		return unexpected(c);
	c->pos++;
	c->depth--;
	return 0;
}

/* Whether the next character is one of set (never the '\0' strchr finds). */
static bool
next_in(const struct compiler *c, const char *set)
{
	return c->pos < c->len && c->s[c->pos] != '\0' &&
	    strchr(set, c->s[c->pos]) != NULL;
}

static int
unary(struct compiler *c)
{
	char ch = c->pos < c->len ? c->s[c->pos] : '\0';
	int rc;

	if (ch != '-' && ch != '+')
		return primary(c);
	if (++c->depth > EXPR_DEPTH)
		return fail(c, c->pos, "nested too deeply");
	c->pos++;
	rc = unary(c);
	c->depth--;
	if (rc != 0 || ch == '+')
		return rc;
	return emit(c, NEG, NULL);
}

static int
product(struct compiler *c)
{
	if (unary(c) != 0)
		return -1;
	while (next_in(c, "*/%")) {
		char ch = c->s[c->pos++];

		if (unary(c) != 0)
			return -1;
		if (emit(c, ch == '*' ? MUL : ch == '/' ? DIV : MOD, NULL) != 0)
			return -1;
	}
	return 0;
}

static int
sum(struct compiler *c)
{
	if (product(c) != 0)
		return -1;
	while (next_in(c, "+-")) {
		char ch = c->s[c->pos++];

		if (product(c) != 0)
			return -1;
		if (emit(c, ch == '+' ? ADD : SUB, NULL) != 0)
			return -1;
	}
	return 0;
}

int
expr_compile(const char *s, size_t len, struct expr **out, size_t *at,
    char *why, size_t why_size)
{
	struct compiler c = { .s = s, .len = len, .why = why,
		.why_size = why_size };

	*out = NULL;
	/* Every instruction consumes at least one character. */
	c.expr = malloc(sizeof(*c.expr) + (len + 1) * sizeof(c.expr->code[0]));
	if (c.expr == NULL) {
		*at = 0;
		snprintf(why, why_size, "out of memory");
		return -1;
	}
	c.expr->n = 0;
	c.expr->constant = true;
	if (sum(&c) != 0 || (c.pos < len && unexpected(&c) != 0)) {
		*at = c.at;
		free(c.expr);
		return -1;
	}
	/* Give back what a long token reserved. */
	*out = realloc(c.expr, sizeof(*c.expr) +
	    c.expr->n * sizeof(c.expr->code[0]));
	if (*out == NULL)
		*out = c.expr;
	return 0;
}

void
expr_free(struct expr *expr)
{
	free(expr);
}

bool
expr_constant(const struct expr *expr)
{
	return expr->constant;
}

double
expr_num_double(const struct expr_num *v)
{
	if (!v->integer)
		return v->f;
	return v->neg ? -(double)v->mag : (double)v->mag;
}

static struct expr_num
integer(bool neg, uint64_t mag)
{
	struct expr_num v = { .integer = true, .neg = neg && mag != 0,
		.mag = mag };

	return v;
}

/* Exact integer arithmetic; -1 when the result is not an integer within
 * +-(2^64-1), so the caller goes on in double precision. */
static int
integer_op(enum code code, const struct expr_num *a, const struct expr_num *b,
    struct expr_num *out)
{
	switch (code) {
	case SUB:
	case ADD: {
		bool bneg = code == SUB ? !b->neg : b->neg;

		if (a->neg == bneg) {
			if (a->mag > UINT64_MAX - b->mag)
				return -1;
			*out = integer(a->neg, a->mag + b->mag);
		} else if (a->mag >= b->mag) {
			*out = integer(a->neg, a->mag - b->mag);
		} else {
			*out = integer(bneg, b->mag - a->mag);
		}
		return 0;
	}
	case MUL:
		if (b->mag != 0 && a->mag > UINT64_MAX / b->mag)
			return -1;
		*out = integer(a->neg != b->neg, a->mag * b->mag);
		return 0;
	case DIV:
		if (a->mag % b->mag != 0)
			return -1;
		*out = integer(a->neg != b->neg, a->mag / b->mag);
		return 0;
	case MOD:
		*out = integer(a->neg, a->mag % b->mag);
		return 0;
	default:
		return -1;
	}
}

static int
apply(enum code code, const struct expr_num *a, const struct expr_num *b,
    struct expr_num *out, char *why, size_t why_size)
{
	double x = expr_num_double(a), y = expr_num_double(b), r;

	if ((code == DIV || code == MOD) && y == 0) {
		snprintf(why, why_size, "divides by zero");
		return -1;
	}
	if (a->integer && b->integer && integer_op(code, a, b, out) == 0)
		return 0;
	switch (code) {
	case ADD: r = x + y; break;
	case SUB: r = x - y; break;
	case MUL: r = x * y; break;
	case DIV: r = x / y; break;
	default: r = fmod(x, y); break;
	}
	if (!isfinite(r)) {
		snprintf(why, why_size, "overflows");
		return -1;
	}
	*out = (struct expr_num){ .f = r };
	return 0;
}

int
expr_eval(const struct expr *expr, uint64_t rank, uint64_t world,
    struct expr_num *out, char *why, size_t why_size)
{
	struct expr_num stack[EXPR_STACK];
	size_t sp = 0;

	for (size_t i = 0; i < expr->n; i++) {
		const struct instr *in = &expr->code[i];

		switch (in->code) {
		case PUSH_NUM: stack[sp++] = in->num; break;
		case PUSH_RANK: stack[sp++] = integer(false, rank); break;
		case PUSH_WORLD: stack[sp++] = integer(false, world); break;
		case NEG:
			if (stack[sp - 1].integer)
				stack[sp - 1].neg = !stack[sp - 1].neg &&
				    stack[sp - 1].mag != 0;
			else
				stack[sp - 1].f = -stack[sp - 1].f;
			break;
		default:
			if (apply(in->code, &stack[sp - 2], &stack[sp - 1],
				&stack[sp - 2], why, why_size) != 0)
				return -1;
			sp--;
			break;
		}
	}
	*out = stack[0];
	return 0;
}

static int
whole(const struct expr_num *v, bool *neg, uint64_t *mag)
{
	if (v->integer) {
		*neg = v->neg;
		*mag = v->mag;
		return 0;
	}
	/* 2^64: the first magnitude a u64 cannot hold. */
	if (v->f != floor(v->f) || fabs(v->f) >= 18446744073709551616.0)
		return -1;
	*neg = v->f < 0;
	*mag = (uint64_t)fabs(v->f);
	return 0;
}

static int
store_integer(bool neg, uint64_t mag, enum sr_dtype dtype, void *out)
{
	int64_t i64;
	int32_t i32;
	uint32_t u32;

	switch (dtype) {
	case SR_I64:
		if (mag > (neg ? (uint64_t)INT64_MAX + 1 : (uint64_t)INT64_MAX))
			return -1;
		/* mag >= 1 when neg: -(2^63) is reached without overflow. */
		i64 = neg ? -(int64_t)(mag - 1) - 1 : (int64_t)mag;
		memcpy(out, &i64, sizeof(i64));
		return 0;
	case SR_I32:
		if (mag > (neg ? (uint64_t)INT32_MAX + 1 : (uint64_t)INT32_MAX))
			return -1;
		i32 = (int32_t)(neg ? -(int64_t)mag : (int64_t)mag);
		memcpy(out, &i32, sizeof(i32));
		return 0;
	case SR_U64:
		if (neg)
			return -1;
		memcpy(out, &mag, sizeof(mag));
		return 0;
	default:
		if (neg || mag > UINT32_MAX)
			return -1;
		u32 = (uint32_t)mag;
		memcpy(out, &u32, sizeof(u32));
		return 0;
	}
}

static int
store(const struct expr_num *v, enum sr_dtype dtype, void *out,
    char *why, size_t why_size)
{
	double d = expr_num_double(v);
	float f;
	bool neg;
	uint64_t mag;

	if (dtype == SR_F64) {
		memcpy(out, &d, sizeof(d));
		return 0;
	}
	if (dtype == SR_F32) {
		/* Converting a double beyond FLT_MAX to float is undefined. */
		if (fabs(d) > FLT_MAX) {
			snprintf(why, why_size, "out of range for f32");
			return -1;
		}
		f = (float)d;
		memcpy(out, &f, sizeof(f));
		return 0;
	}
	if (whole(v, &neg, &mag) != 0 && v->f != floor(v->f)) {
		snprintf(why, why_size, "not an integer for %s",
		    sr_dtype_name(dtype));
		return -1;
	}
	if (whole(v, &neg, &mag) != 0 ||
	    store_integer(neg, mag, dtype, out) != 0) {
		snprintf(why, why_size, "out of range for %s",
		    sr_dtype_name(dtype));
		return -1;
	}
	return 0;
}

char *
expr_format_double(double v, bool single, char *buf, size_t size)
{
	int max = single ? 9 : 17;

	/* Whole numbers as integers ("10", not "1e+01") while exact. */
	if (v == (double)(int64_t)v && v > -9007199254740992.0 &&
	    v < 9007199254740992.0) {
		snprintf(buf, size, "%lld", (long long)v);
		if (v == 0 && signbit(v))
			snprintf(buf, size, "-0");
		return buf;
	}
	for (int digits = 1; digits <= max; digits++) {
		snprintf(buf, size, "%.*g", digits, v);
		if (single ? strtof(buf, NULL) == (float)v :
		    strtod(buf, NULL) == v)
			return buf;
	}
	return buf;
}

char *
expr_num_format(const struct expr_num *v, char *buf, size_t size)
{
	if (v->integer)
		snprintf(buf, size, "%s%llu", v->neg ? "-" : "",
		    (unsigned long long)v->mag);
	else
		expr_format_double(v->f, false, buf, size);
	return buf;
}

/* N of N*V when the text before the first '*' is a bare count: 1 with
 * *copies and *skip (the length of "N*"), 0 when it is no count, -1 when
 * the count is zero or too large. */
static int
count_prefix(const char *s, size_t len, uint64_t *copies, size_t *skip,
    char *why, size_t why_size)
{
	static const char units[] = "KMG";
	const char *star = memchr(s, '*', len), *unit;
	size_t n, ndigits;
	int shift = 0;
	uint64_t v;

	if (star == NULL)
		return 0;
	n = (size_t)(star - s);
	ndigits = digits(s, n, 0);
	if (ndigits > 0 && ndigits + 1 == n && s[ndigits] != '\0' &&
	    (unit = strchr(units, s[ndigits])) != NULL)
		shift = 10 * (int)(unit - units + 1);
	else if (ndigits == 0 || ndigits != n)
		return 0;
	if (!exact_integer(s, ndigits, &v) || v > (UINT64_MAX >> shift)) {
		snprintf(why, why_size, "count '%.*s' is too large", (int)n, s);
		return -1;
	}
	if (v == 0) {
		snprintf(why, why_size, "count '%.*s' is zero", (int)n, s);
		return -1;
	}
	*copies = v << shift;
	*skip = n + 1;
	return 1;
}

int
expr_value_parse(const char *s, size_t len, struct expr_value *v,
    size_t *at, char *why, size_t why_size)
{
	char reason[128];
	size_t skip = 0;

	memset(v, 0, sizeof(*v));
	v->copies = 1;
	*at = 0;
	if (count_prefix(s, len, &v->copies, &skip, why, why_size) < 0)
		return -1;
	if ((v->text = strndup(s + skip, len - skip)) == NULL) {
		snprintf(why, why_size, "out of memory");
		return -1;
	}
	if (expr_compile(s + skip, len - skip, &v->expr, at, reason,
		sizeof(reason)) != 0) {
		*at += skip;
		snprintf(why, why_size, "malformed value '%.*s': %s",
		    (int)len, s, reason);
		expr_value_fini(v);
		return -1;
	}
	return 0;
}

void
expr_value_fini(struct expr_value *v)
{
	free(v->text);
	expr_free(v->expr);
	memset(v, 0, sizeof(*v));
}

/* "<word> '<text>' is <predicate>", with the number when the text is an
 * expression: "value '{rank}-1' is -1, out of range for u32". */
static int
refuse(const struct expr_value *v, const struct expr_num *num,
    const char *word, const char *predicate, char *why, size_t why_size)
{
	char number[64];

	expr_num_format(num, number, sizeof(number));
	if (strcmp(number, v->text) == 0)
		snprintf(why, why_size, "%s '%s' is %s", word, v->text,
		    predicate);
	else
		snprintf(why, why_size, "%s '%s' is %s, %s", word, v->text,
		    number, predicate);
	return -1;
}

static int
fit_root(const struct expr_value *v, const struct expr_num *num,
    uint64_t world, uint32_t *out, char *why, size_t why_size)
{
	char predicate[64] = "out of range";
	bool neg;
	uint64_t mag;

	if (whole(num, &neg, &mag) != 0 && num->f != floor(num->f))
		return refuse(v, num, "root", "not an integer", why, why_size);
	if (world > 0)
		snprintf(predicate, sizeof(predicate),
		    "out of range for a world of %llu",
		    (unsigned long long)world);
	if (whole(num, &neg, &mag) != 0 || neg || mag >= UINT32_MAX ||
	    (world > 0 && mag >= world))
		return refuse(v, num, "root", predicate, why, why_size);
	*out = (uint32_t)mag;
	return 0;
}

int
expr_value_eval(const struct expr_value *v, enum expr_role role,
    enum sr_dtype dtype, uint64_t rank, uint64_t world, void *out,
    char *why, size_t why_size)
{
	const char *word = role == EXPR_ROOT ? "root" :
	    role == EXPR_SECONDS ? "sleep" : "value";
	char predicate[64];
	struct expr_num num;
	double seconds;

	if (expr_eval(v->expr, rank, world, &num, predicate,
		sizeof(predicate)) != 0) {
		snprintf(why, why_size, "%s '%s' %s", word, v->text, predicate);
		return -1;
	}
	switch (role) {
	case EXPR_ELEMENT:
		if (store(&num, dtype, out, predicate, sizeof(predicate)) != 0)
			return refuse(v, &num, word, predicate, why, why_size);
		return 0;
	case EXPR_ROOT:
		return fit_root(v, &num, world, out, why, why_size);
	default:
		seconds = expr_num_double(&num);
		if (!(seconds >= 0 && seconds <= EXPR_SECONDS_MAX))
			return refuse(v, &num, word, "out of range (0 to 3600 "
			    "seconds)", why, why_size);
		memcpy(out, &seconds, sizeof(seconds));
		return 0;
	}
}
