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
#include <errno.h>
#include <poll.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/ioctl.h>
#include <sys/socket.h>
#include <unistd.h>
#include <linux/sockios.h>

#include "auth.h"
#include "clock.h"
#include "crc32c.h"
#include "error.h"
#include "formation.h"
#include "listener.h"
#include "ring.h"
#include "sock.h"
#include "wire.h"
#include "listener.h"

/* How long a failing rank spends telling its neighbours (sending its
 * abort, then lingering until the neighbours' kernels have it). */
#define ABORT_BUDGET_NS (1000LL * 1000000)
/* How often a lingering rank looks whether its abort was acknowledged. */
#define LINGER_POLL_MS 5
#define SR_SPIN_NS (50LL * 1000)

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
	for (int s = 0; s < 2; s++)
		if (ring->peer[s].fd >= 0)
			close(ring->peer[s].fd);
	free(ring->scratch);
	free(ring->segment);
	free(ring->plan_sends);
	free(ring->plan_recvs);
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
	if (world > 1 && sr_congestion_check(options->congestion, err) != 0)
		return -1;
	return 0;
}

static struct sr_ring *
ring_new(uint64_t rank, uint64_t world, const char *const *addresses,
    uint64_t token, const struct sr_ring_options *options)
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
	ring->peer[SR_NEXT].fd = ring->peer[SR_PREV].fd = -1;
	sr_error_clear(&ring->failure);
	if (world == 1)
		return ring;
	ring->addresses = calloc((size_t)world, sizeof(char *));
	ring->segment = malloc(2 * SR_SEGMENT);
	if (ring->addresses == NULL || ring->segment == NULL)
		goto fail;
	for (uint64_t i = 0; i < world; i++)
		if ((ring->addresses[i] = strdup(addresses[i])) == NULL)
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

static void
set_peer(struct sr_ring *ring, enum sr_side side, int fd, uint32_t rank,
    const char *congestion)
{
	struct sr_peer *p = &ring->peer[side];

	p->fd = fd;
	p->rank = rank;
	snprintf(p->address, sizeof(p->address), "%s", ring->addresses[rank]);
	sr_sock_nonblocking(fd);
	sr_sock_tune(fd, ring->timeout_ms);
	set_congestion(fd, congestion);
	if (side == SR_NEXT)
		sr_sock_get_congestion(fd, ring->congestion,
		    sizeof(ring->congestion));
}

int
sr_ring_connect(struct sr_ring **out, struct sr_listener *listener,
    uint64_t rank, const char *const *addresses, uint64_t world,
    uint64_t token, const struct sr_ring_options *options,
    struct sr_error *err)
{
	struct sr_ring_options defaults;
	struct sr_ring *ring;
	int next_fd = -1, prev_fd = -1;

	*out = NULL;
	sr_error_clear(err);
	if (options == NULL) {
		sr_ring_options_init(&defaults);
		options = &defaults;
	}
	if (check_config(rank, world, addresses, options, err) != 0)
		goto fail;
	if ((ring = ring_new(rank, world, addresses, token, options)) == NULL) {
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
		if (sr_handshake_form(listener->fd, ring->rank, ring->world,
			token, addresses, options, &next_fd, &prev_fd, err) != 0) {
			ring_free(ring);
			goto fail;
		}
		set_peer(ring, SR_NEXT, next_fd, (ring->rank + 1) % ring->world,
		    options->congestion);
		set_peer(ring, SR_PREV, prev_fd,
		    (ring->rank + ring->world - 1) % ring->world,
		    options->congestion);
		ring->spin_ns = SR_SPIN_NS;
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
	for (int s = 0; s < 2; s++)
		if (ring->peer[s].fd >= 0)
			sr_sock_tune(ring->peer[s].fd, timeout_ms);
}

const char *
sr_ring_congestion(const struct sr_ring *ring)
{
	return ring->congestion;
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
		.recvs = ring->plan_recvs };
	return 0;
}

