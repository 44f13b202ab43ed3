/*
 * connect_verdict.c - what `bench connect`'s probes mean (see
 * connect_verdict.h), and its table and JSON records.  The verdict reads
 * the probes only; it never guesses a probe it was not given.
 */
#include <math.h>
#include <stdlib.h>
#include <string.h>

#include "cli.h"
#include "bench_data.h"
#include "pairs.h"
#include "connect_verdict.h"

#define NONE UINT32_MAX

int
connect_matrix_init(struct connect_matrix *c, uint32_t world,
    char *const *addresses)
{
	char (*labels)[PAIRS_LABEL_MAX];

	memset(c, 0, sizeof(*c));
	if (world < 1 || world > CONNECT_WORLD_MAX)
		return -1;
	c->world = world;
	c->addresses = addresses;
	c->probe = calloc((size_t)world * world, sizeof(*c->probe));
	c->host = calloc(world, sizeof(*c->host));
	labels = calloc(world, sizeof(*labels));
	if (c->probe == NULL || c->host == NULL || labels == NULL) {
		free(labels);
		connect_matrix_fini(c);
		return -1;
	}
	for (uint32_t r = 0; r < world; r++) {
		pairs_host_label(addresses[r], labels[r], sizeof(labels[r]));
		c->host[r] = r;
		for (uint32_t s = 0; s < r; s++)
			if (strcmp(labels[s], labels[r]) == 0) {
				c->host[r] = c->host[s];
				break;
			}
	}
	free(labels);
	return 0;
}

void
connect_matrix_fini(struct connect_matrix *c)
{
	free(c->probe);
	free(c->host);
	memset(c, 0, sizeof(*c));
}

struct connect_probe *
connect_probe_at(const struct connect_matrix *c, uint32_t from, uint32_t to)
{
	return &c->probe[(size_t)from * c->world + to];
}

void
connect_verdict_fini(struct connect_verdict *v)
{
	free(v->findings);
	free(v->ranks);
	memset(v, 0, sizeof(*v));
}

/* Whether two ranks have one host label: their link is loopback. */
static bool
same_host(const struct connect_matrix *c, uint32_t a, uint32_t b)
{
	return c->host[a] == c->host[b];
}

static struct connect_finding *
add_finding(struct connect_verdict *v, enum connect_finding_kind kind,
    uint32_t rank)
{
	struct connect_finding *f = &v->findings[v->nfindings++];

	memset(f, 0, sizeof(*f));
	f->kind = kind;
	f->rank = rank;
	f->peer = NONE;
	return f;
}

/* ------------------------------------------------------ reachability */

static void
unreachable(const struct connect_matrix *c, struct connect_verdict *v,
    uint32_t *in_fail, uint32_t *out_fail)
{
	uint32_t n = c->world;
	/* A rank all others fail to reach, or that reaches none, is one
	 * finding, not n - 1; with two ranks the pair says it best. */
	bool group = n >= 3;

	for (uint32_t a = 0; a < n; a++)
		for (uint32_t b = 0; b < n; b++)
			if (a != b && !connect_probe_at(c, a, b)->reached) {
				out_fail[a]++;
				in_fail[b]++;
				v->unreachable++;
			}
	for (uint32_t r = 0; r < n && group; r++)
		if (in_fail[r] == n - 1)
			add_finding(v, CONNECT_NOBODY_REACHES, r);
	for (uint32_t r = 0; r < n && group; r++)
		if (out_fail[r] == n - 1)
			add_finding(v, CONNECT_REACHES_NOBODY, r);
	for (uint32_t a = 0; a < n; a++)
		for (uint32_t b = 0; b < n; b++) {
			struct connect_finding *f;

			if (a == b || connect_probe_at(c, a, b)->reached ||
			    (group && (in_fail[b] == n - 1 ||
			    out_fail[a] == n - 1)))
				continue;
			f = add_finding(v, CONNECT_NO_ROUTE, a);
			f->peer = b;
		}
}

/* ------------------------------------------------ interfaces and MTU */

