/*
 * bench_links.c - `silvic-ring bench links`: every rank's link to the
 * next rank, measured three ways.
 *
 *   latency      a median of 8-byte round trips on that link, halved;
 *   alone        one link at a time (sr_link_transfer from rank 0, 1,
 *                ... in turn, a barrier between links): its own speed;
 *   all at once  every rank sends to its next while receiving from its
 *                previous (sr_ring_shift): what the ring experiences.
 *
 * Before the bandwidth tests a quarter megabyte, untimed, then one
 * megabyte cross each link, and a link too slow to move --maxbytes in
 * about half a second is measured with less (bench_link_bytes): a broken
 * 10 Mbit/s link then costs seconds, not minutes, and the ranks waiting
 * in the barrier meanwhile stay within their silence timeout.  All at once uses the smallest of those sizes.
 *
 * A rank's sr_ring_shift call also waits for its other link, so the
 * all-at-once time of a link is inferred from its two ends' and the next
 * rank's times (bench_ring_link_time).  With two ranks both links join
 * the same pair and that column cannot tell them apart.  The verdict uses
 * the speed alone.
 *
 * Every rank measures; the results go to every rank (so all agree on the
 * exit status) and rank 0 prints them.
 *
 * With several streams per link (--streams) each link's sender also
 * counts what each of its connections carried of the alone transfers:
 * a stream's throughput is its share of those bytes times the link's
 * alone speed, shown with the kernel's counters for it (retransmits,
 * round trip, congestion window), and the slowest stream of all is
 * named.
 */
#include <stdlib.h>
#include <string.h>

#include "cli.h"
#include "bench_data.h"

struct probe {
	struct sr_ring *ring;
	uint32_t rank, world;
	uint8_t *buf;
	uint64_t max_bytes, iters, warmup;
	uint64_t *bytes;	/* each link's transfer size, by from rank */
	uint64_t ring_bytes;	/* all at once: the smallest of those */
	double *times;		/* this rank's, then every rank's */
	uint8_t *wire;		/* every rank's numbers, little-endian */
	uint64_t *all;		/* decoded: alone, all at once, round trip */
	/* Per stream of each rank's next link: bytes of its alone
	 * transfers, retransmits, round trip (us), cwnd; this rank's, then
	 * every rank's (streams x STREAM_FIELDS each). */
	uint32_t streams;
	uint64_t *stream_mine, *stream_all;
	/* And each stream's two ends, "ip:port" NUL-padded to SR_ADDR_MAX:
	 * this rank's (streams x 2), then every rank's. */
	char *ends_mine, *ends_all;
	struct sr_error err;
};

#define STREAM_FIELDS 4

/* Median seconds of every rank's sr_ring_shift of ring_bytes. */
static int
all_at_once(struct probe *p, double *median)
{
	for (uint64_t i = 0; i < p->warmup + p->iters; i++) {
		int64_t t0;

		if (sr_barrier(p->ring, &p->err) != 0)
			return -1;
		t0 = sr_clock_ns();
		if (sr_ring_shift(p->ring, p->buf, NULL, p->ring_bytes,
		    &p->err) != 0)
			return -1;
		if (i >= p->warmup)
			p->times[i - p->warmup] = (double)(sr_clock_ns() - t0)
			    / 1e9;
	}
	*median = bench_median(p->times, p->iters);
	return 0;
}

/*
 * The link from rank `from`: n transfers of `bytes` after `warmup`, each
 * answered by `echo` bytes; the median seconds on `from` (else 0).
 */
static int
one_link(struct probe *p, uint32_t from, uint64_t bytes, uint64_t echo,
    uint64_t warmup, uint64_t n, double *median)
{
	if (sr_barrier(p->ring, &p->err) != 0)
		return -1;
	for (uint64_t i = 0; i < warmup + n; i++) {
		int64_t t0 = sr_clock_ns();

		if (sr_link_transfer(p->ring, from, p->buf, bytes, echo,
		    &p->err) != 0)
			return -1;
		if (i >= warmup)
			p->times[i - warmup] = (double)(sr_clock_ns() - t0) /
			    1e9;
	}
	if (p->rank == from)
		*median = bench_median(p->times, n);
	return 0;
}

