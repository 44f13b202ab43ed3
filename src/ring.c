/*
 * ring.c - the ring object: joining (on top of handshake.c), failing
 * loudly and closing cleanly.
 *
 * A failure is sticky: the first error is kept, both neighbours are told
 * with an abort frame (so every survivor can name the rank that failed
 * first), and the write sides are shut once it has been delivered, so the
 * failure travels the ring.  Closing is a protocol step of its own
 * (sr_ring_finish in collectives.c); what is left here is reading the
 * neighbours to their EOF.
 */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "clock.h"
#include "engine.h"
#include "error.h"
#include "formation.h"
#include "listener.h"
#include "place.h"
#include "ring.h"
#include "sock.h"
#include "spread.h"
#include "transport.h"
#include "wire.h"

_Static_assert(SR_RING_STREAMS_MAX == SR_STREAMS_MAX, "streams per link");

/* How long a failing rank spends telling its peers (sending its abort,
 * then lingering until the peers' kernels have it). */
#define ABORT_BUDGET_NS (1000LL * 1000000)

void
sr_ring_options_init(struct sr_ring_options *options)
{
	memset(options, 0, sizeof(*options));
	options->timeout_ms = 60000;
}

static void
ring_free(struct sr_ring *ring)
{
	if (ring->addresses != NULL) {
		for (uint32_t i = 0; i < ring->world; i++)
			free(ring->addresses[i]);
		free(ring->addresses);
	}
	for (uint32_t i = 0; ring->links != NULL &&
	    i < ring->nlinks * ring->streams; i++)
		sr_link_close(&ring->links[i]);
	free(ring->links);
	if (ring->all_links != ring->ring_links)
		free(ring->all_links);
	sr_group_free(ring->whole);
	sr_engine_free(ring->engine);
	free(ring->scratch);
	free(ring->plan_sends);
	free(ring->plan_recvs);
	sr_place_fini(ring);
	free(ring);
}

int
sr_congestion_check(const char *name, struct sr_error *err)
{
	char why[sizeof(err->message)];

	sr_error_clear(err);
	if (name == NULL || strcmp(name, "auto") == 0)
		return 0;
	if (name[0] == '\0' || strlen(name) >= SR_CONGESTION_MAX) {
		return sr_error_set(err, SR_ECONFIG, SR_PHASE_CONFIG, "'%s' is "
		    "not a TCP congestion control name (1 to %d characters)",
		    name, SR_CONGESTION_MAX - 1);
	}
	if (sr_sock_check_congestion(name, why, sizeof(why)) != 0) {
		sr_error_set(err, SR_ECONFIG, SR_PHASE_CONFIG, "%s", why);
		return -1;
	}
	return 0;
}

static int
check_config(uint64_t rank, uint64_t world, const char *const *addresses,
    const struct sr_ring_options *options, struct sr_error *err)
{
	if (world == 0) {
		sr_error_set(err, SR_ECONFIG, SR_PHASE_CONFIG,
		    "the world size is 0; a ring needs at least one rank");
		return -1;
	}
	if (world > UINT32_MAX) {
		sr_error_set(err, SR_ECONFIG, SR_PHASE_CONFIG,
		    "world size %llu does not fit the handshake's u32",
		    (unsigned long long)world);
		return -1;
	}
	if (rank >= world) {
		sr_error_set(err, SR_ECONFIG, SR_PHASE_CONFIG,
		    "rank %llu is out of range for a world of %llu",
		    (unsigned long long)rank, (unsigned long long)world);
		return -1;
	}
	if (options->timeout_ms <= 0) {
		sr_error_set(err, SR_ECONFIG, SR_PHASE_CONFIG,
		    "the timeout must be positive, not %lld ms",
		    (long long)options->timeout_ms);
		return -1;
	}
	for (uint64_t i = 0; world > 1 && i < world; i++)
		if (addresses[i] == NULL || addresses[i][0] == '\0') {
			sr_error_set(err, SR_ECONFIG, SR_PHASE_CONFIG,
			    "rank %llu has no address", (unsigned long long)i);
			return -1;
		}
	if (options->streams > SR_RING_STREAMS_MAX) {
		sr_error_set(err, SR_ECONFIG, SR_PHASE_CONFIG,
		    "%u streams per link is too many (1 to %d)",
		    options->streams, SR_RING_STREAMS_MAX);
		return -1;
	}
	if (options->probe_ms > 0 && options->probe == NULL) {
		sr_error_set(err, SR_ECONFIG, SR_PHASE_CONFIG,
		    "a probe needs its report (sr_ring_options.probe)");
		return -1;
	}
	if (world > 1 && sr_congestion_check(options->congestion, err) != 0)
		return -1;
	return 0;
}