/* The interface and MTU rank r's end of a reached connection with s
 * used, between hosts; false when there is none to compare. */
static bool
end_of(const struct connect_matrix *c, uint32_t r, uint32_t s, bool dialled,
    const struct connect_end **end)
{
	const struct connect_probe *p = dialled ? connect_probe_at(c, r, s) :
	    connect_probe_at(c, s, r);

	if (r == s || !p->reached || same_host(c, r, s))
		return false;
	*end = &p->end[dialled ? 0 : 1];
	return true;
}

static int
by_name(const void *a, const void *b)
{
	return strcmp(*(const char *const *)a, *(const char *const *)b);
}

/*
 * The interface rank r used most between hosts (ties: the first in byte
 * order), "" when none is known; *mixed the first peer reached by
 * another, that one in other (when non-NULL).  names has room for 2 x
 * world.
 */
static void
primary_interface(const struct connect_matrix *c, uint32_t r, char *name,
    uint32_t *mixed, char *other, const char **names)
{
	size_t n = 0, best = 0;

	name[0] = '\0';
	*mixed = NONE;
	for (uint32_t s = 0; s < c->world; s++)
		for (int d = 0; d < 2; d++) {
			const struct connect_end *e;

			if (end_of(c, r, s, d, &e) && e->ifname[0] != '\0')
				names[n++] = e->ifname;
		}
	qsort(names, n, sizeof(*names), by_name);
	for (size_t i = 0, run = 1; i < n; i++, run++) {
		if (i > 0 && strcmp(names[i], names[i - 1]) != 0)
			run = 1;
		if (run > best) {
			best = run;
			snprintf(name, CONNECT_IFNAME_MAX, "%s", names[i]);
		}
	}
	for (uint32_t s = 0; s < c->world && *mixed == NONE; s++)
		for (int d = 0; d < 2; d++) {
			const struct connect_end *e;

			if (*mixed == NONE && end_of(c, r, s, d, &e) &&
			    e->ifname[0] != '\0' && strcmp(e->ifname, name) !=
			    0) {
				*mixed = s;
				if (other != NULL)
					snprintf(other, CONNECT_IFNAME_MAX, "%s",
					    e->ifname);
			}
		}
}

static int
by_number(const void *a, const void *b)
{
	uint32_t x = *(const uint32_t *)a, y = *(const uint32_t *)b;

	return (x > y) - (x < y);
}

/* The path MTU most of rank r's connections between hosts saw at its
 * end (ties: the lower), 0 if none: a peer whose own MTU is lower shows
 * in some of r's connections, not in most.  mtus has room for 2 x
 * world. */
static uint32_t
rank_mtu(const struct connect_matrix *c, uint32_t r, uint32_t *mtus)
{
	uint32_t best = 0;
	size_t n = 0, best_run = 0;

	for (uint32_t s = 0; s < c->world; s++)
		for (int d = 0; d < 2; d++) {
			const struct connect_end *e;

			if (end_of(c, r, s, d, &e) && e->mtu != 0)
				mtus[n++] = e->mtu;
		}
	qsort(mtus, n, sizeof(*mtus), by_number);
	for (size_t i = 0, run = 1; i < n; i++, run++) {
		if (i > 0 && mtus[i] != mtus[i - 1])
			run = 1;
		if (run > best_run) {
			best_run = run;
			best = mtus[i];
		}
	}
	return best;
}

/* The value most ranks have (ties: the lowest rank's), among known. */
static uint32_t
majority(const uint32_t *value, const bool *known, uint32_t n)
{
	uint32_t best = NONE, best_count = 0;

	for (uint32_t r = 0; r < n; r++) {
		uint32_t count = 0;

		if (!known[r])
			continue;
		for (uint32_t s = 0; s < n; s++)
			count += known[s] && value[s] == value[r];
		if (count > best_count) {
			best_count = count;
			best = r;
		}
	}
	return best;
}

/*
 * Ranks whose value (their interface, as an index of the first rank
 * with the same name, or their MTU) is not the majority's, one finding
 * for each value, ranks in order.
 */
