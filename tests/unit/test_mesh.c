/*
 * test_mesh.c - the mesh's formation and bench connect's probe, with real
 * ranks forked over loopback (ranks.h): every pair linked, the ring's
 * collectives on it, a rank missing, one on another job or of a plain
 * ring, a key that differs, and the probe's report with a rank that never
 * answers.
 */
#include <stdlib.h>
#include <string.h>

#include "check.h"
#include "ranks.h"
#include "handshake.h"
#include "ring.h"

/* Every link of the mesh formed, to the rank it says, with wide headers;
 * then the ring's collectives on it give exact results. */
static int
every_link_and_collectives(struct rank_ctx *ctx)
{
	struct sr_ring *ring = ctx->ring;
	uint32_t n = ctx->world, me = ctx->rank;
	double v[3] = { me, 2.0 * me, 1 };
	uint32_t all[RANKS_MAX];
	char text[16] = "";
	struct sr_error err;

	RCHECK(ctx, ring->mesh && ring->nlinks == n, "mesh %d, %u links",
	    ring->mesh, ring->nlinks);
	for (uint32_t r = 0; r < n; r++) {
		const struct sr_link *l = &ring->links[r];

		if (r == me)
			continue;
		RCHECK(ctx, l->fd >= 0 && l->rank == r &&
		    l->header_len == SR_FRAME_WIDE_LEN, "link %u: fd %d rank "
		    "%u header %zu", r, l->fd, l->rank, l->header_len);
	}
	RCHECK(ctx, ring->nall_links == (int)n - 1, "%d links to close",
	    ring->nall_links);
	if (sr_allreduce(ring, v, v, 3, SR_F64, SR_SUM, &err) != 0)
		return rank_fail(ctx, &err);
	RCHECK(ctx, v[0] == n * (n - 1) / 2.0 && v[1] == n * (n - 1.0) &&
	    v[2] == n, "sum %g %g %g", v[0], v[1], v[2]);
	if (sr_allgather(ring, &me, sizeof(me), all, &err) != 0)
		return rank_fail(ctx, &err);
	for (uint32_t r = 0; r < n; r++)
		RCHECK(ctx, all[r] == r, "allgather[%u] = %u", r, all[r]);
	for (uint32_t root = 0; root < n; root++) {
		snprintf(text, sizeof(text), me == root ? "from %u" : "-", root);
		if (sr_broadcast(ring, text, sizeof(text), root, &err) != 0)
			return rank_fail(ctx, &err);
		RCHECK(ctx, strtoul(text + 5, NULL, 10) == root, "broadcast "
		    "from %u gave '%s'", root, text);
	}
	if (sr_barrier(ring, &err) != 0 || sr_ring_finish(ring, &err) != 0)
		return rank_fail(ctx, &err);
	return 0;
}

static void
test_mesh_every_world(void)
{
	for (uint32_t n = 2; n <= RANKS_MAX; n++) {
		struct ranks_job job = { .world = n, .mesh = true,
			.timeout_ms = 10000,
			.scenario = every_link_and_collectives };
		static struct ranks r;

		if (ranks_open(&r, &job) != 0 || ranks_start(&r) != 0)
			return;
		ranks_finish(&r);
		ranks_check_clean(&r, 0xff, true);
	}
}

static int
nothing(struct rank_ctx *ctx)
{
	(void)ctx;
	return 0;
}

/* A rank that never starts: every other times out, naming it among the
 * ranks it still waits for. */
static void
test_mesh_rank_missing(void)
{
	struct ranks_job job = { .world = 5, .mesh = true, .timeout_ms = 1500,
		.scenario = nothing, .hold_mask = 1u << 3,
		.deadline_ms = 20000 };
	static struct ranks r;
	char text[SR_MESSAGE_MAX + 32];

	if (ranks_open(&r, &job) != 0 || ranks_start(&r) != 0)
		return;
	ranks_wait_reports(&r, 0x17, r.deadline_ns);
	ranks_tell(&r, 3);
	ranks_finish(&r);
	for (uint32_t i = 0; i < 5; i++) {
		const struct rank_report *rep = &r.report[i];

		if (i == 3 || !r.reported[i])
			continue;
		sr_error_format(&rep->err, text, sizeof(text));
		printf("# rank %u: %s after %.0f ms\n", i, text,
		    ranks_ms(rep->t_fail_ns - rep->t_start_ns));
		CHECKF(rep->rc != 0 && rep->err.code == SR_ETIMEOUT &&
		    strstr(rep->err.message, "timed out after 1.5s") != NULL &&
		    strstr(rep->err.message, "3") != NULL, "rank %u: %s (%s)",
		    i, text, sr_code_name(rep->err.code));
		/* Its own timeout or another's, heard: rank 3 is the one
		 * named. */
		CHECKF(rep->err.peer == 3, "rank %u blames rank %lld: %s",
		    i, (long long)rep->err.peer, text);
	}
}

