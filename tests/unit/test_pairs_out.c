/*
 * test_pairs_out.c - what `bench pairs` writes and reads back: the JSON
 * reader on good and malformed text, the JSON records of a synthetic run
 * read back as a baseline (every cell exactly), every baseline error with
 * its file and line, the text table at world 4 and beyond 16, and the
 * SVG's cells, outlines and escaped labels.
 *
 * With "--write DIR" it writes sample outputs instead (DIR/NAME.svg and
 * NAME.json for a slow host, a slow link, an ok run, labels that need
 * escaping and a world of 300), which tests/bats/pairs.bats checks with
 * python3's XML and JSON parsers.
 */
#include <math.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "check.h"
#include "cli.h"
#include "json_read.h"
#include "pairs.h"
#include "pairs_synth.h"

/* ------------------------------------------------------ the reader */

static int
parse(const char *text, struct json_value *v, char *why, size_t size)
{
	return json_parse(text, strlen(text), v, why, size);
}

static void
test_json_good(void)
{
	struct json_value v;
	char why[200];
	const struct json_value *x;

	CHECK(parse(" {\"a\":[1,-2.5e3,true,false,null],\"b\":\"x\\u00e9\\n"
	    "\\ud83d\\ude00\",\"c\":{},\"d\":[]} ", &v, why, sizeof(why)) == 0);
	CHECK(v.type == JSON_OBJECT && v.count == 4);
	x = json_get(&v, "a");
	CHECK(x != NULL && x->type == JSON_ARRAY && x->count == 5);
	CHECK(x->items[0].number == 1 && x->items[1].number == -2500);
	CHECK(x->items[2].type == JSON_TRUE && x->items[3].type == JSON_FALSE &&
	    x->items[4].type == JSON_NULL);
	x = json_get(&v, "b");
	CHECK(x != NULL && strcmp(x->string, "x\xc3\xa9\n\xf0\x9f\x98\x80") ==
	    0);
	CHECK(json_get(&v, "c")->type == JSON_OBJECT);
	CHECK(json_get(&v, "d")->count == 0);
	CHECK(json_get(&v, "e") == NULL);
	CHECK(json_is_index(&json_get(&v, "a")->items[0], 1));
	CHECK(!json_is_index(&json_get(&v, "a")->items[0], 0));
	CHECK(!json_is_index(&json_get(&v, "a")->items[1], 1e9));
	json_free(&v);
	/* Many elements: the lists grow. */
	{
		char big[4096];
		size_t n = 0;

		n += (size_t)snprintf(big + n, sizeof(big) - n, "[");
		for (int i = 0; i < 500; i++)
			n += (size_t)snprintf(big + n, sizeof(big) - n, "%s%d",
			    i ? "," : "", i);
		snprintf(big + n, sizeof(big) - n, "]");
		CHECK(parse(big, &v, why, sizeof(why)) == 0);
		CHECK(v.count == 500 && v.items[499].number == 499);
		json_free(&v);
	}
}

static void
test_json_bad(void)
{
	static const struct {
		const char *text, *why;
	} bad[] = {
		{ "", "column 1: the text ends where a value was expected" },
		{ "{\"a\" 1}", "column 6: expected ':' after a key" },
		{ "{\"a\":1,}", "column 8: expected a key (a string)" },
		{ "[1,]", "column 4: not a JSON value" },
		{ "[1 2]", "column 4: expected ',' or ']'" },
		{ "{\"a\":1 \"b\":2}", "column 8: expected ',' or '}'" },
		{ "{\"a\":1,\"a\":2}", "column 11: a key repeated in one object" },
		{ "01", "column 2: text after the value" },
		{ "1.", "column 3: a digit must follow '.'" },
		{ "1e", "column 3: a digit must follow the exponent" },
		{ "NaN", "column 1: not a JSON value" },
		{ "tru", "column 1: not a JSON value" },
		{ "1e999", "column 6: a number out of range" },
		{ "\"abc", "column 5: an unterminated string" },
		{ "\"a\tb\"", "column 3: a control character in a string" },
		{ "\"\\x\"", "column 3: an unknown escape" },
		{ "\"\\u12\"", "column 4: \\u needs four hex digits" },
		{ "\"\\u0000\"", "column 8: a NUL character in a string" },
		{ "\"\\udc00\"", "column 8: a lone low surrogate" },
		{ "\"\\ud800x\"", "column 8: a high surrogate without its low "
		    "half" },
		{ "\"\xff\"", "column 2: a string that is not UTF-8" },
		{ "\"\xc0\xaf\"", "column 2: a string that is not UTF-8" },
		{ "\"\xed\xa0\x80\"", "column 2: a string that is not UTF-8" },
		{ "{} {}", "column 4: text after the value" },
	};
	struct json_value v;
	char why[200], deep[100];

	for (size_t i = 0; i < sizeof(bad) / sizeof(bad[0]); i++) {
		CHECKF(parse(bad[i].text, &v, why, sizeof(why)) == -1, "%s",
		    bad[i].text);
		CHECKF(strcmp(why, bad[i].why) == 0, "'%s': got '%s'",
		    bad[i].text, why);
		CHECK(v.type == JSON_NULL && v.items == NULL);
	}
	memset(deep, '[', sizeof(deep) - 1);
	deep[sizeof(deep) - 1] = '\0';
	CHECK(parse(deep, &v, why, sizeof(why)) == -1);
	CHECK(strcmp(why, "column 33: nested more than 32 deep") == 0);
	/* A failure deep inside frees what was built (valgrind checks). */
	CHECK(parse("[{\"a\":[1,{\"b\":\"c\"}],\"d\":[\"e\",x]}]", &v, why,
	    sizeof(why)) == -1);
}

