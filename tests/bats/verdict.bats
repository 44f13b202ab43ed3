#!/usr/bin/env bats
# Every verdict true: ranks that disagree never all pass (the close is a
# collective agreement), a corrupted frame fails every rank, every rank
# reports the class of the first failure, and a stopped rank is named by
# every survivor.  Real binaries on loopback; each case asserts statuses
# and messages.

bats_require_minimum_version 1.5.0

load fault_helpers

BATS_TEST_TIMEOUT=${BATS_TEST_TIMEOUT:-180}

setup() {
	[ -x "$SR" ] || { echo "no binary at $SR: run make first" >&2; return 1; }
	command -v python3 >/dev/null || { echo "python3 is needed" >&2; return 1; }
}

teardown() {
	kill_bg
}

# ring_run N OPTIONS...: ranks 0..N-1 on fresh loopback ports, rank R
# running $BATS_TEST_TMPDIR/sR when it exists, else .../s; waits for all
# and sets STATUS[R].
ring_run() {
	local n=$1 r script
	shift
	# shellcheck disable=SC2046
	loopback_list "$BATS_TEST_TMPDIR/peers" $(free_ports "$n")
	for ((r = 0; r < n; r++)); do
		script=$BATS_TEST_TMPDIR/s
		[ -f "$BATS_TEST_TMPDIR/s$r" ] && script=$BATS_TEST_TMPDIR/s$r
		start_rank "$r" "$BATS_TEST_TMPDIR/peers" "$script" --token 77 "$@"
	done
	for ((r = 0; r < n; r++)); do
		wait_exit "${RANK_PIDS[$r]}" 60
		STATUS[$r]=$WAIT_STATUS
		echo "# rank $r: status $WAIT_STATUS: $(tail -n 1 "$(err "$r")")" >&3
	done
}

# all_out_of_step N: every rank exited 5 and said out of step, itself or
# as the report of the rank that saw it.
all_out_of_step() {
	local r
	for ((r = 0; r < $1; r++)); do
		[ "${STATUS[$r]}" -eq 5 ]
		grep -Eq "^silvic-ring: rank $r: .*out of step" "$(err "$r")"
	done
}

# ------------------------------------------- 1. disagreeing ranks all fail

@test "broadcast {rank} from {rank} under launch -n 3: not a pass, every rank out of step (5)" {
	run -5 bash -c "echo 'broadcast {rank} from {rank}' | timeout 60 '$SR' launch -n 3 run 2>&1"
	echo "$output"
	for r in 0 1 2; do
		[[ "$output" =~ \[$r\]\ silvic-ring:\ rank\ $r:\ [^$'\n']*out\ of\ step ]]
	done
}

@test "roots 0/1/1: every rank exits 5; the unread frame is named with its sender" {
	echo 'broadcast 0 a' >"$BATS_TEST_TMPDIR/s0"
	echo 'broadcast 1 a' >"$BATS_TEST_TMPDIR/s"
	ring_run 3 --timeout 10
	all_out_of_step 3
	# Rank 1 (a root itself) never read rank 0's frame (a text's
	# broadcast is two: its length, then its bytes): it says so at the
	# close, naming rank 0.
	grep -q "rank 1: out of step at the close: after its 2 collective(s) this rank still had unread a frame (broadcast step 0 seq 1 of 8 bytes) from rank 0 (127.0.0.1:" "$(err 1)"
}

@test "one rank runs one broadcast more: every rank exits 5 naming the neighbour that closed" {
	echo 'broadcast 0 a' >"$BATS_TEST_TMPDIR/s"
	printf 'broadcast 0 a\nbroadcast 0 b\n' >"$BATS_TEST_TMPDIR/s2"
	ring_run 3 --timeout 10
	all_out_of_step 3
	grep -q "rank 2: .*out of step: the ring was closed (it finished its collectives, 2 of them, and said goodbye) by rank 1 (127.0.0.1:[0-9]*) in broadcast step 0 seq 3 of 8 bytes" "$(err 2)"
}

