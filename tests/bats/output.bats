#!/usr/bin/env bats
# What a rank says while it waits (progress lines naming who is there and
# who is missing), launch's output (tags only on human lines, machine
# output rank 0's and clean, the command checked once), and the machine
# output CI reads (run --json's summary, --print-address as JSON, a
# reader that goes away).

bats_require_minimum_version 1.5.0

load helpers

PY=/usr/bin/python3

setup() {
	[ -x "$SR" ] || { echo "no binary at $SR: run make first" >&2; return 1; }
	[ -x "$PY" ] || { echo "no $PY" >&2; return 1; }
	T=$BATS_TEST_TMPDIR
}

# rank0_alone VERBOSE...: rank 0 of 2 whose list appears once it has
# published its address and names for rank 1 an address nobody listens
# on; rank 0 then waits for rank 1 until its --timeout.
rank0_alone() {
	bg rank0 "$SR" run --peers "$T/list" --rank 0 --world 2 --host 127.0.0.1 \
		--address-file "$T/a0" --timeout 5 --progress-interval 0.2 "$@" </dev/null
	wait_line "$T/a0" ':[0-9]+$'
}

@test "progress: -v names the missing file, then the missing neighbour and its address, with the time left" {
	rank0_alone -v
	wait_line "$T/rank0.err" "waiting for the address list $T/list: the file does not exist yet; [0-9.]+s left$"
	printf '%s\n127.0.0.1:1\n' "$(cat "$T/a0")" >"$T/list"
	wait_exit "$BG_PID" 30
	cat "$T/rank0.err"
	[ "$WAIT_STATUS" -eq 4 ]
	grep -Eq '^silvic-ring: rank 0: forming the ring: waiting for rank 1 \(127\.0\.0\.1:1\) to accept a connection and to connect; [0-9.]+s left$' "$T/rank0.err"
	grep -Fq "rank 0: timed out after 5s waiting for a connection to rank 1 at 127.0.0.1:1" "$T/rank0.err"
	grep -Fq "; the address list ($T/list) has 2 entries: did you start 2 ranks?" "$T/rank0.err"
}

@test "progress: off without -v when stderr is not a terminal; the final message still counts the ranks" {
	rank0_alone
	printf '%s\n127.0.0.1:1\n' "$(cat "$T/a0")" >"$T/list"
	wait_exit "$BG_PID" 30
	cat "$T/rank0.err"
	[ "$WAIT_STATUS" -eq 4 ]
	[ "$(grep -c 'forming the ring\|waiting for the address list' "$T/rank0.err")" -eq 0 ]
	grep -Fq "did you start 2 ranks?" "$T/rank0.err"
	[ "$(wc -l <"$T/rank0.err")" -eq 1 ]
}

@test "progress: on by default when stderr is a terminal" {
	mkdir -m 700 "$T/d"
	# script(1) gives the rank a terminal and copies what it prints.
	run timeout 30 script -qec "'$SR' run --peers 'dir:$T/d' --rank 0 --world 2 --token job --host 127.0.0.1 --timeout 2 --progress-interval 0.2 </dev/null" /dev/null
	echo "$output"
	[[ "$output" == *"waiting for dir:$T/d: 1 of 2 addresses; present rank 0 (127.0.0.1:"*"); missing rank 1; "*"s left"* ]]
	[[ "$output" == *"did you start 2 ranks?"* ]]
}

@test "progress: a shared directory names the ranks present with their addresses and the ones missing" {
	mkdir -m 700 "$T/d"
	bg r0 "$SR" run --peers "dir:$T/d" --rank 0 --world 3 --token job --host 127.0.0.1 \
		--timeout 5 --progress-interval 0.2 -v </dev/null
	local p0=$BG_PID
	bg r1 "$SR" run --peers "dir:$T/d" --rank 1 --world 3 --token job --host 127.0.0.1 \
		--timeout 5 --progress-interval 0.2 -v </dev/null
	wait_exit "$p0" 30
	cat "$T/r0.err"
	[ "$WAIT_STATUS" -eq 3 ]
	a1=$(sed -n "s/.*listening on //p" "$T/r1.err")
	grep -Eq "waiting for dir:$T/d: 2 of 3 addresses; present rank 0 \(127\.0\.0\.1:[0-9]+\), 1 \($a1\); missing rank 2; [0-9.]+s left$" "$T/r0.err"
	grep -Fq "dir:$T/d: 2 of 3 addresses after 5s; missing rank 2; the world size is 3: did you start 3 ranks?" "$T/r0.err"
}

