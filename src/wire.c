/*
 * wire.c - bytes on the wire: fixed-width little-endian helpers, the
 * handshake codec (byte for byte the silvic-net hello and verdict), the
 * authentication messages, the frame header codec and the control
 * frames' payloads (abort, goodbye, heartbeat).  The byte tables are in
 * wire.h; every field here is put or got at its named offset.  Pure: no
 * descriptors, no allocation.
 */
#include <stdio.h>
#include <string.h>

#include "wire.h"

/* Each table's fields end where the next begins, and the last at the
 * message's length: an offset edited alone fails the build. */
_Static_assert(SR_HELLO_OFF_BOM == SR_HELLO_OFF_MAGIC + SR_MAGIC_LEN &&
    SR_HELLO_OFF_RANK == SR_HELLO_OFF_BOM + 4 &&
    SR_HELLO_OFF_WORLD == SR_HELLO_OFF_RANK + 4 &&
    SR_HELLO_OFF_FLAGS == SR_HELLO_OFF_WORLD + 4 &&
    SR_HELLO_OFF_TOKEN == SR_HELLO_OFF_FLAGS + 4 &&
    SR_HELLO_LEN == SR_HELLO_OFF_TOKEN + 8, "hello layout");
_Static_assert(SR_VERDICT_OFF_STATUS == SR_VERDICT_OFF_MAGIC + SR_MAGIC_LEN &&
    SR_VERDICT_OFF_RANK == SR_VERDICT_OFF_STATUS + 4 &&
    SR_VERDICT_LEN == SR_VERDICT_OFF_RANK + 4, "verdict layout");
_Static_assert(sizeof(SR_AUTH_MAGIC) - 1 == SR_MAGIC_LEN &&
    sizeof(SR_MAGIC) - 1 == SR_MAGIC_LEN, "magic length");
_Static_assert(SR_CHALLENGE_OFF_NONCE ==
    SR_CHALLENGE_OFF_MAGIC + SR_MAGIC_LEN &&
    SR_CHALLENGE_LEN == SR_CHALLENGE_OFF_NONCE + SR_NONCE_LEN,
    "challenge layout");
_Static_assert(SR_RESPONSE_OFF_NONCE == SR_RESPONSE_OFF_MAGIC + SR_MAGIC_LEN &&
    SR_RESPONSE_OFF_MAC == SR_RESPONSE_OFF_NONCE + SR_NONCE_LEN &&
    SR_RESPONSE_LEN == SR_RESPONSE_OFF_MAC + SR_MAC_LEN, "response layout");
_Static_assert(SR_PROOF_OFF_MAC == SR_PROOF_OFF_MAGIC + SR_MAGIC_LEN &&
    SR_PROOF_LEN == SR_PROOF_OFF_MAC + SR_MAC_LEN, "proof layout");
_Static_assert(SR_RESULT_OFF_STATUS == SR_RESULT_OFF_MAGIC + SR_MAGIC_LEN &&
    SR_RESULT_LEN == SR_RESULT_OFF_STATUS + 4, "result layout");
_Static_assert(SR_FRAME_OFF_DTYPE == SR_FRAME_OFF_KIND + 1 &&
    SR_FRAME_OFF_OP == SR_FRAME_OFF_DTYPE + 1 &&
    SR_FRAME_OFF_RESERVED == SR_FRAME_OFF_OP + 1 &&
    SR_FRAME_OFF_STEP == SR_FRAME_OFF_RESERVED + 1 &&
    SR_FRAME_OFF_SEQ == SR_FRAME_OFF_STEP + 4 &&
    SR_FRAME_OFF_LENGTH == SR_FRAME_OFF_SEQ + 8 &&
    SR_FRAME_HEADER_LEN == SR_FRAME_OFF_LENGTH + 8, "frame header layout");
_Static_assert(SR_FRAME_OFF_GROUP == SR_FRAME_HEADER_LEN &&
    SR_FRAME_OFF_PIECE == SR_FRAME_OFF_GROUP + 4 &&
    SR_FRAME_WIDE_LEN == SR_FRAME_OFF_PIECE + 4, "wide header layout");