int
sr_ring_fail_again(struct sr_ring *ring, struct sr_error *err)
{
	*err = ring->failure;
	err->rank = ring->rank;
	return -1;
}

/*
 * Writes len bytes to a peer within the deadline.  An abort must start at
 * a frame boundary: a frame of which nothing went out is dropped, one
 * under way is finished first with its own bytes, which the engine only
 * starts to send once it holds them all (engine.c, start_piece), and
 * with integrity checks, the trailer that covers them.
 */
static void
send_bounded(struct sr_peer *p, bool integrity, const uint8_t *bytes,
    size_t len, int64_t deadline)
{
	if (p->tx_header_left == SR_FRAME_HEADER_LEN) {
		p->tx_header_left = 0;
		p->tx_payload_left = 0;
		p->tx_trailer_left = 0;
	}
	while (p->tx_header_left > 0 || p->tx_payload_left > 0 ||
	    p->tx_trailer_left > 0 || len > 0) {
		struct pollfd pfd = { .fd = p->fd, .events = POLLOUT };
		const uint8_t *from;
		size_t want;
		ssize_t n;

		if (p->tx_header_left > 0) {
			from = p->tx_header + SR_FRAME_HEADER_LEN -
			    p->tx_header_left;
			want = p->tx_header_left;
		} else if (p->tx_payload_left > 0) {
			from = p->tx_data;
			want = p->tx_payload_left > SR_IO_MAX ? SR_IO_MAX :
			    (size_t)p->tx_payload_left;
		} else if (p->tx_trailer_left > 0) {
			from = p->tx_trailer + SR_TRAILER_LEN - p->tx_trailer_left;
			want = p->tx_trailer_left;
		} else {
			from = bytes;
			want = len;
		}
		n = send(p->fd, from, want, MSG_NOSIGNAL | MSG_DONTWAIT);
		if (n < 0 && errno == EAGAIN) {
			if (poll(&pfd, 1, sr_clock_left_ms(deadline)) <= 0 &&
			    sr_clock_ns() >= deadline)
				return;
			continue;
		}
		if (n < 0 && errno == EINTR)
			continue;
		if (n <= 0)
			return;
		if (p->tx_header_left > 0) {
			p->tx_header_left -= (size_t)n;
		} else if (p->tx_payload_left > 0) {
			if (integrity)
				p->tx_crc = sr_crc32c(p->tx_crc, p->tx_data,
				    (size_t)n);
			p->tx_data += n;
			p->tx_payload_left -= (uint64_t)n;
			if (integrity && p->tx_payload_left == 0) {
				sr_put_u32le(p->tx_trailer, p->tx_crc);
				p->tx_trailer_left = SR_TRAILER_LEN;
			}
		} else if (p->tx_trailer_left > 0) {
			p->tx_trailer_left -= (size_t)n;
		} else {
			bytes += n;
			len -= (size_t)n;
		}
	}
}

static size_t
control_frame(uint8_t kind, const uint8_t *payload, size_t len, uint8_t *out)
{
	struct sr_frame frame = { .kind = kind, .length = len };

	sr_frame_encode(&frame, out);
	if (len > 0)
		memcpy(out + SR_FRAME_HEADER_LEN, payload, len);
	return SR_FRAME_HEADER_LEN + len;
}

void
sr_ring_heard_abort(struct sr_ring *ring, const struct sr_abort *abort,
    struct sr_error *err)
{
	if (!ring->heard_abort) {
		ring->heard = *abort;
		ring->heard_abort = true;
	}
	sr_error_set(err, sr_wire_to_code(abort->wire_class),
	    SR_PHASE_COLLECTIVE, "rank %u reported: %s", abort->origin,
	    abort->reason);
	err->origin = abort->origin;
	err->peer = -1;
	err->peer_address[0] = '\0';
	if (abort->culprit != SR_NO_RANK) {
		err->peer = abort->culprit;
		if (abort->culprit < ring->world)
			snprintf(err->peer_address, sizeof(err->peer_address),
			    "%s", ring->addresses[abort->culprit]);
	} else if (abort->origin < ring->world) {
		err->peer = abort->origin;
		snprintf(err->peer_address, sizeof(err->peer_address), "%s",
		    ring->addresses[abort->origin]);
	}
}

