/*
 * bench_data.c - the pure parts of `silvic-ring bench`: option values,
 * the sweep's sizes and iteration counts, nccl-tests' bandwidth
 * arithmetic, the timing summary, inputs with exactly known results and
 * their checks, and the link verdict.  No sockets, no clock, no output.
 */
#include <errno.h>
#include <math.h>
#include <stdlib.h>
#include <string.h>

#include "cli.h"
#include "bench_data.h"
#include "rank_list.h"

#define GOLDEN UINT64_C(0x9e3779b97f4a7c15)

static uint64_t
mix(uint64_t x)
{
	/* splitmix64's finaliser: every input bit moves every output bit. */
	x += GOLDEN;
	x = (x ^ (x >> 30)) * UINT64_C(0xbf58476d1ce4e5b9);
	x = (x ^ (x >> 27)) * UINT64_C(0x94d049bb133111eb);
	return x ^ (x >> 31);
}

void
bench_options_init(struct bench_options *o)
{
	memset(o, 0, sizeof(*o));
	o->colls = 1u << BENCH_ALLREDUCE;
	o->minbytes = 8;
	o->maxbytes = 64u << 20;
	o->stepfactor = 2;
	o->stepbytes = 0;
	o->iters = 20;
	o->warmup = 5;
	o->check = 1;
	o->dtypes = 1u << SR_F32;
	o->ops = 1u << SR_SUM;
	o->seed = 1;
	o->min_time = 0.1;
	o->threshold = 0.5;
}

void
bench_options_fini(struct bench_options *o)
{
	free(o->group);
	o->group = NULL;
	o->ngroup = 0;
}

/* --group RANKS (rank_list.h): the ranks, in member order. */
static int
group_value(struct bench_options *o, const char *arg, char *why,
    size_t why_size)
{
	char what[160];
	size_t at;

	bench_options_fini(o);
	if (rank_list_parse(arg, strlen(arg), &o->group, &o->ngroup, &at, what,
	    sizeof(what)) == 0)
		return 0;
	snprintf(why, why_size, "--group '%s': %s", arg, what);
	return -1;
}

static int
size_value(const char *name, const char *arg, uint64_t *out, char *why,
    size_t why_size)
{
	if (cli_parse_size(arg, out) == 0 && *out > 0)
		return 0;
	snprintf(why, why_size, "%s '%s' is not a size (bytes above 0, "
	    "with K, M or G)", name, arg);
	return -1;
}

static int
whole_value(const char *name, const char *arg, uint64_t min, uint64_t max,
    uint64_t *out, char *why, size_t why_size)
{
	if (cli_parse_uint(arg, min, max, out) == 0)
		return 0;
	snprintf(why, why_size, "%s '%s' is not a whole number from %llu to "
	    "%llu", name, arg, (unsigned long long)min,
	    (unsigned long long)max);
	return -1;
}

static int
real_value(const char *name, const char *arg, double min, double max,
    double *out, char *why, size_t why_size)
{
	char *end;
	double v;

	errno = 0;
	v = strtod(arg, &end);
	if (errno == 0 && end != arg && *end == '\0' && v >= min && v <= max) {
		*out = v;
		return 0;
	}
	snprintf(why, why_size, "%s '%s' is not a number from %g to %g", name,
	    arg, min, max);
	return -1;
}

static int
name_value(int rc, const char *what, const char *arg, const char *choices,
    char *why, size_t why_size)
{
	if (rc == 0)
		return 0;
	snprintf(why, why_size, "%s '%s' is not %s", what, arg, choices);
	return -1;
}

