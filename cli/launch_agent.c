/*
 * launch_agent.c - `silvic-ring launch --agent`: what `launch --hosts`
 * runs on each host over ssh.  It reads its orders (and its secret) from
 * stdin, dials the launcher back and proves itself, waits to be told to
 * start, then starts its host's ranks with the rank engine
 * (launch_ranks.c), relays their addresses up and the whole list down,
 * and reports each rank's exit.  Its output is its ranks', tagged as the
 * launcher would; ssh carries it back.
 *
 * It never outlives the launcher: the end of its stdin (the ssh session)
 * or of its connection back (closed, or cut: kernel keepalives) stops
 * its ranks at once, SIGTERM then SIGKILL.  Should the loop be stuck
 * meanwhile, in a write to an ssh that no longer reads, a once-a-second
 * alarm looks at both descriptors itself and ends the agent, and its
 * ranks die with it (PR_SET_PDEATHSIG).
 */
#include <errno.h>
#include <fcntl.h>
#include <netdb.h>
#include <poll.h>
#include <signal.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <sys/time.h>
#include <unistd.h>

#include "cli.h"
#include "discover.h"
#include "launch.h"
#include "launch_wire.h"

#define ORDERS_IDLE_MS	30000	/* between two bytes of the orders */
#define FLUSH_NS	5000000000LL	/* for the last reports to leave */
#define WATCHDOG_TICKS	3	/* seconds the launcher may look gone to
				 * the alarm before it ends the agent */

struct agent {
	struct launch_orders orders;
	char *buf;		/* the orders as read */
	struct launch_job job;
	struct launch l;
	const char *name;
	int ctl;
	struct wire_in in;
	struct wire_out out;
	char *list;		/* the peers sent so far */
	size_t list_len;
	uint32_t peers;
	bool started, addresses_sent, status_sent, gone, stdin_done;
	int64_t flush_until;
	char bind[SR_ADDR_MAX];
};

/* ------------------------------------------------------------ watchdog */

static volatile int watched_ctl = -1;
static volatile sig_atomic_t watch_ticks;

static void
on_alarm(int sig)
{
	struct pollfd p[2] = { { .fd = watched_ctl, .events = POLLRDHUP },
	    { .fd = 0, .events = POLLRDHUP } };
	int saved = errno;
	bool gone = false;

	if (poll(p, 2, 0) > 0)
		gone = (p[0].revents & (POLLERR | POLLHUP | POLLRDHUP)) != 0 ||
		    (p[1].revents & (POLLERR | POLLHUP | POLLRDHUP)) != 0;
	watch_ticks = gone ? watch_ticks + 1 : 0;
	if (watch_ticks >= WATCHDOG_TICKS)
		_exit(EXIT_INTERRUPTED);
	errno = saved;
}

static void
watchdog_start(void)
{
	struct sigaction sa = { .sa_handler = on_alarm };
	struct itimerval every = { { 1, 0 }, { 1, 0 } };

	sigemptyset(&sa.sa_mask);
	/* Restarted: the loop's own calls need not see it. */
	sa.sa_flags = SA_RESTART;
	sigaction(SIGALRM, &sa, NULL);
	setitimer(ITIMER_REAL, &every, NULL);
}

/* ------------------------------------------------------------- orders */

/* Reads stdin until the orders are whole; 0, or an exit status. */
static int
orders_read(struct agent *a)
{
	size_t cap = 65536, len = 0, used;
	char why[200] = "", *grown;
	int rc;

	if ((a->buf = malloc(cap)) == NULL)
		goto nomem;
	for (;;) {
		struct pollfd p = { .fd = 0, .events = POLLIN };
		ssize_t n;

		if ((rc = launch_orders_complete(a->buf, len, &used, why,
		    sizeof(why))) != 0)
			break;
		if (len == cap) {
			cap *= 2;
			if ((grown = realloc(a->buf, cap)) == NULL)
				goto nomem;
			a->buf = grown;
		}
		if (poll(&p, 1, ORDERS_IDLE_MS) == 0) {
			cli_error("launch --agent: no orders on stdin for %ds "
			    "(it is what launch --hosts runs on each host)",
			    ORDERS_IDLE_MS / 1000);
			return EXIT_USAGE;
		}
		n = read(0, a->buf + len, cap - len);
		if (n < 0 && (errno == EINTR || errno == EAGAIN))
			continue;
		if (n <= 0) {
			cli_error("launch --agent: stdin ended before the orders "
			    "did%s", len == 0 ? " (it is what launch --hosts runs "
			    "on each host)" : "");
			return EXIT_USAGE;
		}
		len += (size_t)n;
	}
	if (rc < 0 || launch_orders_decode(a->buf, used, &a->orders, why,
	    sizeof(why)) != 0) {
		cli_error("launch --agent: bad orders: %s", why);
		return EXIT_USAGE;
	}
	a->name = a->orders.name;
	return 0;
nomem:
	cli_error("launch --agent: out of memory for the orders");
	return EXIT_INTERNAL;
}

