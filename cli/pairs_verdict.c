/*
 * pairs_verdict.c - which host or link of the matrix is slow (see
 * pairs_verdict.h for the rules and what they cannot tell apart).
 *
 * Every cell is first made relative: q = its median / its baseline cell
 * (1 without a baseline), so one code judges "slower than the others"
 * and "slower than last week".  A reference is then a median of q over a
 * set of cells, and a cell is slow when q / reference is below the
 * threshold.  Hosts are tried against the cells between the other hosts:
 * the cells between hosts are sorted by q once per mode, and the median
 * of what remains when some hosts are set aside is found by walking past
 * their cells' positions (n log n a host, not a sort per host), so a
 * world of 1,024 is judged in well under a second.
 */
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "bench_data.h"
#include "pairs_verdict.h"

#define NONE UINT32_MAX

struct judge {
	const struct pairs_matrix *m;
	struct pairs_verdict *v;
	uint32_t n;
	size_t cells;
	double thr[PAIRS_MODE_COUNT];	/* the threshold used */
	double *q[PAIRS_MODE_COUNT];	/* median / baseline */
	double *hi[PAIRS_MODE_COUNT];	/* fastest repeat / baseline */
	/* The cells between hosts, by q (ties by cell), and where each
	 * cell is in that order (SIZE_MAX for cells within a host). */
	double *sorted[PAIRS_MODE_COUNT];
	size_t *pos[PAIRS_MODE_COUNT];
	size_t nnet;
	/* Each host's ranks: members[start[h] .. start[h + 1]). */
	uint32_t *members, *start;
	uint32_t *order;	/* of naming: order[h], NONE if not named */
	uint32_t nnamed;
	double *host_scale;	/* [h * MODES + mode], of a named host */
	size_t *excl;		/* positions set aside, and scratch */
	size_t nexcl;		/* of the named hosts */
	double local_scale[PAIRS_MODE_COUNT];
	double rest_scale[PAIRS_MODE_COUNT];
	char *why;
	size_t why_size;
};

struct keyed {
	double q;
	size_t cell;
};

static int
by_key(const void *a, const void *b)
{
	const struct keyed *x = a, *y = b;

	if (x->q != y->q)
		return x->q < y->q ? -1 : 1;
	return (x->cell > y->cell) - (x->cell < y->cell);
}

static int
by_position(const void *a, const void *b)
{
	size_t x = *(const size_t *)a, y = *(const size_t *)b;

	return (x > y) - (x < y);
}

static bool
between_hosts(const struct judge *j, uint32_t a, uint32_t b)
{
	return j->m->host[a] != j->m->host[b];
}

void
pairs_verdict_options_init(struct pairs_verdict_options *o)
{
	memset(o, 0, sizeof(*o));
	o->threshold = PAIRS_THRESHOLD_DEFAULT;
}

void
pairs_verdict_fini(struct pairs_verdict *v)
{
	for (int mode = 0; mode < PAIRS_MODE_COUNT; mode++) {
		free(v->reference[mode]);
		free(v->flags[mode]);
	}
	free(v->findings);
	memset(v, 0, sizeof(*v));
}

static void
judge_free(struct judge *j)
{
	for (int mode = 0; mode < PAIRS_MODE_COUNT; mode++) {
		free(j->q[mode]);
		free(j->hi[mode]);
		free(j->sorted[mode]);
		free(j->pos[mode]);
	}
	free(j->members);
	free(j->start);
	free(j->order);
	free(j->host_scale);
	free(j->excl);
}

static int
judge_alloc(struct judge *j)
{
	const struct pairs_matrix *m = j->m;
	bool ok = true;

	for (int mode = 0; mode < PAIRS_MODE_COUNT; mode++) {
		j->q[mode] = malloc(j->cells * sizeof(double));
		j->hi[mode] = malloc(j->cells * sizeof(double));
		j->sorted[mode] = malloc(j->cells * sizeof(double));
		j->pos[mode] = malloc(j->cells * sizeof(size_t));
		j->v->reference[mode] = malloc(j->cells * sizeof(double));
		j->v->flags[mode] = calloc(j->cells, 1);
		ok = ok && j->q[mode] && j->hi[mode] && j->sorted[mode] &&
		    j->pos[mode] && j->v->reference[mode] && j->v->flags[mode];
	}
	j->members = malloc(j->n * sizeof(*j->members));
	j->start = calloc(m->nhosts + 1, sizeof(*j->start));
	j->order = malloc(m->nhosts * sizeof(*j->order));
	j->host_scale = malloc(m->nhosts * PAIRS_MODE_COUNT * sizeof(double));
	/* Each host set aside adds its cells with every other host, twice
	 * over for the cells between two hosts set aside. */
	j->excl = malloc(2 * j->cells * sizeof(*j->excl));
	/* Every host can be named, every pair can be a link, and there are
	 * two more: the fabric, or unsteady. */
	j->v->findings = calloc((size_t)m->nhosts + j->cells / 2 + 2,
	    sizeof(*j->v->findings));
	return ok && j->members && j->start && j->order && j->host_scale &&
	    j->excl && j->v->findings ? 0 : -1;
}

