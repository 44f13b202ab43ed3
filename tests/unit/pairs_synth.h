/*
 * pairs_synth.h - synthetic all-pairs matrices for the C tests of `bench
 * pairs`: a fabric of one speed, with a slow host, a slow link in one or
 * both directions, a slow fabric, several ranks per host, and noise of a
 * chosen size from a seeded generator, so every run sees the same
 * numbers.
 */
#ifndef SR_PAIRS_SYNTH_H
#define SR_PAIRS_SYNTH_H

#include <stdio.h>
#include <string.h>

#include "pairs_matrix.h"

enum synth_kind {
	SYNTH_UNIFORM,
	SYNTH_HOST,		/* host x slow both ways, every mode */
	SYNTH_HOST_EGRESS,	/* x's sends slow (a tbf on its egress): its
				 * peers' sends to it slow only at once */
	SYNTH_LINK,		/* x -> y slow; y -> x slow only at once */
	SYNTH_LINK_BOTH,	/* x <-> y slow both ways, every mode */
	SYNTH_LINK_AT_ONCE,	/* x <-> y slow only with both at once */
	SYNTH_TWO_HOSTS,	/* hosts x and y slow both ways */
	SYNTH_LINKS		/* x -> y and y+1 -> x+2 slow */
};

struct synth {
	enum synth_kind kind;
	uint32_t world, repeats;
	uint32_t per_host;	/* ranks per host label (1: one each) */
	uint32_t x, y;		/* hosts (SYNTH_HOST*) or ranks (links) */
	double slow;		/* the slow cells' factor */
	double scale;		/* every cell's factor (a slow fabric) */
	double noise;		/* each repeat x (1 +- noise), uniform */
	double local;		/* cells within a host: this x faster */
	uint64_t seed;
};

static inline void
synth_init(struct synth *s, enum synth_kind kind, uint32_t world)
{
	memset(s, 0, sizeof(*s));
	s->kind = kind;
	s->world = world;
	s->repeats = 3;
	s->per_host = 1;
	s->slow = 0.1;
	s->scale = 1;
	s->local = 4;
	s->seed = 1;
}

static inline uint64_t
synth_next(uint64_t *state)
{
	uint64_t z = (*state += 0x9e3779b97f4a7c15ull);

	z = (z ^ (z >> 30)) * 0xbf58476d1ce4e5b9ull;
	z = (z ^ (z >> 27)) * 0x94d049bb133111ebull;
	return z ^ (z >> 31);
}

/* A uniform number in [-1, 1]. */
static inline double
synth_unit(uint64_t *state)
{
	return (double)(synth_next(state) >> 11) / (double)(1ull << 52) - 1;
}

static inline uint32_t
synth_host(const struct synth *s, uint32_t rank)
{
	return rank / s->per_host;
}

/* The true GB/s of from -> to in mode, before noise: 2 GB/s between
 * hosts, local x that within one. */
static inline double
synth_speed(const struct synth *s, enum pairs_mode mode, uint32_t from,
    uint32_t to)
{
	uint32_t hf = synth_host(s, from), ht = synth_host(s, to);
	double v = hf == ht ? 2 * s->local : 2;
	bool at_once = mode == PAIRS_MODE_BOTH;

	switch (s->kind) {
	case SYNTH_UNIFORM:
		break;
	case SYNTH_HOST:
		if (hf != ht && (hf == s->x || ht == s->x))
			v *= s->slow;
		break;
	case SYNTH_HOST_EGRESS:
		if (hf != ht && (hf == s->x || (ht == s->x && at_once)))
			v *= s->slow;
		break;
	case SYNTH_LINK:
		if ((from == s->x && to == s->y) ||
		    (from == s->y && to == s->x && at_once))
			v *= s->slow;
		break;
	case SYNTH_LINK_BOTH:
		if ((from == s->x && to == s->y) ||
		    (from == s->y && to == s->x))
			v *= s->slow;
		break;
	case SYNTH_LINK_AT_ONCE:
		if (at_once && ((from == s->x && to == s->y) ||
		    (from == s->y && to == s->x)))
			v *= s->slow;
		break;
	case SYNTH_TWO_HOSTS:
		if (hf != ht && (hf == s->x || ht == s->x || hf == s->y ||
		    ht == s->y))
			v *= s->slow;
		break;
	case SYNTH_LINKS:
		if ((from == s->x && to == s->y) ||
		    (from == s->y + 1 && to == s->x + 2))
			v *= s->slow;
		break;
	}
	return v * s->scale;
}

/* A label of rank r's host: 10.0.0.(host + 1). */
static inline void
synth_labels(const struct synth *s, char (*buf)[PAIRS_LABEL_MAX],
    const char **labels)
{
	for (uint32_t r = 0; r < s->world; r++) {
		snprintf(buf[r], PAIRS_LABEL_MAX, "10.0.%u.%u",
		    synth_host(s, r) / 250, synth_host(s, r) % 250 + 1);
		labels[r] = buf[r];
	}
}

/* m filled with s's cells; 0, or -1 (the test then fails). */
static inline int
synth_build(const struct synth *s, struct pairs_matrix *m)
{
	static char buf[PAIRS_MATRIX_MAX][PAIRS_LABEL_MAX];
	static const char *labels[PAIRS_MATRIX_MAX];
	char why[256];
	uint64_t state = s->seed;
	struct pairs_plan plan;

	synth_labels(s, buf, labels);
	if (pairs_plan_init(&plan, s->world) != 0 ||
	    pairs_matrix_init(m, s->world, s->repeats, labels, why,
	    sizeof(why)) != 0) {
		printf("# synth_build: %s\n", why);
		return -1;
	}
	for (int mode = 0; mode < PAIRS_MODE_COUNT; mode++)
		for (uint32_t a = 0; a < s->world; a++)
			for (uint32_t b = 0; b < s->world; b++) {
				double v[PAIRS_REPEATS_MAX];

				if (a == b)
					continue;
				for (uint32_t k = 0; k < s->repeats; k++)
					v[k] = synth_speed(s, mode, a, b) *
					    (1 + s->noise * synth_unit(&state));
				if (pairs_matrix_set(m, mode, a, b, v) != 0)
					return -1;
				m->latency_us[(size_t)a * s->world + b] = 25 +
				    (a + b) % 7;
				m->bytes[(size_t)a * s->world + b] = 64u << 20;
				m->round[(size_t)a * s->world + b] =
				    pairs_plan_round_of(&plan, a, b);
			}
	return 0;
}

#endif
