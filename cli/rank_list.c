/*
 * rank_list.c - lists of ranks ("0,2,5-7"): parsed for a group's members,
 * and written back for output.  Pure: no I/O.
 */
#include <stdbool.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "rank_list.h"

/* A decimal u32 at text[*pos..len) with no sign or blank; advances *pos. */
static bool
number(const char *text, size_t len, size_t *pos, uint32_t *v)
{
	uint64_t n = 0;
	size_t start = *pos;

	while (*pos < len && text[*pos] >= '0' && text[*pos] <= '9') {
		n = n * 10 + (uint64_t)(text[*pos] - '0');
		if (n > UINT32_MAX)
			return false;
		(*pos)++;
	}
	*v = (uint32_t)n;
	return *pos > start;
}

/* Appends first..last to the list, each with the offset of its item. */
static int
append(uint32_t **list, size_t **from, size_t *n, size_t *cap,
    uint32_t first, uint32_t last, size_t item, char *why, size_t why_size)
{
	if ((uint64_t)last - first + 1 > RANK_LIST_MAX - *n) {
		snprintf(why, why_size, "more than %d ranks", RANK_LIST_MAX);
		return -1;
	}
	while (*n + ((uint64_t)last - first + 1) > *cap) {
		size_t grown = *cap ? 2 * *cap : 8;
		uint32_t *more = realloc(*list, grown * sizeof(**list));
		size_t *where;

		if (more != NULL)
			*list = more;
		where = more != NULL ? realloc(*from, grown * sizeof(**from)) :
		    NULL;
		if (where == NULL) {
			snprintf(why, why_size, "out of memory");
			return -1;
		}
		*from = where;
		*cap = grown;
	}
	for (uint64_t r = first; r <= last; r++) {
		(*from)[*n] = item;
		(*list)[(*n)++] = (uint32_t)r;
	}
	return 0;
}

static int
compare_u32(const void *a, const void *b)
{
	uint32_t x = *(const uint32_t *)a, y = *(const uint32_t *)b;

	return x < y ? -1 : x > y;
}

/* A rank listed twice: -1 with why and *at (its second item), else 0. */
static int
no_repeats(const uint32_t *list, const size_t *from, size_t n, size_t *at,
    char *why, size_t why_size)
{
	uint32_t *sorted = malloc(n * sizeof(*sorted));
	bool seen = false;
	size_t i;

	if (sorted == NULL) {
		snprintf(why, why_size, "out of memory");
		return -1;
	}
	memcpy(sorted, list, n * sizeof(*sorted));
	qsort(sorted, n, sizeof(*sorted), compare_u32);
	for (i = 1; i < n && sorted[i] != sorted[i - 1]; i++)
		;
	if (i == n) {
		free(sorted);
		return 0;
	}
	for (size_t k = 0; k < n; k++)
		if (list[k] == sorted[i]) {
			*at = from[k];
			if (seen)
				break;
			seen = true;
		}
	snprintf(why, why_size, "rank %u is listed twice", sorted[i]);
	free(sorted);
	return -1;
}

int
rank_list_parse(const char *text, size_t len, uint32_t **out, size_t *n,
    size_t *at, char *why, size_t why_size)
{
	uint32_t *list = NULL;
	size_t *from = NULL, cap = 0, pos = 0;

	*out = NULL;
	*n = 0;
	*at = 0;
	if (len == 0) {
		snprintf(why, why_size, "no ranks");
		return -1;
	}
	while (pos <= len) {
		size_t start = pos, end = pos;
		uint32_t first, last;
		bool ok;

		while (end < len && text[end] != ',')
			end++;
		*at = start;
		if (end == start) {
			snprintf(why, why_size, "a rank is missing %s",
			    start == 0 ? "before the first ','" :
			    start == len ? "after the last ','" :
			    "between two ','");
			goto fail;
		}
		ok = number(text, end, &pos, &first);
		last = first;
		if (ok && pos < end && text[pos] == '-') {
			pos++;
			ok = number(text, end, &pos, &last);
		}
		if (!ok || pos != end) {
			snprintf(why, why_size, "'%.*s' is not a rank or a range "
			    "A-B", (int)(end - start), text + start);
			goto fail;
		}
		if (last < first) {
			snprintf(why, why_size, "range '%.*s' runs backwards",
			    (int)(end - start), text + start);
			goto fail;
		}
		if (append(&list, &from, n, &cap, first, last, start, why,
		    why_size) != 0)
			goto fail;
		pos = end + 1;
	}
	if (no_repeats(list, from, *n, at, why, why_size) != 0)
		goto fail;
	free(from);
	*out = list;
	return 0;
fail:
	free(list);
	free(from);
	*n = 0;
	return -1;
}

char *
rank_list_format(const uint32_t *ranks, size_t n, char *buf, size_t size)
{
	size_t used = 0;

	buf[0] = '\0';
	for (size_t i = 0; i < n; i++) {
		size_t j = i;
		char item[32];
		int len;

		/* A run of three or more consecutive ranks is a range. */
		while (j + 1 < n && ranks[j + 1] == ranks[j] + 1)
			j++;
		if (j >= i + 2)
			len = snprintf(item, sizeof(item), "%s%u-%u",
			    i > 0 ? "," : "", ranks[i], ranks[j]);
		else {
			len = snprintf(item, sizeof(item), "%s%u",
			    i > 0 ? "," : "", ranks[i]);
			j = i;
		}
		/* Room for it and a ",..." after. */
		if (used + (size_t)len + 5 > size) {
			snprintf(buf + used, size - used, "%s...",
			    i > 0 ? "," : "");
			return buf;
		}
		memcpy(buf + used, item, (size_t)len + 1);
		used += (size_t)len;
		i = j;
	}
	return buf;
}
