/*
 * test_engine.c - the transfer engine behind the public collectives, with
 * no real ranks: a ring is built by hand as rank 1 of 3, its two
 * neighbours are the far ends of socketpairs, and the test (or a forked
 * child, for frames trickled a byte at a time) plays them.  Covers the
 * decoder fed one byte at a time, every malformed header, aborts, EOF,
 * silence and the stickiness of a failure.
 */
#include <errno.h>
#include <fcntl.h>
#include <poll.h>
#include <pthread.h>
#include <signal.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>
#include <sys/ioctl.h>
#include <sys/socket.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

#include "check.h"
#include "clock.h"
#include "engine.h"
#include "ring.h"
#include "wire.h"
#include "sock.h"
#include "spread.h"
#include "crc32c.h"

#define RANK 1
#define WORLD 3
#define PREV_RANK 0
#define NEXT_RANK 2
#define TIMEOUT_MS 5000		/* long enough never to fire by accident */
#define BYTES 64

static const char *const addresses[WORLD] = { "10.0.0.1:4100",
	"10.0.0.2:4200", "[fd00::3]:4300" };

/* A hand-built ring and the neighbours' ends of its sockets. */
struct fake {
	struct sr_ring *ring;
	int far[2];
};

/* What sr_ring_connect would build for rank 1 of 3, but with socketpairs
 * for sockets. */
static int
fake_build(struct fake *f, int64_t timeout_ms, bool integrity)
{
	struct sr_ring_options options;
	static const uint32_t ranks[2] = { [SR_NEXT] = NEXT_RANK,
		[SR_PREV] = PREV_RANK };

	f->far[0] = f->far[1] = -1;
	sr_ring_options_init(&options);
	options.timeout_ms = timeout_ms;
	options.integrity = integrity;
	f->ring = sr_ring_new(RANK, WORLD, addresses, 7, &options, 2);
	if (f->ring == NULL)
		return -1;
	sr_ring_set_neighbours(f->ring, SR_NEXT, SR_PREV);
	for (int s = 0; s < 2; s++) {
		int sv[2];

		if (socketpair(AF_UNIX, SOCK_STREAM, 0, sv) != 0)
			return -1;
		sr_ring_set_link(f->ring, (uint32_t)s, sv[0], ranks[s], NULL);
		f->far[s] = sv[1];
	}
	return 0;
}

static void
fake_close(struct fake *f)
{
	/* The neighbours go first, so a clean close finds EOF at once
	 * instead of draining for its full budget. */
	for (int s = 0; s < 2; s++)
		if (f->far[s] >= 0)
			close(f->far[s]);
	sr_ring_close(f->ring);
}

/* A fake ring, or -1 (a failed check, nothing left open). */
static int
fake_open_with(struct fake *f, int64_t timeout_ms, bool integrity)
{
	if (fake_build(f, timeout_ms, integrity) == 0)
		return 0;
	CHECKF(0, "building the fake ring: %s", strerror(errno));
	fake_close(f);
	return -1;
}

static int
fake_open(struct fake *f, int64_t timeout_ms)
{
	return fake_open_with(f, timeout_ms, false);
}

static int64_t
now_ms(void)
{
	struct timespec ts;

	clock_gettime(CLOCK_MONOTONIC, &ts);
	return (int64_t)ts.tv_sec * 1000 + ts.tv_nsec / 1000000;
}

static void
put(int fd, const void *bytes, size_t len)
{
	const uint8_t *p = bytes;

	while (len > 0) {
		ssize_t n = send(fd, p, len, MSG_NOSIGNAL);

		if (n < 0 && errno == EINTR)
			continue;
		CHECKF(n > 0, "send: %s", strerror(errno));
		if (n <= 0)
			return;
		p += n;
		len -= (size_t)n;
	}
}

static void
put_frame(int fd, const struct sr_frame *frame, const void *payload,
    size_t len)
{
	uint8_t header[SR_FRAME_HEADER_LEN];

	sr_frame_encode(frame, header);
	put(fd, header, sizeof(header));
	if (len > 0)
		put(fd, payload, len);
}

/* Reads exactly len bytes within timeout_ms; 0 or -1. */
static int
get(int fd, void *bytes, size_t len, int timeout_ms)
{
	int64_t deadline = now_ms() + timeout_ms;
	uint8_t *p = bytes;

	while (len > 0) {
		struct pollfd pfd = { .fd = fd, .events = POLLIN };
		int64_t left = deadline - now_ms();
		ssize_t n;

		if (left <= 0 || poll(&pfd, 1, (int)left) <= 0)
			return -1;
		n = recv(fd, p, len, MSG_DONTWAIT);
		if (n < 0 && (errno == EINTR || errno == EAGAIN))
			continue;
		if (n <= 0)
			return -1;
		p += n;
		len -= (size_t)n;
	}
	return 0;
}

/* Bytes queued unread on fd. */
static int
pending(int fd)
{
	int n = -1;

	if (ioctl(fd, FIONREAD, &n) != 0)
		return -1;
	return n;
}

static bool
contains(const char *haystack, const char *needle)
{
	return strstr(haystack, needle) != NULL;
}

/*
 * A child writes bytes to fd one at a time.  The pause only makes partial
 * reads likely (each byte its own recv); nothing waits on it.
 */
static pid_t
trickle(int fd, const uint8_t *bytes, size_t len)
{
	pid_t pid = fork();

	if (pid != 0)
		return pid;
	for (size_t i = 0; i < len; i++) {
		if (send(fd, bytes + i, 1, MSG_NOSIGNAL) != 1)
			_exit(1);
		usleep(500);
	}
	_exit(0);
}

static int
reap(pid_t pid)
{
	int status;

	if (pid < 0)
		return -1;
	while (waitpid(pid, &status, 0) < 0)
		if (errno != EINTR)
			return -1;
	return WIFEXITED(status) ? WEXITSTATUS(status) : -1;
}

/* The frame of a broadcast from rank 0 as the ring's first collective; a
 * broadcast's step field carries its root. */
static struct sr_frame
broadcast_frame(uint64_t length)
{
	struct sr_frame frame = { .kind = SR_FRAME_BROADCAST,
		.step = PREV_RANK, .seq = 1, .length = length };

	return frame;
}

static size_t
abort_payload(uint8_t *out, uint32_t origin, uint32_t wire_class,
    uint32_t culprit, const char *reason)
{
	struct sr_abort abort;

	memset(&abort, 0, sizeof(abort));
	abort.origin = origin;
	abort.wire_class = wire_class;
	abort.culprit = culprit;
	snprintf(abort.reason, sizeof(abort.reason), "%s", reason);
	return sr_abort_encode(&abort, out, SR_ABORT_MAX);
}

static void
fill_pattern(uint8_t *p, size_t len, uint8_t seed)
{
	for (size_t i = 0; i < len; i++)
		p[i] = (uint8_t)(seed + i * 7);
}

/* A frame with its CRC-32C trailer, as a ring with integrity checks
 * sends it; flip > 0 corrupts that payload byte after the CRC is taken. */
static void
put_checked_frame(int fd, const struct sr_frame *frame, const uint8_t *payload,
    size_t len, size_t flip)
{
	uint8_t header[SR_FRAME_HEADER_LEN], trailer[SR_TRAILER_LEN];
	uint8_t copy[BYTES];
	uint32_t crc;

	sr_frame_encode(frame, header);
	crc = sr_crc32c(sr_crc32c(0, header, sizeof(header)), payload, len);
	sr_put_u32le(trailer, crc);
	memcpy(copy, payload, len);
	if (flip > 0)
		copy[flip - 1] ^= 0x10;
	put(fd, header, sizeof(header));
	put(fd, copy, len);
	put(fd, trailer, sizeof(trailer));
}

/* ------------------------------------------------------------- successes */

static void
broadcast_frame_fed_one_byte_at_a_time(void)
{
	struct sr_frame frame = broadcast_frame(BYTES);
	uint8_t wire[SR_FRAME_HEADER_LEN + BYTES], fwd[sizeof(wire)];
	uint8_t buf[BYTES];
	struct sr_error err;
	struct fake f;
	pid_t pid;

	if (fake_open(&f, TIMEOUT_MS) != 0)
		return;
	sr_frame_encode(&frame, wire);
	fill_pattern(wire + SR_FRAME_HEADER_LEN, BYTES, 3);
	pid = trickle(f.far[SR_PREV], wire, sizeof(wire));
	CHECK(pid > 0);
	memset(buf, 0, sizeof(buf));
	CHECKF(sr_broadcast(f.ring, buf, BYTES, PREV_RANK, &err) == 0, "%s",
	    err.message);
	CHECK(memcmp(buf, wire + SR_FRAME_HEADER_LEN, BYTES) == 0);
	CHECK(reap(pid) == 0);
	/* Rank 1 is not the last of the chain: it forwards the same frame
	 * to rank 2, header and all. */
	CHECK(get(f.far[SR_NEXT], fwd, sizeof(fwd), 1000) == 0);
	CHECK(memcmp(fwd, wire, sizeof(wire)) == 0);
	CHECK(pending(f.far[SR_NEXT]) == 0);
	CHECK(!f.ring->failed);
	fake_close(&f);
}

