/*
 * test_connect.c - the verdict of `bench connect` on synthetic probes: a
 * fabric where everything is reached, a blackholed pair, a rank nobody
 * reaches and one that reaches nobody, a rank on another interface (and
 * two), a rank that uses two, an MTU that differs (and a peer's lower MTU
 * that must not count against the others), ranks sharing a host over
 * loopback, world 2; the text table and the JSON records.
 *
 * With "--write DIR" it writes DIR/connect.json and connect.txt (three
 * ranks, a pair not reached, an MTU that differs), which
 * tests/bats/pairs.bats checks against the man page.
 */
#include <math.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include "check.h"
#include "json_read.h"
#include "connect_verdict.h"
#include "bench_connect.h"

static char addr_buf[64][32];
static char *addrs[64];

/* n ranks on 10.0.0.(i+1) (or per_host a host), every pair reached over
 * eth0 with MTU 1500, round trips 40 + from + to us. */
static int
fabric(struct connect_matrix *c, uint32_t n, uint32_t per_host)
{
	for (uint32_t r = 0; r < n; r++) {
		snprintf(addr_buf[r], sizeof(addr_buf[r]), "10.0.0.%u:%u",
		    r / per_host + 1, 47000 + r);
		addrs[r] = addr_buf[r];
	}
	if (connect_matrix_init(c, n, addrs) != 0)
		return -1;
	for (uint32_t a = 0; a < n; a++)
		for (uint32_t b = 0; b < n; b++) {
			struct connect_probe *p = connect_probe_at(c, a, b);
			bool local = a / per_host == b / per_host;

			if (a == b)
				continue;
			p->reached = true;
			p->connect_ms = 0.5 + 0.01 * (a + b);
			p->rtt_us = 40 + a + b;
			for (int e = 0; e < 2; e++) {
				uint32_t r = e ? b : a;

				snprintf(p->end[e].address,
				    sizeof(p->end[e].address), "10.0.0.%u",
				    r / per_host + 1);
				snprintf(p->end[e].ifname,
				    sizeof(p->end[e].ifname), "%s", local ?
				    "lo" : "eth0");
				p->end[e].mtu = local ? 65536 : 1500;
			}
		}
	return 0;
}

static void
fail_probe(struct connect_matrix *c, uint32_t from, uint32_t to,
    const char *error)
{
	struct connect_probe *p = connect_probe_at(c, from, to);

	memset(p, 0, sizeof(*p));
	snprintf(p->error, sizeof(p->error), "%s", error);
}

/* Rank r's own end of each connection between hosts. */
static void
set_rank_end(struct connect_matrix *c, uint32_t r, const char *ifname,
    uint32_t mtu)
{
	for (uint32_t s = 0; s < c->world; s++) {
		if (s == r)
			continue;
		if (ifname != NULL) {
			snprintf(connect_probe_at(c, r, s)->end[0].ifname,
			    CONNECT_IFNAME_MAX, "%s", ifname);
			snprintf(connect_probe_at(c, s, r)->end[1].ifname,
			    CONNECT_IFNAME_MAX, "%s", ifname);
		}
		if (mtu != 0) {
			connect_probe_at(c, r, s)->end[0].mtu = mtu;
			connect_probe_at(c, s, r)->end[1].mtu = mtu;
		}
	}
}

/* The verdict's findings joined by "|". */
static char *
verdict_words(const struct connect_matrix *c, struct connect_verdict *v,
    char *buf, size_t size)
{
	char why[200], text[1024];
	size_t n = 0;

	buf[0] = '\0';
	if (connect_verdict_run(c, v, why, sizeof(why)) != 0) {
		snprintf(buf, size, "error: %s", why);
		return buf;
	}
	for (size_t i = 0; i < v->nfindings; i++)
		n += (size_t)snprintf(buf + n, size - n, "%s%s", i ? "|" : "",
		    connect_finding_text(c, v, &v->findings[i], text,
		    sizeof(text)));
	return buf;
}

