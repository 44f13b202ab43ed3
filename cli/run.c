/*
 * run.c - `silvic-ring run`: read and check the whole collectives script,
 * form the ring, run the script, report.
 */
#include <errno.h>
#include <fcntl.h>
#include <getopt.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "cli.h"
#include "script.h"
#include "usage.h"

/* A script is text a person wrote; more than this is a mistake. */
#define SCRIPT_MAX (64u << 20)

enum { OPT_SCRIPT = OPT_COMMAND_BASE, OPT_HELP };

const char usage_run[] =
"usage: silvic-ring [run] [OPTIONS] [--script FILE]\n"
"\n"
"Forms the ring, then runs the collectives script read from stdin (or\n"
"FILE) on it: one result line per statement on stdout.  Every rank reads\n"
"and checks the whole script before any network activity.\n"
"\n"
"      --script FILE        read the script from FILE instead of stdin\n"
"  -h, --help               this text\n"
"\n";

/* Reads all of fd; NULL with why on failure. */
static char *
slurp(int fd, const char *name, size_t *len, char *why, size_t why_size)
{
	size_t cap = 1 << 16, n = 0;
	char *buf = malloc(cap), *grown;
	ssize_t got;

	if (buf == NULL) {
		snprintf(why, why_size, "out of memory reading %s", name);
		return NULL;
	}
	for (;;) {
		if (n == cap) {
			if (cap >= SCRIPT_MAX) {
				snprintf(why, why_size, "the script %s is larger "
				    "than 64 MiB", name);
				free(buf);
				return NULL;
			}
			cap *= 2;
			if ((grown = realloc(buf, cap)) == NULL) {
				snprintf(why, why_size, "out of memory reading "
				    "%s", name);
				free(buf);
				return NULL;
			}
			buf = grown;
		}
		got = read(fd, buf + n, cap - n);
		if (got < 0 && errno == EINTR && !cli_interrupted)
			continue;
		if (got < 0 && cli_interrupted) {
			snprintf(why, why_size, "interrupted while reading the "
			    "script %s", name);
			free(buf);
			return NULL;
		}
		if (got < 0) {
			snprintf(why, why_size, "reading the script %s: %s", name,
			    strerror(errno));
			free(buf);
			return NULL;
		}
		if (got == 0)
			break;
		n += (size_t)got;
	}
	*len = n;
	return buf;
}

/* A script that cannot be used: one line on stderr, a record with --json. */
static int
script_error(const char *why, bool json)
{
	struct sr_error err;

	sr_error_clear(&err);
	sr_error_set(&err, cli_interrupted ? SR_EINTERRUPTED : SR_ECONFIG,
	    SR_PHASE_CONFIG, "%s", why);
	return cli_report(&err, json);
}

static int
load_script(const char *path, bool json, struct script **out)
{
	char why[1024], *text;
	const char *name = path != NULL ? path : "<stdin>";
	size_t len;
	int fd = 0, rc;

	if (path != NULL && (fd = open(path, O_RDONLY | O_CLOEXEC)) < 0) {
		snprintf(why, sizeof(why), "--script '%s': %s", path,
		    cli_interrupted ? "interrupted" : strerror(errno));
		return script_error(why, json);
	}
	text = slurp(fd, name, &len, why, sizeof(why));
	if (path != NULL)
		close(fd);
	if (text == NULL)
		return script_error(why, json);
	rc = script_parse(text, len, name, out, why, sizeof(why));
	free(text);
	if (rc != 0)
		return script_error(why, json);
	return EXIT_OK;
}

/* The name of an exit status, for the summary record. */
static const char *
status_name(int rc)
{
	switch (rc) {
	case EXIT_OK:
		return "ok";
	case EXIT_CHECK:
		return "check";
	case EXIT_USAGE:
		return "usage";
	case EXIT_RENDEZVOUS:
		return "rendezvous";
	case EXIT_FORMATION:
		return "formation";
	case EXIT_COLLECTIVE:
		return "collective";
	case EXIT_AUTH:
		return "auth";
	case EXIT_INTERRUPTED:
		return "interrupted";
	default:
		return "internal";
	}
}

/*
 * The last record of run --json, for CI to gate on: who formed the ring,
 * how long that took (null when it did not form), the script's size and
 * the exit status.
 */
