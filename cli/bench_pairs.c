/*
 * bench_pairs.c - `silvic-ring bench pairs`: every pair of ranks measured
 * over the mesh, and the verdict that names the slow host or the slow
 * link (pairs_verdict.c).
 *
 * The life of a run, on every rank:
 *
 *   1. the preflight (bench connect's probe and verdict) forms the mesh;
 *      any finding ends the run there, exit 6 (--no-connect forms a
 *      plain mesh instead);
 *   2. the sizing pass: in every round of the circle method
 *      (pairs_plan.c) each pair times round trips each way and a probe
 *      transfer each way, and both ends size its transfers alike from the
 *      slower direction (bench_link_bytes: about half a second at most);
 *      the slowest pair's times, reduced, give the estimate rank 0
 *      prints before the measuring starts;
 *   3. the measuring pass: in every round each pair runs its three
 *      phases (both ways at once, the lower rank alone, the higher rank
 *      alone), -w untimed and -n timed transfers each, then every rank's
 *      sample goes to every rank (an allgather: the rounds run in step);
 *   4. the verdict, alike on every rank from the same matrix; rank 0
 *      writes the table or JSON, and the SVG; every rank exits with it.
 *
 * A pair's transfers run in a group of the two ranks (sr_group_*), whose
 * id names the pair, so a rank that took another path is out of step.
 */
#include <errno.h>
#include <getopt.h>
#include <math.h>
#include <stdlib.h>
#include <string.h>

#include "cli.h"
#include "bench_connect.h"
#include "bench_data.h"
#include "pairs.h"

const char usage_bench_pairs[] =
"usage: silvic-ring bench pairs [OPTIONS]\n"
"\n"
"Measures every pair of ranks over the mesh and says which host or which\n"
"link is slow.  The pairs meet in rounds (the circle method: N-1 rounds\n"
"for an even world, N for an odd one); each pair runs both directions at\n"
"once, then each direction alone, -w untimed and -n timed transfers each,\n"
"sized by a probe to take about half a second at most.  Rank 0 prints the\n"
"estimate first, then the N x N matrix of GB/s and latency (beyond 16\n"
"ranks the worst cells and each host), and the verdict; any finding exits\n"
"6.  bench connect runs first, and its findings end the run.\n"
"\n"
"  -e, --maxbytes SIZE      a transfer's size at most (default 64M)\n"
"  -n, --iters N            timed transfers of each phase (default 3,\n"
"                           at most 16)\n"
"  -w, --warmup_iters N     untimed ones first (default 1)\n"
"      --threshold FRACTION  slow below FRACTION x the reference (default\n"
"                           0.6)\n"
"      --baseline FILE      judge against an earlier run's --json output\n"
"      --svg FILE           write the matrix as an SVG heatmap\n"
"      --no-connect         skip the preflight: form the mesh directly\n"
"      --probe-time SECONDS  the preflight's (default 3)\n"
"  -h, --help               this text\n"
"\n";

#define PAIRS_MAXBYTES_DEFAULT (64u << 20)
#define PAIRS_REPEATS_DEFAULT 3
#define PAIRS_WARMUP_DEFAULT 1
#define PAIRS_PROBE_DEFAULT_S 3.0
/* Round trips a pair times each way, after two untimed. */
#define PAIRS_PINGS 20
#define PAIRS_PING_WARMUP 2
/* The sizing probe: an untimed quarter megabyte, then a megabyte, each
 * way; transfers then aim at about half a second at most. */
#define PAIRS_PROBE_WARMUP (256u << 10)
#define PAIRS_PROBE_BYTES (1u << 20)
#define PAIRS_TARGET_S 0.5

enum {
	PAIRS_OPT_THRESHOLD = OPT_COMMAND_BASE,
	PAIRS_OPT_BASELINE,
	PAIRS_OPT_SVG,
	PAIRS_OPT_NO_CONNECT,
	PAIRS_OPT_PROBE_TIME
};

struct pairs_options {
	uint64_t maxbytes, repeats, warmup;
	double threshold;
	const char *baseline, *svg;
	bool connect;
};

/* What one rank holds of its partner in one round. */
struct pairs_round {
	uint32_t partner;		/* PAIRS_BYE: sat out */
	struct sr_group *group;		/* the pair's */
	uint64_t bytes;			/* each transfer's, both ways */
	double rtt_us;			/* this rank's median round trip */
};

