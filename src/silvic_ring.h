/*
 * silvic_ring.h - the public interface of the silvic-ring core.
 *
 * An embedded TCP ring for collectives: each rank binds a listener, the
 * caller gathers every rank's address (in rank order) by any means it likes,
 * and sr_ring_connect joins the ring: it connects to the next rank, accepts
 * the previous one, and runs the silvic-net handshake.  The collectives then
 * run around the ring.  Every rank calls the same collectives in the same
 * order with buffers of the same length.
 *
 * The core never prints, never exits, never installs signal handlers and
 * never reads the environment.  Every call that can fail returns 0 on
 * success and -1 on failure, filling the caller's struct sr_error.  Once a
 * collective has failed the ring is broken: every later call on it fails
 * with the same error.
 */
#ifndef SILVIC_RING_H
#define SILVIC_RING_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#ifdef __cplusplus
extern "C" {
#endif

/*
 * The core is built with -fvisibility=hidden: its shared library exports
 * what this header declares, and nothing else.
 */
#ifdef __GNUC__
#pragma GCC visibility push(default)
#endif

#define SR_VERSION "0.1.0"

/* Lets the compiler check the arguments of a printf-like call. */
#ifdef __GNUC__
#define SR_FORMAT_PRINTF(fmt, args) __attribute__((format(printf, fmt, args)))
#else
#define SR_FORMAT_PRINTF(fmt, args)
#endif

/*
 * Error codes: X(name, slug, description).  The slug is stable and is what
 * JSON output carries; the numeric values may change between versions.
 */
#define SR_ERRNO_MAP(X)                                                        \
	X(OK, "ok", "success")                                                 \
	X(CONFIG, "config", "invalid configuration")                           \
	X(NOMEM, "nomem", "out of memory")                                     \
	X(BIND, "bind", "could not bind the listener")                         \
	X(CONNECT, "connect", "could not connect to the next rank")            \
	X(REJECTED, "rejected", "the next rank rejected the handshake")        \
	X(HANDSHAKE, "handshake", "the handshake failed")                      \
	X(AUTH, "auth", "authentication failed")                               \
	X(TIMEOUT, "timeout", "timed out")                                     \
	X(PEER_CLOSED, "peer-closed", "a peer closed the connection")          \
	X(IO, "io", "a socket operation failed")                               \
	X(OUT_OF_STEP, "out-of-step", "a peer is in another collective")       \
	X(ABORTED, "aborted", "another rank failed")                           \
	X(INTERRUPTED, "interrupted", "interrupted")                           \
	X(BROKEN, "broken", "the ring failed earlier")                         \
	X(CORRUPT, "corrupt", "a frame failed its integrity check")        \
	X(CHECK, "check", "a result check failed")

enum sr_code {
#define SR_CODE_ENUM(name, slug, text) SR_E##name,
	SR_ERRNO_MAP(SR_CODE_ENUM)
#undef SR_CODE_ENUM
	SR_CODE_COUNT
};

/* Where in a rank's life a failure happened. */
#define SR_PHASE_MAP(X)                                                        \
	X(NONE, "none")                                                        \
	X(CONFIG, "config")                                                    \
	X(BIND, "bind")                                                        \
	X(RENDEZVOUS, "rendezvous")                                            \
	X(CONNECT, "connect")                                                  \
	X(ACCEPT, "accept")                                                    \
	X(HANDSHAKE, "handshake")                                              \
	X(COLLECTIVE, "collective")                                            \
	X(CLOSE, "close")

enum sr_phase {
#define SR_PHASE_ENUM(name, slug) SR_PHASE_##name,
	SR_PHASE_MAP(SR_PHASE_ENUM)
#undef SR_PHASE_ENUM
	SR_PHASE_COUNT
};

#define SR_ADDR_MAX 80	  /* "[v6-with-zone]:port" and a NUL fit */
#define SR_MESSAGE_MAX 512

/*
 * One failure.  Filled at the bottom, enriched on the way up; the caller
 * prints it (sr_error_format).  rank, peer and step are -1 when unknown;
 * origin is the rank that failed first when this rank learnt of the
 * failure from another rank's abort (else -1).
 */
struct sr_error {
	enum sr_code code;
	enum sr_phase phase;
	int64_t rank;
	int64_t peer;
	int64_t origin;
	int64_t step;
	char peer_address[SR_ADDR_MAX];
	char message[SR_MESSAGE_MAX];
};

/* Resets err to "no error": code SR_EOK, every number -1, strings empty. */
void sr_error_clear(struct sr_error *err);
/*
 * Records a failure in err: its code, its phase and a printf-style
 * message (cut to SR_MESSAGE_MAX bytes), keeping rank, peer, origin,
 * step and the peer's address.  For a caller that reports its own
 * failures (a launcher's rendezvous, its options) in the same object as
 * the core's.  err may be NULL.  Returns -1, so that a failing function
 * can end with `return sr_error_set(...)`.
 */
int sr_error_set(struct sr_error *err, enum sr_code code,
    enum sr_phase phase, const char *fmt, ...) SR_FORMAT_PRINTF(4, 5);
/* The stable slug ("out-of-step") and the description of a code. */
const char *sr_code_name(enum sr_code code);
const char *sr_code_text(enum sr_code code);
const char *sr_phase_name(enum sr_phase phase);
/*
 * The one-line message a user sees: "rank 2: <message>", or just the
 * message when no rank is known.  Always NUL-terminated; returns buf.
 */
char *sr_error_format(const struct sr_error *err, char *buf, size_t size);

enum sr_dtype {
	SR_F64,
	SR_F32,
	SR_I64,
	SR_I32,
	SR_U64,
	SR_U32,
	SR_DTYPE_COUNT
};

enum sr_op {
	SR_SUM,
	SR_MAX,
	SR_MIN,
	SR_PROD,
	SR_OP_COUNT
};

size_t sr_dtype_size(enum sr_dtype dtype);
const char *sr_dtype_name(enum sr_dtype dtype);
const char *sr_op_name(enum sr_op op);
/* Parse "f64", "sum", ...; 0 on success, -1 when the name is unknown. */
int sr_dtype_parse(const char *name, enum sr_dtype *out);
int sr_op_parse(const char *name, enum sr_op *out);

/* -------------------------------------------------- addresses and time */

/* How an address text fails to be "host:port" (sr_address_split). */
enum sr_address_fault {
	SR_ADDRESS_OK = 0,
	SR_ADDRESS_BRACKETS,	/* '[' without "]:" after the host */
	SR_ADDRESS_NO_PORT,	/* no ':' at all */
	SR_ADDRESS_AMBIGUOUS,	/* ':' in a host without brackets (IPv6) */
	SR_ADDRESS_NO_HOST,	/* the host is empty, or too long */
	SR_ADDRESS_PORT		/* the port is not a number from 0 to 65535 */
};

/*
 * Splits "host:port", or "[ipv6]:port", the form of every address the
 * ring takes and gives, into host (without brackets, NUL-terminated) and
 * port.  Returns SR_ADDRESS_OK (0), or the fault with why saying it,
 * quoting address ("'node1' has no :port"), when why is non-NULL; a
 * caller with words of its own maps the fault.  A host of host_size
 * bytes or more is SR_ADDRESS_NO_HOST; host NULL checks the form alone,
 * with no bound.  port may be NULL.  Port 0 passes (a listener's
 * "any port"): a caller that dials refuses it.
 */
enum sr_address_fault sr_address_split(const char *address, char *host,
    size_t host_size, uint16_t *port, char *why, size_t why_size);

/*
 * The monotonic clock every deadline of the core is measured on
 * (CLOCK_MONOTONIC), in nanoseconds: for a caller's own deadlines and
 * durations, comparable with the core's.
 */
int64_t sr_clock_ns(void);

/* ---------------------------------------------------------------- listener */

struct sr_listener;

/*
 * Binds host:port (port 0: ephemeral) and listens with a full backlog.
 * advertise is the address other ranks dial; NULL or "" means host itself.
 * An unspecified address (0.0.0.0, ::) cannot be advertised: that is an
 * SR_ECONFIG error whose message says to pass the node's address.  host
 * may be an IPv6 literal, with or without brackets.  On success *out owns
 * the socket until sr_ring_connect or sr_listener_close.
 */
int sr_listener_open(struct sr_listener **out, const char *host,
    const char *advertise, uint16_t port, struct sr_error *err);
/*
 * sr_listener_open, with host names (host, advertise) resolved within
 * timeout_ms (sr_listener_open allows 10 s) and a transient resolver
 * failure retried until then; *cancel set non-zero (when non-NULL) ends
 * the wait with SR_EINTERRUPTED.
 */
int sr_listener_open_within(struct sr_listener **out, const char *host,
    const char *advertise, uint16_t port, int64_t timeout_ms,
    volatile int *cancel, struct sr_error *err);
/* "ip:port" (IPv6 as "[ip]:port") that the other ranks connect to. */
const char *sr_listener_address(const struct sr_listener *listener);
uint16_t sr_listener_port(const struct sr_listener *listener);
/*
 * Listens on host:port too (port 0: ephemeral), for a rank reached at
 * several addresses (sr_ring_options.nic_addresses): a connection to any
 * of them reaches the same rank.  At most SR_RING_STREAMS_MAX - 1 of
 * them; 0, or -1 with err (SR_EBIND, SR_ECONFIG).
 */
int sr_listener_also(struct sr_listener *listener, const char *host,
    uint16_t port, struct sr_error *err);
void sr_listener_close(struct sr_listener *listener);

/* ------------------------------------------------------------------- ring */

struct sr_ring;

/* Called for every connection the acceptor rejects during formation. */
typedef void (*sr_stray_fn)(void *arg, const char *peer_address,
    const char *reason);

/*
 * Where a forming ring stands, for a caller that shows it while it waits
 * (the core never prints).  On a plain ring a rank only ever waits for
 * its two neighbours: it dials the next rank and accepts the previous
 * one.  On a mesh it waits for every rank; next and prev still say where
 * its ring neighbours stand.
 */
struct sr_progress {
	uint32_t rank, world;
	uint32_t next, prev;		/* the neighbours' ranks */
	const char *next_address;	/* the address dialled for next */
	const char *prev_address;	/* the list's address for prev */
	bool next_connected;	/* a TCP connection to next is up */
	bool next_ready;	/* and its handshake is done */
	bool prev_ready;	/* prev connected and its handshake is done */
	int pending;		/* accepted connections still in their hello */
	unsigned long rejected;	/* connections rejected so far */
	int64_t elapsed_ms, left_ms;	/* since formation began; until the
					 * timeout */
	/* A mesh: its links formed, of world - 1 (both 0 on a ring). */
	uint32_t links_formed, links_total;
};

typedef void (*sr_progress_fn)(void *arg, const struct sr_progress *progress);

/* The shortest key sr_ring_connect accepts, in bytes; 32 random bytes are
 * better. */
#define SR_KEY_MIN 16

struct sr_ring_options {
	/* Bounds formation, then any silence while a collective waits;
	 * milliseconds, > 0. */
	int64_t timeout_ms;
	/* When non-NULL and set non-zero (say by a signal handler), waits
	 * end with SR_EINTERRUPTED at the next wake-up. */
	volatile int *cancel;
	/* Told of every rejected connection, when non-NULL. */
	sr_stray_fn on_stray;
	void *stray_arg;
	/*
	 * A pre-shared key (at least SR_KEY_MIN bytes, the same on every
	 * rank): every link then runs an HMAC-SHA256 challenge-response
	 * after the hello, and a peer without the key cannot join.  NULL: no
	 * authentication, and the handshake is byte-identical to silvic-net's.
	 * The core reads the key only during sr_ring_connect and keeps no
	 * copy.  Needs the library built with libcrypto (sr_auth_built_in).
	 */
	const uint8_t *key;
	size_t key_len;
	/*
	 * Every collective frame carries a CRC-32C of its header and payload,
	 * checked on arrival (a mismatch fails the collective with
	 * SR_ECORRUPT).  Off by default: TCP's own checksum is weak (16
	 * bits) but catches most link errors; this catches what it misses
	 * and what a middlebox or bad memory corrupts.  Every rank must agree.
	 */
	bool integrity;
	/*
	 * The TCP congestion control of the ring's two links.  NULL keeps
	 * the kernel's choice.  "auto" replaces bbr by reno and keeps any
	 * other: bbr paces every flow, which without an fq qdisc costs a
	 * timer per burst, and on the ring's long-lived links between
	 * nearby hosts that measured 5-25% of large-buffer bandwidth.  Any
	 * other name must be one the kernel offers (and, for an
	 * unprivileged process, allows); sr_congestion_check tells first.
	 */
	const char *congestion;
	/*
	 * Told where formation stands every progress_ms milliseconds
	 * while it waits (first after progress_ms), when non-NULL and
	 * progress_ms > 0.  Called from the formation loop: it must not
	 * call back into the ring.
	 */
	sr_progress_fn on_progress;
	void *progress_arg;
	int64_t progress_ms;
	/*
	 * Form a mesh: a link to every other rank, not only to the ring
	 * neighbours (each rank dials the ranks up to half the ring ahead of
	 * it and accepts the others), for the groups' collectives and
	 * point-to-point tests between any two ranks.  The ring collectives
	 * run on the neighbours' links as before.  Every rank must agree
	 * (a rank of a plain ring is refused, SR_VERDICT_MESH); the links'
	 * hellos carry a flag, so a mesh is not byte-identical to
	 * silvic-net.  A world of w ranks holds w - 1 sockets per rank.
	 */
	bool mesh;
	/*
	 * The ranks share CPU cores (a host runs more of them than it has
	 * cores): each frame then costs a context switch, which is more
	 * than a hop costs, so a small allreduce at world 3 takes four
	 * frames in three hops instead of six frames in one; at world 4
	 * allreduces up to 256 KiB and the barrier go by blocks (ranks 3
	 * and 2 hand their inputs to ranks 0 and 1, which exchange and hand
	 * back), as at 8 ranks of a mesh.  Leave it off where every rank
	 * has a core, as on a cluster: there the hops are the cost.  Every
	 * rank must agree (ranks that do not fail out of step).
	 */
	bool shared_cores;
	/*
	 * Probe instead of forming (bench connect), when > 0: every rank
	 * dials every other rank, both ways, for at most probe_ms (of the
	 * timeout), and what each of its own connections saw goes into
	 * probe[r] (world entries, the caller's).  A rank that cannot be
	 * reached is recorded there, not an error: sr_ring_connect succeeds
	 * with the links that formed (one a pair, as a mesh's), and a
	 * collective that needs a missing one fails naming it.  Every rank
	 * must probe (SR_VERDICT_MESH otherwise).  Implies mesh.
	 */
	int64_t probe_ms;
	struct sr_probe_link *probe;
	/*
	 * Connections per link, 1 to SR_RING_STREAMS_MAX (0 counts as 1):
	 * with more than one, every link (a ring's two, a mesh's every one)
	 * is that many TCP connections, each authenticated and checked like
	 * a link, and a collective's sends are cut into pieces that go on
	 * whichever of them can take data first, so one slow or stalled
	 * connection costs only its own share (while this rank waits on
	 * them: sr_ring_spread_always).  For links one flow cannot
	 * fill (a flow capped by a shaper, or by one core's TCP processing
	 * on a fast NIC).  Every rank must agree (SR_EREJECTED otherwise,
	 * naming both counts).  One, the default, keeps a plain ring
	 * byte-identical to silvic-net; more carry the mesh's wide frame
	 * header.  A probe has one.
	 */
	uint32_t streams;
	/*
	 * Ranks reached at several addresses (several NICs; an MLX hostfile
	 * lists them): nic_addresses[r] is rank r's, NULL-terminated, the
	 * first being its address in the list given to sr_ring_connect (or
	 * NULL for a rank of one address).  NULL: one address each.  Stream s
	 * of a link then runs between address s of either end (modulo how
	 * many each has): the connector binds its own before it dials the
	 * peer's, so the streams spread over the address pairs.  A rank
	 * listens on each of its own (sr_listener_also).
	 */
	const char *const *const *nic_addresses;
	/*
	 * The CPUs of one host that every rank of the world runs on
	 * (launch -n's ranks), ncpus of them, when they are no more than
	 * the ranks: each rank then binds itself to one of them, chosen by
	 * the path of each allreduce, where that was measured to be faster
	 * than leaving the ranks to the kernel (at present 2, 3 and 4
	 * ranks on 2 CPUs, and 8 of a mesh; otherwise it runs on the CPUs
	 * it had).  Every other collective leaves it where the last
	 * allreduce put it.  NULL or a world of fewer ranks than CPUs: no
	 * binding.
	 * Only the thread that runs the collectives is bound, and it gets
	 * its CPUs back when the ring closes.  A CPU the kernel refuses
	 * ends the binding (sr_ring_bound_cpu says -1); it is never an
	 * error.
	 */
	const int *cpus;
	uint32_t ncpus;
};

/* The most connections a link may have (sr_ring_options.streams). */
#define SR_RING_STREAMS_MAX 8

/*
 * What a probe (sr_ring_options.probe_ms) saw of one rank: this rank's
 * own connection to it.  reached is false with error saying why when the
 * connection or its handshake failed by the probe's end; the numbers are
 * then those of the last attempt that got that far (0 when none did).
 */
struct sr_probe_link {
	uint32_t peer;
	bool reached;
	char error[200];
	int64_t connect_us;	/* connect() until the connection was up */
	int64_t handshake_us;	/* until the handshake's last answer */
	uint32_t rtt_us;	/* the kernel's smoothed round trip (TCP_INFO) */
	uint32_t rtt_var_us;
	uint32_t mtu;		/* the path MTU the connection uses (IP_MTU) */
	char local[SR_ADDR_MAX];	/* its local address, "ip:port" */
	char iface[32];		/* the interface that address is on */
	uint32_t attempts;	/* connections tried */
};

/* The longest congestion control name, with its NUL (the kernel's). */
#define SR_CONGESTION_MAX 16

/*
 * Whether `name` can be given as the congestion option here: 0 for NULL,
 * "auto" and a name this process may set on a TCP socket, else -1 with
 * err saying why (what the kernel offers, or allows).
 */
int sr_congestion_check(const char *name, struct sr_error *err);

/* Whether this build of the core can authenticate (libcrypto). */
int sr_auth_built_in(void);

/*
 * A token that proves knowledge of a key without revealing it: the hex of
 * HMAC-SHA256(key, "silvic-ring http bearer v1"), 64 characters and a NUL.
 * The HTTP rendezvous sends it as its bearer token, so one key file serves
 * the ring and the rendezvous server.  -1 without libcrypto.
 */
int sr_key_token(const uint8_t *key, size_t key_len, char token[65]);

void sr_ring_options_init(struct sr_ring_options *options);

/*
 * Joins the ring as `rank` of `world` ranks.  addresses[i] is rank i's
 * "host:port"; the listener is consumed (closed) whether or not the call
 * succeeds.  token is the job token both sides must agree on.  A world of
 * one opens no sockets.  rank >= world, world 0 and a world beyond u32 are
 * SR_ECONFIG.
 */
int sr_ring_connect(struct sr_ring **out, struct sr_listener *listener,
    uint64_t rank, const char *const *addresses, uint64_t world,
    uint64_t token, const struct sr_ring_options *options,
    struct sr_error *err);

/* Whether the ring has failed (a collective, the close or
 * sr_ring_abort): every later call then fails with that failure. */
bool sr_ring_failed(const struct sr_ring *ring);
/* The silence timeout of later collectives, in milliseconds (> 0). */
void sr_ring_set_timeout(struct sr_ring *ring, int64_t timeout_ms);
uint32_t sr_ring_rank(const struct sr_ring *ring);
uint32_t sr_ring_world(const struct sr_ring *ring);
const char *sr_ring_peer_address(const struct sr_ring *ring, uint32_t rank);
/* The congestion control the link to the next rank runs ("" in a world of
 * one), as the kernel reports it. */
const char *sr_ring_congestion(const struct sr_ring *ring);

/* The CPU the calling thread is bound to by sr_ring_options.cpus, as the
 * kernel reports it after the last collective; -1 when it is not bound to
 * one (no binding asked, none yet, or the kernel refused it). */
int sr_ring_bound_cpu(const struct sr_ring *ring);

/* Connections per link (sr_ring_options.streams; 1 in a world of one). */
uint32_t sr_ring_streams(const struct sr_ring *ring);

/*
 * With several streams a collective's pieces go over all of a link's
 * connections only while this rank waits on them (a quarter of its large
 * transfers' time; a tenth once they spread): a rank that is itself the
 * limit, never waiting for room or data, gains nothing from more sockets
 * and keeps its pieces on the first.  A transfer kept there spreads once
 * nothing has moved for 2 ms (a stalled first stream), or once it has
 * run 2 ms and spent a quarter of that waiting.  always spreads every
 * transfer whatever this rank's waiting,
 * to measure each stream (bench links).  Returns the setting it
 * replaced; false in a world of one, where nothing spreads.
 */
bool sr_ring_spread_always(struct sr_ring *ring, bool always);

/* One connection of a link, as its counters and the kernel see it. */
struct sr_stream_stats {
	uint64_t tx_bytes;	/* sent on it, frames whole, over its life */
	uint64_t rx_bytes;	/* read from it */
	uint32_t retransmits;	/* segments TCP retransmitted (TCP_INFO) */
	uint32_t rtt_us;	/* the kernel's smoothed round trip */
	uint32_t cwnd;		/* the congestion window, in segments */
	uint32_t mss;		/* the segment size */
	char local[SR_ADDR_MAX];	/* "ip:port" of this end ("" unknown) */
	char remote[SR_ADDR_MAX];	/* and of the peer's */
};

/* Stream `stream` of this rank's link to its next rank: 0, or -1 when
 * there is no such connection (a world of one, stream >= streams). */
int sr_ring_next_stream(const struct sr_ring *ring, uint32_t stream,
    struct sr_stream_stats *stats);

/*
 * Ends the ring as a collective step, the close every rank must agree on:
 * each rank sends its neighbours a goodbye carrying the number of
 * collectives it ran, reads theirs, then waits until every rank has
 * checked its own links (a barrier of goodbyes).  A neighbour that ran
 * another number of collectives, or a frame of a neighbour still unread
 * here (a collective this rank did not take part in), fails it with
 * SR_EOUT_OF_STEP naming that neighbour, and the ring's abort then fails
 * every other rank too: nothing unread is ever discarded.  An abort that
 * arrives meanwhile fails it with the origin's code.  Waits are bounded
 * by the timeout, as a collective's.  Returns 0 when every rank agreed;
 * -1 with err filled (the ring is then failed, as after a collective).
 * Call sr_ring_close afterwards in either case.  A ring already failed
 * returns its failure again.
 */
int sr_ring_finish(struct sr_ring *ring, struct sr_error *err);

/*
 * Releases the ring.  A ring neither finished nor failed runs
 * sr_ring_finish first (its verdict is then lost: call sr_ring_finish to
 * know it), so the neighbours still get their goodbye.  A finished ring's
 * sockets are shut for writing and read to EOF (for a bounded time) so
 * that no neighbour sees a reset.  ring may be NULL.
 */
void sr_ring_close(struct sr_ring *ring);

/* ------------------------------------------------------------ collectives */

/*
 * Every rank's values reduced element-wise; the result lands in recv on
 * every rank.  send == recv reduces in place.  Every chunk folds in a fixed
 * rank order, so for a given world size and count the result is bitwise
 * identical on every rank and every run (at world 3, for a given
 * shared_cores too: from 64 KiB to 128 KiB its path folds in another
 * order than the ring's, and below 64 KiB a sum of two NaNs may keep the
 * other payload; at world 4, from 64 KiB to 256 KiB, shared_cores folds
 * in another order than the ring's; on a mesh of 8 or more, mesh and
 * shared_cores choose the fold too).  The one exception: a sum of two
 * NaNs is a NaN, but which payload it keeps may differ from run to run,
 * and on the paths where more than one rank folds an element (the
 * small ones), from rank to rank.  All ops are treated as commutative;
 * float sums depend on that fold order.
 */
int sr_allreduce(struct sr_ring *ring, const void *send, void *recv,
    size_t count, enum sr_dtype dtype, enum sr_op op, struct sr_error *err);

/* The seed's named entry points, in place. */
int sr_allreduce_sum_f64(struct sr_ring *ring, double *values, size_t count,
    struct sr_error *err);
int sr_allreduce_sum_i64(struct sr_ring *ring, int64_t *values, size_t count,
    struct sr_error *err);
int sr_allreduce_max_f64(struct sr_ring *ring, double *values, size_t count,
    struct sr_error *err);

/*
 * Every rank's `bytes` bytes, concatenated in rank order into recv (world *
 * bytes long).  send may point into recv at this rank's slot.
 */
int sr_allgather(struct sr_ring *ring, const void *send, size_t bytes,
    void *recv, struct sr_error *err);

/* root's `bytes` bytes of buf, copied into buf on every rank. */
int sr_broadcast(struct sr_ring *ring, void *buf, size_t bytes,
    uint32_t root, struct sr_error *err);

/* Returns once every rank has entered the barrier. */
int sr_barrier(struct sr_ring *ring, struct sr_error *err);

/*
 * Link tests: sends `bytes` bytes to the next rank while receiving as many
 * from the previous one (every rank at once).  recv may be NULL to discard.
 */
int sr_ring_shift(struct sr_ring *ring, const void *send, void *recv,
    size_t bytes, struct sr_error *err);

/*
 * One link alone: rank `from` sends `bytes` bytes of buf to its next rank,
 * which receives them into its buf and answers with its first `echo` bytes
 * (echo <= bytes; 0 still sends an empty acknowledgement), received into
 * `from`'s buf.  Every other rank returns at once; every rank must make the
 * same call.
 */
int sr_link_transfer(struct sr_ring *ring, uint32_t from, void *buf,
    size_t bytes, size_t echo, struct sr_error *err);

/* ------------------------------------------------------------- groups */

/*
 * A group: some ranks of a mesh (a ring whose every rank holds a link to
 * every other) that run collectives among themselves, as one member sees
 * it.  Every member creates it with the same id and the same ranks in
 * the same order; the collectives then run on the links between the
 * members only, while the other ranks do anything else (another group's
 * collectives, or the ring's).  Each group counts its collectives on its
 * own, and every frame names its kind, its group and that count, so:
 *   - the members must run the same collectives on a group in the same
 *     order with buffers of the same length (as on the ring); a member
 *     on another path, or one that passed another length, fails out of
 *     step (SR_EOUT_OF_STEP) naming the peer and both frames (both
 *     lengths);
 *   - two members that share two groups must order the collectives of
 *     both alike: a frame of another group waits its turn only on a link
 *     this rank is not receiving from;
 *   - a failure in a group fails the whole ring, as on the ring: every
 *     later call on the ring or any of its groups fails with the same
 *     error, and the abort goes to every rank.  A peer that exits fails
 *     every collective waiting on it.
 * The silence timeout, heartbeats and integrity checks work as on the
 * ring.  The ring's own collectives keep working next to its groups (on
 * a mesh they are group 0).  A group does not outlive its ring: free it
 * before sr_ring_close.  sr_ring_finish on a mesh says goodbye on every
 * link, so a group's frame left unread anywhere fails the close.
 */
struct sr_group;

/*
 * The group `id` of the `nranks` ranks at `ranks` (global ranks, in
 * member order: member i is ranks[i]), on a mesh ring of which this rank
 * is a member.  id is the same on every member and unique among the
 * groups of the ring (0 is the whole ring's).  Nothing crosses the wire:
 * members that disagree on the ranks or the id are out of step at their
 * first collective.  SR_ECONFIG errors, naming what is wrong: no ring, a
 * ring that is not a mesh, id 0, an id already used by a group of this
 * rank's, no ranks, a rank out of range for the world or listed twice,
 * this rank not among them.  0 with *out the caller's (sr_group_free), or
 * -1 with *out NULL and err filled.  The ring is not failed by an error
 * here.
 */
int sr_group_new(struct sr_group **out, struct sr_ring *ring, uint32_t id,
    const uint32_t *ranks, size_t nranks, struct sr_error *err);
/* Releases the group (not its ring).  group may be NULL. */
void sr_group_free(struct sr_group *group);
/* The members, and this rank's place among them (0 .. size-1). */
uint32_t sr_group_size(const struct sr_group *group);
uint32_t sr_group_index(const struct sr_group *group);
uint32_t sr_group_id(const struct sr_group *group);
/* Member `index`'s global rank; UINT32_MAX when index >= size. */
uint32_t sr_group_rank(const struct sr_group *group, uint32_t index);

/*
 * The collectives within a group.  As their ring counterparts, but among
 * the members, with member indexes where those take ranks; in a group of
 * one they copy, and still count.  Results are bitwise identical on every
 * member: every element folds in one order fixed by the member order
 * (see group.c), whatever the path a size takes.
 *
 * sr_group_allreduce: every member's count elements reduced element-wise
 * into recv on every member; send == recv reduces in place; every dtype
 * and op of sr_allreduce.
 */
int sr_group_allreduce(struct sr_group *group, const void *send, void *recv,
    size_t count, enum sr_dtype dtype, enum sr_op op, struct sr_error *err);
/* Every member's `bytes` bytes, in member order into recv (size x bytes);
 * send may point into recv at this member's slot. */
int sr_group_allgather(struct sr_group *group, const void *send,
    size_t bytes, void *recv, struct sr_error *err);
/* Member root's `bytes` bytes of buf, into buf on every member (root is a
 * member index, < size; any member may be it). */
int sr_group_broadcast(struct sr_group *group, void *buf, size_t bytes,
    uint32_t root, struct sr_error *err);
/* Returns once every member has entered the barrier. */
int sr_group_barrier(struct sr_group *group, struct sr_error *err);
/*
 * Each member sends `bytes` bytes of send to the next member (in member
 * order, the last to the first) while receiving as many from the previous
 * one into recv (NULL: discarded).  In a group of two both directions of
 * the one link run at once.
 */
int sr_group_shift(struct sr_group *group, const void *send, void *recv,
    size_t bytes, struct sr_error *err);
/*
 * One direction alone, as sr_link_transfer: member `from` sends `bytes`
 * bytes of buf to the next member, which receives them into its buf and
 * answers with its first `echo` bytes (echo <= bytes; 0 still sends an
 * empty acknowledgement), received into from's buf.  Every other member
 * returns at once; every member must make the same call.
 */
int sr_group_link_transfer(struct sr_group *group, uint32_t from, void *buf,
    size_t bytes, size_t echo, struct sr_error *err);

/*
 * Marks the ring failed with err (which must hold a failure), tells both
 * neighbours, and shuts the sockets.  For a caller that fails between
 * collectives (a failed check, say) and wants its peers to learn why.
 */
void sr_ring_abort(struct sr_ring *ring, const struct sr_error *err);

#ifdef __GNUC__
#pragma GCC visibility pop
#endif

#ifdef __cplusplus
}
#endif

#endif
