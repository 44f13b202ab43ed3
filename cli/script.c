/*
 * script.c - the parser of `silvic-ring run`'s scripts (pure: text in,
 * statements out, no I/O); script_run.c runs them.  Every check that needs neither
 * the rank nor the world is made by the parser, so a bad script fails
 * before any rank binds a socket.  VALUE tokens are expr.c's.
 */
#include <errno.h>
#include <stdarg.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "cli.h"
#include "expr.h"
#include "rank_list.h"
#include "script.h"

#include "script_impl.h"

/* ------------------------------------------------------------ parser */

struct parser {
	struct script *script;
	const char *line;	/* this line, not NUL-terminated */
	size_t len;		/* without trailing blanks */
	size_t pos;
	unsigned lineno;
	char *why;
	size_t why_size;
};

struct token {
	const char *s;
	size_t len;
	size_t at;		/* offset in the line */
};

static bool
blank(char c)
{
	return c == ' ' || c == '\t' || c == '\r';
}

/* "NAME:LINE:COL: <what> in '<line>'"; returns -1. */
static int __attribute__((format(printf, 3, 4)))
error(struct parser *p, size_t at, const char *fmt, ...)
{
	char what[512];
	va_list ap;
	int quoted = p->len > QUOTE_MAX ? QUOTE_MAX : (int)p->len;

	va_start(ap, fmt);
	vsnprintf(what, sizeof(what), fmt, ap);
	va_end(ap);
	snprintf(p->why, p->why_size, "%s:%u:%zu: %s in '%.*s%s'",
	    p->script->name, p->lineno, at + 1, what, quoted, p->line,
	    p->len > QUOTE_MAX ? "..." : "");
	return -1;
}

/* The next token, ending at a blank or a '#'; false at the end or at a
 * comment, with t->at where a token would have been. */
static bool
next_token(struct parser *p, struct token *t)
{
	while (p->pos < p->len && blank(p->line[p->pos]))
		p->pos++;
	t->s = p->line + p->pos;
	t->at = p->pos;
	t->len = 0;
	if (p->pos >= p->len || p->line[p->pos] == '#') {
		p->pos = p->len;
		return false;
	}
	while (p->pos < p->len && !blank(p->line[p->pos]) &&
	    p->line[p->pos] != '#')
		p->pos++;
	t->len = p->pos - t->at;
	return true;
}

static bool
token_is(const struct token *t, const char *word)
{
	return t->len == strlen(word) && memcmp(t->s, word, t->len) == 0;
}

/*
 * The rest of the line as TEXT: '#' is a literal, blanks are trimmed.  A
 * token that ran into a '#' ("allgather#x") leaves a comment, not a text.
 */
static char *
rest_text(struct parser *p)
{
	if (p->pos < p->len && p->line[p->pos] == '#')
		p->pos = p->len;
	while (p->pos < p->len && blank(p->line[p->pos]))
		p->pos++;
	return strndup(p->line + p->pos, p->len - p->pos);
}

/* The statement as written, trimmed, with any comment removed. */
static char *
source_of(struct parser *p, bool text)
{
	const char *s = p->line, *hash;
	size_t len = p->len;

	if (!text && (hash = memchr(s, '#', len)) != NULL)
		len = (size_t)(hash - s);
	while (len > 0 && blank(s[len - 1]))
		len--;
	while (len > 0 && blank(*s)) {
		s++;
		len--;
	}
	return strndup(s, len);
}

static int
nomem(struct parser *p)
{
	return error(p, 0, "out of memory");
}

static int
no_more(struct parser *p, const struct stmt *st)
{
	struct token t;

	if (next_token(p, &t))
		return error(p, t.at, "unexpected '%.*s' after %s", (int)t.len,
		    t.s, kind_names[st->kind]);
	return 0;
}

/* One VALUE token, checked now when it needs neither rank nor world. */
static int
parse_value(struct parser *p, const struct token *t, enum expr_role role,
    enum sr_dtype dtype, struct expr_value *v)
{
	char why[512];
	uint8_t element[8];
	size_t at;

