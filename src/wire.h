/*
 * wire.h - every message on the wire, drawn byte by byte, and its codec
 * (wire.c).  Pure: nothing here touches a descriptor.
 *
 * Conventions, for every table below:
 *   - Integers are unsigned, little-endian, at the width the table gives,
 *     written and read only through sr_put_* and sr_get_*; no struct or
 *     enum is ever copied to the wire raw.  The one exception is the
 *     hello's byte-order mark, native on purpose.
 *   - Every message has a fixed length (SR_*_LEN) and every field a named
 *     offset (SR_*_OFF_*); wire.c asserts at compile time that the fields
 *     tile the message.  Only the abort payload has a variable tail, and
 *     its decoder takes the length and checks it.
 *   - A message that opens with a magic is refused by its decoder (-1, and
 *     a reason where the caller can name it) when the magic is wrong, so
 *     a stray or another protocol version is never read as fields.
 *   - Status and class fields carry frozen codes: a value never changes
 *     meaning, new ones are appended.
 *
 * The messages, in the order a link sees them:
 *   handshake		hello, verdict (byte for byte the silvic-net seed)
 *   with a key		challenge, response, proof, result
 *   then frames	header [payload] [trailer]; the control frames
 *			abort, goodbye and heartbeat
 */
#ifndef SR_WIRE_H
#define SR_WIRE_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "silvic_ring.h"

void sr_put_u32le(uint8_t *p, uint32_t v);
void sr_put_u64le(uint8_t *p, uint64_t v);
uint32_t sr_get_u32le(const uint8_t *p);
uint64_t sr_get_u64le(const uint8_t *p);

/* ------------------------------------------------------------- handshake */

/* Opens the hello and the verdict; the last byte is the protocol version. */
#define SR_MAGIC "silvicn\x01"
#define SR_MAGIC_LEN 8
#define SR_BYTE_ORDER_MARK 0x01020304u

/*
 * The hello, connector to acceptor:
 *
 *	offset	size	field
 *	0	8	magic	SR_MAGIC "silvicn\x01"
 *	8	4	bom	SR_BYTE_ORDER_MARK in the sender's native order
 *	12	4	rank	u32: the rank the connector claims
 *	16	4	world	u32
 *	20	4	flags	u32: SR_HELLO_AUTH | SR_HELLO_CRC | SR_HELLO_MESH |
 *				SR_HELLO_PROBE, and the streams field (the
 *				seed's reserved field, 0 on a plain ring; any
 *				other bit is refused with
 *				SR_VERDICT_UNKNOWN_FLAGS)
 *	24	8	token	u64: the job token
 *	32		SR_HELLO_LEN
 */
#define SR_HELLO_OFF_MAGIC 0
#define SR_HELLO_OFF_BOM 8
#define SR_HELLO_OFF_RANK 12
#define SR_HELLO_OFF_WORLD 16
#define SR_HELLO_OFF_FLAGS 20
#define SR_HELLO_OFF_TOKEN 24
#define SR_HELLO_LEN 32

/* Hello flags, in the seed's reserved field (0 without a key, so a hello
 * stays byte-identical to the seed's). */
#define SR_HELLO_AUTH 0x1u
/* Frames carry a CRC-32C trailer (--integrity); both ends must agree. */
#define SR_HELLO_CRC 0x2u
/* The connector forms a mesh (a link to every rank; wide frame headers
 * on this link); the acceptor must too. */
#define SR_HELLO_MESH 0x4u
/* The connector probes (bench connect): every rank dials every other;
 * with SR_HELLO_MESH.  The acceptor must probe too. */
#define SR_HELLO_PROBE 0x8u
/*
 * The streams field (--streams K), in the flags' second byte:
 *
 *	bits	field
 *	8-11	streams	K - 1: the connections the connector opens per link
 *	12-15	stream	which of them this connection is (0 .. K - 1)
 *
 * One stream per link, the default, leaves both 0: a plain ring's hello
 * stays the seed's.  Every rank must open as many (SR_VERDICT_STREAMS).
 */
#define SR_HELLO_STREAMS_SHIFT 8
#define SR_HELLO_STREAM_SHIFT 12
#define SR_HELLO_STREAMS_MASK 0xff00u
/* The most streams a link may have. */
#define SR_STREAMS_MAX 8
/* The flags' streams field for stream `stream` of `streams`. */
#define SR_HELLO_STREAMS(streams, stream) \
	((((uint32_t)(streams) - 1) << SR_HELLO_STREAMS_SHIFT) | \
	((uint32_t)(stream) << SR_HELLO_STREAM_SHIFT))