struct pairs_run {
	struct sr_ring *ring;
	uint32_t rank, world;
	char **addresses;
	const struct pairs_options *o;
	bool json;
	struct pairs_plan plan;
	struct pairs_round *rounds;
	uint8_t *buf, *rbuf;		/* maxbytes each */
	double *times;			/* warmup + repeats */
	struct pairs_matrix m;
	double slowest_s, slowest_rtt_s;	/* the estimate's */
	unsigned passes;		/* over every pair: 1, or 2 (confirm) */
	struct sr_error err;
};

static int
parse(int argc, char **argv, struct cli_ring *ring, struct pairs_options *o)
{
	static const struct option longopts[] = {
		CLI_RING_LONGOPTS,
		{ "maxbytes", required_argument, NULL, 'e' },
		{ "iters", required_argument, NULL, 'n' },
		{ "warmup_iters", required_argument, NULL, 'w' },
		{ "threshold", required_argument, NULL, PAIRS_OPT_THRESHOLD },
		{ "baseline", required_argument, NULL, PAIRS_OPT_BASELINE },
		{ "svg", required_argument, NULL, PAIRS_OPT_SVG },
		{ "no-connect", no_argument, NULL, PAIRS_OPT_NO_CONNECT },
		{ "probe-time", required_argument, NULL, PAIRS_OPT_PROBE_TIME },
		{ "help", no_argument, NULL, 'h' },
		{ NULL, 0, NULL, 0 }
	};
	char *end;
	int c;

	opterr = 0;
	optind = 1;
	while ((c = getopt_long(argc, argv, ":hve:n:w:", longopts,
	    NULL)) != -1) {
		switch (c) {
		case 'h':
			fputs(usage_bench_pairs, stdout);
			fputs(cli_ring_help, stdout);
			return -1;
		case ':':
			return cli_usage_error("bench pairs: %s needs a value",
			    argv[optind - 1]);
		case '?':
			return cli_usage_error("bench pairs: unknown option "
			    "'%s'", argv[optind - 1]);
		case 'e':
			if (cli_parse_size(optarg, &o->maxbytes) != 0 ||
			    o->maxbytes < 8 || o->maxbytes > (1u << 30))
				return cli_usage_error("bench pairs: --maxbytes "
				    "'%s' is not a size from 8 to 1G", optarg);
			break;
		case 'n':
			if (cli_parse_uint(optarg, 1, PAIRS_REPEATS_MAX,
			    &o->repeats) != 0)
				return cli_usage_error("bench pairs: --iters "
				    "'%s' is not a whole number from 1 to %u",
				    optarg, PAIRS_REPEATS_MAX);
			break;
		case 'w':
			if (cli_parse_uint(optarg, 0, 100, &o->warmup) != 0)
				return cli_usage_error("bench pairs: "
				    "--warmup_iters '%s' is not a whole number "
				    "from 0 to 100", optarg);
			break;
		case PAIRS_OPT_THRESHOLD:
			errno = 0;
			o->threshold = strtod(optarg, &end);
			if (errno != 0 || end == optarg || *end != '\0' ||
			    !(o->threshold > 0 && o->threshold < 1))
				return cli_usage_error("bench pairs: --threshold "
				    "'%s' is not a fraction between 0 and 1",
				    optarg);
			break;
		case PAIRS_OPT_BASELINE:
			o->baseline = optarg;
			break;
		case PAIRS_OPT_SVG:
			o->svg = optarg;
			break;
		case PAIRS_OPT_NO_CONNECT:
			o->connect = false;
			break;
		case PAIRS_OPT_PROBE_TIME:
			if (cli_parse_seconds(optarg, &ring->probe) != 0)
				return cli_usage_error("bench pairs: --probe-time "
				    "'%s' is not a positive number of seconds",
				    optarg);
			break;
		default:
			if (cli_ring_option(ring, c, optarg) < 0)
				return EXIT_USAGE;
		}
	}
	if (optind < argc)
		return cli_usage_error("bench pairs: unexpected argument '%s'",
		    argv[optind]);
	return 0;
}

/* ------------------------------------------------------------ the pairs */

/* Both ranks of a pair name its group alike, and no two pairs share it
 * (0 is the ring's). */
