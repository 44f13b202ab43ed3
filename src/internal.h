/*
 * internal.h - interfaces between the core's modules; not installed.
 *
 * Layers, bottom up: clock and socket layer (clock.c, sock.c); the pure
 * parts (wire.c: byte helpers, hello/verdict and frame codecs; reduce.c:
 * kernels; schedule.c: which block goes where); ring formation
 * (listener.c, handshake.c, acceptor.c); the transfer engine (engine.c); the
 * collectives and the ring object (collectives.c, ring.c).
 */
#ifndef SR_INTERNAL_H
#define SR_INTERNAL_H

#include <stdarg.h>
#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>
#include <sys/socket.h>

#include "silvic_ring.h"

#define SR_PRINTF(fmt, args) __attribute__((format(printf, fmt, args)))

/* ------------------------------------------------------------------ error */

/* The core's name for sr_error_set (silvic_ring.h). */
#define sr_err_set sr_error_set
/* Names the peer of an error that has none yet. */
void sr_err_peer(struct sr_error *err, int64_t peer, const char *address);

/* ------------------------------------------------------------------ clock */

/* Milliseconds left until deadline_ns, clamped to [0, INT32_MAX]. */
int sr_clock_left_ms(int64_t deadline_ns);
/* "30s", "1.5s", "250ms": a duration for messages. */
const char *sr_clock_format_ms(int64_t ms, char *buf, size_t size);

/* ----------------------------------------------------------------- socket */

struct sr_sockaddr {
	struct sockaddr_storage ss;
	socklen_t len;
};

/*
 * Splits "host:port", "[v6]:port" into host and port.  Returns -1 with a
 * message in why (size bytes) when the text is not of that form.
 */
int sr_sock_split(const char *address, char *host, size_t host_size,
    uint16_t *port, char *why, size_t why_size);
/*
 * Resolves a numeric or named host; -1 with why on failure.  A numeric
 * host never waits.  A name is looked up in a helper thread, so that a
 * resolver that does not answer cannot outlive deadline_ns (monotonic),
 * and a transient failure (EAI_AGAIN: no answer from the name server) is
 * retried with a backoff until then; *cancel (when non-NULL) set non-zero
 * ends the wait.  why names the host, says why, and how often it was
 * tried when it was more than once.
 */
int sr_sock_resolve_within(const char *host, uint16_t port, int passive,
    int64_t deadline_ns, volatile int *cancel, struct sr_sockaddr *out,
    char *why, size_t why_size);
/* sr_sock_resolve_within with SR_RESOLVE_DEFAULT_MS from now, no cancel
 * (where no timeout is known: --host and --advertise). */
#define SR_RESOLVE_DEFAULT_MS 10000
int sr_sock_resolve(const char *host, uint16_t port, int passive,
    struct sr_sockaddr *out, char *why, size_t why_size);
/* The resolver names go to: getaddrinfo; tests put a fake here. */
struct addrinfo;
extern int (*sr_sock_getaddrinfo)(const char *node, const char *service,
    const struct addrinfo *hints, struct addrinfo **res);
/* "ip:port" or "[ip]:port". */
void sr_sock_format(const struct sr_sockaddr *addr, char *buf, size_t size);
bool sr_sock_is_unspecified(const struct sr_sockaddr *addr);
/* Whether both are the same IP address (ports aside). */
bool sr_sock_same_host(const struct sr_sockaddr *a,
    const struct sr_sockaddr *b);
int sr_sock_nonblocking(int fd);
/* TCP_NODELAY, SO_KEEPALIVE and TCP_USER_TIMEOUT from the timeout. */
void sr_sock_tune(int fd, int64_t timeout_ms);
/* Buffer sizes; best effort. */
void sr_sock_buffers(int fd, int bytes);
/* Sets the congestion control; -1 with why (what the kernel offers or
 * allows; why may be NULL) when it cannot. */
int sr_sock_set_congestion(int fd, const char *name, char *why,
    size_t why_size);
