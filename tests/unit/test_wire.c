/*
 * test_wire.c - the byte codecs of wire.c: the handshake hello and verdict
 * (byte for byte the silvic-net seed), the authentication messages, frame
 * headers, frame checks and abort payloads.  Pure: no descriptors.
 */
#include <stdint.h>
#include <string.h>

#include "check.h"
#include "wire.h"
#include "crc32c.h"
#include "auth.h"

#define TWO_63 (UINT64_C(1) << 63)

static const char *const wrong_magic_why =
    "not a silvic rank (wrong magic or protocol version)";
static const char *const byte_order_why =
    "its byte order differs from this rank's";

static void
le_helpers_write_least_significant_byte_first(void)
{
	uint8_t b[8];
	static const uint8_t u32[4] = { 0x78, 0x56, 0x34, 0x12 };
	static const uint8_t u64[8] = { 0xef, 0xcd, 0xab, 0x89, 0x67, 0x45,
		0x23, 0x01 };

	sr_put_u32le(b, 0x12345678u);
	CHECK(memcmp(b, u32, 4) == 0);
	CHECK(sr_get_u32le(u32) == 0x12345678u);
	sr_put_u64le(b, UINT64_C(0x0123456789abcdef));
	CHECK(memcmp(b, u64, 8) == 0);
	CHECK(sr_get_u64le(u64) == UINT64_C(0x0123456789abcdef));
	sr_put_u64le(b, UINT64_MAX);
	CHECK(sr_get_u64le(b) == UINT64_MAX);
}

/* ------------------------------------------------------------------ hello */

static void
hello_round_trips(void)
{
	static const struct sr_hello cases[] = {
		{ 0, 1, 0, 0 },
		{ 0, 2, 1, 0 },
		{ 1, 2, 42, 0 },
		{ 3, 5, UINT64_C(0x0123456789abcdef), 0 },
		{ 15, 16, TWO_63, 0 },
		{ 0, UINT32_MAX, UINT64_MAX, 0 },
		{ UINT32_MAX, UINT32_MAX, UINT64_MAX, 0 },
		{ UINT32_MAX - 1, 0, 0, 0 },
	};

	for (size_t i = 0; i < sizeof(cases) / sizeof(cases[0]); i++) {
		uint8_t bytes[SR_HELLO_LEN];
		struct sr_hello got = { 7, 7, 7, 7 };
		const char *why = NULL;

		sr_hello_encode(&cases[i], bytes);
		CHECKF(sr_hello_decode(bytes, &got, &why) == 0, "case %zu: %s",
		    i, why ? why : "");
		CHECKF(got.rank == cases[i].rank, "case %zu: rank %u", i,
		    got.rank);
		CHECKF(got.world == cases[i].world, "case %zu: world %u", i,
		    got.world);
		CHECKF(got.token == cases[i].token, "case %zu: token %llx", i,
		    (unsigned long long)got.token);
	}
}

static void
hello_layout_matches_seed(void)
{
	/* The byte-order mark is written natively: 04 03 02 01 here on a
	 * little-endian host, 01 02 03 04 on a big-endian one. */
	static const uint8_t expected[SR_HELLO_LEN] = {
		's', 'i', 'l', 'v', 'i', 'c', 'n', 0x01,
#if __BYTE_ORDER__ == __ORDER_LITTLE_ENDIAN__
		0x04, 0x03, 0x02, 0x01,
#else
		0x01, 0x02, 0x03, 0x04,
#endif
		0x44, 0x33, 0x22, 0x11,		/* rank */
		0x88, 0x77, 0x66, 0x55,		/* world */
		0x00, 0x00, 0x00, 0x00,		/* reserved */
		0x08, 0x07, 0x06, 0x05, 0x04, 0x03, 0x02, 0x01	/* token */
	};
	struct sr_hello hello = { 0x11223344u, 0x55667788u,
		UINT64_C(0x0102030405060708), 0 };
	uint8_t bytes[SR_HELLO_LEN];

	/* Garbage first, so a reserved byte left unwritten shows. */
	memset(bytes, 0xaa, sizeof(bytes));
	sr_hello_encode(&hello, bytes);
	for (int i = 0; i < SR_HELLO_LEN; i++)
		CHECKF(bytes[i] == expected[i], "byte %d is 0x%02x, not 0x%02x",
		    i, bytes[i], expected[i]);
}

static void
hello_rejects_wrong_magic(void)
{
	struct sr_hello hello = { 1, 2, 3, 0 }, got;
	uint8_t bytes[SR_HELLO_LEN];
	const char *why = NULL;

	sr_hello_encode(&hello, bytes);
	bytes[0] = 'S';
	CHECK(sr_hello_decode(bytes, &got, &why) == -1);
	CHECK(why != NULL && strcmp(why, wrong_magic_why) == 0);

	/* An HTTP request hitting the port is a stray, not a rank. */
	memcpy(bytes, "GET / HT", 8);
	why = NULL;
	CHECK(sr_hello_decode(bytes, &got, &why) == -1);
	CHECK(why != NULL && strcmp(why, wrong_magic_why) == 0);
}

static void
hello_rejects_other_protocol_version(void)
{
	struct sr_hello hello = { 1, 2, 3, 0 }, got;
	uint8_t bytes[SR_HELLO_LEN];
	const char *why = NULL;

	sr_hello_encode(&hello, bytes);
	bytes[7] = 0x02;
	CHECK(sr_hello_decode(bytes, &got, &why) == -1);
	CHECK(why != NULL && strcmp(why, wrong_magic_why) == 0);
	bytes[7] = 0x00;
	why = NULL;
	CHECK(sr_hello_decode(bytes, &got, &why) == -1);
	CHECK(why != NULL && strcmp(why, wrong_magic_why) == 0);
}

static void
hello_rejects_swapped_byte_order(void)
{
	struct sr_hello hello = { 1, 2, 3, 0 }, got;
	uint8_t bytes[SR_HELLO_LEN], t;
	const char *why = NULL;

	sr_hello_encode(&hello, bytes);
	/* What a peer of the other endianness writes. */
	t = bytes[8], bytes[8] = bytes[11], bytes[11] = t;
	t = bytes[9], bytes[9] = bytes[10], bytes[10] = t;
	CHECK(sr_hello_decode(bytes, &got, &why) == -1);
	CHECK(why != NULL && strcmp(why, byte_order_why) == 0);

	/* Wrong magic is reported first when both are wrong. */
	bytes[0] = 'x';
	why = NULL;
	CHECK(sr_hello_decode(bytes, &got, &why) == -1);
	CHECK(why != NULL && strcmp(why, wrong_magic_why) == 0);
}