static void
job_from_orders(struct agent *a)
{
	const struct launch_orders *o = &a->orders;
	struct launch_job *j = &a->job;

	memset(j, 0, sizeof(*j));
	j->world = (int)o->world;
	j->grace = o->grace;
	j->tag = o->tag;
	j->argv = o->argv;
	j->share_stdin = o->share_stdin;
	j->machine = o->machine;
	j->address_s = o->address_s;
	j->input = (char *)o->input;
	j->input_len = o->input_len;
	cli_verbosity = o->verbosity;
}

/* ---------------------------------------------------------- the launcher */

/*
 * Where the launcher is: the orders' HOST:PORT, or for ":PORT" the
 * address this ssh session came from.  The ranks bind this host's end of
 * that session (the address the launcher reached it at), else the name
 * the host list gives.
 */
static int
addresses(struct agent *a, char *host, size_t size, char *port,
    size_t port_size)
{
	char client[SR_ADDR_MAX], server[SR_ADDR_MAX], why[160];
	const char *l = a->orders.launcher;
	uint16_t p;
	bool ssh = discover_ssh_connection(client, sizeof(client), server,
	    sizeof(server)) == 0;

	snprintf(a->bind, sizeof(a->bind), "%s", ssh ? server :
	    hosts_bare_name(a->name));
	if (l[0] == ':') {
		if (!ssh) {
			cli_error("host %s: cannot tell where the launcher is: "
			    "SSH_CONNECTION is not set (is --ssh a remote shell "
			    "that sets it?); pass launch --launcher-address",
			    a->name);
			return EXIT_RENDEZVOUS;
		}
		snprintf(host, size, "%s", client);
		snprintf(port, port_size, "%s", l + 1);
		return 0;
	}
	if (sr_address_split(l, host, size, &p, why, sizeof(why)) !=
	    SR_ADDRESS_OK) {
		cli_error("host %s: the launcher's address: %s", a->name, why);
		return EXIT_USAGE;
	}
	snprintf(port, port_size, "%u", (unsigned)p);
	return 0;
}

/* One connection attempt to ai within deadline; the socket, or -1 with
 * *error. */
static int
dial_one(const struct addrinfo *ai, int64_t deadline, int *error)
{
	int fd = socket(ai->ai_family, SOCK_STREAM | SOCK_NONBLOCK |
	    SOCK_CLOEXEC, 0), soerr;
	socklen_t len = sizeof(soerr);

	if (fd < 0) {
		*error = errno;
		return -1;
	}
	if (connect(fd, ai->ai_addr, ai->ai_addrlen) == 0)
		return fd;
	*error = errno;
	while (*error == EINPROGRESS) {
		struct pollfd p = { .fd = fd, .events = POLLOUT };
		int64_t left = (deadline - sr_clock_ns()) / 1000000;

		if (left <= 0)
			*error = ETIMEDOUT;
		else if (poll(&p, 1, left > 1000 ? 1000 : (int)left) > 0)
			*error = getsockopt(fd, SOL_SOCKET, SO_ERROR, &soerr,
			    &len) != 0 ? errno : soerr;
	}
	if (*error == 0)
		return fd;
	close(fd);
	return -1;
}