/* The socket's congestion control, "" when the kernel does not say. */
void sr_sock_get_congestion(int fd, char *buf, size_t size);
/* Whether name can be set on a TCP socket here (tried on one that never
 * connects); -1 with why when not. */
int sr_sock_check_congestion(const char *name, char *why, size_t why_size);

/* ------------------------------------------------------------------- wire */

#define SR_MAGIC "silvicn\x01"
#define SR_MAGIC_LEN 8
#define SR_BYTE_ORDER_MARK 0x01020304u
#define SR_HELLO_LEN 32
#define SR_VERDICT_LEN 16
#define SR_FRAME_HEADER_LEN 24
/* The longest abort reason a frame carries. */
#define SR_ABORT_REASON_MAX 400

void sr_put_u32le(uint8_t *p, uint32_t v);
void sr_put_u64le(uint8_t *p, uint64_t v);
uint32_t sr_get_u32le(const uint8_t *p);
uint64_t sr_get_u64le(const uint8_t *p);

/*
 * The hello, connector to acceptor, SR_HELLO_LEN bytes:
 *
 *	offset	size	field
 *	0	8	SR_MAGIC "silvicn\x01" (protocol version in the last byte)
 *	8	4	SR_BYTE_ORDER_MARK in the sender's native order
 *	12	4	rank u32 le: the rank the connector claims
 *	16	4	world u32 le
 *	20	4	flags u32 le: SR_HELLO_AUTH | SR_HELLO_CRC (the seed's
 *			reserved field, 0 on a plain ring; any other bit is
 *			refused with SR_VERDICT_UNKNOWN_FLAGS)
 *	24	8	job token u64 le
 *
 * The verdict, acceptor to connector, SR_VERDICT_LEN bytes:
 *
 *	offset	size	field
 *	0	8	SR_MAGIC
 *	8	4	status u32 le: an enum sr_verdict code (frozen values)
 *	12	4	acceptor rank u32 le
 *
 * Without a key and without --integrity both are byte for byte the seed's;
 * codes 4 and up are sent only to a peer that itself departs from it.
 */

/* Hello flags, in the seed's reserved field (0 without a key, so a hello
 * stays byte-identical to the seed's). */
#define SR_HELLO_AUTH 0x1u
/* Frames carry a CRC-32C trailer (--integrity); both ends must agree. */
#define SR_HELLO_CRC 0x2u
/* Every flag this version defines; any other bit set is refused. */
#define SR_HELLO_KNOWN (SR_HELLO_AUTH | SR_HELLO_CRC)

struct sr_hello {
	uint32_t rank;
	uint32_t world;
	uint64_t token;
	uint32_t flags;
};

enum sr_verdict {
	SR_VERDICT_ACCEPTED = 0,
	SR_VERDICT_WRONG_TOKEN = 1,
	SR_VERDICT_WRONG_WORLD = 2,
	SR_VERDICT_WRONG_RANK = 3,
	/* Sent only when one side has a key; a seed rank never sees them. */
	SR_VERDICT_AUTH_REQUIRED = 4,	/* the acceptor has a key, the hello none */
	SR_VERDICT_NO_KEY = 5,		/* the hello asks for a key the acceptor lacks */
	SR_VERDICT_INTEGRITY = 6,	/* one side checks frames, the other not */
	/* The hello sets a flag bit this version does not define. */
	SR_VERDICT_UNKNOWN_FLAGS = 7,
	/* The acceptor leaves: authentication failed on its link to its own
	 * next rank, so the ring cannot form (sent to the previous rank
	 * instead of accepting it, so it fails at once too). */
	SR_VERDICT_NEXT_AUTH = 8,
	SR_VERDICT_COUNT
};

void sr_hello_encode(const struct sr_hello *hello, uint8_t out[SR_HELLO_LEN]);
/* 0, or -1 with why set ("not a silvic rank ...", "byte order differs"). */
int sr_hello_decode(const uint8_t in[SR_HELLO_LEN], struct sr_hello *hello,
    const char **why);