# The two disagreements above over links of two streams each (the wide
# header, pieces placed by index, headers parked per stream): the same
# exits, every rank out of step.
@test "roots 0/1/1 and one broadcast more, over 2 streams a link: every rank exits 5, as with one" {
	echo 'broadcast 0 a' >"$BATS_TEST_TMPDIR/s0"
	echo 'broadcast 1 a' >"$BATS_TEST_TMPDIR/s"
	ring_run 3 --timeout 10 --streams 2
	all_out_of_step 3
	rm "$BATS_TEST_TMPDIR/s0"
	echo 'broadcast 0 a' >"$BATS_TEST_TMPDIR/s"
	printf 'broadcast 0 a\nbroadcast 0 b\n' >"$BATS_TEST_TMPDIR/s2"
	ring_run 3 --timeout 10 --streams 2
	all_out_of_step 3
}

@test "a rank that runs one barrier less: both ranks of a world of 2 exit 5 with the counts" {
	printf 'barrier\nbarrier\n' >"$BATS_TEST_TMPDIR/s"
	printf 'barrier\n' >"$BATS_TEST_TMPDIR/s1"
	ring_run 2 --timeout 10
	all_out_of_step 2
	grep -q "rank 0: .*s:2: out of step: the ring was closed (it finished its collectives, 1 of them, and said goodbye) by rank 1 (127.0.0.1:[0-9]*) in barrier step 0 seq 2 of 0 bytes" "$(err 0)"
}

# mixed_shared N R...: ranks 0..N-1 run s, ranks R... with --shared-cores
# and the others without; waits for them all (STATUS) and checks that
# every rank exited 5 out of step.
mixed_shared() {
	local n=$1 r opts
	shift
	# shellcheck disable=SC2046
	loopback_list "$BATS_TEST_TMPDIR/peers" $(free_ports "$n")
	for ((r = 0; r < n; r++)); do
		opts=()
		[[ " $* " == *" $r "* ]] && opts=(--shared-cores)
		start_rank "$r" "$BATS_TEST_TMPDIR/peers" "$BATS_TEST_TMPDIR/s" --token 77 --timeout 10 "${opts[@]}"
	done
	for ((r = 0; r < n; r++)); do
		wait_exit "${RANK_PIDS[$r]}" 60
		STATUS[$r]=$WAIT_STATUS
		echo "# ranks $* on shared cores, rank $r: status $WAIT_STATUS: $(tail -n 1 "$(err "$r")")" >&3
	done
	all_out_of_step "$n"
}

@test "one rank of three with --shared-cores, two without: every rank exits 5 out of step, naming a frame of each path" {
	local r
	printf 'allreduce sum i64 1\nexpect 3\n' >"$BATS_TEST_TMPDIR/s"
	mixed_shared 3 1
	# The first rank to see it names a frame of one path where it
	# waited for the other's (the allgather's steps are 0, the shared
	# cores' 1 to 3), whichever that rank is.
	for ((r = 0; r < 3; r++)); do
		grep -Eq "out of step: expected allreduce sum i64 step (0 seq 1 of 8 bytes, got allreduce sum i64 step [1-3]|[1-3] seq 1 of 8 bytes, got allreduce sum i64 step 0) seq 1 of 8 bytes from rank [0-2] \(127\.0\.0\.1:" "$(err "$r")"
	done
}

# exact_rows N [MIB...]: bench's JSON in $output has rows for N sizes
# (exactly MIB..., in MiB, when given), one for every dtype and op at
# each, every one exact in place and out, and a passed summary.
exact_rows() {
	python3 -c '
import json, sys
rows = [json.loads(l) for l in sys.stdin]
res = [r for r in rows if r["type"] == "result"]
if len(sys.argv) > 2:
    sizes = [int(s) << 20 for s in sys.argv[2:]]
    assert sorted({r["size"] for r in res}) == sizes, res
assert len(res) == int(sys.argv[1]) * 4 * 4, len(res)
assert all(r["wrong"] == 0 and r["inplace_wrong"] == 0 for r in res)
assert rows[-1]["type"] == "summary" and rows[-1]["check"] == "passed"
' "$@" <<<"$output"
}

