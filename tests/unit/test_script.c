/*
 * test_script.c - the script language of `silvic-ring run`: every parse
 * error with its exact message, comments and blank lines, expressions and
 * N*V lists, the range of every dtype, and script_run on a world of one
 * (exact human and JSON lines, expect success and failure) and on two
 * forked ranks over loopback (texts of different lengths, a failed expect
 * reaching the other rank).
 */
#include <signal.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/wait.h>
#include <unistd.h>

#include "check.h"
#include "cli.h"
#include "expr.h"
#include "rank_list.h"
#include "script.h"

/* ------------------------------------------------------------ helpers */

static void
parse_fails(const char *text, const char *want)
{
	struct script *s = (struct script *)1;
	char why[1024] = "";

	CHECKF(script_parse(text, strlen(text), "job.txt", &s, why,
	    sizeof(why)) == -1, "'%s' parsed", text);
	CHECK(s == NULL);
	CHECKF(strcmp(why, want) == 0, "\n#   got  '%s'\n#   want '%s'", why,
	    want);
}

static struct script *
parse_ok(const char *text)
{
	struct script *s = NULL;
	char why[1024] = "";

	CHECKF(script_parse(text, strlen(text), "job.txt", &s, why,
	    sizeof(why)) == 0, "'%s': %s", text, why);
	return s;
}

/* Reads a stdio stream or a descriptor's file back into a string. */
static char *
slurp_fd(int fd)
{
	char *buf = NULL;
	size_t len = 0;
	FILE *f = fdopen(dup(fd), "r");
	FILE *mem = open_memstream(&buf, &len);
	int c;

	rewind(f);
	while ((c = getc(f)) != EOF)
		putc(c, mem);
	fclose(f);
	fclose(mem);
	return buf;
}

/* Drops " (12.3 us)" and turns "time_us":12.3 into "time_us":T. */
static char *
untimed(char *s)
{
	char *r = s, *w = s;

	while (*r) {
		if (strncmp(r, " (", 2) == 0 && strstr(r, " us)\n") != NULL &&
		    strstr(r, " us)\n") < strchr(r, '\n')) {
			r = strstr(r, " us)\n") + 4;
			continue;
		}
		if (strncmp(r, "\"time_us\":", 10) == 0) {
			/* Past the digits first: the write may not overtake. */
			r += 10;
			r += strspn(r, "0123456789.");
			memcpy(w, "\"time_us\":T", 11);
			w += 11;
			continue;
		}
		*w++ = *r++;
	}
	*w = '\0';
	return s;
}

struct outcome {
	int status;
	char *out;	/* untimed */
	char *err;	/* what went to stderr */
	char *std;	/* what went to stdout (cli_report's JSON) */
};

static void
outcome_free(struct outcome *o)
{
	free(o->out);
	free(o->err);
	free(o->std);
}

/* Runs text on a fresh world of one; the ring is aborted afterwards when
 * *failure is not NULL, and its error left there. */
static struct outcome
run_one(const char *text, bool json, struct sr_error *failure)
{
	const char *addrs[] = { "127.0.0.1:1" };
	struct outcome o = { .status = -1 };
	struct sr_ring *ring = NULL;
	struct sr_error err;
	struct script *s = parse_ok(text);
	FILE *out, *err_file, *std_file;
	int saved_err, saved_std;

	if (s == NULL)
		return o;
	out = tmpfile();
	err_file = tmpfile();
	std_file = tmpfile();
	saved_err = dup(2);
	saved_std = dup(1);
	CHECK(sr_ring_connect(&ring, NULL, 0, addrs, 1, 0, NULL, &err) == 0);
	fflush(stdout);
	fflush(stderr);
	dup2(fileno(err_file), 2);
	dup2(fileno(std_file), 1);
	o.status = script_run(s, ring, out, json);
	fflush(stdout);
	fflush(stderr);
	dup2(saved_err, 2);
	dup2(saved_std, 1);
	close(saved_err);
	close(saved_std);
	fflush(out);
	o.out = untimed(slurp_fd(fileno(out)));
	o.err = slurp_fd(fileno(err_file));
	o.std = slurp_fd(fileno(std_file));
	if (failure != NULL)
		CHECK(sr_barrier(ring, failure) == -1);
	sr_ring_close(ring);
	script_free(s);
	fclose(out);
	fclose(err_file);
	fclose(std_file);
	return o;
}

static uint64_t
fnv1a(const void *p, size_t n)
{
	const uint8_t *b = p;
	uint64_t h = 0xcbf29ce484222325ULL;

	for (size_t i = 0; i < n; i++) {
		h ^= b[i];
		h *= 0x100000001b3ULL;
	}
	return h;
}

#define SAME(got, want)                                                        \
	do {                                                                   \
		const char *got_ = (got);                                      \
                                                                               \
		CHECKF(got_ != NULL && strcmp(got_, (want)) == 0,              \
		    "\n#   got  '%s'\n#   want '%s'",                       \
		    got_ != NULL ? got_ : "(null)", (want));                  \
	} while (0)

/* -------------------------------------------------------- parse errors */

static void
test_statement_errors(void)
{
	parse_fails("allreduce sum f16 1 2",
	    "job.txt:1:15: unknown dtype 'f16' in 'allreduce sum f16 1 2'");
	parse_fails("# a job\n\nallreduce sum f16 1 2\n",
	    "job.txt:3:15: unknown dtype 'f16' in 'allreduce sum f16 1 2'");
	parse_fails("barrier\nreduce sum i64 1",
	    "job.txt:2:1: unknown statement 'reduce' in 'reduce sum i64 1'");
	parse_fails("  Barrier",
	    "job.txt:1:3: unknown statement 'Barrier' in '  Barrier'");
	parse_fails("allreduce avg i64 1",
	    "job.txt:1:11: unknown op 'avg' in 'allreduce avg i64 1'");
	parse_fails("allreduce sum-of-all-the-values i64 1",
	    "job.txt:1:11: unknown op 'sum-of-all-the-values' in "
	    "'allreduce sum-of-all-the-values i64 1'");
	parse_fails("allreduce", "job.txt:1:10: missing op in 'allreduce'");
	parse_fails("allreduce sum   ",
	    "job.txt:1:14: missing dtype in 'allreduce sum'");
	parse_fails("allreduce sum i64",
	    "job.txt:1:18: missing values in 'allreduce sum i64'");
	parse_fails("allreduce sum i64 # none",
	    "job.txt:1:19: missing values in 'allreduce sum i64 # none'");
	parse_fails("barrier now",
	    "job.txt:1:9: unexpected 'now' after barrier in 'barrier now'");
	parse_fails("sleep", "job.txt:1:6: missing seconds in 'sleep'");
	parse_fails("sleep 1 2",
	    "job.txt:1:9: unexpected '2' after sleep in 'sleep 1 2'");
	parse_fails("sleep 2*1", "job.txt:1:7: sleep '2*1' is a list in "
	    "'sleep 2*1'");
	parse_fails("sleep 5000", "job.txt:1:7: sleep '5000' is out of range "
	    "(0 to 3600 seconds) in 'sleep 5000'");
	parse_fails("sleep -0.5", "job.txt:1:7: sleep '-0.5' is out of range "
	    "(0 to 3600 seconds) in 'sleep -0.5'");
	parse_fails("broadcast", "job.txt:1:10: missing root in 'broadcast'");
	parse_fails("broadcast # root", "job.txt:1:11: missing root in "
	    "'broadcast # root'");
	parse_fails("broadcast 1.5 x", "job.txt:1:11: root '1.5' is not an "
	    "integer in 'broadcast 1.5 x'");
	parse_fails("broadcast 1-2 x", "job.txt:1:11: root '1-2' is -1, out of "
	    "range in 'broadcast 1-2 x'");
	parse_fails("broadcast 4294967295 x", "job.txt:1:11: root '4294967295' "
	    "is out of range in 'broadcast 4294967295 x'");
	parse_fails("broadcast 2*0 x", "job.txt:1:11: root '2*0' is a list in "
	    "'broadcast 2*0 x'");
}

