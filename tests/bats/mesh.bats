#!/usr/bin/env bats
# --mesh: every pair of ranks linked.  Scripts give the ring's exact
# results on it, with a key and frame checks too, and recursive halving
# at 16 ranks is exact for every type and op; a rank of a plain ring
# among mesh ranks is refused at the handshake, saying what differs; a
# rank that never comes is named by every other at the timeout.  Real
# binaries on loopback, ports from the kernel or held, every wait with a
# deadline.

bats_require_minimum_version 1.5.0

load fault_helpers

BATS_TEST_TIMEOUT=${BATS_TEST_TIMEOUT:-120}

setup() {
	[ -x "$SR" ] || { echo "no binary at $SR: run make first" >&2; return 1; }
}

teardown() {
	kill_bg
}

script() {
	printf '%s\n' 'allreduce sum i64 {rank}+1' 'expect {world}*({world}+1)/2' \
		'allgather {rank}' 'broadcast 1 from-one' 'barrier' \
		'allreduce max f64 {rank}' 'expect {world}-1' >"$BATS_TEST_TMPDIR/s"
}

@test "a mesh of 6 runs a script with the ring's exact results on every rank" {
	script
	run -0 --separate-stderr "$SR" launch -n 6 --no-tag-output run --mesh \
		--script "$BATS_TEST_TMPDIR/s"
	[ "$(grep -c '^line 1: allreduce sum i64 = 21 ' <<<"$output")" -eq 6 ]
	[ "$(grep -c '^line 2: expect = ok$' <<<"$output")" -eq 6 ]
	[ "$(grep -c '^line 3: allgather = \["0", "1", "2", "3", "4", "5"\] ' <<<"$output")" -eq 6 ]
	[ "$(grep -c '^line 4: broadcast 1 = from-one ' <<<"$output")" -eq 6 ]
	[ "$(grep -c '^line 7: expect = ok$' <<<"$output")" -eq 6 ]
	run -0 --separate-stderr "$SR" launch -n 6 run --mesh --json \
		--script "$BATS_TEST_TMPDIR/s"
	tail -n 1 <<<"$output" | grep -q '"status":"ok","exit":0'
}

@test "a keyed mesh with frame checks of 16 ranks forms and agrees" {
	script
	head -c 32 /dev/urandom >"$BATS_TEST_TMPDIR/k"
	chmod 600 "$BATS_TEST_TMPDIR/k"
	run -0 --separate-stderr "$SR" launch -n 16 --no-tag-output run --mesh \
		--integrity --key-file "$BATS_TEST_TMPDIR/k" \
		--script "$BATS_TEST_TMPDIR/s"
	[ "$(grep -c '^line 2: expect = ok$' <<<"$output")" -eq 16 ]
	[ "$(grep -c '^line 7: expect = ok$' <<<"$output")" -eq 16 ]
}

@test "a mesh of 16 ranks reduces mid sizes by recursive halving, exact for every type and op, in place and out" {
	# 5007 f64 to 40056 f64: past doubling's 32 KiB at 16 ranks, within
	# halving's 384 KiB, in four hops of blocks the 16 ranks do not
	# divide evenly.
	run -0 --separate-stderr "$SR" launch -n 16 bench allreduce --mesh \
		-d all -o all -b 40056 -e 320448 -f 2 -n 2 -w 1 --timeout 60
	rows=$(grep -cE '^ +[0-9]+ +[0-9]+ +(f64|f32|i64|i32) ' <<<"$output")
	[ "$rows" -eq 64 ] # 4 sizes x 4 types x 4 ops
	# No element wrong, out of place or in place.
	wrong=$(grep -E '^ +[0-9]+ +[0-9]+ +(f64|f32|i64|i32) ' <<<"$output" |
		awk '$10 != 0 || $14 != 0' | wc -l)
	[ "$wrong" -eq 0 ]
	[ "$(grep -c '^# check: passed' <<<"$output")" -ge 1 ]
	[[ "$output" != *"check: failed"* ]]
}

