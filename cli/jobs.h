/*
 * jobs.h - the rendezvous server's job table: jobs by name, each a world
 * of ranks and the address that holds each rank.  Pure: no I/O, no
 * clock (callers pass the time), no locking (the caller holds its own).
 * The table enforces the server's limits and drops expired jobs.
 */
#ifndef SR_JOBS_H
#define SR_JOBS_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "silvic_ring.h"

/* A job name: 1-128 bytes of [A-Za-z0-9._-]. */
#define JOBS_NAME_MAX 128
/* A registration body larger than this is refused (413). */
#define JOBS_BODY_MAX 4096
/* The longest progress text jobs_progress writes. */
#define JOBS_PROGRESS_MAX 256

struct jobs_limits {
	uint64_t max_jobs;	/* jobs held at once */
	uint64_t max_ranks;	/* the largest world a job may have */
	int64_t ttl_ns;		/* a job expires this long after its last
				 * registration */
	int64_t lease_ns;	/* a registration lapses this long after its
				 * rank's last request (0: never) */
	uint64_t max_client_jobs;	/* live jobs one client may have
					 * created (0: no limit) */
};

/* One rank's registration: what a POST body says (-1 = not given); a
 * DELETE body says only the address. */
struct jobs_registration {
	char address[SR_ADDR_MAX];
	int64_t world;
	int64_t rank;
	/* Who sent it (the client's IP address, filled by the caller):
	 * what --max-client-jobs counts; empty counts for no one. */
	char client[48];
};

/* What jobs_register and jobs_unregister did; serve_http.c maps these to
 * HTTP statuses. */
enum jobs_result {
	JOBS_OK,		/* 200: *rank holds (or held) this address's
				 * rank */
	JOBS_BAD,		/* 400: out of range, world missing */
	JOBS_CONFLICT,		/* 409: world differs, rank held, done */
	JOBS_FULL,		/* 503: too many jobs */
	JOBS_NOMEM,		/* 503: out of memory */
	JOBS_MISSING,		/* 404: the address holds no rank there */
	JOBS_QUOTA		/* 429: the client created too many jobs */
};

struct jobs;
struct job;

/*
 * A new table, or NULL on ENOMEM.  on_drop (may be NULL) is called with
 * the name and aux pointer of every job the table drops (expired, or
 * jobs_free), so the caller can free what it hangs on aux.
 */
struct jobs *jobs_new(const struct jobs_limits *limits,
    void (*on_drop)(const char *name, void *aux, void *arg), void *arg);
void jobs_free(struct jobs *t);

/* Whether name is a valid job name. */
bool jobs_name_valid(const char *name);

/*
 * Parses a registration body: key=value lines ("address=HOST:PORT",
 * "world=N", optional "rank=R"; blank lines and a trailing newline are
 * fine; CRLF too).  Unknown or repeated keys, a malformed address and
 * numbers out of range are errors.  0, or -1 with why.
 */
int jobs_parse_registration(const char *body, size_t len,
    struct jobs_registration *reg, char *why, size_t why_size);

/*
 * Leases.  With limits.lease_ns > 0 a registration lives while its rank
 * polls: each registration, and each jobs_poll naming its address,
 * extends it; one whose lease passed before the job completed is taken
 * out as by jobs_unregister (and a job left with none is dropped), so a
 * rank that was killed leaves no dead address for a rerun.  A complete
 * job is finished once every rank fetched its list (jobs_poll) or
 * stopped polling: it still answers GETs until it expires or the table
 * is full (then every finished job is dropped), a new registration
 * starts the job afresh, and it no longer counts against its creator's
 * --max-client-jobs.
 */

/*
 * Registers reg->address in job name at time now, creating the job when
 * it does not exist, or starting it afresh when it is finished
 * (reg->world is then required).  The rank is reg->rank,
 * or the lowest free one; the same address registered again gets the same
 * rank back.  On JOBS_OK *rank and *world are filled and *completed is
 * true when this registration completed the job; otherwise why says what
 * was wrong ("rank 2 is held by 127.0.0.1:5000").
 */
