/*
 * jobs.c - the rendezvous server's job table (see jobs.h).  Pure: text
 * and times in, results and messages out; serve_http.c does the HTTP, the
 * clock and the locking.
 *
 * Jobs live in a chained hash table by name.  Each job holds an array of
 * world address pointers (calloc'd, so pages no rank touched cost no
 * memory), an open-addressing index from address to rank that grows with
 * the registrations, and, once complete, the list text every GET serves.
 * A registration taken back (DELETE, before the job is complete) or
 * lapsed (its rank stopped polling) frees its rank, so the lowest free
 * rank can move down again.  Each job also holds a lease per rank and
 * counts against the client that created it while it is live; the
 * clients with live jobs are a second chained hash table.
 */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "cli.h"
#include "jobs.h"
#include "rendezvous.h"

#define MISSING_SHOWN 16
/* A complete job's lease of a rank that fetched the list. */
#define FETCHED INT64_MIN

/* A client (IP address) that created live jobs. */
struct client {
	struct client *next;
	char name[48];
	uint64_t jobs;
};

struct job {
	struct job *next;	/* hash chain */
	char name[JOBS_NAME_MAX + 1];
	uint64_t world, present, lowest_free;
	char **addr;		/* world entries, NULL where free */
	uint32_t *index;	/* rank + 1 per slot, 0 when empty */
	uint64_t index_size;	/* a power of two, or 0 */
	char *list;		/* the served list, once complete */
	size_t list_len;
	int64_t touched;	/* the last registration */
	int64_t *lease;		/* world entries: until when each lives */
	int64_t next_lapse;	/* incomplete: no lease ends before this */
	int64_t last_lease;	/* complete: no unfetched lease ends after */
	uint64_t unfetched;	/* complete: ranks without the list yet */
	struct client *owner;	/* counted against while live, or NULL */
	void *aux;
};

struct jobs {
	struct jobs_limits limits;
	void (*on_drop)(const char *name, void *aux, void *arg);
	void *arg;
	struct job **bucket;
	struct client **clients;	/* nbuckets chains too */
	size_t nbuckets;	/* a power of two */
	size_t count;
	struct jobs_waiter *waiters;
	size_t nwaiting;
};

static uint64_t
hash(const char *s)
{
	uint64_t h = 1469598103934665603ull;

	for (; *s; s++)
		h = (h ^ (unsigned char)*s) * 1099511628211ull;
	return h;
}

const char *
jobs_printable(const char *text, char *out, size_t size)
{
	size_t n = 0, len = strlen(text);

	for (size_t i = 0; i < len && n + 4 < size; i++) {
		unsigned char c = (unsigned char)text[i];

		out[n++] = c >= 0x20 && c < 0x7f ? (char)c : '?';
	}
	if (n < len && n >= 3 && n + 4 >= size)
		memcpy(out + n - 3, "...", 3);
	out[n] = '\0';
	return out;
}

/* ------------------------------------------------------------ the table */

struct jobs *
jobs_new(const struct jobs_limits *limits,
    void (*on_drop)(const char *name, void *aux, void *arg), void *arg)
{
	struct jobs *t = calloc(1, sizeof(*t));
	size_t n = 16;

	if (t == NULL)
		return NULL;
	t->limits = *limits;
	t->on_drop = on_drop;
	t->arg = arg;
	while (n < limits->max_jobs && n < (1u << 16))
		n *= 2;
	if ((t->bucket = calloc(n, sizeof(*t->bucket))) == NULL ||
	    (t->clients = calloc(n, sizeof(*t->clients))) == NULL) {
		free(t->bucket);
		free(t);
		return NULL;
	}
	t->nbuckets = n;
	return t;
}

/* ------------------------------------------------------------ clients */

static struct client **
client_link(struct jobs *t, const char *name)
{
	struct client **link = &t->clients[hash(name) & (t->nbuckets - 1)];

	while (*link != NULL && strcmp((*link)->name, name) != 0)
		link = &(*link)->next;
	return link;
}

/* The live jobs name created. */
static uint64_t
client_jobs(struct jobs *t, const char *name)
{
	struct client *c = *client_link(t, name);

	return c != NULL ? c->jobs : 0;
}

