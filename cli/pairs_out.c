/*
 * pairs_out.c - how `bench pairs` writes what it found (see pairs.h): the
 * text table, in bench's manner (comment lines start with '#', data
 * lines with spaces), and the JSON records, through bench's writers
 * (json_string, json_number).  Nothing here measures or judges.
 */
#include <math.h>
#include <stdlib.h>
#include <string.h>

#include "cli.h"
#include "bench_data.h"
#include "pairs.h"

#define VERDICT_TEXT_MAX 2048

static size_t
cell_index(const struct pairs_matrix *m, uint32_t from, uint32_t to)
{
	return (size_t)from * m->world + to;
}

static double
ratio(const struct pairs_report *r, enum pairs_mode mode, uint32_t from,
    uint32_t to)
{
	return pairs_cell_median(r->m, mode, from, to) /
	    r->v->reference[mode][cell_index(r->m, from, to)];
}

static bool
slow(const struct pairs_report *r, enum pairs_mode mode, uint32_t from,
    uint32_t to)
{
	return r->v->flags[mode][cell_index(r->m, from, to)] & PAIRS_CELL_SLOW;
}

/* ------------------------------------------------------------ header */

static void
header_text(FILE *out, const struct pairs_report *r, double estimate_s)
{
	const struct pairs_matrix *m = r->m;
	char estimate[64];

	fprintf(out, "# silvic-ring %s bench pairs: world %u on %u host%s\n",
	    SR_VERSION, m->world, m->nhosts, m->nhosts == 1 ? "" : "s");
	for (uint32_t i = 0; i < m->world; i++)
		fprintf(out, "#   rank %u: %s\n", i, r->addresses[i]);
	fprintf(out, "# plan: %u round%s of %u pair%s at once%s; each pair "
	    "runs both directions at once, then each direction alone (the "
	    "lower rank sends first); %u timed transfer%s of each after "
	    "%llu untimed\n", r->plan->rounds, r->plan->rounds == 1 ? "" :
	    "s", r->plan->per_round, r->plan->per_round == 1 ? "" : "s",
	    m->world % 2 ? ", one rank sitting each round out" : "",
	    m->repeats, m->repeats == 1 ? "" : "s",
	    (unsigned long long)r->warmup);
	fprintf(out, "# threshold: slow below %gx the median%s%s\n",
	    r->threshold, r->baseline ? " and against " : "",
	    r->baseline ? r->baseline : "");
	fprintf(out, "# estimate: %s\n", pairs_plan_estimate_text(r->plan,
	    estimate_s, estimate, sizeof(estimate)));
}

static void
string_list(FILE *out, uint32_t n, const char *(*at)(const void *, uint32_t),
    const void *ctx)
{
	fputs("[", out);
	for (uint32_t i = 0; i < n; i++) {
		fputs(i ? "," : "", out);
		json_string(out, at(ctx, i));
	}
	fputs("]", out);
}

static const char *
label_at(const void *ctx, uint32_t i)
{
	return ((const struct pairs_matrix *)ctx)->label[i];
}

static const char *
address_at(const void *ctx, uint32_t i)
{
	return ((char *const *)ctx)[i];
}

static const char *
phase_at(const void *ctx, uint32_t i)
{
	return pairs_phase_key((enum pairs_phase)i);
}

void
pairs_json_string_or_null(FILE *out, const char *s)
{
	if (s != NULL && s[0] != '\0')
		json_string(out, s);
	else
		fputs("null", out);
}

void
pairs_json_index_or_null(FILE *out, bool has, uint32_t v)
{
	if (has)
		fprintf(out, "%u", v);
	else
		fputs("null", out);
}

