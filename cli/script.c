/*
 * script.c - the scripts of `silvic-ring run`: the parser (pure: text in,
 * statements out, no I/O) and the runner (statements in, collectives on
 * the ring, one result line each out).  Every check that needs neither
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
#include "script.h"

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

enum kind { ALLREDUCE, ALLGATHER, BROADCAST, BARRIER, SLEEP, EXPECT };

static const char *const kind_names[] = {
	[ALLREDUCE] = "allreduce", [ALLGATHER] = "allgather",
	[BROADCAST] = "broadcast", [BARRIER] = "barrier", [SLEEP] = "sleep",
	[EXPECT] = "expect",
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
};

struct script {
	char *name;
	struct stmt *stmts;
	size_t n;
	size_t cap;
};

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
	for (kind = 0; kind <= EXPECT; kind++)
		if (token_is(&kw, kind_names[kind]))
			break;
	if (kind > EXPECT)
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

/* ------------------------------------------------------------ runner */

/* The last allreduce, allgather or broadcast result, for expect. */
struct result {
	const struct stmt *st;
	uint8_t *data;		/* allreduce: st->count elements */
	char **texts;		/* allgather: one per rank; broadcast: one */
	size_t ntexts;
};

struct runner {
	const struct script *script;
	struct sr_ring *ring;
	FILE *out;
	bool json;
	uint32_t rank;
	uint32_t world;
	struct result last;
};

static int64_t
now_ns(void)
{
	struct timespec ts;

	clock_gettime(CLOCK_MONOTONIC, &ts);
	return (int64_t)ts.tv_sec * 1000000000 + ts.tv_nsec;
}

static double
since_us(int64_t start)
{
	return (double)(now_ns() - start) / 1e3;
}

static void
put_u64(uint8_t *p, uint64_t v)
{
	for (int i = 0; i < 8; i++)
		p[i] = (uint8_t)(v >> (8 * i));
}

static uint64_t
get_u64(const uint8_t *p)
{
	uint64_t v = 0;

	for (int i = 0; i < 8; i++)
		v |= (uint64_t)p[i] << (8 * i);
	return v;
}

static void
result_clear(struct result *last)
{
	for (size_t i = 0; i < last->ntexts; i++)
		free(last->texts[i]);
	free(last->texts);
	free(last->data);
	memset(last, 0, sizeof(*last));
}

/* At most CLIP_MAX bytes of s, for a message; returns buf. */
static const char *
clip(const char *s, char *buf, size_t size)
{
	snprintf(buf, size, "%.*s%s", CLIP_MAX, s,
	    strlen(s) > CLIP_MAX ? "..." : "");
	return buf;
}

/*
 * Fails the statement with err: prefixes "NAME:LINE: ", tells the other
 * ranks (a no-op when the core already failed the ring) and reports.
 */
static int
fail(struct runner *r, const struct stmt *st, struct sr_error *err)
{
	char message[SR_MESSAGE_MAX + 64];

	snprintf(message, sizeof(message), "%s:%u: %s", r->script->name,
	    st->line, err->message[0] ? err->message : sr_code_text(err->code));
	message[sizeof(err->message) - 1] = '\0';
	memcpy(err->message, message, sizeof(err->message));
	if (err->rank < 0)
		err->rank = r->rank;
	sr_ring_abort(r->ring, err);
	return cli_report(err, r->json);
}

static int __attribute__((format(printf, 5, 6)))
fail_with(struct runner *r, const struct stmt *st, enum sr_code code,
    int64_t peer, const char *fmt, ...)
{
	struct sr_error err;
	va_list ap;

	sr_error_clear(&err);
	err.code = code;
	err.phase = code == SR_ECONFIG ? SR_PHASE_CONFIG : SR_PHASE_COLLECTIVE;
	err.peer = peer;
	va_start(ap, fmt);
	vsnprintf(err.message, sizeof(err.message), fmt, ap);
	va_end(ap);
	return fail(r, st, &err);
}

static int
out_of_memory(struct runner *r, const struct stmt *st)
{
	return fail_with(r, st, SR_ENOMEM, -1, "out of memory");
}

