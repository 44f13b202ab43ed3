/*
 * test_jobs.c - the rendezvous server's job table (cli/jobs.c): names,
 * registration bodies, rank assignment, conflicts, limits, expiry, the
 * progress text, the served list, registrations taken back, leases,
 * finished jobs and the per-client quota.
 */
#include <stdio.h>
#include <string.h>

#include "check.h"
#include "jobs.h"
#include "rendezvous.h"

#define SEC 1000000000LL

static int drops;
static char last_drop[JOBS_NAME_MAX + 1];

static void
on_drop(const char *name, void *aux, void *arg)
{
	drops++;
	snprintf(last_drop, sizeof(last_drop), "%s", name);
	if (aux != NULL)
		(*(int *)aux)++;
}

static struct jobs *
table(uint64_t max_jobs, uint64_t max_ranks, int64_t ttl)
{
	struct jobs_limits l = { max_jobs, max_ranks, ttl, 0, 0 };

	drops = 0;
	last_drop[0] = '\0';
	return jobs_new(&l, on_drop, NULL);
}

static struct jobs_registration
reg(const char *address, int64_t world, int64_t rank)
{
	struct jobs_registration r;

	memset(&r, 0, sizeof(r));
	snprintf(r.address, sizeof(r.address), "%s", address);
	r.world = world;
	r.rank = rank;
	return r;
}

/* Registers and returns the result; rank in *rank. */
static enum jobs_result
put(struct jobs *t, const char *job, const char *address, int64_t world,
    int64_t rank, int64_t now, int64_t *got, bool *completed, char *why)
{
	struct jobs_registration r = reg(address, world, rank);
	int64_t w;

	*got = -1;
	return jobs_register(t, job, &r, now, got, &w, completed, why, 256);
}

static void
test_names(void)
{
	char name[JOBS_NAME_MAX + 2];

	CHECK(jobs_name_valid("a"));
	CHECK(jobs_name_valid("job-1.2_X"));
	CHECK(!jobs_name_valid(""));
	CHECK(!jobs_name_valid("a/b"));
	CHECK(!jobs_name_valid("a b"));
	CHECK(!jobs_name_valid("a%2f"));
	CHECK(!jobs_name_valid("caf\xc3\xa9"));
	memset(name, 'x', JOBS_NAME_MAX);
	name[JOBS_NAME_MAX] = '\0';
	CHECK(jobs_name_valid(name));
	name[JOBS_NAME_MAX] = 'x';
	name[JOBS_NAME_MAX + 1] = '\0';
	CHECK(!jobs_name_valid(name));
}

static int
parse(const char *body, struct jobs_registration *r, char *why)
{
	return jobs_parse_registration(body, strlen(body), r, why, 256);
}

static void
test_parse_good(void)
{
	struct jobs_registration r;
	char why[256] = "";

	CHECKF(parse("address=127.0.0.1:4000\nworld=8\nrank=3\n", &r, why) ==
	    0, "%s", why);
	CHECK(strcmp(r.address, "127.0.0.1:4000") == 0);
	CHECK(r.world == 8 && r.rank == 3);
	CHECKF(parse("address=h.example:1", &r, why) == 0, "%s", why);
	CHECK(r.world == -1 && r.rank == -1);
	CHECKF(parse("\r\n  world=2\r\n\r\naddress=[::1]:65535\r\n", &r, why) ==
	    0, "%s", why);
	CHECK(strcmp(r.address, "[::1]:65535") == 0 && r.world == 2);
	CHECKF(parse("rank=0\naddress=10.0.0.1:1\n", &r, why) == 0, "%s", why);
	CHECK(r.rank == 0);
}

static void
bad(const char *body, const char *want)
{
	struct jobs_registration r;
	char why[256] = "";
	int rc = parse(body, &r, why);

	CHECKF(rc == -1, "'%s' parsed", body);
	CHECKF(strstr(why, want) != NULL, "'%s': '%s' lacks '%s'", body, why,
	    want);
}

