/*
 * engine_impl.h - what engine.c (the loop, sending, liveness) and
 * engine_recv.c (receiving) share; nothing else includes it.
 */
#ifndef SR_ENGINE_IMPL_H
#define SR_ENGINE_IMPL_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>
#include <sys/types.h>

#include "engine.h"
#include "error.h"
#include "transport.h"

/* Where a transfer stands on one link. */
struct sr_cursor {
	int send;	/* current send on this link, or -1 */
	int recv;	/* current receive on this link, or -1 */
	uint64_t rx_off;	/* payload bytes received of the current receive */
	uint8_t *segment;	/* SR_SEGMENT bytes for reductions, from the
				 * first transfer that folds on this link */
	size_t fill;	/* reduction bytes waiting in the segment */
};

struct sr_engine {
	struct sr_engine_config c;
	struct sr_cursor *cursor;	/* by link index */
	int64_t spin_ns;	/* busy-poll this long before sleeping */
	/* The abort this rank heard first, forwarded verbatim. */
	struct sr_abort heard;
	bool heard_abort;
};

struct run {
	struct sr_engine *e;
	struct sr_transfer *x;
	struct sr_cursor *cursor;
	size_t esize;
	uint64_t frame_max;	/* payload bytes a frame carries at most */
	int64_t heartbeat_ns;	/* a waiting rank's heartbeat period */
	int64_t progress_ns;	/* when payload last moved */
};

static inline struct sr_link *
run_link(const struct run *r, uint32_t link)
{
	return &r->e->c.links[link];
}

/* Fails err as code, "<what> rank P (address) in <the frame due>". */
void sr_engine_peer_error(struct run *r, uint32_t link, enum sr_code code,
    struct sr_error *err, const char *fmt, ...) SR_PRINTF(5, 6);
/* A read or send that failed: rc is SR_IO_EOF or SR_IO_ERROR (errno). */
void sr_engine_io_error(struct run *r, uint32_t link, int rc,
    struct sr_error *err);
int sr_engine_next_recv(const struct run *r, int from, uint32_t link);

/* A peer's abort: kept (the first one) for forwarding, and turned into
 * err (engine_recv.c). */
void sr_engine_abort_heard(struct run *r, const struct sr_abort *abort,
    struct sr_error *err);

/* engine_recv.c.  Receives what it can on a link: bytes moved, or -1. */
int64_t sr_engine_pump_in(struct run *r, uint32_t link, struct sr_error *err);
/* A link with nothing to receive is still read for an abort, a goodbye
 * or a close; a later collective's header may wait there for its turn.
 * 0, or -1 on failure. */
int sr_engine_watch_idle(struct run *r, uint32_t link, struct sr_error *err);

#endif