/* "line N: LABEL = ", or the JSON record up to its "op". */
static void
begin_result(struct runner *r, const struct stmt *st, const char *label)
{
	if (!r->json) {
		fprintf(r->out, "line %u: %s = ", st->line, label);
		return;
	}
	fprintf(r->out, "{\"type\":\"result\",\"rank\":%u,\"world\":%u,"
	    "\"line\":%u,\"statement\":", r->rank, r->world, st->line);
	json_string(r->out, st->source);
	fprintf(r->out, ",\"op\":\"%s\"", kind_names[st->kind]);
}

static int
finish_line(struct runner *r, const struct stmt *st)
{
	struct sr_error err;

	if (fflush(r->out) == 0 && !ferror(r->out))
		return EXIT_OK;
	cli_error("%s:%u: cannot write the results: %s", r->script->name,
	    st->line, strerror(errno));
	sr_error_clear(&err);
	err.code = SR_EIO;
	err.phase = SR_PHASE_COLLECTIVE;
	err.rank = r->rank;
	snprintf(err.message, sizeof(err.message), "%s:%u: cannot write the "
	    "results", r->script->name, st->line);
	sr_ring_abort(r->ring, &err);
	return EXIT_INTERNAL;
}

/* The time (for a collective) and the end of the line. */
static int
end_result(struct runner *r, const struct stmt *st, double us, bool timed)
{
	if (r->json)
		fprintf(r->out, ",\"time_us\":%.1f}\n", us);
	else if (timed)
		fprintf(r->out, " (%.1f us)\n", us);
	else
		fputc('\n', r->out);
	return finish_line(r, st);
}

/* Element i as a user reads it: integers exact, floats shortest. */
static char *
format_element(const uint8_t *data, size_t i, enum sr_dtype dtype,
    char *buf, size_t size)
{
	const uint8_t *p = data + i * sr_dtype_size(dtype);
	union { double f64; float f32; int64_t i64; int32_t i32;
		uint64_t u64; uint32_t u32; } v;

	memcpy(&v, p, sr_dtype_size(dtype));
	switch (dtype) {
	case SR_F64: return expr_format_double(v.f64, false, buf, size);
	case SR_F32: return expr_format_double(v.f32, true, buf, size);
	case SR_I64: snprintf(buf, size, "%lld", (long long)v.i64); break;
	case SR_I32: snprintf(buf, size, "%d", (int)v.i32); break;
	case SR_U64: snprintf(buf, size, "%llu", (unsigned long long)v.u64);
		break;
	default: snprintf(buf, size, "%u", (unsigned)v.u32); break;
	}
	return buf;
}

static void
put_element(struct runner *r, const uint8_t *data, size_t i,
    enum sr_dtype dtype)
{
	char buf[64];
	double f64;
	float f32;

	if (r->json && dtype == SR_F64) {
		memcpy(&f64, data + i * 8, 8);
		json_number(r->out, f64);
	} else if (r->json && dtype == SR_F32) {
		memcpy(&f32, data + i * 4, 4);
		json_number(r->out, f32);
	} else {
		fputs(format_element(data, i, dtype, buf, sizeof(buf)), r->out);
	}
}

static uint64_t
fnv1a(const uint8_t *p, size_t n)
{
	uint64_t h = 0xcbf29ce484222325ULL;

	for (size_t i = 0; i < n; i++) {
		h ^= p[i];
		h *= 0x100000001b3ULL;
	}
	return h;
}

/* Up to LIST_MAX values, else count, first, last and checksum. */
static void
put_values(struct runner *r, const uint8_t *data, size_t count,
    enum sr_dtype dtype)
{
	if (count <= LIST_MAX) {
		fputs(r->json ? "[" : "", r->out);
		for (size_t i = 0; i < count; i++) {
			if (i > 0)
				fputs(r->json ? "," : " ", r->out);
			put_element(r, data, i, dtype);
		}
		fputs(r->json ? "]" : "", r->out);
		return;
	}
	fprintf(r->out, r->json ? "{\"count\":%zu,\"first\":" :
	    "%zu values, first ", count);
	put_element(r, data, 0, dtype);
	fputs(r->json ? ",\"last\":" : ", last ", r->out);
	put_element(r, data, count - 1, dtype);
	fprintf(r->out, r->json ? ",\"checksum\":\"0x%016llx\"}" :
	    ", checksum 0x%016llx", (unsigned long long)fnv1a(data,
	    count * sr_dtype_size(dtype)));
}

