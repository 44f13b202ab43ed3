/*
 * launch_ssh.c - `launch --hosts/--hostfile`: one ssh per host, each
 * starting that host's agent (`silvic-ring launch --agent`), which
 * starts the host's ranks (launch_agent.c).
 *
 * The launcher is the rendezvous: it listens on one port, hands each
 * agent over ssh's stdin (never a command line, never a file) its orders
 * and a secret of its own, and each agent dials back and proves it with
 * that secret.  No rank starts anywhere until every host's agent has
 * answered, so a host that cannot be reached costs nothing but its
 * message.  Then the agents relay their ranks' addresses, the launcher
 * sends every agent the whole list, and the agents report each rank's
 * exit.  The first failure stops the job: after the grace period every
 * agent is told to stop (SIGTERM, SIGKILL a second later); an agent that
 * does not end soon after has its ssh killed, which ends it on its host.
 *
 * The control connections carry TCP keepalives (--keepalive), answered
 * by the kernels, so a host whose network is cut is found gone even
 * while this process waits on a slow reader of its stdout.  Nothing here
 * touches the core.
 */
#include <arpa/inet.h>
#include <errno.h>
#include <fcntl.h>
#include <limits.h>
#include <netdb.h>
#include <netinet/in.h>
#include <netinet/tcp.h>
#include <poll.h>
#include <stdlib.h>
#include <string.h>
#include <sys/prctl.h>
#include <sys/socket.h>
#include <sys/wait.h>
#include <unistd.h>

#include "cli.h"
#include "hosts.h"
#include "launch.h"
#include "launch_wire.h"
#include "rendezvous.h"

#define NS		1000000000LL
#define ANSWER_SLACK_NS	(10 * NS)	/* past the connect timeout, for
					 * ssh's handshake and the agent */
#define HELLO_NS	(10 * NS)	/* a connection's first line */
#define STOP_NS		(5 * NS)	/* an agent told to stop ends by then */
#define DRAIN_NS	NS		/* output an exited ssh holds open */
#define STRANGERS_MAX	64		/* unproven connections at once */
#define EARLY_MAX	4096		/* what ssh says before the agent */

enum host_state {
	HOST_WAITING,		/* its ssh not started yet */
	HOST_CONNECTING,	/* ssh started, the agent has not answered */
	HOST_FAILED,		/* named unreachable; its ssh is ending */
	HOST_READY,		/* the agent answered with its secret */
	HOST_STARTED		/* told to start its ranks */
};

struct host {
	const char *name;
	int index, base, count;
	enum host_state state;
	pid_t pid;		/* ssh's; 0 before it starts and once reaped */
	bool spawned;
	int status;		/* ssh's exit status, once reaped */
	char secret[LAUNCH_SECRET_HEX + 1];
	int in;			/* ssh's stdin: the orders */
	struct wire_out orders;
	int orders_part;	/* 0 the records, 1 the input, 2 the trailer */
	size_t part_off;
	struct launch_stream out, err;
	char early[EARLY_MAX];	/* ssh's stderr until the agent answers */
	size_t early_len;
	int ctl;		/* the agent's connection back, -1 */
	struct wire_in ctl_in;
	struct wire_out ctl_out;
	bool ctl_closed;	/* the agent closed it */
	int exited;		/* ranks whose exit it reported */
	bool told_stop;
	int64_t spawned_at, stop_sent_at;
};

struct stranger {
	int fd;
	struct wire_in in;
	int64_t until;
	char from[SR_ADDR_MAX];
};

struct run {
	struct launch_remote *o;
	struct launch_job *job;
	struct host *host;
	int n;
	char **ssh;		/* the command, then host and remote command */
	int ssh_words;
	char *remote;		/* the remote command line */
	int listener;
	uint16_t port;
	struct stranger *strangers;
	int nstrangers;
	unsigned long rejected;
	int next, connecting, ready, unreachable;
	bool started;
	int exits;		/* ranks whose exit came */
	char **addr;		/* every rank's address, once published */
	int published;
	bool list_sent, abandoned;
	int status;
	bool interrupted, stopping, broken_pipe, bad_output;
	int64_t began, stop_at, kill_ssh_at, address_at, drain_at;
	struct pollfd *pfd;
	struct rlimit nofile;
};

static void
close_fd(int *fd)
{
	if (*fd >= 0)
		close(*fd);
	*fd = -1;
}

/* "rank 3" or "ranks 4-7": a host's ranks, for messages. */
static const char *
ranks_text(const struct host *h)
{
	static char buf[48];

	if (h->count == 1)
		snprintf(buf, sizeof(buf), "rank %d", h->base);
	else
		snprintf(buf, sizeof(buf), "ranks %d-%d", h->base,
		    h->base + h->count - 1);
	return buf;
}

/* ------------------------------------------------------------- the plan */

static int
load_hostfile(struct launch_remote *o)
{
	char why[600], *text;
	size_t len;
	int rc;

	if ((text = cli_read_file(o->hostfile, false, NULL, &len, why,
	    sizeof(why))) == NULL)
		return cli_usage_error("launch: --hostfile '%s': %s",
		    o->hostfile, why);
	rc = hosts_parse_file(text, len, o->hostfile, &o->list, why,
	    sizeof(why));
	free(text);
	return rc == 0 ? 0 : cli_usage_error("launch: --hostfile %s", why);
}

