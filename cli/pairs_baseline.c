/*
 * pairs_baseline.c - `bench pairs --baseline FILE`: an earlier run's JSON
 * records read back (see pairs.h), one line at a time through the strict
 * reader (json_read.c).  A baseline of another world or other hosts is
 * refused with both sides named: comparing a cell with a cell of another
 * pair of hosts would name the wrong link.
 */
#include <errno.h>
#include <math.h>
#include <stdarg.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "cli.h"
#include "json_read.h"
#include "pairs.h"

/* A line longer than this is not one of ours. */
#define LINE_MAX_BYTES (4u << 20)

struct load {
	const char *name;
	const struct pairs_matrix *m;
	struct pairs_baseline *b;
	size_t line;
	bool header;
	size_t filled;
	char *why;
	size_t why_size;
};

void
pairs_baseline_fini(struct pairs_baseline *b)
{
	for (int mode = 0; mode < PAIRS_MODE_COUNT; mode++)
		free(b->cells[mode]);
	memset(b, 0, sizeof(*b));
}

static int CLI_PRINTF(2, 3)
fail(struct load *l, const char *fmt, ...)
{
	char what[512];
	va_list ap;

	va_start(ap, fmt);
	vsnprintf(what, sizeof(what), fmt, ap);
	va_end(ap);
	if (l->line > 0)
		snprintf(l->why, l->why_size, "%s:%zu: %s", l->name, l->line,
		    what);
	else
		snprintf(l->why, l->why_size, "%s: %s", l->name, what);
	return -1;
}

/* The header: the same world, and every rank on the same host. */
static int
header(struct load *l, const struct json_value *rec)
{
	const struct json_value *world = json_get(rec, "world");
	const struct json_value *hosts = json_get(rec, "hosts");
	const struct pairs_matrix *m = l->m;

	if (l->header)
		return fail(l, "a second header record: one run's output "
		    "only, please");
	if (!json_is_index(world, PAIRS_MATRIX_MAX))
		return fail(l, "the header has no world");
	if ((uint32_t)world->number != m->world)
		return fail(l, "the baseline ran world %u, this run world %u; "
		    "a baseline must come from the same hosts",
		    (unsigned)world->number, m->world);
	if (hosts == NULL || hosts->type != JSON_ARRAY ||
	    hosts->count != m->world)
		return fail(l, "the header's hosts are not a list of %u host "
		    "labels", m->world);
	for (uint32_t r = 0; r < m->world; r++) {
		const struct json_value *h = &hosts->items[r];

		if (h->type != JSON_STRING)
			return fail(l, "the header's host of rank %u is not a "
			    "string", r);
		if (strcmp(h->string, m->label[r]) != 0)
			return fail(l, "the baseline's rank %u ran on '%s', "
			    "this run's on '%s'; a baseline must come from the "
			    "same hosts in the same order", r, h->string,
			    m->label[r]);
	}
	l->header = true;
	return 0;
}

static int
speed(struct load *l, const struct json_value *rec, const char *key,
    uint32_t from, uint32_t to, double *out)
{
	const struct json_value *v = json_get(rec, key);

	if (v == NULL || v->type != JSON_NUMBER || !(v->number > 0))
		return fail(l, "rank %u -> rank %u: %s is not a positive number "
		    "of GB/s", from, to, key);
	*out = v->number;
	return 0;
}

static int
pair(struct load *l, const struct json_value *rec)
{
	const struct json_value *from = json_get(rec, "from");
	const struct json_value *to = json_get(rec, "to");
	uint32_t n = l->m->world, i, j;
	double both = NAN, alone = NAN;
	size_t c;

	if (!l->header)
		return fail(l, "a pair record before the header (the first "
		    "record of bench pairs --json)");
	if (!json_is_index(from, n - 1) || !json_is_index(to, n - 1) ||
	    from->number == to->number)
		return fail(l, "a pair record whose from and to are not two "
		    "ranks of world %u", n);
	i = (uint32_t)from->number;
	j = (uint32_t)to->number;
	if (speed(l, rec, "gbps_both", i, j, &both) != 0 ||
	    speed(l, rec, "gbps_alone", i, j, &alone) != 0)
		return -1;
	c = (size_t)i * n + j;
	if (!isnan(l->b->cells[PAIRS_MODE_ALONE][c]))
		return fail(l, "a second record of rank %u -> rank %u", i, j);
	l->b->cells[PAIRS_MODE_BOTH][c] = both;
	l->b->cells[PAIRS_MODE_ALONE][c] = alone;
	l->filled++;
	return 0;
}