/* Ranks grouped by host, in rank order within each. */
static void
group_members(struct judge *j)
{
	const struct pairs_matrix *m = j->m;
	uint32_t *fill = j->order;	/* scratch until naming starts */

	for (uint32_t r = 0; r < j->n; r++)
		j->start[m->host[r] + 1]++;
	for (uint32_t h = 0; h < m->nhosts; h++) {
		j->start[h + 1] += j->start[h];
		fill[h] = j->start[h];
	}
	for (uint32_t r = 0; r < j->n; r++)
		j->members[fill[m->host[r]]++] = r;
	for (uint32_t h = 0; h < m->nhosts; h++)
		j->order[h] = NONE;
}

/* The median over cells of half the spread of their repeats, relative
 * to their median: 0 with one repeat. */
static double
jitter(const struct judge *j, enum pairs_mode mode, double *scratch)
{
	size_t n = 0;

	for (uint32_t a = 0; a < j->n; a++)
		for (uint32_t b = 0; b < j->n; b++)
			if (a != b)
				scratch[n++] = (pairs_cell_max(j->m, mode, a,
				    b) - pairs_cell_min(j->m, mode, a, b)) / 2 /
				    pairs_cell_median(j->m, mode, a, b);
	return n ? bench_median(scratch, n) : 0;
}

/* q and hi of every cell; -1 with why for a baseline cell that is not a
 * positive number. */
static int
relative(struct judge *j, const struct pairs_verdict_options *o)
{
	for (int mode = 0; mode < PAIRS_MODE_COUNT; mode++)
		for (uint32_t a = 0; a < j->n; a++)
			for (uint32_t b = 0; b < j->n; b++) {
				size_t c = (size_t)a * j->n + b;
				double base = 1;

				if (a == b) {
					j->q[mode][c] = j->hi[mode][c] = NAN;
					continue;
				}
				if (o->baseline[mode] != NULL)
					base = o->baseline[mode][c];
				if (!(isfinite(base) && base > 0)) {
					snprintf(j->why, j->why_size, "%s: "
					    "rank %u -> rank %u (%s) is %g "
					    "GB/s, not a speed",
					    o->baseline_name ? o->baseline_name :
					    "the baseline", a, b,
					    pairs_mode_key(mode), base);
					return -1;
				}
				j->q[mode][c] = pairs_cell_median(j->m, mode, a,
				    b) / base;
				j->hi[mode][c] = pairs_cell_max(j->m, mode, a,
				    b) / base;
			}
	return 0;
}

/* The cells between hosts sorted by q, with their positions. */
static int
sort_network(struct judge *j)
{
	struct keyed *k = malloc(j->cells * sizeof(*k));

	if (k == NULL)
		return -1;
	for (int mode = 0; mode < PAIRS_MODE_COUNT; mode++) {
		size_t n = 0;

		for (size_t c = 0; c < j->cells; c++) {
			j->pos[mode][c] = SIZE_MAX;
			if (c / j->n != c % j->n &&
			    between_hosts(j, (uint32_t)(c / j->n),
			    (uint32_t)(c % j->n))) {
				k[n].q = j->q[mode][c];
				k[n++].cell = c;
			}
		}
		qsort(k, n, sizeof(*k), by_key);
		for (size_t i = 0; i < n; i++) {
			j->sorted[mode][i] = k[i].q;
			j->pos[mode][k[i].cell] = i;
		}
		j->nnet = n;
	}
	free(k);
	return 0;
}

/* The k-th smallest sorted value whose position is not among excl
 * (sorted, distinct). */
static double
kth_remaining(const double *sorted, const size_t *excl, size_t nexcl,
    size_t k)
{
	size_t t = k;

	for (size_t i = 0; i < nexcl && excl[i] <= t; i++)
		t++;
	return sorted[t];
}

/* The median q of the cells between hosts but those at excl; NaN when
 * none remain. */
static double
median_remaining(const struct judge *j, enum pairs_mode mode,
    const size_t *excl, size_t nexcl)
{
	size_t left = j->nnet - nexcl;

	if (left == 0)
		return NAN;
	if (left % 2)
		return kth_remaining(j->sorted[mode], excl, nexcl, left / 2);
	return (kth_remaining(j->sorted[mode], excl, nexcl, left / 2 - 1) +
	    kth_remaining(j->sorted[mode], excl, nexcl, left / 2)) / 2;
}

