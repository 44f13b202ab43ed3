/*
 * transport.h - a link: one connection to one peer rank, with its send
 * queue, its receive decoder, its liveness clocks and its counters
 * (transport.c).  Only transport.c changes a link's fields; the engine,
 * the ring and the collectives read them and call the functions below.
 *
 * A link knows frames, not collectives: it sends the frame it is given,
 * header, payload and (with integrity checks) trailer; it decodes
 * headers, consumes heartbeats and aborts by itself, and hands every other
 * header to its caller to judge before a byte of its payload is read.
 * Nothing here allocates, and every byte goes through sock.c's sr_io_*.
 *
 * Send side, one frame at a time:
 *
 *	IDLE --put--> HEADER --> PAYLOAD --> TRAILER --> IDLE
 *	               (a state is skipped when it has no bytes)
 *
 * Receive side:
 *
 *	HEADER --a whole header--> READY --take--> PAYLOAD --> TRAILER
 *	   ^   (heartbeats consumed;   |                          |
 *	   |    an abort goes to ABORT) +-- an empty frame -------+--> HEADER
 *	   +-- end of stream: CLOSED
 *
 * READY is where a header of a later collective waits (parked) until
 * the engine gets to it.
 */
#ifndef SR_TRANSPORT_H
#define SR_TRANSPORT_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>
#include <sys/types.h>

#include "silvic_ring.h"
#include "sock.h"
#include "wire.h"

/* A small frame's header and payload come in one read: the read-ahead
 * takes at most this many payload bytes past a header. */
#define SR_STAGE 4096

enum sr_tx_state {
	SR_TX_IDLE,
	SR_TX_HEADER,
	SR_TX_PAYLOAD,
	SR_TX_TRAILER
};

enum sr_rx_state {
	SR_RX_HEADER,	/* reading a header (rx_header_got bytes in) */
	SR_RX_READY,	/* a whole header waits to be judged */
	SR_RX_PAYLOAD,	/* a taken frame's payload */
	SR_RX_TRAILER,	/* its integrity trailer */
	SR_RX_ABORT,	/* an abort's payload */
	SR_RX_CLOSED	/* the peer's stream ended */
};

struct sr_link {
	int fd;
	uint32_t self;		/* this rank */
	uint32_t rank;		/* the peer's */
	char address[SR_ADDR_MAX];
	bool integrity;		/* collective frames carry a CRC-32C trailer */
	size_t header_len;	/* SR_FRAME_HEADER_LEN, or a mesh's
				 * SR_FRAME_WIDE_LEN */

	/* Send side. */
	enum sr_tx_state tx;
	bool tx_trailer_due;	/* the frame under way ends with a trailer */
	bool tx_blocked;	/* the last send found the socket full */
	int tx_errno;		/* the send side broke (EPIPE, reset, ...) */
	uint8_t tx_header[SR_FRAME_HEADER_MAX];
	size_t tx_header_left;
	const uint8_t *tx_data;	/* the payload still owed, in hand */
	uint64_t tx_payload_left;
	uint32_t tx_crc;
	uint8_t tx_trailer[SR_TRAILER_LEN];
	size_t tx_trailer_left;

	/* Receive side. */
	enum sr_rx_state rx;
	/* The socket had nothing more to read (it said so, or a read came
	 * up short): no read is tried until poll reports it readable. */
	bool rx_dry;
	uint8_t rx_header[SR_FRAME_HEADER_MAX];
	size_t rx_header_got;
	struct sr_frame rx_frame;	/* the header, decoded (READY on) */
	uint64_t rx_payload_left;
	uint32_t rx_crc;
	uint8_t rx_trailer[SR_TRAILER_LEN];
	size_t rx_trailer_got;
	uint8_t rx_abort[SR_ABORT_MAX];
	size_t rx_abort_got;
	/* Bytes read past a header with it (a small frame's payload, or what
	 * follows a heartbeat), served before the socket is read again. */
	uint8_t rx_ahead[SR_FRAME_HEADER_MAX + SR_STAGE];
	size_t rx_ahead_at, rx_ahead_len;

	/* Closing: the peer's goodbye was read (sr_ring_finish); an end
	 * of its stream is then clean. */
	bool bye;
	bool eof;

	/* Liveness, monotonic ns: when bytes last came from the peer (or a
	 * heartbeat that counts), when bytes last went to it, and the rank
	 * its last heartbeat said it waits on (SR_NO_RANK: none heard). */
	int64_t heard_ns;
	int64_t sent_ns;
	uint32_t waits_on;

	/* Counters, for the link's whole life. */
	uint64_t tx_bytes, rx_bytes;
};

/* ------------------------------------------------------------ lifecycle */

/* An unopened link (fd -1). */
void sr_link_init(struct sr_link *link);
/* Takes fd (non-blocking from now) as the link from rank self to rank
 * peer at address; wide: a mesh's link, whose headers carry the group. */
void sr_link_open(struct sr_link *link, int fd, uint32_t self, uint32_t peer,
    const char *address, bool integrity, bool wide);
void sr_link_close(struct sr_link *link);
/* Shuts the write side: the peer reads EOF after what was sent. */
void sr_link_shutdown(struct sr_link *link);
/* The peer's goodbye was read and agreed with: its EOF is now clean. */
void sr_link_goodbye(struct sr_link *link);

/* ------------------------------------------------------------- sending */

