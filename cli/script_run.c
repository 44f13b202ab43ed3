/*
 * script_run.c - the runner of `silvic-ring run`'s scripts: statements in,
 * collectives on the ring, one result line (or JSON object) each out.
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

/* The last allreduce, allgather or broadcast result, for expect. */
struct result {
	const struct stmt *st;
	uint8_t *data;		/* allreduce: st->count elements */
	char **texts;		/* allgather: one per member; broadcast: one */
	size_t ntexts;
	const uint32_t *ranks;	/* a group's: texts[i] is ranks[i]'s */
};

/* A group defined so far: this rank's handle, or NULL when it is not a
 * member. */
struct group_slot {
	const struct stmt *def;
	struct sr_group *group;
};

/* Where a collective runs: on the ring, or on a group (its members and
 * their ranks). */
struct scope {
	struct sr_group *group;
	uint32_t size;
	const uint32_t *ranks;
};

struct runner {
	const struct script *script;
	struct sr_ring *ring;
	FILE *out;
	bool json;
	uint32_t rank;
	uint32_t world;
	struct result last;
	struct group_slot *groups;
	size_t ngroups;
};

static double
since_us(int64_t start)
{
	return (double)(sr_clock_ns() - start) / 1e3;
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

/* The JSON record of a statement up to its "statement". */
static void
begin_record(struct runner *r, const struct stmt *st, const char *type)
{
	fprintf(r->out, "{\"type\":\"%s\",\"rank\":%u,\"world\":%u,"
	    "\"line\":%u,\"statement\":", type, r->rank, r->world, st->line);
	json_string(r->out, st->source);
}

/* "line N: [group G ]LABEL = ", or the JSON record up to its "op" (and
 * "group"). */
static void
begin_result(struct runner *r, const struct stmt *st, const char *label)
{
	if (!r->json) {
		if (st->group != 0 && st->kind != GROUP)
			fprintf(r->out, "line %u: group %u %s = ", st->line,
			    st->group, label);
		else
			fprintf(r->out, "line %u: %s = ", st->line, label);
		return;
	}
	begin_record(r, st, "result");
	fprintf(r->out, ",\"op\":\"%s\"", kind_names[st->kind]);
	if (st->group != 0)
		fprintf(r->out, ",\"group\":%u", st->group);
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
	err.rank = r->rank;
	sr_error_set(&err, SR_EIO, SR_PHASE_COLLECTIVE, "%s:%u: cannot write "
	    "the results", r->script->name, st->line);
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

/* ------------------------------------------------------- the scopes */

static int
scope_allreduce(struct runner *r, const struct scope *sc,
    const struct stmt *st, void *data, struct sr_error *err)
{
	if (sc->group != NULL)
		return sr_group_allreduce(sc->group, data, data, st->count,
		    st->dtype, st->op, err);
	return sr_allreduce(r->ring, data, data, st->count, st->dtype, st->op,
	    err);
}

static int
scope_allgather(struct runner *r, const struct scope *sc, const void *send,
    size_t bytes, void *recv, struct sr_error *err)
{
	if (sc->group != NULL)
		return sr_group_allgather(sc->group, send, bytes, recv, err);
	return sr_allgather(r->ring, send, bytes, recv, err);
}

/* root: a member index (the ring's: a rank). */
static int
scope_broadcast(struct runner *r, const struct scope *sc, void *buf,
    size_t bytes, uint32_t root, struct sr_error *err)
{
	if (sc->group != NULL)
		return sr_group_broadcast(sc->group, buf, bytes, root, err);
	return sr_broadcast(r->ring, buf, bytes, root, err);
}

static int
scope_barrier(struct runner *r, const struct scope *sc, struct sr_error *err)
{
	if (sc->group != NULL)
		return sr_group_barrier(sc->group, err);
	return sr_barrier(r->ring, err);
}

/* Member i's rank. */
static uint32_t
member_rank(const struct scope *sc, size_t i)
{
	return sc->ranks != NULL ? sc->ranks[i] : (uint32_t)i;
}

/* ------------------------------------------------------ the statements */

static int
run_allreduce(struct runner *r, const struct stmt *st, const struct scope *sc)
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
	start = sr_clock_ns();
	if (scope_allreduce(r, sc, st, data, &err) != 0) {
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
 * Every member's text in member order: their lengths first (u64 each),
 * then the texts padded to the longest.  0, or a reported exit status.
 */
static int
gather_texts(struct runner *r, const struct stmt *st, const struct scope *sc,
    const char *text, char **texts)
{
	size_t n = sc->size, longest = 0, len = strlen(text);
	uint8_t mine[8], *lens, *pad = NULL, *all = NULL;
	struct sr_error err;
	int rc = EXIT_OK;

	put_u64(mine, len);
	if ((lens = malloc(8 * n)) == NULL)
		return out_of_memory(r, st);
	if (scope_allgather(r, sc, mine, 8, lens, &err) != 0) {
		free(lens);
		return fail(r, st, &err);
	}
	for (size_t i = 0; i < n && rc == EXIT_OK; i++) {
		uint64_t their = get_u64(lens + 8 * i);

		if (their > SCRIPT_TEXT_MAX)
			rc = fail_with(r, st, SR_EOUT_OF_STEP,
			    member_rank(sc, i), "rank %u gathers a text of %llu "
			    "bytes, more than a script line makes",
			    member_rank(sc, i), (unsigned long long)their);
		else if (their > longest)
			longest = (size_t)their;
	}
	if (rc == EXIT_OK && longest > SCRIPT_BUFFER_MAX / n)
		rc = fail_with(r, st, SR_ECONFIG, -1, "texts of %zu bytes from "
		    "%zu %s are over the 1 GiB limit", longest, n,
		    sc->ranks != NULL ? "members" : "ranks");
	if (rc == EXIT_OK && ((pad = calloc(1, longest + 1)) == NULL ||
	    (all = malloc(longest * n + 1)) == NULL))
		rc = out_of_memory(r, st);
	if (rc == EXIT_OK) {
		memcpy(pad, text, len);
		if (scope_allgather(r, sc, pad, longest, all, &err) != 0)
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
run_allgather(struct runner *r, const struct stmt *st, const struct scope *sc)
{
	char *text = substitute(st->text, r), **texts;
	int64_t start;
	double us;
	int rc;

	texts = calloc(sc->size, sizeof(*texts));
	if (text == NULL || texts == NULL) {
		free(text);
		free(texts);
		return out_of_memory(r, st);
	}
	start = sr_clock_ns();
	rc = gather_texts(r, st, sc, text, texts);
	us = since_us(start);
	free(text);
	result_clear(&r->last);
	r->last = (struct result){ .st = st, .texts = texts,
		.ntexts = sc->size, .ranks = sc->ranks };
	if (rc != EXIT_OK)
		return rc;
	begin_result(r, st, "allgather");
	fputs(r->json ? ",\"result\":[" : "[", r->out);
	for (size_t i = 0; i < sc->size; i++) {
		if (i > 0)
			fputs(r->json ? "," : ", ", r->out);
		json_string(r->out, texts[i]);
	}
	fputc(']', r->out);
	return end_result(r, st, us, true);
}

/* ROOT's place in the scope: its rank on the ring, its member index in
 * a group (a rank that is not a member is an error). */
static int
root_of(struct runner *r, const struct stmt *st, const struct scope *sc,
    uint32_t root, uint32_t *place)
{
	char list[64];

	*place = root;
	if (sc->ranks == NULL)
		return EXIT_OK;
	for (uint32_t i = 0; i < sc->size; i++)
		if (sc->ranks[i] == root) {
			*place = i;
			return EXIT_OK;
		}
	return fail_with(r, st, SR_ECONFIG, -1, "broadcast root %u is not in "
	    "group %u (%s)", root, st->group,
	    rank_list_format(sc->ranks, sc->size, list, sizeof(list)));
}

/* root's text on every rank: its length (u64) first, then the bytes. */
static int
run_broadcast(struct runner *r, const struct stmt *st, const struct scope *sc)
{
	char why[SR_MESSAGE_MAX], label[32], *text, *got, **texts;
	uint8_t len[8];
	struct sr_error err;
	uint32_t root, place;
	uint64_t n;
	int64_t start;
	double us;
	int rc;

	if (expr_value_eval(st->values, EXPR_ROOT, SR_U32, r->rank, r->world,
		&root, why, sizeof(why)) != 0)
		return fail_with(r, st, SR_ECONFIG, -1, "%s", why);
	if ((rc = root_of(r, st, sc, root, &place)) != EXIT_OK)
		return rc;
	if ((text = substitute(st->text, r)) == NULL)
		return out_of_memory(r, st);
	put_u64(len, strlen(text));
	start = sr_clock_ns();
	if (scope_broadcast(r, sc, len, 8, place, &err) != 0) {
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
	if (scope_broadcast(r, sc, got, (size_t)n, place, &err) != 0) {
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
run_barrier(struct runner *r, const struct stmt *st, const struct scope *sc)
{
	struct sr_error err;
	int64_t start = sr_clock_ns();
	double us;

	if (scope_barrier(r, sc, &err) != 0)
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
	int64_t start = sr_clock_ns();
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
			snprintf(what, size, "rank %u's text is '%s', "
			    "expected '%s'", last->ranks != NULL ?
			    last->ranks[i] : (uint32_t)i,
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

	sr_error_clear(&err);
	err.rank = r->rank;
	sr_error_set(&err, SR_ECHECK, SR_PHASE_COLLECTIVE, "%s:%u: expect "
	    "failed: %s", r->script->name, st->line, what);
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

/*
 * group ID RANKS: every rank checks the ranks against the world (each
 * fails alike), and the members create the group.  "line 1: group 1 =
 * 0,2 (member 0 of 2)", or "(not a member)".
 */
static int
run_group(struct runner *r, const struct stmt *st)
{
	struct group_slot *slot;
	struct sr_group *g = NULL;
	struct sr_error err;
	char list[96], label[32];
	size_t member = st->nranks;

	for (size_t i = 0; i < st->nranks; i++) {
		if (st->ranks[i] >= r->world)
			return fail_with(r, st, SR_ECONFIG, -1, "group %u: rank "
			    "%u is out of range for a world of %u", st->group,
			    st->ranks[i], r->world);
		if (st->ranks[i] == r->rank)
			member = i;
	}
	if (member < st->nranks && sr_group_new(&g, r->ring, st->group,
	    st->ranks, st->nranks, &err) != 0)
		return fail(r, st, &err);
	slot = realloc(r->groups, (r->ngroups + 1) * sizeof(*slot));
	if (slot == NULL) {
		sr_group_free(g);
		return out_of_memory(r, st);
	}
	r->groups = slot;
	r->groups[r->ngroups++] = (struct group_slot){ .def = st, .group = g };
	rank_list_format(st->ranks, st->nranks, list, sizeof(list));
	snprintf(label, sizeof(label), "group %u", st->group);
	begin_result(r, st, label);
	if (r->json) {
		fputs(",\"ranks\":[", r->out);
		for (size_t i = 0; i < st->nranks; i++)
			fprintf(r->out, "%s%u", i > 0 ? "," : "", st->ranks[i]);
		if (g != NULL)
			fprintf(r->out, "],\"member\":%zu", member);
		else
			fputs("],\"member\":null", r->out);
		fputs(",\"result\":null", r->out);
	} else if (g != NULL) {
		fprintf(r->out, "%s (member %zu of %zu)", list, member,
		    st->nranks);
	} else {
		fprintf(r->out, "%s (not a member)", list);
	}
	return end_result(r, st, 0, false);
}

/* A statement of a group this rank is not in: one line says so. */
static int
run_skipped(struct runner *r, const struct stmt *st)
{
	if (r->json) {
		begin_record(r, st, "skipped");
		fprintf(r->out, ",\"group\":%u}\n", st->group);
	} else {
		fprintf(r->out, "line %u: %s = skipped (not in group %u)\n",
		    st->line, st->source, st->group);
	}
	return finish_line(r, st);
}

static const struct group_slot *
find_group(const struct runner *r, uint32_t id)
{
	for (size_t i = 0; i < r->ngroups; i++)
		if (r->groups[i].def->group == id)
			return &r->groups[i];
	return NULL;
}

static int
run_statement(struct runner *r, const struct stmt *st)
{
	struct scope sc = { .size = r->world };
	const struct group_slot *slot;

	if (cli_interrupted)
		return fail_with(r, st, SR_EINTERRUPTED, -1, "interrupted");
	if (st->kind == GROUP)
		return run_group(r, st);
	/* The parser put the definition first, and it ran. */
	if (st->group != 0 && (slot = find_group(r, st->group)) != NULL) {
		if (slot->group == NULL)
			return run_skipped(r, st);
		sc = (struct scope){ .group = slot->group,
			.size = sr_group_size(slot->group),
			.ranks = slot->def->ranks };
	}
	switch (st->kind) {
	case ALLREDUCE: return run_allreduce(r, st, &sc);
	case ALLGATHER: return run_allgather(r, st, &sc);
	case BROADCAST: return run_broadcast(r, st, &sc);
	case BARRIER: return run_barrier(r, st, &sc);
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

	for (size_t i = 0; i < script->n && rc == EXIT_OK; i++) {
		rc = run_statement(&r, &script->stmts[i]);
		cli_note_cpu(ring);
	}
	result_clear(&r.last);
	/* Before the ring closes: a group does not outlive it. */
	for (size_t i = 0; i < r.ngroups; i++)
		sr_group_free(r.groups[i].group);
	free(r.groups);
	return rc;
}