/* Counts j against client name (none when empty); -1 on ENOMEM. */
static int
client_count(struct jobs *t, struct job *j, const char *name)
{
	struct client **link, *c;

	if (name[0] == '\0')
		return 0;
	link = client_link(t, name);
	if ((c = *link) == NULL) {
		if ((c = calloc(1, sizeof(*c))) == NULL)
			return -1;
		snprintf(c->name, sizeof(c->name), "%s", name);
		*link = c;
	}
	c->jobs++;
	j->owner = c;
	return 0;
}

/* j no longer counts against the client that created it. */
static void
client_uncount(struct jobs *t, struct job *j)
{
	struct client **link, *c = j->owner;

	if (c == NULL)
		return;
	j->owner = NULL;
	if (--c->jobs > 0)
		return;
	link = client_link(t, c->name);
	*link = c->next;
	free(c);
}

/* ------------------------------------------------------------- leases */

static int64_t
lease_from(const struct jobs *t, int64_t from)
{
	if (t->limits.lease_ns <= 0 || from > INT64_MAX - t->limits.lease_ns)
		return INT64_MAX;
	return from + t->limits.lease_ns;
}

/* Complete, and every rank has the list or stopped polling. */
static bool
finished(const struct job *j, int64_t now)
{
	return j->list != NULL && (j->unfetched == 0 || j->last_lease <= now);
}

static void
job_free(struct jobs *t, struct job *j)
{
	client_uncount(t, j);
	if (t->on_drop != NULL)
		t->on_drop(j->name, j->aux, t->arg);
	for (uint64_t i = 0; i < j->world; i++)
		free(j->addr[i]);
	free(j->addr);
	free(j->index);
	free(j->list);
	free(j->lease);
	free(j);
}

void
jobs_free(struct jobs *t)
{
	struct job *j, *next;

	if (t == NULL)
		return;
	for (size_t b = 0; b < t->nbuckets; b++)
		for (j = t->bucket[b]; j != NULL; j = next) {
			next = j->next;
			job_free(t, j);
		}
	free(t->bucket);
	free(t->clients);
	free(t);
}

static bool
expired(const struct jobs *t, const struct job *j, int64_t now)
{
	return now - j->touched >= t->limits.ttl_ns;
}

static void remove_rank(struct job *j, uint64_t rank);

/*
 * Takes the registrations whose lease passed out of an incomplete job,
 * and stops counting a finished one against its creator.  Whether the
 * job is left empty (the caller drops it).
 */
static bool
job_age(struct jobs *t, struct job *j, int64_t now)
{
	int64_t next = INT64_MAX;

	if (j->list != NULL) {
		if (finished(j, now))
			client_uncount(t, j);
		return false;
	}
	if (j->next_lapse > now)
		return false;
	for (uint64_t r = 0; r < j->world; r++) {
		if (j->addr[r] == NULL)
			continue;
		if (j->lease[r] <= now)
			remove_rank(j, r);
		else if (j->lease[r] < next)
			next = j->lease[r];
	}
	j->next_lapse = next;
	return j->present == 0;
}

size_t
jobs_sweep(struct jobs *t, int64_t now)
{
	size_t dropped = 0;

	for (size_t b = 0; b < t->nbuckets; b++) {
		struct job **link = &t->bucket[b], *j;

		while ((j = *link) != NULL) {
			if (!expired(t, j, now) && !job_age(t, j, now)) {
				link = &j->next;
				continue;
			}
			*link = j->next;
			job_free(t, j);
			t->count--;
			dropped++;
		}
	}
	return dropped;
}

/* Drops every finished job (all of them, so that which ones go does
 * not depend on the hash); whether there is room for one more. */
static bool
reclaim(struct jobs *t, int64_t now)
{
	for (size_t b = 0; b < t->nbuckets; b++) {
		struct job **link = &t->bucket[b], *j;

		while ((j = *link) != NULL) {
			if (!finished(j, now)) {
				link = &j->next;
				continue;
			}
			*link = j->next;
			job_free(t, j);
			t->count--;
		}
	}
	return t->count < t->limits.max_jobs;
}