/*
 * Adds host h's cells between hosts to excl[*n ..] (positions in the
 * mode's order: the same cells in both modes, at other positions, so
 * one mode at a time), then sorts and removes repeats.
 */
static void
exclude_host(const struct judge *j, enum pairs_mode mode, uint32_t h,
    size_t *excl, size_t *n)
{
	for (uint32_t i = j->start[h]; i < j->start[h + 1]; i++) {
		uint32_t r = j->members[i];

		for (uint32_t s = 0; s < j->n; s++) {
			if (!between_hosts(j, r, s))
				continue;
			excl[(*n)++] = j->pos[mode][(size_t)r * j->n + s];
			excl[(*n)++] = j->pos[mode][(size_t)s * j->n + r];
		}
	}
}

static size_t
sort_unique(size_t *v, size_t n)
{
	size_t out = 0;

	qsort(v, n, sizeof(*v), by_position);
	for (size_t i = 0; i < n; i++)
		if (out == 0 || v[out - 1] != v[i])
			v[out++] = v[i];
	return out;
}

/* The median of the cells between hosts that are not named, nor extra
 * (NONE for none). */
static double
scale_without(struct judge *j, enum pairs_mode mode, uint32_t extra)
{
	size_t n = 0;

	for (uint32_t h = 0; h < j->m->nhosts; h++)
		if (j->order[h] != NONE || h == extra)
			exclude_host(j, mode, h, j->excl, &n);
	n = sort_unique(j->excl, n);
	return median_remaining(j, mode, j->excl, n);
}

static bool
slow_cell(const struct judge *j, enum pairs_mode mode, size_t c,
    double scale)
{
	return j->q[mode][c] < j->thr[mode] * scale &&
	    j->hi[mode][c] < (1 + j->thr[mode]) / 2 * scale;
}

/* What trying host h found. */
struct trial {
	uint32_t slow_peers, peers;
	unsigned sends, receives;
	double scale[PAIRS_MODE_COUNT];
	double worst;		/* the lowest ratio of a slow cell */
	size_t worst_cell;
	enum pairs_mode worst_mode;
};

/*
 * Host h against the cells between the hosts neither named nor h: which
 * peer hosts (not named) have a slow cell with it.  False when nothing
 * is left to judge it against.
 */
static bool
try_host(struct judge *j, uint32_t h, uint32_t *slow_to, uint32_t *slow_from,
    bool *slow_any, struct trial *t)
{
	const struct pairs_matrix *m = j->m;

	memset(t, 0, sizeof(*t));
	t->worst = INFINITY;
	for (int mode = 0; mode < PAIRS_MODE_COUNT; mode++)
		if (isnan(t->scale[mode] = scale_without(j, mode, h)))
			return false;
	for (uint32_t g = 0; g < m->nhosts; g++) {
		slow_any[g] = false;
		slow_to[g] = slow_from[g] = 0;
		t->peers += g != h && j->order[g] == NONE;
	}
	for (uint32_t i = j->start[h]; i < j->start[h + 1]; i++)
		for (uint32_t s = 0; s < j->n; s++) {
			uint32_t r = j->members[i], g = m->host[s];

			if (g == h || j->order[g] != NONE)
				continue;
			for (int mode = 0; mode < PAIRS_MODE_COUNT; mode++) {
				size_t out = (size_t)r * j->n + s;
				size_t in = (size_t)s * j->n + r;

				if (slow_cell(j, mode, out, t->scale[mode]))
					slow_to[g] |= 1u << mode;
				if (slow_cell(j, mode, in, t->scale[mode]))
					slow_from[g] |= 1u << mode;
				for (int k = 0; k < 2; k++) {
					size_t c = k ? in : out;
					double ratio = j->q[mode][c] /
					    t->scale[mode];

					if (slow_cell(j, mode, c, t->scale[mode])
					    && ratio < t->worst) {
						t->worst = ratio;
						t->worst_cell = c;
						t->worst_mode = mode;
					}
				}
			}
			slow_any[g] = slow_to[g] || slow_from[g];
		}
	for (int mode = 0; mode < PAIRS_MODE_COUNT; mode++) {
		uint32_t to = 0, from = 0;

		for (uint32_t g = 0; g < m->nhosts; g++) {
			to += (slow_to[g] >> mode) & 1;
			from += (slow_from[g] >> mode) & 1;
		}
		if (2 * to > t->peers)
			t->sends |= 1u << mode;
		if (2 * from > t->peers)
			t->receives |= 1u << mode;
	}
	for (uint32_t g = 0; g < m->nhosts; g++)
		t->slow_peers += slow_any[g];
	return true;
}

/* Whether trial a beats b: more of its peers slow, then a worse cell,
 * then (the caller's loop order) the lower host. */
static bool
better(const struct trial *a, const struct trial *b)
{
	uint64_t x = (uint64_t)a->slow_peers * b->peers;
	uint64_t y = (uint64_t)b->slow_peers * a->peers;

	return x != y ? x > y : a->worst < b->worst;
}

