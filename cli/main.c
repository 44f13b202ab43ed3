/*
 * main.c - silvic-ring's entry point: finds the command and hands over.
 */
#include <stdio.h>
#include <string.h>

#include "cli.h"
#include "usage.h"

static const struct {
	const char *name;
	int (*fn)(int argc, char **argv);
} commands[] = {
	{ "run", cmd_run },
	{ "launch", cmd_launch },
	{ "bench", cmd_bench },
	{ "serve", cmd_serve },
};

int
main(int argc, char **argv)
{
	const char *first = argc > 1 ? argv[1] : NULL;

	if (first != NULL && (strcmp(first, "--version") == 0 ||
	    strcmp(first, "-V") == 0 || strcmp(first, "version") == 0))
		return usage_version();
	if (first != NULL && (strcmp(first, "help") == 0 ||
	    strcmp(first, "--help") == 0 || strcmp(first, "-h") == 0))
		return usage_help(argc > 2 ? argv[2] : NULL);
	for (size_t i = 0; first != NULL && i < sizeof(commands) /
	    sizeof(commands[0]); i++)
		if (strcmp(first, commands[i].name) == 0)
			return commands[i].fn(argc - 1, argv + 1);
	if (first != NULL && first[0] != '-')
		return cli_usage_error("'%s' is not a command (run, launch, "
		    "bench, serve, help)", first);
	/* No command: run is the default, with every argument its own. */
	argv[0] = "run";
	return cmd_run(argc, argv);
}
