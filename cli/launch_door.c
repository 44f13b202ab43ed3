/*
 * launch_door.c - the one port of `launch --hosts` that every host's
 * agent dials back.  A connection is a stranger until its first line, a
 * hello naming a host and proving that host's secret; then it is that
 * host's control connection.  Anything else, a second hello for a host
 * or silence past HOSTS_HELLO_NS, is dropped; at most
 * HOSTS_STRANGERS_MAX wait at once, so strangers cannot crowd the hosts
 * out for long.
 */
#include <arpa/inet.h>
#include <errno.h>
#include <netinet/in.h>
#include <stdio.h>
#include <string.h>
#include <sys/socket.h>
#include <unistd.h>

#include "cli.h"
#include "launch_hosts.h"

/* Every address, IPv6 and IPv4 both where the system has IPv6. */
static int
listen_any(uint16_t port)
{
	struct sockaddr_in6 a6 = { .sin6_family = AF_INET6,
	    .sin6_port = htons(port), .sin6_addr = IN6ADDR_ANY_INIT };
	struct sockaddr_in a4 = { .sin_family = AF_INET,
	    .sin_port = htons(port), .sin_addr.s_addr = htonl(INADDR_ANY) };
	int fd, off = 0, on = 1;

	fd = socket(AF_INET6, SOCK_STREAM | SOCK_NONBLOCK | SOCK_CLOEXEC, 0);
	if (fd >= 0 && (setsockopt(fd, IPPROTO_IPV6, IPV6_V6ONLY, &off,
	    sizeof(off)) != 0 || setsockopt(fd, SOL_SOCKET, SO_REUSEADDR, &on,
	    sizeof(on)) != 0 || bind(fd, (struct sockaddr *)&a6,
	    sizeof(a6)) != 0)) {
		close(fd);
		fd = -1;
	}
	if (fd < 0) {
		fd = socket(AF_INET, SOCK_STREAM | SOCK_NONBLOCK | SOCK_CLOEXEC,
		    0);
		if (fd >= 0 && (setsockopt(fd, SOL_SOCKET, SO_REUSEADDR, &on,
		    sizeof(on)) != 0 || bind(fd, (struct sockaddr *)&a4,
		    sizeof(a4)) != 0)) {
			close(fd);
			fd = -1;
		}
	}
	return fd;
}

int
launch_door_open(struct run *u)
{
	struct sockaddr_storage ss;
	socklen_t len = sizeof(ss);
	char host[SR_ADDR_MAX], why[SR_ADDR_MAX + 64];
	uint16_t port = 0;
	const char *a = u->o->launcher_address;

	if (a != NULL && strchr(a, ':') != NULL && sr_address_split(a, host,
	    sizeof(host), &port, why, sizeof(why)) != SR_ADDRESS_OK)
		return cli_usage_error("launch: --launcher-address: %s", why);
	if ((u->listener = listen_any(port)) < 0 ||
	    listen(u->listener, u->n < SOMAXCONN ? u->n + 8 : SOMAXCONN) != 0 ||
	    getsockname(u->listener, (struct sockaddr *)&ss, &len) != 0) {
		cli_error("launch: cannot listen for the hosts on port %u: %s",
		    (unsigned)port, strerror(errno));
		return EXIT_FORMATION;
	}
	u->port = ntohs(ss.ss_family == AF_INET6 ?
	    ((struct sockaddr_in6 *)&ss)->sin6_port :
	    ((struct sockaddr_in *)&ss)->sin_port);
	cli_status("launch: the hosts reach the launcher on port %u",
	    (unsigned)u->port);
	return 0;
}

static void
peer_name(const struct sockaddr_storage *ss, char *out, size_t size)
{
	char ip[INET6_ADDRSTRLEN] = "?";
	unsigned port = 0;

	if (ss->ss_family == AF_INET6) {
		const struct sockaddr_in6 *s6 = (const void *)ss;

		inet_ntop(AF_INET6, &s6->sin6_addr, ip, sizeof(ip));
		port = ntohs(s6->sin6_port);
		if (strncmp(ip, "::ffff:", 7) == 0 && strchr(ip + 7, '.')) {
			snprintf(out, size, "%s:%u", ip + 7, port);
			return;
		}
		snprintf(out, size, "[%s]:%u", ip, port);
		return;
	}
	if (ss->ss_family == AF_INET) {
		const struct sockaddr_in *s4 = (const void *)ss;

		inet_ntop(AF_INET, &s4->sin_addr, ip, sizeof(ip));
		port = ntohs(s4->sin_port);
	}
	snprintf(out, size, "%s:%u", ip, port);
}

void
launch_door_accept(struct run *u)
{
	struct sockaddr_storage ss;
	socklen_t len = sizeof(ss);
	int fd;

	while ((fd = accept4(u->listener, (struct sockaddr *)&ss, &len,
	    SOCK_NONBLOCK | SOCK_CLOEXEC)) >= 0) {
		struct stranger *s;

		if (u->nstrangers >= HOSTS_STRANGERS_MAX) {
			close(fd);
			u->rejected++;
			continue;
		}
		s = &u->strangers[u->nstrangers++];
		memset(s, 0, sizeof(*s));
		s->fd = fd;
		s->until = sr_clock_ns() + HOSTS_HELLO_NS;
		peer_name(&ss, s->from, sizeof(s->from));
		launch_keepalive_set(fd, u->o->keepalive);
		len = sizeof(ss);
	}
}

void
launch_door_drop(struct run *u, int i, const char *why)
{
	struct stranger *s = &u->strangers[i];

	if (why != NULL) {
		u->rejected++;
		cli_status("launch: rejected a connection from %s: %s", s->from,
		    why);
	}
	if (s->fd >= 0)
		close(s->fd);
	u->strangers[i] = u->strangers[--u->nstrangers];
}

/* A stranger's hello: a host's index and that host's secret. */
static void
door_hello(struct run *u, int i, const char *line, int64_t now)
{
	struct stranger *s = &u->strangers[i];
	struct launch_msg m;
	struct host *h;

	if (launch_msg_parse(line, &m) != 0 || m.kind != LAUNCH_MSG_HELLO) {
		launch_door_drop(u, i, "not a hello");
		return;
	}
	if (m.a != LAUNCH_WIRE_VERSION || m.b >= (uint32_t)u->n ||
	    !launch_secret_equal(m.text, u->host[m.b].secret)) {
		launch_door_drop(u, i, "wrong version, host or secret");
		return;
	}
	h = &u->host[m.b];
	if (h->state != HOST_CONNECTING || h->ctl >= 0) {
		launch_door_drop(u, i, "that host's agent answered already");
		return;
	}
	h->ctl = s->fd;
	h->ctl_in = s->in;
	s->fd = -1;
	launch_door_drop(u, i, NULL);
	launch_hosts_ready(u, h, now);
}

void
launch_door_read(struct run *u, int i, int64_t now)
{
	struct stranger *s = &u->strangers[i];
	char line[LAUNCH_MSG_MAX];
	int rc = wire_in_read(&s->in, s->fd), got;

	if (rc < 0 && errno == EAGAIN)
		return;
	got = wire_in_line(&s->in, line, sizeof(line));
	if (got > 0)
		door_hello(u, i, line, now);
	else if (got < 0)
		launch_door_drop(u, i, "a line too long");
	else if (rc <= 0)
		launch_door_drop(u, i, "closed before its hello");
}

void
launch_door_expire(struct run *u, int64_t now)
{
	for (int i = 0; i < u->nstrangers; i++)
		if (now >= u->strangers[i].until)
			launch_door_drop(u, i--, "no hello within 10s");
}