static void
header_json(FILE *out, const struct pairs_report *r, double estimate_s)
{
	const struct pairs_matrix *m = r->m;

	fputs("{\"type\":\"pairs\",\"schema\":1,\"version\":", out);
	json_string(out, SR_VERSION);
	fprintf(out, ",\"world\":%u,\"hosts\":", m->world);
	string_list(out, m->world, label_at, m);
	fputs(",\"addresses\":", out);
	string_list(out, m->world, address_at, r->addresses);
	fprintf(out, ",\"nhosts\":%u,\"rounds\":%u,\"pairs_per_round\":%u,"
	    "\"phases\":", m->nhosts, r->plan->rounds, r->plan->per_round);
	string_list(out, PAIRS_PHASE_COUNT, phase_at, NULL);
	fprintf(out, ",\"repeats\":%u,\"warmup\":%llu,\"threshold\":",
	    m->repeats, (unsigned long long)r->warmup);
	json_number(out, r->threshold);
	fputs(",\"baseline\":", out);
	pairs_json_string_or_null(out, r->baseline);
	fputs(",\"estimate_s\":", out);
	json_number(out, estimate_s);
	fputs("}\n", out);
}

void
pairs_header_write(FILE *out, const struct pairs_report *r,
    double estimate_s, bool json)
{
	if (json)
		header_json(out, r, estimate_s);
	else
		header_text(out, r, estimate_s);
}

/* ------------------------------------------------------- text table */

static void
matrix_text(FILE *out, const struct pairs_report *r, enum pairs_mode mode)
{
	const struct pairs_matrix *m = r->m;

	fprintf(out, "#\n# GB/s, %s (row: from, column: to; the median of %u "
	    "repeat%s; * slow)\n# %7s", mode == PAIRS_MODE_ALONE ?
	    "each direction alone" : "both directions at once", m->repeats,
	    m->repeats == 1 ? "" : "s", "from\\to");
	for (uint32_t j = 0; j < m->world; j++)
		fprintf(out, " %8u%s", j, j + 1 < m->world ? " " : "");
	fputs("\n", out);
	for (uint32_t i = 0; i < m->world; i++) {
		fprintf(out, "  %7u", i);
		for (uint32_t j = 0; j < m->world; j++) {
			bool last = j + 1 == m->world;

			if (i == j)
				fprintf(out, " %8s%s", "-", last ? "" : " ");
			else if (slow(r, mode, i, j))
				fprintf(out, " %8.4g*", pairs_cell_median(m,
				    mode, i, j));
			else
				fprintf(out, " %8.4g%s", pairs_cell_median(m,
				    mode, i, j), last ? "" : " ");
		}
		fputs("\n", out);
	}
}

static void
latency_text(FILE *out, const struct pairs_report *r)
{
	const struct pairs_matrix *m = r->m;

	fprintf(out, "#\n# latency (us): half the median round trip, as the "
	    "row's rank timed it\n# %7s", "from\\to");
	for (uint32_t j = 0; j < m->world; j++)
		fprintf(out, " %8u%s", j, j + 1 < m->world ? " " : "");
	fputs("\n", out);
	for (uint32_t i = 0; i < m->world; i++) {
		fprintf(out, "  %7u", i);
		for (uint32_t j = 0; j < m->world; j++)
			if (i == j || isnan(m->latency_us[cell_index(m, i, j)]))
				fprintf(out, " %8s%s", "-", j + 1 < m->world ?
				    " " : "");
			else
				fprintf(out, " %8.1f%s",
				    m->latency_us[cell_index(m, i, j)],
				    j + 1 < m->world ? " " : "");
		fputs("\n", out);
	}
}

struct ranked {
	double ratio;
	uint32_t from, to;
	enum pairs_mode mode;
};

static int
by_ratio(const void *a, const void *b)
{
	const struct ranked *x = a, *y = b;

	if (x->ratio != y->ratio)
		return x->ratio < y->ratio ? -1 : 1;
	if (x->from != y->from)
		return x->from < y->from ? -1 : 1;
	if (x->to != y->to)
		return x->to < y->to ? -1 : 1;
	return (int)x->mode - (int)y->mode;
}

/* The PAIRS_WORST_SHOWN cells lowest against their reference; all
 * holds every cell of both modes. */
