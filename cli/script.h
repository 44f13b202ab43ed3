/*
 * script.h - the script language of `silvic-ring run`: one statement per
 * line, parsed whole before the ring forms, then run on every rank.
 *
 *	allreduce OP DTYPE VALUE...	OP: sum max min prod;
 *					DTYPE: f64 f32 i64 i32 u64 u32
 *	allgather TEXT			every rank's TEXT, in rank order
 *	broadcast ROOT TEXT		ROOT's TEXT on every rank
 *	barrier
 *	sleep SECONDS			0 to 3600
 *	expect VALUE...|TEXT		checks the last allreduce, allgather
 *					or broadcast result
 *	group ID RANKS			defines group ID (1 to 4294967295):
 *					ranks and ranges A-B, comma-separated,
 *					in member order ("3,0-1")
 *	group ID allreduce|allgather|broadcast|barrier ...
 *					that collective on group ID, defined
 *					on an earlier line
 *
 * On a group, broadcast's ROOT is a rank of the group and allgather's
 * texts come in member order.  A rank not in a group prints "skipped"
 * for the group's statements, and for an expect of their result (an
 * expect belongs to its result's group).  Groups need a mesh: every rank
 * checks the ranks against the world when the definition runs, and a
 * script with groups is refused without --mesh (script_group_line).
 *
 * '#' starts a comment anywhere but inside a TEXT (the rest of the line
 * after allgather, after broadcast's ROOT, and after an expect that
 * checks an allgather or a broadcast), where it is a literal.  A TEXT is
 * trimmed, may be empty, and has {rank} and {world} replaced by decimal
 * numbers when it runs.  ROOT must come to the same rank on every rank
 * (a {rank}-dependent ROOT puts the ranks out of step).  VALUE tokens (numbers, expressions, N*V lists)
 * are described in expr.h.
 *
 * expect compares the last allreduce element by element (floats by
 * value after converting the expected value to the dtype; the count must
 * match), a broadcast's text with the rest of the line exactly, and an
 * allgather's texts with the line's blank-separated tokens, rank i with
 * token i; when a gathered text is empty or holds a blank, the texts
 * joined by single spaces are compared with the rest of the line.
 */
#ifndef SR_SCRIPT_H
#define SR_SCRIPT_H

#include <stdbool.h>
#include <stddef.h>
#include <stdio.h>

#include "silvic_ring.h"

struct script;

/*
 * Parses the whole script text (len bytes; need not be NUL-terminated;
 * name is the file name for messages, "<stdin>" for stdin).  0 on success
 * with *out owned by the caller (script_free); -1 with *out NULL and why
 * filled: "NAME:LINE:COL: <what> in '<offending line text>'", e.g.
 * "job.txt:3:15: unknown dtype 'f16' in 'allreduce sum f16 1 2'".  Checks
 * everything that can be checked before any network activity (unknown
 * statements, ops, dtypes, malformed numbers/expressions, bad N*V counts,
 * expect without a preceding result statement, missing arguments, absurd
 * sizes over 1 GiB per buffer, a line longer than 64 KiB, NUL bytes), and
 * evaluates every value without {rank} or {world} against its dtype.
 * Pure: no I/O.
 */
int script_parse(const char *text, size_t len, const char *name,
    struct script **out, char *why, size_t why_size);
/* script may be NULL. */
void script_free(struct script *script);
size_t script_statements(const struct script *script);
/* The line of the script's first group statement, 0 when it has none: a
 * script with groups needs a mesh (--mesh). */
unsigned script_group_line(const struct script *script);

/*
 * Runs every statement in order on ring; prints one result line per
 * statement on out (or one JSON object per line with json), flushing out
 * after each.  Returns EXIT_OK; EXIT_CHECK after an expect failed (message
 * on stderr via cli_error naming NAME:LINE and what differed, and, with
 * json, also a JSON record {"type":"error","code":"expect",...} on out;
 * before returning it calls sr_ring_abort with an error whose message is
 * "NAME:LINE: expect failed ..." so other ranks learn why); or
 * cli_report(&err, json) of a failure: a core failure (its message
 * prefixed with "NAME:LINE: "), a value that does not fit its dtype or a
 * broadcast root out of range on this rank (SR_ECONFIG, after
 * sr_ring_abort), an interruption (SR_EINTERRUPTED), a peer's text length
 * beyond any script's (SR_EOUT_OF_STEP); EXIT_INTERNAL when out could not
 * be written.
 */
int script_run(const struct script *script, struct sr_ring *ring, FILE *out,
    bool json);

#endif