# ------------------------------------------------------------ launch output

SCRIPT='allreduce sum i64 1 {rank}
expect {world} {world}*({world}-1)/2
'

@test "launch: bench --csv is rank 0's CSV alone, one header, untagged" {
	run --separate-stderr timeout 120 "$SR" launch -n 3 bench -b 1K -e 4K -n 2 -w 1 --min-time 0 --csv </dev/null
	echo "status $status; stdout: $output; stderr: $stderr"
	[ "$status" -eq 0 ]
	printf '%s\n' "$output" | "$PY" -c '
import csv, sys
rows = list(csv.reader(sys.stdin))
assert rows[0][0] == "collective" and rows[0][1] == "size", rows[0]
assert len(rows) == 4, rows
assert sum(r[0] == "collective" for r in rows) == 1, rows
for r in rows[1:]:
    assert len(r) == len(rows[0]) and r[0] == "allreduce" and r[5] == "3", r
'
}

@test "launch: run --json is rank 0's JSON lines, ending with the summary" {
	printf '%s' "$SCRIPT" >"$T/script"
	run --separate-stderr timeout 60 "$SR" launch -n 3 run --json --timeout 30 <"$T/script"
	echo "status $status; stdout: $output; stderr: $stderr"
	[ "$status" -eq 0 ]
	printf '%s\n' "$output" | "$PY" -c '
import json, sys
recs = [json.loads(l) for l in sys.stdin.read().splitlines()]
assert [r["type"] for r in recs] == ["result", "expect", "summary"], recs
assert all(r["rank"] == 0 for r in recs), recs
s = recs[-1]
assert s["world"] == 3 and len(s["addresses"]) == 3, s
assert all(a.startswith("127.0.0.1:") for a in s["addresses"]), s
assert s["statements"] == 2 and s["status"] == "ok" and s["exit"] == 0, s
assert isinstance(s["form_s"], float) and s["form_s"] >= 0, s
'
}

@test "launch: a typo in the command's options is one error, before any rank starts" {
	run --separate-stderr timeout 60 "$SR" launch -n 3 run --frobnicate </dev/null
	echo "status $status; stderr: $stderr"
	[ "$status" -eq 2 ]
	[ "$(grep -c "unknown option '--frobnicate'" <<<"$stderr")" -eq 1 ]
	[ "$(grep -c '^silvic-ring: ' <<<"$stderr")" -eq 1 ]
	[[ "$stderr" == "silvic-ring: run: unknown option '--frobnicate'"* ]]
	[[ "$stderr" != *"rank "* ]]
	run --separate-stderr timeout 60 "$SR" launch -n 3 bench -d f16 </dev/null
	echo "status $status; stderr: $stderr"
	[ "$status" -eq 2 ]
	[ "$(grep -c '^silvic-ring: ' <<<"$stderr")" -eq 1 ]
	[[ "$stderr" == "silvic-ring: bench: "*"f16"* ]]
}

