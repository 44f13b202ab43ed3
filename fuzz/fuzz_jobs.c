/*
 * fuzz_jobs.c - the rendezvous server's job table (cli/jobs.c) driven by
 * a byte-coded sequence of what `silvic-ring serve` does with requests,
 * checked step by step against a small model of the table kept here.
 *
 * Input: three bytes of limits (max_jobs 1-4, max_ranks 1-16, ttl 1-256
 * clock units), then operations, one opcode byte (mod 8) and its operands
 * each; an operation cut short by the end is dropped.
 *	0 J A W R	POST: job J, address A of a fixed pool, world W, rank R,
 *			written as a body and parsed first
 *	1 J L body	POST: job J with L raw body bytes
 *	2 J S		GET: find job J; its list or its progress (into S bytes)
 *	3 T		the clock moves T units forward
 *	4		sweep expired jobs
 *	5 L name	jobs_name_valid on L raw bytes
 *	6 J A		DELETE: job J takes address A of the pool back,
 *			written as a body and parsed first
 *	7 J A		GET naming address A: jobs_poll, which marks a
 *			complete job's rank as having the list
 * Leases are off (lease_ns 0: tests/unit/test_jobs.c has them) and so is
 * the per-client quota, so a job is finished once every rank polled it
 * complete: the next registration replaces it, a full table drops it.
 * Jobs are named from a fixed pool of valid names (serve_http.c checks names
 * before the table sees them).  Checked after every operation: each
 * result, rank, world and completion, the job count, which jobs expire
 * and which a DELETE of their last registration drops,
 * the served list (a comment, then the addresses in rank order), the
 * progress text cut to any size; and that on_drop sees every job exactly
 * once (a GET hangs an aux block on a job, which on_drop frees).
 */
#include <inttypes.h>
#include <string.h>

#include "fuzz.h"
#include "jobs.h"
#include "rendezvous.h"

#define N16 "nnnnnnnnnnnnnnnn"
#define A16 "aaaaaaaaaaaaaaaa"
#define MODEL_RANKS 16		/* the largest max_ranks used */

static const char *const names[] = { "a", "job-1", "x.y_z", "JOB",
	N16 N16 N16 N16 N16 N16 N16 N16 };
#define NAMES (sizeof(names) / sizeof(names[0]))

static const char *const pool[] = { "127.0.0.1:5000", "127.0.0.1:5001",
	"10.0.0.2:41237", "[::1]:7000", "[fe80::1%eth0]:7001", "host-a:1",
	"node7.example:65535", A16 A16 A16 A16 "aaaaaaaaaaaaa:1" };
#define POOL (sizeof(pool) / sizeof(pool[0]))

struct model_job {
	bool live;
	uint64_t world, present;
	bool held[MODEL_RANKS];
	bool fetched[MODEL_RANKS];
	uint64_t nfetched;
	char addr[MODEL_RANKS][SR_ADDR_MAX];
	int64_t touched;
};

struct model {
	struct jobs_limits limits;
	struct model_job job[NAMES];
	size_t count;
	uint64_t created, dropped;
};

/* What on_drop saw. */
struct drops {
	uint64_t n;
};

static void
on_drop(const char *name, void *aux, void *arg)
{
	struct drops *d = arg;

	d->n++;
	if (aux != NULL) {
		FUZZ_CHECK(strcmp(aux, name) == 0);
		free(aux);
	}
}

static void
model_drop(struct model *m, struct model_job *mj)
{
	memset(mj, 0, sizeof(*mj));
	m->count--;
	m->dropped++;
}

static bool
model_expired(const struct model *m, const struct model_job *mj, int64_t now)
{
	return now - mj->touched >= m->limits.ttl_ns;
}

static struct model_job *
model_find(struct model *m, size_t name, int64_t now)
{
	struct model_job *mj = &m->job[name];

	if (!mj->live)
		return NULL;
	if (model_expired(m, mj, now)) {
		model_drop(m, mj);
		return NULL;
	}
	return mj;
}

static size_t
model_sweep(struct model *m, int64_t now)
{
	size_t n = 0;

	for (size_t i = 0; i < NAMES; i++)
		if (m->job[i].live && model_expired(m, &m->job[i], now)) {
			model_drop(m, &m->job[i]);
			n++;
		}
	return n;
}

static bool
model_finished(const struct model_job *mj)
{
	return mj->live && mj->present == mj->world &&
	    mj->nfetched == mj->world;
}