size_t
jobs_count(const struct jobs *t)
{
	return t->count;
}

bool
jobs_name_valid(const char *name)
{
	size_t n = strspn(name, "abcdefghijklmnopqrstuvwxyz"
	    "ABCDEFGHIJKLMNOPQRSTUVWXYZ0123456789._-");

	return n > 0 && n <= JOBS_NAME_MAX && name[n] == '\0';
}

struct job *
jobs_find(struct jobs *t, const char *name, int64_t now)
{
	struct job **link = &t->bucket[hash(name) & (t->nbuckets - 1)], *j;

	for (; (j = *link) != NULL; link = &j->next) {
		if (strcmp(j->name, name) != 0)
			continue;
		if (!expired(t, j, now) && !job_age(t, j, now))
			return j;
		*link = j->next;
		job_free(t, j);
		t->count--;
		return NULL;
	}
	return NULL;
}

static struct job *
job_new(struct jobs *t, const char *name, uint64_t world, int64_t now)
{
	struct job *j = calloc(1, sizeof(*j));
	size_t b = hash(name) & (t->nbuckets - 1);

	if (j == NULL)
		return NULL;
	if ((j->addr = calloc(world, sizeof(*j->addr))) == NULL ||
	    (j->lease = calloc(world, sizeof(*j->lease))) == NULL) {
		free(j->addr);
		free(j);
		return NULL;
	}
	j->next_lapse = INT64_MAX;
	snprintf(j->name, sizeof(j->name), "%s", name);
	j->world = world;
	j->touched = now;
	j->next = t->bucket[b];
	t->bucket[b] = j;
	t->count++;
	return j;
}

/* ------------------------------------------------ address to rank index */

static int64_t
index_find(const struct job *j, const char *address)
{
	uint64_t mask = j->index_size - 1;

	if (j->index_size == 0)
		return -1;
	for (uint64_t i = hash(address) & mask;; i = (i + 1) & mask) {
		uint32_t slot = j->index[i];

		if (slot == 0)
			return -1;
		if (strcmp(j->addr[slot - 1], address) == 0)
			return (int64_t)slot - 1;
	}
}

static void
index_put(uint32_t *index, uint64_t size, const char *address, uint64_t rank)
{
	uint64_t i = hash(address) & (size - 1);

	while (index[i] != 0)
		i = (i + 1) & (size - 1);
	index[i] = (uint32_t)(rank + 1);
}

/*
 * Takes rank's address out of the index.  Linear probing has no
 * tombstones here: the entries after the hole in its probe run move back
 * into it when their home slot is not between the hole and them, so that
 * no lookup stops early at the hole (Knuth's algorithm R).
 */
static void
index_remove(struct job *j, uint64_t rank)
{
	uint64_t mask = j->index_size - 1, hole, i, home;

	for (hole = hash(j->addr[rank]) & mask; j->index[hole] != rank + 1;
	    hole = (hole + 1) & mask)
		continue;
	j->index[hole] = 0;
	for (i = (hole + 1) & mask; j->index[i] != 0; i = (i + 1) & mask) {
		home = hash(j->addr[j->index[i] - 1]) & mask;
		if (((i - home) & mask) < ((i - hole) & mask))
			continue;
		j->index[hole] = j->index[i];
		j->index[i] = 0;
		hole = i;
	}
}

/* Makes room for one more address (at most half full); -1 on ENOMEM. */
static int
index_reserve(struct job *j)
{
	uint64_t size = j->index_size ? j->index_size : 16;
	uint32_t *grown;

	while (size < 2 * (j->present + 1))
		size *= 2;
	if (size == j->index_size)
		return 0;
	if ((grown = calloc(size, sizeof(*grown))) == NULL)
		return -1;
	for (uint64_t i = 0; i < j->index_size; i++)
		if (j->index[i] != 0)
			index_put(grown, size, j->addr[j->index[i] - 1],
			    j->index[i] - 1);
	free(j->index);
	j->index = grown;
	j->index_size = size;
	return 0;
}

/* --------------------------------------------------------- registration */