static void
test_group_errors(void)
{
	parse_fails("group", "job.txt:1:6: missing group id in 'group'");
	parse_fails("group 0 1,2", "job.txt:1:7: group id '0' is not a number "
	    "from 1 to 4294967295 (0 is the whole ring) in 'group 0 1,2'");
	parse_fails("group x 1", "job.txt:1:7: group id 'x' is not a number "
	    "from 1 to 4294967295 (0 is the whole ring) in 'group x 1'");
	parse_fails("group 4294967296 1", "job.txt:1:7: group id '4294967296' "
	    "is not a number from 1 to 4294967295 (0 is the whole ring) in "
	    "'group 4294967296 1'");
	parse_fails("group 3 # ranks?", "job.txt:1:9: group 3 needs its ranks "
	    "('group 3 0,2-3') or a statement to run in 'group 3 # ranks?'");
	parse_fails("group 3 0,,2", "job.txt:1:11: group 3: a rank is missing "
	    "between two ',' in 'group 3 0,,2'");
	parse_fails("group 3 0,", "job.txt:1:11: group 3: a rank is missing "
	    "after the last ',' in 'group 3 0,'");
	parse_fails("group 3 1,5-2", "job.txt:1:11: group 3: range '5-2' runs "
	    "backwards in 'group 3 1,5-2'");
	parse_fails("group 3 2,0-3", "job.txt:1:11: group 3: rank 2 is listed "
	    "twice in 'group 3 2,0-3'");
	parse_fails("group 3 1,a", "job.txt:1:11: group 3: 'a' is not a rank "
	    "or a range A-B in 'group 3 1,a'");
	parse_fails("group 3 0-70000", "job.txt:1:9: group 3: more than 65536 "
	    "ranks in 'group 3 0-70000'");
	parse_fails("group 3 0,1 2", "job.txt:1:13: unexpected '2' after group "
	    "in 'group 3 0,1 2'");
	parse_fails("group 3 0\ngroup 3 1", "job.txt:2:9: group 3 is already "
	    "defined on line 1 in 'group 3 1'");
	parse_fails("group 3 allreduce sum i64 1", "job.txt:1:7: group 3 is not "
	    "defined (a 'group 3 RANKS' line must come before) in 'group 3 "
	    "allreduce sum i64 1'");
	parse_fails("allreduce sum i64 1\ngroup 4 0\ngroup 3 barrier",
	    "job.txt:3:7: group 3 is not defined (a 'group 3 RANKS' line must "
	    "come before) in 'group 3 barrier'");
	parse_fails("group 3 0\ngroup 3 sleep 1", "job.txt:2:9: 'sleep' does "
	    "not run on a group (allreduce, allgather, broadcast and barrier "
	    "do) in 'group 3 sleep 1'");
	parse_fails("group 3 0\ngroup 3 expect 1", "job.txt:2:9: 'expect' "
	    "does not run on a group (allreduce, allgather, broadcast and "
	    "barrier do) in 'group 3 expect 1'");
	parse_fails("group 3 0\ngroup 3 allreduce avg i64 1", "job.txt:2:19: "
	    "unknown op 'avg' in 'group 3 allreduce avg i64 1'");
	parse_fails("group 3 0\ngroup 3 barrier now", "job.txt:2:17: "
	    "unexpected 'now' after barrier in 'group 3 barrier now'");
	parse_fails("group 3 0\ngroup 3 broadcast", "job.txt:2:18: missing "
	    "root in 'group 3 broadcast'");
}

/* Lists of ranks parse in member order and print back compactly. */
static void
test_rank_lists(void)
{
	static const char *const texts[] = { "0,2-4,7", "3,1,2", "5", "0-1,9" };
	static const char *const back[] = { "0,2-4,7", "3,1,2", "5", "0,1,9" };
	uint32_t *ranks, many[100];
	size_t n, at;
	char why[128], buf[32];

	for (size_t i = 0; i < 4; i++) {
		CHECKF(rank_list_parse(texts[i], strlen(texts[i]), &ranks, &n,
		    &at, why, sizeof(why)) == 0, "%s: %s", texts[i], why);
		if (ranks == NULL)
			continue;
		SAME(rank_list_format(ranks, n, buf, sizeof(buf)), back[i]);
		free(ranks);
	}
	CHECK(rank_list_parse("0-65535", 7, &ranks, &n, &at, why,
	    sizeof(why)) == 0 && n == 65536 && ranks[65535] == 65535);
	free(ranks);
	CHECK(rank_list_parse("", 0, &ranks, &n, &at, why, sizeof(why)) == -1 &&
	    ranks == NULL && strcmp(why, "no ranks") == 0);
	for (uint32_t i = 0; i < 100; i++)
		many[i] = 2 * i;
	SAME(rank_list_format(many, 100, buf, sizeof(buf)),
	    "0,2,4,6,8,10,12,14,16,18,20,...");
}

static void
test_expect_errors(void)
{
	parse_fails("expect 1", "job.txt:1:1: expect without an allreduce, "
	    "allgather or broadcast before it in 'expect 1'");
	parse_fails("barrier\n  expect 1", "job.txt:2:3: expect without an "
	    "allreduce, allgather or broadcast before it in '  expect 1'");
	parse_fails("allreduce sum i64 1 2 3\nexpect 1 2", "job.txt:2:8: "
	    "expect has 2 values, the allreduce on line 1 has 3 in "
	    "'expect 1 2'");
	parse_fails("allreduce sum i64 1 2 3\nbarrier\nexpect 2*1 1*2 1",
	    "job.txt:3:8: expect has 4 values, the allreduce on line 1 has 3 "
	    "in 'expect 2*1 1*2 1'");
	parse_fails("allreduce sum i64 4*1\nexpect 1", "job.txt:2:8: expect "
	    "has 1 value, the allreduce on line 1 has 4 in 'expect 1'");
	parse_fails("allreduce sum i64 1\nexpect", "job.txt:2:7: missing "
	    "values in 'expect'");
	parse_fails("allreduce sum u32 1\nexpect -1", "job.txt:2:8: value "
	    "'-1' is out of range for u32 in 'expect -1'");
	parse_fails("allreduce sum i64 1\nexpect 0.5", "job.txt:2:8: value "
	    "'0.5' is not an integer for i64 in 'expect 0.5'");
}