int
bench_option_set(struct bench_options *o, int c, const char *arg, char *why,
    size_t why_size)
{
	uint64_t v;

	switch (c) {
	case 'b':
		return size_value("--minbytes", arg, &o->minbytes, why,
		    why_size);
	case 'e':
		o->maxbytes_set = true;
		return size_value("--maxbytes", arg, &o->maxbytes, why,
		    why_size);
	case 'f':
		o->stepfactor_set = true;
		return whole_value("--stepfactor", arg, 2, 1024,
		    &o->stepfactor, why, why_size);
	case 'i':
		o->stepbytes_set = true;
		o->stepfactor = 1;
		return size_value("--stepbytes", arg, &o->stepbytes, why,
		    why_size);
	case 'n':
		o->iters_set = true;
		return whole_value("--iters", arg, 1, 1000000, &o->iters, why,
		    why_size);
	case 'w':
		o->warmup_set = true;
		return whole_value("--warmup_iters", arg, 0, 1000000,
		    &o->warmup, why, why_size);
	case 'c':
		if (whole_value("--check", arg, 0, 1, &v, why, why_size) != 0)
			return -1;
		o->check = (int)v;
		return 0;
	case 'd':
		return name_value(bench_dtype_parse(arg, &o->dtypes),
		    "--datatype", arg, "a datatype (f64, f32, i64, i32 or all)",
		    why, why_size);
	case 'o':
		return name_value(bench_op_parse(arg, &o->ops), "--op", arg,
		    "an op (sum, prod, max, min or all)", why, why_size);
	case 'r':
		if (whole_value("--root", arg, 0, UINT32_MAX - 1, &v, why,
		    why_size) != 0)
			return -1;
		o->root = (uint32_t)v;
		o->root_set = true;
		return 0;
	case BENCH_OPT_CSV:
		o->csv = true;
		return 0;
	case BENCH_OPT_MIN_BUSBW:
		o->min_busbw_set = true;
		return name_value(bench_min_busbw_parse(arg, &o->min_busbw,
		    &o->min_busbw_size_set, &o->min_busbw_size), "--min-busbw",
		    arg, "GBPS or GBPS@SIZE (say 10 or 10@1M)", why, why_size);
	case BENCH_OPT_SEED:
		return whole_value("--seed", arg, 0, UINT64_MAX, &o->seed, why,
		    why_size);
	case BENCH_OPT_THRESHOLD:
		return real_value("--threshold", arg, 0, 1, &o->threshold, why,
		    why_size);
	case BENCH_OPT_MIN_TIME:
		return real_value("--min-time", arg, 0, 60, &o->min_time, why,
		    why_size);
	case BENCH_OPT_FAIL_SLOW:
		o->fail_slow = true;
		return 0;
	case BENCH_OPT_GROUP:
		return group_value(o, arg, why, why_size);
	case BENCH_OPT_CORRUPT:
		o->corrupt = true;
		return name_value(bench_corrupt_parse(arg, &o->corrupt_rank,
		    &o->corrupt_index), "--corrupt", arg, "RANK:INDEX", why,
		    why_size);
	default:
		return 1;
	}
}