#define EXPECT(c, words, kind)                                                 \
	do {                                                                   \
		struct connect_verdict v_;                                     \
		char got_[4096];                                               \
									       \
		verdict_words((c), &v_, got_, sizeof(got_));                   \
		CHECKF(strcmp(got_, (words)) == 0, "got '%s'", got_);          \
		CHECKF(strcmp(connect_verdict_kind(&v_), (kind)) == 0,         \
		    "kind %s", connect_verdict_kind(&v_));                     \
		CHECK(v_.pass == ((words)[0] == '\0'));                        \
		connect_verdict_fini(&v_);                                     \
	} while (0)

static void
test_ok(void)
{
	struct connect_matrix c;
	struct connect_verdict v;
	char why[200];

	for (uint32_t n = 1; n <= 12; n++) {
		CHECK(fabric(&c, n, 1) == 0);
		EXPECT(&c, "", "ok");
		CHECK(connect_verdict_run(&c, &v, why, sizeof(why)) == 0);
		CHECK(v.unreachable == 0);
		if (n > 1) {
			CHECK(strcmp(v.ifname, "eth0") == 0);
			CHECK(v.mtu == 1500);
		}
		connect_verdict_fini(&v);
		connect_matrix_fini(&c);
	}
	CHECK(connect_matrix_init(&c, 0, addrs) == -1);
	CHECK(connect_matrix_init(&c, CONNECT_WORLD_MAX + 1, addrs) == -1);
}

static void
test_unreachable(void)
{
	struct connect_matrix c;
	struct connect_verdict v;
	char why[200];

	/* A blackhole route on rank 3's host towards rank 7's. */
	CHECK(fabric(&c, 8, 1) == 0);
	fail_probe(&c, 3, 7, "No route to host");
	fail_probe(&c, 7, 3, "timed out after 5s waiting for the hello");
	EXPECT(&c, "rank 3 (10.0.0.4) cannot reach rank 7 (10.0.0.8): No route "
	    "to host|rank 7 (10.0.0.8) cannot reach rank 3 (10.0.0.4): timed "
	    "out after 5s waiting for the hello", "unreachable");
	CHECK(connect_verdict_run(&c, &v, why, sizeof(why)) == 0);
	CHECK(v.unreachable == 2);
	connect_verdict_fini(&v);
	connect_matrix_fini(&c);
	/* Nobody reaches rank 2 (it is not listening): one finding. */
	CHECK(fabric(&c, 5, 1) == 0);
	for (uint32_t r = 0; r < 5; r++)
		if (r != 2)
			fail_probe(&c, r, 2, r == 4 ? "Connection timed out" :
			    "Connection refused");
	EXPECT(&c, "no rank can reach rank 2 (10.0.0.3): Connection refused",
	    "unreachable");
	/* and it reaches nobody either: a second. */
	for (uint32_t r = 0; r < 5; r++)
		if (r != 2)
			fail_probe(&c, 2, r, "Network is unreachable");
	EXPECT(&c, "no rank can reach rank 2 (10.0.0.3): Connection refused|"
	    "rank 2 (10.0.0.3) cannot reach any rank: Network is unreachable",
	    "unreachable");
	connect_matrix_fini(&c);
	/* World 2: the pair says it. */
	CHECK(fabric(&c, 2, 1) == 0);
	fail_probe(&c, 1, 0, "");
	EXPECT(&c, "rank 1 (10.0.0.2) cannot reach rank 0 (10.0.0.1): no "
	    "reason given", "unreachable");
	connect_matrix_fini(&c);
}

static void
test_interface(void)
{
	struct connect_matrix c;

	CHECK(fabric(&c, 6, 1) == 0);
	set_rank_end(&c, 2, "eth1", 0);
	EXPECT(&c, "rank 2 uses interface eth1 where the others use eth0",
	    "interface");
	set_rank_end(&c, 5, "eth1", 0);
	EXPECT(&c, "ranks 2, 5 use interface eth1 where the others use eth0",
	    "interface");
	set_rank_end(&c, 4, "ib0", 0);
	EXPECT(&c, "ranks 2, 5 use interface eth1 where the others use eth0|"
	    "rank 4 uses interface ib0 where the others use eth0", "interface");
	connect_matrix_fini(&c);
	/* Rank 1 reaches rank 3 by another interface than the rest. */
	CHECK(fabric(&c, 5, 1) == 0);
	snprintf(connect_probe_at(&c, 1, 3)->end[0].ifname,
	    CONNECT_IFNAME_MAX, "eth1");
	EXPECT(&c, "rank 1 uses interface eth1 to reach rank 3 (10.0.0.4), "
	    "eth0 for the others", "interface");
	connect_matrix_fini(&c);
	/* Unknown names are not a difference. */
	CHECK(fabric(&c, 3, 1) == 0);
	set_rank_end(&c, 1, "", 0);
	EXPECT(&c, "", "ok");
	connect_matrix_fini(&c);
}

