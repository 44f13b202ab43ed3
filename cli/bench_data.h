/*
 * bench_data.h - what `silvic-ring bench` shares between its files: the
 * options, and the pure parts (bench_data.c) that touch no socket, no
 * clock and no output: option values, the sweep's sizes and iteration
 * counts, nccl-tests' bandwidth arithmetic, the timing summary, the inputs
 * and their exact expected results, the link test's sizes and verdict.
 * The unit tests (tests/unit/test_bench.c) drive those directly.
 */
#ifndef SR_BENCH_DATA_H
#define SR_BENCH_DATA_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>

#include "cli.h"

enum bench_coll {
	BENCH_ALLREDUCE,
	BENCH_ALLGATHER,
	BENCH_BROADCAST,
	BENCH_LINKS,
	BENCH_COLL_COUNT
};

/* Below this size a sweep may run more than -n iterations (--min-time). */
#define BENCH_ADAPT_BELOW (64u << 10)
#define BENCH_ADAPT_MAX 1000
/* The link test's defaults. */
#define BENCH_LINK_BYTES (64u << 20)
#define BENCH_PROBE_BYTES (1u << 20)
#define BENCH_LINK_SECONDS 0.5		/* a transfer on a slow link */
#define BENCH_LINK_ITERS 3
#define BENCH_LINK_WARMUP 1
#define BENCH_PING_BYTES 8
#define BENCH_PINGS 100
#define BENCH_PING_WARMUP 10

/* getopt_long's codes of the long-only options (the others are their
 * letters: b e f i n w c d o). */
enum {
	BENCH_OPT_CSV = OPT_COMMAND_BASE,
	BENCH_OPT_MIN_BUSBW,
	BENCH_OPT_SEED,
	BENCH_OPT_THRESHOLD,
	BENCH_OPT_CORRUPT,
	BENCH_OPT_MIN_TIME,
	BENCH_OPT_FAIL_SLOW,
	BENCH_OPT_GROUP
};

/* A row's two halves, as nccl-tests prints them side by side. */
enum bench_place {
	BENCH_OUT_OF_PLACE,
	BENCH_IN_PLACE,
	BENCH_PLACE_COUNT
};

struct bench_options {
	unsigned colls;			/* 1 << enum bench_coll */
	uint64_t minbytes, maxbytes;
	uint64_t stepfactor;		/* > 1: multiply; else add stepbytes */
	uint64_t stepbytes;
	uint64_t iters, warmup;
	bool iters_set, warmup_set, maxbytes_set;
	bool stepfactor_set, stepbytes_set;
	uint32_t root;			/* broadcast's root (-r), a rank */
	bool root_set;
	int check;			/* 1 check, 0 off */
	unsigned dtypes;		/* 1 << enum sr_dtype */
	unsigned ops;			/* 1 << enum sr_op */
	uint64_t seed;
	double min_time;		/* seconds; 0: exactly -n iterations */
	bool min_busbw_set;
	double min_busbw;		/* GB/s */
	bool min_busbw_size_set;
	uint64_t min_busbw_size;
	double threshold;		/* links: slow below this x median */
	bool fail_slow;
	bool corrupt;
	uint32_t corrupt_rank;
	uint64_t corrupt_index;
	bool json, csv;
	/* --group: the ranks the sweeps run on, in member order (NULL: the
	 * whole ring); bench_options_fini frees them. */
	uint32_t *group;
	size_t ngroup;
};

/* The defaults, as nccl-tests' where it has one. */
void bench_options_init(struct bench_options *o);
void bench_options_fini(struct bench_options *o);
/*
 * Applies option c (getopt_long's code) with its value arg: 0 when done,
 * 1 when c is not a bench option, -1 with the usage message in why
 * ("--op 'avg' is not an op (sum, max, min or all)").
 */
int bench_option_set(struct bench_options *o, int c, const char *arg,
    char *why, size_t why_size);
/* What no single option can see wrong; -1 with why. */
int bench_options_check(const struct bench_options *o, char *why,
    size_t why_size);
/* Whether rank is one of --group's, and (index not NULL) its place. */
bool bench_in_group(const struct bench_options *o, uint32_t rank,
    uint32_t *index);
/* A 64-bit digest of what decides the collectives every rank runs, so
 * ranks can verify they were given the same options. */
uint64_t bench_options_digest(const struct bench_options *o);

