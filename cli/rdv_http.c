/*
 * rdv_http.c - the HTTP rendezvous backend (libcurl); without libcurl at
 * build time every call says which package to install.
 *
 * publish POSTs "address=HOST:PORT" (with "world=N" and "rank=R" when
 * known) to the URL and learns the rank the server assigned; wait
 * long-polls GET URL?wait=S&address=HOST:PORT until the answer is 200
 * and a complete list (the protocol is described at the top of
 * serve_http.c): naming its address keeps its registration alive while
 * it waits, and a 410 (the registration lapsed, say while the server was
 * unreachable) registers it again with the same rank.  Refused
 * connections, timeouts, 429 and 5xx answers are retried with backoff
 * until the rendezvous deadline; other 4xx answers fail at once.  A
 * server that answers the POST with 404, 405 or 501 serves a static file
 * (python3 -m http.server, nginx): nothing is published and the file is
 * the list.
 * A rank that registered and then fails before the ring forms (done is
 * never called) takes its registration back at close with a DELETE, so
 * that a rerun of the job does not get its dead address.
 *
 * The bearer token, when the server wants one, is the rendezvous' bearer
 * field or the text of the file named by $SILVIC_RING_HTTP_TOKEN_FILE.
 * Messages name the URL (without any user:password@) and never the
 * token.
 */
#include <errno.h>
#include <fcntl.h>
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "cli.h"
#include "discover.h"
#include "rendezvous.h"

#ifndef SR_HAVE_HTTP

static int
missing(struct sr_error *err)
{
	return sr_error_set(err, SR_ECONFIG, SR_PHASE_CONFIG, "HTTP rendezvous "
	    "is not built in: install libcurl4-openssl-dev and "
	    "libmicrohttpd-dev, then rebuild");
}

static int
http_preload(struct rendezvous *r, int64_t world, struct peer_list *list,
    struct sr_error *err)
{
	return missing(err);
}

static int
http_publish(struct rendezvous *r, const char *address, int64_t *rank,
    int64_t world, struct sr_error *err)
{
	return missing(err);
}

static int
http_wait(struct rendezvous *r, int64_t world, int64_t deadline,
    struct peer_list *list, struct sr_error *err)
{
	return missing(err);
}

static int
http_done(struct rendezvous *r, struct sr_ring *ring, struct sr_error *err)
{
	return 0;
}

static void
http_close(struct rendezvous *r)
{
}

#else

#include <curl/curl.h>

/* Answer caps: a registration answer is two short lines; a list of
 * LIST_MAX_RANKS addresses fits 16 MiB. */
#define REGISTER_MAX (64u << 10)
#define LIST_MAX (16u << 20)
#define SNIPPET_MAX 200
#define SECRET_MAX 4096
/* The longest server-side wait asked for (s), and the backoff (ms). */
#define LONG_POLL_S 25
#define BACKOFF_FIRST_MS 100
#define BACKOFF_MAX_MS 2000
#define CONNECT_TIMEOUT_MS 10000
/* The first attempt gets at least this (ms), past the deadline too: a
 * dry run (timeout 0) looks once. */
#define FIRST_TRY_MS 2000
/* What a poll adds to the URL, at most. */
#define POLL_EXTRA (32 + 3 * SR_ADDR_MAX)
/* Taking a registration back is worth this much of a failing rank's
 * exit (ms), connecting included. */
#define WITHDRAW_MS 1000

struct http {
	CURL *curl;
	struct curl_slist *headers;
	char shown[160];		/* the URL for messages */
	int64_t deadline;
	int64_t world;			/* the server's, or -1 */
	bool is_static;
	bool once;			/* a dry run: look, change nothing */
	bool tried;			/* an attempt was made */
	bool registered;		/* the server gave this address a rank */
	bool done;			/* the ring formed */
	char address[SR_ADDR_MAX];	/* what was registered */
	int64_t rank;			/* the rank it holds */
	char said[SNIPPET_MAX + 8];	/* the server's last "not yet" */
	char failure[CURL_ERROR_SIZE + SNIPPET_MAX + 64];
	char errbuf[CURL_ERROR_SIZE];
};

