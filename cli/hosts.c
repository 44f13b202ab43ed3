/*
 * hosts.c - host lists with pdsh/Slurm ranges and slots, for `launch
 * --hosts/--hostfile` and the Slurm address source.  Pure: no file, no
 * environment.  A host listed twice, a name ssh would take for an option,
 * and a range that never ends are errors, never guesses.
 */
#include <stdbool.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "hosts.h"

/* Digits in one range bound: 10 fit in 64 bits with room. */
#define BOUND_DIGITS 10

void
host_list_free(struct host_list *list)
{
	for (size_t i = 0; i < list->n; i++)
		free(list->host[i].name);
	free(list->host);
	list->host = NULL;
	list->n = 0;
	list->slots = 0;
}

/* Drops the entries past n (an expansion that failed halfway). */
static void
truncate_to(struct host_list *list, size_t n)
{
	while (list->n > n) {
		list->n--;
		list->slots -= list->host[list->n].slots;
		free(list->host[list->n].name);
	}
}

static bool
word_char(char c)
{
	return (c >= 'a' && c <= 'z') || (c >= 'A' && c <= 'Z') ||
	    (c >= '0' && c <= '9') || c == '.' || c == '-' || c == '_';
}

/*
 * "host" or "user@host", each part in [A-Za-z0-9._-]; the host never
 * starts with '-' (ssh would read it as an option) nor '.'.
 */
static int
check_name(const char *name, const char *where, char *why, size_t why_size)
{
	const char *host = hosts_bare_name(name), *p;

	if (strlen(name) >= HOSTS_NAME_MAX) {
		snprintf(why, why_size, "%s: '%.40s...' is longer than %d bytes",
		    where, name, HOSTS_NAME_MAX - 1);
		return -1;
	}
	for (p = name; p < host - (host > name); p++)
		if (!word_char(*p))
			goto bad;
	if (host > name && host - 1 == name)
		goto bad;
	if (host[0] == '\0' || host[0] == '-' || host[0] == '.')
		goto bad;
	for (p = host; *p; p++)
		if (!word_char(*p))
			goto bad;
	return 0;
bad:
	snprintf(why, why_size, "%s: '%s' is not a host name (letters, digits, "
	    "'.', '-' and '_', not starting with '-', optionally user@)", where,
	    name);
	return -1;
}

const char *
hosts_bare_name(const char *name)
{
	const char *at = strchr(name, '@');

	return at != NULL ? at + 1 : name;
}

static int
add(struct host_list *out, const char *name, uint32_t slots, const char *where,
    char *why, size_t why_size)
{
	struct host_entry *grown;

	if (check_name(name, where, why, why_size) != 0)
		return -1;
	if (out->n >= HOSTS_MAX) {
		snprintf(why, why_size, "%s: more than %d hosts", where,
		    HOSTS_MAX);
		return -1;
	}
	if ((out->n & (out->n - 1)) == 0) {
		grown = realloc(out->host, (out->n ? out->n * 2 : 4) *
		    sizeof(*grown));
		if (grown == NULL)
			goto nomem;
		out->host = grown;
	}
	if ((out->host[out->n].name = strdup(name)) == NULL)
		goto nomem;
	out->host[out->n++].slots = slots;
	out->slots += slots;
	return 0;
nomem:
	snprintf(why, why_size, "%s: out of memory", where);
	return -1;
}

/* One bound of a range: 1 to BOUND_DIGITS digits; its width in *width
 * when it has a leading zero ("01"), else 0. */
static int
bound(const char *p, size_t n, uint64_t *v, int *width)
{
	if (n == 0 || n > BOUND_DIGITS)
		return -1;
	*v = 0;
	for (size_t i = 0; i < n; i++) {
		if (p[i] < '0' || p[i] > '9')
			return -1;
		*v = *v * 10 + (uint64_t)(p[i] - '0');
	}
	*width = n > 1 && p[0] == '0' ? (int)n : 0;
	return 0;
}

