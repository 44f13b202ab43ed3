#!/usr/bin/env bats
# scripts/netns-hosts' faults, measured: `rate` (a tbf on a host's egress)
# slows everything that host sends, `link-rate` (an htb class and a u32
# filter on the destination) only what it sends to one address, and
# `blackhole` stops one host reaching another.  Each is shown working by
# TCP transfers between namespace hosts, judged by ratios with a margin
# of five where the limit makes a hundred, never by a wall clock.

load fault_helpers

teardown() {
	kill_bg
	netns_down
}

# The transfer tool: "server IP COUNT" accepts COUNT connections on IP
# (port 0, printed as "port N"), reads each to its end and answers one
# byte; "client IP PORT BYTES" sends BYTES and prints the seconds until
# that answer, so every byte has arrived.  Every wait has a deadline.
write_measure() {
	cat >"$BATS_TEST_TMPDIR/measure.py" <<'PY'
import socket, sys, time

if sys.argv[1] == "server":
    s = socket.socket()
    s.bind((sys.argv[2], 0))
    s.listen(8)
    s.settimeout(120)
    print("port", s.getsockname()[1], flush=True)
    for _ in range(int(sys.argv[3])):
        c, _ = s.accept()
        c.settimeout(120)
        n = 0
        while True:
            b = c.recv(1 << 16)
            if not b:
                break
            n += len(b)
        c.sendall(b"k")
        c.close()
        print("received", n, flush=True)
else:
    ip, port, nbytes = sys.argv[2], int(sys.argv[3]), int(sys.argv[4])
    try:
        s = socket.create_connection((ip, port), timeout=120)
    except OSError as e:
        print("error", e.errno, e.strerror)
        sys.exit(3)
    buf = b"x" * (1 << 16)
    t0 = time.monotonic()
    left = nbytes
    while left > 0:
        left -= s.send(buf[:min(left, len(buf))])
    s.shutdown(socket.SHUT_WR)
    if s.recv(1) != b"k":
        sys.exit(4)
    print("%.6f" % (time.monotonic() - t0))
PY
}

# serve NAME NS IP COUNT: a server in NS; its port in SERVE_PORT.
serve() {
	bg "$1" ip netns exec "$2" python3 "$BATS_TEST_TMPDIR/measure.py" server "$3" "$4"
	wait_line "$BATS_TEST_TMPDIR/$1.out" '^port [0-9]+$' 30 || return 1
	SERVE_PORT=$(sed -n 's/^port //p' "$BATS_TEST_TMPDIR/$1.out")
}

# send NS IP PORT BYTES: the seconds a transfer from NS took.
send() {
	ip netns exec "$1" timeout 150 python3 "$BATS_TEST_TMPDIR/measure.py" client "$2" "$3" "$4"
}

# at_least A B FACTOR: A >= FACTOR x B, else says so.
at_least() {
	awk -v a="$1" -v b="$2" -v f="$3" 'BEGIN { exit !(a >= f * b) }' ||
		{ echo "expected $1 >= $3 x $2" >&2; return 1; }
}

@test "netns-hosts link-rate: only that host's sends to that address are slow" {
	local bytes=$((2 << 20)) t12 t13 t21 t32
	write_measure
	netns_up 3
	"$NETNS_HOSTS" link-rate "$NS_1" "$IP_2" 10
	serve s2 "$NS_2" "$IP_2" 2
	local p2=$SERVE_PORT
	serve s1 "$NS_1" "$IP_1" 1
	local p1=$SERVE_PORT
	serve s3 "$NS_3" "$IP_3" 1
	local p3=$SERVE_PORT
	t12=$(send "$NS_1" "$IP_2" "$p2" "$bytes")
	t13=$(send "$NS_1" "$IP_3" "$p3" "$bytes")
	t21=$(send "$NS_2" "$IP_1" "$p1" "$bytes")
	t32=$(send "$NS_3" "$IP_2" "$p2" "$bytes")
	echo "1->2 ${t12}s, 1->3 ${t13}s, 2->1 ${t21}s, 3->2 ${t32}s" >&2
	# 10 Mbit/s moves 2 MiB in 1.7 s; the veths in milliseconds.
	at_least "$t12" "$t13" 5
	at_least "$t12" "$t21" 5
	at_least "$t12" "$t32" 5
	grep -q "^received $bytes$" "$BATS_TEST_TMPDIR/s2.out"
	# Lifted: the class is gone, and 1 -> 2 is five times faster.
	"$NETNS_HOSTS" link-rate "$NS_1" "$IP_2" 0
	run ip netns exec "$NS_1" tc class show dev eth0
	[ "$status" -eq 0 ] && [ -z "$output" ]
	serve s2b "$NS_2" "$IP_2" 1
	local lifted
	lifted=$(send "$NS_1" "$IP_2" "$SERVE_PORT" "$bytes")
	echo "1->2 lifted ${lifted}s" >&2
	at_least "$t12" "$lifted" 5
}