static void
record_host(struct judge *j, uint32_t h, const struct trial *t)
{
	struct pairs_finding *f = &j->v->findings[j->v->nfindings++];

	memset(f, 0, sizeof(*f));
	f->kind = PAIRS_FINDING_HOST;
	f->host = h;
	f->slow_peers = t->slow_peers;
	f->peers = t->peers;
	f->sends = t->sends;
	f->receives = t->receives;
	f->worst_mode = t->worst_mode;
	f->worst_from = (uint32_t)(t->worst_cell / j->n);
	f->worst_to = (uint32_t)(t->worst_cell % j->n);
	f->ratio = t->worst;
	j->order[h] = j->nnamed++;
	for (int mode = 0; mode < PAIRS_MODE_COUNT; mode++)
		j->host_scale[h * PAIRS_MODE_COUNT + mode] = t->scale[mode];
}

/* The pairs of hosts neither named with a slow cell between them,
 * against the median of their cells, and how many pairs there are. */
static void
rest_pairs(struct judge *j, uint64_t *slow, uint64_t *pairs)
{
	const struct pairs_matrix *m = j->m;

	*slow = *pairs = 0;
	for (int mode = 0; mode < PAIRS_MODE_COUNT; mode++)
		j->rest_scale[mode] = scale_without(j, mode, NONE);
	for (uint32_t g = 0; g < m->nhosts; g++)
		for (uint32_t h = g + 1; h < m->nhosts; h++) {
			bool any = false;

			if (j->order[g] != NONE || j->order[h] != NONE)
				continue;
			for (uint32_t a = j->start[g]; a < j->start[g + 1];
			    a++)
				for (uint32_t b = j->start[h]; b <
				    j->start[h + 1]; b++)
					for (int mode = 0; mode <
					    PAIRS_MODE_COUNT; mode++) {
						uint32_t x = j->members[a];
						uint32_t y = j->members[b];

						any = any || slow_cell(j, mode,
						    (size_t)x * j->n + y,
						    j->rest_scale[mode]) ||
						    slow_cell(j, mode,
						    (size_t)y * j->n + x,
						    j->rest_scale[mode]);
					}
			*slow += any;
			(*pairs)++;
		}
}

static int
by_host(const void *a, const void *b)
{
	const struct pairs_finding *x = a, *y = b;

	return (x->host > y->host) - (x->host < y->host);
}

/*
 * Names slow hosts one at a time, the one with most of its peers slow
 * first, while three hosts are left to compare; then, unless the pairs
 * of the hosts left are mostly fine, names none (a host stands out
 * against fine pairs, not among slow ones).  The findings are then
 * listed in host order.
 */
static int
name_hosts(struct judge *j)
{
	const struct pairs_matrix *m = j->m;
	uint32_t *slow_to = calloc(m->nhosts, sizeof(*slow_to));
	uint32_t *slow_from = calloc(m->nhosts, sizeof(*slow_from));
	bool *slow_any = calloc(m->nhosts, sizeof(*slow_any));
	size_t first = j->v->nfindings;
	uint64_t slow, pairs;

	if (slow_to == NULL || slow_from == NULL || slow_any == NULL) {
		free(slow_to);
		free(slow_from);
		free(slow_any);
		return -1;
	}
	while (m->nhosts - j->nnamed >= 3) {
		struct trial best = { 0 }, t;
		uint32_t pick = NONE;

		for (uint32_t h = 0; h < m->nhosts; h++) {
			if (j->order[h] != NONE || !try_host(j, h, slow_to,
			    slow_from, slow_any, &t))
				continue;
			if (2 * t.slow_peers <= t.peers)
				continue;
			if (pick == NONE || better(&t, &best)) {
				pick = h;
				best = t;
			}
		}
		if (pick == NONE)
			break;
		record_host(j, pick, &best);
	}
	rest_pairs(j, &slow, &pairs);
	if (j->nnamed > 0 && 4 * slow > pairs) {
		for (uint32_t h = 0; h < m->nhosts; h++)
			j->order[h] = NONE;
		j->nnamed = 0;
		j->v->nfindings = first;
		rest_pairs(j, &slow, &pairs);
	}
	/* Named in that order (which owns the cells between two of them),
	 * listed in host order. */
	qsort(j->v->findings + first, j->v->nfindings - first,
	    sizeof(*j->v->findings), by_host);
	free(slow_to);
	free(slow_from);
	free(slow_any);
	return 0;
}

/* The named host a cell between hosts belongs to (the first named of
 * its two), or NONE. */
