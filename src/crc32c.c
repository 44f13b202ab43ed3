/*
 * crc32c.c - CRC-32C (Castagnoli), for the optional per-frame integrity
 * check.  Uses the SSE4.2 crc32 instruction where the CPU has it (several
 * GB/s), else a byte table.  Pure.
 */
#include <string.h>

#include "crc32c.h"

static uint32_t table[256];
static int have_hw = -1;

static void
init_table(void)
{
	for (uint32_t i = 0; i < 256; i++) {
		uint32_t c = i;

		for (int k = 0; k < 8; k++)
			c = c & 1 ? (c >> 1) ^ 0x82f63b78u : c >> 1;
		table[i] = c;
	}
}

static uint32_t
crc_table(uint32_t crc, const uint8_t *p, size_t n)
{
	while (n-- > 0)
		crc = table[(crc ^ *p++) & 0xff] ^ (crc >> 8);
	return crc;
}

#if defined(__x86_64__)
__attribute__((target("sse4.2"))) static uint32_t
crc_hw(uint32_t crc, const uint8_t *p, size_t n)
{
	uint64_t c = crc;

	while (n >= 8) {
		uint64_t v;

		memcpy(&v, p, 8);
		c = __builtin_ia32_crc32di(c, v);
		p += 8;
		n -= 8;
	}
	while (n-- > 0)
		c = __builtin_ia32_crc32qi((uint32_t)c, *p++);
	return (uint32_t)c;
}
#endif

uint32_t
sr_crc32c(uint32_t crc, const void *data, size_t len)
{
	const uint8_t *p = data;

	/* Threads may race here: each builds the same table, and the flag
	 * is published after it (release), read before use (acquire). */
	if (__atomic_load_n(&have_hw, __ATOMIC_ACQUIRE) < 0) {
		int hw = 0;

		init_table();
#if defined(__x86_64__)
		__builtin_cpu_init();
		hw = __builtin_cpu_supports("sse4.2") ? 1 : 0;
#endif
		__atomic_store_n(&have_hw, hw, __ATOMIC_RELEASE);
	}
	crc = ~crc;
#if defined(__x86_64__)
	if (have_hw)
		return ~crc_hw(crc, p, len);
#endif
	return ~crc_table(crc, p, len);
}
