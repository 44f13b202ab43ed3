/*
 * serve_http.c - `silvic-ring serve`'s server (its options are serve.c):
 * ranks post their address to a job and long-poll for the job's complete
 * list; a rank that fails before the ring forms takes its address back.
 * The HTTP is libmicrohttpd's; the job table is jobs.c; this file maps
 * one to the other, holds waiting requests, and owns the process while
 * it serves.
 *
 * The protocol (the man page says the same):
 *
 *   POST /jobs/NAME    body: key=value lines, "address=HOST:PORT",
 *                      "world=N" (required for a new job), "rank=R"
 *                      (optional).  200 "rank=R\nworld=N\n": the rank
 *                      this address holds, R when given, else the lowest
 *                      free one; the same address again gets the same
 *                      rank.  400 malformed body, bad address, rank out
 *                      of range, world missing for a new job or above
 *                      --max-ranks; 409 "world size 4 differs from the
 *                      job's 3", "rank 2 is held by 127.0.0.1:5000",
 *                      "127.0.0.1:5000 already holds rank 1", "job NAME
 *                      is complete"; 413 body over 4 KiB; 429 the client
 *                      created --max-client-jobs jobs that are not
 *                      finished; 503 too many jobs (--max-jobs) or out
 *                      of memory.
 *   DELETE /jobs/NAME  body: "address=HOST:PORT" only, read as a POST's.
 *                      Takes that address's registration back while the
 *                      job is not complete: 200 "removed rank R"; rank R
 *                      is free again, and a job left with no
 *                      registration is gone.  404 "HOST:PORT holds no
 *                      rank in job NAME" (also when there is no such
 *                      job); 409 "job NAME is complete" (its list may
 *                      have gone out: the job stays until it expires);
 *                      400 and 413 as for POST.  Ranks send it when they
 *                      fail before the ring forms, so that a rerun of
 *                      the job does not get their dead address.
 *   GET /jobs/NAME[?wait=SECONDS][&address=HOST:PORT]
 *                      200 once the job is complete: a comment line
 *                      "# silvic-ring job NAME, world N", then each
 *                      rank's address in rank order, one host:port a
 *                      line (a --peers list).  Before that 202 "not yet:
 *                      3 of 4 ranks; missing 2\n" (up to 16 missing
 *                      ranks, then "..."), also for a job nobody
 *                      registered yet ("not yet: 0 of ? ranks"); GET
 *                      creates nothing.  With wait=S (0-60, decimals
 *                      allowed, more is 60) the answer waits until the
 *                      job completes or S seconds pass.  With
 *                      address= (what ranks send), the rank registered
 *                      at that address polls: its registration lives
 *                      on, or it has the list; 410 "HOST:PORT holds no
 *                      rank in job NAME: ..." while the job is
 *                      incomplete and the address holds no rank (its
 *                      registration lapsed): register again.  HEAD as
 *                      GET.
 *   NAME is 1-128 of [A-Za-z0-9._-], else 400.  Other paths 404; other
 *   methods on /jobs/NAME 405.  With --token-file every request needs
 *   "Authorization: Bearer SECRET", else 401.  A GET waiting when the
 *   server stops gets 503 "the server is stopping".  Bodies are
 *   text/plain and end with a newline.
 *
 * A registration lapses --lease seconds after its rank's last request
 * (a waiting GET counts until its deadline), at once when the
 * connection of its waiting GET closes; a complete job is finished once
 * each rank fetched the list (see jobs.h).  A job expires --job-ttl
 * seconds after its last registration.  A client (IP address) holds at
 * most --max-client-connections connections, and each connection must
 * deliver each request within --request-timeout seconds.  Waiting
 * requests are suspended (they hold no thread), resumed all at once when
 * their job completes, or one by one at their deadline by the main
 * thread's tick, which also sweeps expired jobs.  One mutex guards the
 * job table and the list of waiters; a request is suspended and resumed
 * only under it, so it is never resumed before it was suspended.
 */
#ifdef SR_HAVE_HTTP

#include <errno.h>
#include <netdb.h>
#include <poll.h>
#include <pthread.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <netinet/in.h>
#include <sys/resource.h>
#include <sys/socket.h>
#include <unistd.h>

#include <microhttpd.h>

#include "cli.h"
#include "jobs.h"
#include "serve.h"
#include "serve_conns.h"

#if MHD_VERSION < 0x00097002
typedef int mhd_result;
#else
typedef enum MHD_Result mhd_result;
#endif

/* How often the main thread resumes overdue waiters (ms), and how often
 * it sweeps expired jobs (ticks). */
#define TICK_MS 20
#define SWEEP_TICKS 50
#define WAIT_MAX_S 60.0
/* How often (ticks) the main thread looks for waiting requests whose
 * client went away and for connections past --request-timeout, and how
 * often (ticks) it sums up at -v what it refused. */
