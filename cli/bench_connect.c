/*
 * bench_connect.c - `silvic-ring bench connect`: the preflight.  Every
 * rank dials every other rank, both ways, for a few seconds (the core's
 * probe, sr_ring_options.probe_ms); what each of its connections saw is
 * gathered to every rank over the ring, judged alike everywhere
 * (connect_verdict.c), printed by rank 0, and each rank exits with the
 * verdict's status: 0, or 6 for any finding.
 *
 * When the ring itself cannot carry the reports (a neighbour's link is
 * one of the missing ones), each rank judges what it saw itself: its own
 * findings on stderr, rank 0's on stdout too, and exit 6.  A finding is
 * never lost to the gathering.
 */
#include <errno.h>
#include <getopt.h>
#include <stdlib.h>
#include <string.h>

#include "cli.h"
#include "bench_connect.h"
#include "connect_verdict.h"

const char usage_bench_connect[] =
"usage: silvic-ring bench connect [OPTIONS]\n"
"\n"
"The preflight: every rank dials every other rank (connect and hello),\n"
"both ways, and reports for each pair whether it got through and why not,\n"
"the connect time, TCP's round trip, and the local address, interface and\n"
"path MTU it used.  The verdict names an unreachable pair with the error,\n"
"a rank on another interface, another MTU; any finding exits 6.  Only rank\n"
"0 prints the table; every rank exits with the verdict.\n"
"\n"
"      --probe-time SECONDS  how long the ranks keep dialling one that does\n"
"                           not answer (default 3; at most --timeout)\n"
"  -h, --help               this text\n"
"\n";

#define PROBE_DEFAULT_S 3.0

/*
 * A rank's report on the wire: its table of local ends (address and
 * interface; a rank has few) and of error texts, then one record a peer
 * naming them by index.  Little-endian, fixed size.
 *
 *	record:	0 reached u8, 1 local u8, 2 error u8, 3 reserved,
 *		4 attempts u32, 8 connect_us u32, 12 handshake_us u32,
 *		16 rtt_us u32, 20 rtt_var_us u32, 24 mtu u32
 */
#define RECORD_LEN 28
#define ENDS_MAX 8
#define ERRORS_MAX 8
#define END_LEN (CONNECT_ADDRESS_MAX + CONNECT_IFNAME_MAX)
#define TABLES_LEN (ENDS_MAX * END_LEN + ERRORS_MAX * CONNECT_ERROR_MAX)
#define NO_ENTRY 0xff

struct report_tables {
	char end[ENDS_MAX][END_LEN];	/* address, then the interface */
	int nends;
	char error[ERRORS_MAX][CONNECT_ERROR_MAX];
	int nerrors;
};

size_t
bench_connect_report_len(uint32_t world)
{
	return TABLES_LEN + (size_t)world * RECORD_LEN;
}

/* The index of text in a table of n entries of width bytes, added when
 * new; the last entry stands for every text past the table's room. */
static uint8_t
table_index(char *table, int *n, int max, size_t width, const char *text)
{
	for (int i = 0; i < *n; i++)
		if (strncmp(table + (size_t)i * width, text, width - 1) == 0)
			return (uint8_t)i;
	if (*n == max)
		return (uint8_t)(max - 1);
	snprintf(table + (size_t)*n * width, width, "%s", text);
	return (uint8_t)(*n)++;
}

/* An end's two strings in one table entry: the address, then after its
 * NUL the interface. */
static uint8_t
end_index(struct report_tables *t, const struct sr_probe_link *p)
{
	char entry[END_LEN];

	memset(entry, 0, sizeof(entry));
	snprintf(entry, CONNECT_ADDRESS_MAX, "%s", p->local);
	snprintf(entry + CONNECT_ADDRESS_MAX, CONNECT_IFNAME_MAX, "%s",
	    p->iface);
	for (int i = 0; i < t->nends; i++)
		if (memcmp(t->end[i], entry, END_LEN) == 0)
			return (uint8_t)i;
	if (t->nends == ENDS_MAX)
		return ENDS_MAX - 1;
	memcpy(t->end[t->nends], entry, END_LEN);
	return (uint8_t)t->nends++;
}

static uint32_t
clamp_u32(int64_t v)
{
	return v < 0 ? 0 : v > UINT32_MAX ? UINT32_MAX : (uint32_t)v;
}