static void
deviants(const struct connect_matrix *c, struct connect_verdict *v,
    enum connect_finding_kind kind, const uint32_t *value, const bool *known,
    uint32_t common, const char (*names)[CONNECT_IFNAME_MAX])
{
	size_t used = 0;

	for (size_t i = 0; i < v->nfindings; i++)
		used += v->findings[i].nranks;
	for (uint32_t r = 0; r < c->world; r++) {
		struct connect_finding *f;
		bool seen = false;

		if (!known[r] || value[r] == value[common])
			continue;
		for (uint32_t s = 0; s < r; s++)
			seen = seen || (known[s] && value[s] == value[r]);
		if (seen)
			continue;
		f = add_finding(v, kind, r);
		f->first_rank = (uint32_t)used;
		if (kind == CONNECT_MTU)
			f->mtu = value[r];
		else
			memcpy(f->ifname, names[r], CONNECT_IFNAME_MAX);
		for (uint32_t s = r; s < c->world; s++)
			if (known[s] && value[s] == value[r]) {
				v->ranks[used++] = s;
				f->nranks++;
			}
	}
}

static int
interfaces_and_mtu(const struct connect_matrix *c, struct connect_verdict *v)
{
	uint32_t n = c->world, *value = calloc(n, sizeof(*value));
	char (*names)[CONNECT_IFNAME_MAX] = calloc(n, sizeof(*names));
	bool *known = calloc(n, sizeof(*known));
	const char **scratch = calloc(2 * (size_t)n, sizeof(*scratch));
	uint32_t *mtus = calloc(2 * (size_t)n, sizeof(*mtus));
	uint32_t common;

	if (value == NULL || names == NULL || known == NULL ||
	    scratch == NULL || mtus == NULL) {
		free(value);
		free(names);
		free(known);
		free(scratch);
		free(mtus);
		return -1;
	}
	for (uint32_t r = 0; r < n; r++) {
		char other[CONNECT_IFNAME_MAX];
		uint32_t mixed;
		struct connect_finding *f;

		primary_interface(c, r, names[r], &mixed, other, scratch);
		known[r] = names[r][0] != '\0';
		if (mixed != NONE) {
			f = add_finding(v, CONNECT_MIXED_INTERFACE, r);
			f->peer = mixed;
			memcpy(f->ifname, other, sizeof(f->ifname));
			memcpy(f->usual, names[r], sizeof(f->usual));
		}
	}
	/* Names become the index of their first rank, to compare. */
	for (uint32_t r = 0; r < n; r++) {
		value[r] = r;
		for (uint32_t s = 0; s < r; s++)
			if (known[s] && known[r] && strcmp(names[s],
			    names[r]) == 0) {
				value[r] = s;
				break;
			}
	}
	if ((common = majority(value, known, n)) != NONE) {
		memcpy(v->ifname, names[common], sizeof(v->ifname));
		deviants(c, v, CONNECT_INTERFACE, value, known, common, names);
	}
	for (uint32_t r = 0; r < n; r++) {
		value[r] = rank_mtu(c, r, mtus);
		known[r] = value[r] != 0;
	}
	if ((common = majority(value, known, n)) != NONE) {
		v->mtu = value[common];
		deviants(c, v, CONNECT_MTU, value, known, common, names);
	}
	free(value);
	free(names);
	free(known);
	free(scratch);
	free(mtus);
	return 0;
}

int
connect_verdict_run(const struct connect_matrix *c, struct connect_verdict *v,
    char *why, size_t why_size)
{
	uint32_t n = c->world;
	uint32_t *in_fail = calloc(n, sizeof(*in_fail));
	uint32_t *out_fail = calloc(n, sizeof(*out_fail));

	memset(v, 0, sizeof(*v));
	v->world = n;
	/* Every pair, and per rank at most a mixed interface, a group of
	 * interfaces, a group of MTUs and the two reachability findings. */
	v->findings = calloc((size_t)n * n + 5 * (size_t)n,
	    sizeof(*v->findings));
	v->ranks = calloc(2 * (size_t)n, sizeof(*v->ranks));
	if (in_fail == NULL || out_fail == NULL || v->findings == NULL ||
	    v->ranks == NULL || (unreachable(c, v, in_fail, out_fail),
	    interfaces_and_mtu(c, v)) != 0) {
		free(in_fail);
		free(out_fail);
		connect_verdict_fini(v);
		snprintf(why, why_size, "out of memory judging %u ranks' "
		    "connections", n);
		return -1;
	}
	free(in_fail);
	free(out_fail);
	v->pass = v->nfindings == 0;
	return 0;
}

