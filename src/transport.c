/*
 * transport.c - a link's send queue, receive decoder, clocks and
 * counters (transport.h): the only code that changes them.
 *
 * Every read and write is one call of sock.c's sr_io_* on a non-blocking
 * socket, resumed from the link's own offsets; nothing here blocks except
 * sr_link_last_words and sr_link_linger, which are bounded by their
 * deadline.  No byte past the frame a caller expects is ever read: a
 * header is read alone, a payload up to its length, and the read-ahead
 * of a small frame up to the length the caller names.
 */
#include <errno.h>
#include <poll.h>
#include <stdio.h>
#include <string.h>
#include <sys/ioctl.h>
#include <sys/socket.h>
#include <sys/uio.h>
#include <unistd.h>
#include <linux/sockios.h>

#include "clock.h"
#include "crc32c.h"
#include "sock.h"
#include "transport.h"
#include "wire.h"

/* How often a lingering rank looks whether its abort was acknowledged. */
#define LINGER_POLL_MS 5

void
sr_link_init(struct sr_link *link)
{
	memset(link, 0, sizeof(*link));
	link->fd = -1;
	link->header_len = SR_FRAME_HEADER_LEN;
	link->waits_on = SR_NO_RANK;
}

void
sr_link_open(struct sr_link *link, int fd, uint32_t self, uint32_t peer,
    const char *address, bool integrity, bool wide)
{
	sr_link_init(link);
	link->header_len = wide ? SR_FRAME_WIDE_LEN : SR_FRAME_HEADER_LEN;
	link->fd = fd;
	link->self = self;
	link->rank = peer;
	link->integrity = integrity;
	snprintf(link->address, sizeof(link->address), "%s", address);
	sr_sock_nonblocking(fd);
}

void
sr_link_close(struct sr_link *link)
{
	if (link->fd >= 0)
		close(link->fd);
	link->fd = -1;
}

void
sr_link_shutdown(struct sr_link *link)
{
	if (link->fd >= 0)
		shutdown(link->fd, SHUT_WR);
}

void
sr_link_goodbye(struct sr_link *link)
{
	link->bye = true;
}

/* -------------------------------------------------------------- sending */

static enum sr_tx_state
tx_state(const struct sr_link *link)
{
	if (link->tx_header_left > 0)
		return SR_TX_HEADER;
	if (link->tx_payload_left > 0)
		return SR_TX_PAYLOAD;
	return link->tx_trailer_left > 0 ? SR_TX_TRAILER : SR_TX_IDLE;
}

static void
seal(struct sr_link *link)
{
	sr_put_u32le(link->tx_trailer, link->tx_crc);
	link->tx_trailer_left = SR_TRAILER_LEN;
}

static void
put(struct sr_link *link, const struct sr_frame *frame, const uint8_t *data,
    bool trailer)
{
	if (link->header_len == SR_FRAME_WIDE_LEN)
		sr_frame_encode_wide(frame, link->tx_header);
	else
		sr_frame_encode(frame, link->tx_header);
	link->tx_header_left = link->header_len;
	link->tx_data = data;
	link->tx_payload_left = frame->length;
	link->tx_trailer_left = 0;
	link->tx_trailer_due = trailer;
	link->tx_blocked = false;
	if (trailer) {
		link->tx_crc = sr_crc32c(0, link->tx_header,
		    link->header_len);
		/* An empty frame's trailer is due at once. */
		if (frame->length == 0)
			seal(link);
	}
	link->tx = SR_TX_HEADER;
}

void
sr_link_put_frame(struct sr_link *link, const struct sr_frame *frame,
    const uint8_t *data)
{
	put(link, frame, data, link->integrity);
}

void
sr_link_put_control(struct sr_link *link, const struct sr_frame *frame,
    const uint8_t *data)
{
	put(link, frame, data, false);
}

/* Accounts n bytes sent of the frame under way: header, payload, trailer;
 * returns the payload bytes among them. */
