#!/usr/bin/env bats
# Groups on a mesh as a user meets them: the script's group statements
# with exact results on every member and "skipped" on the others, their
# JSON records, members on different paths and of different lengths
# failing out of step with both frames named, the mesh required before
# any network activity; bench --group measuring a group (rank 0 printing
# its rows whether or not it is a member, busbw for the group's size), a
# wrong element on a member failing every rank, and its usage errors.
# The whole ring of 8 on a mesh too: a barrier against an allreduce, a
# member of another length by blocks (shared cores), and ranks that
# disagree on shared cores, all out of step with the rank named.
# Speeds are never asserted.

bats_require_minimum_version 1.5.0

load helpers

QUICK=(-n 2 -w 1 --min-time 0)

setup() {
	[ -x "$SR" ] || { echo "no binary at $SR: run make first" >&2; return 1; }
	command -v python3 >/dev/null || { echo "python3 is needed to parse JSON" >&2; return 1; }
}

# sr_launch N ARGS...: `launch -n N ARGS...` into out and err; LAUNCH_STATUS.
sr_launch() {
	local n=$1
	shift
	LAUNCH_STATUS=0
	timeout 120 "$SR" launch -n "$n" "$@" \
		>"$BATS_TEST_TMPDIR/out" 2>"$BATS_TEST_TMPDIR/err" </dev/null 3>&- ||
		LAUNCH_STATUS=$?
}

show() {
	echo "--- stdout" >&2
	cat "$BATS_TEST_TMPDIR/out" "$BATS_TEST_TMPDIR"/rank*.out >&2 2>/dev/null || true
	echo "--- stderr" >&2
	cat "$BATS_TEST_TMPDIR/err" "$BATS_TEST_TMPDIR"/rank*.err >&2 2>/dev/null || true
}

# by_hand N: ranks 0 to N-1 of a mesh, each running its own script
# $BATS_TEST_TMPDIR/script.R, started by hand from an address list;
# waits for them all and sets STATUS[R].
by_hand() {
	local n=$1 list=$BATS_TEST_TMPDIR/peers r pids=()
	for ((r = 0; r < n; r++)); do
		SILVIC_RING_SHARED_CORES=${SHARED_OF[r]:-${SILVIC_RING_SHARED_CORES:-}} \
			timeout 60 "$SR" run --mesh --script "$BATS_TEST_TMPDIR/script.$r" \
			--peers "$list" --rank "$r" --timeout 20 --host 127.0.0.1 \
			--address-file "$BATS_TEST_TMPDIR/addr.$r" \
			>"$BATS_TEST_TMPDIR/rank$r.out" 2>"$BATS_TEST_TMPDIR/rank$r.err" 3>&- &
		pids+=($!)
		BG_PIDS+=($!)
	done
	publish_ranks "$list" "$n"
	STATUS=()
	for ((r = 0; r < n; r++)); do
		STATUS[r]=0
		wait "${pids[$r]}" || STATUS[r]=$?
	done
}

GROUPS_SCRIPT='group 1 0,2        # ranks 0 and 2
group 2 3,1-2
group 1 allreduce sum i64 {rank} 10
expect 2 20
allreduce sum i64 1
group 2 allgather r{rank}
expect r3 r1 r2
group 2 broadcast 1 from-{rank}
expect from-1
group 1 barrier
group 2 allreduce max f64 {rank}*1.5 100000*{rank}
expect 4.5 100000*3
'

