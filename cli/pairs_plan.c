/*
 * pairs_plan.c - the circle method's rounds, the phases of a round and
 * the estimate of a run (see pairs_plan.h).  Pure: nothing here touches a
 * socket or a clock.
 */
#include <stdio.h>

#include "pairs_plan.h"

int
pairs_plan_init(struct pairs_plan *plan, uint32_t world)
{
	if (world < 1 || world > PAIRS_WORLD_MAX)
		return -1;
	plan->world = world;
	plan->rounds = world == 1 ? 0 : world % 2 == 0 ? world - 1 : world;
	plan->per_round = world / 2;
	return 0;
}

/*
 * Ranks 0 .. M-2 on the circle (M the world rounded up to even), M-1 in
 * the centre.  In round k the centre meets k, and k+i meets k-i, so a
 * rank r on the circle meets 2k - r (mod M-1).  For an odd world M-1 is
 * the world itself: the centre is the dummy, and the rank it meets, k,
 * sits out.
 */
uint32_t
pairs_plan_partner(const struct pairs_plan *plan, uint32_t rank,
    uint32_t round)
{
	uint32_t m = plan->world + plan->world % 2, circle = m - 1;

	if (rank >= plan->world || round >= plan->rounds)
		return PAIRS_BYE;
	if (rank == circle)
		return round;
	if (rank == round)
		return circle < plan->world ? circle : PAIRS_BYE;
	return (uint32_t)((2 * (uint64_t)round + circle - rank) % circle);
}

void
pairs_plan_round(const struct pairs_plan *plan, uint32_t round,
    struct pairs_pair *out, uint32_t *bye)
{
	uint32_t n = 0;

	if (bye != NULL)
		*bye = PAIRS_BYE;
	for (uint32_t r = 0; r < plan->world; r++) {
		uint32_t p = pairs_plan_partner(plan, r, round);

		if (p == PAIRS_BYE) {
			if (bye != NULL && round < plan->rounds)
				*bye = r;
		} else if (r < p) {
			out[n].low = r;
			out[n++].high = p;
		}
	}
}

/*
 * a and b meet in the round k with a + b = 2k (mod M-1) when both sit on
 * the circle, and in round a when b is the centre.  M-1 is odd, so 2 has
 * an inverse, (M-1+1)/2, and k = (a + b) (M/2) mod (M-1).
 */
uint32_t
pairs_plan_round_of(const struct pairs_plan *plan, uint32_t a, uint32_t b)
{
	uint32_t m = plan->world + plan->world % 2, circle = m - 1;

	if (a == circle)
		return b;
	if (b == circle)
		return a;
	return (uint32_t)(((uint64_t)a + b) * (m / 2) % circle);
}

static const char *const phase_names[PAIRS_PHASE_COUNT] = {
	"both directions at once",
	"alone, the lower rank sends",
	"alone, the higher rank sends",
};

static const char *const phase_keys[PAIRS_PHASE_COUNT] = {
	"both", "low", "high",
};

const char *
pairs_phase_name(enum pairs_phase phase)
{
	return phase < PAIRS_PHASE_COUNT ? phase_names[phase] : "unknown";
}

const char *
pairs_phase_key(enum pairs_phase phase)
{
	return phase < PAIRS_PHASE_COUNT ? phase_keys[phase] : "unknown";
}

bool
pairs_phase_sends(enum pairs_phase phase, uint32_t rank, uint32_t partner)
{
	if (partner == PAIRS_BYE || partner == rank)
		return false;
	switch (phase) {
	case PAIRS_PHASE_BOTH:
		return true;
	case PAIRS_PHASE_LOW:
		return rank < partner;
	case PAIRS_PHASE_HIGH:
		return rank > partner;
	default:
		return false;
	}
}

/*
 * A round lasts as long as its slowest pair, and the slowest pair of the
 * probe is the bound every round is charged: each phase runs warmup +
 * repeats transfers of the sized bytes (a transfer of the probe's size
 * on the slowest link takes transfer_s), and the pair times pings round
 * trips for its latency.  The barriers between phases cost a round trip
 * or two each, inside the rounding of "about".
 *
 *   T(N) = rounds(N) x (3 (warmup + repeats) transfer_s + pings rtt_s)
 *   rounds(N) = N - 1 for even N, N for odd N
 *
 * Transfers are sized to about 0.5 s on a slow link, so with the
 * defaults (3 repeats, 1 warm-up, 100 pings of 100 us) a round is at most
 * about 6 s, and 256 hosts take 255 rounds, 1,024 hosts 1,023.
 */
double
pairs_plan_seconds(const struct pairs_plan *plan,
    const struct pairs_estimate *e)
{
	double round = (double)PAIRS_PHASE_COUNT * (double)(e->warmup +
	    e->repeats) * e->transfer_s + (double)e->pings * e->rtt_s;

	return plan->rounds * (round > 0 ? round : 0);
}

char *
pairs_plan_estimate_text(const struct pairs_plan *plan, double seconds,
    char *buf, size_t size)
{
	const char *rounds = plan->rounds == 1 ? "round" : "rounds";

	if (!(seconds >= 0))
		seconds = 0;
	if (seconds < 1)
		snprintf(buf, size, "under 1 s for %u %s", plan->rounds,
		    rounds);
	else if (seconds < 120)
		snprintf(buf, size, "about %.0f s for %u %s", seconds,
		    plan->rounds, rounds);
	else if (seconds < 2 * 3600)
		snprintf(buf, size, "about %.0f min for %u %s", seconds / 60,
		    plan->rounds, rounds);
	else
		snprintf(buf, size, "about %.1f h for %u %s", seconds / 3600,
		    plan->rounds, rounds);
	return buf;
}