static void
hello_judge_checks_token_then_world_then_rank(void)
{
	const uint64_t token = UINT64_C(0xfeedface);
	const uint32_t world = 4, expected_rank = 2;

	/* Every combination of (token, world, rank) right or wrong. */
	for (int mask = 0; mask < 8; mask++) {
		bool token_ok = mask & 1, world_ok = mask & 2, rank_ok = mask & 4;
		struct sr_hello hello = {
			.rank = rank_ok ? expected_rank : expected_rank + 1,
			.world = world_ok ? world : world + 1,
			.token = token_ok ? token : token ^ 1,
		};
		enum sr_verdict want;

		if (!token_ok)
			want = SR_VERDICT_WRONG_TOKEN;
		else if (!world_ok)
			want = SR_VERDICT_WRONG_WORLD;
		else if (!rank_ok)
			want = SR_VERDICT_WRONG_RANK;
		else
			want = SR_VERDICT_ACCEPTED;
		CHECKF(sr_hello_judge(&hello, token, world, expected_rank) ==
		    want, "token %s world %s rank %s: got %d, want %d",
		    token_ok ? "ok" : "wrong", world_ok ? "ok" : "wrong",
		    rank_ok ? "ok" : "wrong",
		    (int)sr_hello_judge(&hello, token, world, expected_rank),
		    (int)want);
	}
}

/* ---------------------------------------------------------------- verdict */

static void
verdict_round_trips_every_status(void)
{
	static const uint32_t ranks[] = { 0, 1, 7, UINT32_MAX };

	for (int v = 0; v < SR_VERDICT_COUNT; v++)
		for (size_t i = 0; i < sizeof(ranks) / sizeof(ranks[0]); i++) {
			uint8_t bytes[SR_VERDICT_LEN];
			enum sr_verdict got = (enum sr_verdict)99;
			uint32_t rank = 12345;

			sr_verdict_encode((enum sr_verdict)v, ranks[i], bytes);
			CHECK(memcmp(bytes, "silvicn\x01", 8) == 0);
			CHECK(sr_get_u32le(bytes + 8) == (uint32_t)v);
			CHECK(sr_get_u32le(bytes + 12) == ranks[i]);
			CHECKF(sr_verdict_decode(bytes, &got, &rank) == 0,
			    "status %d rank %u", v, ranks[i]);
			CHECK(got == (enum sr_verdict)v);
			CHECK(rank == ranks[i]);
		}
}

static void
verdict_layout_matches_seed(void)
{
	static const uint8_t expected[SR_VERDICT_LEN] = {
		's', 'i', 'l', 'v', 'i', 'c', 'n', 0x01,
		0x02, 0x00, 0x00, 0x00,		/* status: wrong world */
		0x04, 0x03, 0x02, 0x01,		/* acceptor's rank */
	};
	uint8_t bytes[SR_VERDICT_LEN];

	memset(bytes, 0xaa, sizeof(bytes));
	sr_verdict_encode(SR_VERDICT_WRONG_WORLD, 0x01020304u, bytes);
	CHECK(memcmp(bytes, expected, sizeof(expected)) == 0);
}

static void
verdict_rejects_bad_magic(void)
{
	uint8_t bytes[SR_VERDICT_LEN];
	enum sr_verdict got;
	uint32_t rank;

	sr_verdict_encode(SR_VERDICT_ACCEPTED, 3, bytes);
	bytes[7] = 0x02;
	CHECK(sr_verdict_decode(bytes, &got, &rank) == -1);
	sr_verdict_encode(SR_VERDICT_ACCEPTED, 3, bytes);
	bytes[0] = 0;
	CHECK(sr_verdict_decode(bytes, &got, &rank) == -1);
}

static void
verdict_rejects_unknown_status(void)
{
	/* 4 and 5 are the authentication verdicts, 6 the integrity one, 7
	 * undefined flags, 8 a rank that leaves, 9 a ring/mesh mix, 10-17
	 * another stream count. */
	static const uint32_t statuses[] = { 18, 256, 0x01000000u,
		UINT32_MAX };
	uint8_t bytes[SR_VERDICT_LEN];

	for (size_t i = 0; i < sizeof(statuses) / sizeof(statuses[0]); i++) {
		enum sr_verdict got = SR_VERDICT_ACCEPTED;
		uint32_t rank = 0;

		sr_verdict_encode(SR_VERDICT_ACCEPTED, 3, bytes);
		sr_put_u32le(bytes + 8, statuses[i]);
		CHECKF(sr_verdict_decode(bytes, &got, &rank) == -1,
		    "status %u accepted", statuses[i]);
	}
}

/* With a key the hello carries SR_HELLO_AUTH in the seed's reserved field;
 * without one that field stays zero, byte-identical to the seed. */
static void
hello_auth_flag_round_trips(void)
{
	struct sr_hello hello = { 1, 2, 3, SR_HELLO_AUTH }, got;
	uint8_t bytes[SR_HELLO_LEN];
	const char *why;

	sr_hello_encode(&hello, bytes);
	CHECK(sr_get_u32le(bytes + 20) == SR_HELLO_AUTH);
	CHECK(sr_hello_decode(bytes, &got, &why) == 0);
	CHECK(got.flags == SR_HELLO_AUTH);
	hello.flags = 0;
	sr_hello_encode(&hello, bytes);
	CHECK(sr_get_u32le(bytes + 20) == 0);
}

/* Bits 2 to 31 of the flags are undefined: each alone or beside the
 * defined ones is refused, after token, world and rank. */
static void
hello_judge_refuses_undefined_flag_bits(void)
{
	static const uint32_t known[] = { 0, SR_HELLO_AUTH, SR_HELLO_CRC,
		SR_HELLO_AUTH | SR_HELLO_CRC, SR_HELLO_MESH,
		SR_HELLO_MESH | SR_HELLO_AUTH | SR_HELLO_CRC,
		SR_HELLO_MESH | SR_HELLO_PROBE };
	struct sr_hello hello = { 2, 4, 77, 0 };

	for (size_t k = 0; k < sizeof(known) / sizeof(known[0]); k++) {
		hello.flags = known[k];
		CHECKF(sr_hello_judge(&hello, 77, 4, 2) == SR_VERDICT_ACCEPTED,
		    "flags 0x%x", known[k]);
		for (int bit = 4; bit < 32; bit++) {
			/* Bits 8-15 are the streams field. */
			if (bit >= 8 && bit < 16)
				continue;
			hello.flags = known[k] | UINT32_C(1) << bit;
			CHECKF(sr_hello_judge(&hello, 77, 4, 2) ==
			    SR_VERDICT_UNKNOWN_FLAGS, "flags 0x%x", hello.flags);
		}
	}
	hello.flags = UINT32_MAX;
	CHECK(sr_hello_judge(&hello, 77, 4, 2) == SR_VERDICT_UNKNOWN_FLAGS);
	CHECK(sr_hello_judge(&hello, 78, 4, 2) == SR_VERDICT_WRONG_TOKEN);
	CHECK(sr_hello_judge(&hello, 77, 5, 2) == SR_VERDICT_WRONG_WORLD);
	CHECK(sr_hello_judge(&hello, 77, 4, 1) == SR_VERDICT_WRONG_RANK);
}