# exact_either_way N EXPECTS TOP SIZES: the script s on N ranks with
# --shared-cores and with --no-shared-cores, every rank exit 0 with its
# EXPECTS expects ok; then `launch -n N bench` of every dtype and op, in
# place and out, from 8 B to TOP (SIZES sizes), every result exact.
exact_either_way() {
	local n=$1 expects=$2 top=$3 sizes=$4 mode r
	for mode in --shared-cores --no-shared-cores; do
		ring_run "$n" --timeout 30 "$mode"
		for ((r = 0; r < n; r++)); do
			[ "${STATUS[$r]}" -eq 0 ]
			[ "$(grep -c 'expect = ok' "$(out "$r")")" -eq "$expects" ]
		done
		run -0 --separate-stderr timeout 120 "$SR" launch -n "$n" bench allreduce "$mode" \
		    -b 8 -e "$top" -f 4 -n 2 -w 1 -d all -o all --min-time 0 --json </dev/null
		exact_rows "$sizes"
	done
}

@test "world 3 with and without --shared-cores: exact results for f64, f32, i64 and i32 and every op, in place and out, 8 B to 128 KiB" {
	printf '%s\n' 'allreduce sum i64 {rank}' 'expect 3' 'allreduce max i32 {rank}' 'expect 2' \
	    'allreduce min f64 {rank}' 'expect 0' 'allreduce prod i64 {rank}+1 4' 'expect 6 64' \
	    'allreduce sum f32 0.5 {rank}' 'expect 1.5 3' >"$BATS_TEST_TMPDIR/s"
	exact_either_way 3 5 256K 8
}

@test "one rank of four with --shared-cores, three without, then the other way: every rank exits 5 out of step, naming a frame of each path" {
	# World 4's blocks (steps 768-770, 0x300-0x302) against recursive
	# doubling (steps 0 and 1): the first rank to see it names the frame
	# of one path where it waited for the other's.
	local r shared blocks='76[89]|770' pairs='[01]'
	printf 'allreduce sum i64 1\nexpect 4\n' >"$BATS_TEST_TMPDIR/s"
	# Rank 1 alone on shared cores, then every rank but 3.
	for shared in 1 "0 1 2"; do
		# shellcheck disable=SC2086
		mixed_shared 4 $shared
		for ((r = 0; r < 4; r++)); do
			grep -Eq "out of step: (expected|an unexpected frame \() ?allreduce sum i64 step [0-9]+ seq 1 of 8 bytes.* from rank [0-3] \(127\.0\.0\.1:[0-9]+\)" "$(err "$r")"
			grep -Eq "step ($pairs) seq 1 of 8 bytes.*step ($blocks) seq 1 of 8 bytes|step ($blocks) seq 1 of 8 bytes.*step ($pairs) seq 1 of 8 bytes" "$(err "$r")"
		done
	done
}

@test "one rank of four with --shared-cores at an 8 MiB allreduce (512 KiB frames against 1 MiB): every rank exits 5 out of step, naming both frame lengths" {
	# Both sides take the ring at 8 MiB; shared cores cut its 2 MiB
	# blocks in frames of half the size (plan.h, sr_plan_frame), so the
	# first rank to see it names one length where it expected the other.
	local r
	printf 'allreduce sum f64 1M*{rank}\nexpect 1M*6\n' >"$BATS_TEST_TMPDIR/s"
	mixed_shared 4 2
	for ((r = 0; r < 4; r++)); do
		grep -Eq "out of step: expected allreduce sum f64 step [0-9]+ seq 1 of (1048576 bytes, got allreduce sum f64 step [0-9]+ seq 1 of 524288|524288 bytes, got allreduce sum f64 step [0-9]+ seq 1 of 1048576) bytes from rank [0-3] \(127\.0\.0\.1:[0-9]+\)" "$(err "$r")"
	done
}

