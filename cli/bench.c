/*
 * bench.c - `silvic-ring bench`: nccl-tests-style sweeps of allreduce,
 * allgather and broadcast over a range of sizes, each size out of place
 * then in place, with an exact check of every result, and the link test
 * (bench_links.c).
 *
 * Every rank parses the same options and so walks the same sizes, dtypes
 * and ops; they check that first by comparing a digest of the options.
 * Iteration counts that adapt to the speed of small rows are decided by
 * rank 0 and broadcast.  Only rank 0 writes to stdout; every rank reports
 * its own errors and its own first wrong element on stderr.
 */
#include <errno.h>
#include <getopt.h>
#include <math.h>
#include <stdlib.h>
#include <string.h>

#include "cli.h"
#include "bench_data.h"
#include "discover.h"
#include "usage.h"

/* Rows named in the --min-busbw message before "and N more". */
#define BELOW_NAMED 8

const char usage_bench[] =
"usage: silvic-ring bench [allreduce|allgather|broadcast|links|all] [OPTIONS]\n"
"\n"
"Measures collectives the way nccl-tests does: a sweep of sizes, each\n"
"timed out of place, then in place, over -n iterations after -w warm-up\n"
"ones, with algbw = size/time and busbw = algbw x 2(n-1)/n (allreduce),\n"
"(n-1)/n (allgather) or 1 (broadcast), in GB/s of 1e9 bytes.  A row's time\n"
"is the mean over iterations of the slowest rank's time.  Then one more\n"
"collective on fresh inputs is checked element by element against the\n"
"exact result.  'links' measures each rank's link to the next, alone and\n"
"all at once, and names the slow ones; 'all' runs the three sweeps, then\n"
"links.  Only rank 0 prints; run it with launch or any launcher.\n"
"\n"
"  -b, --minbytes SIZE      smallest size (default 8); sizes take K, M, G\n"
"  -e, --maxbytes SIZE      largest size (default 64M; links: the transfer\n"
"                           size, default 64M)\n"
"  -f, --stepfactor N       multiply the size by N each step (default 2)\n"
"  -i, --stepbytes SIZE     add SIZE each step instead\n"
"  -n, --iters N            timed iterations per size, exactly (default 20,\n"
"                           more for small sizes: --min-time; links:\n"
"                           transfers per link, default 3)\n"
"  -w, --warmup_iters N     untimed iterations first (default 5; links 1)\n"
"  -c, --check 0|1          check every result exactly (default 1)\n"
"  -d, --datatype TYPE      f32 (the default, as nccl-tests' float), f64,\n"
"                           i64, i32 or all; nccl-tests' names work too\n"
"  -o, --op OP              sum (default), prod, max, min or all (allreduce)\n"
"  -r, --root RANK          broadcast's root (default 0)\n"
"      --min-time SECONDS   without -n, sizes below 64K run more iterations,\n"
"                           up to 1000, to last this long (default 0.1)\n"
"      --seed N             the inputs' seed (default 1)\n"
"      --min-busbw GBPS[@SIZE]  exit 6 when a row of SIZE or more (default:\n"
"                           the largest size) has a lower busbw; SIZE must\n"
"                           lie within the sweep\n"
"      --threshold FRACTION  links: slow below FRACTION x the median\n"
"                           (default 0.5)\n"
"      --fail-slow          links: exit 6 when a link is slow\n"
"      --csv                CSV on stdout instead of the table\n"
"  -h, --help               this text\n"
"\n"
"With --json: one record a line: header, result (one per row), link,\n"
"summary.  Exit status 1 when an element was wrong, 6 below --min-busbw.\n"
"A row that runs longer than 10 s gets a progress line on stderr.\n"
"\n";

/* Progress lines while a row runs longer than this (nanoseconds). */
#define PROGRESS_EVERY_NS INT64_C(10000000000)

/* One half of a row: out of place or in place. */
struct half {
	struct bench_timing t;
	double algbw, busbw;
	uint64_t wrong;
};

struct row {
	enum bench_coll coll;
	enum sr_dtype dtype;
	enum sr_op op;
	uint32_t root;		/* broadcast's */
	uint64_t size;		/* the sweep's step, before rounding */
	uint64_t count, bytes, iters;
	struct half h[BENCH_PLACE_COUNT];
	double busbw;		/* the lower half's: what --min-busbw checks */
	uint64_t wrong;		/* both halves' */
};

struct sweep {
	struct sr_ring *ring;
	const struct bench_options *o;
	FILE *out;
	char record_why[160];	/* why a row could not be recorded */
	uint32_t rank, world;
	uint8_t *send, *recv;
	uint64_t iters_max;
	uint64_t *ns;		/* this rank's time of each iteration */
	uint8_t *wire;		/* every rank's, little-endian */
	double *times;		/* every rank's, in seconds */
	uint64_t last_size;	/* the sweep's largest step */
	uint64_t rows, wrong, wrong_rows;
	double busbw_sum;	/* both halves of every row */
	struct row *below;	/* rows under --min-busbw */
	size_t nbelow;
	uint64_t gated;		/* rows --min-busbw checked */
	uint64_t gated_min, gated_max;	/* their smallest and largest size */
	struct row lowest;	/* the gated row with the lowest busbw */
	int64_t progress_ns;	/* a progress line after this long */
	int64_t row_start_ns, last_line_ns;
	struct sr_error err;
};