static int
parse_address(const char *value, struct jobs_registration *reg, char *why,
    size_t why_size)
{
	struct peer_list one;
	char text[SR_ADDR_MAX + 4], what[300], q[100];
	bool same;

	if (strlen(value) >= sizeof(reg->address)) {
		snprintf(why, why_size, "address '%s' is not host:port",
		    jobs_printable(value, q, sizeof(q)));
		return -1;
	}
	/* The comment line keeps "[v6]:port" from reading as an MLX
	 * hostfile, exactly as in the served list. */
	snprintf(text, sizeof(text), "#\n%s\n", value);
	if (list_parse(text, strlen(text), "address", &one, what,
		sizeof(what)) != 0) {
		snprintf(why, why_size, "%s", what);
		return -1;
	}
	same = one.n == 1 && strcmp(one.addr[0], value) == 0;
	peer_list_free(&one);
	if (!same) {
		snprintf(why, why_size, "address '%s' is not host:port",
		    jobs_printable(value, q, sizeof(q)));
		return -1;
	}
	snprintf(reg->address, sizeof(reg->address), "%s", value);
	return 0;
}

/* Applies one "key=value" line (NUL-terminated, trimmed). */
static int
parse_line(char *line, unsigned lineno, struct jobs_registration *reg,
    char *why, size_t why_size)
{
	char *eq = strchr(line, '='), *value, q[100];
	uint64_t v;

	if (eq == NULL) {
		snprintf(why, why_size, "line %u: '%s' is not key=value",
		    lineno, jobs_printable(line, q, sizeof(q)));
		return -1;
	}
	*eq = '\0';
	value = eq + 1;
	if (strcmp(line, "address") == 0) {
		if (reg->address[0] != '\0')
			goto twice;
		return parse_address(value, reg, why, why_size);
	}
	if (strcmp(line, "world") == 0) {
		if (reg->world >= 0)
			goto twice;
		if (cli_parse_uint(value, 0, UINT32_MAX, &v) != 0 || v == 0) {
			snprintf(why, why_size, "world '%s' is not a world "
			    "size", jobs_printable(value, q, sizeof(q)));
			return -1;
		}
		reg->world = (int64_t)v;
		return 0;
	}
	if (strcmp(line, "rank") == 0) {
		if (reg->rank >= 0)
			goto twice;
		if (cli_parse_uint(value, 0, UINT32_MAX - 1, &v) != 0) {
			snprintf(why, why_size, "rank '%s' is not a rank "
			    "number", jobs_printable(value, q, sizeof(q)));
			return -1;
		}
		reg->rank = (int64_t)v;
		return 0;
	}
	snprintf(why, why_size, "line %u: unknown key '%s' (address, world, "
	    "rank)", lineno, jobs_printable(line, q, sizeof(q)));
	return -1;
twice:
	snprintf(why, why_size, "line %u: '%s' is given twice", lineno, line);
	return -1;
}

int
jobs_parse_registration(const char *body, size_t len,
    struct jobs_registration *reg, char *why, size_t why_size)
{
	char line[JOBS_BODY_MAX + 1];
	size_t start = 0;
	unsigned lineno = 0;

	memset(reg, 0, sizeof(*reg));
	reg->world = -1;
	reg->rank = -1;
	if (len > JOBS_BODY_MAX) {
		snprintf(why, why_size, "the body is larger than %d bytes",
		    JOBS_BODY_MAX);
		return -1;
	}
	if (memchr(body, '\0', len) != NULL) {
		snprintf(why, why_size, "the body holds a NUL byte");
		return -1;
	}
	while (start < len) {
		const char *nl = memchr(body + start, '\n', len - start);
		size_t end = nl != NULL ? (size_t)(nl - body) : len;
		size_t a = start, b = end;

		lineno++;
		start = end + 1;
		while (a < b && strchr(" \t\r", body[a]) != NULL)
			a++;
		while (b > a && strchr(" \t\r", body[b - 1]) != NULL)
			b--;
		if (a == b)
			continue;
		memcpy(line, body + a, b - a);
		line[b - a] = '\0';
		if (parse_line(line, lineno, reg, why, why_size) != 0)
			return -1;
	}
	if (reg->address[0] == '\0') {
		snprintf(why, why_size, "the body has no address=HOST:PORT "
		    "line");
		return -1;
	}
	return 0;
}