@test "script groups on a 4-rank mesh: exact results on the members, skipped on the others" {
	printf '%s' "$GROUPS_SCRIPT" >"$BATS_TEST_TMPDIR/job.txt"
	sr_launch 4 run --mesh --script "$BATS_TEST_TMPDIR/job.txt"
	[ "$LAUNCH_STATUS" -eq 0 ] || { show; false; }
	run python3 - "$BATS_TEST_TMPDIR/out" <<'PY'
import re, sys
got = {}
for line in open(sys.argv[1]).read().splitlines():
    m = re.match(r"^\[(\d)\] (line .*?)( \(\d+\.\d us\))?$", line)
    assert m, line
    got.setdefault(int(m.group(1)), []).append(m.group(2))
skip1 = ["line 3: group 1 allreduce sum i64 {rank} 10 = skipped (not in group 1)",
         "line 4: expect 2 20 = skipped (not in group 1)"]
skip2 = ["line 6: group 2 allgather r{rank} = skipped (not in group 2)",
         "line 7: expect r3 r1 r2 = skipped (not in group 2)",
         "line 8: group 2 broadcast 1 from-{rank} = skipped (not in group 2)",
         "line 9: expect from-1 = skipped (not in group 2)"]
in1 = ["line 3: group 1 allreduce sum i64 = 2 20", "line 4: expect = ok"]
in2 = ["line 6: group 2 allgather = [\"r3\", \"r1\", \"r2\"]", "line 7: expect = ok",
       "line 8: group 2 broadcast 1 = from-1", "line 9: expect = ok"]
big = ["line 11: group 2 allreduce max f64 = 100001 values, first 4.5, last 3, checksum ",
       "line 12: expect = ok"]
ring = ["line 5: allreduce sum i64 = 4"]
def want(rank, member1, member2, place1, place2):
    w = ["line 1: group 1 = 0,2 (%s)" % ("member %d of 2" % place1 if member1 else "not a member"),
         "line 2: group 2 = 3,1,2 (%s)" % ("member %d of 3" % place2 if member2 else "not a member")]
    w += in1 if member1 else skip1
    w += ring
    w += in2 if member2 else skip2
    w += ["line 10: group 1 barrier = ok" if member1 else
          "line 10: group 1 barrier = skipped (not in group 1)"]
    w += big if member2 else [
        "line 11: group 2 allreduce max f64 {rank}*1.5 100000*{rank} = skipped (not in group 2)",
        "line 12: expect 4.5 100000*3 = skipped (not in group 2)"]
    return w
wants = {0: want(0, True, False, 0, 0), 1: want(1, False, True, 0, 1),
         2: want(2, True, True, 1, 2), 3: want(3, False, True, 0, 0)}
for r in range(4):
    g = got.get(r, [])
    assert len(g) == len(wants[r]), (r, g)
    for a, b in zip(g, wants[r]):
        assert a.startswith(b) if b.endswith("checksum ") else a == b, (r, a, b)
PY
	[ "$status" -eq 0 ] || { echo "$output" >&2; show; false; }
}

@test "--json: a group's records carry its id, the definition its ranks and member, a skipped one its type" {
	printf '%s' "$GROUPS_SCRIPT" >"$BATS_TEST_TMPDIR/job.txt"
	sr_launch 4 run --mesh --json --script "$BATS_TEST_TMPDIR/job.txt"
	[ "$LAUNCH_STATUS" -eq 0 ] || { show; false; }
	run python3 - "$BATS_TEST_TMPDIR/out" <<'PY'
import json, sys
recs = [json.loads(l) for l in open(sys.argv[1])]
assert all(r["rank"] == 0 for r in recs), recs
by = {r["line"]: r for r in recs if "line" in r}
assert by[1]["op"] == "group" and by[1]["group"] == 1 and by[1]["ranks"] == [0, 2] and by[1]["member"] == 0, by[1]
assert by[2]["ranks"] == [3, 1, 2] and by[2]["member"] is None, by[2]
assert by[3]["type"] == "result" and by[3]["group"] == 1 and by[3]["result"] == [2, 20], by[3]
assert by[4] == {"type": "expect", "rank": 0, "line": 4, "ok": True}, by[4]
assert "group" not in by[5] and by[5]["result"] == [4], by[5]
assert by[6]["type"] == "skipped" and by[6]["group"] == 2 and by[6]["statement"] == "group 2 allgather r{rank}", by[6]
assert by[7]["type"] == "skipped" and by[7]["group"] == 2, by[7]
assert by[10]["type"] == "result" and by[10]["group"] == 1 and by[10]["op"] == "barrier", by[10]
assert recs[-1]["type"] == "summary" and recs[-1]["exit"] == 0, recs[-1]
PY
	[ "$status" -eq 0 ] || { echo "$output" >&2; show; false; }
}

