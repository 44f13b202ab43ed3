/*
 * handshake.h - formation's state, shared by handshake.c (the connectors
 * and the poll loop) and acceptor.c (the accepting side: pending
 * handshakes and their eviction); not installed.
 *
 * A plain ring has one connector (to the next rank) and accepts one rank
 * (the previous one).  A mesh has a connector to every rank it dials
 * (sr_mesh_dials) and accepts every rank that dials it, each once.  With
 * several streams per link (sr_ring_options.streams) each of those is
 * that many connectors and connections, one per stream, each its own
 * handshake; a link forms once all of its streams have.
 */
#ifndef SR_HANDSHAKE_H
#define SR_HANDSHAKE_H

#include <poll.h>
#include <stdlib.h>
#include <unistd.h>

#include "auth.h"
#include "clock.h"
#include "error.h"
#include "formation.h"
#include "listener.h"
#include "sock.h"
#include "wire.h"

/* Handshakes read at once; more connections wait in the kernel backlog.
 * A mesh adds a slot (and one per host) for every rank it accepts. */
#define PENDING_MAX 16
/* Of the pending slots, at most this many for one host: a flood from
 * one address leaves the other half to everyone else. */
#define PER_HOST_MAX 8
#define MESSAGE_MAX SR_RESPONSE_LEN

/*
 * Exchange stages, on both sides: the message the acceptor waits for (the
 * connector's hello, challenge, proof), so the one the connector sent
 * last.  Each side's progress function is a loop over these.
 */
enum exchange_stage { STAGE_HELLO, STAGE_CHALLENGE, STAGE_PROOF };

/* One message to send, then one to receive, on a socket. */
struct exchange {
	uint8_t out[MESSAGE_MAX];
	size_t out_len, out_done;
	uint8_t in[MESSAGE_MAX];
	size_t in_len, in_got;
	enum exchange_stage stage;
};

enum connector_state {
	CONNECT_BACKOFF,
	CONNECT_IN_PROGRESS,
	CONNECT_TALK,
	CONNECT_DONE,
	CONNECT_FAILED	/* this rank leaves; see form_leave */
};

struct connector {
	enum connector_state state;
	int fd;
	struct sr_sockaddr addr;
	const char *address;
	/* With several addresses on this rank: the one stream `stream`
	 * leaves from (bound before connecting). */
	bool bind_local;
	struct sr_sockaddr local;
	uint32_t peer;
	uint32_t stream;	/* which of the link's connections */
	int64_t retry_at;
	int64_t backoff;
	struct exchange x;
	struct sr_auth auth;
	/* Formed, and nothing read on it yet: watched for a close until
	 * formation ends (link_watch). */
	bool watch;
	char last_error[160];
	/* For a probe: when the attempt began and its connection came up. */
	int64_t attempt_ns, connected_ns;
	uint32_t attempts;
};

struct pending {
	int fd;
	int64_t deadline;
	/* When it was accepted or last sent a whole message: how long it has
	 * kept this rank waiting. */
	int64_t since;
	/* Its hello named this job, this world and the expected rank. */
	bool claims_prev;
	uint32_t claims;	/* the rank its hello claims */
	uint32_t stream;	/* and the stream */
	struct exchange x;
	struct sr_auth auth;
	struct sr_sockaddr peer;
	char address[SR_ADDR_MAX];
};

struct acceptor {
	/* The rank's listening sockets: its address's, then its other
	 * addresses' (sr_listener_also). */
	int listen_fds[SR_STREAMS_MAX];
	int nlisten;
	uint32_t expected;	/* a ring's previous rank */
	int prev_fd;		/* a ring's link to it, once taken */
	/* A mesh: by rank, the links taken (-1: none yet), and the number
	 * still due. */
	int *fds;
	bool *watch;	/* by rank: a link taken, watched until it speaks */
	/* Streams 1 .. K - 1 of each rank's link (a ring's previous rank's
	 * alone is used): extra[r * (K - 1) + s - 1], -1 until taken. */
	int *extra;
	/* The connections still due, every stream counted. */
	uint32_t missing;
	struct pending *pending;
	int pending_max, per_host_max;
	int npending;
	unsigned long rejected;
	unsigned long evicted;	/* of those, to make room */
	int64_t paused_until;	/* out of descriptors: accept later */
	bool last_was_auth;
	char last_from[SR_ADDR_MAX];
	char last_reason[200];
};

struct formation {
	uint32_t rank, world;
	uint64_t token;
	const struct sr_ring_options *options;
	bool keyed;
	bool mesh;
	uint32_t streams;	/* connections per link, 1 .. SR_STREAMS_MAX */
	/* Every rank's addresses when some have several (options'
	 * nic_addresses), else NULL: stream s runs between address s of
	 * either end (modulo their counts). */
	const char *const *const *nics;
	/* A probe (bench connect): every rank dials every other; failures
	 * are reported in report[peer], and formation ends, whatever
	 * formed, by probe_deadline. */
	bool probe;
	struct sr_probe_link *report;
	int64_t probe_deadline;
	int64_t started, deadline;
	/* Authentication failed on this rank's link to its next rank: it
	 * stays until leave_by to tell its previous rank, unless told_prev:
	 * a connection that claims to be that rank already had a verdict
	 * that ends its exchange, or this rank's response to find the key
	 * wrong by itself. */
	bool leaving, told_prev;
	int64_t leave_by;
	uint32_t leave_peer;	/* the rank authentication failed with */
	/* A mesh: by rank, whether a rank it awaits was told this one
	 * leaves (the ring's told_prev, for each). */
	bool *told;
	/* A mesh: the abort heard first on a formed link, forwarded on the
	 * others when formation fails because of it. */
	struct sr_abort heard;
	bool heard_abort;
	int64_t progress_at;	/* the next on_progress, 0: not yet set */
	const char *const *addresses;	/* every rank's, by rank */
	const char *next_address, *prev_address;	/* for on_progress */
	/* The ranks this one dials: a ring's next rank alone, or a mesh's
	 * share (conns[i].peer). */
	struct connector *conns;
	int nconns;
	struct acceptor a;
};

