/*
 * fuzz_wire.c - the wire codecs of src/wire.c against arbitrary bytes:
 * the hello and its judgement, the verdict, the authentication messages,
 * the frame header with its check and description, the abort payload
 * with its failure class, and the goodbye payload.
 *
 * The first byte picks the codec (mod 5); the rest is what a peer sent:
 *	0  hello: 32 bytes [, token u64, world u32, expected rank u32,
 *	   acceptor rank u32]	(the acceptor's side, all little-endian);
 *	   a decoded hello re-encodes to the same 32 bytes
 *	1  a handshake answer: its first 16 bytes as a verdict, 12 as an
 *	   authentication result, 40 as a challenge, 72 as a response and
 *	   40 as a proof (each where there are that many); a decoded
 *	   message re-encodes to the same bytes
 *	2  frame header: 24 bytes [, a second header as the expected one
 *	   [, one byte: the size of the description buffer]]
 *	3  abort payload: any length
 *	4  goodbye payload: 16 bytes, then the heartbeat header built from
 *	   its first 12
 * Each piece is copied into a heap block of its exact size so that a read
 * past it is caught.  Must not touch anything but its arguments.
 */
#include <string.h>

#include "fuzz.h"
#include "wire.h"
#include "crc32c.h"

/* A heap copy of exactly n bytes (one byte when n is 0). */
static uint8_t *
exact(const uint8_t *p, size_t n)
{
	uint8_t *copy = malloc(n ? n : 1);

	FUZZ_CHECK(copy != NULL);
	if (n)
		memcpy(copy, p, n);
	return copy;
}

static uint32_t
u32_at(const uint8_t *p)
{
	return (uint32_t)p[0] | (uint32_t)p[1] << 8 | (uint32_t)p[2] << 16 |
	    (uint32_t)p[3] << 24;
}

static uint64_t
u64_at(const uint8_t *p)
{
	return (uint64_t)u32_at(p) | (uint64_t)u32_at(p + 4) << 32;
}

static void
fuzz_verdict_roundtrip(enum sr_verdict verdict, uint32_t acceptor)
{
	uint8_t *bytes = malloc(SR_VERDICT_LEN);
	enum sr_verdict got = SR_VERDICT_COUNT;
	uint32_t rank = 0;

	FUZZ_CHECK(bytes != NULL);
	sr_verdict_encode(verdict, acceptor, bytes);
	FUZZ_CHECK(sr_verdict_decode(bytes, &got, &rank) == 0);
	FUZZ_CHECK(got == verdict && rank == acceptor);
	free(bytes);
}

static void
fuzz_hello(const uint8_t *data, size_t size)
{
	uint8_t *in, *out;
	struct sr_hello hello;
	const char *why = NULL;
	uint32_t bom, world, expected;
	uint64_t token;
	enum sr_verdict verdict, want;
	int rc;

	if (size < SR_HELLO_LEN)
		return;
	in = exact(data, SR_HELLO_LEN);
	memcpy(&bom, in + SR_HELLO_OFF_BOM, 4);
	rc = sr_hello_decode(in, &hello, &why);
	FUZZ_CHECK(rc == 0 || rc == -1);
	FUZZ_CHECK((rc == 0) == (memcmp(in, SR_MAGIC, SR_MAGIC_LEN) == 0 &&
	    bom == SR_BYTE_ORDER_MARK));
	if (rc != 0) {
		FUZZ_CHECK(why != NULL && why[0] != '\0');
		free(in);
		return;
	}
	FUZZ_CHECK(hello.rank == u32_at(in + SR_HELLO_OFF_RANK));
	FUZZ_CHECK(hello.world == u32_at(in + SR_HELLO_OFF_WORLD));
	FUZZ_CHECK(hello.flags == u32_at(in + SR_HELLO_OFF_FLAGS));
	FUZZ_CHECK(hello.token == u64_at(in + SR_HELLO_OFF_TOKEN));
	/* The streams field: 1 .. 16 streams, a stream 0 .. 15, from the
	 * flags' second byte alone. */
	FUZZ_CHECK(sr_hello_streams(hello.flags) ==
	    ((in[SR_HELLO_OFF_FLAGS + 1] & 0xf) + 1u));
	FUZZ_CHECK(sr_hello_stream(hello.flags) ==
	    (uint32_t)(in[SR_HELLO_OFF_FLAGS + 1] >> 4));
	out = malloc(SR_HELLO_LEN);
	FUZZ_CHECK(out != NULL);
	sr_hello_encode(&hello, out);
	FUZZ_CHECK(memcmp(out, in, SR_HELLO_LEN) == 0);
	free(out);
	free(in);

	FUZZ_CHECK(sr_hello_judge(&hello, hello.token, hello.world,
	    hello.rank) == ((hello.flags & ~SR_HELLO_KNOWN) ?
	    SR_VERDICT_UNKNOWN_FLAGS : SR_VERDICT_ACCEPTED));
	if (size < SR_HELLO_LEN + 20)
		return;
	/* The acceptor's expectations: token first, then world, then rank. */
	token = u64_at(data + SR_HELLO_LEN);
	world = u32_at(data + SR_HELLO_LEN + 8);
	expected = u32_at(data + SR_HELLO_LEN + 12);
	verdict = sr_hello_judge(&hello, token, world, expected);
	want = hello.token != token ? SR_VERDICT_WRONG_TOKEN :
	    hello.world != world ? SR_VERDICT_WRONG_WORLD :
	    hello.rank != expected ? SR_VERDICT_WRONG_RANK :
	    (hello.flags & ~SR_HELLO_KNOWN) ? SR_VERDICT_UNKNOWN_FLAGS :
	    SR_VERDICT_ACCEPTED;
	FUZZ_CHECK(verdict == want);
	FUZZ_CHECK(strcmp(sr_verdict_reason(verdict), "unknown verdict") != 0);
	fuzz_verdict_roundtrip(verdict, u32_at(data + SR_HELLO_LEN + 16));
}

