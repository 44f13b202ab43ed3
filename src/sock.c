/*
 * sock.c - the socket layer: address text, resolution, socket options, and
 * the non-blocking send and receive all of the core's I/O goes through.
 * Knows nothing of ranks or frames.
 */
#include <arpa/inet.h>
#include <errno.h>
#include <fcntl.h>
#include <ifaddrs.h>
#include <netdb.h>
#include <netinet/in.h>
#include <netinet/tcp.h>
#include <poll.h>
#include <pthread.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

#include "clock.h"
#include "sock.h"

/* What sr_address_split says of each fault, after the quoted address. */
static const char *const address_faults[] = {
	[SR_ADDRESS_BRACKETS] = "is not [ipv6]:port",
	[SR_ADDRESS_NO_PORT] = "has no :port",
	[SR_ADDRESS_AMBIGUOUS] =
	    "is ambiguous; write an IPv6 address as [ip]:port",
	[SR_ADDRESS_NO_HOST] = "has no usable host",
	[SR_ADDRESS_PORT] = "has no valid port (0-65535)",
};

static enum sr_address_fault
address_fault(enum sr_address_fault fault, const char *address, char *why,
    size_t why_size)
{
	if (why != NULL)
		snprintf(why, why_size, "'%s' %s", address,
		    address_faults[fault]);
	return fault;
}

enum sr_address_fault
sr_address_split(const char *address, char *host, size_t host_size,
    uint16_t *port, char *why, size_t why_size)
{
	const char *colon, *host_start = address, *host_end;
	size_t host_len;
	char *end;
	unsigned long value;

	if (address[0] == '[') {
		host_end = strchr(address, ']');
		if (host_end == NULL || host_end[1] != ':')
			return address_fault(SR_ADDRESS_BRACKETS, address, why,
			    why_size);
		host_start = address + 1;
		colon = host_end + 1;
	} else {
		colon = strrchr(address, ':');
		if (colon == NULL)
			return address_fault(SR_ADDRESS_NO_PORT, address, why,
			    why_size);
		if (memchr(address, ':', (size_t)(colon - address)) != NULL)
			return address_fault(SR_ADDRESS_AMBIGUOUS, address, why,
			    why_size);
		host_end = colon;
	}
	host_len = (size_t)(host_end - host_start);
	if (host_len == 0 || (host != NULL && host_len >= host_size))
		return address_fault(SR_ADDRESS_NO_HOST, address, why, why_size);
	errno = 0;
	value = strtoul(colon + 1, &end, 10);
	if (colon[1] < '0' || colon[1] > '9' || *end != '\0' || errno != 0 ||
	    value > 65535)
		return address_fault(SR_ADDRESS_PORT, address, why, why_size);
	if (host != NULL) {
		memcpy(host, host_start, host_len);
		host[host_len] = '\0';
	}
	if (port != NULL)
		*port = (uint16_t)value;
	return SR_ADDRESS_OK;
}

/* The core's form of sr_address_split: 0 or -1. */
int
sr_sock_split(const char *address, char *host, size_t host_size,
    uint16_t *port, char *why, size_t why_size)
{
	return sr_address_split(address, host, host_size, port, why,
	    why_size) == SR_ADDRESS_OK ? 0 : -1;
}

int (*sr_sock_getaddrinfo)(const char *node, const char *service,
    const struct addrinfo *hints, struct addrinfo **res) = getaddrinfo;

/* Backoff between attempts after a transient failure (ms). */
#define RESOLVE_BACKOFF_FIRST_MS 100
#define RESOLVE_BACKOFF_MAX_MS 1000
/* How often a wait for the resolver looks at the cancel flag (ms). */
#define RESOLVE_TICK_MS 100

/*
 * One lookup in a helper thread.  The waiter may give up at its deadline
 * while getaddrinfo still runs: both hold a reference, and the last one
 * out frees the lookup (and its answer).
 */
struct lookup {
	pthread_mutex_t lock;
	pthread_cond_t done_cond;
	int refs;
	bool done;
	int rc;
	struct addrinfo hints, *res;
	char host[SR_ADDR_MAX], service[8];
};