int
bench_options_check(const struct bench_options *o, char *why,
    size_t why_size)
{
	char a[32], b[32], c[32];

	if (o->stepfactor_set && o->stepbytes_set)
		snprintf(why, why_size, "--stepfactor and --stepbytes cannot "
		    "be used together");
	else if (o->minbytes > o->maxbytes)
		snprintf(why, why_size, "--minbytes %s is larger than "
		    "--maxbytes %s", bench_size_format(o->minbytes, a,
		    sizeof(a)), bench_size_format(o->maxbytes, b, sizeof(b)));
	else if (o->json && o->csv)
		snprintf(why, why_size, "--json and --csv cannot be used "
		    "together");
	else if (o->corrupt && o->check == 0)
		snprintf(why, why_size, "--corrupt needs the check (-c 1)");
	else if (o->group != NULL && (o->colls & 1u << BENCH_LINKS))
		snprintf(why, why_size, "--group runs allreduce, allgather or "
		    "broadcast on its ranks; the link test (links, or all) "
		    "measures the ring's links: run it without --group");
	else if (o->group != NULL && o->root_set && !bench_in_group(o,
	    o->root, NULL))
		snprintf(why, why_size, "--root %u is not in --group (%s)",
		    o->root, rank_list_format(o->group, o->ngroup, a,
		    sizeof(a)));
	else if (o->min_busbw_set && !(o->colls & ((1u << BENCH_LINKS) - 1)))
		snprintf(why, why_size, "--min-busbw needs a sweep (allreduce, "
		    "allgather, broadcast or all) to check; for links use "
		    "--fail-slow");
	else if (o->min_busbw_size_set && (o->min_busbw_size <
	    o->minbytes || o->min_busbw_size > bench_last_size(o)))
		snprintf(why, why_size, "--min-busbw %.15g@%s: %s is outside "
		    "the sweep (%s to %s), so no row would be checked",
		    o->min_busbw, bench_size_format(o->min_busbw_size, a,
		    sizeof(a)), a, bench_size_format(o->minbytes, b,
		    sizeof(b)), bench_size_format(bench_last_size(o), c,
		    sizeof(c)));
	else
		return 0;
	return -1;
}

static uint64_t
digest_add(uint64_t h, uint64_t v)
{
	return mix(h ^ v);
}

bool
bench_in_group(const struct bench_options *o, uint32_t rank,
    uint32_t *index)
{
	for (size_t i = 0; i < o->ngroup; i++)
		if (o->group[i] == rank) {
			if (index != NULL)
				*index = (uint32_t)i;
			return true;
		}
	return false;
}

uint64_t
bench_options_digest(const struct bench_options *o)
{
	uint64_t h = 0x5ec7b0a7;

	h = digest_add(h, o->colls);
	h = digest_add(h, o->minbytes);
	h = digest_add(h, o->maxbytes);
	h = digest_add(h, o->stepfactor);
	h = digest_add(h, o->stepbytes);
	h = digest_add(h, o->iters);
	h = digest_add(h, o->warmup);
	h = digest_add(h, (uint64_t)o->iters_set << 1 | o->warmup_set);
	h = digest_add(h, (uint64_t)o->check);
	h = digest_add(h, o->dtypes);
	h = digest_add(h, o->ops);
	h = digest_add(h, o->seed);
	/* Adaptive rows run one more collective: only "is it on" matters. */
	h = digest_add(h, o->min_time > 0);
	h = digest_add(h, o->root);
	h = digest_add(h, o->ngroup);
	for (size_t i = 0; i < o->ngroup; i++)
		h = digest_add(h, o->group[i]);
	return h;
}

static const char *const coll_names[BENCH_COLL_COUNT] = {
	[BENCH_ALLREDUCE] = "allreduce",
	[BENCH_ALLGATHER] = "allgather",
	[BENCH_BROADCAST] = "broadcast",
	[BENCH_LINKS] = "links",
};

const char *
bench_coll_name(enum bench_coll coll)
{
	return (unsigned)coll < BENCH_COLL_COUNT ? coll_names[coll] : "?";
}

int
bench_coll_parse(const char *name, unsigned *mask)
{
	if (strcmp(name, "all") == 0) {
		*mask = (1u << BENCH_COLL_COUNT) - 1;
		return 0;
	}
	for (int i = 0; i < BENCH_COLL_COUNT; i++)
		if (strcmp(name, coll_names[i]) == 0) {
			*mask = 1u << i;
			return 0;
		}
	return -1;
}