/* ------------------------------------------------------ the writers */

static char *addresses[PAIRS_MATRIX_MAX];
static char address_buf[PAIRS_MATRIX_MAX][PAIRS_LABEL_MAX + 8];

struct run {
	struct synth s;
	struct pairs_plan plan;
	struct pairs_matrix m;
	struct pairs_verdict v;
	struct pairs_report r;
};

static int
run_init(struct run *x, const struct pairs_verdict_options *o)
{
	struct pairs_verdict_options own;
	char why[256];

	if (o == NULL) {
		pairs_verdict_options_init(&own);
		o = &own;
	}
	if (pairs_plan_init(&x->plan, x->s.world) != 0 ||
	    synth_build(&x->s, &x->m) != 0)
		return -1;
	for (uint32_t r = 0; r < x->s.world; r++) {
		snprintf(address_buf[r], sizeof(address_buf[r]), "%s:%u",
		    x->m.label[r], 47000 + r);
		addresses[r] = address_buf[r];
	}
	if (pairs_verdict_run(&x->m, o, &x->v, why, sizeof(why)) != 0) {
		printf("# %s\n", why);
		pairs_matrix_fini(&x->m);
		return -1;
	}
	memset(&x->r, 0, sizeof(x->r));
	x->r.plan = &x->plan;
	x->r.m = &x->m;
	x->r.v = &x->v;
	x->r.addresses = addresses;
	x->r.warmup = 1;
	x->r.threshold = o->threshold;
	x->r.baseline = o->baseline_name;
	x->r.baseline_cells[0] = o->baseline[0];
	x->r.baseline_cells[1] = o->baseline[1];
	x->r.passes = 2;
	return 0;
}

static void
run_fini(struct run *x)
{
	pairs_verdict_fini(&x->v);
	pairs_matrix_fini(&x->m);
}

/* What a writer wrote, as one string (free it). */
static char *
capture_json(struct run *x, int status, size_t *len)
{
	char *buf = NULL;
	FILE *out = open_memstream(&buf, len);

	pairs_header_write(out, &x->r, 12.5, true);
	CHECK(pairs_json_write(out, &x->r, status) == 0);
	fclose(out);
	return buf;
}