static void
test_parse_bad(void)
{
	char big[JOBS_BODY_MAX + 100];
	struct jobs_registration r;
	char why[256];

	bad("", "no address=HOST:PORT");
	bad("world=2\n", "no address=HOST:PORT");
	bad("address=127.0.0.1\n", "'127.0.0.1' is not host:port");
	bad("address=127.0.0.1:0\n", "no port from 1 to 65535");
	bad("address=127.0.0.1:65536\n", "no port from 1 to 65535");
	bad("address=127.0.0.1:x\n", "no port from 1 to 65535");
	bad("address=::1:80\n", "ambiguous");
	bad("address=a b:80\n", "not host:port");
	bad("address=a:1#c\n", "'a:1#c' is not host:port");
	bad("address=[::1:80\n", "not [ipv6]:port");
	bad("address=1.2.3.4:1\naddress=1.2.3.4:2\n", "'address' is given "
	    "twice");
	bad("address=1.2.3.4:1\nworld=0\n", "world '0' is not a world size");
	bad("address=1.2.3.4:1\nworld=-1\n", "world '-1'");
	bad("address=1.2.3.4:1\nworld=4294967296\n", "world '4294967296'");
	bad("address=1.2.3.4:1\nworld=2x\n", "world '2x'");
	bad("address=1.2.3.4:1\nrank=r\n", "rank 'r' is not a rank number");
	bad("address=1.2.3.4:1\nrank=1\nrank=1\n", "line 3: 'rank' is given "
	    "twice");
	bad("address=1.2.3.4:1\ncolour=blue\n", "line 2: unknown key "
	    "'colour'");
	bad("address=1.2.3.4:1\njust text\n", "line 2: 'just text' is not "
	    "key=value");
	bad("address=1.2.3.4:1\n\x01=2\n", "unknown key '?'");
	bad("address=0123456789012345678901234567890123456789012345678901234567"
	    "89012345678901234567890123456789:1\n", "is not host:port");
	CHECK(jobs_parse_registration("address=1.2.3.4:1\0", 18, &r, why,
	    sizeof(why)) == -1);
	CHECK(strstr(why, "NUL") != NULL);
	memset(big, 'a', sizeof(big));
	CHECK(jobs_parse_registration(big, sizeof(big), &r, why,
	    sizeof(why)) == -1);
	CHECK(strstr(why, "larger than 4096 bytes") != NULL);
}

static void
test_assigned_in_order(void)
{
	struct jobs *t = table(16, 1024, 60 * SEC);
	char why[256], address[32];
	bool completed;
	int64_t rank;

	for (int i = 0; i < 4; i++) {
		snprintf(address, sizeof(address), "127.0.0.1:%d", 5000 + i);
		CHECK(put(t, "j", address, i == 0 ? 4 : -1, -1, 0, &rank,
		    &completed, why) == JOBS_OK);
		CHECK(rank == i);
		CHECK(completed == (i == 3));
	}
	/* Idempotent, also after completion. */
	CHECK(put(t, "j", "127.0.0.1:5002", 4, -1, 0, &rank, &completed,
	    why) == JOBS_OK);
	CHECK(rank == 2 && !completed);
	CHECK(put(t, "j", "127.0.0.1:5002", -1, 2, 0, &rank, &completed,
	    why) == JOBS_OK);
	CHECK(rank == 2);
	CHECK(put(t, "j", "127.0.0.1:6000", 4, -1, 0, &rank, &completed,
	    why) == JOBS_CONFLICT);
	CHECK(strcmp(why, "job j is complete") == 0);
	CHECK(jobs_count(t) == 1);
	jobs_free(t);
	CHECK(drops == 1);
}

static void
test_explicit_ranks(void)
{
	struct jobs *t = table(16, 1024, 60 * SEC);
	char why[256];
	bool completed;
	int64_t rank;

	CHECK(put(t, "j", "h:1", 4, 0, 0, &rank, &completed, why) == JOBS_OK);
	CHECK(put(t, "j", "h:3", 4, 2, 0, &rank, &completed, why) == JOBS_OK);
	CHECK(rank == 2);
	/* The lowest free rank skips those taken. */
	CHECK(put(t, "j", "h:2", 4, -1, 0, &rank, &completed, why) == JOBS_OK);
	CHECK(rank == 1);
	CHECK(put(t, "j", "h:9", 4, 2, 0, &rank, &completed, why) ==
	    JOBS_CONFLICT);
	CHECKF(strcmp(why, "rank 2 is held by h:3") == 0, "%s", why);
	CHECK(put(t, "j", "h:3", 4, 1, 0, &rank, &completed, why) ==
	    JOBS_CONFLICT);
	CHECKF(strcmp(why, "h:3 already holds rank 2") == 0, "%s", why);
	CHECK(put(t, "j", "h:9", 4, 4, 0, &rank, &completed, why) == JOBS_BAD);
	CHECKF(strcmp(why, "rank 4 is out of range for a world of 4") == 0,
	    "%s", why);
	CHECK(put(t, "j", "h:9", 3, -1, 0, &rank, &completed, why) ==
	    JOBS_CONFLICT);
	CHECKF(strcmp(why, "world size 3 differs from the job's 4") == 0, "%s",
	    why);
	CHECK(put(t, "j", "h:4", -1, -1, 0, &rank, &completed, why) == JOBS_OK);
	CHECK(rank == 3 && completed);
	jobs_free(t);
}