static uint32_t
pair_id(uint32_t a, uint32_t b, uint32_t world)
{
	uint32_t low = a < b ? a : b, high = a < b ? b : a;

	return 1 + low * world + high;
}

/* This rank's member index in its pair: the lower rank is member 0. */
static uint32_t
member_of(const struct pairs_run *r, uint32_t partner)
{
	return r->rank < partner ? 0 : 1;
}

static int
pair_open(struct pairs_run *r, struct pairs_round *pr)
{
	uint32_t members[2] = { r->rank < pr->partner ? r->rank : pr->partner,
		r->rank < pr->partner ? pr->partner : r->rank };

	return sr_group_new(&pr->group, r->ring, pair_id(r->rank, pr->partner,
	    r->world), members, 2, &r->err);
}

/* Median seconds of n timed transfers from member `from` (after warm-up
 * ones), as `from` sees them; the other end's are meaningless. */
static int
timed_transfers(struct pairs_run *r, struct sr_group *g, uint32_t from,
    uint64_t bytes, uint64_t echo, uint64_t warmup, uint64_t n, double *out)
{
	for (uint64_t i = 0; i < warmup + n; i++) {
		int64_t t0 = sr_clock_ns();

		if (sr_group_link_transfer(g, from, r->buf, bytes, echo,
		    &r->err) != 0)
			return -1;
		if (i >= warmup)
			r->times[i - warmup] = (double)(sr_clock_ns() - t0) / 1e9;
	}
	if (out != NULL)
		*out = bench_median(r->times, n);
	return 0;
}

/*
 * The sizing pass's work for one pair: round trips each way (this rank
 * keeps its own median), then the probe transfer each way; both ends
 * swap their probe times and size the pair's transfers from the slower.
 */
static int
size_pair(struct pairs_run *r, struct pairs_round *pr)
{
	uint32_t me = member_of(r, pr->partner);
	double rtt[2] = { 0, 0 }, probe[2] = { 0, 0 }, slower;
	uint8_t mine[8], theirs[8];

	for (uint32_t from = 0; from < 2; from++) {
		if (timed_transfers(r, pr->group, from, 8, 8, PAIRS_PING_WARMUP,
		    PAIRS_PINGS, &rtt[from]) != 0 ||
		    timed_transfers(r, pr->group, from, PAIRS_PROBE_WARMUP, 0, 1,
		    0, NULL) != 0 ||
		    timed_transfers(r, pr->group, from, PAIRS_PROBE_BYTES, 0, 0,
		    1, &probe[from]) != 0)
			return -1;
	}
	pr->rtt_us = rtt[me] * 1e6;
	bench_put_u64le(mine, (uint64_t)(probe[me] * 1e9));
	if (sr_group_shift(pr->group, mine, theirs, sizeof(mine), &r->err) != 0)
		return -1;
	probe[1 - me] = (double)bench_get_u64le(theirs) / 1e9;
	slower = probe[0] > probe[1] ? probe[0] : probe[1];
	pr->bytes = bench_link_bytes(r->o->maxbytes, PAIRS_PROBE_BYTES,
	    slower, PAIRS_TARGET_S);
	/* The estimate's transfer: the probe's pace at the chosen size. */
	slower *= (double)pr->bytes / PAIRS_PROBE_BYTES;
	if (slower > r->slowest_s)
		r->slowest_s = slower;
	if (rtt[me] > r->slowest_rtt_s)
		r->slowest_rtt_s = rtt[me];
	return 0;
}

/* Every round of the sizing pass, then the estimate agreed by all. */
static int
size_all(struct pairs_run *r)
{
	double worst[2];

	for (uint32_t k = 0; k < r->plan.rounds; k++) {
		struct pairs_round *pr = &r->rounds[k];

		pr->partner = pairs_plan_partner(&r->plan, r->rank, k);
		if (pr->partner == PAIRS_BYE)
			continue;
		if (pair_open(r, pr) != 0 || size_pair(r, pr) != 0)
			return -1;
	}
	worst[0] = r->slowest_s;
	worst[1] = r->slowest_rtt_s;
	if (sr_allreduce(r->ring, worst, worst, 2, SR_F64, SR_MAX,
	    &r->err) != 0)
		return -1;
	r->slowest_s = worst[0];
	r->slowest_rtt_s = worst[1];
	return 0;
}

