/*
 * formation.h - forming a ring (handshake.c): the one call ring.c makes.
 */
#ifndef SR_FORMATION_H
#define SR_FORMATION_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "silvic_ring.h"

/*
 * Both accept on every socket of the listener (its address's and
 * those of sr_listener_also).
 *
 * Ring formation: connects to the next rank and accepts the previous one.
 * Fills next_fds[s] and prev_fds[s], one per stream s of the options'
 * streams (blocking mode unspecified), or the error.
 */
int sr_handshake_form(const struct sr_listener *listener, uint32_t rank, uint32_t world,
    uint64_t token, const char *const *addresses,
    const struct sr_ring_options *options, int *next_fds, int *prev_fds,
    struct sr_error *err);

/*
 * Mesh formation: connects to every rank this one dials (sr_mesh_dials)
 * and accepts every rank that dials it, each link's hello carrying
 * SR_HELLO_MESH.  Fills fds[s * world + r] with stream s of the link to
 * rank r (the options' streams of them; fds[s * world + rank] is -1) or
 * the error; a failure is sent, before the links close, on every link
 * that formed.
 */
int sr_mesh_form(const struct sr_listener *listener, uint32_t rank, uint32_t world,
    uint64_t token, const char *const *addresses,
    const struct sr_ring_options *options, int *fds, struct sr_error *err);

#endif