/* `count` numbers of this rank's to every rank: p->all[r * count + k]. */
static int
share(struct probe *p, const double *mine, int count)
{
	uint8_t *slot = p->wire + (size_t)p->rank * count * 8;

	for (int k = 0; k < count; k++)
		bench_put_u64le(slot + k * 8, (uint64_t)(mine[k] * 1e9));
	if (sr_allgather(p->ring, slot, (size_t)count * 8, p->wire,
	    &p->err) != 0)
		return -1;
	for (uint64_t i = 0; i < (uint64_t)p->world * count; i++)
		p->all[i] = bench_get_u64le(p->wire + i * 8);
	return 0;
}

/*
 * One transfer per link sizes the bandwidth test: a link that takes
 * seconds for a megabyte gets transfers of about BENCH_LINK_SECONDS,
 * the others --maxbytes.  An untimed quarter of it goes first: a link
 * idle while the others were probed restarts TCP's slow start (reno and
 * cubic do, after a retransmission timeout of silence), and the probe is
 * to time the link, not its restart.
 */
static int
size_links(struct probe *p)
{
	uint64_t probe = p->max_bytes < BENCH_PROBE_BYTES ? p->max_bytes :
	    BENCH_PROBE_BYTES;
	double took = 0;

	for (uint32_t from = 0; from < p->world; from++)
		if (one_link(p, from, probe / 4, 0, 0, 1, &took) != 0 ||
		    one_link(p, from, probe, 0, 0, 1, &took) != 0)
			return -1;
	if (share(p, &took, 1) != 0)
		return -1;
	p->ring_bytes = p->max_bytes;
	for (uint32_t i = 0; i < p->world; i++) {
		p->bytes[i] = bench_link_bytes(p->max_bytes, probe,
		    (double)p->all[i] / 1e9, BENCH_LINK_SECONDS);
		if (p->bytes[i] < p->ring_bytes)
			p->ring_bytes = p->bytes[i];
	}
	return 0;
}

/* The bytes each stream of the next link has sent so far. */
static void
stream_bytes(const struct probe *p, uint64_t *bytes)
{
	struct sr_stream_stats st;

	for (uint32_t s = 0; s < p->streams; s++)
		bytes[s] = sr_ring_next_stream(p->ring, s, &st) == 0 ?
		    st.tx_bytes : 0;
}

/* What each stream of the next link carried since `before`, and its
 * kernel counters now. */
static void
stream_note(struct probe *p, const uint64_t *before)
{
	for (uint32_t s = 0; s < p->streams; s++) {
		uint64_t *f = p->stream_mine + s * STREAM_FIELDS;
		struct sr_stream_stats st;

		if (sr_ring_next_stream(p->ring, s, &st) != 0)
			continue;
		f[0] = st.tx_bytes - before[s];
		f[1] = st.retransmits;
		f[2] = st.rtt_us;
		f[3] = st.cwnd;
		memcpy(p->ends_mine + (2 * s) * SR_ADDR_MAX, st.local,
		    SR_ADDR_MAX);
		memcpy(p->ends_mine + (2 * s + 1) * SR_ADDR_MAX, st.remote,
		    SR_ADDR_MAX);
	}
}

/* Every rank's stream counts, in p->stream_all. */
static int
share_streams(struct probe *p)
{
	size_t n = (size_t)p->streams * STREAM_FIELDS;
	uint8_t *slot = p->wire + (size_t)p->rank * n * 8;

	if (p->streams < 2)
		return 0;
	for (size_t k = 0; k < n; k++)
		bench_put_u64le(slot + k * 8, p->stream_mine[k]);
	if (sr_allgather(p->ring, slot, n * 8, p->wire, &p->err) != 0)
		return -1;
	for (size_t i = 0; i < (size_t)p->world * n; i++)
		p->stream_all[i] = bench_get_u64le(p->wire + i * 8);
	n = (size_t)p->streams * 2 * SR_ADDR_MAX;
	memcpy(p->ends_all + (size_t)p->rank * n, p->ends_mine, n);
	if (sr_allgather(p->ring, p->ends_all + (size_t)p->rank * n, n,
	    p->ends_all, &p->err) != 0)
		return -1;
	for (size_t i = 0; i < (size_t)p->world * p->streams * 2; i++)
		p->ends_all[(i + 1) * SR_ADDR_MAX - 1] = '\0';
	return 0;
}