static void
worst_text(FILE *out, const struct pairs_report *r, struct ranked *all)
{
	const struct pairs_matrix *m = r->m;
	size_t n = 0;

	for (int mode = 0; mode < PAIRS_MODE_COUNT; mode++)
		for (uint32_t i = 0; i < m->world; i++)
			for (uint32_t j = 0; j < m->world; j++)
				if (i != j)
					all[n++] = (struct ranked){
					    ratio(r, mode, i, j), i, j, mode };
	qsort(all, n, sizeof(*all), by_ratio);
	fprintf(out, "#\n# the %d worst cells against their reference:\n"
	    "# %6s %-20s %6s %-20s %-6s %10s %10s %8s %9s\n",
	    PAIRS_WORST_SHOWN, "from", "host", "to", "host", "mode",
	    "GB/s", "reference", "ratio", "latency");
	for (size_t k = 0; k < n && k < PAIRS_WORST_SHOWN; k++) {
		const struct ranked *c = &all[k];

		fprintf(out, "  %6u %-20s %6u %-20s %-6s %10.4g %10.4g %8.3g "
		    "%9.1f%s\n", c->from, m->label[c->from], c->to,
		    m->label[c->to], pairs_mode_key(c->mode),
		    pairs_cell_median(m, c->mode, c->from, c->to),
		    r->v->reference[c->mode][cell_index(m, c->from, c->to)],
		    c->ratio, m->latency_us[cell_index(m, c->from, c->to)],
		    slow(r, c->mode, c->from, c->to) ? "  slow" : "");
	}
}

/* A host's summary: the medians of its cells to and from other hosts
 * (or, on a world of one host, to and from its other ranks). */
struct host_sum {
	double send[PAIRS_MODE_COUNT], receive[PAIRS_MODE_COUNT];
	double latency_us;
	uint32_t ranks, slow_cells;
	bool named;
};

static void
host_summary(const struct pairs_report *r, uint32_t h, double *scratch,
    struct host_sum *s)
{
	const struct pairs_matrix *m = r->m;
	bool alone = m->nhosts == 1;

	memset(s, 0, sizeof(*s));
	for (int mode = 0; mode < PAIRS_MODE_COUNT; mode++)
		for (int dir = 0; dir < 2; dir++) {
			size_t n = 0;

			for (uint32_t a = 0; a < m->world; a++)
				for (uint32_t b = 0; b < m->world; b++) {
					uint32_t mine = dir ? b : a;

					if (a == b || m->host[mine] != h ||
					    (!alone && m->host[a] == m->host[b]))
						continue;
					scratch[n++] = pairs_cell_median(m, mode,
					    a, b);
					s->slow_cells += slow(r, mode, a, b) &&
					    (dir == 0 || m->host[a] != h);
				}
			*(dir ? &s->receive[mode] : &s->send[mode]) = n ?
			    bench_median(scratch, n) : NAN;
		}
	{
		size_t n = 0;

		for (uint32_t a = 0; a < m->world; a++)
			for (uint32_t b = 0; b < m->world; b++)
				if (a != b && (m->host[a] == h ||
				    m->host[b] == h) && (alone ||
				    m->host[a] != m->host[b]) &&
				    !isnan(m->latency_us[cell_index(m, a, b)]))
					scratch[n++] =
					    m->latency_us[cell_index(m, a, b)];
		s->latency_us = n ? bench_median(scratch, n) : NAN;
	}
	for (uint32_t a = 0; a < m->world; a++)
		s->ranks += m->host[a] == h;
	for (size_t i = 0; i < r->v->nfindings; i++)
		s->named = s->named || (r->v->findings[i].kind ==
		    PAIRS_FINDING_HOST && r->v->findings[i].host == h);
}

static void
hosts_text(FILE *out, const struct pairs_report *r, double *scratch)
{
	const struct pairs_matrix *m = r->m;

	fprintf(out, "#\n# hosts: the median GB/s of their cells with the "
	    "other hosts\n# %-20s %5s %10s %10s %10s %10s %9s %5s\n", "host",
	    "ranks", "send", "receive", "send", "receive", "latency", "slow");
	fprintf(out, "# %-20s %5s %10s %10s %10s %10s %9s %5s\n", "", "",
	    "alone", "alone", "at once", "at once", "(us)", "cells");
	for (uint32_t h = 0; h < m->nhosts; h++) {
		struct host_sum s;

		host_summary(r, h, scratch, &s);
		fprintf(out, "  %-20s %5u %10.4g %10.4g %10.4g %10.4g %9.1f "
		    "%5u%s\n", m->label[m->host_rank[h]], s.ranks,
		    s.send[PAIRS_MODE_ALONE], s.receive[PAIRS_MODE_ALONE],
		    s.send[PAIRS_MODE_BOTH], s.receive[PAIRS_MODE_BOTH],
		    s.latency_us, s.slow_cells, s.named ? "  slow" : "");
	}
}

