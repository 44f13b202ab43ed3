#!/usr/bin/env bats
# The handshake against strangers and mismatches: a keyed ring forms while
# strangers that know the job token flood its listener; two ranks with
# other keys both fail at once, each naming the other; a hello with flag
# bits this version does not define gets a verdict that says so.  Real
# binaries on loopback, ports from the kernel, every wait with a deadline.

bats_require_minimum_version 1.5.0

load fault_helpers

BATS_TEST_TIMEOUT=${BATS_TEST_TIMEOUT:-120}

setup() {
	[ -x "$SR" ] || { echo "no binary at $SR: run make first" >&2; return 1; }
	command -v python3 >/dev/null || { echo "python3 is needed" >&2; return 1; }
}

# key NAME: 32 random bytes in $BATS_TEST_TMPDIR/NAME, mode 600.
key() {
	head -c 32 /dev/urandom >"$BATS_TEST_TMPDIR/$1"
	chmod 600 "$BATS_TEST_TMPDIR/$1"
}

# keyed_rank1 TIMEOUT: rank 1 of a keyed world of two (--token 4242, -v,
# key file k), alone on fresh ports; sets PORTS, waits until it listens.
keyed_rank1() {
	read -r -a PORTS <<<"$(free_ports 2 | tr '\n' ' ')"
	loopback_list "$BATS_TEST_TMPDIR/peers" "${PORTS[@]}"
	printf 'allreduce sum i64 {rank}+1\nexpect 3\n' >"$BATS_TEST_TMPDIR/s"
	start_rank 1 "$BATS_TEST_TMPDIR/peers" "$BATS_TEST_TMPDIR/s" --token 4242 \
		--timeout "$1" -v --key-file "$BATS_TEST_TMPDIR/k"
	wait_line "$(err 1)" 'listening on' 10
}

# stranger_flood SECONDS: 100 connections a second at rank 1, each a
# correct hello that asks to authenticate (the token is not secret), then
# stalling: half before their challenge, half before their proof.  Waits
# for a second of it, so every slot has been taken by then.
stranger_flood() {
	bg flood "$FLOOD" --target "127.0.0.1:${PORTS[1]}" --rate 100 \
		--duration "$1" --hold 5 --mix hello,challenge --hello 4242,2,0
	FLOOD_PID=$BG_PID
	wait_line "$BATS_TEST_TMPDIR/flood.out" '^flood: 1\.[0-9]s: ' 10
}

@test "keyed ring: the real rank joins while 100 strangers a second with the token stall mid-handshake" {
	key k
	keyed_rank1 30
	stranger_flood 20
	# Rank 0 has 3s to form its ring.  The strangers stall for 5s each,
	# 16 of them hold every slot: without eviction at every stage the
	# first slot frees only after 5s.
	t0=$(now_ns)
	start_rank 0 "$BATS_TEST_TMPDIR/peers" "$BATS_TEST_TMPDIR/s" --token 4242 \
		--timeout 3 --key-file "$BATS_TEST_TMPDIR/k"
	wait_exit_ms "${RANK_PIDS[0]}" 30 "$t0"
	echo "# rank 0: status $WAIT_STATUS after ${WAIT_MS}ms: $(tail -n 1 "$(err 0)")" >&3
	[ "$WAIT_STATUS" -eq 0 ]
	# The flood was still on when the ring had formed and run.
	kill -0 "$FLOOD_PID"
	grep -q '^line 2: expect = ok' "$(out 0)"
	wait_exit "${RANK_PIDS[1]}" 10
	[ "$WAIT_STATUS" -eq 0 ]
	grep -q '^line 2: expect = ok' "$(out 1)"
	echo "# flood: $(tail -n 1 "$BATS_TEST_TMPDIR/flood.out")" >&3
	echo "# rank 1 -v: $(grep -m 1 'evicted' "$(err 1)")" >&3
	# Strangers past their hello were evicted to let it in.
	grep -Eq "rank 1: rejected a connection from 127\.0\.0\.1:[0-9]+: evicted after waiting [0-9.]+m?s for its (challenge|proof)" "$(err 1)"
	grep -q 'rank 1: accepted rank 0 from' "$(err 1)"
}

