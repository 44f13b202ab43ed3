/*
 * auth.c - the pre-shared-key challenge-response that follows the hello
 * when a key is configured: HMAC-SHA256 (OpenSSL's libcrypto, not a
 * hand-written hash) over both nonces, the role, the protocol version,
 * both ranks, the world size and the job token.  Fresh nonces defeat
 * replay, the role label defeats reflection, and the fields inside the
 * MAC defeat rewriting them or downgrading to no authentication.
 *
 * Authentication is not encryption: traffic stays readable on the wire.
 * Built without libcrypto, sr_auth_available() (and the public
 * sr_auth_built_in()) is false and a key is a configuration error.
 */
#include <errno.h>
#include <string.h>
#include <sys/random.h>

#include "auth.h"

#ifdef SR_HAVE_CRYPTO
#include <openssl/crypto.h>
#include <openssl/evp.h>
#include <openssl/hmac.h>
#endif

static const char *const role_labels[2] = {
	"silvic-ring auth v1: connector proves",
	"silvic-ring auth v1: acceptor proves",
};

bool
sr_auth_available(void)
{
#ifdef SR_HAVE_CRYPTO
	return true;
#else
	return false;
#endif
}

int
sr_auth_built_in(void)
{
	return sr_auth_available();
}

int
sr_auth_nonce(uint8_t nonce[SR_NONCE_LEN])
{
	size_t got = 0;

	while (got < SR_NONCE_LEN) {
		ssize_t n = getrandom(nonce + got, SR_NONCE_LEN - got, 0);

		if (n < 0 && errno == EINTR)
			continue;
		if (n <= 0)
			return -1;
		got += (size_t)n;
	}
	return 0;
}

/* The bytes both sides MAC: label, version, flags, nonces, ranks, world,
 * token, each at a fixed width. */
static size_t
transcript(const struct sr_auth *a, enum sr_auth_role role, uint8_t *out)
{
	size_t label = strlen(role_labels[role]), n = 0;

	memcpy(out, role_labels[role], label);
	n += label;
	out[n++] = (uint8_t)SR_MAGIC[SR_MAGIC_LEN - 1];
	sr_put_u32le(out + n, SR_HELLO_AUTH);
	n += 4;
	memcpy(out + n, a->nonce_connector, SR_NONCE_LEN);
	n += SR_NONCE_LEN;
	memcpy(out + n, a->nonce_acceptor, SR_NONCE_LEN);
	n += SR_NONCE_LEN;
	sr_put_u32le(out + n, a->connector);
	sr_put_u32le(out + n + 4, a->acceptor);
	sr_put_u32le(out + n + 8, a->world);
	sr_put_u64le(out + n + 12, a->token);
	return n + 20;
}

int
sr_auth_mac(const struct sr_auth *a, enum sr_auth_role role,
    uint8_t mac[SR_MAC_LEN])
{
#ifdef SR_HAVE_CRYPTO
	uint8_t text[128];
	unsigned int len = SR_MAC_LEN;
	size_t n = transcript(a, role, text);

	if (HMAC(EVP_sha256(), a->key, (int)a->key_len, text, n, mac,
	    &len) == NULL || len != SR_MAC_LEN)
		return -1;
	return 0;
#else
	(void)transcript;
	memset(mac, 0, SR_MAC_LEN);
	return -1;
#endif
}

bool
sr_auth_verify(const struct sr_auth *a, enum sr_auth_role role,
    const uint8_t mac[SR_MAC_LEN])
{
	uint8_t want[SR_MAC_LEN];
	bool same;

	if (sr_auth_mac(a, role, want) != 0)
		return false;
#ifdef SR_HAVE_CRYPTO
	same = CRYPTO_memcmp(want, mac, SR_MAC_LEN) == 0;
#else
	same = false;
#endif
	memset(want, 0, sizeof(want));
	return same;
}

int
sr_key_token(const uint8_t *key, size_t key_len, char token[65])
{
#ifdef SR_HAVE_CRYPTO
	static const char label[] = "silvic-ring http bearer v1";
	static const char hex[] = "0123456789abcdef";
	uint8_t mac[SR_MAC_LEN];
	unsigned int len = SR_MAC_LEN;

	if (HMAC(EVP_sha256(), key, (int)key_len, (const uint8_t *)label,
	    sizeof(label) - 1, mac, &len) == NULL || len != SR_MAC_LEN)
		return -1;
	for (int i = 0; i < SR_MAC_LEN; i++) {
		token[2 * i] = hex[mac[i] >> 4];
		token[2 * i + 1] = hex[mac[i] & 15];
	}
	token[64] = '\0';
	memset(mac, 0, sizeof(mac));
	return 0;
#else
	(void)key;
	(void)key_len;
	token[0] = '\0';
	return -1;
#endif
}
