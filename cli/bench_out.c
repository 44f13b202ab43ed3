/*
 * bench_out.c - how `silvic-ring bench` writes what it measured (see
 * bench_out.h): nccl-tests' table, with its columns, section heads and
 * closing lines; one CSV line a row; JSON records (header, result,
 * summary).  The link test writes its own (bench_links.c).  Nothing here
 * measures or talks to other ranks.
 */
#include <math.h>
#include <stdio.h>
#include <string.h>

#include "cli.h"
#include "bench_out.h"
#include "rank_list.h"

/* Rows named in the --min-busbw message before ", and more". */
#define BELOW_NAMED 8

/* The names of a mask's bits, separated, JSON strings when quoted. */
static void
print_list(FILE *out, unsigned mask, int count,
    const char *(*name)(int), bool quoted)
{
	for (int i = 0, n = 0; i < count; i++) {
		if (!(mask & 1u << i))
			continue;
		fputs(n++ ? "," : "", out);
		if (quoted)
			json_string(out, name(i));
		else
			fputs(name(i), out);
	}
}

static const char *
coll_name(int i)
{
	return bench_coll_name((enum bench_coll)i);
}

static const char *
dtype_name(int i)
{
	return sr_dtype_name((enum sr_dtype)i);
}

static const char *
op_name(int i)
{
	return sr_op_name((enum sr_op)i);
}

static void
header_text(FILE *out, const struct bench_options *o, char **addresses,
    uint32_t world, const char *congestion)
{
	char a[32], b[32];

	fprintf(out, "# silvic-ring %s bench: world %u\n", SR_VERSION, world);
	if (world == 1)
		fputs("#   rank 0: this process (a world of one opens no "
		    "sockets)\n", out);
	for (uint32_t r = 0; r < world && world > 1; r++)
		fprintf(out, "#   rank %u: %s\n", r, addresses[r]);
	if (world > 1)
		fprintf(out, "# links: TCP, congestion control %s (rank 0's)\n",
		    congestion[0] ? congestion : "unknown");
	if (o->group != NULL)
		fprintf(out, "# group: ranks %s (%zu members; the others wait; "
		    "busbw for %zu)\n", rank_list_format(o->group, o->ngroup,
		    a, sizeof(a)), o->ngroup, o->ngroup);
	fputs("# options: ", out);
	print_list(out, o->colls, BENCH_COLL_COUNT, coll_name, false);
	fprintf(out, " -b %s -e %s", bench_size_format(o->minbytes, a,
	    sizeof(a)), bench_size_format(o->maxbytes, b, sizeof(b)));
	if (o->stepfactor > 1)
		fprintf(out, " -f %llu", (unsigned long long)o->stepfactor);
	else
		fprintf(out, " -i %s", bench_size_format(o->stepbytes, a,
		    sizeof(a)));
	fprintf(out, " -n %llu -w %llu -c %d -d ",
	    (unsigned long long)o->iters, (unsigned long long)o->warmup,
	    o->check);
	print_list(out, o->dtypes, SR_DTYPE_COUNT, dtype_name, false);
	fputs(" -o ", out);
	print_list(out, o->ops, SR_OP_COUNT, op_name, false);
	if (o->colls & 1u << BENCH_BROADCAST)
		fprintf(out, " -r %u", o->root);
	fprintf(out, " --seed %llu --min-time %g", (unsigned long long)o->seed,
	    o->min_time);
	if (o->min_busbw_set)
		fprintf(out, " --min-busbw %.15g%s%s", o->min_busbw,
		    o->min_busbw_size_set ? "@" : "", o->min_busbw_size_set ?
		    bench_size_format(o->min_busbw_size, a, sizeof(a)) : "");
	if (o->colls & 1u << BENCH_LINKS)
		fprintf(out, " --threshold %g%s", o->threshold,
		    o->fail_slow ? " --fail-slow" : "");
	fputs("\n", out);
}