@test "keyed ring: a timeout under a flood of strangers says how many unauthenticated connections were refused and the last source" {
	key k
	keyed_rank1 3
	stranger_flood 20
	wait_exit "${RANK_PIDS[1]}" 30
	echo "# rank 1: status $WAIT_STATUS: $(tail -n 1 "$(err 1)")" >&3
	[ "$WAIT_STATUS" -eq 4 ]
	grep -Eq "rank 1: timed out after 3s waiting for .*rank 0 to connect; refused [0-9]+ unauthenticated connection\(s\) \([0-9]+ evicted to make room\), the last from 127\.0\.0\.1:[0-9]+: " "$(err 1)"
	refused=$(sed -n 's/.*refused \([0-9]*\) unauthenticated.*/\1/p' "$(err 1)")
	[ "$refused" -ge 50 ]
}

# mismatch_pair KEY0 KEY1: ranks 0 and 1 of a world of two with these key
# files ("" for none), --timeout 60.  Rank 0 starts first and listens
# before rank 1 starts, so rank 1 dials a rank that is there and fails
# first; rank 0 must still learn of it.  Both must exit 7, each naming the
# other's address, long before the timeout.
mismatch_pair() {
	local r other k
	read -r -a PORTS <<<"$(free_ports 2 | tr '\n' ' ')"
	loopback_list "$BATS_TEST_TMPDIR/peers" "${PORTS[@]}"
	echo barrier >"$BATS_TEST_TMPDIR/s"
	for r in 0 1; do
		k=$1
		[ "$r" -eq 1 ] && k=$2
		start_rank "$r" "$BATS_TEST_TMPDIR/peers" "$BATS_TEST_TMPDIR/s" \
			--timeout 60 -v ${k:+--key-file "$BATS_TEST_TMPDIR/$k"}
		[ "$r" -eq 0 ] && wait_line "$(err 0)" 'listening on' 10
	done
	for r in 0 1; do
		other=$((1 - r))
		# 20s: a third of the timeout, a bound on the order of it.
		wait_exit "${RANK_PIDS[$r]}" 20
		echo "# rank $r: status $WAIT_STATUS: $(tail -n 1 "$(err $r)")" >&3
		[ "$WAIT_STATUS" -eq 7 ]
		grep -q "rank $r: .*authentication" "$(err $r)"
		grep -q "rank $other at 127.0.0.1:${PORTS[$other]}" "$(err $r)"
	done
}

@test "authentication: ranks with different keys both exit 7 at once, each naming the other, long before --timeout" {
	key ka
	key kb
	mismatch_pair ka kb
}

@test "authentication: a key on one rank only: both exit 7 at once, each naming the other, long before --timeout" {
	key ka
	mismatch_pair "" ka
}

@test "a hello with undefined flag bits gets a verdict that says so, and the acceptor names the bits" {
	read -r -a PORTS <<<"$(free_ports 2 | tr '\n' ' ')"
	loopback_list "$BATS_TEST_TMPDIR/peers" "${PORTS[@]}"
	echo barrier >"$BATS_TEST_TMPDIR/s"
	start_rank 1 "$BATS_TEST_TMPDIR/peers" "$BATS_TEST_TMPDIR/s" --token 4242 \
		--timeout 20 -v
	wait_line "$(err 1)" 'listening on' 10
	# Rank 0's hello, right in all but bit 4 of its flags.
	run python3 - "${PORTS[1]}" <<'PY'
import socket, struct, sys
s = socket.create_connection(("127.0.0.1", int(sys.argv[1])), timeout=10)
s.sendall(b"silvicn\x01" + struct.pack("=I", 0x01020304) +
          struct.pack("<IIIQ", 0, 2, 0x10, 4242))
v = b""
while len(v) < 16:
    got = s.recv(16 - len(v))
    if not got:
        break
    v += got
print("verdict", struct.unpack("<II", v[8:16]) if len(v) == 16 else v)
PY
	echo "# $output" >&3
	[ "$status" -eq 0 ]
	[ "$output" = "verdict (7, 1)" ]
	wait_line "$(err 1)" "rank 1: rejected a connection from 127\.0\.0\.1:[0-9]+: its hello sets undefined flag bits 0x10 \(flags 0x10; this version defines 0xff0f; it claims rank 0 of 2\)" 10
	# The real rank 0 still joins.
	start_rank 0 "$BATS_TEST_TMPDIR/peers" "$BATS_TEST_TMPDIR/s" --token 4242 --timeout 20
	for r in 0 1; do
		wait_exit "${RANK_PIDS[$r]}" 20
		[ "$WAIT_STATUS" -eq 0 ]
	done
}