#define CHECK_TICKS 5
#define REPORT_TICKS 250
/* At -v, error answers shown one by one per report period. */
#define ERRORS_SHOWN 10
/* A chunked body over JOBS_BODY_MAX is read and dropped up to this,
 * then the connection is closed. */
#define DISCARD_MAX (1u << 20)

struct request {
	struct jobs_waiter w;	/* first: a waiter is its request */
	struct MHD_Connection *conn;
	bool upload;		/* POST or DELETE: a body follows */
	bool remove;		/* DELETE */
	bool resumed;		/* answer now, whatever the state */
	bool at_stop;		/* resumed by stop(): answer 503, and
				 * stop() waits until it is sent */
	char *body;		/* POST, DELETE: JOBS_BODY_MAX bytes */
	size_t len;
	double wait;		/* GET: ?wait= seconds */
	char address[SR_ADDR_MAX];	/* GET: ?address=, or empty */
};

struct server {
	pthread_mutex_t lock;
	pthread_cond_t drained;
	struct jobs *jobs;
	size_t resuming;	/* resumed at stop, not completed yet */
	bool stopping;
	const struct serve_options *o;
	struct serve_conns *conns;	/* for --request-timeout */
	/* What -v sums up every REPORT_TICKS: under lock, and the rest
	 * under stats (libmicrohttpd may log while lock is held). */
	unsigned long late_connections, lapsed;
	pthread_mutex_t stats;
	unsigned long refused_connections, errors_shown, errors_hidden;
};

/* The server, for the libmicrohttpd log callback. */
static struct server *the_server;

/* ------------------------------------------------------------- helpers */

static void
on_mhd_log(void *cls, const char *fmt, va_list ap)
{
	char line[512];
	size_t n;

	vsnprintf(line, sizeof(line), fmt, ap);
	n = strlen(line);
	while (n > 0 && (line[n - 1] == '\n' || line[n - 1] == '\r'))
		line[--n] = '\0';
	/* A line per refused connection, thousands a second under
	 * attack: counted instead, and summed up at -v. */
	if (strstr(line, "connection limit") != NULL && the_server != NULL) {
		pthread_mutex_lock(&the_server->stats);
		the_server->refused_connections++;
		pthread_mutex_unlock(&the_server->stats);
		return;
	}
	cli_debug("libmicrohttpd: %s", line);
}

/* The client's address for log lines. */
static void
peer_name(struct MHD_Connection *c, char *buf, size_t size)
{
	const union MHD_ConnectionInfo *info = MHD_get_connection_info(c,
	    MHD_CONNECTION_INFO_CLIENT_ADDRESS);

	if (info == NULL || getnameinfo(info->client_addr,
	    sizeof(struct sockaddr_in6), buf, (socklen_t)size, NULL, 0,
	    NI_NUMERICHOST) != 0)
		snprintf(buf, size, "?");
}

/* Whether an error answer may be shown at -v: the first ERRORS_SHOWN
 * of each report period are, the rest are counted. */
static bool
error_shown(void)
{
	struct server *s = the_server;
	bool shown;

	if (s == NULL)
		return true;
	pthread_mutex_lock(&s->stats);
	shown = s->errors_shown < ERRORS_SHOWN;
	if (shown)
		s->errors_shown++;
	else
		s->errors_hidden++;
	pthread_mutex_unlock(&s->stats);
	return shown;
}

static mhd_result
reply(struct MHD_Connection *c, unsigned int status, const char *fmt, ...)
    CLI_PRINTF(3, 4);

/* Queues a text answer (a newline is added). */
static mhd_result
reply(struct MHD_Connection *c, unsigned int status, const char *fmt, ...)
{
	struct MHD_Response *r;
	char text[JOBS_BODY_MAX];
	mhd_result rc;
	va_list ap;
	int n;

	va_start(ap, fmt);
	n = vsnprintf(text, sizeof(text) - 1, fmt, ap);
	va_end(ap);
	if (n < 0)
		n = 0;
	if ((size_t)n > sizeof(text) - 2)
		n = (int)sizeof(text) - 2;
	text[n++] = '\n';
	text[n] = '\0';
	if (status >= 400 && status != 401 && cli_verbosity >= 1 &&
	    error_shown()) {
		char from[INET6_ADDRSTRLEN];

		peer_name(c, from, sizeof(from));
		text[n - 1] = '\0';
		cli_status("answered %s with %u: %s", from, status, text);
		text[n - 1] = '\n';
	}
	r = MHD_create_response_from_buffer((size_t)n, text,
	    MHD_RESPMEM_MUST_COPY);
	if (r == NULL)
		return MHD_NO;
	MHD_add_response_header(r, MHD_HTTP_HEADER_CONTENT_TYPE,
	    "text/plain; charset=utf-8");
	MHD_add_response_header(r, MHD_HTTP_HEADER_CACHE_CONTROL, "no-store");
	if (status == MHD_HTTP_UNAUTHORIZED)
		MHD_add_response_header(r, MHD_HTTP_HEADER_WWW_AUTHENTICATE,
		    "Bearer realm=\"silvic-ring\"");
	if (status == MHD_HTTP_METHOD_NOT_ALLOWED)
		MHD_add_response_header(r, MHD_HTTP_HEADER_ALLOW,
		    "DELETE, GET, HEAD, POST");
	rc = MHD_queue_response(c, status, r);
	MHD_destroy_response(r);
	return rc;
}

