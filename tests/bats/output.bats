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
	! grep -q 'forming the ring\|waiting for the address list' "$T/rank0.err"
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