int
bench_dtype_parse(const char *name, unsigned *mask)
{
	static const struct {
		const char *name;
		enum sr_dtype dtype;
	} names[] = {
		{ "f64", SR_F64 }, { "double", SR_F64 }, { "float64", SR_F64 },
		{ "f32", SR_F32 }, { "float", SR_F32 }, { "float32", SR_F32 },
		{ "i64", SR_I64 }, { "int64", SR_I64 },
		{ "i32", SR_I32 }, { "int32", SR_I32 }, { "int", SR_I32 },
	};

	if (strcmp(name, "all") == 0) {
		*mask = 1u << SR_F64 | 1u << SR_F32 | 1u << SR_I64 |
		    1u << SR_I32;
		return 0;
	}
	for (size_t i = 0; i < sizeof(names) / sizeof(names[0]); i++)
		if (strcmp(name, names[i].name) == 0) {
			*mask = 1u << names[i].dtype;
			return 0;
		}
	return -1;
}

int
bench_op_parse(const char *name, unsigned *mask)
{
	if (strcmp(name, "all") == 0)
		*mask = 1u << SR_SUM | 1u << SR_PROD | 1u << SR_MAX |
		    1u << SR_MIN;
	else if (strcmp(name, "sum") == 0)
		*mask = 1u << SR_SUM;
	else if (strcmp(name, "prod") == 0)
		*mask = 1u << SR_PROD;
	else if (strcmp(name, "max") == 0)
		*mask = 1u << SR_MAX;
	else if (strcmp(name, "min") == 0)
		*mask = 1u << SR_MIN;
	else
		return -1;
	return 0;
}

int
bench_min_busbw_parse(const char *text, double *gbps, bool *has_size,
    uint64_t *size)
{
	char number[64], *end;
	const char *at = strchr(text, '@');
	size_t n = at != NULL ? (size_t)(at - text) : strlen(text);
	double v;

	if (n == 0 || n >= sizeof(number))
		return -1;
	memcpy(number, text, n);
	number[n] = '\0';
	errno = 0;
	v = strtod(number, &end);
	if (errno != 0 || *end != '\0' || !isfinite(v) || !(v > 0))
		return -1;
	*has_size = at != NULL;
	if (at != NULL && cli_parse_size(at + 1, size) != 0)
		return -1;
	*gbps = v;
	return 0;
}

int
bench_corrupt_parse(const char *text, uint32_t *rank, uint64_t *index)
{
	const char *colon = strchr(text, ':');
	char head[16];
	uint64_t r, i;
	size_t n;

	if (colon == NULL || (n = (size_t)(colon - text)) == 0 ||
	    n >= sizeof(head))
		return -1;
	memcpy(head, text, n);
	head[n] = '\0';
	if (cli_parse_uint(head, 0, UINT32_MAX - 1, &r) != 0 ||
	    cli_parse_uint(colon + 1, 0, UINT64_MAX, &i) != 0)
		return -1;
	*rank = (uint32_t)r;
	*index = i;
	return 0;
}

uint64_t
bench_last_size(const struct bench_options *o)
{
	uint64_t last = o->minbytes;

	for (uint64_t z = o->minbytes; z != 0; z = bench_next_size(z,
	    o->maxbytes, o->stepfactor, o->stepbytes))
		last = z;
	return last;
}

char *
bench_size_format(uint64_t bytes, char *buf, size_t size)
{
	static const char units[] = "KMGT";
	int u = -1;

	while (bytes >= 1024 && bytes % 1024 == 0 && u < 3) {
		bytes /= 1024;
		u++;
	}
	if (u < 0)
		snprintf(buf, size, "%llu", (unsigned long long)bytes);
	else
		snprintf(buf, size, "%llu%c", (unsigned long long)bytes,
		    units[u]);
	return buf;
}

void
bench_put_u64le(uint8_t *p, uint64_t v)
{
	for (int i = 0; i < 8; i++)
		p[i] = (uint8_t)(v >> (8 * i));
}

void
bench_put_u32le(uint8_t *p, uint32_t v)
{
	for (int i = 0; i < 4; i++)
		p[i] = (uint8_t)(v >> (8 * i));
}

uint32_t
bench_get_u32le(const uint8_t *p)
{
	return (uint32_t)p[0] | (uint32_t)p[1] << 8 | (uint32_t)p[2] << 16 |
	    (uint32_t)p[3] << 24;
}

