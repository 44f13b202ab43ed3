/*
 * usage.h - --help, help COMMAND and --version.
 */
#ifndef SR_USAGE_H
#define SR_USAGE_H

/* Prints the help of a command (NULL: the overview) on stdout. */
int usage_help(const char *command);
int usage_version(void);
/* The help text of each command, printed by its own --help too. */
extern const char usage_run[];
extern const char usage_launch[];
extern const char usage_bench[];
extern const char usage_serve[];

#endif