/* The acceptor's judgement: token first, then world, then rank, then
 * undefined flag bits (SR_VERDICT_UNKNOWN_FLAGS). */
enum sr_verdict sr_hello_judge(const struct sr_hello *hello, uint64_t token,
    uint32_t world, uint32_t expected_rank);
void sr_verdict_encode(enum sr_verdict verdict, uint32_t acceptor_rank,
    uint8_t out[SR_VERDICT_LEN]);
/* 0, or -1 when the bytes are not a silvic verdict. */
int sr_verdict_decode(const uint8_t in[SR_VERDICT_LEN],
    enum sr_verdict *verdict, uint32_t *acceptor_rank);
const char *sr_verdict_reason(enum sr_verdict verdict);

/*
 * Frames.  Every message after the handshake is a frame: a header, then
 * `length` payload bytes, then (with integrity checks, collective frames
 * only) a CRC-32C trailer.
 *
 *   offset  size  field
 *   0       1     kind      enum sr_frame_kind
 *   1       1     dtype     an allreduce's element type, else 0
 *   2       1     op        an allreduce's operation, else 0
 *   3       1     reserved  0
 *   4       4     step      u32le: the ring step (see each kind)
 *   8       8     seq       u64le: which collective on this ring (1, 2, ...)
 *   16      8     length    u64le: payload bytes that follow
 *
 * kind names the collective; dtype and op qualify an allreduce; step is
 * the ring step; seq counts the collectives on this ring.  The control
 * frames (abort, goodbye, heartbeat) never carry a trailer.
 */
enum sr_frame_kind {
	SR_FRAME_ALLREDUCE = 1,
	SR_FRAME_ALLGATHER = 2,
	SR_FRAME_BROADCAST = 3,
	SR_FRAME_BARRIER = 4,
	SR_FRAME_SHIFT = 5,
	SR_FRAME_LINK = 6,
	SR_FRAME_ABORT = 7,
	SR_FRAME_BYE = 8,
	SR_FRAME_HEARTBEAT = 9,
	SR_FRAME_KIND_MAX = 9
};

struct sr_frame {
	uint8_t kind;
	uint8_t dtype;
	uint8_t op;
	uint32_t step;
	uint64_t seq;
	uint64_t length;
};

void sr_frame_encode(const struct sr_frame *frame,
    uint8_t out[SR_FRAME_HEADER_LEN]);
void sr_frame_decode(const uint8_t in[SR_FRAME_HEADER_LEN],
    struct sr_frame *frame);
/* "allreduce sum f64 step 3 seq 7 of 4096 bytes" for messages. */
void sr_frame_describe(const struct sr_frame *frame, char *buf, size_t size);

enum sr_frame_check {
	SR_FRAME_MATCH,
	SR_FRAME_IS_ABORT,	 /* an abort frame with a sane length */
	SR_FRAME_IS_BYE,	 /* the peer closes while this rank is in a
				  * collective */
	SR_FRAME_IS_HEARTBEAT,	 /* the peer waits, alive (header only) */
	SR_FRAME_MISMATCH,	 /* another collective, step or length */
	SR_FRAME_BAD_ABORT	 /* an abort frame of absurd length */
};

/* Compares a received header against the one this rank expects. */
enum sr_frame_check sr_frame_check(const struct sr_frame *got,
    const struct sr_frame *want);

/*
 * Abort: kind SR_FRAME_ABORT, seq 0 (it ends any collective), step 0 from
 * a rank whose ring formed or SR_ABORT_FORMING from one whose formation
 * failed (a neighbour still forming then fails at once), and this
 * payload (the reason's length is the frame's length less 12):
 *
 *   offset  size  field
 *   0       4     origin    u32le: the rank that failed first
 *   4       4     class     u32le: the origin's failure, a wire code
 *                           (SR_WIRE_*, frozen; never an enum sr_code)
 *   8       4     culprit   u32le: the rank the origin blames, or
 *                           SR_NO_RANK
 *   12      n     reason    the origin's own message, no NUL, n <= 400
 *
 * A rank that forwards an abort sends the origin's fields unchanged.
 * encode returns the payload length (<= SR_ABORT_MAX).
 */