struct expansion {
	struct host_list *out;
	uint32_t slots;
	const char *where, *expr;
	char *why;
	size_t why_size;
};

static int
bad_range(struct expansion *e, const char *what)
{
	snprintf(e->why, e->why_size, "%s: '%s': %s", e->where, e->expr, what);
	return -1;
}

/* name[0..len) is expanded already; rest is what follows it. */
static int
expand_rest(struct expansion *e, char *name, size_t len, const char *rest)
{
	const char *open = strchr(rest, '['), *close, *item, *end;
	size_t pre;

	if (open == NULL) {
		if (len + strlen(rest) >= HOSTS_NAME_MAX)
			return bad_range(e, "a name is too long");
		strcpy(name + len, rest);
		return add(e->out, name, e->slots, e->where, e->why,
		    e->why_size);
	}
	if ((close = strchr(open, ']')) == NULL)
		return bad_range(e, "a '[' without its ']'");
	if (memchr(open + 1, '[', (size_t)(close - open - 1)) != NULL)
		return bad_range(e, "ranges do not nest");
	pre = (size_t)(open - rest);
	if (len + pre + BOUND_DIGITS >= HOSTS_NAME_MAX)
		return bad_range(e, "a name is too long");
	memcpy(name + len, rest, pre);
	len += pre;
	for (item = open + 1; item < close; item = end + 1) {
		const char *dash;
		uint64_t lo, hi;
		int wlo, whi;

		if ((end = memchr(item, ',', (size_t)(close - item))) == NULL)
			end = close;
		dash = memchr(item, '-', (size_t)(end - item));
		if (bound(item, (size_t)((dash ? dash : end) - item), &lo,
			&wlo) != 0 || (dash != NULL && bound(dash + 1,
			(size_t)(end - dash - 1), &hi, &whi) != 0))
			return bad_range(e, "a range is numbers, 'A-B' or 'A', "
			    "separated by commas");
		if (dash == NULL)
			hi = lo;
		if (hi < lo)
			return bad_range(e, "a range ends before it starts");
		if (hi - lo >= HOSTS_MAX)
			return bad_range(e, "a range of more than 65536 hosts");
		for (uint64_t v = lo; v <= hi; v++) {
			snprintf(name + len, HOSTS_NAME_MAX - len, "%0*llu", wlo,
			    (unsigned long long)v);
			if (expand_rest(e, name, len + strlen(name + len),
				close + 1) != 0)
				return -1;
		}
	}
	return 0;
}

int
hosts_expand(const char *expr, uint32_t slots, const char *where,
    struct host_list *out, char *why, size_t why_size)
{
	struct expansion e = { out, slots, where, expr, why, why_size };
	char name[HOSTS_NAME_MAX];
	size_t before = out->n;

	if (strchr(expr, ']') != NULL && strchr(expr, '[') == NULL)
		return bad_range(&e, "a ']' without its '['");
	if (expand_rest(&e, name, 0, expr) != 0) {
		truncate_to(out, before);
		return -1;
	}
	return 0;
}

/* ------------------------------------------------------------- duplicates */

static int
by_name(const void *a, const void *b)
{
	const struct host_entry *const *x = a, *const *y = b;
	int c = strcmp((*x)->name, (*y)->name);

	return c != 0 ? c : (*x > *y) - (*x < *y);
}

/* The host listed twice whose second mention comes first, if any. */
static int
find_twice(const struct host_list *list, const char *what, char *why,
    size_t why_size)
{
	const struct host_entry **sorted, *second = NULL;

	if (list->n < 2)
		return 0;
	if ((sorted = malloc(list->n * sizeof(*sorted))) == NULL) {
		snprintf(why, why_size, "%s: out of memory", what);
		return -1;
	}
	for (size_t i = 0; i < list->n; i++)
		sorted[i] = &list->host[i];
	qsort(sorted, list->n, sizeof(*sorted), by_name);
	for (size_t i = 1; i < list->n; i++)
		if (strcmp(sorted[i - 1]->name, sorted[i]->name) == 0 &&
		    (second == NULL || sorted[i] < second))
			second = sorted[i];
	free(sorted);
	if (second == NULL)
		return 0;
	snprintf(why, why_size, "%s: host '%s' is listed twice (give it more "
	    "slots instead, as %s:%u)", what, second->name, second->name,
	    2 * second->slots);
	return -1;
}

