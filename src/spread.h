/*
 * spread.h - whether a link's pieces spread over its streams, judged by
 * how long this rank waits (spread.c).  Pure.
 */
#ifndef SR_SPREAD_H
#define SR_SPREAD_H

#include <stdbool.h>
#include <stdint.h>

/* A rank's verdict, kept between transfers by its engine. */
struct sr_spread {
	bool always;		/* every transfer spreads (sr_ring_spread_always) */
	bool on;		/* the next transfer starts spread */
	int32_t wait_permille;	/* the judged transfers' waiting share,
				 * smoothed: all of it before the first */
	uint64_t judged;	/* transfers judged so far */
};

/* Spreading starts off where it tells nothing: a transfer judged only
 * when this rank sends at least this many frames on it. */
#define SR_SPREAD_FRAMES 4u
/* A transfer that started on one stream spreads once nothing has moved
 * for this long, or once it has run this long and waited a quarter of
 * it (SR_SPREAD_ON). */
#define SR_SPREAD_AFTER_NS 2000000
/* The smoothed share of a transfer spent waiting, per mille, at or above
 * which spreading starts, and below which it stops. */
#define SR_SPREAD_ON 250
#define SR_SPREAD_OFF 100

/* Spread, as if every transfer so far had waited throughout: a link's
 * first transfers spread, and a rank stops only once several in a row
 * have shown it does not wait. */
void sr_spread_init(struct sr_spread *s);
/* Whether a transfer starting now spreads its pieces. */
bool sr_spread_starts(const struct sr_spread *s);
/* Whether a transfer that started on one stream spreads from now on,
 * having run elapsed_ns and waited waited_ns of it, the last still_ns
 * with nothing moved (the engine wakes to ask when still_ns would reach
 * SR_SPREAD_AFTER_NS). */
bool sr_spread_midway(int64_t elapsed_ns, int64_t waited_ns,
    int64_t still_ns);
/* Takes a finished transfer's share of waiting into the verdict. */
void sr_spread_judge(struct sr_spread *s, int64_t elapsed_ns,
    int64_t waited_ns);

#endif