static void
summary(const struct sr_ring *ring, char **addresses, uint64_t world,
    const struct script *script, double form_s, int rc)
{
	fputs("{\"type\":\"summary\",\"rank\":", stdout);
	if (ring != NULL)
		printf("%u", sr_ring_rank(ring));
	else if (cli_rank >= 0)
		printf("%lld", (long long)cli_rank);
	else
		fputs("null", stdout);
	fputs(",\"world\":", stdout);
	if (addresses != NULL)
		printf("%llu", (unsigned long long)world);
	else
		fputs("null", stdout);
	fputs(",\"addresses\":[", stdout);
	for (uint64_t i = 0; addresses != NULL && i < world; i++) {
		fputs(i ? "," : "", stdout);
		json_string(stdout, addresses[i]);
	}
	fputs("],\"statements\":", stdout);
	if (script != NULL)
		printf("%zu", script_statements(script));
	else
		fputs("null", stdout);
	if (form_s >= 0)
		printf(",\"form_s\":%.6f", form_s);
	else
		fputs(",\"form_s\":null", stdout);
	fputs(",\"status\":", stdout);
	json_string(stdout, status_name(rc));
	printf(",\"exit\":%d}\n", rc);
}

int
cmd_run(int argc, char **argv)
{
	static const struct option longopts[] = {
		CLI_RING_LONGOPTS,
		{ "script", required_argument, NULL, OPT_SCRIPT },
		{ "help", no_argument, NULL, 'h' },
		{ NULL, 0, NULL, 0 }
	};
	struct cli_ring opts;
	struct script *script = NULL;
	struct sr_ring *ring = NULL;
	const char *script_path = NULL;
	char **addresses = NULL;
	uint64_t world = 0;
	double form_s = -1;
	int64_t started;
	int c, rc;

	cli_ring_init(&opts);
	opterr = 0;
	optind = 1;
	while ((c = getopt_long(argc, argv, ":hv", longopts, NULL)) != -1) {
		if (c == 'h') {
			fputs(usage_run, stdout);
			fputs(cli_ring_help, stdout);
			return EXIT_OK;
		}
		if (c == OPT_SCRIPT) {
			script_path = optarg;
			continue;
		}
		if (c == ':')
			return cli_usage_error("run: %s needs a value",
			    argv[optind - 1]);
		if (c == '?' && optopt != 0)
			return cli_usage_error("run: unknown option '-%c'",
			    optopt);
		if (c == '?')
			return cli_usage_error("run: unknown option '%s'",
			    argv[optind - 1]);
		rc = cli_ring_option(&opts, c, optarg);
		if (rc < 0)
			return EXIT_USAGE;
	}
	if (optind < argc)
		return cli_usage_error("run: unexpected argument '%s'",
		    argv[optind]);
	if (cli_preflight_stop(&opts, false, script_path))
		return EXIT_OK;
	cli_signals_install();
	if (!opts.dry_run &&
	    (rc = load_script(script_path, opts.json, &script)) != 0) {
		if (opts.json)
			summary(NULL, NULL, 0, NULL, -1, rc);
		return rc;
	}
	/* Before any network activity, as a syntax error. */
	if (script != NULL && !opts.mesh && script_group_line(script) != 0) {
		rc = cli_usage_error("run: %s:%u: a group needs a mesh (a link "
		    "between every pair of ranks): give every rank --mesh",
		    script_path != NULL ? script_path : "<stdin>",
		    script_group_line(script));
		if (opts.json)
			summary(NULL, NULL, 0, script, -1, rc);
		script_free(script);
		return rc;
	}
	started = sr_clock_ns();
	rc = cli_ring_open(&opts, &ring, &addresses, &world);
	if (rc == EXIT_OK && ring != NULL) {
		struct sr_error err;

		form_s = (double)(sr_clock_ns() - started) / 1e9;
		rc = script_run(script, ring, stdout, opts.json);
		/* Closing is a collective too: every rank agrees it ran the
		 * same collectives, or every rank fails. */
		if (rc == EXIT_OK && sr_ring_finish(ring, &err) != 0)
			rc = cli_report(&err, opts.json);
	}
	if (opts.json && !opts.dry_run)
		summary(ring, addresses, world, script, form_s, rc);
	sr_ring_close(ring);
	cli_addresses_free(addresses, world);
	script_free(script);
	if (fflush(stdout) != 0 && rc == EXIT_OK) {
		cli_error("writing the results: %s", strerror(errno));
		rc = EXIT_INTERNAL;
	}
	return rc;
}