#define SR_NO_RANK 0xffffffffu
#define SR_ABORT_FORMING 1u
#define SR_ABORT_FIXED 12
#define SR_ABORT_MAX (SR_ABORT_FIXED + SR_ABORT_REASON_MAX)

/* Failure classes on the wire.  Frozen: a value never changes meaning;
 * new ones are appended.  An unknown one reads as SR_EABORTED. */
#define SR_WIRE_CONFIG 1u
#define SR_WIRE_NOMEM 2u
#define SR_WIRE_BIND 3u
#define SR_WIRE_CONNECT 4u
#define SR_WIRE_REJECTED 5u
#define SR_WIRE_HANDSHAKE 6u
#define SR_WIRE_AUTH 7u
#define SR_WIRE_TIMEOUT 8u
#define SR_WIRE_PEER_CLOSED 9u
#define SR_WIRE_IO 10u
#define SR_WIRE_OUT_OF_STEP 11u
#define SR_WIRE_ABORTED 12u
#define SR_WIRE_INTERRUPTED 13u
#define SR_WIRE_BROKEN 14u
#define SR_WIRE_CORRUPT 15u
#define SR_WIRE_CHECK 16u

/* The wire code of a failure, and back (SR_EABORTED when unknown or 0). */
uint32_t sr_wire_from_code(enum sr_code code);
enum sr_code sr_wire_to_code(uint32_t wire);

struct sr_abort {
	uint32_t origin;
	uint32_t wire_class;
	uint32_t culprit;
	char reason[SR_ABORT_REASON_MAX + 1];
};

size_t sr_abort_encode(const struct sr_abort *abort, uint8_t *out,
    size_t size);
/* -1 when the payload is shorter than SR_ABORT_FIXED bytes.  The reason is
 * kept to printable ASCII. */
int sr_abort_decode(const uint8_t *in, size_t len, struct sr_abort *abort);

/*
 * Goodbye (sr_ring_finish): kind SR_FRAME_BYE.  Step 0 is the goodbye
 * proper, sent to both neighbours, with seq the number of collectives the
 * sender ran and this payload:
 *
 *   offset  size  field
 *   0       8     collectives  u64le: the same number as the header's seq
 *   8       4     rank         u32le: the sender's rank
 *   12      4     world        u32le: the sender's world size
 *
 * Steps 1, 2, ... (no payload, same seq) are the closing barrier, sent
 * once a rank has read and checked both neighbours' goodbyes.
 */
#define SR_GOODBYE_LEN 16

struct sr_goodbye {
	uint64_t collectives;
	uint32_t rank;
	uint32_t world;
};

void sr_goodbye_encode(const struct sr_goodbye *bye,
    uint8_t out[SR_GOODBYE_LEN]);
void sr_goodbye_decode(const uint8_t in[SR_GOODBYE_LEN],
    struct sr_goodbye *bye);

/*
 * Heartbeat: a header with no payload, sent by a rank that has waited
 * (nothing moving) for a while, to both neighbours, so that only the
 * ranks next to a silent rank or link time out:
 *
 *   kind SR_FRAME_HEARTBEAT, dtype 0, op 0,
 *   step    the rank the sender waits on (SR_NO_RANK: none),
 *   seq     the collectives the sender has begun,
 *   length  0
 */
void sr_heartbeat_encode(uint32_t waits_on, uint64_t seq,
    uint8_t out[SR_FRAME_HEADER_LEN]);

/* ------------------------------------------------------------------- auth */