int
launch_hosts_plan(struct launch_remote *o, int *world)
{
	char why[600];
	int left;

	if (o->hosts != NULL && hosts_parse(o->hosts, "--hosts", &o->list, why,
	    sizeof(why)) != 0)
		return cli_usage_error("launch: %s", why);
	if (o->hostfile != NULL && load_hostfile(o) != 0)
		return EXIT_USAGE;
	if (o->list.slots > LIST_MAX_RANKS && *world == 0)
		return cli_usage_error("launch: the hosts have %llu slots, more "
		    "than the %d ranks a ring can have; pass -n",
		    (unsigned long long)o->list.slots, LIST_MAX_RANKS);
	if (*world == 0)
		*world = (int)o->list.slots;
	if ((uint64_t)*world > o->list.slots)
		return cli_usage_error("launch: -n %d is more than the %llu "
		    "slot(s) of the %zu host(s) given", *world,
		    (unsigned long long)o->list.slots, o->list.n);
	if ((o->ranks = calloc(o->list.n, sizeof(*o->ranks))) == NULL) {
		cli_error("out of memory");
		return EXIT_INTERNAL;
	}
	left = *world;
	for (size_t i = 0; i < o->list.n && left > 0; i++) {
		o->ranks[i] = (int)o->list.host[i].slots < left ?
		    (int)o->list.host[i].slots : left;
		left -= o->ranks[i];
		if (o->ranks[i] > o->busiest)
			o->busiest = o->ranks[i];
	}
	return 0;
}

void
launch_hosts_fini(struct launch_remote *o)
{
	host_list_free(&o->list);
	free(o->ranks);
	o->ranks = NULL;
}

/* ------------------------------------------------------------ ssh itself */

/* 'text' for a POSIX shell: the remote side runs the command line through
 * the user's login shell. */
static int
shell_quote(char **out, size_t *len, const char *text)
{
	size_t need = 3;
	char *p;

	for (const char *q = text; *q; q++)
		need += *q == '\'' ? 4 : 1;
	if ((p = realloc(*out, *len + need + 1)) == NULL)
		return -1;
	*out = p;
	p += *len;
	*p++ = '\'';
	for (const char *q = text; *q; q++)
		if (*q == '\'') {
			memcpy(p, "'\\''", 4);
			p += 4;
		} else {
			*p++ = *q;
		}
	*p++ = '\'';
	*p++ = ' ';
	*p = '\0';
	*len += need;
	return 0;
}

/* The path of this binary, which the hosts run unless --remote-path. */
static char *
self_path(void)
{
	char buf[PATH_MAX];
	ssize_t n = readlink("/proc/self/exe", buf, sizeof(buf) - 1);

	if (n <= 0)
		return NULL;
	buf[n] = '\0';
	return strdup(buf);
}

/*
 * The ssh command: --ssh's words (or "ssh"), to ssh itself the options
 * that keep it from ever asking or hanging (after the user's, so that
 * theirs win: ssh takes an option's first value), then the host and the
 * remote command, filled in per host.
 */
static int
ssh_command(struct run *u)
{
	const char *cmd = u->o->ssh != NULL ? u->o->ssh : "ssh";
	char *copy = strdup(cmd), *save = NULL, *w, *path, timeout[64];
	size_t len = 0;
	int n = 0;

	path = u->o->remote_path != NULL ? strdup(u->o->remote_path) :
	    self_path();
	u->ssh = calloc(strlen(cmd) / 2 + 10, sizeof(*u->ssh));
	if (copy == NULL || path == NULL || u->ssh == NULL)
		goto nomem;
	for (w = strtok_r(copy, " \t", &save); w != NULL;
	    w = strtok_r(NULL, " \t", &save))
		if ((u->ssh[n++] = strdup(w)) == NULL)
			goto nomem;
	w = strrchr(u->ssh[0], '/');
	if (strcmp(w != NULL ? w + 1 : u->ssh[0], "ssh") == 0) {
		snprintf(timeout, sizeof(timeout), "ConnectTimeout=%d",
		    (int)(u->o->connect_timeout + 0.999));
		const char *add[] = { "-o", "BatchMode=yes", "-o", timeout };

		for (size_t i = 0; i < 4; i++)
			if ((u->ssh[n++] = strdup(add[i])) == NULL)
				goto nomem;
	}
	u->ssh_words = n;
	if ((u->remote = strdup("exec ")) == NULL)
		goto nomem;
	len = strlen(u->remote);
	if (shell_quote(&u->remote, &len, path) != 0 ||
	    (u->remote = realloc(u->remote, len + 16)) == NULL)
		goto nomem;
	strcpy(u->remote + len, "launch --agent");
	free(copy);
	free(path);
	return 0;
nomem:
	free(copy);
	free(path);
	cli_error("out of memory");
	return EXIT_INTERNAL;
}