static void
test_json_records(void)
{
	struct run x;
	char *text, *line, *next, why[200];
	size_t len, pairs = 0, hosts = 0, verdicts = 0, headers = 0;

	synth_init(&x.s, SYNTH_LINK, 4);
	x.s.x = 3;
	x.s.y = 1;
	if (run_init(&x, NULL) != 0) {
		CHECK(0);
		return;
	}
	text = capture_json(&x, 6, &len);
	for (line = text; line != NULL && *line; line = next) {
		struct json_value v;
		const struct json_value *type;

		next = strchr(line, '\n');
		CHECK(next != NULL);
		if (next == NULL)
			break;
		*next++ = '\0';
		if (json_parse(line, strlen(line), &v, why, sizeof(why)) != 0) {
			CHECKF(0, "%s: %s", why, line);
			continue;
		}
		type = json_get(&v, "type");
		CHECK(json_get(&v, "schema")->number == 1);
		if (strcmp(type->string, "pairs") == 0) {
			headers++;
			CHECK(json_get(&v, "world")->number == 4);
			CHECK(json_get(&v, "rounds")->number == 3);
			CHECK(json_get(&v, "estimate_s")->number == 12.5);
			CHECK(strcmp(json_get(&v, "addresses")->items[2].string,
			    "10.0.0.3:47002") == 0);
			CHECK(strcmp(json_get(&v, "hosts")->items[2].string,
			    "10.0.0.3") == 0);
			CHECK(json_get(&v, "baseline")->type == JSON_NULL);
		} else if (strcmp(type->string, "pair") == 0) {
			uint32_t from = (uint32_t)json_get(&v, "from")->number;
			uint32_t to = (uint32_t)json_get(&v, "to")->number;

			pairs++;
			CHECK(json_get(&v, "gbps_alone")->number ==
			    pairs_cell_median(&x.m, PAIRS_MODE_ALONE, from, to));
			CHECK(json_get(&v, "gbps_both_repeats")->count == 3);
			CHECK((json_get(&v, "slow_alone")->type == JSON_TRUE) ==
			    (from == 3 && to == 1));
			CHECK(json_get(&v, "round")->number ==
			    pairs_plan_round_of(&x.plan, from, to));
			CHECK(json_get(&v, "baseline_alone")->type == JSON_NULL);
			CHECK(json_get(&v, "ratio_alone")->number > 0);
		} else if (strcmp(type->string, "host") == 0) {
			hosts++;
			CHECK(json_get(&v, "slow")->type == JSON_FALSE);
			CHECK(json_get(&v, "ranks")->count == 1);
		} else if (strcmp(type->string, "verdict") == 0) {
			const struct json_value *f = json_get(&v, "findings");

			verdicts++;
			CHECK(strcmp(json_get(&v, "verdict")->string, "link") ==
			    0);
			CHECK(json_get(&v, "exit")->number == 6);
			CHECK(json_get(&v, "passes")->number == 2);
			CHECK(json_get(&v, "pass")->type == JSON_FALSE);
			CHECK(f->count == 1);
			CHECK(strcmp(json_get(&f->items[0], "direction")->string,
			    "one") == 0);
			CHECK(json_get(&f->items[0], "from")->number == 3);
			CHECK(json_get(&f->items[0], "to")->number == 1);
			CHECK(json_get(&f->items[0], "host")->type == JSON_NULL);
			CHECK(strncmp(json_get(&f->items[0], "text")->string,
			    "link 10.0.0.4 -> 10.0.0.2 (rank 3 -> rank 1) is "
			    "slow", 51) == 0);
		} else {
			CHECKF(0, "unknown record %s", type->string);
		}
		json_free(&v);
	}
	CHECK(headers == 1 && pairs == 12 && hosts == 4 && verdicts == 1);
	free(text);
	run_fini(&x);
}

/* The JSON of a run read back as its baseline: every cell exact. */
static void
test_baseline_round_trip(void)
{
	struct run x, y;
	struct pairs_baseline b;
	struct pairs_verdict_options o;
	char *text, why[300];
	size_t len;
	FILE *in;

	synth_init(&x.s, SYNTH_UNIFORM, 5);
	x.s.noise = 0.2;
	if (run_init(&x, NULL) != 0) {
		CHECK(0);
		return;
	}
	text = capture_json(&x, 0, &len);
	in = fmemopen(text, len, "r");
	CHECKF(pairs_baseline_load(in, "old.json", &x.m, &b, why,
	    sizeof(why)) == 0, "%s", why);
	fclose(in);
	for (int mode = 0; mode < PAIRS_MODE_COUNT; mode++)
		for (uint32_t i = 0; i < 5; i++)
			for (uint32_t j = 0; j < 5; j++)
				if (i != j)
					CHECK(b.cells[mode][i * 5 + j] ==
					    pairs_cell_median(&x.m, mode, i, j));
	/* This week host 2 is slow: named against it. */
	y.s = x.s;
	y.s.kind = SYNTH_HOST;
	y.s.x = 2;
	y.s.seed = 5;
	pairs_verdict_options_init(&o);
	o.baseline[0] = b.cells[0];
	o.baseline[1] = b.cells[1];
	o.baseline_name = "old.json";
	if (run_init(&y, &o) == 0) {
		CHECK(y.v.nfindings == 1 && y.v.findings[0].kind ==
		    PAIRS_FINDING_HOST && y.v.findings[0].host == 2);
		run_fini(&y);
	} else {
		CHECK(0);
	}
	pairs_baseline_fini(&b);
	free(text);
	run_fini(&x);
}

