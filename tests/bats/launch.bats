#!/usr/bin/env bats
# silvic-ring launch: usage errors, N local ranks of `run` with their
# output forwarded (long JSON records whole), the first failure's status,
# signals, stdin handed to every rank that reads it, and the deadline for
# the address exchange.

bats_require_minimum_version 1.5.0

load helpers

SCRIPT='allreduce sum i64 1 {rank}
expect {world} {world}*({world}-1)/2
'

setup() {
	[ -x "$SR" ] || { echo "no binary at $SR: run make first" >&2; return 1; }
	printf '%s' "$SCRIPT" >"$BATS_TEST_TMPDIR/script"
}

# start_launcher ARGS...: runs `timeout 60 silvic-ring launch ARGS...` in
# the background, output in launcher.out and launcher.err; sets BG to the
# background job and LAUNCHER to the launcher's own pid (written by the
# shell that becomes it, as bash may put a subshell between $! and it).
start_launcher() {
	local pidfile=$BATS_TEST_TMPDIR/launcher.pid
	timeout 60 bash -c 'echo $$ >"$0" && exec "$@"' "$pidfile" "$SR" launch "$@" \
		</dev/null >"$BATS_TEST_TMPDIR/launcher.out" \
		2>"$BATS_TEST_TMPDIR/launcher.err" 3>&- &
	BG=$!
	BG_PIDS+=("$BG")
	LAUNCHER=$(wait_pidfile "$pidfile")
	BG_PIDS+=("$LAUNCHER")
}

# wait_count FILE REGEX N: waits up to 20s for N lines matching REGEX.
wait_count() {
	local i
	for ((i = 0; i < 400; i++)); do
		[ "$(grep -Ec -- "$2" "$1" 2>/dev/null)" -ge "$3" ] && return 0
		sleep 0.05
	done
	echo "timed out waiting for $3 lines /$2/ in $1:" >&2
	cat "$1" >&2
	return 1
}

# running PID: true while PID is a live process (not gone, not a zombie).
running() {
	local state
	state=$(sed -n 's/^State:[[:space:]]*\([A-Z]\).*/\1/p' "/proc/$1/status" 2>/dev/null)
	[ -n "$state" ] && [ "$state" != Z ] && [ "$state" != X ]
}

# wait_gone PID...: waits up to 10s until none of the PIDs runs.
wait_gone() {
	local i pid left
	for ((i = 0; i < 200; i++)); do
		left=
		for pid in "$@"; do
			running "$pid" && left="$left $pid"
		done
		[ -z "$left" ] && return 0
		sleep 0.05
	done
	echo "still running:$left" >&2
	return 1
}

@test "launch without -n is a usage error" {
	run timeout 60 "$SR" launch run
	[ "$status" -eq 2 ]
	[[ "$output" == *"launch: missing -n N"* ]]
	[[ "$output" == *"try 'silvic-ring --help'"* ]]
}

@test "launch -n out of range or not a number is a usage error naming the value" {
	local bad
	for bad in 0 1025 abc -3 4x; do
		run timeout 60 "$SR" launch -n "$bad" run
		[ "$status" -eq 2 ]
		[[ "$output" == *"-n '$bad' is not a number of ranks from 1 to 1024"* ]]
	done
	run timeout 60 "$SR" launch --ranks=0 run
	[ "$status" -eq 2 ]
	[[ "$output" == *"-n '0' is not a number of ranks"* ]]
}

@test "launch without a command is a usage error" {
	run timeout 60 "$SR" launch -n 2
	[ "$status" -eq 2 ]
	[[ "$output" == *"launch: missing the command the ranks run"* ]]
	run timeout 60 "$SR" launch -n 2 --
	[ "$status" -eq 2 ]
	[[ "$output" == *"launch: missing the command the ranks run"* ]]
}

@test "launch cannot launch launchers" {
	run timeout 60 "$SR" launch -n 2 launch -n 2 run
	[ "$status" -eq 2 ]
	[[ "$output" == *"the ranks cannot run 'launch' themselves"* ]]
}