/* ----------------------------------------------------------------- slots */

static int
parse_slots(const char *text, size_t n, uint32_t *slots)
{
	uint64_t v;
	int width;

	if (bound(text, n, &v, &width) != 0 || width != 0 || v < 1 ||
	    v > HOSTS_SLOTS_MAX)
		return -1;
	*slots = (uint32_t)v;
	return 0;
}

static int
bad_slots(const char *where, const char *text, size_t n, char *why,
    size_t why_size)
{
	snprintf(why, why_size, "%s: '%.*s' is not a number of slots from 1 to "
	    "%d", where, (int)n, text, HOSTS_SLOTS_MAX);
	return -1;
}

/* "HOST" or "HOST:SLOTS", the host with ranges. */
static int
parse_entry(const char *entry, size_t n, const char *where,
    struct host_list *out, char *why, size_t why_size)
{
	char expr[HOSTS_NAME_MAX * 2];
	const char *colon = NULL;
	uint32_t slots = 1;

	for (size_t i = 0; i < n; i++)
		if (entry[i] == ':')
			colon = entry + i;
	if (colon != NULL) {
		if (parse_slots(colon + 1, (size_t)(entry + n - colon - 1),
			&slots) != 0)
			return bad_slots(where, colon + 1,
			    (size_t)(entry + n - colon - 1), why, why_size);
		n = (size_t)(colon - entry);
	}
	if (n == 0 || n >= sizeof(expr)) {
		snprintf(why, why_size, "%s: %s", where, n == 0 ? "no host name" :
		    "the entry is too long");
		return -1;
	}
	memcpy(expr, entry, n);
	expr[n] = '\0';
	return hosts_expand(expr, slots, where, out, why, why_size);
}

int
hosts_parse(const char *spec, const char *what, struct host_list *out,
    char *why, size_t why_size)
{
	const char *p = spec;
	char where[128];
	unsigned number = 0;

	memset(out, 0, sizeof(*out));
	while (*p != '\0' || number == 0) {
		const char *start = p, *end;
		int depth = 0;

		for (end = p; *end != '\0' && (*end != ',' || depth > 0); end++)
			depth += *end == '[' ? 1 : *end == ']' ? -1 : 0;
		while (start < end && (*start == ' ' || *start == '\t'))
			start++;
		while (end > start && (end[-1] == ' ' || end[-1] == '\t'))
			end--;
		snprintf(where, sizeof(where), "%s entry %u", what, ++number);
		if (start == end) {
			snprintf(why, why_size, "%s: '%s' has an empty entry (%s)",
			    what, spec, where + strlen(what) + 1);
			goto fail;
		}
		if (parse_entry(start, (size_t)(end - start), where, out, why,
			why_size) != 0)
			goto fail;
		for (p = end; *p == ' ' || *p == '\t'; p++)
			;
		if (*p == ',' && *++p == '\0') {
			snprintf(why, why_size, "%s: '%s' ends in a comma", what,
			    spec);
			goto fail;
		}
	}
	if (find_twice(out, what, why, why_size) == 0)
		return 0;
fail:
	host_list_free(out);
	return -1;
}

/* ------------------------------------------------------------- hostfile */

/* The line's words after the host: "slots=N", "max_slots=N". */
static int
file_words(char *words, const char *where, bool has_slots, uint32_t *slots,
    char *why, size_t why_size)
{
	char *save = NULL, *w;

	for (w = strtok_r(words, " \t", &save); w != NULL;
	    w = strtok_r(NULL, " \t", &save)) {
		if (strncmp(w, "slots=", 6) == 0) {
			if (has_slots) {
				snprintf(why, why_size, "%s: slots given twice",
				    where);
				return -1;
			}
			if (parse_slots(w + 6, strlen(w + 6), slots) != 0)
				return bad_slots(where, w + 6, strlen(w + 6), why,
				    why_size);
			has_slots = true;
		} else if (strncmp(w, "max_slots=", 10) != 0) {
			snprintf(why, why_size, "%s: '%s' is not slots=N", where,
			    w);
			return -1;
		}
	}
	return 0;
}