uint64_t
bench_get_u64le(const uint8_t *p)
{
	uint64_t v = 0;

	for (int i = 0; i < 8; i++)
		v |= (uint64_t)p[i] << (8 * i);
	return v;
}

/* ---------------------------------------------------------- the sweep */

uint64_t
bench_next_size(uint64_t size, uint64_t max, uint64_t stepfactor,
    uint64_t stepbytes)
{
	if (size == 0 || size >= max)
		return 0;
	if (stepfactor > 1)
		return size <= max / stepfactor ? size * stepfactor : 0;
	return stepbytes > 0 && stepbytes <= max - size ? size + stepbytes : 0;
}

uint64_t
bench_count(enum bench_coll coll, uint64_t size, size_t esize,
    uint32_t world)
{
	if (esize == 0 || world == 0)
		return 0;
	if (coll == BENCH_ALLGATHER)
		return size / esize / world;
	return size / esize;
}

uint64_t
bench_row_bytes(enum bench_coll coll, uint64_t count, size_t esize,
    uint32_t world)
{
	if (coll == BENCH_ALLGATHER)
		return count * esize * world;
	return count * esize;
}

bool
bench_adapts(uint64_t bytes, double min_time)
{
	return min_time > 0 && bytes < BENCH_ADAPT_BELOW;
}

uint64_t
bench_adapt_iters(uint64_t bytes, uint64_t iters, double min_time,
    double per_iter)
{
	double need;

	if (!bench_adapts(bytes, min_time) || iters >= BENCH_ADAPT_MAX)
		return iters;
	if (!(per_iter > 0))
		return BENCH_ADAPT_MAX;
	need = ceil(min_time / per_iter);
	if (need > BENCH_ADAPT_MAX)
		need = BENCH_ADAPT_MAX;
	return (uint64_t)need > iters ? (uint64_t)need : iters;
}

bool
bench_gated(const struct bench_options *o, uint64_t size, uint64_t last_size)
{
	if (!o->min_busbw_set)
		return false;
	return o->min_busbw_size_set ? size >= o->min_busbw_size :
	    size == last_size;
}

bool
bench_below_min(const struct bench_options *o, uint64_t size,
    uint64_t last_size, double busbw)
{
	return bench_gated(o, size, last_size) && busbw < o->min_busbw;
}

/* ------------------------------------------------------- bandwidth */

double
bench_bus_factor(enum bench_coll coll, uint32_t world)
{
	double n = world;

	if (world == 0)
		return 0;
	switch (coll) {
	case BENCH_ALLREDUCE:
		return 2 * (n - 1) / n;
	case BENCH_ALLGATHER:
		return (n - 1) / n;
	case BENCH_BROADCAST:
		return 1;
	default:
		return 0;
	}
}

double
bench_algbw(uint64_t bytes, double seconds)
{
	if (!(seconds > 0) || !isfinite(seconds))
		return 0;
	return (double)bytes / seconds / 1e9;
}

double
bench_busbw(enum bench_coll coll, uint64_t bytes, double seconds,
    uint32_t world)
{
	return bench_algbw(bytes, seconds) * bench_bus_factor(coll, world);
}

void
bench_timing_summarize(const double *times, uint32_t world, uint64_t iters,
    struct bench_timing *out)
{
	double sum = 0, hi = 0, lo = 0;

	memset(out, 0, sizeof(*out));
	if (world == 0 || iters == 0)
		return;
	for (uint64_t i = 0; i < iters; i++) {
		double slowest = times[i];

		for (uint32_t r = 1; r < world; r++)
			if (times[(uint64_t)r * iters + i] > slowest)
				slowest = times[(uint64_t)r * iters + i];
		sum += slowest;
	}
	out->time = sum / (double)iters;
	for (uint32_t r = 0; r < world; r++) {
		double total = 0;

		for (uint64_t i = 0; i < iters; i++)
			total += times[(uint64_t)r * iters + i];
		if (r == 0 || total > hi) {
			hi = total;
			out->slowest = r;
		}
		if (r == 0 || total < lo)
			lo = total;
	}
	out->spread_pct = hi > 0 ? (hi - lo) / hi * 100 : 0;
}