/* One header and pair records for world 2 on hosts a and b. */
static const char good_header[] = "{\"type\":\"pairs\",\"schema\":1,"
    "\"world\":2,\"hosts\":[\"10.0.0.1\",\"10.0.0.2\"]}\n";
static const char good_01[] = "{\"type\":\"pair\",\"schema\":1,\"from\":0,"
    "\"to\":1,\"gbps_both\":1.5,\"gbps_alone\":2}\n";
static const char good_10[] = "{\"type\":\"pair\",\"schema\":1,\"from\":1,"
    "\"to\":0,\"gbps_both\":1.25,\"gbps_alone\":2.5}\n";

static int
load(const char *text, const struct pairs_matrix *m, char *why, size_t size)
{
	struct pairs_baseline b;
	FILE *in = fmemopen((void *)text, strlen(text), "r");
	int rc;

	if (in == NULL)	/* fmemopen of an empty buffer */
		in = fopen("/dev/null", "r");
	rc = pairs_baseline_load(in, "base.json", m, &b, why, size);
	fclose(in);
	pairs_baseline_fini(&b);
	return rc;
}

static void
test_baseline_errors(void)
{
	static const char *const labels[2] = { "10.0.0.1", "10.0.0.2" };
	char text[2048], why[300];
	struct pairs_matrix m;
	struct pairs_baseline b;
	static const struct {
		const char *lines, *why;
	} bad[] = {
		{ "", "base.json: no bench pairs header record (a baseline is "
		    "the output of bench pairs --json)" },
		{ "not json\n", "base.json:1: not a JSON record: column 1: not "
		    "a JSON value" },
		{ "[1]\n", "base.json:1: a record without a \"type\" (not bench "
		    "pairs --json output)" },
		{ "{\"type\":\"pairs\"}\n", "base.json:1: a pairs record "
		    "without a \"schema\"" },
		{ "{\"type\":\"pairs\",\"schema\":2}\n", "base.json:1: a pairs "
		    "record of schema 2; this silvic-ring reads schema 1" },
		{ "{\"type\":\"header\",\"schema\":1}\n", "base.json:1: a bench "
		    "header record: this is the output of bench, not of bench "
		    "pairs" },
		{ "{\"type\":\"pair\",\"schema\":1,\"from\":0,\"to\":1}\n",
		    "base.json:1: a pair record before the header (the first "
		    "record of bench pairs --json)" },
		{ "{\"type\":\"pairs\",\"schema\":1,\"world\":3,\"hosts\":[]}\n",
		    "base.json:1: the baseline ran world 3, this run world 2; a "
		    "baseline must come from the same hosts" },
		{ "{\"type\":\"pairs\",\"schema\":1,\"hosts\":[]}\n",
		    "base.json:1: the header has no world" },
		{ "{\"type\":\"pairs\",\"schema\":1,\"world\":2,\"hosts\":"
		    "[\"10.0.0.1\"]}\n", "base.json:1: the header's hosts are "
		    "not a list of 2 host labels" },
		{ "{\"type\":\"pairs\",\"schema\":1,\"world\":2,\"hosts\":"
		    "[\"10.0.0.1\",\"10.0.0.9\"]}\n", "base.json:1: the "
		    "baseline's rank 1 ran on '10.0.0.9', this run's on "
		    "'10.0.0.2'; a baseline must come from the same hosts in "
		    "the same order" },
		{ "{\"type\":\"pairs\",\"schema\":1,\"world\":2,\"hosts\":"
		    "[\"10.0.0.1\",7]}\n", "base.json:1: the header's host of "
		    "rank 1 is not a string" },
	};

	CHECK(pairs_matrix_init(&m, 2, 1, labels, why, sizeof(why)) == 0);
	for (size_t i = 0; i < sizeof(bad) / sizeof(bad[0]); i++) {
		CHECKF(load(bad[i].lines, &m, why, sizeof(why)) == -1, "%s",
		    bad[i].lines);
		CHECKF(strcmp(why, bad[i].why) == 0, "got '%s'", why);
	}
	/* Errors after a good header name their line. */
	snprintf(text, sizeof(text), "%s\n%s%s", good_header, good_01, good_01);
	CHECK(load(text, &m, why, sizeof(why)) == -1);
	CHECK(strcmp(why, "base.json:4: a second record of rank 0 -> rank 1") ==
	    0);
	snprintf(text, sizeof(text), "%s%s", good_header, good_01);
	CHECK(load(text, &m, why, sizeof(why)) == -1);
	CHECK(strcmp(why, "base.json: no pair record of rank 1 -> rank 0 (an "
	    "interrupted run?)") == 0);
	snprintf(text, sizeof(text), "%s%s", good_header, good_header);
	CHECK(load(text, &m, why, sizeof(why)) == -1);
	CHECK(strcmp(why, "base.json:2: a second header record: one run's "
	    "output only, please") == 0);
	snprintf(text, sizeof(text), "%s{\"type\":\"pair\",\"schema\":1,"
	    "\"from\":0,\"to\":1,\"gbps_both\":0,\"gbps_alone\":2}\n",
	    good_header);
	CHECK(load(text, &m, why, sizeof(why)) == -1);
	CHECK(strcmp(why, "base.json:2: rank 0 -> rank 1: gbps_both is not a "
	    "positive number of GB/s") == 0);
	snprintf(text, sizeof(text), "%s{\"type\":\"pair\",\"schema\":1,"
	    "\"from\":1,\"to\":1,\"gbps_both\":1,\"gbps_alone\":2}\n",
	    good_header);
	CHECK(load(text, &m, why, sizeof(why)) == -1);
	CHECK(strcmp(why, "base.json:2: a pair record whose from and to are "
	    "not two ranks of world 2") == 0);
	/* Other records are passed over; blank lines too. */
	snprintf(text, sizeof(text), "%s\n{\"type\":\"host\",\"schema\":1}\n"
	    "%s%s{\"type\":\"verdict\",\"schema\":1}\n", good_header, good_10,
	    good_01);
	CHECK(load(text, &m, why, sizeof(why)) == 0);
	/* From a file: its name; not a regular file, or none. */
	CHECK(pairs_baseline_read("/nonexistent/base.json", &m, &b, why,
	    sizeof(why)) == -1);
	CHECK(strcmp(why, "/nonexistent/base.json: No such file or "
	    "directory") == 0);
	CHECK(pairs_baseline_read("/", &m, &b, why, sizeof(why)) == -1);
	CHECK(strcmp(why, "/: it is a directory, not a regular file") == 0);
	pairs_matrix_fini(&m);
}

