/*
 * pairs_matrix.h - what `silvic-ring bench pairs` measured
 * (pairs_matrix.c): per direction i -> j, each repeat's GB/s with both
 * directions at once and with the direction alone, the latency, the
 * transfer size; each rank's host label and the hosts they group into.
 * The command fills it from every rank's per-round samples, the
 * verdict, the writers and the baseline reader read it.  Pure: no
 * socket, no clock, no output.
 */
#ifndef SR_PAIRS_MATRIX_H
#define SR_PAIRS_MATRIX_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "pairs_plan.h"

/* Timed transfers of one phase, at most. */
#define PAIRS_REPEATS_MAX 16u
/* The largest world a matrix holds: 1024 ranks are 1M cells, 48 MiB at
 * three repeats. */
#define PAIRS_MATRIX_MAX 1024u
/* A host label: a host name or an address, without the port. */
#define PAIRS_LABEL_MAX 80

/* The two ways a direction is measured (the plan's low and high phases
 * are both "alone", each for one direction). */
enum pairs_mode {
	PAIRS_MODE_BOTH,	/* both directions at once */
	PAIRS_MODE_ALONE,	/* this direction alone */
	PAIRS_MODE_COUNT
};

/*
 * What one rank measured in one round with its partner: the command fills
 * one on every rank after each round, and every rank gets every rank's
 * (pairs_sample_encode, an allgather, pairs_sample_decode).  Times are the
 * sender's, of its own transfers to partner.
 */
struct pairs_sample {
	uint32_t rank;
	uint32_t round;
	uint32_t partner;	/* PAIRS_BYE: this rank sat the round out */
	uint32_t repeats;	/* timed transfers of each phase */
	uint64_t bytes;		/* of each transfer rank -> partner */
	double both_s[PAIRS_REPEATS_MAX];	/* while partner -> rank ran */
	double alone_s[PAIRS_REPEATS_MAX];	/* rank -> partner alone */
	double rtt_us;		/* median round trip with partner */
};

/* A sample on the wire: every field 8 bytes, little-endian, numbers as
 * u64 and doubles as their IEEE-754 bits:
 *
 *   0  rank      8  round     16  partner    24  repeats    32  bytes
 *  40  both_s[16]            168  alone_s[16]              296  rtt_us
 * 304  (end)
 */
#define PAIRS_SAMPLE_WIRE 304u

void pairs_sample_encode(const struct pairs_sample *s,
    uint8_t out[PAIRS_SAMPLE_WIRE]);
void pairs_sample_decode(const uint8_t in[PAIRS_SAMPLE_WIRE],
    struct pairs_sample *s);

struct pairs_matrix {
	uint32_t world;
	uint32_t repeats;
	char (*label)[PAIRS_LABEL_MAX];	/* each rank's host label */
	uint32_t *host;		/* each rank's host, 0 .. nhosts-1 */
	uint32_t nhosts;	/* numbered in the order of their first rank */
	uint32_t *host_rank;	/* each host's first rank */
	/* gbps[mode][(from * world + to) * repeats + k]; NaN: not measured */
	double *gbps[PAIRS_MODE_COUNT];
	double *latency_us;	/* [from * world + to]: half of from's
				 * round trip */
	uint64_t *bytes;	/* [from * world + to] */
	uint32_t *round;	/* [from * world + to]: when they met */
};

/*
 * A matrix of world ranks (1 .. PAIRS_MATRIX_MAX) with repeats (1 ..
 * PAIRS_REPEATS_MAX) per cell, nothing measured yet.  labels[r] is rank
 * r's host label (pairs_host_label makes one from an address); ranks with
 * the same label are one host.  -1 with why for a bad size, a label that
 * does not fit, or no memory; the matrix is then empty (fini is safe).
 */
int pairs_matrix_init(struct pairs_matrix *m, uint32_t world,
    uint32_t repeats, const char *const *labels, char *why,
    size_t why_size);
void pairs_matrix_fini(struct pairs_matrix *m);

/* The host of "host:port" or "[v6]:port" into label: "10.0.0.4", "::1";
 * an address that does not split is its own label.  Returns label. */
char *pairs_host_label(const char *address, char *label, size_t size);

/*
 * One rank's sample of one round into the matrix.  -1 with why when it
 * does not fit the plan: another rank or round than expected, a partner
 * the plan does not give, repeats other than the matrix's, a time that is
 * not a positive number, or a cell already filled.
 */
int pairs_matrix_add(struct pairs_matrix *m, const struct pairs_plan *plan,
    const struct pairs_sample *s, char *why, size_t why_size);
/* One cell directly (the baseline reader, the tests): repeats GB/s in
 * mode for from -> to; -1 when from == to, out of range, or a value is
 * not a positive number. */
int pairs_matrix_set(struct pairs_matrix *m, enum pairs_mode mode,
    uint32_t from, uint32_t to, const double *gbps);
/*
 * A second measuring pass's matrix `other` (same world and repeats) into
 * m: each cell keeps the repeats of whichever pass's median is faster,
 * so a cell stays slow only if it was slow both times.  Latencies, sizes
 * and rounds stay m's.
 */
void pairs_matrix_keep_faster(struct pairs_matrix *m,
    const struct pairs_matrix *other);
/* -1 with why naming the first direction (and mode) nothing filled. */
int pairs_matrix_complete(const struct pairs_matrix *m, char *why,
    size_t why_size);

/* A cell's repeats, m->repeats of them. */
const double *pairs_cell(const struct pairs_matrix *m, enum pairs_mode mode,
    uint32_t from, uint32_t to);
/* The median of a cell's repeats (its value), and its fastest and
 * slowest repeat; NaN for the diagonal or an empty cell. */
double pairs_cell_median(const struct pairs_matrix *m, enum pairs_mode mode,
    uint32_t from, uint32_t to);
double pairs_cell_max(const struct pairs_matrix *m, enum pairs_mode mode,
    uint32_t from, uint32_t to);
double pairs_cell_min(const struct pairs_matrix *m, enum pairs_mode mode,
    uint32_t from, uint32_t to);

/* The JSON and text names of a mode: "both", "alone". */
const char *pairs_mode_key(enum pairs_mode mode);

/* Words built in a caller's buffer (the verdicts'), never past its
 * size: init empties it, add appends as snprintf would. */
struct pairs_text {
	char *buf;
	size_t size, n;
};

void pairs_text_init(struct pairs_text *t, char *buf, size_t size);
void pairs_text_add(struct pairs_text *t, const char *fmt, ...)
    __attribute__((format(printf, 2, 3)));

#endif