/* One round's three phases with this rank's partner, into its sample. */
static int
measure_pair(struct pairs_run *r, uint32_t k, struct pairs_sample *s)
{
	struct pairs_round *pr = &r->rounds[k];
	uint32_t me = member_of(r, pr->partner);
	const struct pairs_options *o = r->o;

	for (uint64_t i = 0; i < o->warmup + o->repeats; i++) {
		int64_t t0 = sr_clock_ns();

		if (sr_group_shift(pr->group, r->buf, r->rbuf, pr->bytes,
		    &r->err) != 0)
			return -1;
		if (i >= o->warmup)
			s->both_s[i - o->warmup] = (double)(sr_clock_ns() - t0) /
			    1e9;
	}
	for (uint32_t from = 0; from < 2; from++) {
		if (timed_transfers(r, pr->group, from, pr->bytes, 0, o->warmup,
		    o->repeats, NULL) != 0)
			return -1;
		if (from == me)
			memcpy(s->alone_s, r->times, o->repeats * sizeof(double));
	}
	s->partner = pr->partner;
	s->bytes = pr->bytes;
	s->rtt_us = pr->rtt_us;
	return 0;
}

/* The measuring pass: each round, then every rank's sample to every
 * rank, into the matrix. */
static int
measure_all(struct pairs_run *r)
{
	uint8_t *wire = malloc((size_t)r->world * PAIRS_SAMPLE_WIRE);
	char why[256];

	if (wire == NULL)
		return sr_error_set(&r->err, SR_ENOMEM, SR_PHASE_COLLECTIVE,
		    "out of memory");
	for (uint32_t k = 0; k < r->plan.rounds; k++) {
		struct pairs_sample s;
		uint8_t *mine = wire + (size_t)r->rank * PAIRS_SAMPLE_WIRE;

		memset(&s, 0, sizeof(s));
		s.rank = r->rank;
		s.round = k;
		s.partner = PAIRS_BYE;
		s.repeats = (uint32_t)r->o->repeats;
		if (r->rounds[k].partner != PAIRS_BYE &&
		    measure_pair(r, k, &s) != 0)
			goto fail;
		pairs_sample_encode(&s, mine);
		if (sr_allgather(r->ring, mine, PAIRS_SAMPLE_WIRE, wire,
		    &r->err) != 0)
			goto fail;
		for (uint32_t i = 0; i < r->world; i++) {
			pairs_sample_decode(wire + (size_t)i * PAIRS_SAMPLE_WIRE,
			    &s);
			if (pairs_matrix_add(&r->m, &r->plan, &s, why,
			    sizeof(why)) != 0) {
				sr_error_set(&r->err, SR_EOUT_OF_STEP,
				    SR_PHASE_COLLECTIVE, "rank %u's sample of "
				    "round %u: %s", i, k, why);
				sr_ring_abort(r->ring, &r->err);
				goto fail;
			}
		}
	}
	free(wire);
	return 0;
fail:
	free(wire);
	return -1;
}

/* The matrix with every rank's host label. */
static int
matrix_open(struct pairs_run *r)
{
	char (*labels)[PAIRS_LABEL_MAX] = calloc(r->world, sizeof(*labels));
	const char **label = calloc(r->world, sizeof(*label));
	char why[256];
	int rc = -1;

	if (labels != NULL && label != NULL) {
		for (uint32_t i = 0; i < r->world; i++)
			label[i] = pairs_host_label(r->addresses[i], labels[i],
			    sizeof(labels[i]));
		rc = pairs_matrix_init(&r->m, r->world, (uint32_t)r->o->repeats,
		    label, why, sizeof(why));
		if (rc != 0)
			cli_error("bench pairs: %s", why);
	}
	free(labels);
	free(label);
	return rc;
}

/* ---------------------------------------------------------- the verdict */

/* The verdict on the matrix as it stands; -1 after saying why. */
static int
judge(struct pairs_run *r, const struct pairs_baseline *b,
    struct pairs_verdict *v)
{
	struct pairs_verdict_options vo;
	char why[256];

