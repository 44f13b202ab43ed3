/*
 * test_hosts.c - host lists (cli/hosts.c): --hosts with slots and pdsh
 * ranges, hostfiles as mpirun writes them, Slurm's node list and tasks
 * per node, every malformed form named; and the launcher's wire to its
 * agents (cli/launch_wire.c): the orders round trip, are found complete
 * only when whole, fed a byte at a time, refuse bad values; the control
 * lines round trip and refuse what is not one.
 */
#include <stdbool.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "check.h"
#include "hosts.h"
#include "launch_wire.h"

static char why[600];

/* The list as "name:slots,name:slots", with " (TOTAL)" after it when
 * total; frees it. */
static const char *
listed(struct host_list *l, bool total)
{
	static char out[4096];

	out[0] = '\0';
	for (size_t i = 0; i < l->n; i++)
		snprintf(out + strlen(out), sizeof(out) - strlen(out), "%s%s:%u",
		    i ? "," : "", l->host[i].name, l->host[i].slots);
	if (total)
		snprintf(out + strlen(out), sizeof(out) - strlen(out), " (%llu)",
		    (unsigned long long)l->slots);
	host_list_free(l);
	return out;
}

/* A --hosts value's list, or the error's text. */
static const char *
spec(const char *text)
{
	struct host_list l;

	why[0] = '\0';
	if (hosts_parse(text, "--hosts", &l, why, sizeof(why)) != 0)
		return why;
	return listed(&l, false);
}

/* A hostfile's list and its slots, or the error's text. */
static const char *
file(const char *text)
{
	struct host_list l;

	why[0] = '\0';
	if (hosts_parse_file(text, strlen(text), "hf", &l, why,
	    sizeof(why)) != 0)
		return why;
	return listed(&l, true);
}

#define SAME(got, want)                                                        \
	CHECKF(strcmp((got), (want)) == 0, "got '%s', want '%s'", (got), (want))

static void
test_spec_plain_and_slots(void)
{
	SAME(spec("a"), "a:1");
	SAME(spec("h1,h2:4,h3"), "h1:1,h2:4,h3:1");
	SAME(spec(" a , b:2 "), "a:1,b:2");
	SAME(spec("root@node1:3,user.x@10.0.0.2"), "root@node1:3,user.x@10.0.0.2:1");
	SAME(spec("h:1024"), "h:1024");
}

static void
test_spec_ranges(void)
{
	SAME(spec("node[01-03]"), "node01:1,node02:1,node03:1");
	SAME(spec("node[9-11]:2"), "node9:2,node10:2,node11:2");
	SAME(spec("n[1,3,5-6]-ib"), "n1-ib:1,n3-ib:1,n5-ib:1,n6-ib:1");
	SAME(spec("r[1-2]n[1-2]"), "r1n1:1,r1n2:1,r2n1:1,r2n2:1");
	SAME(spec("a,n[1-2],b:3"), "a:1,n1:1,n2:1,b:3");
	SAME(spec("10.0.0.[1-3]"), "10.0.0.1:1,10.0.0.2:1,10.0.0.3:1");
	SAME(spec("x[007-008]"), "x007:1,x008:1");
	SAME(spec("x[8-10]"), "x8:1,x9:1,x10:1");
	SAME(spec("x[98-101]"), "x98:1,x99:1,x100:1,x101:1");
}

