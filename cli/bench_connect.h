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

/* The command; argv[0] is "connect". */
int cmd_bench_connect(int argc, char **argv);

#endif
