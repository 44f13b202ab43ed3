/*
 * sock.h - the socket layer (sock.c): addresses, resolving, socket options, and the
 * one non-blocking send and receive every module moves bytes with.
 */
#ifndef SR_SOCK_H
#define SR_SOCK_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include <sys/socket.h>
#include <sys/types.h>
#include <sys/uio.h>

#include "silvic_ring.h"

struct sr_sockaddr {
	struct sockaddr_storage ss;
	socklen_t len;
};

/*
 * Splits "host:port", "[v6]:port" into host and port.  Returns -1 with a
 * message in why (size bytes) when the text is not of that form.
 */
int sr_sock_split(const char *address, char *host, size_t host_size,
    uint16_t *port, char *why, size_t why_size);
/*
 * Resolves a numeric or named host; -1 with why on failure.  A numeric
 * host never waits.  A name is looked up in a helper thread, so that a
 * resolver that does not answer cannot outlive deadline_ns (monotonic),
 * and a transient failure (EAI_AGAIN: no answer from the name server) is
 * retried with a backoff until then; *cancel (when non-NULL) set non-zero
 * ends the wait.  why names the host, says why, and how often it was
 * tried when it was more than once.
 */
int sr_sock_resolve_within(const char *host, uint16_t port, int passive,
    int64_t deadline_ns, volatile int *cancel, struct sr_sockaddr *out,
    char *why, size_t why_size);
/* sr_sock_resolve_within with SR_RESOLVE_DEFAULT_MS from now, no cancel
 * (where no timeout is known: --host and --advertise). */
#define SR_RESOLVE_DEFAULT_MS 10000
int sr_sock_resolve(const char *host, uint16_t port, int passive,
    struct sr_sockaddr *out, char *why, size_t why_size);
/* The resolver names go to: getaddrinfo; tests put a fake here. */
struct addrinfo;
extern int (*sr_sock_getaddrinfo)(const char *node, const char *service,
    const struct addrinfo *hints, struct addrinfo **res);
/* "ip:port" or "[ip]:port". */
void sr_sock_format(const struct sr_sockaddr *addr, char *buf, size_t size);
bool sr_sock_is_unspecified(const struct sr_sockaddr *addr);
/* Whether both are the same IP address (ports aside). */
bool sr_sock_same_host(const struct sr_sockaddr *a,
    const struct sr_sockaddr *b);
int sr_sock_nonblocking(int fd);
/* TCP_NODELAY, SO_KEEPALIVE and TCP_USER_TIMEOUT from the timeout. */
void sr_sock_tune(int fd, int64_t timeout_ms);
/* What a connected TCP socket's path looks like, for a probe: the
 * kernel's smoothed round trip and its variance (us), the path MTU, the
 * local address and the interface it is on ("" when unknown).  Best
 * effort: a field the kernel does not give stays 0 or "". */
struct sr_path_info {
	uint32_t rtt_us, rtt_var_us;
	uint32_t mtu;
	char local[SR_ADDR_MAX];
	char iface[32];
};
void sr_sock_path_info(int fd, struct sr_path_info *info);
/* A connected TCP socket's kernel counters (TCP_INFO): retransmitted
 * segments over its life, the smoothed round trip (us), the congestion
 * window (segments) and the segment size.  All 0 when the kernel says
 * nothing (not TCP). */
struct sr_tcp_counters {
	uint32_t retransmits;
	uint32_t rtt_us;
	uint32_t cwnd;
	uint32_t mss;
};
void sr_sock_tcp_counters(int fd, struct sr_tcp_counters *out);
/* A connected socket's two ends, "ip:port" each ("" when unknown). */
void sr_sock_ends(int fd, char *local, char *remote, size_t size);
/* TCP_NOTSENT_LOWAT: the socket takes no more once `bytes` of what it
 * was given wait unsent (so poll says it can take data only when it can
 * send soon); best effort. */
void sr_sock_notsent_lowat(int fd, int bytes);
/* Sets the congestion control; -1 with why (what the kernel offers or
 * allows; why may be NULL) when it cannot. */
int sr_sock_set_congestion(int fd, const char *name, char *why,
    size_t why_size);
/* The socket's congestion control, "" when the kernel does not say. */
void sr_sock_get_congestion(int fd, char *buf, size_t size);
/* Whether name can be set on a TCP socket here (tried on one that never
 * connects); -1 with why when not. */
int sr_sock_check_congestion(const char *name, char *why, size_t why_size);

/* ------------------------------------------------------------------ I/O */

/*
 * The one non-blocking send and receive.  Every byte the core moves after
 * connect, in the handshake, the engine and teardown alike, goes through
 * these: EINTR is retried inside, SIGPIPE never raised, and "poll again"
 * is a return value, not an errno the caller must sort out.
 */
#define SR_IO_AGAIN (-1)	/* the socket is full (send) or empty (recv) */
#define SR_IO_EOF (-2)		/* recv: the peer closed its write side */
#define SR_IO_ERROR (-3)	/* errno says what */

/* Socket syscalls move at most this many bytes at once. */
#define SR_IO_MAX (4u << 20)

/* One sendmsg of iov: bytes sent (> 0), SR_IO_AGAIN or SR_IO_ERROR. */
ssize_t sr_io_send(int fd, const struct iovec *iov, int iovcnt);
/* One recv into buf: bytes read (> 0), SR_IO_AGAIN, SR_IO_EOF or
 * SR_IO_ERROR. */
ssize_t sr_io_recv(int fd, void *buf, size_t len);
/* sr_io_recv, but the bytes stay queued for the next reader (ring
 * formation looks at what a formed link's peer sent early). */
ssize_t sr_io_peek(int fd, void *buf, size_t len);
/* Writes buf until *done reaches len (*done counts across calls): 0 when
 * all went, else SR_IO_AGAIN or SR_IO_ERROR. */
int sr_io_flush(int fd, const void *buf, size_t len, size_t *done);
/* Reads into buf until *got reaches len (*got counts across calls): 0
 * when full, else SR_IO_AGAIN, SR_IO_EOF or SR_IO_ERROR. */
int sr_io_fill(int fd, void *buf, size_t len, size_t *got);

#endif