static uint32_t
owner(const struct judge *j, uint32_t a, uint32_t b)
{
	uint32_t g = j->m->host[a], h = j->m->host[b];

	if (g == h)
		return NONE;
	if (j->order[g] == NONE)
		return j->order[h] == NONE ? NONE : h;
	if (j->order[h] == NONE)
		return g;
	return j->order[g] < j->order[h] ? g : h;
}

static double
scale_of(const struct judge *j, enum pairs_mode mode, uint32_t a, uint32_t b)
{
	uint32_t h = owner(j, a, b);

	if (!between_hosts(j, a, b))
		return j->local_scale[mode];
	return h == NONE ? j->rest_scale[mode] :
	    j->host_scale[h * PAIRS_MODE_COUNT + mode];
}

/* Every cell's reference: its baseline cell (1 without) times the
 * median of its kind, or of its named host's trial. */
static void
references(struct judge *j, const struct pairs_verdict_options *o)
{
	for (int mode = 0; mode < PAIRS_MODE_COUNT; mode++)
		for (uint32_t a = 0; a < j->n; a++)
			for (uint32_t b = 0; b < j->n; b++) {
				size_t c = (size_t)a * j->n + b;

				j->v->reference[mode][c] = a == b ? NAN :
				    (o->baseline[mode] != NULL ?
				    o->baseline[mode][c] : 1) *
				    scale_of(j, mode, a, b);
			}
}

/* The slow cells: a named host's are its finding's, the others links'. */
static void
classify(struct judge *j)
{
	for (int mode = 0; mode < PAIRS_MODE_COUNT; mode++)
		for (uint32_t a = 0; a < j->n; a++)
			for (uint32_t b = 0; b < j->n; b++)
				if (a != b && slow_cell(j, mode, (size_t)a *
				    j->n + b, scale_of(j, mode, a, b)))
					j->v->flags[mode][(size_t)a * j->n +
					    b] = PAIRS_CELL_SLOW;
}

static bool
is_slow(const struct judge *j, enum pairs_mode mode, uint32_t a, uint32_t b)
{
	return j->v->flags[mode][(size_t)a * j->n + b] & PAIRS_CELL_SLOW;
}

/* The slow pairs no named host explains, lowest ranks first. */
static void
name_links(struct judge *j)
{
	for (uint32_t a = 0; a < j->n; a++)
		for (uint32_t b = a + 1; b < j->n; b++) {
			unsigned slow = 0;
			struct pairs_finding *f;
			double worst = INFINITY;

			if (owner(j, a, b) != NONE)
				continue;
			slow |= is_slow(j, PAIRS_MODE_ALONE, a, b) ?
			    PAIRS_SLOW_FORWARD_ALONE : 0;
			slow |= is_slow(j, PAIRS_MODE_ALONE, b, a) ?
			    PAIRS_SLOW_BACK_ALONE : 0;
			slow |= is_slow(j, PAIRS_MODE_BOTH, a, b) ?
			    PAIRS_SLOW_FORWARD_BOTH : 0;
			slow |= is_slow(j, PAIRS_MODE_BOTH, b, a) ?
			    PAIRS_SLOW_BACK_BOTH : 0;
			if (slow == 0)
				continue;
			f = &j->v->findings[j->v->nfindings++];
			memset(f, 0, sizeof(*f));
			f->kind = PAIRS_FINDING_LINK;
			/* Alone, one direction: that one, either way. */
			if ((slow & 3) == PAIRS_SLOW_BACK_ALONE) {
				f->from = b;
				f->to = a;
				slow = (slow & 0xa) >> 1 | (slow & 0x5) << 1;
			} else {
				f->from = a;
				f->to = b;
			}
			f->slow = slow;
			for (int mode = 0; mode < PAIRS_MODE_COUNT; mode++)
				for (int k = 0; k < 2; k++) {
					uint32_t x = k ? b : a, y = k ? a : b;
					size_t c = (size_t)x * j->n + y;
					double ratio = j->q[mode][c] /
					    scale_of(j, mode, x, y);

					if (!is_slow(j, mode, x, y) ||
					    ratio >= worst)
						continue;
					worst = ratio;
					f->worst_mode = mode;
					f->worst_from = x;
					f->worst_to = y;
				}
			f->ratio = worst;
		}
}

/* The worst cell's GB/s and reference, for each finding that has one. */
static void
fill_worst(struct judge *j)
{
	for (size_t i = 0; i < j->v->nfindings; i++) {
		struct pairs_finding *f = &j->v->findings[i];
		size_t c = (size_t)f->worst_from * j->n + f->worst_to;

		if (f->kind != PAIRS_FINDING_HOST &&
		    f->kind != PAIRS_FINDING_LINK)
			continue;
		f->gbps = pairs_cell_median(j->m, f->worst_mode, f->worst_from,
		    f->worst_to);
		f->reference = j->v->reference[f->worst_mode][c];
	}
}

