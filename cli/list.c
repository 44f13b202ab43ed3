/*
 * list.c - the address list formats: a plain list (one host:port per
 * line), an MLX hostfile (JSON), and a comma/space-separated word list.
 * Pure: text in, list or message out.  Duplicates, unparsable lines and
 * absurd sizes are errors, never guesses.
 */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "rendezvous.h"

void
peer_list_free(struct peer_list *list)
{
	for (uint64_t i = 0; i < list->n; i++)
		free(list->addr[i]);
	free(list->addr);
	for (uint64_t i = 0; i < list->nics_n; i++) {
		for (size_t k = 0; list->nics[i] != NULL &&
		    list->nics[i][k] != NULL; k++)
			free(list->nics[i][k]);
		free(list->nics[i]);
	}
	free(list->nics);
	list->addr = NULL;
	list->n = 0;
	list->nics = NULL;
	list->nics_n = 0;
}

/* Rank `rank`'s addresses (n of them, NULL-terminated) as its nics. */
static int
set_nics(struct peer_list *list, uint64_t rank, char *const *addr, size_t n)
{
	char ***grown, **copy;

	if (rank >= list->nics_n) {
		grown = realloc(list->nics, (rank + 1) * sizeof(*grown));
		if (grown == NULL)
			return -1;
		memset(grown + list->nics_n, 0, (rank + 1 - list->nics_n) *
		    sizeof(*grown));
		list->nics = grown;
		list->nics_n = rank + 1;
	}
	if ((copy = calloc(n + 1, sizeof(*copy))) == NULL)
		return -1;
	list->nics[rank] = copy;
	for (size_t k = 0; k < n; k++)
		if ((copy[k] = strdup(addr[k])) == NULL)
			return -1;
	return 0;
}

int
peer_list_add(struct peer_list *list, const char *address)
{
	char **grown, *copy;

	if ((list->n & (list->n - 1)) == 0) {
		grown = realloc(list->addr,
		    (list->n ? list->n * 2 : 4) * sizeof(char *));
		if (grown == NULL)
			return -1;
		list->addr = grown;
	}
	if ((copy = strdup(address)) == NULL)
		return -1;
	list->addr[list->n++] = copy;
	return 0;
}

/*
 * Checks host:port or [v6]:port (sr_address_split's form) with a port of
 * 1-65535, spelt one way only, and in words of its own.
 */
static int
check_address(const char *a, char *why, size_t why_size)
{
	enum sr_address_fault fault;
	const char *port;
	uint16_t number = 0;

	for (const char *q = a; *q; q++)
		if ((unsigned char)*q < 0x20 || *q == 0x7f) {
			snprintf(why, why_size, "an address holds control "
			    "character 0x%02x", (unsigned char)*q);
			return -1;
		}
	fault = sr_address_split(a, NULL, 0, &number, NULL, 0);
	if (fault == SR_ADDRESS_AMBIGUOUS) {
		snprintf(why, why_size,
		    "'%s' is ambiguous; write IPv6 as [ip]:port", a);
		return -1;
	}
	if (fault != SR_ADDRESS_OK && fault != SR_ADDRESS_PORT) {
		snprintf(why, why_size, a[0] == '[' ? "'%s' is not [ipv6]:port" :
		    "'%s' is not host:port", a);
		return -1;
	}
	port = a[0] == '[' ? strchr(a, ']') + 2 : strrchr(a, ':') + 1;
	/* No leading zero: "5000" and "05000" must not be two addresses. */
	if (port[0] == '0' && port[1] != '\0') {
		snprintf(why, why_size, "'%s': write the port without a "
		    "leading zero", a);
		return -1;
	}
	if (fault == SR_ADDRESS_PORT || number == 0) {
		snprintf(why, why_size, "'%s' has no port from 1 to 65535", a);
		return -1;
	}
	if (strpbrk(a, " \t\"'\\,#") != NULL) {
		snprintf(why, why_size, "'%s' is not host:port", a);
		return -1;
	}
	if (strlen(a) >= SR_ADDR_MAX) {
		snprintf(why, why_size, "'%.40s...' is longer than %d bytes", a,
		    SR_ADDR_MAX - 1);
		return -1;
	}
	return 0;
}