/* Every flag this version defines; any other bit set is refused. */
#define SR_HELLO_KNOWN (SR_HELLO_AUTH | SR_HELLO_CRC | SR_HELLO_MESH | \
	SR_HELLO_PROBE | SR_HELLO_STREAMS_MASK)

/*
 * The verdict, acceptor to connector:
 *
 *	offset	size	field
 *	0	8	magic	SR_MAGIC
 *	8	4	status	u32: an enum sr_verdict code
 *	12	4	rank	u32: the acceptor's rank
 *	16		SR_VERDICT_LEN
 *
 * Without a key and without --integrity both are byte for byte the seed's;
 * codes 4 and up are sent only to a peer that itself departs from it.
 */
#define SR_VERDICT_OFF_MAGIC 0
#define SR_VERDICT_OFF_STATUS 8
#define SR_VERDICT_OFF_RANK 12
#define SR_VERDICT_LEN 16

struct sr_hello {
	uint32_t rank;
	uint32_t world;
	uint64_t token;
	uint32_t flags;
};

/* A hello's streams per link (1 .. 16) and this connection's index. */
static inline uint32_t
sr_hello_streams(uint32_t flags)
{
	return ((flags >> SR_HELLO_STREAMS_SHIFT) & 0xf) + 1;
}

static inline uint32_t
sr_hello_stream(uint32_t flags)
{
	return (flags >> SR_HELLO_STREAM_SHIFT) & 0xf;
}

/* The verdict's status: frozen wire values. */
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
	/* One side forms a mesh, the other a ring, or one probes (bench
	 * connect) and the other not. */
	SR_VERDICT_MESH = 9,
	/* 10 .. 17: the acceptor opens (code - 9) streams per link, and the
	 * hello another number (or names a stream past them):
	 * SR_VERDICT_STREAMS + K - 1 for an acceptor of K streams. */
	SR_VERDICT_STREAMS = 10,
	SR_VERDICT_STREAMS_LAST = SR_VERDICT_STREAMS + SR_STREAMS_MAX - 1,
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
/* 0, or -1 when the bytes are not a silvic verdict (magic or status). */
int sr_verdict_decode(const uint8_t in[SR_VERDICT_LEN],
    enum sr_verdict *verdict, uint32_t *acceptor_rank);
const char *sr_verdict_reason(enum sr_verdict verdict);

/* -------------------------------------------------------- authentication */

/*
 * With a key, after an accepting verdict, four messages (the MACs are
 * auth.c's, over both nonces, both ranks, the world and the token):
 *
 * challenge, connector to acceptor:
 *	offset	size	field
 *	0	8	magic	SR_AUTH_MAGIC "silvica\x01"
 *	8	32	nonce	the connector's, fresh
 *	40		SR_CHALLENGE_LEN
 *
 * response, acceptor to connector:
 *	0	8	magic	SR_AUTH_MAGIC
 *	8	32	nonce	the acceptor's, fresh
 *	40	32	mac	the acceptor proves it holds the key
 *	72		SR_RESPONSE_LEN
 *
 * proof, connector to acceptor:
 *	0	8	magic	SR_AUTH_MAGIC
 *	8	32	mac	the connector proves it holds the key
 *	40		SR_PROOF_LEN
 *
 * result, acceptor to connector:
 *	0	8	magic	SR_AUTH_MAGIC
 *	8	4	status	u32: an enum sr_auth_result code
 *	12		SR_RESULT_LEN
 *
 * A connector that finds the acceptor's MAC wrong still sends its proof,
 * so that both sides report the other key.
 */
#define SR_AUTH_MAGIC "silvica\x01"
#define SR_NONCE_LEN 32
#define SR_MAC_LEN 32

#define SR_CHALLENGE_OFF_MAGIC 0
#define SR_CHALLENGE_OFF_NONCE 8
#define SR_CHALLENGE_LEN 40

#define SR_RESPONSE_OFF_MAGIC 0
#define SR_RESPONSE_OFF_NONCE 8
#define SR_RESPONSE_OFF_MAC 40
#define SR_RESPONSE_LEN 72

#define SR_PROOF_OFF_MAGIC 0
#define SR_PROOF_OFF_MAC 8
#define SR_PROOF_LEN 40