/* End `which` (0 local, 1 remote) of stream s of rank from's link. */
static const char *
stream_end(const struct probe *p, uint32_t from, uint32_t s, int which)
{
	return p->ends_all + (((size_t)from * p->streams + s) * 2 +
	    (size_t)which) * SR_ADDR_MAX;
}

/* Stream s of the link from rank `from`: its fields, and its GB/s (its
 * share of the link's alone bytes at the link's alone speed). */
static const uint64_t *
stream_row(const struct probe *p, const struct bench_link *l, uint32_t from,
    uint32_t s, double *gbps)
{
	const uint64_t *f = p->stream_all + ((size_t)from * p->streams + s) *
	    STREAM_FIELDS;
	uint64_t total = 0;

	for (uint32_t k = 0; k < p->streams; k++)
		total += p->stream_all[((size_t)from * p->streams + k) *
		    STREAM_FIELDS];
	*gbps = total > 0 ? l[from].gbps_alone * (double)f[0] /
	    (double)total : 0.0;
	return f;
}

static void
print_streams(FILE *out, const struct probe *p, char **addresses,
    const struct bench_link *l)
{
	uint32_t slow_from = 0, slow_s = 0;
	double slowest = -1, gbps;

	fprintf(out, "# streams: each link's %u connections during its alone "
	    "transfers (a stream's share of the bytes at the link's speed; "
	    "kernel counters at the end)\n", p->streams);
	fprintf(out, "# %6s %6s %6s %12s %10s %8s %9s %6s  %s\n", "from",
	    "to", "stream", "bytes", "GB/s", "retrans", "rtt(us)", "cwnd",
	    "local -> remote");
	for (uint32_t i = 0; i < p->world; i++)
		for (uint32_t s = 0; s < p->streams; s++) {
			const uint64_t *f = stream_row(p, l, i, s, &gbps);

			fprintf(out, "  %6u %6u %6u %12llu %10.4f %8llu %9llu "
			    "%6llu  %s -> %s\n", l[i].from, l[i].to, s,
			    (unsigned long long)f[0], gbps,
			    (unsigned long long)f[1], (unsigned long long)f[2],
			    (unsigned long long)f[3], stream_end(p, i, s, 0),
			    stream_end(p, i, s, 1));
			if (slowest < 0 || gbps < slowest) {
				slowest = gbps;
				slow_from = i;
				slow_s = s;
			}
		}
	fprintf(out, "# slowest stream: rank %u (%s) -> rank %u (%s) stream %u: "
	    "%.4g GB/s, %.2fx its link's mean stream\n", l[slow_from].from,
	    addresses[l[slow_from].from], l[slow_from].to,
	    addresses[l[slow_from].to], slow_s, slowest,
	    l[slow_from].gbps_alone > 0 ? slowest * p->streams /
	    l[slow_from].gbps_alone : 0.0);
}

static void
print_streams_json(FILE *out, const struct probe *p,
    const struct bench_link *l)
{
	double gbps;

	for (uint32_t i = 0; i < p->world; i++)
		for (uint32_t s = 0; s < p->streams; s++) {
			const uint64_t *f = stream_row(p, l, i, s, &gbps);

			fprintf(out, "{\"type\":\"stream\",\"schema\":1,"
			    "\"from\":%u,\"to\":%u,\"stream\":%u,"
			    "\"bytes\":%llu,\"gbps\":", l[i].from, l[i].to, s,
			    (unsigned long long)f[0]);
			json_number(out, gbps);
			fprintf(out, ",\"retransmits\":%llu,\"rtt_us\":%llu,"
			    "\"cwnd\":%llu,\"local\":", (unsigned long long)f[1],
			    (unsigned long long)f[2], (unsigned long long)f[3]);
			json_string(out, stream_end(p, i, s, 0));
			fputs(",\"remote\":", out);
			json_string(out, stream_end(p, i, s, 1));
			fputs("}\n", out);
		}
}