/* The acceptor's answer to a proof: only a known status is taken, and
 * a decoded result re-encodes to the same bytes. */
static void
fuzz_result(const uint8_t *data, size_t size)
{
	uint8_t *in, *out;
	enum sr_auth_result result;
	int rc;

	if (size < SR_RESULT_LEN)
		return;
	in = exact(data, SR_RESULT_LEN);
	rc = sr_result_decode(in, &result);
	FUZZ_CHECK((rc == 0) == (memcmp(in, SR_AUTH_MAGIC, SR_MAGIC_LEN) == 0 &&
	    u32_at(in + SR_RESULT_OFF_STATUS) < SR_RESULT_COUNT));
	if (rc == 0) {
		FUZZ_CHECK((uint32_t)result ==
		    u32_at(in + SR_RESULT_OFF_STATUS));
		out = malloc(SR_RESULT_LEN);
		FUZZ_CHECK(out != NULL);
		sr_result_encode(result, out);
		FUZZ_CHECK(memcmp(out, in, SR_RESULT_LEN) == 0);
		free(out);
	}
	free(in);
}

/*
 * The authentication messages: each is taken only with the right magic,
 * its fields are the bytes at their offsets, and it re-encodes to the
 * same bytes.  Each decoder sees a heap block of exactly its length.
 */
static void
fuzz_auth(const uint8_t *data, size_t size)
{
	struct sr_challenge challenge;
	struct sr_response response;
	struct sr_proof proof;
	const char *why;
	uint8_t *in, *out;
	bool magic;
	int rc;

	if (size < SR_CHALLENGE_LEN)
		return;
	magic = memcmp(data, SR_AUTH_MAGIC, SR_MAGIC_LEN) == 0;
	out = malloc(SR_RESPONSE_LEN);
	FUZZ_CHECK(out != NULL);

	in = exact(data, SR_CHALLENGE_LEN);
	why = NULL;
	rc = sr_challenge_decode(in, &challenge, &why);
	FUZZ_CHECK((rc == 0) == magic && (rc == 0 || why != NULL));
	if (rc == 0) {
		FUZZ_CHECK(memcmp(challenge.nonce, in + SR_CHALLENGE_OFF_NONCE,
		    SR_NONCE_LEN) == 0);
		sr_challenge_encode(&challenge, out);
		FUZZ_CHECK(memcmp(out, in, SR_CHALLENGE_LEN) == 0);
	}
	free(in);

	in = exact(data, SR_PROOF_LEN);
	why = NULL;
	rc = sr_proof_decode(in, &proof, &why);
	FUZZ_CHECK((rc == 0) == magic && (rc == 0 || why != NULL));
	if (rc == 0) {
		FUZZ_CHECK(memcmp(proof.mac, in + SR_PROOF_OFF_MAC,
		    SR_MAC_LEN) == 0);
		sr_proof_encode(&proof, out);
		FUZZ_CHECK(memcmp(out, in, SR_PROOF_LEN) == 0);
	}
	free(in);

	if (size >= SR_RESPONSE_LEN) {
		in = exact(data, SR_RESPONSE_LEN);
		why = NULL;
		rc = sr_response_decode(in, &response, &why);
		FUZZ_CHECK((rc == 0) == magic && (rc == 0 || why != NULL));
		if (rc == 0) {
			FUZZ_CHECK(memcmp(response.nonce,
			    in + SR_RESPONSE_OFF_NONCE, SR_NONCE_LEN) == 0);
			FUZZ_CHECK(memcmp(response.mac,
			    in + SR_RESPONSE_OFF_MAC, SR_MAC_LEN) == 0);
			sr_response_encode(&response, out);
			FUZZ_CHECK(memcmp(out, in, SR_RESPONSE_LEN) == 0);
		}
		free(in);
	}
	free(out);
}

