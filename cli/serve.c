/*
 * serve.c - `silvic-ring serve`, the HTTP rendezvous server: its options
 * (parsing, --help, validation), the --token-file secret, and the
 * command's entry.  The server itself, the protocol and the requests, is
 * serve_http.c.
 */
#include <errno.h>
#include <getopt.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>

#include "cli.h"
#include "serve.h"
#include "usage.h"

enum {
	OPT_LISTEN = OPT_COMMAND_BASE,
	OPT_TOKEN_FILE,
	OPT_MAX_JOBS,
	OPT_MAX_RANKS,
	OPT_JOB_TTL,
	OPT_MAX_CONNECTIONS,
	OPT_MAX_CLIENT_CONNECTIONS,
	OPT_MAX_CLIENT_JOBS,
	OPT_LEASE,
	OPT_REQUEST_TIMEOUT,
	OPT_PRINT_TOKEN
};

const char usage_serve[] =
"usage: silvic-ring serve [--listen HOST:PORT] [--token-file FILE] [OPTIONS]\n"
"\n"
"An HTTP rendezvous server: ranks started with --peers\n"
"http://HOST:PORT/jobs/NAME post their address and receive the job's\n"
"complete address list; a rank that fails before the ring forms takes its\n"
"registration back (DELETE /jobs/NAME with address=HOST:PORT).  The first\n"
"line on stdout is the URL served.\n"
"SIGINT or SIGTERM stop it (exit status 130).\n"
"\n"
"      --listen HOST:PORT   listen there (default 127.0.0.1:0, a free port;\n"
"                           IPv6 as [::1]:0)\n"
"      --token-file FILE    require \"Authorization: Bearer SECRET\", SECRET\n"
"                           being FILE's text or the token ranks derive\n"
"                           from FILE as their --key-file (ranks may also\n"
"                           name FILE in $SILVIC_RING_HTTP_TOKEN_FILE)\n"
"      --max-jobs N         jobs held at once (default 1024)\n"
"      --max-ranks N        the largest world of a job (default 65536)\n"
"      --job-ttl SECONDS    drop a job this long after its last\n"
"                           registration (default 3600)\n"
"      --max-connections N  open connections at once (default 4096)\n"
"      --max-client-connections N\n"
"                           open connections from one IP address (default\n"
"                           256); more are closed at once\n"
"      --max-client-jobs N  jobs one IP address may have created that are\n"
"                           not finished (default 64); more get 429\n"
"      --lease SECONDS      a registration lapses this long after its rank\n"
"                           stopped polling (default 6)\n"
"      --request-timeout SECONDS\n"
"                           close a connection that takes longer to send a\n"
"                           request, or stays idle longer (default 10)\n"
"      --print-token        print the bearer token ranks derive from the\n"
"                           --token-file key (for curl), then exit\n"
"  -v, --verbose            status lines on stderr (-vv: each registration)\n"
"  -h, --help               this text\n";

/* Bearer secrets are short; a bigger file is not one. */
#define SECRET_MAX 4096

/* HOST:PORT or [V6]:PORT into o->host and o->port. */
static int
split_listen(struct serve_options *o)
{
	const char *spec = o->listen;
	uint16_t port;

	switch (sr_address_split(spec, o->host, sizeof(o->host), &port, NULL,
	    0)) {
	case SR_ADDRESS_OK:
		snprintf(o->port, sizeof(o->port), "%u", (unsigned)port);
		return 0;
	case SR_ADDRESS_PORT:
		return cli_usage_error("serve: --listen '%s': '%s' is not a "
		    "port (0-65535)", spec, strrchr(spec, ':') + 1);
	default:
		return cli_usage_error("serve: --listen '%s' is not HOST:PORT",
		    spec);
	}
}

/* A whole number from 1 to max into *out; a usage error naming the
 * option (name) and saying what it counts (what) otherwise. */
static int
count(const char *name, const char *arg, uint64_t max, const char *what,
    uint64_t *out)
{
	if (cli_parse_uint(arg, 1, max, out) == 0)
		return 0;
	return cli_usage_error("serve: %s '%s' is not %s from 1 to %llu", name,
	    arg, what, (unsigned long long)max);
}