/* Every rank's latency, link alone and all-at-once times, in p->all. */
static int
measure(struct probe *p)
{
	double mine[3] = { 0, 0, 0 };	/* alone, all at once, round trip */

	for (uint32_t from = 0; from < p->world; from++)
		if (one_link(p, from, BENCH_PING_BYTES, BENCH_PING_BYTES,
		    BENCH_PING_WARMUP, BENCH_PINGS, &mine[2]) != 0)
			return -1;
	if (size_links(p) != 0)
		return -1;
	for (uint32_t from = 0; from < p->world; from++) {
		uint64_t before[SR_RING_STREAMS_MAX];

		if (from == p->rank)
			stream_bytes(p, before);
		if (one_link(p, from, p->bytes[from], 0, p->warmup, p->iters,
		    &mine[0]) != 0)
			return -1;
		if (from == p->rank)
			stream_note(p, before);
	}
	if (all_at_once(p, &mine[1]) != 0)
		return -1;
	if (share(p, mine, 3) != 0)
		return -1;
	return share_streams(p);
}

static void
to_links(const struct probe *p, const uint64_t *all, struct bench_link *l)
{
	for (uint32_t i = 0; i < p->world; i++)
		p->times[i] = (double)all[i * 3 + 1] / 1e9;
	for (uint32_t i = 0; i < p->world; i++) {
		double ring = bench_ring_link_time(p->times, p->world, i);

		l[i].from = i;
		l[i].to = (i + 1) % p->world;
		l[i].gbps_alone = bench_algbw(p->bytes[i],
		    (double)all[i * 3] / 1e9);
		l[i].gbps_ring = bench_algbw(p->ring_bytes, ring);
		l[i].latency_us = (double)all[i * 3 + 2] / 2 / 1e3;
	}
}

/* ------------------------------------------------------------ output */

static void
print_text(FILE *out, const struct probe *p, char **addresses,
    const struct bench_link *l, size_t slowest, double median,
    double threshold)
{
	char size[32], ring[32];
	size_t nslow = 0;

	fprintf(out, "#\n# links: transfers of up to %s bytes (less where a "
	    "megabyte is slow: about %gs each), the median of %llu after %llu "
	    "warm-up; all at once: %s bytes; latency: half the median of %d "
	    "%d-byte round trips\n", bench_size_format(p->max_bytes, size,
	    sizeof(size)), BENCH_LINK_SECONDS, (unsigned long long)p->iters,
	    (unsigned long long)p->warmup, bench_size_format(p->ring_bytes,
	    ring, sizeof(ring)), BENCH_PINGS, BENCH_PING_BYTES);
	fprintf(out, "# %6s %-22s %6s %-22s %10s %10s %11s %9s\n", "from",
	    "address", "to", "address", "bytes", "alone", "all-at-once",
	    "latency");
	fprintf(out, "# %6s %-22s %6s %-22s %10s %10s %11s %9s\n", "(rank)",
	    "", "(rank)", "", "", "(GB/s)", "(GB/s)", "(us)");
	for (uint32_t i = 0; i < p->world; i++)
		fprintf(out, "  %6u %-22s %6u %-22s %10llu %10.4f %11.4f "
		    "%9.1f%s\n", l[i].from, addresses[l[i].from], l[i].to,
		    addresses[l[i].to], (unsigned long long)p->bytes[i],
		    l[i].gbps_alone, l[i].gbps_ring, l[i].latency_us,
		    l[i].slow ? "  slow" : "");
	fprintf(out, "# median link: %.4g GB/s alone\n", median);
	fprintf(out, "# slowest link: rank %u (%s) -> rank %u (%s): %.4g GB/s, "
	    "%.2fx the median\n", l[slowest].from, addresses[l[slowest].from],
	    l[slowest].to, addresses[l[slowest].to], l[slowest].gbps_alone,
	    median > 0 ? l[slowest].gbps_alone / median : 0.0);
	for (uint32_t i = 0; i < p->world; i++) {
		if (!l[i].slow)
			continue;
		nslow++;
		fprintf(out, "# slow link: rank %u (%s) -> rank %u (%s): %.4g "
		    "GB/s, %.2fx the median\n", l[i].from,
		    addresses[l[i].from], l[i].to, addresses[l[i].to],
		    l[i].gbps_alone, median > 0 ? l[i].gbps_alone / median :
		    0.0);
	}
	if (nslow == 0)
		fprintf(out, "# slow links: none below %gx the median\n",
		    threshold);
}

