/*
 * test_progress.c - the formation loop's progress callback: called every
 * progress_ms while a rank waits, saying which neighbour is there and how
 * long is left; never called when progress_ms is 0.
 *
 * Rank 0 of 2 dials a listener that never answers (the kernel completes
 * the connection, nobody reads the hello), and nobody dials rank 0: the
 * ring cannot form and times out.
 */
#include <stdbool.h>
#include <string.h>

#include "check.h"
#include "silvic_ring.h"

#define TIMEOUT_MS 1000
#define EVERY_MS 100

struct seen {
	int calls;
	bool in_order;		/* elapsed grew, left shrank, every call */
	bool fields_right;	/* ranks and addresses, every call */
	struct sr_progress last;
	const char *peer;
};

static void
on_progress(void *arg, const struct sr_progress *p)
{
	struct seen *s = arg;

	if (s->calls > 0 && (p->elapsed_ms < s->last.elapsed_ms ||
	    p->left_ms > s->last.left_ms))
		s->in_order = false;
	if (p->rank != 0 || p->world != 2 || p->next != 1 || p->prev != 1 ||
	    strcmp(p->next_address, s->peer) != 0 ||
	    strcmp(p->prev_address, s->peer) != 0 || p->prev_ready ||
	    p->next_ready || p->elapsed_ms < EVERY_MS ||
	    p->left_ms > TIMEOUT_MS - EVERY_MS || p->left_ms < 0)
		s->fields_right = false;
	s->last = *p;
	s->calls++;
}

/* Forms rank 0 of 2 with progress every `every` ms; returns the error. */
static enum sr_code
form_alone(struct seen *s, int64_t every, bool callback)
{
	struct sr_listener *mine, *silent;
	struct sr_ring_options o;
	struct sr_ring *ring = NULL;
	struct sr_error err;
	const char *addresses[2];
	char peer[SR_ADDR_MAX];
	int rc;

	memset(s, 0, sizeof(*s));
	s->in_order = s->fields_right = true;
	if (sr_listener_open(&mine, "127.0.0.1", NULL, 0, &err) != 0 ||
	    sr_listener_open(&silent, "127.0.0.1", NULL, 0, &err) != 0) {
		CHECKF(0, "listener: %s", err.message);
		return SR_EIO;
	}
	snprintf(peer, sizeof(peer), "%s", sr_listener_address(silent));
	s->peer = peer;
	addresses[0] = sr_listener_address(mine);
	addresses[1] = peer;
	sr_ring_options_init(&o);
	o.timeout_ms = TIMEOUT_MS;
	o.on_progress = callback ? on_progress : NULL;
	o.progress_arg = s;
	o.progress_ms = every;
	rc = sr_ring_connect(&ring, mine, 0, addresses, 2, 7, &o, &err);
	sr_listener_close(silent);
	CHECK(rc == -1 && ring == NULL);
	return err.code;
}

static void
test_progress_every_interval(void)
{
	struct seen s;

	CHECK(form_alone(&s, EVERY_MS, true) == SR_ETIMEOUT);
	/* 9 are due within the timeout; a busy machine may delay some. */
	CHECKF(s.calls >= 2 && s.calls <= TIMEOUT_MS / EVERY_MS, "%d calls",
	    s.calls);
	CHECK(s.in_order);
	CHECK(s.fields_right);
	/* The kernel accepted the connection: connected, not handshaken. */
	CHECK(s.last.next_connected);
	CHECK(s.last.pending == 0 && s.last.rejected == 0);
}

static void
test_progress_off(void)
{
	struct seen s;

	CHECK(form_alone(&s, 0, true) == SR_ETIMEOUT);
	CHECK(s.calls == 0);
	CHECK(form_alone(&s, EVERY_MS, false) == SR_ETIMEOUT);
	CHECK(s.calls == 0);
}

int
main(void)
{
	TEST_RUN(test_progress_every_interval);
	TEST_RUN(test_progress_off);
	return TEST_DONE();
}
