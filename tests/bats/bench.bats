#!/usr/bin/env bats
# silvic-ring bench as a user meets it: usage errors naming the bad value,
# nccl-tests' table, JSON lines and CSV that parse, the exact check on
# every op x dtype for worlds of 1 to 4, a corrupted element caught and
# named, --min-busbw's exit status, ranks started by hand from an address
# list, and the link test naming a rate-limited link between network
# namespaces.  Speeds are never asserted: only what is printed and the
# exit status.

bats_require_minimum_version 1.5.0

load helpers

NETNS=$BATS_TEST_DIRNAME/../../scripts/netns-hosts
# Quick sweeps: no adaptive iterations, few of them.
QUICK=(-n 2 -w 1 --min-time 0)

setup() {
	[ -x "$SR" ] || { echo "no binary at $SR: run make first" >&2; return 1; }
	command -v python3 >/dev/null || { echo "python3 is needed to parse JSON" >&2; return 1; }
}

# check_json FILE: every line is one JSON object with no NaN or infinity,
# the first a header, the last a summary; prints "KIND N" for each record
# type, then the summary's check and exit.
check_json() {
	python3 - "$1" <<'PY'
import collections, json, sys

def finite_only(name):
    raise ValueError("non-finite number " + name)

lines = open(sys.argv[1]).read().splitlines()
assert lines, "no output"
records = [json.loads(l, parse_constant=finite_only) for l in lines]
assert all(isinstance(r, dict) for r in records)
assert records[0]["type"] == "header", records[0]
assert records[-1]["type"] == "summary", records[-1]
h = records[0]
assert h["schema"] == 1 and isinstance(h["world"], int)
assert len(h["hosts"]) == h["world"]
fields = ["collective", "size", "count", "dtype", "op", "world", "iters",
          "time_us", "algbw_gbps", "busbw_gbps", "wrong", "slowest_rank",
          "spread_pct"]
for r in records:
    if r["type"] == "result":
        missing = [f for f in fields if f not in r]
        assert not missing, missing
        assert r["world"] == h["world"] and r["schema"] == 1
        assert 0 <= r["slowest_rank"] < r["world"]
        assert r["iters"] >= 1 and r["time_us"] >= 0
    if r["type"] == "link":
        for f in ("from", "from_address", "to", "to_address", "gbps_alone",
                  "gbps_ring", "latency_us", "slow"):
            assert f in r, f
        assert r["to"] == (r["from"] + 1) % h["world"]
        assert r["from_address"] == h["hosts"][r["from"]]
counts = collections.Counter(r["type"] for r in records)
for kind in sorted(counts):
    print(kind, counts[kind])
print("check", records[-1]["check"])
print("exit", records[-1]["exit"])
PY
}

# bench_launch N ARGS...: `launch -n N bench ARGS...` into out and err.
bench_launch() {
	local n=$1
	shift
	BENCH_STATUS=0
	timeout 120 "$SR" launch -n "$n" bench "$@" \
		>"$BATS_TEST_TMPDIR/out" 2>"$BATS_TEST_TMPDIR/err" </dev/null 3>&- ||
		BENCH_STATUS=$?
}

# refute CMD...: fails when CMD succeeds (a bare `! cmd` cannot fail a
# bats test).
refute() {
	if "$@"; then
		echo "unexpectedly true: $*" >&2
		return 1
	fi
}

show() {
	echo "--- stdout" >&2
	cat "$BATS_TEST_TMPDIR/out" >&2
	echo "--- stderr" >&2
	cat "$BATS_TEST_TMPDIR/err" >&2
}

# ------------------------------------------------------------ usage

@test "bench --help lists the nccl-tests options" {
	run timeout 10 "$SR" bench --help
	[ "$status" -eq 0 ]
	for opt in --minbytes --maxbytes --stepfactor --stepbytes --iters \
		--warmup_iters --check --datatype --op --json --csv --min-busbw \
		--seed --threshold --fail-slow --min-time --peers --rank --root; do
		[[ "$output" == *"$opt"* ]] || { echo "no $opt" >&2; false; }
	done
	[[ "$output" == *"f32 (the default"* ]]
	# the test hook is not the user's (it still works: see --corrupt below)
	[[ "$output" != *"--corrupt"* ]]
}

@test "a bad size is a usage error naming the option and value" {
	run timeout 10 "$SR" bench -b 12X
	[ "$status" -eq 2 ]
	[[ "$output" == *"--minbytes '12X' is not a size"* ]]
	[[ "$output" == *"try 'silvic-ring --help'"* ]]
	run timeout 10 "$SR" bench --maxbytes 0
	[ "$status" -eq 2 ]
	[[ "$output" == *"--maxbytes '0' is not a size"* ]]
	run timeout 10 "$SR" bench -i 1Q
	[ "$status" -eq 2 ]
	[[ "$output" == *"--stepbytes '1Q'"* ]]
}