/* Evaluates st's values into data (st->count elements of st->dtype). */
static int
fill(struct runner *r, const struct stmt *st, uint8_t *data)
{
	size_t es = sr_dtype_size(st->dtype), done, step;
	char why[SR_MESSAGE_MAX];

	for (size_t k = 0; k < st->nvalues; k++) {
		const struct expr_value *v = &st->values[k];

		if (expr_value_eval(v, EXPR_ELEMENT, st->dtype, r->rank,
			r->world, data, why, sizeof(why)) != 0)
			return fail_with(r, st, SR_ECONFIG, -1, "%s", why);
		/* N*V: double the copies made so far until there are N. */
		for (done = 1; done < v->copies; done += step) {
			step = done < v->copies - done ? done :
			    v->copies - done;
			memcpy(data + done * es, data, step * es);
		}
		data += v->copies * es;
	}
	return EXIT_OK;
}

static int
run_allreduce(struct runner *r, const struct stmt *st)
{
	char label[64];
	struct sr_error err;
	uint8_t *data;
	int64_t start;
	double us;
	int rc;

	if ((data = malloc(st->count * sr_dtype_size(st->dtype))) == NULL)
		return out_of_memory(r, st);
	if ((rc = fill(r, st, data)) != EXIT_OK) {
		free(data);
		return rc;
	}
	start = now_ns();
	if (sr_allreduce(r->ring, data, data, st->count, st->dtype, st->op,
		&err) != 0) {
		free(data);
		return fail(r, st, &err);
	}
	us = since_us(start);
	result_clear(&r->last);
	r->last = (struct result){ .st = st, .data = data };
	snprintf(label, sizeof(label), "allreduce %s %s", sr_op_name(st->op),
	    sr_dtype_name(st->dtype));
	begin_result(r, st, label);
	if (r->json)
		fprintf(r->out, ",\"reduce\":\"%s\",\"dtype\":\"%s\","
		    "\"count\":%llu,\"result\":", sr_op_name(st->op),
		    sr_dtype_name(st->dtype), (unsigned long long)st->count);
	put_values(r, data, st->count, st->dtype);
	return end_result(r, st, us, true);
}

/* Writes text with {rank} and {world} replaced to out (when not NULL);
 * returns the length. */
static size_t
expand(const char *text, const struct runner *r, char *out)
{
	char number[2][16];
	size_t n = 0, add;

	snprintf(number[0], sizeof(number[0]), "%u", r->rank);
	snprintf(number[1], sizeof(number[1]), "%u", r->world);
	while (*text != '\0') {
		const char *piece = text;

		add = 1;
		if (strncmp(text, "{rank}", 6) == 0) {
			piece = number[0];
			add = strlen(piece);
			text += 6;
		} else if (strncmp(text, "{world}", 7) == 0) {
			piece = number[1];
			add = strlen(piece);
			text += 7;
		} else {
			text++;
		}
		if (out != NULL)
			memcpy(out + n, piece, add);
		n += add;
	}
	return n;
}

static char *
substitute(const char *text, const struct runner *r)
{
	size_t n = expand(text, r, NULL);
	char *out = malloc(n + 1);

	if (out != NULL) {
		expand(text, r, out);
		out[n] = '\0';
	}
	return out;
}

/*
 * Every rank's text in rank order: their lengths first (u64 each), then
 * the texts padded to the longest.  0, or a reported exit status.
 */
static int
gather_texts(struct runner *r, const struct stmt *st, const char *text,
    char **texts)
{
	size_t n = r->world, longest = 0, len = strlen(text);
	uint8_t mine[8], *lens, *pad = NULL, *all = NULL;
	struct sr_error err;
	int rc = EXIT_OK;

	put_u64(mine, len);
	if ((lens = malloc(8 * n)) == NULL)
		return out_of_memory(r, st);
	if (sr_allgather(r->ring, mine, 8, lens, &err) != 0) {
		free(lens);
		return fail(r, st, &err);
	}
	for (size_t i = 0; i < n && rc == EXIT_OK; i++) {
		uint64_t their = get_u64(lens + 8 * i);

		if (their > SCRIPT_TEXT_MAX)
			rc = fail_with(r, st, SR_EOUT_OF_STEP, (int64_t)i,
			    "rank %zu gathers a text of %llu bytes, more than "
			    "a script line makes", i,
			    (unsigned long long)their);
		else if (their > longest)
			longest = (size_t)their;
	}
	if (rc == EXIT_OK && longest > SCRIPT_BUFFER_MAX / n)
		rc = fail_with(r, st, SR_ECONFIG, -1, "texts of %zu bytes from "
		    "%zu ranks are over the 1 GiB limit", longest, n);
	if (rc == EXIT_OK && ((pad = calloc(1, longest + 1)) == NULL ||
	    (all = malloc(longest * n + 1)) == NULL))
		rc = out_of_memory(r, st);
	if (rc == EXIT_OK) {
		memcpy(pad, text, len);
		if (sr_allgather(r->ring, pad, longest, all, &err) != 0)
			rc = fail(r, st, &err);
	}
	for (size_t i = 0; i < n && rc == EXIT_OK; i++)
		if ((texts[i] = strndup((char *)all + i * longest,
		    (size_t)get_u64(lens + 8 * i))) == NULL)
			rc = out_of_memory(r, st);
	free(lens);
	free(pad);
	free(all);
	return rc;
}

