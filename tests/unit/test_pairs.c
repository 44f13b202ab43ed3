/*
 * test_pairs.c - the pure parts of `silvic-ring bench pairs`: the circle
 * method's rounds for worlds 1..64 (every pair exactly once, byes for odd
 * worlds), the phases, the estimate, the samples on the wire and into
 * the matrix, and the verdict on synthetic matrices: a slow host, a slow
 * link one way, both ways or only at once, a slow fabric with and
 * without a baseline, several links, two hosts, several ranks per host,
 * worlds 2 and 3, and noise of +-20% that must stay "ok" for every seed.
 */
#include <math.h>
#include <stdint.h>
#include <string.h>

#include "check.h"
#include "pairs_plan.h"
#include "pairs_matrix.h"
#include "pairs_verdict.h"
#include "pairs_synth.h"

/* ------------------------------------------------------------ the plan */

static void
check_world(uint32_t n)
{
	struct pairs_plan plan;
	static uint8_t met[64][64];
	static struct pairs_pair pairs[32];
	uint32_t byes[64] = { 0 };

	memset(met, 0, sizeof(met));
	CHECK(pairs_plan_init(&plan, n) == 0);
	CHECKF(plan.rounds == (n == 1 ? 0 : n % 2 ? n : n - 1),
	    "world %u: %u rounds", n, plan.rounds);
	CHECK(plan.per_round == n / 2);
	for (uint32_t k = 0; k < plan.rounds; k++) {
		uint32_t bye, seen = 0;

		for (uint32_t r = 0; r < n; r++) {
			uint32_t p = pairs_plan_partner(&plan, r, k);

			if (p == PAIRS_BYE) {
				byes[r]++;
				continue;
			}
			CHECKF(p < n && p != r, "world %u round %u: rank %u "
			    "meets %u", n, k, r, p);
			if (p >= n || p == r)
				continue;
			CHECKF(pairs_plan_partner(&plan, p, k) == r,
			    "world %u round %u: %u -> %u is not mutual", n, k,
			    r, p);
			CHECK(pairs_plan_round_of(&plan, r, p) == k);
			if (r < p) {
				met[r][p]++;
				seen++;
			}
		}
		CHECKF(seen == plan.per_round, "world %u round %u: %u pairs",
		    n, k, seen);
		pairs_plan_round(&plan, k, pairs, &bye);
		for (uint32_t i = 0; i < plan.per_round; i++) {
			CHECK(pairs[i].low < pairs[i].high);
			CHECK(pairs_plan_partner(&plan, pairs[i].low, k) ==
			    pairs[i].high);
			CHECK(i == 0 || pairs[i - 1].low < pairs[i].low);
		}
		if (n % 2)
			CHECK(bye < n && pairs_plan_partner(&plan, bye, k) ==
			    PAIRS_BYE);
		else
			CHECK(bye == PAIRS_BYE);
	}
	for (uint32_t a = 0; a < n; a++) {
		CHECKF(byes[a] == (n % 2 && n > 1 ? 1u : 0u), "world %u: rank %u sat out "
		    "%u rounds", n, a, byes[a]);
		for (uint32_t b = a + 1; b < n; b++)
			CHECKF(met[a][b] == 1, "world %u: %u and %u met %u times",
			    n, a, b, met[a][b]);
	}
}

static void
test_plan_worlds(void)
{
	for (uint32_t n = 1; n <= 64; n++)
		check_world(n);
}

static void
test_plan_table(void)
{
	/* The header's drawing of world 6. */
	static const uint32_t expect[5][6] = {
		{ 5, 4, 3, 2, 1, 0 },
		{ 2, 5, 0, 4, 3, 1 },
		{ 4, 3, 5, 1, 0, 2 },
		{ 1, 0, 4, 5, 2, 3 },
		{ 3, 2, 1, 0, 5, 4 },
	};
	struct pairs_plan plan;
	struct pairs_pair p[3];
	uint32_t bye;

	CHECK(pairs_plan_init(&plan, 6) == 0);
	for (uint32_t k = 0; k < 5; k++)
		for (uint32_t r = 0; r < 6; r++)
			CHECKF(pairs_plan_partner(&plan, r, k) == expect[k][r],
			    "round %u rank %u", k, r);
	pairs_plan_round(&plan, 1, p, &bye);
	CHECK(p[0].low == 0 && p[0].high == 2);
	CHECK(p[1].low == 1 && p[1].high == 5);
	CHECK(p[2].low == 3 && p[2].high == 4);
	/* World 5: round k's bye is rank k. */
	CHECK(pairs_plan_init(&plan, 5) == 0);
	for (uint32_t k = 0; k < 5; k++) {
		pairs_plan_round(&plan, k, p, &bye);
		CHECK(bye == k);
	}
	/* Out of range. */
	CHECK(pairs_plan_init(&plan, 0) == -1);
	CHECK(pairs_plan_init(&plan, PAIRS_WORLD_MAX + 1) == -1);
	CHECK(pairs_plan_init(&plan, PAIRS_WORLD_MAX) == 0);
	CHECK(plan.rounds == PAIRS_WORLD_MAX - 1);
	CHECK(pairs_plan_partner(&plan, PAIRS_WORLD_MAX, 0) == PAIRS_BYE);
	CHECK(pairs_plan_partner(&plan, 0, plan.rounds) == PAIRS_BYE);
	/* World 2: one round, one pair. */
	CHECK(pairs_plan_init(&plan, 2) == 0);
	CHECK(plan.rounds == 1 && pairs_plan_partner(&plan, 0, 0) == 1);
}