@test "a bad datatype or op is a usage error naming the value" {
	run timeout 10 "$SR" bench -d f16
	[ "$status" -eq 2 ]
	[[ "$output" == *"--datatype 'f16' is not a datatype (f64, f32, i64, i32 or all)"* ]]
	run timeout 10 "$SR" bench --op avg
	[ "$status" -eq 2 ]
	[[ "$output" == *"--op 'avg' is not an op (sum, prod, max, min or all)"* ]]
}

@test "other usage errors name what is wrong" {
	run timeout 10 "$SR" bench reduce
	[ "$status" -eq 2 ]
	[[ "$output" == *"'reduce' is not a benchmark"* ]]
	run timeout 10 "$SR" bench -b 1M -e 1K
	[ "$status" -eq 2 ]
	[[ "$output" == *"--minbytes 1M is larger than --maxbytes 1K"* ]]
	run timeout 10 "$SR" bench -f 4 -i 1K
	[ "$status" -eq 2 ]
	[[ "$output" == *"--stepfactor and --stepbytes cannot be used together"* ]]
	run timeout 10 "$SR" bench -n
	[ "$status" -eq 2 ]
	[[ "$output" == *"-n needs a value"* ]]
	run timeout 10 "$SR" bench --frobnicate
	[ "$status" -eq 2 ]
	[[ "$output" == *"unknown option '--frobnicate'"* ]]
	run timeout 10 "$SR" bench --json --csv
	[ "$status" -eq 2 ]
	[[ "$output" == *"--json and --csv cannot be used together"* ]]
	run timeout 10 "$SR" bench -c 0 --corrupt 0:0
	[ "$status" -eq 2 ]
	[[ "$output" == *"--corrupt needs the check"* ]]
	run timeout 10 "$SR" bench --min-busbw fast
	[ "$status" -eq 2 ]
	[[ "$output" == *"--min-busbw 'fast'"* ]]
	run timeout 10 "$SR" bench --world 1 --corrupt 3:0
	[ "$status" -eq 2 ]
	[[ "$output" == *"--corrupt rank 3 is out of range for a world of 1"* ]]
}

# ------------------------------------------------------------ output

@test "a world of one prints nccl-tests' table, footer and verdict" {
	run timeout 60 "$SR" bench --world 1 -b 8 -e 1K -f 4 "${QUICK[@]}"
	[ "$status" -eq 0 ]
	[[ "$output" == *"# silvic-ring "*" bench: world 1"* ]]
	[[ "$output" == *"# options: allreduce -b 8 -e 1K -f 4 -n 2 -w 1 -c 1 -d f32 -o sum"* ]]
	echo "$output" | grep -Eq '^#\s+out-of-place\s+in-place$'
	echo "$output" | grep -Eq '^#\s+size\s+count\s+type\s+redop\s+root\s+iters\s+time\s+algbw\s+busbw\s+#wrong\s+time\s+algbw\s+busbw\s+#wrong\s+slowest\s+spread$'
	echo "$output" | grep -Eq '^#\s+\(B\)\s+\(elements\)\s+\(us\)\s+\(GB/s\)\s+\(GB/s\)\s+\(us\)\s+\(GB/s\)\s+\(GB/s\)\s+\(rank\)\s+\(%\)$'
	# 8, 32, 128, 512 bytes of f32; busbw is 0 for a world of one
	[ "$(echo "$output" | grep -Ec '^ +[0-9]+ +[0-9]+ +f32 +sum +-1 +2 ')" -eq 4 ]
	echo "$output" | grep -Eq '^ +512 +128 +f32 +sum +-1 +2 +[0-9.]+ +[0-9.]+ +0\.00 +0 +[0-9.]+ +[0-9.]+ +0\.00 +0 +0 '
	[[ "$output" == *"# Avg bus bandwidth    : 0 GB/s"* ]]
	[[ "$output" == *"# Out of bounds values : 0 OK"* ]]
	[[ "$output" == *"# check: passed"* ]]
}

@test "--json: every line parses, a header, a result per row, a summary" {
	bench_launch 2 allreduce -b 8 -e 64K -f 8 "${QUICK[@]}" --json
	[ "$BENCH_STATUS" -eq 0 ] || { show; false; }
	run check_json "$BATS_TEST_TMPDIR/out"
	[ "$status" -eq 0 ] || { echo "$output" >&2; show; false; }
	# 8, 64, 512, 4K, 32K
	[[ "$output" == *"result 5"* ]]
	[[ "$output" == *"check passed"* ]]
	[[ "$output" == *"exit 0"* ]]
	grep -q '"hosts":\["127.0.0.1:[0-9]*","127.0.0.1:[0-9]*"\]' "$BATS_TEST_TMPDIR/out"
	# the options, never the environment
	refute grep -q 'SILVIC_RING' "$BATS_TEST_TMPDIR/out"
}

