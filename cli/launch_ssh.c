/*
 * launch_ssh.c - ssh for `launch --hosts`: the hosts given their ranks,
 * the ssh command (--ssh, and to ssh itself the options that keep it
 * from ever asking), one ssh a host starting that host's agent
 * (`silvic-ring launch --agent`), the orders written to its stdin (the
 * only way the host's secret travels), and what ssh says before the
 * agent answers, kept to name the host with it should it fail.
 */
#include <errno.h>
#include <fcntl.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "cli.h"
#include "hosts.h"
#include "launch_hosts.h"
#include "rendezvous.h"

/* ---------------------------------------------------------- the plan */

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

/* -------------------------------------------------------- ssh itself */

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

/*
 * The ssh command: --ssh's words (or "ssh"), to ssh itself the options
 * that keep it from ever asking or hanging (after the user's, so that
 * theirs win: ssh takes an option's first value), then the host and the
 * remote command, filled in per host.
 */
int
launch_ssh_command(struct run *u)
{
	const char *cmd = u->o->ssh != NULL ? u->o->ssh : "ssh";
	char *copy = strdup(cmd), *save = NULL, *w, *path, timeout[64];
	size_t len = 0;
	int n = 0;

	/* The hosts run this binary's path unless --remote-path. */
	path = u->o->remote_path != NULL ? strdup(u->o->remote_path) :
	    cli_self_path();
	if (path == NULL && u->o->remote_path == NULL && errno != ENOMEM) {
		cli_self_path_error("for the hosts to run",
		    "; give --remote-path");
		free(copy);
		return EXIT_INTERNAL;
	}
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

/* ssh dies with the launcher (launch_fork); its host's agent then sees
 * its stdin end and stops the ranks. */
static void __attribute__((noreturn))
ssh_child(struct run *u, struct host *h, int *fds)
{
	char **argv = u->ssh;

	/* Its own process group: a ^C at the terminal is the launcher's to
	 * handle (an orderly stop), not a dropped connection. */
	setpgid(0, 0);
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
int
launch_ssh_spawn(struct run *u, struct host *h)
{
	static const int theirs[] = { 0, 3, 5 }, ours[] = { 1, 2, 4 };
	int fds[6] = { -1, -1, -1, -1, -1, -1 };
	pid_t pid = -1;

	if (pipe2(fds, O_CLOEXEC) == 0 && pipe2(fds + 2, O_CLOEXEC) == 0 &&
	    pipe2(fds + 4, O_CLOEXEC) == 0 && (pid = launch_fork()) == 0)
		ssh_child(u, h, fds);
	if (pid < 0)
		cli_error("cannot start ssh to host %s: %s", h->name,
		    strerror(errno));
	for (int i = 0; i < 3; i++) {
		launch_fd_close(&fds[theirs[i]]);
		if (pid < 0)
			launch_fd_close(&fds[ours[i]]);
		else
			fcntl(fds[ours[i]], F_SETFL, O_NONBLOCK |
			    fcntl(fds[ours[i]], F_GETFL));
	}
	if (pid < 0)
		return -1;
	h->pid = pid;
	h->in = fds[1];
	h->out.fd = fds[2];
	h->err.fd = fds[4];
	h->state = HOST_CONNECTING;
	h->spawned_at = sr_clock_ns();
	u->connecting++;
	return 0;
}

/* -------------------------------------------------------- the orders */

int
launch_ssh_orders(struct run *u, struct host *h)
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

/* The orders: the records, the input (shared by every host), the
 * trailer; the pipe stays open after them, as its end tells the agent
 * that the launcher is gone. */
void
launch_ssh_feed(struct run *u, struct host *h)
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
			launch_fd_close(&h->in);
			return;
		}
		if ((h->part_off += (size_t)n) == len[h->orders_part]) {
			h->orders_part++;
			h->part_off = 0;
		}
	}
	wire_out_free(&h->orders);
}

void
launch_ssh_say(struct host *h, const char *verdict)
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
	cli_error("host %s (%s): %s%s%s", h->name,
	    launch_ranks_text(h->base, h->count), verdict,
	    last != NULL ? ": " : "", last != NULL ? last : "");
	h->early_len = 0;
}

/* What ssh said before the agent answered goes out as it is now. */
void
launch_ssh_flush_early(struct host *h)
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

void
launch_ssh_early_read(struct host *h, int reads)
{
	ssize_t n;

	while (h->err.fd >= 0 && reads-- > 0) {
		if (h->early_len == HOSTS_EARLY_MAX) {
			memmove(h->early, h->early + HOSTS_EARLY_MAX / 2,
			    HOSTS_EARLY_MAX / 2);
			h->early_len = HOSTS_EARLY_MAX / 2;
		}
		n = read(h->err.fd, h->early + h->early_len,
		    HOSTS_EARLY_MAX - h->early_len);
		if (n < 0 && (errno == EINTR || errno == EAGAIN))
			return;
		if (n <= 0) {
			launch_fd_close(&h->err.fd);
			return;
		}
		h->early_len += (size_t)n;
	}
}