#define SR_AUTH_MAGIC "silvica\x01"
#define SR_NONCE_LEN 32
#define SR_MAC_LEN 32
/*
 * With a key, after an accepting verdict (offset: size field):
 *
 *	challenge, connector to acceptor, SR_CHALLENGE_LEN bytes:
 *	    0: 8 SR_AUTH_MAGIC "silvica\x01"	8: 32 connector nonce
 *	response, acceptor to connector, SR_RESPONSE_LEN bytes:
 *	    0: 8 SR_AUTH_MAGIC	8: 32 acceptor nonce	40: 32 acceptor MAC
 *	proof, connector to acceptor, SR_PROOF_LEN bytes:
 *	    0: 8 SR_AUTH_MAGIC	8: 32 connector MAC
 *	result, acceptor to connector, SR_RESULT_LEN bytes:
 *	    0: 8 SR_AUTH_MAGIC	8: 4 status u32 le, enum sr_auth_result
 *
 * A connector that finds the acceptor's MAC wrong still sends its proof,
 * so that both sides report the other key.
 */
#define SR_CHALLENGE_LEN (SR_MAGIC_LEN + SR_NONCE_LEN)
#define SR_RESPONSE_LEN (SR_MAGIC_LEN + SR_NONCE_LEN + SR_MAC_LEN)
#define SR_PROOF_LEN (SR_MAGIC_LEN + SR_MAC_LEN)
#define SR_RESULT_LEN (SR_MAGIC_LEN + 4)

enum sr_auth_role { SR_AUTH_CONNECTOR = 0, SR_AUTH_ACCEPTOR = 1 };

/* The result's status: frozen wire values. */
enum sr_auth_result {
	SR_RESULT_ACCEPTED = 0,
	SR_RESULT_REJECTED = 1,	 /* the proof does not match the key */
	/* The proof matched, but the acceptor leaves: authentication
	 * failed on its link to its own next rank. */
	SR_RESULT_NEXT_AUTH = 2,
	SR_RESULT_COUNT
};

void sr_result_encode(enum sr_auth_result result,
    uint8_t out[SR_RESULT_LEN]);
/* 0, or -1 when the bytes are not a result or the status is unknown. */
int sr_result_decode(const uint8_t in[SR_RESULT_LEN],
    enum sr_auth_result *result);

struct sr_auth {
	const uint8_t *key;
	size_t key_len;
	uint32_t connector, acceptor, world;
	uint64_t token;
	uint8_t nonce_connector[SR_NONCE_LEN];
	uint8_t nonce_acceptor[SR_NONCE_LEN];
};

bool sr_auth_available(void);
/* Fresh random bytes from the kernel; -1 on failure. */
int sr_auth_nonce(uint8_t nonce[SR_NONCE_LEN]);
/* HMAC-SHA256 of the transcript for role; -1 without libcrypto. */
int sr_auth_mac(const struct sr_auth *a, enum sr_auth_role role,
    uint8_t mac[SR_MAC_LEN]);
/* Whether mac is role's MAC, compared in constant time. */
bool sr_auth_verify(const struct sr_auth *a, enum sr_auth_role role,
    const uint8_t mac[SR_MAC_LEN]);

/* ----------------------------------------------------------------- crc32c */

/* CRC-32C of len bytes, continuing crc (0 to start). */
uint32_t sr_crc32c(uint32_t crc, const void *data, size_t len);
#define SR_TRAILER_LEN 4
/* Frames of at most this many payload bytes are read whole, header and
 * payload in one call. */
#define SR_STAGE 4096

/* ----------------------------------------------------------------- reduce */

/*
 * dst[i] = op(a[i], b[i]) for count elements.  Buffers are aligned to the
 * element size; a may be dst, b overlaps neither.
 */
void sr_reduce(void *dst, const void *a, const void *b, size_t count,
    enum sr_dtype dtype, enum sr_op op);

/* --------------------------------------------------------------- schedule */

/*
 * count elements split into world blocks as evenly as possible: the first
 * count % world blocks hold one element more.
 */
