/*
 * hosts.h - host lists: `launch --hosts` ("h1,h2:4,node[01-16]"), a
 * hostfile ("host slots=N", as mpirun writes them, or "host:N"), and
 * Slurm's SLURM_JOB_NODELIST with SLURM_TASKS_PER_NODE.  Pure: text in,
 * list or message out; nothing here touches a file or the environment.
 *
 * Ranges are pdsh's and Slurm's: "node[01-03,7]" is node01, node02,
 * node03, node7 (a range whose first number has a leading zero keeps
 * its width); several bracket groups multiply, the first outermost.
 */
#ifndef SR_HOSTS_H
#define SR_HOSTS_H

#include <stddef.h>
#include <stdint.h>

#define HOSTS_MAX 65536		/* hosts in one list */
#define HOSTS_SLOTS_MAX 1024	/* ranks on one host (launch's -n limit) */
#define HOSTS_NAME_MAX 256	/* one host name, NUL included */

struct host_entry {
	char *name;		/* as given: "node01", "user@node01" */
	uint32_t slots;		/* ranks it may run, 1 unless given */
};

struct host_list {
	struct host_entry *host;
	size_t n;
	uint64_t slots;		/* the sum of every host's slots */
};

void host_list_free(struct host_list *list);

/*
 * Expands one host expression with its ranges ("node[01-03]-ib") and
 * appends each name with slots.  where names it in messages ("--hosts
 * entry 2").  0, or -1 with why (nothing appended).
 */
int hosts_expand(const char *expr, uint32_t slots, const char *where,
    struct host_list *out, char *why, size_t why_size);

/*
 * Parses a --hosts value: entries separated by commas outside brackets,
 * each HOST or HOST:SLOTS, HOST with ranges.  what names the value in
 * messages ("--hosts", "SLURM_JOB_NODELIST").  A host listed twice, a
 * bad name or range, and more than HOSTS_MAX hosts are errors.  out is
 * filled (owned by the caller) on success; 0 or -1 with why.
 */
int hosts_parse(const char *spec, const char *what, struct host_list *out,
    char *why, size_t why_size);

/*
 * Parses a hostfile: one host (with ranges) a line, then nothing,
 * "slots=N" (and mpirun's "max_slots=N", which is ignored), or written
 * "host:N"; '#' starts a comment.  name is the file, for "FILE:LINE:"
 * in messages.  0 or -1 with why.
 */
int hosts_parse_file(const char *text, size_t len, const char *name,
    struct host_list *out, char *why, size_t why_size);

/*
 * Sets each host's slots from Slurm's SLURM_TASKS_PER_NODE ("2(x3),1":
 * two tasks on each of the first three nodes, one on the fourth), which
 * must cover the list's hosts exactly.  0 or -1 with why.
 */
int hosts_slurm_tasks(struct host_list *list, const char *tasks,
    const char *what, char *why, size_t why_size);

/* The user@ part stripped: the name the host itself is known by. */
const char *hosts_bare_name(const char *name);

#endif