/* ------------------------------------------------------------ words */

static void
rank_name(const struct connect_matrix *c, uint32_t r, struct pairs_text *t)
{
	char label[PAIRS_LABEL_MAX];

	pairs_text_add(t, "rank %u (%s)", r,
	    pairs_host_label(c->addresses[r], label, sizeof(label)));
}

/* The error most of the failed probes into (in) or out of rank r gave
 * (ties: the first). */
static const char *
common_error(const struct connect_matrix *c, uint32_t r, bool in)
{
	const char *best = "";
	uint32_t best_count = 0;

	for (uint32_t s = 0; s < c->world; s++) {
		const struct connect_probe *p = in ? connect_probe_at(c, s, r) :
		    connect_probe_at(c, r, s);
		uint32_t count = 0;

		if (s == r || p->reached)
			continue;
		for (uint32_t t = 0; t < c->world; t++) {
			const struct connect_probe *q = in ?
			    connect_probe_at(c, t, r) :
			    connect_probe_at(c, r, t);

			count += t != r && !q->reached &&
			    strcmp(q->error, p->error) == 0;
		}
		if (count > best_count) {
			best_count = count;
			best = p->error;
		}
	}
	return best[0] ? best : "no reason given";
}

static void
rank_list(const struct connect_verdict *v, const struct connect_finding *f,
    struct pairs_text *t)
{
	pairs_text_add(t, f->nranks == 1 ? "rank" : "ranks");
	for (uint32_t i = 0; i < f->nranks && i < 16; i++)
		pairs_text_add(t, "%s %u", i ? "," : "",
		    v->ranks[f->first_rank + i]);
	if (f->nranks > 16)
		pairs_text_add(t, " and %u more", f->nranks - 16);
}

char *
connect_finding_text(const struct connect_matrix *c,
    const struct connect_verdict *v, const struct connect_finding *f,
    char *buf, size_t size)
{
	const struct connect_probe *p;
	struct pairs_text t;

	pairs_text_init(&t, buf, size);
	switch (f->kind) {
	case CONNECT_NO_ROUTE:
		p = connect_probe_at(c, f->rank, f->peer);
		rank_name(c, f->rank, &t);
		pairs_text_add(&t, " cannot reach ");
		rank_name(c, f->peer, &t);
		pairs_text_add(&t, ": %s", p->error[0] ? p->error :
		    "no reason given");
		break;
	case CONNECT_NOBODY_REACHES:
		pairs_text_add(&t, "no rank can reach ");
		rank_name(c, f->rank, &t);
		pairs_text_add(&t, ": %s", common_error(c, f->rank, true));
		break;
	case CONNECT_REACHES_NOBODY:
		rank_name(c, f->rank, &t);
		pairs_text_add(&t, " cannot reach any rank: %s",
		    common_error(c, f->rank, false));
		break;
	case CONNECT_INTERFACE:
		rank_list(v, f, &t);
		pairs_text_add(&t, " use%s interface %s where the others use %s",
		    f->nranks == 1 ? "s" : "", f->ifname, v->ifname);
		break;
	case CONNECT_MIXED_INTERFACE:
		pairs_text_add(&t, "rank %u uses interface %s to reach ",
		    f->rank, f->ifname);
		rank_name(c, f->peer, &t);
		pairs_text_add(&t, ", %s for the others", f->usual);
		break;
	case CONNECT_MTU:
		pairs_text_add(&t, "MTU %u on ", f->mtu);
		rank_list(v, f, &t);
		pairs_text_add(&t, ", %u elsewhere", v->mtu);
		break;
	}
	return buf;
}