size_t sr_block_offset(size_t count, uint32_t world, uint32_t block);
size_t sr_block_count(size_t count, uint32_t world, uint32_t block);
/*
 * Ring allreduce: at reduce-scatter step k (0 <= k < world-1) rank r sends
 * block (r - k) mod world and receives block (r - k - 1) mod world, which
 * it folds into its own; at allgather step k it sends block (r + 1 - k) and
 * receives block (r - k).  The block rank r owns reduced is (r + 1) mod
 * world.
 */
uint32_t sr_sched_rs_send(uint32_t rank, uint32_t world, uint32_t step);
uint32_t sr_sched_rs_recv(uint32_t rank, uint32_t world, uint32_t step);
uint32_t sr_sched_ag_send(uint32_t rank, uint32_t world, uint32_t step);
uint32_t sr_sched_ag_recv(uint32_t rank, uint32_t world, uint32_t step);

/* ----------------------------------------------------------------- engine */

enum sr_side { SR_NEXT = 0, SR_PREV = 1 };

/*
 * One frame to send: `len` bytes at data, on side `side`.  When gate >= 0
 * only the bytes the receive `gate` has already finished may be sent (the
 * data forwards what that receive brings).
 */
struct sr_send {
	enum sr_side side;
	const uint8_t *data;
	uint64_t len;
	int gate;
	struct sr_frame frame;
	/* Engine state: payload bytes sent; whether a header went out. */
	uint64_t off;
	bool started;
};

/*
 * One frame to receive into data (len bytes) from `side`.  With reduce set
 * the payload is folded into data with (dtype, op) instead of copied.
 * data may be NULL to discard the payload.
 */
struct sr_recv {
	enum sr_side side;
	uint8_t *data;
	uint64_t len;
	/* With reduce: data = op(local, payload); local may be data.  With
	 * swap too: data = op(payload, local), and local must not be data
	 * (max and min pick by operand order: a fold order fixed on every
	 * rank keeps results bitwise identical). */
	const uint8_t *local;
	bool reduce;
	bool swap;
	struct sr_frame frame;
	/* Engine state: payload bytes final in data, of those the ones
	 * whose frame passed its integrity check, and completion. */
	uint64_t done;
	uint64_t verified;
	bool complete;
};

struct sr_transfer {
	struct sr_send *sends;
	int nsends;
	struct sr_recv *recvs;
	int nrecvs;
	enum sr_dtype dtype;
	enum sr_op op;
	/* Payload bytes per frame at most (0: SR_FRAME_MAX); the same on
	 * every rank, as both ends cut a send into frames alike. */
	uint64_t frame_max;
	/* Closing: done only at both peers' EOF (after their goodbyes);
	 * any frame but a heartbeat or an abort is out of step. */
	bool drain;
};

/* A waiting rank's heartbeats are a quarter timeout apart, at most this. */
#define SR_HEARTBEAT_MAX_NS (1000LL * 1000000)

/* Runs a transfer to completion or failure (then the ring is failed). */
int sr_engine_run(struct sr_ring *ring, struct sr_transfer *xfer,
    struct sr_error *err);

/* -------------------------------------------------------------- ring core */