static void
test_phases(void)
{
	CHECK(pairs_phase_sends(PAIRS_PHASE_BOTH, 3, 1));
	CHECK(pairs_phase_sends(PAIRS_PHASE_BOTH, 1, 3));
	CHECK(pairs_phase_sends(PAIRS_PHASE_LOW, 1, 3));
	CHECK(!pairs_phase_sends(PAIRS_PHASE_LOW, 3, 1));
	CHECK(pairs_phase_sends(PAIRS_PHASE_HIGH, 3, 1));
	CHECK(!pairs_phase_sends(PAIRS_PHASE_HIGH, 1, 3));
	CHECK(!pairs_phase_sends(PAIRS_PHASE_BOTH, 1, PAIRS_BYE));
	CHECK(strcmp(pairs_phase_name(PAIRS_PHASE_BOTH),
	    "both directions at once") == 0);
	CHECK(strcmp(pairs_phase_name(PAIRS_PHASE_LOW),
	    "alone, the lower rank sends") == 0);
	CHECK(strcmp(pairs_phase_key(PAIRS_PHASE_HIGH), "high") == 0);
	/* Each phase in which one end sends has the other receive: low and
	 * high together are the two directions alone. */
	for (uint32_t a = 0; a < 4; a++)
		for (uint32_t b = 0; b < 4; b++)
			if (a != b)
				CHECK(pairs_phase_sends(PAIRS_PHASE_LOW, a, b) !=
				    pairs_phase_sends(PAIRS_PHASE_HIGH, a, b));
}

static void
test_estimate(void)
{
	struct pairs_plan plan;
	struct pairs_estimate e = { 0.5, 100e-6, 3, 1, 100 };
	char buf[64];

	/* 7 rounds x (3 x 4 x 0.5 + 100 x 1e-4) = 7 x 6.01 */
	CHECK(pairs_plan_init(&plan, 8) == 0);
	CHECK(fabs(pairs_plan_seconds(&plan, &e) - 42.07) < 1e-9);
	CHECK(strcmp(pairs_plan_estimate_text(&plan, 42.07, buf,
	    sizeof(buf)), "about 42 s for 7 rounds") == 0);
	/* Odd worlds have a round per rank. */
	CHECK(pairs_plan_init(&plan, 5) == 0);
	CHECK(fabs(pairs_plan_seconds(&plan, &e) - 5 * 6.01) < 1e-9);
	CHECK(pairs_plan_init(&plan, 256) == 0);
	CHECK(strcmp(pairs_plan_estimate_text(&plan, pairs_plan_seconds(&plan,
	    &e), buf, sizeof(buf)), "about 26 min for 255 rounds") == 0);
	CHECK(pairs_plan_init(&plan, 1024) == 0);
	CHECK(strcmp(pairs_plan_estimate_text(&plan, pairs_plan_seconds(&plan,
	    &e), buf, sizeof(buf)), "about 102 min for 1023 rounds") == 0);
	CHECK(pairs_plan_init(&plan, 2) == 0);
	CHECK(strcmp(pairs_plan_estimate_text(&plan, 0.2, buf, sizeof(buf)),
	    "under 1 s for 1 round") == 0);
	CHECK(pairs_plan_init(&plan, 1) == 0);
	CHECK(pairs_plan_seconds(&plan, &e) == 0);
}

/* ---------------------------------------------------------- samples */

static void
sample_fill(struct pairs_sample *s, uint32_t rank, uint32_t round,
    uint32_t partner)
{
	memset(s, 0, sizeof(*s));
	s->rank = rank;
	s->round = round;
	s->partner = partner;
	s->repeats = 3;
	s->bytes = 1000000000;
	for (uint32_t k = 0; k < 3; k++) {
		s->both_s[k] = 1.0 + k;		/* 1, 0.5, 0.333 GB/s */
		s->alone_s[k] = 0.5;		/* 2 GB/s */
	}
	s->rtt_us = 50;
}

static void
test_sample_wire(void)
{
	struct pairs_sample s, t;
	uint8_t wire[PAIRS_SAMPLE_WIRE];

	sample_fill(&s, 0x01020304, 7, 0x0a0b0c0d);
	s.both_s[15] = NAN;
	s.alone_s[15] = -0.0;
	pairs_sample_encode(&s, wire);
	/* Little-endian at the drawn offsets. */
	CHECK(wire[0] == 0x04 && wire[3] == 0x01 && wire[4] == 0);
	CHECK(wire[8] == 7 && wire[16] == 0x0d && wire[24] == 3);
	CHECK(wire[32] == 0x00 && wire[33] == 0xca && wire[35] == 0x3b);
	/* 1.0 is 0x3ff0000000000000 */
	CHECK(wire[40 + 7] == 0x3f && wire[40 + 6] == 0xf0);
	/* 0.5 is 0x3fe0000000000000 */
	CHECK(wire[168 + 7] == 0x3f && wire[168 + 6] == 0xe0);
	CHECK(wire[296 + 7] == 0x40 && wire[296 + 6] == 0x49);
	pairs_sample_decode(wire, &t);
	CHECK(t.rank == s.rank && t.round == 7 && t.partner == s.partner);
	CHECK(t.repeats == 3 && t.bytes == 1000000000);
	CHECK(t.both_s[1] == 2.0 && t.alone_s[2] == 0.5 && t.rtt_us == 50);
	CHECK(isnan(t.both_s[15]) && t.alone_s[15] == 0 &&
	    signbit(t.alone_s[15]));
	/* The bye stays a bye; a number past 32 bits becomes no rank. */
	s.partner = PAIRS_BYE;
	pairs_sample_encode(&s, wire);
	pairs_sample_decode(wire, &t);
	CHECK(t.partner == PAIRS_BYE);
	wire[0 + 5] = 1;
	wire[24 + 4] = 1;
	pairs_sample_decode(wire, &t);
	CHECK(t.rank == UINT32_MAX - 1 && t.repeats == UINT32_MAX - 1);
}

static const char *const four[4] = { "10.0.0.1", "10.0.0.2", "10.0.0.2",
    "10.0.0.3" };

