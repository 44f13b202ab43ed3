#!/usr/bin/env bats
# Address sources, rank discovery and rendezvous failures, with real rank
# processes on loopback.

load helpers

SCRIPT='allreduce sum i64 1 {rank}
expect {world} {world}*({world}-1)/2
'

# ranks_from_list N LIST EXTRA...: starts N ranks reading LIST with --rank.
start_static_ranks() {
	local n=$1 list=$2 r
	shift 2
	# once, before any rank starts: rewriting it would race their reads
	printf '%s' "$SCRIPT" >"$BATS_TEST_TMPDIR/script"
	for ((r = 0; r < n; r++)); do
		bg "rank$r" "$SR" run --peers "$list" --rank "$r" --timeout 20 \
			--script "$BATS_TEST_TMPDIR/script" "$@"
		PIDS[$r]=$BG_PID
	done
}

expect_all_ok() {
	local n=$1 r
	for ((r = 0; r < n; r++)); do
		wait_exit "${PIDS[$r]}" 40
		if [ "$WAIT_STATUS" -ne 0 ]; then
			cat "$BATS_TEST_TMPDIR/rank$r.err" >&2
		fi
		[ "$WAIT_STATUS" -eq 0 ]
		grep -q "^line 1: allreduce sum i64 = $n $((n * (n - 1) / 2)) " "$BATS_TEST_TMPDIR/rank$r.out"
		grep -q "^line 2: expect = ok" "$BATS_TEST_TMPDIR/rank$r.out"
	done
}

@test "a static file: each rank binds the port its own entry names" {
	local list=$BATS_TEST_TMPDIR/peers.txt
	{ echo "# three ranks"; free_ports 3 | sed 's/^/127.0.0.1:/'; echo; } >"$list"
	start_static_ranks 3 "$list"
	expect_all_ok 3
}

@test "a static file without --rank: each rank takes the first entry it can bind" {
	local list=$BATS_TEST_TMPDIR/peers.txt r
	free_ports 3 | sed 's/^/127.0.0.1:/' >"$list"
	printf '%s' "$SCRIPT" >"$BATS_TEST_TMPDIR/script"
	for r in 0 1 2; do
		bg "rank$r" env -u SILVIC_RING_RANK "$SR" run --peers "$list" --timeout 20 \
			--script "$BATS_TEST_TMPDIR/script"
		PIDS[$r]=$BG_PID
	done
	expect_all_ok 3
}

@test "a late file: ranks print their address, then find themselves in the list" {
	local list=$BATS_TEST_TMPDIR/late.txt r
	printf '%s' "$SCRIPT" >"$BATS_TEST_TMPDIR/script"
	for r in 0 1; do
		bg "rank$r" "$SR" run --host 127.0.0.1 --print-address --peers "$list" \
			--timeout 20 --script "$BATS_TEST_TMPDIR/script"
		PIDS[$r]=$BG_PID
	done
	wait_line "$BATS_TEST_TMPDIR/rank0.out" '^127\.0\.0\.1:[0-9]+$'
	wait_line "$BATS_TEST_TMPDIR/rank1.out" '^127\.0\.0\.1:[0-9]+$'
	# the order of the file decides the ranks: rank 1's process goes first
	{ head -1 "$BATS_TEST_TMPDIR/rank1.out"; head -1 "$BATS_TEST_TMPDIR/rank0.out"; } >"$list.tmp"
	mv "$list.tmp" "$list"
	for r in 0 1; do
		wait_exit "${PIDS[$r]}" 30
		[ "$WAIT_STATUS" -eq 0 ]
		grep -q '^line 1: allreduce sum i64 = 2 1 ' "$BATS_TEST_TMPDIR/rank$r.out"
	done
}

@test "an MLX hostfile with MLX_RANK" {
	local list=$BATS_TEST_TMPDIR/hosts.json r
	printf '%s' "$SCRIPT" >"$BATS_TEST_TMPDIR/script"
	for r in 0 1 2; do
		bg "rank$r" env MLX_HOSTFILE="$list" MLX_RANK=$r "$SR" run --timeout 20 \
			--script "$BATS_TEST_TMPDIR/script" --host 127.0.0.1 \
			--address-file "$BATS_TEST_TMPDIR/addr.$r"
		PIDS[$r]=$BG_PID
	done
	# written once the ranks listen (on port 0), atomically
	printf '[["%s"], ["%s", "127.0.0.2:1"], "%s"]\n' "$(rank_address 0)" \
		"$(rank_address 1)" "$(rank_address 2)" >"$list.tmp"
	mv "$list.tmp" "$list"
	expect_all_ok 3
}