static void
lookup_release(struct lookup *l)
{
	bool last;

	pthread_mutex_lock(&l->lock);
	last = --l->refs == 0;
	pthread_mutex_unlock(&l->lock);
	if (!last)
		return;
	if (l->res != NULL)
		freeaddrinfo(l->res);
	pthread_cond_destroy(&l->done_cond);
	pthread_mutex_destroy(&l->lock);
	free(l);
}

static void *
lookup_run(void *arg)
{
	struct lookup *l = arg;
	struct addrinfo *res = NULL;
	int rc = sr_sock_getaddrinfo(l->host, l->service, &l->hints, &res);

	pthread_mutex_lock(&l->lock);
	l->rc = rc;
	l->res = rc == 0 ? res : NULL;
	l->done = true;
	pthread_cond_signal(&l->done_cond);
	pthread_mutex_unlock(&l->lock);
	lookup_release(l);
	return NULL;
}

/*
 * One attempt within the deadline: 0 with *out, a getaddrinfo error
 * code, or 1 when the resolver did not answer in time (or was cancelled:
 * *cancelled then).
 */
static int
lookup_once(const char *host, const char *service,
    const struct addrinfo *hints, int64_t deadline_ns, volatile int *cancel,
    struct sr_sockaddr *out, bool *cancelled)
{
	struct lookup *l = calloc(1, sizeof(*l));
	pthread_condattr_t attr;
	pthread_attr_t tattr;
	pthread_t thread;
	sigset_t all, saved;
	struct timespec ts;
	int rc = EAI_MEMORY, started;

	if (l == NULL)
		return EAI_MEMORY;
	if (cancel != NULL && *cancel) {
		free(l);
		*cancelled = true;
		return 1;
	}
	snprintf(l->host, sizeof(l->host), "%s", host);
	snprintf(l->service, sizeof(l->service), "%s", service);
	l->hints = *hints;
	l->refs = 2;
	pthread_mutex_init(&l->lock, NULL);
	pthread_condattr_init(&attr);
	pthread_condattr_setclock(&attr, CLOCK_MONOTONIC);
	pthread_cond_init(&l->done_cond, &attr);
	pthread_condattr_destroy(&attr);
	pthread_attr_init(&tattr);
	pthread_attr_setdetachstate(&tattr, PTHREAD_CREATE_DETACHED);
	/* The helper blocks every signal, so that a SIGINT wakes the caller's
	 * waits (EINTR), not a thread stuck in the resolver. */
	sigfillset(&all);
	pthread_sigmask(SIG_SETMASK, &all, &saved);
	started = pthread_create(&thread, &tattr, lookup_run, l);
	pthread_sigmask(SIG_SETMASK, &saved, NULL);
	pthread_attr_destroy(&tattr);
	if (started != 0) {
		l->refs = 1;
		lookup_release(l);
		return EAI_SYSTEM;
	}
	pthread_mutex_lock(&l->lock);
	while (!l->done) {
		int64_t now = sr_clock_ns(), until = now +
		    RESOLVE_TICK_MS * 1000000LL;

		if (cancel != NULL && *cancel) {
			*cancelled = true;
			break;
		}
		if (now >= deadline_ns)
			break;
		if (until > deadline_ns)
			until = deadline_ns;
		ts.tv_sec = (time_t)(until / 1000000000);
		ts.tv_nsec = (long)(until % 1000000000);
		pthread_cond_timedwait(&l->done_cond, &l->lock, &ts);
	}
	if (!l->done) {
		rc = 1;
	} else if ((rc = l->rc) == 0) {
		memcpy(&out->ss, l->res->ai_addr, l->res->ai_addrlen);
		out->len = l->res->ai_addrlen;
	}
	pthread_mutex_unlock(&l->lock);
	lookup_release(l);
	return rc;
}