static void
test_matrix_add(void)
{
	struct pairs_matrix m;
	struct pairs_plan plan;
	struct pairs_sample s;
	char why[256];

	CHECK(pairs_plan_init(&plan, 4) == 0);
	CHECK(pairs_matrix_init(&m, 4, 3, four, why, sizeof(why)) == 0);
	CHECK(m.nhosts == 3);
	CHECK(m.host[0] == 0 && m.host[1] == 1 && m.host[2] == 1 &&
	    m.host[3] == 2);
	CHECK(m.host_rank[1] == 1 && m.host_rank[2] == 3);
	/* World 4, round 0: 3-0, 1-2. */
	sample_fill(&s, 1, 0, 2);
	CHECK(pairs_matrix_add(&m, &plan, &s, why, sizeof(why)) == 0);
	CHECK(pairs_cell_median(&m, PAIRS_MODE_ALONE, 1, 2) == 2.0);
	CHECK(pairs_cell_median(&m, PAIRS_MODE_BOTH, 1, 2) == 0.5);
	CHECK(pairs_cell_max(&m, PAIRS_MODE_BOTH, 1, 2) == 1.0);
	CHECK(fabs(pairs_cell_min(&m, PAIRS_MODE_BOTH, 1, 2) - 1.0 / 3) <
	    1e-12);
	CHECK(m.latency_us[1 * 4 + 2] == 25 && m.round[1 * 4 + 2] == 0);
	CHECK(m.bytes[1 * 4 + 2] == 1000000000);
	CHECK(isnan(pairs_cell_median(&m, PAIRS_MODE_ALONE, 2, 1)));
	CHECK(isnan(pairs_cell_median(&m, PAIRS_MODE_ALONE, 2, 2)));
	/* Twice is an error naming it. */
	CHECK(pairs_matrix_add(&m, &plan, &s, why, sizeof(why)) == -1);
	CHECK(strcmp(why, "rank 1: a second sample of rank 1 -> rank 2 "
	    "(round 0)") == 0);
	/* A partner the plan does not give. */
	sample_fill(&s, 0, 0, 2);
	CHECK(pairs_matrix_add(&m, &plan, &s, why, sizeof(why)) == -1);
	CHECK(strcmp(why, "rank 0: round 0's sample names partner 2, but "
	    "the plan gives rank 3") == 0);
	sample_fill(&s, 0, 9, 3);
	CHECK(pairs_matrix_add(&m, &plan, &s, why, sizeof(why)) == -1);
	CHECK(strcmp(why, "rank 0: a sample of round 9, but the plan has 3 "
	    "rounds") == 0);
	sample_fill(&s, 4, 0, 3);
	CHECK(pairs_matrix_add(&m, &plan, &s, why, sizeof(why)) == -1);
	CHECK(strcmp(why, "a sample from rank 4 in a world of 4") == 0);
	sample_fill(&s, 0, 0, 3);
	s.repeats = 2;
	CHECK(pairs_matrix_add(&m, &plan, &s, why, sizeof(why)) == -1);
	CHECK(strcmp(why, "rank 0: round 0's sample has 2 repeats, the run "
	    "3") == 0);
	sample_fill(&s, 0, 0, 3);
	s.alone_s[1] = 0;
	CHECK(pairs_matrix_add(&m, &plan, &s, why, sizeof(why)) == -1);
	CHECK(strcmp(why, "rank 0: round 0's repeat 1 took 2 s (both) and 0 s "
	    "(alone): not a time") == 0);
	sample_fill(&s, 0, 0, 3);
	s.both_s[2] = NAN;
	CHECK(pairs_matrix_add(&m, &plan, &s, why, sizeof(why)) == -1);
	sample_fill(&s, 0, 0, 3);
	s.bytes = 0;
	CHECK(pairs_matrix_add(&m, &plan, &s, why, sizeof(why)) == -1);
	CHECK(strcmp(why, "rank 0: round 0's sample moved no bytes") == 0);
	/* Missing cells are named. */
	CHECK(pairs_matrix_complete(&m, why, sizeof(why)) == -1);
	CHECK(strcmp(why, "no measurement of rank 0 -> rank 1 (both "
	    "directions at once)") == 0);
	pairs_matrix_fini(&m);

	/* World 3 has byes: rank 0 sits out round 0. */
	CHECK(pairs_plan_init(&plan, 3) == 0);
	CHECK(pairs_matrix_init(&m, 3, 3, four, why, sizeof(why)) == 0);
	sample_fill(&s, 0, 0, PAIRS_BYE);
	CHECK(pairs_matrix_add(&m, &plan, &s, why, sizeof(why)) == 0);
	sample_fill(&s, 1, 0, PAIRS_BYE);
	CHECK(pairs_matrix_add(&m, &plan, &s, why, sizeof(why)) == -1);
	CHECK(strcmp(why, "rank 1: round 0's sample sat the round out, but "
	    "the plan gives rank 2") == 0);
	sample_fill(&s, 0, 0, 1);
	CHECK(pairs_matrix_add(&m, &plan, &s, why, sizeof(why)) == -1);
	CHECK(strcmp(why, "rank 0: round 0's sample names partner 1, but the "
	    "plan gives it a bye") == 0);
	/* Every sample of every round completes it. */
	for (uint32_t k = 0; k < plan.rounds; k++)
		for (uint32_t r = 0; r < 3; r++) {
			sample_fill(&s, r, k, pairs_plan_partner(&plan, r, k));
			if (k == 0 && r == 0)
				continue;
			CHECKF(pairs_matrix_add(&m, &plan, &s, why,
			    sizeof(why)) == 0, "%s", why);
		}
	CHECK(pairs_matrix_complete(&m, why, sizeof(why)) == 0);
	pairs_matrix_fini(&m);
}