/* Wire codes never change meaning; each has its own reason. */
static void
verdict_codes_are_frozen(void)
{
	static const uint8_t unknown_flags[SR_VERDICT_LEN] = {
		's', 'i', 'l', 'v', 'i', 'c', 'n', 0x01,
		0x07, 0x00, 0x00, 0x00,		/* status: undefined flags */
		0x01, 0x00, 0x00, 0x00,		/* acceptor's rank */
	};
	uint8_t bytes[SR_VERDICT_LEN];

	CHECK(SR_VERDICT_AUTH_REQUIRED == 4 && SR_VERDICT_NO_KEY == 5);
	CHECK(SR_VERDICT_INTEGRITY == 6 && SR_VERDICT_UNKNOWN_FLAGS == 7);
	CHECK(SR_VERDICT_NEXT_AUTH == 8 && SR_VERDICT_MESH == 9 &&
	    SR_VERDICT_STREAMS == 10 && SR_VERDICT_STREAMS_LAST == 17 &&
	    SR_VERDICT_COUNT == 18);
	CHECK(SR_HELLO_MESH == 0x4u && SR_HELLO_PROBE == 0x8u &&
	    SR_HELLO_KNOWN == 0xff0fu);
	sr_verdict_encode(SR_VERDICT_UNKNOWN_FLAGS, 1, bytes);
	CHECK(memcmp(bytes, unknown_flags, sizeof(bytes)) == 0);
	for (int v = 0; v < SR_VERDICT_COUNT; v++) {
		CHECK(strcmp(sr_verdict_reason((enum sr_verdict)v),
		    "unknown verdict") != 0);
		/* The streams codes differ in the acceptor's count alone. */
		for (int w = 0; w < v && w < SR_VERDICT_STREAMS; w++)
			CHECK(strcmp(sr_verdict_reason((enum sr_verdict)v),
			    sr_verdict_reason((enum sr_verdict)w)) != 0);
	}
	CHECK(strstr(sr_verdict_reason(SR_VERDICT_STREAMS_LAST),
	    "--streams") != NULL);
	CHECK(strstr(sr_verdict_reason(SR_VERDICT_UNKNOWN_FLAGS),
	    "flag bits") != NULL);
	CHECK(strstr(sr_verdict_reason(SR_VERDICT_NEXT_AUTH),
	    "authentication failed on its link to its next rank") != NULL);
	CHECK(strstr(sr_verdict_reason(SR_VERDICT_MESH), "mesh") != NULL);
}

/* --------------------------------------------------------- auth result */

static void
result_round_trips_and_layout(void)
{
	static const uint8_t leaving[SR_RESULT_LEN] = {
		's', 'i', 'l', 'v', 'i', 'c', 'a', 0x01,
		0x02, 0x00, 0x00, 0x00,
	};
	uint8_t bytes[SR_RESULT_LEN];

	CHECK(SR_RESULT_ACCEPTED == 0 && SR_RESULT_REJECTED == 1 &&
	    SR_RESULT_NEXT_AUTH == 2 && SR_RESULT_COUNT == 3);
	for (int r = 0; r < SR_RESULT_COUNT; r++) {
		enum sr_auth_result got = (enum sr_auth_result)99;

		memset(bytes, 0xaa, sizeof(bytes));
		sr_result_encode((enum sr_auth_result)r, bytes);
		CHECK(memcmp(bytes, SR_AUTH_MAGIC, SR_MAGIC_LEN) == 0);
		CHECK(sr_get_u32le(bytes + 8) == (uint32_t)r);
		CHECKF(sr_result_decode(bytes, &got) == 0, "status %d", r);
		CHECK(got == (enum sr_auth_result)r);
	}
	sr_result_encode(SR_RESULT_NEXT_AUTH, bytes);
	CHECK(memcmp(bytes, leaving, sizeof(leaving)) == 0);
}

static void
result_rejects_bad_magic_and_unknown_status(void)
{
	static const uint32_t statuses[] = { 3, 256, UINT32_MAX };
	uint8_t bytes[SR_RESULT_LEN];
	enum sr_auth_result got;

	sr_result_encode(SR_RESULT_ACCEPTED, bytes);
	bytes[6] = 'n';		/* the hello's magic is not a result's */
	CHECK(sr_result_decode(bytes, &got) == -1);
	for (size_t i = 0; i < sizeof(statuses) / sizeof(statuses[0]); i++) {
		sr_result_encode(SR_RESULT_ACCEPTED, bytes);
		sr_put_u32le(bytes + 8, statuses[i]);
		CHECKF(sr_result_decode(bytes, &got) == -1, "status %u",
		    statuses[i]);
	}
}

/* Fills n bytes with first, first + 1, ... */
static void
counting(uint8_t *p, size_t n, uint8_t first)
{
	for (size_t i = 0; i < n; i++)
		p[i] = (uint8_t)(first + i);
}

/* Each authentication message: its magic, then each field at its
 * offset, and back. */
static void
auth_messages_round_trip_at_their_offsets(void)
{
	struct sr_challenge challenge, challenge_got;
	struct sr_response response, response_got;
	struct sr_proof proof, proof_got;
	uint8_t ch[SR_CHALLENGE_LEN], re[SR_RESPONSE_LEN], pr[SR_PROOF_LEN];
	const char *why = NULL;

	counting(challenge.nonce, SR_NONCE_LEN, 0x10);
	counting(response.nonce, SR_NONCE_LEN, 0x20);
	counting(response.mac, SR_MAC_LEN, 0xa0);
	counting(proof.mac, SR_MAC_LEN, 0xc0);
	memset(ch, 0xaa, sizeof(ch));
	memset(re, 0xaa, sizeof(re));
	memset(pr, 0xaa, sizeof(pr));
	sr_challenge_encode(&challenge, ch);
	sr_response_encode(&response, re);
	sr_proof_encode(&proof, pr);

	CHECK(memcmp(ch + SR_CHALLENGE_OFF_MAGIC, SR_AUTH_MAGIC,
	    SR_MAGIC_LEN) == 0);
	CHECK(memcmp(ch + SR_CHALLENGE_OFF_NONCE, challenge.nonce,
	    SR_NONCE_LEN) == 0);
	CHECK(memcmp(re + SR_RESPONSE_OFF_MAGIC, SR_AUTH_MAGIC,
	    SR_MAGIC_LEN) == 0);
	CHECK(memcmp(re + SR_RESPONSE_OFF_NONCE, response.nonce,
	    SR_NONCE_LEN) == 0);
	CHECK(memcmp(re + SR_RESPONSE_OFF_MAC, response.mac, SR_MAC_LEN) == 0);
	CHECK(memcmp(pr + SR_PROOF_OFF_MAGIC, SR_AUTH_MAGIC, SR_MAGIC_LEN) == 0);
	CHECK(memcmp(pr + SR_PROOF_OFF_MAC, proof.mac, SR_MAC_LEN) == 0);

	memset(&challenge_got, 0, sizeof(challenge_got));
	memset(&response_got, 0, sizeof(response_got));
	memset(&proof_got, 0, sizeof(proof_got));
	CHECK(sr_challenge_decode(ch, &challenge_got, &why) == 0);
	CHECK(sr_response_decode(re, &response_got, &why) == 0);
	CHECK(sr_proof_decode(pr, &proof_got, &why) == 0);
	CHECK(memcmp(&challenge_got, &challenge, sizeof(challenge)) == 0);
	CHECK(memcmp(&response_got, &response, sizeof(response)) == 0);
	CHECK(memcmp(&proof_got, &proof, sizeof(proof)) == 0);
}

/* Any one byte of the magic changed, the protocol version included, and
 * the message is refused with a reason; so is the hello's magic, which
 * shares every byte but the seventh. */