static void
test_value_errors(void)
{
	parse_fails("allreduce sum i64 1+", "job.txt:1:21: malformed value "
	    "'1+': missing a number at the end in 'allreduce sum i64 1+'");
	parse_fails("allreduce sum i64 1+*2", "job.txt:1:21: malformed value "
	    "'1+*2': unexpected '*' in 'allreduce sum i64 1+*2'");
	parse_fails("allreduce sum f64 (1+2", "job.txt:1:23: malformed value "
	    "'(1+2': missing ')' in 'allreduce sum f64 (1+2'");
	parse_fails("allreduce sum f64 1)", "job.txt:1:20: malformed value "
	    "'1)': unexpected ')' in 'allreduce sum f64 1)'");
	parse_fails("allreduce sum f64 {rnak}+1", "job.txt:1:19: malformed "
	    "value '{rnak}+1': unknown variable '{rnak}' in "
	    "'allreduce sum f64 {rnak}+1'");
	parse_fails("allreduce sum f64 {rank", "job.txt:1:19: malformed value "
	    "'{rank': unknown variable '{rank' in 'allreduce sum f64 {rank'");
	parse_fails("allreduce sum f64 1.2.3", "job.txt:1:22: malformed value "
	    "'1.2.3': unexpected '.' in 'allreduce sum f64 1.2.3'");
	parse_fails("allreduce sum f64 2e", "job.txt:1:20: malformed value "
	    "'2e': unexpected 'e' in 'allreduce sum f64 2e'");
	parse_fails("allreduce sum f64 .", "job.txt:1:19: malformed value "
	    "'.': unexpected '.' in 'allreduce sum f64 .'");
	parse_fails("allreduce sum f64 1K", "job.txt:1:20: malformed value "
	    "'1K': unexpected 'K' in 'allreduce sum f64 1K'");
	parse_fails("allreduce sum f64 2k*1", "job.txt:1:20: malformed value "
	    "'2k*1': unexpected 'k' in 'allreduce sum f64 2k*1'");
	parse_fails("allreduce sum f64 4*", "job.txt:1:21: malformed value "
	    "'4*': missing a number at the end in 'allreduce sum f64 4*'");
	parse_fails("allreduce sum f64 1e999", "job.txt:1:19: malformed value "
	    "'1e999': number '1e999' is too large in "
	    "'allreduce sum f64 1e999'");
	parse_fails("allreduce sum f64 1/0", "job.txt:1:19: value '1/0' "
	    "divides by zero in 'allreduce sum f64 1/0'");
	parse_fails("allreduce sum i64 1 4*5%0", "job.txt:1:23: value '5%0' "
	    "divides by zero in 'allreduce sum i64 1 4*5%0'");
	parse_fails("allreduce sum f64 1e308*10", "job.txt:1:19: value "
	    "'1e308*10' overflows in 'allreduce sum f64 1e308*10'");
	parse_fails("allreduce sum i64 0*5", "job.txt:1:19: count '0' is zero "
	    "in 'allreduce sum i64 0*5'");
	parse_fails("allreduce sum i64 0K*5", "job.txt:1:19: count '0K' is "
	    "zero in 'allreduce sum i64 0K*5'");
	parse_fails("allreduce sum i64 99999999999999999999*1", "job.txt:1:19: "
	    "count '99999999999999999999' is too large in "
	    "'allreduce sum i64 99999999999999999999*1'");
	parse_fails("allreduce sum i64 17179869184G*1", "job.txt:1:19: count "
	    "'17179869184G' is too large in "
	    "'allreduce sum i64 17179869184G*1'");
}

static void
test_size_errors(void)
{
	struct script *s;

	parse_fails("allreduce sum f64 1G*1", "job.txt:1:19: 1073741824 f64 "
	    "values are over the 1 GiB limit in 'allreduce sum f64 1G*1'");
	parse_fails("allreduce sum i32 256M*1 2", "job.txt:1:26: 268435457 i32 "
	    "values are over the 1 GiB limit in "
	    "'allreduce sum i32 256M*1 2'");
	parse_fails("allreduce sum u64 18446744073709551615*1 1",
	    "job.txt:1:19: 18446744073709551615 u64 values are over the "
	    "1 GiB limit in 'allreduce sum u64 18446744073709551615*1 1'");
	/* Exactly 1 GiB is allowed; parsing allocates nothing for it. */
	s = parse_ok("allreduce sum i32 256M*1\nexpect 128M*1 128M*{world}");
	CHECK(s != NULL && script_statements(s) == 2);
	script_free(s);
}

static void
test_line_errors(void)
{
	char *text = malloc(70000), want[512], text32[128];
	char opens[40], closes[40];
	struct script *s;
	static const char nul[] = "barrier\nallgather a\0b\n";

	memset(opens, '(', sizeof(opens));
	memset(closes, ')', sizeof(closes));

	memset(text, 'x', 70000);
	memcpy(text, "allgather ", 10);
	text[65536] = '\n';
	text[65537] = '\0';
	s = parse_ok(text);
	CHECK(s != NULL && script_statements(s) == 1);
	script_free(s);
	memcpy(text + 65536, "y\n", 3);
	snprintf(want, sizeof(want), "job.txt:1:65537: line longer than 65536 "
	    "bytes in 'allgather %.150s...'", text + 10);
	parse_fails(text, want);
	free(text);

	CHECK(script_parse(nul, sizeof(nul) - 1, "<stdin>", &s, want,
	    sizeof(want)) == -1 && s == NULL);
	SAME(want, "<stdin>:2:12: NUL byte in 'allgather a'");
	/* 32 levels of nesting are allowed, the 33rd is refused. */
	snprintf(text32, sizeof(text32), "allreduce sum f64 %.32s1%.32s",
	    opens, closes);
	script_free(parse_ok(text32));
	snprintf(text32, sizeof(text32), "allreduce sum f64 %.33s1%.33s",
	    opens, closes);
	snprintf(want, sizeof(want), "job.txt:1:51: malformed value '%s': "
	    "nested too deeply in '%s'", text32 + 18, text32);
	parse_fails(text32, want);
	parse_fails("allreduce sum f64 ---------------------------------1",
	    "job.txt:1:51: malformed value '---------------------------------"
	    "1': nested too deeply in 'allreduce sum f64 -------------------"
	    "--------------1'");
}

/* --------------------------------------------------- what parses */

static void
test_comments_and_blanks(void)
{
	struct script *s;
	static const char crlf[] = "barrier\r\nallgather a b \r\n\r\n";

	s = parse_ok("");
	CHECK(s != NULL && script_statements(s) == 0);
	script_free(s);
	s = parse_ok("# only\n\n   \n\t# comments\n");
	CHECK(s != NULL && script_statements(s) == 0);
	script_free(s);
	s = parse_ok("  # header\n\nallreduce sum i64 1 # one\n"
	    "allgather host # not a comment\n barrier#c\n\tsleep 0 # c\n"
	    "expect host # still text\nbroadcast 0#c\nbroadcast 0 #x\n"
	    "expect #x\nallgather\nexpect\nallgather#c\n"
	    "allreduce max u32 1#c\nexpect 1#c");
	CHECK(s != NULL && script_statements(s) == 13);
	script_free(s);
	s = parse_ok(crlf);
	CHECK(s != NULL && script_statements(s) == 2);
	script_free(s);
}