/* Adds address, rejecting malformed ones and too many (duplicates are
 * found once the list is whole: find_duplicate). */
static int
add_checked(struct peer_list *out, const char *address, const char *where,
    char *why, size_t why_size)
{
	char what[200];

	if (check_address(address, what, sizeof(what)) != 0) {
		snprintf(why, why_size, "%s: %s", where, what);
		return -1;
	}
	if (out->n >= LIST_MAX_RANKS) {
		snprintf(why, why_size, "%s: more than %d addresses", where,
		    LIST_MAX_RANKS);
		return -1;
	}
	if (peer_list_add(out, address) != 0) {
		snprintf(why, why_size, "%s: out of memory", where);
		return -1;
	}
	return 0;
}

static int
parse_plain(const char *text, size_t len, const char *name,
    struct peer_list *out, char *why, size_t why_size)
{
	size_t start = 0, lineno = 0;
	char line[512], where[300];

	while (start < len) {
		const char *nl = memchr(text + start, '\n', len - start);
		size_t end = nl != NULL ? (size_t)(nl - text) : len;
		size_t a = start, b = end;

		lineno++;
		start = end + 1;
		if (memchr(text + a, '#', b - a) != NULL)
			b = (size_t)((const char *)memchr(text + a, '#', b - a) -
			    text);
		while (a < b && text[a] != '\0' && strchr(" \t\r", text[a]) != NULL)
			a++;
		while (b > a && text[b - 1] != '\0' &&
		    strchr(" \t\r", text[b - 1]) != NULL)
			b--;
		if (a == b)
			continue;
		snprintf(where, sizeof(where), "%s:%zu", name, lineno);
		if (b - a >= sizeof(line) || memchr(text + a, '\0', b - a)) {
			snprintf(why, why_size, "%s: the line is not an address",
			    where);
			return -1;
		}
		memcpy(line, text + a, b - a);
		line[b - a] = '\0';
		if (add_checked(out, line, where, why, why_size) != 0)
			return -1;
	}
	return 0;
}

/* ------------------------------------------------ a small JSON reader */

struct json {
	const char *p, *end, *name;
	char *why;
	size_t why_size;
};

static size_t
json_line(const struct json *j, const char *at, const char *start)
{
	size_t line = 1;

	for (const char *q = start; q < at; q++)
		line += *q == '\n';
	return line;
}

static void
json_skip(struct json *j)
{
	while (j->p < j->end && strchr(" \t\r\n", *j->p) != NULL && *j->p)
		j->p++;
}

static int
json_fail(struct json *j, const char *start, const char *what)
{
	snprintf(j->why, j->why_size, "%s:%zu: not an MLX hostfile: %s", j->name,
	    json_line(j, j->p, start), what);
	return -1;
}

/* Reads a JSON string of plain characters into buf. */
static int
json_read_string(struct json *j, const char *start, char *buf, size_t size)
{
	size_t n = 0;

	if (j->p >= j->end || *j->p != '"')
		return json_fail(j, start, "expected a string");
	j->p++;
	while (j->p < j->end && *j->p != '"') {
		char c = *j->p++;

		if (c == '\\') {
			if (j->p >= j->end)
				break;
			c = *j->p++;
			if (c != '"' && c != '\\' && c != '/')
				return json_fail(j, start,
				    "unsupported escape in an address");
		}
		if ((unsigned char)c < 0x20 || n + 1 >= size)
			return json_fail(j, start, "an address string is too long "
			    "or has control characters");
		buf[n++] = c;
	}
	if (j->p >= j->end)
		return json_fail(j, start, "unterminated string");
	j->p++;
	buf[n] = '\0';
	return 0;
}

/* After a list's element: 1 past a ',' (another element follows), 0
 * past the closing ']', or -1. */
static int
json_next(struct json *j, const char *start)
{
	json_skip(j);
	if (j->p < j->end && (*j->p == ',' || *j->p == ']'))
		return *j->p++ == ',';
	return json_fail(j, start, "expected ',' or ']'");
}