	pairs_verdict_options_init(&vo);
	vo.threshold = r->o->threshold;
	vo.baseline_name = r->o->baseline;
	for (int mode = 0; b != NULL && mode < PAIRS_MODE_COUNT; mode++)
		vo.baseline[mode] = b->cells[mode];
	if (pairs_matrix_complete(&r->m, why, sizeof(why)) != 0 ||
	    pairs_verdict_run(&r->m, &vo, v, why, sizeof(why)) != 0) {
		cli_error("bench pairs: %s", why);
		return -1;
	}
	return 0;
}

/*
 * A first pass whose verdict is not a pass is measured again, every pair
 * (every rank judges the same gathered matrix, so all agree to), and each
 * cell keeps the faster pass's repeats: a cell is slow only when it was
 * slow both times.  A pair's repeats run back to back, so one stall of a
 * busy machine (a rank not scheduled for the tens of milliseconds a
 * cell takes) can slow all of them; the second pass, minutes or seconds
 * later, does not share it, and a slow host or link is slow both times.
 * 0 with the final verdict in v (the caller frees it), 1 when the
 * second pass failed (r->err), -1 after saying why.
 */
static int
confirm(struct pairs_run *r, const struct pairs_baseline *b,
    struct pairs_verdict *v)
{
	struct pairs_matrix first = r->m;
	char why[512];

	if (judge(r, b, v) != 0)
		return -1;
	if (v->pass)
		return 0;
	if (r->rank == 0 && !r->json) {
		printf("# first pass: %s\n# measuring every pair again; each "
		    "cell is then the faster pass's\n", pairs_verdict_text(&r->m,
		    v, why, sizeof(why)));
		fflush(stdout);
	}
	pairs_verdict_fini(v);
	r->passes = 2;
	memset(&r->m, 0, sizeof(r->m));
	if (matrix_open(r) != 0) {
		r->m = first;
		return -1;
	}
	if (measure_all(r) != 0) {
		pairs_matrix_fini(&first);
		return 1;
	}
	pairs_matrix_keep_faster(&first, &r->m);
	pairs_matrix_fini(&r->m);
	r->m = first;
	return judge(r, b, v);
}

/* Writes the matrix and verdict v (freed here); the exit status. */
static int
report(struct pairs_run *r, const struct pairs_baseline *b,
    struct pairs_verdict *v)
{
	struct pairs_report rep = { .plan = &r->plan, .m = &r->m,
		.addresses = r->addresses, .warmup = r->o->warmup,
		.threshold = r->o->threshold, .baseline = r->o->baseline,
		.passes = r->passes };
	char why[256];
	int status;

	for (int mode = 0; b != NULL && mode < PAIRS_MODE_COUNT; mode++)
		rep.baseline_cells[mode] = b->cells[mode];
	rep.v = v;
	status = v->pass ? EXIT_OK : EXIT_THRESHOLD;
	if (r->rank == 0) {
		if ((r->json ? pairs_json_write(stdout, &rep, status) :
		    pairs_table_write(stdout, &rep)) != 0)
			status = EXIT_INTERNAL;
		if (r->o->svg != NULL && pairs_svg_write(r->o->svg, &r->m, v,
		    why, sizeof(why)) != 0) {
			cli_error("bench pairs: --svg: %s", why);
			status = EXIT_INTERNAL;
		}
	}
	if (!v->pass)
		cli_error("bench pairs: %s", pairs_verdict_text(&r->m, v, why,
		    sizeof(why)));
	pairs_verdict_fini(v);
	return status;
}