/* Builds the served list once the last rank arrived; -1 on ENOMEM. */
static int
job_complete(struct job *j)
{
	char head[JOBS_NAME_MAX + 64];
	size_t len, at;

	/* A comment first: a list whose first line is "[v6]:port" would
	 * otherwise read as an MLX hostfile. */
	at = (size_t)snprintf(head, sizeof(head), "# silvic-ring job %s, world "
	    "%llu\n", j->name, (unsigned long long)j->world);
	len = at;
	for (uint64_t i = 0; i < j->world; i++)
		len += strlen(j->addr[i]) + 1;
	if ((j->list = malloc(len + 1)) == NULL)
		return -1;
	memcpy(j->list, head, at);
	for (uint64_t i = 0; i < j->world; i++) {
		size_t n = strlen(j->addr[i]);

		memcpy(j->list + at, j->addr[i], n);
		j->list[at + n] = '\n';
		at += n + 1;
	}
	j->list[at] = '\0';
	j->list_len = at;
	return 0;
}

/* Drops a job that a failed first registration, or the last
 * registration taken back, left empty; or any job, when always. */
static void
drop_if_empty(struct jobs *t, struct job *j, bool always)
{
	struct job **link = &t->bucket[hash(j->name) & (t->nbuckets - 1)];

	if (j->present != 0 && !always)
		return;
	while (*link != j)
		link = &(*link)->next;
	*link = j->next;
	job_free(t, j);
	t->count--;
}

static enum jobs_result
take_rank(struct job *j, const char *address, uint64_t rank, int64_t lease,
    bool *completed)
{
	char *copy;

	if (index_reserve(j) != 0 || (copy = strdup(address)) == NULL)
		return JOBS_NOMEM;
	if (j->present + 1 == j->world) {
		j->addr[rank] = copy;
		if (job_complete(j) != 0) {
			j->addr[rank] = NULL;
			free(copy);
			return JOBS_NOMEM;
		}
		*completed = true;
		j->unfetched = j->world;
		j->last_lease = lease;
		for (uint64_t i = 0; i < j->world; i++)
			if (i != rank && j->lease[i] > j->last_lease)
				j->last_lease = j->lease[i];
	}
	j->lease[rank] = lease;
	if (lease < j->next_lapse)
		j->next_lapse = lease;
	j->addr[rank] = copy;
	j->present++;
	index_put(j->index, j->index_size, copy, rank);
	while (j->lowest_free < j->world && j->addr[j->lowest_free] != NULL)
		j->lowest_free++;
	return JOBS_OK;
}

/* Whether client created as many live jobs as it may (after a sweep
 * when it seems so). */
static bool
over_quota(struct jobs *t, const char *client, int64_t now)
{
	uint64_t max = t->limits.max_client_jobs;

	if (max == 0 || client[0] == '\0' || client_jobs(t, client) < max)
		return false;
	jobs_sweep(t, now);
	return client_jobs(t, client) >= max;
}

/* Whether the table has room for a new job, after a sweep and dropping
 * finished jobs when it seems full. */
static bool
room(struct jobs *t, int64_t now)
{
	if (t->count < t->limits.max_jobs)
		return true;
	jobs_sweep(t, now);
	return reclaim(t, now);
}