@test "--csv: a header and one line per row, same column count" {
	bench_launch 3 allgather -b 64 -e 4K -f 4 "${QUICK[@]}" --csv
	[ "$BENCH_STATUS" -eq 0 ] || { show; false; }
	sed 's/^\[0\] //' "$BATS_TEST_TMPDIR/out" >"$BATS_TEST_TMPDIR/csv"
	run python3 - "$BATS_TEST_TMPDIR/csv" <<'PY'
import csv, sys
rows = list(csv.reader(open(sys.argv[1])))
assert rows[0] == ["collective", "size", "count", "dtype", "op", "world",
                   "iters", "time_us", "algbw_gbps", "busbw_gbps", "wrong",
                   "slowest_rank", "spread_pct", "root", "inplace_time_us",
                   "inplace_algbw_gbps", "inplace_busbw_gbps",
                   "inplace_wrong"], rows[0]
assert all(len(r) == len(rows[0]) for r in rows), rows
for r in rows[1:]:
    assert r[0] == "allgather" and r[4] == "none" and r[5] == "3", r
    # allgather's size is everything gathered: count per rank x 4 B x 3
    assert int(r[1]) == int(r[2]) * 4 * 3, r
    assert int(r[10]) == 0 and int(r[17]) == 0 and r[13] == ""
print(len(rows) - 1)
PY
	[ "$status" -eq 0 ] || { echo "$output" >&2; show; false; }
	# 64 (60 gathered), 256 (252), 1K (1020), 4K (4092)
	[ "$output" = 4 ]
}

@test "only rank 0 prints; ranks started by hand from an address list" {
	local list=$BATS_TEST_TMPDIR/peers r pids=()
	for r in 0 1; do
		timeout 60 "$SR" bench -b 8 -e 1K -f 8 "${QUICK[@]}" --peers "$list" \
			--rank "$r" --timeout 30 --host 127.0.0.1 \
			--address-file "$BATS_TEST_TMPDIR/addr.$r" >"$BATS_TEST_TMPDIR/rank$r.out" \
			2>"$BATS_TEST_TMPDIR/rank$r.err" 3>&- &
		pids+=($!)
		BG_PIDS+=($!)
	done
	publish_list "$list" "$(rank_address 0)" "$(rank_address 1)"
	for r in 0 1; do
		wait "${pids[$r]}" || { cat "$BATS_TEST_TMPDIR"/rank*.err >&2; false; }
	done
	grep -q "bench: world 2" "$BATS_TEST_TMPDIR/rank0.out"
	grep -q "#   rank 1: $(sed -n 2p "$list")" "$BATS_TEST_TMPDIR/rank0.out"
	grep -q "# check: passed" "$BATS_TEST_TMPDIR/rank0.out"
	[ ! -s "$BATS_TEST_TMPDIR/rank1.out" ]
}

@test "--tcp-congestion: the links run it, the header and -v say so; a bad name is a usage error" {
	local sys want
	run timeout 60 "$SR" launch -n 2 bench -b 8 -e 1K -f 8 "${QUICK[@]}" \
		--tcp-congestion reno -v
	[ "$status" -eq 0 ] || { echo "$output" >&2; false; }
	[[ "$output" == *"[0] silvic-ring: rank 0: links run TCP congestion control reno (--tcp-congestion reno)"* ]]
	[[ "$output" == *"[1] silvic-ring: rank 1: links run TCP congestion control reno (--tcp-congestion reno)"* ]]
	[[ "$output" == *$'\n'"# links: TCP, congestion control reno (rank 0's)"* ]]
	# auto, the default: reno instead of bbr, else the system's own
	sys=$(cat /proc/sys/net/ipv4/tcp_congestion_control)
	want=$sys
	[[ "$sys" == bbr* ]] && want=reno
	run timeout 60 "$SR" launch -n 2 bench -b 8 -e 8 "${QUICK[@]}" --json
	[ "$status" -eq 0 ] || { echo "$output" >&2; false; }
	[[ "$output" == *'"tcp_congestion":"'"$want"'"'* ]]
	run timeout 30 "$SR" bench --tcp-congestion no-such-cc
	[ "$status" -eq 2 ]
	[[ "$output" == *"--tcp-congestion: the kernel has no TCP congestion control 'no-such-cc' (it offers: "*reno* ]]
	run timeout 30 env SILVIC_RING_RANK=0 SILVIC_RING_WORLD=1 "$SR" run --tcp-congestion system --dry-run </dev/null
	[ "$status" -eq 0 ] || { echo "$output" >&2; false; }
	[[ "$output" == *"tcp congestion control: system"* ]]
}

