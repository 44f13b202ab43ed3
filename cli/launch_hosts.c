/*
 * launch_hosts.c - `launch --hosts/--hostfile`: one ssh per host, each
 * starting that host's agent (`silvic-ring launch --agent`), which
 * starts the host's ranks (launch_agent.c).
 *
 * The launcher is the rendezvous: it listens on one port
 * (launch_door.c), hands each agent over ssh's stdin (never a command
 * line, never a file) its orders and a secret of its own (launch_ssh.c),
 * and each agent dials back and proves it with that secret.  No rank
 * starts anywhere until every host's agent has answered, so a host that
 * cannot be reached costs nothing but its message.  Then the agents
 * relay their ranks' addresses, the launcher sends every agent the whole
 * list, and the agents report each rank's exit.  The first failure stops
 * the job: after the grace period every agent is told to stop (SIGTERM,
 * SIGKILL a second later); an agent that does not end soon after has its
 * ssh killed, which ends it on its host.
 *
 * The control connections carry TCP keepalives (--keepalive), answered
 * by the kernels, so a host whose network is cut is found gone even
 * while this process waits on a slow reader of its stdout.  Nothing here
 * touches the core.
 */
#include <errno.h>
#include <limits.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/wait.h>
#include <unistd.h>

#include "cli.h"
#include "launch_hosts.h"

#define STOP_NS		(5 * HOSTS_NS)	/* an agent told to stop ends by then */
#define DRAIN_NS	HOSTS_NS	/* output an exited ssh holds open */

/* ------------------------------------------------------- the verdict */

static void
stop_all_at(struct run *u, int64_t when)
{
	if (u->stop_at == 0 || when < u->stop_at)
		u->stop_at = when;
}

/* The first failure decides the job's status; the rest only stop. */
void
launch_hosts_failure(struct run *u, int status, int64_t stop_in)
{
	if (u->status != 0 || u->interrupted || u->broken_pipe || u->stopping)
		return;
	u->status = status;
	stop_all_at(u, sr_clock_ns() + stop_in);
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
	launch_ssh_say(h, verdict);
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
	cli_error("host %s (%s): %s; %s", h->name,
	    launch_ranks_text(h->base, h->count), why,
	    u->status == 0 ? "stopping the others" : "its ranks stop");
	launch_hosts_failure(u, EXIT_COLLECTIVE, 0);
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
void
launch_hosts_stop(struct run *u, int64_t now)
{
	u->stop_at = 0;
	if (u->stopping)
		return;
	u->stopping = true;
	u->kill_ssh_at = now + STOP_NS;
	for (int i = 0; i < u->n; i++) {
		struct host *h = &u->host[i];

		if (h->state >= HOST_READY && h->ctl >= 0 && !h->ctl_closed)
			send_msg(h, LAUNCH_MSG_STOP);
		else if (h->pid > 0)
			kill(h->pid, SIGTERM);
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
	launch_hosts_stop(u, now);
}

/* ------------------------------------------------- the agents' words */

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

void
launch_hosts_ready(struct run *u, struct host *h, int64_t now)
{
	h->state = HOST_READY;
	u->connecting--;
	u->ready++;
	launch_ssh_flush_early(h);
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
	launch_hosts_failure(u, EXIT_INTERNAL, 0);
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
	launch_hosts_failure(u, (int)status, (int64_t)(u->job->grace * 1e9));
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
			launch_hosts_failure(u, EXIT_INTERNAL, 0);
			return 0;
		}
		if (++u->published == u->job->world && !u->abandoned)
			list_send(u);
		return 0;
	case LAUNCH_MSG_EXIT:
		why = "an exit of a rank not its own, or twice";
		if (m.a < (uint32_t)h->base || m.a >= (uint32_t)(h->base +
		    h->count) || u->exited[m.a] || m.b > 255)
			goto bad;
		u->exited[m.a] = true;
		rank_exit(u, h, m.a, m.b);
		return 0;
	case LAUNCH_MSG_STATUS:
		why = "a status that is none";
		if (m.a == 0 || m.a > 255)
			goto bad;
		launch_hosts_failure(u, (int)m.a, (int64_t)(u->job->grace * 1e9));
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
		launch_fd_close(&h->ctl);
		return;
	}
	if (rc <= 0) {
		h->ctl_closed = true;
		launch_fd_close(&h->ctl);
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

		launch_fd_close(&h->ctl);
		h->ctl_closed = true;
		host_lost(u, h, saved == ETIMEDOUT ? "no answer to keepalives: "
		    "its network connection is gone" : strerror(saved));
	}
}

/* ------------------------------------------------------------ output */

static void
broken_pipe(struct run *u)
{
	if (u->broken_pipe)
		return;
	u->broken_pipe = true;
	launch_hosts_stop(u, sr_clock_ns());
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
	if (h->state >= HOST_READY)
		forward(u, &h->err, reads);
	else
		launch_ssh_early_read(h, reads);
}