void
bench_connect_encode(const struct sr_probe_link *probe, uint32_t world,
    uint32_t rank, uint8_t *out)
{
	struct report_tables t;
	uint8_t *rec = out + TABLES_LEN;

	memset(&t, 0, sizeof(t));
	memset(out, 0, bench_connect_report_len(world));
	for (uint32_t r = 0; r < world; r++, rec += RECORD_LEN) {
		const struct sr_probe_link *p = &probe[r];

		rec[1] = rec[2] = NO_ENTRY;
		if (r == rank)
			continue;
		rec[0] = p->reached;
		if (p->local[0] != '\0')
			rec[1] = end_index(&t, p);
		if (!p->reached)
			rec[2] = table_index(&t.error[0][0], &t.nerrors,
			    ERRORS_MAX, CONNECT_ERROR_MAX, p->error[0] ?
			    p->error : "unknown");
		bench_put_u32le(rec + 4, p->attempts);
		bench_put_u32le(rec + 8, clamp_u32(p->connect_us));
		bench_put_u32le(rec + 12, clamp_u32(p->handshake_us));
		bench_put_u32le(rec + 16, p->rtt_us);
		bench_put_u32le(rec + 20, p->rtt_var_us);
		bench_put_u32le(rec + 24, p->mtu);
	}
	memcpy(out, t.end, sizeof(t.end));
	memcpy(out + sizeof(t.end), t.error, sizeof(t.error));
}

/* Copies n bytes of a table entry from the wire, NUL-terminated whatever
 * came. */
static void
entry_copy(char *dst, size_t size, const uint8_t *src)
{
	memcpy(dst, src, size - 1);
	dst[size - 1] = '\0';
}

void
bench_connect_decode(const uint8_t *in, uint32_t world, uint32_t from,
    struct connect_matrix *c)
{
	const uint8_t *rec = in + TABLES_LEN;

	for (uint32_t to = 0; to < world; to++, rec += RECORD_LEN) {
		struct connect_probe *p;
		uint8_t end = rec[1], error = rec[2];

		if (to == from)
			continue;
		p = connect_probe_at(c, from, to);
		p->reached = rec[0] != 0;
		p->error[0] = '\0';
		if (!p->reached && error < ERRORS_MAX)
			entry_copy(p->error, sizeof(p->error),
			    in + ENDS_MAX * END_LEN + (size_t)error *
			    CONNECT_ERROR_MAX);
		if (end < ENDS_MAX) {
			const uint8_t *e = in + (size_t)end * END_LEN;

			entry_copy(p->end[0].address,
			    sizeof(p->end[0].address), e);
			entry_copy(p->end[0].ifname, sizeof(p->end[0].ifname),
			    e + CONNECT_ADDRESS_MAX);
		}
		p->end[0].mtu = bench_get_u32le(rec + 24);
		p->connect_ms = (bench_get_u32le(rec + 8) +
		    (double)bench_get_u32le(rec + 12)) / 1000.0;
		p->rtt_us = bench_get_u32le(rec + 16);
	}
}

/* Each connection's far end is what the other rank's own connection
 * back saw of its end. */
static void
fill_remote_ends(struct connect_matrix *c)
{
	for (uint32_t from = 0; from < c->world; from++)
		for (uint32_t to = 0; to < c->world; to++)
			if (from != to)
				connect_probe_at(c, from, to)->end[1] =
				    connect_probe_at(c, to, from)->end[0];
}

/* ---------------------------------------------------------- the command */

struct connect_run {
	struct sr_ring *ring;
	uint32_t rank, world;
	char **addresses;
	struct sr_probe_link *probe;
	bool json;
	struct sr_error err;
};

