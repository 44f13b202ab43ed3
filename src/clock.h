/*
 * clock.h - the monotonic clock every deadline is measured on (clock.c).
 */
#ifndef SR_CLOCK_H
#define SR_CLOCK_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "silvic_ring.h"

/* sr_clock_ns, monotonic nanoseconds, is public (silvic_ring.h). */

/* Milliseconds left until deadline_ns, clamped to [0, INT32_MAX]. */
int sr_clock_left_ms(int64_t deadline_ns);
/* "30s", "1.5s", "250ms": a duration for messages. */
const char *sr_clock_format_ms(int64_t ms, char *buf, size_t size);

#endif
