/*
 * json_read.c - a strict recursive-descent JSON reader (see json_read.h).
 * Pure: text in, tree or message out.  Every length comes from the text
 * and every allocation is checked; depth is bounded so a line of '['
 * cannot exhaust the stack.
 */
#include <math.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "json_read.h"

struct reader {
	const char *p, *start, *end;
	char *why;
	size_t why_size;
	int depth;
};

static int parse_value(struct reader *r, struct json_value *out);

static int
fail(struct reader *r, const char *what)
{
	snprintf(r->why, r->why_size, "column %zu: %s",
	    (size_t)(r->p - r->start) + 1, what);
	return -1;
}

static void
skip_space(struct reader *r)
{
	while (r->p < r->end && (*r->p == ' ' || *r->p == '\t' ||
	    *r->p == '\n' || *r->p == '\r'))
		r->p++;
}

static int
literal(struct reader *r, const char *word, enum json_type type,
    struct json_value *out)
{
	size_t n = strlen(word);

	if ((size_t)(r->end - r->p) < n || memcmp(r->p, word, n) != 0)
		return fail(r, "not a JSON value");
	r->p += n;
	out->type = type;
	return 0;
}

static bool
digit(const struct reader *r)
{
	return r->p < r->end && *r->p >= '0' && *r->p <= '9';
}

/* RFC 8259's number: -?(0|[1-9][0-9]*)(\.[0-9]+)?([eE][+-]?[0-9]+)? */
static int
number(struct reader *r, struct json_value *out)
{
	const char *from = r->p;
	char buf[64];

	if (r->p < r->end && *r->p == '-')
		r->p++;
	if (!digit(r))
		return fail(r, "not a JSON value");
	if (*r->p == '0')
		r->p++;
	else
		while (digit(r))
			r->p++;
	if (r->p < r->end && *r->p == '.') {
		r->p++;
		if (!digit(r))
			return fail(r, "a digit must follow '.'");
		while (digit(r))
			r->p++;
	}
	if (r->p < r->end && (*r->p == 'e' || *r->p == 'E')) {
		r->p++;
		if (r->p < r->end && (*r->p == '+' || *r->p == '-'))
			r->p++;
		if (!digit(r))
			return fail(r, "a digit must follow the exponent");
		while (digit(r))
			r->p++;
	}
	if ((size_t)(r->p - from) >= sizeof(buf))
		return fail(r, "a number of more than 63 characters");
	memcpy(buf, from, (size_t)(r->p - from));
	buf[r->p - from] = '\0';
	out->type = JSON_NUMBER;
	out->number = strtod(buf, NULL);
	if (!isfinite(out->number))
		return fail(r, "a number out of range");
	return 0;
}

static int
hex4(struct reader *r, uint32_t *v)
{
	*v = 0;
	if (r->end - r->p < 4)
		return fail(r, "\\u needs four hex digits");
	for (int i = 0; i < 4; i++) {
		char c = *r->p++;

		*v <<= 4;
		if (c >= '0' && c <= '9')
			*v |= (uint32_t)(c - '0');
		else if (c >= 'a' && c <= 'f')
			*v |= (uint32_t)(c - 'a' + 10);
		else if (c >= 'A' && c <= 'F')
			*v |= (uint32_t)(c - 'A' + 10);
		else
			return fail(r, "\\u needs four hex digits");
	}
	return 0;
}

static size_t
put_utf8(char *out, uint32_t c)
{
	if (c < 0x80) {
		out[0] = (char)c;
		return 1;
	}
	if (c < 0x800) {
		out[0] = (char)(0xc0 | c >> 6);
		out[1] = (char)(0x80 | (c & 0x3f));
		return 2;
	}
	if (c < 0x10000) {
		out[0] = (char)(0xe0 | c >> 12);
		out[1] = (char)(0x80 | (c >> 6 & 0x3f));
		out[2] = (char)(0x80 | (c & 0x3f));
		return 3;
	}
	out[0] = (char)(0xf0 | c >> 18);
	out[1] = (char)(0x80 | (c >> 12 & 0x3f));
	out[2] = (char)(0x80 | (c >> 6 & 0x3f));
	out[3] = (char)(0x80 | (c & 0x3f));
	return 4;
}

