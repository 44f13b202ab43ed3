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

#define SR_PRINTF SR_FORMAT_PRINTF

/* sr_error_set, which fills code, phase and message, is public
 * (silvic_ring.h). */
/* Names the peer of an error that has none yet. */
void sr_err_peer(struct sr_error *err, int64_t peer, const char *address);

#endif