/* The median GB/s of one kind of cell (between hosts or not), and of q. */
static void
medians(struct judge *j, enum pairs_mode mode, bool network,
    double *gbps, double *q, double *scratch)
{
	size_t n = 0;

	for (uint32_t a = 0; a < j->n; a++)
		for (uint32_t b = 0; b < j->n; b++)
			if (a != b && between_hosts(j, a, b) == network)
				scratch[n++] = pairs_cell_median(j->m, mode, a,
				    b);
	*gbps = n ? bench_median(scratch, n) : NAN;
	n = 0;
	for (uint32_t a = 0; a < j->n; a++)
		for (uint32_t b = 0; b < j->n; b++)
			if (a != b && between_hosts(j, a, b) == network)
				scratch[n++] = j->q[mode][(size_t)a * j->n + b];
	*q = n ? bench_median(scratch, n) : NAN;
}

static struct pairs_finding *
add_finding(struct pairs_verdict *v, enum pairs_finding_kind kind)
{
	struct pairs_finding *f = &v->findings[v->nfindings++];

	memset(f, 0, sizeof(*f));
	f->kind = kind;
	return f;
}

/*
 * Medians, jitter and the thresholds used; false when both modes are too
 * unsteady.  One mode too unsteady (on a fabric whose hosts' own cores
 * carry the traffic, both directions at once jitter most) is set aside:
 * its threshold 0, so none of its cells is slow, and the other decides.
 */
static bool
measure_noise(struct judge *j, const struct pairs_verdict_options *o,
    double *scratch)
{
	struct pairs_verdict *v = j->v;
	int steady = 0;

	for (int mode = 0; mode < PAIRS_MODE_COUNT; mode++) {
		double q_net, gbps_local, q_local;
		double margin;

		medians(j, mode, true, &v->median_gbps[mode], &q_net, scratch);
		medians(j, mode, false, &gbps_local, &q_local, scratch);
		j->local_scale[mode] = q_local;
		if (j->m->nhosts == 1) {
			v->median_gbps[mode] = gbps_local;
			q_net = q_local;
		}
		j->rest_scale[mode] = q_net;
		v->baseline_ratio[mode] = o->baseline[mode] != NULL ? q_net :
		    NAN;
		v->jitter[mode] = jitter(j, mode, scratch);
		margin = 1 - PAIRS_JITTER_FACTOR * v->jitter[mode];
		j->thr[mode] = v->threshold_used[mode] = margin < o->threshold ?
		    margin : o->threshold;
		steady += j->thr[mode] >= o->threshold / 2;
	}
	for (int mode = 0; steady == 1 && mode < PAIRS_MODE_COUNT; mode++)
		if (j->thr[mode] < o->threshold / 2) {
			v->set_aside[mode] = true;
			j->thr[mode] = 0;
		}
	return steady > 0;
}

static void
unsteady(struct judge *j)
{
	struct pairs_finding *f = add_finding(j->v, PAIRS_FINDING_UNSTEADY);
	enum pairs_mode worse = j->v->jitter[PAIRS_MODE_BOTH] >
	    j->v->jitter[PAIRS_MODE_ALONE] ? PAIRS_MODE_BOTH : PAIRS_MODE_ALONE;

	f->worst_mode = worse;
	f->ratio = j->v->jitter[worse];
}

static void
fabric(struct judge *j)
{
	struct pairs_verdict *v = j->v;
	enum pairs_mode worse = v->baseline_ratio[PAIRS_MODE_BOTH] /
	    j->thr[PAIRS_MODE_BOTH] < v->baseline_ratio[PAIRS_MODE_ALONE] /
	    j->thr[PAIRS_MODE_ALONE] ? PAIRS_MODE_BOTH : PAIRS_MODE_ALONE;
	struct pairs_finding *f;

	if (!(v->baseline_ratio[worse] < j->thr[worse]))
		return;
	f = add_finding(v, PAIRS_FINDING_FABRIC);
	f->worst_mode = worse;
	f->ratio = v->baseline_ratio[worse];
	f->gbps = v->median_gbps[worse];
	f->reference = f->gbps / f->ratio;
}

static int
check_input(const struct pairs_matrix *m,
    const struct pairs_verdict_options *o, char *why, size_t why_size)
{
	if (!(o->threshold > 0 && o->threshold < 1)) {
		snprintf(why, why_size, "threshold %g: a fraction above 0 and "
		    "below 1", o->threshold);
		return -1;
	}
	if (m->world < 2) {
		snprintf(why, why_size, "a world of one has no pairs to judge");
		return -1;
	}
	if ((o->baseline[0] == NULL) != (o->baseline[1] == NULL)) {
		snprintf(why, why_size, "a baseline needs both modes' cells");
		return -1;
	}
	return pairs_matrix_complete(m, why, why_size);
}

