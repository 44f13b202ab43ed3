/*
 * launch.h - what `silvic-ring launch`'s files share: the job as the
 * command line gives it (struct launch_job), the ranks this process
 * starts on its own machine (struct launch and launch_ranks.c), and the
 * two ways across hosts: the launcher over ssh (launch_ssh.c) and the
 * agent it starts on each host (launch_agent.c).
 *
 * One rank engine serves the local `launch -n N` and each host's agent:
 * the agent starts its host's ranks with it, numbered from base, and
 * relays the addresses to the launcher instead of exchanging them
 * itself (upstream).  The engine is driven step by step (watch, dispatch,
 * reap, escalate) so that the agent can poll its own descriptors beside
 * the ranks'.
 */
#ifndef SR_LAUNCH_H
#define SR_LAUNCH_H

#include <poll.h>
#include <stdbool.h>
#include <stdint.h>
#include <sys/resource.h>
#include <sys/types.h>

#include "cli.h"
#include "hosts.h"
#include "launch_io.h"

#define LAUNCH_RANKS_MAX	1024	/* ranks one process starts */
#define LAUNCH_ADDRESS_MAX	256	/* "host:port", newline excluded */
#define LAUNCH_INPUT_MAX	(64u << 20)
#define LAUNCH_KILL_AFTER_NS	1000000000LL	/* from SIGTERM to SIGKILL */
#define LAUNCH_ADDRESS_SLACK	5.0	/* the launcher waits this much
					 * longer than the ranks' --timeout */

/* What the command line says, whichever way the ranks start. */
struct launch_job {
	int world;		/* -n, or every slot of --hosts */
	double grace;		/* --grace */
	bool tag;		/* --tag-output (the default) */
	char **argv;		/* "silvic-ring", COMMAND, ARGS...; NULL-ended */
	struct cli_preflight command;	/* the command's options, checked */
	bool share_stdin;	/* the ranks read stdin; else /dev/null */
	bool machine;		/* stdout is rank 0's, byte for byte */
	double address_s;	/* the ranks have to publish; 0: no limit */
	char *input;		/* stdin, read whole when shared */
	size_t input_len;
};

struct launch_rank {
	pid_t pid;		/* 0 once reaped */
	int status;
	bool reported;		/* upstream: its exit was passed on */
	struct launch_stream out, err;
	int ctl;		/* our end of its address socket, -1 once closed */
	char addr[LAUNCH_ADDRESS_MAX + 2];
	size_t addr_len;
	bool published;
	size_t list_off;	/* bytes of the list it has been sent */
	int in;			/* write end of its stdin pipe, -1 once done */
	size_t in_off;
};

struct launch {
	const struct launch_job *job;
	int base, count;	/* ranks base .. base+count-1 of job->world */
	int started, alive;
	struct launch_rank *ranks;
	/* The ranks' environment beyond their number: the address a
	 * rank on another host binds (SILVIC_RING_LAUNCH_HOST), or NULL. */
	const char *bind_host;
	bool upstream;		/* the list comes from a launcher elsewhere */
	/* Every rank gets SILVIC_RING_SHARED_CORES=yes: a launch on this
	 * machine alone, of more ranks than the cores it may run on, whose
	 * caller's environment does not say. */
	bool shared_cores;
	/* And SILVIC_RING_CPUS=cpus (the CPUs this launch may run on, as
	 * taskset -c lists them) when its ranks fill or outnumber them,
	 * unless the caller's environment sets it; "" for none. */
	char cpus[1024];
	char *list;		/* the address list, once list_len > 0 */
	size_t list_len;
	int published;
	bool bad_address, bad_output, interrupted, stopping;
	bool broken_pipe;	/* our stdout's reader went away */
	int status;		/* of the first rank that failed, or 0 */
	struct pollfd *pfd;	/* the self-pipe, then 4 per rank, then the
				 * caller's extra slots */
	struct rlimit nofile;	/* the caller's limit, given back to ranks */
	char *exe;		/* this program's path, which the ranks run */
	int64_t term_at, kill_at, drain_at, address_at;	/* 0: not due */
};

/*
 * Installs the SIGCHLD/SIGINT/SIGTERM handlers (they write to a
 * self-pipe, whose read end launch_wake_fd returns), ignores SIGPIPE and
 * makes sure descriptors 0-2 are open.  0, or an exit status after a
 * message.
 */
