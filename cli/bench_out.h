/*
 * bench_out.h - what a `silvic-ring bench` sweep (bench.c) measures, and
 * its writers (bench_out.c): nccl-tests' table, CSV, JSON records, and
 * the messages that name a row.  The sweep decides when to write and
 * only rank 0 writes; the writers decide how.
 */
#ifndef SR_BENCH_OUT_H
#define SR_BENCH_OUT_H

#include <stdint.h>
#include <stdio.h>

#include "bench_data.h"

/* One half of a row: out of place or in place. */
struct bench_half {
	struct bench_timing t;
	double algbw, busbw;
	uint64_t wrong;
};

struct bench_row {
	enum bench_coll coll;
	enum sr_dtype dtype;
	enum sr_op op;
	uint32_t root;		/* broadcast's, a rank (with --group a member
				 * index: bench_row_root gives the rank) */
	uint64_t size;		/* the sweep's step, before rounding */
	uint64_t count, bytes, iters;
	struct bench_half h[BENCH_PLACE_COUNT];
	double busbw;		/* the lower half's: what --min-busbw checks */
	uint64_t wrong;		/* both halves' */
};

/* A sweep: its ring and buffers (bench.c's), and what it found so far
 * (the writers'). */
struct bench_sweep {
	struct sr_ring *ring;
	const struct bench_options *o;
	FILE *out;
	char record_why[160];	/* why a row could not be recorded */
	/*
	 * Where the sweeps run: rank and world are this rank's and the
	 * ring's, or with --group its member index (UINT32_MAX when it is
	 * not a member) and the group's size; ranks are then the members'
	 * (NULL on the ring).  Only ring_rank 0 writes the results.
	 */
	uint32_t rank, world;
	uint32_t ring_rank;
	struct sr_group *group;
	const uint32_t *ranks;
	bool member;
	uint8_t *send, *recv;
	uint64_t iters_max;
	uint64_t *ns;		/* this rank's time of each iteration */
	uint8_t *wire;		/* every rank's, little-endian */
	double *times;		/* every rank's, in seconds */
	uint64_t last_size;	/* the sweep's largest step */
	uint64_t rows, wrong, wrong_rows;
	double busbw_sum;	/* both halves of every row */
	struct bench_row *below;	/* rows under --min-busbw */
	size_t nbelow;
	uint64_t gated;		/* rows --min-busbw checked */
	uint64_t gated_min, gated_max;	/* their smallest and largest size */
	struct bench_row lowest;	/* the gated row with the lowest busbw */
	int64_t progress_ns;	/* a progress line after this long */
	int64_t row_start_ns, last_line_ns;
	struct sr_error err;
};

/* What a row runs, for messages: "allreduce f32 sum", "allgather f32";
 * returns buf. */
char *bench_row_label(const struct bench_row *row, char *buf, size_t size);
/* The op column: the op's name, or "none" (only allreduce has one). */
const char *bench_row_op(const struct bench_row *row);
/* A broadcast row's root as a rank. */
uint32_t bench_row_root(const struct bench_sweep *s,
    const struct bench_row *row);

/*
 * The start of the results: the text table's header (the ranks, the
 * options), the JSON header record, or the CSV header line (when a sweep
 * runs, not links alone).
 */
void bench_header_write(FILE *out, const struct bench_options *o,
    char **addresses, uint32_t world, const char *congestion);
/* A collective's section of the text table: its column heads, and after
 * its rows nccl-tests' closing lines; nothing for CSV and JSON. */
void bench_section_begin(FILE *out, const struct bench_options *o,
    enum bench_coll coll);
void bench_section_end(FILE *out, const struct bench_options *o,
    uint64_t rows, double busbw, uint64_t wrong);
/* One row: a table line, a CSV line or a result record. */
void bench_row_write(FILE *out, const struct bench_sweep *s,
    const struct bench_row *row);
/* Names the rows under --min-busbw on stderr (and counts them in the
 * table). */
void bench_below_report(const struct bench_sweep *s);
/*
 * The end of the results, with the exit status: the summary record, or
 * the table's footer (--min-busbw's verdict, the check's); nothing for
 * CSV or when no row ran.
 */
void bench_summary_write(FILE *out, const struct bench_sweep *s,
    const struct bench_links_result *links, int status);

#endif