/* Evaluates one VALUE token for element dtype at rank/world. */
static int
eval(const char *token, enum sr_dtype dtype, uint64_t rank, uint64_t world,
    void *out, uint64_t *copies, char *why, size_t size)
{
	struct expr_value v;
	size_t at;
	int rc;

	if (expr_value_parse(token, strlen(token), &v, &at, why, size) != 0)
		return -2;
	*copies = v.copies;
	rc = expr_value_eval(&v, EXPR_ELEMENT, dtype, rank, world, out, why,
	    size);
	expr_value_fini(&v);
	return rc;
}

static void
check_f64(const char *token, uint64_t rank, uint64_t world,
    uint64_t copies, double want)
{
	char why[256] = "";
	uint64_t n = 0;
	double got = -12345;

	CHECKF(eval(token, SR_F64, rank, world, &got, &n, why,
	    sizeof(why)) == 0, "'%s': %s", token, why);
	CHECKF(got == want && n == copies, "'%s' is %llu*%.17g, want "
	    "%llu*%.17g", token, (unsigned long long)n, got,
	    (unsigned long long)copies, want);
}

static void
test_expressions(void)
{
	check_f64("42", 0, 1, 1, 42);
	check_f64("1+2*3", 0, 1, 1, 7);
	check_f64("(1+2)*3", 0, 1, 1, 9);
	check_f64("2-3-4", 0, 1, 1, -5);
	check_f64("12/4/3", 0, 1, 1, 1);
	check_f64("7/2", 0, 1, 1, 3.5);
	check_f64("7%3", 0, 1, 1, 1);
	check_f64("-7%3", 0, 1, 1, -1);
	check_f64("7.5%2", 0, 1, 1, 1.5);
	check_f64("-2*3", 0, 1, 1, -6);
	check_f64("--3", 0, 1, 1, 3);
	check_f64("+3-+2", 0, 1, 1, 1);
	check_f64("1+-2", 0, 1, 1, -1);
	check_f64("-(1+2)*2", 0, 1, 1, -6);
	check_f64("1e3", 0, 1, 1, 1000);
	check_f64("2.5E-1", 0, 1, 1, 0.25);
	check_f64(".5", 0, 1, 1, 0.5);
	check_f64("5.", 0, 1, 1, 5);
	check_f64("0.1+0.2", 0, 1, 1, 0.1 + 0.2);
	check_f64("{rank}", 3, 8, 1, 3);
	check_f64("{world}", 3, 8, 1, 8);
	check_f64("{rank}*2+1", 3, 8, 1, 7);
	check_f64("({world}-1)/2", 0, 5, 1, 2);
	check_f64("({world}-1)/2", 0, 4, 1, 1.5);
	check_f64("{rank}%2", 5, 8, 1, 1);
	check_f64("{world}*{world}-{rank}", 2, 3, 1, 7);
	check_f64("100000000000000000000/10", 0, 1, 1, 1e19);
}

static void
test_lists(void)
{
	check_f64("4*1", 0, 1, 4, 1);
	check_f64("2*3*4", 0, 1, 2, 12);
	check_f64("2*{rank}+1", 3, 8, 2, 4);
	check_f64("(2)*3", 0, 1, 1, 6);
	check_f64("(2*3)", 0, 1, 1, 6);
	check_f64("1.5*2", 0, 1, 1, 3);
	check_f64("{world}*2", 0, 4, 1, 8);
	check_f64("+2*3", 0, 1, 1, 6);
	check_f64("4K*{rank}", 2, 4, 4096, 2);
	check_f64("1M*0.5", 0, 1, 1048576, 0.5);
	check_f64("3G*-1", 0, 1, 3ULL << 30, -1);
	check_f64("16*-(2)", 0, 1, 16, -2);
}

static void
check_range(const char *token, enum sr_dtype dtype, const char *want_why)
{
	char why[256] = "";
	uint8_t element[8];
	uint64_t n;
	int rc = eval(token, dtype, 0, 1, element, &n, why, sizeof(why));

	if (want_why == NULL)
		CHECKF(rc == 0, "'%s' for %s: %s", token, sr_dtype_name(dtype),
		    why);
	else
		SAME(rc == -1 ? why : "(accepted)", want_why);
}

static void
test_dtype_ranges(void)
{
	int64_t i64;
	uint64_t u64, n;
	int32_t i32;
	uint32_t u32;
	float f32;
	char why[128];

	check_range("9223372036854775807", SR_I64, NULL);
	check_range("-9223372036854775808", SR_I64, NULL);
	check_range("9223372036854775808", SR_I64,
	    "value '9223372036854775808' is out of range for i64");
	check_range("-9223372036854775809", SR_I64,
	    "value '-9223372036854775809' is out of range for i64");
	check_range("2147483647", SR_I32, NULL);
	check_range("-2147483648", SR_I32, NULL);
	check_range("2147483648", SR_I32,
	    "value '2147483648' is out of range for i32");
	check_range("1099511627776", SR_I32,
	    "value '1099511627776' is out of range for i32");
	/* N*V: 1024 copies of 2^30. */
	check_range("1024*1024*1024*1024", SR_I32, NULL);
	check_range("(1024*1024*1024*1024)", SR_I32,
	    "value '(1024*1024*1024*1024)' is 1099511627776, out of range "
	    "for i32");
	check_range("18446744073709551615", SR_U64, NULL);
	check_range("18446744073709551616", SR_U64,
	    "value '18446744073709551616' is 1.8446744073709552e+19, out of "
	    "range for u64");
	check_range("-1", SR_U64, "value '-1' is out of range for u64");
	check_range("4294967295", SR_U32, NULL);
	check_range("4294967296", SR_U32,
	    "value '4294967296' is out of range for u32");
	check_range("-1", SR_U32, "value '-1' is out of range for u32");
	check_range("-0", SR_U32, NULL);
	check_range("1.5", SR_I64, "value '1.5' is not an integer for i64");
	check_range("3/2", SR_U32,
	    "value '3/2' is 1.5, not an integer for u32");
	check_range("1.5*2", SR_I32, NULL);
	check_range("1e3", SR_U64, NULL);
	check_range("1e30", SR_U64, "value '1e30' is 1e+30, out of range for "
	    "u64");
	check_range("3e38", SR_F32, NULL);
	check_range("1e39", SR_F32, "value '1e39' is 1e+39, out of range for "
	    "f32");
	check_range("1e300", SR_F64, NULL);
	/* The bytes stored, exactly. */
	CHECK(eval("-9223372036854775808", SR_I64, 0, 1, &i64, &n, why,
	    sizeof(why)) == 0 && i64 == INT64_MIN);
	CHECK(eval("18446744073709551615-{rank}", SR_U64, 5, 9, &u64, &n, why,
	    sizeof(why)) == 0 && u64 == UINT64_MAX - 5);
	CHECK(eval("-2147483648", SR_I32, 0, 1, &i32, &n, why,
	    sizeof(why)) == 0 && i32 == INT32_MIN);
	CHECK(eval("{world}*1000", SR_U32, 0, 4000000, &u32, &n, why,
	    sizeof(why)) == 0 && u32 == 4000000000u);
	CHECK(eval("{world}*2000", SR_U32, 0, 4000000, &u32, &n, why,
	    sizeof(why)) == -1);
	SAME(why, "value '{world}*2000' is 8000000000, out of range for u32");
	CHECK(eval("0.1", SR_F32, 0, 1, &f32, &n, why, sizeof(why)) == 0 &&
	    f32 == 0.1f);
	CHECK(eval("{rank}-1", SR_U32, 0, 2, &u32, &n, why, sizeof(why)) == -1);
	SAME(why, "value '{rank}-1' is -1, out of range for u32");
	CHECK(eval("{rank}+0.5", SR_I64, 0, 2, &i64, &n, why, sizeof(why)) ==
	    -1);
	SAME(why, "value '{rank}+0.5' is 0.5, not an integer for i64");
	CHECK(eval("1/({rank}-1)", SR_F64, 1, 2, &u64, &n, why, sizeof(why)) ==
	    -1);
	SAME(why, "value '1/({rank}-1)' divides by zero");
}