static void
test_spec_errors(void)
{
	SAME(spec(""), "--hosts: '' has an empty entry (entry 1)");
	SAME(spec("a,,b"), "--hosts: 'a,,b' has an empty entry (entry 2)");
	SAME(spec("a,"), "--hosts: 'a,' ends in a comma");
	SAME(spec("a:0"), "--hosts entry 1: '0' is not a number of slots from 1 to 1024");
	SAME(spec("a:1025"), "--hosts entry 1: '1025' is not a number of slots from 1 to 1024");
	SAME(spec("a:x"), "--hosts entry 1: 'x' is not a number of slots from 1 to 1024");
	SAME(spec("a:"), "--hosts entry 1: '' is not a number of slots from 1 to 1024");
	SAME(spec(":4"), "--hosts entry 1: no host name");
	SAME(spec("a,-oProxyCommand=x"),
	    "--hosts entry 2: '-oProxyCommand=x' is not a host name (letters, "
	    "digits, '.', '-' and '_', not starting with '-', optionally user@)");
	SAME(spec("a b"), "--hosts entry 1: 'a b' is not a host name (letters, "
	    "digits, '.', '-' and '_', not starting with '-', optionally user@)");
	SAME(spec("@h"), "--hosts entry 1: '@h' is not a host name (letters, "
	    "digits, '.', '-' and '_', not starting with '-', optionally user@)");
	SAME(spec("u@v@h"), "--hosts entry 1: 'u@v@h' is not a host name "
	    "(letters, digits, '.', '-' and '_', not starting with '-', "
	    "optionally user@)");
	SAME(spec("n[3-1]"), "--hosts entry 1: 'n[3-1]': a range ends before it starts");
	SAME(spec("n[1-"), "--hosts entry 1: 'n[1-': a '[' without its ']'");
	SAME(spec("n1]"), "--hosts entry 1: 'n1]': a ']' without its '['");
	SAME(spec("n[a-b]"), "--hosts entry 1: 'n[a-b]': a range is numbers, 'A-B' or 'A', separated by commas");
	SAME(spec("n[1,,2]"), "--hosts entry 1: 'n[1,,2]': a range is numbers, 'A-B' or 'A', separated by commas");
	SAME(spec("n[[1]]"), "--hosts entry 1: 'n[[1]]': ranges do not nest");
	SAME(spec("n[0-99999]"), "--hosts entry 1: 'n[0-99999]': a range of more than 65536 hosts");
	SAME(spec("a,b,a"), "--hosts: host 'a' is listed twice (give it more slots instead, as a:2)");
	SAME(spec("n[1-3],n2:2"), "--hosts: host 'n2' is listed twice (give it more slots instead, as n2:4)");
	/* every range entry counts toward the limit */
	SAME(spec("a[0-40000],b[0-40000]"), "--hosts entry 2: more than 65536 hosts");
}

static void
test_hostfile(void)
{
	SAME(file("a\nb slots=4\nc:2\n"), "a:1,b:4,c:2 (7)");
	SAME(file("# a comment\n\n  n[1-2] slots=2 max_slots=8  # two each\r\nx\n"),
	    "n1:2,n2:2,x:1 (5)");
	SAME(file("a\tslots=3"), "a:3 (3)");
	SAME(file("a slots=0\n"), "hf:1: '0' is not a number of slots from 1 to 1024");
	SAME(file("a\nb cpus=2\n"), "hf:2: 'cpus=2' is not slots=N");
	SAME(file("a:2 slots=2\n"), "hf:1: slots given twice");
	SAME(file("a slots=2 slots=3\n"), "hf:1: slots given twice");
	SAME(file("# nothing\n\n"), "hf: no host in the file");
	SAME(file("a\nb\na\n"), "hf: host 'a' is listed twice (give it more slots instead, as a:2)");
	SAME(file("a\nn[2-1]\n"), "hf:2: 'n[2-1]': a range ends before it starts");
}

static const char *
slurm(const char *nodes, const char *tasks)
{
	struct host_list l;

	why[0] = '\0';
	if (hosts_parse(nodes, "SLURM_JOB_NODELIST", &l, why,
	    sizeof(why)) != 0)
		return why;
	if (hosts_slurm_tasks(&l, tasks, "SLURM_TASKS_PER_NODE", why,
	    sizeof(why)) != 0) {
		host_list_free(&l);
		return why;
	}
	return listed(&l, true);
}