static const char *
kind_name(enum connect_finding_kind kind)
{
	static const char *const names[] = { "no_route", "nobody_reaches",
	    "reaches_nobody", "interface", "mixed_interface", "mtu" };

	return (size_t)kind < sizeof(names) / sizeof(names[0]) ? names[kind] :
	    "unknown";
}

/* The group of a kind: unreachable, interface or mtu. */
static int
group_of(enum connect_finding_kind kind)
{
	return kind <= CONNECT_REACHES_NOBODY ? 0 : kind == CONNECT_MTU ? 2 :
	    1;
}

const char *
connect_verdict_kind(const struct connect_verdict *v)
{
	static const char *const groups[] = { "unreachable", "interface",
	    "mtu" };
	int g;

	if (v->nfindings == 0)
		return "ok";
	g = group_of(v->findings[0].kind);
	for (size_t i = 1; i < v->nfindings; i++)
		if (group_of(v->findings[i].kind) != g)
			return "several";
	return groups[g];
}

/* ------------------------------------------------------------ table */

struct rank_line {
	char ifname[CONNECT_IFNAME_MAX];
	uint32_t mtu, reached;
	double rtt_us, connect_ms;
};

/* scratch, mtus and names have room for 2 x world. */
static void
rank_line(const struct connect_matrix *c, uint32_t r, double *scratch,
    uint32_t *mtus, const char **names, struct rank_line *l)
{
	uint32_t mixed, n = 0;

	memset(l, 0, sizeof(*l));
	primary_interface(c, r, l->ifname, &mixed, NULL, names);
	l->mtu = rank_mtu(c, r, mtus);
	for (uint32_t s = 0; s < c->world; s++)
		if (s != r && connect_probe_at(c, r, s)->reached)
			scratch[n++] = connect_probe_at(c, r, s)->rtt_us;
	l->reached = n;
	l->rtt_us = n ? bench_median(scratch, n) : NAN;
	n = 0;
	for (uint32_t s = 0; s < c->world; s++)
		if (s != r && connect_probe_at(c, r, s)->reached)
			scratch[n++] = connect_probe_at(c, r, s)->connect_ms;
	l->connect_ms = n ? bench_median(scratch, n) : NAN;
	/* Loopback only: the interface of its first reached connection. */
	for (uint32_t s = 0; s < c->world && l->ifname[0] == '\0'; s++)
		if (s != r && connect_probe_at(c, r, s)->reached)
			snprintf(l->ifname, sizeof(l->ifname), "%s",
			    connect_probe_at(c, r, s)->end[0].ifname);
}

static void
rtt_matrix(FILE *out, const struct connect_matrix *c)
{
	fprintf(out, "#\n# round trip (us), TCP's at the dialling rank (row: "
	    "from, column: to; x: not reached)\n# %7s", "from\\to");
	for (uint32_t j = 0; j < c->world; j++)
		fprintf(out, " %8u", j);
	fputs("\n", out);
	for (uint32_t i = 0; i < c->world; i++) {
		fprintf(out, "  %7u", i);
		for (uint32_t j = 0; j < c->world; j++) {
			const struct connect_probe *p =
			    connect_probe_at(c, i, j);

			if (i == j)
				fprintf(out, " %8s", "-");
			else if (!p->reached)
				fprintf(out, " %8s", "x");
			else
				fprintf(out, " %8.1f", p->rtt_us);
		}
		fputs("\n", out);
	}
}

struct slow_pair {
	double rtt_us;
	uint32_t from, to;
};

static int
by_rtt(const void *a, const void *b)
{
	const struct slow_pair *x = a, *y = b;

	if (x->rtt_us != y->rtt_us)
		return x->rtt_us > y->rtt_us ? -1 : 1;
	if (x->from != y->from)
		return x->from < y->from ? -1 : 1;
	return (x->to > y->to) - (x->to < y->to);
}