_Static_assert(SR_TRAILER_LEN == SR_TRAILER_OFF_CRC + 4, "trailer layout");
_Static_assert(SR_ABORT_OFF_CLASS == SR_ABORT_OFF_ORIGIN + 4 &&
    SR_ABORT_OFF_CULPRIT == SR_ABORT_OFF_CLASS + 4 &&
    SR_ABORT_OFF_REASON == SR_ABORT_OFF_CULPRIT + 4, "abort layout");
_Static_assert(SR_GOODBYE_OFF_RANK == SR_GOODBYE_OFF_COLLECTIVES + 8 &&
    SR_GOODBYE_OFF_WORLD == SR_GOODBYE_OFF_RANK + 4 &&
    SR_GOODBYE_LEN == SR_GOODBYE_OFF_WORLD + 4, "goodbye layout");

/* Whether in opens with SR_AUTH_MAGIC; if not, *why (when why is not
 * NULL) says the bytes are no authentication message. */
static bool
auth_magic(const uint8_t *in, const char **why)
{
	if (memcmp(in, SR_AUTH_MAGIC, SR_MAGIC_LEN) == 0)
		return true;
	if (why != NULL)
		*why = "not an authentication message";
	return false;
}

void
sr_put_u32le(uint8_t *p, uint32_t v)
{
	p[0] = (uint8_t)v;
	p[1] = (uint8_t)(v >> 8);
	p[2] = (uint8_t)(v >> 16);
	p[3] = (uint8_t)(v >> 24);
}

void
sr_put_u64le(uint8_t *p, uint64_t v)
{
	sr_put_u32le(p, (uint32_t)v);
	sr_put_u32le(p + 4, (uint32_t)(v >> 32));
}

uint32_t
sr_get_u32le(const uint8_t *p)
{
	return (uint32_t)p[0] | (uint32_t)p[1] << 8 | (uint32_t)p[2] << 16 |
	    (uint32_t)p[3] << 24;
}

uint64_t
sr_get_u64le(const uint8_t *p)
{
	return (uint64_t)sr_get_u32le(p) | (uint64_t)sr_get_u32le(p + 4) << 32;
}

void
sr_hello_encode(const struct sr_hello *hello, uint8_t out[SR_HELLO_LEN])
{
	uint32_t bom = SR_BYTE_ORDER_MARK;

	memcpy(out + SR_HELLO_OFF_MAGIC, SR_MAGIC, SR_MAGIC_LEN);
	/* Native order on purpose: a peer of the other endianness reads it
	 * reversed and is rejected, since payloads travel natively. */
	memcpy(out + SR_HELLO_OFF_BOM, &bom, 4);
	sr_put_u32le(out + SR_HELLO_OFF_RANK, hello->rank);
	sr_put_u32le(out + SR_HELLO_OFF_WORLD, hello->world);
	sr_put_u32le(out + SR_HELLO_OFF_FLAGS, hello->flags);
	sr_put_u64le(out + SR_HELLO_OFF_TOKEN, hello->token);
}

int
sr_hello_decode(const uint8_t in[SR_HELLO_LEN], struct sr_hello *hello,
    const char **why)
{
	uint32_t bom;

	if (memcmp(in + SR_HELLO_OFF_MAGIC, SR_MAGIC, SR_MAGIC_LEN) != 0) {
		*why = "not a silvic rank (wrong magic or protocol version)";
		return -1;
	}
	memcpy(&bom, in + SR_HELLO_OFF_BOM, 4);
	if (bom != SR_BYTE_ORDER_MARK) {
		*why = "its byte order differs from this rank's";
		return -1;
	}
	hello->rank = sr_get_u32le(in + SR_HELLO_OFF_RANK);
	hello->world = sr_get_u32le(in + SR_HELLO_OFF_WORLD);
	hello->flags = sr_get_u32le(in + SR_HELLO_OFF_FLAGS);
	hello->token = sr_get_u64le(in + SR_HELLO_OFF_TOKEN);
	return 0;
}

