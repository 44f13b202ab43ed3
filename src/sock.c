/*
 * sock.c - the socket layer: address text, resolution and socket options.
 * Knows nothing of ranks or frames.
 */
#include <arpa/inet.h>
#include <errno.h>
#include <fcntl.h>
#include <netdb.h>
#include <netinet/in.h>
#include <netinet/tcp.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "internal.h"

int
sr_sock_split(const char *address, char *host, size_t host_size,
    uint16_t *port, char *why, size_t why_size)
{
	const char *colon, *host_start = address, *host_end;
	char *end;
	unsigned long value;

	if (address[0] == '[') {
		host_end = strchr(address, ']');
		if (host_end == NULL || host_end[1] != ':') {
			snprintf(why, why_size, "'%s' is not [ipv6]:port", address);
			return -1;
		}
		host_start = address + 1;
		colon = host_end + 1;
	} else {
		colon = strrchr(address, ':');
		if (colon == NULL) {
			snprintf(why, why_size, "'%s' has no :port", address);
			return -1;
		}
		if (memchr(address, ':', (size_t)(colon - address)) != NULL) {
			snprintf(why, why_size,
			    "'%s' is ambiguous; write an IPv6 address as [ip]:port",
			    address);
			return -1;
		}
		host_end = colon;
	}
	if ((size_t)(host_end - host_start) == 0 ||
	    (size_t)(host_end - host_start) >= host_size) {
		snprintf(why, why_size, "'%s' has no usable host", address);
		return -1;
	}
	errno = 0;
	value = strtoul(colon + 1, &end, 10);
	if (colon[1] < '0' || colon[1] > '9' || *end != '\0' || errno != 0 ||
	    value > 65535) {
		snprintf(why, why_size, "'%s' has no valid port (0-65535)",
		    address);
		return -1;
	}
	memcpy(host, host_start, (size_t)(host_end - host_start));
	host[host_end - host_start] = '\0';
	*port = (uint16_t)value;
	return 0;
}

int
sr_sock_resolve(const char *host, uint16_t port, int passive,
    struct sr_sockaddr *out, char *why, size_t why_size)
{
	struct addrinfo hints, *res = NULL;
	char service[8], bare[SR_ADDR_MAX];
	size_t n = strlen(host);
	int rc;

	/* Accept "[::1]" as well as "::1". */
	if (n >= 2 && host[0] == '[' && host[n - 1] == ']' &&
	    n - 2 < sizeof(bare)) {
		memcpy(bare, host + 1, n - 2);
		bare[n - 2] = '\0';
		host = bare;
	}
	memset(&hints, 0, sizeof(hints));
	hints.ai_family = AF_UNSPEC;
	hints.ai_socktype = SOCK_STREAM;
	hints.ai_flags = AI_NUMERICSERV | (passive ? AI_PASSIVE : 0);
	snprintf(service, sizeof(service), "%u", port);
	rc = getaddrinfo(host, service, &hints, &res);
	if (rc != 0 || res == NULL) {
		snprintf(why, why_size, "cannot resolve '%s': %s", host,
		    rc != 0 ? gai_strerror(rc) : "no address");
		if (res != NULL)
			freeaddrinfo(res);
		return -1;
	}
	memcpy(&out->ss, res->ai_addr, res->ai_addrlen);
	out->len = res->ai_addrlen;
	freeaddrinfo(res);
	return 0;
}

void
sr_sock_format(const struct sr_sockaddr *addr, char *buf, size_t size)
{
	char ip[INET6_ADDRSTRLEN];

	if (addr->ss.ss_family == AF_INET6) {
		const struct sockaddr_in6 *in6 = (const void *)&addr->ss;

		inet_ntop(AF_INET6, &in6->sin6_addr, ip, sizeof(ip));
		snprintf(buf, size, "[%s]:%u", ip, ntohs(in6->sin6_port));
	} else if (addr->ss.ss_family == AF_INET) {
		const struct sockaddr_in *in4 = (const void *)&addr->ss;

		inet_ntop(AF_INET, &in4->sin_addr, ip, sizeof(ip));
		snprintf(buf, size, "%s:%u", ip, ntohs(in4->sin_port));
	} else {
		snprintf(buf, size, "(unknown address family %d)",
		    addr->ss.ss_family);
	}
}

bool
sr_sock_is_unspecified(const struct sr_sockaddr *addr)
{
	if (addr->ss.ss_family == AF_INET) {
		const struct sockaddr_in *in4 = (const void *)&addr->ss;

		return in4->sin_addr.s_addr == htonl(INADDR_ANY);
	}
	if (addr->ss.ss_family == AF_INET6) {
		const struct sockaddr_in6 *in6 = (const void *)&addr->ss;

		return IN6_IS_ADDR_UNSPECIFIED(&in6->sin6_addr);
	}
	return false;
}