@test "netns-hosts rate: everything that host sends is slow, nothing it receives" {
	local bytes=$((2 << 20)) t12 t13 t21 t23
	write_measure
	netns_up 3
	"$NETNS_HOSTS" rate "$NS_1" 10
	serve s2 "$NS_2" "$IP_2" 1
	local p2=$SERVE_PORT
	serve s3 "$NS_3" "$IP_3" 2
	local p3=$SERVE_PORT
	serve s1 "$NS_1" "$IP_1" 1
	local p1=$SERVE_PORT
	t12=$(send "$NS_1" "$IP_2" "$p2" "$bytes")
	t13=$(send "$NS_1" "$IP_3" "$p3" "$bytes")
	t21=$(send "$NS_2" "$IP_1" "$p1" "$bytes")
	t23=$(send "$NS_2" "$IP_3" "$p3" "$bytes")
	echo "1->2 ${t12}s, 1->3 ${t13}s, 2->1 ${t21}s, 2->3 ${t23}s" >&2
	at_least "$t12" "$t21" 5
	at_least "$t13" "$t23" 5
	at_least "$t12" "$t23" 5
}

@test "netns-hosts blackhole: that host cannot connect to that address, the others can" {
	write_measure
	netns_up 3
	serve s2 "$NS_2" "$IP_2" 2
	local p2=$SERVE_PORT
	serve s3 "$NS_3" "$IP_3" 1
	local p3=$SERVE_PORT
	"$NETNS_HOSTS" blackhole "$NS_1" "$IP_2"
	run send "$NS_1" "$IP_2" "$p2" 1000
	[ "$status" -eq 3 ]
	[ "$output" = "error 22 Invalid argument" ]
	"$NETNS_HOSTS" blackhole "$NS_1" "$IP_2" unreachable
	run send "$NS_1" "$IP_2" "$p2" 1000
	[ "$status" -eq 3 ]
	[ "$output" = "error 113 No route to host" ]
	"$NETNS_HOSTS" blackhole "$NS_1" "$IP_2" prohibit
	run send "$NS_1" "$IP_2" "$p2" 1000
	[ "$status" -eq 3 ]
	[ "$output" = "error 13 Permission denied" ]
	# Another destination, and another host to the same one, connect.
	run send "$NS_1" "$IP_3" "$p3" 1000
	[ "$status" -eq 0 ]
	run send "$NS_3" "$IP_2" "$p2" 1000
	[ "$status" -eq 0 ]
	# off removes the route: the pair connects again.
	"$NETNS_HOSTS" blackhole "$NS_1" "$IP_2" off
	run send "$NS_1" "$IP_2" "$p2" 1000
	[ "$status" -eq 0 ]
	[ "$(grep -c '^received 1000$' "$BATS_TEST_TMPDIR/s2.out")" -eq 2 ]
}

@test "netns-hosts link-rate and blackhole: bad arguments name themselves" {
	run "$NETNS_HOSTS" link-rate srt-x 10.0.0.300 5
	[ "$status" -eq 2 ]
	[[ "$output" == "netns-hosts: link-rate: '10.0.0.300' is not an IPv4 address"* ]]
	run "$NETNS_HOSTS" link-rate srt-x 10.0.0.3 fast
	[ "$status" -eq 2 ]
	[[ "$output" == "netns-hosts: link-rate: 'fast' is not a whole number of Mbit/s"* ]]
	run "$NETNS_HOSTS" link-rate srt-x 10.0.0.3
	[ "$status" -eq 2 ]
	[[ "$output" == "netns-hosts: link-rate: needs HOST DSTIP MBIT"* ]]
	run "$NETNS_HOSTS" blackhole srt-x 10.0.0.3 drop
	[ "$status" -eq 2 ]
	[[ "$output" == "netns-hosts: blackhole: 'drop' is not blackhole, unreachable, prohibit or off"* ]]
	run "$NETNS_HOSTS" blackhole srt-x 10.0.0
	[ "$status" -eq 2 ]
	[[ "$output" == "netns-hosts: blackhole: '10.0.0' is not an IPv4 address"* ]]
	# A namespace that is not there (as root; otherwise ip says why).
	if [ "$(id -u)" -eq 0 ]; then
		run "$NETNS_HOSTS" link-rate "srt-none-$$" 10.0.0.3 5
		[ "$status" -eq 1 ]
		[ "$output" = "netns-hosts: link-rate: no namespace 'srt-none-$$'" ]
		run "$NETNS_HOSTS" blackhole "srt-none-$$" 10.0.0.3
		[ "$status" -eq 1 ]
		[ "$output" = "netns-hosts: blackhole: no namespace 'srt-none-$$'" ]
	fi
}