/* jobs_register as jobs.h describes it. */
static enum jobs_result
model_register(struct model *m, size_t name,
    const struct jobs_registration *reg, int64_t now, int64_t *rank,
    int64_t *world, bool *completed)
{
	struct model_job *mj = model_find(m, name, now);
	uint64_t r;

	*completed = false;
	if (mj == NULL || model_finished(mj)) {
		if (reg->world < 0 || (uint64_t)reg->world > m->limits.max_ranks ||
		    reg->rank >= reg->world)
			return JOBS_BAD;
		if (mj != NULL)
			model_drop(m, mj);
		if (m->count >= m->limits.max_jobs) {
			model_sweep(m, now);
			for (size_t i = 0; i < NAMES; i++)
				if (model_finished(&m->job[i]))
					model_drop(m, &m->job[i]);
		}
		if (m->count >= m->limits.max_jobs)
			return JOBS_FULL;
		mj = &m->job[name];
		mj->live = true;
		mj->world = (uint64_t)reg->world;
		mj->touched = now;
		m->count++;
		m->created++;
	}
	if (reg->world >= 0 && (uint64_t)reg->world != mj->world)
		return JOBS_CONFLICT;
	if (reg->rank >= 0 && (uint64_t)reg->rank >= mj->world)
		return JOBS_BAD;
	*world = (int64_t)mj->world;
	for (r = 0; r < mj->world; r++)
		if (mj->held[r] && strcmp(mj->addr[r], reg->address) == 0) {
			if (reg->rank >= 0 && (uint64_t)reg->rank != r)
				return JOBS_CONFLICT;
			mj->touched = now;
			*rank = (int64_t)r;
			return JOBS_OK;
		}
	if (mj->present == mj->world)
		return JOBS_CONFLICT;
	if (reg->rank >= 0)
		r = (uint64_t)reg->rank;
	else
		for (r = 0; mj->held[r]; r++)
			;
	if (mj->held[r])
		return JOBS_CONFLICT;
	mj->held[r] = true;
	snprintf(mj->addr[r], sizeof(mj->addr[r]), "%s", reg->address);
	mj->present++;
	mj->touched = now;
	*completed = mj->present == mj->world;
	*rank = (int64_t)r;
	return JOBS_OK;
}

/* jobs_unregister as jobs.h describes it. */
static enum jobs_result
model_unregister(struct model *m, size_t name, const char *address,
    int64_t now, int64_t *rank)
{
	struct model_job *mj = model_find(m, name, now);
	uint64_t r;

	if (mj == NULL)
		return JOBS_MISSING;
	for (r = 0; r < mj->world; r++)
		if (mj->held[r] && strcmp(mj->addr[r], address) == 0)
			break;
	if (r == mj->world)
		return JOBS_MISSING;
	if (mj->present == mj->world)
		return JOBS_CONFLICT;
	mj->held[r] = false;
	mj->present--;
	*rank = (int64_t)r;
	if (mj->present == 0)
		model_drop(m, mj);
	return JOBS_OK;
}

/* jobs_poll as jobs.h describes it. */
static enum jobs_result
model_poll(struct model *m, size_t name, const char *address, int64_t now)
{
	struct model_job *mj = model_find(m, name, now);
	uint64_t r;

	if (mj == NULL)
		return JOBS_MISSING;
	for (r = 0; r < mj->world; r++)
		if (mj->held[r] && strcmp(mj->addr[r], address) == 0)
			break;
	if (mj->present == mj->world) {
		if (r < mj->world && !mj->fetched[r]) {
			mj->fetched[r] = true;
			mj->nfetched++;
		}
		return JOBS_OK;
	}
	return r < mj->world ? JOBS_OK : JOBS_MISSING;
}

static void
check_table(const struct jobs *t, const struct model *m,
    const struct drops *d)
{
	FUZZ_CHECK(jobs_count(t) == m->count);
	FUZZ_CHECK(m->count <= m->limits.max_jobs);
	FUZZ_CHECK(d->n == m->dropped);
}

/* The served list: a comment, then the model's addresses in rank order. */
static void
check_list(const struct job *j, const struct model_job *mj)
{
	struct peer_list list;
	const char *text;
	char why[256];
	size_t len;

	text = job_list(j, &len);
	FUZZ_CHECK((text != NULL) == (mj->present == mj->world));
	if (text == NULL)
		return;
	FUZZ_CHECK(strlen(text) == len);
	FUZZ_CHECK(len > 0 && text[0] == '#' && text[len - 1] == '\n');
	FUZZ_CHECK(list_parse(text, len, "served", &list, why,
	    sizeof(why)) == 0);
	FUZZ_CHECK(list.n == mj->world);
	for (uint64_t i = 0; i < list.n; i++)
		FUZZ_CHECK(strcmp(list.addr[i], mj->addr[i]) == 0);
	peer_list_free(&list);
}