/* --------------------------------------------------------- the hosts */

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
		launch_fd_close(&h->in);
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

		if (launch_ssh_spawn(u, h) != 0) {
			launch_hosts_failure(u, EXIT_INTERNAL, 0);
			return;
		}
		launch_ssh_feed(u, h);
	}
	(void)now;
}

/* A host whose agent has not answered within the connect timeout and
 * the slack is named, and the job never starts. */
static void
answer_deadlines(struct run *u, int64_t now)
{
	int64_t limit = (int64_t)(u->o->connect_timeout * 1e9) +
	    HOSTS_ANSWER_SLACK_NS;

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
	launch_door_expire(u, now);
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
	launch_hosts_failure(u, EXIT_RENDEZVOUS, 0);
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
		launch_hosts_stop(u, now);
	}
	if (u->stop_at != 0 && now >= u->stop_at)
		launch_hosts_stop(u, now);
	if (u->kill_ssh_at != 0 && now >= u->kill_ssh_at) {
		u->kill_ssh_at = 0;
		for (int i = 0; i < u->n; i++)
			if (u->host[i].pid > 0) {
				cli_error("host %s: its agent did not stop within "
				    "%llds; ending its ssh", u->host[i].name,
				    STOP_NS / HOSTS_NS);
				kill(u->host[i].pid, SIGKILL);
			}
	}
}

/* ---------------------------------------------------------- the loop */

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
dispatch(struct run *u, int64_t now)
{
	int strangers = u->nstrangers;

	if (u->pfd[0].revents != 0)
		launch_wake_drain();
	if (u->pfd[1].revents != 0)
		launch_door_accept(u);
	for (int i = 0; i < u->n; i++) {
		struct host *h = &u->host[i];
		struct pollfd *q = &u->pfd[2 + SLOTS * i];

		if (q[SLOT_OUT].revents != 0)
			forward(u, &h->out, 1);
		if (q[SLOT_ERR].revents != 0)
			err_read(u, h, 1);
		if (q[SLOT_IN].revents != 0)
			launch_ssh_feed(u, h);
		if (q[SLOT_CTL].revents & ~POLLOUT && h->ctl >= 0)
			ctl_read(u, h);
		if (q[SLOT_CTL].revents & POLLOUT && h->ctl >= 0)
			ctl_write(u, h);
	}
	/* Backwards: a stranger dropped swaps in the last one. */
	for (int i = strangers - 1; i >= 0; i--)
		if (i < u->nstrangers &&
		    u->pfd[2 + SLOTS * u->n + i].revents != 0)
			launch_door_read(u, i, now);
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
		    1e9) + HOSTS_ANSWER_SLACK_NS < next)
			next = u->host[i].spawned_at +
			    (int64_t)(u->o->connect_timeout * 1e9) +
			    HOSTS_ANSWER_SLACK_NS;
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
	u->exited = calloc((size_t)u->job->world, sizeof(*u->exited));
	u->strangers = calloc(HOSTS_STRANGERS_MAX, sizeof(*u->strangers));
	u->pfd = calloc((size_t)(2 + SLOTS * u->n + HOSTS_STRANGERS_MAX),
	    sizeof(*u->pfd));
	if (u->host == NULL || u->addr == NULL || u->exited == NULL ||
	    u->strangers == NULL || u->pfd == NULL) {
		cli_error("out of memory for %d hosts", u->n);
		return EXIT_INTERNAL;
	}
	launch_nofile_raise((size_t)(SLOTS * u->n + HOSTS_STRANGERS_MAX + 8),
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
	if ((rc = launch_ssh_command(u)) != 0 || (rc = launch_door_open(u)) != 0)
		return rc;
	for (int i = 0; i < u->n; i++)
		if (launch_ssh_orders(u, &u->host[i]) != 0) {
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
		launch_fd_close(&h->in);
		launch_fd_close(&h->ctl);
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
	free(u->exited);
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
	for (;;) {
		nfds_t n;

		spawn_more(&u, now);
		/* Before the end too: the verdict on hosts that never
		 * answered comes once the last of them is reaped. */
		escalate(&u, now);
		if (finished(&u, now))
			break;
		n = watch(&u);
		if (poll(u.pfd, n, timeout_ms(&u, now)) < 0 && errno != EINTR) {
			cli_error("poll: %s; stopping the hosts", strerror(errno));
			launch_hosts_failure(&u, EXIT_INTERNAL, 0);
			for (nfds_t i = 0; i < n; i++)
				u.pfd[i].revents = 0;
		}
		now = sr_clock_ns();
		dispatch(&u, now);
	}
	if (u.rejected > 0)
		cli_status("launch: rejected %lu connection(s) that were no "
		    "host's agent", u.rejected);
	rc = outcome(&u);
	cleanup(&u);
	return rc;
}