int
sr_sock_resolve_within(const char *host, uint16_t port, int passive,
    int64_t deadline_ns, volatile int *cancel, struct sr_sockaddr *out,
    char *why, size_t why_size)
{
	struct addrinfo hints, *res = NULL;
	char service[8], bare[SR_ADDR_MAX], tries[96];
	size_t n = strlen(host);
	int64_t started = sr_clock_ns();
	int rc, attempts = 0, delay = RESOLVE_BACKOFF_FIRST_MS;
	bool cancelled = false;

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
	hints.ai_flags = AI_NUMERICSERV | AI_NUMERICHOST |
	    (passive ? AI_PASSIVE : 0);
	snprintf(service, sizeof(service), "%u", port);
	/* An address needs no resolver and never waits. */
	if (getaddrinfo(host, service, &hints, &res) == 0 && res != NULL) {
		memcpy(&out->ss, res->ai_addr, res->ai_addrlen);
		out->len = res->ai_addrlen;
		freeaddrinfo(res);
		return 0;
	}
	if (res != NULL)
		freeaddrinfo(res);
	hints.ai_flags &= ~AI_NUMERICHOST;
	for (;;) {
		attempts++;
		rc = lookup_once(host, service, &hints, deadline_ns, cancel, out,
		    &cancelled);
		if (rc == 0)
			return 0;
		if (rc != EAI_AGAIN || sr_clock_ns() >= deadline_ns)
			break;
		/* A transient failure (the name server did not answer):
		 * again after a backoff, in ticks that see the cancel flag. */
		for (int left = delay; left > 0 && !cancelled &&
		    sr_clock_ns() < deadline_ns; left -= RESOLVE_TICK_MS) {
			if (cancel != NULL && *cancel)
				cancelled = true;
			else
				poll(NULL, 0, left < RESOLVE_TICK_MS ? left :
				    RESOLVE_TICK_MS);
		}
		if (cancelled || sr_clock_ns() >= deadline_ns)
			break;
		delay = delay * 2 > RESOLVE_BACKOFF_MAX_MS ?
		    RESOLVE_BACKOFF_MAX_MS : delay * 2;
	}
	tries[0] = '\0';
	if (attempts > 1)
		snprintf(tries, sizeof(tries), " (tried %d times in %.1fs)",
		    attempts, (double)(sr_clock_ns() - started) / 1e9);
	if (cancelled)
		snprintf(why, why_size, "interrupted while resolving '%s'", host);
	else if (rc == 1)
		snprintf(why, why_size, "cannot resolve '%s': the resolver did "
		    "not answer within %.1fs%s", host,
		    (double)(sr_clock_ns() - started) / 1e9, tries);
	else
		snprintf(why, why_size, "cannot resolve '%s': %s%s", host,
		    rc == EAI_SYSTEM ? strerror(errno) : gai_strerror(rc),
		    tries);
	return -1;
}