/* One rank: "ip:port", or a list of them (MLX's connections per rank):
 * the ring's address is the first, and the streams of a link spread
 * over all of them (nics). */
static int
mlx_rank(struct json *j, const char *start, struct peer_list *out,
    const char *where)
{
	char addr[256], all[SR_RING_STREAMS_MAX][256], what[200];
	char *each[SR_RING_STREAMS_MAX];
	bool first = true;
	size_t n = 0;
	int more;

	if (j->p < j->end && *j->p == '"')
		return json_read_string(j, start, addr, sizeof(addr)) != 0 ||
		    add_checked(out, addr, where, j->why, j->why_size) != 0 ?
		    -1 : 0;
	if (j->p >= j->end || *j->p != '[')
		return json_fail(j, start,
		    "each rank is a string or a list of \"ip:port\" strings");
	j->p++;
	json_skip(j);
	if (j->p < j->end && *j->p == ']')
		return json_fail(j, start, "a rank with no address");
	do {
		json_skip(j);
		if (json_read_string(j, start, addr, sizeof(addr)) != 0 ||
		    (first && add_checked(out, addr, where, j->why,
		    j->why_size) != 0))
			return -1;
		if (!first && check_address(addr, what, sizeof(what)) != 0) {
			snprintf(j->why, j->why_size, "%s: %s", where, what);
			return -1;
		}
		if (n == SR_RING_STREAMS_MAX) {
			snprintf(j->why, j->why_size, "%s: more than %d addresses "
			    "for one rank", where, SR_RING_STREAMS_MAX);
			return -1;
		}
		snprintf(all[n], sizeof(all[n]), "%s", addr);
		each[n] = all[n];
		n++;
		first = false;
	} while ((more = json_next(j, start)) > 0);
	if (more == 0 && n > 1 && set_nics(out, out->n - 1, each, n) != 0) {
		snprintf(j->why, j->why_size, "%s: out of memory", where);
		return -1;
	}
	return more;
}

static int
parse_mlx(const char *text, size_t len, const char *name,
    struct peer_list *out, char *why, size_t why_size)
{
	struct json j = { text, text + len, name, why, why_size };
	char where[300];
	int more = 0;

	json_skip(&j);
	if (j.p >= j.end || *j.p++ != '[')
		return json_fail(&j, text, "expected '['");
	json_skip(&j);
	if (j.p < j.end && *j.p == ']')
		j.p++;
	else
		do {
			json_skip(&j);
			snprintf(where, sizeof(where), "%s:%zu: rank %llu", name,
			    json_line(&j, j.p, text), (unsigned long long)out->n);
			if (mlx_rank(&j, text, out, where) != 0)
				return -1;
		} while ((more = json_next(&j, text)) > 0);
	if (more < 0)
		return -1;
	json_skip(&j);
	if (j.p != j.end)
		return json_fail(&j, text, "text after the closing ']'");
	/* As long as the list: the ranks of one address have none. */
	if (out->nics != NULL && out->nics_n < out->n &&
	    set_nics(out, out->n - 1, NULL, 0) == 0) {
		free(out->nics[out->n - 1]);
		out->nics[out->n - 1] = NULL;
	}
	return 0;
}

/* An entry and its rank, sorted by address then rank. */
struct entry {
	const char *address;
	uint64_t index;
};

static int
by_address(const void *a, const void *b)
{
	const struct entry *x = a, *y = b;
	int c = strcmp(x->address, y->address);

	return c != 0 ? c : (x->index > y->index) - (x->index < y->index);
}

/* The line of a plain list's entry `index` (counting from 0), or 0. */
static size_t
entry_line(const char *text, size_t len, uint64_t index)
{
	size_t start = 0, lineno = 0;
	uint64_t seen = 0;

	while (start < len) {
		const char *nl = memchr(text + start, '\n', len - start);
		size_t end = nl != NULL ? (size_t)(nl - text) : len, a = start;

		lineno++;
		start = end + 1;
		while (a < end && (text[a] == ' ' || text[a] == '\t' ||
		    text[a] == '\r'))
			a++;
		if (a == end || text[a] == '#')
			continue;
		if (seen++ == index)
			return lineno;
	}
	return 0;
}

