/*
 * spread.c - whether a link's pieces go over all its streams or stay on
 * the first: the engine's choice (engine.c, pump_out), made from how
 * long this rank waits.  Pure: the engine times its waits and asks.
 *
 * Streams add what the wire and the kernel carry (a flow capped by a
 * shaper, a path, one core's softirq work on a fast NIC), not what this
 * rank's thread moves: every stream's bytes are copied by the one thread.
 * A rank that spends its transfers moving bytes, not waiting for room or
 * data, is the limit itself, and more sockets only cost it: on loopback,
 * 4 streams spread were 0.90-0.95x one stream at 16 and 256 MiB (world
 * 2), their ranks holding twice the bytes in flight.  Waiting, per
 * transfer (ranks alternating launches, docs/performance.md, "Streams
 * that spread only while a rank waits"):
 *
 *   link                               streams   share of time waiting
 *   loopback, 16 MiB, world 2          1         0.6-13%
 *                                      4         0.1-0.5%
 *   every flow capped at 1 Gbit/s      1         81-92%
 *   (scripts/bench-streams)            2         72%
 *                                      4         25-64%
 *                                      8         23-40%
 *
 * So a transfer starts spread while the smoothed share is high, and a
 * link that ran spread keeps spreading down to a lower share than one
 * that did not starts at (SR_SPREAD_OFF against SR_SPREAD_ON): eight
 * capped streams keep this rank busy enough to look like loopback with
 * one, and must not flip back and forth.  A rank starts as if it had
 * waited throughout and stops spreading after four transfers that did
 * not wait: with eight capped streams the first transfer can show no
 * waiting at all (bytes trickle in on some stream at every pass, so the
 * rank never sleeps), and judged alone it kept the next three on one
 * stream (16 MiB: 0.66-0.72 GB/s against 0.79-0.82 spread).  A transfer
 * that started on one stream spreads as soon as it has waited a quarter
 * of its time (a capped first stream: many short waits), or nothing has
 * moved for 2 ms (a stalled one, however long the transfer ran before),
 * so a stalled or slow first stream costs it milliseconds, not its share.
 * Waiting for a peer that comes late to the collective counts too: a
 * rank that is early in every call spreads whether or not its links are
 * the limit (what it pays is what spreading cost before, no more).
 */
#include "spread.h"

void
sr_spread_init(struct sr_spread *s)
{
	s->always = false;
	s->on = true;
	s->wait_permille = 1000;
	s->judged = 0;
}

bool
sr_spread_starts(const struct sr_spread *s)
{
	return s->always || s->on;
}

bool
sr_spread_midway(int64_t elapsed_ns, int64_t waited_ns, int64_t still_ns)
{
	if (still_ns >= SR_SPREAD_AFTER_NS)
		return true;
	return elapsed_ns >= SR_SPREAD_AFTER_NS &&
	    waited_ns * 1000 >= elapsed_ns * (int64_t)SR_SPREAD_ON;
}

void
sr_spread_judge(struct sr_spread *s, int64_t elapsed_ns, int64_t waited_ns)
{
	int32_t share;

	if (elapsed_ns <= 0)
		return;
	if (waited_ns < 0)
		waited_ns = 0;
	if (waited_ns > elapsed_ns)
		waited_ns = elapsed_ns;
	share = (int32_t)(waited_ns * 1000 / elapsed_ns);
	s->judged++;
	/* Half of each new share: one odd transfer moves the verdict only
	 * when the last ones were near the line already. */
	s->wait_permille = (s->wait_permille + share) / 2;
	s->on = s->wait_permille >= (s->on ? SR_SPREAD_OFF : SR_SPREAD_ON);
}