static void
allgather_runs_both_ways(void)
{
	struct sr_frame frame = { .kind = SR_FRAME_ALLGATHER, .seq = 1,
		.length = 16 };
	uint8_t mine[16], b0[16], b2[16], all[3 * 16];
	uint8_t header[SR_FRAME_HEADER_LEN], data[16];
	struct sr_frame got;
	struct sr_error err;
	struct fake f;

	if (fake_open(&f, TIMEOUT_MS) != 0)
		return;
	fill_pattern(mine, 16, 1);
	fill_pattern(b0, 16, 100);
	fill_pattern(b2, 16, 200);
	/* In a world of 3 one hop each way brings every block: rank 0's
	 * from the previous rank, rank 2's from the next. */
	frame.step = 0;
	put_frame(f.far[SR_PREV], &frame, b0, 16);
	put_frame(f.far[SR_NEXT], &frame, b2, 16);
	memset(all, 0, sizeof(all));
	CHECKF(sr_allgather(f.ring, mine, 16, all, &err) == 0, "%s",
	    err.message);
	CHECK(memcmp(all, b0, 16) == 0);
	CHECK(memcmp(all + 16, mine, 16) == 0);
	CHECK(memcmp(all + 32, b2, 16) == 0);
	/* Rank 1's own block went both ways, as step 0. */
	for (int s = 0; s < 2; s++) {
		CHECK(get(f.far[s], header, sizeof(header), 1000) == 0);
		sr_frame_decode(header, &got);
		CHECK(got.kind == SR_FRAME_ALLGATHER && got.step == 0 &&
		    got.seq == 1 && got.length == 16);
		CHECK(get(f.far[s], data, 16, 1000) == 0);
		CHECK(memcmp(data, mine, 16) == 0);
	}
	fake_close(&f);
}

/* A neighbour that finished may start the next collective, on either
 * side: its frames wait for their turn instead of failing this one. */
static void
next_collective_waits_on_either_side(void)
{
	struct sr_frame frame = { .kind = SR_FRAME_ALLGATHER, .seq = 1,
		.length = 8 };
	uint8_t mine[8], b0[8], b2[8], later[8], all[3 * 8];
	struct sr_error err;
	struct fake f;

	if (fake_open(&f, TIMEOUT_MS) != 0)
		return;
	fill_pattern(mine, 8, 1);
	fill_pattern(b0, 8, 100);
	fill_pattern(b2, 8, 200);
	fill_pattern(later, 8, 50);
	put_frame(f.far[SR_PREV], &frame, b0, 8);
	put_frame(f.far[SR_NEXT], &frame, b2, 8);
	/* The next rank's frame of call 2 comes right behind. */
	frame.seq = 2;
	put_frame(f.far[SR_NEXT], &frame, later, 8);
	CHECKF(sr_allgather(f.ring, mine, 8, all, &err) == 0, "%s",
	    err.message);
	CHECK(memcmp(all + 16, b2, 8) == 0);
	put_frame(f.far[SR_PREV], &frame, b2, 8);
	CHECKF(sr_allgather(f.ring, mine, 8, all, &err) == 0, "%s",
	    err.message);
	CHECK(memcmp(all, b2, 8) == 0);
	CHECK(memcmp(all + 16, later, 8) == 0);
	fake_close(&f);
}

static void
each_collective_takes_the_next_seq(void)
{
	struct sr_frame first = broadcast_frame(BYTES), second = first;
	uint8_t p1[BYTES], p2[BYTES], buf[BYTES];
	struct sr_error err;
	struct fake f;

	if (fake_open(&f, TIMEOUT_MS) != 0)
		return;
	fill_pattern(p1, BYTES, 11);
	fill_pattern(p2, BYTES, 22);
	second.seq = 2;
	/* Both at once: the second header is read ahead while the first
	 * collective finishes, and must wait for its turn. */
	put_frame(f.far[SR_PREV], &first, p1, BYTES);
	put_frame(f.far[SR_PREV], &second, p2, BYTES);
	CHECKF(sr_broadcast(f.ring, buf, BYTES, PREV_RANK, &err) == 0, "%s",
	    err.message);
	CHECK(memcmp(buf, p1, BYTES) == 0);
	CHECKF(sr_broadcast(f.ring, buf, BYTES, PREV_RANK, &err) == 0, "%s",
	    err.message);
	CHECK(memcmp(buf, p2, BYTES) == 0);
	CHECK(f.ring->seq == 2);
	fake_close(&f);
}

/* ---------------------------------------------------- malformed headers */

/*
 * Rank 0 sends `bad` (and some payload) where rank 1 expects the
 * broadcast of BYTES bytes: an out-of-step error naming rank 0, with not
 * a byte of payload written.
 */
static void
expect_out_of_step(const struct sr_frame *bad, const char *saw)
{
	static const char expected[] =
	    "expected broadcast step 0 seq 1 of 64 bytes";
	uint8_t buf[BYTES], payload[100];
	char got[200];
	struct sr_error err;
	struct fake f;

	if (fake_open(&f, TIMEOUT_MS) != 0)
		return;
	snprintf(got, sizeof(got), "got %s from rank 0 (10.0.0.1:4100)", saw);
	memset(payload, 0x77, sizeof(payload));
	put_frame(f.far[SR_PREV], bad, payload, sizeof(payload));
	memset(buf, 0xee, sizeof(buf));
	CHECK(sr_broadcast(f.ring, buf, BYTES, PREV_RANK, &err) == -1);
	CHECKF(err.code == SR_EOUT_OF_STEP, "code %s",
	    sr_code_name(err.code));
	CHECK(err.phase == SR_PHASE_COLLECTIVE);
	CHECK(err.rank == RANK);
	CHECK(err.peer == PREV_RANK);
	CHECK(err.origin == -1);
	CHECK(strcmp(err.peer_address, addresses[PREV_RANK]) == 0);
	CHECKF(contains(err.message, "out of step"), "%s", err.message);
	CHECKF(contains(err.message, expected), "%s", err.message);
	CHECKF(contains(err.message, got), "%s", err.message);
	/* Checked before any payload reaches the caller; a small frame is
	 * read whole, but never more than the frame this rank expected. */
	CHECKF(pending(f.ring->links[SR_PREV].fd) ==
	    (int)(sizeof(payload) - BYTES), "%d bytes left unread",
	    pending(f.ring->links[SR_PREV].fd));
	for (size_t i = 0; i < sizeof(buf); i++)
		CHECKF(buf[i] == 0xee, "buf[%zu] written", i);
	CHECK(f.ring->failed);
	fake_close(&f);
}

static void
out_of_step_other_kind(void)
{
	struct sr_frame bad = broadcast_frame(BYTES);

	bad.kind = SR_FRAME_ALLGATHER;
	expect_out_of_step(&bad, "allgather step 0 seq 1 of 64 bytes");
}

static void
out_of_step_other_seq(void)
{
	struct sr_frame bad = broadcast_frame(BYTES);

	bad.seq = 2;
	expect_out_of_step(&bad, "broadcast step 0 seq 2 of 64 bytes");
}

static void
out_of_step_other_step(void)
{
	struct sr_frame bad = broadcast_frame(BYTES);

	/* A broadcast from another root. */
	bad.step = 2;
	expect_out_of_step(&bad, "broadcast step 2 seq 1 of 64 bytes");
}

static void
out_of_step_other_length(void)
{
	struct sr_frame bad = broadcast_frame(BYTES);

	bad.length = BYTES + 1;
	expect_out_of_step(&bad, "broadcast step 0 seq 1 of 65 bytes");
}

static void
out_of_step_huge_length(void)
{
	struct sr_frame bad = broadcast_frame(UINT64_C(1) << 63);

	expect_out_of_step(&bad,
	    "broadcast step 0 seq 1 of 9223372036854775808 bytes");
}