static void
test_new_job_checks(void)
{
	struct jobs *t = table(2, 8, 60 * SEC);
	char why[256];
	bool completed;
	int64_t rank;

	CHECK(put(t, "a", "h:1", -1, -1, 0, &rank, &completed, why) ==
	    JOBS_BAD);
	CHECK(strcmp(why, "world is required for a new job") == 0);
	CHECK(put(t, "a", "h:1", 9, -1, 0, &rank, &completed, why) == JOBS_BAD);
	CHECKF(strcmp(why, "world size 9 exceeds this server's limit of 8 "
	    "ranks") == 0, "%s", why);
	CHECK(put(t, "a", "h:1", 2, 5, 0, &rank, &completed, why) == JOBS_BAD);
	/* None of those created a job. */
	CHECK(jobs_count(t) == 0);
	CHECK(jobs_find(t, "a", 0) == NULL);
	CHECK(put(t, "a", "h:1", 2, -1, 0, &rank, &completed, why) == JOBS_OK);
	CHECK(put(t, "b", "h:1", 2, -1, 0, &rank, &completed, why) == JOBS_OK);
	CHECK(put(t, "c", "h:1", 2, -1, 0, &rank, &completed, why) ==
	    JOBS_FULL);
	CHECKF(strstr(why, "too many jobs") != NULL, "%s", why);
	/* Two jobs, one name each: the same address is fine in both. */
	CHECK(put(t, "b", "h:2", 2, -1, 0, &rank, &completed, why) == JOBS_OK);
	CHECK(rank == 1 && completed);
	CHECK(jobs_count(t) == 2);
	/* Once a job expired, a new one fits. */
	CHECK(put(t, "c", "h:1", 2, -1, 61 * SEC, &rank, &completed, why) ==
	    JOBS_OK);
	CHECK(jobs_count(t) == 1);
	CHECK(drops == 2);
	jobs_free(t);
}

static void
test_expiry(void)
{
	struct jobs *t = table(16, 16, 10 * SEC);
	int freed = 0;
	char why[256];
	bool completed;
	int64_t rank;
	struct job *j;

	CHECK(put(t, "old", "h:1", 2, -1, 0, &rank, &completed, why) ==
	    JOBS_OK);
	CHECK(put(t, "busy", "h:1", 2, -1, 0, &rank, &completed, why) ==
	    JOBS_OK);
	CHECK((j = jobs_find(t, "old", 0)) != NULL);
	*job_aux(j) = &freed;
	/* A registration keeps a job alive. */
	CHECK(put(t, "busy", "h:2", 2, -1, 8 * SEC, &rank, &completed, why) ==
	    JOBS_OK);
	CHECK(jobs_sweep(t, 9 * SEC) == 0);
	CHECK(jobs_sweep(t, 10 * SEC) == 1);
	CHECK(freed == 1 && strcmp(last_drop, "old") == 0);
	CHECK(jobs_find(t, "old", 10 * SEC) == NULL);
	CHECK(jobs_find(t, "busy", 17 * SEC) != NULL);
	/* An expired job is gone for jobs_find even before a sweep. */
	CHECK(jobs_find(t, "busy", 18 * SEC) == NULL);
	CHECK(jobs_count(t) == 0);
	/* Re-registering after expiry starts a new job. */
	CHECK(put(t, "busy", "h:2", 3, -1, 20 * SEC, &rank, &completed, why) ==
	    JOBS_OK);
	CHECK(rank == 0);
	jobs_free(t);
}

static void
test_progress(void)
{
	struct jobs *t = table(16, 1024, 60 * SEC);
	char why[256], text[JOBS_PROGRESS_MAX];
	bool completed;
	int64_t rank;
	struct job *j;

	job_progress(NULL, text, sizeof(text));
	CHECK(strcmp(text, "not yet: 0 of ? ranks") == 0);
	put(t, "j", "h:1", 4, 0, 0, &rank, &completed, why);
	put(t, "j", "h:2", 4, 1, 0, &rank, &completed, why);
	put(t, "j", "h:4", 4, 3, 0, &rank, &completed, why);
	j = jobs_find(t, "j", 0);
	job_progress(j, text, sizeof(text));
	CHECKF(strcmp(text, "not yet: 3 of 4 ranks; missing 2") == 0, "%s",
	    text);
	CHECK(job_world(j) == 4 && job_present(j) == 3);
	put(t, "k", "h:1", 40, 1, 0, &rank, &completed, why);
	job_progress(jobs_find(t, "k", 0), text, sizeof(text));
	CHECKF(strcmp(text, "not yet: 1 of 40 ranks; missing 0, 2, 3, 4, 5, 6, "
	    "7, 8, 9, 10, 11, 12, 13, 14, 15, 16, ...") == 0, "%s", text);
	jobs_free(t);
}