static void
test_matrix_init(void)
{
	struct pairs_matrix m;
	char why[256], label[PAIRS_LABEL_MAX], longer[200];
	const char *labels[2] = { "a", longer };

	CHECK(strcmp(pairs_host_label("10.0.0.4:4000", label, sizeof(label)),
	    "10.0.0.4") == 0);
	CHECK(strcmp(pairs_host_label("[::1]:4000", label, sizeof(label)),
	    "::1") == 0);
	CHECK(strcmp(pairs_host_label("node7", label, sizeof(label)),
	    "node7") == 0);
	CHECK(pairs_matrix_init(&m, 0, 3, four, why, sizeof(why)) == -1);
	CHECK(strcmp(why, "a pairs matrix of world 0: the world is 1 to "
	    "1024") == 0);
	CHECK(pairs_matrix_init(&m, 2, 17, four, why, sizeof(why)) == -1);
	CHECK(strcmp(why, "17 repeats: a cell holds 1 to 16") == 0);
	memset(longer, 'x', sizeof(longer) - 1);
	longer[sizeof(longer) - 1] = '\0';
	CHECK(pairs_matrix_init(&m, 2, 1, labels, why, sizeof(why)) == -1);
	CHECK(strncmp(why, "rank 1: host label 'xxxx", 24) == 0);
	pairs_matrix_fini(&m);
	CHECK(pairs_matrix_init(&m, 2, 1, four, why, sizeof(why)) == 0);
	CHECK(pairs_matrix_set(&m, PAIRS_MODE_ALONE, 0, 0,
	    (double[]){ 1 }) == -1);
	CHECK(pairs_matrix_set(&m, PAIRS_MODE_ALONE, 0, 1,
	    (double[]){ 0 }) == -1);
	CHECK(pairs_matrix_set(&m, PAIRS_MODE_ALONE, 0, 2,
	    (double[]){ 1 }) == -1);
	CHECK(pairs_matrix_set(&m, PAIRS_MODE_ALONE, 0, 1,
	    (double[]){ INFINITY }) == -1);
	CHECK(pairs_matrix_set(&m, PAIRS_MODE_ALONE, 0, 1,
	    (double[]){ 1.5 }) == 0);
	CHECK(pairs_cell_median(&m, PAIRS_MODE_ALONE, 0, 1) == 1.5);
	pairs_matrix_fini(&m);
}

/* ---------------------------------------------------------- verdicts */

/* The verdict of s; findings checked by the caller, then finied. */
static int
judge(const struct synth *s, struct pairs_matrix *m, struct pairs_verdict *v,
    const struct pairs_verdict_options *o)
{
	struct pairs_verdict_options own;
	char why[256];

	if (o == NULL) {
		pairs_verdict_options_init(&own);
		o = &own;
	}
	memset(v, 0, sizeof(*v));
	if (synth_build(s, m) != 0)
		return -1;
	if (pairs_verdict_run(m, o, v, why, sizeof(why)) != 0) {
		printf("# verdict: %s\n", why);
		pairs_matrix_fini(m);
		return -1;
	}
	return 0;
}

static void
done(struct pairs_matrix *m, struct pairs_verdict *v)
{
	pairs_verdict_fini(v);
	pairs_matrix_fini(m);
}

static void
show(const struct pairs_matrix *m, const struct pairs_verdict *v)
{
	char buf[1024];

	for (size_t i = 0; i < v->nfindings; i++)
		printf("#   finding %zu: %s\n", i, pairs_finding_text(m, v,
		    &v->findings[i], buf, sizeof(buf)));
}

static bool
only_host(const struct pairs_matrix *m, const struct pairs_verdict *v,
    uint32_t host)
{
	bool ok = v->nfindings == 1 && v->findings[0].kind ==
	    PAIRS_FINDING_HOST && v->findings[0].host == host && !v->pass;

	if (!ok)
		show(m, v);
	return ok;
}

static bool
only_link(const struct pairs_matrix *m, const struct pairs_verdict *v,
    uint32_t from, uint32_t to, unsigned slow)
{
	bool ok = v->nfindings == 1 && v->findings[0].kind ==
	    PAIRS_FINDING_LINK && v->findings[0].from == from &&
	    v->findings[0].to == to && v->findings[0].slow == slow && !v->pass;

	if (!ok)
		show(m, v);
	return ok;
}

static bool
is_ok(const struct pairs_matrix *m, const struct pairs_verdict *v)
{
	if (!v->pass || v->nfindings != 0)
		show(m, v);
	return v->pass && v->nfindings == 0;
}

static void
test_verdict_uniform(void)
{
	struct synth s;
	struct pairs_matrix m;
	struct pairs_verdict v;

	for (uint32_t n = 2; n <= 17; n++) {
		synth_init(&s, SYNTH_UNIFORM, n);
		if (judge(&s, &m, &v, NULL) != 0) {
			CHECK(0);
			continue;
		}
		CHECKF(is_ok(&m, &v), "world %u", n);
		CHECK(strcmp(pairs_verdict_kind(&v), "ok") == 0);
		CHECK(v.median_gbps[PAIRS_MODE_ALONE] == 2);
		CHECK(v.threshold_used[PAIRS_MODE_ALONE] == 0.6);
		CHECK(v.jitter[PAIRS_MODE_BOTH] == 0);
		CHECK(v.reference[PAIRS_MODE_ALONE][1] == 2);
		CHECK(isnan(v.reference[PAIRS_MODE_ALONE][0]));
		done(&m, &v);
	}
}

/*
 * Noise of +-20% on every repeat, one repeat or three, worlds 2 to 24,
 * fifty seeds each: never a verdict.  0.8 / 1.2 is above the default
 * threshold, whatever the reference.
 */