static int
parse(int argc, char **argv, struct cli_ring *ring)
{
	static const struct option longopts[] = {
		CLI_RING_LONGOPTS,
		{ "probe-time", required_argument, NULL, 'P' },
		{ "help", no_argument, NULL, 'h' },
		{ NULL, 0, NULL, 0 }
	};
	int c;

	opterr = 0;
	optind = 1;
	while ((c = getopt_long(argc, argv, ":hv", longopts, NULL)) != -1) {
		if (c == 'h') {
			fputs(usage_bench_connect, stdout);
			fputs(cli_ring_help, stdout);
			return -1;
		}
		if (c == ':')
			return cli_usage_error("bench connect: %s needs a value",
			    argv[optind - 1]);
		if (c == '?')
			return cli_usage_error("bench connect: unknown option "
			    "'%s'", argv[optind - 1]);
		if (c == 'P') {
			if (cli_parse_seconds(optarg, &ring->probe) != 0)
				return cli_usage_error("bench connect: "
				    "--probe-time '%s' is not a positive number "
				    "of seconds", optarg);
			continue;
		}
		if (cli_ring_option(ring, c, optarg) < 0)
			return EXIT_USAGE;
	}
	if (optind < argc)
		return cli_usage_error("bench connect: unexpected argument "
		    "'%s'", argv[optind]);
	if (ring->probe > ring->timeout)
		return cli_usage_error("bench connect: --probe-time %g is "
		    "longer than --timeout %g", ring->probe, ring->timeout);
	return 0;
}

/* Every rank's report, to every rank, over the ring's allgather. */
static int
gather(struct connect_run *r, struct connect_matrix *c)
{
	size_t len = bench_connect_report_len(r->world);
	uint8_t *all = malloc(len * r->world);

	if (all == NULL)
		return sr_error_set(&r->err, SR_ENOMEM, SR_PHASE_COLLECTIVE,
		    "out of memory for %u reports", r->world);
	bench_connect_encode(r->probe, r->world, r->rank,
	    all + (size_t)r->rank * len);
	if (sr_allgather(r->ring, all + (size_t)r->rank * len, len, all,
	    &r->err) != 0) {
		free(all);
		return -1;
	}
	for (uint32_t from = 0; from < r->world; from++)
		bench_connect_decode(all + (size_t)from * len, r->world, from, c);
	fill_remote_ends(c);
	free(all);
	return 0;
}

/* "rank 0 (10.0.0.1) cannot reach rank 1 (10.0.0.2): why", hosts without
 * their ports, as the verdict names them. */
static void
no_route_text(const struct connect_run *r, uint32_t to,
    const struct connect_probe *p, char *text, size_t size)
{
	char me[SR_ADDR_MAX], them[SR_ADDR_MAX];

	if (sr_address_split(r->addresses[r->rank], me, sizeof(me), NULL, NULL,
	    0) != SR_ADDRESS_OK)
		snprintf(me, sizeof(me), "%s", r->addresses[r->rank]);
	if (sr_address_split(r->addresses[to], them, sizeof(them), NULL, NULL,
	    0) != SR_ADDRESS_OK)
		snprintf(them, sizeof(them), "%s", r->addresses[to]);
	snprintf(text, size, "rank %u (%s) cannot reach rank %u (%s): %s",
	    r->rank, me, to, them, p->error);
}

/* With --json, rank 0's own findings as the verdict record (the reports
 * were not gathered: "gathered":false). */
static void
own_json(const struct connect_run *r, const struct connect_matrix *c,
    size_t unreached, const char *first)
{
	bool comma = false;

	printf("{\"type\":\"connect_verdict\",\"schema\":1,\"verdict\":"
	    "\"unreachable\",\"pass\":false,\"text\":");
	json_string(stdout, first);
	fputs(",\"findings\":[", stdout);
	for (uint32_t to = 0; to < r->world; to++) {
		const struct connect_probe *p = connect_probe_at(c, r->rank, to);
		char text[SR_MESSAGE_MAX + 64];

		if (to == r->rank || p->reached)
			continue;
		no_route_text(r, to, p, text, sizeof(text));
		printf("%s{\"kind\":\"no_route\",\"text\":", comma ? "," : "");
		json_string(stdout, text);
		printf(",\"rank\":%u,\"peer\":%u,\"ranks\":[%u],"
		    "\"interface\":null,\"mtu\":null,\"error\":", r->rank, to,
		    r->rank);
		json_string(stdout, p->error);
		fputs("}", stdout);
		comma = true;
	}
	printf("],\"unreachable\":%zu,\"interface\":null,\"mtu\":null,"
	    "\"gathered\":false,\"exit\":%d}\n", unreached, EXIT_THRESHOLD);
}

