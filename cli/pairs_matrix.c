/*
 * pairs_matrix.c - the all-pairs matrix (see pairs_matrix.h): filled from
 * the ranks' samples, checked against the plan, read cell by cell.  Pure:
 * a sample that does not fit is an error in words, never a guess.
 */
#include <math.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "bench_data.h"
#include "pairs_matrix.h"

static void
put_f64(uint8_t *p, double v)
{
	uint64_t bits;

	memcpy(&bits, &v, sizeof(bits));
	bench_put_u64le(p, bits);
}

static double
get_f64(const uint8_t *p)
{
	uint64_t bits = bench_get_u64le(p);
	double v;

	memcpy(&v, &bits, sizeof(v));
	return v;
}

/* A number past 32 bits is no rank, round or count: it becomes
 * UINT32_MAX - 1, which the checks of pairs_matrix_add refuse (and
 * UINT32_MAX stays PAIRS_BYE). */
static uint32_t
narrow(uint64_t v)
{
	return v > UINT32_MAX ? UINT32_MAX - 1 : (uint32_t)v;
}

void
pairs_sample_encode(const struct pairs_sample *s,
    uint8_t out[PAIRS_SAMPLE_WIRE])
{
	bench_put_u64le(out, s->rank);
	bench_put_u64le(out + 8, s->round);
	bench_put_u64le(out + 16, s->partner);
	bench_put_u64le(out + 24, s->repeats);
	bench_put_u64le(out + 32, s->bytes);
	for (uint32_t k = 0; k < PAIRS_REPEATS_MAX; k++) {
		put_f64(out + 40 + 8 * k, s->both_s[k]);
		put_f64(out + 168 + 8 * k, s->alone_s[k]);
	}
	put_f64(out + 296, s->rtt_us);
}

void
pairs_sample_decode(const uint8_t in[PAIRS_SAMPLE_WIRE],
    struct pairs_sample *s)
{
	s->rank = narrow(bench_get_u64le(in));
	s->round = narrow(bench_get_u64le(in + 8));
	s->partner = narrow(bench_get_u64le(in + 16));
	s->repeats = narrow(bench_get_u64le(in + 24));
	s->bytes = bench_get_u64le(in + 32);
	for (uint32_t k = 0; k < PAIRS_REPEATS_MAX; k++) {
		s->both_s[k] = get_f64(in + 40 + 8 * k);
		s->alone_s[k] = get_f64(in + 168 + 8 * k);
	}
	s->rtt_us = get_f64(in + 296);
}

char *
pairs_host_label(const char *address, char *label, size_t size)
{
	if (sr_address_split(address, label, size, NULL, NULL, 0) !=
	    SR_ADDRESS_OK)
		snprintf(label, size, "%s", address);
	return label;
}

void
pairs_matrix_fini(struct pairs_matrix *m)
{
	free(m->label);
	free(m->host);
	free(m->host_rank);
	for (int mode = 0; mode < PAIRS_MODE_COUNT; mode++)
		free(m->gbps[mode]);
	free(m->latency_us);
	free(m->bytes);
	free(m->round);
	memset(m, 0, sizeof(*m));
}

/* Ranks with one label are one host, numbered by their first rank. */
static void
group_hosts(struct pairs_matrix *m)
{
	m->nhosts = 0;
	for (uint32_t r = 0; r < m->world; r++) {
		uint32_t h = 0;

		while (h < m->nhosts && strcmp(m->label[m->host_rank[h]],
		    m->label[r]) != 0)
			h++;
		if (h == m->nhosts)
			m->host_rank[m->nhosts++] = r;
		m->host[r] = h;
	}
}