static void
auth_messages_reject_every_bad_magic_byte(void)
{
	struct sr_challenge challenge = { { 1 } }, c;
	struct sr_response response = { { 2 }, { 3 } }, r;
	struct sr_proof proof = { { 4 } }, p;
	uint8_t ch[SR_CHALLENGE_LEN], re[SR_RESPONSE_LEN], pr[SR_PROOF_LEN];
	uint8_t rs[SR_RESULT_LEN];
	enum sr_auth_result result;
	const char *why;

	for (int i = 0; i < SR_MAGIC_LEN; i++) {
		sr_challenge_encode(&challenge, ch);
		sr_response_encode(&response, re);
		sr_proof_encode(&proof, pr);
		sr_result_encode(SR_RESULT_ACCEPTED, rs);
		ch[i] ^= 0x01;
		re[i] ^= 0x20;
		pr[i] ^= 0x80;
		rs[i] ^= 0xff;
		why = NULL;
		CHECKF(sr_challenge_decode(ch, &c, &why) == -1 && why != NULL &&
		    strcmp(why, "not an authentication message") == 0,
		    "challenge, byte %d", i);
		why = NULL;
		CHECKF(sr_response_decode(re, &r, &why) == -1 && why != NULL &&
		    strcmp(why, "not an authentication message") == 0,
		    "response, byte %d", i);
		why = NULL;
		CHECKF(sr_proof_decode(pr, &p, &why) == -1 && why != NULL &&
		    strcmp(why, "not an authentication message") == 0,
		    "proof, byte %d", i);
		CHECKF(sr_result_decode(rs, &result) == -1, "result, byte %d",
		    i);
	}
	/* The hello's magic where an authentication message is due. */
	sr_challenge_encode(&challenge, ch);
	memcpy(ch, SR_MAGIC, SR_MAGIC_LEN);
	CHECK(sr_challenge_decode(ch, &c, &why) == -1);
	sr_response_encode(&response, re);
	memcpy(re, SR_MAGIC, SR_MAGIC_LEN);
	CHECK(sr_response_decode(re, &r, &why) == -1);
	sr_proof_encode(&proof, pr);
	memcpy(pr, SR_MAGIC, SR_MAGIC_LEN);
	CHECK(sr_proof_decode(pr, &p, &why) == -1);
}

/*
 * The bytes every message had before the codec named its offsets and
 * took over the authentication messages from handshake.c (recorded from
 * that code): a layout change fails here first.
 */
static void
every_message_keeps_its_bytes(void)
{
	static const uint8_t hello[] = {
		's', 'i', 'l', 'v', 'i', 'c', 'n', 0x01,
#if __BYTE_ORDER__ == __ORDER_LITTLE_ENDIAN__
		0x04, 0x03, 0x02, 0x01,
#else
		0x01, 0x02, 0x03, 0x04,
#endif
		0x03, 0x00, 0x00, 0x00, 0x05, 0x00, 0x00, 0x00,
		0x03, 0x00, 0x00, 0x00,
		0xef, 0xcd, 0xab, 0x89, 0x67, 0x45, 0x23, 0x01,
	};
	static const uint8_t verdict[] = {
		's', 'i', 'l', 'v', 'i', 'c', 'n', 0x01,
		0x08, 0x00, 0x00, 0x00, 0x07, 0x00, 0x00, 0x00,
	};
	static const uint8_t challenge[] = {
		's', 'i', 'l', 'v', 'i', 'c', 'a', 0x01,
		0x00, 0x01, 0x02, 0x03, 0x04, 0x05, 0x06, 0x07,
		0x08, 0x09, 0x0a, 0x0b, 0x0c, 0x0d, 0x0e, 0x0f,
		0x10, 0x11, 0x12, 0x13, 0x14, 0x15, 0x16, 0x17,
		0x18, 0x19, 0x1a, 0x1b, 0x1c, 0x1d, 0x1e, 0x1f,
	};
	static const uint8_t response[] = {
		's', 'i', 'l', 'v', 'i', 'c', 'a', 0x01,
		0x40, 0x41, 0x42, 0x43, 0x44, 0x45, 0x46, 0x47,
		0x48, 0x49, 0x4a, 0x4b, 0x4c, 0x4d, 0x4e, 0x4f,
		0x50, 0x51, 0x52, 0x53, 0x54, 0x55, 0x56, 0x57,
		0x58, 0x59, 0x5a, 0x5b, 0x5c, 0x5d, 0x5e, 0x5f,
		0x80, 0x81, 0x82, 0x83, 0x84, 0x85, 0x86, 0x87,
		0x88, 0x89, 0x8a, 0x8b, 0x8c, 0x8d, 0x8e, 0x8f,
		0x90, 0x91, 0x92, 0x93, 0x94, 0x95, 0x96, 0x97,
		0x98, 0x99, 0x9a, 0x9b, 0x9c, 0x9d, 0x9e, 0x9f,
	};
	static const uint8_t proof[] = {
		's', 'i', 'l', 'v', 'i', 'c', 'a', 0x01,
		0xc0, 0xc1, 0xc2, 0xc3, 0xc4, 0xc5, 0xc6, 0xc7,
		0xc8, 0xc9, 0xca, 0xcb, 0xcc, 0xcd, 0xce, 0xcf,
		0xd0, 0xd1, 0xd2, 0xd3, 0xd4, 0xd5, 0xd6, 0xd7,
		0xd8, 0xd9, 0xda, 0xdb, 0xdc, 0xdd, 0xde, 0xdf,
	};
	static const uint8_t result[] = {
		's', 'i', 'l', 'v', 'i', 'c', 'a', 0x01,
		0x01, 0x00, 0x00, 0x00,
	};
	static const uint8_t frame[] = {
		0x01, 0x02, 0x01, 0x00, 0x03, 0x00, 0x00, 0x00,
		0x07, 0x00, 0x00, 0x00, 0x00, 0x00, 0x00, 0x00,
		0x00, 0x10, 0x00, 0x00, 0x00, 0x00, 0x00, 0x00,
	};
	static const uint8_t abort_payload[] = {
		0x02, 0x00, 0x00, 0x00, 0x07, 0x00, 0x00, 0x00,
		0x01, 0x00, 0x00, 0x00, 'n', 'o',
	};
	static const uint8_t goodbye[] = {
		0x05, 0x00, 0x00, 0x00, 0x00, 0x00, 0x00, 0x00,
		0x02, 0x00, 0x00, 0x00, 0x04, 0x00, 0x00, 0x00,
	};
	static const uint8_t heartbeat[] = {
		0x09, 0x00, 0x00, 0x00, 0x01, 0x00, 0x00, 0x00,
		0x09, 0x00, 0x00, 0x00, 0x00, 0x00, 0x00, 0x00,
		0x00, 0x00, 0x00, 0x00, 0x00, 0x00, 0x00, 0x00,
	};
	struct sr_hello h = { 3, 5, UINT64_C(0x0123456789abcdef),
		SR_HELLO_AUTH | SR_HELLO_CRC };
	struct sr_challenge c;
	struct sr_response r;
	struct sr_proof p;
	struct sr_frame f = { SR_FRAME_ALLREDUCE, SR_I64, SR_MAX, 3, 7, 4096, 0, 0 };
	struct sr_abort a = { 2, SR_WIRE_AUTH, 1, "no" };
	struct sr_goodbye g = { 5, 2, 4 };
	uint8_t b[SR_ABORT_MAX];

	CHECK(sizeof(hello) == SR_HELLO_LEN &&
	    sizeof(verdict) == SR_VERDICT_LEN &&
	    sizeof(challenge) == SR_CHALLENGE_LEN &&
	    sizeof(response) == SR_RESPONSE_LEN &&
	    sizeof(proof) == SR_PROOF_LEN && sizeof(result) == SR_RESULT_LEN &&
	    sizeof(frame) == SR_FRAME_HEADER_LEN &&
	    sizeof(goodbye) == SR_GOODBYE_LEN &&
	    sizeof(heartbeat) == SR_FRAME_HEADER_LEN);
	sr_hello_encode(&h, b);
	CHECK(memcmp(b, hello, sizeof(hello)) == 0);
	sr_verdict_encode(SR_VERDICT_NEXT_AUTH, 7, b);
	CHECK(memcmp(b, verdict, sizeof(verdict)) == 0);
	counting(c.nonce, SR_NONCE_LEN, 0x00);
	sr_challenge_encode(&c, b);
	CHECK(memcmp(b, challenge, sizeof(challenge)) == 0);
	counting(r.nonce, SR_NONCE_LEN, 0x40);
	counting(r.mac, SR_MAC_LEN, 0x80);
	sr_response_encode(&r, b);
	CHECK(memcmp(b, response, sizeof(response)) == 0);
	counting(p.mac, SR_MAC_LEN, 0xc0);
	sr_proof_encode(&p, b);
	CHECK(memcmp(b, proof, sizeof(proof)) == 0);
	sr_result_encode(SR_RESULT_REJECTED, b);
	CHECK(memcmp(b, result, sizeof(result)) == 0);
	sr_frame_encode(&f, b);
	CHECK(memcmp(b, frame, sizeof(frame)) == 0);
	CHECK(sr_abort_encode(&a, b, sizeof(b)) == sizeof(abort_payload));
	CHECK(memcmp(b, abort_payload, sizeof(abort_payload)) == 0);
	sr_goodbye_encode(&g, b);
	CHECK(memcmp(b, goodbye, sizeof(goodbye)) == 0);
	sr_heartbeat_encode(1, 9, b);
	CHECK(memcmp(b, heartbeat, sizeof(heartbeat)) == 0);
}

