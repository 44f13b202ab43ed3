/*
 * connect_verdict.h - the verdict of `silvic-ring bench connect`, the
 * preflight in which every rank dials every other rank (connect plus
 * hello), and its writers (connect_verdict.c).  Pure: from what the
 * probes found, which rank cannot reach which and why, which rank leaves
 * by another interface or has another path MTU than the rest; and the
 * table of round trips, or JSON records.  Nothing here dials.
 *
 * Connections between two ranks of one host (the same host label) go
 * over loopback: they count for reachability, not for the interface and
 * MTU comparison, which is between hosts.
 */
#ifndef SR_CONNECT_VERDICT_H
#define SR_CONNECT_VERDICT_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>

#define CONNECT_ERROR_MAX 160
#define CONNECT_IFNAME_MAX 16	/* IFNAMSIZ */
#define CONNECT_ADDRESS_MAX 64	/* an IPv6 address with a zone */
#define CONNECT_WORLD_MAX 1024u
/* Above this world the table gives each rank's line and the slowest
 * round trips instead of the N x N matrix. */
#define CONNECT_TABLE_MAX 16
#define CONNECT_SLOWEST_SHOWN 20

/* One end of a connection, as that end's socket saw it. */
struct connect_end {
	char address[CONNECT_ADDRESS_MAX];	/* local, "" unknown */
	char ifname[CONNECT_IFNAME_MAX];	/* interface, "" unknown */
	uint32_t mtu;				/* path MTU, 0 unknown */
};

/* What rank `from` found dialling rank `to`. */
struct connect_probe {
	bool reached;			/* connect and hello done */
	char error[CONNECT_ERROR_MAX];	/* why not: "No route to host" */
	double connect_ms;		/* connect plus hello */
	double rtt_us;			/* TCP's round trip at from */
	struct connect_end end[2];	/* [0] from's socket, [1] to's */
};

struct connect_matrix {
	uint32_t world;
	char *const *addresses;		/* each rank's host:port */
	uint32_t *host;			/* each rank's host (by label) */
	/* [from * world + to] for from != to (the diagonal unused) */
	struct connect_probe *probe;
};

enum connect_finding_kind {
	CONNECT_NO_ROUTE,	/* rank cannot reach peer */
	CONNECT_NOBODY_REACHES,	/* no rank can reach rank */
	CONNECT_REACHES_NOBODY,	/* rank can reach no rank */
	CONNECT_INTERFACE,	/* ranks leave by another interface */
	CONNECT_MIXED_INTERFACE,	/* rank leaves by two interfaces */
	CONNECT_MTU		/* ranks have another path MTU */
};

struct connect_finding {
	enum connect_finding_kind kind;
	uint32_t rank;		/* the first (or only) rank named */
	uint32_t peer;		/* NO_ROUTE, MIXED_INTERFACE: the other */
	uint32_t nranks;	/* INTERFACE, MTU: ranks that share it */
	uint32_t first_rank;	/* index into the verdict's ranks[] */
	char ifname[CONNECT_IFNAME_MAX];	/* theirs (INTERFACE), the
						 * other (MIXED_INTERFACE) */
	char usual[CONNECT_IFNAME_MAX];		/* MIXED_INTERFACE: the
						 * one used most */
	uint32_t mtu;				/* theirs (MTU) */
};

struct connect_verdict {
	uint32_t world;
	struct connect_finding *findings;
	size_t nfindings;
	uint32_t *ranks;	/* INTERFACE and MTU findings' rank lists */
	size_t unreachable;	/* pairs not reached */
	char ifname[CONNECT_IFNAME_MAX];	/* what most ranks use */
	uint32_t mtu;				/* what most ranks have */
	bool pass;
};

/* c->probe sized for c->world ranks, all unreached and empty, and the
 * ranks grouped by host label (pairs_host_label of their address); -1
 * when out of memory or the world is not 1 .. CONNECT_WORLD_MAX. */
int connect_matrix_init(struct connect_matrix *c, uint32_t world,
    char *const *addresses);
void connect_matrix_fini(struct connect_matrix *c);
struct connect_probe *connect_probe_at(const struct connect_matrix *c,
    uint32_t from, uint32_t to);

/* The verdict; -1 with why when out of memory. */
int connect_verdict_run(const struct connect_matrix *c,
    struct connect_verdict *v, char *why, size_t why_size);
void connect_verdict_fini(struct connect_verdict *v);
/*
 * A finding in words, without a newline: "rank 3 (10.0.0.4) cannot
 * reach rank 7 (10.0.0.8): No route to host", "rank 2 uses interface eth1
 * where the others use eth0", "MTU 1500 on rank 5, 9000 elsewhere".
 * Returns buf.
 */
char *connect_finding_text(const struct connect_matrix *c,
    const struct connect_verdict *v, const struct connect_finding *f,
    char *buf, size_t size);
/* "ok", "unreachable", "interface", "mtu" or "several". */
const char *connect_verdict_kind(const struct connect_verdict *v);

/* The text table (round trips, each rank's interface and MTU) and one
 * "# verdict: " line a finding, or "# verdict: ok: ...".  0, or -1
 * before writing anything when out of memory. */
int connect_table_write(FILE *out, const struct connect_matrix *c,
    const struct connect_verdict *v);
/* One "connect" record a pair, then the "connect_verdict" record. */
void connect_json_write(FILE *out, const struct connect_matrix *c,
    const struct connect_verdict *v, int status);

#endif