enum sr_verdict
sr_hello_judge(const struct sr_hello *hello, uint64_t token, uint32_t world,
    uint32_t expected_rank)
{
	if (hello->token != token)
		return SR_VERDICT_WRONG_TOKEN;
	if (hello->world != world)
		return SR_VERDICT_WRONG_WORLD;
	if (hello->rank != expected_rank)
		return SR_VERDICT_WRONG_RANK;
	if (hello->flags & ~SR_HELLO_KNOWN)
		return SR_VERDICT_UNKNOWN_FLAGS;
	return SR_VERDICT_ACCEPTED;
}

void
sr_verdict_encode(enum sr_verdict verdict, uint32_t acceptor_rank,
    uint8_t out[SR_VERDICT_LEN])
{
	memcpy(out + SR_VERDICT_OFF_MAGIC, SR_MAGIC, SR_MAGIC_LEN);
	sr_put_u32le(out + SR_VERDICT_OFF_STATUS, (uint32_t)verdict);
	sr_put_u32le(out + SR_VERDICT_OFF_RANK, acceptor_rank);
}

int
sr_verdict_decode(const uint8_t in[SR_VERDICT_LEN], enum sr_verdict *verdict,
    uint32_t *acceptor_rank)
{
	uint32_t status;

	if (memcmp(in + SR_VERDICT_OFF_MAGIC, SR_MAGIC, SR_MAGIC_LEN) != 0)
		return -1;
	status = sr_get_u32le(in + SR_VERDICT_OFF_STATUS);
	if (status >= SR_VERDICT_COUNT)
		return -1;
	*verdict = (enum sr_verdict)status;
	*acceptor_rank = sr_get_u32le(in + SR_VERDICT_OFF_RANK);
	return 0;
}

const char *
sr_verdict_reason(enum sr_verdict verdict)
{
	switch (verdict) {
	case SR_VERDICT_ACCEPTED:
		return "accepted";
	case SR_VERDICT_WRONG_TOKEN:
		return "job token mismatch";
	case SR_VERDICT_WRONG_WORLD:
		return "world size mismatch";
	case SR_VERDICT_WRONG_RANK:
		return "rank mismatch";
	case SR_VERDICT_AUTH_REQUIRED:
		return "authentication required: it has a key and this rank none "
		    "(--key-file)";
	case SR_VERDICT_NO_KEY:
		return "authentication failed: this rank has a key and it has "
		    "none";
	case SR_VERDICT_INTEGRITY:
		return "integrity check setting differs (--integrity on one "
		    "side only)";
	case SR_VERDICT_UNKNOWN_FLAGS:
		return "its hello sets flag bits this version does not define "
		    "(another silvic-ring version?)";
	case SR_VERDICT_NEXT_AUTH:
		return "authentication failed on its link to its next rank "
		    "(another key?), so the ring cannot form";
	case SR_VERDICT_MESH:
		return "the two sides form different links: a mesh (--mesh), "
		    "a ring, or bench connect's probe";
	default:
		if (verdict >= SR_VERDICT_STREAMS &&
		    verdict <= SR_VERDICT_STREAMS_LAST)
			return "the two sides open different numbers of "
			    "streams per link (--streams)";
		return "unknown verdict";
	}
}

void
sr_challenge_encode(const struct sr_challenge *challenge,
    uint8_t out[SR_CHALLENGE_LEN])
{
	memcpy(out + SR_CHALLENGE_OFF_MAGIC, SR_AUTH_MAGIC, SR_MAGIC_LEN);
	memcpy(out + SR_CHALLENGE_OFF_NONCE, challenge->nonce, SR_NONCE_LEN);
}

int
sr_challenge_decode(const uint8_t in[SR_CHALLENGE_LEN],
    struct sr_challenge *challenge, const char **why)
{
	if (!auth_magic(in + SR_CHALLENGE_OFF_MAGIC, why))
		return -1;
	memcpy(challenge->nonce, in + SR_CHALLENGE_OFF_NONCE, SR_NONCE_LEN);
	return 0;
}