static void
header_json(FILE *out, const struct bench_options *o, char **addresses,
    uint32_t world, const char *congestion)
{
	fprintf(out, "{\"type\":\"header\",\"schema\":1,\"version\":");
	json_string(out, SR_VERSION);
	fprintf(out, ",\"world\":%u,\"hosts\":[", world);
	for (uint32_t r = 0; r < world; r++) {
		fputs(r ? "," : "", out);
		json_string(out, addresses[r]);
	}
	fputs("],\"group\":", out);
	if (o->group != NULL) {
		fputs("[", out);
		for (size_t i = 0; i < o->ngroup; i++)
			fprintf(out, "%s%u", i ? "," : "", o->group[i]);
		fputs("]", out);
	} else {
		fputs("null", out);
	}
	fputs(",\"tcp_congestion\":", out);
	if (world > 1 && congestion[0] != '\0')
		json_string(out, congestion);
	else
		fputs("null", out);
	fputs(",\"options\":{\"collectives\":[", out);
	print_list(out, o->colls, BENCH_COLL_COUNT, coll_name, true);
	fprintf(out, "],\"minbytes\":%llu,\"maxbytes\":%llu,\"stepfactor\":",
	    (unsigned long long)o->minbytes, (unsigned long long)o->maxbytes);
	if (o->stepfactor > 1)
		fprintf(out, "%llu,\"stepbytes\":null",
		    (unsigned long long)o->stepfactor);
	else
		fprintf(out, "null,\"stepbytes\":%llu",
		    (unsigned long long)o->stepbytes);
	fprintf(out, ",\"iters\":%llu,\"warmup_iters\":%llu,\"check\":%d,"
	    "\"datatypes\":[", (unsigned long long)o->iters,
	    (unsigned long long)o->warmup, o->check);
	print_list(out, o->dtypes, SR_DTYPE_COUNT, dtype_name, true);
	fputs("],\"ops\":[", out);
	print_list(out, o->ops, SR_OP_COUNT, op_name, true);
	fprintf(out, "],\"root\":%u,\"seed\":%llu,\"min_time_s\":",
	    o->root, (unsigned long long)o->seed);
	json_number(out, o->min_time);
	fputs(",\"min_busbw_gbps\":", out);
	json_number(out, o->min_busbw_set ? o->min_busbw : NAN);
	fputs(",\"min_busbw_size\":", out);
	json_number(out, o->min_busbw_size_set ? (double)o->min_busbw_size :
	    NAN);
	fputs(",\"threshold\":", out);
	json_number(out, o->threshold);
	fprintf(out, ",\"fail_slow\":%s}}\n", o->fail_slow ? "true" : "false");
}

static const char csv_header[] = "collective,size,count,dtype,op,world,"
    "iters,time_us,algbw_gbps,busbw_gbps,wrong,slowest_rank,spread_pct,"
    "root,inplace_time_us,inplace_algbw_gbps,inplace_busbw_gbps,"
    "inplace_wrong\n";

void
bench_header_write(FILE *out, const struct bench_options *o,
    char **addresses, uint32_t world, const char *congestion)
{
	if (o->json)
		header_json(out, o, addresses, world, congestion);
	else if (!o->csv)
		header_text(out, o, addresses, world, congestion);
	else if (o->colls & ((1u << BENCH_LINKS) - 1))
		fputs(csv_header, out);
}

/*
 * nccl-tests' table: size, count, type, redop, root, then time, algbw,
 * busbw and #wrong out of place and in place; ours adds the iterations
 * and, of the out-of-place half, the slowest rank and the spread.
 */
void
bench_section_begin(FILE *out, const struct bench_options *o,
    enum bench_coll coll)
{
	if (o->json || o->csv)
		return;
	fprintf(out, "#\n# %s", bench_coll_name(coll));
	if (coll == BENCH_BROADCAST)
		fprintf(out, " (root %u)", o->root);
	/* Each label centred over its half's 37 columns. */
	fprintf(out, "\n# %51s %24s%13s%22s\n", "", "out-of-place", "",
	    "in-place");
	fprintf(out, "# %10s %12s %6s %6s %5s %7s %10s %8s %8s %7s %10s %8s "
	    "%8s %7s %7s %6s\n", "size", "count", "type", "redop", "root",
	    "iters", "time", "algbw", "busbw", "#wrong", "time", "algbw",
	    "busbw", "#wrong", "slowest", "spread");
	fprintf(out, "# %10s %12s %6s %6s %5s %7s %10s %8s %8s %7s %10s %8s "
	    "%8s %7s %7s %6s\n", "(B)", "(elements)", "", "", "", "", "(us)",
	    "(GB/s)", "(GB/s)", "", "(us)", "(GB/s)", "(GB/s)", "", "(rank)",
	    "(%)");
}