static void
verdict_reasons_match_seed(void)
{
	CHECK(strcmp(sr_verdict_reason(SR_VERDICT_ACCEPTED), "accepted") == 0);
	CHECK(strcmp(sr_verdict_reason(SR_VERDICT_WRONG_TOKEN),
	    "job token mismatch") == 0);
	CHECK(strcmp(sr_verdict_reason(SR_VERDICT_WRONG_WORLD),
	    "world size mismatch") == 0);
	CHECK(strcmp(sr_verdict_reason(SR_VERDICT_WRONG_RANK),
	    "rank mismatch") == 0);
}

/* ----------------------------------------------------------------- frames */

static bool
frame_equal(const struct sr_frame *a, const struct sr_frame *b)
{
	return a->kind == b->kind && a->dtype == b->dtype && a->op == b->op &&
	    a->step == b->step && a->seq == b->seq && a->length == b->length &&
	    a->group == b->group && a->piece == b->piece;
}

static void
frame_round_trips(void)
{
	static const struct sr_frame cases[] = {
		{ SR_FRAME_ALLREDUCE, SR_F64, SR_SUM, 0, 1, 0, 0, 0 },
		{ SR_FRAME_ALLREDUCE, SR_U32, SR_PROD, 29, 7, 4096, 0, 0 },
		{ SR_FRAME_BROADCAST, 0, 0, 3, 2, TWO_63, 0, 0 },
		{ SR_FRAME_ALLGATHER, 0, 0, 1, UINT64_MAX, UINT64_MAX, 0, 0 },
		{ SR_FRAME_ABORT, 0, 0, 0, 0, SR_ABORT_MAX, 0, 0 },
		{ SR_FRAME_BYE, 0, 0, 0, 0, 0, 0, 0 },
		{ 255, 255, 255, UINT32_MAX, UINT64_MAX, UINT64_MAX, 0, 0 },
		{ 200, 1, 2, 0x80000000u, TWO_63, TWO_63 - 1, 0, 0 },
	};

	for (size_t i = 0; i < sizeof(cases) / sizeof(cases[0]); i++) {
		uint8_t bytes[SR_FRAME_HEADER_LEN];
		struct sr_frame got;

		memset(&got, 0x5a, sizeof(got));
		sr_frame_encode(&cases[i], bytes);
		CHECKF(bytes[3] == 0, "case %zu: reserved byte 0x%02x", i,
		    bytes[3]);
		sr_frame_decode(bytes, &got);
		CHECKF(frame_equal(&got, &cases[i]),
		    "case %zu: kind %u dtype %u op %u step %u seq %llu "
		    "length %llu", i, got.kind, got.dtype, got.op, got.step,
		    (unsigned long long)got.seq, (unsigned long long)got.length);
	}
}

/* A mesh's wide header: the plain one's 24 bytes, then the group and a
 * reserved word (zero on encode, ignored on decode); the plain decoder
 * reads group 0, and a group makes two frames differ. */
static void
wide_frame_round_trips_and_carries_the_group(void)
{
	struct sr_frame f = { SR_FRAME_ALLREDUCE, SR_I64, SR_MAX, 3, 7, 4096,
		0xa1b2c3d4u, 0 }, got, plain;
	uint8_t wide[SR_FRAME_WIDE_LEN], narrow[SR_FRAME_HEADER_LEN];

	memset(wide, 0x77, sizeof(wide));
	sr_frame_encode_wide(&f, wide);
	sr_frame_encode(&f, narrow);
	CHECK(memcmp(wide, narrow, SR_FRAME_HEADER_LEN) == 0);
	CHECK(wide[24] == 0xd4 && wide[25] == 0xc3 && wide[26] == 0xb2 &&
	    wide[27] == 0xa1);
	CHECK(wide[28] == 0 && wide[29] == 0 && wide[30] == 0 && wide[31] == 0);
	wide[30] = 0x55;
	sr_frame_decode_wide(wide, &got);
	CHECK(got.piece == 0x550000u);
	got.piece = 0;
	CHECK(frame_equal(&got, &f));
	sr_frame_decode(wide, &plain);
	CHECK(plain.group == 0);
	CHECK(sr_frame_check(&plain, &f) == SR_FRAME_MISMATCH);
	CHECK(sr_frame_check(&got, &f) == SR_FRAME_MATCH);
}

/* With several streams the wide header's last word is the piece: written
 * little-endian at offset 28, read back, and not part of the match (the
 * engine places a piece by it). */
static void
wide_frame_carries_the_piece(void)
{
	struct sr_frame f = { SR_FRAME_ALLGATHER, 0, 0, 1, 3, 262144, 0,
		0x01020304u }, got, other;
	uint8_t wide[SR_FRAME_WIDE_LEN];
	char buf[160];

	sr_frame_encode_wide(&f, wide);
	CHECK(wide[28] == 0x04 && wide[29] == 0x03 && wide[30] == 0x02 &&
	    wide[31] == 0x01);
	sr_frame_decode_wide(wide, &got);
	CHECK(frame_equal(&got, &f));
	other = f;
	other.piece = 0;
	CHECK(sr_frame_check(&got, &other) == SR_FRAME_MATCH);
	sr_frame_decode(wide, &got);
	CHECK(got.piece == 0);
	f.piece = 7;
	sr_frame_describe(&f, buf, sizeof(buf));
	CHECKF(strcmp(buf, "allgather step 1 seq 3 piece 7 of 262144 bytes") ==
	    0, "\"%s\"", buf);
}