static void
test_verdict_noise(void)
{
	struct synth s;
	struct pairs_matrix m;
	struct pairs_verdict v;
	unsigned verdicts = 0, runs = 0;

	for (uint32_t n = 2; n <= 24; n++)
		for (uint32_t rep = 1; rep <= 3; rep += 2)
			for (uint64_t seed = 1; seed <= 50; seed++) {
				synth_init(&s, SYNTH_UNIFORM, n);
				s.noise = 0.2;
				s.repeats = rep;
				s.seed = seed * 7919 + n;
				if (judge(&s, &m, &v, NULL) != 0) {
					CHECK(0);
					continue;
				}
				runs++;
				if (!is_ok(&m, &v)) {
					verdicts++;
					printf("# world %u, %u repeats, seed "
					    "%llu\n", n, rep,
					    (unsigned long long)s.seed);
				}
				done(&m, &v);
			}
	CHECKF(verdicts == 0, "%u verdicts in %u noisy runs", verdicts, runs);
}

static void
test_verdict_host(void)
{
	struct synth s;
	struct pairs_matrix m;
	struct pairs_verdict v;

	/* Both ways, every world from 3, noisy, the slow host anywhere. */
	for (uint32_t n = 3; n <= 16; n++)
		for (uint32_t x = 0; x < n; x += n / 3 + 1) {
			synth_init(&s, SYNTH_HOST, n);
			s.x = x;
			s.noise = 0.2;
			s.seed = n * 31 + x;
			if (judge(&s, &m, &v, NULL) != 0) {
				CHECK(0);
				continue;
			}
			CHECKF(only_host(&m, &v, x), "world %u host %u", n, x);
			if (v.nfindings == 1) {
				CHECK(v.findings[0].slow_peers == n - 1);
				CHECK(v.findings[0].peers == n - 1);
				CHECK(v.findings[0].sends == 3);
				CHECK(v.findings[0].receives == 3);
			}
			/* Its cells are outlined, the others not. */
			for (uint32_t a = 0; a < n; a++)
				for (uint32_t b = 0; b < n; b++)
					if (a != b)
						CHECK(((v.flags[PAIRS_MODE_ALONE]
						    [a * n + b] &
						    PAIRS_CELL_SLOW) != 0) ==
						    (a == x || b == x));
			done(&m, &v);
		}
	/* A tbf on its egress: its sends, and its receives only at once. */
	for (uint32_t n = 4; n <= 12; n++) {
		synth_init(&s, SYNTH_HOST_EGRESS, n);
		s.x = n - 2;
		s.noise = 0.1;
		s.seed = n;
		if (judge(&s, &m, &v, NULL) != 0) {
			CHECK(0);
			continue;
		}
		CHECKF(only_host(&m, &v, n - 2), "world %u", n);
		if (v.nfindings == 1) {
			CHECK(v.findings[0].sends == 3);
			CHECK(v.findings[0].receives ==
			    1u << PAIRS_MODE_BOTH);
		}
		done(&m, &v);
	}
}

static void
test_verdict_link(void)
{
	struct synth s;
	struct pairs_matrix m;
	struct pairs_verdict v;

	for (uint32_t n = 2; n <= 16; n++) {
		/* One direction, the higher rank sending: named that way. */
		synth_init(&s, SYNTH_LINK, n);
		s.x = n - 1;
		s.y = n / 2 - 1;
		s.noise = 0.2;
		s.seed = n;
		if (judge(&s, &m, &v, NULL) == 0) {
			/* World 2 has one pair: both directions at once
			 * are the median there, and only alone shows. */
			CHECKF(only_link(&m, &v, n - 1, n / 2 - 1,
			    PAIRS_SLOW_FORWARD_ALONE | (n == 2 ? 0 :
			    PAIRS_SLOW_FORWARD_BOTH | PAIRS_SLOW_BACK_BOTH)),
			    "world %u one way", n);
			CHECK(strcmp(pairs_verdict_kind(&v), "link") == 0);
			done(&m, &v);
		} else {
			CHECK(0);
		}
		/* Both directions: told apart from a host from world 3. */
		synth_init(&s, SYNTH_LINK_BOTH, n);
		s.x = 0;
		s.y = n - 1;
		s.noise = 0.2;
		s.seed = n + 100;
		if (judge(&s, &m, &v, NULL) != 0) {
			CHECK(0);
			continue;
		}
		if (n == 2)
			/* One pair, both directions slow: that is the
			 * median, so without a baseline nothing shows. */
			CHECK(is_ok(&m, &v));
		else
			CHECKF(only_link(&m, &v, 0, n - 1, 15),
			    "world %u both ways", n);
		done(&m, &v);
		/* Only with both at once. */
		synth_init(&s, SYNTH_LINK_AT_ONCE, n);
		s.x = n / 2;
		s.y = n / 2 - 1;
		s.noise = 0.2;
		s.seed = n + 200;
		if (judge(&s, &m, &v, NULL) != 0) {
			CHECK(0);
			continue;
		}
		if (n == 2)
			CHECK(is_ok(&m, &v));
		else
			CHECKF(only_link(&m, &v, n / 2 - 1, n / 2,
			    PAIRS_SLOW_FORWARD_BOTH | PAIRS_SLOW_BACK_BOTH),
			    "world %u at once", n);
		done(&m, &v);
	}
}

/*
 * The second pass (bench pairs measures every pair again when the first
 * verdict is not a pass; each cell keeps the faster pass's repeats): a
 * link slow in one pass only (a stall of a busy machine) is gone, a link
 * slow in both stays named, and the faster pass's repeats are kept whole.
 */
/* A matrix of world n, noise 5%, whose link x -> y runs at slow x. */
static int
noisy_link(struct pairs_matrix *m, uint32_t n, uint32_t x, uint32_t y,
    double slow, uint64_t seed)
{
	struct synth s;

	synth_init(&s, SYNTH_LINK, n);
	s.x = x;
	s.y = y;
	s.slow = slow;
	s.noise = 0.05;
	s.seed = seed;
	return synth_build(&s, m);
}