/* --------------------------------------------------------- the options */

static int
parse(int argc, char **argv, struct cli_ring *ring, struct bench_options *o)
{
	static const struct option longopts[] = {
		CLI_RING_LONGOPTS,
		{ "minbytes", required_argument, NULL, 'b' },
		{ "maxbytes", required_argument, NULL, 'e' },
		{ "stepfactor", required_argument, NULL, 'f' },
		{ "stepbytes", required_argument, NULL, 'i' },
		{ "iters", required_argument, NULL, 'n' },
		{ "warmup_iters", required_argument, NULL, 'w' },
		{ "check", required_argument, NULL, 'c' },
		{ "datatype", required_argument, NULL, 'd' },
		{ "op", required_argument, NULL, 'o' },
		{ "root", required_argument, NULL, 'r' },
		{ "csv", no_argument, NULL, BENCH_OPT_CSV },
		{ "min-busbw", required_argument, NULL, BENCH_OPT_MIN_BUSBW },
		{ "seed", required_argument, NULL, BENCH_OPT_SEED },
		{ "threshold", required_argument, NULL, BENCH_OPT_THRESHOLD },
		{ "min-time", required_argument, NULL, BENCH_OPT_MIN_TIME },
		{ "fail-slow", no_argument, NULL, BENCH_OPT_FAIL_SLOW },
		{ "corrupt", required_argument, NULL, BENCH_OPT_CORRUPT },
		{ "help", no_argument, NULL, 'h' },
		{ NULL, 0, NULL, 0 }
	};
	char why[256];
	int c, rc;

	opterr = 0;
	optind = 1;
	while ((c = getopt_long(argc, argv, ":hvb:e:f:i:n:w:c:d:o:r:", longopts,
	    NULL)) != -1) {
		if (c == 'h') {
			fputs(usage_bench, stdout);
			fputs(cli_ring_help, stdout);
			return -1;
		}
		if (c == ':')
			return cli_usage_error("bench: %s needs a value",
			    argv[optind - 1]);
		if (c == '?' && optopt != 0)
			return cli_usage_error("bench: unknown option '-%c'",
			    optopt);
		if (c == '?')
			return cli_usage_error("bench: unknown option '%s'",
			    argv[optind - 1]);
		if ((rc = bench_option_set(o, c, optarg, why,
		    sizeof(why))) < 0)
			return cli_usage_error("bench: %s", why);
		if (rc == 0)
			continue;
		if (cli_ring_option(ring, c, optarg) < 0)
			return EXIT_USAGE;
	}
	if (optind < argc && bench_coll_parse(argv[optind], &o->colls) != 0)
		return cli_usage_error("bench: '%s' is not a benchmark "
		    "(allreduce, allgather, broadcast, links or all)",
		    argv[optind]);
	if (optind + 1 < argc)
		return cli_usage_error("bench: unexpected argument '%s'",
		    argv[optind + 1]);
	o->json = ring->json;
	if (bench_options_check(o, why, sizeof(why)) != 0)
		return cli_usage_error("bench: %s", why);
	return 0;
}

/* ------------------------------------------------------------ output */

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
	fputs("],\"tcp_congestion\":", out);
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

/*
 * nccl-tests' table: size, count, type, redop, root, then time, algbw,
 * busbw and #wrong out of place and in place; ours adds the iterations
 * and, of the out-of-place half, the slowest rank and the spread.
 */