@test "env:VAR lists the addresses" {
	local r
	export RING_ADDRS=$(free_ports 3 | sed 's/^/127.0.0.1:/' | paste -sd, -)
	start_static_ranks 3 env:RING_ADDRS
	expect_all_ok 3
}

@test "SILVIC_RING_PEERS names the source when --peers is absent" {
	local list=$BATS_TEST_TMPDIR/peers.txt r
	printf '%s' "$SCRIPT" >"$BATS_TEST_TMPDIR/script"
	for r in 0 1; do
		bg "rank$r" env SILVIC_RING_PEERS="$list" SILVIC_RING_RANK=$r \
			"$SR" run --timeout 20 --script "$BATS_TEST_TMPDIR/script" \
			--host 127.0.0.1 --address-file "$BATS_TEST_TMPDIR/addr.$r"
		PIDS[$r]=$BG_PID
	done
	publish_ranks "$list" 2
	expect_all_ok 2
}

@test "a shared directory: every rank writes its address and reads the others'" {
	local dir=$BATS_TEST_TMPDIR/d r
	mkdir "$dir"
	# a file of an earlier job must not be read as this one's
	echo "127.0.0.1:9" >"$dir/oldjob.rank.1"
	printf '%s' "$SCRIPT" >"$BATS_TEST_TMPDIR/script"
	for r in 0 1 2 3; do
		bg "rank$r" "$SR" run --peers "dir:$dir" --rank $r --world 4 --host 127.0.0.1 \
			--token newjob --timeout 20 --script "$BATS_TEST_TMPDIR/script"
		PIDS[$r]=$BG_PID
	done
	expect_all_ok 4
	# each rank removed its own file once the ring formed
	[ "$(ls "$dir")" = "oldjob.rank.1" ]
}

@test "a shared directory without a job id is refused with the fix" {
	mkdir "$BATS_TEST_TMPDIR/d"
	run env -u SILVIC_RING_JOB -u SLURM_JOB_ID -u PMIX_NAMESPACE -u OMPI_MCA_ess_base_jobid \
		"$SR" run --peers "dir:$BATS_TEST_TMPDIR/d" --rank 0 --world 2 </dev/null
	[ "$status" -eq 2 ]
	[[ "$output" == *"needs a job id"*"--token"* ]]
}

@test "a missing rank is named in the timeout message on every waiting rank" {
	local dir=$BATS_TEST_TMPDIR/d r
	mkdir "$dir"
	for r in 0 1; do
		bg "rank$r" "$SR" run --peers "dir:$dir" --rank $r --world 3 --host 127.0.0.1 \
			--token j --timeout 1.5 </dev/null
		PIDS[$r]=$BG_PID
	done
	for r in 0 1; do
		wait_exit "${PIDS[$r]}" 20
		[ "$WAIT_STATUS" -eq 3 ]
		grep -q "rank $r: waiting for dir:$dir: 2 of 3 addresses after 1.5s; missing rank 2" \
			"$BATS_TEST_TMPDIR/rank$r.err"
	done
	# a rank that failed took its file with it: a rerun reads no dead address
	[ -z "$(ls "$dir")" ]
}

@test "a file that never completes times out with the count" {
	local list=$BATS_TEST_TMPDIR/short.txt
	echo "127.0.0.1:1" >"$list"
	run timeout 30 "$SR" run --peers "$list" --world 3 --rank 1 --host 127.0.0.1 --timeout 1 </dev/null
	[ "$status" -eq 3 ]
	[[ "$output" == *"waiting for $list: 1 of 3 addresses after 1s"* ]]
}

@test "a list that never appears times out naming the file" {
	run timeout 30 "$SR" run --peers "$BATS_TEST_TMPDIR/none.txt" --host 127.0.0.1 --timeout 1 </dev/null
	[ "$status" -eq 3 ]
	[[ "$output" == *"waiting for $BATS_TEST_TMPDIR/none.txt: the file does not exist after 1s"* ]]
}

@test "unparsable and duplicate entries are errors with file:line" {
	printf '127.0.0.1:5000\n# fine\nnot-an-address\n' >"$BATS_TEST_TMPDIR/bad.txt"
	run "$SR" run --peers "$BATS_TEST_TMPDIR/bad.txt" --dry-run
	[ "$status" -eq 2 ]
	[[ "$output" == *"$BATS_TEST_TMPDIR/bad.txt:3: 'not-an-address' is not host:port"* ]]
	printf '127.0.0.1:5000\n127.0.0.1:5000\n' >"$BATS_TEST_TMPDIR/dup.txt"
	run "$SR" run --peers "$BATS_TEST_TMPDIR/dup.txt" --dry-run
	[ "$status" -eq 2 ]
	[[ "$output" == *"dup.txt:2: '127.0.0.1:5000' is listed twice (ranks 0 and 1)"* ]]
}