static void
test_list(void)
{
	struct jobs *t = table(16, 1024, 60 * SEC);
	struct peer_list list;
	char why[256];
	const char *text;
	bool completed;
	int64_t rank;
	size_t len;
	struct job *j;

	put(t, "v6", "[::1]:7001", 3, 0, 0, &rank, &completed, why);
	put(t, "v6", "127.0.0.1:7003", 3, 2, 0, &rank, &completed, why);
	j = jobs_find(t, "v6", 0);
	CHECK(job_list(j, &len) == NULL);
	put(t, "v6", "host.example:7002", 3, -1, 0, &rank, &completed, why);
	CHECK(completed);
	text = job_list(j, &len);
	CHECK(text != NULL && len == strlen(text));
	CHECKF(strcmp(text, "# silvic-ring job v6, world 3\n[::1]:7001\n"
	    "host.example:7002\n127.0.0.1:7003\n") == 0, "%s", text);
	/* What the server serves is what --peers reads. */
	CHECKF(list_parse(text, len, "v6", &list, why, sizeof(why)) == 0, "%s",
	    why);
	CHECK(list.n == 3 && strcmp(list.addr[0], "[::1]:7001") == 0 &&
	    strcmp(list.addr[2], "127.0.0.1:7003") == 0);
	CHECK(list.nics == NULL);
	peer_list_free(&list);
	jobs_free(t);
	/* An MLX hostfile's several addresses a rank: all kept, as long as
	 * the list, for the streams (one address: none). */
	text = "[[\"10.0.0.1:5000\", \"10.0.1.1:5001\"], \"10.0.0.2:5000\", "
	    "[\"10.0.0.3:5000\", \"10.0.1.3:5000\", \"10.0.2.3:5000\"]]";
	CHECKF(list_parse(text, strlen(text), "mlx", &list, why,
	    sizeof(why)) == 0, "%s", why);
	CHECK(list.n == 3 && list.nics_n == 3 && list.nics != NULL);
	CHECK(strcmp(list.addr[0], "10.0.0.1:5000") == 0 &&
	    strcmp(list.nics[0][0], "10.0.0.1:5000") == 0 &&
	    strcmp(list.nics[0][1], "10.0.1.1:5001") == 0 &&
	    list.nics[0][2] == NULL);
	CHECK(list.nics[1] == NULL);
	CHECK(strcmp(list.nics[2][2], "10.0.2.3:5000") == 0 &&
	    list.nics[2][3] == NULL);
	peer_list_free(&list);
	text = "[[\"10.0.0.1:5000\", \"10.0.1.1\"]]";
	CHECK(list_parse(text, strlen(text), "mlx", &list, why,
	    sizeof(why)) == -1);
	CHECKF(strstr(why, "rank 0") != NULL, "%s", why);
	text = "[[\"a:1\", \"a:2\", \"a:3\", \"a:4\", \"a:5\", \"a:6\", "
	    "\"a:7\", \"a:8\", \"a:9\"]]";
	CHECK(list_parse(text, strlen(text), "mlx", &list, why,
	    sizeof(why)) == -1);
	CHECKF(strstr(why, "more than 8 addresses for one rank") != NULL, "%s",
	    why);
}

static void
test_large_world(void)
{
	enum { N = 10000 };
	struct jobs *t = table(4, 65536, 60 * SEC);
	struct peer_list list;
	char why[256], address[32];
	int wrong = 0;
	bool completed = false;
	const char *text;
	int64_t rank;
	size_t len;

	for (int i = 0; i < N; i++) {
		snprintf(address, sizeof(address), "10.%d.%d.1:%d", i >> 8,
		    i & 255, 1000 + i);
		if (put(t, "big", address, N, -1, 0, &rank, &completed, why) !=
		    JOBS_OK || rank != i)
			wrong++;
	}
	CHECK(wrong == 0 && completed);
	for (int i = 0; i < N; i += 97) {
		snprintf(address, sizeof(address), "10.%d.%d.1:%d", i >> 8,
		    i & 255, 1000 + i);
		if (put(t, "big", address, -1, -1, 0, &rank, &completed, why) !=
		    JOBS_OK || rank != i)
			wrong++;
	}
	CHECK(wrong == 0);
	text = job_list(jobs_find(t, "big", 0), &len);
	CHECK(text != NULL);
	CHECKF(list_parse(text, len, "big", &list, why, sizeof(why)) == 0, "%s",
	    why);
	CHECK(list.n == N && strcmp(list.addr[N - 1], "10.39.15.1:10999") == 0);
	peer_list_free(&list);
	jobs_free(t);
}