int
pairs_verdict_run(const struct pairs_matrix *m,
    const struct pairs_verdict_options *o, struct pairs_verdict *v,
    char *why, size_t why_size)
{
	struct judge j;
	double *scratch = NULL;
	int rc = -1;

	memset(v, 0, sizeof(*v));
	memset(&j, 0, sizeof(j));
	if (check_input(m, o, why, why_size) != 0)
		return -1;
	j.m = m;
	j.v = v;
	j.n = m->world;
	j.cells = (size_t)m->world * m->world;
	j.why = why;
	j.why_size = why_size;
	v->world = m->world;
	v->threshold = o->threshold;
	v->with_baseline = o->baseline[0] != NULL;
	v->baseline_name = o->baseline_name;
	scratch = malloc(j.cells * sizeof(*scratch));
	if (scratch == NULL || judge_alloc(&j) != 0) {
		snprintf(why, why_size, "out of memory judging a matrix of "
		    "world %u", m->world);
		goto out;
	}
	group_members(&j);
	if (relative(&j, o) != 0)
		goto out;
	if (!measure_noise(&j, o, scratch)) {
		unsteady(&j);
		references(&j, o);
	} else {
		if (v->with_baseline)
			fabric(&j);
		if (sort_network(&j) != 0 || name_hosts(&j) != 0) {
			snprintf(why, why_size, "out of memory judging a "
			    "matrix of world %u", m->world);
			goto out;
		}
		references(&j, o);
		classify(&j);
		name_links(&j);
		fill_worst(&j);
	}
	v->pass = v->nfindings == 0;
	rc = 0;
out:
	free(scratch);
	judge_free(&j);
	if (rc != 0)
		pairs_verdict_fini(v);
	return rc;
}

/* ------------------------------------------------------------ words */

const char *
pairs_finding_kind_name(enum pairs_finding_kind kind)
{
	switch (kind) {
	case PAIRS_FINDING_FABRIC:
		return "fabric";
	case PAIRS_FINDING_HOST:
		return "host";
	case PAIRS_FINDING_LINK:
		return "link";
	case PAIRS_FINDING_UNSTEADY:
		return "unsteady";
	}
	return "unknown";
}

const char *
pairs_verdict_kind(const struct pairs_verdict *v)
{
	if (v->nfindings == 0)
		return "ok";
	if (v->nfindings > 1)
		return "several";
	return pairs_finding_kind_name(v->findings[0].kind);
}

static const char *
mode_words(enum pairs_mode mode)
{
	return mode == PAIRS_MODE_BOTH ? "with both directions at once" :
	    "alone";
}

/* "ranks 3, 4" or "rank 3": a host's ranks, the first few. */
static void
host_ranks(const struct pairs_matrix *m, uint32_t h, struct pairs_text *t)
{
	uint32_t shown = 0, count = 0;

	for (uint32_t r = 0; r < m->world; r++)
		count += m->host[r] == h;
	pairs_text_add(t, count == 1 ? "rank" : "ranks");
	for (uint32_t r = 0; r < m->world && shown < 8; r++)
		if (m->host[r] == h)
			pairs_text_add(t, "%s %u", shown++ ? "," : "", r);
	if (count > shown)
		pairs_text_add(t, ", ...");
}

/* "sending alone and at once, receiving at once" */
static void
host_ways(const struct pairs_finding *f, struct pairs_text *t)
{
	static const char *const modes[4] = { "", "at once", "alone",
	    "alone and at once" };

	if (f->sends)
		pairs_text_add(t, "sending %s", modes[f->sends & 3]);
	if (f->receives)
		pairs_text_add(t, "%sreceiving %s", f->sends ? ", " : "",
		    modes[f->receives & 3]);
	if (!f->sends && !f->receives)
		pairs_text_add(t, "to or from different peers");
}

static void
against(const struct pairs_verdict *v, struct pairs_text *t)
{
	if (v->with_baseline)
		pairs_text_add(t, " (from %s)", v->baseline_name ?
		    v->baseline_name : "the baseline");
}

static void
host_text(const struct pairs_matrix *m, const struct pairs_verdict *v,
    const struct pairs_finding *f, struct pairs_text *t)
{
	pairs_text_add(t, "host %s (", m->label[m->host_rank[f->host]]);
	host_ranks(m, f->host, t);
	pairs_text_add(t, ") is slow: %u of its %u peer hosts below %.2gx %s, ",
	    f->slow_peers, f->peers, v->threshold_used[f->worst_mode],
	    v->with_baseline ? "their baseline" : "the other hosts' median");
	host_ways(f, t);
	pairs_text_add(t, "; worst rank %u -> rank %u %s: %.4g GB/s against "
	    "%.4g GB/s", f->worst_from, f->worst_to, mode_words(f->worst_mode),
	    f->gbps, f->reference);
	against(v, t);
}