/* ------------------------------------------------------------- waiting */

/* Resumes a waiter taken off the list (under s->lock). */
static void
resume(struct jobs_waiter *w, void *arg)
{
	struct request *rq = (struct request *)w;
	struct server *s = arg;

	rq->resumed = true;
	if (s->stopping) {
		rq->at_stop = true;
		s->resuming++;
	}
	MHD_resume_connection(rq->conn);
}

/*
 * Takes off the list every waiter (of job name; NULL: of any) whose
 * client closed its connection, resumes it, and lapses the registration
 * it polled for: a killed rank's address must not reach a list.  A
 * suspended connection is not polled by libmicrohttpd, and its socket
 * stays open until it is resumed, so its descriptor is safe to poll
 * here (under s->lock).  Returns how many.
 */
static size_t
drop_hung_up(struct server *s, const char *name)
{
	struct jobs_waiter *w, **which;
	struct pollfd *pfd;
	size_t n = 0, k = 0, dropped = 0;
	int64_t rank;
	char why[SR_MESSAGE_MAX];

	for (w = jobs_waiters(s->jobs); w != NULL; w = w->next)
		n += name == NULL || strcmp(w->job, name) == 0;
	if (n == 0)
		return 0;
	pfd = calloc(n, sizeof(*pfd));
	which = calloc(n, sizeof(*which));
	if (pfd == NULL || which == NULL)
		goto out;
	for (w = jobs_waiters(s->jobs); w != NULL && k < n; w = w->next) {
		struct request *rq = (struct request *)w;
		const union MHD_ConnectionInfo *info;

		if (name != NULL && strcmp(w->job, name) != 0)
			continue;
		info = MHD_get_connection_info(rq->conn,
		    MHD_CONNECTION_INFO_CONNECTION_FD);
		if (info == NULL)
			continue;
		pfd[k].fd = info->connect_fd;
		pfd[k].events = POLLRDHUP;
		which[k++] = w;
	}
	if (poll(pfd, k, 0) <= 0)
		goto out;
	for (size_t i = 0; i < k; i++) {
		struct request *rq = (struct request *)which[i];

		if (!(pfd[i].revents & (POLLRDHUP | POLLHUP | POLLERR)))
			continue;
		jobs_unwait(s->jobs, which[i]);
		dropped++;
		if (rq->address[0] != '\0' && jobs_unregister(s->jobs,
		    rq->w.job, rq->address, sr_clock_ns(), &rank, why,
		    sizeof(why)) == JOBS_OK) {
			s->lapsed++;
			cli_status("job %s: rank %lld (%s) lapsed: it closed "
			    "its connection while waiting", rq->w.job,
			    (long long)rank, rq->address);
		}
		resume(which[i], s);
	}
out:
	free(pfd);
	free(which);
	return dropped;
}

/* Resumes the waiters of job name that poll for address (under
 * s->lock). */
static void
wake_address(struct server *s, const char *name, const char *address)
{
	struct jobs_waiter *w, *next;

	for (w = jobs_waiters(s->jobs); w != NULL; w = next) {
		struct request *rq = (struct request *)w;

		next = w->next;
		if (strcmp(w->job, name) != 0 ||
		    strcmp(rq->address, address) != 0)
			continue;
		jobs_unwait(s->jobs, w);
		resume(w, s);
	}
}

static void
on_job_drop(const char *name, void *aux, void *arg)
{
	if (aux != NULL)
		MHD_destroy_response(aux);
	cli_debug("job %s: dropped", name);
}

/* -------------------------------------------------------------- answers */

