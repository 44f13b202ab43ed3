#!/usr/bin/env bats
# --streams K: K connections per link.  A script's exact results with 1,
# 2, 4 and 8 streams on a ring and a keyed, checked mesh; a rank of
# another count refused at the handshake, exit 4, both counts named; one
# stream frozen for seconds (fault-proxy on that connection alone) while
# the collectives still finish exactly; one stream slowed, named by bench
# links as the slowest.  Real binaries on loopback, ports from the kernel
# or held, every wait with a deadline.

bats_require_minimum_version 1.5.0

load fault_helpers

BATS_TEST_TIMEOUT=${BATS_TEST_TIMEOUT:-120}

setup() {
	[ -x "$SR" ] || { echo "no binary at $SR: run make first" >&2; return 1; }
}

teardown() {
	kill_bg
}

# A script of small and large collectives: 2M f64 elements are 16 MiB, so
# a ring step's blocks span many pieces and every stream carries some.
script() {
	printf '%s\n' 'allreduce sum i64 {rank}+1' 'expect {world}*({world}+1)/2' \
		'allreduce sum f64 2M*({rank}+1)' 'expect 2M*{world}*({world}+1)/2' \
		'allgather {rank}' 'broadcast 1 from-one' 'barrier' \
		'allreduce max f64 300001*{rank}' 'expect 300001*({world}-1)' \
		>"$BATS_TEST_TMPDIR/s"
}

@test "--streams 1, 2, 4 and 8: a ring of 3 gives the script's exact results on every rank" {
	script
	for k in 1 2 4 8; do
		run -0 --separate-stderr "$SR" launch -n 3 --no-tag-output run \
			--streams "$k" --script "$BATS_TEST_TMPDIR/s"
		[ "$(grep -c '^line 2: expect = ok$' <<<"$output")" -eq 3 ]
		[ "$(grep -c '^line 4: expect = ok$' <<<"$output")" -eq 3 ]
		[ "$(grep -c '^line 5: allgather = \["0", "1", "2"\] ' <<<"$output")" -eq 3 ]
		[ "$(grep -c '^line 6: broadcast 1 = from-one ' <<<"$output")" -eq 3 ]
		[ "$(grep -c '^line 9: expect = ok$' <<<"$output")" -eq 3 ]
	done
}

@test "--streams 4 on a keyed mesh of 4 with frame checks: exact results, and JSON says ok" {
	script
	head -c 32 /dev/urandom >"$BATS_TEST_TMPDIR/k"
	chmod 600 "$BATS_TEST_TMPDIR/k"
	run -0 --separate-stderr "$SR" launch -n 4 --no-tag-output run --mesh \
		--streams 4 --integrity --key-file "$BATS_TEST_TMPDIR/k" \
		--script "$BATS_TEST_TMPDIR/s"
	[ "$(grep -c '^line 4: expect = ok$' <<<"$output")" -eq 4 ]
	[ "$(grep -c '^line 9: expect = ok$' <<<"$output")" -eq 4 ]
	run -0 --separate-stderr "$SR" launch -n 4 run --mesh --streams 4 --json \
		--script "$BATS_TEST_TMPDIR/s"
	tail -n 1 <<<"$output" | grep -q '"status":"ok","exit":0'
}

@test "--streams out of range is a usage error naming the value" {
	run -2 --separate-stderr "$SR" run --world 1 --streams 9 --script /dev/null
	[[ "$stderr" == *"--streams '9' is not a number of connections per link (1-8)"* ]]
	run -2 --separate-stderr "$SR" run --world 1 --streams 0 --script /dev/null
	[[ "$stderr" == *"--streams '0'"* ]]
}