int
pairs_matrix_init(struct pairs_matrix *m, uint32_t world, uint32_t repeats,
    const char *const *labels, char *why, size_t why_size)
{
	size_t cells = (size_t)world * world;

	memset(m, 0, sizeof(*m));
	if (world < 1 || world > PAIRS_MATRIX_MAX) {
		snprintf(why, why_size, "a pairs matrix of world %u: the world "
		    "is 1 to %u", world, PAIRS_MATRIX_MAX);
		return -1;
	}
	if (repeats < 1 || repeats > PAIRS_REPEATS_MAX) {
		snprintf(why, why_size, "%u repeats: a cell holds 1 to %u",
		    repeats, PAIRS_REPEATS_MAX);
		return -1;
	}
	m->world = world;
	m->repeats = repeats;
	m->label = calloc(world, sizeof(*m->label));
	m->host = calloc(world, sizeof(*m->host));
	m->host_rank = calloc(world, sizeof(*m->host_rank));
	for (int mode = 0; mode < PAIRS_MODE_COUNT; mode++)
		m->gbps[mode] = malloc(cells * repeats * sizeof(double));
	m->latency_us = malloc(cells * sizeof(double));
	m->bytes = calloc(cells, sizeof(*m->bytes));
	m->round = calloc(cells, sizeof(*m->round));
	if (m->label == NULL || m->host == NULL || m->host_rank == NULL ||
	    m->gbps[0] == NULL || m->gbps[1] == NULL ||
	    m->latency_us == NULL || m->bytes == NULL || m->round == NULL) {
		pairs_matrix_fini(m);
		snprintf(why, why_size, "out of memory for a pairs matrix of "
		    "world %u", world);
		return -1;
	}
	for (size_t i = 0; i < cells * repeats; i++)
		m->gbps[0][i] = m->gbps[1][i] = NAN;
	for (size_t i = 0; i < cells; i++)
		m->latency_us[i] = NAN;
	for (uint32_t r = 0; r < world; r++) {
		if (strlen(labels[r]) >= PAIRS_LABEL_MAX) {
			snprintf(why, why_size, "rank %u: host label '%.40s...' "
			    "is longer than %d bytes", r, labels[r],
			    PAIRS_LABEL_MAX - 1);
			pairs_matrix_fini(m);
			return -1;
		}
		memcpy(m->label[r], labels[r], strlen(labels[r]) + 1);
	}
	group_hosts(m);
	return 0;
}

static bool
positive(double v)
{
	return isfinite(v) && v > 0;
}

static double *
cell_at(const struct pairs_matrix *m, enum pairs_mode mode, uint32_t from,
    uint32_t to)
{
	return m->gbps[mode] + ((size_t)from * m->world + to) * m->repeats;
}

/* What a sample must be before it is stored: -1 with why otherwise. */
static int
sample_check(const struct pairs_matrix *m, const struct pairs_plan *plan,
    const struct pairs_sample *s, char *why, size_t why_size)
{
	uint32_t expect;

	if (s->rank >= m->world || plan->world != m->world) {
		snprintf(why, why_size, "a sample from rank %u in a world of %u",
		    s->rank, m->world);
		return -1;
	}
	if (s->round >= plan->rounds) {
		snprintf(why, why_size, "rank %u: a sample of round %u, but "
		    "the plan has %u rounds", s->rank, s->round, plan->rounds);
		return -1;
	}
	expect = pairs_plan_partner(plan, s->rank, s->round);
	if (s->partner != expect) {
		if (s->partner == PAIRS_BYE)
			snprintf(why, why_size, "rank %u: round %u's sample "
			    "sat the round out, but the plan gives rank %u",
			    s->rank, s->round, expect);
		else if (expect == PAIRS_BYE)
			snprintf(why, why_size, "rank %u: round %u's sample "
			    "names partner %u, but the plan gives it a bye",
			    s->rank, s->round, s->partner);
		else
			snprintf(why, why_size, "rank %u: round %u's sample "
			    "names partner %u, but the plan gives rank %u",
			    s->rank, s->round, s->partner, expect);
		return -1;
	}
	if (expect == PAIRS_BYE)
		return 0;
	if (s->repeats != m->repeats) {
		snprintf(why, why_size, "rank %u: round %u's sample has %u "
		    "repeats, the run %u", s->rank, s->round, s->repeats,
		    m->repeats);
		return -1;
	}
	if (s->bytes == 0) {
		snprintf(why, why_size, "rank %u: round %u's sample moved no "
		    "bytes", s->rank, s->round);
		return -1;
	}
	for (uint32_t k = 0; k < s->repeats; k++)
		if (!positive(s->both_s[k]) || !positive(s->alone_s[k])) {
			snprintf(why, why_size, "rank %u: round %u's repeat %u "
			    "took %g s (both) and %g s (alone): not a time",
			    s->rank, s->round, k, s->both_s[k], s->alone_s[k]);
			return -1;
		}
	if (!isnan(cell_at(m, PAIRS_MODE_ALONE, s->rank, s->partner)[0])) {
		snprintf(why, why_size, "rank %u: a second sample of rank %u -> "
		    "rank %u (round %u)", s->rank, s->rank, s->partner,
		    s->round);
		return -1;
	}
	return 0;
}

int
pairs_matrix_add(struct pairs_matrix *m, const struct pairs_plan *plan,
    const struct pairs_sample *s, char *why, size_t why_size)
{
	size_t cell;

	if (sample_check(m, plan, s, why, why_size) != 0)
		return -1;
	if (s->partner == PAIRS_BYE)
		return 0;
	cell = (size_t)s->rank * m->world + s->partner;
	for (uint32_t k = 0; k < s->repeats; k++) {
		cell_at(m, PAIRS_MODE_BOTH, s->rank, s->partner)[k] =
		    bench_algbw(s->bytes, s->both_s[k]);
		cell_at(m, PAIRS_MODE_ALONE, s->rank, s->partner)[k] =
		    bench_algbw(s->bytes, s->alone_s[k]);
	}
	m->bytes[cell] = s->bytes;
	m->round[cell] = s->round;
	m->latency_us[cell] = isfinite(s->rtt_us) && s->rtt_us >= 0 ?
	    s->rtt_us / 2 : NAN;
	return 0;
}