/* GET and HEAD: the list, a suspension, or the progress. */
static mhd_result
answer_get(struct server *s, struct request *rq)
{
	char progress[JOBS_PROGRESS_MAX], why[SR_MESSAGE_MAX];
	struct MHD_Response **cached;
	struct job *j;
	const char *list;
	size_t len;
	mhd_result rc;
	bool will_wait;
	int64_t now = sr_clock_ns();

	pthread_mutex_lock(&s->lock);
	if (rq->at_stop) {
		pthread_mutex_unlock(&s->lock);
		return reply(rq->conn, MHD_HTTP_SERVICE_UNAVAILABLE, "the "
		    "server is stopping");
	}
	will_wait = !rq->resumed && rq->wait > 0 && !s->stopping;
	if (rq->address[0] != '\0' && jobs_poll(s->jobs, rq->w.job,
	    rq->address, now, will_wait ? now + (int64_t)(rq->wait * 1e9) :
	    now, why, sizeof(why)) != JOBS_OK) {
		pthread_mutex_unlock(&s->lock);
		return reply(rq->conn, MHD_HTTP_GONE, "%s", why);
	}
	j = jobs_find(s->jobs, rq->w.job, now);
	if (j != NULL && (list = job_list(j, &len)) != NULL) {
		/* One response per job, shared by every GET (MHD counts
		 * its references): the list is copied once, not per rank. */
		cached = (struct MHD_Response **)job_aux(j);
		if (*cached == NULL &&
		    (*cached = MHD_create_response_from_buffer(len,
		    (void *)list, MHD_RESPMEM_MUST_COPY)) != NULL) {
			MHD_add_response_header(*cached,
			    MHD_HTTP_HEADER_CONTENT_TYPE,
			    "text/plain; charset=utf-8");
			MHD_add_response_header(*cached,
			    MHD_HTTP_HEADER_CACHE_CONTROL, "no-store");
		}
		rc = *cached != NULL ? MHD_queue_response(rq->conn, MHD_HTTP_OK,
		    *cached) : MHD_NO;
		pthread_mutex_unlock(&s->lock);
		return rc;
	}
	if (will_wait) {
		jobs_wait(s->jobs, &rq->w, rq->w.job, now +
		    (int64_t)(rq->wait * 1e9));
		MHD_suspend_connection(rq->conn);
		cli_debug("job %s: a request waits up to %gs", rq->w.job,
		    rq->wait);
		pthread_mutex_unlock(&s->lock);
		return MHD_YES;
	}
	job_progress(j, progress, sizeof(progress));
	pthread_mutex_unlock(&s->lock);
	return reply(rq->conn, MHD_HTTP_ACCEPTED, "%s", progress);
}

/* The HTTP status of each job-table result. */
static const unsigned int jobs_status[] = {
	[JOBS_OK] = MHD_HTTP_OK,
	[JOBS_BAD] = MHD_HTTP_BAD_REQUEST,
	[JOBS_CONFLICT] = MHD_HTTP_CONFLICT,
	[JOBS_FULL] = MHD_HTTP_SERVICE_UNAVAILABLE,
	[JOBS_NOMEM] = MHD_HTTP_SERVICE_UNAVAILABLE,
	[JOBS_MISSING] = MHD_HTTP_NOT_FOUND,
	[JOBS_QUOTA] = MHD_HTTP_TOO_MANY_REQUESTS,
};

/* A POST's or DELETE's body as a registration; false after answering
 * 413 or 400 (with *rc). */
static bool
registration(struct request *rq, struct jobs_registration *reg,
    mhd_result *rc)
{
	char why[SR_MESSAGE_MAX];

	if (rq->len > JOBS_BODY_MAX)
		*rc = reply(rq->conn, 413, "the body is larger than %d bytes",
		    JOBS_BODY_MAX);
	else if (jobs_parse_registration(rq->body, rq->len, reg, why,
	    sizeof(why)) != 0)
		*rc = reply(rq->conn, MHD_HTTP_BAD_REQUEST, "%s", why);
	else
		return true;
	return false;
}

static mhd_result
answer_post(struct server *s, struct request *rq)
{
	struct jobs_registration reg;
	enum jobs_result res;
	char why[SR_MESSAGE_MAX];
	int64_t rank, world;
	bool completed;
	struct job *j;
	size_t len;
	mhd_result rc;

	if (!registration(rq, &reg, &rc))
		return rc;
	peer_name(rq->conn, reg.client, sizeof(reg.client));
	pthread_mutex_lock(&s->lock);
	/* The last rank in: first drop the ranks whose client went away,
	 * so that no list goes out with a dead address. */
	if ((j = jobs_find(s->jobs, rq->w.job, sr_clock_ns())) != NULL &&
	    job_list(j, &len) == NULL && job_present(j) + 1 >= job_world(j))
		drop_hung_up(s, rq->w.job);
	res = jobs_register(s->jobs, rq->w.job, &reg, sr_clock_ns(), &rank,
	    &world, &completed, why, sizeof(why));
	if (completed)
		jobs_take_waiters(s->jobs, rq->w.job, 0, resume, s);
	pthread_mutex_unlock(&s->lock);
	if (res != JOBS_OK)
		return reply(rq->conn, jobs_status[res], "%s", why);
	cli_debug("job %s: rank %lld is %s", rq->w.job, (long long)rank,
	    reg.address);
	if (completed)
		cli_status("job %s: complete with %lld ranks", rq->w.job,
		    (long long)world);
	return reply(rq->conn, MHD_HTTP_OK, "rank=%lld\nworld=%lld",
	    (long long)rank, (long long)world);
}