/* Takes a registration back; the rank it held in *rank. */
static enum jobs_result
take_back(struct jobs *t, const char *job, const char *address, int64_t now,
    int64_t *rank, char *why)
{
	*rank = -1;
	why[0] = '\0';
	return jobs_unregister(t, job, address, now, rank, why, 256);
}

static void
test_unregister(void)
{
	struct jobs *t = table(16, 1024, 60 * SEC);
	char why[256], text[JOBS_PROGRESS_MAX];
	bool completed;
	int64_t rank;

	put(t, "j", "h:1", 4, -1, 0, &rank, &completed, why);
	put(t, "j", "h:2", 4, -1, 0, &rank, &completed, why);
	put(t, "j", "h:3", 4, -1, 0, &rank, &completed, why);
	CHECK(take_back(t, "j", "h:2", 0, &rank, why) == JOBS_OK);
	CHECK(rank == 1);
	job_progress(jobs_find(t, "j", 0), text, sizeof(text));
	CHECKF(strcmp(text, "not yet: 2 of 4 ranks; missing 1, 3") == 0, "%s",
	    text);
	/* Twice, or an address never seen, or no such job: 404. */
	CHECK(take_back(t, "j", "h:2", 0, &rank, why) == JOBS_MISSING);
	CHECKF(strcmp(why, "h:2 holds no rank in job j") == 0, "%s", why);
	CHECK(rank == -1);
	CHECK(take_back(t, "j", "h:9", 0, &rank, why) == JOBS_MISSING);
	CHECK(take_back(t, "none", "h:1", 0, &rank, why) == JOBS_MISSING);
	CHECKF(strcmp(why, "h:1 holds no rank in job none") == 0, "%s", why);
	CHECK(jobs_count(t) == 1);
	/* The freed rank is the lowest free one again; the address that
	 * left may come back, as a new registration. */
	CHECK(put(t, "j", "h:4", -1, -1, 0, &rank, &completed, why) == JOBS_OK);
	CHECK(rank == 1 && !completed);
	CHECK(put(t, "j", "h:2", -1, -1, 0, &rank, &completed, why) == JOBS_OK);
	CHECK(rank == 3 && completed);
	/* Complete: the list went out, nothing is taken back. */
	CHECK(take_back(t, "j", "h:4", 0, &rank, why) == JOBS_CONFLICT);
	CHECKF(strcmp(why, "job j is complete") == 0, "%s", why);
	CHECK(take_back(t, "j", "h:9", 0, &rank, why) == JOBS_MISSING);
	CHECK(job_present(jobs_find(t, "j", 0)) == 4);
	/* A rank given explicitly can be taken back and given again. */
	put(t, "e", "h:1", 3, 2, 0, &rank, &completed, why);
	put(t, "e", "h:2", 3, 0, 0, &rank, &completed, why);
	CHECK(take_back(t, "e", "h:1", 0, &rank, why) == JOBS_OK && rank == 2);
	CHECK(put(t, "e", "h:5", -1, 2, 0, &rank, &completed, why) == JOBS_OK);
	CHECK(rank == 2 && !completed);
	jobs_free(t);
}

static void
test_unregister_last(void)
{
	struct jobs *t = table(1, 16, 10 * SEC);
	char why[256];
	bool completed;
	int64_t rank;

	put(t, "j", "h:1", 3, -1, 0, &rank, &completed, why);
	CHECK(put(t, "j", "h:2", 3, -1, 0, &rank, &completed, why) == JOBS_OK);
	/* Taking a registration back does not keep the job alive. */
	CHECK(take_back(t, "j", "h:2", 9 * SEC, &rank, why) == JOBS_OK);
	CHECK(jobs_find(t, "j", 10 * SEC) == NULL);
	CHECK(drops == 1);
	put(t, "j", "h:1", 2, -1, 20 * SEC, &rank, &completed, why);
	/* The last one out drops the job: a rerun may choose another world,
	 * and the job no longer counts against --max-jobs. */
	CHECK(take_back(t, "j", "h:1", 20 * SEC, &rank, why) == JOBS_OK);
	CHECK(rank == 0);
	CHECK(jobs_count(t) == 0 && drops == 2 && strcmp(last_drop, "j") == 0);
	CHECK(jobs_find(t, "j", 20 * SEC) == NULL);
	CHECK(put(t, "other", "h:1", 3, -1, 20 * SEC, &rank, &completed,
	    why) == JOBS_OK);
	CHECK(put(t, "other", "h:1", 3, -1, 20 * SEC, &rank, &completed,
	    why) == JOBS_OK);
	/* An expired job holds nothing to take back. */
	CHECK(take_back(t, "other", "h:1", 30 * SEC, &rank, why) ==
	    JOBS_MISSING);
	CHECK(drops == 3 && jobs_count(t) == 0);
	jobs_free(t);
	CHECK(drops == 3);
}