static void
test_second_pass(void)
{
	struct pairs_verdict_options o;
	struct pairs_matrix first, second;
	struct pairs_verdict v;
	struct synth s;
	const uint32_t n = 6;
	char why[256];

	pairs_verdict_options_init(&o);
	/* A stall: 2 -> 1 slow in the first pass, fine in the second. */
	CHECK(noisy_link(&first, n, 2, 1, 0.55, 7) == 0);
	synth_init(&s, SYNTH_UNIFORM, n);
	s.noise = 0.05;
	s.seed = 8;
	CHECK(synth_build(&s, &second) == 0);
	CHECK(pairs_verdict_run(&first, &o, &v, why, sizeof(why)) == 0 && !v.pass);
	pairs_verdict_fini(&v);
	pairs_matrix_keep_faster(&first, &second);
	CHECK(memcmp(pairs_cell(&first, PAIRS_MODE_ALONE, 2, 1),
	    pairs_cell(&second, PAIRS_MODE_ALONE, 2, 1),
	    first.repeats * sizeof(double)) == 0);
	CHECK(pairs_verdict_run(&first, &o, &v, why, sizeof(why)) == 0);
	CHECK(is_ok(&first, &v));
	pairs_verdict_fini(&v);
	pairs_matrix_fini(&first);
	pairs_matrix_fini(&second);
	/* A slow link both times: still that link, that way. */
	CHECK(noisy_link(&first, n, 1, 4, 0.1, 9) == 0);
	CHECK(noisy_link(&second, n, 1, 4, 0.1, 10) == 0);
	pairs_matrix_keep_faster(&first, &second);
	CHECK(pairs_verdict_run(&first, &o, &v, why, sizeof(why)) == 0);
	CHECK(only_link(&first, &v, 1, 4, PAIRS_SLOW_FORWARD_ALONE |
	    PAIRS_SLOW_FORWARD_BOTH | PAIRS_SLOW_BACK_BOTH));
	pairs_verdict_fini(&v);
	pairs_matrix_fini(&first);
	pairs_matrix_fini(&second);
}

static void
test_verdict_fabric(void)
{
	struct synth s, base;
	struct pairs_matrix m, b;
	struct pairs_verdict v;
	struct pairs_verdict_options o;
	double *cells[PAIRS_MODE_COUNT];

	for (uint32_t n = 2; n <= 9; n++) {
		/* Without a baseline a slow fabric is its own median. */
		synth_init(&s, SYNTH_UNIFORM, n);
		s.scale = 0.3;
		s.noise = 0.1;
		if (judge(&s, &m, &v, NULL) != 0) {
			CHECK(0);
			continue;
		}
		CHECKF(is_ok(&m, &v), "world %u", n);
		done(&m, &v);
		/* Against last week's: all links below baseline. */
		synth_init(&base, SYNTH_UNIFORM, n);
		base.noise = 0.1;
		base.seed = 99;
		if (synth_build(&base, &b) != 0) {
			CHECK(0);
			continue;
		}
		for (int mode = 0; mode < PAIRS_MODE_COUNT; mode++) {
			cells[mode] = calloc((size_t)n * n, sizeof(double));
			for (uint32_t i = 0; i < n; i++)
				for (uint32_t j = 0; j < n; j++)
					cells[mode][i * n + j] =
					    pairs_cell_median(&b, mode, i, j);
		}
		pairs_verdict_options_init(&o);
		o.baseline[0] = cells[0];
		o.baseline[1] = cells[1];
		o.baseline_name = "last-week.json";
		if (judge(&s, &m, &v, &o) == 0) {
			CHECKF(v.nfindings == 1 && v.findings[0].kind ==
			    PAIRS_FINDING_FABRIC, "world %u", n);
			CHECK(fabs(v.baseline_ratio[PAIRS_MODE_ALONE] - 0.3) <
			    0.1);
			CHECK(strcmp(pairs_verdict_kind(&v), "fabric") == 0);
			done(&m, &v);
		} else {
			CHECK(0);
		}
		/* The same speed as the baseline: ok, against it. */
		s.scale = 1;
		if (judge(&s, &m, &v, &o) == 0) {
			CHECKF(is_ok(&m, &v), "world %u", n);
			done(&m, &v);
		} else {
			CHECK(0);
		}
		/* Both directions of world 2's one pair: only a baseline
		 * tells, and calls it the fabric. */
		if (n == 2) {
			synth_init(&s, SYNTH_LINK_BOTH, 2);
			s.x = 0;
			s.y = 1;
			if (judge(&s, &m, &v, &o) == 0) {
				CHECK(v.nfindings == 1 && v.findings[0].kind ==
				    PAIRS_FINDING_FABRIC);
				done(&m, &v);
			}
		}
		free(cells[0]);
		free(cells[1]);
		pairs_matrix_fini(&b);
	}
}

/* A baseline whose cells differ (a fabric of two speeds): a host that
 * regressed against it is named, though today's cells are no outliers
 * of today's median. */
static void
test_verdict_regression(void)
{
	struct synth s;
	struct pairs_matrix m;
	struct pairs_verdict v;
	struct pairs_verdict_options o;
	uint32_t n = 8;
	double *cells[PAIRS_MODE_COUNT];

	synth_init(&s, SYNTH_UNIFORM, n);
	if (synth_build(&s, &m) != 0) {
		CHECK(0);
		return;
	}
	pairs_verdict_options_init(&o);
	for (int mode = 0; mode < PAIRS_MODE_COUNT; mode++) {
		cells[mode] = calloc((size_t)n * n, sizeof(double));
		o.baseline[mode] = cells[mode];
		for (uint32_t i = 0; i < n; i++)
			for (uint32_t j = 0; j < n; j++)
				/* Host 5 used to be 4x faster than the rest. */
				cells[mode][i * n + j] = i == 5 || j == 5 ? 8 :
				    2;
	}
	o.baseline_name = "monday.json";
	CHECK(pairs_verdict_run(&m, &o, &v, NULL, 0) == 0);
	CHECK(only_host(&m, &v, 5));
	pairs_verdict_fini(&v);
	/* Without it, the run is uniform. */
	o.baseline[0] = o.baseline[1] = NULL;
	CHECK(pairs_verdict_run(&m, &o, &v, NULL, 0) == 0);
	CHECK(is_ok(&m, &v));
	pairs_verdict_fini(&v);
	pairs_matrix_fini(&m);
	free(cells[0]);
	free(cells[1]);
}

