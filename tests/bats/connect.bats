#!/usr/bin/env bats
# bench connect, the preflight: every rank dials every other.  On
# loopback every pair is reached (exit 0); on network-namespace hosts
# (scripts/netns-hosts) a blackhole route between two hosts is named, pair
# and error, in both directions, exit 6 on every rank, within the probe's
# time; between ring neighbours too, where the reports cannot travel the
# ring and each rank says what it saw.

bats_require_minimum_version 1.5.0

load fault_helpers

BATS_TEST_TIMEOUT=${BATS_TEST_TIMEOUT:-120}

setup() {
	[ -x "$SR" ] || { echo "no binary at $SR: run make first" >&2; return 1; }
}

teardown() {
	kill_bg
	netns_down
}

@test "bench connect on 5 loopback ranks: every pair reached, exit 0, one JSON record a pair" {
	run -0 --separate-stderr "$SR" launch -n 5 bench connect
	grep -q '^# connect: each of 5 ranks dialled every other rank' <<<"$output"
	grep -q '^# verdict: ok: all 20 connections reached$' <<<"$output"
	run -0 --separate-stderr "$SR" launch -n 5 bench connect --json
	[ "$(grep -c '^{"type":"connect",.*"reached":true,"error":null,' <<<"$output")" -eq 20 ]
	tail -n 1 <<<"$output" | grep -q '^{"type":"connect_verdict",.*"pass":true,.*"exit":0}$'
}

@test "bench connect: a world of one, and a probe longer than the timeout, are usage errors" {
	run -2 "$SR" bench connect --world 1
	[[ "$output" == *"bench connect: a world of one has no pairs to probe"* ]]
	run -2 "$SR" bench connect --probe-time 9 --timeout 3 --world 2 --peers env:NOPE
	[[ "$output" == *"bench connect: --probe-time 9 is longer than --timeout 3"* ]]
	run -2 "$SR" bench --json connect
	[[ "$output" == *"bench: 'connect' comes first, before the options: silvic-ring bench connect [OPTIONS]"* ]]
}

# connect_hosts K: K namespace hosts, rank i-1 of `bench connect` on host
# i, the list published once all have written their address; sets T0.
connect_hosts() {
	local k=$1 i
	shift
	for ((i = 1; i <= k; i++)); do
		local ns=NS_$i ip=IP_$i
		bg "r$((i - 1))" ip netns exec "${!ns}" "$SR" bench connect \
			--peers "$BATS_TEST_TMPDIR/peers" --rank $((i - 1)) \
			--host "${!ip}" --address-file "$BATS_TEST_TMPDIR/addr.$((i - 1))" \
			--timeout 20 --probe-time 3 "$@"
		RANK_PIDS[$((i - 1))]=$BG_PID
	done
	publish_ranks "$BATS_TEST_TMPDIR/peers" "$k"
	T0=$(now_ns)
}

@test "bench connect on 6 namespace hosts: a blackhole route from host 2 to host 5 is named both ways with its error, exit 6 on every rank" {
	netns_up 6
	"$NETNS_HOSTS" blackhole "$NS_2" "$IP_5"
	connect_hosts 6
	for r in 0 1 2 3 4 5; do
		wait_exit_ms "${RANK_PIDS[$r]}" 40 "$T0"
		echo "# rank $r: status $WAIT_STATUS after ${WAIT_MS}ms" >&3
		[ "$WAIT_STATUS" -eq 6 ]
		# Within the configured time: the probe's 3 s, and the gathering.
		[ "$WAIT_MS" -lt 20000 ]
	done
	cat "$(out 0)" >&3
	grep -q "^# verdict: rank 1 ($IP_2) cannot reach rank 4 ($IP_5): no connection within 3s (last error: Invalid argument (its route discards everything: a blackhole route?))$" "$(out 0)"
	grep -q "^# verdict: rank 4 ($IP_5) cannot reach rank 1 ($IP_2): the connection was not answered within 3s (no reply to its SYN)$" "$(out 0)"
	# Nothing else is wrong, and the other ranks print nothing.
	[ "$(grep -c '^# verdict: ' "$(out 0)")" -eq 2 ]
	for r in 1 2 3 4 5; do
		[ ! -s "$(out $r)" ]
	done
}

@test "bench connect: a blackhole between ring neighbours, which the reports cannot cross, is still named by the ranks at its ends, exit 6 everywhere" {
	netns_up 4
	"$NETNS_HOSTS" blackhole "$NS_1" "$IP_2" unreachable
	connect_hosts 4
	for r in 0 1 2 3; do
		wait_exit_ms "${RANK_PIDS[$r]}" 40 "$T0"
		echo "# rank $r: status $WAIT_STATUS after ${WAIT_MS}ms: $(tail -n 1 "$(err $r)")" >&3
		[ "$WAIT_STATUS" -eq 6 ]
	done
	grep -q "^# verdict: rank 0 ($IP_1) cannot reach rank 1 ($IP_2): no connection within 3s (last error: No route to host)$" "$(out 0)"
	grep -q "verdict: rank 1 ($IP_2) cannot reach rank 0 ($IP_1): the connection was not answered within 3s (no reply to its SYN)" "$(err 1)"
}

@test "bench connect on 4 namespace hosts: one host whose interface has MTU 1400 is named, exit 6" {
	netns_up 4
	ip -n "$NS_3" link set eth0 mtu 1400
	connect_hosts 4
	for r in 0 1 2 3; do
		wait_exit_ms "${RANK_PIDS[$r]}" 40 "$T0"
		echo "# rank $r: status $WAIT_STATUS after ${WAIT_MS}ms" >&3
		[ "$WAIT_STATUS" -eq 6 ]
	done
	cat "$(out 0)" >&3
	grep -q "^# verdict: MTU 1400 on rank 2, 1500 elsewhere" "$(out 0)"
	[ "$(grep -c '^# verdict: ' "$(out 0)")" -eq 1 ]
}