static void
out_of_step_unknown_kind(void)
{
	struct sr_frame bad = broadcast_frame(BYTES);

	bad.kind = 200;
	expect_out_of_step(&bad,
	    "a frame of unknown kind 200 (not a silvic frame)");
}

static void
abort_of_absurd_length_is_rejected(void)
{
	struct sr_frame bad = { .kind = SR_FRAME_ABORT,
		.length = UINT64_C(1) << 63 };
	uint8_t buf[BYTES], payload[100];
	struct sr_error err;
	struct fake f;

	if (fake_open(&f, TIMEOUT_MS) != 0)
		return;
	memset(payload, 'a', sizeof(payload));
	put_frame(f.far[SR_PREV], &bad, payload, sizeof(payload));
	CHECK(sr_broadcast(f.ring, buf, BYTES, PREV_RANK, &err) == -1);
	CHECKF(err.code == SR_EOUT_OF_STEP, "code %s",
	    sr_code_name(err.code));
	CHECK(err.peer == PREV_RANK);
	CHECKF(contains(err.message, "an abort frame of 9223372036854775808 "
	    "bytes (not a silvic frame) came from rank 0 (10.0.0.1:4100)"),
	    "%s", err.message);
	CHECK(pending(f.ring->links[SR_PREV].fd) ==
	    (int)(sizeof(payload) - BYTES));
	fake_close(&f);
}

/* A frame too big to be read whole: its header is checked before a byte
 * of the payload behind it leaves the socket. */
static void
large_frame_payload_waits_for_its_header(void)
{
	struct sr_frame bad = broadcast_frame(2 * SR_STAGE);
	static uint8_t buf[2 * SR_STAGE];
	uint8_t payload[100];
	struct sr_error err;
	struct fake f;

	if (fake_open(&f, TIMEOUT_MS) != 0)
		return;
	bad.step = 1;
	memset(payload, 0x77, sizeof(payload));
	put_frame(f.far[SR_PREV], &bad, payload, sizeof(payload));
	memset(buf, 0xee, sizeof(buf));
	CHECK(sr_broadcast(f.ring, buf, sizeof(buf), PREV_RANK, &err) == -1);
	CHECKF(err.code == SR_EOUT_OF_STEP, "code %s",
	    sr_code_name(err.code));
	CHECKF(pending(f.ring->links[SR_PREV].fd) == (int)sizeof(payload),
	    "%d bytes left unread", pending(f.ring->links[SR_PREV].fd));
	for (size_t i = 0; i < sizeof(buf); i++)
		CHECKF(buf[i] == 0xee, "buf[%zu] written", i);
	fake_close(&f);
}

static void
goodbye_mid_collective_is_out_of_step(void)
{
	struct sr_frame bye = { .kind = SR_FRAME_BYE, .seq = 0,
		.length = SR_GOODBYE_LEN };
	struct sr_goodbye said = { .collectives = 0, .rank = PREV_RANK,
		.world = WORLD };
	uint8_t buf[BYTES], payload[SR_GOODBYE_LEN];
	struct sr_error err;
	struct fake f;

	if (fake_open(&f, TIMEOUT_MS) != 0)
		return;
	sr_goodbye_encode(&said, payload);
	put_frame(f.far[SR_PREV], &bye, payload, sizeof(payload));
	CHECK(sr_broadcast(f.ring, buf, BYTES, PREV_RANK, &err) == -1);
	CHECKF(err.code == SR_EOUT_OF_STEP, "code %s",
	    sr_code_name(err.code));
	CHECK(err.peer == PREV_RANK);
	CHECKF(contains(err.message, "the ring was closed (it finished its "
	    "collectives, 0 of them, and said goodbye) by rank 0 "
	    "(10.0.0.1:4100)"), "%s", err.message);
	fake_close(&f);
}

static void
failure_is_told_to_both_neighbours(void)
{
	struct sr_frame bad = broadcast_frame(BYTES + 1);
	uint8_t header[SR_FRAME_HEADER_LEN], payload[SR_ABORT_MAX];
	struct sr_frame got;
	struct sr_abort abort;
	struct sr_error err;
	struct fake f;

	if (fake_open(&f, TIMEOUT_MS) != 0)
		return;
	put_frame(f.far[SR_PREV], &bad, NULL, 0);
	CHECK(sr_broadcast(f.ring, payload, BYTES, PREV_RANK, &err) == -1);
	for (int s = 0; s < 2; s++) {
		CHECK(get(f.far[s], header, sizeof(header), 1000) == 0);
		sr_frame_decode(header, &got);
		CHECKF(got.kind == SR_FRAME_ABORT, "side %d kind %u", s,
		    got.kind);
		CHECKF(got.length >= SR_ABORT_FIXED &&
		    got.length <= SR_ABORT_MAX, "side %d length %llu", s,
		    (unsigned long long)got.length);
		if (got.length < SR_ABORT_FIXED || got.length > SR_ABORT_MAX)
			continue;
		CHECK(get(f.far[s], payload, (size_t)got.length, 1000) == 0);
		CHECK(sr_abort_decode(payload, (size_t)got.length, &abort) == 0);
		CHECK(abort.origin == RANK);
		CHECK(abort.wire_class == SR_WIRE_OUT_OF_STEP);
		CHECK(abort.culprit == PREV_RANK);
		CHECKF(strcmp(abort.reason, err.message) == 0, "\"%s\"",
		    abort.reason);
	}
	fake_close(&f);
}

/* ----------------------------------------------------------------- aborts */

static const char timeout_reason[] =
    "timed out after 30s of silence waiting for data from rank 1";

static void
check_reported_abort(const struct sr_error *err)
{
	CHECKF(err->code == SR_ETIMEOUT, "code %s", sr_code_name(err->code));
	CHECK(err->phase == SR_PHASE_COLLECTIVE);
	CHECK(err->origin == NEXT_RANK);
	CHECK(err->rank == RANK);
	/* The rank the origin blamed, with its address. */
	CHECK(err->peer == PREV_RANK);
	CHECK(strcmp(err->peer_address, addresses[PREV_RANK]) == 0);
	CHECKF(strcmp(err->message, "rank 2 reported: timed out after 30s of "
	    "silence waiting for data from rank 1") == 0, "%s", err->message);
}

static void
abort_from_peer_reports_origin(void)
{
	struct sr_frame frame = { .kind = SR_FRAME_ABORT };
	uint8_t payload[SR_ABORT_MAX], header[SR_FRAME_HEADER_LEN];
	uint8_t buf[BYTES];
	struct sr_frame got;
	struct sr_abort fwd;
	struct sr_error err;
	struct fake f;

	if (fake_open(&f, TIMEOUT_MS) != 0)
		return;
	/* Rank 2 failed; its abort came round through rank 0. */
	frame.length = abort_payload(payload, NEXT_RANK, SR_WIRE_TIMEOUT,
	    PREV_RANK, timeout_reason);
	put_frame(f.far[SR_PREV], &frame, payload, (size_t)frame.length);
	CHECK(sr_broadcast(f.ring, buf, BYTES, PREV_RANK, &err) == -1);
	check_reported_abort(&err);
	/* Passed on with the origin's own words, not "rank 2 reported". */
	CHECK(get(f.far[SR_NEXT], header, sizeof(header), 1000) == 0);
	sr_frame_decode(header, &got);
	CHECK(got.kind == SR_FRAME_ABORT);
	CHECK(got.length == SR_ABORT_FIXED + strlen(timeout_reason));
	if (got.length == SR_ABORT_FIXED + strlen(timeout_reason)) {
		CHECK(get(f.far[SR_NEXT], payload, (size_t)got.length,
		    1000) == 0);
		CHECK(sr_abort_decode(payload, (size_t)got.length, &fwd) == 0);
		CHECK(fwd.origin == NEXT_RANK && fwd.wire_class == SR_WIRE_TIMEOUT &&
		    fwd.culprit == PREV_RANK);
		CHECKF(strcmp(fwd.reason, timeout_reason) == 0, "\"%s\"",
		    fwd.reason);
	}
	fake_close(&f);
}

static void
abort_fed_one_byte_at_a_time(void)
{
	struct sr_frame frame = { .kind = SR_FRAME_ABORT };
	uint8_t wire[SR_FRAME_HEADER_LEN + SR_ABORT_MAX], buf[BYTES];
	struct sr_error err;
	struct fake f;
	pid_t pid;

	if (fake_open(&f, TIMEOUT_MS) != 0)
		return;
	frame.length = abort_payload(wire + SR_FRAME_HEADER_LEN, NEXT_RANK,
	    SR_WIRE_TIMEOUT, PREV_RANK, timeout_reason);
	sr_frame_encode(&frame, wire);
	pid = trickle(f.far[SR_PREV], wire,
	    SR_FRAME_HEADER_LEN + (size_t)frame.length);
	CHECK(pid > 0);
	CHECK(sr_broadcast(f.ring, buf, BYTES, PREV_RANK, &err) == -1);
	check_reported_abort(&err);
	CHECK(reap(pid) == 0);
	fake_close(&f);
}

