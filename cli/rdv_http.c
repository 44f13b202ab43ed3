/*
 * rdv_http.c - the HTTP rendezvous backend (libcurl); without libcurl at
 * build time every call says which package to install.
 */
#include <stdio.h>

#include "cli.h"
#include "rendezvous.h"

static int
missing(struct sr_error *err)
{
	err->code = SR_ECONFIG;
	err->phase = SR_PHASE_CONFIG;
	snprintf(err->message, sizeof(err->message),
	    "HTTP rendezvous is not built in: install libcurl4-openssl-dev and "
	    "libmicrohttpd-dev, then rebuild");
	return -1;
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

static void
http_nothing(struct rendezvous *r)
{
}

const struct rendezvous_backend rendezvous_http = { "http", http_preload,
	http_publish, http_wait, http_nothing, http_nothing };