const char *bench_coll_name(enum bench_coll coll);
/* "allreduce" etc. and "all" into a mask; -1 when unknown. */
int bench_coll_parse(const char *name, unsigned *mask);
/* "f32", nccl-tests' "float", ... or "all" into a mask of sr_dtype;
 * the four the bench checks exactly: f64 f32 i64 i32. */
int bench_dtype_parse(const char *name, unsigned *mask);
/* "sum", "prod", "max", "min" or "all" into a mask of sr_op. */
int bench_op_parse(const char *name, unsigned *mask);
/* "GBPS" or "GBPS@SIZE"; -1 when malformed or not a positive number. */
int bench_min_busbw_parse(const char *text, double *gbps, bool *has_size,
    uint64_t *size);
/* "RANK:INDEX"; -1 when malformed. */
int bench_corrupt_parse(const char *text, uint32_t *rank, uint64_t *index);
/* The sweep's largest step (-b, -e, -f or -i). */
uint64_t bench_last_size(const struct bench_options *o);
/* 67108864 -> "64M", 1000 -> "1000"; returns buf. */
char *bench_size_format(uint64_t bytes, char *buf, size_t size);

/* Numbers that go to other ranks travel as 8 little-endian bytes. */
void bench_put_u64le(uint8_t *p, uint64_t v);
uint64_t bench_get_u64le(const uint8_t *p);
void bench_put_u32le(uint8_t *p, uint32_t v);
uint32_t bench_get_u32le(const uint8_t *p);

/* ---------------------------------------------------------- the sweep */

/* The size after `size`, or 0 when the sweep ends (past max or overflow). */
uint64_t bench_next_size(uint64_t size, uint64_t max, uint64_t stepfactor,
    uint64_t stepbytes);
/*
 * Elements of a row of nominal `size` bytes, as nccl-tests counts them:
 * allreduce and broadcast size/esize, allgather size/esize/world per rank.
 */
uint64_t bench_count(enum bench_coll coll, uint64_t size, size_t esize,
    uint32_t world);
/* The bytes a row of `count` elements reports (allgather: all ranks'). */
uint64_t bench_row_bytes(enum bench_coll coll, uint64_t count, size_t esize,
    uint32_t world);
/*
 * Timed iterations for a row (when -n was not given): `iters`, or for
 * sizes below
 * BENCH_ADAPT_BELOW with min_time > 0 enough iterations of `per_iter`
 * seconds to fill min_time, at most BENCH_ADAPT_MAX (but never fewer than
 * iters).
 */
uint64_t bench_adapt_iters(uint64_t bytes, uint64_t iters, double min_time,
    double per_iter);
/* Whether a row of `bytes` may adapt (every rank decides it alike); the
 * command never adapts when -n was given, which is then exact. */
bool bench_adapts(uint64_t bytes, double min_time);

/* Whether --min-busbw checks a row of sweep step `size`. */
bool bench_gated(const struct bench_options *o, uint64_t size,
    uint64_t last_size);
/*
 * Whether a row of sweep step `size` fails --min-busbw: rows of SIZE or
 * more, or without @SIZE the rows of the sweep's last step, need at least
 * GBPS of busbw.
 */
bool bench_below_min(const struct bench_options *o, uint64_t size,
    uint64_t last_size, double busbw);

/* ------------------------------------------------------- bandwidth */

/* nccl-tests' bus factor: allreduce 2(n-1)/n, allgather (n-1)/n,
 * broadcast 1; 0 for a world of one but for broadcast. */
double bench_bus_factor(enum bench_coll coll, uint32_t world);
/* bytes / seconds in GB/s (1e9 bytes); 0 when seconds is not positive. */
double bench_algbw(uint64_t bytes, double seconds);
double bench_busbw(enum bench_coll coll, uint64_t bytes, double seconds,
    uint32_t world);

struct bench_timing {
	double time;		/* mean over iterations of the slowest rank */
	uint32_t slowest;	/* the rank with the largest total */
	double spread_pct;	/* (max - min) / max of the totals, % */
};

/* times[r * iters + i]: rank r's seconds in iteration i. */
void bench_timing_summarize(const double *times, uint32_t world,
    uint64_t iters, struct bench_timing *out);
/* Sorts v (n > 0) and returns its median. */
double bench_median(double *v, size_t n);

/* ------------------------------------------------ inputs and results */

/*
 * Rank `rank`'s input element `index`: a small integer in [-8, 8], so
 * every dtype holds it, sums and their partial sums stay exact (whole
 * cycles of 17 ranks sum to 0), and max and min are exact.  The index
 * goes through a hash so a misplaced block shows.
 */