#define SR_RESULT_OFF_MAGIC 0
#define SR_RESULT_OFF_STATUS 8
#define SR_RESULT_LEN 12

struct sr_challenge {
	uint8_t nonce[SR_NONCE_LEN];
};

struct sr_response {
	uint8_t nonce[SR_NONCE_LEN];
	uint8_t mac[SR_MAC_LEN];
};

struct sr_proof {
	uint8_t mac[SR_MAC_LEN];
};

/* The result's status: frozen wire values. */
enum sr_auth_result {
	SR_RESULT_ACCEPTED = 0,
	SR_RESULT_REJECTED = 1,	 /* the proof does not match the key */
	/* The proof matched, but the acceptor leaves: authentication
	 * failed on its link to its own next rank. */
	SR_RESULT_NEXT_AUTH = 2,
	SR_RESULT_COUNT
};

/* The decoders return 0, or -1 with why ("not an authentication
 * message") when the magic is wrong. */
void sr_challenge_encode(const struct sr_challenge *challenge,
    uint8_t out[SR_CHALLENGE_LEN]);
int sr_challenge_decode(const uint8_t in[SR_CHALLENGE_LEN],
    struct sr_challenge *challenge, const char **why);
void sr_response_encode(const struct sr_response *response,
    uint8_t out[SR_RESPONSE_LEN]);
int sr_response_decode(const uint8_t in[SR_RESPONSE_LEN],
    struct sr_response *response, const char **why);
void sr_proof_encode(const struct sr_proof *proof, uint8_t out[SR_PROOF_LEN]);
int sr_proof_decode(const uint8_t in[SR_PROOF_LEN], struct sr_proof *proof,
    const char **why);
void sr_result_encode(enum sr_auth_result result,
    uint8_t out[SR_RESULT_LEN]);
/* 0, or -1 when the bytes are not a result or the status is unknown. */
int sr_result_decode(const uint8_t in[SR_RESULT_LEN],
    enum sr_auth_result *result);

/* ---------------------------------------------------------------- frames */

/*
 * Every message after the handshake is a frame: a header, then `length`
 * payload bytes, then (with integrity checks, collective frames only) a
 * trailer.  The header:
 *
 *	offset	size	field
 *	0	1	kind	enum sr_frame_kind
 *	1	1	dtype	an allreduce's element type, else 0
 *	2	1	op	an allreduce's operation, else 0
 *	3	1	reserved, 0 (ignored on decode)
 *	4	4	step	u32: the ring step (see each kind)
 *	8	8	seq	u64: which collective on this ring (1, 2, ...)
 *	16	8	length	u64: payload bytes that follow
 *	24		SR_FRAME_HEADER_LEN
 *
 * The control frames (abort, goodbye, heartbeat) never carry a trailer.
 *
 * On a mesh's links (hellos with SR_HELLO_MESH) every header is the wide
 * one: the same 24 bytes, then
 *
 *	24	4	group	u32: the group the collective runs in (0: the
 *				ring of every rank); seq counts that group's
 *				collectives
 *	28	4	piece	u32: with several streams per link, which piece
 *				of its send this frame is: its payload starts
 *				at piece x the transfer's frame size (every
 *				frame but a send's last carries a whole frame
 *				size); 0 with one stream (ignored on decode
 *				then)
 *	32		SR_FRAME_WIDE_LEN
 *
 * A plain ring's header has no group field (its frames are group 0).
 * Links of several streams (--streams K > 1) carry the wide header on a
 * plain ring too: a send is cut into pieces, each goes on whichever
 * stream can take data first, and the receiver puts each where its piece
 * says.  On each stream frames keep their order.
 */
#define SR_FRAME_OFF_KIND 0
#define SR_FRAME_OFF_DTYPE 1
#define SR_FRAME_OFF_OP 2
#define SR_FRAME_OFF_RESERVED 3
#define SR_FRAME_OFF_STEP 4
#define SR_FRAME_OFF_SEQ 8
#define SR_FRAME_OFF_LENGTH 16
#define SR_FRAME_HEADER_LEN 24
#define SR_FRAME_OFF_GROUP 24
#define SR_FRAME_OFF_PIECE 28
#define SR_FRAME_WIDE_LEN 32
/* The longest header a link reads or writes. */
#define SR_FRAME_HEADER_MAX SR_FRAME_WIDE_LEN

/* Frame kinds: frozen wire values. */
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
	uint32_t group;		/* wide headers only; 0 on a plain ring */
	uint32_t piece;		/* wide headers only; 0 with one stream */
};