static void
print_json(FILE *out, const struct probe *p, char **addresses,
    const struct bench_link *l)
{
	for (uint32_t i = 0; i < p->world; i++) {
		fprintf(out, "{\"type\":\"link\",\"schema\":1,\"from\":%u,"
		    "\"from_address\":", l[i].from);
		json_string(out, addresses[l[i].from]);
		fprintf(out, ",\"to\":%u,\"to_address\":", l[i].to);
		json_string(out, addresses[l[i].to]);
		fprintf(out, ",\"bytes\":%llu,\"ring_bytes\":%llu,"
		    "\"gbps_alone\":", (unsigned long long)p->bytes[i],
		    (unsigned long long)p->ring_bytes);
		json_number(out, l[i].gbps_alone);
		fputs(",\"gbps_ring\":", out);
		json_number(out, l[i].gbps_ring);
		fputs(",\"latency_us\":", out);
		json_number(out, l[i].latency_us);
		fprintf(out, ",\"slow\":%s}\n", l[i].slow ? "true" : "false");
	}
}

static void
print_csv(FILE *out, const struct probe *p, char **addresses,
    const struct bench_link *l)
{
	fputs("from,from_address,to,to_address,bytes,ring_bytes,gbps_alone,"
	    "gbps_ring,latency_us,slow\n", out);
	for (uint32_t i = 0; i < p->world; i++)
		fprintf(out, "%u,%s,%u,%s,%llu,%llu,%.6f,%.6f,%.3f,%s\n",
		    l[i].from, addresses[l[i].from], l[i].to,
		    addresses[l[i].to], (unsigned long long)p->bytes[i],
		    (unsigned long long)p->ring_bytes, l[i].gbps_alone,
		    l[i].gbps_ring, l[i].latency_us, l[i].slow ? "true" :
		    "false");
}

void
bench_links_json(FILE *out, const struct bench_links_result *r,
    double threshold)
{
	if (!r->ran) {
		fputs("null", out);
		return;
	}
	fputs("{\"median_gbps\":", out);
	json_number(out, r->median);
	fprintf(out, ",\"slowest\":%u,\"threshold\":", r->slowest);
	json_number(out, threshold);
	fputs(",\"slow\":[", out);
	for (size_t i = 0; i < r->nslow; i++)
		fprintf(out, "%s%u", i ? "," : "", r->slow[i]);
	fputs("]}", out);
}

/* ------------------------------------------------------------ the test */