static void
abort_on_the_idle_side_is_noticed(void)
{
	struct sr_frame frame = { .kind = SR_FRAME_ABORT };
	uint8_t payload[SR_ABORT_MAX], buf[BYTES];
	struct sr_error err;
	struct fake f;
	int64_t start;

	if (fake_open(&f, TIMEOUT_MS) != 0)
		return;
	/* Rank 1 waits on rank 0, which is silent; rank 2 fails and tells
	 * its previous rank, on the side nothing is expected from. */
	frame.length = abort_payload(payload, NEXT_RANK, SR_WIRE_TIMEOUT,
	    PREV_RANK, timeout_reason);
	put_frame(f.far[SR_NEXT], &frame, payload, (size_t)frame.length);
	start = now_ms();
	CHECK(sr_broadcast(f.ring, buf, BYTES, PREV_RANK, &err) == -1);
	CHECKF(now_ms() - start < TIMEOUT_MS / 2, "took %lld ms",
	    (long long)(now_ms() - start));
	check_reported_abort(&err);
	fake_close(&f);
}

/*
 * Rank 2 sent a frame of a later collective, then (with_abort) failed:
 * its abort sits behind that frame, and it closed.  Rank 1 parks the
 * later frame's header (its collective has not begun here); only then
 * does rank 0's broadcast come, and rank 1's forward to rank 2 breaks.
 * The failure is rank 2's abort, read past the parked frame (and its
 * trailer, with integrity checks), not rank 1's broken pipe (seen once
 * in test_group's test_member_stops under load); with no abort there,
 * the end of rank 2's stream comes, and the lost connection to rank 2
 * is the failure.
 */
static void
parked_frame_then_the_send_breaks(bool integrity, bool with_abort,
    size_t flip)
{
	struct sr_frame later = broadcast_frame(BYTES), first =
	    broadcast_frame(BYTES), abort = { .kind = SR_FRAME_ABORT };
	uint8_t payload[SR_ABORT_MAX], buf[BYTES], data[BYTES];
	size_t later_len = SR_FRAME_HEADER_LEN + BYTES +
	    (integrity ? SR_TRAILER_LEN : 0);
	struct sr_error err;
	struct fake f;
	int64_t deadline;
	int near, queued;
	pid_t pid;

	if (fake_open_with(&f, TIMEOUT_MS, integrity) != 0)
		return;
	near = f.ring->links[SR_NEXT].fd;
	later.seq = 2;
	fill_pattern(data, BYTES, 9);
	if (integrity)
		put_checked_frame(f.far[SR_NEXT], &later, data, BYTES, flip);
	else
		put_frame(f.far[SR_NEXT], &later, data, BYTES);
	if (with_abort) {
		abort.length = abort_payload(payload, NEXT_RANK,
		    SR_WIRE_TIMEOUT, PREV_RANK, timeout_reason);
		put_frame(f.far[SR_NEXT], &abort, payload,
		    (size_t)abort.length);
	}
	close(f.far[SR_NEXT]);
	f.far[SR_NEXT] = -1;
	queued = pending(near);
	pid = fork();
	if (pid == 0) {
		/* Rank 0, once rank 1 has read the later frame's header
		 * (and no further: its payload waits for its turn). */
		deadline = now_ms() + TIMEOUT_MS;
		while (pending(near) > queued - SR_FRAME_HEADER_LEN &&
		    now_ms() < deadline)
			usleep(1000);	/* polled, with a deadline */
		if (integrity)
			put_checked_frame(f.far[SR_PREV], &first, data, BYTES,
			    0);
		else
			put_frame(f.far[SR_PREV], &first, data, BYTES);
		_exit(0);
	}
	CHECK(pid > 0);
	CHECK(queued >= (int)later_len);
	CHECK(sr_broadcast(f.ring, buf, BYTES, PREV_RANK, &err) == -1);
	CHECK(reap(pid) == 0);
	if (flip > 0) {
		/* Dropped or not, a corrupt frame is named as one. */
		CHECKF(err.code == SR_ECORRUPT, "code %s",
		    sr_code_name(err.code));
		CHECK(err.peer == NEXT_RANK);
		CHECKF(contains(err.message, "integrity check failed") &&
		    contains(err.message, "rank 2 ("), "%s", err.message);
	} else if (with_abort) {
		check_reported_abort(&err);
	} else {
		CHECKF(err.code == SR_EPEER_CLOSED, "code %s",
		    sr_code_name(err.code));
		CHECK(err.peer == NEXT_RANK);
		CHECKF(contains(err.message, "lost the connection (") &&
		    contains(err.message, ") to rank 2 ("), "%s", err.message);
	}
	fake_close(&f);
}

static void
abort_behind_a_parked_frame_is_heard_when_the_send_breaks(void)
{
	parked_frame_then_the_send_breaks(false, true, 0);
}

static void
abort_behind_a_parked_checked_frame_is_heard_when_the_send_breaks(void)
{
	parked_frame_then_the_send_breaks(true, true, 0);
}

/* The parked frame's payload corrupted on the way: the drop checks its
 * trailer and fails on it, where it spun on the corrupt trailer. */
static void
corrupt_parked_frame_is_named_when_the_send_breaks(void)
{
	parked_frame_then_the_send_breaks(true, true, 3);
}

static void
no_abort_behind_a_parked_frame_the_lost_link_is_the_failure(void)
{
	parked_frame_then_the_send_breaks(false, false, 0);
}

static void
abort_without_culprit_blames_origin(void)
{
	struct sr_frame frame = { .kind = SR_FRAME_ABORT };
	uint8_t payload[SR_ABORT_MAX], buf[BYTES];
	struct sr_error err;
	struct fake f;

	if (fake_open(&f, TIMEOUT_MS) != 0)
		return;
	frame.length = abort_payload(payload, NEXT_RANK, SR_WIRE_IO, SR_NO_RANK,
	    "disk full");
	put_frame(f.far[SR_PREV], &frame, payload, (size_t)frame.length);
	CHECK(sr_broadcast(f.ring, buf, BYTES, PREV_RANK, &err) == -1);
	CHECK(err.code == SR_EIO);
	CHECK(err.origin == NEXT_RANK);
	CHECK(err.peer == NEXT_RANK);
	CHECKF(strcmp(err.message, "rank 2 reported: disk full") == 0, "%s",
	    err.message);
	fake_close(&f);
}

static void
abort_with_unknown_code_is_aborted(void)
{
	/* 0 and codes past the last frozen one. */
	static const uint32_t codes[] = { 0, SR_WIRE_CHECK + 1, 999,
		UINT32_MAX };

	for (size_t i = 0; i < sizeof(codes) / sizeof(codes[0]); i++) {
		struct sr_frame frame = { .kind = SR_FRAME_ABORT };
		uint8_t payload[SR_ABORT_MAX], buf[BYTES];
		struct sr_error err;
		struct fake f;

		if (fake_open(&f, TIMEOUT_MS) != 0)
			return;
		frame.length = abort_payload(payload, PREV_RANK, codes[i],
		    SR_NO_RANK, "failed");
		put_frame(f.far[SR_PREV], &frame, payload,
		    (size_t)frame.length);
		CHECK(sr_broadcast(f.ring, buf, BYTES, PREV_RANK, &err) == -1);
		CHECKF(err.code == SR_EABORTED, "code %u gave %s", codes[i],
		    sr_code_name(err.code));
		CHECK(err.origin == PREV_RANK);
		CHECKF(strcmp(err.message, "rank 0 reported: failed") == 0,
		    "%s", err.message);
		fake_close(&f);
	}
}

/* ------------------------------------------------------ EOF and silence */

static void
expect_peer_closed(const struct sr_error *err, int64_t peer)
{
	CHECKF(err->code == SR_EPEER_CLOSED, "code %s",
	    sr_code_name(err->code));
	CHECK(err->phase == SR_PHASE_COLLECTIVE);
	CHECK(err->peer == peer);
	CHECK(strcmp(err->peer_address, addresses[peer]) == 0);
	CHECKF(contains(err->message, "closed by the peer"), "%s",
	    err->message);
	CHECKF(contains(err->message, peer == PREV_RANK ?
	    "rank 0 (10.0.0.1:4100)" : "rank 2 ([fd00::3]:4300)"), "%s",
	    err->message);
}