struct sr_ring *
sr_ring_new(uint64_t rank, uint64_t world, const char *const *addresses,
    uint64_t token, const struct sr_ring_options *options, uint32_t nlinks)
{
	struct sr_ring *ring = calloc(1, sizeof(*ring));

	if (ring == NULL)
		return NULL;
	ring->rank = (uint32_t)rank;
	ring->world = (uint32_t)world;
	ring->token = token;
	ring->timeout_ms = options->timeout_ms;
	ring->cancel = options->cancel;
	ring->integrity = options->integrity;
	ring->mesh = (options->mesh || options->probe_ms > 0) && world > 1;
	ring->shared_cores = options->shared_cores;
	ring->probe = options->probe_ms > 0;
	if (sr_place_init(ring, options->cpus, options->ncpus) != 0)
		goto fail;
	ring->streams = options->streams == 0 || options->probe_ms > 0 ? 1 :
	    options->streams;
	sr_error_clear(&ring->failure);
	if (world == 1)
		return ring;
	ring->addresses = calloc((size_t)world, sizeof(char *));
	ring->links = calloc((size_t)nlinks * ring->streams,
	    sizeof(*ring->links));
	if (ring->addresses == NULL || ring->links == NULL)
		goto fail;
	ring->nlinks = nlinks;
	for (uint32_t i = 0; i < nlinks * ring->streams; i++)
		sr_link_init(&ring->links[i]);
	for (uint64_t i = 0; i < world; i++)
		if ((ring->addresses[i] = strdup(addresses[i])) == NULL)
			goto fail;
	if (ring->mesh) {
		/* Round the ring from the next rank to the previous one. */
		if ((ring->all_links = malloc((nlinks - 1) *
		    sizeof(*ring->all_links))) == NULL)
			goto fail;
		for (uint32_t k = 1; k < ring->world; k++)
			ring->all_links[ring->nall_links++] =
			    (ring->rank + k) % ring->world;
	}
	ring->engine = sr_engine_new(&(struct sr_engine_config){
		.links = ring->links, .nlinks = nlinks,
		.streams = ring->streams,
		.addresses = ring->addresses, .world = ring->world,
		.cancel = ring->cancel, .timeout_ms = ring->timeout_ms,
		.integrity = ring->integrity });
	if (ring->engine == NULL)
		goto fail;
	return ring;
fail:
	ring_free(ring);
	return NULL;
}

/*
 * The link's congestion control (see sr_ring_options).  Checked before
 * the ring formed, so a failure here is not expected; the ring then runs
 * on what the kernel chose, and sr_ring_congestion says which.
 */
static void
set_congestion(int fd, const char *want)
{
	char now[SR_CONGESTION_MAX];

	if (want != NULL && strcmp(want, "auto") == 0) {
		sr_sock_get_congestion(fd, now, sizeof(now));
		want = strncmp(now, "bbr", 3) == 0 ? "reno" : NULL;
	}
	if (want != NULL)
		(void)sr_sock_set_congestion(fd, want, NULL, 0);
}

void
sr_ring_set_neighbours(struct sr_ring *ring, uint32_t next, uint32_t prev)
{
	ring->next = next;
	ring->prev = prev;
	ring->ring_links[0] = next;
	ring->ring_links[1] = prev;
	ring->nring_links = next == prev ? 1 : 2;
	if (ring->all_links != NULL && ring->all_links != ring->ring_links)
		return;		/* a mesh's: every link, from sr_ring_new */
	ring->all_links = ring->ring_links;
	ring->nall_links = ring->nring_links;
}

void
sr_ring_set_link(struct sr_ring *ring, uint32_t index, int fd, uint32_t peer,
    const char *congestion)
{
	struct sr_link *l = &ring->links[index];

	sr_link_open(l, fd, ring->rank, peer, ring->addresses[peer],
	    ring->integrity, ring->mesh || ring->streams > 1);
	sr_sock_tune(fd, ring->timeout_ms);
	set_congestion(fd, congestion);
	/*
	 * A stream takes a new piece once its last is in the kernel; with
	 * the unsent queue kept to a frame it is in the kernel only when the
	 * stream can send it soon, so a slow stream is handed little and a
	 * stalled one holds at most a frame or two of the send.
	 */
	if (ring->streams > 1)
		sr_sock_notsent_lowat(fd, (int)SR_FRAME_MAX);
	if (index == ring->next)
		sr_sock_get_congestion(fd, ring->congestion,
		    sizeof(ring->congestion));
}

/* The plain ring's two links, formed. */
static int
form_ring(struct sr_ring *ring, struct sr_listener *listener,
    const char *const *addresses, const struct sr_ring_options *options,
    struct sr_error *err)
{
	int next_fds[SR_STREAMS_MAX], prev_fds[SR_STREAMS_MAX];