static void
verdict_text(FILE *out, const struct pairs_report *r)
{
	const struct pairs_verdict *v = r->v;
	char text[VERDICT_TEXT_MAX];

	fprintf(out, "#\n# median: %.4g GB/s alone, %.4g GB/s both directions "
	    "at once; slow below %gx (%.2g and %.2g after the margin for the "
	    "repeats' jitter, +-%.0f%% and +-%.0f%%)\n",
	    v->median_gbps[PAIRS_MODE_ALONE], v->median_gbps[PAIRS_MODE_BOTH],
	    v->threshold, v->threshold_used[PAIRS_MODE_ALONE],
	    v->threshold_used[PAIRS_MODE_BOTH],
	    v->jitter[PAIRS_MODE_ALONE] * 100, v->jitter[PAIRS_MODE_BOTH] *
	    100);
	for (int mode = 0; mode < PAIRS_MODE_COUNT; mode++)
		if (v->set_aside[mode])
			fprintf(out, "# set aside: %s, too unsteady to judge "
			    "(+-%.0f%%); the verdict is %s's alone\n",
			    mode == PAIRS_MODE_BOTH ? "both directions at once" :
			    "each direction alone", v->jitter[mode] * 100,
			    mode == PAIRS_MODE_BOTH ? "each direction" :
			    "both directions at once");
	if (v->with_baseline)
		fprintf(out, "# baseline %s: the median cell at %.3gx alone, "
		    "%.3gx both directions at once\n", v->baseline_name ?
		    v->baseline_name : "", v->baseline_ratio[PAIRS_MODE_ALONE],
		    v->baseline_ratio[PAIRS_MODE_BOTH]);
	if (v->nfindings == 0)
		fprintf(out, "# verdict: %s\n", pairs_verdict_text(r->m, v,
		    text, sizeof(text)));
	for (size_t i = 0; i < v->nfindings; i++)
		fprintf(out, "# verdict: %s\n", pairs_finding_text(r->m, v,
		    &v->findings[i], text, sizeof(text)));
}

int
pairs_table_write(FILE *out, const struct pairs_report *r)
{
	const struct pairs_matrix *m = r->m;
	size_t cells = (size_t)m->world * m->world;
	double *scratch = NULL;
	struct ranked *all = NULL;

	if (m->world > PAIRS_TABLE_MAX) {
		scratch = malloc(cells * sizeof(*scratch));
		all = malloc(cells * PAIRS_MODE_COUNT * sizeof(*all));
		if (scratch == NULL || all == NULL) {
			free(scratch);
			free(all);
			return -1;
		}
		worst_text(out, r, all);
		hosts_text(out, r, scratch);
	} else {
		matrix_text(out, r, PAIRS_MODE_ALONE);
		matrix_text(out, r, PAIRS_MODE_BOTH);
		latency_text(out, r);
	}
	verdict_text(out, r);
	free(scratch);
	free(all);
	return 0;
}

/* ------------------------------------------------------------- JSON */

static void
repeats_json(FILE *out, const struct pairs_matrix *m, enum pairs_mode mode,
    uint32_t from, uint32_t to)
{
	const double *c = pairs_cell(m, mode, from, to);

	fputs("[", out);
	for (uint32_t k = 0; k < m->repeats; k++) {
		fputs(k ? "," : "", out);
		json_number(out, c[k]);
	}
	fputs("]", out);
}