static int
record(struct load *l, const char *text, size_t len)
{
	struct json_value rec;
	const struct json_value *type, *schema;
	char what[200];
	int rc = 0;

	if (json_parse(text, len, &rec, what, sizeof(what)) != 0)
		return fail(l, "not a JSON record: %s", what);
	type = json_get(&rec, "type");
	schema = json_get(&rec, "schema");
	if (type == NULL || type->type != JSON_STRING)
		rc = fail(l, "a record without a \"type\" (not bench pairs "
		    "--json output)");
	else if (schema == NULL || schema->type != JSON_NUMBER)
		rc = fail(l, "a %s record without a \"schema\"", type->string);
	else if (schema->number != 1)
		rc = fail(l, "a %s record of schema %g; this silvic-ring reads "
		    "schema 1", type->string, schema->number);
	else if (strcmp(type->string, "pairs") == 0)
		rc = header(l, &rec);
	else if (strcmp(type->string, "pair") == 0)
		rc = pair(l, &rec);
	else if (strcmp(type->string, "header") == 0)
		rc = fail(l, "a bench header record: this is the output of "
		    "bench, not of bench pairs");
	json_free(&rec);
	return rc;
}

static int
missing(struct load *l)
{
	uint32_t n = l->m->world;

	l->line = 0;
	if (!l->header)
		return fail(l, "no bench pairs header record (a baseline is the "
		    "output of bench pairs --json)");
	for (uint32_t i = 0; i < n; i++)
		for (uint32_t j = 0; j < n; j++)
			if (i != j && isnan(l->b->cells[PAIRS_MODE_ALONE]
			    [(size_t)i * n + j]))
				return fail(l, "no pair record of rank %u -> "
				    "rank %u (an interrupted run?)", i, j);
	return 0;
}

static bool
blank(const char *s, size_t n)
{
	for (size_t i = 0; i < n; i++)
		if (s[i] != ' ' && s[i] != '\t' && s[i] != '\r' && s[i] != '\n')
			return false;
	return true;
}

int
pairs_baseline_load(FILE *in, const char *name, const struct pairs_matrix *m,
    struct pairs_baseline *b, char *why, size_t why_size)
{
	struct load l = { name, m, b, 0, false, 0, why, why_size };
	size_t cells = (size_t)m->world * m->world, cap = 0;
	char *line = NULL;
	ssize_t n;
	int rc = 0;

	memset(b, 0, sizeof(*b));
	b->world = m->world;
	for (int mode = 0; mode < PAIRS_MODE_COUNT; mode++) {
		if ((b->cells[mode] = malloc(cells * sizeof(double))) == NULL) {
			pairs_baseline_fini(b);
			return fail(&l, "out of memory");
		}
		for (size_t c = 0; c < cells; c++)
			b->cells[mode][c] = NAN;
	}
	errno = 0;
	while (rc == 0 && (n = getline(&line, &cap, in)) >= 0) {
		l.line++;
		if ((size_t)n > LINE_MAX_BYTES)
			rc = fail(&l, "a line of %zd bytes: not a bench pairs "
			    "record", n);
		else if (memchr(line, '\0', (size_t)n) != NULL)
			rc = fail(&l, "a NUL byte: not a JSON record");
		else if (!blank(line, (size_t)n))
			rc = record(&l, line, (size_t)n);
	}
	if (rc == 0 && ferror(in))
		rc = fail(&l, "cannot read: %s", strerror(errno ? errno : EIO));
	free(line);
	if (rc == 0)
		rc = missing(&l);
	if (rc != 0)
		pairs_baseline_fini(b);
	return rc;
}

int
pairs_baseline_read(const char *path, const struct pairs_matrix *m,
    struct pairs_baseline *b, char *why, size_t why_size)
{
	char what[200];
	FILE *in;
	int fd, rc;

	memset(b, 0, sizeof(*b));
	if ((fd = cli_open_regular(path, false, NULL, what,
	    sizeof(what))) < 0) {
		snprintf(why, why_size, "%s: %s", path, what);
		return -1;
	}
	if ((in = fdopen(fd, "r")) == NULL) {
		snprintf(why, why_size, "%s: %s", path, strerror(errno));
		close(fd);
		return -1;
	}
	rc = pairs_baseline_load(in, path, m, b, why, why_size);
	fclose(in);
	return rc;
}