@test "ranks of 2 and 4 streams are refused at the handshake, exit 4, each naming both counts" {
	script
	read -r -a PORTS <<<"$(free_ports 2 | tr '\n' ' ')"
	loopback_list "$BATS_TEST_TMPDIR/peers" "${PORTS[@]}"
	# -v: each rejected connection is said as it comes (the final message
	# names only the last, which may be another stream of a rank that
	# left, closed before its hello).
	start_rank 0 "$BATS_TEST_TMPDIR/peers" "$BATS_TEST_TMPDIR/s" --streams 2 --timeout 5 -v
	start_rank 1 "$BATS_TEST_TMPDIR/peers" "$BATS_TEST_TMPDIR/s" --streams 4 --timeout 5 -v
	for r in 0 1; do
		wait_exit_ms "${RANK_PIDS[$r]}" 30 "$(now_ns)"
		echo "# rank $r: status $WAIT_STATUS: $(tail -n 1 "$(err $r)")" >&3
		[ "$WAIT_STATUS" -eq 4 ]
		grep -q -- '(--streams 2)' "$(err $r)"
		grep -q -- '(--streams 4)' "$(err $r)"
	done
	# The rank whose hello was judged first hears it from the verdict.
	grep -Eq 'rejected this rank: it opens [24] stream\(s\) per link' "$(err 0)" "$(err 1)"
}

# Two ranks, rank 1 reached through fault-proxy ARGS applied to one
# connection of rank 0's link to it (the proxy numbers connections as
# they come, so which stream it is varies); rank 1's own link to rank 0
# is direct.  proxied_pair starts the proxy; then start_pair COMMAND
# OPTIONS... starts rank 1 and, once it listens (so that rank 0's first
# two connections are its link's streams, not attempts refused), rank 0.
proxied_pair() {
	local ports
	read -r -a ports <<<"$(free_ports 2 | tr '\n' ' ')"
	loopback_list "$BATS_TEST_TMPDIR/real" "${ports[@]}"
	start_proxy proxy --target "127.0.0.1:${ports[1]}" --lifetime 100 \
		--only-connection 2 "$@"
	loopback_list "$BATS_TEST_TMPDIR/via" "${ports[0]}" "$PROXY_PORT"
}

start_pair() {
	bg r1 "$SR" "$@" --peers "$BATS_TEST_TMPDIR/real" --rank 1 --token 77 \
		--print-address
	RANK_PIDS[1]=$BG_PID
	wait_line "$(out 1)" '^127\.0\.0\.1:[0-9]+$' 20
	bg r0 "$SR" "$@" --peers "$BATS_TEST_TMPDIR/via" --rank 0 --token 77
	RANK_PIDS[0]=$BG_PID
}

@test "one stream frozen for 3s mid-collective: the collectives finish exactly on both ranks" {
	# 1 MB into the second connection: after the handshakes, inside the
	# first 16 MiB allreduce's pieces.
	proxied_pair --stall-after 1000000 --stall-for 3
	script
	start_pair run --script "$BATS_TEST_TMPDIR/s" --streams 2 --timeout 20
	for r in 0 1; do
		wait_exit_ms "${RANK_PIDS[$r]}" 60 "$(now_ns)"
		echo "# rank $r: status $WAIT_STATUS: $(tail -n 1 "$(err $r)")" >&3
		[ "$WAIT_STATUS" -eq 0 ]
		grep -q '^line 4: expect = ok$' "$(out $r)"
		grep -q '^line 9: expect = ok$' "$(out $r)"
	done
	grep -q 'connection 2: stalled after 1000000 bytes' "$BATS_TEST_TMPDIR/proxy.err"
	grep -q 'connection 2: resumed after a stall of 3s' "$BATS_TEST_TMPDIR/proxy.err"
}

@test "one stream frozen for good: both ranks exit 5 after the timeout, the stream named" {
	proxied_pair --stall-after 1000000
	script
	start_pair run --script "$BATS_TEST_TMPDIR/s" --streams 2 --timeout 3
	wait_line "$BATS_TEST_TMPDIR/proxy.err" 'connection 2: stalled after 1000000 bytes' 20
	for r in 0 1; do
		wait_exit_ms "${RANK_PIDS[$r]}" 30 "$(now_ns)"
		echo "# rank $r: status $WAIT_STATUS: $(tail -n 1 "$(err $r)")" >&3
		[ "$WAIT_STATUS" -eq 5 ]
	done
	# The rank whose stream went silent mid-piece names its peer and the
	# stream; the other hears it from its abort, or times out on it too.
	grep -Eq 'timed out after 3s of silence .*rank [01] \(127\.0\.0\.1:[0-9]+\) on stream [01] of 2' \
		"$(err 0)" "$(err 1)"
}