@test "ranks given different bench options refuse to run" {
	local list=$BATS_TEST_TMPDIR/peers pids=() st0=0 st1=0
	timeout 60 "$SR" bench -e 1K "${QUICK[@]}" --peers "$list" --rank 0 \
		--timeout 30 --host 127.0.0.1 --address-file "$BATS_TEST_TMPDIR/addr.0" \
		>/dev/null 2>"$BATS_TEST_TMPDIR/rank0.err" 3>&- &
	pids+=($!)
	timeout 60 "$SR" bench -e 2K "${QUICK[@]}" --peers "$list" --rank 1 \
		--timeout 30 --host 127.0.0.1 --address-file "$BATS_TEST_TMPDIR/addr.1" \
		>/dev/null 2>"$BATS_TEST_TMPDIR/rank1.err" 3>&- &
	pids+=($!)
	BG_PIDS+=("${pids[@]}")
	publish_list "$list" "$(rank_address 0)" "$(rank_address 1)"
	wait "${pids[0]}" || st0=$?
	wait "${pids[1]}" || st1=$?
	[ "$st0" -eq 2 ] && [ "$st1" -eq 2 ]
	grep -q "rank 0: the ranks were given different bench options" "$BATS_TEST_TMPDIR/rank0.err"
	grep -q "rank 1: the ranks were given different bench options" "$BATS_TEST_TMPDIR/rank1.err"
}

# ------------------------------------------------------------ the check

@test "the check passes for every op x dtype on worlds of 1 to 4" {
	local w
	for w in 1 2 3 4; do
		bench_launch "$w" all -b 8 -e 8K -f 8 -d all -o all "${QUICK[@]}" --json
		[ "$BENCH_STATUS" -eq 0 ] || { show; false; }
		run python3 - "$BATS_TEST_TMPDIR/out" "$w" <<'PY'
import json, sys
records = [json.loads(l) for l in open(sys.argv[1])]
world = int(sys.argv[2])
results = [r for r in records if r["type"] == "result"]
combos = {(r["collective"], r["dtype"], r["op"]) for r in results}
want = {("allreduce", d, o) for d in ("f64", "f32", "i64", "i32")
        for o in ("sum", "prod", "max", "min")}
want |= {(c, d, "none") for c in ("allgather", "broadcast")
         for d in ("f64", "f32", "i64", "i32")}
assert combos == want, sorted(want - combos)
assert all(r["wrong"] == 0 and r["inplace_wrong"] == 0 for r in results)
assert all(r["world"] == world for r in results)
links = [r for r in records if r["type"] == "link"]
assert len(links) == (world if world > 1 else 0), links
assert records[-1]["check"] == "passed" and records[-1]["wrong"] == 0
PY
		[ "$status" -eq 0 ] || { echo "world $w: $output" >&2; show; false; }
	done
}

@test "--corrupt: the wrong element is counted, named, and exits 1" {
	bench_launch 3 -b 8 -e 64 -f 8 "${QUICK[@]}" --corrupt 2:1
	[ "$BENCH_STATUS" -eq 1 ] || { show; false; }
	# both rows (8 and 64 bytes) have one wrong element
	[ "$(grep -Ec '^ +[0-9]+ +[0-9]+ +f32 +sum +-1 +2 +[0-9.]+ +[0-9.]+ +[0-9.]+ +1 +[0-9.]+ +[0-9.]+ +[0-9.]+ +0 +[0-2] +[0-9.]+$' "$BATS_TEST_TMPDIR/out")" -eq 2 ] || { show; false; }
	grep -q "# Out of bounds values : 2 FAILED" "$BATS_TEST_TMPDIR/out"
	grep -q "# check: FAILED" "$BATS_TEST_TMPDIR/out"
	grep -Eq '^\[2\] silvic-ring: rank 2: check failed: allreduce f32 sum of 8 B: element 1 is -?[0-9.e+]+, expected -?[0-9]+ \(1 wrong on this rank\)$' "$BATS_TEST_TMPDIR/err" || { show; false; }
	grep -q "rank 0: check failed: 2 wrong element(s) in 2 row(s)" "$BATS_TEST_TMPDIR/err"
	# the others had nothing wrong to report
	refute grep -q "rank 1: check failed" "$BATS_TEST_TMPDIR/err"
}

@test "--corrupt on allgather and broadcast: the byte is named, JSON counts it" {
	bench_launch 2 allgather -b 64 -e 64 -d i64 "${QUICK[@]}" --corrupt 1:5 --json
	[ "$BENCH_STATUS" -eq 1 ] || { show; false; }
	grep -q '"type":"result".*"wrong":1,' "$BATS_TEST_TMPDIR/out"
	grep -q '"check":"failed"' "$BATS_TEST_TMPDIR/out"
	grep -Eq 'rank 1: check failed: allgather i64 of 64 B: element 5 \(byte 4[0-7]\) is 0x[0-9a-f]{2}, expected 0x[0-9a-f]{2}' "$BATS_TEST_TMPDIR/err" || { show; false; }
	bench_launch 3 broadcast -b 1K -e 1K "${QUICK[@]}" --corrupt 0:255
	[ "$BENCH_STATUS" -eq 1 ] || { show; false; }
	grep -Eq 'rank 0: check failed: broadcast f32 of 1024 B: element 255 \(byte 10(20|21|22|23)\)' "$BATS_TEST_TMPDIR/err" || { show; false; }
}

# ------------------------------------------------------------ thresholds