/* Every rank allocates, then they agree, as the sweep does. */
static int
allocate(struct probe *p, bool json)
{
	uint64_t failed, any;

	p->buf = p->max_bytes < SIZE_MAX ? malloc((size_t)p->max_bytes) :
	    NULL;
	/* Enough for every measurement, then every rank's shift time. */
	p->times = calloc(p->iters + BENCH_PINGS + p->world,
	    sizeof(*p->times));
	p->wire = calloc(p->world, 24 > p->streams * STREAM_FIELDS * 8 ? 24 :
	    p->streams * STREAM_FIELDS * 8);
	p->stream_mine = calloc(p->streams * STREAM_FIELDS, sizeof(uint64_t));
	p->stream_all = calloc((size_t)p->world * p->streams * STREAM_FIELDS,
	    sizeof(uint64_t));
	p->ends_mine = calloc((size_t)p->streams * 2, SR_ADDR_MAX);
	p->ends_all = calloc((size_t)p->world * p->streams * 2, SR_ADDR_MAX);
	p->all = calloc(p->world, 3 * sizeof(*p->all));
	p->bytes = calloc(p->world, sizeof(*p->bytes));
	if (p->buf != NULL)
		memset(p->buf, 0x5a, (size_t)p->max_bytes);
	failed = p->stream_mine == NULL || p->stream_all == NULL ||
	    p->ends_mine == NULL || p->ends_all == NULL ||
	    p->buf == NULL || p->times == NULL || p->wire == NULL ||
	    p->all == NULL || p->bytes == NULL ? p->rank + 1 : 0;
	if (failed)
		cli_error("out of memory allocating %llu bytes for the link "
		    "test", (unsigned long long)p->max_bytes);
	if (sr_allreduce(p->ring, &failed, &any, 1, SR_U64, SR_MAX,
	    &p->err) != 0)
		return cli_report(&p->err, json);
	if (any && !failed)
		cli_error("rank %llu could not allocate its link test buffer",
		    (unsigned long long)any - 1);
	return any ? EXIT_INTERNAL : EXIT_OK;
}

static int
verdict(struct probe *p, const struct bench_options *o, char **addresses,
    FILE *out, struct bench_links_result *r)
{
	struct bench_link *l = calloc(p->world, sizeof(*l));
	size_t slowest;

	r->slow = calloc(p->world, sizeof(*r->slow));
	if (l == NULL || r->slow == NULL) {
		free(l);
		cli_error("out of memory");
		return EXIT_INTERNAL;
	}
	to_links(p, p->all, l);
	slowest = bench_links_verdict(l, p->world, o->threshold, &r->median);
	r->ran = true;
	r->slowest = (uint32_t)slowest;
	for (uint32_t i = 0; i < p->world; i++)
		if (l[i].slow)
			r->slow[r->nslow++] = i;
	if (p->rank == 0) {
		if (o->json)
			print_json(out, p, addresses, l);
		else if (o->csv)
			print_csv(out, p, addresses, l);
		else
			print_text(out, p, addresses, l, slowest, r->median,
			    o->threshold);
		if (p->streams > 1 && o->json)
			print_streams_json(out, p, l);
		else if (p->streams > 1 && !o->csv)
			print_streams(out, p, addresses, l);
		fflush(out);
	}
	free(l);
	return EXIT_OK;
}

int
bench_links_run(struct sr_ring *ring, char **addresses,
    const struct bench_options *o, FILE *out, struct bench_links_result *r)
{
	struct probe p;
	int rc;

	memset(r, 0, sizeof(*r));
	memset(&p, 0, sizeof(p));
	p.ring = ring;
	p.rank = sr_ring_rank(ring);
	p.world = sr_ring_world(ring);
	p.streams = sr_ring_streams(ring);
	if (p.world == 1) {
		if (p.rank == 0 && !o->json && !o->csv)
			fputs("#\n# links: a world of one has no links\n", out);
		return EXIT_OK;
	}
	p.max_bytes = o->maxbytes_set ? o->maxbytes : BENCH_LINK_BYTES;
	p.iters = o->iters_set ? o->iters : BENCH_LINK_ITERS;
	p.warmup = o->warmup_set ? o->warmup : BENCH_LINK_WARMUP;
	if ((rc = allocate(&p, o->json)) == EXIT_OK) {
		/* Every stream measured, even where this rank would keep a
		 * link's pieces on one (sr_ring_spread_always). */
		bool was = sr_ring_spread_always(ring, true);

		rc = measure(&p) != 0 ? cli_report(&p.err, o->json) :
		    verdict(&p, o, addresses, out, r);
		sr_ring_spread_always(ring, was);
	}
	free(p.buf);
	free(p.times);
	free(p.wire);
	free(p.all);
	free(p.bytes);
	free(p.stream_mine);
	free(p.stream_all);
	free(p.ends_mine);
	free(p.ends_all);
	return rc;
}