enum jobs_result
jobs_register(struct jobs *t, const char *name,
    const struct jobs_registration *reg, int64_t now, int64_t *rank,
    int64_t *world, bool *completed, char *why, size_t why_size)
{
	struct job *j = jobs_find(t, name, now);
	int64_t held, lease = lease_from(t, now);
	enum jobs_result rc;
	uint64_t r;

	*completed = false;
	/* Every rank of a finished job has what it came for: this is a
	 * rerun, which replaces it. */
	if (j == NULL || finished(j, now)) {
		if (reg->world <= 0) {
			snprintf(why, why_size, "world is required for a new "
			    "job");
			return JOBS_BAD;
		}
		if ((uint64_t)reg->world > t->limits.max_ranks) {
			snprintf(why, why_size, "world size %lld exceeds "
			    "this server's limit of %llu ranks",
			    (long long)reg->world,
			    (unsigned long long)t->limits.max_ranks);
			return JOBS_BAD;
		}
		if (reg->rank >= reg->world) {
			snprintf(why, why_size, "rank %lld is out of range "
			    "for a world of %lld", (long long)reg->rank,
			    (long long)reg->world);
			return JOBS_BAD;
		}
		if (over_quota(t, reg->client, now)) {
			snprintf(why, why_size, "%s created %llu jobs that are "
			    "not finished, the limit for one client "
			    "(--max-client-jobs); try again later", reg->client,
			    (unsigned long long)client_jobs(t, reg->client));
			return JOBS_QUOTA;
		}
		/* Found again: the sweep may have dropped it. */
		if ((j = jobs_find(t, name, now)) != NULL)
			drop_if_empty(t, j, true);
		if (!room(t, now)) {
			snprintf(why, why_size, "too many jobs (the limit is "
			    "%llu); try again later",
			    (unsigned long long)t->limits.max_jobs);
			return JOBS_FULL;
		}
		if ((j = job_new(t, name, (uint64_t)reg->world, now)) == NULL ||
		    client_count(t, j, reg->client) != 0) {
			if (j != NULL)
				drop_if_empty(t, j, true);
			snprintf(why, why_size, "out of memory");
			return JOBS_NOMEM;
		}
	}
	if (reg->world >= 0 && (uint64_t)reg->world != j->world) {
		snprintf(why, why_size, "world size %lld differs from the "
		    "job's %llu", (long long)reg->world,
		    (unsigned long long)j->world);
		return JOBS_CONFLICT;
	}
	if (reg->rank >= 0 && (uint64_t)reg->rank >= j->world) {
		snprintf(why, why_size, "rank %lld is out of range for a "
		    "world of %llu", (long long)reg->rank,
		    (unsigned long long)j->world);
		return JOBS_BAD;
	}
	*world = (int64_t)j->world;
	if ((held = index_find(j, reg->address)) >= 0) {
		if (reg->rank >= 0 && reg->rank != held) {
			snprintf(why, why_size, "%s already holds rank %lld",
			    reg->address, (long long)held);
			return JOBS_CONFLICT;
		}
		j->touched = now;
		if (j->list == NULL && lease > j->lease[held])
			j->lease[held] = lease;
		else if (j->list != NULL && j->lease[held] != FETCHED &&
		    lease > j->lease[held]) {
			j->lease[held] = lease;
			if (lease > j->last_lease)
				j->last_lease = lease;
		}
		*rank = held;
		return JOBS_OK;
	}
	if (j->list != NULL) {
		snprintf(why, why_size, "job %s is complete", j->name);
		return JOBS_CONFLICT;
	}
	r = reg->rank >= 0 ? (uint64_t)reg->rank : j->lowest_free;
	if (j->addr[r] != NULL) {
		snprintf(why, why_size, "rank %llu is held by %s",
		    (unsigned long long)r, j->addr[r]);
		return JOBS_CONFLICT;
	}
	if ((rc = take_rank(j, reg->address, r, lease, completed)) !=
	    JOBS_OK) {
		snprintf(why, why_size, "out of memory");
		drop_if_empty(t, j, false);
		return rc;
	}
	j->touched = now;
	*rank = (int64_t)r;
	return JOBS_OK;
}

enum jobs_result
jobs_unregister(struct jobs *t, const char *name, const char *address,
    int64_t now, int64_t *rank, char *why, size_t why_size)
{
	struct job *j = jobs_find(t, name, now);
	int64_t held = j != NULL ? index_find(j, address) : -1;
	char shown[SR_ADDR_MAX];

	if (held < 0) {
		snprintf(why, why_size, "%s holds no rank in job %s",
		    jobs_printable(address, shown, sizeof(shown)), name);
		return JOBS_MISSING;
	}
	/* The list may be in the hands of every rank by now: taking an
	 * address out of it would change nothing for them. */
	if (j->list != NULL) {
		snprintf(why, why_size, "job %s is complete", j->name);
		return JOBS_CONFLICT;
	}
	remove_rank(j, (uint64_t)held);
	*rank = held;
	drop_if_empty(t, j, false);
	return JOBS_OK;
}