static void
test_mtu(void)
{
	struct connect_matrix c;

	CHECK(fabric(&c, 7, 1) == 0);
	for (uint32_t r = 0; r < 7; r++)
		set_rank_end(&c, r, NULL, 9000);
	EXPECT(&c, "", "ok");
	/* Rank 5's interface has 1500; its peers learnt 1500 for their
	 * connections to it too, which is one of their six. */
	set_rank_end(&c, 5, NULL, 1500);
	for (uint32_t r = 0; r < 7; r++)
		if (r != 5) {
			connect_probe_at(&c, r, 5)->end[0].mtu = 1500;
			connect_probe_at(&c, 5, r)->end[1].mtu = 1500;
		}
	EXPECT(&c, "MTU 1500 on rank 5, 9000 elsewhere", "mtu");
	set_rank_end(&c, 0, "eth1", 1500);
	EXPECT(&c, "rank 0 uses interface eth1 where the others use eth0|"
	    "MTU 1500 on ranks 0, 5, 9000 elsewhere", "several");
	connect_matrix_fini(&c);
}

/* Two ranks a host: loopback between them is neither an interface nor an
 * MTU to compare. */
static void
test_shared_host(void)
{
	struct connect_matrix c;

	CHECK(fabric(&c, 6, 2) == 0);
	EXPECT(&c, "", "ok");
	fail_probe(&c, 4, 5, "Connection refused");
	EXPECT(&c, "rank 4 (10.0.0.3) cannot reach rank 5 (10.0.0.3): "
	    "Connection refused", "unreachable");
	connect_matrix_fini(&c);
	/* All on one host. */
	CHECK(fabric(&c, 4, 4) == 0);
	EXPECT(&c, "", "ok");
	connect_matrix_fini(&c);
}

static char *
table(const struct connect_matrix *c, const struct connect_verdict *v)
{
	char *buf = NULL;
	size_t len;
	FILE *out = open_memstream(&buf, &len);

	CHECK(connect_table_write(out, c, v) == 0);
	fclose(out);
	return buf;
}

static void
test_table(void)
{
	struct connect_matrix c;
	struct connect_verdict v;
	char why[200], *text;

	CHECK(fabric(&c, 3, 1) == 0);
	fail_probe(&c, 2, 0, "No route to host");
	CHECK(connect_verdict_run(&c, &v, why, sizeof(why)) == 0);
	text = table(&c, &v);
	CHECKF(strcmp(text,
	    "# connect: each of 3 ranks dialled every other rank (connect and "
	    "hello)\n"
	    "#\n"
	    "# round trip (us), TCP's at the dialling rank (row: from, column: "
	    "to; x: not reached)\n"
	    "# from\\to        0        1        2\n"
	    "        0        -     41.0     42.0\n"
	    "        1     41.0        -     43.0\n"
	    "        2        x     43.0        -\n"
	    "#\n"
	    "#   rank address                  interface           mtu  reached "
	    " rtt (us) connect (ms)\n"
	    "       0 10.0.0.1:47000           eth0               1500    2/2  "
	    "      41.5        0.52\n"
	    "       1 10.0.0.2:47001           eth0               1500    2/2  "
	    "      42.0        0.52\n"
	    "       2 10.0.0.3:47002           eth0               1500    1/2  "
	    "      43.0        0.53\n"
	    "# verdict: rank 2 (10.0.0.3) cannot reach rank 0 (10.0.0.1): No "
	    "route to host\n") == 0, "%s", text);
	free(text);
	connect_verdict_fini(&v);
	connect_matrix_fini(&c);
	/* Beyond 16: no matrix, the longest round trips. */
	CHECK(fabric(&c, 20, 1) == 0);
	CHECK(connect_verdict_run(&c, &v, why, sizeof(why)) == 0);
	text = table(&c, &v);
	CHECK(strstr(text, "round trip (us)") == NULL);
	CHECK(strstr(text, "# the 20 longest round trips:\n") != NULL);
	CHECKF(strstr(text, "\n      18 10.0.0.19                19 10.0.0.20"
	    "                 77.0\n      19 10.0.0.20                18 "
	    "10.0.0.19                 77.0\n") != NULL, "%s", text);
	CHECK(strstr(text, "# verdict: ok: all 380 connections reached, "
	    "interface eth0, MTU 1500\n") != NULL);
	free(text);
	connect_verdict_fini(&v);
	connect_matrix_fini(&c);
}