static void
fuzz_verdict(const uint8_t *data, size_t size)
{
	uint8_t *in, *out;
	enum sr_verdict verdict;
	uint32_t acceptor;
	int rc;

	if (size < SR_VERDICT_LEN)
		return;
	in = exact(data, SR_VERDICT_LEN);
	rc = sr_verdict_decode(in, &verdict, &acceptor);
	FUZZ_CHECK(rc == 0 || rc == -1);
	FUZZ_CHECK((rc == 0) == (memcmp(in, SR_MAGIC, SR_MAGIC_LEN) == 0 &&
	    u32_at(in + SR_VERDICT_OFF_STATUS) < SR_VERDICT_COUNT));
	if (rc == 0) {
		FUZZ_CHECK((uint32_t)verdict ==
		    u32_at(in + SR_VERDICT_OFF_STATUS));
		FUZZ_CHECK(acceptor == u32_at(in + SR_VERDICT_OFF_RANK));
		FUZZ_CHECK(strcmp(sr_verdict_reason(verdict),
		    "unknown verdict") != 0);
		out = malloc(SR_VERDICT_LEN);
		FUZZ_CHECK(out != NULL);
		sr_verdict_encode(verdict, acceptor, out);
		FUZZ_CHECK(memcmp(out, in, SR_VERDICT_LEN) == 0);
		free(out);
	}
	free(in);
}

static bool
same_frame(const struct sr_frame *a, const struct sr_frame *b)
{
	return a->kind == b->kind && a->dtype == b->dtype && a->op == b->op &&
	    a->step == b->step && a->seq == b->seq && a->length == b->length &&
	    a->group == b->group;
}

/*
 * What every caller of sr_frame_check relies on: an abort is only taken
 * with a length that fits the abort buffer, a match really is the
 * expected header (so the payload length is the one this rank sized its
 * buffer for), and a header equal to the expected one matches.
 */
static void
check_against(const struct sr_frame *got, const struct sr_frame *want)
{
	enum sr_frame_check c = sr_frame_check(got, want);

	FUZZ_CHECK(c <= SR_FRAME_BAD_ABORT);
	switch (c) {
	case SR_FRAME_MATCH:
		FUZZ_CHECK(same_frame(got, want));
		FUZZ_CHECK(got->kind != SR_FRAME_ABORT);
		break;
	case SR_FRAME_IS_ABORT:
		FUZZ_CHECK(got->kind == SR_FRAME_ABORT);
		FUZZ_CHECK(got->length >= SR_ABORT_FIXED &&
		    got->length <= SR_ABORT_MAX);
		break;
	case SR_FRAME_BAD_ABORT:
		FUZZ_CHECK(got->kind == SR_FRAME_ABORT);
		FUZZ_CHECK(got->length < SR_ABORT_FIXED ||
		    got->length > SR_ABORT_MAX);
		break;
	case SR_FRAME_IS_BYE:
		/* A goodbye where another collective's frame was due. */
		FUZZ_CHECK(got->kind == SR_FRAME_BYE && got->step == 0 &&
		    got->length == SR_GOODBYE_LEN && want->kind != SR_FRAME_BYE);
		break;
	case SR_FRAME_IS_HEARTBEAT:
		/* Header only: nothing of what follows is taken for it. */
		FUZZ_CHECK(got->kind == SR_FRAME_HEARTBEAT &&
		    got->length == 0 && got->dtype == 0 && got->op == 0);
		break;
	case SR_FRAME_MISMATCH:
		FUZZ_CHECK(!same_frame(got, want));
		break;
	}
	if (same_frame(got, want) && got->kind != SR_FRAME_ABORT &&
	    got->kind != SR_FRAME_HEARTBEAT)
		FUZZ_CHECK(c == SR_FRAME_MATCH);
}

