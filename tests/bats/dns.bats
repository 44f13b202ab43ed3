#!/usr/bin/env bats
# --peers 'dns:NAME-{rank}.SERVICE:PORT', as a Kubernetes Indexed Job's
# pods under a headless Service use it: each rank's number from
# JOB_COMPLETION_INDEX, the names served by /etc/hosts in a private mount
# and network namespace (in_private_net), so the names and the fixed
# port are the test's own.  Names that appear late are waited for, with
# a progress line naming those missing; names that never appear fail at
# the deadline, named.

bats_require_minimum_version 1.5.0

load helpers

BATS_TEST_TIMEOUT=${BATS_TEST_TIMEOUT:-120}

setup() {
	need_private_net
	T=$BATS_TEST_TMPDIR
	printf 'allgather {rank}\nexpect 0 1 2\n' >"$T/script"
}

# pods N TIMEOUT: a driver that starts N ranks as pods would, each with
# its JOB_COMPLETION_INDEX, and writes each one's status to podI.status;
# it waits for the pods alone.
pods() {
	cat >"$T/pods.sh" <<SH
for ((i = 0; i < $1; i++)); do
	( env -u SILVIC_RING_RANK -u SILVIC_RING_WORLD JOB_COMPLETION_INDEX=\$i \
		timeout 60 "$SR" run --world $1 --peers 'dns:job-{rank}.ring:4700' \
		--timeout $2 --progress-interval 0.5 -v --script "$T/script" \
		>"$T/pod\$i.out" 2>"$T/pod\$i.err"; echo \$? >"$T/pod\$i.status" ) &
	pids+=(\$!)
done
wait "\${pids[@]}"
SH
}

@test "dns: names that appear late are waited for, the missing ones named, then the ring forms" {
	local i
	printf '127.0.0.1 job-0.ring\n127.0.0.2 job-1.ring\n' >"$T/hosts"
	pods 3 30
	bg pods in_private_net "$T/hosts" bash "$T/pods.sh"
	for i in 0 1 2; do
		wait_line "$T/pod$i.err" "waiting for dns:job-\{rank\}\.ring:4700: 2 of 3 names resolve; missing job-2\.ring \(Name or service not known\); [0-9.]+s left" 30
	done
	echo '127.0.0.3 job-2.ring' >>"$T/hosts"
	wait_exit "$BG_PID" 60
	[ "$WAIT_STATUS" -eq 0 ]
	for i in 0 1 2; do
		[ "$(cat "$T/pod$i.status")" -eq 0 ] || { cat "$T/pod$i.err" >&2; false; }
		grep -q '^line 1: allgather = \["0", "1", "2"\]' "$T/pod$i.out"
		grep -q '^line 2: expect = ok$' "$T/pod$i.out"
		grep -q "rank $i of 3 (a Kubernetes Indexed Job (JOB_COMPLETION_INDEX); world from --world)" "$T/pod$i.err"
	done
	# Each pod binds the port on its own name's address, and dials names.
	grep -q 'listening on 127\.0\.0\.3:4700' "$T/pod2.err"
	grep -q 'connected to rank 0 at job-0\.ring:4700' "$T/pod2.err"
}

@test "dns: a name that never appears fails every rank at the deadline, naming it (exit 3)" {
	local i
	printf '127.0.0.1 job-0.ring\n127.0.0.2 job-1.ring\n' >"$T/hosts"
	pods 3 2
	bg pods in_private_net "$T/hosts" bash "$T/pods.sh"
	wait_exit "$BG_PID" 60
	for i in 0 1 2; do
		[ "$(cat "$T/pod$i.status")" -eq 3 ] || { cat "$T/pod$i.err" >&2; false; }
		grep -q "dns:job-{rank}.ring:4700: 1 of 3 names do not resolve after 2s: job-2.ring (Name or service not known)$" "$T/pod$i.err" ||
			{ cat "$T/pod$i.err" >&2; false; }
	done
	[ ! -s "$T/pod0.out" ]
}

@test "dns: a pattern without {rank}, or without the world size, is a usage error" {
	run env -u SILVIC_RING_RANK JOB_COMPLETION_INDEX=0 "$SR" run --peers 'dns:job-{rank}.ring:4700' </dev/null
	[ "$status" -eq 2 ]
	[[ "$output" == *"dns:job-{rank}.ring:4700 needs the world size: pass --world (a Kubernetes Job's completions)"* ]]
	run "$SR" run --world 2 --rank 0 --peers 'dns:job.ring:4700' </dev/null
	[ "$status" -eq 2 ]
	[[ "$output" == *"dns:job.ring:4700 must name {rank} once, where each rank's number goes"* ]]
	run "$SR" run --world 2 --rank 0 --peers 'dns:job-{rank}.ring' </dev/null
	[ "$status" -eq 2 ]
	[[ "$output" == *"dns:job-{rank}.ring is not NAME-{rank}.SERVICE:PORT"* ]]
	run "$SR" run --world 2 --rank 0 --peers 'dns:' </dev/null
	[ "$status" -eq 2 ]
	[[ "$output" == *"dns: is not NAME-{rank}.SERVICE:PORT"* ]]
}

# A DNS server that takes every question and never answers (run in the
# pods' own namespace, on its loopback): the lookup of the missing name
# is still running at the deadline, and cannot be cancelled.  Every rank
# still ends then, naming the name that had no answer; and, under the
# sanitizers, the request left to glibc's worker is not a leak.
@test "dns: a DNS server that never answers: every rank fails at its deadline all the same, naming the name (exit 3)" {
	local i
	printf '127.0.0.1 job-0.ring\n127.0.0.2 job-1.ring\n' >"$T/hosts"
	printf 'nameserver 127.0.0.1\noptions timeout:30 attempts:1\n' >"$T/resolv.conf"
	pods 3 2
	cat - "$T/pods.sh" >"$T/silent.sh" <<SH
python3 -c '
import socket, sys, time
s = socket.socket(socket.AF_INET, socket.SOCK_DGRAM)
s.bind(("127.0.0.1", 53))
s.settimeout(1)
open(sys.argv[1], "w").write("bound\\n")
end = time.monotonic() + 120	# never outlives a failed test for long
while time.monotonic() < end:
    try:
        s.recv(4096)
    except socket.timeout:
        pass
' "$T/dns.ready" &
sink=\$!
for ((t = 0; t < 600; t++)); do [ -s "$T/dns.ready" ] && break; sleep 0.05; done
[ -s "$T/dns.ready" ] || { echo "the silent DNS server did not bind" >&2; exit 1; }
trap 'kill \$sink' EXIT
SH
	PRIVATE_RESOLV=$T/resolv.conf bg pods in_private_net "$T/hosts" bash "$T/silent.sh"
	wait_exit "$BG_PID" 60
	[ "$WAIT_STATUS" -eq 0 ]
	for i in 0 1 2; do
		[ "$(cat "$T/pod$i.status")" -eq 3 ] || { cat "$T/pod$i.err" >&2; false; }
		grep -q "dns:job-{rank}.ring:4700: 1 of 3 names do not resolve after 2s: job-2.ring (no answer yet)$" "$T/pod$i.err" ||
			{ cat "$T/pod$i.err" >&2; false; }
	done
}