struct body {
	char *data;
	size_t len, max;
	bool too_big;
};

static pthread_once_t global_once = PTHREAD_ONCE_INIT;
static CURLcode global_rc;

static void
global_init(void)
{
	global_rc = curl_global_init(CURL_GLOBAL_DEFAULT);
}

/* At most SNIPPET_MAX bytes of an answer for a message: one line,
 * control and non-ASCII bytes replaced. */
static void
snippet(const char *data, size_t len, char *out, size_t size)
{
	size_t n = 0, i;

	for (i = 0; i < len && n < SNIPPET_MAX && n + 1 < size; i++) {
		unsigned char c = (unsigned char)data[i];

		out[n++] = c == '\n' || c == '\t' ? ' ' :
		    c < 0x20 || c >= 0x7f ? '?' : (char)c;
	}
	while (n > 0 && out[n - 1] == ' ')
		n--;
	if (i < len && n + 4 < size) {
		memcpy(out + n, "...", 3);
		n += 3;
	}
	out[n] = '\0';
}

/* The URL without user:password@, cut to fit. */
static void
url_shown(const char *url, char *out, size_t size)
{
	const char *host = strstr(url, "://"), *at, *slash;

	if (host != NULL) {
		host += 3;
		slash = host + strcspn(host, "/?#");
		at = memchr(host, '@', (size_t)(slash - host));
		if (at != NULL) {
			snprintf(out, size, "%.*s%s", (int)(host - url), url,
			    at + 1);
			return;
		}
	}
	snprintf(out, size, "%s", url);
}

/* Reads the bearer secret: the file's text without trailing
 * whitespace, no control bytes. */
static int
read_secret(const char *path, char *buf, size_t size, struct sr_error *err)
{
	ssize_t got;
	size_t n = 0;
	char why[300];
	int fd = cli_open_regular(path, false, NULL, why, sizeof(why));

	if (fd < 0)
		return sr_error_set(err, SR_ECONFIG, SR_PHASE_CONFIG,
		    "SILVIC_RING_HTTP_TOKEN_FILE '%s': %s", path, why);
	while (n + 1 < size && (got = read(fd, buf + n, size - 1 - n)) != 0) {
		if (got < 0 && errno == EINTR)
			continue;
		if (got < 0) {
			close(fd);
			return sr_error_set(err, SR_ECONFIG, SR_PHASE_CONFIG,
			    "SILVIC_RING_HTTP_TOKEN_FILE '%s': %s", path,
			    strerror(errno));
		}
		n += (size_t)got;
	}
	close(fd);
	while (n > 0 && strchr(" \t\r\n", buf[n - 1]) != NULL)
		n--;
	buf[n] = '\0';
	if (n == 0 || n + 1 >= size)
		return sr_error_set(err, SR_ECONFIG, SR_PHASE_CONFIG,
		    "SILVIC_RING_HTTP_TOKEN_FILE '%s' is %s", path, n == 0 ?
		    "empty" : "too large");
	for (size_t i = 0; i < n; i++)
		if ((unsigned char)buf[i] < 0x20 || buf[i] == 0x7f)
			return sr_error_set(err, SR_ECONFIG, SR_PHASE_CONFIG,
			    "SILVIC_RING_HTTP_TOKEN_FILE '%s': the secret "
			    "holds a control character", path);
	return 0;
}

static size_t
on_data(char *data, size_t size, size_t n, void *arg)
{
	struct body *b = arg;
	size_t len = size * n;
	char *grown;

	if (len > b->max - b->len) {
		b->too_big = true;
		return 0;
	}
	if ((grown = realloc(b->data, b->len + len + 1)) == NULL)
		return 0;
	b->data = grown;
	memcpy(b->data + b->len, data, len);
	b->len += len;
	b->data[b->len] = '\0';
	return len;
}

static int
on_progress(void *arg, curl_off_t dltotal, curl_off_t dlnow,
    curl_off_t ultotal, curl_off_t ulnow)
{
	return cli_interrupted ? 1 : 0;
}

/* ---------------------------------------------------------- the state */