int launch_signals_init(void);
int launch_wake_fd(void);
/*
 * fork(2) for a child of the launcher: SIGCHLD, SIGINT, SIGTERM and
 * SIGALRM stay blocked until the child has its default handlers back, so
 * a signal meant for it is not lost to ours, and the child dies with the
 * launcher (PR_SET_PDEATHSIG), even one killed before it asked.  0 in the
 * child, its pid in the launcher, -1 with errno.
 */
pid_t launch_fork(void);
/* "rank 3" or "ranks 4-7", for messages (a static buffer). */
const char *launch_ranks_text(int base, int count);
/* Closes *fd if open and sets it to -1. */
void launch_fd_close(int *fd);
/* Empties the self-pipe once poll said it is readable. */
void launch_wake_drain(void);
/* Raises the descriptor limit to hold n more, remembering the caller's
 * in *saved (which the ranks get back). */
void launch_nofile_raise(size_t n, struct rlimit *saved);

/* Allocates count ranks' state, and extra slots at the end of l->pfd
 * for the caller's own descriptors; 0 or an exit status after a
 * message. */
int launch_ranks_init(struct launch *l, const struct launch_job *job,
    int base, int count, int extra);
void launch_ranks_fini(struct launch *l);
/* Starts every rank (stops early on SIGINT); on a failure to start one
 * the others are stopped and status set. */
void launch_ranks_start(struct launch *l);
/* The descriptors to poll: returns how many of l->pfd to pass. */
nfds_t launch_ranks_watch(struct launch *l);
/* Handles what poll reported in l->pfd, then reaps exited ranks. */
void launch_ranks_dispatch(struct launch *l);
/* Deadlines: the address deadline, SIGTERM after the grace, SIGKILL a
 * second later, SIGINT passed on. */
void launch_ranks_escalate(struct launch *l, int64_t now);
/* Milliseconds until the next deadline, -1 for none. */
int launch_ranks_timeout(const struct launch *l, int64_t now);
/* Every rank reaped and its output drained (or the drain time over). */
bool launch_ranks_finished(const struct launch *l, int64_t now);
/* Stops every rank now: SIGTERM, SIGKILL a second later. */
void launch_ranks_stop(struct launch *l);
/* Closes the address exchange: ranks still waiting for the list fail. */
void launch_ranks_abandon(struct launch *l);
/* Hands the ranks the whole list (world lines of "host:port\n" and an
 * empty line); 0, or -1 out of memory. */
int launch_ranks_set_list(struct launch *l, const char *text, size_t len);
/* The exit status of this process's part of the job. */
int launch_ranks_outcome(const struct launch *l);
/* Runs every rank to the end on this machine (launch -n N). */
int launch_ranks_run(struct launch *l);

/* launch --hosts/--hostfile: the options, and the hosts they name. */
struct launch_remote {
	const char *hosts;	/* --hosts, or NULL */
	const char *hostfile;	/* --hostfile, or NULL */
	const char *ssh;	/* --ssh CMD, or NULL for ssh */
	const char *remote_path;	/* --remote-path, or NULL: this binary */
	const char *launcher_address;	/* --launcher-address HOST[:PORT] */
	int fanout;		/* --fanout */
	double connect_timeout;	/* --connect-timeout seconds */
	double keepalive;	/* --keepalive seconds */
	struct host_list list;	/* the hosts, in rank order */
	int *ranks;		/* how many ranks each host runs */
	int busiest;		/* the most ranks on one host */
};

/*
 * Reads the host list and gives each host its ranks: consecutive, in
 * the list's order, filling each host's slots before the next; *world
 * 0 takes every slot.  0, or an exit status after a message
 * (launch_ssh.c).
 */
int launch_hosts_plan(struct launch_remote *o, int *world);
/* Starts the job on the hosts and runs it to the end; the exit status. */
int launch_hosts_run(struct launch_remote *o, struct launch_job *job);
void launch_hosts_fini(struct launch_remote *o);
/* The agent a launcher starts on a host: `silvic-ring launch --agent`,
 * its orders on stdin (launch_agent.c). */
int launch_agent_main(void);

#endif