static char *
capture_table(struct run *x)
{
	char *buf = NULL;
	size_t len;
	FILE *out = open_memstream(&buf, &len);

	pairs_header_write(out, &x->r, 12.5, false);
	CHECK(pairs_table_write(out, &x->r) == 0);
	fclose(out);
	return buf;
}

static void
test_table(void)
{
	struct run x;
	char *text;

	synth_init(&x.s, SYNTH_HOST, 4);
	x.s.x = 2;
	x.s.repeats = 1;
	if (run_init(&x, NULL) != 0) {
		CHECK(0);
		return;
	}
	text = capture_table(&x);
	CHECKF(strstr(text, "# silvic-ring " SR_VERSION " bench pairs: world 4 "
	    "on 4 hosts\n#   rank 0: 10.0.0.1:47000\n") != NULL, "%s", text);
	CHECK(strstr(text, "# plan: 3 rounds of 2 pairs at once; each pair "
	    "runs both directions at once, then each direction alone (the "
	    "lower rank sends first); 1 timed transfer of each after 1 "
	    "untimed\n") != NULL);
	CHECK(strstr(text, "# estimate: about 12 s for 3 rounds\n") != NULL);
	CHECK(strstr(text, "# GB/s, each direction alone (row: from, column: "
	    "to; the median of 1 repeat; * slow)\n# from\\to        0 "
	    "        1         2         3\n") != NULL);
	CHECKF(strstr(text, "\n        0        -         2       0.2*"
	    "        2\n") != NULL, "%s", text);
	CHECK(strstr(text, "\n        2      0.2*      0.2*        -  "
	    "     0.2*\n") != NULL);
	CHECK(strstr(text, "# latency (us): half the median round trip") !=
	    NULL);
	CHECK(strstr(text, "# verdict: host 10.0.0.3 (rank 2) is slow: 3 of "
	    "its 3 peer hosts") != NULL);
	CHECK(strstr(text, "worst cells") == NULL);
	free(text);
	run_fini(&x);
	/* Beyond 16: the worst cells and each host. */
	synth_init(&x.s, SYNTH_LINK_BOTH, 20);
	x.s.x = 4;
	x.s.y = 17;
	x.s.repeats = 1;
	if (run_init(&x, NULL) != 0) {
		CHECK(0);
		return;
	}
	text = capture_table(&x);
	CHECK(strstr(text, "GB/s, each direction alone") == NULL);
	CHECK(strstr(text, "# the 20 worst cells against their reference:\n")
	    != NULL);
	CHECKF(strstr(text, "\n       4 10.0.0.5                 17 10.0.0.18"
	    "            alone         0.2          2      0.1      25.0  "
	    "slow\n") != NULL, "%s", text);
	CHECK(strstr(text, "# hosts: the median GB/s of their cells") != NULL);
	CHECKF(strstr(text, "\n  10.0.0.18                1          2"
	    "          2          2          2      28.0     4  \n") == NULL &&
	    strstr(text, "\n  10.0.0.18                1          2"
	    "          2          2          2      28.0     4\n") != NULL,
	    "%s", text);
	CHECK(strstr(text, "# verdict: link 10.0.0.5 <-> 10.0.0.18 (rank 4 <-> "
	    "rank 17) is slow in both directions") != NULL);
	free(text);
	run_fini(&x);
}

