/*
 * rank_list.h - a list of ranks as users write it, for a group's members
 * (the script's `group ID RANKS`, bench's --group RANKS): ranks and
 * ranges A-B separated by commas, in member order, "0,2,5-7" being 0 2 5
 * 6 7 (rank_list.c).  Pure: no I/O.
 */
#ifndef SR_RANK_LIST_H
#define SR_RANK_LIST_H

#include <stddef.h>
#include <stdint.h>

/* The most ranks a list may name. */
#define RANK_LIST_MAX 65536

/*
 * Parses the len bytes at text.  0 with *out (malloc'd, the caller's to
 * free) and *n >= 1; -1 with *out NULL, *at the offset of the offending
 * item, and why saying what is wrong: "'2-' is not a rank or a range
 * A-B", "range '5-3' runs backwards", "rank 2 is listed twice", "a rank
 * is missing after the last ','", "no ranks", "more than 65536 ranks".  Ranks fit a u32; whether they fit the
 * world is the caller's to check once it is known.
 */
int rank_list_parse(const char *text, size_t len, uint32_t **out, size_t *n,
    size_t *at, char *why, size_t why_size);

/* The ranks as a list parses them back ("0,2,5-7"), cut with "..." to
 * fit size; returns buf. */
char *rank_list_format(const uint32_t *ranks, size_t n, char *buf,
    size_t size);

#endif