static int
dial(struct agent *a)
{
	char host[SR_ADDR_MAX], port[16];
	struct addrinfo hints = { .ai_socktype = SOCK_STREAM,
	    .ai_flags = AI_NUMERICSERV }, *res = NULL;
	int64_t deadline = sr_clock_ns() +
	    (int64_t)(a->orders.connect_s * 1e9);
	int rc, error = 0;

	if ((rc = addresses(a, host, sizeof(host), port, sizeof(port))) != 0)
		return rc;
	if ((rc = getaddrinfo(host, port, &hints, &res)) != 0) {
		cli_error("host %s: cannot resolve the launcher's address %s: "
		    "%s", a->name, host, gai_strerror(rc));
		return EXIT_RENDEZVOUS;
	}
	a->ctl = -1;
	for (struct addrinfo *ai = res; ai != NULL && a->ctl < 0;
	    ai = ai->ai_next)
		a->ctl = dial_one(ai, deadline, &error);
	freeaddrinfo(res);
	if (a->ctl < 0) {
		cli_error("host %s: cannot reach the launcher at %s port %s: %s",
		    a->name, host, port, strerror(error));
		return EXIT_RENDEZVOUS;
	}
	launch_keepalive_set(a->ctl, a->orders.keepalive);
	watched_ctl = a->ctl;
	cli_status("host %s: reached the launcher at %s port %s", a->name, host,
	    port);
	return 0;
}

static void
put(struct agent *a, enum launch_msg_kind kind, uint32_t x, uint32_t y,
    const char *text)
{
	struct launch_msg m = { .kind = kind, .a = x, .b = y };

	if (text != NULL)
		snprintf(m.text, sizeof(m.text), "%s", text);
	if (launch_msg_put(&a->out, &m) != 0)
		cli_error("host %s: out of memory", a->name);
}

/* The launcher is gone: nobody is left to tell, so the ranks stop. */
static void
launcher_gone(struct agent *a, const char *why)
{
	if (a->gone)
		return;
	a->gone = true;
	if (!a->l.stopping || a->l.alive > 0)
		cli_error("host %s: the launcher is gone (%s); stopping %s",
		    a->name, why, launch_ranks_text(a->l.base, a->l.count));
	launch_ranks_stop(&a->l);
}

/* ------------------------------------------------------ what comes down */

static int
peer(struct agent *a, const char *address)
{
	size_t n = strlen(address);
	char *grown;

	if (a->peers >= a->orders.world)
		return -1;
	if ((grown = realloc(a->list, a->list_len + n + 2)) == NULL)
		return -1;
	a->list = grown;
	memcpy(a->list + a->list_len, address, n);
	a->list[a->list_len + n] = '\n';
	a->list_len += n + 1;
	a->peers++;
	return 0;
}

static int
list(struct agent *a, uint32_t world)
{
	if (world != a->orders.world || a->peers != world)
		return -1;
	a->list[a->list_len++] = '\n';
	return launch_ranks_set_list(&a->l, a->list, a->list_len);
}

static int
order(struct agent *a, const char *line)
{
	struct launch_msg m;

	if (launch_msg_parse(line, &m) != 0)
		return -1;
	switch (m.kind) {
	case LAUNCH_MSG_START:
		if (a->started || a->l.stopping)
			return a->started ? -1 : 0;
		a->started = true;
		cli_status("host %s: starting %s", a->name,
		    launch_ranks_text(a->l.base, a->l.count));
		launch_ranks_start(&a->l);
		return 0;
	case LAUNCH_MSG_PEER:
		return peer(a, m.text);
	case LAUNCH_MSG_LIST:
		return list(a, m.a);
	case LAUNCH_MSG_STOP:
		launch_ranks_stop(&a->l);
		return 0;
	case LAUNCH_MSG_ABANDON:
		launch_ranks_abandon(&a->l);
		return 0;
	default:
		return -1;
	}
}

static void
ctl_read(struct agent *a)
{
	char line[LAUNCH_MSG_MAX];
	int rc = wire_in_read(&a->in, a->ctl), got;

	if (rc < 0 && errno == EAGAIN)
		return;
	while ((got = wire_in_line(&a->in, line, sizeof(line))) > 0)
		if (order(a, line) != 0) {
			cli_error("host %s: the launcher sent '%.80s', which is "
			    "no order here", a->name, line);
			got = -1;
			break;
		}
	if (got < 0 || rc <= 0)
		launcher_gone(a, got < 0 ? "it broke the protocol" : rc == 0 ?
		    "it closed the connection" : errno == ETIMEDOUT ?
		    "no answer to keepalives" : strerror(errno));
}

static void
stdin_read(struct agent *a)
{
	char junk[256];
	ssize_t n = read(0, junk, sizeof(junk));

	if (n < 0 && (errno == EINTR || errno == EAGAIN))
		return;
	if (n <= 0) {
		a->stdin_done = true;
		launcher_gone(a, "the ssh session ended");
	}
}

/* -------------------------------------------------------- what goes up */