@test "members on different paths fail out of step, naming the peer and both frames" {
	printf 'group 1 0-2\ngroup 1 allreduce sum f64 1 2\n' >"$BATS_TEST_TMPDIR/script.0"
	cp "$BATS_TEST_TMPDIR/script.0" "$BATS_TEST_TMPDIR/script.1"
	printf 'group 1 0-2\ngroup 1 allgather twelve chars\n' >"$BATS_TEST_TMPDIR/script.2"
	by_hand 3
	local r e
	for r in 0 1 2; do
		e=$BATS_TEST_TMPDIR/rank$r.err
		[ "${STATUS[r]}" -eq 5 ] || { echo "rank $r exited ${STATUS[r]}" >&2; show; false; }
		# Both frames: this member's and the other path's (a script's
		# allgather gathers the texts' lengths first, 8 bytes).
		grep -Eq "^silvic-ring: rank $r: .*script\.$r:2: (rank [0-2] reported: )?out of step: " "$e" || { show; false; }
		grep -q "allgather step 0 seq 1 group 1 of 8 bytes" "$e" || { show; false; }
		grep -Eq "allreduce sum f64 step [0-9]+ seq 1 group 1 of 16 bytes" "$e" || { show; false; }
	done
	# The peer named: rank 2 by ranks 0 and 1, one of them by rank 2.
	grep -Eq "(came|from) rank 2 \(127\.0\.0\.1:[0-9]+\)" "$BATS_TEST_TMPDIR/rank0.err" "$BATS_TEST_TMPDIR/rank1.err" ||
		grep -Eq "^silvic-ring: rank 2: .*:2: out of step: .* from rank [01] \(127\.0\.0\.1:[0-9]+\)" "$BATS_TEST_TMPDIR/rank2.err" ||
		{ show; false; }
}

@test "members reducing different lengths fail naming both lengths" {
	printf 'group 1 2,0,1\ngroup 1 allreduce sum f64 1\n' >"$BATS_TEST_TMPDIR/script.0"
	cp "$BATS_TEST_TMPDIR/script.0" "$BATS_TEST_TMPDIR/script.1"
	printf 'group 1 2,0,1\ngroup 1 allreduce sum f64 1 2\n' >"$BATS_TEST_TMPDIR/script.2"
	by_hand 3
	local r
	for r in 0 1 2; do
		[ "${STATUS[r]}" -eq 5 ] || { echo "rank $r exited ${STATUS[r]}" >&2; show; false; }
		grep -q "reductions of different lengths, .*bytes (.* f64) on this rank, .*bytes (.* f64) on rank" \
			"$BATS_TEST_TMPDIR/rank$r.err" || { show; false; }
		grep -q "8 bytes (1 f64)" "$BATS_TEST_TMPDIR/rank$r.err"
		grep -q "16 bytes (2 f64)" "$BATS_TEST_TMPDIR/rank$r.err"
	done
}

@test "a script with groups needs --mesh: refused before any network activity" {
	printf 'barrier\ngroup 4 0\n' >"$BATS_TEST_TMPDIR/job.txt"
	run timeout 20 "$SR" run --script "$BATS_TEST_TMPDIR/job.txt"
	[ "$status" -eq 2 ]
	[[ "$output" == *"run: $BATS_TEST_TMPDIR/job.txt:2: a group needs a mesh (a link between every pair of ranks): give every rank --mesh"* ]]
	[[ "$output" != *"line 1"* ]]
	printf 'group 4 0\ngroup 5 barrier\n' >"$BATS_TEST_TMPDIR/bad.txt"
	run timeout 20 "$SR" run --mesh --script "$BATS_TEST_TMPDIR/bad.txt"
	[ "$status" -eq 2 ]
	[[ "$output" == *"bad.txt:2:7: group 5 is not defined (a 'group 5 RANKS' line must come before) in 'group 5 barrier'"* ]]
}

# ------------------------------------------------------------------ bench