/* The hello's streams field: K - 1 in bits 8-11, the stream in 12-15,
 * nothing at all for one stream. */
static void
hello_streams_field(void)
{
	struct sr_hello h = { 1, 2, 9, 0 }, back;
	uint8_t bytes[SR_HELLO_LEN];
	const char *why;

	CHECK(SR_HELLO_STREAMS(1, 0) == 0);
	CHECK(SR_HELLO_STREAMS(8, 7) == 0x7700u);
	CHECK(SR_HELLO_STREAMS(4, 2) == 0x2300u);
	for (uint32_t k = 1; k <= SR_STREAMS_MAX; k++)
		for (uint32_t s = 0; s < k; s++) {
			h.flags = SR_HELLO_CRC | SR_HELLO_STREAMS(k, s);
			sr_hello_encode(&h, bytes);
			CHECK(sr_hello_decode(bytes, &back, &why) == 0);
			CHECK(sr_hello_streams(back.flags) == k &&
			    sr_hello_stream(back.flags) == s);
			CHECK(sr_hello_judge(&back, 9, 2, 1) ==
			    SR_VERDICT_ACCEPTED);
		}
}

static void
frame_layout_is_little_endian(void)
{
	static const uint8_t expected[SR_FRAME_HEADER_LEN] = {
		0x01, 0x03, 0x03, 0x00,			/* kind dtype op rsvd */
		0x04, 0x03, 0x02, 0x01,			/* step */
		0x0d, 0x0c, 0x0b, 0x0a, 0x09, 0x08, 0x07, 0x06,	/* seq */
		0x00, 0x00, 0x00, 0x00, 0x00, 0x00, 0x00, 0x80,	/* length */
	};
	struct sr_frame frame = { SR_FRAME_ALLREDUCE, SR_I32, SR_PROD,
		0x01020304u, UINT64_C(0x060708090a0b0c0d), TWO_63, 0, 0 };
	uint8_t bytes[SR_FRAME_HEADER_LEN];

	memset(bytes, 0xaa, sizeof(bytes));
	sr_frame_encode(&frame, bytes);
	for (int i = 0; i < SR_FRAME_HEADER_LEN; i++)
		CHECKF(bytes[i] == expected[i], "byte %d is 0x%02x, not 0x%02x",
		    i, bytes[i], expected[i]);
}

static const struct sr_frame want_frame = { SR_FRAME_ALLREDUCE, SR_I64,
	SR_MAX, 3, 9, 4096, 0, 0 };

static void
frame_check_match(void)
{
	struct sr_frame got = want_frame;

	CHECK(sr_frame_check(&got, &want_frame) == SR_FRAME_MATCH);
	CHECK(sr_frame_check(&want_frame, &want_frame) == SR_FRAME_MATCH);
}

static void
frame_check_each_field_differing_is_mismatch(void)
{
	struct sr_frame got;

	got = want_frame, got.kind = SR_FRAME_ALLGATHER;
	CHECK(sr_frame_check(&got, &want_frame) == SR_FRAME_MISMATCH);
	got = want_frame, got.kind = 200;
	CHECK(sr_frame_check(&got, &want_frame) == SR_FRAME_MISMATCH);
	got = want_frame, got.dtype = SR_F64;
	CHECK(sr_frame_check(&got, &want_frame) == SR_FRAME_MISMATCH);
	got = want_frame, got.op = SR_SUM;
	CHECK(sr_frame_check(&got, &want_frame) == SR_FRAME_MISMATCH);
	got = want_frame, got.step = 4;
	CHECK(sr_frame_check(&got, &want_frame) == SR_FRAME_MISMATCH);
	got = want_frame, got.seq = 8;
	CHECK(sr_frame_check(&got, &want_frame) == SR_FRAME_MISMATCH);
	got = want_frame, got.seq = 9 + (UINT64_C(1) << 32);
	CHECK(sr_frame_check(&got, &want_frame) == SR_FRAME_MISMATCH);
	got = want_frame, got.length = 4095;
	CHECK(sr_frame_check(&got, &want_frame) == SR_FRAME_MISMATCH);
	got = want_frame, got.length = TWO_63;
	CHECK(sr_frame_check(&got, &want_frame) == SR_FRAME_MISMATCH);
	got = want_frame, got.length = UINT64_MAX;
	CHECK(sr_frame_check(&got, &want_frame) == SR_FRAME_MISMATCH);
}

static void
frame_check_abort_in_range(void)
{
	static const uint64_t lengths[] = { SR_ABORT_FIXED, SR_ABORT_FIXED + 1,
		100, SR_ABORT_MAX - 1, SR_ABORT_MAX };

	for (size_t i = 0; i < sizeof(lengths) / sizeof(lengths[0]); i++) {
		struct sr_frame got = { .kind = SR_FRAME_ABORT, .step = 77,
			.seq = 1234, .length = lengths[i] };

		/* An abort interrupts any collective: the other fields do not
		 * matter. */
		CHECKF(sr_frame_check(&got, &want_frame) == SR_FRAME_IS_ABORT,
		    "length %llu", (unsigned long long)lengths[i]);
	}
}

static void
frame_check_abort_of_absurd_length(void)
{
	static const uint64_t lengths[] = { 0, 1, SR_ABORT_FIXED - 1,
		SR_ABORT_MAX + 1, 4096, TWO_63, UINT64_MAX };

	for (size_t i = 0; i < sizeof(lengths) / sizeof(lengths[0]); i++) {
		struct sr_frame got = { .kind = SR_FRAME_ABORT,
			.length = lengths[i] };

		CHECKF(sr_frame_check(&got, &want_frame) == SR_FRAME_BAD_ABORT,
		    "length %llu", (unsigned long long)lengths[i]);
	}
}

static void
frame_check_bye(void)
{
	struct sr_frame got = { .kind = SR_FRAME_BYE, .seq = 3,
		.length = SR_GOODBYE_LEN };
	struct sr_frame want_bye = got;

	/* A goodbye where a collective's frame was due: the peer closes. */
	CHECK(sr_frame_check(&got, &want_frame) == SR_FRAME_IS_BYE);
	/* Of another length, or a barrier step, it is garbage there. */
	got.length = 0;
	CHECK(sr_frame_check(&got, &want_frame) == SR_FRAME_MISMATCH);
	got.length = SR_GOODBYE_LEN + 1;
	CHECK(sr_frame_check(&got, &want_frame) == SR_FRAME_MISMATCH);
	got.length = SR_GOODBYE_LEN;
	got.step = 1;
	CHECK(sr_frame_check(&got, &want_frame) == SR_FRAME_MISMATCH);
	/* Where a goodbye is due, one of the same count matches; another
	 * count (a peer that ran more or fewer collectives) does not. */
	got = want_bye;
	CHECK(sr_frame_check(&got, &want_bye) == SR_FRAME_MATCH);
	got.seq = 4;
	CHECK(sr_frame_check(&got, &want_bye) == SR_FRAME_MISMATCH);
	/* A collective's frame where the goodbye is due: unread at close. */
	CHECK(sr_frame_check(&want_frame, &want_bye) == SR_FRAME_MISMATCH);
}