static void
test_json(void)
{
	struct connect_matrix c;
	struct connect_verdict v;
	char why[200], *buf = NULL, *line, *next;
	size_t len, records = 0;
	FILE *out;

	CHECK(fabric(&c, 3, 1) == 0);
	fail_probe(&c, 1, 2, "No route to host");
	set_rank_end(&c, 0, NULL, 9000);
	CHECK(connect_verdict_run(&c, &v, why, sizeof(why)) == 0);
	out = open_memstream(&buf, &len);
	connect_json_write(out, &c, &v, 6);
	fclose(out);
	for (line = buf; *line; line = next) {
		struct json_value j;
		const struct json_value *type;

		next = strchr(line, '\n');
		*next++ = '\0';
		records++;
		if (json_parse(line, strlen(line), &j, why, sizeof(why)) != 0) {
			CHECKF(0, "%s: %s", why, line);
			continue;
		}
		type = json_get(&j, "type");
		if (strcmp(type->string, "connect") == 0) {
			bool hole = json_get(&j, "from")->number == 1 &&
			    json_get(&j, "to")->number == 2;

			CHECK((json_get(&j, "reached")->type == JSON_TRUE) ==
			    !hole);
			CHECK((json_get(&j, "error")->type == JSON_NULL) ==
			    !hole);
			CHECK((json_get(&j, "rtt_us")->type == JSON_NULL) ==
			    hole);
			CHECK(json_get(&j, "local_interface") != NULL);
			CHECK(json_get(&j, "remote_mtu") != NULL);
		} else {
			const struct json_value *f = json_get(&j, "findings");

			CHECK(strcmp(type->string, "connect_verdict") == 0);
			CHECK(strcmp(json_get(&j, "verdict")->string,
			    "several") == 0);
			CHECK(json_get(&j, "exit")->number == 6);
			CHECK(json_get(&j, "unreachable")->number == 1);
			CHECK(f->count == 2);
			CHECK(strcmp(json_get(&f->items[0], "kind")->string,
			    "no_route") == 0);
			CHECK(strcmp(json_get(&f->items[0], "error")->string,
			    "No route to host") == 0);
			CHECK(json_get(&f->items[0], "peer")->number == 2);
			CHECK(strcmp(json_get(&f->items[1], "kind")->string,
			    "mtu") == 0);
			CHECK(json_get(&f->items[1], "mtu")->number == 9000);
			CHECK(json_get(&f->items[1], "ranks")->count == 1);
			CHECK(strcmp(json_get(&f->items[1], "text")->string,
			    "MTU 9000 on rank 0, 1500 elsewhere") == 0);
		}
		json_free(&j);
	}
	CHECK(records == 7);
	free(buf);
	connect_verdict_fini(&v);
	connect_matrix_fini(&c);
}