static char *
capture_svg(struct run *x, size_t *len)
{
	char *buf = NULL;
	FILE *out = open_memstream(&buf, len);

	pairs_svg_print(out, &x->m, &x->v);
	fclose(out);
	return buf;
}

static size_t
count(const char *text, const char *what)
{
	size_t n = 0;

	for (const char *p = text; (p = strstr(p, what)) != NULL; p++)
		n++;
	return n;
}

static void
test_svg(void)
{
	struct run x;
	char *text, path[] = "/tmp/test_pairs_svg.XXXXXX", why[300];
	size_t len;
	int fd;

	synth_init(&x.s, SYNTH_HOST, 6);
	x.s.x = 1;
	if (run_init(&x, NULL) != 0) {
		CHECK(0);
		return;
	}
	text = capture_svg(&x, &len);
	CHECK(strncmp(text, "<?xml version=\"1.0\" encoding=\"UTF-8\"?>\n<svg "
	    "xmlns=\"http://www.w3.org/2000/svg\"", 74) == 0);
	CHECK(count(text, "<rect class=\"cell") == 2 * 30);
	CHECK(count(text, "<rect class=\"cell slow\"") == 2 * 10);
	CHECK(count(text, "<rect class=\"outline\"") == 2 * 10);
	CHECK(count(text, "<rect class=\"diagonal\"") == 2 * 6);
	CHECK(count(text, "<title>rank ") == 2 * 30);
	CHECK(strstr(text, ">r1 10.0.0.2</text>") != NULL);
	CHECK(strstr(text, "<text class=\"verdict\" x=\"20.0\" y=\"") != NULL);
	CHECK(strstr(text, ">host 10.0.0.2 (rank 1) is slow: 5 of its 5 peer "
	    "hosts") != NULL);
	CHECK(strcmp(text + len - 7, "</svg>\n") == 0);
	free(text);
	/* Into a file, whole; a directory that is not there is named. */
	fd = mkstemp(path);
	CHECK(fd >= 0);
	close(fd);
	CHECK(pairs_svg_write(path, &x.m, &x.v, why, sizeof(why)) == 0);
	CHECK(access(path, R_OK) == 0);
	unlink(path);
	CHECK(pairs_svg_write("/nonexistent/x.svg", &x.m, &x.v, why,
	    sizeof(why)) == -1);
	CHECK(strcmp(why, "--svg '/nonexistent/x.svg': No such file or "
	    "directory") == 0);
	run_fini(&x);
}

static void
test_svg_escape(void)
{
	char *buf = NULL;
	size_t len;
	FILE *out = open_memstream(&buf, &len);

	pairs_svg_text(out, "a<b>&\"c'\x01\xff\xc3\xa9\xed\xa0\x80z");
	fclose(out);
	CHECKF(strcmp(buf, "a&lt;b&gt;&amp;&quot;c&apos;\xef\xbf\xbd"
	    "\xef\xbf\xbd\xc3\xa9\xef\xbf\xbd\xef\xbf\xbd\xef\xbf\xbdz") == 0,
	    "%s", buf);
	free(buf);
}