static void
report(struct agent *a)
{
	struct launch *l = &a->l;

	if (!a->addresses_sent && l->published == l->count) {
		a->addresses_sent = true;
		for (int r = 0; r < l->count; r++) {
			l->ranks[r].addr[l->ranks[r].addr_len - 1] = '\0';
			put(a, LAUNCH_MSG_ADDRESS, (uint32_t)(l->base + r), 0,
			    l->ranks[r].addr);
			l->ranks[r].addr[l->ranks[r].addr_len - 1] = '\n';
		}
	}
	for (int r = 0; r < l->started; r++)
		if (l->ranks[r].pid == 0 && !l->ranks[r].reported) {
			l->ranks[r].reported = true;
			put(a, LAUNCH_MSG_EXIT, (uint32_t)(l->base + r),
			    (uint32_t)l->ranks[r].status, NULL);
		}
	if (!a->status_sent && (l->status != 0 || l->bad_address)) {
		a->status_sent = true;
		put(a, LAUNCH_MSG_STATUS, (uint32_t)(l->status != 0 ? l->status :
		    EXIT_RENDEZVOUS), 0, NULL);
	}
	if (a->ctl >= 0 && !a->gone && wire_out_flush(&a->out, a->ctl) != 0)
		launcher_gone(a, strerror(errno));
}

/* ------------------------------------------------------------- the loop */

/* Done: every rank started is reaped and drained, and what there is to
 * say has left (or cannot: the launcher is gone, or FLUSH_NS is over). */
static bool
done(struct agent *a, int64_t now)
{
	bool ranks = a->started ? launch_ranks_finished(&a->l, now) :
	    a->l.stopping;

	if (!ranks)
		return false;
	if (a->gone || !wire_out_pending(&a->out))
		return true;
	if (a->flush_until == 0)
		a->flush_until = now + FLUSH_NS;
	return now >= a->flush_until;
}

static int
loop(struct agent *a)
{
	struct launch *l = &a->l;
	int64_t now = sr_clock_ns();

	while (!done(a, now)) {
		nfds_t n;
		int ms;

		launch_ranks_escalate(l, now);
		n = launch_ranks_watch(l);
		l->pfd[n] = (struct pollfd){ .fd = a->gone ? -1 : a->ctl,
		    .events = POLLIN | (wire_out_pending(&a->out) ? POLLOUT : 0) };
		l->pfd[n + 1] = (struct pollfd){ .fd = a->stdin_done ? -1 : 0,
		    .events = POLLIN };
		ms = launch_ranks_timeout(l, now);
		if (a->flush_until != 0 && (ms < 0 || ms > 100))
			ms = 100;
		if (poll(l->pfd, n + 2, ms) < 0 && errno != EINTR) {
			cli_error("host %s: poll: %s", a->name, strerror(errno));
			launch_ranks_stop(l);
			a->gone = true;
			for (nfds_t i = 0; i < n + 2; i++)
				l->pfd[i].revents = 0;
		}
		if (l->pfd[n].revents != 0 && !a->gone)
			ctl_read(a);
		if (l->pfd[n + 1].revents != 0)
			stdin_read(a);
		launch_ranks_dispatch(l);
		report(a);
		now = sr_clock_ns();
	}
	return launch_ranks_outcome(l);
}

int
launch_agent_main(void)
{
	struct agent a;
	int rc;

	memset(&a, 0, sizeof(a));
	a.ctl = -1;
	if ((rc = launch_signals_init()) != 0 || (rc = orders_read(&a)) != 0)
		goto out;
	job_from_orders(&a);
	/* From here on the end of stdin means the launcher is gone. */
	fcntl(0, F_SETFL, fcntl(0, F_GETFL) | O_NONBLOCK);
	watchdog_start();
	if ((rc = dial(&a)) != 0 ||
	    (rc = launch_ranks_init(&a.l, &a.job, (int)a.orders.base,
	    (int)a.orders.count, 2)) != 0)
		goto out;
	a.l.upstream = true;
	a.l.bind_host = a.bind;
	put(&a, LAUNCH_MSG_HELLO, LAUNCH_WIRE_VERSION, a.orders.host,
	    a.orders.secret);
	explicit_bzero(a.orders.secret, sizeof(a.orders.secret));
	rc = loop(&a);
out:
	launch_ranks_fini(&a.l);
	if (a.ctl >= 0)
		close(a.ctl);
	wire_out_free(&a.out);
	free(a.orders.argv);
	free(a.buf);
	free(a.list);
	return rc;
}