static void
pair_json(FILE *out, const struct pairs_report *r, uint32_t i, uint32_t j)
{
	const struct pairs_matrix *m = r->m;
	size_t c = cell_index(m, i, j);

	fprintf(out, "{\"type\":\"pair\",\"schema\":1,\"from\":%u,"
	    "\"from_host\":", i);
	json_string(out, m->label[i]);
	fprintf(out, ",\"to\":%u,\"to_host\":", j);
	json_string(out, m->label[j]);
	fprintf(out, ",\"round\":%u,\"bytes\":%llu,\"repeats\":%u", m->round[c],
	    (unsigned long long)m->bytes[c], m->repeats);
	for (int mode = 0; mode < PAIRS_MODE_COUNT; mode++) {
		const char *key = pairs_mode_key(mode);

		fprintf(out, ",\"gbps_%s\":", key);
		json_number(out, pairs_cell_median(m, mode, i, j));
		fprintf(out, ",\"gbps_%s_repeats\":", key);
		repeats_json(out, m, mode, i, j);
		fprintf(out, ",\"reference_%s\":", key);
		json_number(out, r->v->reference[mode][c]);
		fprintf(out, ",\"ratio_%s\":", key);
		json_number(out, ratio(r, mode, i, j));
		fprintf(out, ",\"slow_%s\":%s", key, slow(r, mode, i, j) ?
		    "true" : "false");
		fprintf(out, ",\"baseline_%s\":", key);
		json_number(out, r->baseline_cells[mode] != NULL ?
		    r->baseline_cells[mode][c] : NAN);
	}
	fputs(",\"latency_us\":", out);
	json_number(out, m->latency_us[c]);
	fputs("}\n", out);
}

static void
ranks_json(FILE *out, const struct pairs_matrix *m, uint32_t h)
{
	bool first = true;

	fputs("[", out);
	for (uint32_t a = 0; a < m->world; a++)
		if (m->host[a] == h) {
			fprintf(out, "%s%u", first ? "" : ",", a);
			first = false;
		}
	fputs("]", out);
}

static void
host_json(FILE *out, const struct pairs_report *r, uint32_t h,
    double *scratch)
{
	struct host_sum s;

	host_summary(r, h, scratch, &s);
	fputs("{\"type\":\"host\",\"schema\":1,\"host\":", out);
	json_string(out, r->m->label[r->m->host_rank[h]]);
	fprintf(out, ",\"index\":%u,\"ranks\":", h);
	ranks_json(out, r->m, h);
	for (int mode = 0; mode < PAIRS_MODE_COUNT; mode++) {
		fprintf(out, ",\"send_gbps_%s\":", pairs_mode_key(mode));
		json_number(out, s.send[mode]);
		fprintf(out, ",\"receive_gbps_%s\":", pairs_mode_key(mode));
		json_number(out, s.receive[mode]);
	}
	fputs(",\"latency_us\":", out);
	json_number(out, s.latency_us);
	fprintf(out, ",\"slow_cells\":%u,\"slow\":%s}\n", s.slow_cells,
	    s.named ? "true" : "false");
}

/* The modes of mask, as a list; null when has is false. */
static void
modes_json(FILE *out, bool has, unsigned mask)
{
	bool first = true;

	if (!has) {
		fputs("null", out);
		return;
	}
	fputs("[", out);
	for (int mode = 0; mode < PAIRS_MODE_COUNT; mode++)
		if (mask & 1u << mode) {
			fputs(first ? "" : ",", out);
			json_string(out, pairs_mode_key(mode));
			first = false;
		}
	fputs("]", out);
}

static const char *
direction(const struct pairs_finding *f)
{
	if (f->kind != PAIRS_FINDING_LINK)
		return NULL;
	return (f->slow & 3) == 1 ? "one" : (f->slow & 3) == 3 ? "both" :
	    "at_once";
}

