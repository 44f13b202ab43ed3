/*
 * auth.h - HMAC-SHA256 authentication of a link (auth.c): nonces, MACs, and
 * whether this build can do it.
 */
#ifndef SR_AUTH_H
#define SR_AUTH_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "silvic_ring.h"
#include "wire.h"

enum sr_auth_role { SR_AUTH_CONNECTOR = 0, SR_AUTH_ACCEPTOR = 1 };

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

#endif
