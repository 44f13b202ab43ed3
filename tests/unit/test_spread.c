/*
 * test_spread.c - whether a link's pieces spread over its streams
 * (spread.c): the verdict from the share of each transfer spent waiting,
 * its two lines, the switch in the middle of a transfer and `always`.
 */
#include <stdbool.h>
#include <stdint.h>

#include "check.h"
#include "spread.h"

#define MS 1000000LL

/* A transfer of 100 ms that waited `permille` of it. */
static void
judge(struct sr_spread *s, int64_t permille)
{
	sr_spread_judge(s, 100 * MS, permille * 100 * MS / 1000);
}

/* Four transfers that did not wait: the verdict of a rank that never
 * does. */
static void
judged_off(struct sr_spread *s)
{
	sr_spread_init(s);
	for (int i = 0; i < 4; i++)
		judge(s, 0);
	CHECK(s->wait_permille == 62);
	CHECK(s->judged == 4);
	CHECK(!sr_spread_starts(s));
}

static void
first_transfers_spread(void)
{
	struct sr_spread s;

	sr_spread_init(&s);
	CHECK(sr_spread_starts(&s));
	CHECK(s.wait_permille == 1000);
	CHECK(s.judged == 0);
	CHECK(!s.always);
}

static void
a_rank_that_never_waits_stops_spreading_after_four_transfers(void)
{
	struct sr_spread s;
	static const int32_t smoothed[4] = { 502, 253, 129, 67 };

	sr_spread_init(&s);
	/* Loopback, 4 streams spread: 0.1-0.5% of the time waiting. */
	for (int i = 0; i < 4; i++) {
		judge(&s, 5);
		CHECKF(s.wait_permille == smoothed[i], "transfer %d: %d", i,
		    s.wait_permille);
		CHECKF(sr_spread_starts(&s) == (i < 3), "transfer %d", i);
	}
	/* On one stream it waits more, up to 13% on loopback: still off. */
	for (int i = 0; i < 20; i++) {
		judge(&s, 130);
		CHECK(!sr_spread_starts(&s));
	}
	CHECK(s.wait_permille >= 125 && s.wait_permille <= 130);
}

static void
a_rank_that_waits_spreads_again(void)
{
	struct sr_spread s;

	judged_off(&s);
	/* A capped flow on one stream: 81-92% of the time waiting.  The
	 * first such transfer spreads midway, and the next from the start. */
	judge(&s, 900);
	CHECK(s.wait_permille == 481);
	CHECK(sr_spread_starts(&s));
}

static void
spread_holds_down_to_the_lower_line(void)
{
	struct sr_spread s;

	sr_spread_init(&s);
	/* Eight capped streams: busy enough to wait only 13-40%. */
	for (int i = 0; i < 20; i++) {
		judge(&s, 130);
		CHECKF(sr_spread_starts(&s), "transfer %d", i);
	}
	/* Just above the lower line, on; a rank that stopped waiting, off. */
	judge(&s, SR_SPREAD_OFF);
	CHECK(sr_spread_starts(&s));
	judge(&s, 20);
	CHECK(!sr_spread_starts(&s));
	/* Unspread, the same shares do not bring it back: the upper line
	 * does. */
	for (int i = 0; i < 20; i++) {
		judge(&s, 230);
		CHECK(!sr_spread_starts(&s));
	}
	judge(&s, 300);
	CHECK(sr_spread_starts(&s));
	CHECK(s.wait_permille >= SR_SPREAD_ON);
}

static void
one_transfer_that_waited_spreads_the_next_three(void)
{
	struct sr_spread s;
	static const int32_t smoothed[3] = { 265, 132, 66 };

	judged_off(&s);
	judge(&s, 1000);	/* a stall, or a late peer */
	CHECK(s.wait_permille == 531);
	CHECK(sr_spread_starts(&s));
	for (int i = 0; i < 3; i++) {
		judge(&s, 0);
		CHECKF(s.wait_permille == smoothed[i], "transfer %d: %d", i,
		    s.wait_permille);
		CHECKF(sr_spread_starts(&s) == (i < 2), "transfer %d", i);
	}
}