static void
test_slurm(void)
{
	SAME(slurm("node[01-03],gpu7", "2(x3),1"),
	    "node01:2,node02:2,node03:2,gpu7:1 (7)");
	SAME(slurm("a,b", "4,1"), "a:4,b:1 (5)");
	SAME(slurm("n[1-4]", "1(x4)"), "n1:1,n2:1,n3:1,n4:1 (4)");
	SAME(slurm("n[1-4]", "1(x3)"),
	    "SLURM_TASKS_PER_NODE='1(x3)' gives tasks for 3 of the 4 nodes of the node list");
	SAME(slurm("n[1-2]", "1(x3)"),
	    "SLURM_TASKS_PER_NODE='1(x3)' gives tasks for more than the 2 nodes of the node list");
	SAME(slurm("n1", "2x"), "SLURM_TASKS_PER_NODE='2x' is not a list of task counts (as '2(x3),1')");
	SAME(slurm("n1", "(x1)"), "SLURM_TASKS_PER_NODE='(x1)' is not a list of task counts (as '2(x3),1')");
	SAME(slurm("n1", "1,"), "SLURM_TASKS_PER_NODE='1,' is not a list of task counts (as '2(x3),1')");
	SAME(slurm("n1", "1(x1)2"), "SLURM_TASKS_PER_NODE='1(x1)2' is not a list of task counts (as '2(x3),1')");
	SAME(slurm("n1", "1(x0)"), "SLURM_TASKS_PER_NODE='1(x0)' is not a list of task counts (as '2(x3),1')");
	SAME(hosts_bare_name("u@h"), "h");
	SAME(hosts_bare_name("h"), "h");
}

/* ------------------------------------------------------------ the wire */

static char *argv_run[] = { "silvic-ring", "run", "--timeout", "30",
	"with\nnewline and spaces", "", NULL };

static void
orders_fill(struct launch_orders *o, const char *input, size_t input_len)
{
	memset(o, 0, sizeof(*o));
	o->version = LAUNCH_WIRE_VERSION;
	memset(o->secret, 'a', LAUNCH_SECRET_HEX);
	o->host = 3;
	snprintf(o->name, sizeof(o->name), "root@node[1]x");
	snprintf(o->launcher, sizeof(o->launcher), ":40001");
	o->base = 4;
	o->count = 2;
	o->world = 9;
	o->grace = 1.5;
	o->keepalive = 10;
	o->address_s = 35;
	o->connect_s = 0.25;
	o->tag = true;
	o->machine = false;
	o->share_stdin = true;
	o->verbosity = 2;
	o->argc = 6;
	o->argv = argv_run;
	o->input = input;
	o->input_len = input_len;
}

/* The whole orders, as the launcher writes them. */
static char *
orders_text(const struct launch_orders *o, size_t *len)
{
	struct wire_out q = { 0 };

	CHECK(launch_orders_encode(o, &q) == 0);
	CHECK(wire_out_add(&q, o->input, o->input_len) == 0);
	CHECK(wire_out_add(&q, launch_orders_trailer,
	    strlen(launch_orders_trailer)) == 0);
	/* NUL-terminated, for the tests' strstr; not counted. */
	CHECK(wire_out_add(&q, "", 1) == 0);
	*len = q.len - 1;
	return q.buf;
}

static void
test_orders_round_trip(void)
{
	static const char input[] = "allreduce sum i64 1\n\0binary\nend 0\n";
	struct launch_orders o, d;
	size_t len, used;
	char *text;

	orders_fill(&o, input, sizeof(input));
	text = orders_text(&o, &len);
	why[0] = '\0';
	CHECK(launch_orders_complete(text, len, &used, why, sizeof(why)) == 1);
	CHECK(used == len);
	CHECKF(launch_orders_decode(text, len, &d, why, sizeof(why)) == 0, "%s",
	    why);
	CHECK(d.version == LAUNCH_WIRE_VERSION);
	CHECK(memcmp(d.secret, o.secret, LAUNCH_SECRET_HEX) == 0);
	CHECK(d.host == 3 && d.base == 4 && d.count == 2 && d.world == 9);
	CHECK(strcmp(d.name, "root@node[1]x") == 0);
	CHECK(strcmp(d.launcher, ":40001") == 0);
	CHECK(d.grace == 1.5 && d.keepalive == 10 && d.address_s == 35 &&
	    d.connect_s == 0.25);
	CHECK(d.tag && !d.machine && d.share_stdin && d.verbosity == 2);
	CHECK(d.argc == 6 && d.argv[6] == NULL);
	for (int i = 0; i < 6 && d.argc == 6; i++)
		CHECKF(strcmp(d.argv[i], argv_run[i]) == 0, "arg %d '%s'", i,
		    d.argv[i]);
	CHECK(d.input_len == sizeof(input) &&
	    memcmp(d.input, input, sizeof(input)) == 0);
	/* The secret is wiped from the buffer once copied out. */
	CHECK(memmem(text, len, o.secret, LAUNCH_SECRET_HEX) == NULL);
	free(d.argv);
	free(text);
}