@test "launch: refuses to hand one --port to all its ranks" {
	run --separate-stderr timeout 60 "$SR" launch -n 3 run --port 5000 </dev/null
	echo "status $status; stderr: $stderr"
	[ "$status" -eq 2 ]
	[[ "$stderr" == "silvic-ring: launch: --port 5000 would be the same for all 3 ranks, and only one of them can bind it; leave it out (each rank then binds a free port)"* ]]
	[ "$(grep -c '^silvic-ring: ' <<<"$stderr")" -eq 1 ]
	# Abbreviated, as the ranks would read it; port 0 and one rank are fine.
	run --separate-stderr timeout 60 "$SR" launch -n 2 run --po=5000 </dev/null
	[ "$status" -eq 2 ]
	[[ "$stderr" == *"--port 5000 would be the same for all 2 ranks"* ]]
	printf '%s' "$SCRIPT" >"$T/script"
	run --separate-stderr timeout 60 "$SR" launch -n 2 run --port 0 --timeout 30 <"$T/script"
	echo "status $status; stderr: $stderr"
	[ "$status" -eq 0 ]
	[[ "$output" == *"[1] line 2: expect = ok"* ]]
}

@test "launch: abbreviated long options mean what they mean to the ranks" {
	printf '%s' "$SCRIPT" >"$T/script"
	# --scr is --script: the ranks do not read stdin, so a stdin that
	# never ends (this shell holds the FIFO's write end) holds nothing up.
	mkfifo "$T/stdin"
	exec 7<>"$T/stdin"
	run --separate-stderr timeout 20 "$SR" launch -n 2 run --scr "$T/script" --time 30 --js <"$T/stdin" 7>&-
	exec 7>&-
	echo "status $status; stdout: $output; stderr: $stderr"
	[ "$status" -eq 0 ]
	# --js is --json: machine output, rank 0's alone.
	[ "${#lines[@]}" -eq 3 ]
	printf '%s\n' "$output" | "$PY" -c '
import json, sys
recs = [json.loads(l) for l in sys.stdin.read().splitlines()]
assert [r["rank"] for r in recs] == [0, 0, 0], recs
assert recs[-1]["type"] == "summary" and recs[-1]["world"] == 2, recs[-1]
'
}

@test "launch: tags are on human lines only, and --no-tag-output drops them" {
	printf '%s' "$SCRIPT" >"$T/script"
	run --separate-stderr timeout 60 "$SR" launch -n 2 --no-tag-output run -v --timeout 30 <"$T/script"
	echo "status $status; stdout: $output; stderr: $stderr"
	[ "$status" -eq 0 ]
	[ "$(grep -c '^line 2: expect = ok$' <<<"$output")" -eq 2 ]
	[[ "$output" != *"["* ]]
	[[ "$stderr" == *$'\n'"silvic-ring: rank 1: ring ready (world 2)"* || "$stderr" == "silvic-ring: rank 1: ring ready (world 2)"* ]]
	[[ "$stderr" != *"] silvic-ring"* ]]
	run --separate-stderr timeout 60 "$SR" launch -l -n 2 run -v --timeout 30 <"$T/script"
	[ "$status" -eq 0 ]
	[[ "$output" == *"[0] line 2: expect = ok"* ]]
	[[ "$output" == *"[1] line 2: expect = ok"* ]]
	[[ "$stderr" == *"[1] silvic-ring: rank 1: ring ready (world 2)"* ]]
	# The bench table is machine output: rank 0's, untagged even so.
	run --separate-stderr timeout 120 "$SR" launch -l -n 2 bench -b 1K -e 1K -n 2 -w 1 --min-time 0 </dev/null
	echo "status $status; stdout: $output; stderr: $stderr"
	[ "$status" -eq 0 ]
	[[ "$output" == "# silvic-ring "*" bench: world 2"* ]]
	[[ "$output" == *$'\n'"# check: passed"* ]]
	[[ "$output" != *"["[0-9]"]"* ]]
}

# ------------------------------------------------------ machine output for CI

