/*
 * crc32c.h - CRC-32C (Castagnoli) for the frames' integrity trailers (crc32c.c).
 */
#ifndef SR_CRC32C_H
#define SR_CRC32C_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

/* CRC-32C of len bytes, continuing crc (0 to start). */
uint32_t sr_crc32c(uint32_t crc, const void *data, size_t len);

#endif
