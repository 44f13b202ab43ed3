/*
 * bench_connect.h - `silvic-ring bench connect` (bench_connect.c): the
 * preflight, and its reports' wire form (for the unit tests).
 */
#ifndef SR_BENCH_CONNECT_H
#define SR_BENCH_CONNECT_H

#include <stddef.h>
#include <stdint.h>

#include "bench_data.h"
#include "connect_verdict.h"

extern const char usage_bench_connect[];

/* A rank's probe report as it travels: its world entries (probe[rank]
 * unused) into out, of the size bench_connect_report_len says.  Its
 * local ends and error texts go in small tables; beyond their room the
 * last entry stands for the rest. */
size_t bench_connect_report_len(uint32_t world);
void bench_connect_encode(const struct sr_probe_link *probe, uint32_t world,
    uint32_t rank, uint8_t *out);
/* Rank from's report into c's row from (the ends seen by from). */
void bench_connect_decode(const uint8_t *in, uint32_t world, uint32_t from,
    struct connect_matrix *c);

/*
 * The preflight's verdict on a ring opened as a probe (cli_ring.probe),
 * as bench connect gives it: every rank's report gathered and judged,
 * rank 0 writing the table (or JSON records).  EXIT_OK when every pair
 * was reached and nothing differs, EXIT_THRESHOLD for a finding, else
 * the status of a failure it reported.
 */
int bench_connect_judge(struct sr_ring *ring, char **addresses,
    struct sr_probe_link *probe, bool json);

/* The commands; argv[0] is "connect" or "pairs" (bench_pairs.c). */
int cmd_bench_connect(int argc, char **argv);
extern const char usage_bench_pairs[];
int cmd_bench_pairs(int argc, char **argv);

#endif