@test "unknown launch options and bad values are usage errors naming them" {
	run timeout 60 "$SR" launch --frobnicate -n 2 run
	[ "$status" -eq 2 ]
	[[ "$output" == *"launch: unknown option '--frobnicate'"* ]]
	run timeout 60 "$SR" launch -x -n 2 run
	[ "$status" -eq 2 ]
	[[ "$output" == *"launch: unknown option '-x'"* ]]
	run timeout 60 "$SR" launch -n 2 --grace soon run
	[ "$status" -eq 2 ]
	[[ "$output" == *"--grace 'soon' is not a number of seconds"* ]]
	run timeout 60 "$SR" launch -n
	[ "$status" -eq 2 ]
	[[ "$output" == *"launch: -n needs a value"* ]]
}

@test "launch --help prints its usage on stdout" {
	run --separate-stderr timeout 60 "$SR" launch --help
	[ "$status" -eq 0 ]
	[[ "$output" == *"usage: silvic-ring launch -n N"* ]]
	[[ "$output" == *"--ranks"* ]]
	[[ "$output" == *"--grace"* ]]
	[ -z "$stderr" ]
}

@test "options after the command are the command's, checked once before any rank starts" {
	run --separate-stderr timeout 60 "$SR" launch -n 2 run --frobnicate </dev/null
	[ "$status" -eq 2 ]
	[[ "$stderr" == "silvic-ring: run: unknown option '--frobnicate'"* ]]
	[[ "$stderr" != *"exited with status"* ]]
	[[ "$stderr" != *"launch: unknown option"* ]]
}

@test "launch -n 1..8 run: every rank's results, prefixed with its rank" {
	local n r
	for n in 1 2 3 4 5 6 7 8; do
		run --separate-stderr timeout 60 "$SR" launch -n "$n" run --timeout 30 \
			<"$BATS_TEST_TMPDIR/script"
		if [ "$status" -ne 0 ]; then
			echo "world $n: status $status; $stderr" >&2
			return 1
		fi
		[ "${#lines[@]}" -eq $((2 * n)) ]
		for ((r = 0; r < n; r++)); do
			[[ "$output" == *"[$r] line 1: allreduce sum i64 = $n $((n * (n - 1) / 2)) "* ]]
			[[ "$output" == *"[$r] line 2: expect = ok"* ]]
		done
	done
}

@test "-v status lines of every rank come through stderr, prefixed" {
	run --separate-stderr timeout 60 "$SR" launch -n 3 run -v --timeout 30 \
		<"$BATS_TEST_TMPDIR/script"
	[ "$status" -eq 0 ]
	[[ "$stderr" == *"[0] silvic-ring: rank 0: ring ready (world 3)"* ]]
	[[ "$stderr" == *"[1] silvic-ring: rank 1: ring ready (world 3)"* ]]
	[[ "$stderr" == *"[2] silvic-ring: rank 2: ring ready (world 3)"* ]]
	[[ "$output" != *"ring ready"* ]]
}

@test "JSON records come through untouched, rank 0's: one per statement and the summary" {
	local r
	run --separate-stderr timeout 60 "$SR" launch -n 4 run --json --timeout 30 \
		<"$BATS_TEST_TMPDIR/script"
	[ "$status" -eq 0 ]
	[ "${#lines[@]}" -eq 3 ]
	for ((r = 0; r < 3; r++)); do
		[[ "${lines[$r]}" == "{"*"\"rank\":0,"*"}" ]]
	done
	[[ "${lines[2]}" == '{"type":"summary",'*'"world":4,'* ]]
	[[ "$output" != *"["[0-9]"] "* ]]
}