static void __attribute__((noreturn))
ssh_child(struct run *u, struct host *h, int *fds, pid_t launcher,
    sigset_t *mask)
{
	char **argv = u->ssh;

	/* Dies with the launcher, even one killed before this line; its
	 * host's agent then sees its stdin end and stops the ranks. */
	if (prctl(PR_SET_PDEATHSIG, SIGKILL) != 0 || getppid() != launcher)
		_exit(EXIT_INTERNAL);
	/* Its own process group: a ^C at the terminal is the launcher's to
	 * handle (an orderly stop), not a dropped connection. */
	setpgid(0, 0);
	signal(SIGINT, SIG_DFL);
	signal(SIGTERM, SIG_DFL);
	signal(SIGCHLD, SIG_DFL);
	signal(SIGPIPE, SIG_DFL);
	sigprocmask(SIG_SETMASK, mask, NULL);
	argv[u->ssh_words] = (char *)h->name;
	argv[u->ssh_words + 1] = u->remote;
	argv[u->ssh_words + 2] = NULL;
	if (dup2(fds[0], 0) < 0 || dup2(fds[3], 1) < 0 || dup2(fds[5], 2) < 0)
		_exit(EXIT_INTERNAL);
	setrlimit(RLIMIT_NOFILE, &u->nofile);
	execvp(argv[0], argv);
	dprintf(2, "cannot run '%s': %s\n", argv[0], strerror(errno));
	_exit(127);
}

/* fds: stdin r/w, stdout r/w, stderr r/w. */
static int
spawn(struct run *u, struct host *h)
{
	static const int theirs[] = { 0, 3, 5 }, ours[] = { 1, 2, 4 };
	int fds[6] = { -1, -1, -1, -1, -1, -1 };
	sigset_t block, saved;
	pid_t pid = -1, launcher = getpid();

	sigemptyset(&block);
	sigaddset(&block, SIGCHLD);
	sigaddset(&block, SIGINT);
	sigaddset(&block, SIGTERM);
	if (pipe2(fds, O_CLOEXEC) == 0 && pipe2(fds + 2, O_CLOEXEC) == 0 &&
	    pipe2(fds + 4, O_CLOEXEC) == 0) {
		sigprocmask(SIG_BLOCK, &block, &saved);
		if ((pid = fork()) == 0)
			ssh_child(u, h, fds, launcher, &saved);
		sigprocmask(SIG_SETMASK, &saved, NULL);
	}
	if (pid < 0)
		cli_error("cannot start ssh to host %s: %s", h->name,
		    strerror(errno));
	for (int i = 0; i < 3; i++) {
		close_fd(&fds[theirs[i]]);
		if (pid < 0)
			close_fd(&fds[ours[i]]);
		else
			fcntl(fds[ours[i]], F_SETFL, O_NONBLOCK |
			    fcntl(fds[ours[i]], F_GETFL));
	}
	if (pid < 0)
		return -1;
	h->pid = pid;
	h->spawned = true;
	h->in = fds[1];
	h->out.fd = fds[2];
	h->err.fd = fds[4];
	h->state = HOST_CONNECTING;
	h->spawned_at = sr_clock_ns();
	u->connecting++;
	return 0;
}

/* The orders: the records, the input (shared by every host), the
 * trailer; the pipe stays open after them, as its end tells the agent
 * that the launcher is gone. */
static void
orders_feed(struct run *u, struct host *h)
{
	const char *part[3] = { h->orders.buf, u->job->input,
	    launch_orders_trailer };
	size_t len[3] = { h->orders.len, u->job->input_len,
	    strlen(launch_orders_trailer) };

	while (h->in >= 0 && h->orders_part < 3) {
		ssize_t n = write(h->in, part[h->orders_part] + h->part_off,
		    len[h->orders_part] - h->part_off);

		if (n < 0 && errno == EINTR)
			continue;
		if (n < 0 && errno == EAGAIN)
			return;
		if (n < 0) {
			/* ssh is gone: its exit says why. */
			close_fd(&h->in);
			return;
		}
		if ((h->part_off += (size_t)n) == len[h->orders_part]) {
			h->orders_part++;
			h->part_off = 0;
		}
	}
	wire_out_free(&h->orders);
}

static int
orders_make(struct run *u, struct host *h)
{
	const struct launch_job *j = u->job;
	struct launch_orders o;
	int argc = 0;

	while (j->argv[argc] != NULL)
		argc++;
	memset(&o, 0, sizeof(o));
	o.version = LAUNCH_WIRE_VERSION;
	memcpy(o.secret, h->secret, sizeof(o.secret));
	o.host = (uint32_t)h->index;
	snprintf(o.name, sizeof(o.name), "%s", h->name);
	if (u->o->launcher_address != NULL) {
		char host[SR_ADDR_MAX];
		uint16_t port;

		/* Checked when the listener opened. */
		if (sr_address_split(u->o->launcher_address, host,
			sizeof(host), &port, NULL, 0) != SR_ADDRESS_OK)
			snprintf(host, sizeof(host), "%s",
			    u->o->launcher_address);
		snprintf(o.launcher, sizeof(o.launcher), "%s%s%s:%u",
		    strchr(host, ':') ? "[" : "", host, strchr(host, ':') ?
		    "]" : "", (unsigned)u->port);
	} else {
		snprintf(o.launcher, sizeof(o.launcher), ":%u",
		    (unsigned)u->port);
	}
	o.base = (uint32_t)h->base;
	o.count = (uint32_t)h->count;
	o.world = (uint32_t)j->world;
	o.grace = j->grace;
	o.keepalive = u->o->keepalive;
	o.address_s = j->address_s;
	o.connect_s = u->o->connect_timeout;
	o.tag = j->tag;
	o.machine = j->machine;
	o.share_stdin = j->share_stdin;
	o.verbosity = cli_verbosity;
	o.argc = argc;
	o.argv = j->argv;
	o.input_len = j->share_stdin ? j->input_len : 0;
	return launch_orders_encode(&o, &h->orders);
}

/* ------------------------------------------------------------ listening */

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

static int
listen_open(struct run *u)
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