int
hosts_parse_file(const char *text, size_t len, const char *name,
    struct host_list *out, char *why, size_t why_size)
{
	size_t start = 0, lineno = 0;
	char line[1024], where[300];

	memset(out, 0, sizeof(*out));
	while (start < len) {
		const char *nl = memchr(text + start, '\n', len - start);
		size_t end = nl != NULL ? (size_t)(nl - text) : len;
		char *host, *rest, *colon, *hash;
		uint32_t slots = 1;

		lineno++;
		snprintf(where, sizeof(where), "%s:%zu", name, lineno);
		if (end - start >= sizeof(line) ||
		    memchr(text + start, '\0', end - start) != NULL) {
			snprintf(why, why_size, "%s: not a host line", where);
			goto fail;
		}
		memcpy(line, text + start, end - start);
		line[end - start] = '\0';
		start = end + 1;
		if ((hash = strchr(line, '#')) != NULL)
			*hash = '\0';
		for (host = line; *host == ' ' || *host == '\t' ||
		    *host == '\r'; host++)
			;
		rest = host + strcspn(host, " \t\r");
		if (rest == host)
			continue;
		if (*rest != '\0')
			*rest++ = '\0';
		rest[strcspn(rest, "\r")] = '\0';
		if ((colon = strchr(host, ':')) != NULL) {
			if (parse_slots(colon + 1, strlen(colon + 1), &slots) != 0) {
				bad_slots(where, colon + 1, strlen(colon + 1),
				    why, why_size);
				goto fail;
			}
			*colon = '\0';
		}
		if (file_words(rest, where, colon != NULL, &slots, why,
			why_size) != 0 ||
		    hosts_expand(host, slots, where, out, why, why_size) != 0)
			goto fail;
	}
	if (out->n == 0) {
		snprintf(why, why_size, "%s: no host in the file", name);
		goto fail;
	}
	if (find_twice(out, name, why, why_size) == 0)
		return 0;
fail:
	host_list_free(out);
	return -1;
}

/* ---------------------------------------------------------------- Slurm */

int
hosts_slurm_tasks(struct host_list *list, const char *tasks, const char *what,
    char *why, size_t why_size)
{
	const char *p = tasks;
	size_t node = 0;

	while (*p != '\0') {
		size_t n = strcspn(p, "(,");
		uint64_t repeat = 1;
		uint32_t count;
		int width;

		if (parse_slots(p, n, &count) != 0)
			goto bad;
		p += n;
		if (*p == '(') {
			size_t m = strcspn(p + 2, ")");

			if (strncmp(p, "(x", 2) != 0 || p[2 + m] != ')' ||
			    bound(p + 2, m, &repeat, &width) != 0 || repeat == 0)
				goto bad;
			p += 2 + m + 1;
		}
		if (*p == ',' && *++p == '\0')
			goto bad;
		if (*p != '\0' && p[-1] != ',')
			goto bad;
		for (; repeat > 0; repeat--) {
			if (node >= list->n) {
				snprintf(why, why_size, "%s='%s' gives tasks for "
				    "more than the %zu nodes of the node list",
				    what, tasks, list->n);
				return -1;
			}
			list->slots += count;
			list->slots -= list->host[node].slots;
			list->host[node++].slots = count;
		}
	}
	if (node == list->n)
		return 0;
	snprintf(why, why_size, "%s='%s' gives tasks for %zu of the %zu nodes "
	    "of the node list", what, tasks, node, list->n);
	return -1;
bad:
	snprintf(why, why_size, "%s='%s' is not a list of task counts (as "
	    "'2(x3),1')", what, tasks);
	return -1;
}