@test "--min-busbw trips with exit 6 and names the sizes that fell short" {
	bench_launch 2 -b 1K -e 4K "${QUICK[@]}" --min-busbw 1000000@2K
	[ "$BENCH_STATUS" -eq 6 ] || { show; false; }
	grep -q "rank 0: busbw below --min-busbw 1000000 GB/s: allreduce f32 sum at 2K (.* GB/s), allreduce f32 sum at 4K (" "$BATS_TEST_TMPDIR/err" || { show; false; }
	refute grep -q "at 1K" "$BATS_TEST_TMPDIR/err"
	grep -q "# below --min-busbw 1000000 GB/s: 2 row(s)" "$BATS_TEST_TMPDIR/out"
	# without @SIZE: the largest size only
	bench_launch 2 -b 1K -e 4K "${QUICK[@]}" --min-busbw 1000000 --json
	[ "$BENCH_STATUS" -eq 6 ] || { show; false; }
	grep -q 'busbw below --min-busbw 1000000 GB/s: allreduce f32 sum at 4K (' "$BATS_TEST_TMPDIR/err"
	refute grep -q "at 2K" "$BATS_TEST_TMPDIR/err"
	grep -q '"threshold":{"min_busbw_gbps":1000000,"size":4096,"passed":false,"below":\[{"collective":"allreduce","size":4096,' "$BATS_TEST_TMPDIR/out"
	grep -q '"exit":6}$' "$BATS_TEST_TMPDIR/out"
}

@test "--min-busbw that every row meets passes; a failed check outranks it" {
	bench_launch 2 -b 1K -e 4K "${QUICK[@]}" --min-busbw 0.000000001@1K
	[ "$BENCH_STATUS" -eq 0 ] || { show; false; }
	bench_launch 2 -b 1K -e 4K "${QUICK[@]}" --min-busbw 1000000 --corrupt 1:0
	[ "$BENCH_STATUS" -eq 1 ] || { show; false; }
}

# ------------------------------------------------------------ links

@test "bench links on loopback: one row per link, JSON per link" {
	bench_launch 3 links -e 64K -n 2 --json
	[ "$BENCH_STATUS" -eq 0 ] || { show; false; }
	run check_json "$BATS_TEST_TMPDIR/out"
	[ "$status" -eq 0 ] || { echo "$output" >&2; show; false; }
	[[ "$output" == *"link 3"* ]]
	[[ "$output" != *"result"* ]]
	grep -q '"links":{"median_gbps":' "$BATS_TEST_TMPDIR/out"
	bench_launch 1 links
	[ "$BENCH_STATUS" -eq 0 ] || { show; false; }
	grep -q "a world of one has no links" "$BATS_TEST_TMPDIR/out"
}

# The netns test body: four ranks, one a namespace, host 2's egress
# limited to 10 Mbit/s, so the link from rank 1 to rank 2 is slow.
write_netns_job() {
	cat >"$BATS_TEST_TMPDIR/job" <<'EOF'
set -u
sr=$1 netns=$2 dir=$3
shift 3
for i in 1 2 3 4; do
	eval "echo \$IP_$i:$((47000 + i - 1))"
done >"$dir/peers"
"$netns" rate "$NS_2" 10 || exit 90
pids=()
for i in 1 2 3 4; do
	eval "ns=\$NS_$i"
	ip netns exec "$ns" timeout 100 "$sr" bench links --peers "$dir/peers" \
		--rank $((i - 1)) --timeout 60 "$@" \
		>"$dir/links$i.out" 2>"$dir/links$i.err" </dev/null 3>&- &
	pids+=($!)
done
status=0
for i in 0 1 2 3; do
	wait "${pids[$i]}" || { s=$?; [ "$status" -eq 0 ] && status=$s; }
done
cp "$dir/peers" "$dir/peers.used"
# never 77: that status means the namespaces could not be made
[ "$status" -eq 77 ] && status=91
exit "$status"
EOF
}

netns_links() {
	write_netns_job
	NETNS_STATUS=0
	timeout 150 "$NETNS" run 4 -- bash "$BATS_TEST_TMPDIR/job" "$SR" "$NETNS" \
		"$BATS_TEST_TMPDIR" "$@" >"$BATS_TEST_TMPDIR/netns.out" \
		2>"$BATS_TEST_TMPDIR/netns.err" 3>&- || NETNS_STATUS=$?
	if [ "$NETNS_STATUS" -eq 77 ]; then
		skip "network namespaces are not available: $(cat "$BATS_TEST_TMPDIR/netns.err")"
	fi
}

show_links() {
	cat "$BATS_TEST_TMPDIR/netns.err" "$BATS_TEST_TMPDIR"/links*.out "$BATS_TEST_TMPDIR"/links*.err >&2
}