@test "world 4 with and without --shared-cores: exact results for f64, f32, i64 and i32 and every op, in place and out, 8 B to 512 KiB" {
	printf '%s\n' 'allreduce sum i64 {rank}' 'expect 6' 'allreduce max i32 {rank}' 'expect 3' \
	    'allreduce min f64 {rank}' 'expect 0' 'allreduce prod i64 {rank}+1 4' 'expect 24 256' \
	    'allreduce sum f32 0.5 {rank}' 'expect 2 6' 'barrier' 'allreduce sum f64 32K*{rank}' 'expect 32K*6' >"$BATS_TEST_TMPDIR/s"
	# By blocks to 256 KiB with shared cores (without them the ring from
	# 64 KiB), recursive halving past it either way (512 KiB here).
	exact_either_way 4 6 1M 9
}

@test "worlds 3 and 4 and a group of 3 on shared cores, 5 to 11 MiB (the ring in 512 KiB frames): exact results for f64, f32, i64 and i32 and every op, in place and out" {
	local n
	for n in 3 4; do
		run -0 --separate-stderr timeout 180 "$SR" launch -n "$n" bench allreduce --shared-cores \
		    -b 5M -e 11M -i 3M -n 1 -w 0 -d all -o all --min-time 0 --json </dev/null
		exact_rows 3 5 8 11
	done
	# A group's ring takes the same frames (group.c, ring_reduce).
	run -0 --separate-stderr timeout 180 "$SR" launch -n 4 bench allreduce --shared-cores \
	    --mesh --group 3,0,1 -b 6M -e 6M -n 1 -w 0 -d all -o all --min-time 0 --json </dev/null
	exact_rows 1 6
}

# lengths_named LENGTHS STEP: ranks 0-3 on shared cores, each running
# its own script s0-s3, all exit 5 out of step, each naming the
# different lengths as LENGTHS says (a regex ending in a rank), that
# rank's address and the frame's STEP.
lengths_named() {
	local r
	ring_run 4 --timeout 10 --shared-cores
	all_out_of_step 4
	for ((r = 0; r < 4; r++)); do
		grep -Eq "out of step: reductions of different lengths, $1 \(127\.0\.0\.1:[0-9]+\) in allreduce sum f64 step $2 " "$(err "$r")"
	done
}

@test "world 4 on shared cores, inputs of another length: every rank exits 5 naming both lengths and the rank of the other, found by a block's leader or at the leaders' exchange" {
	local r
	for r in 0 1 2 3; do
		printf 'allreduce sum f64 1\n' >"$BATS_TEST_TMPDIR/s$r"
	done
	# Rank 2 alone: its leader, rank 1, takes its input (step 768).
	printf 'allreduce sum f64 1 2\n' >"$BATS_TEST_TMPDIR/s2"
	lengths_named '8 bytes \(1 f64\) on this rank, 16 bytes \(2 f64\) on rank 2' 768
	# Ranks 1 and 2, a whole block: the leaders find it at their
	# exchange (step 769), whichever reads the other first.
	printf 'allreduce sum f64 1 2\n' >"$BATS_TEST_TMPDIR/s1"
	lengths_named '(8 bytes \(1 f64\) on this rank, 16 bytes \(2 f64\) on rank 1|16 bytes \(2 f64\) on this rank, 8 bytes \(1 f64\) on rank 0)' 769
}

@test "world 4, 512 KiB on three ranks and 8 bytes more on rank 2: every rank exits 5 naming both lengths and rank 2 or its halving partner, rank 1" {
	local r
	for r in 0 1 2 3; do
		printf 'allreduce sum f64 64K*1\n' >"$BATS_TEST_TMPDIR/s$r"
	done
	printf 'allreduce sum f64 64K*1 1\n' >"$BATS_TEST_TMPDIR/s2"
	# Recursive halving's first hop pairs 1-2 (and 0-3), each first
	# telling the other its count (step 512).
	lengths_named '(524288 bytes \(65536 f64\) on this rank, 524296 bytes \(65537 f64\) on rank 2|524296 bytes \(65537 f64\) on this rank, 524288 bytes \(65536 f64\) on rank 1)' 512
}