/* all has room for every pair. */
static void
slowest(FILE *out, const struct connect_matrix *c, struct slow_pair *all)
{
	size_t n = 0;
	char a[PAIRS_LABEL_MAX], b[PAIRS_LABEL_MAX];

	for (uint32_t i = 0; i < c->world; i++)
		for (uint32_t j = 0; j < c->world; j++)
			if (i != j && connect_probe_at(c, i, j)->reached)
				all[n++] = (struct slow_pair){
				    connect_probe_at(c, i, j)->rtt_us, i, j };
	qsort(all, n, sizeof(*all), by_rtt);
	fprintf(out, "#\n# the %d longest round trips:\n# %6s %-20s %6s "
	    "%-20s %9s\n", CONNECT_SLOWEST_SHOWN, "from", "host", "to", "host",
	    "rtt (us)");
	for (size_t k = 0; k < n && k < CONNECT_SLOWEST_SHOWN; k++)
		fprintf(out, "  %6u %-20s %6u %-20s %9.1f\n", all[k].from,
		    pairs_host_label(c->addresses[all[k].from], a, sizeof(a)),
		    all[k].to, pairs_host_label(c->addresses[all[k].to], b,
		    sizeof(b)), all[k].rtt_us);
}

int
connect_table_write(FILE *out, const struct connect_matrix *c,
    const struct connect_verdict *v)
{
	double *scratch = malloc(2 * (size_t)c->world * sizeof(*scratch));
	uint32_t *mtus = malloc(2 * (size_t)c->world * sizeof(*mtus));
	const char **names = malloc(2 * (size_t)c->world * sizeof(*names));
	struct slow_pair *all = c->world > CONNECT_TABLE_MAX ?
	    malloc((size_t)c->world * c->world * sizeof(*all)) : NULL;
	char text[1024];

	if (scratch == NULL || mtus == NULL || names == NULL ||
	    (c->world > CONNECT_TABLE_MAX && all == NULL)) {
		free(scratch);
		free(mtus);
		free(names);
		free(all);
		return -1;
	}
	fprintf(out, "# connect: each of %u ranks dialled every other rank "
	    "(connect and hello)\n", c->world);
	if (c->world <= CONNECT_TABLE_MAX)
		rtt_matrix(out, c);
	fprintf(out, "#\n# %6s %-24s %-16s %6s %8s %9s %11s\n", "rank",
	    "address", "interface", "mtu", "reached", "rtt (us)",
	    "connect (ms)");
	for (uint32_t r = 0; r < c->world; r++) {
		struct rank_line l;

		rank_line(c, r, scratch, mtus, names, &l);
		fprintf(out, "  %6u %-24s %-16s %6s %4u/%-3u %9.1f %11.2f\n", r,
		    c->addresses[r], l.ifname[0] ? l.ifname : "-",
		    l.mtu ? (snprintf(text, sizeof(text), "%u", l.mtu), text) :
		    "-", l.reached, c->world - 1, l.rtt_us, l.connect_ms);
	}
	if (c->world > CONNECT_TABLE_MAX)
		slowest(out, c, all);
	if (v->nfindings == 0)
		fprintf(out, "# verdict: ok: all %llu connections "
		    "reached%s%s%s%s\n",
		    (unsigned long long)c->world * (c->world - 1),
		    v->ifname[0] ? ", interface " : "", v->ifname,
		    v->mtu ? ", MTU " : "", v->mtu ? (snprintf(text,
		    sizeof(text), "%u", v->mtu), text) : "");
	for (size_t i = 0; i < v->nfindings; i++)
		fprintf(out, "# verdict: %s\n", connect_finding_text(c, v,
		    &v->findings[i], text, sizeof(text)));
	free(scratch);
	free(mtus);
	free(names);
	free(all);
	return 0;
}

/* ------------------------------------------------------------- JSON */

static void
end_json(FILE *out, const char *side, const struct connect_end *e)
{
	fprintf(out, ",\"%s_address\":", side);
	pairs_json_string_or_null(out, e->address);
	fprintf(out, ",\"%s_interface\":", side);
	pairs_json_string_or_null(out, e->ifname);
	fprintf(out, ",\"%s_mtu\":", side);
	pairs_json_index_or_null(out, e->mtu != 0, e->mtu);
}