static void
odd_clocks_are_clamped(void)
{
	struct sr_spread s;

	sr_spread_init(&s);
	sr_spread_judge(&s, 0, 0);	/* nothing timed: nothing judged */
	sr_spread_judge(&s, -1, 0);
	CHECK(s.wait_permille == 1000);
	CHECK(s.judged == 0);
	judged_off(&s);
	sr_spread_judge(&s, 10 * MS, 20 * MS);	/* waited 1000 per mille */
	CHECK(s.wait_permille == 531);
	judged_off(&s);
	sr_spread_judge(&s, 10 * MS, -5);
	CHECK(s.wait_permille == 31);
	/* Hours of a transfer do not overflow the share. */
	judged_off(&s);
	sr_spread_judge(&s, 3600LL * 1000 * MS, 1800LL * 1000 * MS);
	CHECK(s.wait_permille == 281);
}

static void
midway_after_two_ms_of_a_quarter_waiting(void)
{
	CHECK(!sr_spread_midway(0, 0, 0));
	CHECK(!sr_spread_midway(SR_SPREAD_AFTER_NS - 1, SR_SPREAD_AFTER_NS - 1,
	    0));
	CHECK(sr_spread_midway(SR_SPREAD_AFTER_NS, SR_SPREAD_AFTER_NS / 4, 0));
	CHECK(!sr_spread_midway(SR_SPREAD_AFTER_NS, SR_SPREAD_AFTER_NS / 4 - 1,
	    0));
	CHECK(sr_spread_midway(3000 * MS, 3000 * MS, 0));
	CHECK(!sr_spread_midway(100 * MS, 24 * MS, 0));
	CHECK(sr_spread_midway(100 * MS, 25 * MS, 0));
}

static void
midway_after_two_ms_with_nothing_moved(void)
{
	/* A stall 3 s into a transfer that never waited before: 2 ms of it,
	 * not a third of the 3 s. */
	CHECK(!sr_spread_midway(3000 * MS, 1 * MS, SR_SPREAD_AFTER_NS - 1));
	CHECK(sr_spread_midway(3000 * MS, 2 * MS, SR_SPREAD_AFTER_NS));
	/* At the start too, whatever the share. */
	CHECK(sr_spread_midway(SR_SPREAD_AFTER_NS, 0, SR_SPREAD_AFTER_NS));
	CHECK(!sr_spread_midway(SR_SPREAD_AFTER_NS - 1, 0,
	    SR_SPREAD_AFTER_NS - 1));
}

static void
always_spreads_whatever_the_verdict(void)
{
	struct sr_spread s;

	judged_off(&s);
	s.always = true;
	CHECK(sr_spread_starts(&s));
	/* The verdict is still kept up beneath it. */
	judge(&s, 1000);
	CHECK(s.on);
	for (int i = 0; i < 4; i++)
		judge(&s, 0);
	CHECK(!s.on);
	CHECK(sr_spread_starts(&s));
	s.always = false;
	CHECK(!sr_spread_starts(&s));
}

int
main(void)
{
	TEST_RUN(first_transfers_spread);
	TEST_RUN(a_rank_that_never_waits_stops_spreading_after_four_transfers);
	TEST_RUN(a_rank_that_waits_spreads_again);
	TEST_RUN(spread_holds_down_to_the_lower_line);
	TEST_RUN(one_transfer_that_waited_spreads_the_next_three);
	TEST_RUN(odd_clocks_are_clamped);
	TEST_RUN(midway_after_two_ms_of_a_quarter_waiting);
	TEST_RUN(midway_after_two_ms_with_nothing_moved);
	TEST_RUN(always_spreads_whatever_the_verdict);
	return TEST_DONE();
}