@test "bench --group: rank 0 prints the group's rows, busbw for its size, every check passes" {
	sr_launch 4 bench --mesh --group 3,1 allreduce -b 8 -e 256K -f 32 -d f64 -o all "${QUICK[@]}" --json
	[ "$LAUNCH_STATUS" -eq 0 ] || { show; false; }
	cp "$BATS_TEST_TMPDIR/out" "$BATS_TEST_TMPDIR/allreduce.json"
	sr_launch 4 bench --mesh --group 3,1 allgather -b 8 -e 64K -f 64 "${QUICK[@]}" --json
	[ "$LAUNCH_STATUS" -eq 0 ] || { show; false; }
	cp "$BATS_TEST_TMPDIR/out" "$BATS_TEST_TMPDIR/allgather.json"
	sr_launch 4 bench --mesh --group 3,1 broadcast -r 1 -b 8 -e 512K -f 256 "${QUICK[@]}" --json
	[ "$LAUNCH_STATUS" -eq 0 ] || { show; false; }
	run python3 - "$BATS_TEST_TMPDIR/allreduce.json" "$BATS_TEST_TMPDIR/allgather.json" "$BATS_TEST_TMPDIR/out" <<'PY'
import json, sys
factor = {"allreduce": 1.0, "allgather": 0.5, "broadcast": 1.0}  # n = 2
seen = set()
for path in sys.argv[1:]:
    recs = [json.loads(l) for l in open(path)]
    h = recs[0]
    assert h["type"] == "header" and h["world"] == 4 and h["group"] == [3, 1], h
    rows = [r for r in recs if r["type"] == "result"]
    assert rows, path
    for r in rows:
        seen.add((r["collective"], r["op"]))
        assert r["world"] == 4 and r["members"] == 2, r
        assert r["wrong"] == 0 and r["inplace_wrong"] == 0, r
        assert r["slowest_rank"] in (3, 1), r
        assert abs(r["busbw_gbps"] - r["algbw_gbps"] * factor[r["collective"]]) <= 1e-9 * max(1, r["algbw_gbps"]), r
        if r["collective"] == "broadcast":
            assert r["root"] == 1, r
    assert recs[-1]["type"] == "summary" and recs[-1]["check"] == "passed" and recs[-1]["exit"] == 0, recs[-1]
assert {("allreduce", o) for o in ("sum", "prod", "max", "min")} <= seen, seen
assert ("allgather", "none") in seen and ("broadcast", "none") in seen, seen
PY
	[ "$status" -eq 0 ] || { echo "$output" >&2; show; false; }
	# The sizes that take the group's ring: 256K of f64 on two members.
	grep -q '"collective":"allreduce","size":262144' "$BATS_TEST_TMPDIR/allreduce.json"
}

@test "bench --group: a wrong element on a member fails every rank's verdict, rank 0 outside the group too" {
	sr_launch 3 bench --mesh --group 2,1 -b 8 -e 64 -f 8 "${QUICK[@]}" --corrupt 1:1
	[ "$LAUNCH_STATUS" -eq 1 ] || { show; false; }
	grep -q "# group: ranks 2,1 (2 members; the others wait; busbw for 2)" "$BATS_TEST_TMPDIR/out"
	grep -q "# Out of bounds values : 2 FAILED" "$BATS_TEST_TMPDIR/out"
	grep -q "# check: FAILED" "$BATS_TEST_TMPDIR/out"
	grep -Eq '^\[1\] silvic-ring: rank 1: check failed: allreduce f32 sum of 8 B: element 1 is' "$BATS_TEST_TMPDIR/err" || { show; false; }
	grep -q "rank 0: check failed: 2 wrong element(s) in 2 row(s)" "$BATS_TEST_TMPDIR/err"
}

@test "bench --group usage errors name what is wrong" {
	run timeout 20 "$SR" bench --group 0,1
	[ "$status" -eq 2 ]
	[[ "$output" == *"bench: --group needs a mesh (a link between every pair of ranks): give every rank --mesh"* ]]
	run timeout 20 "$SR" bench --mesh --group 0,1 links
	[ "$status" -eq 2 ]
	[[ "$output" == *"bench: --group runs allreduce, allgather or broadcast on its ranks; the link test (links, or all) measures the ring's links: run it without --group"* ]]
	run timeout 20 "$SR" bench --mesh --group 0,1 -r 2 broadcast
	[ "$status" -eq 2 ]
	[[ "$output" == *"bench: --root 2 is not in --group (0,1)"* ]]
	run timeout 20 "$SR" bench --mesh --group 1,0-2
	[ "$status" -eq 2 ]
	[[ "$output" == *"bench: --group '1,0-2': rank 1 is listed twice"* ]]
	sr_launch 2 bench --mesh --group 0,5 -e 64 "${QUICK[@]}"
	[ "$LAUNCH_STATUS" -eq 2 ] || { show; false; }
	grep -q "bench: --group: rank 5 is out of range for a world of 2" "$BATS_TEST_TMPDIR/err"
}