@test "the launcher exits with the status of the rank that failed" {
	local failed
	printf 'allreduce sum i64 1\nexpect 2\n' >"$BATS_TEST_TMPDIR/fails"
	run --separate-stderr timeout 60 "$SR" launch -n 1 run --timeout 30 \
		<"$BATS_TEST_TMPDIR/fails"
	echo "status $status; stdout: $output; stderr: $stderr"
	[ "$status" -eq 1 ]
	[[ "$stderr" == *"[0] silvic-ring: rank 0: <stdin>:2: expect failed"* ]]
	[[ "$stderr" == *"silvic-ring: rank 0 failed with status 1"* ]]
	# The minimum is 0 everywhere: rank 0's expect holds, rank 1's fails.
	# Rank 1 then aborts the ring, which rank 0 may hear of first and
	# fail itself: the launcher reports whichever exit came first.
	printf 'allreduce min i64 {rank}\nexpect {rank}\n' >"$BATS_TEST_TMPDIR/fails"
	run --separate-stderr timeout 60 "$SR" launch -n 2 run --timeout 30 \
		<"$BATS_TEST_TMPDIR/fails"
	echo "status $status; stdout: $output; stderr: $stderr"
	[[ "$stderr" == *"[1] silvic-ring: rank 1: <stdin>:2: expect failed"* ]]
	[[ "$stderr" != *"[0] silvic-ring: rank 0: <stdin>:2: expect failed"* ]]
	[ "$(grep -c 'failed with status' <<<"$stderr")" -eq 1 ]
	failed=$(sed -n 's/^silvic-ring: rank [01] failed with status \([0-9]*\).*/\1/p' <<<"$stderr")
	[ "$status" -eq "$failed" ]
	[ "$status" -ne 0 ]
}

@test "after one rank fails the others get the grace period, then SIGTERM" {
	# Rank 1 divides by zero (status 2); rank 0 sleeps where the ring
	# cannot tell it, so only the launcher's SIGTERM ends its sleep.
	printf 'sleep 50/(1-{rank})\n' >"$BATS_TEST_TMPDIR/fails"
	run --separate-stderr timeout 60 "$SR" launch -n 2 --grace 1 run --timeout 30 \
		<"$BATS_TEST_TMPDIR/fails"
	[ "$status" -eq 2 ]
	[[ "$stderr" == *"[1] silvic-ring: rank 1: <stdin>:1: sleep '50/(1-{rank})' divides by zero"* ]]
	[[ "$stderr" == *"silvic-ring: rank 1 failed with status 2; stopping the others"* ]]
	[[ "$stderr" == *"[0] silvic-ring: rank 0: <stdin>:1: interrupted while sleeping"* ]]
	[ "$(grep -c 'failed with status' <<<"$stderr")" -eq 1 ]
}

@test "SIGTERM to the launcher: exit 130 and no rank left running" {
	local ranks pid
	printf 'barrier\nsleep 50\n' >"$BATS_TEST_TMPDIR/slow"
	start_launcher -n 3 run -v --timeout 30 --script "$BATS_TEST_TMPDIR/slow"
	# Past the barrier (not merely formed), every rank is in its sleep.
	wait_count "$BATS_TEST_TMPDIR/launcher.out" '^\[[012]\] line 1: barrier = ok' 3
	ranks=$(pgrep -P "$LAUNCHER" | tr '\n' ' ')
	[ "$(wc -w <<<"$ranks")" -eq 3 ]
	kill -TERM "$LAUNCHER"
	wait "$BG" && status=0 || status=$?
	[ "$status" -eq 130 ]
	for pid in $ranks; do
		if running "$pid"; then
			echo "rank pid $pid outlived the launcher" >&2
			return 1
		fi
	done
	grep -q 'interrupted; stopping the ranks' "$BATS_TEST_TMPDIR/launcher.err"
	# Stopped by the SIGTERM passed on, not by the end of their sleep.
	[ "$(grep -c '^\[[012]\] silvic-ring: rank [012]: .*interrupted while sleeping' \
		"$BATS_TEST_TMPDIR/launcher.err")" -eq 3 ]
}