static void
accept_all(struct run *u)
{
	struct sockaddr_storage ss;
	socklen_t len = sizeof(ss);
	int fd;

	while ((fd = accept4(u->listener, (struct sockaddr *)&ss, &len,
	    SOCK_NONBLOCK | SOCK_CLOEXEC)) >= 0) {
		struct stranger *s;

		if (u->nstrangers >= STRANGERS_MAX) {
			close(fd);
			u->rejected++;
			continue;
		}
		s = &u->strangers[u->nstrangers++];
		memset(s, 0, sizeof(*s));
		s->fd = fd;
		s->until = sr_clock_ns() + HELLO_NS;
		peer_name(&ss, s->from, sizeof(s->from));
		launch_keepalive_set(fd, u->o->keepalive);
		len = sizeof(ss);
	}
}

static void
stranger_drop(struct run *u, int i, const char *why)
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

/* ---------------------------------------------------------- the verdict */

static void
stop_all_at(struct run *u, int64_t when)
{
	if (u->stop_at == 0 || when < u->stop_at)
		u->stop_at = when;
}

/* The first failure decides the job's status; the rest only stop. */
static void
failure(struct run *u, int status, int64_t stop_in)
{
	if (u->status != 0 || u->interrupted || u->broken_pipe || u->stopping)
		return;
	u->status = status;
	stop_all_at(u, sr_clock_ns() + stop_in);
}

static void
early_lines(struct host *h, const char *verdict)
{
	char *p = h->early, *end = h->early + h->early_len, *nl, *last = NULL;

	while (p < end) {
		if ((nl = memchr(p, '\n', (size_t)(end - p))) == NULL)
			nl = end;
		*nl = '\0';
		/* ssh ends its own messages in "\r\n". */
		for (char *q = nl; q > p && (q[-1] == '\r' || q[-1] == ' '); q--)
			q[-1] = '\0';
		if (*p != '\0') {
			if (last != NULL)
				cli_error("host %s: %s", h->name, last);
			last = p;
		}
		p = nl + 1;
	}
	cli_error("host %s (%s): %s%s%s", h->name, ranks_text(h), verdict,
	    last != NULL ? ": " : "", last != NULL ? last : "");
	h->early_len = 0;
}

/*
 * A host that never answered: named, with what ssh said.  The others go
 * on connecting, so that every host that is down is named at once; no
 * rank starts, as that waits for every host.
 */
static void
host_unreachable(struct run *u, struct host *h, const char *verdict)
{
	if (u->stopping || u->interrupted)
		return;
	early_lines(h, verdict);
	u->unreachable++;
	if (u->status == 0)
		u->status = EXIT_RENDEZVOUS;
}

/* A host lost after it answered: its ranks are gone or going. */
static void
host_lost(struct run *u, struct host *h, const char *why)
{
	if (h->exited == h->count || u->stopping || u->interrupted)
		return;
	cli_error("host %s (%s): %s; %s", h->name, ranks_text(h), why,
	    u->status == 0 ? "stopping the others" : "its ranks stop");
	failure(u, EXIT_COLLECTIVE, 0);
	if (h->pid > 0)
		kill(h->pid, SIGTERM);
}

static void
send_msg(struct host *h, enum launch_msg_kind kind)
{
	struct launch_msg m = { .kind = kind };

	if (h->ctl >= 0 && launch_msg_put(&h->ctl_out, &m) != 0)
		cli_error("out of memory");
}

/* Stops every host: the agents are told, an unanswered ssh is ended. */
static void
stop_all(struct run *u, int64_t now)
{
	u->stop_at = 0;
	if (u->stopping)
		return;
	u->stopping = true;
	u->kill_ssh_at = now + STOP_NS;
	for (int i = 0; i < u->n; i++) {
		struct host *h = &u->host[i];

		if (h->state >= HOST_READY && h->ctl >= 0 && !h->ctl_closed) {
			send_msg(h, LAUNCH_MSG_STOP);
			h->told_stop = true;
		} else if (h->pid > 0) {
			kill(h->pid, SIGTERM);
		}
	}
}

/* Once every host answered or failed: with one that failed, nothing
 * starts and everyone is sent home. */
static void
unreachable_verdict(struct run *u, int64_t now)
{
	if (u->unreachable == 0 || u->started || u->stopping ||
	    u->connecting > 0 || u->next < u->n)
		return;
	cli_error("launch: %d of %d host(s) did not answer; no rank was "
	    "started", u->unreachable, u->n);
	stop_all(u, now);
}

/* ----------------------------------------------------- the agents' words */

static void
everyone_answered(struct run *u, int64_t now)
{
	u->started = true;
	cli_status("launch: all %d host(s) answered in %.3fs; starting %d "
	    "rank(s)", u->n, (double)(now - u->began) / 1e9, u->job->world);
	for (int i = 0; i < u->n; i++) {
		send_msg(&u->host[i], LAUNCH_MSG_START);
		u->host[i].state = HOST_STARTED;
	}
	if (u->job->address_s > 0)
		u->address_at = now + (int64_t)((u->job->address_s +
		    LAUNCH_ADDRESS_SLACK) * 1e9);
}

/* What ssh said before the agent answered goes out as it is now. */
static void
early_flush(struct host *h)
{
	size_t off = 0;

	while (off < h->early_len) {
		ssize_t n = write(2, h->early + off, h->early_len - off);

		if (n < 0 && errno == EINTR)
			continue;
		if (n <= 0)
			break;
		off += (size_t)n;
	}
	h->early_len = 0;
}