/* "10.0.0.2 -> 10.0.0.5 (rank 1 -> rank 4)", or on one host "rank 1 ->
 * rank 3 on 127.0.0.1". */
static void
link_name(const struct pairs_matrix *m, uint32_t a, uint32_t b,
    const char *arrow, struct pairs_text *t)
{
	if (m->host[a] == m->host[b])
		pairs_text_add(t, "rank %u %s rank %u on %s", a, arrow, b,
		    m->label[a]);
	else
		pairs_text_add(t, "%s %s %s (rank %u %s rank %u)",
		    m->label[a], arrow, m->label[b], a, arrow, b);
}

static void
link_text(const struct pairs_matrix *m, const struct pairs_verdict *v,
    const struct pairs_finding *f, struct pairs_text *t)
{
	unsigned alone = f->slow & 3;
	size_t c = (size_t)f->from * m->world + f->to;
	double there = pairs_cell_median(m, PAIRS_MODE_ALONE, f->from, f->to);
	double back = pairs_cell_median(m, PAIRS_MODE_ALONE, f->to, f->from);
	double reference = v->reference[PAIRS_MODE_ALONE][c];

	pairs_text_add(t, "link ");
	link_name(m, f->from, f->to, alone == 1 ? "->" : "<->", t);
	if (alone == 1)
		pairs_text_add(t, " is slow: %.4g GB/s alone against %.4g "
		    "GB/s (%.2gx)", there, reference, there / reference);
	else if (alone == 3)
		pairs_text_add(t, " is slow in both directions: %.4g and %.4g "
		    "GB/s alone against %.4g GB/s", there, back, reference);
	else
		pairs_text_add(t, " is slow with both directions at once: "
		    "%.4g GB/s rank %u -> rank %u against %.4g GB/s", f->gbps,
		    f->worst_from, f->worst_to, f->reference);
	against(v, t);
	if (alone == 1)
		pairs_text_add(t, "; rank %u -> rank %u is fine alone%s",
		    f->to, f->from, f->slow & PAIRS_SLOW_BACK_BOTH ?
		    ", slow only while both directions run" : "");
	else if (alone == 0)
		pairs_text_add(t, "; each direction alone is fine");
}

char *
pairs_finding_text(const struct pairs_matrix *m,
    const struct pairs_verdict *v, const struct pairs_finding *f, char *buf,
    size_t size)
{
	struct pairs_text t;

	pairs_text_init(&t, buf, size);
	switch (f->kind) {
	case PAIRS_FINDING_FABRIC:
		pairs_text_add(&t, "all links below baseline: the median cell "
		    "runs at %.2gx its speed in %s (%.4g GB/s %s against "
		    "%.4g GB/s)", f->ratio, v->baseline_name ?
		    v->baseline_name : "the baseline", f->gbps,
		    mode_words(f->worst_mode), f->reference);
		break;
	case PAIRS_FINDING_HOST:
		host_text(m, v, f, &t);
		break;
	case PAIRS_FINDING_LINK:
		link_text(m, v, f, &t);
		break;
	case PAIRS_FINDING_UNSTEADY:
		pairs_text_add(&t, "too unsteady to judge: the repeats of a "
		    "cell spread +-%.0f%% of their median (%s, the median "
		    "cell's), which leaves a threshold of %.2g, under half "
		    "of %.2g; run more repeats or on a quieter fabric",
		    f->ratio * 100, mode_words(f->worst_mode),
		    v->threshold_used[f->worst_mode], v->threshold);
		break;
	}
	return buf;
}

char *
pairs_verdict_text(const struct pairs_matrix *m,
    const struct pairs_verdict *v, char *buf, size_t size)
{
	struct pairs_text t;

	if (v->nfindings > 0) {
		pairs_finding_text(m, v, &v->findings[0], buf, size);
		t.buf = buf;
		t.size = size;
		t.n = strlen(buf);
		if (v->nfindings > 1)
			pairs_text_add(&t, ", and %zu more", v->nfindings - 1);
		return buf;
	}
	pairs_text_init(&t, buf, size);
	if (v->with_baseline)
		pairs_text_add(&t, "ok: no host or link below %.2gx its speed "
		    "in %s; the median cell at %.2gx (alone) and %.2gx (both "
		    "directions at once)", v->threshold, v->baseline_name ?
		    v->baseline_name : "the baseline",
		    v->baseline_ratio[PAIRS_MODE_ALONE],
		    v->baseline_ratio[PAIRS_MODE_BOTH]);
	else
		pairs_text_add(&t, "ok: no host or link below %.2gx the median "
		    "(%.4g GB/s alone, %.4g GB/s both directions at once)",
		    v->threshold, v->median_gbps[PAIRS_MODE_ALONE],
		    v->median_gbps[PAIRS_MODE_BOTH]);
	return buf;
}