@test "a launcher killed with SIGKILL takes its ranks with it" {
	local ranks
	printf 'barrier\nsleep 50\n' >"$BATS_TEST_TMPDIR/slow"
	start_launcher -n 3 run -v --timeout 30 --script "$BATS_TEST_TMPDIR/slow"
	wait_count "$BATS_TEST_TMPDIR/launcher.err" 'ring ready \(world 3\)' 3
	ranks=$(pgrep -P "$LAUNCHER" | tr '\n' ' ')
	[ "$(wc -w <<<"$ranks")" -eq 3 ]
	kill -KILL "$LAUNCHER"
	wait_gone $ranks
}

@test "every rank gets all of stdin, even more than a pipe holds" {
	local i r
	{
		for ((i = 0; i < 3000; i++)); do
			echo "# padding line $i: the launcher must deliver all of this"
		done
		echo 'allreduce sum i64 {rank}'
		echo 'expect {world}*({world}-1)/2'
	} >"$BATS_TEST_TMPDIR/big"
	[ "$(wc -c <"$BATS_TEST_TMPDIR/big")" -gt 131072 ]
	run --separate-stderr timeout 60 "$SR" launch -n 4 run --timeout 30 \
		<"$BATS_TEST_TMPDIR/big"
	echo "status $status; $stderr"
	[ "$status" -eq 0 ]
	for r in 0 1 2 3; do
		[[ "$output" == *"[$r] line 3001: allreduce sum i64 = 6 "* ]]
		[[ "$output" == *"[$r] line 3002: expect = ok"* ]]
	done
}

@test "commands that form no ring just run: launch -n 2 help" {
	run --separate-stderr timeout 60 "$SR" launch -n 2 help </dev/null
	[ "$status" -eq 0 ]
	[[ "$output" == *"[0] usage: silvic-ring"* ]]
	[[ "$output" == *"[1] usage: silvic-ring"* ]]
}

# check_records FILE N: FILE holds N lines, each a JSON result record
# whose statement is the one on its line of the script, then the summary.
check_records() {
	python3 - "$1" "$2" "$BATS_TEST_TMPDIR/big.txt" <<'PY'
import json, sys
lines = open(sys.argv[1]).read().splitlines()
script = open(sys.argv[3]).read().splitlines()
assert len(lines) == int(sys.argv[2]) + 1, "%d lines" % len(lines)
assert json.loads(lines.pop())["type"] == "summary"
for line in lines:
    r = json.loads(line)
    assert r["type"] == "result", r["type"]
    assert r["statement"] == script[r["line"] - 1], "statement of line %d" % r["line"]
PY
}

@test "JSON records longer than 64 KiB come through whole, one line each" {
	python3 -c "print('allgather '+'x'*40000)" >"$BATS_TEST_TMPDIR/big.txt"
	timeout 60 "$SR" launch -n 2 run --json --timeout 30 \
		--script "$BATS_TEST_TMPDIR/big.txt" >"$BATS_TEST_TMPDIR/out" </dev/null
	check_records "$BATS_TEST_TMPDIR/out" 1
	# Records past 256 KiB among short ones (rank 0's: machine output).
	python3 -c "print('allgather '+'x'*40000); print('barrier');
print('allgather '+'y'*65000)" >"$BATS_TEST_TMPDIR/big.txt"
	timeout 60 "$SR" launch -n 4 run --json --timeout 30 \
		--script "$BATS_TEST_TMPDIR/big.txt" >"$BATS_TEST_TMPDIR/out" </dev/null
	check_records "$BATS_TEST_TMPDIR/out" 3
	[ "$(awk 'length($0) > 262144' "$BATS_TEST_TMPDIR/out" | wc -l)" -eq 1 ]
}

@test "plain lines longer than 64 KiB go out in pieces, each tagged" {
	python3 -c "print('allgather '+'x'*40000)" >"$BATS_TEST_TMPDIR/big.txt"
	run --separate-stderr timeout 60 "$SR" launch -n 2 run --timeout 30 \
		--script "$BATS_TEST_TMPDIR/big.txt" </dev/null
	[ "$status" -eq 0 ]
	[ "${#lines[@]}" -eq 4 ]
	[ "$(grep -c '^\[[01]\] line 1: allgather = ' <<<"$output")" -eq 2 ]
	[ "$(grep -c '^\[[01]\] x' <<<"$output")" -eq 2 ]
}