@test "run --json ends with a summary record, also when the script fails" {
	run --separate-stderr timeout 60 "$SR" run --world 1 --json --host 127.0.0.1 --print-address <<<'allreduce sum i64 5
expect 6'
	echo "status $status; stdout: $output; stderr: $stderr"
	[ "$status" -eq 1 ]
	printf '%s\n' "$output" | "$PY" -c '
import json, sys
recs = [json.loads(l) for l in sys.stdin.read().splitlines()]
assert [r["type"] for r in recs] == ["address", "result", "error", "summary"], recs
a, s = recs[0], recs[-1]
assert a["rank"] == 0 and a["address"].startswith("127.0.0.1:"), a
assert s["rank"] == 0 and s["world"] == 1 and s["addresses"] == [a["address"]], s
assert s["statements"] == 2 and s["status"] == "check" and s["exit"] == 1, s
assert s["form_s"] >= 0, s
'
	# A list that never completes: no time to form, the status says why.
	printf '127.0.0.1:1\n' >"$T/list"
	run --separate-stderr timeout 60 "$SR" run --json --peers "$T/list" --world 2 --timeout 0.5 <<<'barrier'
	echo "status $status; stdout: $output; stderr: $stderr"
	[ "$status" -eq 3 ]
	printf '%s\n' "$output" | "$PY" -c '
import json, sys
recs = [json.loads(l) for l in sys.stdin.read().splitlines()]
assert [r["type"] for r in recs] == ["error", "summary"], recs
s = recs[-1]
assert s["form_s"] is None and s["world"] is None and s["addresses"] == [], s
assert s["statements"] == 1 and s["status"] == "rendezvous" and s["exit"] == 3, s
'
}

@test "--print-address with --json is a JSON record" {
	mkdir -m 700 "$T/d"
	bg r0 "$SR" run --print-address --json --peers "dir:$T/d" --rank 1 --world 2 --token j \
		--host 127.0.0.1 --timeout 30 </dev/null
	wait_line "$T/r0.out" '^\{'
	kill "$BG_PID"
	head -n 1 "$T/r0.out" | "$PY" -c '
import json, sys
r = json.loads(sys.stdin.read())
assert r["type"] == "address" and r["rank"] == 1, r
assert r["address"].startswith("127.0.0.1:") and int(r["address"].split(":")[1]) > 0, r
'
}

@test "a reader that goes away (| head -1) ends the job quietly, as with cat: status 141" {
	yes 'allreduce sum i64 1' | head -n 20000 >"$T/big" || true
	run timeout 60 bash -c 'set -o pipefail; "$0" run --world 1 --json --script "$1" </dev/null 2>"$2" | head -n 1 >/dev/null' \
		"$SR" "$T/big" "$T/err"
	cat "$T/err"
	[ "$status" -eq 141 ]
	[ ! -s "$T/err" ]
	run timeout 60 bash -c 'set -o pipefail; "$0" launch -n 3 run --timeout 30 --json --script "$1" </dev/null 2>"$2" | head -n 1 >/dev/null' \
		"$SR" "$T/big" "$T/err"
	cat "$T/err"
	[ "$status" -eq 141 ]
	[ ! -s "$T/err" ]
	run timeout 60 bash -c 'set -o pipefail; "$0" launch -n 2 run --timeout 30 --script "$1" </dev/null 2>"$2" | head -n 1 >/dev/null' \
		"$SR" "$T/big" "$T/err"
	cat "$T/err"
	[ "$status" -eq 141 ]
	[ ! -s "$T/err" ]
}

@test "progress: an HTTP rendezvous says what the server said, and the time left" {
	if ! "$SR" --version | grep -q 'http rendezvous: yes'; then
		echo "this build has no HTTP rendezvous (install libcurl and libmicrohttpd)" >&2
		return 1
	fi
	bg serve "$SR" serve
	wait_line "$T/serve.out" '^http://'
	url=$(head -n 1 "$T/serve.out")
	run --separate-stderr timeout 30 "$SR" run --peers "${url}jobs/j" --world 2 --rank 0 \
		--host 127.0.0.1 --timeout 2 --progress-interval 0.2 -v </dev/null
	echo "status $status; stderr: $stderr"
	[ "$status" -eq 3 ]
	[[ "$stderr" =~ "waiting for the address list at ${url}jobs/j: not yet: 1 of 2 ranks; missing 1; "[0-9.]+"s left" ]]
	[[ "$stderr" == *"the world size is 2: did you start 2 ranks?"* ]]
}
