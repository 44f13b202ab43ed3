/*
 * fuzz_script.c - the script language of `silvic-ring run` (the parser
 * of cli/script.c, the VALUE tokens of cli/expr.c, the runner of
 * cli/script_run.c) against arbitrary text: every input is parsed, and a
 * script that parses is also run on a world of one (no sockets), its
 * output going to /dev/null, JSON when the input's length is odd.
 *
 * Checked: a failed parse leaves no script and says "fuzz:LINE:COL: "
 * with a line of the text; a parsed script holds one statement per line
 * that is not blank or a comment; a run ends in one of the statuses a
 * world of one can reach, and only a script with an expect fails one.
 *
 * Not run: scripts that mention "sleep" (a fuzzed sleep would stall the
 * fuzzer), and scripts whose N*V counts could ask for more than
 * RUN_ELEMENTS_MAX elements in all (the parser allows 1 GiB a buffer;
 * allocating that per input would only measure the allocator).
 */
#include <string.h>

#include "cli.h"
#include "fuzz.h"
#include "script.h"

#define RUN_ELEMENTS_MAX (1u << 20)

static bool
blank_or_end(char c)
{
	return c == ' ' || c == '\t' || c == '\r' || c == '\n' || c == '#' ||
	    c == '\0';
}

/*
 * An upper bound on the elements the script's values make: every token
 * of the whole text counts one, or N when it starts "N*" (N digits with
 * an optional K, M or G, as expr.h has it).  Saturates at UINT64_MAX.
 */
static uint64_t
elements_bound(const char *text, size_t len)
{
	uint64_t total = 0, copies;
	size_t i = 0, start, j;
	int shift;

	while (i < len) {
		if (blank_or_end(text[i])) {
			i++;
			continue;
		}
		start = i;
		while (i < len && !blank_or_end(text[i]))
			i++;
		copies = 1;
		for (j = start; j < i && text[j] >= '0' && text[j] <= '9'; j++)
			;
		if (j > start && j < i) {
			shift = text[j] == 'K' ? 10 : text[j] == 'M' ? 20 :
			    text[j] == 'G' ? 30 : 0;
			if (shift)
				j++;
			if (j < i && text[j] == '*') {
				/* More than 19 digits always overflows. */
				copies = j - start - (shift != 0) > 19 ?
				    UINT64_MAX : strtoull(text + start, NULL, 10);
				copies = copies > (UINT64_MAX >> shift) ?
				    UINT64_MAX : copies << shift;
			}
		}
		total = total > UINT64_MAX - copies ? UINT64_MAX :
		    total + copies;
	}
	return total;
}

/* Lines holding a statement: something before any '#' but blanks. */
static size_t
statement_lines(const char *text, size_t len, size_t *lines)
{
	size_t n = 0, i = 0;

	*lines = 0;
	while (i < len) {
		while (i < len && (text[i] == ' ' || text[i] == '\t' ||
		    text[i] == '\r'))
			i++;
		n += i < len && text[i] != '\n' && text[i] != '#';
		while (i < len && text[i] != '\n')
			i++;
		i++;
		++*lines;
	}
	return n;
}

/* "fuzz:LINE:COL: ..." with LINE one of the text's lines. */
static void
check_message(const char *why, size_t size, size_t lines)
{
	const char *p = why + 5;

	FUZZ_CHECK(memchr(why, '\0', size) != NULL);
	FUZZ_CHECK(strncmp(why, "fuzz:", 5) == 0);
	FUZZ_CHECK(*p >= '1' && *p <= '9');
	FUZZ_CHECK(strtoull(p, NULL, 10) <= lines);
	p += strspn(p, "0123456789");
	FUZZ_CHECK(*p == ':');
	p++;
	FUZZ_CHECK(*p >= '1' && *p <= '9');
	p += strspn(p, "0123456789");
	FUZZ_CHECK(strncmp(p, ": ", 2) == 0);
}

static void
run(const struct script *script, bool json, bool has_expect)
{
	const char *addrs[] = { "127.0.0.1:1" };
	struct sr_ring *ring;
	struct sr_error err;
	FILE *out;
	int rc;

	FUZZ_CHECK(sr_ring_connect(&ring, NULL, 0, addrs, 1, 0, NULL,
	    &err) == 0);
	out = fopen("/dev/null", "w");
	FUZZ_CHECK(out != NULL);
	rc = script_run(script, ring, out, json);
	/* A world of one cannot lose a peer or fall out of step: only an
	 * expect, a value or root that does not fit once {rank} and
	 * {world} are known, or memory can fail it. */
	FUZZ_CHECK(rc == EXIT_OK || rc == EXIT_CHECK || rc == EXIT_USAGE ||
	    rc == EXIT_INTERNAL);
	FUZZ_CHECK(rc != EXIT_CHECK || has_expect);
	fclose(out);
	sr_ring_close(ring);
}

int
LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
	const char *text = (const char *)data;
	struct script *script = (struct script *)1;
	char why[512];
	size_t lines, statements = statement_lines(text, size, &lines);
	int rc;

	memset(why, 'x', sizeof(why));
	rc = script_parse(text, size, "fuzz", &script, why, sizeof(why));
	FUZZ_CHECK(rc == 0 || rc == -1);
	if (rc != 0) {
		FUZZ_CHECK(script == NULL);
		check_message(why, sizeof(why), lines);
		return 0;
	}
	/* One statement a line that is not blank or a comment. */
	FUZZ_CHECK(script != NULL);
	FUZZ_CHECK(script_statements(script) == statements);
	if (memmem(text, size, "sleep", 5) == NULL &&
	    elements_bound(text, size) <= RUN_ELEMENTS_MAX)
		run(script, size & 1, memmem(text, size, "expect", 6) != NULL);
	script_free(script);
	return 0;
}