static void
test_orders_incomplete(void)
{
	struct launch_orders o;
	size_t len, used;
	char *text;

	orders_fill(&o, "x\ny\n", 4);
	text = orders_text(&o, &len);
	/* Every prefix, a byte at a time: never complete before the end. */
	for (size_t n = 0; n < len; n++) {
		int rc = launch_orders_complete(text, n, &used, why, sizeof(why));

		CHECKF(rc == 0, "a prefix of %zu of %zu bytes: %d (%s)", n, len,
		    rc, why);
	}
	CHECK(launch_orders_complete(text, len, &used, why, sizeof(why)) == 1);
	free(text);
}

/* Replaces the first record NAME's value with value (same text form). */
static int
decode_with(const char *name, const char *value, char *out_why)
{
	struct launch_orders o, d;
	struct wire_out q = { 0 };
	char head[64], *text, *at;
	size_t len;
	int rc;

	orders_fill(&o, "", 0);
	text = orders_text(&o, &len);
	snprintf(head, sizeof(head), "\n%s ", name);
	at = strstr(text, head);
	CHECKF(at != NULL || strcmp(name, "version") == 0, "no record %s", name);
	if (strcmp(name, "version") == 0)
		at = text - 1;
	{
		char *value_start = strchr(at + 1, '\n') + 1;
		size_t old = strtoul(at + 1 + strlen(name) + 1, NULL, 10);

		CHECK(wire_out_add(&q, text, (size_t)(at + 1 - text)) == 0);
		snprintf(head, sizeof(head), "%s %zu\n", name, strlen(value));
		CHECK(wire_out_add(&q, head, strlen(head)) == 0);
		CHECK(wire_out_add(&q, value, strlen(value)) == 0);
		CHECK(wire_out_add(&q, value_start + old,
		    len - (size_t)(value_start + old - text)) == 0);
	}
	free(text);
	out_why[0] = '\0';
	rc = launch_orders_decode(q.buf, q.len, &d, out_why, 200);
	if (rc == 0)
		free(d.argv);
	wire_out_free(&q);
	return rc;
}

static void
test_orders_bad_values(void)
{
	static const char *const bad[][2] = {
		{ "version", "2" }, { "version", "x" }, { "secret", "abc" },
		{ "host", "65536" }, { "host", "-1" }, { "ranks", "4 2" },
		{ "ranks", "0 0 9" }, { "ranks", "8 2 9" }, { "ranks", "9 1 9" },
		{ "ranks", "0 1025 2000" }, { "ranks", "0 1 65537" },
		{ "ranks", "1 1 2 3" }, { "grace", "-1" }, { "grace", "nan" },
		{ "grace", "1s" }, { "tag", "2" }, { "tag", "" },
		{ "verbose", "10" }, { "launcher", "" },
	};
	char w[200];

	for (size_t i = 0; i < sizeof(bad) / sizeof(bad[0]); i++)
		CHECKF(decode_with(bad[i][0], bad[i][1], w) != 0,
		    "%s '%s' was taken", bad[i][0], bad[i][1]);
	CHECK(decode_with("grace", "0.5", w) == 0);
	CHECK(decode_with("version", "2", w) != 0 &&
	    strstr(w, "the launcher runs another build") != NULL);
}

static void
test_orders_malformed(void)
{
	static const char *const bad[] = {
		"Version 1\n1\n", "version\n", "version 1x\n1\n",
		"version 1\n1X", "version 1234567890\n",
		"arg 70000\n", "input 99999999999\n",
		"unknownlongrecordname 1\n1\nend 0\n\n",
	};
	size_t used;

	for (size_t i = 0; i < sizeof(bad) / sizeof(bad[0]); i++) {
		struct launch_orders d;
		char *copy = strdup(bad[i]);
		int c = launch_orders_complete(copy, strlen(copy), &used, why,
		    sizeof(why));

		CHECKF(c < 0 || (c == 1 && launch_orders_decode(copy,
		    strlen(copy), &d, why, sizeof(why)) != 0), "'%s' -> %d",
		    bad[i], c);
		free(copy);
	}
	/* A header that never ends is refused once it is too long. */
	{
		char junk[100];

		memset(junk, 'a', sizeof(junk));
		CHECK(launch_orders_complete(junk, sizeof(junk), &used, why,
		    sizeof(why)) < 0);
	}
}