struct sr_peer {
	int fd;
	uint32_t rank;
	char address[SR_ADDR_MAX];
	/* The peer's goodbye was read (sr_ring_finish); then EOF. */
	bool bye;
	bool eof;
	/* Liveness: when bytes last came from and went to the peer
	 * (monotonic ns), and the rank its last heartbeat said it waits on
	 * (SR_NO_RANK: none heard). */
	int64_t heard_ns;
	int64_t sent_ns;
	uint32_t waits_on;
	/* A control frame (heartbeat) under way: its header is tx_header,
	 * with no payload and no trailer. */
	bool tx_control;
	/* Receive decoder; a header read ahead of its collective stays here. */
	uint8_t header[SR_FRAME_HEADER_LEN];
	size_t header_got;
	uint8_t abort_buf[SR_ABORT_MAX];
	/* A small frame's payload read with its header, until it is checked. */
	uint8_t stage[SR_STAGE];
	size_t abort_got;
	uint64_t abort_len;
	/* Send state of the frame under way: header bytes still to go, and
	 * payload bytes still owed (an abort pads them to stay in frame). */
	uint8_t tx_header[SR_FRAME_HEADER_LEN];
	size_t tx_header_left;
	uint64_t tx_payload_left;
	const uint8_t *tx_data;	/* the payload still owed, in hand */
	/* Receive state of the frame under way. */
	uint64_t rx_payload_left;
	/* With integrity checks: the CRC so far and the trailer. */
	uint32_t tx_crc, rx_crc;
	uint8_t tx_trailer[SR_TRAILER_LEN], rx_trailer[SR_TRAILER_LEN];
	size_t tx_trailer_left, rx_trailer_left;
};

struct sr_ring {
	uint32_t rank;
	uint32_t world;
	uint64_t token;
	int64_t timeout_ms;
	volatile int *cancel;
	uint64_t seq;
	bool failed;
	bool finished;		 /* sr_ring_finish agreed */
	struct sr_error failure;
	/* The abort this rank heard first, forwarded verbatim. */
	struct sr_abort heard;
	bool heard_abort;
	struct sr_peer peer[2];	 /* SR_NEXT, SR_PREV */
	char **addresses;
	uint8_t *scratch;
	size_t scratch_size;
	/* The frames of the collective under way, kept between calls. */
	struct sr_send *plan_sends;
	struct sr_recv *plan_recvs;
	size_t plan_size;
	uint8_t *segment;	 /* SR_SEGMENT bytes a side for reductions */
	int64_t spin_ns;	 /* busy-poll this long before sleeping */
	bool integrity;		 /* frames carry a CRC-32C trailer */
	char congestion[SR_CONGESTION_MAX];	/* the next link's */
};

/*
 * Ring formation: connects to the next rank and accepts the previous one.
 * Fills next_fd and prev_fd (blocking mode unspecified) or the error.
 */
int sr_handshake_form(int listen_fd, uint32_t rank, uint32_t world,
    uint64_t token, const char *const *addresses,
    const struct sr_ring_options *options, int *next_fd, int *prev_fd,
    struct sr_error *err);

/* The failure of a broken ring copied into err (code kept). */
int sr_ring_fail_again(struct sr_ring *ring, struct sr_error *err);
/* Records err as the ring's failure, sends the abort to both neighbours
 * (the origin's, verbatim, when err came from one), shuts the write
 * sides and lingers, bounded, until the neighbours' kernels have it. */
void sr_ring_fail(struct sr_ring *ring, const struct sr_error *err);
/* An abort read from a peer: kept (the first one) for forwarding, and
 * turned into err: the origin's class, its words, the rank it blamed. */
void sr_ring_heard_abort(struct sr_ring *ring, const struct sr_abort *abort,
    struct sr_error *err);
/* Scratch space of at least size bytes owned by the ring; NULL on ENOMEM. */
uint8_t *sr_ring_scratch(struct sr_ring *ring, size_t size);
/* An empty transfer x with room for `steps` sends and as many receives,
 * owned by the ring (allocated once, reused by every call); -1 on ENOMEM. */
int sr_ring_plan(struct sr_ring *ring, int steps, struct sr_transfer *x);

/* Socket syscalls move at most this many bytes at once. */
#define SR_IO_MAX (4u << 20)
/* Frames carry at most this much payload unless a transfer says otherwise:
 * a forwarding rank sends a piece once it has all of it, so this is also
 * the pipelining grain. */
#define SR_FRAME_MAX (256u << 10)
/* A reduction folds received bytes in pieces of at most this size, while
 * they are still in cache. */
#define SR_SEGMENT (256u << 10)

#endif