enum jobs_result
jobs_poll(struct jobs *t, const char *name, const char *address,
    int64_t now, int64_t until, char *why, size_t why_size)
{
	struct job *j = jobs_find(t, name, now);
	int64_t held = j != NULL ? index_find(j, address) : -1, lease;
	char shown[SR_ADDR_MAX];

	if (j != NULL && j->list != NULL) {
		if (held >= 0 && j->lease[held] != FETCHED) {
			j->lease[held] = FETCHED;
			j->unfetched--;
			if (finished(j, now))
				client_uncount(t, j);
		}
		return JOBS_OK;
	}
	if (held < 0) {
		snprintf(why, why_size, "%s holds no rank in job %s: its "
		    "registration lapsed or was taken back; register again",
		    jobs_printable(address, shown, sizeof(shown)), name);
		return JOBS_MISSING;
	}
	lease = lease_from(t, until > now ? until : now);
	if (lease > j->lease[held])
		j->lease[held] = lease;
	return JOBS_OK;
}

/* Frees rank's registration in an incomplete job. */
static void
remove_rank(struct job *j, uint64_t rank)
{
	index_remove(j, rank);
	free(j->addr[rank]);
	j->addr[rank] = NULL;
	j->present--;
	if (rank < j->lowest_free)
		j->lowest_free = rank;
}

/* ----------------------------------------------------------- reading */

const char *
job_list(const struct job *j, size_t *len)
{
	*len = j->list_len;
	return j->list;
}

void
job_progress(const struct job *j, char *buf, size_t size)
{
	size_t n;
	int shown_missing = 0;

	if (j == NULL) {
		snprintf(buf, size, "not yet: 0 of ? ranks");
		return;
	}
	snprintf(buf, size, "not yet: %llu of %llu ranks; missing",
	    (unsigned long long)j->present, (unsigned long long)j->world);
	for (uint64_t i = j->lowest_free; i < j->world; i++) {
		if (j->addr[i] != NULL)
			continue;
		n = strlen(buf);
		if (shown_missing == MISSING_SHOWN) {
			snprintf(buf + n, size - n, ", ...");
			break;
		}
		snprintf(buf + n, size - n, "%s %llu", shown_missing ? "," : "",
		    (unsigned long long)i);
		shown_missing++;
	}
}

void **
job_aux(struct job *j)
{
	return &j->aux;
}

uint64_t
job_world(const struct job *j)
{
	return j->world;
}

uint64_t
job_present(const struct job *j)
{
	return j->present;
}

/* ------------------------------------------------------------ waiters */

void
jobs_wait(struct jobs *t, struct jobs_waiter *w, const char *name,
    int64_t deadline)
{
	/* name may be w->job itself. */
	if (name != w->job)
		snprintf(w->job, sizeof(w->job), "%s", name);
	w->deadline = deadline;
	w->prev = NULL;
	w->next = t->waiters;
	if (t->waiters != NULL)
		t->waiters->prev = w;
	t->waiters = w;
	w->waiting = true;
	t->nwaiting++;
}

void
jobs_unwait(struct jobs *t, struct jobs_waiter *w)
{
	if (!w->waiting)
		return;
	if (w->prev != NULL)
		w->prev->next = w->next;
	else
		t->waiters = w->next;
	if (w->next != NULL)
		w->next->prev = w->prev;
	w->prev = w->next = NULL;
	w->waiting = false;
	t->nwaiting--;
}

size_t
jobs_take_waiters(struct jobs *t, const char *name, int64_t now,
    void (*fn)(struct jobs_waiter *w, void *arg), void *arg)
{
	struct jobs_waiter *w, *next;
	size_t n = 0;

	for (w = t->waiters; w != NULL; w = next) {
		next = w->next;
		if ((name != NULL && strcmp(w->job, name) != 0) ||
		    (now > 0 && w->deadline > now))
			continue;
		jobs_unwait(t, w);
		n++;
		fn(w, arg);
	}
	return n;
}

size_t
jobs_waiting(const struct jobs *t)
{
	return t->nwaiting;
}

struct jobs_waiter *
jobs_waiters(const struct jobs *t)
{
	return t->waiters;
}
