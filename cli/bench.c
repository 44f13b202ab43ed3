/*
 * bench.c - `silvic-ring bench`: its options, then nccl-tests-style
 * sweeps of allreduce, allgather and broadcast over a range of sizes,
 * each size out of place then in place, with an exact check of every
 * result, then the link test (bench_links.c), and the exit status.  The
 * table, CSV and JSON the sweep writes are bench_out.c's.
 *
 * Every rank parses the same options and so walks the same sizes, dtypes
 * and ops; they check that first by comparing a digest of the options.
 * Iteration counts that adapt to the speed of small rows are decided by
 * rank 0 and broadcast.  Only rank 0 writes to stdout; every rank reports
 * its own errors and its own first wrong element on stderr.
 *
 * With --group (on a mesh) the sweeps run on a group of the ranks: its
 * members measure and check each row among themselves, as the ring would
 * (member indexes standing for ranks, the group's size for the world),
 * then its first member broadcasts the row to every rank, so the others
 * wait in that broadcast, rank 0 writes the row, and every rank reaches
 * the same verdict.
 */
#include <errno.h>
#include <getopt.h>
#include <math.h>
#include <stdlib.h>
#include <string.h>

#include "cli.h"
#include "bench_connect.h"
#include "bench_data.h"
#include "bench_out.h"
#include "discover.h"
#include "rank_list.h"
#include "usage.h"

const char usage_bench[] =
"usage: silvic-ring bench [allreduce|allgather|broadcast|links|all] [OPTIONS]\n"
"       silvic-ring bench connect [OPTIONS]   (see bench connect --help)\n"
"       silvic-ring bench pairs [OPTIONS]     (see bench pairs --help)\n"
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
"      --group RANKS        run the sweeps on these ranks only (\"0,2-3\", in\n"
"                           member order; needs --mesh): the others wait,\n"
"                           busbw is for the group's size, and -r names a\n"
"                           rank of the group (default its first)\n"
"      --csv                CSV on stdout instead of the table\n"
"  -h, --help               this text\n"
"\n"
"With --json: one record a line: header, result (one per row), link,\n"
"summary.  Exit status 1 when an element was wrong, 6 below --min-busbw.\n"
"A row that runs longer than 10 s gets a progress line on stderr.\n"
"\n";

/* Progress lines while a row runs longer than this (nanoseconds). */
#define PROGRESS_EVERY_NS INT64_C(10000000000)

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
		{ "group", required_argument, NULL, BENCH_OPT_GROUP },
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
	if (optind < argc && (strcmp(argv[optind], "connect") == 0 ||
	    strcmp(argv[optind], "pairs") == 0))
		return cli_usage_error("bench: '%s' comes first, before the "
		    "options: silvic-ring bench %s [OPTIONS]", argv[optind],
		    argv[optind]);
	if (optind < argc && bench_coll_parse(argv[optind], &o->colls) != 0)
		return cli_usage_error("bench: '%s' is not a benchmark "
		    "(allreduce, allgather, broadcast, links, all, connect or "
		    "pairs)", argv[optind]);
	if (optind + 1 < argc)
		return cli_usage_error("bench: unexpected argument '%s'",
		    argv[optind + 1]);
	o->json = ring->json;
	if (bench_options_check(o, why, sizeof(why)) != 0)
		return cli_usage_error("bench: %s", why);
	if (o->group != NULL && !ring->mesh)
		return cli_usage_error("bench: --group needs a mesh (a link "
		    "between every pair of ranks): give every rank --mesh");
	return 0;
}

/* ------------------------------------------------------ one collective */

/*
 * Out of place: allreduce and allgather read send and write recv; the
 * broadcast's root sends from send and the others receive into recv.  In
 * place everything happens in recv: allgather's input is this rank's slot
 * of it, as in nccl-tests.
 */
static int
collective(struct bench_sweep *s, const struct bench_row *row,
    enum bench_place place)
{
	size_t es = sr_dtype_size(row->dtype), per = row->count * es;
	bool in = place == BENCH_IN_PLACE;
	const uint8_t *send = in ? s->recv : s->send;
	uint8_t *buf = !in && s->rank == row->root ? s->send : s->recv;