static int
parse_options(int argc, char **argv, struct serve_options *o)
{
	static const struct option longopts[] = {
		{ "listen", required_argument, NULL, OPT_LISTEN },
		{ "token-file", required_argument, NULL, OPT_TOKEN_FILE },
		{ "max-jobs", required_argument, NULL, OPT_MAX_JOBS },
		{ "max-ranks", required_argument, NULL, OPT_MAX_RANKS },
		{ "job-ttl", required_argument, NULL, OPT_JOB_TTL },
		{ "max-connections", required_argument, NULL,
		    OPT_MAX_CONNECTIONS },
		{ "max-client-connections", required_argument, NULL,
		    OPT_MAX_CLIENT_CONNECTIONS },
		{ "max-client-jobs", required_argument, NULL,
		    OPT_MAX_CLIENT_JOBS },
		{ "lease", required_argument, NULL, OPT_LEASE },
		{ "request-timeout", required_argument, NULL,
		    OPT_REQUEST_TIMEOUT },
		{ "print-token", no_argument, NULL, OPT_PRINT_TOKEN },
		{ "verbose", no_argument, NULL, 'v' },
		{ "help", no_argument, NULL, 'h' },
		{ NULL, 0, NULL, 0 }
	};
	int c, rc = 0;

	memset(o, 0, sizeof(*o));
	o->listen = "127.0.0.1:0";
	o->max_jobs = 1024;
	o->max_ranks = 65536;
	o->max_connections = 4096;
	o->max_client_connections = 256;
	o->max_client_jobs = 64;
	o->request_timeout = 10;
	o->lease = 6;
	o->ttl = 3600;
	opterr = 0;
	optind = 1;
	while ((c = getopt_long(argc, argv, ":hv", longopts, NULL)) != -1) {
		switch (c) {
		case 'h':
			fputs(usage_serve, stdout);
			return -1;
		case 'v':
			cli_verbosity++;
			break;
		case OPT_LISTEN:
			o->listen = optarg;
			break;
		case OPT_TOKEN_FILE:
			o->token_file = optarg;
			break;
		case OPT_MAX_JOBS:
			rc = count("--max-jobs", optarg, 1000000, "a number",
			    &o->max_jobs);
			break;
		case OPT_MAX_RANKS:
			rc = count("--max-ranks", optarg, 65536, "a number",
			    &o->max_ranks);
			break;
		case OPT_MAX_CONNECTIONS:
			rc = count("--max-connections", optarg, 1000000,
			    "a number", &o->max_connections);
			break;
		case OPT_MAX_CLIENT_CONNECTIONS:
			rc = count("--max-client-connections", optarg, 1000000,
			    "a number", &o->max_client_connections);
			break;
		case OPT_MAX_CLIENT_JOBS:
			rc = count("--max-client-jobs", optarg, 1000000,
			    "a number", &o->max_client_jobs);
			break;
		case OPT_REQUEST_TIMEOUT:
			rc = count("--request-timeout", optarg, 3600,
			    "a whole number of seconds", &o->request_timeout);
			break;
		case OPT_JOB_TTL:
			if (cli_parse_seconds(optarg, &o->ttl) != 0)
				return cli_usage_error("serve: --job-ttl '%s' "
				    "is not a positive number of seconds",
				    optarg);
			break;
		case OPT_LEASE:
			if (cli_parse_seconds(optarg, &o->lease) != 0 ||
			    o->lease <= 0 || o->lease > 86400)
				return cli_usage_error("serve: --lease '%s' is "
				    "not a positive number of seconds up to 86400",
				    optarg);
			break;
		case OPT_PRINT_TOKEN:
			o->print_token = true;
			break;
		case ':':
			return cli_usage_error("serve: %s needs a value",
			    argv[optind - 1]);
		default:
			return cli_usage_error("serve: unknown option '%s'",
			    argv[optind - 1]);
		}
		if (rc != 0)
			return rc;
	}
	if (optind < argc)
		return cli_usage_error("serve: unexpected argument '%s'",
		    argv[optind]);
	if (o->print_token && o->token_file == NULL)
		return cli_usage_error("serve: --print-token needs --token-file "
		    "(the ranks' --key-file)");
	return split_listen(o);
}

#ifndef SR_HAVE_HTTP

int
cmd_serve(int argc, char **argv)
{
	struct serve_options o;
	int rc = parse_options(argc, argv, &o);

	if (rc != 0)
		return rc < 0 ? EXIT_OK : rc;
	cli_error("serve: HTTP rendezvous is not built in: install "
	    "libcurl4-openssl-dev and libmicrohttpd-dev, then rebuild");
	return EXIT_USAGE;
}

#else

/*
 * Reads --token-file into o->bearer and o->derived: the file's text
 * without trailing whitespace, and the tokens ranks derive from it as a
 * key.
 */