static int
headers_add(struct http *h, const char *line)
{
	struct curl_slist *more = curl_slist_append(h->headers, line);

	if (more == NULL)
		return -1;
	h->headers = more;
	return 0;
}

static int
bearer(struct rendezvous *r, struct http *h, struct sr_error *err)
{
	const char *path = discover_http_token_file();
	char secret[SECRET_MAX + 1], line[SECRET_MAX + 32];
	int rc;

	/* An HTTP token of its own first, else the one derived from the
	 * ring's key. */
	if (path != NULL) {
		if (read_secret(path, secret, sizeof(secret), err) != 0)
			return -1;
	} else if (r->bearer != NULL)
		snprintf(secret, sizeof(secret), "%s", r->bearer);
	else
		return 0;
	snprintf(line, sizeof(line), "Authorization: Bearer %s", secret);
	rc = headers_add(h, line);
	explicit_bzero(secret, sizeof(secret));
	explicit_bzero(line, sizeof(line));
	return rc != 0 ? sr_error_set(err, SR_ENOMEM, SR_PHASE_RENDEZVOUS,
	    "out of memory") : 0;
}

static struct http *
state(struct rendezvous *r, struct sr_error *err)
{
	struct http *h = r->state;

	if (h != NULL)
		return h;
	pthread_once(&global_once, global_init);
	if (global_rc != CURLE_OK) {
		sr_error_set(err, SR_ENOMEM, SR_PHASE_RENDEZVOUS,
		    "libcurl could not start: %s",
		    curl_easy_strerror(global_rc));
		return NULL;
	}
	if ((h = calloc(1, sizeof(*h))) == NULL ||
	    (h->curl = curl_easy_init()) == NULL) {
		free(h);
		sr_error_set(err, SR_ENOMEM, SR_PHASE_RENDEZVOUS,
		    "out of memory");
		return NULL;
	}
	r->state = h;
	h->world = -1;
	h->once = r->dry_run || r->timeout <= 0;
	h->deadline = sr_clock_ns() + (int64_t)(r->timeout * 1e9);
	url_shown(r->source, h->shown, sizeof(h->shown));
	if (headers_add(h, "Expect:") != 0 ||
	    headers_add(h, "User-Agent: silvic-ring/" SR_VERSION) != 0) {
		sr_error_set(err, SR_ENOMEM, SR_PHASE_RENDEZVOUS,
		    "out of memory");
		return NULL;
	}
	if (bearer(r, h, err) != 0)
		return NULL;
	curl_easy_setopt(h->curl, CURLOPT_ERRORBUFFER, h->errbuf);
	curl_easy_setopt(h->curl, CURLOPT_NOSIGNAL, 1L);
	curl_easy_setopt(h->curl, CURLOPT_FOLLOWLOCATION, 0L);
#if LIBCURL_VERSION_NUM >= 0x075500
	curl_easy_setopt(h->curl, CURLOPT_PROTOCOLS_STR, "http,https");
#else
	curl_easy_setopt(h->curl, CURLOPT_PROTOCOLS,
	    (long)(CURLPROTO_HTTP | CURLPROTO_HTTPS));
#endif
	curl_easy_setopt(h->curl, CURLOPT_HTTPHEADER, h->headers);
	curl_easy_setopt(h->curl, CURLOPT_WRITEFUNCTION, on_data);
	curl_easy_setopt(h->curl, CURLOPT_NOPROGRESS, 0L);
	curl_easy_setopt(h->curl, CURLOPT_XFERINFOFUNCTION, on_progress);
	return h;
}

/* ----------------------------------------------------------- requests */

/*
 * One request: 0 with *status and b filled; 1 when it failed in a way
 * worth retrying (h->failure says how); -1 with err.  post NULL is a GET.
 */
static int
exchange(struct http *h, const char *url, const char *post, size_t max,
    struct body *b, long *status, struct sr_error *err)
{
	int64_t left = (h->deadline - sr_clock_ns()) / 1000000;
	long oserr;
	CURLcode rc;