static uint64_t
sent(struct sr_link *link, size_t n)
{
	size_t part = n < link->tx_header_left ? n : link->tx_header_left;
	uint64_t payload;

	link->tx_bytes += n;
	link->tx_header_left -= part;
	n -= part;
	payload = n < link->tx_payload_left ? n : link->tx_payload_left;
	if (payload > 0) {
		if (link->tx_trailer_due)
			link->tx_crc = sr_crc32c(link->tx_crc, link->tx_data,
			    (size_t)payload);
		link->tx_data += payload;
		link->tx_payload_left -= payload;
		n -= (size_t)payload;
		if (link->tx_trailer_due && link->tx_payload_left == 0)
			seal(link);
	}
	link->tx_trailer_left -= n < link->tx_trailer_left ? n :
	    link->tx_trailer_left;
	link->tx = tx_state(link);
	return payload;
}

ssize_t
sr_link_push(struct sr_link *link, uint64_t *payload)
{
	ssize_t total = 0;

	*payload = 0;
	while (link->tx != SR_TX_IDLE && link->tx_errno == 0) {
		struct iovec iov[2];
		int n = 0;
		ssize_t rc;

		if (link->tx_header_left > 0) {
			iov[n].iov_base = link->tx_header +
			    (link->header_len - link->tx_header_left);
			iov[n++].iov_len = link->tx_header_left;
		}
		if (link->tx_payload_left > 0) {
			iov[n].iov_base = (void *)link->tx_data;
			iov[n++].iov_len = link->tx_payload_left > SR_IO_MAX ?
			    SR_IO_MAX : (size_t)link->tx_payload_left;
		} else if (link->tx_trailer_left > 0) {
			iov[n].iov_base = link->tx_trailer +
			    (SR_TRAILER_LEN - link->tx_trailer_left);
			iov[n++].iov_len = link->tx_trailer_left;
		}
		rc = sr_io_send(link->fd, iov, n);
		if (rc == SR_IO_AGAIN) {
			link->tx_blocked = true;
			break;
		}
		if (rc < 0) {
			/* Nothing more goes out; but the peer may have sent
			 * its abort before it went, so it is read on. */
			link->tx_errno = errno;
			link->rx_dry = false;
			break;
		}
		link->tx_blocked = false;
		*payload += sent(link, (size_t)rc);
		total += rc;
	}
	return total;
}

/* Sends the frame under way to its end within deadline; false when the
 * link broke or the time ran out. */
static bool
push_within(struct sr_link *link, int64_t deadline)
{
	while (link->tx != SR_TX_IDLE) {
		struct pollfd pfd = { .fd = link->fd, .events = POLLOUT };
		uint64_t payload;

		(void)sr_link_push(link, &payload);
		if (link->tx_errno != 0)
			return false;
		if (link->tx == SR_TX_IDLE)
			break;
		if (poll(&pfd, 1, sr_clock_left_ms(deadline)) <= 0 &&
		    sr_clock_ns() >= deadline)
			return false;
	}
	return true;
}

