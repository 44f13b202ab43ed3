/*
 * rendezvous.h - how a rank obtains the full address list: one small
 * interface (a struct of function pointers, as iperf3's struct protocol)
 * and its backends: a file (plain list or MLX hostfile), an environment
 * variable, a shared directory, the local launcher's socket, and HTTP.
 *
 * Parsing the list formats is pure (list.c) so it can be tested and fuzzed
 * without files.
 */
#ifndef SR_RENDEZVOUS_H
#define SR_RENDEZVOUS_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "silvic_ring.h"

/* More ranks than this in a list is an error, not a guess. */
#define LIST_MAX_RANKS 65536

struct peer_list {
	char **addr;
	uint64_t n;
	/* An MLX hostfile's ranks of several addresses: nics[i] (i <
	 * nics_n) is rank i's, NULL-terminated, the first being addr[i]; a
	 * rank past nics_n, or with nics[i] NULL, has one.  NULL when no
	 * rank has several. */
	char ***nics;
	uint64_t nics_n;
};

void peer_list_free(struct peer_list *list);
/* Appends a copy of address; -1 on ENOMEM. */
int peer_list_add(struct peer_list *list, const char *address);

/*
 * Parses a list: a plain list (one host:port per line, '#' comments and
 * blank lines ignored) or, when the first non-blank byte is '[', an MLX
 * hostfile (a JSON list with one entry per rank, each a list of "ip:port"
 * strings; the first string of each entry is the rank's address, and
 * all of them, at most SR_RING_STREAMS_MAX, go to nics when any rank has
 * more than one).  name
 * is for messages ("hosts.txt:3: 'x' has no :port").  0, or -1 with why.
 * Duplicate addresses and more than LIST_MAX_RANKS entries are errors.
 */
int list_parse(const char *text, size_t len, const char *name,
    struct peer_list *out, char *why, size_t why_size);
/* A comma- or space-separated list (env:VAR). */
int list_parse_words(const char *text, const char *name,
    struct peer_list *out, char *why, size_t why_size);

struct rendezvous;

/*
 * A backend answers what the rank's setup (ring_setup.c) asks of it; the
 * setup never asks which backend it holds.
 */
struct rendezvous_backend {
	const char *name;
	/* How the --dry-run plan names where the list comes from; NULL:
	 * the source itself (a path, VAR, URL). */
	const char *plan_source;
	/*
	 * The exchange is this job's alone (the launcher's socket pair), so
	 * a dry run publishes and waits as a real run does; a source that
	 * other ranks or jobs share is looked at once and given nothing.
	 */
	bool dry_run_exchanges;
	/*
	 * The list is complete once every rank published to it (a shared
	 * directory, a server): a wait that times out may mean ranks that
	 * were never started.
	 */
	bool waits_for_ranks;
	/* Whoever serves the list started every rank (the launcher): a
	 * timeout never asks "did you start N ranks?". */
	bool started_ranks;
	/*
	 * The list, when it can be known before binding (a complete static
	 * file, an environment variable): 1 with *list filled, 0 when it is
	 * not known yet, -1 with err.
	 */
	int (*preload)(struct rendezvous *r, int64_t world,
	    struct peer_list *list, struct sr_error *err);
	/* Makes this rank's address known (rank and world -1 when
	 * unknown); may learn the rank (HTTP assigns one) into *rank. */
	int (*publish)(struct rendezvous *r, const char *address,
	    int64_t *rank, int64_t world, struct sr_error *err);
	/* Waits until the list is complete (world entries, or whatever the
	 * source calls complete when world is -1) or the deadline. */
	int (*wait)(struct rendezvous *r, int64_t world, int64_t deadline_ns,
	    struct peer_list *list, struct sr_error *err);
	/*
	 * After the ring formed: tidy up.  A shared directory's own file
	 * goes once every rank has read the others', so that backend waits
	 * for them on the ring (a barrier).  0, or -1 with err (the ring is
	 * then of no use).
	 */
	int (*done)(struct rendezvous *r, struct sr_ring *ring,
	    struct sr_error *err);
	void (*close)(struct rendezvous *r);
};

struct rendezvous {
	const struct rendezvous_backend *backend;
	char *source;		/* what follows the prefix: a path, VAR, URL */
	const char *origin;	/* "--peers", "SILVIC_RING_PEERS", ... */
	double timeout;		/* seconds, for messages */
	const char *job;	/* the job key for dir:, or NULL */
	const char *bearer;	/* HTTP bearer token, or NULL */
	const char *world_source;	/* who said the world size, or NULL */
	bool dry_run;		/* look once; publish nothing */
	int64_t rank;		/* this rank, when known before the list */
	int64_t deadline_ns;	/* of the rendezvous (sr_clock_ns) */
	bool keyed;		/* a key is configured: refuse unsafe dirs */
	void *state;
};

/*
 * Chooses the backend for a SOURCE ("FILE", "env:VAR", "dir:PATH",
 * "launch:FD", "http://...", "dns:PATTERN", "slurm:[PORT]").  0, or -1
 * with err (SR_ECONFIG).
 */
int rendezvous_open(struct rendezvous *r, const char *source,
    const char *origin, struct sr_error *err);
void rendezvous_close(struct rendezvous *r);

extern const struct rendezvous_backend rendezvous_file;
extern const struct rendezvous_backend rendezvous_env;
extern const struct rendezvous_backend rendezvous_dir;
extern const struct rendezvous_backend rendezvous_launch;
extern const struct rendezvous_backend rendezvous_http;
extern const struct rendezvous_backend rendezvous_dns;
extern const struct rendezvous_backend rendezvous_slurm;

/* For a backend with nothing to publish, tidy or close. */
int rendezvous_no_publish(struct rendezvous *r, const char *address,
    int64_t *rank, int64_t world, struct sr_error *err);
int rendezvous_no_done(struct rendezvous *r, struct sr_ring *ring,
    struct sr_error *err);
void rendezvous_no_close(struct rendezvous *r);

/* Writes text to path atomically (a temporary file, then rename). */
int write_atomically(const char *path, const char *text, char *why,
    size_t why_size);
/*
 * Checks a directory this job's files go to (what: "dir:", "the
 * --address-file directory"): writable by every user without the sticky
 * bit, or owned by another user (not root), lets someone else replace the
 * files and plant the addresses ranks dial.  0 when safe; 1 after a
 * warning on stderr; -1 with why when keyed (the caller refuses).
 */
int rendezvous_check_dir(const char *dir, const char *what, bool keyed,
    char *why, size_t why_size);

#endif
