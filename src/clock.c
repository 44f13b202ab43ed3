/*
 * clock.c - the monotonic clock every deadline is measured on.
 */
#include <stdio.h>
#include <time.h>

#include "clock.h"

int64_t
sr_clock_ns(void)
{
	struct timespec ts;

	clock_gettime(CLOCK_MONOTONIC, &ts);
	return (int64_t)ts.tv_sec * 1000000000 + ts.tv_nsec;
}

int
sr_clock_left_ms(int64_t deadline_ns)
{
	int64_t left = deadline_ns - sr_clock_ns();

	if (left <= 0)
		return 0;
	/* Round up: poll(…, 0) would spin until the deadline. */
	left = (left + 999999) / 1000000;
	return left > 0x7fffffff ? 0x7fffffff : (int)left;
}

const char *
sr_clock_format_ms(int64_t ms, char *buf, size_t size)
{
	if (ms % 1000 == 0)
		snprintf(buf, size, "%llds", (long long)(ms / 1000));
	else if (ms >= 1000)
		snprintf(buf, size, "%.3gs", (double)ms / 1000.0);
	else
		snprintf(buf, size, "%lldms", (long long)ms);
	return buf;
}
