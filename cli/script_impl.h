/*
 * script_impl.h - the parsed form of a script, shared by the parser
 * (script.c) and the runner (script_run.c); not for other modules.
 */
#ifndef SR_SCRIPT_IMPL_H
#define SR_SCRIPT_IMPL_H

#include <stdint.h>

#include "expr.h"
#include "silvic_ring.h"

#define SCRIPT_LINE_MAX 65536		/* bytes in a line, without '\n' */
#define SCRIPT_BUFFER_MAX (1u << 30)	/* bytes in one allreduce buffer */
/*
 * The longest TEXT a line can make once {rank} (6 bytes) and {world} (7)
 * become at most 10 digits each: what a peer may announce.
 */
#define SCRIPT_TEXT_MAX (2 * SCRIPT_LINE_MAX)
#define LIST_MAX 8			/* values listed before summarising */
#define QUOTE_MAX 160			/* bytes of a line a message quotes */
#define CLIP_MAX 100			/* bytes of a text a message quotes */


/* The collectives first: BARRIER is the last that runs on a group. */
enum kind { ALLREDUCE, ALLGATHER, BROADCAST, BARRIER, SLEEP, EXPECT, GROUP };

static const char *const kind_names[] __attribute__((unused)) = {
	[ALLREDUCE] = "allreduce", [ALLGATHER] = "allgather",
	[BROADCAST] = "broadcast", [BARRIER] = "barrier", [SLEEP] = "sleep",
	[EXPECT] = "expect", [GROUP] = "group",
};

struct stmt {
	enum kind kind;
	unsigned line;
	char *source;		/* as written, trimmed, comment removed */
	enum sr_op op;		/* allreduce */
	enum sr_dtype dtype;	/* allreduce, an expect of one */
	struct expr_value *values;	/* allreduce, expect; broadcast's root;
					 * sleep's seconds */
	size_t nvalues;
	uint64_t count;		/* elements the values make */
	char *text;		/* allgather, broadcast, an expect of either */
	enum kind checks;	/* expect: what it checks */
	/* The group a collective runs on (an expect: its result's), 0 for
	 * the ring; a group statement's own id. */
	uint32_t group;
	uint32_t *ranks;	/* group: its members, in order */
	size_t nranks;
};

struct script {
	char *name;
	struct stmt *stmts;
	size_t n;
	size_t cap;
};

#endif