void
sr_response_encode(const struct sr_response *response,
    uint8_t out[SR_RESPONSE_LEN])
{
	memcpy(out + SR_RESPONSE_OFF_MAGIC, SR_AUTH_MAGIC, SR_MAGIC_LEN);
	memcpy(out + SR_RESPONSE_OFF_NONCE, response->nonce, SR_NONCE_LEN);
	memcpy(out + SR_RESPONSE_OFF_MAC, response->mac, SR_MAC_LEN);
}

int
sr_response_decode(const uint8_t in[SR_RESPONSE_LEN],
    struct sr_response *response, const char **why)
{
	if (!auth_magic(in + SR_RESPONSE_OFF_MAGIC, why))
		return -1;
	memcpy(response->nonce, in + SR_RESPONSE_OFF_NONCE, SR_NONCE_LEN);
	memcpy(response->mac, in + SR_RESPONSE_OFF_MAC, SR_MAC_LEN);
	return 0;
}

void
sr_proof_encode(const struct sr_proof *proof, uint8_t out[SR_PROOF_LEN])
{
	memcpy(out + SR_PROOF_OFF_MAGIC, SR_AUTH_MAGIC, SR_MAGIC_LEN);
	memcpy(out + SR_PROOF_OFF_MAC, proof->mac, SR_MAC_LEN);
}

int
sr_proof_decode(const uint8_t in[SR_PROOF_LEN], struct sr_proof *proof,
    const char **why)
{
	if (!auth_magic(in + SR_PROOF_OFF_MAGIC, why))
		return -1;
	memcpy(proof->mac, in + SR_PROOF_OFF_MAC, SR_MAC_LEN);
	return 0;
}

void
sr_result_encode(enum sr_auth_result result, uint8_t out[SR_RESULT_LEN])
{
	memcpy(out + SR_RESULT_OFF_MAGIC, SR_AUTH_MAGIC, SR_MAGIC_LEN);
	sr_put_u32le(out + SR_RESULT_OFF_STATUS, (uint32_t)result);
}

int
sr_result_decode(const uint8_t in[SR_RESULT_LEN], enum sr_auth_result *result)
{
	uint32_t status;

	if (!auth_magic(in + SR_RESULT_OFF_MAGIC, NULL))
		return -1;
	status = sr_get_u32le(in + SR_RESULT_OFF_STATUS);
	if (status >= SR_RESULT_COUNT)
		return -1;
	*result = (enum sr_auth_result)status;
	return 0;
}

void
sr_frame_encode(const struct sr_frame *frame, uint8_t out[SR_FRAME_HEADER_LEN])
{
	out[SR_FRAME_OFF_KIND] = frame->kind;
	out[SR_FRAME_OFF_DTYPE] = frame->dtype;
	out[SR_FRAME_OFF_OP] = frame->op;
	out[SR_FRAME_OFF_RESERVED] = 0;
	sr_put_u32le(out + SR_FRAME_OFF_STEP, frame->step);
	sr_put_u64le(out + SR_FRAME_OFF_SEQ, frame->seq);
	sr_put_u64le(out + SR_FRAME_OFF_LENGTH, frame->length);
}

void
sr_frame_decode(const uint8_t in[SR_FRAME_HEADER_LEN], struct sr_frame *frame)
{
	frame->kind = in[SR_FRAME_OFF_KIND];
	frame->dtype = in[SR_FRAME_OFF_DTYPE];
	frame->op = in[SR_FRAME_OFF_OP];
	frame->step = sr_get_u32le(in + SR_FRAME_OFF_STEP);
	frame->seq = sr_get_u64le(in + SR_FRAME_OFF_SEQ);
	frame->length = sr_get_u64le(in + SR_FRAME_OFF_LENGTH);
	frame->group = 0;
	frame->piece = 0;
}

void
sr_frame_encode_wide(const struct sr_frame *frame,
    uint8_t out[SR_FRAME_WIDE_LEN])
{
	sr_frame_encode(frame, out);
	sr_put_u32le(out + SR_FRAME_OFF_GROUP, frame->group);
	sr_put_u32le(out + SR_FRAME_OFF_PIECE, frame->piece);
}