/* A stranger's hello: a host's index and that host's secret. */
static void
stranger_hello(struct run *u, int i, const char *line, int64_t now)
{
	struct stranger *s = &u->strangers[i];
	struct launch_msg m;
	struct host *h;

	if (launch_msg_parse(line, &m) != 0 || m.kind != LAUNCH_MSG_HELLO) {
		stranger_drop(u, i, "not a hello");
		return;
	}
	if (m.a != LAUNCH_WIRE_VERSION || m.b >= (uint32_t)u->n ||
	    !launch_secret_equal(m.text, u->host[m.b].secret)) {
		stranger_drop(u, i, "wrong version, host or secret");
		return;
	}
	h = &u->host[m.b];
	if (h->state != HOST_CONNECTING || h->ctl >= 0) {
		stranger_drop(u, i, "that host's agent answered already");
		return;
	}
	h->ctl = s->fd;
	h->ctl_in = s->in;
	s->fd = -1;
	stranger_drop(u, i, NULL);
	h->state = HOST_READY;
	u->connecting--;
	u->ready++;
	early_flush(h);
	cli_debug("launch: host %s answered after %.3fs", h->name,
	    (double)(now - h->spawned_at) / 1e9);
	if (u->ready == u->n && !u->stopping)
		everyone_answered(u, now);
}

static void
list_send(struct run *u)
{
	struct wire_out text = { 0 };
	struct launch_msg m = { .kind = LAUNCH_MSG_PEER };

	u->list_sent = true;
	u->address_at = 0;
	for (int r = 0; r < u->job->world; r++) {
		snprintf(m.text, sizeof(m.text), "%s", u->addr[r]);
		if (launch_msg_put(&text, &m) != 0)
			goto nomem;
	}
	m.kind = LAUNCH_MSG_LIST;
	m.a = (uint32_t)u->job->world;
	if (launch_msg_put(&text, &m) != 0)
		goto nomem;
	for (int i = 0; i < u->n; i++)
		if (u->host[i].ctl >= 0 && wire_out_add(&u->host[i].ctl_out,
		    text.buf, text.len) != 0)
			goto nomem;
	cli_status("launch: the address list of %d rank(s) is complete after "
	    "%.3fs", u->job->world, (double)(sr_clock_ns() - u->began) / 1e9);
	wire_out_free(&text);
	return;
nomem:
	wire_out_free(&text);
	cli_error("out of memory for the address list");
	failure(u, EXIT_INTERNAL, 0);
}

/* Once a rank is gone before every address is in, the list can never
 * be complete: the ranks still waiting for it hear so now. */
static void
abandon(struct run *u)
{
	if (u->list_sent || u->abandoned)
		return;
	u->abandoned = true;
	for (int i = 0; i < u->n; i++)
		send_msg(&u->host[i], LAUNCH_MSG_ABANDON);
}

static void
rank_exit(struct run *u, struct host *h, uint32_t rank, uint32_t status)
{
	h->exited++;
	u->exits++;
	if (status == 0 || u->stopping || u->interrupted || u->broken_pipe) {
		if (status != 0 || u->addr[rank] == NULL)
			abandon(u);
		return;
	}
	if (u->status == 0)
		cli_error("rank %u (host %s) failed with status %u%s", rank,
		    h->name, status, u->exits < u->job->world ?
		    "; stopping the others" : "");
	failure(u, (int)status, (int64_t)(u->job->grace * 1e9));
	abandon(u);
}

/* One line from a host's agent; -1 when it breaks the protocol. */
static int
agent_line(struct run *u, struct host *h, const char *line)
{
	struct launch_msg m;
	const char *why = "an unknown message";

	if (launch_msg_parse(line, &m) != 0)
		goto bad;
	switch (m.kind) {
	case LAUNCH_MSG_ADDRESS:
		why = "an address for a rank not its own, or twice";
		if (m.a < (uint32_t)h->base || m.a >= (uint32_t)(h->base +
		    h->count) || u->addr[m.a] != NULL)
			goto bad;
		if ((u->addr[m.a] = strdup(m.text)) == NULL) {
			cli_error("out of memory");
			failure(u, EXIT_INTERNAL, 0);
			return 0;
		}
		if (++u->published == u->job->world && !u->abandoned)
			list_send(u);
		return 0;
	case LAUNCH_MSG_EXIT:
		why = "an exit of a rank not its own";
		if (m.a < (uint32_t)h->base || m.a >= (uint32_t)(h->base +
		    h->count) || h->exited >= h->count || m.b > 255)
			goto bad;
		rank_exit(u, h, m.a, m.b);
		return 0;
	case LAUNCH_MSG_STATUS:
		why = "a status that is none";
		if (m.a == 0 || m.a > 255)
			goto bad;
		failure(u, (int)m.a, (int64_t)(u->job->grace * 1e9));
		abandon(u);
		return 0;
	default:
		goto bad;
	}
bad:
	cli_error("host %s: its agent sent '%.80s' (%s)", h->name, line, why);
	return -1;
}