static void
peer_closes_mid_frame(void)
{
	struct sr_frame frame = broadcast_frame(BYTES);
	uint8_t payload[BYTES], buf[BYTES];
	struct sr_error err;
	struct fake f;

	if (fake_open(&f, TIMEOUT_MS) != 0)
		return;
	fill_pattern(payload, BYTES, 5);
	put_frame(f.far[SR_PREV], &frame, payload, BYTES / 2);
	close(f.far[SR_PREV]);
	f.far[SR_PREV] = -1;
	CHECK(sr_broadcast(f.ring, buf, BYTES, PREV_RANK, &err) == -1);
	expect_peer_closed(&err, PREV_RANK);
	CHECKF(contains(err.message, "in broadcast step 0 seq 1"), "%s",
	    err.message);
	fake_close(&f);
}

static void
peer_closes_before_any_frame(void)
{
	uint8_t buf[BYTES];
	struct sr_error err;
	struct fake f;

	if (fake_open(&f, TIMEOUT_MS) != 0)
		return;
	close(f.far[SR_PREV]);
	f.far[SR_PREV] = -1;
	CHECK(sr_broadcast(f.ring, buf, BYTES, PREV_RANK, &err) == -1);
	expect_peer_closed(&err, PREV_RANK);
	fake_close(&f);
}

static void
idle_side_closing_is_noticed(void)
{
	uint8_t buf[BYTES];
	struct sr_error err;
	struct fake f;

	if (fake_open(&f, TIMEOUT_MS) != 0)
		return;
	/* Rank 2 goes away without a goodbye while rank 1 waits on 0. */
	close(f.far[SR_NEXT]);
	f.far[SR_NEXT] = -1;
	CHECK(sr_broadcast(f.ring, buf, BYTES, PREV_RANK, &err) == -1);
	expect_peer_closed(&err, NEXT_RANK);
	fake_close(&f);
}

static void
silence_times_out(void)
{
	uint8_t buf[BYTES];
	struct sr_error err;
	struct fake f;
	int64_t start, took;

	if (fake_open(&f, 300) != 0)
		return;
	start = now_ms();
	CHECK(sr_broadcast(f.ring, buf, BYTES, PREV_RANK, &err) == -1);
	took = now_ms() - start;
	CHECKF(took >= 290 && took < 3000, "took %lld ms", (long long)took);
	CHECKF(err.code == SR_ETIMEOUT, "code %s", sr_code_name(err.code));
	CHECK(err.peer == PREV_RANK);
	CHECKF(contains(err.message, "timed out after 300ms of silence "
	    "waiting for data from rank 0 (10.0.0.1:4100)"), "%s",
	    err.message);
	fake_close(&f);
}

/*
 * A call on a broken ring fails at once with the first failure (the
 * caller's `first`); the call fills the caller's `err`.
 */
#define EXPECT_SAME_FAILURE(call)                                              \
	do {                                                                   \
		sr_error_clear(&err);                                          \
		CHECK((call) == -1);                                           \
		CHECKF(err.code == first.code, #call ": code %s",              \
		    sr_code_name(err.code));                                   \
		CHECKF(strcmp(err.message, first.message) == 0, #call ": %s",  \
		    err.message);                                              \
		CHECK(err.rank == RANK && err.peer == PREV_RANK);              \
	} while (0)

static void
failure_is_sticky(void)
{
	struct sr_frame bad = broadcast_frame(BYTES);
	uint8_t buf[3 * BYTES];
	struct sr_error first, err;
	struct fake f;
	int64_t start;

	if (fake_open(&f, TIMEOUT_MS) != 0)
		return;
	bad.seq = 9;
	put_frame(f.far[SR_PREV], &bad, NULL, 0);
	CHECK(sr_broadcast(f.ring, buf, BYTES, PREV_RANK, &first) == -1);
	CHECK(first.code == SR_EOUT_OF_STEP);
	/* Were a later call to wait, it would wait a minute. */
	f.ring->timeout_ms = 60000;
	start = now_ms();
	EXPECT_SAME_FAILURE(sr_broadcast(f.ring, buf, BYTES, PREV_RANK, &err));
	EXPECT_SAME_FAILURE(sr_allgather(f.ring, buf, BYTES, buf, &err));
	EXPECT_SAME_FAILURE(sr_allreduce(f.ring, buf, buf, 8, SR_F64, SR_SUM,
	    &err));
	EXPECT_SAME_FAILURE(sr_barrier(f.ring, &err));
	EXPECT_SAME_FAILURE(sr_ring_shift(f.ring, buf, buf, BYTES, &err));
	EXPECT_SAME_FAILURE(sr_link_transfer(f.ring, 0, buf, BYTES, 0, &err));
	/* Half the minute: none of the six waited for its timeout, on
	 * however busy a machine. */
	CHECKF(now_ms() - start < f.ring->timeout_ms / 2, "took %lld ms",
	    (long long)(now_ms() - start));
	CHECK(f.ring->seq == 1);
	fake_close(&f);
}

/* ------------------------------------------------------------ integrity */

static void
crc32c_known_answers(void)
{
	/* The CRC-32C check value, and RFC 3720's 32 zero bytes. */
	static const uint8_t zeros[32];

	CHECK(sr_crc32c(0, "123456789", 9) == 0xe3069283u);
	CHECK(sr_crc32c(0, zeros, sizeof(zeros)) == 0x8a9136aau);
	CHECK(sr_crc32c(sr_crc32c(0, "1234", 4), "56789", 5) == 0xe3069283u);
}

static void
integrity_checked_frame_is_accepted_and_forwarded_with_a_trailer(void)
{
	struct fake f;
	struct sr_error err;
	uint8_t sent[BYTES], buf[BYTES] = { 0 }, fwd[SR_FRAME_HEADER_LEN + BYTES +
	    SR_TRAILER_LEN];
	struct sr_frame frame = broadcast_frame(BYTES);

	if (fake_open_with(&f, TIMEOUT_MS, true) != 0)
		return;
	fill_pattern(sent, BYTES, 3);
	put_checked_frame(f.far[SR_PREV], &frame, sent, BYTES, 0);
	CHECKF(sr_broadcast(f.ring, buf, BYTES, PREV_RANK, &err) == 0, "%s",
	    err.message);
	CHECK(memcmp(buf, sent, BYTES) == 0);
	/* Rank 1 forwards to rank 2 with a valid trailer of its own. */
	CHECK(get(f.far[SR_NEXT], fwd, sizeof(fwd), 1000) == 0);
	CHECK(sr_get_u32le(fwd + SR_FRAME_HEADER_LEN + BYTES) ==
	    sr_crc32c(0, fwd, SR_FRAME_HEADER_LEN + BYTES));
	fake_close(&f);
}

static void
integrity_flipped_bit_is_corrupt_naming_the_peer(void)
{
	struct fake f;
	struct sr_error err;
	uint8_t sent[BYTES], buf[BYTES];
	struct sr_frame frame = broadcast_frame(BYTES);

	if (fake_open_with(&f, TIMEOUT_MS, true) != 0)
		return;
	fill_pattern(sent, BYTES, 9);
	put_checked_frame(f.far[SR_PREV], &frame, sent, BYTES, 17);
	CHECK(sr_broadcast(f.ring, buf, BYTES, PREV_RANK, &err) == -1);
	CHECK(err.code == SR_ECORRUPT);
	CHECK(err.peer == PREV_RANK);
	CHECKF(contains(err.message, "integrity check failed") &&
	    contains(err.message, addresses[PREV_RANK]), "%s", err.message);
	fake_close(&f);
}

static void
without_integrity_a_flipped_bit_goes_unnoticed(void)
{
	struct fake f;
	struct sr_error err;
	uint8_t sent[BYTES], buf[BYTES];
	struct sr_frame frame = broadcast_frame(BYTES);

	if (fake_open(&f, TIMEOUT_MS) != 0)
		return;
	fill_pattern(sent, BYTES, 9);
	sent[16] ^= 0x10;
	put_frame(f.far[SR_PREV], &frame, sent, BYTES);
	/* What the option is for: the corrupted byte arrives as data. */
	CHECK(sr_broadcast(f.ring, buf, BYTES, PREV_RANK, &err) == 0);
	CHECK(memcmp(buf, sent, BYTES) == 0);
	fake_close(&f);
}

/* ------------------------------------------------------------- heartbeats */