@test "bench links between network namespaces names the rate-limited link" {
	# The limited link is 1000x slower; a 30x threshold keeps the noise of
	# the other three (a busy machine's, too) from counting, and 4 MiB
	# transfers are long beside a time slice.  The limited link moves
	# the 1 MiB probe's size (the sizing of the JSON test below).
	netns_links -e 4M --threshold 0.03
	[ "$NETNS_STATUS" -eq 0 ] || { show_links; false; }
	local from to out=$BATS_TEST_TMPDIR/links1.out
	from=$(sed -n 2p "$BATS_TEST_TMPDIR/peers.used")
	to=$(sed -n 3p "$BATS_TEST_TMPDIR/peers.used")
	grep -q "^# slow link: rank 1 ($from) -> rank 2 ($to): " "$out" || { show_links; false; }
	[ "$(grep -c '^# slow link:' "$out")" -eq 1 ] || { show_links; false; }
	grep -q "^# slowest link: rank 1 ($from) -> rank 2 ($to): " "$out"
	grep -Eq "^ +1 +${from//./\\.} +2 +${to//./\\.} +1048576 +[0-9.]+ +[0-9.]+ +[0-9.]+  slow$" "$out" || { show_links; false; }
	# only rank 0 prints
	for i in 2 3 4; do
		[ ! -s "$BATS_TEST_TMPDIR/links$i.out" ]
	done
}

@test "bench links --fail-slow exits 6; JSON marks only that link slow, measured with less" {
	# 30x, as for the table: only the limited link may count as slow
	netns_links --json --fail-slow --threshold 0.03
	[ "$NETNS_STATUS" -eq 6 ] || { show_links; false; }
	run python3 - "$BATS_TEST_TMPDIR/links1.out" <<'PY'
import json, sys
records = [json.loads(l) for l in open(sys.argv[1])]
links = {r["from"]: r for r in records if r["type"] == "link"}
assert sorted(links) == [0, 1, 2, 3], links
assert [f for f in links if links[f]["slow"]] == [1], links
# 10 Mbit/s is 0.00125 GB/s; the others are far faster
assert links[1]["gbps_alone"] < 0.002, links[1]
# 64 MiB would take a minute at 10 Mbit/s: the slow link moves less.
# Its 1 MiB probe takes 0.84 s, more than the 0.5 s a transfer is sized
# for, so it moves the probe's size on any machine (load only slows it).
assert links[1]["bytes"] == 1 << 20, links[1]
# The others move up to 64 MiB (all of it unless a busy machine slowed
# their probe), never less than the probe, in whole pages.
for f in (0, 2, 3):
    b = links[f]["bytes"]
    assert 1 << 20 <= b <= 64 << 20 and b % 4096 == 0, links[f]
# All at once runs the smallest size.
assert all(r["ring_bytes"] == 1 << 20 for r in links.values()), links
s = records[-1]
assert s["type"] == "summary" and s["links"]["slow"] == [1], s
assert s["links"]["slowest"] == 1 and s["exit"] == 6, s
PY
	[ "$status" -eq 0 ] || { echo "$output" >&2; show_links; false; }
	grep -q "rank 0: 1 slow link(s) (--fail-slow)" "$BATS_TEST_TMPDIR/links1.err"
}

# ------------------------------------------------ gates that test something

@test "--min-busbw at a size outside the sweep is a usage error naming it and the range" {
	run timeout 10 "$SR" bench --min-busbw 5@16M -e 1M
	[ "$status" -eq 2 ]
	[[ "$output" == *"bench: --min-busbw 5@16M: 16M is outside the sweep (8 to 1M), so no row would be checked"* ]]
	[[ "$output" == *"try 'silvic-ring --help'"* ]]
	run timeout 10 "$SR" bench -b 1K -e 4K --min-busbw 5@512
	[ "$status" -eq 2 ]
	[[ "$output" == *"--min-busbw 5@512: 512 is outside the sweep (1K to 4K)"* ]]
	# the sweep's range is its last step, not -e: 8 x 4^k stops at 512
	run timeout 10 "$SR" bench -b 8 -e 1000 -f 4 --min-busbw 5@1000
	[ "$status" -eq 2 ]
	[[ "$output" == *"1000 is outside the sweep (8 to 512)"* ]]
	run timeout 10 "$SR" bench links --min-busbw 5
	[ "$status" -eq 2 ]
	[[ "$output" == *"--min-busbw needs a sweep (allreduce, allgather, broadcast or all) to check; for links use --fail-slow"* ]]
}