	if (row->coll == BENCH_ALLGATHER && in)
		send = s->recv + s->rank * per;
	if (s->group != NULL && row->coll == BENCH_ALLREDUCE)
		return sr_group_allreduce(s->group, send, s->recv, row->count,
		    row->dtype, row->op, &s->err);
	if (s->group != NULL && row->coll == BENCH_ALLGATHER)
		return sr_group_allgather(s->group, send, per, s->recv,
		    &s->err);
	if (s->group != NULL)
		return sr_group_broadcast(s->group, buf, row->bytes, row->root,
		    &s->err);
	switch (row->coll) {
	case BENCH_ALLREDUCE:
		return sr_allreduce(s->ring, send, s->recv, row->count,
		    row->dtype, row->op, &s->err);
	case BENCH_ALLGATHER:
		return sr_allgather(s->ring, send, per, s->recv, &s->err);
	case BENCH_BROADCAST:
		return sr_broadcast(s->ring, buf, row->bytes, row->root,
		    &s->err);
	default:
		return 0;
	}
}

/* The sweep's barrier and small broadcasts: on its group, or the ring. */
static int
barrier(struct bench_sweep *s)
{
	return s->group != NULL ? sr_group_barrier(s->group, &s->err) :
	    sr_barrier(s->ring, &s->err);
}

static int
broadcast(struct bench_sweep *s, void *buf, size_t bytes, uint32_t root)
{
	return s->group != NULL ? sr_group_broadcast(s->group, buf, bytes, root,
	    &s->err) : sr_broadcast(s->ring, buf, bytes, root, &s->err);
}

/* Rank 0, when a row has run longer than the progress interval since the
 * last line: says which row, how far and for how long. */
static void
progress(struct bench_sweep *s, const struct bench_row *row, const char *what,
    uint64_t done, uint64_t of)
{
	int64_t now;
	char size[32], label[32];

	if (s->rank != 0)
		return;
	now = sr_clock_ns();
	if (now - s->last_line_ns < s->progress_ns)
		return;
	s->last_line_ns = now;
	cli_error("bench: still running %s of %s: %s %llu of %llu, %.1f s on "
	    "this row", bench_row_label(row, label, sizeof(label)),
	    bench_size_format(row->bytes, size, sizeof(size)), what,
	    (unsigned long long)done, (unsigned long long)of,
	    (double)(now - s->row_start_ns) / 1e9);
}

/* A barrier, then one collective; its time in nanoseconds. */
static int
timed(struct bench_sweep *s, const struct bench_row *row,
    enum bench_place place, uint64_t *ns)
{
	int64_t t0;

	if (barrier(s) != 0)
		return -1;
	t0 = sr_clock_ns();
	if (collective(s, row, place) != 0)
		return -1;
	*ns = (uint64_t)(sr_clock_ns() - t0);
	return 0;
}