static void
put_heartbeat(int fd, uint32_t waits_on)
{
	uint8_t hb[SR_FRAME_HEADER_LEN];

	sr_heartbeat_encode(waits_on, 1, hb);
	put(fd, hb, sizeof(hb));
}

static void
heartbeats_before_a_frame_are_taken(void)
{
	struct sr_frame frame = broadcast_frame(BYTES);
	uint8_t payload[BYTES], buf[BYTES];
	uint8_t wire[2 * SR_FRAME_HEADER_LEN + SR_FRAME_HEADER_LEN + BYTES];
	struct sr_error err;
	struct fake f;
	pid_t pid;

	fill_pattern(payload, BYTES, 5);
	/* Two heartbeats and the frame in one read. */
	if (fake_open(&f, TIMEOUT_MS) != 0)
		return;
	put_heartbeat(f.far[SR_PREV], 7);
	put_heartbeat(f.far[SR_PREV], SR_NO_RANK);
	put_frame(f.far[SR_PREV], &frame, payload, BYTES);
	CHECKF(sr_broadcast(f.ring, buf, BYTES, PREV_RANK, &err) == 0, "%s",
	    err.message);
	CHECK(memcmp(buf, payload, BYTES) == 0);
	CHECK(f.ring->links[SR_PREV].waits_on == SR_NO_RANK);
	fake_close(&f);

	/* The same fed one byte at a time. */
	if (fake_open(&f, TIMEOUT_MS) != 0)
		return;
	sr_heartbeat_encode(NEXT_RANK, 1, wire);
	sr_heartbeat_encode(RANK, 1, wire + SR_FRAME_HEADER_LEN);
	sr_frame_encode(&frame, wire + 2 * SR_FRAME_HEADER_LEN);
	memcpy(wire + 3 * SR_FRAME_HEADER_LEN, payload, BYTES);
	memset(buf, 0, sizeof(buf));
	pid = trickle(f.far[SR_PREV], wire, sizeof(wire));
	CHECK(pid > 0);
	CHECKF(sr_broadcast(f.ring, buf, BYTES, PREV_RANK, &err) == 0, "%s",
	    err.message);
	CHECK(memcmp(buf, payload, BYTES) == 0);
	CHECK(f.ring->links[SR_PREV].waits_on == RANK);
	CHECK(reap(pid) == 0);
	fake_close(&f);
}

/* A child sends a heartbeat on fd every period_ms, count times, then
 * len bytes (if any). */
static pid_t
beat(int fd, int period_ms, int count, const uint8_t *bytes, size_t len)
{
	pid_t pid = fork();

	if (pid != 0)
		return pid;
	for (int i = 0; i < count; i++) {
		uint8_t hb[SR_FRAME_HEADER_LEN];

		sr_heartbeat_encode(PREV_RANK + 10, 1, hb);
		if (send(fd, hb, sizeof(hb), MSG_NOSIGNAL) != sizeof(hb))
			_exit(0);	/* the ring is gone */
		usleep((useconds_t)period_ms * 1000);
	}
	if (len > 0 && send(fd, bytes, len, MSG_NOSIGNAL) != (ssize_t)len)
		_exit(1);
	_exit(0);
}

static void
heartbeats_keep_a_waiting_rank_from_timing_out(void)
{
	struct sr_frame frame = broadcast_frame(BYTES);
	uint8_t wire[SR_FRAME_HEADER_LEN + BYTES], buf[BYTES];
	struct sr_error err;
	struct fake f;
	int64_t start;
	pid_t pid;

	/* Rank 0 waits itself for 600 ms, heartbeating every 100 ms, then
	 * sends: rank 1's timeout of 400 ms counts silence, not waiting. */
	if (fake_open(&f, 400) != 0)
		return;
	sr_frame_encode(&frame, wire);
	fill_pattern(wire + SR_FRAME_HEADER_LEN, BYTES, 9);
	start = now_ms();
	pid = beat(f.far[SR_PREV], 100, 6, wire, sizeof(wire));
	CHECKF(sr_broadcast(f.ring, buf, BYTES, PREV_RANK, &err) == 0, "%s",
	    err.message);
	CHECKF(now_ms() - start >= 500, "took %lld ms",
	    (long long)(now_ms() - start));
	CHECK(memcmp(buf, wire + SR_FRAME_HEADER_LEN, BYTES) == 0);
	CHECK(f.ring->links[SR_PREV].waits_on == PREV_RANK + 10);
	CHECK(reap(pid) == 0);
	fake_close(&f);
}

static void
ranks_all_alive_and_waiting_fail_after_twice_the_timeout(void)
{
	uint8_t buf[BYTES];
	struct sr_error err;
	struct fake f;
	int64_t start, took;
	pid_t pid;

	/* Rank 0 heartbeats for ever, never sending: a wait with no end
	 * (calls out of step) fails after 2 x 400 ms without progress. */
	if (fake_open(&f, 400) != 0)
		return;
	start = now_ms();
	pid = beat(f.far[SR_PREV], 100, 40, NULL, 0);
	CHECK(sr_broadcast(f.ring, buf, BYTES, PREV_RANK, &err) == -1);
	took = now_ms() - start;
	CHECKF(err.code == SR_ETIMEOUT && err.peer == PREV_RANK, "%s: %s",
	    sr_code_name(err.code), err.message);
	CHECKF(contains(err.message, "timed out after 800ms without progress, "
	    "every rank alive but waiting (out of step?) (it waits on rank "
	    "10); this rank waits on rank 0 (10.0.0.1:4100)"), "%s",
	    err.message);
	CHECKF(took >= 800 && took < 800 + 2000, "took %lld ms",
	    (long long)took);
	fake_close(&f);
	CHECK(reap(pid) == 0);
}

static void
the_silent_side_is_blamed_not_the_heartbeating_one(void)
{
	uint8_t all[WORLD * BYTES], mine[BYTES];
	struct sr_error err;
	struct fake f;
	int64_t start, took;
	pid_t pid;

	/*
	 * An allgather waits on both sides.  Rank 0 heartbeats, rank 2 says
	 * nothing: rank 2 is the one named, after the timeout, though rank
	 * 1 waits on rank 0's data too (a single timer named rank 0).
	 */
	if (fake_open(&f, 400) != 0)
		return;
	fill_pattern(mine, BYTES, 1);
	start = now_ms();
	pid = beat(f.far[SR_PREV], 100, 30, NULL, 0);
	CHECK(sr_allgather(f.ring, mine, BYTES, all, &err) == -1);
	took = now_ms() - start;
	CHECKF(err.code == SR_ETIMEOUT, "code %s", sr_code_name(err.code));
	CHECKF(err.peer == NEXT_RANK, "peer %lld: %s", (long long)err.peer,
	    err.message);
	CHECKF(contains(err.message, "timed out after 400ms of silence "
	    "waiting for data from rank 2 ([fd00::3]:4300)"), "%s",
	    err.message);
	CHECKF(took >= 400 && took < 400 + 2000, "took %lld ms",
	    (long long)took);
	fake_close(&f);
	CHECK(reap(pid) == 0);
}

static void
a_waiting_rank_sends_heartbeats_naming_whom_it_waits_on(void)
{
	uint8_t buf[BYTES], header[SR_FRAME_HEADER_LEN];
	struct sr_frame got;
	struct sr_error err;
	struct fake f;
	int beats = 0;

	/* Rank 1 waits 400 ms on rank 0 (silent) and fails; rank 2 heard
	 * heartbeats saying "waiting on rank 0" every 100 ms, then the
	 * abort. */
	if (fake_open(&f, 400) != 0)
		return;
	CHECK(sr_broadcast(f.ring, buf, BYTES, PREV_RANK, &err) == -1);
	CHECK(err.code == SR_ETIMEOUT && err.peer == PREV_RANK);
	for (;;) {
		if (get(f.far[SR_NEXT], header, sizeof(header), 1000) != 0) {
			CHECKF(0, "no abort after %d heartbeats", beats);
			break;
		}
		sr_frame_decode(header, &got);
		if (got.kind != SR_FRAME_HEARTBEAT)
			break;
		CHECK(got.step == PREV_RANK && got.seq == 1 &&
		    got.length == 0);
		beats++;
	}
	CHECKF(got.kind == SR_FRAME_ABORT, "kind %u", got.kind);
	CHECKF(beats >= 2 && beats <= 5, "%d heartbeats", beats);
	fake_close(&f);
}

/* ------------------------------------------------------------ streams */

#define STREAMS 2
#define PIECE (256u << 10)	/* a broadcast's piece: the engine's frame */