static void
ctl_read(struct run *u, struct host *h)
{
	char line[LAUNCH_MSG_MAX];
	int rc = wire_in_read(&h->ctl_in, h->ctl), got;

	if (rc < 0 && errno == EAGAIN)
		return;
	while ((got = wire_in_line(&h->ctl_in, line, sizeof(line))) > 0)
		if (agent_line(u, h, line) != 0) {
			got = -1;
			break;
		}
	if (got < 0) {
		host_lost(u, h, "its agent broke the protocol");
		close_fd(&h->ctl);
		return;
	}
	if (rc <= 0) {
		h->ctl_closed = true;
		close_fd(&h->ctl);
		if (rc < 0)
			host_lost(u, h, errno == ETIMEDOUT ? "no answer to "
			    "keepalives: its network connection is gone" :
			    strerror(errno));
		else if (h->exited < h->count)
			host_lost(u, h, "its agent closed its connection with "
			    "ranks still running");
	}
}

static void
ctl_write(struct run *u, struct host *h)
{
	if (wire_out_flush(&h->ctl_out, h->ctl) != 0) {
		int saved = errno;

		close_fd(&h->ctl);
		h->ctl_closed = true;
		host_lost(u, h, saved == ETIMEDOUT ? "no answer to keepalives: "
		    "its network connection is gone" : strerror(saved));
	}
}

/* ------------------------------------------------------------- output */

static void
broken_pipe(struct run *u)
{
	if (u->broken_pipe)
		return;
	u->broken_pipe = true;
	stop_all(u, sr_clock_ns());
}

static void
forward(struct run *u, struct launch_stream *s, int reads)
{
	if (launch_stream_read(s, reads) == 0)
		return;
	if (s->broken && s->to == 1)
		broken_pipe(u);
	else
		u->bad_output = true;
}

/* ssh's stderr, kept until the agent answers (it is ssh's own words
 * then, or the remote shell's), forwarded from then on. */
static void
err_read(struct run *u, struct host *h, int reads)
{
	ssize_t n;

	if (h->state >= HOST_READY) {
		forward(u, &h->err, reads);
		return;
	}
	while (h->err.fd >= 0 && reads-- > 0) {
		if (h->early_len == EARLY_MAX) {
			memmove(h->early, h->early + EARLY_MAX / 2, EARLY_MAX / 2);
			h->early_len = EARLY_MAX / 2;
		}
		n = read(h->err.fd, h->early + h->early_len,
		    EARLY_MAX - h->early_len);
		if (n < 0 && (errno == EINTR || errno == EAGAIN))
			return;
		if (n <= 0) {
			close_fd(&h->err.fd);
			return;
		}
		h->early_len += (size_t)n;
	}
}

/* ------------------------------------------------------------ the hosts */

static void
reap(struct run *u)
{
	pid_t pid;
	int st;

	while ((pid = waitpid(-1, &st, WNOHANG)) > 0) {
		struct host *h = NULL;
		char verdict[96];

		for (int i = 0; i < u->n && h == NULL; i++)
			if (u->host[i].pid == pid)
				h = &u->host[i];
		if (h == NULL)
			continue;
		h->pid = 0;
		h->status = WIFEXITED(st) ? WEXITSTATUS(st) : 128 + WTERMSIG(st);
		forward(u, &h->out, 64);
		err_read(u, h, 64);
		close_fd(&h->in);
		if (h->ctl >= 0)
			ctl_read(u, h);
		if (h->state == HOST_CONNECTING) {
			u->connecting--;
			snprintf(verdict, sizeof(verdict), "ssh exited with "
			    "status %d before its agent answered", h->status);
			host_unreachable(u, h, verdict);
		} else if (h->state >= HOST_READY && h->exited < h->count) {
			snprintf(verdict, sizeof(verdict), "ssh exited with "
			    "status %d", h->status);
			host_lost(u, h, verdict);
		}
	}
}

static void
spawn_more(struct run *u, int64_t now)
{
	while (u->next < u->n && u->connecting < u->o->fanout &&
	    !u->stopping && !cli_interrupted) {
		struct host *h = &u->host[u->next++];

		if (spawn(u, h) != 0) {
			failure(u, EXIT_INTERNAL, 0);
			return;
		}
		orders_feed(u, h);
	}
	(void)now;
}

/* A host whose agent has not answered within the connect timeout and
 * the slack is named, and the job never starts. */
static void
answer_deadlines(struct run *u, int64_t now)
{
	int64_t limit = (int64_t)(u->o->connect_timeout * 1e9) +
	    ANSWER_SLACK_NS;

	for (int i = 0; i < u->n; i++) {
		struct host *h = &u->host[i];
		char verdict[96];

		if (h->state != HOST_CONNECTING || h->pid <= 0 ||
		    now - h->spawned_at < limit)
			continue;
		snprintf(verdict, sizeof(verdict), "no answer within %gs of "
		    "starting ssh", (double)limit / 1e9);
		host_unreachable(u, h, verdict);
		kill(h->pid, SIGKILL);
		h->state = HOST_FAILED;
		u->connecting--;
	}
	for (int i = 0; i < u->nstrangers; i++)
		if (now >= u->strangers[i].until)
			stranger_drop(u, i--, "no hello within 10s");
}

static void
address_deadline(struct run *u, int64_t now)
{
	char missing[200] = "";
	int shown = 0;

	if (u->address_at == 0 || now < u->address_at)
		return;
	u->address_at = 0;
	if (u->status != 0 || u->stopping)
		return;
	for (int r = 0; r < u->job->world && shown < 8; r++)
		if (u->addr[r] == NULL) {
			size_t n = strlen(missing);

			snprintf(missing + n, sizeof(missing) - n, "%s%d",
			    shown++ ? ", " : "", r);
		}
	cli_error("launch: %d of %d rank(s) published an address within %gs; "
	    "missing rank %s", u->published, u->job->world,
	    u->job->address_s + LAUNCH_ADDRESS_SLACK, missing);
	failure(u, EXIT_RENDEZVOUS, 0);
	abandon(u);
}