static int
run_allgather(struct runner *r, const struct stmt *st)
{
	char *text = substitute(st->text, r), **texts;
	int64_t start;
	double us;
	int rc;

	texts = calloc(r->world, sizeof(*texts));
	if (text == NULL || texts == NULL) {
		free(text);
		free(texts);
		return out_of_memory(r, st);
	}
	start = now_ns();
	rc = gather_texts(r, st, text, texts);
	us = since_us(start);
	free(text);
	result_clear(&r->last);
	r->last = (struct result){ .st = st, .texts = texts,
		.ntexts = r->world };
	if (rc != EXIT_OK)
		return rc;
	begin_result(r, st, "allgather");
	fputs(r->json ? ",\"result\":[" : "[", r->out);
	for (size_t i = 0; i < r->world; i++) {
		if (i > 0)
			fputs(r->json ? "," : ", ", r->out);
		json_string(r->out, texts[i]);
	}
	fputc(']', r->out);
	return end_result(r, st, us, true);
}

/* root's text on every rank: its length (u64) first, then the bytes. */
static int
run_broadcast(struct runner *r, const struct stmt *st)
{
	char why[SR_MESSAGE_MAX], label[32], *text, *got, **texts;
	uint8_t len[8];
	struct sr_error err;
	uint32_t root;
	uint64_t n;
	int64_t start;
	double us;

	if (expr_value_eval(st->values, EXPR_ROOT, SR_U32, r->rank, r->world,
		&root, why, sizeof(why)) != 0)
		return fail_with(r, st, SR_ECONFIG, -1, "%s", why);
	if ((text = substitute(st->text, r)) == NULL)
		return out_of_memory(r, st);
	put_u64(len, strlen(text));
	start = now_ns();
	if (sr_broadcast(r->ring, len, 8, root, &err) != 0) {
		free(text);
		return fail(r, st, &err);
	}
	if ((n = get_u64(len)) > SCRIPT_TEXT_MAX) {
		free(text);
		return fail_with(r, st, SR_EOUT_OF_STEP, root, "rank %u "
		    "broadcasts a text of %llu bytes, more than a script line "
		    "makes", root, (unsigned long long)n);
	}
	if ((got = calloc(1, (size_t)n + 1)) == NULL) {
		free(text);
		return out_of_memory(r, st);
	}
	if (r->rank == root)
		memcpy(got, text, (size_t)n);
	free(text);
	if (sr_broadcast(r->ring, got, (size_t)n, root, &err) != 0) {
		free(got);
		return fail(r, st, &err);
	}
	us = since_us(start);
	if ((texts = malloc(sizeof(*texts))) == NULL) {
		free(got);
		return out_of_memory(r, st);
	}
	texts[0] = got;
	result_clear(&r->last);
	r->last = (struct result){ .st = st, .texts = texts, .ntexts = 1 };
	snprintf(label, sizeof(label), "broadcast %u", root);
	begin_result(r, st, label);
	if (r->json) {
		fprintf(r->out, ",\"root\":%u,\"result\":", root);
		json_string(r->out, got);
	} else {
		fputs(got, r->out);
	}
	return end_result(r, st, us, true);
}

static int
run_barrier(struct runner *r, const struct stmt *st)
{
	struct sr_error err;
	int64_t start = now_ns();
	double us;

	if (sr_barrier(r->ring, &err) != 0)
		return fail(r, st, &err);
	us = since_us(start);
	begin_result(r, st, "barrier");
	fputs(r->json ? ",\"result\":null" : "ok", r->out);
	return end_result(r, st, us, true);
}

