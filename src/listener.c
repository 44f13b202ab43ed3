/*
 * listener.c - a bound, listening rank that has not joined its ring yet,
 * and the address it advertises.
 */
#include <errno.h>
#include <netinet/in.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <unistd.h>

#include "clock.h"
#include "error.h"
#include "listener.h"
#include "sock.h"

static int
advertised_address(struct sr_listener *l, const char *host,
    const char *advertise, uint16_t port, int64_t deadline,
    volatile int *cancel, struct sr_error *err)
{
	struct sr_sockaddr addr;
	char why[256];

	if (advertise == NULL || advertise[0] == '\0')
		advertise = host;
	if (sr_sock_resolve_within(advertise, port, 0, deadline, cancel, &addr,
		why, sizeof(why)) != 0) {
		sr_error_set(err, cancel != NULL && *cancel ? SR_EINTERRUPTED :
		    SR_ECONFIG, SR_PHASE_BIND,
		    "cannot advertise '%s': %s", advertise, why);
		return -1;
	}
	if (sr_sock_is_unspecified(&addr)) {
		sr_error_set(err, SR_ECONFIG, SR_PHASE_BIND,
		    "'%s' is not an address other ranks can reach; listen on it "
		    "but advertise this node's address (--advertise IP|IFNAME)",
		    advertise);
		return -1;
	}
	sr_sock_format(&addr, l->address, sizeof(l->address));
	return 0;
}

int
sr_listener_open(struct sr_listener **out, const char *host,
    const char *advertise, uint16_t port, struct sr_error *err)
{
	return sr_listener_open_within(out, host, advertise, port,
	    SR_RESOLVE_DEFAULT_MS, NULL, err);
}

/* A socket listening on host:port: its descriptor in *fd and its port
 * in *bound; -1 with err. */
static int
listen_socket(const char *host, uint16_t port, int64_t deadline,
    volatile int *cancel, int *fd, uint16_t *bound, struct sr_error *err)
{
	struct sr_sockaddr addr;
	char why[256], where[SR_ADDR_MAX];
	int one = 1;

	if (sr_sock_resolve_within(host, port, 1, deadline, cancel, &addr, why,
		sizeof(why)) != 0) {
		sr_error_set(err, cancel != NULL && *cancel ? SR_EINTERRUPTED :
		    SR_ECONFIG, SR_PHASE_BIND, "cannot listen on '%s': %s",
		    host, why);
		return -1;
	}
	sr_sock_format(&addr, where, sizeof(where));
	*fd = socket(addr.ss.ss_family, SOCK_STREAM | SOCK_CLOEXEC, 0);
	if (*fd < 0)
		return sr_error_set(err, SR_EBIND, SR_PHASE_BIND,
		    "creating a socket for %s: %s", where, strerror(errno));
	setsockopt(*fd, SOL_SOCKET, SO_REUSEADDR, &one, sizeof(one));
	if (bind(*fd, (struct sockaddr *)&addr.ss, addr.len) != 0 ||
	    listen(*fd, SOMAXCONN) != 0) {
		sr_error_set(err, SR_EBIND, SR_PHASE_BIND, "binding %s: %s",
		    where, strerror(errno));
		close(*fd);
		*fd = -1;
		return -1;
	}
	addr.len = sizeof(addr.ss);
	if (getsockname(*fd, (struct sockaddr *)&addr.ss, &addr.len) != 0) {
		sr_error_set(err, SR_EBIND, SR_PHASE_BIND,
		    "reading the bound port of %s: %s", where, strerror(errno));
		close(*fd);
		*fd = -1;
		return -1;
	}
	*bound = ntohs(addr.ss.ss_family == AF_INET6 ?
	    ((struct sockaddr_in6 *)&addr.ss)->sin6_port :
	    ((struct sockaddr_in *)&addr.ss)->sin_port);
	return 0;
}

int
sr_listener_open_within(struct sr_listener **out, const char *host,
    const char *advertise, uint16_t port, int64_t timeout_ms,
    volatile int *cancel, struct sr_error *err)
{
	int64_t deadline = sr_clock_ns() + (timeout_ms > 0 ? timeout_ms : 1) *
	    1000000LL;
	struct sr_listener *l;

	*out = NULL;
	sr_error_clear(err);
	if (host == NULL || host[0] == '\0')
		host = "127.0.0.1";
	l = calloc(1, sizeof(*l));
	if (l == NULL) {
		sr_error_set(err, SR_ENOMEM, SR_PHASE_BIND, "out of memory");
		return -1;
	}
	if (listen_socket(host, port, deadline, cancel, &l->fd, &l->port,
	    err) != 0) {
		free(l);
		return -1;
	}
	if (advertised_address(l, host, advertise, l->port, deadline, cancel,
		err) != 0) {
		sr_listener_close(l);
		return -1;
	}
	*out = l;
	return 0;
}

const char *
sr_listener_address(const struct sr_listener *listener)
{
	return listener->address;
}

uint16_t
sr_listener_port(const struct sr_listener *listener)
{
	return listener->port;
}

int
sr_listener_also(struct sr_listener *l, const char *host, uint16_t port,
    struct sr_error *err)
{
	uint16_t bound;

	sr_error_clear(err);
	if (l->nalso == SR_RING_STREAMS_MAX - 1)
		return sr_error_set(err, SR_ECONFIG, SR_PHASE_BIND, "a rank "
		    "listens on %d addresses at most", SR_RING_STREAMS_MAX);
	if (listen_socket(host, port, sr_clock_ns() + SR_RESOLVE_DEFAULT_MS *
	    1000000LL, NULL, &l->also[l->nalso], &bound, err) != 0)
		return -1;
	l->nalso++;
	return 0;
}

void
sr_listener_close(struct sr_listener *listener)
{
	if (listener == NULL)
		return;
	if (listener->fd >= 0)
		close(listener->fd);
	for (int i = 0; i < listener->nalso; i++)
		close(listener->also[i]);
	free(listener);
}