	if (expr_value_parse(t->s, t->len, v, &at, why, sizeof(why)) != 0)
		return error(p, t->at + at, "%s", why);
	if (expr_constant(v->expr) && expr_value_eval(v, role, dtype, 0, 0,
		element, why, sizeof(why)) != 0)
		return error(p, t->at + (t->len - strlen(v->text)), "%s", why);
	return 0;
}

/* VALUE... up to the end of the line; st->count gets how many elements. */
static int
parse_values(struct parser *p, struct stmt *st)
{
	struct token t;
	size_t cap = 0, es = sr_dtype_size(st->dtype);

	while (next_token(p, &t)) {
		struct expr_value *v;

		if (st->nvalues == cap) {
			cap = cap ? 2 * cap : 4;
			v = realloc(st->values, cap * sizeof(*v));
			if (v == NULL)
				return nomem(p);
			st->values = v;
		}
		v = &st->values[st->nvalues++];
		memset(v, 0, sizeof(*v));
		if (parse_value(p, &t, EXPR_ELEMENT, st->dtype, v) != 0)
			return -1;
		if (v->copies > SCRIPT_BUFFER_MAX / es - st->count)
			return error(p, t.at, "%llu %s values are over the "
			    "1 GiB limit", (unsigned long long)(v->copies >
			    UINT64_MAX - st->count ? UINT64_MAX :
			    v->copies + st->count), sr_dtype_name(st->dtype));
		st->count += v->copies;
	}
	if (st->nvalues == 0)
		return error(p, t.at, "missing values");
	return 0;
}

static int
parse_name(struct parser *p, const char *what, int (*lookup)(const char *,
    void *), void *out)
{
	struct token t;
	char name[16];

	if (!next_token(p, &t))
		return error(p, t.at, "missing %s", what);
	snprintf(name, sizeof(name), "%.*s", (int)t.len, t.s);
	if (t.len >= sizeof(name) || lookup(name, out) != 0)
		return error(p, t.at, "unknown %s '%.*s'", what, (int)t.len,
		    t.s);
	return 0;
}

static int
op_lookup(const char *name, void *out)
{
	return sr_op_parse(name, out);
}

static int
dtype_lookup(const char *name, void *out)
{
	return sr_dtype_parse(name, out);
}

static int
parse_allreduce(struct parser *p, struct stmt *st)
{
	if (parse_name(p, "op", op_lookup, &st->op) != 0 ||
	    parse_name(p, "dtype", dtype_lookup, &st->dtype) != 0)
		return -1;
	return parse_values(p, st);
}

static int
parse_broadcast(struct parser *p, struct stmt *st)
{
	struct token t;

	if (!next_token(p, &t))
		return error(p, t.at, "missing root");
	if ((st->values = calloc(1, sizeof(*st->values))) == NULL)
		return nomem(p);
	st->nvalues = 1;
	if (parse_value(p, &t, EXPR_ROOT, SR_U32, st->values) != 0)
		return -1;
	if (st->values->copies != 1)
		return error(p, t.at, "root '%.*s' is a list", (int)t.len, t.s);
	return (st->text = rest_text(p)) == NULL ? nomem(p) : 0;
}

static int
parse_sleep(struct parser *p, struct stmt *st)
{
	struct token t;

	if (!next_token(p, &t))
		return error(p, t.at, "missing seconds");
	if ((st->values = calloc(1, sizeof(*st->values))) == NULL)
		return nomem(p);
	st->nvalues = 1;
	if (parse_value(p, &t, EXPR_SECONDS, SR_F64, st->values) != 0)
		return -1;
	if (st->values->copies != 1)
		return error(p, t.at, "sleep '%.*s' is a list", (int)t.len,
		    t.s);
	return no_more(p, st);
}