/* DELETE: takes an address's registration back. */
static mhd_result
answer_delete(struct server *s, struct request *rq)
{
	struct jobs_registration reg;
	enum jobs_result res;
	char why[SR_MESSAGE_MAX];
	int64_t rank;
	mhd_result rc;

	if (!registration(rq, &reg, &rc))
		return rc;
	if (reg.world >= 0 || reg.rank >= 0)
		return reply(rq->conn, MHD_HTTP_BAD_REQUEST, "a DELETE body is "
		    "address=HOST:PORT alone, without world or rank");
	pthread_mutex_lock(&s->lock);
	res = jobs_unregister(s->jobs, rq->w.job, reg.address, sr_clock_ns(),
	    &rank, why, sizeof(why));
	/* The rank at that address, if it still waits, hears 410 now. */
	if (res == JOBS_OK)
		wake_address(s, rq->w.job, reg.address);
	pthread_mutex_unlock(&s->lock);
	if (res != JOBS_OK)
		return reply(rq->conn, jobs_status[res], "%s", why);
	cli_status("job %s: %s took rank %lld back", rq->w.job, reg.address,
	    (long long)rank);
	return reply(rq->conn, MHD_HTTP_OK, "removed rank %lld",
	    (long long)rank);
}

/* ------------------------------------------------------------ requests */

/* The first call, with the headers: checks everything that needs no
 * body and answers what it can. */
static mhd_result
start_request(struct server *s, struct MHD_Connection *c, const char *url,
    const char *method, struct request **out)
{
	const char *length, *wait_text, *name, *address;
	bool get = strcmp(method, "GET") == 0 || strcmp(method, "HEAD") == 0;
	bool remove = strcmp(method, "DELETE") == 0;
	struct request *rq;
	uint64_t content_length = 0;
	double wait = 0;
	char *end, shown[44];

	if (!serve_authorized(s->o, MHD_lookup_connection_value(c,
	    MHD_HEADER_KIND, MHD_HTTP_HEADER_AUTHORIZATION)))
		return reply(c, MHD_HTTP_UNAUTHORIZED, "authentication "
		    "required: send \"Authorization: Bearer\" with the "
		    "server's secret");
	if (strncmp(url, "/jobs/", 6) != 0)
		return reply(c, MHD_HTTP_NOT_FOUND, "no such path; jobs are at "
		    "/jobs/NAME");
	name = url + 6;
	if (!get && !remove && strcmp(method, "POST") != 0)
		return reply(c, MHD_HTTP_METHOD_NOT_ALLOWED, "%s is not "
		    "allowed on /jobs/NAME (DELETE, GET, HEAD, POST)", method);
	if (!jobs_name_valid(name))
		return reply(c, MHD_HTTP_BAD_REQUEST, "job name '%s' is not 1 "
		    "to %d of A-Z a-z 0-9 . _ -", jobs_printable(name, shown,
		    sizeof(shown)), JOBS_NAME_MAX);
	length = MHD_lookup_connection_value(c, MHD_HEADER_KIND,
	    MHD_HTTP_HEADER_CONTENT_LENGTH);
	if (length != NULL)
		content_length = strtoull(length, NULL, 10);
	if (get && (content_length > 0 || MHD_lookup_connection_value(c,
	    MHD_HEADER_KIND, MHD_HTTP_HEADER_TRANSFER_ENCODING) != NULL))
		return reply(c, MHD_HTTP_BAD_REQUEST, "a GET has no body");
	if (!get && content_length > JOBS_BODY_MAX)
		return reply(c, 413, "the body is larger than %d bytes",
		    JOBS_BODY_MAX);
	wait_text = MHD_lookup_connection_value(c, MHD_GET_ARGUMENT_KIND,
	    "wait");
	if (get && wait_text != NULL) {
		errno = 0;
		wait = strtod(wait_text, &end);
		if (errno != 0 || end == wait_text || *end != '\0' ||
		    !(wait >= 0))
			return reply(c, MHD_HTTP_BAD_REQUEST, "wait '%s' is "
			    "not a number of seconds", jobs_printable(wait_text,
			    shown, sizeof(shown)));
		if (wait > WAIT_MAX_S)
			wait = WAIT_MAX_S;
	}
	address = MHD_lookup_connection_value(c, MHD_GET_ARGUMENT_KIND,
	    "address");
	if (get && address != NULL && strlen(address) >= sizeof(rq->address))
		return reply(c, MHD_HTTP_BAD_REQUEST, "address '%s' is not "
		    "host:port", jobs_printable(address, shown,
		    sizeof(shown)));
	if ((rq = calloc(1, sizeof(*rq))) == NULL ||
	    (!get && (rq->body = malloc(JOBS_BODY_MAX)) == NULL)) {
		free(rq);
		return reply(c, MHD_HTTP_SERVICE_UNAVAILABLE, "out of memory");
	}
	rq->conn = c;
	rq->upload = !get;
	rq->remove = remove;
	rq->wait = wait;
	if (get && address != NULL)
		snprintf(rq->address, sizeof(rq->address), "%s", address);
	snprintf(rq->w.job, sizeof(rq->w.job), "%s", name);
	if (get)
		serve_conns_busy(s->conns, c, true);
	*out = rq;
	/* Answering in this first call would make MHD close the
	 * connection (an early answer); the next call answers. */
	return MHD_YES;
}