@test "ranks that agree still exit 0 after the goodbyes (world 5)" {
	printf 'broadcast 3 x\nexpect x\nallreduce sum i64 1\nexpect 5\n' >"$BATS_TEST_TMPDIR/s"
	ring_run 5 --timeout 10
	for r in 0 1 2 3 4; do
		[ "${STATUS[$r]}" -eq 0 ]
		grep -q '^line 4: expect = ok' "$(out "$r")"
		[ ! -s "$(err "$r")" ]
	done
}

# ----------------------------------- 2. --integrity fails every rank, always

@test "--integrity, one payload bit flipped on one link in the last collective (world 3): all three exit 5, 10 of 10 runs" {
	local i ports
	printf 'allreduce sum i64 1\nexpect 3\n' >"$BATS_TEST_TMPDIR/s"
	for ((i = 0; i < 10; i++)); do
		read -r -a ports <<<"$(free_ports 3 | tr '\n' ' ')"
		loopback_list "$BATS_TEST_TMPDIR/real" "${ports[@]}"
		# Link 0 -> 1 through the proxy: the hello (32 bytes), then
		# rank 0's frame header (24), then its 8-byte payload.
		# A name per run: bg truncates its files only once started.
		start_proxy "proxy$i" --target "127.0.0.1:${ports[1]}" --flip-after 56 --lifetime 60
		loopback_list "$BATS_TEST_TMPDIR/via" "${ports[0]}" "$PROXY_PORT" "${ports[2]}"
		start_rank 1 "$BATS_TEST_TMPDIR/real" "$BATS_TEST_TMPDIR/s" --token 77 --timeout 10 --integrity
		start_rank 2 "$BATS_TEST_TMPDIR/real" "$BATS_TEST_TMPDIR/s" --token 77 --timeout 10 --integrity
		start_rank 0 "$BATS_TEST_TMPDIR/via" "$BATS_TEST_TMPDIR/s" --token 77 --timeout 10 --integrity
		for r in 0 1 2; do
			wait_exit "${RANK_PIDS[$r]}" 30
			echo "# run $i rank $r: status $WAIT_STATUS: $(tail -n 1 "$(err "$r")")" >&3
			[ "$WAIT_STATUS" -eq 5 ]
			grep -Eq "rank $r: .*integrity check failed \(CRC-32C 0x[0-9a-f]{8}, computed 0x[0-9a-f]{8}\) on a frame from rank 0" "$(err "$r")"
			[ "$r" -eq 1 ] || grep -q "rank $r: .*rank 1 reported: .*integrity check failed" "$(err "$r")"
		done
		grep -q 'flipped byte 56 of the client->server stream' "$BATS_TEST_TMPDIR/proxy$i.err"
		kill "$PROXY_PID" 2>/dev/null || true
		wait "$PROXY_PID" 2>/dev/null || true
	done
}

# ------------------------------------------- 5. the status is the origin's

@test "a failed expect on one rank: every rank exits 1 naming it (world 3, 5 runs)" {
	local i
	printf 'allreduce sum i64 1\nexpect 3\nbarrier\nallreduce sum i64 1\n' >"$BATS_TEST_TMPDIR/s"
	printf 'allreduce sum i64 1\nexpect 4\nbarrier\nallreduce sum i64 1\n' >"$BATS_TEST_TMPDIR/s2"
	for ((i = 0; i < 5; i++)); do
		ring_run 3 --timeout 10
		[ "${STATUS[2]}" -eq 1 ]
		grep -q "^silvic-ring: rank 2: .*s2:2: expect failed: element 0 is 3, expected 4$" "$(err 2)"
		for r in 0 1; do
			[ "${STATUS[$r]}" -eq 1 ]
			grep -q "^silvic-ring: rank $r: .*rank 2 reported: .*s2:2: expect failed: element 0 is 3, expected 4" "$(err "$r")"
		done
	done
}