static int
parse_expect(struct parser *p, struct stmt *st, size_t keyword_at)
{
	const struct stmt *result = NULL;
	struct token t;
	size_t first;

	for (size_t i = p->script->n; i-- > 0;)
		if (p->script->stmts[i].kind <= BROADCAST) {
			result = &p->script->stmts[i];
			break;
		}
	if (result == NULL)
		return error(p, keyword_at, "expect without an allreduce, "
		    "allgather or broadcast before it");
	st->checks = result->kind;
	/* It belongs to the result's group: skipped where that was. */
	st->group = result->group;
	if (result->kind != ALLREDUCE)
		return (st->text = rest_text(p)) == NULL ? nomem(p) : 0;
	st->dtype = result->dtype;
	first = p->pos;
	if (parse_values(p, st) != 0)
		return -1;
	p->pos = first;
	next_token(p, &t);
	if (st->count != result->count)
		return error(p, t.at, "expect has %llu value%s, the allreduce "
		    "on line %u has %llu", (unsigned long long)st->count,
		    st->count == 1 ? "" : "s", result->line,
		    (unsigned long long)result->count);
	return 0;
}

static const struct stmt *
group_defined(const struct parser *p, uint32_t id)
{
	for (size_t i = 0; i < p->script->n; i++)
		if (p->script->stmts[i].kind == GROUP &&
		    p->script->stmts[i].group == id)
			return &p->script->stmts[i];
	return NULL;
}

/* group ID RANKS: the members, in order. */
static int
define_group(struct parser *p, struct stmt *st, const struct token *t)
{
	const struct stmt *before = group_defined(p, st->group);
	char why[256];
	size_t at;

	if (before != NULL)
		return error(p, t->at, "group %u is already defined on line %u",
		    st->group, before->line);
	if (rank_list_parse(t->s, t->len, &st->ranks, &st->nranks, &at, why,
	    sizeof(why)) != 0)
		return error(p, t->at + at, "group %u: %s", st->group, why);
	return no_more(p, st);
}

static int parse_statement(struct parser *p, struct stmt *st,
    const struct token *kw);

/*
 * group ID RANKS defines a group; group ID STATEMENT runs a collective on
 * one defined before.
 */
static int
parse_group(struct parser *p, struct stmt *st)
{
	struct token t, what;
	uint64_t id = 0;
	int kind;

	if (!next_token(p, &t))
		return error(p, t.at, "missing group id");
	for (size_t i = 0; i < t.len && id <= UINT32_MAX; i++)
		id = t.s[i] >= '0' && t.s[i] <= '9' ? id * 10 +
		    (uint64_t)(t.s[i] - '0') : UINT64_MAX;
	if (id == 0 || id > UINT32_MAX)
		return error(p, t.at, "group id '%.*s' is not a number from 1 "
		    "to 4294967295 (0 is the whole ring)", (int)t.len, t.s);
	st->group = (uint32_t)id;
	if (!next_token(p, &what))
		return error(p, what.at, "group %u needs its ranks ('group %u "
		    "0,2-3') or a statement to run", st->group, st->group);
	if (what.s[0] >= '0' && what.s[0] <= '9')
		return define_group(p, st, &what);
	for (kind = 0; kind <= BARRIER; kind++)
		if (token_is(&what, kind_names[kind]))
			break;
	if (kind > BARRIER)
		return error(p, what.at, "'%.*s' does not run on a group "
		    "(allreduce, allgather, broadcast and barrier do)",
		    (int)what.len, what.s);
	if (group_defined(p, st->group) == NULL)
		return error(p, t.at, "group %u is not defined (a 'group %u "
		    "RANKS' line must come before)", st->group, st->group);
	st->kind = (enum kind)kind;
	return parse_statement(p, st, &what);
}

static int
parse_statement(struct parser *p, struct stmt *st, const struct token *kw)
{
	st->line = p->lineno;
	switch (st->kind) {
	case ALLREDUCE:
		return parse_allreduce(p, st);
	case ALLGATHER:
		return (st->text = rest_text(p)) == NULL ? nomem(p) : 0;
	case BROADCAST:
		return parse_broadcast(p, st);
	case BARRIER:
		return no_more(p, st);
	case SLEEP:
		return parse_sleep(p, st);
	case GROUP:
		return parse_group(p, st);
	default:
		return parse_expect(p, st, kw->at);
	}
}