static void
test_root_and_seconds(void)
{
	struct expr_value v;
	char why[256] = "";
	size_t at;
	uint32_t root = 99;
	double seconds = -1;

	CHECK(expr_value_parse("{world}-1", 9, &v, &at, why, sizeof(why)) == 0);
	CHECK(expr_value_eval(&v, EXPR_ROOT, SR_U32, 0, 3, &root, why,
	    sizeof(why)) == 0 && root == 2);
	expr_value_fini(&v);
	CHECK(expr_value_parse("{world}", 7, &v, &at, why, sizeof(why)) == 0);
	CHECK(expr_value_eval(&v, EXPR_ROOT, SR_U32, 0, 3, &root, why,
	    sizeof(why)) == -1);
	SAME(why, "root '{world}' is 3, out of range for a world of 3");
	expr_value_fini(&v);
	CHECK(expr_value_parse("{world}/2", 9, &v, &at, why, sizeof(why)) == 0);
	CHECK(expr_value_eval(&v, EXPR_ROOT, SR_U32, 0, 3, &root, why,
	    sizeof(why)) == -1);
	SAME(why, "root '{world}/2' is 1.5, not an integer");
	expr_value_fini(&v);
	CHECK(expr_value_parse("{rank}/10", 9, &v, &at, why, sizeof(why)) == 0);
	CHECK(expr_value_eval(&v, EXPR_SECONDS, SR_F64, 2, 3, &seconds, why,
	    sizeof(why)) == 0 && seconds == 0.2);
	CHECK(expr_value_eval(&v, EXPR_SECONDS, SR_F64, 36001, 36002, &seconds,
	    why, sizeof(why)) == -1);
	SAME(why, "sleep '{rank}/10' is 3600.1, out of range (0 to 3600 "
	    "seconds)");
	expr_value_fini(&v);
}

/* ------------------------------------------------- running, world 1 */

static void
test_run_human(void)
{
	/* The three summarised results, for their checksums. */
	float f32s[16], mixed[9] = { 0.1f };
	uint64_t u64s[9] = { UINT64_MAX };
	char want[2048];
	struct outcome o;

	for (int i = 0; i < 16; i++)
		f32s[i] = 2;
	for (int i = 1; i < 9; i++)
		mixed[i] = 1e-3f;
	o = run_one("# a job\n"
	    "allreduce sum i64 4 8 6\n"
	    "expect 4 8 6  # all three\n"
	    "allreduce max f32 16*2\n"
	    "expect 8*2 8*(1+1)\n"
	    "allgather host-{rank} # literal\n"
	    "expect host-0 # literal\n"
	    "broadcast 0 hello  from {rank} of {world}\n"
	    "expect hello  from 0 of 1\n"
	    "barrier\n"
	    "sleep 0.002\n"
	    "allreduce min f64 0.1 -2.5e-3 3*{world} 1e300\n"
	    "expect 0.1 -0.0025 3*1 1e300\n"
	    "allreduce prod u64 18446744073709551615 8*{rank}\n"
	    "allreduce sum i32 -2147483648 {world}\n"
	    "allreduce sum u32 4294967295\n"
	    "allreduce sum f32 0.1 8*1e-3\n"
	    "allgather\n"
	    "expect\n"
	    "broadcast {world}-1\n"
	    "expect\n", false, NULL);
	snprintf(want, sizeof(want),
	    "line 2: allreduce sum i64 = 4 8 6\n"
	    "line 3: expect = ok\n"
	    "line 4: allreduce max f32 = 16 values, first 2, last 2, "
	    "checksum 0x%016llx\n"
	    "line 5: expect = ok\n"
	    "line 6: allgather = [\"host-0 # literal\"]\n"
	    "line 7: expect = ok\n"
	    "line 8: broadcast 0 = hello  from 0 of 1\n"
	    "line 9: expect = ok\n"
	    "line 10: barrier = ok\n"
	    "line 11: sleep 0.002 = ok\n"
	    "line 12: allreduce min f64 = 0.1 -0.0025 1 1 1 1e+300\n"
	    "line 13: expect = ok\n"
	    "line 14: allreduce prod u64 = 9 values, first "
	    "18446744073709551615, last 0, checksum 0x%016llx\n"
	    "line 15: allreduce sum i32 = -2147483648 1\n"
	    "line 16: allreduce sum u32 = 4294967295\n"
	    "line 17: allreduce sum f32 = 9 values, first 0.1, last 0.001, "
	    "checksum 0x%016llx\n"
	    "line 18: allgather = [\"\"]\n"
	    "line 19: expect = ok\n"
	    "line 20: broadcast 0 = \n"
	    "line 21: expect = ok\n",
	    (unsigned long long)fnv1a(f32s, sizeof(f32s)),
	    (unsigned long long)fnv1a(u64s, sizeof(u64s)),
	    (unsigned long long)fnv1a(mixed, sizeof(mixed)));
	CHECK(o.status == EXIT_OK);
	SAME(o.out, want);
	SAME(o.err, "");
	outcome_free(&o);
}

static void
test_run_times(void)
{
	const char *addrs[] = { "127.0.0.1:1" };
	struct sr_ring *ring;
	struct sr_error err;
	struct script *s = parse_ok("allreduce sum i64 1\nbarrier\nsleep 0\n"
	    "expect 1");
	char *buf = NULL;
	size_t len = 0;
	FILE *out = open_memstream(&buf, &len);
	char unit[8] = "";
	double us = -1;
	int n = 0;

	CHECK(sr_ring_connect(&ring, NULL, 0, addrs, 1, 0, NULL, &err) == 0);
	CHECK(script_run(s, ring, out, false) == EXIT_OK);
	fclose(out);
	/* A collective's line ends in its time; sleep's and expect's not. */
	CHECK(sscanf(buf, "line 1: allreduce sum i64 = 1 (%lf %2[u]s)\n%n", &us,
	    unit, &n) == 2 && us >= 0 && n > 0);
	CHECK(strstr(buf, "line 2: barrier = ok (") != NULL);
	CHECK(strstr(buf, "line 3: sleep 0 = ok\nline 4: expect = ok\n") !=
	    NULL);
	free(buf);
	sr_ring_close(ring);
	script_free(s);
}