static void
frame_check_heartbeat(void)
{
	uint8_t bytes[SR_FRAME_HEADER_LEN];
	struct sr_frame got;

	/* Header only, taken in front of any frame expected. */
	sr_heartbeat_encode(4, 9, bytes);
	CHECK(bytes[0] == SR_FRAME_HEARTBEAT && bytes[1] == 0 &&
	    bytes[2] == 0 && bytes[3] == 0);
	CHECK(sr_get_u32le(bytes + 4) == 4);
	CHECK(sr_get_u64le(bytes + 8) == 9);
	CHECK(sr_get_u64le(bytes + 16) == 0);
	sr_frame_decode(bytes, &got);
	CHECK(sr_frame_check(&got, &want_frame) == SR_FRAME_IS_HEARTBEAT);
	sr_heartbeat_encode(SR_NO_RANK, 0, bytes);
	sr_frame_decode(bytes, &got);
	CHECK(got.step == SR_NO_RANK);
	CHECK(sr_frame_check(&got, &got) == SR_FRAME_IS_HEARTBEAT);
	/* One with a payload, or a dtype, is not a heartbeat. */
	got.length = 1;
	CHECK(sr_frame_check(&got, &want_frame) == SR_FRAME_MISMATCH);
	got.length = 0;
	got.dtype = 1;
	CHECK(sr_frame_check(&got, &want_frame) == SR_FRAME_MISMATCH);
}

/* ---------------------------------------------------------------- goodbye */

static void
goodbye_layout(void)
{
	struct sr_goodbye in = { .collectives = UINT64_C(0x0102030405060708),
		.rank = 0x0a0b0c0d, .world = 0x11121314 }, out;
	static const uint8_t want[SR_GOODBYE_LEN] = { 0x08, 0x07, 0x06, 0x05,
		0x04, 0x03, 0x02, 0x01, 0x0d, 0x0c, 0x0b, 0x0a, 0x14, 0x13,
		0x12, 0x11 };
	uint8_t bytes[SR_GOODBYE_LEN];

	sr_goodbye_encode(&in, bytes);
	CHECK(memcmp(bytes, want, sizeof(want)) == 0);
	memset(&out, 0x55, sizeof(out));
	sr_goodbye_decode(bytes, &out);
	CHECK(out.collectives == in.collectives && out.rank == in.rank &&
	    out.world == in.world);
}

/* ------------------------------------------------------------ wire codes */

static void
wire_codes_are_frozen(void)
{
	/* The numbers on the wire, whatever enum sr_code becomes. */
	static const struct { enum sr_code code; uint32_t wire; } table[] = {
		{ SR_ECONFIG, 1 }, { SR_ENOMEM, 2 }, { SR_EBIND, 3 },
		{ SR_ECONNECT, 4 }, { SR_EREJECTED, 5 }, { SR_EHANDSHAKE, 6 },
		{ SR_EAUTH, 7 }, { SR_ETIMEOUT, 8 }, { SR_EPEER_CLOSED, 9 },
		{ SR_EIO, 10 }, { SR_EOUT_OF_STEP, 11 }, { SR_EABORTED, 12 },
		{ SR_EINTERRUPTED, 13 }, { SR_EBROKEN, 14 },
		{ SR_ECORRUPT, 15 }, { SR_ECHECK, 16 } };

	for (size_t i = 0; i < sizeof(table) / sizeof(table[0]); i++) {
		CHECKF(sr_wire_from_code(table[i].code) == table[i].wire,
		    "%s", sr_code_name(table[i].code));
		CHECKF(sr_wire_to_code(table[i].wire) == table[i].code,
		    "wire %u", table[i].wire);
	}
	/* Every code but "ok" has one. */
	for (int c = 1; c < SR_CODE_COUNT; c++)
		CHECKF(sr_wire_to_code(sr_wire_from_code((enum sr_code)c)) ==
		    (enum sr_code)c, "%s", sr_code_name((enum sr_code)c));
	CHECK(sr_wire_to_code(0) == SR_EABORTED);
	CHECK(sr_wire_to_code(17) == SR_EABORTED);
	CHECK(sr_wire_to_code(UINT32_MAX) == SR_EABORTED);
}

static void
frame_describe_allreduce(void)
{
	struct sr_frame frame = { SR_FRAME_ALLREDUCE, SR_F64, SR_SUM, 3, 7,
		4096, 0, 0 };
	char buf[160];

	sr_frame_describe(&frame, buf, sizeof(buf));
	CHECKF(strcmp(buf, "allreduce sum f64 step 3 seq 7 of 4096 bytes") == 0,
	    "\"%s\"", buf);
	frame = (struct sr_frame){ SR_FRAME_ALLREDUCE, SR_U32, SR_PROD,
		UINT32_MAX, UINT64_MAX, UINT64_MAX, 0, 0 };
	sr_frame_describe(&frame, buf, sizeof(buf));
	CHECKF(strcmp(buf, "allreduce prod u32 step 4294967295 seq "
	    "18446744073709551615 of 18446744073709551615 bytes") == 0,
	    "\"%s\"", buf);
}

static void
frame_describe_other_kinds(void)
{
	struct sr_frame frame = { SR_FRAME_BROADCAST, 0, 0, 2, 5, 64, 0, 0 };
	char buf[160];

	sr_frame_describe(&frame, buf, sizeof(buf));
	CHECKF(strcmp(buf, "broadcast step 2 seq 5 of 64 bytes") == 0,
	    "\"%s\"", buf);
	frame.kind = SR_FRAME_BYE;
	frame.length = 0;
	sr_frame_describe(&frame, buf, sizeof(buf));
	CHECKF(strcmp(buf, "goodbye step 2 seq 5 of 0 bytes") == 0, "\"%s\"",
	    buf);
	/* An allreduce naming no known dtype is still described. */
	frame = (struct sr_frame){ SR_FRAME_ALLREDUCE, 99, SR_SUM, 0, 1, 8, 0, 0 };
	sr_frame_describe(&frame, buf, sizeof(buf));
	CHECKF(strcmp(buf, "allreduce step 0 seq 1 of 8 bytes") == 0, "\"%s\"",
	    buf);
}

static void
frame_describe_unknown_kind(void)
{
	struct sr_frame frame = { 200, 0, 0, 1, 2, 3, 0, 0 };
	char buf[160], tiny[8];

	sr_frame_describe(&frame, buf, sizeof(buf));
	CHECKF(strcmp(buf, "a frame of unknown kind 200 (not a silvic frame)") ==
	    0, "\"%s\"", buf);
	frame.kind = SR_FRAME_KIND_MAX + 1;
	sr_frame_describe(&frame, buf, sizeof(buf));
	CHECKF(strcmp(buf, "a frame of unknown kind 10 (not a silvic frame)") ==
	    0, "\"%s\"", buf);
	/* Truncated, still terminated. */
	sr_frame_describe(&frame, tiny, sizeof(tiny));
	CHECKF(strcmp(tiny, "a frame") == 0, "\"%s\"", tiny);
}

/* ---------------------------------------------------------------- aborts */