static void
stmt_fini(struct stmt *st)
{
	for (size_t i = 0; i < st->nvalues; i++)
		expr_value_fini(&st->values[i]);
	free(st->values);
	free(st->text);
	free(st->source);
	free(st->ranks);
}

/* One line: nothing for a blank or comment line, else one statement. */
static int
parse_line(struct parser *p)
{
	struct script *s = p->script;
	struct token kw;
	struct stmt *st;
	int kind;

	if (!next_token(p, &kw))
		return 0;
	for (kind = 0; kind <= GROUP; kind++)
		if (token_is(&kw, kind_names[kind]))
			break;
	if (kind > GROUP)
		return error(p, kw.at, "unknown statement '%.*s'", (int)kw.len,
		    kw.s);
	if (s->n == s->cap) {
		size_t cap = s->cap ? 2 * s->cap : 16;

		if ((st = realloc(s->stmts, cap * sizeof(*st))) == NULL)
			return nomem(p);
		s->stmts = st;
		s->cap = cap;
	}
	st = &s->stmts[s->n];
	memset(st, 0, sizeof(*st));
	st->kind = (enum kind)kind;
	if (parse_statement(p, st, &kw) != 0) {
		stmt_fini(st);
		return -1;
	}
	st->source = source_of(p, st->text != NULL);
	if (st->source == NULL) {
		stmt_fini(st);
		return nomem(p);
	}
	s->n++;
	return 0;
}

/* Splits the text into lines and checks what no statement may hold. */
static int
parse_lines(struct parser *p, const char *text, size_t len)
{
	size_t pos = 0;

	while (pos < len) {
		const char *nl = memchr(text + pos, '\n', len - pos);
		size_t end = nl != NULL ? (size_t)(nl - text) : len;
		const char *nul = memchr(text + pos, '\0', end - pos);

		p->line = text + pos;
		p->len = end - pos;
		p->pos = 0;
		p->lineno++;
		if (p->len > SCRIPT_LINE_MAX)
			return error(p, SCRIPT_LINE_MAX, "line longer than %d "
			    "bytes", SCRIPT_LINE_MAX);
		if (nul != NULL) {
			p->len = (size_t)(nul - p->line);
			return error(p, p->len, "NUL byte");
		}
		while (p->len > 0 && blank(p->line[p->len - 1]))
			p->len--;
		if (parse_line(p) != 0)
			return -1;
		pos = end + 1;
	}
	return 0;
}

int
script_parse(const char *text, size_t len, const char *name,
    struct script **out, char *why, size_t why_size)
{
	struct script *s;
	struct parser p = { .why = why, .why_size = why_size };

	*out = NULL;
	if ((s = calloc(1, sizeof(*s))) == NULL ||
	    (s->name = strdup(name)) == NULL) {
		free(s);
		snprintf(why, why_size, "%s: out of memory", name);
		return -1;
	}
	p.script = s;
	/* A byte-order mark, as some editors write, is not a statement (as
	 * in address lists); columns count from after it, as editors show. */
	if (len >= 3 && memcmp(text, "\xef\xbb\xbf", 3) == 0) {
		text += 3;
		len -= 3;
	}
	if (parse_lines(&p, text, len) != 0) {
		script_free(s);
		return -1;
	}
	*out = s;
	return 0;
}

void
script_free(struct script *script)
{
	if (script == NULL)
		return;
	for (size_t i = 0; i < script->n; i++)
		stmt_fini(&script->stmts[i]);
	free(script->stmts);
	free(script->name);
	free(script);
}

size_t
script_statements(const struct script *script)
{
	return script->n;
}

unsigned
script_group_line(const struct script *script)
{
	for (size_t i = 0; i < script->n; i++)
		if (script->stmts[i].kind == GROUP)
			return script->stmts[i].line;
	return 0;
}