static void
section_text(FILE *out, const struct bench_options *o, enum bench_coll coll)
{
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

static const char *
row_op(const struct row *row)
{
	return row->coll == BENCH_ALLREDUCE ? sr_op_name(row->op) : "none";
}

/* nccl-tests' root column: the root, or -1 where there is none. */
static long
row_root(const struct row *row)
{
	return row->coll == BENCH_BROADCAST ? (long)row->root : -1;
}

/* One half's fields of a result record, each name behind prefix. */
static void
half_json(FILE *out, const struct sweep *s, const struct half *h,
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
half_text(FILE *out, const struct sweep *s, const struct half *h)
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
row_text(FILE *out, const struct sweep *s, const struct row *row)
{
	const struct half *oop = &row->h[BENCH_OUT_OF_PLACE];

	fprintf(out, "  %10llu %12llu %6s %6s %5ld %7llu",
	    (unsigned long long)row->bytes, (unsigned long long)row->count,
	    sr_dtype_name(row->dtype), row_op(row), row_root(row),
	    (unsigned long long)row->iters);
	half_text(out, s, oop);
	half_text(out, s, &row->h[BENCH_IN_PLACE]);
	fprintf(out, " %7u %6.1f\n", oop->t.slowest, oop->t.spread_pct);
}

static void
row_json(FILE *out, const struct sweep *s, const struct row *row)
{
	const struct half *oop = &row->h[BENCH_OUT_OF_PLACE];
	const struct half *ip = &row->h[BENCH_IN_PLACE];

	fputs("{\"type\":\"result\",\"schema\":1,\"collective\":", out);
	json_string(out, bench_coll_name(row->coll));
	fprintf(out, ",\"size\":%llu,\"count\":%llu,\"dtype\":",
	    (unsigned long long)row->bytes, (unsigned long long)row->count);
	json_string(out, sr_dtype_name(row->dtype));
	fputs(",\"op\":", out);
	json_string(out, row_op(row));
	fprintf(out, ",\"world\":%u,\"iters\":%llu", s->world,
	    (unsigned long long)row->iters);
	half_json(out, s, oop, "");
	fprintf(out, ",\"slowest_rank\":%u,\"spread_pct\":", oop->t.slowest);
	json_number(out, oop->t.spread_pct);
	fputs(",\"root\":", out);
	json_number(out, row->coll == BENCH_BROADCAST ? (double)row->root :
	    NAN);
	half_json(out, s, ip, "inplace_");
	fputs("}\n", out);
}

static const char csv_header[] = "collective,size,count,dtype,op,world,"
    "iters,time_us,algbw_gbps,busbw_gbps,wrong,slowest_rank,spread_pct,"
    "root,inplace_time_us,inplace_algbw_gbps,inplace_busbw_gbps,"
    "inplace_wrong\n";

static void
row_csv(FILE *out, const struct sweep *s, const struct row *row)
{
	const struct half *oop = &row->h[BENCH_OUT_OF_PLACE];
	const struct half *ip = &row->h[BENCH_IN_PLACE];

	fprintf(out, "%s,%llu,%llu,%s,%s,%u,%llu,%.3f,%.6f,%.6f,",
	    bench_coll_name(row->coll), (unsigned long long)row->bytes,
	    (unsigned long long)row->count, sr_dtype_name(row->dtype),
	    row_op(row), s->world, (unsigned long long)row->iters,
	    oop->t.time * 1e6, oop->algbw, oop->busbw);
	if (s->o->check)
		fprintf(out, "%llu", (unsigned long long)oop->wrong);
	fprintf(out, ",%u,%.2f,", oop->t.slowest, oop->t.spread_pct);
	if (row->coll == BENCH_BROADCAST)
		fprintf(out, "%u", row->root);
	fprintf(out, ",%.3f,%.6f,%.6f,", ip->t.time * 1e6, ip->algbw,
	    ip->busbw);
	if (s->o->check)
		fprintf(out, "%llu", (unsigned long long)ip->wrong);
	fputs("\n", out);
}

/* ------------------------------------------------------ one collective */

/*
 * Out of place: allreduce and allgather read send and write recv; the
 * broadcast's root sends from send and the others receive into recv.  In
 * place everything happens in recv: allgather's input is this rank's slot
 * of it, as in nccl-tests.
 */
static int
collective(struct sweep *s, const struct row *row, enum bench_place place)
{
	size_t es = sr_dtype_size(row->dtype), per = row->count * es;
	bool in = place == BENCH_IN_PLACE;

	switch (row->coll) {
	case BENCH_ALLREDUCE:
		return sr_allreduce(s->ring, in ? s->recv : s->send, s->recv,
		    row->count, row->dtype, row->op, &s->err);
	case BENCH_ALLGATHER:
		return sr_allgather(s->ring, in ? s->recv + s->rank * per :
		    s->send, per, s->recv, &s->err);
	case BENCH_BROADCAST:
		return sr_broadcast(s->ring, !in && s->rank == row->root ?
		    s->send : s->recv, row->bytes, row->root, &s->err);
	default:
		return 0;
	}
}

/* Rank 0, when a row has run longer than the progress interval since the
 * last line: says which row, how far and for how long. */
static void
progress(struct sweep *s, const struct row *row, const char *what,
    uint64_t done, uint64_t of)
{
	int64_t now;
	char size[32];

	if (s->rank != 0)
		return;
	now = sr_clock_ns();
	if (now - s->last_line_ns < s->progress_ns)
		return;
	s->last_line_ns = now;
	cli_error("bench: still running %s %s%s%s of %s: %s %llu of %llu, "
	    "%.1f s on this row", bench_coll_name(row->coll),
	    sr_dtype_name(row->dtype), row->coll == BENCH_ALLREDUCE ? " " : "",
	    row->coll == BENCH_ALLREDUCE ? sr_op_name(row->op) : "",
	    bench_size_format(row->bytes, size, sizeof(size)), what,
	    (unsigned long long)done, (unsigned long long)of,
	    (double)(now - s->row_start_ns) / 1e9);
}

/* A barrier, then one collective; its time in nanoseconds. */
static int
timed(struct sweep *s, const struct row *row, enum bench_place place,
    uint64_t *ns)
{
	int64_t t0;

	if (sr_barrier(s->ring, &s->err) != 0)
		return -1;
	t0 = sr_clock_ns();
	if (collective(s, row, place) != 0)
		return -1;
	*ns = (uint64_t)(sr_clock_ns() - t0);
	return 0;
}

/* The inputs of one half, where collective() reads them. */
static void
fill_inputs(struct sweep *s, const struct row *row, enum bench_place place)
{
	size_t es = sr_dtype_size(row->dtype), per = row->count * es;
	bool in = place == BENCH_IN_PLACE;

	if (row->coll == BENCH_ALLREDUCE)
		bench_fill_op(in ? s->recv : s->send, row->count, row->dtype,
		    row->op, s->o->seed, s->rank);
	else if (row->coll == BENCH_ALLGATHER)
		bench_fill_bytes(in ? s->recv + s->rank * per : s->send, per,
		    s->o->seed, s->rank);
	else if (s->rank == row->root)
		bench_fill_bytes(in ? s->recv : s->send, row->bytes,
		    s->o->seed, row->root);
	else
		bench_poison_bytes(s->recv, row->bytes, s->o->seed, row->root);
}

/*
 * The warm-up, then the iteration count: -n when given, else for a small
 * row what rank 0 found fills --min-time, broadcast so every rank runs as
 * many.
 */
static int
warm_up(struct sweep *s, struct row *row)
{
	uint64_t ns, total = 0, n = s->o->warmup;
	uint8_t word[8];

	for (uint64_t i = 0; i < n; i++) {
		if (timed(s, row, BENCH_OUT_OF_PLACE, &ns) != 0)
			return -1;
		total += ns;
		progress(s, row, "warm-up iteration", i + 1, n);
	}
	row->iters = s->o->iters;
	if (s->o->iters_set || !bench_adapts(row->bytes, s->o->min_time))
		return 0;
	if (n == 0) {
		if (timed(s, row, BENCH_OUT_OF_PLACE, &total) != 0)
			return -1;
		n = 1;
	}
	bench_put_u64le(word, bench_adapt_iters(row->bytes, s->o->iters,
	    s->o->min_time, (double)total / (double)n / 1e9));
	if (sr_broadcast(s->ring, word, sizeof(word), 0, &s->err) != 0)
		return -1;
	row->iters = bench_get_u64le(word);
	if (row->iters == 0 || row->iters > s->iters_max) {
		sr_error_clear(&s->err);
		s->err.rank = s->rank;
		sr_error_set(&s->err, SR_EOUT_OF_STEP, SR_PHASE_COLLECTIVE,
		    "rank 0 asked for %llu iterations (at most %llu)",
		    (unsigned long long)row->iters,
		    (unsigned long long)s->iters_max);
		sr_ring_abort(s->ring, &s->err);
		return -1;
	}
	return 0;
}

/* The timed iterations of one half, then every rank's times on every
 * rank. */
static int
measure(struct sweep *s, struct row *row, enum bench_place place)
{
	struct half *h = &row->h[place];
	uint64_t n = row->iters;

	for (uint64_t i = 0; i < n; i++) {
		if (timed(s, row, place, &s->ns[i]) != 0)
			return -1;
		progress(s, row, place == BENCH_IN_PLACE ? "in-place "
		    "iteration" : "out-of-place iteration", i + 1, n);
	}
	for (uint64_t i = 0; i < n; i++)
		bench_put_u64le(s->wire + s->rank * n * 8 + i * 8, s->ns[i]);
	if (sr_allgather(s->ring, s->wire + s->rank * n * 8, n * 8, s->wire,
	    &s->err) != 0)
		return -1;
	for (uint64_t i = 0; i < s->world * n; i++)
		s->times[i] = (double)bench_get_u64le(s->wire + i * 8) / 1e9;
	bench_timing_summarize(s->times, s->world, n, &h->t);
	h->algbw = bench_algbw(row->bytes, h->t.time);
	h->busbw = bench_busbw(row->coll, row->bytes, h->t.time, s->world);
	return 0;
}

static void
report_mismatch(const struct sweep *s, const struct row *row,
    enum bench_place place, uint64_t wrong, const struct bench_mismatch *m)
{
	char byte[32] = "";

	if (row->coll != BENCH_ALLREDUCE)
		snprintf(byte, sizeof(byte), " (byte %llu)",
		    (unsigned long long)m->byte);
	cli_error("check failed: %s %s%s%s of %llu B%s: element %llu%s is %s, "
	    "expected %s (%llu wrong on this rank)", bench_coll_name(row->coll),
	    sr_dtype_name(row->dtype), row->coll == BENCH_ALLREDUCE ? " " : "",
	    row->coll == BENCH_ALLREDUCE ? sr_op_name(row->op) : "",
	    (unsigned long long)row->bytes, place == BENCH_IN_PLACE ?
	    " in place" : "", (unsigned long long)m->element, byte, m->got,
	    m->expected, (unsigned long long)wrong);
}

/* This rank's wrong elements of one collective of one half on fresh
 * inputs. */
static uint64_t
check_local(struct sweep *s, const struct row *row, enum bench_place place,
    int *rc)
{
	size_t es = sr_dtype_size(row->dtype);
	uint64_t seed = s->o->seed, per = row->count * es, wrong, elements;
	struct bench_expect e;
	struct bench_mismatch m;
	bool in = place == BENCH_IN_PLACE;
	/* Out of place the broadcast's root keeps its input where it was. */
	uint8_t *result = row->coll == BENCH_BROADCAST && !in &&
	    s->rank == row->root ? s->send : s->recv;

	if (row->coll == BENCH_ALLREDUCE && !in)
		memset(s->recv, 0x7f, row->bytes);
	else if (row->coll == BENCH_ALLGATHER)
		for (uint32_t r = 0; r < s->world; r++)
			bench_poison_bytes(s->recv + r * per, per, seed, r);
	fill_inputs(s, row, place);
	if ((*rc = collective(s, row, place)) != 0)
		return 0;
	elements = row->bytes / es;
	/* The test hook spoils the out-of-place half only. */
	if (s->o->corrupt && !in && s->o->corrupt_rank == s->rank &&
	    s->o->corrupt_index < elements)
		bench_corrupt_element(result, s->o->corrupt_index, es);
	if (row->coll == BENCH_ALLREDUCE) {
		bench_expect_init(&e, seed, row->op, s->world);
		wrong = bench_check_reduce(result, row->count, row->dtype, &e,
		    &m);
	} else if (row->coll == BENCH_ALLGATHER) {
		wrong = bench_check_bytes(result, per, s->world, 0, es, seed,
		    &m);
	} else {
		wrong = bench_check_bytes(result, row->bytes, 1, row->root, es,
		    seed, &m);
	}
	if (wrong > 0)
		report_mismatch(s, row, place, wrong, &m);
	return wrong;
}

static int
check(struct sweep *s, struct row *row, enum bench_place place)
{
	uint64_t wrong;
	int rc;

	row->h[place].wrong = 0;
	if (!s->o->check)
		return 0;
	wrong = check_local(s, row, place, &rc);
	if (rc != 0)
		return -1;
	if (sr_allreduce(s->ring, &wrong, &row->h[place].wrong, 1, SR_U64,
	    SR_SUM, &s->err) != 0)
		return -1;
	return 0;
}

/* ------------------------------------------------------------ the rows */

/* What --min-busbw checked: how many rows, their sizes, the lowest. */
static void
gate_note(struct sweep *s, const struct row *row)
{
	if (!s->o->min_busbw_set || !bench_gated(s->o, row->size,
	    s->last_size))
		return;
	if (s->gated == 0 || row->bytes < s->gated_min)
		s->gated_min = row->bytes;
	if (s->gated == 0 || row->bytes > s->gated_max)
		s->gated_max = row->bytes;
	if (s->gated == 0 || row->busbw < s->lowest.busbw)
		s->lowest = *row;
	s->gated++;
}

static int
record(struct sweep *s, const struct row *row)
{
	struct row *grown;

	s->rows++;
	for (int p = 0; p < BENCH_PLACE_COUNT; p++)
		s->busbw_sum += row->h[p].busbw;
	s->wrong += row->wrong;
	s->wrong_rows += row->wrong > 0;
	gate_note(s, row);
	if (bench_below_min(s->o, row->size, s->last_size, row->busbw)) {
		grown = realloc(s->below, (s->nbelow + 1) * sizeof(*grown));
		if (grown == NULL) {
			snprintf(s->record_why, sizeof(s->record_why),
			    "out of memory");
			return -1;
		}
		s->below = grown;
		s->below[s->nbelow++] = *row;
	}
	if (s->rank != 0)
		return 0;
	if (s->o->json)
		row_json(s->out, s, row);
	else if (s->o->csv)
		row_csv(s->out, s, row);
	else
		row_text(s->out, s, row);
	/* Nobody reads the results any more (| head): stop now, not after
	 * the whole sweep. */
	if (fflush(s->out) != 0 || ferror(s->out)) {
		snprintf(s->record_why, sizeof(s->record_why), "writing the "
		    "results: %s", strerror(errno));
		return -1;
	}
	s->last_line_ns = sr_clock_ns();
	return 0;
}

/* One size: out of place, then in place with as many iterations. */
static int
run_row(struct sweep *s, struct row *row)
{
	uint64_t ns;

	cli_debug("%s %s %s %llu B", bench_coll_name(row->coll),
	    sr_dtype_name(row->dtype), row_op(row),
	    (unsigned long long)row->bytes);
	s->row_start_ns = sr_clock_ns();
	fill_inputs(s, row, BENCH_OUT_OF_PLACE);
	if (warm_up(s, row) != 0 || measure(s, row, BENCH_OUT_OF_PLACE) != 0 ||
	    check(s, row, BENCH_OUT_OF_PLACE) != 0)
		return -1;
	fill_inputs(s, row, BENCH_IN_PLACE);
	for (uint64_t i = 0; i < s->o->warmup; i++)
		if (timed(s, row, BENCH_IN_PLACE, &ns) != 0)
			return -1;
	if (measure(s, row, BENCH_IN_PLACE) != 0 ||
	    check(s, row, BENCH_IN_PLACE) != 0)
		return -1;
	row->busbw = fmin(row->h[BENCH_OUT_OF_PLACE].busbw,
	    row->h[BENCH_IN_PLACE].busbw);
	row->wrong = row->h[BENCH_OUT_OF_PLACE].wrong +
	    row->h[BENCH_IN_PLACE].wrong;
	if (record(s, row) != 0) {
		/* Only this rank knows: tell the others why it stops. */
		sr_error_clear(&s->err);
		s->err.rank = s->rank;
		sr_error_set(&s->err, SR_ENOMEM, SR_PHASE_COLLECTIVE, "%s",
		    s->record_why);
		sr_ring_abort(s->ring, &s->err);
		return -1;
	}
	return 0;
}

/* Every size of one collective, dtype and op. */
static int
run_sizes(struct sweep *s, enum bench_coll coll, enum sr_dtype dtype,
    enum sr_op op, uint64_t *rows, double *busbw, uint64_t *wrong)
{
	const struct bench_options *o = s->o;
	size_t es = sr_dtype_size(dtype);
	uint64_t last = 0;

	for (uint64_t size = o->minbytes; size != 0;
	    size = bench_next_size(size, o->maxbytes, o->stepfactor,
	    o->stepbytes)) {
		struct row row = { .coll = coll, .dtype = dtype, .op = op,
			.root = o->root, .size = size };

		row.count = bench_count(coll, size, es, s->world);
		row.bytes = bench_row_bytes(coll, row.count, es, s->world);
		/* Sizes too small for an element per rank, and sizes that
		 * round to the row before, are left out. */
		if (row.count == 0 || row.bytes == last)
			continue;
		last = row.bytes;
		if (run_row(s, &row) != 0)
			return -1;
		(*rows)++;
		*busbw += row.h[BENCH_OUT_OF_PLACE].busbw +
		    row.h[BENCH_IN_PLACE].busbw;
		*wrong += row.wrong;
	}
	return 0;
}

/* nccl-tests' closing lines, in its order, after each collective's rows. */
static void
closing_text(FILE *out, const struct sweep *s, uint64_t rows, double busbw,
    uint64_t wrong)
{
	if (s->o->check)
		fprintf(out, "# Out of bounds values : %llu %s\n",
		    (unsigned long long)wrong, wrong ? "FAILED" : "OK");
	else
		fputs("# Out of bounds values : N/A (-c 0)\n", out);
	/* Both halves of every row, as nccl-tests averages them. */
	fprintf(out, "# Avg bus bandwidth    : %g GB/s\n#\n",
	    rows ? busbw / (double)(rows * BENCH_PLACE_COUNT) : 0.0);
}

static int
run_collective(struct sweep *s, enum bench_coll coll)
{
	uint64_t rows = 0, wrong = 0;
	double busbw = 0;

	if (s->rank == 0 && !s->o->json && !s->o->csv)
		section_text(s->out, s->o, coll);
	for (int d = 0; d < SR_DTYPE_COUNT; d++) {
		if (!(s->o->dtypes & 1u << d))
			continue;
		for (int op = 0; op < SR_OP_COUNT; op++) {
			if (!(s->o->ops & 1u << op))
				continue;
			if (run_sizes(s, coll, (enum sr_dtype)d, (enum sr_op)op,
			    &rows, &busbw, &wrong) != 0)
				return -1;
			/* Only allreduce has an op. */
			if (coll != BENCH_ALLREDUCE)
				break;
		}
	}
	if (s->rank == 0 && !s->o->json && !s->o->csv)
		closing_text(s->out, s, rows, busbw, wrong);
	return 0;
}

/* ----------------------------------------------------- set-up and end */

/*
 * Every rank allocates its buffers, then they agree: one rank without
 * memory fails them all instead of leaving them waiting for it.
 */
static int
allocate(struct sweep *s)
{
	const struct bench_options *o = s->o;
	uint64_t bytes = 0, failed, any;

	if (o->colls & ((1u << BENCH_LINKS) - 1))
		bytes = o->maxbytes;
	s->iters_max = o->iters;
	if (o->min_time > 0 && !o->iters_set && s->iters_max < BENCH_ADAPT_MAX)
		s->iters_max = BENCH_ADAPT_MAX;
	if (bytes < SIZE_MAX) {
		s->send = malloc(bytes ? (size_t)bytes : 1);
		s->recv = malloc(bytes ? (size_t)bytes : 1);
	}
	s->ns = calloc(s->iters_max, sizeof(*s->ns));
	/* calloc checks world * iters_max * 8 for overflow. */
	s->wire = calloc((size_t)s->world * s->iters_max, 8);
	s->times = calloc((size_t)s->world * s->iters_max, sizeof(*s->times));
	failed = s->send == NULL || s->recv == NULL || s->ns == NULL ||
	    s->wire == NULL || s->times == NULL ? s->rank + 1 : 0;
	if (failed)
		cli_error("out of memory allocating two buffers of %llu bytes",
		    (unsigned long long)bytes);
	if (sr_allreduce(s->ring, &failed, &any, 1, SR_U64, SR_MAX,
	    &s->err) != 0)
		return cli_report(&s->err, o->json);
	if (any && !failed)
		cli_error("rank %llu could not allocate its buffers",
		    (unsigned long long)any - 1);
	return any ? EXIT_INTERNAL : EXIT_OK;
}

/* Every rank must have been given the same bench options: the largest
 * digest and the complement of the smallest must agree. */
static int
agree(struct sweep *s)
{
	uint64_t mine = bench_options_digest(s->o), r[2];
	uint64_t v[2] = { mine, ~mine };

	if (sr_allreduce(s->ring, v, r, 2, SR_U64, SR_MAX, &s->err) != 0)
		return cli_report(&s->err, s->o->json);
	if (r[0] == ~r[1])
		return EXIT_OK;
	cli_error("the ranks were given different bench options (this rank's "
	    "digest %016llx); every rank needs the same ones",
	    (unsigned long long)mine);
	return EXIT_USAGE;
}

/* Names the rows under --min-busbw, on rank 0. */
static void
report_below(const struct sweep *s)
{
	char list[1024], size[32];
	size_t n = 0;

	list[0] = '\0';
	for (size_t i = 0; i < s->nbelow && i < BELOW_NAMED; i++) {
		const struct row *r = &s->below[i];

		bench_size_format(r->bytes, size, sizeof(size));
		n += (size_t)snprintf(list + n, sizeof(list) - n, "%s%s %s%s%s "
		    "at %s (%.3f GB/s)", i ? ", " : "",
		    bench_coll_name(r->coll), sr_dtype_name(r->dtype),
		    r->coll == BENCH_ALLREDUCE ? " " : "",
		    r->coll == BENCH_ALLREDUCE ? sr_op_name(r->op) : "", size,
		    r->busbw);
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
gate_json(FILE *out, const struct sweep *s)
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
	    sr_dtype_name(s->lowest.dtype), row_op(&s->lowest));
	json_number(out, s->lowest.busbw);
	fputs("}", out);
}

static void
summary_json(FILE *out, const struct sweep *s,
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
			    row_op(&s->below[i]));
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
gate_text(FILE *out, const struct sweep *s)
{
	char from[32], to[32], at[32];
	const struct row *r = &s->lowest;

	if (s->gated == 0) {
		fprintf(out, "# --min-busbw %.15g GB/s: no row checked: "
		    "FAILED\n", s->o->min_busbw);
		return;
	}
	bench_size_format(s->gated_min, from, sizeof(from));
	bench_size_format(s->gated_max, to, sizeof(to));
	bench_size_format(r->bytes, at, sizeof(at));
	fprintf(out, "# --min-busbw %.15g GB/s: %llu row(s) of %s%s%s "
	    "checked, lowest busbw %.3f GB/s (%s %s%s%s at %s): %s\n",
	    s->o->min_busbw, (unsigned long long)s->gated, from,
	    s->gated_min != s->gated_max ? " to " : "",
	    s->gated_min != s->gated_max ? to : "", r->busbw,
	    bench_coll_name(r->coll), sr_dtype_name(r->dtype),
	    r->coll == BENCH_ALLREDUCE ? " " : "",
	    r->coll == BENCH_ALLREDUCE ? sr_op_name(r->op) : "", at,
	    s->nbelow ? "FAILED" : "passed");
}

static void
footer_text(FILE *out, const struct sweep *s)
{
	if (s->o->min_busbw_set)
		gate_text(out, s);
	fprintf(out, "# check: %s\n", !s->o->check ? "off" : s->wrong ?
	    "FAILED" : "passed");
}

/* The exit status of a sweep (and link test) that ran to its end. */
static int
verdict(struct sweep *s, const struct bench_links_result *links)
{
	int status = EXIT_OK;

	if (s->o->check && s->wrong > 0)
		status = EXIT_CHECK;
	else if (s->o->min_busbw_set && s->gated == 0)
		status = EXIT_USAGE;
	else if (s->nbelow > 0 || (s->o->fail_slow && links->nslow > 0))
		status = EXIT_THRESHOLD;
	if (s->rank != 0)
		return status;
	if (s->o->check && s->wrong > 0)
		cli_error("check failed: %llu wrong element(s) in %llu row(s)",
		    (unsigned long long)s->wrong,
		    (unsigned long long)s->wrong_rows);
	if (s->o->min_busbw_set && s->gated == 0)
		cli_error("--min-busbw checked no row: the sweep's rows of that "
		    "size were all left out (too small for an element per "
		    "rank)");
	if (s->nbelow > 0)
		report_below(s);
	if (s->o->fail_slow && links->nslow > 0)
		cli_error("%zu slow link(s) (--fail-slow)", links->nslow);
	if (s->o->json)
		summary_json(s->out, s, links, status);
	else if (!s->o->csv && s->rows > 0)
		footer_text(s->out, s);
	return status;
}

/* The sweeps and the link test in order; the exit status. */
static int
bench(struct sweep *s, char **addresses)
{
	struct bench_links_result links;
	const struct bench_options *o = s->o;
	int rc;

	memset(&links, 0, sizeof(links));
	if ((rc = agree(s)) != EXIT_OK || (rc = allocate(s)) != EXIT_OK)
		return rc;
	for (uint64_t z = o->minbytes; z != 0; z = bench_next_size(z,
	    o->maxbytes, o->stepfactor, o->stepbytes))
		s->last_size = z;
	if (s->rank == 0) {
		if (o->json)
			header_json(s->out, o, addresses, s->world,
			    sr_ring_congestion(s->ring));
		else if (!o->csv)
			header_text(s->out, o, addresses, s->world,
			    sr_ring_congestion(s->ring));
		else if (o->colls & ((1u << BENCH_LINKS) - 1))
			fputs(csv_header, s->out);
		fflush(s->out);
	}
	for (int c = 0; c < BENCH_LINKS; c++)
		if ((o->colls & 1u << c) &&
		    run_collective(s, (enum bench_coll)c) != 0)
			return cli_report(&s->err, o->json);
	if (o->colls & 1u << BENCH_LINKS) {
		if (s->rank == 0 && o->csv && s->rows > 0)
			fputs("\n", s->out);
		rc = bench_links_run(s->ring, addresses, o, s->out, &links);
		if (rc != EXIT_OK) {
			free(links.slow);
			return rc;
		}
	}
	rc = verdict(s, &links);
	free(links.slow);
	return rc;
}

/* How long a row may run before rank 0 says it is still alive. */
static int64_t
progress_interval(void)
{
	double seconds;

	if (discover_progress_interval(&seconds) == 0)
		return (int64_t)(seconds * 1e9);
	return PROGRESS_EVERY_NS;
}

int
cmd_bench(int argc, char **argv)
{
	struct cli_ring ropts;
	struct bench_options o;
	struct sweep s;
	char **addresses = NULL;
	uint64_t world = 0;
	int rc;

	cli_ring_init(&ropts);
	bench_options_init(&o);
	if ((rc = parse(argc, argv, &ropts, &o)) != 0)
		return rc < 0 ? EXIT_OK : rc;
	if (cli_preflight_stop(&ropts, o.csv, ""))
		return EXIT_OK;
	cli_signals_install();
	memset(&s, 0, sizeof(s));
	rc = cli_ring_open(&ropts, &s.ring, &addresses, &world);
	if (rc != EXIT_OK || s.ring == NULL)
		return rc;
	s.o = &o;
	s.out = stdout;
	s.rank = sr_ring_rank(s.ring);
	s.world = sr_ring_world(s.ring);
	s.progress_ns = progress_interval();
	s.last_line_ns = sr_clock_ns();
	if (o.corrupt && o.corrupt_rank >= s.world)
		rc = cli_usage_error("bench: --corrupt rank %u is out of range "
		    "for a world of %u", o.corrupt_rank, s.world);
	else if ((o.colls & 1u << BENCH_BROADCAST) && o.root >= s.world)
		rc = cli_usage_error("bench: --root %u is out of range for a "
		    "world of %u", o.root, s.world);
	else
		rc = bench(&s, addresses);
	/* Closing is a collective too: a rank that ran another sweep fails
	 * every rank, rather than each passing on its own. */
	if (rc == EXIT_OK || rc == EXIT_THRESHOLD) {
		struct sr_error err;

		if (sr_ring_finish(s.ring, &err) != 0)
			rc = cli_report(&err, o.json);
	}
	sr_ring_close(s.ring);
	free(s.send);
	free(s.recv);
	free(s.ns);
	free(s.wire);
	free(s.times);
	free(s.below);
	cli_addresses_free(addresses, world);
	if (fflush(stdout) != 0 && rc == EXIT_OK) {
		cli_error("writing the results: %s", strerror(errno));
		rc = EXIT_INTERNAL;
	}
	return rc;
}
