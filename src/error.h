/*
 * error.h - filling the error object (error.c); only cli/ prints it.
 */
#ifndef SR_ERROR_H
#define SR_ERROR_H

#include <stdarg.h>
#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "silvic_ring.h"

#define SR_PRINTF(fmt, args) __attribute__((format(printf, fmt, args)))


/* Sets code, phase and message; keeps rank, peer and address. */
void sr_err_set(struct sr_error *err, enum sr_code code, enum sr_phase phase,
    const char *fmt, ...) SR_PRINTF(4, 5);
/* Names the peer of an error that has none yet. */
void sr_err_peer(struct sr_error *err, int64_t peer, const char *address);

#endif