static mhd_result
on_request(void *cls, struct MHD_Connection *c, const char *url,
    const char *method, const char *version, const char *upload,
    size_t *upload_size, void **req_cls)
{
	struct server *s = cls;
	struct request *rq = *req_cls;

	if (rq == NULL)
		return start_request(s, c, url, method,
		    (struct request **)req_cls);
	if (!rq->upload)
		return answer_get(s, rq);
	if (*upload_size > 0) {
		/* MHD cannot answer in the middle of a body: a chunked
		 * body too large is read to its end (then 413), or cut
		 * when it goes on and on. */
		if (rq->len + *upload_size <= JOBS_BODY_MAX)
			memcpy(rq->body + rq->len, upload, *upload_size);
		rq->len += *upload_size;
		*upload_size = 0;
		return rq->len <= DISCARD_MAX ? MHD_YES : MHD_NO;
	}
	serve_conns_busy(s->conns, c, true);
	return rq->remove ? answer_delete(s, rq) : answer_post(s, rq);
}

static void
on_completed(void *cls, struct MHD_Connection *c, void **req_cls,
    enum MHD_RequestTerminationCode why)
{
	struct server *s = cls;
	struct request *rq = *req_cls;

	serve_conns_busy(s->conns, c, false);
	if (rq == NULL)
		return;
	/* A request is never completed while suspended, so only those
	 * that stop() resumed need the lock: it waits for their 503. */
	if (rq->at_stop) {
		pthread_mutex_lock(&s->lock);
		if (--s->resuming == 0)
			pthread_cond_signal(&s->drained);
		pthread_mutex_unlock(&s->lock);
	}
	free(rq->body);
	free(rq);
	*req_cls = NULL;
}

/* Binds and listens on --listen; the socket, or -1 after a message with
 * *status set. */
static int
listen_on(const struct serve_options *o, char *url, size_t url_size,
    int *status)
{
	struct addrinfo hints, *res = NULL, *ai;
	struct sockaddr_storage ss;
	socklen_t sslen = sizeof(ss);
	char ip[INET6_ADDRSTRLEN + 8], port[8];
	int fd = -1, one = 1, rc, saved = 0;

	memset(&hints, 0, sizeof(hints));
	hints.ai_socktype = SOCK_STREAM;
	hints.ai_flags = AI_PASSIVE | AI_NUMERICSERV;
	if ((rc = getaddrinfo(o->host, o->port, &hints, &res)) != 0) {
		*status = cli_usage_error("serve: --listen '%s': %s", o->listen,
		    gai_strerror(rc));
		return -1;
	}
	for (ai = res; ai != NULL; ai = ai->ai_next) {
		fd = socket(ai->ai_family, ai->ai_socktype | SOCK_CLOEXEC |
		    SOCK_NONBLOCK, ai->ai_protocol);
		if (fd < 0)
			continue;
		setsockopt(fd, SOL_SOCKET, SO_REUSEADDR, &one, sizeof(one));
		if (bind(fd, ai->ai_addr, ai->ai_addrlen) == 0 &&
		    listen(fd, 4096) == 0)
			break;
		saved = errno;
		close(fd);
		fd = -1;
	}
	freeaddrinfo(res);
	if (fd < 0) {
		cli_error("serve: cannot listen on %s: %s", o->listen,
		    strerror(saved));
		*status = EXIT_FORMATION;
		return -1;
	}
	getsockname(fd, (struct sockaddr *)&ss, &sslen);
	getnameinfo((struct sockaddr *)&ss, sslen, ip, sizeof(ip), port,
	    sizeof(port), NI_NUMERICHOST | NI_NUMERICSERV);
	snprintf(url, url_size, strchr(ip, ':') != NULL ? "http://[%s]:%s/" :
	    "http://%s:%s/", ip, port);
	return fd;
}