# open_stdin: makes $BATS_TEST_TMPDIR/stdin a pipe that never ends: this
# shell holds its write end open on fd 7 and never writes.
open_stdin() {
	mkfifo "$BATS_TEST_TMPDIR/stdin"
	exec 7<>"$BATS_TEST_TMPDIR/stdin"
}

@test "commands that do not read stdin get /dev/null, an open stdin never holds them up" {
	open_stdin
	# Held up, a rank would wait on stdin for ever: 25s tells that from a
	# busy machine's slowness (and stays short of the ranks' --timeout 30).
	run --separate-stderr timeout 25 "$SR" launch -n 1 bench -e 64 --min-time 0 \
		<"$BATS_TEST_TMPDIR/stdin" 7>&-
	echo "bench: status $status; $stderr"
	[ "$status" -eq 0 ]
	[[ "$output" == *$'\n'"# check: passed"* ]]
	run --separate-stderr timeout 25 "$SR" launch -n 2 run --timeout 30 \
		--script "$BATS_TEST_TMPDIR/script" <"$BATS_TEST_TMPDIR/stdin" 7>&-
	echo "run --script: status $status; $stderr"
	[ "$status" -eq 0 ]
	[[ "$output" == *"[1] line 2: expect = ok"* ]]
	run --separate-stderr timeout 25 "$SR" launch -n 2 -- --timeout=30 \
		--script="$BATS_TEST_TMPDIR/script" <"$BATS_TEST_TMPDIR/stdin" 7>&-
	echo "--script=: status $status; $stderr"
	[ "$status" -eq 0 ]
	[[ "$output" == *"[1] line 2: expect = ok"* ]]
	exec 7>&-
}

@test "run and the default command still read their script from stdin" {
	run --separate-stderr timeout 60 bash -c \
		'printf "allreduce sum i64 1\n" | "$0" launch -n 2 run' "$SR"
	[ "$status" -eq 0 ]
	[[ "$output" == *"[0] line 1: allreduce sum i64 = 2 "* ]]
	[[ "$output" == *"[1] line 1: allreduce sum i64 = 2 "* ]]
	run --separate-stderr timeout 60 "$SR" launch -n 2 -- --timeout 30 \
		<"$BATS_TEST_TMPDIR/script"
	[ "$status" -eq 0 ]
	[[ "$output" == *"[1] line 2: expect = ok"* ]]
}

@test "ranks that never publish their address are stopped after --timeout plus 5s" {
	# Opening a FIFO no one writes blocks each rank before it publishes.
	mkfifo "$BATS_TEST_TMPDIR/never"
	run --separate-stderr timeout 30 "$SR" launch -n 2 --grace 1 run \
		--timeout 1 --script "$BATS_TEST_TMPDIR/never" </dev/null
	echo "status $status; $stderr"
	[ "$status" -eq 3 ]
	[[ "$stderr" == *"silvic-ring: rank 0 did not publish its address within 6s"* ]]
	[[ "$stderr" == *"silvic-ring: rank 1 did not publish its address within 6s"* ]]
	[ "$(grep -c 'did not publish' <<<"$stderr")" -eq 2 ]
	run --separate-stderr timeout 30 "$SR" launch -n 1 --grace 1 run \
		--timeout=0.5 --script "$BATS_TEST_TMPDIR/never" </dev/null
	echo "status $status; $stderr"
	[ "$status" -eq 3 ]
	[[ "$stderr" == *"silvic-ring: rank 0 did not publish its address within 5.5s"* ]]
}

@test "the address deadline is over once the ring has formed" {
	printf 'barrier\nsleep 7\n' >"$BATS_TEST_TMPDIR/long"
	run --separate-stderr timeout 60 "$SR" launch -n 2 run --timeout 1 \
		--script "$BATS_TEST_TMPDIR/long" </dev/null
	echo "status $status; $stderr"
	[ "$status" -eq 0 ]
	[[ "$stderr" != *"did not publish"* ]]
}