static int
by_value(const void *a, const void *b)
{
	double x = *(const double *)a, y = *(const double *)b;

	return (x > y) - (x < y);
}

double
bench_median(double *v, size_t n)
{
	qsort(v, n, sizeof(*v), by_value);
	return n % 2 ? v[n / 2] : (v[n / 2 - 1] + v[n / 2]) / 2;
}

/* ------------------------------------------------ inputs and results */

static unsigned
residue(uint64_t seed, uint64_t index)
{
	return (unsigned)(mix(seed * GOLDEN + index) % 17);
}

static int
value_at(unsigned residue_of_index, uint32_t rank)
{
	return (int)((residue_of_index + 7 * (rank % 17)) % 17) - 8;
}

int
bench_value(uint64_t seed, uint32_t rank, uint64_t index)
{
	return value_at(residue(seed, index), rank);
}

/* prod's inputs: the sign of the same residue, so products stay exact. */
static int
prod_value_at(unsigned residue_of_index, uint32_t rank)
{
	return value_at(residue_of_index, rank) % 2 != 0 ? -1 : 1;
}

int
bench_value_op(enum sr_op op, uint64_t seed, uint32_t rank, uint64_t index)
{
	if (op == SR_PROD)
		return prod_value_at(residue(seed, index), rank);
	return bench_value(seed, rank, index);
}

void
bench_fill(void *buf, uint64_t count, enum sr_dtype dtype, uint64_t seed,
    uint32_t rank)
{
	bench_fill_op(buf, count, dtype, SR_SUM, seed, rank);
}

void
bench_fill_op(void *buf, uint64_t count, enum sr_dtype dtype, enum sr_op op,
    uint64_t seed, uint32_t rank)
{
	for (uint64_t i = 0; i < count; i++) {
		int v = bench_value_op(op, seed, rank, i);

		switch (dtype) {
		case SR_F64:
			((double *)buf)[i] = v;
			break;
		case SR_F32:
			((float *)buf)[i] = (float)v;
			break;
		case SR_I64:
			((int64_t *)buf)[i] = v;
			break;
		case SR_I32:
			((int32_t *)buf)[i] = v;
			break;
		default:
			break;
		}
	}
}

void
bench_expect_init(struct bench_expect *e, uint64_t seed, enum sr_op op,
    uint32_t world)
{
	/* Ranks r and r + 17 give the same values: count ranks by r % 17. */
	uint64_t ranks[17];

	e->seed = seed;
	for (unsigned j = 0; j < 17; j++)
		ranks[j] = world / 17 + (j < world % 17);
	for (unsigned k = 0; k < 17; k++) {
		int64_t acc = 0;
		bool first = true;

		for (unsigned j = 0; j < 17; j++) {
			int64_t v = value_at(k, j);

			if (ranks[j] == 0)
				continue;
			if (op == SR_PROD) {
				/* -1 or 1, ranks[j] times */
				acc = first ? 1 : acc;
				if (prod_value_at(k, j) < 0 && ranks[j] % 2)
					acc = -acc;
			} else if (op == SR_SUM) {
				acc += v * (int64_t)ranks[j];
			} else if (first || (op == SR_MAX ? v > acc : v < acc)) {
				acc = v;
			}
			first = false;
		}
		e->by_residue[k] = acc;
	}
}

int64_t
bench_expect_at(const struct bench_expect *e, uint64_t index)
{
	return e->by_residue[residue(e->seed, index)];
}

static void
mismatch_note(struct bench_mismatch *m, uint64_t element, uint64_t byte)
{
	m->element = element;
	m->byte = byte;
}