static void
fuzz_frame(const uint8_t *data, size_t size)
{
	/* What a rank in its 8th collective expects at step 3. */
	static const struct sr_frame fixed = { .kind = SR_FRAME_ALLREDUCE,
		.dtype = SR_F64, .op = SR_SUM, .step = 3, .seq = 7,
		.length = 4096 };
	struct sr_frame frame, want;
	char full[256], *small;
	uint8_t *in, *out;
	size_t n;

	if (size < SR_FRAME_HEADER_LEN)
		return;
	in = exact(data, SR_FRAME_HEADER_LEN);
	sr_frame_decode(in, &frame);
	FUZZ_CHECK(frame.kind == in[SR_FRAME_OFF_KIND] &&
	    frame.dtype == in[SR_FRAME_OFF_DTYPE] &&
	    frame.op == in[SR_FRAME_OFF_OP]);
	FUZZ_CHECK(frame.step == u32_at(in + SR_FRAME_OFF_STEP));
	FUZZ_CHECK(frame.seq == u64_at(in + SR_FRAME_OFF_SEQ));
	FUZZ_CHECK(frame.length == u64_at(in + SR_FRAME_OFF_LENGTH));
	out = malloc(SR_FRAME_HEADER_LEN);
	FUZZ_CHECK(out != NULL);
	sr_frame_encode(&frame, out);
	/* The reserved byte is ignored on decode and zeroed on encode. */
	FUZZ_CHECK(memcmp(out, in, SR_FRAME_OFF_RESERVED) == 0 &&
	    out[SR_FRAME_OFF_RESERVED] == 0);
	FUZZ_CHECK(memcmp(out + SR_FRAME_OFF_STEP, in + SR_FRAME_OFF_STEP,
	    SR_FRAME_HEADER_LEN - SR_FRAME_OFF_STEP) == 0);
	free(out);
	free(in);

	if (size >= SR_FRAME_WIDE_LEN) {
		struct sr_frame wide;

		in = exact(data, SR_FRAME_WIDE_LEN);
		sr_frame_decode_wide(in, &wide);
		FUZZ_CHECK(wide.group == u32_at(in + SR_FRAME_OFF_GROUP));
		FUZZ_CHECK(wide.piece == u32_at(in + SR_FRAME_OFF_PIECE));
		FUZZ_CHECK(wide.kind == frame.kind && wide.seq == frame.seq &&
		    wide.length == frame.length && wide.step == frame.step);
		out = malloc(SR_FRAME_WIDE_LEN);
		FUZZ_CHECK(out != NULL);
		sr_frame_encode_wide(&wide, out);
		/* Every field from the step on comes back, the group and the
		 * piece (several streams' place of a frame) too. */
		FUZZ_CHECK(memcmp(out + SR_FRAME_OFF_STEP, in + SR_FRAME_OFF_STEP,
		    SR_FRAME_WIDE_LEN - SR_FRAME_OFF_STEP) == 0);
		free(out);
		free(in);
		check_against(&wide, &fixed);
		check_against(&wide, &frame);
	}
	check_against(&frame, &fixed);
	check_against(&frame, &frame);
	if (size >= 2 * SR_FRAME_HEADER_LEN) {
		in = exact(data + SR_FRAME_HEADER_LEN, SR_FRAME_HEADER_LEN);
		sr_frame_decode(in, &want);
		free(in);
		check_against(&frame, &want);
		check_against(&want, &frame);
	}

	sr_frame_describe(&frame, full, sizeof(full));
	FUZZ_CHECK(memchr(full, '\0', sizeof(full)) != NULL);
	FUZZ_CHECK(strlen(full) > 0 && strlen(full) < 200);
	/* A short buffer gets a NUL-terminated prefix, nothing past it. */
	n = size > 2 * SR_FRAME_HEADER_LEN ? 1 + data[2 * SR_FRAME_HEADER_LEN] %
	    sizeof(full) : 1 + strlen(full) / 2;
	small = malloc(n);
	FUZZ_CHECK(small != NULL);
	sr_frame_describe(&frame, small, n);
	FUZZ_CHECK(strlen(small) < n);
	FUZZ_CHECK(strncmp(small, full, strlen(small)) == 0);
	FUZZ_CHECK(strlen(small) == (strlen(full) < n ? strlen(full) : n - 1));
	free(small);
}