@test "launch -n tells more ranks than cores that they share cores, unless the caller's environment or the command says" {
	local cores n first
	# The cores this process may run on (nproc would heed OMP_NUM_THREADS).
	cores=$(python3 -c 'import os; print(len(os.sched_getaffinity(0)))')
	first=$(python3 -c 'import os; print(min(os.sched_getaffinity(0)))')
	n=$((cores + 1))
	run -0 --separate-stderr timeout 60 "$SR" launch -n "$n" run --dry-run </dev/null
	[ "$(grep -c '^\[[0-9]*\] shared cores: yes (SILVIC_RING_SHARED_CORES)$' <<<"$output")" -eq "$n" ]
	# The ranks' own affinity is what counts: one core for two ranks.
	run -0 --separate-stderr timeout 60 taskset -c "$first" "$SR" launch -n 2 run --dry-run </dev/null
	[ "$(grep -c '^\[[0-9]\] shared cores: yes (SILVIC_RING_SHARED_CORES)$' <<<"$output")" -eq 2 ]
	run -0 --separate-stderr timeout 60 "$SR" launch -n "$cores" run --dry-run </dev/null
	[ "$(grep -c '^\[[0-9]*\] shared cores: no (the default)$' <<<"$output")" -eq "$cores" ]
	run -0 --separate-stderr env SILVIC_RING_SHARED_CORES=no timeout 60 "$SR" launch -n "$n" run --dry-run </dev/null
	[ "$(grep -c '^\[[0-9]*\] shared cores: no (SILVIC_RING_SHARED_CORES)$' <<<"$output")" -eq "$n" ]
	run -0 --separate-stderr timeout 60 "$SR" launch -n "$n" run --dry-run --no-shared-cores </dev/null
	[ "$(grep -c '^\[[0-9]*\] shared cores: no (--no-shared-cores)$' <<<"$output")" -eq "$n" ]
	run -0 --separate-stderr timeout 60 "$SR" launch -n 2 run --dry-run --json --shared-cores </dev/null
	[[ "$output" == *'"shared_cores":true,"shared_cores_source":"--shared-cores"'* ]]
}

@test "SILVIC_RING_SHARED_CORES other than yes or no is a configuration error naming the value" {
	run -2 --separate-stderr env SILVIC_RING_SHARED_CORES=maybe "$SR" run --peers 127.0.0.1:1 --rank 0 --dry-run </dev/null
	[[ "$stderr" == *"SILVIC_RING_SHARED_CORES='maybe' is not yes or no"* ]]
	run -2 --separate-stderr env SILVIC_RING_SHARED_CORES=maybe timeout 60 "$SR" launch -n 2 run --dry-run </dev/null
	[[ "$stderr" == *"[0] silvic-ring: rank 0: SILVIC_RING_SHARED_CORES='maybe' is not yes or no"* ]]
}

# Sets a and b to two CPUs this process may run on, as taskset lists
# them; fails without two.
two_cpus() {
	local two
	two=$(python3 -c 'import os; c = sorted(os.sched_getaffinity(0)); print(c[0], c[1 % len(c)])')
	read -r a b <<<"$two"
	[ "$a" != "$b" ]
}

# A script of allreduces, each checked: 8 B, 512 KiB (64K f64: world
# 4's halving, the ring's elsewhere), then the statements given.
placement_script() {
	printf '%s\n' 'allreduce sum i64 {rank}+1' 'expect {world}*({world}+1)/2' \
		'allreduce sum f64 64K*({rank}+1)' 'expect 64K*{world}*({world}+1)/2' \
		"$@" >"$BATS_TEST_TMPDIR/s"
}