static void
test_verdict_several(void)
{
	struct synth s;
	struct pairs_matrix m;
	struct pairs_verdict v;

	/* Two independent links: a list, lower ranks first. */
	synth_init(&s, SYNTH_LINKS, 8);
	s.x = 1;
	s.y = 4;
	s.noise = 0.2;
	if (judge(&s, &m, &v, NULL) == 0) {
		CHECK(v.nfindings == 2);
		CHECK(strcmp(pairs_verdict_kind(&v), "several") == 0);
		if (v.nfindings == 2) {
			CHECK(v.findings[0].kind == PAIRS_FINDING_LINK &&
			    v.findings[0].from == 1 && v.findings[0].to == 4);
			CHECK(v.findings[1].kind == PAIRS_FINDING_LINK &&
			    v.findings[1].from == 5 && v.findings[1].to == 3);
		}
		done(&m, &v);
	} else {
		CHECK(0);
	}
	/* Two slow hosts of eight: both named, in host order. */
	synth_init(&s, SYNTH_TWO_HOSTS, 8);
	s.x = 6;
	s.y = 2;
	s.noise = 0.2;
	if (judge(&s, &m, &v, NULL) == 0) {
		CHECK(v.nfindings == 2);
		if (v.nfindings == 2) {
			CHECK(v.findings[0].kind == PAIRS_FINDING_HOST &&
			    v.findings[0].host == 2);
			CHECK(v.findings[1].kind == PAIRS_FINDING_HOST &&
			    v.findings[1].host == 6);
		} else {
			show(&m, &v);
		}
		done(&m, &v);
	} else {
		CHECK(0);
	}
}

/* Two ranks a host, six hosts: cells within a host are faster (local)
 * and judged among themselves; host 2 is ranks 4 and 5. */
static void
test_verdict_ranks_per_host(void)
{
	struct synth s;
	struct pairs_matrix m;
	struct pairs_verdict v;
	char buf[1024];

	synth_init(&s, SYNTH_HOST, 12);
	s.per_host = 2;
	s.x = 2;
	s.noise = 0.2;
	if (judge(&s, &m, &v, NULL) != 0) {
		CHECK(0);
		return;
	}
	CHECK(m.nhosts == 6);
	CHECK(only_host(&m, &v, 2));
	pairs_finding_text(&m, &v, &v.findings[0], buf, sizeof(buf));
	CHECKF(strncmp(buf, "host 10.0.0.3 (ranks 4, 5) is slow: 5 of its 5 "
	    "peer hosts below 0.6x the other hosts' median, sending alone and "
	    "at once, receiving alone and at once; worst rank ", 150) == 0,
	    "%s", buf);
	/* The cells between ranks 4 and 5 are not the host's. */
	CHECK(!(v.flags[PAIRS_MODE_ALONE][4 * 12 + 5] & PAIRS_CELL_SLOW));
	CHECK(v.reference[PAIRS_MODE_ALONE][4 * 12 + 5] > 7);
	done(&m, &v);
	/* Every rank on one host: a slow pair is a link on it. */
	synth_init(&s, SYNTH_LINK, 4);
	s.per_host = 4;
	s.x = 2;
	s.y = 1;
	if (judge(&s, &m, &v, NULL) != 0) {
		CHECK(0);
		return;
	}
	CHECK(m.nhosts == 1);
	CHECK(only_link(&m, &v, 2, 1, PAIRS_SLOW_FORWARD_ALONE |
	    PAIRS_SLOW_FORWARD_BOTH | PAIRS_SLOW_BACK_BOTH));
	pairs_finding_text(&m, &v, &v.findings[0], buf, sizeof(buf));
	CHECKF(strcmp(buf, "link rank 2 -> rank 1 on 10.0.0.1 is slow: 0.8 "
	    "GB/s alone against 8 GB/s (0.1x); rank 1 -> rank 2 is fine alone, "
	    "slow only while both directions run") == 0, "%s", buf);
	done(&m, &v);
}

/* The verdict's words for a noiseless world n of kind with x and y. */
static char *
words(enum synth_kind kind, uint32_t n, uint32_t x, uint32_t y, char *buf,
    size_t size)
{
	struct synth s;
	struct pairs_matrix m;
	struct pairs_verdict v;

	synth_init(&s, kind, n);
	s.x = x;
	s.y = y;
	snprintf(buf, size, "(no verdict)");
	if (judge(&s, &m, &v, NULL) == 0) {
		pairs_verdict_text(&m, &v, buf, size);
		done(&m, &v);
	}
	return buf;
}

static void
test_verdict_words(void)
{
	char buf[1024];

	/* World 3: host 0 slow, the pair 1-2 fine. */
	CHECKF(strcmp(words(SYNTH_HOST, 3, 0, 0, buf, sizeof(buf)), "host "
	    "10.0.0.1 (rank 0) is slow: 2 of its 2 peer hosts below 0.6x the "
	    "other hosts' median, sending alone and at once, receiving alone "
	    "and at once; worst rank 0 -> rank 1 with both directions at once: "
	    "0.2 GB/s against 2 GB/s") == 0, "%s", buf);
	CHECKF(strcmp(words(SYNTH_LINK_BOTH, 4, 1, 3, buf, sizeof(buf)),
	    "link 10.0.0.2 <-> 10.0.0.4 (rank 1 <-> rank 3) is slow in both "
	    "directions: 0.2 and 0.2 GB/s alone against 2 GB/s") == 0, "%s",
	    buf);
	CHECKF(strcmp(words(SYNTH_LINK_AT_ONCE, 4, 1, 3, buf, sizeof(buf)),
	    "link 10.0.0.2 <-> 10.0.0.4 (rank 1 <-> rank 3) is slow with both "
	    "directions at once: 0.2 GB/s rank 1 -> rank 3 against 2 GB/s; "
	    "each direction alone is fine") == 0, "%s", buf);
	CHECKF(strcmp(words(SYNTH_UNIFORM, 4, 0, 0, buf, sizeof(buf)), "ok: "
	    "no host or link below 0.6x the median (2 GB/s alone, 2 GB/s both "
	    "directions at once)") == 0, "%s", buf);
}