/* job_progress against the text the model makes, cut to size bytes. */
static void
check_progress(const struct job *j, const struct model_job *mj, size_t size)
{
	char want[JOBS_PROGRESS_MAX + 64], *got = malloc(size);
	size_t n, missing = 0;

	FUZZ_CHECK(got != NULL);
	if (mj == NULL) {
		snprintf(want, sizeof(want), "not yet: 0 of ? ranks");
	} else {
		n = (size_t)snprintf(want, sizeof(want), "not yet: %" PRIu64
		    " of %" PRIu64 " ranks; missing", mj->present, mj->world);
		for (uint64_t i = 0; i < mj->world && n < sizeof(want); i++) {
			if (mj->held[i])
				continue;
			if (missing++ == 16) {
				n += (size_t)snprintf(want + n,
				    sizeof(want) - n, ", ...");
				break;
			}
			n += (size_t)snprintf(want + n, sizeof(want) - n,
			    "%s %" PRIu64, missing > 1 ? "," : "", i);
		}
	}
	FUZZ_CHECK(strlen(want) < JOBS_PROGRESS_MAX);
	job_progress(j, got, size);
	FUZZ_CHECK(strlen(got) < size);
	FUZZ_CHECK(strncmp(got, want, size - 1) == 0);
	free(got);
}

/* A body as a client writes it; -1 values are left out. */
static int
body_of(char *buf, size_t size, const char *address, int64_t world,
    int64_t rank)
{
	int n = snprintf(buf, size, "address=%s\n", address);

	if (world >= 0)
		n += snprintf(buf + n, size - (size_t)n, "world=%" PRId64 "\n",
		    world);
	if (rank >= 0)
		n += snprintf(buf + n, size - (size_t)n, "rank=%" PRId64 "\n",
		    rank);
	return n;
}

/* A parsed body, whatever it came from, is what the header promises. */
static void
check_registration(const struct jobs_registration *reg)
{
	struct peer_list one;
	char text[SR_ADDR_MAX + 8], why[256];

	FUZZ_CHECK(memchr(reg->address, '\0', sizeof(reg->address)) != NULL);
	snprintf(text, sizeof(text), "#\n%s\n", reg->address);
	FUZZ_CHECK(list_parse(text, strlen(text), "address", &one, why,
	    sizeof(why)) == 0);
	FUZZ_CHECK(one.n == 1 && strcmp(one.addr[0], reg->address) == 0);
	peer_list_free(&one);
	FUZZ_CHECK(reg->world == -1 || (reg->world >= 1 &&
	    reg->world <= (int64_t)UINT32_MAX));
	FUZZ_CHECK(reg->rank >= -1 && reg->rank < (int64_t)UINT32_MAX);
}

static void
do_register(struct jobs *t, struct model *m, size_t name,
    const struct jobs_registration *reg, int64_t now)
{
	int64_t rank = -2, world = -2, mrank = -3, mworld = -3;
	bool completed, mcompleted;
	enum jobs_result got, want;
	char why[SR_MESSAGE_MAX] = "";

	got = jobs_register(t, names[name], reg, now, &rank, &world,
	    &completed, why, sizeof(why));
	want = model_register(m, name, reg, now, &mrank, &mworld, &mcompleted);
	if (got != want)
		fprintf(stderr, "jobs_register gave %d (%s), the model %d\n",
		    (int)got, why, (int)want);
	FUZZ_CHECK(got == want);
	FUZZ_CHECK(completed == mcompleted);
	if (got == JOBS_OK)
		FUZZ_CHECK(rank == mrank && world == mworld);
	else
		FUZZ_CHECK(why[0] != '\0' && memchr(why, '\0', sizeof(why)));
}

static void
do_unregister(struct jobs *t, struct model *m, size_t name,
    const struct jobs_registration *reg, int64_t now)
{
	int64_t rank = -2, mrank = -3;
	enum jobs_result got, want;
	char why[SR_MESSAGE_MAX] = "";

	got = jobs_unregister(t, names[name], reg->address, now, &rank, why,
	    sizeof(why));
	want = model_unregister(m, name, reg->address, now, &mrank);
	if (got != want)
		fprintf(stderr, "jobs_unregister gave %d (%s), the model %d\n",
		    (int)got, why, (int)want);
	FUZZ_CHECK(got == want);
	if (got == JOBS_OK)
		FUZZ_CHECK(rank == mrank);
	else
		FUZZ_CHECK(why[0] != '\0' && memchr(why, '\0', sizeof(why)));
}

static void
do_poll(struct jobs *t, struct model *m, size_t name, const char *address,
    int64_t now)
{
	enum jobs_result got, want;
	char why[SR_MESSAGE_MAX] = "";

	got = jobs_poll(t, names[name], address, now, now, why, sizeof(why));
	want = model_poll(m, name, address, now);
	if (got != want)
		fprintf(stderr, "jobs_poll gave %d (%s), the model %d\n",
		    (int)got, why, (int)want);
	FUZZ_CHECK(got == want);
	if (got != JOBS_OK)
		FUZZ_CHECK(why[0] != '\0' && memchr(why, '\0', sizeof(why)));
}