static int
run(struct pairs_run *r)
{
	struct pairs_report rep = { .plan = &r->plan, .m = &r->m,
		.addresses = r->addresses, .warmup = r->o->warmup,
		.threshold = r->o->threshold, .baseline = r->o->baseline };
	struct pairs_baseline b = { 0 }, *base = NULL;
	struct pairs_verdict v;
	struct pairs_estimate e = { .repeats = r->o->repeats,
		.warmup = r->o->warmup, .pings = PAIRS_PINGS };
	char why[512];
	int rc;

	r->passes = 1;
	if (pairs_plan_init(&r->plan, r->world) != 0 || matrix_open(r) != 0)
		return cli_usage_error("bench pairs: a world of %u is more "
		    "than it measures (at most %u)", r->world,
		    PAIRS_MATRIX_MAX);
	if (r->o->baseline != NULL) {
		if (pairs_baseline_read(r->o->baseline, &r->m, &b, why,
		    sizeof(why)) != 0)
			return cli_usage_error("bench pairs: --baseline: %s",
			    why);
		base = &b;
	}
	r->rounds = calloc(r->plan.rounds > 0 ? r->plan.rounds : 1,
	    sizeof(*r->rounds));
	r->buf = malloc(r->o->maxbytes);
	r->rbuf = malloc(r->o->maxbytes);
	r->times = calloc(r->o->warmup + r->o->repeats + PAIRS_PINGS +
	    PAIRS_PING_WARMUP, sizeof(double));
	if (r->rounds == NULL || r->buf == NULL || r->rbuf == NULL ||
	    r->times == NULL) {
		pairs_baseline_fini(&b);
		cli_error("bench pairs: out of memory for %llu-byte transfers",
		    (unsigned long long)r->o->maxbytes);
		return EXIT_INTERNAL;
	}
	memset(r->buf, 0x5a, r->o->maxbytes);
	if (size_all(r) != 0) {
		pairs_baseline_fini(&b);
		return cli_report(&r->err, r->json);
	}
	e.transfer_s = r->slowest_s;
	e.rtt_s = r->slowest_rtt_s;
	if (r->rank == 0) {
		pairs_header_write(stdout, &rep, pairs_plan_seconds(&r->plan, &e),
		    r->json);
		fflush(stdout);
	}
	if (measure_all(r) != 0 || (rc = confirm(r, base, &v)) == 1)
		rc = cli_report(&r->err, r->json);
	else if (rc == 0)
		rc = report(r, base, &v);
	else
		rc = EXIT_INTERNAL;
	pairs_baseline_fini(&b);
	return rc;
}

/* The mesh: the preflight's, when it finds nothing wrong; else its
 * verdict is the run's. */
static int
open_mesh(struct cli_ring *ropts, const struct pairs_options *o,
    struct pairs_run *r, uint64_t *world)
{
	struct sr_probe_link *probe = NULL;
	int rc;

	if (o->connect)
		ropts->probe_report = &probe;
	else
		ropts->mesh = true;
	rc = cli_ring_open(ropts, &r->ring, &r->addresses, world);
	if (rc == EXIT_OK && r->ring != NULL && o->connect &&
	    sr_ring_world(r->ring) > 1)
		rc = bench_connect_judge(r->ring, r->addresses, probe,
		    ropts->json);
	free(probe);
	return rc;
}

static void
run_free(struct pairs_run *r)
{
	for (uint32_t k = 0; r->rounds != NULL && k < r->plan.rounds; k++)
		sr_group_free(r->rounds[k].group);
	free(r->rounds);
	free(r->buf);
	free(r->rbuf);
	free(r->times);
	pairs_matrix_fini(&r->m);
}

int
cmd_bench_pairs(int argc, char **argv)
{
	struct pairs_options o = { .maxbytes = PAIRS_MAXBYTES_DEFAULT,
		.repeats = PAIRS_REPEATS_DEFAULT,
		.warmup = PAIRS_WARMUP_DEFAULT,
		.threshold = PAIRS_THRESHOLD_DEFAULT, .connect = true };
	struct cli_ring ropts;
	struct pairs_run r;
	uint64_t world = 0;
	int rc;

	cli_ring_init(&ropts);
	ropts.probe = PAIRS_PROBE_DEFAULT_S;
	if ((rc = parse(argc, argv, &ropts, &o)) != 0)
		return rc < 0 ? EXIT_OK : rc;
	if (ropts.probe > ropts.timeout)
		ropts.probe = ropts.timeout;
	if (cli_preflight_stop(&ropts, false, ""))
		return EXIT_OK;
	cli_signals_install();
	memset(&r, 0, sizeof(r));
	r.o = &o;
	r.json = ropts.json;
	rc = open_mesh(&ropts, &o, &r, &world);
	if (rc == EXIT_OK && r.ring != NULL) {
		r.rank = sr_ring_rank(r.ring);
		r.world = sr_ring_world(r.ring);
		if (r.world < 2)
			rc = cli_usage_error("bench pairs: a world of one has no "
			    "pairs");
		else
			rc = run(&r);
		/* The groups go before the close, which agrees on every
		 * link: a pair's frame left unread fails it. */
		run_free(&r);
	}
	return cli_ring_done(r.ring, r.addresses, world, rc, r.json);
}