const char *
bench_row_op(const struct bench_row *row)
{
	return row->coll == BENCH_ALLREDUCE ? sr_op_name(row->op) : "none";
}

char *
bench_row_label(const struct bench_row *row, char *buf, size_t size)
{
	snprintf(buf, size, "%s %s%s%s", bench_coll_name(row->coll),
	    sr_dtype_name(row->dtype), row->coll == BENCH_ALLREDUCE ? " " : "",
	    row->coll == BENCH_ALLREDUCE ? sr_op_name(row->op) : "");
	return buf;
}

uint32_t
bench_row_root(const struct bench_sweep *s, const struct bench_row *row)
{
	return s->ranks != NULL ? s->ranks[row->root] : row->root;
}

/* nccl-tests' root column: the root, or -1 where there is none. */
static long
row_root(const struct bench_sweep *s, const struct bench_row *row)
{
	return row->coll == BENCH_BROADCAST ? (long)bench_row_root(s, row) :
	    -1;
}

/* One half's fields of a result record, each name behind prefix. */
static void
half_json(FILE *out, const struct bench_sweep *s, const struct bench_half *h,
    const char *prefix)
{
	fprintf(out, ",\"%stime_us\":", prefix);
	json_number(out, h->t.time * 1e6);
	fprintf(out, ",\"%salgbw_gbps\":", prefix);
	json_number(out, h->algbw);
	fprintf(out, ",\"%sbusbw_gbps\":", prefix);
	json_number(out, h->busbw);
	fprintf(out, ",\"%swrong\":", prefix);
	json_number(out, s->o->check ? (double)h->wrong : NAN);
}

static void
half_text(FILE *out, const struct bench_sweep *s, const struct bench_half *h)
{
	char wrong[24];

	if (s->o->check)
		snprintf(wrong, sizeof(wrong), "%llu",
		    (unsigned long long)h->wrong);
	else
		snprintf(wrong, sizeof(wrong), "N/A");
	fprintf(out, " %10.2f %8.2f %8.2f %7s", h->t.time * 1e6, h->algbw,
	    h->busbw, wrong);
}

static void
row_text(FILE *out, const struct bench_sweep *s, const struct bench_row *row)
{
	const struct bench_half *oop = &row->h[BENCH_OUT_OF_PLACE];

	fprintf(out, "  %10llu %12llu %6s %6s %5ld %7llu",
	    (unsigned long long)row->bytes, (unsigned long long)row->count,
	    sr_dtype_name(row->dtype), bench_row_op(row), row_root(s, row),
	    (unsigned long long)row->iters);
	half_text(out, s, oop);
	half_text(out, s, &row->h[BENCH_IN_PLACE]);
	fprintf(out, " %7u %6.1f\n", oop->t.slowest, oop->t.spread_pct);
}

static void
row_json(FILE *out, const struct bench_sweep *s, const struct bench_row *row)
{
	const struct bench_half *oop = &row->h[BENCH_OUT_OF_PLACE];
	const struct bench_half *ip = &row->h[BENCH_IN_PLACE];

	fputs("{\"type\":\"result\",\"schema\":1,\"collective\":", out);
	json_string(out, bench_coll_name(row->coll));
	fprintf(out, ",\"size\":%llu,\"count\":%llu,\"dtype\":",
	    (unsigned long long)row->bytes, (unsigned long long)row->count);
	json_string(out, sr_dtype_name(row->dtype));
	fputs(",\"op\":", out);
	json_string(out, bench_row_op(row));
	fprintf(out, ",\"world\":%u", sr_ring_world(s->ring));
	if (s->ranks != NULL)
		fprintf(out, ",\"members\":%u", s->world);
	fprintf(out, ",\"iters\":%llu", (unsigned long long)row->iters);
	half_json(out, s, oop, "");
	fprintf(out, ",\"slowest_rank\":%u,\"spread_pct\":", oop->t.slowest);
	json_number(out, oop->t.spread_pct);
	fputs(",\"root\":", out);
	json_number(out, row->coll == BENCH_BROADCAST ?
	    (double)bench_row_root(s, row) : NAN);
	half_json(out, s, ip, "inplace_");
	fputs("}\n", out);
}