static void
abort_round_trips(void)
{
	struct sr_abort in, out;
	uint8_t bytes[SR_ABORT_MAX];
	size_t n;

	memset(&in, 0, sizeof(in));
	in.origin = 5;
	in.wire_class = SR_WIRE_TIMEOUT;
	in.culprit = SR_NO_RANK;
	snprintf(in.reason, sizeof(in.reason), "%s",
	    "timed out after 30s of silence waiting for rank 4");
	n = sr_abort_encode(&in, bytes, sizeof(bytes));
	CHECK(n == SR_ABORT_FIXED + strlen(in.reason));
	CHECK(sr_get_u32le(bytes) == 5);
	CHECK(sr_get_u32le(bytes + 4) == 8);	/* frozen: SR_WIRE_TIMEOUT */
	CHECK(sr_get_u32le(bytes + 8) == SR_NO_RANK);
	CHECK(memcmp(bytes + SR_ABORT_FIXED, in.reason, strlen(in.reason)) ==
	    0);
	memset(&out, 0x55, sizeof(out));
	CHECK(sr_abort_decode(bytes, n, &out) == 0);
	CHECK(out.origin == 5);
	CHECK(out.wire_class == SR_WIRE_TIMEOUT);
	CHECK(out.culprit == SR_NO_RANK);
	CHECKF(strcmp(out.reason, in.reason) == 0, "\"%s\"", out.reason);

	/* An empty reason is the fixed part alone. */
	in.reason[0] = '\0';
	in.culprit = 2;
	n = sr_abort_encode(&in, bytes, sizeof(bytes));
	CHECK(n == SR_ABORT_FIXED);
	CHECK(sr_abort_decode(bytes, n, &out) == 0);
	CHECK(out.culprit == 2 && out.reason[0] == '\0');
}

static void
abort_long_reason_is_truncated(void)
{
	struct sr_abort in, out;
	uint8_t bytes[SR_ABORT_FIXED + 600];
	size_t n;

	/* A reason filling the whole array, terminator included: encode
	 * stops at the cap and reads no further. */
	memset(&in, 0, sizeof(in));
	memset(in.reason, 'r', sizeof(in.reason));
	n = sr_abort_encode(&in, bytes, sizeof(bytes));
	CHECK(n == SR_ABORT_MAX);

	/* A peer sending more than the cap: decode keeps the first 400. */
	memset(bytes + SR_ABORT_FIXED, 'x', 600);
	bytes[SR_ABORT_FIXED + SR_ABORT_REASON_MAX - 1] = 'y';
	CHECK(sr_abort_decode(bytes, sizeof(bytes), &out) == 0);
	CHECK(strlen(out.reason) == SR_ABORT_REASON_MAX);
	CHECK(out.reason[SR_ABORT_REASON_MAX - 1] == 'y');
	CHECK(out.reason[0] == 'x');

	/* An output buffer shorter than the reason cuts the reason. */
	snprintf(in.reason, sizeof(in.reason), "%s", "abcdefghijkl");
	n = sr_abort_encode(&in, bytes, SR_ABORT_FIXED + 5);
	CHECK(n == SR_ABORT_FIXED + 5);
	CHECK(memcmp(bytes + SR_ABORT_FIXED, "abcde", 5) == 0);
	CHECK(sr_abort_encode(&in, bytes, SR_ABORT_FIXED - 1) == 0);
}

static void
abort_reason_keeps_printable_ascii(void)
{
	static const uint8_t reason[] = { 'o', 'k', 0x00, '\n', 0x1f, ' ',
		0x7e, 0x7f, 0x80, 0xff, 0xc3, 0xa9, '!' };
	uint8_t bytes[SR_ABORT_FIXED + sizeof(reason)];
	struct sr_abort out;

	sr_put_u32le(bytes, 1);
	sr_put_u32le(bytes + 4, SR_WIRE_IO);
	sr_put_u32le(bytes + 8, 0);
	memcpy(bytes + SR_ABORT_FIXED, reason, sizeof(reason));
	CHECK(sr_abort_decode(bytes, sizeof(bytes), &out) == 0);
	CHECKF(strcmp(out.reason, "ok\?\?\? ~\?\?\?\?\?!") == 0, "\"%s\"",
	    out.reason);
	CHECK(out.origin == 1 && out.wire_class == SR_WIRE_IO && out.culprit == 0);
}

static void
abort_decode_rejects_short_payload(void)
{
	uint8_t bytes[SR_ABORT_FIXED] = { 0 };
	struct sr_abort out;

	CHECK(sr_abort_decode(bytes, 0, &out) == -1);
	CHECK(sr_abort_decode(bytes, 1, &out) == -1);
	CHECK(sr_abort_decode(bytes, SR_ABORT_FIXED - 1, &out) == -1);
	CHECK(sr_abort_decode(bytes, SR_ABORT_FIXED, &out) == 0);
	CHECK(out.reason[0] == '\0');
}

int
main(void)
{
	TEST_RUN(le_helpers_write_least_significant_byte_first);
	TEST_RUN(hello_round_trips);
	TEST_RUN(hello_streams_field);
	TEST_RUN(wide_frame_carries_the_piece);
	TEST_RUN(hello_layout_matches_seed);
	TEST_RUN(hello_rejects_wrong_magic);
	TEST_RUN(hello_rejects_other_protocol_version);
	TEST_RUN(hello_rejects_swapped_byte_order);
	TEST_RUN(hello_judge_checks_token_then_world_then_rank);
	TEST_RUN(verdict_round_trips_every_status);
	TEST_RUN(verdict_layout_matches_seed);
	TEST_RUN(verdict_rejects_bad_magic);
	TEST_RUN(verdict_rejects_unknown_status);
	TEST_RUN(hello_auth_flag_round_trips);
	TEST_RUN(hello_judge_refuses_undefined_flag_bits);
	TEST_RUN(verdict_codes_are_frozen);
	TEST_RUN(result_round_trips_and_layout);
	TEST_RUN(result_rejects_bad_magic_and_unknown_status);
	TEST_RUN(auth_messages_round_trip_at_their_offsets);
	TEST_RUN(auth_messages_reject_every_bad_magic_byte);
	TEST_RUN(every_message_keeps_its_bytes);
	TEST_RUN(verdict_reasons_match_seed);
	TEST_RUN(frame_round_trips);
	TEST_RUN(wide_frame_round_trips_and_carries_the_group);
	TEST_RUN(frame_layout_is_little_endian);
	TEST_RUN(frame_check_match);
	TEST_RUN(frame_check_each_field_differing_is_mismatch);
	TEST_RUN(frame_check_abort_in_range);
	TEST_RUN(frame_check_abort_of_absurd_length);
	TEST_RUN(frame_check_bye);
	TEST_RUN(frame_check_heartbeat);
	TEST_RUN(goodbye_layout);
	TEST_RUN(wire_codes_are_frozen);
	TEST_RUN(frame_describe_allreduce);
	TEST_RUN(frame_describe_other_kinds);
	TEST_RUN(frame_describe_unknown_kind);
	TEST_RUN(abort_round_trips);
	TEST_RUN(abort_long_reason_is_truncated);
	TEST_RUN(abort_reason_keeps_printable_ascii);
	TEST_RUN(abort_decode_rejects_short_payload);
	return TEST_DONE();
}