enum jobs_result jobs_register(struct jobs *t, const char *name,
    const struct jobs_registration *reg, int64_t now, int64_t *rank,
    int64_t *world, bool *completed, char *why, size_t why_size);

/*
 * The rank at address polls job name at time now and waits (or is
 * answered) until until: an incomplete job's registration then lives at
 * least until until plus the lease; in a complete job the rank has the
 * list now.  JOBS_OK, or JOBS_MISSING (why filled) when the job is
 * incomplete or gone and address holds no rank in it: the rank must
 * register again.
 */
enum jobs_result jobs_poll(struct jobs *t, const char *name,
    const char *address, int64_t now, int64_t until, char *why,
    size_t why_size);

/*
 * Takes address's registration out of job name at time now, so that a
 * rank that failed before the ring formed leaves no dead address for a
 * rerun of the job.  JOBS_OK with *rank the rank it held, which is free
 * again (a job left with no registration is dropped); JOBS_MISSING when
 * there is no such job or address holds no rank in it; JOBS_CONFLICT
 * when the job is complete (its list may have gone out: it stays until
 * it expires).  Otherwise why says what was wrong.  The job's expiry is
 * not moved.
 */
enum jobs_result jobs_unregister(struct jobs *t, const char *name,
    const char *address, int64_t now, int64_t *rank, char *why,
    size_t why_size);

/* The job called name, or NULL when there is none (or it expired). */
struct job *jobs_find(struct jobs *t, const char *name, int64_t now);

/* The complete list, one host:port a line in rank order, or NULL while
 * the job is incomplete.  Owned by the job. */
const char *job_list(const struct job *j, size_t *len);
/*
 * What a job is waiting for, e.g. "not yet: 3 of 4 ranks; missing 2" (up
 * to 16 missing ranks, then "..."); j NULL gives "not yet: 0 of ? ranks".
 */
void job_progress(const struct job *j, char *buf, size_t size);
/* The caller's pointer for this job (NULL at first). */
void **job_aux(struct job *j);
uint64_t job_world(const struct job *j);
uint64_t job_present(const struct job *j);

/*
 * Requests waiting for a job to complete (long polls).  The caller
 * embeds a jobs_waiter in each; the table only keeps the list, so that
 * who is woken when is decided here, purely.
 */
struct jobs_waiter {
	struct jobs_waiter *prev, *next;
	char job[JOBS_NAME_MAX + 1];
	int64_t deadline;
	bool waiting;		/* on the list */
};

/* Puts w on the list: it waits for job name until deadline. */
void jobs_wait(struct jobs *t, struct jobs_waiter *w, const char *name,
    int64_t deadline);
/* Takes w off the list, if it is on it. */
void jobs_unwait(struct jobs *t, struct jobs_waiter *w);
/*
 * Takes off the list, and hands to fn, every waiter of job name (NULL:
 * of any job) whose deadline is at or before now (now 0: whatever the
 * deadline); returns how many.  fn may not touch the list.
 */
size_t jobs_take_waiters(struct jobs *t, const char *name, int64_t now,
    void (*fn)(struct jobs_waiter *w, void *arg), void *arg);
size_t jobs_waiting(const struct jobs *t);

/* text for a message, NUL-terminated: printable ASCII, the rest '?',
 * cut with "..." to fit size.  Returns out. */
const char *jobs_printable(const char *text, char *out, size_t size);

/* The waiters, most recent first (iterate with ->next); the caller
 * may not change the list while it iterates. */
struct jobs_waiter *jobs_waiters(const struct jobs *t);

/*
 * Drops jobs whose ttl has passed, takes lapsed registrations out of
 * incomplete jobs (dropping those left empty) and notes jobs that
 * finished; returns how many jobs it dropped.
 */
size_t jobs_sweep(struct jobs *t, int64_t now);
/* How many jobs the table holds. */
size_t jobs_count(const struct jobs *t);

#endif
