/*
 * serve_conns.h - `serve`'s request deadline: each connection must
 * deliver each request (headers and body) within a timeout of connecting
 * or of its previous answer; one that does not is shut down.
 * libmicrohttpd 0.9.75 has no such deadline (its connection timeout
 * restarts with every byte, so a client could trickle a header for
 * hours), and bearer authentication can only run once the headers are
 * in.  Owns its list and its lock; knows nothing of jobs.
 */
#ifndef SR_SERVE_CONNS_H
#define SR_SERVE_CONNS_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include <microhttpd.h>

struct serve_conns;

/* A list with that timeout, or NULL on ENOMEM. */
struct serve_conns *serve_conns_new(int64_t timeout_ns);
/* After the daemon stopped (every connection was closed). */
void serve_conns_free(struct serve_conns *g);

/*
 * The MHD_OPTION_NOTIFY_CONNECTION callback (cls: the list): tracks a
 * connection from its start to its close.  A connection it had no memory
 * for is not tracked, and keeps only libmicrohttpd's idle timeout.
 */
void serve_conns_notify(void *cls, struct MHD_Connection *c,
    void **socket_context, enum MHD_ConnectionNotificationCode toe);

/* A whole request has arrived on c (busy: answering it or holding it
 * waiting, no deadline), or its answer went out (the clock restarts). */
void serve_conns_busy(struct serve_conns *g, struct MHD_Connection *c,
    bool busy);

/*
 * Shuts down (SHUT_RDWR) each connection that is not busy and has had
 * the timeout since it started or was last answered, so that
 * libmicrohttpd's thread sees the end of the stream and closes it;
 * returns how many.  Safe from any thread: libmicrohttpd calls the
 * notify callback before it closes a socket, and the callback takes the
 * connection off the list under the same lock.
 */
size_t serve_conns_cut_late(struct serve_conns *g, int64_t now);

#endif