void
sr_link_last_words(struct sr_link *link, const struct sr_frame *frame,
    const uint8_t *payload, int64_t deadline)
{
	if (link->fd < 0)
		return;
	/*
	 * An abort starts at a frame boundary: a frame of which nothing went
	 * out is dropped, one under way is finished with its own bytes (the
	 * engine queues a piece only once it holds all of it, so they are
	 * real data, never filler) and, with integrity checks, the trailer
	 * that covers them.
	 */
	if (link->tx == SR_TX_HEADER &&
	    link->tx_header_left == link->header_len)
		link->tx = SR_TX_IDLE;
	if (push_within(link, deadline)) {
		sr_link_put_control(link, frame, payload);
		(void)push_within(link, deadline);
	}
	sr_link_shutdown(link);
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

uint64_t
sr_link_queued(const struct sr_link *link)
{
	int queued = 0;

	if (link->fd < 0 || ioctl(link->fd, SIOCOUTQ, &queued) != 0 ||
	    queued < 0)
		return 0;
	return (uint64_t)queued;
}

/* Drops what came on a lingering link; false once the peer is gone. */
static bool
drop_input(int fd)
{
	uint8_t sink[4096];
	ssize_t n = sr_io_recv(fd, sink, sizeof(sink));

	return n > 0 || n == SR_IO_AGAIN;
}

void
sr_link_linger(struct sr_link *const *links, int nlinks, int64_t deadline)
{
	struct pollfd fds[nlinks > 0 ? nlinks : 1];
	bool open[nlinks > 0 ? nlinks : 1];
	int left = 0;

	for (int i = 0; i < nlinks; i++) {
		open[i] = links[i]->fd >= 0;
		left += open[i];
	}
	while (left > 0) {
		int wait = sr_clock_left_ms(deadline);

		for (int i = 0; i < nlinks; i++) {
			if (open[i] && !unacknowledged(links[i]->fd)) {
				open[i] = false;
				left--;
			}
			fds[i].fd = open[i] ? links[i]->fd : -1;
			fds[i].events = POLLIN;
			fds[i].revents = 0;
		}
		if (left == 0 || wait == 0)
			return;
		if (poll(fds, (nfds_t)nlinks, wait < LINGER_POLL_MS ? wait :
		    LINGER_POLL_MS) < 0 && errno != EINTR)
			return;
		for (int i = 0; i < nlinks; i++)
			if (open[i] && fds[i].revents != 0 &&
			    !drop_input(fds[i].fd)) {
				open[i] = false;
				left--;
			}
	}
}

/* ------------------------------------------------------------ receiving */

/*
 * Up to len bytes for the decoder: from the read-ahead while it lasts,
 * else one read of the socket (none while it is dry).  A read that comes
 * up short leaves the socket dry until poll says otherwise.
 */
static ssize_t
take_in(struct sr_link *link, uint8_t *buf, size_t len)
{
	ssize_t n;

	if (link->rx_ahead_at < link->rx_ahead_len) {
		size_t have = link->rx_ahead_len - link->rx_ahead_at;

		n = (ssize_t)(len < have ? len : have);
		memcpy(buf, link->rx_ahead + link->rx_ahead_at, (size_t)n);
		link->rx_ahead_at += (size_t)n;
		if (link->rx_ahead_at == link->rx_ahead_len)
			link->rx_ahead_at = link->rx_ahead_len = 0;
		return n;
	}
	if (link->rx_dry)
		return SR_IO_AGAIN;
	n = sr_io_recv(link->fd, buf, len);
	if (n == SR_IO_AGAIN || (n > 0 && (size_t)n < len))
		link->rx_dry = true;
	if (n > 0)
		link->rx_bytes += (uint64_t)n;
	return n;
}

/* Reads into buf until *got reaches len: 0 when full, else what take_in
 * said. */
static int
fill(struct sr_link *link, uint8_t *buf, size_t len, size_t *got)
{
	while (*got < len) {
		ssize_t n = take_in(link, buf + *got, len - *got);

		if (n < 0)
			return (int)n;
		*got += (size_t)n;
	}
	return 0;
}

/* Whether nothing of the next frame has been read yet. */
static bool
between_frames(const struct sr_link *link)
{
	return link->rx == SR_RX_HEADER && link->rx_header_got == 0 &&
	    link->rx_ahead_at == link->rx_ahead_len;
}

/* A read that did not complete: poll again, or the end of the stream. */
static enum sr_link_header
header_end(struct sr_link *link, int rc)
{
	if (rc == SR_IO_AGAIN)
		return SR_LINK_AGAIN;
	/* A peer that said goodbye owes nothing more: its close, or the
	 * reset of a close that found a heartbeat of this rank unread, is
	 * a clean end. */
	if (link->bye && between_frames(link) &&
	    (rc == SR_IO_EOF || errno == ECONNRESET)) {
		link->eof = true;
		link->rx = SR_RX_CLOSED;
		return SR_LINK_CLOSED;
	}
	return rc == SR_IO_EOF ? SR_LINK_EOF : SR_LINK_ERROR;
}

/* One read of the next header and up to ahead bytes after it. */
static int
read_ahead(struct sr_link *link, size_t ahead)
{
	ssize_t n;

	if (link->rx_dry)
		return SR_IO_AGAIN;
	n = sr_io_recv(link->fd, link->rx_ahead, link->header_len + ahead);
	if (n < 0) {
		if (n == SR_IO_AGAIN)
			link->rx_dry = true;
		return (int)n;
	}
	if ((size_t)n < link->header_len + ahead)
		link->rx_dry = true;
	link->rx_bytes += (uint64_t)n;
	link->rx_ahead_at = 0;
	link->rx_ahead_len = (size_t)n;
	return 0;
}

static void
heartbeat_in(struct sr_link *link)
{
	link->waits_on = link->rx_frame.step;
	if (!(link->rx_frame.step == link->self && sr_link_tx_blocked(link)))
		link->heard_ns = sr_clock_ns();
}

enum sr_link_header
sr_link_header(struct sr_link *link, size_t ahead, struct sr_abort *abort)
{
	int rc;

	for (;;) {
		switch (link->rx) {
		case SR_RX_READY:
			return SR_LINK_READY;
		case SR_RX_CLOSED:
			return SR_LINK_CLOSED;
		case SR_RX_ABORT:
			rc = fill(link, link->rx_abort,
			    (size_t)link->rx_frame.length, &link->rx_abort_got);
			if (rc != 0)
				return header_end(link, rc);
			sr_abort_decode(link->rx_abort,
			    (size_t)link->rx_frame.length, abort);
			return SR_LINK_ABORT;
		case SR_RX_PAYLOAD:
		case SR_RX_TRAILER:
			return SR_LINK_READY;	/* a caller's bug: no header */
		case SR_RX_HEADER:
			break;
		}
		if (ahead > 0 && between_frames(link) &&
		    (rc = read_ahead(link, ahead)) != 0)
			return header_end(link, rc);
		rc = fill(link, link->rx_header, link->header_len,
		    &link->rx_header_got);
		if (rc != 0)
			return header_end(link, rc);
		if (link->header_len == SR_FRAME_WIDE_LEN)
			sr_frame_decode_wide(link->rx_header, &link->rx_frame);
		else
			sr_frame_decode(link->rx_header, &link->rx_frame);
		switch (sr_frame_check(&link->rx_frame, &link->rx_frame)) {
		case SR_FRAME_IS_HEARTBEAT:
			heartbeat_in(link);
			link->rx_header_got = 0;
			continue;
		case SR_FRAME_IS_ABORT:
			link->rx_header_got = 0;
			link->rx_abort_got = 0;
			link->rx = SR_RX_ABORT;
			continue;
		default:
			link->rx = SR_RX_READY;
			return SR_LINK_READY;
		}
	}
}

void
sr_link_take(struct sr_link *link)
{
	link->rx_payload_left = link->rx_frame.length;
	if (link->integrity)
		link->rx_crc = sr_crc32c(0, link->rx_header,
		    link->header_len);
	link->rx_header_got = 0;
	link->rx_trailer_got = 0;
	if (link->rx_payload_left > 0)
		link->rx = SR_RX_PAYLOAD;
	else
		link->rx = link->integrity ? SR_RX_TRAILER : SR_RX_HEADER;
}

ssize_t
sr_link_read(struct sr_link *link, uint8_t *buf, size_t max)
{
	ssize_t n;

	if (max > link->rx_payload_left)
		max = (size_t)link->rx_payload_left;
	if (max > SR_IO_MAX)
		max = SR_IO_MAX;
	n = take_in(link, buf, max);
	if (n <= 0)
		return n;
	if (link->integrity)
		link->rx_crc = sr_crc32c(link->rx_crc, buf, (size_t)n);
	link->rx_payload_left -= (uint64_t)n;
	if (link->rx_payload_left == 0)
		link->rx = link->integrity ? SR_RX_TRAILER : SR_RX_HEADER;
	return n;
}

enum sr_link_trailer
sr_link_trailer(struct sr_link *link, uint32_t *got, uint32_t *computed)
{
	int rc = fill(link, link->rx_trailer, SR_TRAILER_LEN,
	    &link->rx_trailer_got);

	if (rc == SR_IO_AGAIN)
		return SR_TRAILER_AGAIN;
	if (rc != 0)
		return rc == SR_IO_EOF ? SR_TRAILER_EOF : SR_TRAILER_ERROR;
	*got = sr_get_u32le(link->rx_trailer);
	*computed = link->rx_crc;
	if (*got != *computed)
		return SR_TRAILER_CORRUPT;
	link->rx_trailer_got = 0;
	link->rx = SR_RX_HEADER;
	return SR_TRAILER_OK;
}

void
sr_link_readable(struct sr_link *link)
{
	link->rx_dry = false;
}

/* ------------------------------------------------------------- liveness */

void
sr_link_clocks_start(struct sr_link *link, int64_t now)
{
	link->heard_ns = now;
	link->sent_ns = now;
}

void
sr_link_alive(struct sr_link *link, int64_t now, bool sent_too)
{
	link->heard_ns = now;
	if (sent_too)
		link->sent_ns = now;
}

void
sr_link_beat_sent(struct sr_link *link, int64_t now)
{
	link->sent_ns = now;
}