static void
escalate(struct run *u, int64_t now)
{
	answer_deadlines(u, now);
	unreachable_verdict(u, now);
	address_deadline(u, now);
	if (cli_interrupted && !u->interrupted) {
		u->interrupted = true;
		cli_error("interrupted; stopping the ranks");
		stop_all(u, now);
	}
	if (u->stop_at != 0 && now >= u->stop_at)
		stop_all(u, now);
	if (u->kill_ssh_at != 0 && now >= u->kill_ssh_at) {
		u->kill_ssh_at = 0;
		for (int i = 0; i < u->n; i++)
			if (u->host[i].pid > 0) {
				cli_error("host %s: its agent did not stop within "
				    "%llds; ending its ssh", u->host[i].name,
				    STOP_NS / NS);
				kill(u->host[i].pid, SIGKILL);
			}
	}
}

/* ------------------------------------------------------------- the loop */

enum { SLOT_OUT, SLOT_ERR, SLOT_IN, SLOT_CTL, SLOTS };

static nfds_t
watch(struct run *u)
{
	struct pollfd *p = u->pfd;

	p[0] = (struct pollfd){ .fd = launch_wake_fd(), .events = POLLIN };
	p[1] = (struct pollfd){ .fd = u->listener, .events = POLLIN };
	for (int i = 0; i < u->n; i++) {
		struct host *h = &u->host[i];
		struct pollfd *q = &u->pfd[2 + SLOTS * i];

		q[SLOT_OUT] = (struct pollfd){ .fd = h->out.fd, .events = POLLIN };
		q[SLOT_ERR] = (struct pollfd){ .fd = h->err.fd, .events = POLLIN };
		q[SLOT_IN] = (struct pollfd){ .fd = h->orders_part < 3 ? h->in :
		    -1, .events = POLLOUT };
		q[SLOT_CTL] = (struct pollfd){ .fd = h->ctl, .events = POLLIN |
		    (wire_out_pending(&h->ctl_out) ? POLLOUT : 0) };
	}
	for (int i = 0; i < u->nstrangers; i++)
		u->pfd[2 + SLOTS * u->n + i] = (struct pollfd){
		    .fd = u->strangers[i].fd, .events = POLLIN };
	return (nfds_t)(2 + SLOTS * u->n + u->nstrangers);
}

static void
stranger_read(struct run *u, int i, int64_t now)
{
	struct stranger *s = &u->strangers[i];
	char line[LAUNCH_MSG_MAX];
	int rc = wire_in_read(&s->in, s->fd), got;

	if (rc < 0 && errno == EAGAIN)
		return;
	got = wire_in_line(&s->in, line, sizeof(line));
	if (got > 0)
		stranger_hello(u, i, line, now);
	else if (got < 0)
		stranger_drop(u, i, "a line too long");
	else if (rc <= 0)
		stranger_drop(u, i, "closed before its hello");
}

static void
dispatch(struct run *u, int64_t now)
{
	int strangers = u->nstrangers;

	if (u->pfd[0].revents != 0)
		launch_wake_drain();
	if (u->pfd[1].revents != 0)
		accept_all(u);
	for (int i = 0; i < u->n; i++) {
		struct host *h = &u->host[i];
		struct pollfd *q = &u->pfd[2 + SLOTS * i];

		if (q[SLOT_OUT].revents != 0)
			forward(u, &h->out, 1);
		if (q[SLOT_ERR].revents != 0)
			err_read(u, h, 1);
		if (q[SLOT_IN].revents != 0)
			orders_feed(u, h);
		if (q[SLOT_CTL].revents & ~POLLOUT && h->ctl >= 0)
			ctl_read(u, h);
		if (q[SLOT_CTL].revents & POLLOUT && h->ctl >= 0)
			ctl_write(u, h);
	}
	/* Backwards: a stranger dropped swaps in the last one. */
	for (int i = strangers - 1; i >= 0; i--)
		if (i < u->nstrangers &&
		    u->pfd[2 + SLOTS * u->n + i].revents != 0)
			stranger_read(u, i, now);
	reap(u);
	for (int i = 0; i < u->n; i++)
		if (u->host[i].ctl >= 0 && wire_out_pending(&u->host[i].ctl_out))
			ctl_write(u, &u->host[i]);
}

static bool
all_reaped(const struct run *u)
{
	for (int i = 0; i < u->n; i++)
		if (u->host[i].pid > 0)
			return false;
	return u->next == u->n || u->stopping;
}

static bool
finished(struct run *u, int64_t now)
{
	if (!all_reaped(u))
		return false;
	if (u->drain_at == 0)
		u->drain_at = now + DRAIN_NS;
	for (int i = 0; i < u->n && now < u->drain_at; i++)
		if (u->host[i].out.fd >= 0 || u->host[i].err.fd >= 0)
			return false;
	return true;
}