/* Whether element i of an allreduce result is want; then as text. */
static bool
result_is(const void *buf, uint64_t i, enum sr_dtype dtype, int64_t want)
{
	switch (dtype) {
	case SR_F64:
		return ((const double *)buf)[i] == (double)want;
	case SR_F32:
		return ((const float *)buf)[i] == (float)want;
	case SR_I64:
		return ((const int64_t *)buf)[i] == want;
	case SR_I32:
		return ((const int32_t *)buf)[i] == want;
	default:
		return false;
	}
}

static void
result_format(const void *buf, uint64_t i, enum sr_dtype dtype, char *out,
    size_t size)
{
	if (dtype == SR_F64)
		snprintf(out, size, "%.17g", ((const double *)buf)[i]);
	else if (dtype == SR_F32)
		snprintf(out, size, "%.9g", (double)((const float *)buf)[i]);
	else if (dtype == SR_I64)
		snprintf(out, size, "%lld",
		    (long long)((const int64_t *)buf)[i]);
	else if (dtype == SR_I32)
		snprintf(out, size, "%ld", (long)((const int32_t *)buf)[i]);
	else
		snprintf(out, size, "?");
}

uint64_t
bench_check_reduce(const void *buf, uint64_t count, enum sr_dtype dtype,
    const struct bench_expect *e, struct bench_mismatch *first)
{
	uint64_t wrong = 0;

	for (uint64_t i = 0; i < count; i++) {
		int64_t want = bench_expect_at(e, i);

		if (result_is(buf, i, dtype, want))
			continue;
		if (wrong++ == 0 && first != NULL) {
			mismatch_note(first, i, i * sr_dtype_size(dtype));
			snprintf(first->expected, sizeof(first->expected),
			    "%lld", (long long)want);
			result_format(buf, i, dtype, first->got,
			    sizeof(first->got));
		}
	}
	return wrong;
}

static uint64_t
byte_base(uint64_t seed, uint32_t rank)
{
	return mix(seed * GOLDEN ^ ((uint64_t)rank + 1) *
	    UINT64_C(0xd1b54a32d192ed03));
}

uint8_t
bench_byte(uint64_t seed, uint32_t rank, uint64_t index)
{
	return (uint8_t)(mix(byte_base(seed, rank) + index / 8) >>
	    (8 * (index % 8)));
}

/* Bytes [from, from + n) of rank's input, eight at a time. */
static void
expected_bytes(uint8_t *out, uint64_t from, uint64_t n, uint64_t base)
{
	for (uint64_t i = 0; i < n;) {
		uint64_t at = from + i, word = mix(base + at / 8);
		unsigned shift = (unsigned)(at % 8);

		for (; shift < 8 && i < n; shift++, i++)
			out[i] = (uint8_t)(word >> (8 * shift));
	}
}

void
bench_fill_bytes(uint8_t *buf, uint64_t bytes, uint64_t seed, uint32_t rank)
{
	expected_bytes(buf, 0, bytes, byte_base(seed, rank));
}

void
bench_poison_bytes(uint8_t *buf, uint64_t bytes, uint64_t seed,
    uint32_t rank)
{
	bench_fill_bytes(buf, bytes, seed, rank);
	for (uint64_t i = 0; i < bytes; i++)
		buf[i] = (uint8_t)~buf[i];
}

