/*
 * usage.c - the help texts (--version is version.c's).  The man page says
 * the same at more length; a test checks every long option appears in both.
 */
#include <stdio.h>
#include <string.h>

#include "cli.h"
#include "usage.h"

static const char overview[] =
"usage: silvic-ring [COMMAND] [OPTIONS]\n"
"\n"
"TCP ring collectives: form a ring of ranks and run collectives on it.\n"
"\n"
"Commands:\n"
"  run       form the ring, run the collectives script from stdin or\n"
"            --script FILE (the default command)\n"
"  launch    start N local ranks of a command: launch -n 4 run\n"
"  bench     allreduce/allgather/broadcast sweeps and per-link tests\n"
"  serve     an HTTP rendezvous server for address exchange\n"
"  help      help COMMAND shows a command's options\n"
"\n"
"  -h, --help      this text\n"
"  -V, --version   version and compiled-in features\n"
"\n"
"Exit status: 0 success, 1 check failed, 2 usage or configuration,\n"
"3 rendezvous, 4 ring formation, 5 collective, 6 below --min-busbw,\n"
"7 authentication, 8 internal, 130 interrupted.  See silvic-ring(1).\n";

int
usage_help(const char *command)
{
	static const struct {
		const char *name;
		const char *text;
	} texts[] = {
		{ "run", usage_run },
		{ "launch", usage_launch },
		{ "bench", usage_bench },
		{ "serve", usage_serve },
	};

	if (command == NULL) {
		fputs(overview, stdout);
		return EXIT_OK;
	}
	for (size_t i = 0; i < sizeof(texts) / sizeof(texts[0]); i++)
		if (strcmp(command, texts[i].name) == 0) {
			fputs(texts[i].text, stdout);
			if (strcmp(command, "run") == 0 ||
			    strcmp(command, "bench") == 0)
				fputs(cli_ring_help, stdout);
			return EXIT_OK;
		}
	return cli_usage_error("help: '%s' is not a command", command);
}
