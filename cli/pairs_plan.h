/*
 * pairs_plan.h - the schedule of `silvic-ring bench pairs` (pairs_plan.c):
 * which rank meets which in each round, what each round's phases send,
 * and how long a run takes.  Pure arithmetic: no socket, no clock, no
 * output but into a caller's buffer.
 *
 * The round-robin circle method: ranks 0 .. M-2 sit on a circle and
 * rank M-1 in its centre, M the world rounded up to even.  In round k the
 * centre meets rank k and the others pair across the circle,
 * k+i with k-i (mod M-1).  For an odd world the centre is a dummy: the
 * rank it meets has a bye.  World 6, five rounds:
 *
 *     round 0:  5-0  1-4  2-3
 *     round 1:  5-1  2-0  3-4
 *     round 2:  5-2  3-1  4-0
 *     round 3:  5-3  4-2  0-1
 *     round 4:  5-4  0-3  1-2
 *
 * Every pair meets exactly once.  An even world needs N-1 rounds of N/2
 * pairs; an odd one N rounds of (N-1)/2, since each rank sits one out.
 */
#ifndef SR_PAIRS_PLAN_H
#define SR_PAIRS_PLAN_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

/* The largest world the plan (and bench pairs) takes. */
#define PAIRS_WORLD_MAX 4096u

/* The partner of a rank sitting a round out. */
#define PAIRS_BYE UINT32_MAX

/*
 * A round's phases, in the order they run.  Every pair of the round runs
 * each phase at the same time as the other pairs of the round (they share
 * no rank), and a phase starts when the previous one ended on both ends.
 */
enum pairs_phase {
	PAIRS_PHASE_BOTH,	/* both directions at once */
	PAIRS_PHASE_LOW,	/* alone: the lower rank sends */
	PAIRS_PHASE_HIGH,	/* alone: the higher rank sends */
	PAIRS_PHASE_COUNT
};

struct pairs_plan {
	uint32_t world;
	uint32_t rounds;	/* N-1 (even N), N (odd N), 0 for N = 1 */
	uint32_t per_round;	/* pairs in every round: N/2 rounded down */
};

struct pairs_pair {
	uint32_t low, high;	/* low < high */
};

/* The plan of a world of 1 .. PAIRS_WORLD_MAX; -1 for another world. */
int pairs_plan_init(struct pairs_plan *plan, uint32_t world);
/* Rank's partner in round (< plan->rounds), or PAIRS_BYE. */
uint32_t pairs_plan_partner(const struct pairs_plan *plan, uint32_t rank,
    uint32_t round);
/*
 * The pairs of round, lower rank first, sorted by lower rank: fills
 * plan->per_round entries of out.  The bye's rank, for odd worlds, in
 * *bye (PAIRS_BYE for even ones) when bye is non-NULL.
 */
void pairs_plan_round(const struct pairs_plan *plan, uint32_t round,
    struct pairs_pair *out, uint32_t *bye);
/* The round in which two different ranks meet. */
uint32_t pairs_plan_round_of(const struct pairs_plan *plan, uint32_t a,
    uint32_t b);

/* "both directions at once", "alone, lower rank sends", ... */
const char *pairs_phase_name(enum pairs_phase phase);
/* The JSON name: "both", "low", "high". */
const char *pairs_phase_key(enum pairs_phase phase);
/* Whether rank sends to partner (its own, not a bye) in phase; both
 * ends send in PAIRS_PHASE_BOTH, and each receives what the other sends. */
bool pairs_phase_sends(enum pairs_phase phase, uint32_t rank,
    uint32_t partner);

/* What a run repeats, for its estimate. */
struct pairs_estimate {
	double transfer_s;	/* the probe's: one transfer of the sized
				 * bytes, the slowest pair's */
	double rtt_s;		/* one round trip, the slowest pair's */
	uint64_t repeats;	/* timed transfers of each phase */
	uint64_t warmup;	/* untimed ones before them */
	uint64_t pings;		/* round trips a pair times for latency */
};

/*
 * The seconds a run takes, from the probe (pairs_plan.c states the
 * formula):  rounds x (PHASES x (warmup + repeats) x transfer + pings x
 * rtt).  0 for a world of one.
 */
double pairs_plan_seconds(const struct pairs_plan *plan,
    const struct pairs_estimate *e);
/*
 * The line the command prints before it starts: "about 12 s for 5
 * rounds", "about 14 min for 255 rounds", "about 3.2 h for 1023 rounds";
 * returns buf.
 */
char *pairs_plan_estimate_text(const struct pairs_plan *plan,
    double seconds, char *buf, size_t size);

#endif