	memset(b, 0, sizeof(*b));
	b->max = max;
	h->errbuf[0] = '\0';
	if (left < FIRST_TRY_MS && !h->tried)
		left = FIRST_TRY_MS;
	if (left < 1)
		left = 1;
	h->tried = true;
	curl_easy_setopt(h->curl, CURLOPT_URL, url);
	curl_easy_setopt(h->curl, CURLOPT_WRITEDATA, b);
	curl_easy_setopt(h->curl, CURLOPT_CONNECTTIMEOUT_MS,
	    (long)(left < CONNECT_TIMEOUT_MS ? left : CONNECT_TIMEOUT_MS));
	curl_easy_setopt(h->curl, CURLOPT_TIMEOUT_MS, (long)left);
	if (post != NULL) {
		curl_easy_setopt(h->curl, CURLOPT_POSTFIELDS, post);
		curl_easy_setopt(h->curl, CURLOPT_POSTFIELDSIZE,
		    (long)strlen(post));
	} else {
		curl_easy_setopt(h->curl, CURLOPT_HTTPGET, 1L);
	}
	rc = curl_easy_perform(h->curl);
	if (rc == CURLE_OK) {
		curl_easy_getinfo(h->curl, CURLINFO_RESPONSE_CODE, status);
		if (b->data == NULL && (b->data = calloc(1, 1)) == NULL)
			return sr_error_set(err, SR_ENOMEM, SR_PHASE_RENDEZVOUS,
			    "out of memory");
		return 0;
	}
	free(b->data);
	b->data = NULL;
	switch (rc) {
	case CURLE_ABORTED_BY_CALLBACK:
		return sr_error_set(err, SR_EINTERRUPTED, SR_PHASE_RENDEZVOUS,
		    "interrupted while talking to %s", h->shown);
	case CURLE_OUT_OF_MEMORY:
		return sr_error_set(err, SR_ENOMEM, SR_PHASE_RENDEZVOUS,
		    "out of memory");
	case CURLE_WRITE_ERROR:
		if (!b->too_big)
			return sr_error_set(err, SR_ENOMEM, SR_PHASE_RENDEZVOUS,
			    "out of memory");
		return sr_error_set(err, SR_ECONFIG, SR_PHASE_RENDEZVOUS, "%s "
		    "answered with more than %zu KiB; is it a silvic-ring "
		    "server or an address list?", h->shown, max >> 10);
	case CURLE_UNSUPPORTED_PROTOCOL:
	case CURLE_URL_MALFORMAT:
	case CURLE_NOT_BUILT_IN:
	case CURLE_SSL_CERTPROBLEM:
	case CURLE_SSL_CIPHER:
	case CURLE_SSL_CACERT_BADFILE:
	case CURLE_PEER_FAILED_VERIFICATION:
		return sr_error_set(err, SR_ECONFIG, SR_PHASE_CONFIG, "%s: %s",
		    h->shown, h->errbuf[0] ? h->errbuf :
		    curl_easy_strerror(rc));
	default:
		/* curl 7.88 words a refused connection "Couldn't connect to
		 * server"; the errno says which. */
		if (curl_easy_getinfo(h->curl, CURLINFO_OS_ERRNO, &oserr) !=
		    CURLE_OK)
			oserr = 0;
		snprintf(h->failure, sizeof(h->failure), "%s%s%s%s",
		    h->errbuf[0] ? h->errbuf : curl_easy_strerror(rc),
		    oserr ? " (" : "", oserr ? strerror((int)oserr) : "",
		    oserr ? ")" : "");
		return 1;
	}
}

/* A 4xx (or any unexpected) answer: fails at once. */
static int
refused(struct http *h, const char *what, long status, const struct body *b,
    struct sr_error *err)
{
	char text[SNIPPET_MAX + 8];

	snippet(b->data, b->len, text, sizeof(text));
	if (status == 401 || status == 403)
		return sr_error_set(err, SR_EAUTH, SR_PHASE_RENDEZVOUS,
		    "%s %s: %ld: %s%s", what, h->shown, status, text,
		    discover_http_token_file() == NULL ? " (pass the server's "
		    "--token-file as --key-file, or set "
		    "SILVIC_RING_HTTP_TOKEN_FILE to it)" : "");
	/* A conflict (world size, a rank held, a complete job) is the
	 * rendezvous failing, not this rank's command line. */
	if (status == 409)
		return sr_error_set(err, SR_EIO, SR_PHASE_RENDEZVOUS,
		    "%s %s: %ld: %s", what, h->shown, status, text[0] ? text :
		    "(no text)");
	return sr_error_set(err, SR_ECONFIG, SR_PHASE_RENDEZVOUS,
	    "%s %s: %ld: %s", what, h->shown, status, text[0] ? text :
	    "(no text)");
}