@test "authentication: one rank of three with another key: every rank exits 7 at once, long before --timeout" {
	key ka
	key kb
	# shellcheck disable=SC2046
	loopback_list "$BATS_TEST_TMPDIR/peers" $(free_ports 3)
	echo barrier >"$BATS_TEST_TMPDIR/s"
	for r in 0 1 2; do
		k=ka
		[ "$r" -eq 2 ] && k=kb
		start_rank "$r" "$BATS_TEST_TMPDIR/peers" "$BATS_TEST_TMPDIR/s" \
			--timeout 60 --key-file "$BATS_TEST_TMPDIR/$k"
	done
	for r in 0 1 2; do
		wait_exit "${RANK_PIDS[$r]}" 20 ||
			{ echo "# rank $r: $(tail -n 3 "$(err $r)")" >&3; false; }
		echo "# rank $r: status $WAIT_STATUS: $(tail -n 1 "$(err $r)")" >&3
		[ "$WAIT_STATUS" -eq 7 ]
	done
	# Both ends of the two links with rank 2 name it or its neighbour.
	grep -q "rank 1: authentication with rank 2 at 127.0.0.1:" "$(err 1)"
	grep -q "rank 2: authentication with rank 0 at 127.0.0.1:" "$(err 2)"
	grep -Eq "rank 0: (.*rank 1 at 127\.0\.0\.1:[0-9]+ .*leaves|rank 1 reported: authentication with rank 2 )" "$(err 0)"
}

@test "authentication: a rank whose other link fails authentication tells the neighbour it formed with (7, not 4)" {
	key ka
	key kb
	# shellcheck disable=SC2046
	set -- $(free_ports 4)
	loopback_list "$BATS_TEST_TMPDIR/peers" "$1" "$2" "$3"
	# Rank 2 (another key) dials a dead port for rank 0, so rank 0 never
	# sees its failure itself: only rank 1, its formed neighbour, can
	# tell it why the ring will not form.
	loopback_list "$BATS_TEST_TMPDIR/peers2" "$4" "$2" "$3"
	echo barrier >"$BATS_TEST_TMPDIR/s"
	start_rank 0 "$BATS_TEST_TMPDIR/peers" "$BATS_TEST_TMPDIR/s" \
		--token 4242 --timeout 60 --key-file "$BATS_TEST_TMPDIR/ka"
	start_rank 1 "$BATS_TEST_TMPDIR/peers" "$BATS_TEST_TMPDIR/s" \
		--token 4242 --timeout 60 --key-file "$BATS_TEST_TMPDIR/ka" -v \
		--progress-interval 0.1
	# Rank 2 starts once the link 0-1 has formed, so rank 1's failure
	# comes after it (rank 1 keeps dialling rank 2 until then).
	wait_line "$(err 1)" "forming the ring: accepted rank 0 " 20
	start_rank 2 "$BATS_TEST_TMPDIR/peers2" "$BATS_TEST_TMPDIR/s" \
		--token 4242 --timeout 60 --key-file "$BATS_TEST_TMPDIR/kb"
	for r in 0 1; do
		wait_exit "${RANK_PIDS[$r]}" 20
		echo "# rank $r: status $WAIT_STATUS: $(tail -n 1 "$(err $r)")" >&3
		[ "$WAIT_STATUS" -eq 7 ]
	done
	grep -q "rank 1: authentication with rank 2 at 127.0.0.1:$3 failed" "$(err 1)"
	grep -q "rank 0: rank 1 reported: authentication with rank 2 at 127.0.0.1:$3 failed" "$(err 0)"
}