/* Whether, in a mesh of world ranks, rank a dials rank b (else b dials
 * a): each rank dials the ranks up to half the ring ahead of it (the
 * rank exactly opposite only when it is the higher), so dialling and
 * accepting are shared evenly, and a rank dials its next rank as on a
 * ring. */
static inline bool
sr_mesh_dials(uint32_t a, uint32_t b, uint32_t world)
{
	uint32_t ahead = (b + world - a) % world;

	return ahead != 0 && (2 * ahead < world ||
	    (2 * ahead == world && a < b));
}

/* Where the acceptor keeps stream s of the link from rank r (r valid). */
static inline int *
sr_acceptor_slot(struct acceptor *a, bool mesh, uint32_t streams,
    uint32_t r, uint32_t s)
{
	if (s > 0)
		return &a->extra[r * (streams - 1) + s - 1];
	return mesh ? &a->fds[r] : &a->prev_fd;
}

/* Whether rank r dials this one: a ring's previous rank, on a mesh by
 * sr_mesh_dials (a probe: every other rank). */
static inline bool
sr_acceptor_dialled_by(const struct formation *f, uint32_t r)
{
	if (!f->mesh)
		return r == f->a.expected;
	return r < f->world && (f->probe ? r != f->rank :
	    sr_mesh_dials(r, f->rank, f->world));
}

/* Whether the acceptor still takes stream s of the link from rank r. */
static inline bool
sr_acceptor_awaits_stream(const struct formation *f, uint32_t r, uint32_t s)
{
	return s < f->streams && sr_acceptor_dialled_by(f, r) &&
	    *sr_acceptor_slot((struct acceptor *)&f->a, f->mesh, f->streams,
	    r, s) < 0;
}

/* Whether the acceptor still takes a connection from rank r. */
static inline bool
sr_acceptor_awaits(const struct formation *f, uint32_t r)
{
	for (uint32_t s = 0; s < f->streams; s++)
		if (sr_acceptor_awaits_stream(f, r, s))
			return true;
	return false;
}

/* A rank this one awaits (the ring's previous rank, or on a mesh any)
 * had its answer that this rank leaves. */
static inline void
sr_formation_told(struct formation *f, uint32_t r)
{
	if (!f->mesh)
		f->told_prev = true;
	else if (r < f->world)
		f->told[r] = true;
}

/* Whether any link is still to be accepted. */
static inline bool
sr_acceptor_open(const struct formation *f)
{
	return f->a.missing > 0;
}

static inline void
sr_close_fd(int *fd)
{
	if (*fd >= 0)
		close(*fd);
	*fd = -1;
}

static inline short
sr_exchange_events(const struct exchange *x)
{
	return x->out_done < x->out_len ? POLLOUT : POLLIN;
}

/* Queues out_len bytes of x->out to send, then in_len to receive. */
void sr_exchange_expect(struct exchange *x, enum exchange_stage stage,
    size_t out_len, size_t in_len);
/*
 * Moves an exchange on: sends what is queued, then reads what is expected.
 * 1 when the expected message is complete, 0 to poll again, -1 on a socket
 * error or EOF (why: strerror, or "the connection closed").
 */
int sr_exchange_progress(int fd, struct exchange *x, const char **why);
/*
 * Sends a short message that ends an exchange, now or never: nothing
 * waits for the rest (a fresh link's send buffer has room).  0 when all
 * of it went, else SR_IO_AGAIN or SR_IO_ERROR (errno says why).
 */
int sr_exchange_send_last(int fd, const void *buf, size_t len);
/* The MAC inputs of a link from rank connector to rank acceptor. */
void sr_formation_auth_init(struct formation *f, struct sr_auth *a,
    uint32_t connector, uint32_t acceptor);

/* acceptor.c.  Accepts up to a burst of connections, making room. */
void sr_acceptor_accept(struct formation *f);
/* Moves pending handshake slot on; sets f->a.prev_fd once one is taken. */
void sr_acceptor_progress(struct formation *f, int slot);
/* Drops the pending handshakes past their deadline. */
void sr_acceptor_expire(struct formation *f, int64_t now);
/* Closes pending handshake slot; the others keep their accept order. */
void sr_acceptor_drop(struct acceptor *a, int slot);
/* "; refused 3 unauthenticated connection(s) ..." or "" for none. */
void sr_acceptor_rejections(const struct formation *f, char *buf,
    size_t size);

#endif