void sr_frame_encode(const struct sr_frame *frame,
    uint8_t out[SR_FRAME_HEADER_LEN]);
/* The plain header decoded (group 0). */
void sr_frame_decode(const uint8_t in[SR_FRAME_HEADER_LEN],
    struct sr_frame *frame);
void sr_frame_encode_wide(const struct sr_frame *frame,
    uint8_t out[SR_FRAME_WIDE_LEN]);
void sr_frame_decode_wide(const uint8_t in[SR_FRAME_WIDE_LEN],
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
 * The integrity trailer (--integrity, SR_HELLO_CRC), after a collective
 * frame's payload:
 *
 *	offset	size	field
 *	0	4	crc	u32: CRC-32C (crc32c.h) of the header, then the
 *				payload
 *	4		SR_TRAILER_LEN
 */
#define SR_TRAILER_OFF_CRC 0
#define SR_TRAILER_LEN 4

/*
 * The abort: kind SR_FRAME_ABORT, seq 0 (it ends any collective), step 0
 * from a rank whose ring formed or SR_ABORT_FORMING from one whose
 * formation failed (a neighbour still forming then fails at once), and
 * this payload, SR_ABORT_FIXED to SR_ABORT_MAX bytes:
 *
 *	offset	size	field
 *	0	4	origin	u32: the rank that failed first
 *	4	4	class	u32: the origin's failure, a wire code
 *				(SR_WIRE_*; never an enum sr_code)
 *	8	4	culprit	u32: the rank the origin blames, or SR_NO_RANK
 *	12	n	reason	the origin's own message, no NUL; n is the
 *				frame's length less 12, at most 400
 *
 * A rank that forwards an abort sends the origin's fields unchanged.
 */
#define SR_ABORT_OFF_ORIGIN 0
#define SR_ABORT_OFF_CLASS 4
#define SR_ABORT_OFF_CULPRIT 8
#define SR_ABORT_OFF_REASON 12
#define SR_ABORT_FIXED SR_ABORT_OFF_REASON
/* The longest abort reason a frame carries. */
#define SR_ABORT_REASON_MAX 400
#define SR_ABORT_MAX (SR_ABORT_FIXED + SR_ABORT_REASON_MAX)
#define SR_NO_RANK 0xffffffffu
#define SR_ABORT_FORMING 1u

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

/* The payload's length (<= size, <= SR_ABORT_MAX; the reason is cut to
 * fit), or 0 when size is below SR_ABORT_FIXED. */
size_t sr_abort_encode(const struct sr_abort *abort, uint8_t *out,
    size_t size);
/* -1 when the payload is shorter than SR_ABORT_FIXED bytes.  The reason is
 * kept to printable ASCII. */
int sr_abort_decode(const uint8_t *in, size_t len, struct sr_abort *abort);

/*
 * The goodbye (sr_ring_finish): kind SR_FRAME_BYE.  Step 0 is the goodbye
 * proper, sent to both neighbours, with seq the number of collectives the
 * sender ran and this payload:
 *
 *	offset	size	field
 *	0	8	collectives	u64: the same number as the header's seq
 *	8	4	rank		u32: the sender's rank
 *	12	4	world		u32: the sender's world size
 *	16			SR_GOODBYE_LEN
 *
 * Steps 1, 2, ... (no payload, same seq) are the closing barrier, sent
 * once a rank has read and checked both neighbours' goodbyes.
 */
#define SR_GOODBYE_OFF_COLLECTIVES 0
#define SR_GOODBYE_OFF_RANK 8
#define SR_GOODBYE_OFF_WORLD 12
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
 * The heartbeat: a header and nothing else, sent by a rank that has
 * waited (nothing moving) for a while, to both neighbours, so that only
 * the ranks next to a silent rank or link time out:
 *
 *	offset	size	field
 *	0	1	kind	SR_FRAME_HEARTBEAT
 *	1	1	dtype	0
 *	2	1	op	0
 *	3	1	reserved, 0
 *	4	4	step	u32: the rank the sender waits on (SR_NO_RANK:
 *				none)
 *	8	8	seq	u64: the collectives the sender has begun
 *	16	8	length	u64: 0
 */
struct sr_frame sr_heartbeat_frame(uint32_t waits_on, uint64_t seq);
void sr_heartbeat_encode(uint32_t waits_on, uint64_t seq,
    uint8_t out[SR_FRAME_HEADER_LEN]);

#endif