@test "one stream slowed to 4 MB/s: the transfers stay exact and bench links names it the slowest" {
	proxied_pair --bytes-per-second 4000000
	start_pair bench links --streams 2 --timeout 30 -e 4M
	for r in 0 1; do
		wait_exit_ms "${RANK_PIDS[$r]}" 90 "$(now_ns)"
		[ "$WAIT_STATUS" -eq 0 ]
	done
	out=$(out 0)
	cat "$out" >&3
	grep -q '^# streams: each link.s 2 connections' "$out"
	# Every stream of both links has its row: bytes, GB/s and counters.
	[ "$(grep -Ec '^ +[01] +[01] +[01] +[0-9]+ +[0-9.]+ +[0-9]+ +[0-9]+ +[0-9]+  127\.0\.0\.1:[0-9]+ -> 127\.0\.0\.1:[0-9]+$' "$out")" -eq 4 ]
	# The proxied link's slowed stream is the slowest of all.
	grep -Eq "^# slowest stream: rank 0 \(127.0.0.1:[0-9]+\) -> rank 1 \(127.0.0.1:$PROXY_PORT\) stream [01]: " "$out"
}

@test "an MLX hostfile of two addresses a rank: the streams spread over the address pairs, and the results stay exact" {
	local p
	read -r -a p <<<"$(free_ports 4 | tr '\n' ' ')"
	printf '[["127.0.0.1:%s", "127.0.0.2:%s"], ["127.0.0.1:%s", "127.0.0.2:%s"]]\n' \
		"${p[0]}" "${p[1]}" "${p[2]}" "${p[3]}" >"$BATS_TEST_TMPDIR/hosts.json"
	script
	for r in 0 1; do
		start_rank "$r" "$BATS_TEST_TMPDIR/hosts.json" "$BATS_TEST_TMPDIR/s" \
			--streams 4 --timeout 20
	done
	for r in 0 1; do
		wait_exit_ms "${RANK_PIDS[$r]}" 60 "$(now_ns)"
		[ "$WAIT_STATUS" -eq 0 ]
		grep -q '^line 4: expect = ok$' "$(out $r)"
		grep -q '^line 9: expect = ok$' "$(out $r)"
	done
	for r in 1 0; do
		bg "b$r" "$SR" bench links --peers "$BATS_TEST_TMPDIR/hosts.json" \
			--rank "$r" --streams 4 --timeout 20 -e 1M
		RANK_PIDS[$r]=$BG_PID
	done
	for r in 0 1; do
		wait_exit_ms "${RANK_PIDS[$r]}" 60 "$(now_ns)"
		[ "$WAIT_STATUS" -eq 0 ]
	done
	out=$BATS_TEST_TMPDIR/b0.out
	cat "$out" >&3
	# Streams 0 and 2 leave from and reach each rank's first address,
	# 1 and 3 its second, on both links.
	for s in 0 2; do
		grep -Eq "^ +0 +1 +$s .* 127\.0\.0\.1:[0-9]+ -> 127\.0\.0\.1:${p[2]}$" "$out"
		grep -Eq "^ +1 +0 +$s .* 127\.0\.0\.1:[0-9]+ -> 127\.0\.0\.1:${p[0]}$" "$out"
	done
	for s in 1 3; do
		grep -Eq "^ +0 +1 +$s .* 127\.0\.0\.2:[0-9]+ -> 127\.0\.0\.2:${p[3]}$" "$out"
		grep -Eq "^ +1 +0 +$s .* 127\.0\.0\.2:[0-9]+ -> 127\.0\.0\.2:${p[1]}$" "$out"
	done
}