static void
test_verdict_unsteady(void)
{
	struct synth s;
	struct pairs_matrix m;
	struct pairs_verdict v;
	char buf[1024];

	/* Repeats that spread +-80%: no margin is left to judge with. */
	synth_init(&s, SYNTH_HOST, 6);
	s.noise = 0.8;
	if (judge(&s, &m, &v, NULL) != 0) {
		CHECK(0);
		return;
	}
	CHECK(!v.pass && v.nfindings == 1 &&
	    v.findings[0].kind == PAIRS_FINDING_UNSTEADY);
	CHECK(strcmp(pairs_verdict_kind(&v), "unsteady") == 0);
	pairs_verdict_text(&m, &v, buf, sizeof(buf));
	CHECKF(strncmp(buf, "too unsteady to judge: the repeats of a cell "
	    "spread +-", 52) == 0, "%s", buf);
	CHECK(v.threshold_used[0] < 0.3);
	done(&m, &v);
	/* +-20% over three repeats narrows the threshold only a little. */
	synth_init(&s, SYNTH_UNIFORM, 6);
	s.noise = 0.2;
	if (judge(&s, &m, &v, NULL) != 0) {
		CHECK(0);
		return;
	}
	CHECK(v.jitter[PAIRS_MODE_ALONE] > 0.05 &&
	    v.jitter[PAIRS_MODE_ALONE] < 0.2);
	CHECK(v.threshold_used[PAIRS_MODE_ALONE] > 0.4);
	done(&m, &v);
}

static void
test_verdict_errors(void)
{
	struct synth s;
	struct pairs_matrix m;
	struct pairs_verdict v;
	struct pairs_verdict_options o;
	double cells[16] = { 0 };
	char why[256];

	synth_init(&s, SYNTH_UNIFORM, 4);
	if (synth_build(&s, &m) != 0) {
		CHECK(0);
		return;
	}
	pairs_verdict_options_init(&o);
	o.threshold = 1;
	CHECK(pairs_verdict_run(&m, &o, &v, why, sizeof(why)) == -1);
	CHECK(strcmp(why, "threshold 1: a fraction above 0 and below 1") == 0);
	pairs_verdict_fini(&v);
	o.threshold = 0.6;
	o.baseline[0] = o.baseline[1] = cells;
	o.baseline_name = "old.json";
	CHECK(pairs_verdict_run(&m, &o, &v, why, sizeof(why)) == -1);
	CHECK(strcmp(why, "old.json: rank 0 -> rank 1 (both) is 0 GB/s, not "
	    "a speed") == 0);
	pairs_verdict_fini(&v);
	pairs_matrix_fini(&m);
	/* An incomplete matrix names its hole; a world of one has none. */
	CHECK(pairs_matrix_init(&m, 2, 1, four, why, sizeof(why)) == 0);
	o.baseline[0] = o.baseline[1] = NULL;
	CHECK(pairs_verdict_run(&m, &o, &v, why, sizeof(why)) == -1);
	CHECK(strcmp(why, "no measurement of rank 0 -> rank 1 (both "
	    "directions at once)") == 0);
	pairs_matrix_fini(&m);
	CHECK(pairs_matrix_init(&m, 1, 1, four, why, sizeof(why)) == 0);
	CHECK(pairs_verdict_run(&m, &o, &v, why, sizeof(why)) == -1);
	CHECK(strcmp(why, "a world of one has no pairs to judge") == 0);
	pairs_matrix_fini(&m);
}

/* The same matrix, the same verdict; and a large world in one piece. */
static void
test_verdict_large(void)
{
	struct synth s;
	struct pairs_matrix m;
	struct pairs_verdict v, w;
	struct pairs_verdict_options o;

	synth_init(&s, SYNTH_HOST, 128);
	s.x = 77;
	s.noise = 0.2;
	if (judge(&s, &m, &v, NULL) != 0) {
		CHECK(0);
		return;
	}
	CHECK(only_host(&m, &v, 77));
	pairs_verdict_options_init(&o);
	CHECK(pairs_verdict_run(&m, &o, &w, NULL, 0) == 0);
	CHECK(w.nfindings == v.nfindings &&
	    memcmp(w.findings, v.findings, v.nfindings *
	    sizeof(*v.findings)) == 0);
	CHECK(memcmp(w.flags[0], v.flags[0], 128 * 128) == 0);
	pairs_verdict_fini(&w);
	done(&m, &v);
}

int
main(void)
{
	TEST_RUN(test_plan_worlds);
	TEST_RUN(test_plan_table);
	TEST_RUN(test_phases);
	TEST_RUN(test_estimate);
	TEST_RUN(test_sample_wire);
	TEST_RUN(test_matrix_add);
	TEST_RUN(test_matrix_init);
	TEST_RUN(test_verdict_uniform);
	TEST_RUN(test_verdict_noise);
	TEST_RUN(test_verdict_host);
	TEST_RUN(test_verdict_link);
	TEST_RUN(test_second_pass);
	TEST_RUN(test_verdict_fabric);
	TEST_RUN(test_verdict_regression);
	TEST_RUN(test_verdict_several);
	TEST_RUN(test_verdict_ranks_per_host);
	TEST_RUN(test_verdict_words);
	TEST_RUN(test_verdict_unsteady);
	TEST_RUN(test_verdict_errors);
	TEST_RUN(test_verdict_large);
	return TEST_DONE();
}