static void
row_csv(FILE *out, const struct bench_sweep *s, const struct bench_row *row)
{
	const struct bench_half *oop = &row->h[BENCH_OUT_OF_PLACE];
	const struct bench_half *ip = &row->h[BENCH_IN_PLACE];

	fprintf(out, "%s,%llu,%llu,%s,%s,%u,%llu,%.3f,%.6f,%.6f,",
	    bench_coll_name(row->coll), (unsigned long long)row->bytes,
	    (unsigned long long)row->count, sr_dtype_name(row->dtype),
	    bench_row_op(row), sr_ring_world(s->ring),
	    (unsigned long long)row->iters,
	    oop->t.time * 1e6, oop->algbw, oop->busbw);
	if (s->o->check)
		fprintf(out, "%llu", (unsigned long long)oop->wrong);
	fprintf(out, ",%u,%.2f,", oop->t.slowest, oop->t.spread_pct);
	if (row->coll == BENCH_BROADCAST)
		fprintf(out, "%u", bench_row_root(s, row));
	fprintf(out, ",%.3f,%.6f,%.6f,", ip->t.time * 1e6, ip->algbw,
	    ip->busbw);
	if (s->o->check)
		fprintf(out, "%llu", (unsigned long long)ip->wrong);
	fputs("\n", out);
}

void
bench_row_write(FILE *out, const struct bench_sweep *s,
    const struct bench_row *row)
{
	if (s->o->json)
		row_json(out, s, row);
	else if (s->o->csv)
		row_csv(out, s, row);
	else
		row_text(out, s, row);
}

/* nccl-tests' closing lines, in its order, after each collective's rows. */
void
bench_section_end(FILE *out, const struct bench_options *o, uint64_t rows,
    double busbw, uint64_t wrong)
{
	if (o->json || o->csv)
		return;
	if (o->check)
		fprintf(out, "# Out of bounds values : %llu %s\n",
		    (unsigned long long)wrong, wrong ? "FAILED" : "OK");
	else
		fputs("# Out of bounds values : N/A (-c 0)\n", out);
	/* Both halves of every row, as nccl-tests averages them. */
	fprintf(out, "# Avg bus bandwidth    : %g GB/s\n#\n",
	    rows ? busbw / (double)(rows * BENCH_PLACE_COUNT) : 0.0);
}

void
bench_below_report(const struct bench_sweep *s)
{
	char list[1024], size[32], label[32];
	size_t n = 0;

	list[0] = '\0';
	for (size_t i = 0; i < s->nbelow && i < BELOW_NAMED; i++) {
		const struct bench_row *r = &s->below[i];

		bench_size_format(r->bytes, size, sizeof(size));
		n += (size_t)snprintf(list + n, sizeof(list) - n, "%s%s at %s "
		    "(%.3f GB/s)", i ? ", " : "", bench_row_label(r, label,
		    sizeof(label)), size, r->busbw);
		if (n >= sizeof(list))
			n = sizeof(list) - 1;
	}
	cli_error("busbw below --min-busbw %.15g GB/s: %s%s", s->o->min_busbw,
	    list, s->nbelow > BELOW_NAMED ? ", and more" : "");
	if (!s->o->json && !s->o->csv)
		fprintf(s->out, "# below --min-busbw %.15g GB/s: %zu row(s)\n",
		    s->o->min_busbw, s->nbelow);
}

/* The rows --min-busbw checked, for the summary record. */
static void
gate_json(FILE *out, const struct bench_sweep *s)
{
	fprintf(out, ",\"checked_rows\":%llu,\"checked_sizes\":",
	    (unsigned long long)s->gated);
	if (s->gated > 0)
		fprintf(out, "[%llu,%llu]", (unsigned long long)s->gated_min,
		    (unsigned long long)s->gated_max);
	else
		fputs("null", out);
	fputs(",\"lowest\":", out);
	if (s->gated == 0) {
		fputs("null", out);
		return;
	}
	fputs("{\"collective\":", out);
	json_string(out, bench_coll_name(s->lowest.coll));
	fprintf(out, ",\"size\":%llu,\"dtype\":\"%s\",\"op\":\"%s\","
	    "\"busbw_gbps\":", (unsigned long long)s->lowest.bytes,
	    sr_dtype_name(s->lowest.dtype), bench_row_op(&s->lowest));
	json_number(out, s->lowest.busbw);
	fputs("}", out);
}