	if (sr_handshake_form(listener, ring->rank, ring->world,
	    ring->token, addresses, options, next_fds, prev_fds, err) != 0)
		return -1;
	sr_ring_set_neighbours(ring, SR_NEXT, SR_PREV);
	for (uint32_t s = 0; s < ring->streams; s++) {
		sr_ring_set_link(ring, SR_NEXT + s * ring->nlinks, next_fds[s],
		    (ring->rank + 1) % ring->world, options->congestion);
		sr_ring_set_link(ring, SR_PREV + s * ring->nlinks, prev_fds[s],
		    (ring->rank + ring->world - 1) % ring->world,
		    options->congestion);
	}
	return 0;
}

/* A mesh's links, formed: links[r] leads to rank r. */
static int
form_mesh(struct sr_ring *ring, struct sr_listener *listener,
    const char *const *addresses, const struct sr_ring_options *options,
    struct sr_error *err)
{
	uint32_t n = ring->world, me = ring->rank;
	int *fds = malloc(n * ring->streams * sizeof(*fds)), kept = 0;

	if (fds == NULL)
		return sr_error_set(err, SR_ENOMEM, SR_PHASE_CONFIG,
		    "out of memory");
	if (sr_mesh_form(listener, me, n, ring->token, addresses, options,
	    fds, err) != 0) {
		free(fds);
		return -1;
	}
	sr_ring_set_neighbours(ring, (me + 1) % n, (me + n - 1) % n);
	for (uint32_t i = 0; i < n * ring->streams; i++)
		if (i % n != me && fds[i] >= 0)
			sr_ring_set_link(ring, i, fds[i], i % n,
			    options->congestion);
	free(fds);
	/* A probe's mesh may lack links: the close and the abort run on
	 * those that formed. */
	for (int i = 0; i < ring->nall_links; i++)
		if (ring->links[ring->all_links[i]].fd >= 0)
			ring->all_links[kept++] = ring->all_links[i];
	ring->nall_links = kept;
	return 0;
}

int
sr_ring_connect(struct sr_ring **out, struct sr_listener *listener,
    uint64_t rank, const char *const *addresses, uint64_t world,
    uint64_t token, const struct sr_ring_options *options,
    struct sr_error *err)
{
	struct sr_ring_options defaults;
	struct sr_ring *ring;
	int rc;

	*out = NULL;
	sr_error_clear(err);
	if (options == NULL) {
		sr_ring_options_init(&defaults);
		options = &defaults;
	}
	if (check_config(rank, world, addresses, options, err) != 0)
		goto fail;
	if ((ring = sr_ring_new(rank, world, addresses, token, options,
	    options->mesh || options->probe_ms > 0 ? (uint32_t)world : 2)) ==
	    NULL) {
		sr_error_set(err, SR_ENOMEM, SR_PHASE_CONFIG, "out of memory");
		goto fail;
	}
	if (world > 1) {
		if (listener == NULL) {
			sr_error_set(err, SR_ECONFIG, SR_PHASE_CONFIG,
			    "a world of %llu needs a listener",
			    (unsigned long long)world);
			ring_free(ring);
			goto fail;
		}
		rc = ring->mesh ? form_mesh(ring, listener, addresses, options,
		    err) : form_ring(ring, listener, addresses, options, err);
		if (rc != 0) {
			ring_free(ring);
			goto fail;
		}
	}
	sr_listener_close(listener);
	*out = ring;
	return 0;
fail:
	err->rank = rank < world ? (int64_t)rank : -1;
	sr_listener_close(listener);
	return -1;
}

void
sr_ring_set_timeout(struct sr_ring *ring, int64_t timeout_ms)
{
	if (timeout_ms <= 0)
		return;
	ring->timeout_ms = timeout_ms;
	if (ring->engine != NULL)
		sr_engine_set_timeout(ring->engine, timeout_ms);
	for (uint32_t i = 0; i < ring->nlinks * ring->streams; i++)
		if (ring->links[i].fd >= 0)
			sr_sock_tune(ring->links[i].fd, timeout_ms);
}

const char *
sr_ring_congestion(const struct sr_ring *ring)
{
	return ring->congestion;
}

bool
sr_ring_failed(const struct sr_ring *ring)
{
	return ring != NULL && ring->failed;
}

uint32_t
sr_ring_streams(const struct sr_ring *ring)
{
	return ring->streams > 0 ? ring->streams : 1;
}

bool
sr_ring_spread_always(struct sr_ring *ring, bool always)
{
	struct sr_spread *s;
	bool was;

	if (ring == NULL || ring->engine == NULL)
		return false;
	s = sr_engine_spread(ring->engine);
	was = s->always;
	s->always = always;
	return was;
}

int
sr_ring_next_stream(const struct sr_ring *ring, uint32_t stream,
    struct sr_stream_stats *stats)
{
	const struct sr_link *l;
	struct sr_tcp_counters tcp;