static bool
name_valid(const char *s)
{
	size_t n = 0;

	for (; s[n]; n++)
		if (!((s[n] >= 'a' && s[n] <= 'z') || (s[n] >= 'A' &&
		    s[n] <= 'Z') || (s[n] >= '0' && s[n] <= '9') ||
		    s[n] == '.' || s[n] == '_' || s[n] == '-'))
			return false;
	return n >= 1 && n <= JOBS_NAME_MAX;
}

int
LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
	struct model m;
	struct drops d = { 0 };
	struct jobs_registration reg;
	struct jobs *t;
	struct job *j;
	char body[JOBS_BODY_MAX], why[256], *copy;
	size_t i = 3, len;
	int64_t now = 1000;

	if (size < 3)
		return 0;
	memset(&m, 0, sizeof(m));
	m.limits.max_jobs = 1 + data[0] % 4;
	m.limits.max_ranks = 1 + data[1] % MODEL_RANKS;
	m.limits.ttl_ns = 1 + data[2];
	t = jobs_new(&m.limits, on_drop, &d);
	FUZZ_CHECK(t != NULL);
	while (i < size) {
		const uint8_t *op = data + i;
		size_t left = size - i;

		switch (op[0] % 8) {
		case 0:
			if (left < 5)
				goto done;
			/* World -1 to 18 and rank -1 to 18: some beyond the
			 * limits, and some huge. */
			len = (size_t)body_of(body, sizeof(body),
			    pool[op[2] % POOL], op[3] >= 250 ?
			    (int64_t)UINT32_MAX : op[3] % 20 - 1, op[4] >= 250 ?
			    (int64_t)UINT32_MAX - 1 : op[4] % 20 - 1);
			if (jobs_parse_registration(body, len, &reg, why,
				sizeof(why)) != 0) {
				/* Only world=0 is not a registration. */
				FUZZ_CHECK(op[3] % 20 == 1 && op[3] < 250);
			} else {
				check_registration(&reg);
				do_register(t, &m, op[1] % NAMES, &reg, now);
			}
			i += 5;
			break;
		case 1:
			if (left < 3 || left - 3 < op[2])
				goto done;
			copy = malloc(op[2] ? op[2] : 1);
			FUZZ_CHECK(copy != NULL);
			memcpy(copy, op + 3, op[2]);
			if (jobs_parse_registration(copy, op[2], &reg, why,
				sizeof(why)) == 0) {
				check_registration(&reg);
				do_register(t, &m, op[1] % NAMES, &reg, now);
			} else {
				FUZZ_CHECK(why[0] != '\0');
			}
			free(copy);
			i += 3 + op[2];
			break;
		case 2: {
			struct model_job *mj;

			if (left < 3)
				goto done;
			j = jobs_find(t, names[op[1] % NAMES], now);
			mj = model_find(&m, op[1] % NAMES, now);
			FUZZ_CHECK((j != NULL) == (mj != NULL));
			if (j != NULL) {
				FUZZ_CHECK(job_world(j) == mj->world);
				FUZZ_CHECK(job_present(j) == mj->present);
				check_list(j, mj);
				if (*job_aux(j) == NULL) {
					*job_aux(j) = strdup(names[op[1] % NAMES]);
					FUZZ_CHECK(*job_aux(j) != NULL);
				}
			}
			check_progress(j, mj, 1 + op[2]);
			i += 3;
			break;
		}
		case 3:
			if (left < 2)
				goto done;
			now += op[1];
			i += 2;
			break;
		case 4:
			FUZZ_CHECK(jobs_sweep(t, now) == model_sweep(&m, now));
			i += 1;
			break;
		case 5:
			if (left < 2 || left - 2 < op[1])
				goto done;
			copy = malloc((size_t)op[1] + 1);
			FUZZ_CHECK(copy != NULL);
			memcpy(copy, op + 2, op[1]);
			copy[op[1]] = '\0';
			FUZZ_CHECK(jobs_name_valid(copy) == name_valid(copy));
			free(copy);
			i += 2 + op[1];
			break;
		case 7:
			if (left < 3)
				goto done;
			do_poll(t, &m, op[1] % NAMES, pool[op[2] % POOL], now);
			i += 3;
			break;
		default:
			if (left < 3)
				goto done;
			len = (size_t)body_of(body, sizeof(body),
			    pool[op[2] % POOL], -1, -1);
			FUZZ_CHECK(jobs_parse_registration(body, len, &reg, why,
			    sizeof(why)) == 0);
			check_registration(&reg);
			do_unregister(t, &m, op[1] % NAMES, &reg, now);
			i += 3;
			break;
		}
		check_table(t, &m, &d);
	}
done:
	jobs_free(t);
	FUZZ_CHECK(d.n == m.created);
	return 0;
}