static void
summary_json(FILE *out, const struct bench_sweep *s,
    const struct bench_links_result *links, int status)
{
	fputs("{\"type\":\"summary\",\"schema\":1,\"avg_busbw_gbps\":", out);
	json_number(out, s->rows ? s->busbw_sum / (double)(s->rows *
	    BENCH_PLACE_COUNT) : NAN);
	fprintf(out, ",\"rows\":%llu,\"wrong\":", (unsigned long long)s->rows);
	json_number(out, s->o->check ? (double)s->wrong : NAN);
	fprintf(out, ",\"check\":\"%s\",\"threshold\":", !s->o->check ? "off" :
	    s->wrong ? "failed" : "passed");
	if (s->o->min_busbw_set) {
		fputs("{\"min_busbw_gbps\":", out);
		json_number(out, s->o->min_busbw);
		fputs(",\"size\":", out);
		json_number(out, (double)(s->o->min_busbw_size_set ?
		    s->o->min_busbw_size : s->last_size));
		fprintf(out, ",\"passed\":%s,\"below\":[", s->nbelow ||
		    s->gated == 0 ? "false" : "true");
		for (size_t i = 0; i < s->nbelow; i++) {
			fputs(i ? ",{\"collective\":" : "{\"collective\":",
			    out);
			json_string(out, bench_coll_name(s->below[i].coll));
			fprintf(out, ",\"size\":%llu,\"dtype\":\"%s\","
			    "\"op\":\"%s\",\"busbw_gbps\":",
			    (unsigned long long)s->below[i].bytes,
			    sr_dtype_name(s->below[i].dtype),
			    bench_row_op(&s->below[i]));
			json_number(out, s->below[i].busbw);
			fputs("}", out);
		}
		fputs("]", out);
		gate_json(out, s);
		fputs("}", out);
	} else {
		fputs("null", out);
	}
	fputs(",\"links\":", out);
	bench_links_json(out, links, s->o->threshold);
	fprintf(out, ",\"exit\":%d}\n", status);
}

/* What --min-busbw checked, passed or not: a gate that says nothing
 * cannot be told from one that tested nothing. */
static void
gate_text(FILE *out, const struct bench_sweep *s)
{
	char from[32], to[32], at[32], label[32];
	const struct bench_row *r = &s->lowest;

	if (s->gated == 0) {
		fprintf(out, "# --min-busbw %.15g GB/s: no row checked: "
		    "FAILED\n", s->o->min_busbw);
		return;
	}
	bench_size_format(s->gated_min, from, sizeof(from));
	bench_size_format(s->gated_max, to, sizeof(to));
	bench_size_format(r->bytes, at, sizeof(at));
	fprintf(out, "# --min-busbw %.15g GB/s: %llu row(s) of %s%s%s "
	    "checked, lowest busbw %.3f GB/s (%s at %s): %s\n",
	    s->o->min_busbw, (unsigned long long)s->gated, from,
	    s->gated_min != s->gated_max ? " to " : "",
	    s->gated_min != s->gated_max ? to : "", r->busbw,
	    bench_row_label(r, label, sizeof(label)), at,
	    s->nbelow ? "FAILED" : "passed");
}

static void
footer_text(FILE *out, const struct bench_sweep *s)
{
	if (s->o->min_busbw_set)
		gate_text(out, s);
	fprintf(out, "# check: %s\n", !s->o->check ? "off" : s->wrong ?
	    "FAILED" : "passed");
}

void
bench_summary_write(FILE *out, const struct bench_sweep *s,
    const struct bench_links_result *links, int status)
{
	if (s->o->json)
		summary_json(out, s, links, status);
	else if (!s->o->csv && s->rows > 0)
		footer_text(out, s);
}