static int
read_secret(struct serve_options *o, const char *path)
{
	char buf[SECRET_MAX + 1], why[300];
	int fd = cli_open_regular(path, false, NULL, why, sizeof(why));
	FILE *f = fd >= 0 ? fdopen(fd, "r") : NULL;
	struct stat st;
	size_t n;

	if (fd < 0)	/* a FIFO would block here forever */
		return cli_usage_error("serve: --token-file '%s': %s", path, why);
	if (f == NULL || fstat(fileno(f), &st) != 0 ||
	    ((n = fread(buf, 1, sizeof(buf), f)) == 0 && ferror(f))) {
		int e = errno;

		if (f != NULL)
			fclose(f);
		return cli_usage_error("serve: --token-file '%s': %s", path,
		    strerror(e));
	}
	fclose(f);
	if (st.st_mode & (S_IRWXG | S_IRWXO))
		cli_warn("--token-file '%s' is readable by group or others; "
		    "chmod 600 it", path);
	if (n > SECRET_MAX)
		return cli_usage_error("serve: --token-file '%s' is larger "
		    "than %d bytes", path, SECRET_MAX);
	/* The file may be the ranks' --key-file (binary): they send a token
	 * derived from it, the key as cli_key_length reads it (or, in older
	 * ranks, the file less all trailing CR and LF). */
	{
		size_t k = n;
		char token[65];

		k = cli_key_length((const uint8_t *)buf, n);	/* as ranks do */
		if (k >= SR_KEY_MIN && sr_key_token((const uint8_t *)buf, k,
		    token) == 0)
			snprintf(o->derived[0], sizeof(o->derived[0]),
			    "Bearer %s", token);
		k = n;
		while (k > 0 && (buf[k - 1] == '\n' || buf[k - 1] == '\r'))
			k--;
		if (k >= SR_KEY_MIN && sr_key_token((const uint8_t *)buf, k,
		    token) == 0)
			snprintf(o->derived[1], sizeof(o->derived[1]),
			    "Bearer %s", token);
		explicit_bzero(token, sizeof(token));
	}
	while (n > 0 && strchr(" \t\r\n", buf[n - 1]) != NULL)
		n--;
	if (n == 0 && o->derived[0][0] == '\0')
		return cli_usage_error("serve: --token-file '%s' is empty",
		    path);
	for (size_t i = 0; i < n; i++)
		if ((unsigned char)buf[i] < 0x20 || buf[i] == 0x7f) {
			if (o->derived[0][0] != '\0') {
				/* A binary key: only its token will do. */
				explicit_bzero(buf, sizeof(buf));
				return 0;
			}
			return cli_usage_error("serve: --token-file '%s': the "
			    "secret holds a control character", path);
		}
	if ((o->bearer = malloc(n + 8)) == NULL)
		return EXIT_INTERNAL;
	memcpy(o->bearer, "Bearer ", 7);
	memcpy(o->bearer + 7, buf, n);
	o->bearer[n + 7] = '\0';
	o->bearer_len = n + 7;
	explicit_bzero(buf, sizeof(buf));
	return 0;
}

/*
 * --print-token: the bearer token ranks derive from the key file, as
 * curl sends it after "Authorization: Bearer ".  Never the key: a file
 * too short to be a key is refused.
 */
static int
print_token(const struct serve_options *o, const char *path)
{
	if (o->derived[0][0] == '\0') {
		cli_error("serve: --token-file '%s' is not a key (a key holds "
		    "at least %d bytes): its text is the bearer secret "
		    "itself, and --print-token does not print secrets", path,
		    SR_KEY_MIN);
		return EXIT_USAGE;
	}
	if (printf("%s\n", o->derived[0] + 7) < 0 || fflush(stdout) != 0) {
		cli_error("serve: writing the token: %s", strerror(errno));
		return EXIT_INTERNAL;
	}
	return EXIT_OK;
}

/* Whether given is want, in time that depends only on want's length. */
static bool
same_secret(const char *given, const char *want, size_t want_len)
{
	size_t n = strlen(given);
	unsigned char diff = n != want_len;

	for (size_t i = 0; i < want_len; i++)
		diff |= (unsigned char)(i < n ? given[i] : 0) ^
		    (unsigned char)want[i];
	return diff == 0;
}

bool
serve_authorized(const struct serve_options *o, const char *given)
{
	bool text, derived = false;

	if (o->bearer == NULL && o->derived[0][0] == '\0')
		return true;
	if (given == NULL)
		return false;
	text = o->bearer != NULL && same_secret(given, o->bearer,
	    o->bearer_len);
	for (int i = 0; i < 2; i++)
		derived |= o->derived[i][0] != '\0' && same_secret(given,
		    o->derived[i], strlen(o->derived[i]));
	return text || derived;
}

/* Wipes and frees the secret. */
static void
forget_secret(struct serve_options *o)
{
	explicit_bzero(o->derived, sizeof(o->derived));
	if (o->bearer != NULL)
		explicit_bzero(o->bearer, o->bearer_len);
	free(o->bearer);
	o->bearer = NULL;
}

int
cmd_serve(int argc, char **argv)
{
	struct serve_options o;
	int rc;

	if ((rc = parse_options(argc, argv, &o)) != 0)
		return rc < 0 ? EXIT_OK : rc;
	if (o.token_file != NULL)
		rc = read_secret(&o, o.token_file);
	if (rc == 0)
		rc = o.print_token ? print_token(&o, o.token_file) :
		    serve_run(&o);
	forget_secret(&o);
	return rc;
}

#endif