@test "a malformed MLX hostfile is an error naming the line" {
	printf '[\n  ["127.0.0.1:5000"],\n  [5000]\n]\n' >"$BATS_TEST_TMPDIR/h.json"
	run "$SR" run --peers "$BATS_TEST_TMPDIR/h.json" --dry-run
	[ "$status" -eq 2 ]
	[[ "$output" == *"h.json:3: not an MLX hostfile"* ]]
}

@test "each launcher's environment gives the rank, and --dry-run says which" {
	local list=$BATS_TEST_TMPDIR/p.txt
	# held: the rank binds its own entry even in a dry run
	free_ports 3 | sed 's/^/127.0.0.1:/' >"$list"
	check() {
		run env -u SILVIC_RING_RANK -u SILVIC_RING_WORLD "$@" "$SR" run --peers "$list" --dry-run
		[ "$status" -eq 0 ]
		[[ "${lines[0]}" == "rank 1 of 3 ($WANT)" ]] || { echo "$output"; false; }
	}
	WANT="SILVIC_RING_RANK"; check SILVIC_RING_RANK=1
	WANT="Slurm (SLURM_PROCID)"; check SLURM_PROCID=1 SLURM_NTASKS=3
	WANT="Open MPI (OMPI_COMM_WORLD_RANK)"; check OMPI_COMM_WORLD_RANK=1 OMPI_COMM_WORLD_SIZE=3
	WANT="PMI (PMI_RANK)"; check PMI_RANK=1 PMI_SIZE=3
	WANT="PMIx (PMIX_RANK)"; check PMIX_RANK=1
	WANT="torchrun (RANK)"; check RANK=1 WORLD_SIZE=3
	WANT="MLX (MLX_RANK)"; check MLX_RANK=1
}

@test "--dry-run prints the plan: neighbours and the token" {
	local list=$BATS_TEST_TMPDIR/p.txt
	# held: the rank binds its own entry even in a dry run
	free_ports 3 | sed 's/^/127.0.0.1:/' >"$list"
	run "$SR" run --peers "$list" --rank 0 --dry-run
	[ "$status" -eq 0 ]
	[[ "$output" == *"next: rank 1 at $(sed -n 2p "$list")"* ]]
	[[ "$output" == *"previous: rank 2 at $(sed -n 3p "$list")"* ]]
	[[ "$output" == *"token: 0x"*"(derived from the address list)"* ]]
	run "$SR" run --peers "$list" --rank 0 --dry-run --json
	[ "$status" -eq 0 ]
	python3 -c 'import json,sys; r=json.loads(sys.argv[1]); assert r["next"]==1 and r["prev"]==2 and r["world"]==3, r' "$output"
}

@test "a launcher's world that contradicts the list is an error naming both" {
	local list=$BATS_TEST_TMPDIR/p.txt
	# held: the rank binds its own entry even in a dry run
	free_ports 3 | sed 's/^/127.0.0.1:/' >"$list"
	# fewer addresses than the world: waited for, then both are named
	run env SLURM_PROCID=0 SLURM_NTASKS=4 "$SR" run --peers "$list" --timeout 0.5 </dev/null
	[ "$status" -eq 3 ]
	[[ "$output" == *"waiting for $list: 3 of 4 addresses after 0.5s (the world size comes from SLURM_NTASKS)"* ]]
	# more addresses than the world: an error at once
	run env SLURM_PROCID=0 SLURM_NTASKS=2 "$SR" run --peers "$list" --dry-run
	[ "$status" -eq 2 ]
	[[ "$output" == *"$list lists 3 addresses but the world size is 2 (SLURM_NTASKS)"* ]]
}