@test "a passing --min-busbw says which rows it checked, their lowest busbw, the threshold" {
	bench_launch 2 -b 1K -e 4K "${QUICK[@]}" --min-busbw 0.000000001@2K
	[ "$BENCH_STATUS" -eq 0 ] || { show; false; }
	grep -Eq '^(\[0\] )?# --min-busbw 1e-09 GB/s: 2 row\(s\) of 2K to 4K checked, lowest busbw [0-9.]+ GB/s \(allreduce f32 sum at (2K|4K)\): passed$' "$BATS_TEST_TMPDIR/out" || { show; false; }
	bench_launch 2 -b 1K -e 4K "${QUICK[@]}" --min-busbw 0.000000001@2K --json
	[ "$BENCH_STATUS" -eq 0 ] || { show; false; }
	run python3 - "$BATS_TEST_TMPDIR/out" <<'PY'
import json, sys
records = [json.loads(l.split("] ", 1)[1] if l.startswith("[") else l)
           for l in open(sys.argv[1])]
rows = {r["size"]: min(r["busbw_gbps"], r["inplace_busbw_gbps"])
        for r in records if r["type"] == "result"}
t = records[-1]["threshold"]
assert t["passed"] is True and t["min_busbw_gbps"] == 1e-09 and t["size"] == 2048, t
assert t["checked_rows"] == 2 and t["checked_sizes"] == [2048, 4096], t
assert t["lowest"]["size"] in (2048, 4096), t
assert t["lowest"]["busbw_gbps"] == min(rows[2048], rows[4096]), (t, rows)
PY
	[ "$status" -eq 0 ] || { echo "$output" >&2; show; false; }
}

@test "--min-busbw whose rows were all left out checked nothing: exit 2, not a pass" {
	# 8 B of f64 over 4 ranks is no element per rank: no allgather row
	bench_launch 4 allgather -b 8 -e 8 -d f64 "${QUICK[@]}" --min-busbw 0.000000001 --json
	[ "$BENCH_STATUS" -eq 2 ] || { show; false; }
	grep -q "rank 0: --min-busbw checked no row" "$BATS_TEST_TMPDIR/err" || { show; false; }
	grep -q '"passed":false,"below":\[\],"checked_rows":0,' "$BATS_TEST_TMPDIR/out" || { show; false; }
	grep -q '"exit":2}' "$BATS_TEST_TMPDIR/out"
}

# ------------------------------------------------------ nccl-tests parity

@test "-n is exact: every row runs the iterations asked for, small ones too" {
	# --min-time stays at its default (0.1 s): only the missing -n adapts
	bench_launch 2 -b 8 -e 128K -f 16 -n 3 -w 1 --json
	[ "$BENCH_STATUS" -eq 0 ] || { show; false; }
	run python3 - "$BATS_TEST_TMPDIR/out" <<'PY'
import json, sys
records = [json.loads(l.split("] ", 1)[1] if l.startswith("[") else l)
           for l in open(sys.argv[1])]
iters = {r["size"]: r["iters"] for r in records if r["type"] == "result"}
assert sorted(iters) == [8, 128, 2048, 32768], iters
assert set(iters.values()) == {3}, iters
PY
	[ "$status" -eq 0 ] || { echo "$output" >&2; show; false; }
}

@test "each row has nccl-tests' out-of-place and in-place halves, checked alike" {
	bench_launch 3 all -b 64 -e 4K -f 8 "${QUICK[@]}" -d i32 -o all
	[ "$BENCH_STATUS" -eq 0 ] || { show; false; }
	grep -Eq '^(\[0\] )?#\s+out-of-place\s+in-place$' "$BATS_TEST_TMPDIR/out" || { show; false; }
	# allreduce 64 B: -1 root, both halves with 0 wrong
	grep -Eq '^(\[0\] )? +64 +16 +i32 +prod +-1 +2 +[0-9.]+ +[0-9.]+ +[0-9.]+ +0 +[0-9.]+ +[0-9.]+ +[0-9.]+ +0 +[0-2] +[0-9.]+$' "$BATS_TEST_TMPDIR/out" || { show; false; }
	bench_launch 3 all -b 64 -e 4K -f 8 "${QUICK[@]}" -d i32 -o all --json
	[ "$BENCH_STATUS" -eq 0 ] || { show; false; }
	run python3 - "$BATS_TEST_TMPDIR/out" <<'PY'
import json, sys
records = [json.loads(l.split("] ", 1)[1] if l.startswith("[") else l)
           for l in open(sys.argv[1])]
results = [r for r in records if r["type"] == "result"]
assert results
for r in results:
    assert r["inplace_wrong"] == 0 and r["wrong"] == 0, r
    assert r["inplace_time_us"] > 0 and r["inplace_algbw_gbps"] > 0, r
    assert r["inplace_busbw_gbps"] > 0, r
    assert r["root"] == (0 if r["collective"] == "broadcast" else None), r
PY
	[ "$status" -eq 0 ] || { echo "$output" >&2; show; false; }
}

@test "closing lines in nccl-tests' order after each collective, then the verdict" {
	bench_launch 2 all -b 8 -e 64 -f 8 "${QUICK[@]}"
	[ "$BENCH_STATUS" -eq 0 ] || { show; false; }
	sed 's/^\[0\] //' "$BATS_TEST_TMPDIR/out" | grep -v '^# links\|^# slow' >"$BATS_TEST_TMPDIR/table"
	run python3 - "$BATS_TEST_TMPDIR/table" <<'PY'
import re, sys
lines = open(sys.argv[1]).read().splitlines()
for coll in ("allreduce", "allgather", "broadcast"):
    start = lines.index("# " + coll + (" (root 0)" if coll == "broadcast" else ""))
    end = next(i for i in range(start, len(lines))
               if lines[i].startswith("# Out of bounds values"))
    assert lines[end] == "# Out of bounds values : 0 OK", lines[end]
    assert re.fullmatch(r"# Avg bus bandwidth    : [0-9.e+-]+ GB/s",
                        lines[end + 1]), lines[end + 1]
    assert lines[end + 2] == "#", lines[end + 2]
    # the rows come just before
    assert re.match(r" +\d+ ", lines[end - 1]), lines[end - 1]
assert lines[-1] == "# check: passed", lines[-1]
PY
	[ "$status" -eq 0 ] || { echo "$output" >&2; show; false; }
}

