/*
 * serve.h - what `silvic-ring serve`'s options (serve.c: parsing,
 * validation, the --token-file secret) hand its HTTP server
 * (serve_http.c).
 */
#ifndef SR_SERVE_H
#define SR_SERVE_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

struct serve_options {
	const char *listen;
	char host[256], port[8];	/* --listen split */
	const char *token_file;
	uint64_t max_jobs, max_ranks, max_connections;
	uint64_t max_client_connections, max_client_jobs, request_timeout;
	double ttl, lease;
	bool print_token;
	/* What --token-file lets in: "Bearer SECRET" (the file's text), or
	 * NULL; and "Bearer TOKEN" derived from the file as a ring key (the
	 * file less one trailing newline, less all of them), or empty. */
	char *bearer;
	size_t bearer_len;
	char derived[2][7 + 65];
};

/*
 * Whether a request's Authorization header (given; NULL: none) lets it
 * in: any does without --token-file; else it must carry the secret, or
 * the token derived from it (what a rank with the same file as
 * --key-file sends), in time that does not depend on how much of it is
 * right.
 */
bool serve_authorized(const struct serve_options *o, const char *given);
/*
 * Serves o->listen until SIGINT or SIGTERM (exit status 130), printing
 * the URL first on stdout; any other exit status after a message.
 */
int serve_run(const struct serve_options *o);

#endif