void
sr_frame_decode_wide(const uint8_t in[SR_FRAME_WIDE_LEN],
    struct sr_frame *frame)
{
	sr_frame_decode(in, frame);
	frame->group = sr_get_u32le(in + SR_FRAME_OFF_GROUP);
	frame->piece = sr_get_u32le(in + SR_FRAME_OFF_PIECE);
}

static const char *
kind_name(uint8_t kind)
{
	static const char *const names[] = { "kind 0", "allreduce",
		"allgather", "broadcast", "barrier", "shift", "link", "abort",
		"goodbye", "heartbeat" };

	return kind <= SR_FRAME_KIND_MAX ? names[kind] : "unknown kind";
}

void
sr_frame_describe(const struct sr_frame *frame, char *buf, size_t size)
{
	char group[40] = "";

	if (frame->group != 0 && frame->piece != 0)
		snprintf(group, sizeof(group), " group %u piece %u",
		    frame->group, frame->piece);
	else if (frame->group != 0)
		snprintf(group, sizeof(group), " group %u", frame->group);
	else if (frame->piece != 0)
		snprintf(group, sizeof(group), " piece %u", frame->piece);
	if (frame->kind == SR_FRAME_ALLREDUCE && frame->dtype < SR_DTYPE_COUNT &&
	    frame->op < SR_OP_COUNT)
		snprintf(buf, size, "allreduce %s %s step %u seq %llu%s of %llu "
		    "bytes", sr_op_name(frame->op), sr_dtype_name(frame->dtype),
		    frame->step, (unsigned long long)frame->seq, group,
		    (unsigned long long)frame->length);
	else if (frame->kind <= SR_FRAME_KIND_MAX)
		snprintf(buf, size, "%s step %u seq %llu%s of %llu bytes",
		    kind_name(frame->kind), frame->step,
		    (unsigned long long)frame->seq, group,
		    (unsigned long long)frame->length);
	else
		snprintf(buf, size, "a frame of unknown kind %u (not a silvic frame)",
		    frame->kind);
}

enum sr_frame_check
sr_frame_check(const struct sr_frame *got, const struct sr_frame *want)
{
	if (got->kind == SR_FRAME_ABORT)
		return got->length >= SR_ABORT_FIXED &&
		    got->length <= SR_ABORT_MAX ?
		    SR_FRAME_IS_ABORT : SR_FRAME_BAD_ABORT;
	if (got->kind == SR_FRAME_HEARTBEAT && got->length == 0 &&
	    got->dtype == 0 && got->op == 0)
		return SR_FRAME_IS_HEARTBEAT;
	/* A goodbye where a collective's frame was due: the peer ran fewer
	 * collectives and is closing. */
	if (got->kind == SR_FRAME_BYE && want->kind != SR_FRAME_BYE &&
	    got->step == 0 && got->length == SR_GOODBYE_LEN)
		return SR_FRAME_IS_BYE;
	if (got->kind != want->kind || got->dtype != want->dtype ||
	    got->op != want->op || got->step != want->step ||
	    got->seq != want->seq || got->length != want->length ||
	    got->group != want->group)
		return SR_FRAME_MISMATCH;
	return SR_FRAME_MATCH;
}

/* The frozen wire codes of the failure classes, by sr_code. */
static const struct {
	enum sr_code code;
	uint32_t wire;
} wire_codes[] = {
	{ SR_ECONFIG, SR_WIRE_CONFIG },
	{ SR_ENOMEM, SR_WIRE_NOMEM },
	{ SR_EBIND, SR_WIRE_BIND },
	{ SR_ECONNECT, SR_WIRE_CONNECT },
	{ SR_EREJECTED, SR_WIRE_REJECTED },
	{ SR_EHANDSHAKE, SR_WIRE_HANDSHAKE },
	{ SR_EAUTH, SR_WIRE_AUTH },
	{ SR_ETIMEOUT, SR_WIRE_TIMEOUT },
	{ SR_EPEER_CLOSED, SR_WIRE_PEER_CLOSED },
	{ SR_EIO, SR_WIRE_IO },
	{ SR_EOUT_OF_STEP, SR_WIRE_OUT_OF_STEP },
	{ SR_EABORTED, SR_WIRE_ABORTED },
	{ SR_EINTERRUPTED, SR_WIRE_INTERRUPTED },
	{ SR_EBROKEN, SR_WIRE_BROKEN },
	{ SR_ECORRUPT, SR_WIRE_CORRUPT },
	{ SR_ECHECK, SR_WIRE_CHECK },
};