@test "broadcast -r: the root's bytes reach every rank, shown as the root; a root out of range is a usage error" {
	bench_launch 3 broadcast -b 1K -e 1K "${QUICK[@]}" -r 2 --json
	[ "$BENCH_STATUS" -eq 0 ] || { show; false; }
	grep -q '"options":{.*"root":2,' "$BATS_TEST_TMPDIR/out"
	grep -q '"type":"result","schema":1,"collective":"broadcast","size":1024,.*"wrong":0,.*"root":2,.*"inplace_wrong":0}' "$BATS_TEST_TMPDIR/out" || { show; false; }
	bench_launch 3 broadcast -b 1K -e 1K "${QUICK[@]}" -r 2
	[ "$BENCH_STATUS" -eq 0 ] || { show; false; }
	grep -Eq '^(\[0\] )?# broadcast \(root 2\)$' "$BATS_TEST_TMPDIR/out"
	grep -Eq '^(\[0\] )? +1024 +256 +f32 +none +2 +2 ' "$BATS_TEST_TMPDIR/out" || { show; false; }
	# a non-root rank's wrong byte is checked against rank 2's input
	bench_launch 3 broadcast -b 1K -e 1K "${QUICK[@]}" --root 2 --corrupt 0:7
	[ "$BENCH_STATUS" -eq 1 ] || { show; false; }
	grep -Eq 'rank 0: check failed: broadcast f32 of 1024 B: element 7 \(byte (28|29|30|31)\)' "$BATS_TEST_TMPDIR/err" || { show; false; }
	bench_launch 3 broadcast -b 1K -e 1K "${QUICK[@]}" -r 3
	[ "$BENCH_STATUS" -eq 2 ] || { show; false; }
	grep -q "bench: --root 3 is out of range for a world of 3" "$BATS_TEST_TMPDIR/err" || { show; false; }
	run timeout 10 "$SR" bench -r x
	[ "$status" -eq 2 ]
	[[ "$output" == *"--root 'x' is not a whole number"* ]]
}

@test "prod: an exact product on every dtype; a wrong element is caught" {
	bench_launch 3 -b 8 -e 4K -f 8 -d all -o prod "${QUICK[@]}" --json
	[ "$BENCH_STATUS" -eq 0 ] || { show; false; }
	run python3 - "$BATS_TEST_TMPDIR/out" <<'PY'
import json, sys
records = [json.loads(l.split("] ", 1)[1] if l.startswith("[") else l)
           for l in open(sys.argv[1])]
results = [r for r in records if r["type"] == "result"]
assert {(r["dtype"], r["op"]) for r in results} == {
    (d, "prod") for d in ("f64", "f32", "i64", "i32")}, results
assert all(r["wrong"] == 0 and r["inplace_wrong"] == 0 for r in results)
PY
	[ "$status" -eq 0 ] || { echo "$output" >&2; show; false; }
	bench_launch 2 -b 64 -e 64 -d i64 -o prod "${QUICK[@]}" --corrupt 1:3
	[ "$BENCH_STATUS" -eq 1 ] || { show; false; }
	grep -Eq 'rank 1: check failed: allreduce i64 prod of 64 B: element 3 is -?[0-9]+, expected -?1 \(1 wrong on this rank\)' "$BATS_TEST_TMPDIR/err" || { show; false; }
}

@test "a row that runs long says on stderr that the sweep is alive; stdout stays clean" {
	# the interval shortened from 10 s so that every iteration passes it
	SILVIC_RING_PROGRESS_INTERVAL=0.000001 bench_launch 2 -b 1K -e 1K -n 3 -w 1 --json
	[ "$BENCH_STATUS" -eq 0 ] || { show; false; }
	grep -Eq '^(\[0\] )?silvic-ring: rank 0: bench: still running allreduce f32 sum of 1K: out-of-place iteration 3 of 3, [0-9.]+ s on this row$' "$BATS_TEST_TMPDIR/err" || { show; false; }
	grep -q 'in-place iteration 1 of 3' "$BATS_TEST_TMPDIR/err"
	# rank 0 speaks for the ring
	refute grep -q 'rank 1: bench: still running' "$BATS_TEST_TMPDIR/err"
	run check_json "$BATS_TEST_TMPDIR/out"
	[ "$status" -eq 0 ] || { echo "$output" >&2; show; false; }
}