@test "a rank of a plain ring among mesh ranks is refused at the handshake, exit 4, saying which kind each forms" {
	script
	read -r -a PORTS <<<"$(free_ports 3 | tr '\n' ' ')"
	loopback_list "$BATS_TEST_TMPDIR/peers" "${PORTS[@]}"
	# Rank 0 last, once rank 2 has refused rank 1: rank 0's own refusal
	# (by rank 1) fails rank 2 through their link, and rank 2 could
	# otherwise be gone before rank 1's hello reached it.
	start_rank 1 "$BATS_TEST_TMPDIR/peers" "$BATS_TEST_TMPDIR/s" --timeout 5
	start_rank 2 "$BATS_TEST_TMPDIR/peers" "$BATS_TEST_TMPDIR/s" --mesh --timeout 5 -v
	wait_line "$(err 2)" "rejected a connection from 127\.0\.0\.1:[0-9]+: it forms a ring" 10
	start_rank 0 "$BATS_TEST_TMPDIR/peers" "$BATS_TEST_TMPDIR/s" --mesh --timeout 5 -v
	for r in 0 1 2; do
		wait_exit "${RANK_PIDS[$r]}" 30
		echo "# rank $r: status $WAIT_STATUS: $(tail -n 1 "$(err $r)")" >&3
		[ "$WAIT_STATUS" -eq 4 ]
	done
	# Who refuses whom first is a race (a refused rank leaves at once, and
	# the ranks it formed with hear of it), but some rank is refused by a
	# verdict that says why, and a refusing side names what the hello
	# asked for.
	cat "$(err 0)" "$(err 1)" "$(err 2)" >"$BATS_TEST_TMPDIR/all.err"
	grep -Eq "rank [0-2] at 127\.0\.0\.1:[0-9]+ rejected this rank: the two sides form different links: a mesh \(--mesh\), a ring, or bench connect's probe" "$BATS_TEST_TMPDIR/all.err"
	grep -Eq "it forms a ring and this rank a mesh \(--mesh\) \(it claims rank 1 of 3\)|it forms a mesh \(--mesh\) and this rank a ring \(it claims rank [02] of 3\)" "$BATS_TEST_TMPDIR/all.err"
}

@test "a rank that never starts is named by every mesh rank at the timeout, exit 4" {
	script
	read -r -a PORTS <<<"$(free_ports 4 | tr '\n' ' ')"
	loopback_list "$BATS_TEST_TMPDIR/peers" "${PORTS[@]}"
	for r in 0 1 2; do
		start_rank $r "$BATS_TEST_TMPDIR/peers" "$BATS_TEST_TMPDIR/s" --mesh --timeout 2
	done
	for r in 0 1 2; do
		wait_exit "${RANK_PIDS[$r]}" 30
		echo "# rank $r: status $WAIT_STATUS: $(tail -n 1 "$(err $r)")" >&3
		[ "$WAIT_STATUS" -eq 4 ]
		# Its own timeout, or the first one's, heard: rank 3 named.
		grep -Eq "timed out after 2s waiting for .*rank 3( |$|,)|rank 3 at 127\.0\.0\.1:${PORTS[3]}" "$(err $r)"
	done
}

@test "a mesh of 64 ranks on this machine forms (2016 links) and agrees on an allreduce" {
	printf '%s\n' 'allreduce sum i64 {rank}' 'expect {world}*({world}-1)/2' >"$BATS_TEST_TMPDIR/s"
	t0=$(now_ns)
	run -0 --separate-stderr "$SR" launch -n 64 --no-tag-output run --mesh \
		--timeout 60 --script "$BATS_TEST_TMPDIR/s"
	echo "# launch -n 64 run --mesh: $(ms_since "$t0") ms in all" >&3
	[ "$(grep -c '^line 2: expect = ok$' <<<"$output")" -eq 64 ]
}