/*
 * Reports the repeated address whose second occurrence comes first in
 * the list, with both ranks.  Sorting (address, rank) pairs puts each
 * address's first two occurrences side by side: n log n comparisons and
 * one pass, for lists of up to 65536 (a pass per repeat was quadratic:
 * 65536 equal lines took 3 s).
 */
static int
find_duplicate(const struct peer_list *list, const char *name, char *why,
    size_t why_size, const char *text, size_t len)
{
	struct entry *sorted;
	uint64_t first = UINT64_MAX, second = UINT64_MAX;

	if (list->n < 2)
		return 0;
	if ((sorted = malloc(list->n * sizeof(*sorted))) == NULL) {
		snprintf(why, why_size, "%s: out of memory", name);
		return -1;
	}
	for (uint64_t i = 0; i < list->n; i++) {
		sorted[i].address = list->addr[i];
		sorted[i].index = i;
	}
	qsort(sorted, list->n, sizeof(*sorted), by_address);
	for (uint64_t i = 1; i < list->n; i++)
		/* Only a group's first pair: its second is its earliest. */
		if ((i == 1 || strcmp(sorted[i - 2].address,
		    sorted[i - 1].address) != 0) &&
		    strcmp(sorted[i - 1].address, sorted[i].address) == 0 &&
		    sorted[i].index < second) {
			first = sorted[i - 1].index;
			second = sorted[i].index;
		}
	free(sorted);
	if (first == UINT64_MAX)
		return 0;
	if (text != NULL && entry_line(text, len, second) > 0)
		snprintf(why, why_size, "%s:%zu: '%s' is listed twice (ranks "
		    "%llu and %llu)", name, entry_line(text, len, second),
		    list->addr[first], (unsigned long long)first,
		    (unsigned long long)second);
	else
		snprintf(why, why_size, "%s: '%s' is listed twice (ranks %llu "
		    "and %llu)", name, list->addr[first],
		    (unsigned long long)first, (unsigned long long)second);
	return -1;
}

/* An MLX hostfile is a JSON list: '[' then a list, a string or ']'; a
 * plain list may start "[::1]:port". */
static bool
looks_like_json(const char *text, size_t len, size_t i)
{
	if (i >= len || text[i] != '[')
		return false;
	for (i++; i < len && strchr(" \t\r\n", text[i]) != NULL && text[i]; i++)
		;
	return i < len && (text[i] == '[' || text[i] == '"' || text[i] == ']');
}

int
list_parse(const char *text, size_t len, const char *name,
    struct peer_list *out, char *why, size_t why_size)
{
	size_t i = 0;

	memset(out, 0, sizeof(*out));
	/* A byte-order mark, as some editors write, is not part of the list. */
	if (len >= 3 && memcmp(text, "\xef\xbb\xbf", 3) == 0) {
		text += 3;
		len -= 3;
	}
	while (i < len && strchr(" \t\r\n", text[i]) != NULL && text[i])
		i++;
	bool json = looks_like_json(text, len, i);

	if ((json ? parse_mlx : parse_plain)(text, len, name, out, why,
		why_size) != 0 ||
	    find_duplicate(out, name, why, why_size, json ? NULL : text,
		len) != 0) {
		peer_list_free(out);
		return -1;
	}
	return 0;
}

int
list_parse_words(const char *text, const char *name, struct peer_list *out,
    char *why, size_t why_size)
{
	char *copy = strdup(text), *save = NULL, *word, where[200];
	unsigned n = 0;

	memset(out, 0, sizeof(*out));
	if (copy == NULL) {
		snprintf(why, why_size, "%s: out of memory", name);
		return -1;
	}
	for (word = strtok_r(copy, ", \t\n", &save); word != NULL;
	    word = strtok_r(NULL, ", \t\n", &save)) {
		snprintf(where, sizeof(where), "%s: entry %u", name, ++n);
		if (add_checked(out, word, where, why, why_size) != 0) {
			free(copy);
			peer_list_free(out);
			return -1;
		}
	}
	free(copy);
	if (find_duplicate(out, name, why, why_size, NULL, 0) != 0) {
		peer_list_free(out);
		return -1;
	}
	return 0;
}