/* Notes a 5xx answer for the retry loop. */
static void
unavailable(struct http *h, long status, const struct body *b)
{
	char text[SNIPPET_MAX + 8];

	snippet(b->data, b->len, text, sizeof(text));
	snprintf(h->failure, sizeof(h->failure), "the server answered %ld: %s",
	    status, text[0] ? text : "(no text)");
}

/* Waits before the next attempt; -1 with err when interrupted. */
static int
backoff(struct http *h, int *delay_ms, struct sr_error *err)
{
	if (cli_nap(*delay_ms, h->deadline) != 0)
		return sr_error_set(err, SR_EINTERRUPTED, SR_PHASE_RENDEZVOUS,
		    "interrupted while waiting for %s", h->shown);
	*delay_ms = *delay_ms * 2 > BACKOFF_MAX_MS ? BACKOFF_MAX_MS :
	    *delay_ms * 2;
	return 0;
}

static int
timed_out(struct rendezvous *r, struct http *h, const char *what,
    struct sr_error *err)
{
	char when[64];

	if (h->once)
		snprintf(when, sizeof(when), "a dry run looks once");
	else
		snprintf(when, sizeof(when), "timed out after %gs", r->timeout);
	if (h->said[0] != '\0' && h->failure[0] != '\0')
		return sr_error_set(err, SR_ETIMEOUT, SR_PHASE_RENDEZVOUS, "%s "
		    "%s: %s; the server said: %s; the last attempt failed: %s",
		    what, h->shown, when, h->said, h->failure);
	if (h->said[0] != '\0')
		return sr_error_set(err, SR_ETIMEOUT, SR_PHASE_RENDEZVOUS, "%s "
		    "%s: %s; the server said: %s", what, h->shown, when,
		    h->said);
	if (h->failure[0] != '\0')
		return sr_error_set(err, SR_ETIMEOUT, SR_PHASE_RENDEZVOUS, "%s "
		    "%s: %s; the last attempt failed: %s", what, h->shown, when,
		    h->failure);
	return sr_error_set(err, SR_ETIMEOUT, SR_PHASE_RENDEZVOUS,
	    "%s %s: %s with no answer", what, h->shown, when);
}

/* ------------------------------------------------------------ publish */

static int
http_preload(struct rendezvous *r, int64_t world, struct peer_list *list,
    struct sr_error *err)
{
	return state(r, err) != NULL ? 0 : -1;
}

/* Reads "rank=R\nworld=N\n". */
static int
assigned(struct http *h, const struct body *b, int64_t *rank, int64_t world,
    struct sr_error *err)
{
	long long r = -1, w = -1;
	char text[SNIPPET_MAX + 8];
	const char *p;

	if ((p = strstr(b->data, "rank=")) != NULL)
		r = strtoll(p + 5, NULL, 10);
	if ((p = strstr(b->data, "world=")) != NULL)
		w = strtoll(p + 6, NULL, 10);
	if (r < 0 || w < 1 || r >= w) {
		snippet(b->data, b->len, text, sizeof(text));
		return sr_error_set(err, SR_ECONFIG, SR_PHASE_RENDEZVOUS,
		    "POST %s: 200 without rank=R and world=N: %s", h->shown,
		    text[0] ? text : "(no text)");
	}
	if ((*rank >= 0 && r != *rank) || (world >= 0 && w != world))
		return sr_error_set(err, SR_ECONFIG, SR_PHASE_RENDEZVOUS,
		    "POST %s: the server assigned rank %lld of %lld, not rank "
		    "%lld of %lld", h->shown, r, w, (long long)*rank,
		    (long long)world);
	*rank = r;
	h->world = w;
	cli_status("registered with %s as rank %lld of %lld", h->shown, r, w);
	return 0;
}