# placed_run N [OPTION...]: that script on N ranks launched on CPUs a and
# b with -vv, each of its expects ok on every rank.
placed_run() {
	local n=$1 expects
	shift
	expects=$(grep -c '^expect ' "$BATS_TEST_TMPDIR/s")
	run -0 --separate-stderr timeout 120 taskset -c "$a,$b" "$SR" launch -n "$n" run -vv \
		"$@" --script "$BATS_TEST_TMPDIR/s" </dev/null
	[ "$(grep -c '^\[[0-9]*\] line [0-9]*: expect = ok$' <<<"$output")" -eq $((expects * n)) ]
}

# moves R: rank R's CPU changes, as -vv says them ("CPU 1,no single CPU,").
moves() {
	grep "^\[$1\] silvic-ring: debug: rank $1: bound to" <<<"$stderr" | sed 's/.*bound to //' | tr '\n' ','
}

@test "launch -n of 4 ranks on 2 CPUs binds each rank by its collective's path, and the results stay exact" {
	local a b
	two_cpus
	placement_script 'allreduce sum i64 {rank}' 'expect {world}*({world}-1)/2' \
		'allreduce sum f64 524289*({rank}+1)' 'expect 524289*{world}*({world}+1)/2' \
		'allreduce sum f64 1M*({rank}+1)' 'expect 1M*{world}*({world}+1)/2'
	placed_run 4
	# 8 B, 512 KiB, 8 B, 4 MiB + 8 B, 8 MiB: the small allreduces (by
	# blocks: the ranks share the CPUs) on CPUs 0 1 1 0 by rank,
	# halving's (64K doubles) on 0 0 1 1, the ring's (524289) on 0 1 0
	# 1, and from 8 MiB (1M doubles) left to the kernel.  Rank 0 stays
	# on CPU a until then.
	[ "$(moves 0)" = "CPU $a,no single CPU," ]
	[ "$(moves 1)" = "CPU $b,CPU $a,CPU $b,no single CPU," ]
	[ "$(moves 2)" = "CPU $b,CPU $a,no single CPU," ]
	[ "$(moves 3)" = "CPU $a,CPU $b,CPU $a,CPU $b,no single CPU," ]
	# --cpus none, the ranks' own option, turns it off.
	placed_run 4 --cpus none
	[[ "$stderr" != *"bound to"* ]]
}

@test "launch -n of 8 ranks on 2 CPUs binds a mesh's recursive doubling and halving by rank bit 2 and leaves its ring to the kernel" {
	local a b
	two_cpus
	# 8 B (doubling), 512 KiB (the ring), 128 KiB (halving).
	placement_script 'allreduce sum f64 16K*({rank}+1)' \
		'expect 16K*{world}*({world}+1)/2'
	placed_run 8 --mesh
	for r in 0 1 2 3; do
		[ "$(moves $r)" = "CPU $a,no single CPU,CPU $a," ]
	done
	for r in 4 5 6 7; do
		[ "$(moves $r)" = "CPU $b,no single CPU,CPU $b," ]
	done
	# Without a mesh the small path is the ring's both-way exchange,
	# which nothing measured binds.
	placed_run 8
	[[ "$stderr" != *"bound to"* ]]
}

@test "launch -n of 2 ranks on 2 CPUs binds each rank to its own CPU, and the results stay exact" {
	local a b
	two_cpus
	placement_script 'allreduce max f64 {rank}' 'expect {world}-1'
	placed_run 2
	# Once, at the first allreduce, whatever the path after it.
	[ "$(moves 0)" = "CPU $a," ]
	[ "$(moves 1)" = "CPU $b," ]
	placed_run 2 --cpus none
	[[ "$stderr" != *"bound to"* ]]
}