@test "two jobs with different tokens cannot join each other's ring" {
	local list=$BATS_TEST_TMPDIR/p.txt
	bg rank0 "$SR" run --peers "$list" --rank 0 --token job-a --timeout 10 \
		--host 127.0.0.1 --address-file "$BATS_TEST_TMPDIR/addr.0"
	PIDS[0]=$BG_PID
	bg rank1 "$SR" run --peers "$list" --rank 1 --token job-b --timeout 10 \
		--host 127.0.0.1 --address-file "$BATS_TEST_TMPDIR/addr.1"
	PIDS[1]=$BG_PID
	publish_list "$list" "$(rank_address 0)" "$(rank_address 1)"
	wait_exit "${PIDS[0]}" 30
	s0=$WAIT_STATUS
	wait_exit "${PIDS[1]}" 30
	s1=$WAIT_STATUS
	[ "$s0" -eq 4 ]
	[ "$s1" -eq 4 ]
	# Each names the mismatch: told at once by the other's verdict, or,
	# when its own dial came too late to be judged, timing out counting
	# the stranger it dropped.
	cat "$BATS_TEST_TMPDIR"/rank*.err >"$BATS_TEST_TMPDIR/all.err"
	grep -q "rejected this rank: job token mismatch" "$BATS_TEST_TMPDIR/all.err"
	for r in 0 1; do
		grep -Eq "rejected this rank: job token mismatch|rejected [0-9]+ connection\(s\), the last from 127.0.0.1:[0-9]+: job token mismatch \(it claims rank [01] of 2\)" \
			"$BATS_TEST_TMPDIR/rank$r.err"
	done
}

@test "a ring formed by a real mpirun with ranks from Open MPI's environment" {
	command -v mpirun >/dev/null || { echo "mpirun missing: scripts/install-deps installs openmpi-bin"; false; }
	local dir=$BATS_TEST_TMPDIR/d
	mkdir "$dir"
	printf '%s' "$SCRIPT" >"$BATS_TEST_TMPDIR/script"
	run timeout 90 mpirun --allow-run-as-root --oversubscribe -np 3 --mca btl self,tcp \
		"$SR" run --host 127.0.0.1 --peers "dir:$dir" --timeout 30 \
		--script "$BATS_TEST_TMPDIR/script"
	[ "$status" -eq 0 ] || { echo "$output"; false; }
	[ "$(grep -c '^line 1: allreduce sum i64 = 3 3 ' <<<"$output")" -eq 3 ]
	[ "$(grep -c '^line 2: expect = ok' <<<"$output")" -eq 3 ]
}

@test "ranks running different scripts fail out of step on every rank" {
	local list=$BATS_TEST_TMPDIR/p.txt
	printf 'allreduce sum i64 1\nbarrier\n' >"$BATS_TEST_TMPDIR/a"
	printf 'allgather x\nbarrier\n' >"$BATS_TEST_TMPDIR/b"
	for r in 0 1 2; do
		s=a; [ $r -eq 1 ] && s=b
		bg "rank$r" "$SR" run --peers "$list" --rank $r --timeout 20 --script "$BATS_TEST_TMPDIR/$s" \
			--host 127.0.0.1 --address-file "$BATS_TEST_TMPDIR/addr.$r"
		PIDS[$r]=$BG_PID
	done
	publish_list "$list" "$(rank_address 0)" "$(rank_address 1)" "$(rank_address 2)"
	for r in 0 1 2; do
		wait_exit "${PIDS[$r]}" 30
		[ "$WAIT_STATUS" -eq 5 ]
		grep -q "out of step" "$BATS_TEST_TMPDIR/rank$r.err"
	done
}

@test "a rank killed mid-script makes the others fail naming it, and none is left" {
	local list=$BATS_TEST_TMPDIR/p.txt r
	# Rank 1 sleeps (until killed) while the others wait for it in the
	# second barrier: no window the kill has to land in.
	printf 'barrier\nbarrier\n' >"$BATS_TEST_TMPDIR/s"
	printf 'barrier\nsleep 3600\nbarrier\n' >"$BATS_TEST_TMPDIR/s1"
	for r in 0 1 2; do
		s=s; [ $r -eq 1 ] && s=s1
		bg "rank$r" "$SR" run --peers "$list" --rank $r --timeout 60 -v --script "$BATS_TEST_TMPDIR/$s" \
			--host 127.0.0.1 --address-file "$BATS_TEST_TMPDIR/addr.$r"
		PIDS[$r]=$BG_PID
	done
	publish_list "$list" "$(rank_address 0)" "$(rank_address 1)" "$(rank_address 2)"
	for r in 0 1 2; do
		wait_line "$BATS_TEST_TMPDIR/rank$r.out" '^line 1: barrier = ok'
	done
	kill -9 "${PIDS[1]}"
	for r in 0 2; do
		wait_exit "${PIDS[$r]}" 40
		[ "$WAIT_STATUS" -eq 5 ]
		grep -q "rank 1" "$BATS_TEST_TMPDIR/rank$r.err"
	done
}