@test "a failed expect under launch: launch exits 1, never 5 (5 runs)" {
	local try
	# Not i: bats' run sets a variable of that name.
	for ((try = 0; try < 5; try++)); do
		# The minimum is 0: ranks 1 and 2 fail their expect, rank 0
		# learns of it (status 1 too, not 5).
		run -1 bash -c "printf 'allreduce min i64 {rank}\nexpect {rank}\nbarrier\n' | timeout 60 '$SR' launch -n 3 run 2>&1"
		echo "$output"
		[[ "$output" == *"failed with status 1"* ]]
		[[ "$output" != *"status 5"* ]]
	done
}

@test "--json: a peer's check failure is code \"check\", exit 1" {
	printf 'allreduce sum i64 1\nexpect 2\n' >"$BATS_TEST_TMPDIR/s"
	printf 'allreduce sum i64 1\nexpect 3\n' >"$BATS_TEST_TMPDIR/s1"
	ring_run 2 --timeout 10 --json
	[ "${STATUS[0]}" -eq 1 ]
	[ "${STATUS[1]}" -eq 1 ]
	grep -q '"type":"error","rank":0,"code":"check","phase":"collective","peer":1,.*"origin":1,.*"exit":1}' "$(out 0)"
}

# -------------------------------- 6. a stopped rank is named by every survivor

# stop_one N VICTIM SCRIPT_LINE COUNT [OPTIONS...]: N ranks (--timeout 3,
# --json, OPTIONS) running COUNT copies of SCRIPT_LINE; VICTIM is
# SIGSTOPped after line 1; every survivor must exit 5 within [3 s, 5 s]
# naming VICTIM, as the rank it timed out on or the culprit of the abort
# it got.
stop_one() {
	local n=$1 victim=$2 line=$3 count=$4 r t0 port
	shift 4
	python3 -c "import sys; sys.stdout.write(sys.argv[1] * int(sys.argv[2]))" "$line"$'\n' "$count" >"$BATS_TEST_TMPDIR/s"
	# shellcheck disable=SC2046
	loopback_list "$BATS_TEST_TMPDIR/peers" $(free_ports "$n")
	for ((r = 0; r < n; r++)); do
		start_rank "$r" "$BATS_TEST_TMPDIR/peers" "$BATS_TEST_TMPDIR/s" --token 77 --timeout 3 --json "$@"
	done
	for ((r = 0; r < n; r++)); do
		wait_line "$(out "$r")" '"line":1,' 60
	done
	t0=$(now_ns)
	kill -STOP "${RANK_PIDS[$victim]}"
	port=$(sed -n "$((victim + 1))p" "$BATS_TEST_TMPDIR/peers")
	for ((r = 0; r < n; r++)); do
		[ "$r" -eq "$victim" ] && continue
		wait_exit_ms "${RANK_PIDS[$r]}" 20 "$t0"
		echo "# world $n rank $r: status $WAIT_STATUS after ${WAIT_MS}ms: $(tail -n 1 "$(err "$r")")" >&3
		[ "$WAIT_STATUS" -eq 5 ]
		[ "$WAIT_MS" -ge 2900 ]
		[ "$WAIT_MS" -le 5000 ]
		grep -q "\"type\":\"error\",\"rank\":$r,\"code\":\"timeout\",\"phase\":\"collective\",\"peer\":$victim,\"peer_address\":\"$port\"" "$(out "$r")"
		grep -q "timed out after 3s of silence .* rank $victim ($port)" "$(err "$r")"
	done
	kill -CONT "${RANK_PIDS[$victim]}"
	# Resumed, it finds its ring gone (5); gone before the next run
	# reuses its file names.
	wait_exit "${RANK_PIDS[$victim]}" 20
	[ "$WAIT_STATUS" -eq 5 ]
}

