/*
 * launch_hosts.h - the launcher's side of `launch --hosts`, in three
 * files: the run itself and its verdicts (launch_hosts.c), ssh and the
 * orders it carries (launch_ssh.c), and the one port the agents dial
 * back, where strangers wait until they prove a host's secret
 * (launch_door.c).  Private to those three.
 */
#ifndef SR_LAUNCH_HOSTS_H
#define SR_LAUNCH_HOSTS_H

#include <stdbool.h>
#include <stdint.h>
#include <poll.h>
#include <sys/resource.h>
#include <sys/types.h>

#include "launch.h"
#include "launch_io.h"
#include "launch_wire.h"

#define HOSTS_NS		1000000000LL
#define HOSTS_ANSWER_SLACK_NS	(10 * HOSTS_NS)	/* past the connect timeout,
						 * for ssh and the agent */
#define HOSTS_HELLO_NS		(10 * HOSTS_NS)	/* a connection's first line */
#define HOSTS_STRANGERS_MAX	64	/* unproven connections at once */
#define HOSTS_EARLY_MAX		4096	/* what ssh says before the agent */

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
	int status;		/* ssh's exit status, once reaped */
	char secret[LAUNCH_SECRET_HEX + 1];
	int in;			/* ssh's stdin: the orders */
	struct wire_out orders;
	int orders_part;	/* 0 the records, 1 the input, 2 the trailer */
	size_t part_off;
	struct launch_stream out, err;
	char early[HOSTS_EARLY_MAX];	/* ssh's stderr until the agent
					 * answers */
	size_t early_len;
	int ctl;		/* the agent's connection back, -1 */
	struct wire_in ctl_in;
	struct wire_out ctl_out;
	bool ctl_closed;	/* the agent closed it */
	int exited;		/* ranks whose exit it reported */
	int64_t spawned_at;
};

/* A connection to the port that has not proved a host's secret yet. */
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
	bool *exited;		/* each rank's exit came */
	char **addr;		/* every rank's address, once published */
	int published;
	bool list_sent, abandoned;
	int status;
	bool interrupted, stopping, broken_pipe, bad_output;
	int64_t began, stop_at, kill_ssh_at, address_at, drain_at;
	struct pollfd *pfd;
	struct rlimit nofile;
};

/* launch_hosts.c: the first failure decides the status, and stops the
 * job stop_in from now; stopping every host; a host's agent answered. */
void launch_hosts_failure(struct run *u, int status, int64_t stop_in);
void launch_hosts_stop(struct run *u, int64_t now);
void launch_hosts_ready(struct run *u, struct host *h, int64_t now);

/* launch_ssh.c: the ssh command, built once;
 * a host's ssh started, its orders made and written as its stdin takes
 * them; what ssh said before the agent answered: read, said with a
 * verdict, or passed on once the agent answered. */
int launch_ssh_command(struct run *u);
int launch_ssh_spawn(struct run *u, struct host *h);
int launch_ssh_orders(struct run *u, struct host *h);
void launch_ssh_feed(struct run *u, struct host *h);
void launch_ssh_early_read(struct host *h, int reads);
void launch_ssh_say(struct host *h, const char *verdict);
void launch_ssh_flush_early(struct host *h);

/* launch_door.c: the listener (0 or an exit status after a message);
 * new connections; a stranger's words, its hello handed to its host;
 * one dropped (why NULL: handed over); those past their deadline. */
int launch_door_open(struct run *u);
void launch_door_accept(struct run *u);
void launch_door_read(struct run *u, int i, int64_t now);
void launch_door_drop(struct run *u, int i, const char *why);
void launch_door_expire(struct run *u, int64_t now);

#endif