static void
finding_json(FILE *out, const struct pairs_report *r,
    const struct pairs_finding *f)
{
	const struct pairs_matrix *m = r->m;
	bool host = f->kind == PAIRS_FINDING_HOST;
	bool link = f->kind == PAIRS_FINDING_LINK;
	bool cell = host || link;
	char text[VERDICT_TEXT_MAX];

	fputs("{\"kind\":", out);
	json_string(out, pairs_finding_kind_name(f->kind));
	fputs(",\"text\":", out);
	json_string(out, pairs_finding_text(m, r->v, f, text, sizeof(text)));
	fputs(",\"host\":", out);
	pairs_json_string_or_null(out, host ?
	    m->label[m->host_rank[f->host]] : NULL);
	fputs(",\"ranks\":", out);
	if (host)
		ranks_json(out, m, f->host);
	else
		fputs("null", out);
	fputs(",\"slow_peers\":", out);
	pairs_json_index_or_null(out, host, f->slow_peers);
	fputs(",\"peers\":", out);
	pairs_json_index_or_null(out, host, f->peers);
	fputs(",\"sends\":", out);
	modes_json(out, host, f->sends);
	fputs(",\"receives\":", out);
	modes_json(out, host, f->receives);
	fputs(",\"from\":", out);
	pairs_json_index_or_null(out, link, f->from);
	fputs(",\"to\":", out);
	pairs_json_index_or_null(out, link, f->to);
	fputs(",\"direction\":", out);
	pairs_json_string_or_null(out, direction(f));
	fputs(",\"mode\":", out);
	json_string(out, pairs_mode_key(f->worst_mode));
	fputs(",\"worst_from\":", out);
	pairs_json_index_or_null(out, cell, f->worst_from);
	fputs(",\"worst_to\":", out);
	pairs_json_index_or_null(out, cell, f->worst_to);
	fputs(",\"gbps\":", out);
	json_number(out, f->kind == PAIRS_FINDING_UNSTEADY ? NAN : f->gbps);
	fputs(",\"reference_gbps\":", out);
	json_number(out, f->kind == PAIRS_FINDING_UNSTEADY ? NAN :
	    f->reference);
	fputs(",\"ratio\":", out);
	json_number(out, f->ratio);
	fputs("}", out);
}

/* ,"NAME_both":x,"NAME_alone":y */
static void
per_mode(FILE *out, const char *name, const double *v)
{
	for (int mode = 0; mode < PAIRS_MODE_COUNT; mode++) {
		fprintf(out, ",\"%s_%s\":", name, pairs_mode_key(mode));
		json_number(out, v[mode]);
	}
}

static void
verdict_json(FILE *out, const struct pairs_report *r, int status)
{
	const struct pairs_verdict *v = r->v;
	char text[VERDICT_TEXT_MAX];

	fputs("{\"type\":\"verdict\",\"schema\":1,\"verdict\":", out);
	json_string(out, pairs_verdict_kind(v));
	fprintf(out, ",\"pass\":%s,\"text\":", v->pass ? "true" : "false");
	json_string(out, pairs_verdict_text(r->m, v, text, sizeof(text)));
	fputs(",\"findings\":[", out);
	for (size_t i = 0; i < v->nfindings; i++) {
		fputs(i ? "," : "", out);
		finding_json(out, r, &v->findings[i]);
	}
	fputs("]", out);
	per_mode(out, "median_gbps", v->median_gbps);
	fputs(",\"threshold\":", out);
	json_number(out, v->threshold);
	per_mode(out, "threshold_used", v->threshold_used);
	per_mode(out, "jitter", v->jitter);
	fprintf(out, ",\"set_aside_both\":%s,\"set_aside_alone\":%s",
	    v->set_aside[PAIRS_MODE_BOTH] ? "true" : "false",
	    v->set_aside[PAIRS_MODE_ALONE] ? "true" : "false");
	fputs(",\"baseline\":", out);
	pairs_json_string_or_null(out, r->baseline);
	per_mode(out, "baseline_ratio", v->baseline_ratio);
	fprintf(out, ",\"passes\":%u,\"exit\":%d}\n", r->passes, status);
}

int
pairs_json_write(FILE *out, const struct pairs_report *r, int status)
{
	const struct pairs_matrix *m = r->m;
	double *scratch = malloc((size_t)m->world * m->world *
	    sizeof(*scratch));

	if (scratch == NULL)
		return -1;
	for (uint32_t i = 0; i < m->world; i++)
		for (uint32_t j = 0; j < m->world; j++)
			if (i != j)
				pair_json(out, r, i, j);
	for (uint32_t h = 0; h < m->nhosts; h++)
		host_json(out, r, h, scratch);
	verdict_json(out, r, status);
	free(scratch);
	return 0;
}
