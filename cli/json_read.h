/*
 * json_read.h - a small JSON reader (json_read.c) for the records
 * silvic-ring writes and reads back (a bench pairs baseline): one text in,
 * a tree out, or a message saying where and what was wrong.  Strict
 * RFC 8259: no comments, no trailing commas, no NaN; strings are UTF-8
 * without NUL; nesting at most JSON_DEPTH_MAX deep; a repeated key in
 * one object is an error, not a guess.
 */
#ifndef SR_JSON_READ_H
#define SR_JSON_READ_H

#include <stdbool.h>
#include <stddef.h>

#define JSON_DEPTH_MAX 32

enum json_type {
	JSON_NULL,
	JSON_FALSE,
	JSON_TRUE,
	JSON_NUMBER,
	JSON_STRING,
	JSON_ARRAY,
	JSON_OBJECT
};

struct json_value {
	enum json_type type;
	double number;			/* JSON_NUMBER */
	char *string;			/* JSON_STRING, NUL-terminated */
	size_t count;			/* JSON_ARRAY and JSON_OBJECT */
	struct json_value *items;	/* their elements, or values */
	char **keys;			/* JSON_OBJECT's keys */
};

/*
 * Parses text[0 .. len) as one JSON value (whitespace around it).  0 and
 * *out filled (free with json_free), or -1 with why ("column 14:
 * expected ':' after a key") and *out empty.
 */
int json_parse(const char *text, size_t len, struct json_value *out,
    char *why, size_t why_size);
void json_free(struct json_value *v);

/* An object's value for key, or NULL (also when v is not an object). */
const struct json_value *json_get(const struct json_value *v,
    const char *key);
/* The length of the valid UTF-8 sequence of two to four bytes at p
 * (before end), or 0: overlong forms, surrogates and code points past
 * U+10FFFF are not valid. */
size_t json_utf8_length(const unsigned char *p, const unsigned char *end);
/* Whether v is a number that is a whole number from 0 to max. */
bool json_is_index(const struct json_value *v, double max);

#endif