static int
http_publish(struct rendezvous *r, const char *address, int64_t *rank,
    int64_t world, struct sr_error *err)
{
	struct http *h = state(r, err);
	char post[SR_ADDR_MAX + 64];
	int delay = BACKOFF_FIRST_MS, rc;
	struct body b;
	long status;
	size_t n;

	if (h == NULL)
		return -1;
	n = (size_t)snprintf(post, sizeof(post), "address=%s\n", address);
	if (world >= 0)
		n += (size_t)snprintf(post + n, sizeof(post) - n,
		    "world=%lld\n", (long long)world);
	if (*rank >= 0)
		snprintf(post + n, sizeof(post) - n, "rank=%lld\n",
		    (long long)*rank);
	/* A dry run must not take a rank that a real rank will want. */
	if (h->once) {
		cli_status("dry run: not registering %s with %s", address,
		    h->shown);
		return 0;
	}
	h->tried = false;
	for (;;) {
		rc = exchange(h, r->source, post, REGISTER_MAX, &b, &status,
		    err);
		if (rc < 0 && err->code == SR_EINTERRUPTED) {
			/* The server may have taken the registration before
			 * the signal cut its answer short: take it back at
			 * close all the same (a 404 then says it never was). */
			h->registered = true;
			snprintf(h->address, sizeof(h->address), "%s",
			    address);
		}
		if (rc < 0)
			return -1;
		if (rc == 0 && status == 200) {
			rc = assigned(h, &b, rank, world, err);
			if (rc == 0) {
				h->registered = true;
				h->rank = *rank;
				snprintf(h->address, sizeof(h->address), "%s",
				    address);
			}
		} else if (rc == 0 && (status == 404 || status == 405 ||
		    status == 501)) {
			/* A static file server: the URL is a list. */
			h->is_static = true;
			cli_status("%s answered POST with %ld: reading it as a "
			    "static address list", h->shown, status);
			rc = 0;
		} else if (rc == 0 && (status >= 500 || status == 429)) {
			unavailable(h, status, &b);
			rc = 1;
		} else if (rc == 0) {
			rc = refused(h, "POST", status, &b, err);
		}
		free(b.data);
		if (rc <= 0)
			return rc;
		if (sr_clock_ns() >= h->deadline)
			return timed_out(r, h, "registering with", err);
		cli_debug("registering with %s: %s; retrying", h->shown,
		    h->failure);
		if (backoff(h, &delay, err) != 0)
			return -1;
	}
}

/* --------------------------------------------------------------- wait */

/* A 200 answer: 0 with the list, 1 when a static file is not complete
 * yet, -1 with err. */
static int
got_list(struct http *h, const struct body *b, int64_t world,
    struct peer_list *list, struct sr_error *err)
{
	char why[SR_MESSAGE_MAX - 64];

	if (list_parse(b->data, b->len, h->shown, list, why,
		sizeof(why)) != 0)
		return sr_error_set(err, SR_ECONFIG, SR_PHASE_RENDEZVOUS, "%s",
		    why);
	if (world < 0)
		world = h->world;
	if (list->n > 0 && (world < 0 || list->n == (uint64_t)world))
		return 0;
	if (world >= 0 && list->n > (uint64_t)world) {
		sr_error_set(err, SR_ECONFIG, SR_PHASE_RENDEZVOUS, "%s lists "
		    "%llu addresses but the world size is %lld", h->shown,
		    (unsigned long long)list->n, (long long)world);
		peer_list_free(list);
		return -1;
	}
	if (!h->is_static) {
		sr_error_set(err, SR_ECONFIG, SR_PHASE_RENDEZVOUS, "%s "
		    "answered 200 with %llu addresses for a world of %lld",
		    h->shown, (unsigned long long)list->n, (long long)world);
		peer_list_free(list);
		return -1;
	}
	if (world >= 0)
		snprintf(h->said, sizeof(h->said), "the list has %llu of %lld "
		    "addresses", (unsigned long long)list->n, (long long)world);
	else
		snprintf(h->said, sizeof(h->said), "the list is empty");
	peer_list_free(list);
	return 1;
}