int
pairs_matrix_set(struct pairs_matrix *m, enum pairs_mode mode,
    uint32_t from, uint32_t to, const double *gbps)
{
	if (from >= m->world || to >= m->world || from == to ||
	    mode >= PAIRS_MODE_COUNT)
		return -1;
	for (uint32_t k = 0; k < m->repeats; k++)
		if (!positive(gbps[k]))
			return -1;
	memcpy(cell_at(m, mode, from, to), gbps, m->repeats * sizeof(*gbps));
	return 0;
}

void
pairs_matrix_keep_faster(struct pairs_matrix *m, const struct pairs_matrix *other)
{
	for (int mode = 0; mode < PAIRS_MODE_COUNT; mode++)
		for (uint32_t i = 0; i < m->world; i++)
			for (uint32_t j = 0; j < m->world; j++) {
				double mine, theirs;

				if (i == j)
					continue;
				mine = pairs_cell_median(m, mode, i, j);
				theirs = pairs_cell_median(other, mode, i, j);
				if (isfinite(theirs) && (!isfinite(mine) ||
				    theirs > mine))
					memcpy(cell_at(m, mode, i, j),
					    pairs_cell(other, mode, i, j),
					    m->repeats * sizeof(double));
			}
}

int
pairs_matrix_complete(const struct pairs_matrix *m, char *why,
    size_t why_size)
{
	for (uint32_t i = 0; i < m->world; i++)
		for (uint32_t j = 0; j < m->world; j++)
			for (int mode = 0; mode < PAIRS_MODE_COUNT && i != j;
			    mode++)
				if (isnan(cell_at(m, mode, i, j)[0])) {
					snprintf(why, why_size, "no measurement "
					    "of rank %u -> rank %u (%s)", i, j,
					    mode == PAIRS_MODE_BOTH ? "both "
					    "directions at once" : "alone");
					return -1;
				}
	return 0;
}

const double *
pairs_cell(const struct pairs_matrix *m, enum pairs_mode mode, uint32_t from,
    uint32_t to)
{
	return cell_at(m, mode, from, to);
}

double
pairs_cell_median(const struct pairs_matrix *m, enum pairs_mode mode,
    uint32_t from, uint32_t to)
{
	double v[PAIRS_REPEATS_MAX];

	if (from == to || isnan(cell_at(m, mode, from, to)[0]))
		return NAN;
	memcpy(v, cell_at(m, mode, from, to), m->repeats * sizeof(*v));
	return bench_median(v, m->repeats);
}

/* The largest repeat of a cell (sign 1), or the smallest (sign -1). */
static double
extreme(const struct pairs_matrix *m, enum pairs_mode mode, uint32_t from,
    uint32_t to, double sign)
{
	const double *c = cell_at(m, mode, from, to);
	double best = c[0];

	if (from == to)
		return NAN;
	for (uint32_t k = 1; k < m->repeats; k++)
		best = sign * c[k] > sign * best ? c[k] : best;
	return best;
}

double
pairs_cell_max(const struct pairs_matrix *m, enum pairs_mode mode,
    uint32_t from, uint32_t to)
{
	return extreme(m, mode, from, to, 1);
}

double
pairs_cell_min(const struct pairs_matrix *m, enum pairs_mode mode,
    uint32_t from, uint32_t to)
{
	return extreme(m, mode, from, to, -1);
}

void
pairs_text_init(struct pairs_text *t, char *buf, size_t size)
{
	t->buf = buf;
	t->size = size;
	t->n = 0;
	if (size > 0)
		buf[0] = '\0';
}

void
pairs_text_add(struct pairs_text *t, const char *fmt, ...)
{
	va_list ap;
	int w;

	if (t->n + 1 >= t->size)
		return;
	va_start(ap, fmt);
	w = vsnprintf(t->buf + t->n, t->size - t->n, fmt, ap);
	va_end(ap);
	if (w > 0)
		t->n = t->n + (size_t)w < t->size ? t->n + (size_t)w :
		    t->size - 1;
}

const char *
pairs_mode_key(enum pairs_mode mode)
{
	return mode == PAIRS_MODE_BOTH ? "both" : mode == PAIRS_MODE_ALONE ?
	    "alone" : "unknown";
}