/* One rank of another job: a rank it dials rejects it, and it fails at
 * once with the rejection; the others fail too, each naming it or the
 * mismatch.  When every rank it would dial has already left (each
 * learnt of the mismatch from the hellos rank 2 rejected, and a rank
 * that fails formation leaves at once: a busy machine's order), its
 * dials are refused and it fails at its timeout, naming the connections
 * it rejected and why. */
static void
test_mesh_rank_of_another_job(void)
{
	struct ranks_job job = { .world = 4, .mesh = true, .timeout_ms = 2000,
		.scenario = nothing, .deadline_ms = 20000 };
	static struct ranks r;
	char text[SR_MESSAGE_MAX + 32];

	job.token_of[2] = 0x0123456789abcdefULL;
	if (ranks_open(&r, &job) != 0 || ranks_start(&r) != 0)
		return;
	ranks_finish(&r);
	ranks_check_clean(&r, 0xff, false);
	sr_error_format(&r.report[2].err, text, sizeof(text));
	if (r.report[2].err.code == SR_ETIMEOUT) {
		printf("# rank 2 was left alone: %s\n", text);
		CHECKF(strstr(r.report[2].err.message, "rejected ") != NULL &&
		    strstr(r.report[2].err.message, "job token mismatch") !=
		    NULL, "rank 2: %s", text);
	} else {
		CHECKF(r.report[2].rc != 0 && r.report[2].err.code ==
		    SR_EREJECTED && strstr(r.report[2].err.message,
		    "job token mismatch") != NULL, "rank 2: %s", text);
		CHECKF(ranks_ms(r.report[2].t_fail_ns -
		    r.report[2].t_start_ns) < job.timeout_ms, "rank 2 learnt "
		    "of its rejection only at its timeout");
	}
	for (uint32_t i = 0; i < 4; i++) {
		sr_error_format(&r.report[i].err, text, sizeof(text));
		CHECKF(r.report[i].rc != 0, "rank %u formed a mesh with a rank "
		    "of another job", i);
		/* Rejected by rank 2 itself, or told by those that
		 * rejected it, or timed out dialling it (or rank 1, which
		 * left once rank 2 rejected it): each names the mismatch, or
		 * a rank that left. */
		if (i != 2)
			CHECKF(strstr(text, "job token mismatch") != NULL ||
			    r.report[i].err.peer == 2 || (i != 1 &&
			    r.report[i].err.peer == 1), "rank %u: %s", i, text);
	}
}

/* A rank that forms a plain ring among mesh ranks is refused, and says
 * which kind each side forms. */
static void
test_mesh_and_ring_refuse_each_other(void)
{
	struct ranks_job job = { .world = 3, .mesh = true, .timeout_ms = 2000,
		.scenario = nothing, .ring_mask = 1u << 1,
		.deadline_ms = 20000 };
	static struct ranks r;
	char text[SR_MESSAGE_MAX + 32];
	bool said = false;

	if (ranks_open(&r, &job) != 0 || ranks_start(&r) != 0)
		return;
	ranks_finish(&r);
	ranks_check_clean(&r, 0xff, false);
	for (uint32_t i = 0; i < 3; i++) {
		sr_error_format(&r.report[i].err, text, sizeof(text));
		CHECKF(r.report[i].rc != 0, "rank %u formed", i);
		said = said || strstr(text, "form different links") != NULL ||
		    strstr(text, "it forms a ring and this rank a mesh") != NULL ||
		    strstr(text, "it forms a mesh (--mesh) and this rank a ring")
		    != NULL;
	}
	CHECK(said);
}

/* A key that differs on one rank: it fails authentication, and so does
 * every rank, within the timeout (aborts on the links that formed, or the
 * acceptors' rejections). */