bool
sr_sock_same_host(const struct sr_sockaddr *a, const struct sr_sockaddr *b)
{
	if (a->ss.ss_family != b->ss.ss_family)
		return false;
	if (a->ss.ss_family == AF_INET) {
		const struct sockaddr_in *x = (const void *)&a->ss;
		const struct sockaddr_in *y = (const void *)&b->ss;

		return x->sin_addr.s_addr == y->sin_addr.s_addr;
	}
	if (a->ss.ss_family == AF_INET6) {
		const struct sockaddr_in6 *x = (const void *)&a->ss;
		const struct sockaddr_in6 *y = (const void *)&b->ss;

		return IN6_ARE_ADDR_EQUAL(&x->sin6_addr, &y->sin6_addr);
	}
	return false;
}

int
sr_sock_nonblocking(int fd)
{
	int flags = fcntl(fd, F_GETFL);

	if (flags < 0)
		return -1;
	return fcntl(fd, F_SETFL, flags | O_NONBLOCK);
}

void
sr_sock_tune(int fd, int64_t timeout_ms)
{
	int one = 1;
	int idle, interval, count = 3;
	unsigned int user_timeout;

	setsockopt(fd, IPPROTO_TCP, TCP_NODELAY, &one, sizeof(one));
	/*
	 * A host that vanishes without a FIN or RST is otherwise noticed only
	 * after the kernel's retransmission limit (about 15 minutes): probe
	 * an idle link within the timeout, and cap how long sent data may
	 * stay unacknowledged.
	 */
	idle = (int)(timeout_ms / 2000);
	if (idle < 1)
		idle = 1;
	interval = (int)((timeout_ms / 1000 - idle) / count);
	if (interval < 1)
		interval = 1;
	setsockopt(fd, SOL_SOCKET, SO_KEEPALIVE, &one, sizeof(one));
	setsockopt(fd, IPPROTO_TCP, TCP_KEEPIDLE, &idle, sizeof(idle));
	setsockopt(fd, IPPROTO_TCP, TCP_KEEPINTVL, &interval, sizeof(interval));
	setsockopt(fd, IPPROTO_TCP, TCP_KEEPCNT, &count, sizeof(count));
	user_timeout = timeout_ms > 0xffffffffLL ? 0xffffffffu :
	    (unsigned int)timeout_ms;
	setsockopt(fd, IPPROTO_TCP, TCP_USER_TIMEOUT, &user_timeout,
	    sizeof(user_timeout));
}

/* The kernel's list in /proc/sys/net/ipv4/NAME, or "unknown". */
static void
proc_list(const char *name, char *buf, size_t size)
{
	char path[96];
	FILE *f;
	size_t n = 0;

	snprintf(path, sizeof(path), "/proc/sys/net/ipv4/%s", name);
	if ((f = fopen(path, "r")) != NULL) {
		n = fread(buf, 1, size - 1, f);
		fclose(f);
	}
	while (n > 0 && (buf[n - 1] == '\n' || buf[n - 1] == ' '))
		n--;
	buf[n] = '\0';
	if (n == 0)
		snprintf(buf, size, "unknown");
}

int
sr_sock_set_congestion(int fd, const char *name, char *why, size_t why_size)
{
	char list[256];
	int e;

	if (setsockopt(fd, IPPROTO_TCP, TCP_CONGESTION, name, strlen(name)) == 0)
		return 0;
	e = errno;
	if (why == NULL)
		return -1;
	if (e == ENOENT) {
		proc_list("tcp_available_congestion_control", list, sizeof(list));
		snprintf(why, why_size, "the kernel has no TCP congestion "
		    "control '%s' (it offers: %s)", name, list);
	} else if (e == EPERM) {
		proc_list("tcp_allowed_congestion_control", list, sizeof(list));
		snprintf(why, why_size, "TCP congestion control '%s' is not "
		    "allowed to unprivileged processes (allowed: %s)", name,
		    list);
	} else {
		snprintf(why, why_size, "TCP congestion control '%s': %s",
		    name, strerror(e));
	}
	return -1;
}

int
sr_sock_check_congestion(const char *name, char *why, size_t why_size)
{
	int fd, rc;

	if ((fd = socket(AF_INET, SOCK_STREAM | SOCK_CLOEXEC, 0)) < 0 &&
	    (fd = socket(AF_INET6, SOCK_STREAM | SOCK_CLOEXEC, 0)) < 0) {
		snprintf(why, why_size, "socket: %s", strerror(errno));
		return -1;
	}
	rc = sr_sock_set_congestion(fd, name, why, why_size);
	close(fd);
	return rc;
}

void
sr_sock_get_congestion(int fd, char *buf, size_t size)
{
	socklen_t len = (socklen_t)(size - 1);

	memset(buf, 0, size);
	if (getsockopt(fd, IPPROTO_TCP, TCP_CONGESTION, buf, &len) != 0)
		buf[0] = '\0';
}

void
sr_sock_buffers(int fd, int bytes)
{
	setsockopt(fd, SOL_SOCKET, SO_SNDBUF, &bytes, sizeof(bytes));
	setsockopt(fd, SOL_SOCKET, SO_RCVBUF, &bytes, sizeof(bytes));
}
