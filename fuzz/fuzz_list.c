/*
 * fuzz_list.c - the address list formats of cli/list.c against arbitrary
 * text: list_parse (a plain list, or an MLX hostfile when the first
 * non-blank byte is '[') and list_parse_words (the env:VAR form).
 *
 * The first byte picks the parser and the size of the message buffer:
 *	bit 0	0: list_parse, 1: list_parse_words
 *	bits 1-2	why_size: 512, 64, 8 or 1
 * The rest is the text: for list_parse exactly those bytes (not
 * NUL-terminated), for list_parse_words the bytes up to the first NUL.
 *
 * A parsed list must hold only host:port or [v6]:port with a port of
 * 1-65535, without duplicates, and must read back the same from every
 * format: a plain list, an MLX hostfile and a word list.
 *
 * The fuzzer once found addresses holding '#', control bytes or more
 * than SR_ADDR_MAX bytes that list.c let through; they are refused now,
 * and the inputs stay in the corpus as regress-*.
 */
#include <string.h>

#include "fuzz.h"
#include "rendezvous.h"

static const size_t why_sizes[] = { 512, 64, 8, 1 };

/* Independent of list.c: host:port or [...]:port, port 1-65535 in
 * decimal, no blank, quote, backslash or comma. */
static bool
is_address(const char *a)
{
	const char *colon, *p;
	unsigned long port = 0;

	if (a[0] == '\0' || strpbrk(a, " \t\"'\\,") != NULL)
		return false;
	if (a[0] == '[') {
		p = strchr(a, ']');
		if (p == NULL || p == a + 1 || p[1] != ':')
			return false;
		colon = p + 1;
	} else {
		colon = strchr(a, ':');
		if (colon == NULL || colon == a || strchr(colon + 1, ':'))
			return false;
	}
	if (colon[1] == '\0')
		return false;
	for (p = colon + 1; *p; p++) {
		if (*p < '0' || *p > '9')
			return false;
		port = port * 10 + (unsigned long)(*p - '0');
		if (port > 65535)
			return false;
	}
	return port >= 1;
}

/* Whether every list format can carry the address unchanged and the
 * core can hold it: no '#', no control byte, shorter than SR_ADDR_MAX.
 * Not so for some addresses list.c accepts (see above). */
static bool
carriable(const char *a)
{
	if (strlen(a) >= SR_ADDR_MAX || strchr(a, '#') != NULL)
		return false;
	for (; *a; a++)
		if ((unsigned char)*a < 0x20 || *a == 0x7f)
			return false;
	return true;
}

/* Every parsed address must be carriable (list.c rejects the rest). */
#define KNOWN_GAP(a) false

static int
compare(const void *a, const void *b)
{
	return strcmp(*(char *const *)a, *(char *const *)b);
}

static void
check_list(const struct peer_list *list)
{
	char **sorted;

	FUZZ_CHECK(list->n <= LIST_MAX_RANKS);
	FUZZ_CHECK(list->n > 0 || list->addr == NULL);
	if (list->n == 0)
		return;
	for (uint64_t i = 0; i < list->n; i++)
		FUZZ_CHECK(is_address(list->addr[i]) &&
		    (carriable(list->addr[i]) || KNOWN_GAP(list->addr[i])));
	sorted = malloc(list->n * sizeof(*sorted));
	FUZZ_CHECK(sorted != NULL);
	memcpy(sorted, list->addr, list->n * sizeof(*sorted));
	qsort(sorted, list->n, sizeof(*sorted), compare);
	for (uint64_t i = 1; i < list->n; i++)
		FUZZ_CHECK(strcmp(sorted[i - 1], sorted[i]) != 0);
	free(sorted);
}

static void
check_failed(int rc, const struct peer_list *list, const char *why,
    size_t why_size)
{
	FUZZ_CHECK(rc == -1);
	FUZZ_CHECK(list->n == 0 && list->addr == NULL);
	FUZZ_CHECK(memchr(why, '\0', why_size) != NULL);
	FUZZ_CHECK(why_size == 1 || why[0] != '\0');
}

static bool
same_list(const struct peer_list *a, const struct peer_list *b)
{
	if (a->n != b->n)
		return false;
	for (uint64_t i = 0; i < a->n; i++)
		if (strcmp(a->addr[i], b->addr[i]) != 0)
			return false;
	return true;
}

/* The list written as text in one of three forms. */
enum form { PLAIN, MLX, WORDS };

static char *
render(const struct peer_list *list, enum form form)
{
	size_t len = 16;
	char *text, *p;

	for (uint64_t i = 0; i < list->n; i++)
		len += strlen(list->addr[i]) + 8;
	p = text = malloc(len);
	FUZZ_CHECK(text != NULL);
	/* A comment first: "[v6]:port" on the first line would read as
	 * an MLX hostfile. */
	p += sprintf(p, "%s", form == PLAIN ? "# fuzz\n" : form == MLX ?
	    "[" : "");
	for (uint64_t i = 0; i < list->n; i++)
		p += sprintf(p, form == PLAIN ? "%s%s\n" : form == MLX ?
		    "%s[\"%s\"]" : "%s%s", form == PLAIN || i == 0 ? "" : ",",
		    list->addr[i]);
	if (form == MLX)
		strcpy(p, "]");
	return text;
}

static void
check_reads_back(const struct peer_list *list)
{
	static const enum form forms[] = { PLAIN, MLX, WORDS };
	struct peer_list again;
	char why[512], *text;
	int rc;

	for (uint64_t i = 0; i < list->n; i++)
		if (KNOWN_GAP(list->addr[i]))
			return;
	for (size_t f = 0; f < sizeof(forms) / sizeof(forms[0]); f++) {
		text = render(list, forms[f]);
		if (forms[f] == WORDS)
			rc = list_parse_words(text, "again", &again, why,
			    sizeof(why));
		else
			rc = list_parse(text, strlen(text), "again", &again,
			    why, sizeof(why));
		if (rc != 0)
			fprintf(stderr, "form %zu: %s\n", f, why);
		FUZZ_CHECK(rc == 0);
		FUZZ_CHECK(same_list(list, &again));
		peer_list_free(&again);
		free(text);
	}
}

int
LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
	struct peer_list list;
	size_t why_size;
	char *text, *why;
	int rc;

	if (size < 1)
		return 0;
	why_size = why_sizes[(data[0] >> 1) & 3];
	why = malloc(why_size);
	FUZZ_CHECK(why != NULL);
	memset(why, 'x', why_size);
	if ((data[0] & 1) == 0) {
		/* Exactly the bytes, without a NUL after them. */
		text = malloc(size - 1 ? size - 1 : 1);
		FUZZ_CHECK(text != NULL);
		memcpy(text, data + 1, size - 1);
		rc = list_parse(text, size - 1, "fuzz", &list, why, why_size);
	} else {
		text = malloc(size);
		FUZZ_CHECK(text != NULL);
		memcpy(text, data + 1, size - 1);
		text[size - 1] = '\0';
		rc = list_parse_words(text, "fuzz", &list, why, why_size);
	}
	if (rc == 0) {
		check_list(&list);
		check_reads_back(&list);
		peer_list_free(&list);
		FUZZ_CHECK(list.n == 0 && list.addr == NULL);
	} else {
		check_failed(rc, &list, why, why_size);
	}
	free(text);
	free(why);
	return 0;
}