@test "SIGSTOP on the small path, worlds 3, 4 and 8: every survivor names the stopped rank" {
	stop_one 3 1 'allreduce sum f64 1' 200000
	stop_one 4 2 'allreduce sum f64 1' 200000
	stop_one 8 5 'allreduce sum f64 1' 200000
}

@test "SIGSTOP on world 3's path for shared cores, each rank in turn: every survivor names the stopped rank" {
	stop_one 3 0 'allreduce sum f64 1' 200000 --shared-cores
	stop_one 3 1 'allreduce sum f64 1' 200000 --shared-cores
	stop_one 3 2 'allreduce sum f64 8K*1' 50000 --shared-cores
}

@test "SIGSTOP on world 4's blocks for shared cores, each rank in turn (leaders and members): every survivor names the stopped rank" {
	stop_one 4 0 'allreduce sum f64 1' 200000 --shared-cores
	stop_one 4 1 'allreduce sum f64 1' 200000 --shared-cores
	stop_one 4 2 'allreduce sum f64 8K*1' 50000 --shared-cores
	stop_one 4 3 'barrier' 200000 --shared-cores
}

@test "SIGSTOP on the ring path (1 MiB; world 4 past 4 MiB), worlds 3, 4 and 8: every survivor names the stopped rank" {
	stop_one 3 0 'allreduce sum f64 128K*1' 3000
	stop_one 4 2 'allreduce sum f64 524289*1' 800
	stop_one 8 3 'allreduce sum f64 128K*1' 3000
}

@test "SIGSTOP on world 4's recursive halving (1 MiB), each rank in turn: every survivor names the stopped rank" {
	local r
	for r in 0 1 2 3; do
		stop_one 4 "$r" 'allreduce sum f64 128K*1' 3000
	done
}

@test "a frozen link (world 3): every rank names both its ends" {
	local ports r
	read -r -a ports <<<"$(free_ports 3 | tr '\n' ' ')"
	loopback_list "$BATS_TEST_TMPDIR/real" "${ports[@]}"
	# Link 0 -> 1: the hello, then a few small allreduces, then nothing
	# either way (no FIN, no RST).
	start_proxy proxy --target "127.0.0.1:${ports[1]}" --stall-after 2000 --lifetime 60
	loopback_list "$BATS_TEST_TMPDIR/via" "${ports[0]}" "$PROXY_PORT" "${ports[2]}"
	python3 -c "import sys; sys.stdout.write('allreduce sum f64 1\n' * 100000)" >"$BATS_TEST_TMPDIR/s"
	start_rank 1 "$BATS_TEST_TMPDIR/real" "$BATS_TEST_TMPDIR/s" --token 77 --timeout 3
	start_rank 2 "$BATS_TEST_TMPDIR/real" "$BATS_TEST_TMPDIR/s" --token 77 --timeout 3
	start_rank 0 "$BATS_TEST_TMPDIR/via" "$BATS_TEST_TMPDIR/s" --token 77 --timeout 3
	wait_line "$BATS_TEST_TMPDIR/proxy.err" 'stalled after 2000 bytes' 20
	t0=$(now_ns)
	for r in 0 1 2; do
		wait_exit_ms "${RANK_PIDS[$r]}" 20 "$t0"
		echo "# rank $r: status $WAIT_STATUS ${WAIT_MS}ms after the stall: $(tail -n 1 "$(err "$r")")" >&3
		[ "$WAIT_STATUS" -eq 5 ]
		[ "$WAIT_MS" -le 5000 ]
		# The message names rank 0 and rank 1 (one as the origin or
		# this rank, the other as the rank it timed out on), never
		# rank 2 as the silent one.
		grep -Eq "rank $r: .*timed out after 3s of silence .* rank [01] \(127.0.0.1:" "$(err "$r")"
		! grep -q "rank 2 (127.0.0.1" "$(err "$r")"
		[ "$r" -ne 2 ] || grep -Eq "rank 2: .*rank [01] reported: timed out" "$(err 2)"
	done
}