/* Rank 1 of 3 with two streams a link: far[link][stream] are the
 * neighbours' ends. */
struct fake_streams {
	struct sr_ring *ring;
	int far[2][STREAMS];
};

static int
fake_streams_open(struct fake_streams *f)
{
	struct sr_ring_options options;
	static const uint32_t ranks[2] = { [SR_NEXT] = NEXT_RANK,
		[SR_PREV] = PREV_RANK };

	memset(f->far, -1, sizeof(f->far));
	sr_ring_options_init(&options);
	options.timeout_ms = TIMEOUT_MS;
	options.streams = STREAMS;
	f->ring = sr_ring_new(RANK, WORLD, addresses, 7, &options, 2);
	CHECK(f->ring != NULL);
	if (f->ring == NULL)
		return -1;
	sr_ring_set_neighbours(f->ring, SR_NEXT, SR_PREV);
	for (uint32_t l = 0; l < 2; l++)
		for (uint32_t st = 0; st < STREAMS; st++) {
			int sv[2];

			CHECKF(socketpair(AF_UNIX, SOCK_STREAM, 0, sv) == 0,
			    "socketpair: %s", strerror(errno));
			sr_ring_set_link(f->ring, l + st * 2, sv[0], ranks[l],
			    NULL);
			f->far[l][st] = sv[1];
		}
	return 0;
}

static void
fake_streams_close(struct fake_streams *f)
{
	for (int l = 0; l < 2; l++)
		for (int st = 0; st < STREAMS; st++)
			if (f->far[l][st] >= 0)
				close(f->far[l][st]);
	sr_ring_close(f->ring);
}

static void
put_wide(int fd, const struct sr_frame *frame, const void *payload,
    size_t len)
{
	uint8_t header[SR_FRAME_WIDE_LEN];

	sr_frame_encode_wide(frame, header);
	put(fd, header, sizeof(header));
	if (len > 0)
		put(fd, payload, len);
}

/* Rank 0's goodbye after `collectives`, as one piece on a stream. */
static void
put_goodbye(int fd, uint64_t collectives)
{
	struct sr_frame bye = { .kind = SR_FRAME_BYE, .seq = collectives,
		.length = SR_GOODBYE_LEN };
	struct sr_goodbye said = { .collectives = collectives,
		.rank = PREV_RANK, .world = WORLD };
	uint8_t payload[SR_GOODBYE_LEN];

	sr_goodbye_encode(&said, payload);
	put_wide(fd, &bye, payload, sizeof(payload));
}

/*
 * Rank 0, done with a two-piece broadcast from rank 2 (rank 1 the last of
 * the chain, forwarding nothing), says goodbye on stream 0 behind piece 0
 * while piece 1 is still on its way on stream 1: the goodbye overtook it.
 * Piece 1 is written only once rank 1 has read stream 0 up to the
 * goodbye's payload (FIONREAD on rank 1's end), so the goodbye is judged
 * first; the broadcast waits
 * for piece 1 and is exact.  (Before, it failed "out of step: the ring
 * was closed", which a 64 MiB allreduce over 8 streams hit in 1 run of 4.)
 */
static void
goodbye_overtaking_a_piece_on_another_stream_waits(void)
{
	struct sr_frame piece = { .kind = SR_FRAME_BROADCAST,
		.step = NEXT_RANK, .seq = 1, .length = PIECE };
	uint8_t *sent = malloc(2 * PIECE), *buf = malloc(2 * PIECE);
	struct fake_streams f;
	struct sr_error err;
	pid_t pid;

	CHECK(sent != NULL && buf != NULL);
	if (sent == NULL || buf == NULL || fake_streams_open(&f) != 0)
		goto out;
	fill_pattern(sent, 2 * PIECE, 11);
	pid = fork();
	if (pid == 0) {
		int64_t deadline = now_ms() + TIMEOUT_MS;
		int near = sr_ring_stream(f.ring, SR_PREV, 0)->fd, unread;
		struct timeval bound = { .tv_sec = TIMEOUT_MS / 1000 };

		/* A rank 1 that stops reading must not hang the child. */
		for (int st = 0; st < STREAMS; st++)
			setsockopt(f.far[SR_PREV][st], SOL_SOCKET, SO_SNDTIMEO,
			    &bound, sizeof(bound));
		piece.piece = 0;
		put_wide(f.far[SR_PREV][0], &piece, sent, PIECE);
		put_goodbye(f.far[SR_PREV][0], 1);
		/* Rank 1's end of the stream, inherited: what it has not read
		 * yet, polled with a deadline. */
		while ((unread = pending(near)) > SR_GOODBYE_LEN &&
		    now_ms() < deadline)
			usleep(1000);
		if (unread >= 0 && unread <= SR_GOODBYE_LEN) {
			piece.piece = 1;
			put_wide(f.far[SR_PREV][1], &piece, sent + PIECE, PIECE);
		}
		free(sent);	/* the child's copies, for valgrind */
		free(buf);
		_exit(unread >= 0 && unread <= SR_GOODBYE_LEN ? 0 : 3);
	}
	CHECK(pid > 0);
	memset(buf, 0, 2 * PIECE);
	CHECKF(sr_broadcast(f.ring, buf, 2 * PIECE, NEXT_RANK, &err) == 0,
	    "%s", err.message);
	CHECK(memcmp(buf, sent, 2 * PIECE) == 0);
	CHECKF(reap(pid) == 0, "the child playing rank 0 failed");
	CHECK(!f.ring->failed);
	fake_streams_close(&f);
out:
	free(sent);
	free(buf);
}

/* Rank 0's side of the test below, on a thread of its own. */
struct ended_first {
	struct fake_streams *f;
	const uint8_t *sent;
	int rc;
};

static void *
end_stream_1_first(void *arg)
{
	struct ended_first *e = arg;
	struct fake_streams *f = e->f;
	struct sr_frame piece = { .kind = SR_FRAME_BROADCAST,
		.step = NEXT_RANK, .seq = 1, .length = PIECE };
	const struct sr_link *l1 = sr_ring_stream(f->ring, SR_PREV, 1);
	int near = sr_ring_stream(f->ring, SR_PREV, 0)->fd;
	struct timeval bound = { .tv_sec = TIMEOUT_MS / 1000 };
	int64_t deadline = now_ms() + TIMEOUT_MS;

	setsockopt(f->far[SR_PREV][0], SOL_SOCKET, SO_SNDTIMEO, &bound,
	    sizeof(bound));
	put_wide(f->far[SR_PREV][0], &piece, e->sent, PIECE);
	while (pending(near) > 0 && now_ms() < deadline)
		usleep(1000);	/* polled, with a deadline */
	/* Stream 1's end, as a peer that said goodbye shuts its streams. */
	shutdown(f->far[SR_PREV][1], SHUT_WR);
	while (__atomic_load_n(&l1->rx, __ATOMIC_ACQUIRE) != SR_RX_CLOSED &&
	    now_ms() < deadline)
		usleep(1000);
	e->rc = __atomic_load_n(&l1->rx, __ATOMIC_ACQUIRE) == SR_RX_CLOSED ?
	    0 : -1;
	piece.piece = 1;
	put_wide(f->far[SR_PREV][0], &piece, e->sent + PIECE, PIECE);
	return NULL;
}

/*
 * After the goodbyes, rank 0 shuts its streams once its last frame is in
 * the kernel; the end of stream 1 can overtake that frame on stream 0.
 * Here stream 1 ends while piece 1 of a broadcast is still due on stream
 * 0 (its end seen by rank 1 before the piece is written): the receive
 * waits for it and is exact, where it failed "out of step: the ring was
 * closed".
 */
static void
stream_ending_before_the_last_piece_on_another_waits(void)
{
	uint8_t *sent = malloc(2 * PIECE), *buf = malloc(2 * PIECE);
	struct fake_streams f;
	struct ended_first e = { .f = &f, .rc = -1 };
	struct sr_error err;
	pthread_t t;

	CHECK(sent != NULL && buf != NULL);
	if (sent == NULL || buf == NULL || fake_streams_open(&f) != 0)
		goto out;
	for (uint32_t st = 0; st < STREAMS; st++)
		sr_ring_stream(f.ring, SR_PREV, st)->bye = true;
	fill_pattern(sent, 2 * PIECE, 5);
	e.sent = sent;
	CHECK(pthread_create(&t, NULL, end_stream_1_first, &e) == 0);
	memset(buf, 0, 2 * PIECE);
	CHECKF(sr_broadcast(f.ring, buf, 2 * PIECE, NEXT_RANK, &err) == 0,
	    "%s", err.message);
	CHECK(memcmp(buf, sent, 2 * PIECE) == 0);
	pthread_join(t, NULL);
	CHECKF(e.rc == 0, "rank 1 never saw stream 1 end");
	fake_streams_close(&f);
out:
	free(sent);
	free(buf);
}