/* The lowest rank no address in held[] holds. */
static int64_t
lowest_free(const int64_t *held, int n)
{
	for (int64_t r = 0;; r++) {
		int a;

		for (a = 0; a < n && held[a] != r; a++)
			continue;
		if (a == n)
			return r;
	}
}

/*
 * Many registrations in one job, taken back and made again in a
 * scrambled order, checked against an array: every address still held
 * keeps its rank (the index finds it past the holes removals leave in
 * its probe runs), every one taken back is gone, and a new one gets the
 * lowest free rank.
 */
static void
test_unregister_many(void)
{
	enum { N = 600, ROUNDS = 6000 };
	struct jobs *t = table(4, 65536, 60 * SEC);
	static int64_t held[N];
	char why[256], address[32];
	int wrong = 0;
	uint32_t x = 12345;
	bool completed;
	int64_t rank, want, present = 0;

	for (int i = 0; i < N; i++)
		held[i] = -1;
	for (int round = 0; round < ROUNDS; round++) {
		int a;
		enum jobs_result rc;

		x = x * 1103515245u + 12345u;
		a = (int)((x >> 8) % N);
		snprintf(address, sizeof(address), "10.0.%d.%d:%d", a / 250,
		    a % 250, 1000 + a);
		if ((x >> 4) & 1) {
			rc = take_back(t, "many", address, 0, &rank, why);
			if (held[a] >= 0 ? rc != JOBS_OK || rank != held[a] :
			    rc != JOBS_MISSING)
				wrong++;
			if (held[a] >= 0)
				present--;
			held[a] = -1;
			continue;
		}
		want = held[a] >= 0 ? held[a] : lowest_free(held, N);
		rc = put(t, "many", address, N + 1, -1, 0, &rank, &completed,
		    why);
		if (rc != JOBS_OK || rank != want)
			wrong++;
		if (held[a] < 0)
			present++;
		held[a] = rank;
	}
	CHECK(wrong == 0);
	CHECK(present > 0 && jobs_find(t, "many", 0) != NULL &&
	    job_present(jobs_find(t, "many", 0)) == (uint64_t)present);
	for (int a = 0; a < N; a++) {
		snprintf(address, sizeof(address), "10.0.%d.%d:%d", a / 250,
		    a % 250, 1000 + a);
		if (held[a] >= 0 && (take_back(t, "many", address, 0, &rank,
		    why) != JOBS_OK || rank != held[a]))
			wrong++;
	}
	CHECK(wrong == 0);
	CHECK(jobs_count(t) == 0);
	jobs_free(t);
}

static char woken[256];

static void
wake(struct jobs_waiter *w, void *arg)
{
	size_t n = strlen(woken);

	(*(int *)arg)++;
	snprintf(woken + n, sizeof(woken) - n, "%s%s@%lld", n ? " " : "",
	    w->job, (long long)(w->deadline / SEC));
}

static void
test_waiters(void)
{
	struct jobs *t = table(16, 16, 60 * SEC);
	struct jobs_waiter w[5];
	int n = 0;

	memset(w, 0, sizeof(w));
	jobs_wait(t, &w[0], "a", 5 * SEC);
	jobs_wait(t, &w[1], "b", 3 * SEC);
	jobs_wait(t, &w[2], "a", 9 * SEC);
	jobs_wait(t, &w[3], "c", 4 * SEC);
	jobs_wait(t, &w[4], "a", 2 * SEC);
	CHECK(jobs_waiting(t) == 5);
	/* Nothing is due yet. */
	CHECK(jobs_take_waiters(t, NULL, 1 * SEC, wake, &n) == 0 && n == 0);
	/* Those past their deadline, whatever their job. */
	woken[0] = '\0';
	CHECK(jobs_take_waiters(t, NULL, 3 * SEC, wake, &n) == 2);
	CHECKF(strcmp(woken, "a@2 b@3") == 0, "%s", woken);
	CHECK(!w[4].waiting && !w[1].waiting && w[0].waiting);
	/* A job's completion wakes all its waiters and only them. */
	woken[0] = '\0';
	CHECK(jobs_take_waiters(t, "a", 0, wake, &n) == 2);
	CHECKF(strcmp(woken, "a@9 a@5") == 0, "%s", woken);
	CHECK(jobs_take_waiters(t, "a", 0, wake, &n) == 0);
	/* Taking one off by hand, twice, is fine. */
	jobs_unwait(t, &w[3]);
	jobs_unwait(t, &w[3]);
	CHECK(jobs_waiting(t) == 0);
	CHECK(jobs_take_waiters(t, NULL, 0, wake, &n) == 0 && n == 4);
	/* The caller may keep the job name in the waiter already. */
	snprintf(w[0].job, sizeof(w[0].job), "own");
	jobs_wait(t, &w[0], w[0].job, 1 * SEC);
	CHECK(strcmp(w[0].job, "own") == 0);
	CHECK(jobs_take_waiters(t, "own", 0, wake, &n) == 1);
	jobs_free(t);
}