/* Raises the open file limit to fit the connections, or warns. */
static void
fit_file_limit(uint64_t connections)
{
	struct rlimit rl;
	rlim_t want = (rlim_t)connections + 64;

	if (getrlimit(RLIMIT_NOFILE, &rl) != 0 || rl.rlim_cur >= want)
		return;
	rl.rlim_cur = rl.rlim_max == RLIM_INFINITY || rl.rlim_max >= want ?
	    want : rl.rlim_max;
	setrlimit(RLIMIT_NOFILE, &rl);
	if (rl.rlim_cur < want)
		cli_warn("--max-connections %llu exceeds the open file limit "
		    "(%llu); raise it with ulimit -n",
		    (unsigned long long)connections,
		    (unsigned long long)rl.rlim_cur);
}

static struct MHD_Daemon *
start_daemon(struct server *s, int fd, const struct serve_options *o)
{
	/*
	 * poll, not epoll: libmicrohttpd 0.9.75's epoll mode loses read
	 * events under load (scripts/http-load with 256 connections hung
	 * in about one run of three until the idle timeout, with requests
	 * unread in the sockets); poll never did.
	 */
	unsigned int flags = MHD_USE_POLL_INTERNAL_THREAD |
	    MHD_ALLOW_SUSPEND_RESUME | MHD_USE_ERROR_LOG;
	/* A thread per CPU (up to 4): sending a 10,000-rank list to
	 * every rank is most of the work. */
	long cpus = sysconf(_SC_NPROCESSORS_ONLN);
	unsigned int threads = cpus > 4 ? 4 : cpus > 1 ? (unsigned int)cpus : 1;
	struct MHD_Daemon *d;
	sigset_t block, saved;

	/* The daemon's threads inherit this mask: signals go to the main
	 * thread, whose poll they interrupt. */
	sigemptyset(&block);
	sigaddset(&block, SIGINT);
	sigaddset(&block, SIGTERM);
	pthread_sigmask(SIG_BLOCK, &block, &saved);
	d = MHD_start_daemon(flags, 0, NULL, NULL, on_request, s,
	    MHD_OPTION_EXTERNAL_LOGGER, on_mhd_log, NULL,
	    MHD_OPTION_LISTEN_SOCKET, fd,
	    MHD_OPTION_CONNECTION_LIMIT, (unsigned int)o->max_connections,
	    MHD_OPTION_PER_IP_CONNECTION_LIMIT,
	    (unsigned int)o->max_client_connections,
	    /* A little after --request-timeout, which cuts (and counts)
	     * idle connections first; this one catches stalled answers. */
	    MHD_OPTION_CONNECTION_TIMEOUT, (unsigned int)o->request_timeout + 2,
	    MHD_OPTION_NOTIFY_CONNECTION, serve_conns_notify, s->conns,
	    MHD_OPTION_CONNECTION_MEMORY_LIMIT, (size_t)16384,
	    MHD_OPTION_THREAD_POOL_SIZE, threads,
	    MHD_OPTION_NOTIFY_COMPLETED, on_completed, s,
	    MHD_OPTION_END);
	pthread_sigmask(SIG_SETMASK, &saved, NULL);
	return d;
}

/* ---------------------------------------------------------- the loop */

/* At -v, every REPORT_TICKS: what was refused or cut since the last
 * report (under s->lock). */
static void
report(struct server *s, const struct serve_options *o)
{
	pthread_mutex_lock(&s->stats);
	if (s->refused_connections > 0)
		cli_status("closed %lu connection(s) at once in the last %ds: "
		    "over --max-client-connections %llu from one address, or "
		    "--max-connections %llu in all", s->refused_connections,
		    REPORT_TICKS * TICK_MS / 1000,
		    (unsigned long long)o->max_client_connections,
		    (unsigned long long)o->max_connections);
	if (s->late_connections > 0)
		cli_status("closed %lu connection(s) in the last %ds that sent "
		    "no complete request within --request-timeout %llus",
		    s->late_connections, REPORT_TICKS * TICK_MS / 1000,
		    (unsigned long long)o->request_timeout);
	if (s->errors_hidden > 0)
		cli_status("%lu more error answer(s) not shown in the last %ds",
		    s->errors_hidden, REPORT_TICKS * TICK_MS / 1000);
	if (s->lapsed > 0)
		cli_status("%lu registration(s) lapsed in the last %ds: their "
		    "ranks closed their connections while waiting", s->lapsed,
		    REPORT_TICKS * TICK_MS / 1000);
	s->refused_connections = s->late_connections = s->lapsed = 0;
	s->errors_shown = s->errors_hidden = 0;
	pthread_mutex_unlock(&s->stats);
}