/* Rank 2's side of the test below: reads whole frames off its ends of
 * rank 1's streams, keeping each broadcast piece at its place. */
struct spread_reader {
	struct fake_streams *f;
	uint8_t *got;
	size_t want;		/* the broadcast's bytes */
	size_t pieces[STREAMS];	/* pieces read, by stream */
	bool stream1_first;	/* a piece on stream 1 before 0 was read */
	bool ok;
};

/* One frame off stream st; its payload at its piece's place if it is the
 * broadcast's (heartbeats carry none). */
static bool
get_frame(struct spread_reader *r, int st)
{
	uint8_t header[SR_FRAME_WIDE_LEN];
	struct sr_frame frame;
	size_t at;

	if (get(r->f->far[SR_NEXT][st], header, sizeof(header),
	    TIMEOUT_MS) != 0)
		return false;
	sr_frame_decode_wide(header, &frame);
	if (frame.length == 0)
		return true;
	at = (size_t)frame.piece * PIECE;
	if (frame.kind != SR_FRAME_BROADCAST || at >= r->want ||
	    frame.length > r->want - at)
		return false;
	if (get(r->f->far[SR_NEXT][st], r->got + at, (size_t)frame.length,
	    TIMEOUT_MS) != 0)
		return false;
	r->pieces[st]++;
	return true;
}

static void *
read_stream_1_first(void *arg)
{
	struct spread_reader *r = arg;
	size_t n = r->want / PIECE;

	/* Stream 0 left unread: rank 1's first piece fills it, and the
	 * rank waits. */
	while (r->pieces[1] == 0 && get_frame(r, 1))
		;
	r->stream1_first = r->pieces[1] > 0;
	while (r->pieces[0] + r->pieces[1] < n) {
		struct pollfd fds[STREAMS];

		for (int st = 0; st < STREAMS; st++)
			fds[st] = (struct pollfd){ .fd = r->f->far[SR_NEXT][st],
				.events = POLLIN };
		if (poll(fds, STREAMS, TIMEOUT_MS) <= 0)
			return NULL;
		for (int st = 0; st < STREAMS; st++)
			if ((fds[st].revents & POLLIN) && !get_frame(r, st))
				return NULL;
	}
	r->ok = true;
	return NULL;
}

/*
 * A rank that kept its pieces on a link's first stream (it did not wait
 * on earlier transfers: spread.c) and now waits on it, the stream not
 * read, puts the rest on stream 1: a stalled first stream holds only
 * what it had.  (How soon, 2 ms with nothing moved, is spread.c's rule
 * and its test's; a timed bound here would be a wall-clock bound.)  The
 * broadcast arrives whole, and it is judged for the next transfer.
 */
static void
unspread_transfer_that_waits_spreads_midway(void)
{
	size_t want = 4 * PIECE;
	uint8_t *sent = malloc(want), *got = calloc(1, want);
	struct fake_streams f;
	struct spread_reader r = { .f = &f, .got = got, .want = want };
	struct sr_spread *spread;
	struct sr_error err;
	pthread_t t;

	CHECK(sent != NULL && got != NULL);
	if (sent == NULL || got == NULL || fake_streams_open(&f) != 0)
		goto out;
	/* The verdict after four transfers that never waited. */
	spread = sr_engine_spread(f.ring->engine);
	for (int i = 0; i < 4; i++)
		sr_spread_judge(spread, 100000000, 0);
	CHECK(!sr_spread_starts(spread));
	fill_pattern(sent, want, 3);
	CHECK(pthread_create(&t, NULL, read_stream_1_first, &r) == 0);
	CHECKF(sr_broadcast(f.ring, sent, want, RANK, &err) == 0, "%s",
	    err.message);
	pthread_join(t, NULL);
	CHECK(r.ok);
	CHECKF(r.stream1_first, "pieces by stream: %zu, %zu", r.pieces[0],
	    r.pieces[1]);
	CHECK(memcmp(got, sent, want) == 0);
	/* How much of it was waiting depends on the machine's load (under
	 * valgrind the copies take most of it); that it was judged does
	 * not. */
	CHECKF(spread->judged == 5, "%llu transfers judged",
	    (unsigned long long)spread->judged);
	fake_streams_close(&f);
out:
	free(sent);
	free(got);
}

/* A goodbye of fewer collectives than the one under way is out of step at
 * once on a link of several streams too, naming the count. */
static void
goodbye_of_fewer_collectives_on_a_stream_is_out_of_step(void)
{
	uint8_t buf[BYTES];
	struct fake_streams f;
	struct sr_error err;

	if (fake_streams_open(&f) != 0)
		return;
	put_goodbye(f.far[SR_PREV][1], 0);
	CHECK(sr_broadcast(f.ring, buf, BYTES, NEXT_RANK, &err) == -1);
	CHECKF(err.code == SR_EOUT_OF_STEP, "code %s",
	    sr_code_name(err.code));
	CHECK(err.peer == PREV_RANK);
	CHECKF(contains(err.message, "the ring was closed (it finished its "
	    "collectives, 0 of them, and said goodbye) by rank 0 "
	    "(10.0.0.1:4100) on stream 1 of 2"), "%s", err.message);
	fake_streams_close(&f);
}

int
main(void)
{
	/* Every wait in here has a deadline; this bounds the rest. */
	alarm(120);
	TEST_RUN(broadcast_frame_fed_one_byte_at_a_time);
	TEST_RUN(allgather_runs_both_ways);
	TEST_RUN(next_collective_waits_on_either_side);
	TEST_RUN(each_collective_takes_the_next_seq);
	TEST_RUN(out_of_step_other_kind);
	TEST_RUN(out_of_step_other_seq);
	TEST_RUN(out_of_step_other_step);
	TEST_RUN(out_of_step_other_length);
	TEST_RUN(out_of_step_huge_length);
	TEST_RUN(out_of_step_unknown_kind);
	TEST_RUN(abort_of_absurd_length_is_rejected);
	TEST_RUN(large_frame_payload_waits_for_its_header);
	TEST_RUN(goodbye_mid_collective_is_out_of_step);
	TEST_RUN(goodbye_overtaking_a_piece_on_another_stream_waits);
	TEST_RUN(goodbye_of_fewer_collectives_on_a_stream_is_out_of_step);
	TEST_RUN(stream_ending_before_the_last_piece_on_another_waits);
	TEST_RUN(unspread_transfer_that_waits_spreads_midway);
	TEST_RUN(failure_is_told_to_both_neighbours);
	TEST_RUN(abort_from_peer_reports_origin);
	TEST_RUN(abort_fed_one_byte_at_a_time);
	TEST_RUN(abort_on_the_idle_side_is_noticed);
	TEST_RUN(abort_behind_a_parked_frame_is_heard_when_the_send_breaks);
	TEST_RUN(abort_behind_a_parked_checked_frame_is_heard_when_the_send_breaks);
	TEST_RUN(corrupt_parked_frame_is_named_when_the_send_breaks);
	TEST_RUN(no_abort_behind_a_parked_frame_the_lost_link_is_the_failure);
	TEST_RUN(abort_without_culprit_blames_origin);
	TEST_RUN(abort_with_unknown_code_is_aborted);
	TEST_RUN(peer_closes_mid_frame);
	TEST_RUN(peer_closes_before_any_frame);
	TEST_RUN(idle_side_closing_is_noticed);
	TEST_RUN(silence_times_out);
	TEST_RUN(failure_is_sticky);
	TEST_RUN(crc32c_known_answers);
	TEST_RUN(integrity_checked_frame_is_accepted_and_forwarded_with_a_trailer);
	TEST_RUN(integrity_flipped_bit_is_corrupt_naming_the_peer);
	TEST_RUN(without_integrity_a_flipped_bit_goes_unnoticed);
	TEST_RUN(heartbeats_before_a_frame_are_taken);
	TEST_RUN(heartbeats_keep_a_waiting_rank_from_timing_out);
	TEST_RUN(ranks_all_alive_and_waiting_fail_after_twice_the_timeout);
	TEST_RUN(the_silent_side_is_blamed_not_the_heartbeating_one);
	TEST_RUN(a_waiting_rank_sends_heartbeats_naming_whom_it_waits_on);
	return TEST_DONE();
}