static void
test_printable(void)
{
	char out[12];

	CHECK(strcmp(jobs_printable("abc", out, sizeof(out)), "abc") == 0);
	CHECK(strcmp(jobs_printable("a\nb\x7f\xff", out, sizeof(out)),
	    "a?b??") == 0);
	CHECKF(strcmp(jobs_printable("0123456789abcdef", out, sizeof(out)),
	    "01234...") == 0, "%s", out);
}

/* A table with leases and a per-client quota. */
static struct jobs *
leased(uint64_t max_jobs, int64_t lease, uint64_t max_client_jobs)
{
	struct jobs_limits l = { max_jobs, 16, 3600 * SEC, lease,
	    max_client_jobs };

	drops = 0;
	last_drop[0] = '\0';
	return jobs_new(&l, on_drop, NULL);
}

/* As put, from client. */
static enum jobs_result
put_from(struct jobs *t, const char *job, const char *address,
    int64_t world, const char *client, int64_t now, int64_t *got,
    bool *completed, char *why)
{
	struct jobs_registration r = reg(address, world, -1);
	int64_t w;

	snprintf(r.client, sizeof(r.client), "%s", client);
	*got = -1;
	return jobs_register(t, job, &r, now, got, &w, completed, why, 256);
}

static void
test_leases(void)
{
	struct jobs *t = leased(16, 6 * SEC, 0);
	char why[256], text[JOBS_PROGRESS_MAX];
	bool completed;
	int64_t rank;

	CHECK(put(t, "l", "h:1", 3, -1, 0, &rank, &completed, why) == JOBS_OK);
	CHECK(put(t, "l", "h:2", 3, -1, 1 * SEC, &rank, &completed, why) ==
	    JOBS_OK && rank == 1);
	/* h:2 polls and waits 20 s; h:1 says nothing. */
	CHECK(jobs_poll(t, "l", "h:2", 2 * SEC, 22 * SEC, why, sizeof(why)) ==
	    JOBS_OK);
	CHECK(jobs_find(t, "l", 5 * SEC) != NULL);
	job_progress(jobs_find(t, "l", 6 * SEC), text, sizeof(text));
	CHECKF(strcmp(text, "not yet: 1 of 3 ranks; missing 0, 2") == 0, "%s",
	    text);
	CHECK(jobs_poll(t, "l", "h:1", 6 * SEC, 6 * SEC, why, sizeof(why)) ==
	    JOBS_MISSING);
	CHECKF(strcmp(why, "h:1 holds no rank in job l: its registration "
	    "lapsed or was taken back; register again") == 0, "%s", why);
	/* The lapsed rank is free for the next one. */
	CHECK(put(t, "l", "h:3", 3, -1, 7 * SEC, &rank, &completed, why) ==
	    JOBS_OK && rank == 0);
	/* h:2's wait ends at 22 s, its lease 6 s later. */
	CHECK(jobs_sweep(t, 27 * SEC) == 0);
	CHECK(put(t, "l", "h:3", -1, -1, 27 * SEC, &rank, &completed, why) ==
	    JOBS_OK && rank == 0);
	CHECK(jobs_sweep(t, 28 * SEC) == 0);
	job_progress(jobs_find(t, "l", 28 * SEC), text, sizeof(text));
	CHECKF(strcmp(text, "not yet: 1 of 3 ranks; missing 1, 2") == 0, "%s",
	    text);
	/* The last one out takes the job with it. */
	CHECK(jobs_sweep(t, 33 * SEC) == 1 && strcmp(last_drop, "l") == 0);
	CHECK(jobs_count(t) == 0);
	jobs_free(t);
}