/* The inputs of one half, where collective() reads them. */
static void
fill_inputs(struct bench_sweep *s, const struct bench_row *row,
    enum bench_place place)
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
warm_up(struct bench_sweep *s, struct bench_row *row)
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
	if (broadcast(s, word, sizeof(word), 0) != 0)
		return -1;
	row->iters = bench_get_u64le(word);
	if (row->iters == 0 || row->iters > s->iters_max) {
		sr_error_clear(&s->err);
		s->err.rank = s->ring_rank;
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
measure(struct bench_sweep *s, struct bench_row *row, enum bench_place place)
{
	struct bench_half *h = &row->h[place];
	uint64_t n = row->iters;

	for (uint64_t i = 0; i < n; i++) {
		if (timed(s, row, place, &s->ns[i]) != 0)
			return -1;
		progress(s, row, place == BENCH_IN_PLACE ? "in-place "
		    "iteration" : "out-of-place iteration", i + 1, n);
	}
	for (uint64_t i = 0; i < n; i++)
		bench_put_u64le(s->wire + s->rank * n * 8 + i * 8, s->ns[i]);
	if ((s->group != NULL ? sr_group_allgather(s->group, s->wire +
	    s->rank * n * 8, n * 8, s->wire, &s->err) : sr_allgather(s->ring,
	    s->wire + s->rank * n * 8, n * 8, s->wire, &s->err)) != 0)
		return -1;
	for (uint64_t i = 0; i < s->world * n; i++)
		s->times[i] = (double)bench_get_u64le(s->wire + i * 8) / 1e9;
	bench_timing_summarize(s->times, s->world, n, &h->t);
	/* The slowest member, as a rank. */
	if (s->ranks != NULL)
		h->t.slowest = s->ranks[h->t.slowest];
	h->algbw = bench_algbw(row->bytes, h->t.time);
	h->busbw = bench_busbw(row->coll, row->bytes, h->t.time, s->world);
	return 0;
}

static void
report_mismatch(const struct bench_sweep *s, const struct bench_row *row,
    enum bench_place place, uint64_t wrong, const struct bench_mismatch *m)
{
	char byte[32] = "", label[32];

	if (row->coll != BENCH_ALLREDUCE)
		snprintf(byte, sizeof(byte), " (byte %llu)",
		    (unsigned long long)m->byte);
	cli_error("check failed: %s of %llu B%s: element %llu%s is %s, "
	    "expected %s (%llu wrong on this rank)", bench_row_label(row, label,
	    sizeof(label)), (unsigned long long)row->bytes, place ==
	    BENCH_IN_PLACE ?
	    " in place" : "", (unsigned long long)m->element, byte, m->got,
	    m->expected, (unsigned long long)wrong);
}

/* This rank's wrong elements of one collective of one half on fresh
 * inputs. */
static uint64_t
check_local(struct bench_sweep *s, const struct bench_row *row,
    enum bench_place place, int *rc)
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
	if (s->o->corrupt && !in && s->o->corrupt_rank == s->ring_rank &&
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
check(struct bench_sweep *s, struct bench_row *row, enum bench_place place)
{
	uint64_t wrong;
	int rc;

	row->h[place].wrong = 0;
	if (!s->o->check)
		return 0;
	wrong = check_local(s, row, place, &rc);
	if (rc != 0)
		return -1;
	if ((s->group != NULL ? sr_group_allreduce(s->group, &wrong,
	    &row->h[place].wrong, 1, SR_U64, SR_SUM, &s->err) :
	    sr_allreduce(s->ring, &wrong, &row->h[place].wrong, 1, SR_U64,
	    SR_SUM, &s->err)) != 0)
		return -1;
	return 0;
}

/* ------------------------------------------------------------ the rows */

/* What --min-busbw checked: how many rows, their sizes, the lowest. */
static void
gate_note(struct bench_sweep *s, const struct bench_row *row)
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
record(struct bench_sweep *s, const struct bench_row *row)
{
	struct bench_row *grown;

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
	if (s->ring_rank != 0)
		return 0;
	bench_row_write(s->out, s, row);
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

/* The numbers of a row measured on a group, as 8-byte words: its
 * iterations, then each half's time, slowest rank, spread, algbw, busbw
 * and wrong elements. */
#define ROW_WORDS (1 + 6 * BENCH_PLACE_COUNT)

static uint64_t
double_bits(double v)
{
	uint64_t u;

	memcpy(&u, &v, sizeof(u));
	return u;
}

static double
bits_double(uint64_t u)
{
	double v;

	memcpy(&v, &u, sizeof(v));
	return v;
}

/*
 * A group's row, from its first member to every rank: the others wait
 * here while the group measures, and everyone then records the same row.
 */
static int
share_row(struct bench_sweep *s, struct bench_row *row)
{
	uint8_t words[ROW_WORDS * 8];
	uint64_t v[ROW_WORDS], *w = v;
	int k = 0;

	v[k++] = row->iters;
	for (int p = 0; p < BENCH_PLACE_COUNT; p++) {
		const struct bench_half *h = &row->h[p];

		v[k++] = double_bits(h->t.time);
		v[k++] = h->t.slowest;
		v[k++] = double_bits(h->t.spread_pct);
		v[k++] = double_bits(h->algbw);
		v[k++] = double_bits(h->busbw);
		v[k++] = h->wrong;
	}
	for (k = 0; k < ROW_WORDS; k++)
		bench_put_u64le(words + 8 * k, v[k]);
	if (sr_broadcast(s->ring, words, sizeof(words), s->o->group[0],
	    &s->err) != 0)
		return -1;
	for (k = 0; k < ROW_WORDS; k++)
		v[k] = bench_get_u64le(words + 8 * k);
	row->iters = *w++;
	for (int p = 0; p < BENCH_PLACE_COUNT; p++) {
		struct bench_half *h = &row->h[p];

		h->t.time = bits_double(*w++);
		h->t.slowest = (uint32_t)*w++;
		h->t.spread_pct = bits_double(*w++);
		h->algbw = bits_double(*w++);
		h->busbw = bits_double(*w++);
		h->wrong = *w++;
	}
	return 0;
}

/* One size, measured: out of place, then in place with as many
 * iterations. */
static int
measure_row(struct bench_sweep *s, struct bench_row *row)
{
	uint64_t ns;

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
	return 0;
}

/* One size: measured (by the group's members, with --group, and shared
 * with every rank), then recorded. */
static int
run_row(struct bench_sweep *s, struct bench_row *row)
{
	cli_debug("%s %s %s %llu B", bench_coll_name(row->coll),
	    sr_dtype_name(row->dtype), bench_row_op(row),
	    (unsigned long long)row->bytes);
	s->row_start_ns = sr_clock_ns();
	if (s->member && measure_row(s, row) != 0)
		return -1;
	cli_note_cpu(s->ring);
	if (s->ranks != NULL && share_row(s, row) != 0)
		return -1;
	row->busbw = fmin(row->h[BENCH_OUT_OF_PLACE].busbw,
	    row->h[BENCH_IN_PLACE].busbw);
	row->wrong = row->h[BENCH_OUT_OF_PLACE].wrong +
	    row->h[BENCH_IN_PLACE].wrong;
	if (record(s, row) != 0) {
		/* Only this rank knows: tell the others why it stops. */
		sr_error_clear(&s->err);
		s->err.rank = s->ring_rank;
		sr_error_set(&s->err, SR_ENOMEM, SR_PHASE_COLLECTIVE, "%s",
		    s->record_why);
		sr_ring_abort(s->ring, &s->err);
		return -1;
	}
	return 0;
}

/* Every size of one collective, dtype and op. */
static int
run_sizes(struct bench_sweep *s, enum bench_coll coll, enum sr_dtype dtype,
    enum sr_op op, uint64_t *rows, double *busbw, uint64_t *wrong)
{
	const struct bench_options *o = s->o;
	size_t es = sr_dtype_size(dtype);
	uint64_t last = 0;

	for (uint64_t size = o->minbytes; size != 0;
	    size = bench_next_size(size, o->maxbytes, o->stepfactor,
	    o->stepbytes)) {
		struct bench_row row = { .coll = coll, .dtype = dtype, .op = op,
			.root = o->root, .size = size };

		/* A group's broadcast root is a member index. */
		if (o->group != NULL)
			(void)bench_in_group(o, o->root, &row.root);

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

static int
run_collective(struct bench_sweep *s, enum bench_coll coll)
{
	uint64_t rows = 0, wrong = 0;
	double busbw = 0;

	if (s->ring_rank == 0)
		bench_section_begin(s->out, s->o, coll);
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
	if (s->ring_rank == 0)
		bench_section_end(s->out, s->o, rows, busbw, wrong);
	return 0;
}

/* ----------------------------------------------------- set-up and end */

/*
 * Every rank allocates its buffers, then they agree: one rank without
 * memory fails them all instead of leaving them waiting for it.
 */
static int
allocate(struct bench_sweep *s)
{
	const struct bench_options *o = s->o;
	uint64_t bytes = 0, failed, any;

	/* A rank outside --group's measures nothing. */
	if ((o->colls & ((1u << BENCH_LINKS) - 1)) && s->member)
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
	    s->wire == NULL || s->times == NULL ? s->ring_rank + 1 : 0;
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
agree(struct bench_sweep *s)
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

/* The exit status of a sweep (and link test) that ran to its end. */
static int
verdict(struct bench_sweep *s, const struct bench_links_result *links)
{
	int status = EXIT_OK;

	if (s->o->check && s->wrong > 0)
		status = EXIT_CHECK;
	else if (s->o->min_busbw_set && s->gated == 0)
		status = EXIT_USAGE;
	else if (s->nbelow > 0 || (s->o->fail_slow && links->nslow > 0))
		status = EXIT_THRESHOLD;
	if (s->ring_rank != 0)
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
		bench_below_report(s);
	if (s->o->fail_slow && links->nslow > 0)
		cli_error("%zu slow link(s) (--fail-slow)", links->nslow);
	bench_summary_write(s->out, s, links, status);
	return status;
}

/* The sweeps and the link test in order; the exit status. */
static int
bench(struct bench_sweep *s, char **addresses)
{
	struct bench_links_result links;
	const struct bench_options *o = s->o;
	int rc;

	memset(&links, 0, sizeof(links));
	if ((rc = agree(s)) != EXIT_OK || (rc = allocate(s)) != EXIT_OK)
		return rc;
	s->last_size = bench_last_size(o);
	if (s->ring_rank == 0) {
		bench_header_write(s->out, o, addresses,
		    sr_ring_world(s->ring), sr_ring_congestion(s->ring));
		fflush(s->out);
	}
	for (int c = 0; c < BENCH_LINKS; c++)
		if ((o->colls & 1u << c) &&
		    run_collective(s, (enum bench_coll)c) != 0)
			return cli_report(&s->err, o->json);
	if (o->colls & 1u << BENCH_LINKS) {
		if (s->ring_rank == 0 && o->csv && s->rows > 0)
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

/* The one group a bench runs on (no other group shares the ring). */
#define BENCH_GROUP_ID 1

/*
 * --group: its ranks against the world (every rank alike), the root (its
 * first member unless -r named one), and on its members the group.  The
 * sweep then runs in the group's terms.
 */
static int
group_open(struct bench_sweep *s, struct bench_options *o)
{
	struct sr_error err;
	uint32_t index = 0;

	for (size_t i = 0; i < o->ngroup; i++)
		if (o->group[i] >= s->world)
			return cli_usage_error("bench: --group: rank %u is out "
			    "of range for a world of %u", o->group[i],
			    s->world);
	if (!o->root_set)
		o->root = o->group[0];
	s->ranks = o->group;
	s->world = (uint32_t)o->ngroup;
	s->member = bench_in_group(o, s->ring_rank, &index);
	s->rank = s->member ? index : UINT32_MAX;
	if (s->member && sr_group_new(&s->group, s->ring, BENCH_GROUP_ID,
	    o->group, o->ngroup, &err) != 0) {
		/* The others would wait for this member: tell them. */
		sr_ring_abort(s->ring, &err);
		return cli_report(&err, o->json);
	}
	return EXIT_OK;
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
	struct bench_sweep s;
	char **addresses = NULL;
	uint64_t world = 0;
	int rc;

	if (argc > 1 && strcmp(argv[1], "connect") == 0)
		return cmd_bench_connect(argc - 1, argv + 1);
	if (argc > 1 && strcmp(argv[1], "pairs") == 0)
		return cmd_bench_pairs(argc - 1, argv + 1);
	cli_ring_init(&ropts);
	bench_options_init(&o);
	if ((rc = parse(argc, argv, &ropts, &o)) != 0 ||
	    cli_preflight_stop(&ropts, o.csv, "")) {
		bench_options_fini(&o);
		return rc < 0 ? EXIT_OK : rc;
	}
	cli_signals_install();
	memset(&s, 0, sizeof(s));
	rc = cli_ring_open(&ropts, &s.ring, &addresses, &world);
	if (rc != EXIT_OK || s.ring == NULL) {
		bench_options_fini(&o);
		return rc;
	}
	s.o = &o;
	s.out = stdout;
	s.rank = s.ring_rank = sr_ring_rank(s.ring);
	s.world = sr_ring_world(s.ring);
	s.member = true;
	s.progress_ns = progress_interval();
	s.last_line_ns = sr_clock_ns();
	if (o.corrupt && o.corrupt_rank >= s.world)
		rc = cli_usage_error("bench: --corrupt rank %u is out of range "
		    "for a world of %u", o.corrupt_rank, s.world);
	else if ((o.colls & 1u << BENCH_BROADCAST) && o.root >= s.world)
		rc = cli_usage_error("bench: --root %u is out of range for a "
		    "world of %u", o.root, s.world);
	else if (o.group != NULL && (rc = group_open(&s, &o)) != EXIT_OK)
		;
	else
		rc = bench(&s, addresses);
	sr_group_free(s.group);
	bench_options_fini(&o);
	free(s.send);
	free(s.recv);
	free(s.ns);
	free(s.wire);
	free(s.times);
	free(s.below);
	/* Closing is a collective too: a rank that ran another sweep fails
	 * every rank, rather than each passing on its own. */
	return cli_ring_done(s.ring, addresses, world, rc, o.json);
}
