/*
 * discover.h - what the environment says about this rank (discover.c is
 * the command's only reader of the environment).
 */
#ifndef SR_DISCOVER_H
#define SR_DISCOVER_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

struct discovered {
	int64_t rank;		/* -1 when no launcher set one */
	int64_t world;		/* -1 when no launcher set one */
	const char *rank_source;	/* "Slurm (SLURM_PROCID)", ... */
	const char *world_source;
};

/* The first launcher's rank and world; -1 with why on a malformed one. */
int discover_rank(struct discovered *d, char *why, size_t why_size);
/* The default address source and where it came from, or NULL. */
const char *discover_peers(const char **origin);
/* SILVIC_RING_KEY_FILE, or NULL. */
const char *discover_key_file(void);
/* SILVIC_RING_HTTP_TOKEN_FILE, or NULL. */
const char *discover_http_token_file(void);
/* SILVIC_RING_TOKEN, or NULL. */
const char *discover_token(void);
/* A key naming this job (Slurm, Open MPI, PMIx ids, SILVIC_RING_JOB). */
const char *discover_job(void);
/* Whether `silvic-ring launch` started this process. */
bool discover_launched(void);
/* The address a rank an agent started on another host binds and
 * advertises (SILVIC_RING_LAUNCH_HOST), or NULL. */
const char *discover_launch_host(void);
/* SSH_CONNECTION's two addresses: the client's (where ssh came from)
 * and this host's; 0, or -1 when it is not set or not four words. */
int discover_ssh_connection(char *client, size_t client_size, char *server,
    size_t server_size);

/* A Slurm job step's layout, from its environment (the step's variables
 * first, the job's otherwise). */
struct discovered_slurm {
	const char *nodelist, *nodelist_name;	/* "node[1-4]", its variable */
	const char *tasks, *tasks_name;		/* "2(x4)", its variable */
	const char *ports;	/* SLURM_STEP_RESV_PORTS ("12000-12015"), or NULL */
	int64_t procid, nodeid, localid;	/* -1 when unset */
};
/* 1 inside a job step (a node list and SLURM_PROCID set), else 0. */
int discover_slurm(struct discovered_slurm *s);
/* The first address of interface `name` (IPv4 preferred), or with name
 * NULL the first IPv4 address of an up, non-loopback interface. */
int discover_interface(const char *name, char *ip, size_t size);
bool discover_is_interface(const char *name);
/* SILVIC_RING_PROGRESS_INTERVAL in seconds: 0, or -1 when unset or not a
 * positive number of seconds. */
int discover_progress_interval(double *seconds);
/* FNV-1a 64 of a string (job tokens from text). */
uint64_t discover_hash(const char *text);

#endif