static int
timeout_ms(const struct run *u, int64_t now)
{
	int64_t next = INT64_MAX, t[4] = { u->stop_at, u->kill_ssh_at,
	    u->address_at, all_reaped(u) ? u->drain_at : 0 };

	for (int i = 0; i < 4; i++)
		if (t[i] != 0 && t[i] < next)
			next = t[i];
	for (int i = 0; i < u->n; i++)
		if (u->host[i].state == HOST_CONNECTING &&
		    u->host[i].spawned_at + (int64_t)(u->o->connect_timeout *
		    1e9) + ANSWER_SLACK_NS < next)
			next = u->host[i].spawned_at +
			    (int64_t)(u->o->connect_timeout * 1e9) +
			    ANSWER_SLACK_NS;
	for (int i = 0; i < u->nstrangers; i++)
		if (u->strangers[i].until < next)
			next = u->strangers[i].until;
	if (next == INT64_MAX)
		return -1;
	next = next <= now ? 0 : (next - now + 999999) / 1000000;
	return next > INT_MAX ? INT_MAX : (int)next;
}

static int
outcome(struct run *u)
{
	if (u->broken_pipe)
		return EXIT_PIPE;
	if (u->interrupted || cli_interrupted)
		return EXIT_INTERRUPTED;
	if (u->status != 0)
		return u->status;
	if (u->bad_output) {
		cli_error("could not write all of the ranks' output");
		return EXIT_INTERNAL;
	}
	return EXIT_OK;
}

static int
prepare(struct run *u)
{
	int rank = 0, rc;

	for (size_t i = 0; i < u->o->list.n && u->o->ranks[i] > 0; i++)
		u->n++;
	u->host = calloc((size_t)u->n, sizeof(*u->host));
	u->addr = calloc((size_t)u->job->world, sizeof(*u->addr));
	u->strangers = calloc(STRANGERS_MAX, sizeof(*u->strangers));
	u->pfd = calloc((size_t)(2 + SLOTS * u->n + STRANGERS_MAX),
	    sizeof(*u->pfd));
	if (u->host == NULL || u->addr == NULL || u->strangers == NULL ||
	    u->pfd == NULL) {
		cli_error("out of memory for %d hosts", u->n);
		return EXIT_INTERNAL;
	}
	launch_nofile_raise((size_t)(SLOTS * u->n + STRANGERS_MAX + 8),
	    &u->nofile);
	for (int i = 0; i < u->n; i++) {
		struct host *h = &u->host[i];

		h->name = u->o->list.host[i].name;
		h->index = i;
		h->base = rank;
		h->count = u->o->ranks[i];
		rank += h->count;
		h->in = h->ctl = -1;
		launch_stream_init(&h->out, h->base, 1, u->job->machine &&
		    h->base == 0 ? LAUNCH_RAW : LAUNCH_PLAIN);
		launch_stream_init(&h->err, h->base, 2, LAUNCH_PLAIN);
		if (launch_secret_new(h->secret) != 0) {
			cli_error("cannot make a secret: getrandom: %s",
			    strerror(errno));
			return EXIT_INTERNAL;
		}
	}
	if ((rc = ssh_command(u)) != 0 || (rc = listen_open(u)) != 0)
		return rc;
	for (int i = 0; i < u->n; i++)
		if (orders_make(u, &u->host[i]) != 0) {
			cli_error("out of memory");
			return EXIT_INTERNAL;
		}
	return 0;
}

static void
cleanup(struct run *u)
{
	for (int i = 0; u->host != NULL && i < u->n; i++) {
		struct host *h = &u->host[i];

		explicit_bzero(h->secret, sizeof(h->secret));
		if (h->orders.buf != NULL)
			explicit_bzero(h->orders.buf, h->orders.len);
		wire_out_free(&h->orders);
		wire_out_free(&h->ctl_out);
		launch_stream_fini(&h->out);
		launch_stream_fini(&h->err);
		close_fd(&h->in);
		close_fd(&h->ctl);
	}
	for (int i = 0; i < u->nstrangers; i++)
		close(u->strangers[i].fd);
	for (int r = 0; u->addr != NULL && r < u->job->world; r++)
		free(u->addr[r]);
	for (int i = 0; u->ssh != NULL && i < u->ssh_words; i++)
		free(u->ssh[i]);
	if (u->listener >= 0)
		close(u->listener);
	free(u->ssh);
	free(u->remote);
	free(u->addr);
	free(u->host);
	free(u->strangers);
	free(u->pfd);
}

int
launch_hosts_run(struct launch_remote *o, struct launch_job *job)
{
	struct run u;
	int64_t now;
	int rc;

	memset(&u, 0, sizeof(u));
	u.o = o;
	u.job = job;
	u.listener = -1;
	u.began = now = sr_clock_ns();
	if ((rc = prepare(&u)) != 0) {
		cleanup(&u);
		return rc;
	}
	while (!finished(&u, now)) {
		nfds_t n;

		spawn_more(&u, now);
		escalate(&u, now);
		n = watch(&u);
		if (poll(u.pfd, n, timeout_ms(&u, now)) < 0 && errno != EINTR) {
			cli_error("poll: %s; stopping the hosts", strerror(errno));
			failure(&u, EXIT_INTERNAL, 0);
			for (nfds_t i = 0; i < n; i++)
				u.pfd[i].revents = 0;
		}
		now = sr_clock_ns();
		dispatch(&u, now);
		now = sr_clock_ns();
	}
	if (u.rejected > 0)
		cli_status("launch: rejected %lu connection(s) that were no "
		    "host's agent", u.rejected);
	rc = outcome(&u);
	cleanup(&u);
	return rc;
}