int
sr_sock_resolve(const char *host, uint16_t port, int passive,
    struct sr_sockaddr *out, char *why, size_t why_size)
{
	return sr_sock_resolve_within(host, port, passive, sr_clock_ns() +
	    SR_RESOLVE_DEFAULT_MS * 1000000LL, NULL, out, why, why_size);
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

/* The interface whose address is addr's IP, into name. */
static void
iface_of(const struct sr_sockaddr *addr, char *name, size_t size)
{
	struct ifaddrs *ifs, *i;

	name[0] = '\0';
	if (getifaddrs(&ifs) != 0)
		return;
	for (i = ifs; i != NULL; i = i->ifa_next) {
		struct sr_sockaddr a = { .len = sizeof(a.ss) };

		if (i->ifa_addr == NULL || (i->ifa_addr->sa_family != AF_INET &&
		    i->ifa_addr->sa_family != AF_INET6))
			continue;
		memcpy(&a.ss, i->ifa_addr, i->ifa_addr->sa_family == AF_INET ?
		    sizeof(struct sockaddr_in) : sizeof(struct sockaddr_in6));
		if (sr_sock_same_host(&a, addr)) {
			snprintf(name, size, "%s", i->ifa_name);
			break;
		}
	}
	freeifaddrs(ifs);
}

void
sr_sock_path_info(int fd, struct sr_path_info *info)
{
	struct sr_sockaddr local = { .len = sizeof(local.ss) };
	struct tcp_info ti;
	socklen_t len = sizeof(ti);
	int mtu = 0;

	memset(info, 0, sizeof(*info));
	if (getsockopt(fd, IPPROTO_TCP, TCP_INFO, &ti, &len) == 0) {
		info->rtt_us = ti.tcpi_rtt;
		info->rtt_var_us = ti.tcpi_rttvar;
	}
	if (getsockname(fd, (struct sockaddr *)&local.ss, &local.len) != 0)
		return;
	len = sizeof(mtu);
	if (getsockopt(fd, local.ss.ss_family == AF_INET6 ? IPPROTO_IPV6 :
	    IPPROTO_IP, local.ss.ss_family == AF_INET6 ? IPV6_MTU : IP_MTU,
	    &mtu, &len) == 0 && mtu > 0)
		info->mtu = (uint32_t)mtu;
	sr_sock_format(&local, info->local, sizeof(info->local));
	iface_of(&local, info->iface, sizeof(info->iface));
}

void
sr_sock_tcp_counters(int fd, struct sr_tcp_counters *out)
{
	struct tcp_info ti;
	socklen_t len = sizeof(ti);

	memset(out, 0, sizeof(*out));
	if (getsockopt(fd, IPPROTO_TCP, TCP_INFO, &ti, &len) != 0)
		return;
	out->retransmits = ti.tcpi_total_retrans;
	out->rtt_us = ti.tcpi_rtt;
	out->cwnd = ti.tcpi_snd_cwnd;
	out->mss = ti.tcpi_snd_mss;
}

void
sr_sock_ends(int fd, char *local, char *remote, size_t size)
{
	struct sr_sockaddr a = { .len = sizeof(a.ss) };

	local[0] = remote[0] = '\0';
	if (getsockname(fd, (struct sockaddr *)&a.ss, &a.len) == 0)
		sr_sock_format(&a, local, size);
	a.len = sizeof(a.ss);
	if (getpeername(fd, (struct sockaddr *)&a.ss, &a.len) == 0)
		sr_sock_format(&a, remote, size);
}

void
sr_sock_notsent_lowat(int fd, int bytes)
{
	setsockopt(fd, IPPROTO_TCP, TCP_NOTSENT_LOWAT, &bytes, sizeof(bytes));
}

/* ------------------------------------------------------------------ I/O */

ssize_t
sr_io_send(int fd, const struct iovec *iov, int iovcnt)
{
	struct msghdr msg = { .msg_iov = (struct iovec *)iov,
		.msg_iovlen = (size_t)iovcnt };

	for (;;) {
		ssize_t n = sendmsg(fd, &msg, MSG_NOSIGNAL | MSG_DONTWAIT);

		if (n > 0)
			return n;
		if (n < 0 && errno == EINTR)
			continue;
		if (n < 0 && (errno == EAGAIN || errno == EWOULDBLOCK))
			return SR_IO_AGAIN;
		if (n == 0)
			errno = EPIPE;	/* nothing to send is a caller's bug */
		return SR_IO_ERROR;
	}
}

static ssize_t
receive(int fd, void *buf, size_t len, int flags)
{
	for (;;) {
		ssize_t n = recv(fd, buf, len, flags | MSG_DONTWAIT);

		if (n > 0)
			return n;
		if (n == 0)
			return SR_IO_EOF;
		if (errno == EINTR)
			continue;
		if (errno == EAGAIN || errno == EWOULDBLOCK)
			return SR_IO_AGAIN;
		return SR_IO_ERROR;
	}
}

ssize_t
sr_io_recv(int fd, void *buf, size_t len)
{
	return receive(fd, buf, len, 0);
}

ssize_t
sr_io_peek(int fd, void *buf, size_t len)
{
	return receive(fd, buf, len, MSG_PEEK);
}

int
sr_io_flush(int fd, const void *buf, size_t len, size_t *done)
{
	while (*done < len) {
		struct iovec iov = { .iov_base = (uint8_t *)buf + *done,
			.iov_len = len - *done };
		ssize_t n = sr_io_send(fd, &iov, 1);

		if (n < 0)
			return (int)n;
		*done += (size_t)n;
	}
	return 0;
}

int
sr_io_fill(int fd, void *buf, size_t len, size_t *got)
{
	while (*got < len) {
		ssize_t n = sr_io_recv(fd, (uint8_t *)buf + *got, len - *got);

		if (n < 0)
			return (int)n;
		*got += (size_t)n;
	}
	return 0;
}