/* Wrong elements of one segment, checked a chunk at a time. */
static uint64_t
check_segment(const uint8_t *seg, uint64_t bytes, uint64_t base,
    uint64_t seg_offset, size_t esize, struct bench_mismatch *first,
    uint64_t wrong_before)
{
	uint8_t want[4096];
	uint64_t wrong = 0;

	for (uint64_t off = 0; off < bytes; off += sizeof(want)) {
		uint64_t n = bytes - off < sizeof(want) ? bytes - off :
		    sizeof(want);

		expected_bytes(want, off, n, base);
		if (memcmp(seg + off, want, n) == 0)
			continue;
		/* The chunk is a whole number of elements: 4096 % esize == 0
		 * and a segment is count * esize bytes. */
		for (uint64_t e = 0; e < n; e += esize) {
			size_t b = 0;

			while (b < esize && seg[off + e + b] == want[e + b])
				b++;
			if (b == esize)
				continue;
			if (wrong_before + wrong++ == 0 && first != NULL) {
				uint64_t at = seg_offset + off + e + b;

				mismatch_note(first, at / esize, at);
				snprintf(first->expected,
				    sizeof(first->expected), "0x%02x",
				    want[e + b]);
				snprintf(first->got, sizeof(first->got),
				    "0x%02x", seg[off + e + b]);
			}
		}
	}
	return wrong;
}

uint64_t
bench_check_bytes(const uint8_t *buf, uint64_t bytes, uint32_t ranks,
    uint32_t first_rank, size_t esize, uint64_t seed,
    struct bench_mismatch *first)
{
	uint64_t wrong = 0;

	if (esize == 0 || 4096 % esize != 0)
		esize = 1;
	for (uint32_t r = 0; r < ranks; r++)
		wrong += check_segment(buf + (uint64_t)r * bytes, bytes,
		    byte_base(seed, first_rank + r), (uint64_t)r * bytes,
		    esize, first, wrong);
	return wrong;
}

void
bench_corrupt_element(void *buf, uint64_t index, size_t esize)
{
	uint8_t *p = (uint8_t *)buf + index * esize;

	/* Every bit: no value equals its complement, not even a zero. */
	for (size_t i = 0; i < esize; i++)
		p[i] = (uint8_t)~p[i];
}

/* ------------------------------------------------------------ links */

uint64_t
bench_link_bytes(uint64_t max, uint64_t probe_bytes, double probe_seconds,
    double target)
{
	double fit;
	uint64_t bytes;

	if (probe_bytes >= max || !(probe_seconds > 0))
		return max;
	fit = (double)probe_bytes / probe_seconds * target;
	if (fit >= (double)max)
		return max;
	bytes = (uint64_t)fit / 4096 * 4096;
	return bytes > probe_bytes ? bytes : probe_bytes;
}

/*
 * In a ring shift rank r's call ends when both its receive from r-1 and
 * its send to r+1 are done.  The receiver's time t[i+1] bounds link i from
 * above, but includes rank i+1's own send: when that send is slow (its
 * link is slow and the transfer outgrows the socket buffers), rank i+2's
 * receive is at least as slow.  So a receiver whose successor finished in
 * under half its time was held up by its receive: t[i+1] is link i's
 * time.  Otherwise both ends' times are at least link i's (the sender's
 * includes pushing most of the bytes through it), and the smaller is the
 * estimate.  A sender whose bytes all fit in the buffers finishes early,
 * but then its receiver is the slow one and the first rule applies.
 */
double
bench_ring_link_time(const double *t, uint32_t world, uint32_t i)
{
	double sender = t[i], receiver = t[(i + 1) % world];
	double after = t[(i + 2) % world];

	if (after < receiver / 2)
		return receiver;
	return sender < receiver ? sender : receiver;
}

size_t
bench_links_verdict(struct bench_link *links, size_t n, double threshold,
    double *median)
{
	double *v = malloc(n * sizeof(*v));
	size_t slowest = 0;

	for (size_t i = 0; i < n; i++) {
		if (v != NULL)
			v[i] = links[i].gbps_alone;
		if (links[i].gbps_alone < links[slowest].gbps_alone)
			slowest = i;
	}
	/* Without memory the slowest link still names itself. */
	*median = v != NULL ? bench_median(v, n) : links[slowest].gbps_alone;
	free(v);
	for (size_t i = 0; i < n; i++)
		links[i].slow = links[i].gbps_alone < threshold * *median;
	return slowest;
}