@test "on a mesh of 8, a rank in an allreduce where the others are in a barrier: every rank out of step, rank 3 named" {
	# 8 ranks on a mesh take recursive doubling for the barrier; rank 3
	# and its first partner, rank 2, disagree at their first frame.
	local r e line
	for r in 0 1 2 3 4 5 6 7; do
		printf 'barrier\nbarrier\n' >"$BATS_TEST_TMPDIR/script.$r"
	done
	printf 'barrier\nallreduce sum i64 1\n' >"$BATS_TEST_TMPDIR/script.3"
	by_hand 8
	for r in 0 1 2 3 4 5 6 7; do
		e=$BATS_TEST_TMPDIR/rank$r.err
		[ "${STATUS[r]}" -eq 5 ] || { echo "rank $r exited ${STATUS[r]}" >&2; show; false; }
		# Ranks 2 and 3 fail at line 2; a rank still in the first
		# barrier when the abort comes fails there.
		line='[12]'
		[ "$r" -ne 2 ] && [ "$r" -ne 3 ] || line=2
		grep -Eq "^silvic-ring: rank $r: .*script\.$r:$line: (rank [23] reported: )?out of step: " "$e" || { show; false; }
		grep -Eq "barrier step [0-9]+ seq 2 of 0 bytes" "$e" || { show; false; }
		grep -Eq "allreduce sum i64 step [0-9]+ seq 2 of 8 bytes" "$e" || { show; false; }
		# Rank 3 named: by rank 2 as the sender, or reporting rank 2.
		grep -Eq "rank 2 reported: .*from rank 3 \(127\.0\.0\.1:[0-9]+\)|rank 3 reported: .*from rank 2 \(127\.0\.0\.1:[0-9]+\)|^silvic-ring: rank [23]: [^ ]+ out of step: .*from rank [23] \(" "$e" ||
			{ show; false; }
	done
}


@test "on a mesh of 8 on shared cores, a member of another length is named with both lengths by its block's leader, on every rank" {
	# 8 ranks on shared cores reduce small inputs by blocks: ranks 0-2
	# send theirs to rank 3, which compares the lengths.
	local r e
	for r in 0 1 2 3 4 5 6 7; do
		printf 'allreduce sum f64 1\n' >"$BATS_TEST_TMPDIR/script.$r"
	done
	printf 'allreduce sum f64 1 2\n' >"$BATS_TEST_TMPDIR/script.1"
	SILVIC_RING_SHARED_CORES=yes by_hand 8
	for r in 0 1 2 3 4 5 6 7; do
		e=$BATS_TEST_TMPDIR/rank$r.err
		[ "${STATUS[r]}" -eq 5 ] || { echo "rank $r exited ${STATUS[r]}" >&2; show; false; }
		grep -Eq "^silvic-ring: rank $r: .*script\.$r:1: (rank 3 reported: )?out of step: reductions of different lengths, 8 bytes \(1 f64\) on this rank, 16 bytes \(2 f64\) on rank 1 \(127\.0\.0\.1:[0-9]+\)" "$e" ||
			{ show; false; }
	done
}


@test "ranks of a mesh of 8 that disagree on shared cores fail out of step at their first small allreduce, naming a rank of the other path" {
	# Blocks on one side, doubling on the other: a doubling rank's first
	# partner is a ring neighbour, which every transfer watches.
	local r e run
	for r in 0 1 2 3 4 5 6 7; do
		printf 'allreduce sum f64 1\nexpect 8\n' >"$BATS_TEST_TMPDIR/script.$r"
	done
	for run in no yes; do
		SHARED_OF=(yes yes yes yes yes yes yes yes)
		[ "$run" = no ] || SHARED_OF=(no no no no no no no no)
		SHARED_OF[5]=$run
		by_hand 8
		for r in 0 1 2 3 4 5 6 7; do
			e=$BATS_TEST_TMPDIR/rank$r.err
			[ "${STATUS[r]}" -eq 5 ] || { echo "rank 5 $run: rank $r exited ${STATUS[r]}" >&2; show; false; }
			grep -Eq "^silvic-ring: rank $r: .*script\.$r:1: (rank [0-7] reported: )?out of step: (an unexpected frame \(allreduce sum f64 step [0-9]+ seq 1 of 8 bytes\) came|expected allreduce sum f64 step [0-9]+ seq 1 of 8 bytes, got allreduce sum f64 step [0-9]+ seq 1 of 8 bytes) from rank [0-7] \(127\.0\.0\.1:[0-9]+\)" "$e" ||
				{ echo "rank 5 $run" >&2; show; false; }
		done
	done
}