int bench_value(uint64_t seed, uint32_t rank, uint64_t index);
void bench_fill(void *buf, uint64_t count, enum sr_dtype dtype,
    uint64_t seed, uint32_t rank);
/*
 * The inputs of an allreduce with `op`: bench_value's for sum, max and
 * min; for prod -1 or 1 (the same hash), so the product of any number of
 * ranks stays exact in every dtype.
 */
int bench_value_op(enum sr_op op, uint64_t seed, uint32_t rank,
    uint64_t index);
void bench_fill_op(void *buf, uint64_t count, enum sr_dtype dtype,
    enum sr_op op, uint64_t seed, uint32_t rank);

/* The exact result of an allreduce of bench_fill inputs over `world`
 * ranks, by the residue the index hashes to. */
struct bench_expect {
	uint64_t seed;
	int64_t by_residue[17];
};

void bench_expect_init(struct bench_expect *e, uint64_t seed,
    enum sr_op op, uint32_t world);
int64_t bench_expect_at(const struct bench_expect *e, uint64_t index);

struct bench_mismatch {
	uint64_t element;	/* the first wrong element of the result */
	uint64_t byte;		/* and its first wrong byte */
	char expected[32];
	char got[32];
};

/* Wrong elements of an allreduce result; the first one in *first. */
uint64_t bench_check_reduce(const void *buf, uint64_t count,
    enum sr_dtype dtype, const struct bench_expect *e,
    struct bench_mismatch *first);

/* Rank `rank`'s byte `index` of the byte collectives' inputs. */
uint8_t bench_byte(uint64_t seed, uint32_t rank, uint64_t index);
void bench_fill_bytes(uint8_t *buf, uint64_t bytes, uint64_t seed,
    uint32_t rank);
/* The complement of those bytes: a result nothing wrote is all wrong. */
void bench_poison_bytes(uint8_t *buf, uint64_t bytes, uint64_t seed,
    uint32_t rank);
/*
 * Wrong elements of `ranks` consecutive segments of `bytes` bytes each,
 * segment r holding rank first_rank + r's bytes (allgather: all ranks
 * from 0; broadcast: one segment of the root's).
 */
uint64_t bench_check_bytes(const uint8_t *buf, uint64_t bytes,
    uint32_t ranks, uint32_t first_rank, size_t esize, uint64_t seed,
    struct bench_mismatch *first);
/* The --corrupt hook: changes element `index` (esize bytes) of buf. */
void bench_corrupt_element(void *buf, uint64_t index, size_t esize);

/* ------------------------------------------------------------ links */

struct bench_link {
	uint32_t from, to;
	double gbps_alone, gbps_ring, latency_us;
	bool slow;
};

/*
 * The bytes of one link's transfers: max, or on a link whose probe of
 * probe_bytes took probe_seconds as many as take about `target` seconds
 * (whole 4 KiB, never fewer than the probe).  A slow link is measured
 * with less, so the ranks that wait meanwhile stay within their timeout.
 */
uint64_t bench_link_bytes(uint64_t max, uint64_t probe_bytes,
    double probe_seconds, double target);
/*
 * The all-at-once time of link i -> i+1 from every rank's sr_ring_shift
 * time t[] (see bench_data.c for why it is not simply one of them).
 */
double bench_ring_link_time(const double *t, uint32_t world, uint32_t i);
/*
 * Marks the links slower (alone) than threshold x their median; returns
 * the index of the slowest, with the median in *median.  n > 0.
 */
size_t bench_links_verdict(struct bench_link *links, size_t n,
    double threshold, double *median);

/* ----------------------------------------------- bench_links.c */

struct bench_links_result {
	size_t nslow;
	bool ran;		/* false for a world of one */
	double median;
	uint32_t slowest;
	uint32_t *slow;		/* the slow links' from ranks */
};

/*
 * Runs the link test on every rank; rank 0 prints its table (or JSON
 * records, or CSV) to out.  Returns EXIT_OK, or the exit status after
 * reporting a ring failure; r is filled either way (free r->slow).
 */
int bench_links_run(struct sr_ring *ring, char **addresses,
    const struct bench_options *o, FILE *out, struct bench_links_result *r);
/* The summary record's "links" value: an object, or null when none ran. */
void bench_links_json(FILE *out, const struct bench_links_result *r,
    double threshold);

#endif