static void
test_run_json(void)
{
	char want[2048];
	double nine[9] = { 1.5, 1.5, 1.5, 1.5, 1.5, 1.5, 1.5, 1.5, 0.1 };
	struct outcome o = run_one("allreduce sum i64 4 8 {rank}-1 # c\n"
	    "expect 4 8 -1\n"
	    "allreduce sum f64 8*1.5 0.1\n"
	    "allgather a\"b\\c\n"
	    "broadcast 0 say \"hi\"\n"
	    "barrier\n"
	    "sleep 0.5*0\n"
	    "allreduce max u64 18446744073709551615 0.1*10\n", true, NULL);

	snprintf(want, sizeof(want),
	    "{\"type\":\"result\",\"rank\":0,\"world\":1,\"line\":1,"
	    "\"statement\":\"allreduce sum i64 4 8 {rank}-1\",\"op\":"
	    "\"allreduce\",\"reduce\":\"sum\",\"dtype\":\"i64\",\"count\":3,"
	    "\"result\":[4,8,-1],\"time_us\":T}\n"
	    "{\"type\":\"expect\",\"rank\":0,\"line\":2,\"ok\":true}\n"
	    "{\"type\":\"result\",\"rank\":0,\"world\":1,\"line\":3,"
	    "\"statement\":\"allreduce sum f64 8*1.5 0.1\",\"op\":"
	    "\"allreduce\",\"reduce\":\"sum\",\"dtype\":\"f64\",\"count\":9,"
	    "\"result\":{\"count\":9,\"first\":1.5,\"last\":"
	    "0.1,\"checksum\":\"0x%016llx\"},\"time_us\":T}\n"
	    "{\"type\":\"result\",\"rank\":0,\"world\":1,\"line\":4,"
	    "\"statement\":\"allgather a\\\"b\\\\c\",\"op\":\"allgather\","
	    "\"result\":[\"a\\\"b\\\\c\"],\"time_us\":T}\n"
	    "{\"type\":\"result\",\"rank\":0,\"world\":1,\"line\":5,"
	    "\"statement\":\"broadcast 0 say \\\"hi\\\"\",\"op\":\"broadcast\","
	    "\"root\":0,\"result\":\"say \\\"hi\\\"\",\"time_us\":T}\n"
	    "{\"type\":\"result\",\"rank\":0,\"world\":1,\"line\":6,"
	    "\"statement\":\"barrier\",\"op\":\"barrier\",\"result\":null,"
	    "\"time_us\":T}\n"
	    "{\"type\":\"result\",\"rank\":0,\"world\":1,\"line\":7,"
	    "\"statement\":\"sleep 0.5*0\",\"op\":\"sleep\",\"seconds\":0,"
	    "\"result\":null,\"time_us\":T}\n"
	    "{\"type\":\"result\",\"rank\":0,\"world\":1,\"line\":8,"
	    "\"statement\":\"allreduce max u64 18446744073709551615 0.1*10\","
	    "\"op\":\"allreduce\",\"reduce\":\"max\",\"dtype\":\"u64\","
	    "\"count\":2,\"result\":[18446744073709551615,1],\"time_us\":T}\n",
	    (unsigned long long)fnv1a(nine, sizeof(nine)));
	CHECK(o.status == EXIT_OK);
	SAME(o.out, want);
	SAME(o.std, "");
	outcome_free(&o);
}

static void
test_expect_failures(void)
{
	struct sr_error failure;
	struct outcome o;

	o = run_one("allreduce sum i64 1 2 3\nexpect 1 3 4\nbarrier\n", false,
	    &failure);
	CHECK(o.status == EXIT_CHECK);
	SAME(o.out, "line 1: allreduce sum i64 = 1 2 3\n");
	SAME(o.err, "silvic-ring: job.txt:2: expect failed: element 1 is 2, "
	    "expected 3 (2 of 3 elements differ)\n");
	/* The ring is aborted with the same words, for the other ranks. */
	SAME(failure.message, "job.txt:2: expect failed: element 1 is 2, "
	    "expected 3 (2 of 3 elements differ)");
	CHECK(failure.code == SR_ECHECK);	/* the other ranks exit 1 too */
	outcome_free(&o);

	o = run_one("allreduce sum f32 0.1\nexpect 0.1000001\n", true, NULL);
	CHECK(o.status == EXIT_CHECK);
	CHECK(strstr(o.out, "{\"type\":\"error\",\"rank\":0,\"code\":"
	    "\"expect\",\"line\":2,\"message\":\"job.txt:2: expect failed: "
	    "element 0 is 0.1, expected 0.1000001\",\"exit\":1}\n") != NULL);
	SAME(o.err, "silvic-ring: job.txt:2: expect failed: element 0 is 0.1, "
	    "expected 0.1000001\n");
	outcome_free(&o);

	o = run_one("allreduce sum f64 0.1+0.2\nexpect 0.3\n", false, NULL);
	CHECK(o.status == EXIT_CHECK);
	SAME(o.err, "silvic-ring: job.txt:2: expect failed: element 0 is "
	    "0.30000000000000004, expected 0.3\n");
	outcome_free(&o);

	o = run_one("allgather a\nexpect b\n", false, NULL);
	SAME(o.err, "silvic-ring: job.txt:2: expect failed: rank 0's text is "
	    "'a', expected 'b'\n");
	outcome_free(&o);
	o = run_one("allgather a\nexpect a b\n", false, NULL);
	SAME(o.err, "silvic-ring: job.txt:2: expect failed: got 1 text, "
	    "expected 2\n");
	outcome_free(&o);
	o = run_one("allgather a\nexpect\n", false, NULL);
	SAME(o.err, "silvic-ring: job.txt:2: expect failed: got 1 text, "
	    "expected 0\n");
	outcome_free(&o);
	o = run_one("allgather a  b\nexpect a b\n", false, NULL);
	SAME(o.err, "silvic-ring: job.txt:2: expect failed: got 'a  b', "
	    "expected 'a b'\n");
	outcome_free(&o);
	o = run_one("allgather a  b\nexpect a  b\nallgather x\t{world}\n"
	    "expect x\t1\n", false, NULL);
	CHECK(o.status == EXIT_OK);
	outcome_free(&o);
	o = run_one("broadcast 0 hello\nbarrier\nexpect hi\n", false, NULL);
	CHECK(o.status == EXIT_CHECK);
	SAME(o.out, "line 1: broadcast 0 = hello\nline 2: barrier = ok\n");
	SAME(o.err, "silvic-ring: job.txt:3: expect failed: got 'hello', "
	    "expected 'hi'\n");
	outcome_free(&o);
}