uint32_t
sr_wire_from_code(enum sr_code code)
{
	for (size_t i = 0; i < sizeof(wire_codes) / sizeof(wire_codes[0]); i++)
		if (wire_codes[i].code == code)
			return wire_codes[i].wire;
	return SR_WIRE_ABORTED;
}

enum sr_code
sr_wire_to_code(uint32_t wire)
{
	for (size_t i = 0; i < sizeof(wire_codes) / sizeof(wire_codes[0]); i++)
		if (wire_codes[i].wire == wire)
			return wire_codes[i].code;
	return SR_EABORTED;
}

size_t
sr_abort_encode(const struct sr_abort *abort, uint8_t *out, size_t size)
{
	size_t n = strnlen(abort->reason, SR_ABORT_REASON_MAX);

	if (size < SR_ABORT_FIXED)
		return 0;
	if (n > size - SR_ABORT_FIXED)
		n = size - SR_ABORT_FIXED;
	sr_put_u32le(out + SR_ABORT_OFF_ORIGIN, abort->origin);
	sr_put_u32le(out + SR_ABORT_OFF_CLASS, abort->wire_class);
	sr_put_u32le(out + SR_ABORT_OFF_CULPRIT, abort->culprit);
	memcpy(out + SR_ABORT_OFF_REASON, abort->reason, n);
	return SR_ABORT_FIXED + n;
}

int
sr_abort_decode(const uint8_t *in, size_t len, struct sr_abort *abort)
{
	size_t n, i;

	if (len < SR_ABORT_FIXED)
		return -1;
	abort->origin = sr_get_u32le(in + SR_ABORT_OFF_ORIGIN);
	abort->wire_class = sr_get_u32le(in + SR_ABORT_OFF_CLASS);
	abort->culprit = sr_get_u32le(in + SR_ABORT_OFF_CULPRIT);
	n = len - SR_ABORT_FIXED;
	if (n > SR_ABORT_REASON_MAX)
		n = SR_ABORT_REASON_MAX;
	/* The reason is printed later: keep it to printable ASCII. */
	for (i = 0; i < n; i++) {
		uint8_t c = in[SR_ABORT_OFF_REASON + i];

		abort->reason[i] = c >= 0x20 && c < 0x7f ? (char)c : '?';
	}
	abort->reason[n] = '\0';
	return 0;
}

void
sr_goodbye_encode(const struct sr_goodbye *bye, uint8_t out[SR_GOODBYE_LEN])
{
	sr_put_u64le(out + SR_GOODBYE_OFF_COLLECTIVES, bye->collectives);
	sr_put_u32le(out + SR_GOODBYE_OFF_RANK, bye->rank);
	sr_put_u32le(out + SR_GOODBYE_OFF_WORLD, bye->world);
}

void
sr_goodbye_decode(const uint8_t in[SR_GOODBYE_LEN], struct sr_goodbye *bye)
{
	bye->collectives = sr_get_u64le(in + SR_GOODBYE_OFF_COLLECTIVES);
	bye->rank = sr_get_u32le(in + SR_GOODBYE_OFF_RANK);
	bye->world = sr_get_u32le(in + SR_GOODBYE_OFF_WORLD);
}

struct sr_frame
sr_heartbeat_frame(uint32_t waits_on, uint64_t seq)
{
	struct sr_frame frame = { .kind = SR_FRAME_HEARTBEAT,
		.step = waits_on, .seq = seq };

	return frame;
}

void
sr_heartbeat_encode(uint32_t waits_on, uint64_t seq,
    uint8_t out[SR_FRAME_HEADER_LEN])
{
	struct sr_frame frame = sr_heartbeat_frame(waits_on, seq);

	sr_frame_encode(&frame, out);
}
