/*
 * pairs_verdict.h - the verdict of `silvic-ring bench pairs`
 * (pairs_verdict.c): from the matrix, which host or which link is slow,
 * or the whole fabric against a baseline, or nothing.  Pure and
 * deterministic: the same matrix and options give the same verdict,
 * with nothing left to the order of a sort or a clock.
 *
 * How noise is handled (the man page says the same):
 *
 *  1. A cell (one direction, one mode) is the median of its repeats.
 *  2. It is judged against a reference: the median of the cells of its
 *     kind (between hosts, or between ranks of one host), or with a
 *     baseline its own cell in the baseline, scaled by the median cell's
 *     ratio to it.  It is slow below threshold x its reference.  The
 *     default threshold, 0.6, is below 0.8 / 1.2: noise of +-20% around
 *     one speed can never put a cell below it.
 *  3. The run's own jitter widens the margin: the threshold used is at
 *     most 1 - 3 x the median over cells of half the spread of their
 *     repeats relative to their median.  When that leaves less than half
 *     the threshold, the run was too unsteady to judge, and says so.
 *  4. A cell whose fastest repeat reached halfway between the threshold
 *     and its reference is not slow: it can run at speed.
 *
 * A host is slow when more than half of its peer hosts have a slow cell
 * with it, against the median of the cells between the other hosts,
 * while at most a quarter of the pairs of those others have one; the
 * hosts so named are set aside one at a time (most slow peers first) and
 * what remains is judged without them.  A link is slow when a cell of a
 * pair no named host explains is slow; the mode each direction was slow
 * in says which direction it is.
 *
 * What a world can tell apart: with two hosts there is one pair, and a
 * slow host, a slow link and a slow fabric are the same thing; only one
 * direction slower than the other shows without a baseline (it is named
 * as a link), and with a baseline the pair against its old speed (as all
 * links below baseline).  With three hosts a slow host X is two slow
 * pairs sharing X while the third pair is fine, which is also what one
 * fast pair among slow ones looks like: the verdict names host X.
 * Without a baseline a uniformly slow fabric is "ok": every threshold is
 * relative.
 */
#ifndef SR_PAIRS_VERDICT_H
#define SR_PAIRS_VERDICT_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "pairs_matrix.h"

#define PAIRS_THRESHOLD_DEFAULT 0.6
/* The jitter margin: a slow cell is below 1 - this x the jitter. */
#define PAIRS_JITTER_FACTOR 3.0

enum pairs_finding_kind {
	PAIRS_FINDING_FABRIC,	/* all links below the baseline */
	PAIRS_FINDING_HOST,	/* host X is slow */
	PAIRS_FINDING_LINK,	/* link X -> Y (or X <-> Y) is slow */
	PAIRS_FINDING_UNSTEADY	/* too unsteady to judge */
};

/* Which cells of a pair were slow: the direction from -> to ("forward")
 * and to -> from ("back"), alone and with both at once. */
enum {
	PAIRS_SLOW_FORWARD_ALONE = 1,
	PAIRS_SLOW_BACK_ALONE = 2,
	PAIRS_SLOW_FORWARD_BOTH = 4,
	PAIRS_SLOW_BACK_BOTH = 8
};

/* The flags of a cell (pairs_verdict's flags[mode][cell]): below its
 * threshold, so part of a host's or a link's finding (outlined). */
enum {
	PAIRS_CELL_SLOW = 1
};

struct pairs_finding {
	enum pairs_finding_kind kind;
	/* HOST: the host (pairs_matrix's numbering), its peer hosts with
	 * a slow cell, of how many, and in which modes (1 << mode) it was
	 * slow sending to or receiving from more than half of them. */
	uint32_t host;
	uint32_t slow_peers, peers;
	unsigned sends, receives;
	/* LINK: the ranks, from -> to the slow direction (the lower rank
	 * first when both directions or only both at once are slow), and
	 * its PAIRS_SLOW_* cells. */
	uint32_t from, to;
	unsigned slow;
	/* The worst cell (HOST, LINK): its mode and direction, GB/s, the
	 * GB/s it was judged against and their ratio.  FABRIC: the median
	 * cell's GB/s and ratio to the baseline in worst_mode. */
	enum pairs_mode worst_mode;
	uint32_t worst_from, worst_to;
	double gbps, reference, ratio;
};

struct pairs_verdict_options {
	double threshold;	/* slow below threshold x the reference */
	/* An earlier run's cell values (medians), baseline[mode][from *
	 * world + to] for the same world and hosts, or NULL; its name for
	 * the messages. */
	const double *baseline[PAIRS_MODE_COUNT];
	const char *baseline_name;
};

struct pairs_verdict {
	uint32_t world;
	double threshold;			/* as given */
	double threshold_used[PAIRS_MODE_COUNT];	/* after the margin */
	double jitter[PAIRS_MODE_COUNT];
	/* A mode too unsteady to judge while the other is steady: set
	 * aside, no cell of it is slow, and the verdict is the other's. */
	bool set_aside[PAIRS_MODE_COUNT];
	/* The median cell between hosts (of all cells when every rank is
	 * on one host), and with a baseline its ratio to it (else NaN). */
	double median_gbps[PAIRS_MODE_COUNT];
	double baseline_ratio[PAIRS_MODE_COUNT];
	bool with_baseline;
	/* [mode][from * world + to]: the GB/s each cell was judged against
	 * (NaN on the diagonal) and its PAIRS_CELL_* flags. */
	double *reference[PAIRS_MODE_COUNT];
	uint8_t *flags[PAIRS_MODE_COUNT];
	struct pairs_finding *findings;	/* fabric, hosts, then links */
	size_t nfindings;
	bool pass;			/* no finding */
	const char *baseline_name;
};

void pairs_verdict_options_init(struct pairs_verdict_options *o);
/*
 * The verdict of a complete matrix.  0, or -1 with why (an incomplete
 * matrix, a threshold outside (0, 1), a baseline cell that is not a
 * positive number, no memory); v is filled on success, and is safe to
 * fini either way.
 */
int pairs_verdict_run(const struct pairs_matrix *m,
    const struct pairs_verdict_options *o, struct pairs_verdict *v,
    char *why, size_t why_size);
void pairs_verdict_fini(struct pairs_verdict *v);

/* One word for the JSON record: "ok", "host", "link", "fabric",
 * "unsteady", or "several" when there are more findings. */
const char *pairs_verdict_kind(const struct pairs_verdict *v);
/* The JSON name of a finding's kind. */
const char *pairs_finding_kind_name(enum pairs_finding_kind kind);
/*
 * A finding in words, without a newline: "host 10.0.0.4 (rank 3) is
 * slow: ...", "link 10.0.0.2 -> 10.0.0.5 (rank 1 -> rank 4) is slow:
 * ...", "all links below baseline: ...".  Returns buf.
 */
char *pairs_finding_text(const struct pairs_matrix *m,
    const struct pairs_verdict *v, const struct pairs_finding *f, char *buf,
    size_t size);
/* "ok: ..." when there is no finding, else the first finding's text and
 * ", and N more" (the text table and JSON give each).  Returns buf. */
char *pairs_verdict_text(const struct pairs_matrix *m,
    const struct pairs_verdict *v, char *buf, size_t size);

#endif