@test "keyed ring: strangers from one host hold at most 8 of the 16 pending slots" {
	key k
	keyed_rank1 30
	for ((i = 0, base = 0; i < 20; i++)); do
		n=$(fd_count "${RANK_PIDS[1]}")
		[ "$n" -gt "$base" ] && base=$n
		sleep 0.01
	done
	# From 127.0.0.2: every rank here connects from 127.0.0.1.
	bg flood "$FLOOD" --target "127.0.0.1:${PORTS[1]}" --rate 100 \
		--duration 20 --hold 5 --mix hello,challenge --hello 4242,2,0 \
		--source 127.0.0.2
	FLOOD_PID=$BG_PID
	wait_line "$BATS_TEST_TMPDIR/flood.out" '^flood: 1\.[0-9]s: ' 10
	for ((i = 0, most = 0; i < 100; i++)); do
		n=$(fd_count "${RANK_PIDS[1]}")
		[ "$n" -gt "$most" ] && most=$n
		sleep 0.01
	done
	echo "# rank 1: $base fds before the flood, at most $most under it" >&3
	grep -Eq "rank 1: rejected a connection from 127\.0\.0\.2:[0-9]+: evicted after waiting [0-9.]+m?s for its (challenge|proof), to make room for a newer connection: its host holds 8 of the [0-9]+ pending handshakes, the most one host may" "$(err 1)"
	# 8 strangers, and a connection to rank 0 that comes and goes.
	[ "$most" -le $((base + 8 + 1)) ]
	start_rank 0 "$BATS_TEST_TMPDIR/peers" "$BATS_TEST_TMPDIR/s" --token 4242 \
		--timeout 3 --key-file "$BATS_TEST_TMPDIR/k"
	for r in 0 1; do
		wait_exit "${RANK_PIDS[$r]}" 30
		[ "$WAIT_STATUS" -eq 0 ]
	done
	kill -0 "$FLOOD_PID"
}

@test "a connector refused for undefined flag bits exits 4 naming the peer and the flags it sent" {
	read -r -a PORTS <<<"$(free_ports 2 | tr '\n' ' ')"
	loopback_list "$BATS_TEST_TMPDIR/peers" "${PORTS[@]}"
	echo barrier >"$BATS_TEST_TMPDIR/s"
	# A newer rank 1: it reads the hello and answers with verdict 7.
	cat >"$BATS_TEST_TMPDIR/newer.py" <<'PY'
import socket, struct, sys
l = socket.socket()
l.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
l.bind(("127.0.0.1", int(sys.argv[1])))
l.listen(4)
l.settimeout(20)
print("listening", flush=True)
c, _ = l.accept()
c.settimeout(20)
h = b""
while len(h) < 32:
    got = c.recv(32 - len(h))
    if not got:
        break
    h += got
c.sendall(b"silvicn\x01" + struct.pack("<II", 7, 1))
print("answered", len(h), flush=True)
c.recv(1)
PY
	bg fake python3 "$BATS_TEST_TMPDIR/newer.py" "${PORTS[1]}"
	wait_line "$BATS_TEST_TMPDIR/fake.out" '^listening' 10
	start_rank 0 "$BATS_TEST_TMPDIR/peers" "$BATS_TEST_TMPDIR/s" --timeout 20
	wait_exit "${RANK_PIDS[0]}" 15
	echo "# rank 0: status $WAIT_STATUS: $(tail -n 1 "$(err 0)")" >&3
	[ "$WAIT_STATUS" -eq 4 ]
	grep -q "rank 0: rank 1 at 127.0.0.1:${PORTS[1]} rejected this rank: its hello sets flag bits this version does not define (another silvic-ring version?) (this rank sent flags 0x0)" "$(err 0)"
}