static int
write_sample(const char *dir)
{
	struct connect_matrix c;
	struct connect_verdict v;
	char path[4096], why[200];
	FILE *out;
	int rc;

	if (fabric(&c, 3, 1) != 0)
		return 1;
	fail_probe(&c, 1, 2, "No route to host");
	set_rank_end(&c, 0, NULL, 9000);
	if (connect_verdict_run(&c, &v, why, sizeof(why)) != 0)
		return 1;
	snprintf(path, sizeof(path), "%s/connect.json", dir);
	if ((out = fopen(path, "w")) == NULL)
		return 1;
	connect_json_write(out, &c, &v, 6);
	rc = fclose(out);
	snprintf(path, sizeof(path), "%s/connect.txt", dir);
	if (rc != 0 || (out = fopen(path, "w")) == NULL)
		return 1;
	rc = connect_table_write(out, &c, &v) | fclose(out);
	connect_verdict_fini(&v);
	connect_matrix_fini(&c);
	return rc ? 1 : 0;
}

/* A rank's probe report through its wire form: every field of every
 * peer, the ends and errors by table; past the tables' room the last
 * entry stands for the rest, and a text too long is cut, NUL-terminated. */
static void
test_report_round_trip(void)
{
	enum { W = 12 };
	static char *addresses[W];
	struct sr_probe_link probe[W];
	struct connect_matrix c;
	uint8_t *wire = malloc(bench_connect_report_len(W));
	char text[W][32];

	CHECK(wire != NULL);
	if (wire == NULL)
		return;
	for (uint32_t r = 0; r < W; r++) {
		snprintf(text[r], sizeof(text[r]), "10.0.0.%u:4000", r + 1);
		addresses[r] = text[r];
	}
	memset(probe, 0, sizeof(probe));
	for (uint32_t r = 0; r < W; r++) {
		struct sr_probe_link *p = &probe[r];

		p->peer = r;
		p->reached = r % 3 != 0;
		p->attempts = r + 1;
		p->connect_us = 1000 * r + 7;
		p->handshake_us = 500;
		p->rtt_us = 10 * r;
		p->mtu = r < 6 ? 1500 : 9000;
		snprintf(p->local, sizeof(p->local), "10.0.%u.1:%u", r % 10,
		    50000 + r);
		snprintf(p->iface, sizeof(p->iface), "eth%u", r % 10);
		if (!p->reached)
			snprintf(p->error, sizeof(p->error), "error %u", r);
	}
	memset(probe[9].error, 'x', sizeof(probe[9].error) - 1);
	bench_connect_encode(probe, W, 1, wire);
	CHECK(connect_matrix_init(&c, W, addresses) == 0);
	bench_connect_decode(wire, W, 1, &c);
	for (uint32_t to = 0; to < W; to++) {
		const struct connect_probe *p;

		if (to == 1)
			continue;
		p = connect_probe_at(&c, 1, to);
		CHECKF(p->reached == probe[to].reached, "to %u", to);
		CHECKF(p->end[0].mtu == probe[to].mtu, "to %u: mtu %u", to,
		    p->end[0].mtu);
		CHECKF(fabs(p->connect_ms - (1000.0 * to + 507) / 1000) < 1e-9,
		    "to %u: %g ms", to, p->connect_ms);
		CHECKF(p->rtt_us == 10.0 * to, "to %u: rtt %g", to, p->rtt_us);
		/* Eight ends fit: 0, 2, ..., 8 in its own; 9 shares the
		 * last entry's. */
		if (to < 8)
			CHECKF(strcmp(p->end[0].address, probe[to].local) == 0 &&
			    strcmp(p->end[0].ifname, probe[to].iface) == 0,
			    "to %u: %s %s", to, p->end[0].address,
			    p->end[0].ifname);
		if (!probe[to].reached && to != 9)
			CHECKF(strcmp(p->error, probe[to].error) == 0,
			    "to %u: '%s'", to, p->error);
		if (to == 9)
			CHECKF(strlen(p->error) == sizeof(p->error) - 1,
			    "a long error cut to %zu bytes", strlen(p->error));
	}
	connect_matrix_fini(&c);
	free(wire);
}

int
main(int argc, char **argv)
{
	if (argc == 3 && strcmp(argv[1], "--write") == 0)
		return write_sample(argv[2]);
	TEST_RUN(test_ok);
	TEST_RUN(test_unreachable);
	TEST_RUN(test_interface);
	TEST_RUN(test_mtu);
	TEST_RUN(test_shared_host);
	TEST_RUN(test_table);
	TEST_RUN(test_json);
	TEST_RUN(test_report_round_trip);
	return TEST_DONE();
}