static void
test_finished(void)
{
	struct jobs *t = leased(2, 6 * SEC, 0);
	char why[256];
	bool completed;
	int64_t rank;
	const char *list;
	size_t len;

	CHECK(put(t, "f", "h:1", 2, -1, 0, &rank, &completed, why) == JOBS_OK);
	CHECK(put(t, "f", "h:2", 2, -1, 0, &rank, &completed, why) ==
	    JOBS_OK && completed);
	/* Complete, but h:2 has not fetched the list: no newcomer. */
	CHECK(jobs_poll(t, "f", "h:1", SEC, SEC, why, sizeof(why)) == JOBS_OK);
	CHECK(put(t, "f", "h:9", 2, -1, SEC, &rank, &completed, why) ==
	    JOBS_CONFLICT);
	CHECKF(strcmp(why, "job f is complete") == 0, "%s", why);
	/* Both have it: finished.  GET still has the list ... */
	CHECK(jobs_poll(t, "f", "h:2", SEC, SEC, why, sizeof(why)) == JOBS_OK);
	CHECK((list = job_list(jobs_find(t, "f", 2 * SEC), &len)) != NULL);
	/* ... and a new registration starts the job afresh. */
	CHECK(put(t, "f", "h:9", 3, -1, 2 * SEC, &rank, &completed, why) ==
	    JOBS_OK && rank == 0 && !completed);
	CHECK(job_world(jobs_find(t, "f", 2 * SEC)) == 3);
	CHECK(drops == 1);
	/* A complete job whose ranks never fetched finishes when their
	 * leases pass; a full table then makes room by dropping it. */
	CHECK(put(t, "g", "h:1", 1, -1, 2 * SEC, &rank, &completed, why) ==
	    JOBS_OK && completed);
	CHECK(put(t, "h", "h:1", 1, -1, 3 * SEC, &rank, &completed, why) ==
	    JOBS_FULL);
	CHECK(put(t, "f", "h:8", 3, -1, 7 * SEC, &rank, &completed, why) ==
	    JOBS_OK);
	CHECK(put(t, "h", "h:1", 1, -1, 8 * SEC, &rank, &completed, why) ==
	    JOBS_OK);
	CHECK(jobs_find(t, "g", 8 * SEC) == NULL);
	CHECK(jobs_count(t) == 2);
	jobs_free(t);
}

static void
test_client_quota(void)
{
	struct jobs *t = leased(16, 6 * SEC, 2);
	char why[256];
	bool completed;
	int64_t rank;

	CHECK(put_from(t, "a", "h:1", 2, "10.0.0.9", 0, &rank, &completed,
	    why) == JOBS_OK);
	CHECK(put_from(t, "b", "h:1", 1, "10.0.0.9", 0, &rank, &completed,
	    why) == JOBS_OK && completed);
	CHECK(put_from(t, "c", "h:1", 2, "10.0.0.9", 0, &rank, &completed,
	    why) == JOBS_QUOTA);
	CHECKF(strcmp(why, "10.0.0.9 created 2 jobs that are not finished, the "
	    "limit for one client (--max-client-jobs); try again later") == 0,
	    "%s", why);
	/* Another client is not held back; joining a job creates none. */
	CHECK(put_from(t, "c", "h:1", 2, "10.0.0.8", 0, &rank, &completed,
	    why) == JOBS_OK);
	CHECK(put_from(t, "a", "h:2", 2, "10.0.0.8", 0, &rank, &completed,
	    why) == JOBS_OK && completed);
	/* b finishes once its rank has the list, a once both have it. */
	CHECK(jobs_poll(t, "b", "h:1", SEC, SEC, why, sizeof(why)) == JOBS_OK);
	CHECK(put_from(t, "d", "h:1", 2, "10.0.0.9", SEC, &rank, &completed,
	    why) == JOBS_OK);
	CHECK(put_from(t, "e", "h:1", 2, "10.0.0.9", SEC, &rank, &completed,
	    why) == JOBS_QUOTA);
	/* A job that lapses counts no more. */
	CHECK(put_from(t, "e", "h:1", 2, "10.0.0.9", 8 * SEC, &rank,
	    &completed, why) == JOBS_OK);
	CHECK(jobs_find(t, "d", 8 * SEC) == NULL);
	jobs_free(t);
}

int
main(void)
{
	TEST_RUN(test_names);
	TEST_RUN(test_parse_good);
	TEST_RUN(test_parse_bad);
	TEST_RUN(test_assigned_in_order);
	TEST_RUN(test_explicit_ranks);
	TEST_RUN(test_new_job_checks);
	TEST_RUN(test_expiry);
	TEST_RUN(test_progress);
	TEST_RUN(test_list);
	TEST_RUN(test_large_world);
	TEST_RUN(test_unregister);
	TEST_RUN(test_unregister_last);
	TEST_RUN(test_unregister_many);
	TEST_RUN(test_waiters);
	TEST_RUN(test_printable);
	TEST_RUN(test_leases);
	TEST_RUN(test_finished);
	TEST_RUN(test_client_quota);
	return TEST_DONE();
}