static void
run_until_signal(struct server *s, const struct serve_options *o)
{
	unsigned long ticks = 0;
	size_t dropped;
	int64_t now;

	while (!cli_interrupted) {
		poll(NULL, 0, TICK_MS);
		pthread_mutex_lock(&s->lock);
		now = sr_clock_ns();
		jobs_take_waiters(s->jobs, NULL, now, resume, s);
		if (++ticks % CHECK_TICKS == 0) {
			drop_hung_up(s, NULL);
			s->late_connections += serve_conns_cut_late(s->conns,
			    now);
		}
		dropped = ticks % SWEEP_TICKS == 0 ?
		    jobs_sweep(s->jobs, now) : 0;
		if (ticks % REPORT_TICKS == 0)
			report(s, o);
		pthread_mutex_unlock(&s->lock);
		if (dropped > 0)
			cli_status("%zu job(s) expired or lapsed", dropped);
	}
}

/* Answers every waiter (503), then stops the daemon: MHD must not be
 * stopped with suspended connections. */
static void
stop(struct server *s, struct MHD_Daemon *d)
{
	struct timespec until;
	MHD_socket fd = MHD_quiesce_daemon(d);

	if (fd != MHD_INVALID_SOCKET)
		close(fd);
	clock_gettime(CLOCK_MONOTONIC, &until);
	until.tv_sec += 2;
	pthread_mutex_lock(&s->lock);
	s->stopping = true;
	jobs_take_waiters(s->jobs, NULL, 0, resume, s);
	while (s->resuming > 0 && pthread_cond_timedwait(&s->drained, &s->lock,
	    &until) == 0)
		continue;
	pthread_mutex_unlock(&s->lock);
	MHD_stop_daemon(d);
}

/* ------------------------------------------------------------ the run */

int
serve_run(const struct serve_options *o)
{
	struct server s;
	struct jobs_limits limits;
	struct MHD_Daemon *d;
	pthread_condattr_t ca;
	char url[INET6_ADDRSTRLEN + 32];
	int rc, fd;

	memset(&s, 0, sizeof(s));
	s.o = o;
	limits.max_jobs = o->max_jobs;
	limits.max_ranks = o->max_ranks;
	limits.ttl_ns = (int64_t)(o->ttl * 1e9);
	limits.lease_ns = (int64_t)(o->lease * 1e9);
	limits.max_client_jobs = o->max_client_jobs;
	if ((s.jobs = jobs_new(&limits, on_job_drop, &s)) == NULL ||
	    (s.conns = serve_conns_new((int64_t)o->request_timeout *
	    1000000000)) == NULL) {
		jobs_free(s.jobs);
		cli_error("serve: out of memory");
		return EXIT_INTERNAL;
	}
	pthread_mutex_init(&s.lock, NULL);
	pthread_mutex_init(&s.stats, NULL);
	pthread_condattr_init(&ca);
	pthread_condattr_setclock(&ca, CLOCK_MONOTONIC);
	pthread_cond_init(&s.drained, &ca);
	pthread_condattr_destroy(&ca);
	the_server = &s;
	cli_signals_install();
	if ((fd = listen_on(o, url, sizeof(url), &rc)) < 0)
		goto out;
	fit_file_limit(o->max_connections);
	if ((d = start_daemon(&s, fd, o)) == NULL) {
		close(fd);
		cli_error("serve: libmicrohttpd could not start on %s",
		    o->listen);
		rc = EXIT_INTERNAL;
		goto out;
	}
	printf("%s\n", url);
	if (fflush(stdout) != 0) {
		cli_error("serve: writing the URL: %s", strerror(errno));
		stop(&s, d);
		rc = EXIT_INTERNAL;
		goto out;
	}
	cli_status("serving %s: at most %llu jobs of up to %llu ranks and %llu "
	    "connections (%llu from one address, %llu jobs created by one); "
	    "registrations lapse %gs after their rank's last request; jobs "
	    "expire %gs after their last registration%s",
	    url, (unsigned long long)o->max_jobs,
	    (unsigned long long)o->max_ranks,
	    (unsigned long long)o->max_connections,
	    (unsigned long long)o->max_client_connections,
	    (unsigned long long)o->max_client_jobs, o->lease, o->ttl,
	    o->bearer != NULL || o->derived[0][0] != '\0' ?
	    "; bearer token required" : "");
	run_until_signal(&s, o);
	cli_status("stopping (%s)", cli_interrupted == SIGINT ? "SIGINT" :
	    "SIGTERM");
	stop(&s, d);
	/* Stopped cleanly, but by a signal: 130, as every command exits. */
	rc = EXIT_INTERRUPTED;
out:
	jobs_free(s.jobs);
	serve_conns_free(s.conns);
	the_server = NULL;
	pthread_cond_destroy(&s.drained);
	pthread_mutex_destroy(&s.lock);
	pthread_mutex_destroy(&s.stats);
	return rc;
}

#endif