static void
test_run_errors(void)
{
	struct sr_error failure;
	struct outcome o;

	o = run_one("barrier\nbroadcast {world} x\nbarrier\n", false, &failure);
	CHECK(o.status == EXIT_USAGE);
	SAME(o.out, "line 1: barrier = ok\n");
	SAME(o.err, "silvic-ring: rank 0: job.txt:2: root '{world}' is 1, out "
	    "of range for a world of 1\n");
	CHECK(failure.code == SR_ECONFIG);
	SAME(failure.message, "job.txt:2: root '{world}' is 1, out of range "
	    "for a world of 1");
	outcome_free(&o);

	o = run_one("allreduce sum u32 2 {rank}-1\n", false, NULL);
	CHECK(o.status == EXIT_USAGE);
	SAME(o.err, "silvic-ring: rank 0: job.txt:1: value '{rank}-1' is -1, "
	    "out of range for u32\n");
	outcome_free(&o);
	o = run_one("allreduce sum i64 1\nexpect {rank}+0.5\n", false, NULL);
	CHECK(o.status == EXIT_USAGE);
	SAME(o.err, "silvic-ring: rank 0: job.txt:2: value '{rank}+0.5' is "
	    "0.5, not an integer for i64\n");
	outcome_free(&o);
	o = run_one("sleep {rank}-1\n", false, NULL);
	SAME(o.err, "silvic-ring: rank 0: job.txt:1: sleep '{rank}-1' is -1, "
	    "out of range (0 to 3600 seconds)\n");
	outcome_free(&o);
	/* A world of one is no mesh; a rank beyond it is refused first, by
	 * every rank alike. */
	o = run_one("group 1 0\n", false, NULL);
	CHECK(o.status == EXIT_USAGE);
	SAME(o.out, "");
	SAME(o.err, "silvic-ring: rank 0: job.txt:1: group 1 needs a mesh (a "
	    "link from every rank to every other); this ring has links to its "
	    "two neighbours only\n");
	outcome_free(&o);
	o = run_one("barrier\ngroup 1 0,1\n", false, NULL);
	CHECK(o.status == EXIT_USAGE);
	SAME(o.out, "line 1: barrier = ok\n");
	SAME(o.err, "silvic-ring: rank 0: job.txt:2: group 1: rank 1 is out of "
	    "range for a world of 1\n");
	outcome_free(&o);
	o = run_one("allreduce sum f64 1/{rank}\n", true, NULL);
	CHECK(o.status == EXIT_USAGE);
	SAME(o.out, "");
	CHECK(strstr(o.std, "\"code\":\"config\"") != NULL &&
	    strstr(o.std, "\"message\":\"rank 0: job.txt:1: value '1/{rank}' "
	    "divides by zero\"") != NULL);
	outcome_free(&o);
}

/* ----------------------------------------------- two ranks, forked */

/* The two ranks form a mesh. */
static bool two_mesh;

/* Runs rank `rank`'s script on a two-rank ring; writes its output and
 * stderr to the files given.  Returns script_run's status. */
static int
run_rank(struct sr_listener *l, const char *const *addrs, uint32_t rank,
    const char *text, const char *out_path, const char *err_path)
{
	struct sr_ring_options options;
	struct sr_ring *ring;
	struct sr_error err;
	struct script *s = NULL;
	char why[256];
	FILE *out = fopen(out_path, "w"), *errf = fopen(err_path, "w");
	int rc;

	sr_ring_options_init(&options);
	options.timeout_ms = 20000;
	options.mesh = two_mesh;
	if (out == NULL || errf == NULL ||
	    script_parse(text, strlen(text), "job.txt", &s, why,
	    sizeof(why)) != 0)
		return 99;
	if (sr_ring_connect(&ring, l, rank, addrs, 2, 7, &options, &err) != 0)
		return 98;
	fflush(stderr);
	dup2(fileno(errf), 2);
	cli_rank = rank;
	rc = script_run(s, ring, out, false);
	if (rc == EXIT_OK && sr_ring_finish(ring, &err) != 0)
		rc = cli_report(&err, false);
	fflush(stderr);
	sr_ring_close(ring);
	script_free(s);
	fclose(out);
	fclose(errf);
	return rc;
}

static char *
slurp_path(const char *path)
{
	FILE *f = fopen(path, "r");
	char *s;

	if (f == NULL)
		return strdup("(missing)");
	s = slurp_fd(fileno(f));
	fclose(f);
	return s;
}

/* Both ranks' untimed outputs and stderr; statuses in rc[2]. */
static void
two_ranks(const char *text0, const char *text1, int rc[2], char *out[2],
    char *err[2])
{
	struct sr_listener *l[2];
	struct sr_error e;
	const char *addrs[2];
	char paths[4][64];
	int saved = dup(2), status = -1;
	pid_t pid;

	for (int i = 0; i < 4; i++) {
		snprintf(paths[i], sizeof(paths[i]), "/tmp/test_script.XXXXXX");
		close(mkstemp(paths[i]));
	}
	for (int i = 0; i < 2; i++) {
		CHECK(sr_listener_open(&l[i], "127.0.0.1", NULL, 0, &e) == 0);
		addrs[i] = strdup(sr_listener_address(l[i]));
	}
	fflush(stdout);
	fflush(stderr);
	if ((pid = fork()) == 0) {
		sr_listener_close(l[0]);
		_exit(run_rank(l[1], addrs, 1, text1, paths[1], paths[3]));
	}
	sr_listener_close(l[1]);
	rc[0] = run_rank(l[0], addrs, 0, text0, paths[0], paths[2]);
	dup2(saved, 2);
	close(saved);
	cli_rank = -1;
	waitpid(pid, &status, 0);
	rc[1] = WIFEXITED(status) ? WEXITSTATUS(status) : -1;
	for (int i = 0; i < 2; i++) {
		out[i] = untimed(slurp_path(paths[i]));
		err[i] = slurp_path(paths[2 + i]);
		free((char *)addrs[i]);
	}
	for (int i = 0; i < 4; i++)
		unlink(paths[i]);
}