/* A world past PAIRS_SVG_CELLS: blocks, each showing its worst. */
static void
test_svg_blocks(void)
{
	struct run x;
	char *text;
	size_t len;

	synth_init(&x.s, SYNTH_LINK, 300);
	x.s.x = 290;
	x.s.y = 3;
	x.s.repeats = 1;
	if (run_init(&x, NULL) != 0) {
		CHECK(0);
		return;
	}
	text = capture_svg(&x, &len);
	/* 150 x 150 blocks of 2 x 2 ranks, none only the diagonal. */
	CHECK(count(text, "<rect class=\"cell") == 2 * 150 * 150);
	CHECK(count(text, "<rect class=\"diagonal\"") == 0);
	CHECK(count(text, "<title>rank ") == 0);
	/* The slow cell 290 -> 3 is block (145, 1), in both panels, and
	 * 3 -> 290 at once. */
	CHECK(count(text, "<rect class=\"outline\" data-from=\"290\" "
	    "data-to=\"2\"") == 2);
	CHECK(count(text, "<rect class=\"outline\"") == 3);
	CHECK(strstr(text, "a cell: 2 x 2 ranks, its worst") != NULL);
	free(text);
	run_fini(&x);
}

/* ----------------------------------------------- samples for bats */

static int
write_sample(const char *dir, const char *name, struct run *x)
{
	char path[4096], why[300];
	FILE *out;

	snprintf(path, sizeof(path), "%s/%s.svg", dir, name);
	if (pairs_svg_write(path, &x->m, &x->v, why, sizeof(why)) != 0) {
		fprintf(stderr, "%s\n", why);
		return -1;
	}
	/* A world of 300 is for the picture: its JSON is 46 MB. */
	if (x->m.world > PAIRS_SVG_CELLS)
		return 0;
	snprintf(path, sizeof(path), "%s/%s.json", dir, name);
	if ((out = fopen(path, "w")) == NULL)
		return -1;
	pairs_header_write(out, &x->r, 30, true);
	pairs_json_write(out, &x->r, x->v.pass ? 0 : 6);
	snprintf(path, sizeof(path), "%s/%s.txt", dir, name);
	if (fclose(out) != 0 || (out = fopen(path, "w")) == NULL)
		return -1;
	pairs_header_write(out, &x->r, 30, false);
	pairs_table_write(out, &x->r);
	return fclose(out);
}

static int
write_samples(const char *dir)
{
	static const struct {
		const char *name;
		enum synth_kind kind;
		uint32_t world, x, y;
	} samples[] = {
		{ "host", SYNTH_HOST_EGRESS, 6, 3, 0 },
		{ "link", SYNTH_LINK, 6, 1, 4 },
		{ "ok", SYNTH_UNIFORM, 5, 0, 0 },
		{ "escape", SYNTH_LINK_BOTH, 3, 0, 2 },
		{ "large", SYNTH_LINK, 300, 290, 3 },
	};
	int rc = 0;

	for (size_t i = 0; i < sizeof(samples) / sizeof(samples[0]); i++) {
		struct run x;

		synth_init(&x.s, samples[i].kind, samples[i].world);
		x.s.x = samples[i].x;
		x.s.y = samples[i].y;
		x.s.noise = 0.15;
		x.s.repeats = samples[i].world > 16 ? 1 : 3;
		if (run_init(&x, NULL) != 0)
			return 1;
		if (strcmp(samples[i].name, "escape") == 0) {
			/* Labels no XML or JSON may carry raw. */
			snprintf(x.m.label[0], PAIRS_LABEL_MAX, "<a&b>");
			snprintf(x.m.label[1], PAIRS_LABEL_MAX, "\"q'\x01\xff");
		}
		rc |= write_sample(dir, samples[i].name, &x);
		run_fini(&x);
	}
	return rc ? 1 : 0;
}

int
main(int argc, char **argv)
{
	if (argc == 3 && strcmp(argv[1], "--write") == 0)
		return write_samples(argv[2]);
	TEST_RUN(test_json_good);
	TEST_RUN(test_json_bad);
	TEST_RUN(test_json_records);
	TEST_RUN(test_baseline_round_trip);
	TEST_RUN(test_baseline_errors);
	TEST_RUN(test_table);
	TEST_RUN(test_svg);
	TEST_RUN(test_svg_escape);
	TEST_RUN(test_svg_blocks);
	return TEST_DONE();
}