static void
test_mesh_key_differs(void)
{
	static const uint8_t key[32] = "silvic-ring mesh test key, 32 b";
	struct ranks_job job = { .world = 4, .mesh = true, .timeout_ms = 3000,
		.scenario = nothing, .key = key, .key_len = sizeof(key),
		.keyless_mask = 1u << 1, .deadline_ms = 20000 };
	static struct ranks r;
	char text[SR_MESSAGE_MAX + 32];

	if (!sr_auth_built_in())
		return;
	if (ranks_open(&r, &job) != 0 || ranks_start(&r) != 0)
		return;
	ranks_finish(&r);
	ranks_check_clean(&r, 0xff, false);
	for (uint32_t i = 0; i < 4; i++) {
		sr_error_format(&r.report[i].err, text, sizeof(text));
		CHECKF(r.report[i].rc != 0 && r.report[i].err.code == SR_EAUTH,
		    "rank %u: %s (%s)", i, text,
		    sr_code_name(r.report[i].err.code));
	}
}

/* The probe: every rank reaches every other over loopback, and says how
 * (local address, interface, MTU, round trip); the mesh it leaves runs
 * the ring's collectives. */
static int
probe_all_reached(struct rank_ctx *ctx)
{
	double v = 1;
	struct sr_error err;

	for (uint32_t r = 0; r < ctx->world; r++) {
		const struct sr_probe_link *p = &ctx->probe[r];

		if (r == ctx->rank)
			continue;
		RCHECK(ctx, p->peer == r && p->reached && p->error[0] == '\0',
		    "rank %u: reached %d: %s", r, p->reached, p->error);
		RCHECK(ctx, strncmp(p->local, "127.0.0.1:", 10) == 0 &&
		    strcmp(p->iface, "lo") == 0 && p->mtu >= 1280 &&
		    p->rtt_us > 0 && p->attempts >= 1, "rank %u: local %s "
		    "iface %s mtu %u rtt %u attempts %u", r, p->local, p->iface,
		    p->mtu, p->rtt_us, p->attempts);
		RCHECK(ctx, ctx->ring->links[r].fd >= 0, "no link to %u", r);
	}
	if (sr_allreduce(ctx->ring, &v, &v, 1, SR_F64, SR_SUM, &err) != 0)
		return rank_fail(ctx, &err);
	RCHECK(ctx, v == ctx->world, "sum %g", v);
	return 0;
}

static void
test_probe_all_reached(void)
{
	struct ranks_job job = { .world = 5, .probe_ms = 3000,
		.timeout_ms = 10000, .scenario = probe_all_reached };
	static struct ranks r;

	if (ranks_open(&r, &job) != 0 || ranks_start(&r) != 0)
		return;
	ranks_finish(&r);
	ranks_check_clean(&r, 0xff, true);
}

/* One rank that never answers (its process waits before joining, its
 * listener open): the probe ends at its time, the others report it
 * unreached with the reason and reach each other, and a collective that
 * needs its link fails naming it. */
static int
probe_one_silent(struct rank_ctx *ctx)
{
	const uint32_t silent = 2;
	struct sr_error err;
	double v = 1;

	for (uint32_t r = 0; r < ctx->world; r++) {
		const struct sr_probe_link *p = &ctx->probe[r];

		if (r == ctx->rank)
			continue;
		if (r == silent)
			RCHECK(ctx, !p->reached &&
			    strstr(p->error, "no answer to the handshake within"
			    " 1s") != NULL, "rank %u: reached %d: '%s'", r,
			    p->reached, p->error);
		else
			RCHECK(ctx, p->reached, "rank %u unreached: %s", r,
			    p->error);
		RCHECK(ctx, (ctx->ring->links[r].fd >= 0) == (r != silent),
		    "link to %u: fd %d", r, ctx->ring->links[r].fd);
	}
	if (sr_allreduce(ctx->ring, &v, &v, 1, SR_F64, SR_SUM, &err) == 0)
		RCHECK(ctx, 0, "an allreduce ran without rank %u", silent);
	return 0;
}

static void
test_probe_one_silent(void)
{
	struct ranks_job job = { .world = 4, .probe_ms = 1000,
		.timeout_ms = 10000, .scenario = probe_one_silent,
		.hold_mask = 1u << 2, .deadline_ms = 30000 };
	static struct ranks r;

	if (ranks_open(&r, &job) != 0 || ranks_start(&r) != 0)
		return;
	ranks_wait_reports(&r, 0xb, r.deadline_ns);
	ranks_tell(&r, 2);
	ranks_finish(&r);
	ranks_check_clean(&r, 0xb, true);
}

int
main(void)
{
	TEST_RUN(test_mesh_every_world);
	TEST_RUN(test_mesh_rank_missing);
	TEST_RUN(test_mesh_rank_of_another_job);
	TEST_RUN(test_mesh_and_ring_refuse_each_other);
	TEST_RUN(test_mesh_key_differs);
	TEST_RUN(test_probe_all_reached);
	TEST_RUN(test_probe_one_silent);
	return TEST_DONE();
}