/* Whether fd is a TCP socket whose sent bytes the peer has not all
 * acknowledged yet (a reset now would discard them).  Other sockets
 * (AF_UNIX pairs in tests) keep what they delivered. */
static bool
unacknowledged(int fd)
{
	struct sockaddr_storage ss;
	socklen_t len = sizeof(ss);
	int queued = 0;

	if (getsockname(fd, (struct sockaddr *)&ss, &len) != 0 ||
	    (ss.ss_family != AF_INET && ss.ss_family != AF_INET6))
		return false;
	if (ioctl(fd, SIOCOUTQ, &queued) != 0)
		return false;
	return queued > 0;
}

/*
 * After the abort went out and the write sides were shut: waits, within
 * the deadline, until each neighbour's kernel has acknowledged every byte
 * (or the neighbour is gone), reading and dropping what comes meanwhile
 * (this rank has failed; a neighbour blocked sending to it must not stay
 * blocked).  Closing earlier with unread bytes would send a reset, which
 * discards what is still queued: the abort itself.
 */
static void
linger(struct sr_ring *ring, int64_t deadline)
{
	uint8_t sink[4096];
	bool open[2];

	for (int s = 0; s < 2; s++)
		open[s] = ring->peer[s].fd >= 0;
	while (open[0] || open[1]) {
		struct pollfd fds[2];
		int wait = sr_clock_left_ms(deadline);

		for (int s = 0; s < 2; s++) {
			if (open[s] && !unacknowledged(ring->peer[s].fd))
				open[s] = false;
			fds[s].fd = open[s] ? ring->peer[s].fd : -1;
			fds[s].events = POLLIN;
			fds[s].revents = 0;
		}
		if ((!open[0] && !open[1]) || wait == 0)
			return;
		if (poll(fds, 2, wait < LINGER_POLL_MS ? wait : LINGER_POLL_MS) < 0 &&
		    errno != EINTR)
			return;
		for (int s = 0; s < 2; s++) {
			ssize_t n;

			if (!open[s] || fds[s].revents == 0)
				continue;
			n = recv(fds[s].fd, sink, sizeof(sink), MSG_DONTWAIT);
			if (n == 0 || (n < 0 && errno != EAGAIN && errno != EINTR))
				open[s] = false;
		}
	}
}

void
sr_ring_fail(struct sr_ring *ring, const struct sr_error *err)
{
	uint8_t payload[SR_ABORT_MAX], frame[SR_FRAME_HEADER_LEN + SR_ABORT_MAX];
	struct sr_abort abort;
	int64_t deadline = sr_clock_ns() + ABORT_BUDGET_NS;
	size_t n;

	if (ring->failed)
		return;
	ring->failed = true;
	ring->failure = *err;
	ring->failure.rank = ring->rank;
	if (err->origin >= 0 && ring->heard_abort) {
		/* Forwarding: the origin's own fields, unchanged. */
		abort = ring->heard;
	} else {
		memset(&abort, 0, sizeof(abort));
		abort.origin = ring->rank;
		abort.wire_class = sr_wire_from_code(err->code);
		abort.culprit = err->peer >= 0 ? (uint32_t)err->peer :
		    SR_NO_RANK;
		snprintf(abort.reason, sizeof(abort.reason), "%.400s",
		    err->message);
	}
	n = control_frame(SR_FRAME_ABORT, payload,
	    sr_abort_encode(&abort, payload, sizeof(payload)), frame);
	for (int s = 0; s < 2; s++) {
		struct sr_peer *p = &ring->peer[s];

		if (p->fd < 0)
			continue;
		/* A lost peer fails the send at once (EPIPE); a stopped one
		 * costs at most the budget. */
		send_bounded(p, ring->integrity, frame, n, deadline);
		shutdown(p->fd, SHUT_WR);
	}
	linger(ring, deadline);
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