static void
fuzz_abort(const uint8_t *data, size_t size)
{
	uint8_t *in = exact(data, size), *out, *cut;
	struct sr_abort got;
	size_t reason, n, room, i;
	int rc;

	rc = sr_abort_decode(in, size, &got);
	FUZZ_CHECK(rc == 0 || rc == -1);
	FUZZ_CHECK((rc == 0) == (size >= SR_ABORT_FIXED));
	if (rc != 0) {
		free(in);
		return;
	}
	FUZZ_CHECK(got.origin == u32_at(in + SR_ABORT_OFF_ORIGIN));
	FUZZ_CHECK(got.wire_class == u32_at(in + SR_ABORT_OFF_CLASS));
	/* Any class reads as a code that maps back to it, or as "aborted". */
	FUZZ_CHECK(sr_wire_from_code(sr_wire_to_code(got.wire_class)) ==
	    got.wire_class || sr_wire_to_code(got.wire_class) == SR_EABORTED);
	FUZZ_CHECK((unsigned)sr_wire_to_code(got.wire_class) < SR_CODE_COUNT);
	FUZZ_CHECK(got.culprit == u32_at(in + SR_ABORT_OFF_CULPRIT));
	reason = size - SR_ABORT_FIXED;
	if (reason > SR_ABORT_REASON_MAX)
		reason = SR_ABORT_REASON_MAX;
	FUZZ_CHECK(strlen(got.reason) == reason);
	for (i = 0; i < reason; i++) {
		uint8_t c = in[SR_ABORT_OFF_REASON + i];

		FUZZ_CHECK(got.reason[i] == (c >= 0x20 && c < 0x7f ?
		    (char)c : '?'));
	}

	out = malloc(SR_ABORT_MAX);
	FUZZ_CHECK(out != NULL);
	n = sr_abort_encode(&got, out, SR_ABORT_MAX);
	FUZZ_CHECK(n == SR_ABORT_FIXED + reason);
	FUZZ_CHECK(memcmp(out, in, SR_ABORT_FIXED) == 0);
	FUZZ_CHECK(memcmp(out + SR_ABORT_FIXED, got.reason, reason) == 0);
	/* Into a smaller buffer: nothing past it, a prefix of the above. */
	room = (size_t)got.origin % (SR_ABORT_MAX + 2);
	cut = malloc(room ? room : 1);
	FUZZ_CHECK(cut != NULL);
	i = sr_abort_encode(&got, cut, room);
	FUZZ_CHECK(room < SR_ABORT_FIXED ? i == 0 :
	    i == (n < room ? n : room) && memcmp(cut, out, i) == 0);
	free(cut);
	free(out);
	free(in);
}

static void
fuzz_goodbye(const uint8_t *data, size_t size)
{
	uint8_t *in, *out;
	struct sr_goodbye bye;
	struct sr_frame frame;

	if (size < SR_GOODBYE_LEN)
		return;
	in = exact(data, SR_GOODBYE_LEN);
	sr_goodbye_decode(in, &bye);
	FUZZ_CHECK(bye.collectives == u64_at(in + SR_GOODBYE_OFF_COLLECTIVES));
	FUZZ_CHECK(bye.rank == u32_at(in + SR_GOODBYE_OFF_RANK));
	FUZZ_CHECK(bye.world == u32_at(in + SR_GOODBYE_OFF_WORLD));
	out = malloc(SR_GOODBYE_LEN);
	FUZZ_CHECK(out != NULL);
	sr_goodbye_encode(&bye, out);
	FUZZ_CHECK(memcmp(out, in, SR_GOODBYE_LEN) == 0);
	free(out);
	/* A heartbeat is a header that decodes as one and is taken as one
	 * against any expected frame. */
	out = malloc(SR_FRAME_HEADER_LEN);
	FUZZ_CHECK(out != NULL);
	sr_heartbeat_encode(bye.rank, bye.collectives, out);
	sr_frame_decode(out, &frame);
	FUZZ_CHECK(frame.kind == SR_FRAME_HEARTBEAT && frame.step == bye.rank &&
	    frame.seq == bye.collectives && frame.length == 0);
	check_against(&frame, &frame);
	FUZZ_CHECK(sr_frame_check(&frame, &frame) == SR_FRAME_IS_HEARTBEAT);
	free(out);
	free(in);
}

int
LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
	if (size < 1)
		return 0;
	switch (data[0] % 5) {
	case 0:
		fuzz_hello(data + 1, size - 1);
		break;
	case 1:
		fuzz_verdict(data + 1, size - 1);
		fuzz_result(data + 1, size - 1);
		fuzz_auth(data + 1, size - 1);
		break;
	case 2:
		fuzz_frame(data + 1, size - 1);
		break;
	case 4:
		fuzz_goodbye(data + 1, size - 1);
		break;
	default:
		fuzz_abort(data + 1, size - 1);
		break;
	}
	return 0;
}