@test "launch -n says which CPUs its ranks share only when they fill or outnumber them" {
	local cores n list first last
	cores=$(python3 -c 'import os; print(len(os.sched_getaffinity(0)))')
	# As taskset -c lists them: runs of CPUs as ranges ("0-3,6").
	list=$(python3 -c '
import os
c, out = sorted(os.sched_getaffinity(0)), []
for x in c:
    if out and out[-1][1] == x - 1:
        out[-1][1] = x
    else:
        out.append([x, x])
print(",".join(str(a) if a == b else "%d-%d" % (a, b) for a, b in out))')
	first=$(python3 -c 'import os; print(min(os.sched_getaffinity(0)))')
	last=$(python3 -c 'import os; print(max(os.sched_getaffinity(0)))')
	n=$((cores + 1))
	[ "$cores" -ge 2 ]
	for w in "$cores" "$n"; do
		run -0 --separate-stderr timeout 60 "$SR" launch -n "$w" run --dry-run </dev/null
		[ "$(grep -c "^\[[0-9]*\] cpus: $list (SILVIC_RING_CPUS)\$" <<<"$output")" -eq "$w" ]
	done
	run -0 --separate-stderr timeout 60 "$SR" launch -n $((cores - 1)) run --dry-run </dev/null
	[ "$(grep -c '^\[[0-9]*\] cpus: none (the default)$' <<<"$output")" -eq $((cores - 1)) ]
	# The caller's own value stands, and the rank's option over it.
	run -0 --separate-stderr env SILVIC_RING_CPUS=none timeout 60 "$SR" launch -n "$n" run --dry-run </dev/null
	[ "$(grep -c '^\[[0-9]*\] cpus: none (SILVIC_RING_CPUS)$' <<<"$output")" -eq "$n" ]
	run -0 --separate-stderr timeout 60 "$SR" launch -n "$n" run --dry-run --cpus "$first" </dev/null
	[ "$(grep -c "^\[[0-9]*\] cpus: $first (--cpus)\$" <<<"$output")" -eq "$n" ]
	run -0 --separate-stderr timeout 60 "$SR" launch -n 2 run --dry-run --json --cpus "$last,$first" </dev/null
	[[ "$output" == *"\"cpus\":[$last,$first],\"cpus_source\":\"--cpus\""* ]]
}

@test "--cpus and SILVIC_RING_CPUS that are not CPU lists are usage errors naming the value" {
	run -2 --separate-stderr timeout 60 "$SR" run --peers 127.0.0.1:1 --rank 0 --dry-run --cpus 0,x </dev/null
	[[ "$stderr" == *"--cpus '0,x': 'x' is not a CPU number or range (0-1023)"* ]]
	run -2 --separate-stderr timeout 60 "$SR" run --peers 127.0.0.1:1 --rank 0 --dry-run --cpus 1,0-2 </dev/null
	[[ "$stderr" == *"--cpus '1,0-2': CPU 1 is listed twice"* ]]
	run -2 --separate-stderr timeout 60 "$SR" run --peers 127.0.0.1:1 --rank 0 --dry-run --cpus 3-1 </dev/null
	[[ "$stderr" == *"--cpus '3-1': '3-1' is not a CPU number or range (0-1023)"* ]]
	run -2 --separate-stderr timeout 60 "$SR" run --peers 127.0.0.1:1 --rank 0 --dry-run --cpus '' </dev/null
	[[ "$stderr" == *"--cpus '': '' is not a CPU number or range (0-1023)"* ]]
	run -2 --separate-stderr env SILVIC_RING_CPUS=0,,1 timeout 60 "$SR" run --peers 127.0.0.1:1 --rank 0 --dry-run </dev/null
	[[ "$stderr" == *"SILVIC_RING_CPUS='0,,1': '' is not a CPU number or range (0-1023)"* ]]
	# A CPU this rank may not run on (the kernel's last).
	run -2 --separate-stderr timeout 60 "$SR" run --peers 127.0.0.1:1 --rank 0 --dry-run --cpus 1023 </dev/null
	[[ "$stderr" == *"--cpus '1023': this rank may not run on CPU 1023"* ]]
	run -2 --separate-stderr env SILVIC_RING_CPUS=1023 timeout 60 "$SR" launch -n 2 run --dry-run </dev/null
	[[ "$stderr" == *"[0] silvic-ring: rank 0: SILVIC_RING_CPUS='1023': this rank may not run on CPU 1023"* ]]
}