static void
probe_json(FILE *out, const struct connect_matrix *c, uint32_t i, uint32_t j)
{
	const struct connect_probe *p = connect_probe_at(c, i, j);

	fprintf(out, "{\"type\":\"connect\",\"schema\":1,\"from\":%u,"
	    "\"from_address\":", i);
	json_string(out, c->addresses[i]);
	fprintf(out, ",\"to\":%u,\"to_address\":", j);
	json_string(out, c->addresses[j]);
	fprintf(out, ",\"reached\":%s,\"error\":", p->reached ? "true" :
	    "false");
	pairs_json_string_or_null(out, p->reached ? NULL : p->error[0] ?
	    p->error : "no reason given");
	fputs(",\"connect_ms\":", out);
	json_number(out, p->reached ? p->connect_ms : NAN);
	fputs(",\"rtt_us\":", out);
	json_number(out, p->reached ? p->rtt_us : NAN);
	end_json(out, "local", &p->end[0]);
	end_json(out, "remote", &p->end[1]);
	fputs("}\n", out);
}

static void
finding_json(FILE *out, const struct connect_matrix *c,
    const struct connect_verdict *v, const struct connect_finding *f)
{
	bool grouped = f->kind == CONNECT_INTERFACE || f->kind == CONNECT_MTU;
	char text[1024];

	fputs("{\"kind\":", out);
	json_string(out, kind_name(f->kind));
	fputs(",\"text\":", out);
	json_string(out, connect_finding_text(c, v, f, text, sizeof(text)));
	fprintf(out, ",\"rank\":%u,\"peer\":", f->rank);
	pairs_json_index_or_null(out, f->peer != NONE, f->peer);
	fputs(",\"ranks\":[", out);
	for (uint32_t i = 0; grouped && i < f->nranks; i++)
		fprintf(out, "%s%u", i ? "," : "", v->ranks[f->first_rank + i]);
	if (!grouped)
		fprintf(out, "%u", f->rank);
	fputs("],\"interface\":", out);
	pairs_json_string_or_null(out, f->kind == CONNECT_INTERFACE ||
	    f->kind == CONNECT_MIXED_INTERFACE ? f->ifname : NULL);
	fputs(",\"mtu\":", out);
	pairs_json_index_or_null(out, f->kind == CONNECT_MTU, f->mtu);
	fputs(",\"error\":", out);
	pairs_json_string_or_null(out, f->kind == CONNECT_NO_ROUTE ?
	    connect_probe_at(c, f->rank, f->peer)->error : f->kind ==
	    CONNECT_NOBODY_REACHES ? common_error(c, f->rank, true) : f->kind ==
	    CONNECT_REACHES_NOBODY ? common_error(c, f->rank, false) : NULL);
	fputs("}", out);
}

void
connect_json_write(FILE *out, const struct connect_matrix *c,
    const struct connect_verdict *v, int status)
{
	char text[1024];

	for (uint32_t i = 0; i < c->world; i++)
		for (uint32_t j = 0; j < c->world; j++)
			if (i != j)
				probe_json(out, c, i, j);
	fputs("{\"type\":\"connect_verdict\",\"schema\":1,\"verdict\":", out);
	json_string(out, connect_verdict_kind(v));
	fprintf(out, ",\"pass\":%s,\"text\":", v->pass ? "true" : "false");
	if (v->nfindings > 0)
		json_string(out, connect_finding_text(c, v, &v->findings[0],
		    text, sizeof(text)));
	else
		json_string(out, "ok");
	fputs(",\"findings\":[", out);
	for (size_t i = 0; i < v->nfindings; i++) {
		fputs(i ? "," : "", out);
		finding_json(out, c, v, &v->findings[i]);
	}
	fprintf(out, "],\"unreachable\":%zu,\"interface\":", v->unreachable);
	pairs_json_string_or_null(out, v->ifname);
	fputs(",\"mtu\":", out);
	pairs_json_index_or_null(out, v->mtu != 0, v->mtu);
	fprintf(out, ",\"exit\":%d}\n", status);
}