/* A \u escape (past the 'u'), a surrogate pair as one character. */
static int
unicode_escape(struct reader *r, uint32_t *c)
{
	uint32_t low;

	if (hex4(r, c) != 0)
		return -1;
	if (*c >= 0xdc00 && *c <= 0xdfff)
		return fail(r, "a lone low surrogate");
	if (*c < 0xd800 || *c > 0xdbff)
		return *c == 0 ? fail(r, "a NUL character in a string") : 0;
	if (r->end - r->p < 2 || r->p[0] != '\\' || r->p[1] != 'u')
		return fail(r, "a high surrogate without its low half");
	r->p += 2;
	if (hex4(r, &low) != 0)
		return -1;
	if (low < 0xdc00 || low > 0xdfff)
		return fail(r, "a high surrogate without its low half");
	*c = 0x10000 + ((*c - 0xd800) << 10) + (low - 0xdc00);
	return 0;
}

static int
escape(struct reader *r, char *buf, size_t *n)
{
	static const char from[] = "\"\\/bfnrt", to[] = "\"\\/\b\f\n\r\t";
	const char *at;
	uint32_t c;

	if (r->p >= r->end)
		return fail(r, "an unterminated string");
	if (*r->p == 'u') {
		r->p++;
		if (unicode_escape(r, &c) != 0)
			return -1;
		*n += put_utf8(buf + *n, c);
		return 0;
	}
	if ((at = memchr(from, *r->p, sizeof(from) - 1)) == NULL)
		return fail(r, "an unknown escape");
	r->p++;
	buf[(*n)++] = to[at - from];
	return 0;
}

size_t
json_utf8_length(const unsigned char *p, const unsigned char *end)
{
	size_t n = *p < 0xc2 ? 0 : *p < 0xe0 ? 2 : *p < 0xf0 ? 3 :
	    *p < 0xf5 ? 4 : 0;

	if (n == 0 || (size_t)(end - p) < n)
		return 0;
	for (size_t i = 1; i < n; i++)
		if ((p[i] & 0xc0) != 0x80)
			return 0;
	if ((n == 3 && ((p[0] == 0xe0 && p[1] < 0xa0) || (p[0] == 0xed &&
	    p[1] >= 0xa0))) || (n == 4 && ((p[0] == 0xf0 && p[1] < 0x90) ||
	    (p[0] == 0xf4 && p[1] >= 0x90))))
		return 0;
	return n;
}

/* A string (at its '"') into a new NUL-terminated buffer. */
static int
string(struct reader *r, char **out)
{
	const char *close;
	char *buf;
	size_t n = 0;

	r->p++;
	/* An escape never grows: the text's length bounds the result. */
	for (close = r->p; close < r->end && *close != '"'; close++)
		if (*close == '\\' && close + 1 < r->end)
			close++;
	if ((buf = malloc((size_t)(close - r->p) + 1)) == NULL)
		return fail(r, "out of memory");
	while (r->p < r->end && *r->p != '"') {
		unsigned char c = (unsigned char)*r->p;
		size_t len;

		if (c < 0x20) {
			free(buf);
			return fail(r, "a control character in a string");
		}
		if (c == '\\') {
			r->p++;
			if (escape(r, buf, &n) != 0) {
				free(buf);
				return -1;
			}
			continue;
		}
		len = c < 0x80 ? 1 : json_utf8_length(
		    (const unsigned char *)r->p, (const unsigned char *)r->end);
		if (len == 0) {
			free(buf);
			return fail(r, "a string that is not UTF-8");
		}
		memcpy(buf + n, r->p, len);
		n += len;
		r->p += len;
	}
	if (r->p >= r->end) {
		free(buf);
		return fail(r, "an unterminated string");
	}
	r->p++;
	buf[n] = '\0';
	*out = buf;
	return 0;
}

/* Room for one more element of a list of *count, doubling. */
static int
grow(struct reader *r, struct json_value *v, bool keys)
{
	size_t n = v->count;
	void *items, *names;

	if (n & (n - 1) || (n != 0 && n < 4))
		return 0;
	n = n ? n * 2 : 4;
	if ((items = realloc(v->items, n * sizeof(*v->items))) == NULL)
		return fail(r, "out of memory");
	v->items = items;
	if (keys) {
		if ((names = realloc(v->keys, n * sizeof(*v->keys))) == NULL)
			return fail(r, "out of memory");
		v->keys = names;
	}
	return 0;
}