static int
run_sleep(struct runner *r, const struct stmt *st)
{
	char why[SR_MESSAGE_MAX], label[64], number[32];
	double seconds;
	struct timespec left;
	int64_t start = now_ns();
	double us;

	if (expr_value_eval(st->values, EXPR_SECONDS, SR_F64, r->rank, r->world,
		&seconds, why, sizeof(why)) != 0)
		return fail_with(r, st, SR_ECONFIG, -1, "%s", why);
	left.tv_sec = (time_t)seconds;
	left.tv_nsec = (long)((seconds - (double)left.tv_sec) * 1e9);
	/* A signal that came before the sleep must end it too. */
	while (cli_interrupted || nanosleep(&left, &left) != 0)
		if (cli_interrupted || errno != EINTR)
			return fail_with(r, st, SR_EINTERRUPTED, -1,
			    "interrupted while sleeping");
	us = since_us(start);
	snprintf(label, sizeof(label), "sleep %s",
	    expr_format_double(seconds, false, number, sizeof(number)));
	begin_result(r, st, label);
	if (r->json) {
		fputs(",\"seconds\":", r->out);
		json_number(r->out, seconds);
		fputs(",\"result\":null", r->out);
	}
	fputs(r->json ? "" : "ok", r->out);
	return end_result(r, st, us, false);
}

/* Element i as a double: floats compare by value, so -0 == 0. */
static double
float_at(const uint8_t *data, size_t i, enum sr_dtype dtype)
{
	double f64;
	float f32;

	if (dtype == SR_F64) {
		memcpy(&f64, data + i * 8, 8);
		return f64;
	}
	memcpy(&f32, data + i * 4, 4);
	return f32;
}

/* Compares element by element; 0, or -1 with what differs. */
static int
compare_values(const struct result *last, const uint8_t *want, char *what,
    size_t size)
{
	const struct stmt *st = last->st;
	size_t es = sr_dtype_size(st->dtype), differ = 0, first = 0;
	bool floats = st->dtype == SR_F64 || st->dtype == SR_F32;
	char got[64], expected[64];

	for (size_t i = 0; i < st->count; i++) {
		bool same = floats ? float_at(last->data, i, st->dtype) ==
		    float_at(want, i, st->dtype) :
		    memcmp(last->data + i * es, want + i * es, es) == 0;

		if (!same && differ++ == 0)
			first = i;
	}
	if (differ == 0)
		return 0;
	snprintf(what, size, "element %zu is %s, expected %s", first,
	    format_element(last->data, first, st->dtype, got, sizeof(got)),
	    format_element(want, first, st->dtype, expected, sizeof(expected)));
	if (st->count > 1)
		snprintf(what + strlen(what), size - strlen(what),
		    " (%zu of %llu elements differ)", differ,
		    (unsigned long long)st->count);
	return -1;
}

/* Token i of want against rank i's text. */
static int
compare_tokens(const struct result *last, const char *want, char *what,
    size_t size)
{
	char a[CLIP_MAX + 8], b[CLIP_MAX + 8];
	size_t i, len;

	for (i = 0;; i++) {
		want += strspn(want, " \t");
		if (*want == '\0')
			break;
		len = strcspn(want, " \t");
		if (i < last->ntexts && (strlen(last->texts[i]) != len ||
		    memcmp(last->texts[i], want, len) != 0)) {
			snprintf(b, sizeof(b), "%.*s", (int)(len < CLIP_MAX ?
			    len : CLIP_MAX), want);
			snprintf(what, size, "rank %zu's text is '%s', "
			    "expected '%s'", i,
			    clip(last->texts[i], a, sizeof(a)), b);
			return -1;
		}
		want += len;
	}
	if (i == last->ntexts)
		return 0;
	snprintf(what, size, "got %zu text%s, expected %zu", last->ntexts,
	    last->ntexts == 1 ? "" : "s", i);
	return -1;
}

/* The texts joined by single spaces; NULL when out of memory. */
static char *
joined(const struct result *last)
{
	size_t n = 0;
	char *s;

	for (size_t i = 0; i < last->ntexts; i++)
		n += strlen(last->texts[i]) + 1;
	if ((s = calloc(1, n + 1)) == NULL)
		return NULL;
	for (size_t i = 0; i < last->ntexts; i++) {
		if (i > 0)
			strcat(s, " ");
		strcat(s, last->texts[i]);
	}
	return s;
}