static void
test_two_ranks(void)
{
	static const char common[] =
	    "allreduce sum i64 {rank}+1 4*{rank}\n"
	    "expect 3 4*1\n"
	    "broadcast {world}-1 from {rank}\n"
	    "expect from 1\n";
	char text[2][512], *out[2], *err[2];
	int rc[2];

	snprintf(text[0], sizeof(text[0]), "%sallgather short\n"
	    "expect short a much longer text\n", common);
	snprintf(text[1], sizeof(text[1]), "%sallgather a much longer text\n"
	    "expect short a much longer text\n", common);
	two_ranks(text[0], text[1], rc, out, err);
	for (int i = 0; i < 2; i++) {
		CHECKF(rc[i] == EXIT_OK, "rank %d: %d: %s", i, rc[i], err[i]);
		SAME(out[i], "line 1: allreduce sum i64 = 3 1 1 1 1\n"
		    "line 2: expect = ok\n"
		    "line 3: broadcast 1 = from 1\n"
		    "line 4: expect = ok\n"
		    "line 5: allgather = [\"short\", \"a much longer text\"]\n"
		    "line 6: expect = ok\n");
		SAME(err[i], "");
		free(out[i]);
		free(err[i]);
	}

	/* Rank 1's expect fails; rank 0 learns why at its next collective. */
	two_ranks("allreduce sum i64 1\nexpect 2\nbarrier\n",
	    "allreduce sum i64 1\nexpect 3\nbarrier\n", rc, out, err);
	CHECK(rc[1] == EXIT_CHECK);
	SAME(err[1], "silvic-ring: rank 1: job.txt:2: expect failed: element 0 "
	    "is 2, expected 3\n");
	/*
	 * Rank 0 hears of it in the barrier, or, when rank 1's abort
	 * overtakes the allreduce's last frame, already in the allreduce;
	 * either way its status is the origin's: a check failed (1).
	 */
	CHECKF(rc[0] == EXIT_CHECK, "rank 0 exited %d", rc[0]);
	CHECKF(strstr(err[0], ": rank 1 reported: job.txt:2: expect failed: "
	    "element 0 is 2, expected 3") != NULL, "%s", err[0]);
	CHECKF((strncmp(err[0], "silvic-ring: rank 0: job.txt:3: ", 32) == 0 &&
	    strcmp(out[0], "line 1: allreduce sum i64 = 2\n"
	    "line 2: expect = ok\n") == 0) ||
	    (strncmp(err[0], "silvic-ring: rank 0: job.txt:1: ", 32) == 0 &&
	    strcmp(out[0], "") == 0), "%s%s", out[0], err[0]);
	for (int i = 0; i < 2; i++) {
		free(out[i]);
		free(err[i]);
	}
}

/*
 * Groups on a two-rank mesh: one of rank 1 alone, one of both in reverse
 * order; rank 0 skips the first's statements and their expects.
 */
static void
test_two_ranks_groups(void)
{
	static const char text[] =
	    "group 7 1\n"
	    "group 8 1,0\n"
	    "group 7 allreduce sum i64 {rank} 5\n"
	    "expect 1 5\n"
	    "group 8 allreduce max f64 {rank}*2.5 -{rank}\n"
	    "expect 2.5 0\n"
	    "group 8 allgather r{rank}\n"
	    "expect r1 r0\n"
	    "group 8 broadcast 0 from {rank}\n"
	    "expect from 0\n"
	    "group 7 broadcast 1 alone\n"
	    "group 8 barrier\n"
	    "allreduce sum i64 {rank}\n"
	    "expect 1\n";
	static const char common[] =
	    "line 5: group 8 allreduce max f64 = 2.5 0\n"
	    "line 6: expect = ok\n"
	    "line 7: group 8 allgather = [\"r1\", \"r0\"]\n"
	    "line 8: expect = ok\n"
	    "line 9: group 8 broadcast 0 = from 0\n"
	    "line 10: expect = ok\n";
	char want[2][1024], *out[2], *err[2];
	int rc[2];

	snprintf(want[0], sizeof(want[0]),
	    "line 1: group 7 = 1 (not a member)\n"
	    "line 2: group 8 = 1,0 (member 1 of 2)\n"
	    "line 3: group 7 allreduce sum i64 {rank} 5 = skipped (not in "
	    "group 7)\n"
	    "line 4: expect 1 5 = skipped (not in group 7)\n"
	    "%s"
	    "line 11: group 7 broadcast 1 alone = skipped (not in group 7)\n"
	    "line 12: group 8 barrier = ok\n"
	    "line 13: allreduce sum i64 = 1\n"
	    "line 14: expect = ok\n", common);
	snprintf(want[1], sizeof(want[1]),
	    "line 1: group 7 = 1 (member 0 of 1)\n"
	    "line 2: group 8 = 1,0 (member 0 of 2)\n"
	    "line 3: group 7 allreduce sum i64 = 1 5\n"
	    "line 4: expect = ok\n"
	    "%s"
	    "line 11: group 7 broadcast 1 = alone\n"
	    "line 12: group 8 barrier = ok\n"
	    "line 13: allreduce sum i64 = 1\n"
	    "line 14: expect = ok\n", common);
	two_mesh = true;
	two_ranks(text, text, rc, out, err);
	for (int i = 0; i < 2; i++) {
		CHECKF(rc[i] == EXIT_OK, "rank %d: %d: %s", i, rc[i], err[i]);
		SAME(out[i], want[i]);
		SAME(err[i], "");
		free(out[i]);
		free(err[i]);
	}

	/* An expect of a group's texts fails naming the rank (not the
	 * member) whose text differs. */
	two_ranks("group 8 1,0\ngroup 8 allgather r{rank}\nexpect r1 x\n",
	    "group 8 1,0\ngroup 8 allgather r{rank}\nexpect r1 x\n", rc, out,
	    err);
	for (int i = 0; i < 2; i++) {
		CHECKF(rc[i] == EXIT_CHECK, "rank %d: %d", i, rc[i]);
		CHECKF(strstr(err[i], "job.txt:3: expect failed: rank 0's text "
		    "is 'r0', expected 'x'") != NULL, "rank %d: %s", i, err[i]);
		free(out[i]);
		free(err[i]);
	}
	/* Rank 1 names a root outside its group; rank 0, not in it, learns
	 * why at the close. */
	two_ranks("group 9 1\ngroup 9 broadcast 0 x\n",
	    "group 9 1\ngroup 9 broadcast 0 x\n", rc, out, err);
	CHECKF(rc[1] == EXIT_USAGE && strcmp(err[1], "silvic-ring: rank 1: "
	    "job.txt:2: broadcast root 0 is not in group 9 (1)\n") == 0,
	    "rank 1: %d: %s", rc[1], err[1]);
	CHECKF(rc[0] == EXIT_USAGE && strstr(err[0], "rank 1 reported: "
	    "job.txt:2: broadcast root 0 is not in group 9 (1)") != NULL,
	    "rank 0: %d: %s", rc[0], err[0]);
	SAME(out[0], "line 1: group 9 = 1 (not a member)\n"
	    "line 2: group 9 broadcast 0 x = skipped (not in group 9)\n");
	for (int i = 0; i < 2; i++) {
		free(out[i]);
		free(err[i]);
	}
	two_mesh = false;
}

int
main(void)
{
	alarm(120);
	signal(SIGPIPE, SIG_IGN);
	TEST_RUN(test_statement_errors);
	TEST_RUN(test_group_errors);
	TEST_RUN(test_rank_lists);
	TEST_RUN(test_expect_errors);
	TEST_RUN(test_value_errors);
	TEST_RUN(test_size_errors);
	TEST_RUN(test_line_errors);
	TEST_RUN(test_comments_and_blanks);
	TEST_RUN(test_expressions);
	TEST_RUN(test_lists);
	TEST_RUN(test_dtype_ranges);
	TEST_RUN(test_root_and_seconds);
	TEST_RUN(test_run_human);
	TEST_RUN(test_run_times);
	TEST_RUN(test_run_json);
	TEST_RUN(test_expect_failures);
	TEST_RUN(test_run_errors);
	TEST_RUN(test_two_ranks);
	TEST_RUN(test_two_ranks_groups);
	return TEST_DONE();
}