/* The GET: URL?wait=S&address=HOST:PORT (each part when it applies). */
static void
poll_url(struct rendezvous *r, struct http *h, long wait, char *url,
    size_t size)
{
	char sep = strchr(r->source, '?') != NULL ? '&' : '?';
	char *escaped = NULL;
	size_t n;

	n = (size_t)snprintf(url, size, "%s", r->source);
	if (wait > 0 && n < size) {
		n += (size_t)snprintf(url + n, size - n, "%cwait=%ld", sep,
		    wait);
		sep = '&';
	}
	if (h->registered && !h->is_static && n < size &&
	    (escaped = curl_easy_escape(h->curl, h->address, 0)) != NULL)
		snprintf(url + n, size - n, "%caddress=%s", sep, escaped);
	curl_free(escaped);
}

/*
 * A 410 to a poll: the server let this rank's registration lapse (it
 * did not hear from it for a while).  Registers again, asking for the
 * same rank: 2 to poll again at once, or -1 with err.
 */
static int
register_again(struct rendezvous *r, struct http *h, const struct body *gone,
    struct sr_error *err)
{
	char text[SNIPPET_MAX + 8], address[SR_ADDR_MAX];
	int64_t rank = h->rank;
	bool tried = h->tried;
	int rc;

	snippet(gone->data, gone->len, text, sizeof(text));
	cli_status("%s: %s; registering %s again as rank %lld", h->shown,
	    text, h->address, (long long)rank);
	snprintf(address, sizeof(address), "%s", h->address);
	h->registered = false;
	rc = http_publish(r, address, &rank, h->world, err);
	h->tried = tried;
	return rc < 0 ? -1 : 2;
}

static int
http_wait(struct rendezvous *r, int64_t world, int64_t deadline,
    struct peer_list *list, struct sr_error *err)
{
	struct http *h = state(r, err);
	int delay = BACKOFF_FIRST_MS, rc;
	char url[8192];
	int64_t left, progress_at = 0;
	long status, wait;
	struct body b;

	if (h == NULL)
		return -1;
	/* Room for "?wait=S" and "&address=" with an escaped address. */
	if (strlen(r->source) + POLL_EXTRA > sizeof(url)) {
		return sr_error_set(err, SR_ECONFIG, SR_PHASE_CONFIG, "the URL "
		    "%.60s... is longer than %zu bytes", h->shown,
		    sizeof(url) - POLL_EXTRA);
	}
	if (deadline < h->deadline)
		h->deadline = deadline;
	cli_status("waiting for the address list at %s", h->shown);
	h->tried = false;
	for (;;) {
		left = (h->deadline - sr_clock_ns()) / 1000000;
		if (left <= 0 && h->tried)
			return timed_out(r, h, "waiting for", err);
		/* Ask the server to answer a second before our deadline,
		 * so its last word reaches the message. */
		wait = h->is_static || left < 2000 ? 0 : (left - 1000) / 1000;
		if (wait > LONG_POLL_S)
			wait = LONG_POLL_S;
		/* Back in time for the next progress line. */
		if (cli_progress_ms > 0 && wait > cli_progress_ms / 1000)
			wait = cli_progress_ms / 1000;
		poll_url(r, h, wait, url, sizeof(url));
		rc = exchange(h, url, NULL, LIST_MAX, &b, &status, err);
		if (rc < 0)
			return -1;
		if (rc == 0 && status == 200) {
			rc = got_list(h, &b, world, list, err);
		} else if (rc == 0 && status == 202 && !h->is_static) {
			snippet(b.data, b.len, h->said, sizeof(h->said));
			h->failure[0] = '\0';
			delay = BACKOFF_FIRST_MS;
			rc = wait > 0 ? 2 : 1;
		} else if (rc == 0 && status == 410 && h->registered &&
		    !h->is_static) {
			rc = register_again(r, h, &b, err);
		} else if (rc == 0 && (status >= 500 || status == 429 ||
		    (status == 404 && h->is_static))) {
			/* A static list may not be there yet, as with a
			 * file that does not exist yet. */
			unavailable(h, status, &b);
			rc = 1;
		} else if (rc == 0) {
			rc = refused(h, "GET", status, &b, err);
		}
		free(b.data);
		if (rc <= 0)
			return rc;
		if (cli_progress_due(&progress_at)) {
			left = (h->deadline - sr_clock_ns()) / 1000000;
			left = left < 0 ? 0 : left >= 10000 ? left / 1000 * 1000 :
			    left / 100 * 100;
			cli_progress("waiting for the address list at %s: %s; "
			    "%gs left", h->shown, h->said[0] ? h->said :
			    h->failure[0] ? h->failure : "no answer yet",
			    (double)left / 1000);
		}
		if (rc == 2)
			continue;
		if (backoff(h, &delay, err) != 0)
			return -1;
	}
}