/*
 * A broadcast's text against the whole of want; an allgather's texts
 * token by token, or joined by spaces against the whole of want when a
 * text is empty or holds a blank (tokens could not tell them apart).
 */
static int
compare_texts(const struct result *last, const char *want, char *what,
    size_t size)
{
	char a[CLIP_MAX + 8], b[CLIP_MAX + 8], *all = NULL;
	const char *got = last->texts[0];
	size_t i;
	int rc;

	if (last->st->kind == ALLGATHER) {
		for (i = 0; i < last->ntexts; i++)
			if (last->texts[i][0] == '\0' ||
			    strpbrk(last->texts[i], " \t") != NULL)
				break;
		if (i == last->ntexts)
			return compare_tokens(last, want, what, size);
		if ((got = all = joined(last)) == NULL) {
			snprintf(what, size, "out of memory");
			return -1;
		}
	}
	rc = strcmp(got, want) == 0 ? 0 : -1;
	if (rc != 0)
		snprintf(what, size, "got '%s', expected '%s'",
		    clip(got, a, sizeof(a)), clip(want, b, sizeof(b)));
	free(all);
	return rc;
}

static int
expect_failed(struct runner *r, const struct stmt *st, const char *what)
{
	struct sr_error err;
	char message[SR_MESSAGE_MAX + 64];

	sr_error_clear(&err);
	err.code = SR_EABORTED;
	err.phase = SR_PHASE_COLLECTIVE;
	err.rank = r->rank;
	snprintf(message, sizeof(message), "%s:%u: expect failed: %s",
	    r->script->name, st->line, what);
	message[sizeof(err.message) - 1] = '\0';
	memcpy(err.message, message, sizeof(err.message));
	cli_error("%s", err.message);
	if (r->json) {
		fprintf(r->out, "{\"type\":\"error\",\"rank\":%u,\"code\":"
		    "\"expect\",\"line\":%u,\"message\":", r->rank, st->line);
		json_string(r->out, err.message);
		fprintf(r->out, ",\"exit\":%d}\n", EXIT_CHECK);
		fflush(r->out);
	}
	sr_ring_abort(r->ring, &err);
	return EXIT_CHECK;
}

static int
run_expect(struct runner *r, const struct stmt *st)
{
	char what[SR_MESSAGE_MAX], *want;
	uint8_t *data;
	int rc;

	if (st->checks == ALLREDUCE) {
		data = malloc(st->count * sr_dtype_size(st->dtype));
		if (data == NULL)
			return out_of_memory(r, st);
		if ((rc = fill(r, st, data)) != EXIT_OK) {
			free(data);
			return rc;
		}
		rc = compare_values(&r->last, data, what, sizeof(what));
		free(data);
	} else {
		if ((want = substitute(st->text, r)) == NULL)
			return out_of_memory(r, st);
		rc = compare_texts(&r->last, want, what, sizeof(what));
		free(want);
	}
	if (rc != 0)
		return expect_failed(r, st, what);
	if (r->json)
		fprintf(r->out, "{\"type\":\"expect\",\"rank\":%u,\"line\":%u,"
		    "\"ok\":true}\n", r->rank, st->line);
	else
		fprintf(r->out, "line %u: expect = ok\n", st->line);
	return finish_line(r, st);
}

static int
run_statement(struct runner *r, const struct stmt *st)
{
	if (cli_interrupted)
		return fail_with(r, st, SR_EINTERRUPTED, -1, "interrupted");
	switch (st->kind) {
	case ALLREDUCE: return run_allreduce(r, st);
	case ALLGATHER: return run_allgather(r, st);
	case BROADCAST: return run_broadcast(r, st);
	case BARRIER: return run_barrier(r, st);
	case SLEEP: return run_sleep(r, st);
	default: return run_expect(r, st);
	}
}

int
script_run(const struct script *script, struct sr_ring *ring, FILE *out,
    bool json)
{
	struct runner r = { .script = script, .ring = ring, .out = out,
		.json = json, .rank = sr_ring_rank(ring),
		.world = sr_ring_world(ring) };
	int rc = EXIT_OK;

	for (size_t i = 0; i < script->n && rc == EXIT_OK; i++)
		rc = run_statement(&r, &script->stmts[i]);
	result_clear(&r.last);
	return rc;
}