/* The ring could not carry the reports: what this rank saw itself. */
static int
own_findings(struct connect_run *r, struct connect_matrix *c)
{
	char text[SR_MESSAGE_MAX + 64], first[SR_MESSAGE_MAX + 64] = "";
	size_t unreached = 0;
	uint8_t *mine = malloc(bench_connect_report_len(r->world));

	if (mine == NULL)
		return EXIT_INTERNAL;
	bench_connect_encode(r->probe, r->world, r->rank, mine);
	bench_connect_decode(mine, r->world, r->rank, c);
	free(mine);
	sr_error_format(&r->err, text, sizeof(text));
	cli_error("bench connect: the reports could not be gathered (%s); "
	    "this rank's own findings follow", text);
	for (uint32_t to = 0; to < r->world; to++) {
		const struct connect_probe *p;

		if (to == r->rank || (p = connect_probe_at(c, r->rank,
		    to))->reached)
			continue;
		unreached++;
		no_route_text(r, to, p, text, sizeof(text));
		cli_error("verdict: %s", text);
		if (r->rank == 0 && !r->json)
			printf("# verdict: %s\n", text);
		if (first[0] == '\0')
			snprintf(first, sizeof(first), "%s", text);
	}
	if (unreached == 0) {
		snprintf(first, sizeof(first), "this rank reached every rank; "
		    "the reports failed on another's link");
		cli_error("verdict: %s", first);
	}
	if (r->rank == 0 && r->json)
		own_json(r, c, unreached, first);
	return EXIT_THRESHOLD;
}

static int
judge(struct connect_run *r, struct connect_matrix *c)
{
	struct connect_verdict v;
	char why[256];
	int status;

	if (connect_verdict_run(c, &v, why, sizeof(why)) != 0) {
		cli_error("bench connect: %s", why);
		return EXIT_INTERNAL;
	}
	status = v.pass ? EXIT_OK : EXIT_THRESHOLD;
	if (r->rank == 0 && r->json)
		connect_json_write(stdout, c, &v, status);
	else if (r->rank == 0 && connect_table_write(stdout, c, &v) != 0)
		status = EXIT_INTERNAL;
	connect_verdict_fini(&v);
	return status;
}

static int
judge_probe(struct connect_run *r)
{
	struct connect_matrix c;
	int rc;

	if (connect_matrix_init(&c, r->world, r->addresses) != 0) {
		cli_error("bench connect: a world of %u is more than it "
		    "judges (at most %u)", r->world, CONNECT_WORLD_MAX);
		return EXIT_USAGE;
	}
	if (gather(r, &c) == 0)
		rc = judge(r, &c);
	else if (r->err.code == SR_ENOMEM)
		rc = cli_report(&r->err, r->json);
	else
		rc = own_findings(r, &c);
	connect_matrix_fini(&c);
	return rc;
}

int
bench_connect_judge(struct sr_ring *ring, char **addresses,
    struct sr_probe_link *probe, bool json)
{
	struct connect_run r = { .ring = ring, .rank = sr_ring_rank(ring),
		.world = sr_ring_world(ring), .addresses = addresses,
		.probe = probe, .json = json };

	return judge_probe(&r);
}

int
cmd_bench_connect(int argc, char **argv)
{
	struct cli_ring ropts;
	struct connect_run r;
	uint64_t world = 0;
	int rc;

	cli_ring_init(&ropts);
	ropts.probe = PROBE_DEFAULT_S;
	if ((rc = parse(argc, argv, &ropts)) != 0)
		return rc < 0 ? EXIT_OK : rc;
	if (ropts.probe > ropts.timeout)
		ropts.probe = ropts.timeout;
	if (cli_preflight_stop(&ropts, false, ""))
		return EXIT_OK;
	cli_signals_install();
	memset(&r, 0, sizeof(r));
	ropts.probe_report = &r.probe;
	rc = cli_ring_open(&ropts, &r.ring, &r.addresses, &world);
	if (rc != EXIT_OK || r.ring == NULL) {
		free(r.probe);
		return rc;
	}
	r.rank = sr_ring_rank(r.ring);
	r.world = sr_ring_world(r.ring);
	r.json = ropts.json;
	if (r.world == 1)
		rc = cli_usage_error("bench connect: a world of one has no "
		    "pairs to probe");
	else
		rc = judge_probe(&r);
	free(r.probe);
	/* The close agrees on the links that formed. */
	return cli_ring_done(r.ring, r.addresses, world, rc, r.json);
}