/*
 * DELETEs this rank's registration (best effort, within WITHDRAW_MS) and
 * says how it went: a complete job keeps it, as its list went out.
 */
static void
withdraw(struct rendezvous *r, struct http *h)
{
	char body_text[SR_ADDR_MAX + 16], text[SNIPPET_MAX + 8];
	struct body b;
	long status = 0;
	CURLcode rc;

	memset(&b, 0, sizeof(b));
	b.max = REGISTER_MAX;
	h->errbuf[0] = '\0';
	snprintf(body_text, sizeof(body_text), "address=%s\n", h->address);
	curl_easy_setopt(h->curl, CURLOPT_URL, r->source);
	curl_easy_setopt(h->curl, CURLOPT_CUSTOMREQUEST, "DELETE");
	curl_easy_setopt(h->curl, CURLOPT_POSTFIELDS, body_text);
	curl_easy_setopt(h->curl, CURLOPT_POSTFIELDSIZE,
	    (long)strlen(body_text));
	curl_easy_setopt(h->curl, CURLOPT_WRITEDATA, &b);
	curl_easy_setopt(h->curl, CURLOPT_CONNECTTIMEOUT_MS, (long)WITHDRAW_MS);
	curl_easy_setopt(h->curl, CURLOPT_TIMEOUT_MS, (long)WITHDRAW_MS);
	/* Not cut short by the SIGINT that may be why this rank stops. */
	curl_easy_setopt(h->curl, CURLOPT_NOPROGRESS, 1L);
	rc = curl_easy_perform(h->curl);
	if (rc == CURLE_OK)
		curl_easy_getinfo(h->curl, CURLINFO_RESPONSE_CODE, &status);
	snippet(b.data != NULL ? b.data : "", b.len, text, sizeof(text));
	free(b.data);
	if (rc != CURLE_OK)
		cli_warn("could not take the registration of %s back from %s: "
		    "%s; a rerun of the job may get this dead address until "
		    "the job expires", h->address, h->shown,
		    h->errbuf[0] ? h->errbuf : curl_easy_strerror(rc));
	else if (status == 200)
		cli_status("took the registration of %s back from %s: %ld: %s",
		    h->address, h->shown, status, text);
	else if (status == 404)
		cli_status("the registration of %s at %s is gone already: %s",
		    h->address, h->shown, text);
	else if (status == 409)
		cli_status("the registration of %s at %s stays: %s", h->address,
		    h->shown, text);
	else
		cli_warn("could not take the registration of %s back from %s: "
		    "%ld: %s", h->address, h->shown, status,
		    text[0] ? text : "(no text)");
}

static int
http_done(struct rendezvous *r, struct sr_ring *ring, struct sr_error *err)
{
	struct http *h = r->state;

	if (h != NULL)
		h->done = true;
	return 0;
}

static void
http_close(struct rendezvous *r)
{
	struct http *h = r->state;

	if (h == NULL)
		return;
	if (h->registered && !h->done)
		withdraw(r, h);
	curl_easy_cleanup(h->curl);
	curl_slist_free_all(h->headers);
	free(h);
	r->state = NULL;
}

#endif

const struct rendezvous_backend rendezvous_http = {
	.name = "http",
	.waits_for_ranks = true,
	.preload = http_preload,
	.publish = http_publish,
	.wait = http_wait,
	.done = http_done,
	.close = http_close
};
