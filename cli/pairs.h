/*
 * pairs.h - what `silvic-ring bench pairs` calls once the mesh runs its
 * rounds: the plan (pairs_plan.h), the per-round sample every rank fills
 * and the matrix they make (pairs_matrix.h), the verdict
 * (pairs_verdict.h), and here the writers of what it found (pairs_out.c:
 * the text table and the JSON records), the SVG heatmap (pairs_svg.c)
 * and the reader of an earlier run's JSON for --baseline
 * (pairs_baseline.c).
 *
 * The command's life, on every rank (rank 0 alone writes):
 *
 *   pairs_plan_init(&plan, world);
 *   probe, then pairs_header_write(out, &report, pairs_plan_seconds(..))
 *   for each round k: run its three phases with pairs_plan_partner(),
 *       fill a struct pairs_sample, pairs_sample_encode, allgather,
 *       pairs_sample_decode and pairs_matrix_add each rank's;
 *   pairs_matrix_complete, pairs_verdict_run (with the baseline's cells);
 *   pairs_table_write or pairs_json_write; pairs_svg_write with --svg;
 *   exit 6 (EXIT_THRESHOLD) unless the verdict passed.
 *
 * None of these touches a socket; the writers only write to the FILE or
 * path they are given.
 */
#ifndef SR_PAIRS_H
#define SR_PAIRS_H

#include <stdbool.h>
#include <stdint.h>
#include <stdio.h>

#include "pairs_plan.h"
#include "pairs_matrix.h"
#include "pairs_verdict.h"
#include "pairs_svg.h"

/* Above this world the text table gives the worst cells and each host's
 * summary instead of the N x N matrix. */
#define PAIRS_TABLE_MAX 16
/* The worst cells the text table names beyond PAIRS_TABLE_MAX. */
#define PAIRS_WORST_SHOWN 20

/* What the writers show.  v is NULL for the header, written before the
 * run. */
struct pairs_report {
	const struct pairs_plan *plan;
	const struct pairs_matrix *m;
	const struct pairs_verdict *v;
	char *const *addresses;		/* each rank's host:port */
	uint64_t warmup;		/* untimed transfers of each phase */
	double threshold;		/* --threshold */
	const char *baseline;		/* --baseline FILE, or NULL */
	/* its cells (struct pairs_baseline's), or NULL */
	const double *baseline_cells[PAIRS_MODE_COUNT];
	unsigned passes;		/* 2 when every pair was measured again */
};

/*
 * Before the run: the text table's head (ranks and addresses, the plan,
 * which phase is which, "# estimate: about 12 s for 5 rounds"), or the
 * JSON header record {"type":"pairs",...}.
 */
void pairs_header_write(FILE *out, const struct pairs_report *r,
    double estimate_s, bool json);
/*
 * After it: up to PAIRS_TABLE_MAX ranks the N x N matrices of GB/s
 * (alone, both at once) and latency, slow cells marked '*'; beyond, the
 * PAIRS_WORST_SHOWN worst cells and each host's summary; then the
 * medians, the thresholds and one "# verdict: " line a finding (or the
 * "ok" line).  0, or -1 before writing anything when out of memory.
 */
int pairs_table_write(FILE *out, const struct pairs_report *r);
/* The JSON records: one "pair" a direction, one "host" a host, then the
 * "verdict" with the exit status.  0, or -1 as pairs_table_write. */
int pairs_json_write(FILE *out, const struct pairs_report *r, int status);

/* A JSON string, or null for NULL or ""; a whole number, or null when
 * has is false (the writers of bench pairs and bench connect). */
void pairs_json_string_or_null(FILE *out, const char *s);
void pairs_json_index_or_null(FILE *out, bool has, uint32_t v);

/* ------------------------------------------------------ --baseline */

/* An earlier run's cells, for pairs_verdict_options.baseline. */
struct pairs_baseline {
	uint32_t world;
	double *cells[PAIRS_MODE_COUNT];	/* [from * world + to] */
};

/*
 * Reads an earlier `bench pairs --json` output for the run of matrix m
 * (its world and host labels, nothing measured needed): the header
 * record, then a "pair" record for every direction; other records are
 * passed over.  0, or -1 with why naming the file, and the line where
 * there is one: not JSON, another schema, another world or other hosts
 * ("FILE:1: the baseline ran world 4, this run world 6"), a cell twice
 * or missing, a speed that is not a positive number.
 */
int pairs_baseline_read(const char *path, const struct pairs_matrix *m,
    struct pairs_baseline *b, char *why, size_t why_size);
/* The same from an open stream, name for the messages. */
int pairs_baseline_load(FILE *in, const char *name,
    const struct pairs_matrix *m, struct pairs_baseline *b, char *why,
    size_t why_size);
void pairs_baseline_fini(struct pairs_baseline *b);

#endif