static const char *
msg(const char *line)
{
	static char out[LAUNCH_MSG_MAX + 64];
	struct launch_msg m;
	struct wire_out q = { 0 };

	if (launch_msg_parse(line, &m) != 0)
		return "refused";
	CHECK(launch_msg_put(&q, &m) == 0);
	snprintf(out, sizeof(out), "%.*s", (int)q.len, q.buf);
	wire_out_free(&q);
	return out;
}

static void
test_messages(void)
{
	char secret[LAUNCH_SECRET_HEX + 1], line[600];

	SAME(msg("hello 1 3 abcdef"), "hello 1 3 abcdef\n");
	SAME(msg("address 7 10.0.0.1:4000"), "address 7 10.0.0.1:4000\n");
	SAME(msg("address 7 [::1]:4000"), "address 7 [::1]:4000\n");
	SAME(msg("exit 7 137"), "exit 7 137\n");
	SAME(msg("status 3"), "status 3\n");
	SAME(msg("start"), "start\n");
	SAME(msg("peer node1:47000"), "peer node1:47000\n");
	SAME(msg("list 64"), "list 64\n");
	SAME(msg("stop"), "stop\n");
	SAME(msg("abandon"), "abandon\n");
	SAME(msg("hello 1 3"), "refused");
	SAME(msg("hello 1 x abc"), "refused");
	SAME(msg("exit 7"), "refused");
	SAME(msg("exit 7 1 2"), "refused");
	SAME(msg("exit -1 2"), "refused");
	SAME(msg("exit 99999999999 2"), "refused");
	SAME(msg("start now"), "refused");
	SAME(msg("stopx"), "refused");
	SAME(msg("address 7  10.0.0.1:4000"), "refused");
	SAME(msg("address 7 a\tb"), "refused");
	SAME(msg(""), "refused");
	SAME(msg("beat"), "refused");
	memset(line, 'x', sizeof(line) - 1);
	line[sizeof(line) - 1] = '\0';
	memcpy(line, "peer ", 5);
	SAME(msg(line), "refused");
	CHECK(launch_secret_new(secret) == 0);
	CHECK(strlen(secret) == LAUNCH_SECRET_HEX);
	CHECK(strspn(secret, "0123456789abcdef") == LAUNCH_SECRET_HEX);
	CHECK(launch_secret_equal(secret, secret));
	{
		char other[LAUNCH_SECRET_HEX + 1];

		memcpy(other, secret, sizeof(other));
		other[LAUNCH_SECRET_HEX - 1] ^= 1;
		CHECK(!launch_secret_equal(secret, other));
		CHECK(!launch_secret_equal(secret, "abc"));
		CHECK(!launch_secret_equal("", ""));
	}
}

static void
test_lines_in(void)
{
	struct wire_in in = { .len = 0 };
	char line[LAUNCH_MSG_MAX];

	memcpy(in.buf, "start\npeer a:1\npar", 18);
	in.len = 18;
	CHECK(wire_in_line(&in, line, sizeof(line)) == 1 &&
	    strcmp(line, "start") == 0);
	CHECK(wire_in_line(&in, line, sizeof(line)) == 1 &&
	    strcmp(line, "peer a:1") == 0);
	CHECK(wire_in_line(&in, line, sizeof(line)) == 0 && in.len == 3);
	memset(in.buf, 'x', LAUNCH_MSG_MAX);
	in.len = LAUNCH_MSG_MAX;
	CHECK(wire_in_line(&in, line, sizeof(line)) == -1);
}

int
main(void)
{
	TEST_RUN(test_spec_plain_and_slots);
	TEST_RUN(test_spec_ranges);
	TEST_RUN(test_spec_errors);
	TEST_RUN(test_hostfile);
	TEST_RUN(test_slurm);
	TEST_RUN(test_orders_round_trip);
	TEST_RUN(test_orders_incomplete);
	TEST_RUN(test_orders_bad_values);
	TEST_RUN(test_orders_malformed);
	TEST_RUN(test_messages);
	TEST_RUN(test_lines_in);
	return TEST_DONE();
}