static int
array(struct reader *r, struct json_value *out)
{
	out->type = JSON_ARRAY;
	r->p++;
	skip_space(r);
	if (r->p < r->end && *r->p == ']') {
		r->p++;
		return 0;
	}
	for (;;) {
		skip_space(r);
		if (grow(r, out, false) != 0)
			return -1;
		/* Counted first: what a failure left inside is freed. */
		memset(&out->items[out->count++], 0, sizeof(*out->items));
		if (parse_value(r, &out->items[out->count - 1]) != 0)
			return -1;
		skip_space(r);
		if (r->p < r->end && *r->p == ',') {
			r->p++;
			continue;
		}
		if (r->p < r->end && *r->p == ']') {
			r->p++;
			return 0;
		}
		return fail(r, "expected ',' or ']'");
	}
}

static int
member(struct reader *r, struct json_value *out)
{
	char *key;

	if (r->p >= r->end || *r->p != '"')
		return fail(r, "expected a key (a string)");
	if (string(r, &key) != 0)
		return -1;
	for (size_t i = 0; i < out->count; i++)
		if (strcmp(out->keys[i], key) == 0) {
			free(key);
			return fail(r, "a key repeated in one object");
		}
	if (grow(r, out, true) != 0) {
		free(key);
		return -1;
	}
	out->keys[out->count] = key;
	memset(&out->items[out->count++], 0, sizeof(*out->items));
	skip_space(r);
	if (r->p >= r->end || *r->p != ':')
		return fail(r, "expected ':' after a key");
	r->p++;
	skip_space(r);
	return parse_value(r, &out->items[out->count - 1]);
}

static int
object(struct reader *r, struct json_value *out)
{
	out->type = JSON_OBJECT;
	r->p++;
	skip_space(r);
	if (r->p < r->end && *r->p == '}') {
		r->p++;
		return 0;
	}
	for (;;) {
		skip_space(r);
		if (member(r, out) != 0)
			return -1;
		skip_space(r);
		if (r->p < r->end && *r->p == ',') {
			r->p++;
			continue;
		}
		if (r->p < r->end && *r->p == '}') {
			r->p++;
			return 0;
		}
		return fail(r, "expected ',' or '}'");
	}
}

static int
parse_value(struct reader *r, struct json_value *out)
{
	int rc;

	memset(out, 0, sizeof(*out));
	if (r->p >= r->end)
		return fail(r, "the text ends where a value was expected");
	if (++r->depth > JSON_DEPTH_MAX) {
		r->depth--;
		return fail(r, "nested more than 32 deep");
	}
	switch (*r->p) {
	case '{':
		rc = object(r, out);
		break;
	case '[':
		rc = array(r, out);
		break;
	case '"':
		out->type = JSON_STRING;
		rc = string(r, &out->string);
		break;
	case 't':
		rc = literal(r, "true", JSON_TRUE, out);
		break;
	case 'f':
		rc = literal(r, "false", JSON_FALSE, out);
		break;
	case 'n':
		rc = literal(r, "null", JSON_NULL, out);
		break;
	default:
		rc = number(r, out);
		break;
	}
	r->depth--;
	return rc;
}

int
json_parse(const char *text, size_t len, struct json_value *out, char *why,
    size_t why_size)
{
	struct reader r = { text, text, text + len, why, why_size, 0 };

	skip_space(&r);
	if (parse_value(&r, out) != 0) {
		json_free(out);
		return -1;
	}
	skip_space(&r);
	if (r.p != r.end) {
		json_free(out);
		return fail(&r, "text after the value");
	}
	return 0;
}

void
json_free(struct json_value *v)
{
	for (size_t i = 0; i < v->count; i++) {
		json_free(&v->items[i]);
		if (v->keys != NULL)
			free(v->keys[i]);
	}
	free(v->items);
	free(v->keys);
	free(v->string);
	memset(v, 0, sizeof(*v));
}

const struct json_value *
json_get(const struct json_value *v, const char *key)
{
	if (v == NULL || v->type != JSON_OBJECT)
		return NULL;
	for (size_t i = 0; i < v->count; i++)
		if (strcmp(v->keys[i], key) == 0)
			return &v->items[i];
	return NULL;
}

bool
json_is_index(const struct json_value *v, double max)
{
	return v != NULL && v->type == JSON_NUMBER && v->number >= 0 &&
	    v->number <= max && v->number == floor(v->number);
}