static inline bool
sr_link_tx_idle(const struct sr_link *link)
{
	return link->tx == SR_TX_IDLE;
}

/* Bytes the kernel holds for the link, sent but not acknowledged or not
 * sent yet (SIOCOUTQ); 0 when it does not say (not TCP). */
uint64_t sr_link_queued(const struct sr_link *link);

/* Whether the frame under way waits for the socket to drain. */
static inline bool
sr_link_tx_blocked(const struct sr_link *link)
{
	return link->tx != SR_TX_IDLE && link->tx_blocked;
}

/*
 * Queues a frame on an idle link: frame's header (frame->length payload
 * bytes), then the payload at data, which must stay valid until the
 * frame is out.  A collective frame gets a trailer when the link checks
 * integrity; a control frame (heartbeat, abort) never does.
 */
void sr_link_put_frame(struct sr_link *link, const struct sr_frame *frame,
    const uint8_t *data);
void sr_link_put_control(struct sr_link *link, const struct sr_frame *frame,
    const uint8_t *data);
/*
 * Sends what the socket takes of the frame under way, until it is out
 * or the socket is full.  Returns the bytes sent (>= 0; *payload the
 * payload bytes among them), or SR_IO_ERROR with errno set (and kept in
 * tx_errno: nothing more is sent on this link).
 */
ssize_t sr_link_push(struct sr_link *link, uint64_t *payload);
/*
 * The failing rank's last words on a link, within deadline (monotonic
 * ns): the frame under way is finished (one of which nothing went out is
 * dropped), then the control frame (an abort) goes, then the write side
 * is shut.  A lost peer ends it at once, a stopped one at the deadline.
 */
void sr_link_last_words(struct sr_link *link, const struct sr_frame *frame,
    const uint8_t *payload, int64_t deadline);
/*
 * After the last words: waits, until deadline, for each peer's kernel to
 * acknowledge every byte sent to it (or for it to go), reading and
 * dropping what comes meanwhile (a neighbour blocked sending to a failed
 * rank must not stay blocked).  Closing earlier with unread bytes would
 * send a reset, which discards what is still queued: the abort itself.
 */
void sr_link_linger(struct sr_link *const *links, int nlinks,
    int64_t deadline);

/* ------------------------------------------------------------ receiving */

/* What sr_link_header found. */
enum sr_link_header {
	SR_LINK_AGAIN = 0,	/* more bytes are needed: poll */
	SR_LINK_READY = 1,	/* a header waits in rx_frame, to be judged */
	SR_LINK_ABORT = 2,	/* the peer's abort came whole */
	SR_LINK_CLOSED = 3,	/* the stream ended cleanly after a goodbye */
	SR_LINK_EOF = -2,	/* it ended otherwise (SR_IO_EOF) */
	SR_LINK_ERROR = -3	/* a socket error, errno set (SR_IO_ERROR) */
};

/*
 * Reads until a header that is neither a heartbeat nor an abort is
 * whole (READY; it stays there until taken) or an abort is (ABORT, with
 * *abort filled).  Heartbeats are consumed on the way: the peer's
 * waits_on is noted, and it counts as heard unless it waits on this
 * rank while this rank cannot send to it (then the link this way is what
 * is stuck, and the heartbeat does not excuse the silence).  With
 * ahead > 0 and nothing of the next header in yet, one read takes the
 * header and up to ahead bytes after it (the payload of the small frame
 * expected: never more than that frame).
 */
enum sr_link_header sr_link_header(struct sr_link *link, size_t ahead,
    struct sr_abort *abort);
/* The READY header is the frame expected: its payload (and trailer)
 * come next. */
void sr_link_take(struct sr_link *link);
/*
 * Reads up to max payload bytes of the frame taken into buf: bytes
 * read (> 0), SR_IO_AGAIN, SR_IO_EOF or SR_IO_ERROR.  The read-ahead is
 * served first.  Once the payload is in, the trailer is next (integrity)
 * or the next header.
 */
ssize_t sr_link_read(struct sr_link *link, uint8_t *buf, size_t max);

/* What sr_link_trailer found. */
enum sr_link_trailer {
	SR_TRAILER_AGAIN = 0,
	SR_TRAILER_OK = 1,	/* the frame is verified; a header is next */
	SR_TRAILER_CORRUPT = 2,	/* *got differs from *computed */
	SR_TRAILER_EOF = -2,
	SR_TRAILER_ERROR = -3
};
enum sr_link_trailer sr_link_trailer(struct sr_link *link, uint32_t *got,
    uint32_t *computed);
/* poll said the socket has something (or an error or hang-up): reads
 * are tried again. */
void sr_link_readable(struct sr_link *link);
/* Whether nothing can be read until poll says so: the socket is dry and
 * the read-ahead empty. */
static inline bool
sr_link_rx_dry(const struct sr_link *link)
{
	return link->rx_dry && link->rx_ahead_at == link->rx_ahead_len;
}

/* ------------------------------------------------------------- liveness */

/* Both clocks from now (a collective starts). */
void sr_link_clocks_start(struct sr_link *link, int64_t now);
/* Bytes came from the peer or went to it (sent), at now. */
void sr_link_alive(struct sr_link *link, int64_t now, bool sent);
/* A heartbeat went at now. */
void sr_link_beat_sent(struct sr_link *link, int64_t now);

#endif