	memset(stats, 0, sizeof(*stats));
	if (ring->world < 2 || ring->links == NULL || stream >= ring->streams)
		return -1;
	l = &ring->links[ring->next + stream * ring->nlinks];
	if (l->fd < 0)
		return -1;
	stats->tx_bytes = l->tx_bytes;
	stats->rx_bytes = l->rx_bytes;
	sr_sock_tcp_counters(l->fd, &tcp);
	stats->retransmits = tcp.retransmits;
	stats->rtt_us = tcp.rtt_us;
	stats->cwnd = tcp.cwnd;
	stats->mss = tcp.mss;
	sr_sock_ends(l->fd, stats->local, stats->remote, sizeof(stats->local));
	return 0;
}

uint32_t
sr_ring_rank(const struct sr_ring *ring)
{
	return ring->rank;
}

uint32_t
sr_ring_world(const struct sr_ring *ring)
{
	return ring->world;
}

const char *
sr_ring_peer_address(const struct sr_ring *ring, uint32_t rank)
{
	if (ring->addresses == NULL || rank >= ring->world)
		return "";
	return ring->addresses[rank];
}

uint8_t *
sr_ring_scratch(struct sr_ring *ring, size_t size)
{
	uint8_t *grown;

	if (size < 64)
		size = 64;
	if (size <= ring->scratch_size)
		return ring->scratch;
	grown = realloc(ring->scratch, size);
	if (grown == NULL)
		return NULL;
	ring->scratch = grown;
	ring->scratch_size = size;
	return grown;
}

int
sr_ring_plan(struct sr_ring *ring, int steps, struct sr_transfer *x)
{
	if ((size_t)steps > ring->plan_size) {
		struct sr_send *sends = calloc((size_t)steps, sizeof(*sends));
		struct sr_recv *recvs = calloc((size_t)steps, sizeof(*recvs));

		if (sends == NULL || recvs == NULL) {
			free(sends);
			free(recvs);
			return -1;
		}
		free(ring->plan_sends);
		free(ring->plan_recvs);
		ring->plan_sends = sends;
		ring->plan_recvs = recvs;
		ring->plan_size = (size_t)steps;
	}
	*x = (struct sr_transfer){ .sends = ring->plan_sends,
		.recvs = ring->plan_recvs, .links = ring->ring_links,
		.nlinks = ring->nring_links, .seq = ring->seq };
	return 0;
}

int
sr_ring_fail_again(struct sr_ring *ring, struct sr_error *err)
{
	*err = ring->failure;
	err->rank = ring->rank;
	return -1;
}

void
sr_ring_fail(struct sr_ring *ring, const struct sr_error *err)
{
	uint8_t payload[SR_ABORT_MAX];
	uint32_t all = ring->nlinks * ring->streams;
	struct sr_link *open[all > 0 ? all : 1];
	struct sr_frame frame = { .kind = SR_FRAME_ABORT };
	struct sr_abort abort;
	int64_t deadline = sr_clock_ns() + ABORT_BUDGET_NS;
	int n = 0;

	if (ring->failed)
		return;
	ring->failed = true;
	ring->failure = *err;
	ring->failure.rank = ring->rank;
	if (err->origin >= 0 && sr_engine_heard(ring->engine) != NULL) {
		/* Forwarding: the origin's own fields, unchanged. */
		abort = *sr_engine_heard(ring->engine);
	} else {
		memset(&abort, 0, sizeof(abort));
		abort.origin = ring->rank;
		abort.wire_class = sr_wire_from_code(err->code);
		abort.culprit = err->peer >= 0 ? (uint32_t)err->peer :
		    SR_NO_RANK;
		snprintf(abort.reason, sizeof(abort.reason), "%.400s",
		    err->message);
	}
	frame.length = sr_abort_encode(&abort, payload, sizeof(payload));
	for (uint32_t i = 0; i < all; i++) {
		if (ring->links[i].fd < 0)
			continue;
		/* A lost peer fails the send at once (EPIPE); a stopped one
		 * costs at most the budget. */
		sr_link_last_words(&ring->links[i], &frame, payload, deadline);
		open[n++] = &ring->links[i];
	}
	sr_link_linger(open, n, deadline);
}

void
sr_ring_abort(struct sr_ring *ring, const struct sr_error *err)
{
	if (ring != NULL && ring->world > 1)
		sr_ring_fail(ring, err);
	else if (ring != NULL && !ring->failed) {
		ring->failed = true;
		ring->failure = *err;
	}
}

void
sr_ring_close(struct sr_ring *ring)
{
	struct sr_error err;

	if (ring == NULL)
		return;
	if (!ring->failed && !ring->finished && ring->world > 1)
		(void)sr_ring_finish(ring, &err);
	ring_free(ring);
}
