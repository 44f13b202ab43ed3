#!/usr/bin/env bats
# Slurm without a shared directory: the address list derived from a job
# step's own environment (SLURM_JOB_NODELIST expanded, SLURM_TASKS_PER_NODE,
# a base port), the default source under srun.  The environment here is
# synthetic; the nodes' names resolve through /etc/hosts in a private
# mount and network namespace (in_private_net), where the fixed ports
# are the test's own.

bats_require_minimum_version 1.5.0

load helpers

BATS_TEST_TIMEOUT=${BATS_TEST_TIMEOUT:-120}

setup() {
	need_private_net
	command -v python3 >/dev/null || { echo "python3 is needed to read JSON" >&2; return 1; }
	T=$BATS_TEST_TMPDIR
	printf '127.0.0.1 sn1\n127.0.0.2 sn2\n127.0.0.3 sn3\n' >"$T/hosts"
}

# slurm_env PROCID NODEID LOCALID: the words of `env` that make Slurm's
# task PROCID, with the job's layout from $NODES, $TASKS and $NTASKS and
# the step's variables in $STEP (words NAME=VALUE).
slurm_env() {
	echo -u SILVIC_RING_RANK -u SILVIC_RING_WORLD -u SILVIC_RING_PEERS \
		SLURM_JOB_ID=77 SLURM_STEP_ID=0 "SLURM_JOB_NODELIST=$NODES" \
		"SLURM_TASKS_PER_NODE=$TASKS" "SLURM_NTASKS=$NTASKS" \
		"SLURM_PROCID=$1" "SLURM_NODEID=$2" "SLURM_LOCALID=$3" ${STEP:-}
}

# plan PROCID NODEID LOCALID [OPTIONS...]: that task's --dry-run --json
# plan, in the private namespaces.
plan() {
	local words
	read -r -a words <<<"$(slurm_env "$1" "$2" "$3")"
	shift 3
	in_private_net "$T/hosts" env "${words[@]}" timeout 60 "$SR" run \
		--dry-run --json "$@" </dev/null
}

@test "slurm: the list is each node of SLURM_JOB_NODELIST, once per task, on ports from 47000, in rank order" {
	NODES='sn[1-3]' TASKS='2(x2),1' NTASKS=5
	run --separate-stderr plan 3 1 1
	[ "$status" -eq 0 ] || { echo "$stderr" >&2; false; }
	python3 - "$output" <<'PY'
import json, sys
p = json.loads(sys.argv[1])
assert p["addresses"] == ["sn1:47000", "sn1:47001", "sn2:47000", "sn2:47001",
                          "sn3:47000"], p["addresses"]
assert p["rank"] == 3 and p["world"] == 5, p
assert p["address"] == "sn2:47001", p
assert p["rank_source"] == "Slurm (SLURM_PROCID)", p
PY
	# A port of one's own, and a step's nodes and tasks over the job's.
	run --separate-stderr plan 3 1 1 --peers slurm:5000
	[ "$status" -eq 0 ] || { echo "$stderr" >&2; false; }
	[[ "$output" == *'"addresses":["sn1:5000","sn1:5001","sn2:5000","sn2:5001","sn3:5000"]'* ]]
	NODES='sn[1-3]' TASKS='1(x3)' NTASKS=2
	STEP="SLURM_STEP_NODELIST=sn[2-3] SLURM_STEP_TASKS_PER_NODE=1(x2) SLURM_STEP_RESV_PORTS=12000-12003"
	run --separate-stderr plan 1 1 0
	[ "$status" -eq 0 ] || { echo "$stderr" >&2; false; }
	[[ "$output" == *'"addresses":["sn2:12000","sn3:12000"]'* ]]
}

@test "slurm: srun's tasks form their ring from the derived list alone, no --peers, no shared directory" {
	local r n l i=0
	NODES='sn[1-3]' TASKS='2,1,2' NTASKS=5
	printf 'allgather {rank}\nexpect 0 1 2 3 4\n' >"$T/script"
	# What srun does on the three nodes: block distribution, no --peers.
	: >"$T/tasks.sh"
	for n in 0 1 2; do
		for ((l = 0; l < (n == 1 ? 1 : 2); l++)); do
			echo "(env $(slurm_env $i $n $l) timeout 60 '$SR' run --timeout 30 -v" \
				"--script '$T/script' >'$T/t$i.out' 2>'$T/t$i.err'; echo \$? >'$T/t$i.status') &" >>"$T/tasks.sh"
			i=$((i + 1))
		done
	done
	echo wait >>"$T/tasks.sh"
	run in_private_net "$T/hosts" timeout 90 bash "$T/tasks.sh"
	[ "$status" -eq 0 ]
	for r in 0 1 2 3 4; do
		[ "$(cat "$T/t$r.status")" -eq 0 ] || { cat "$T/t$r.err" >&2; false; }
		grep -q '^line 2: expect = ok$' "$T/t$r.out"
		grep -q "slurm: 3 node(s) from SLURM_JOB_NODELIST, tasks from SLURM_TASKS_PER_NODE, ports from 47000: 5 addresses" "$T/t$r.err"
	done
	grep -q 'listening on 127\.0\.0\.3:47001' "$T/t4.err"
}

@test "slurm: a rank not where block distribution puts it, and layouts that do not add up, are named (exit 2)" {
	NODES='sn[1-3]' TASKS='2,1,2' NTASKS=5
	# cyclic: task 1 on node 1
	run --separate-stderr plan 1 1 0
	[ "$status" -eq 2 ]
	[[ "$stderr" == *"Slurm placed rank 1 as task 0 of node 1 (sn2), but the list from SLURM_JOB_NODELIST and SLURM_TASKS_PER_NODE has sn1:47001 there: the step must use block distribution (srun --distribution=block, the default)"* ]]
	TASKS='2,1'
	run --separate-stderr plan 0 0 0
	[ "$status" -eq 2 ]
	[[ "$stderr" == *"SLURM_TASKS_PER_NODE='2,1' gives tasks for 2 of the 3 nodes of the node list"* ]]
	TASKS='2,1,2' NTASKS=4
	run --separate-stderr plan 0 0 0
	[ "$status" -eq 2 ]
	[[ "$stderr" == *"the world size is 4 (SLURM_NTASKS) but slurm: lists 5 addresses"* ]] || { echo "$stderr" >&2; false; }
	NTASKS=5 STEP=SLURM_STEP_RESV_PORTS=12000
	run --separate-stderr plan 0 0 0
	[ "$status" -eq 2 ]
	[[ "$stderr" == *"node sn1 runs 2 tasks but only 1 ports from 12000 are there to give them"* ]]
	NODES='sn[3-1]' STEP=
	run --separate-stderr plan 0 0 0
	[ "$status" -eq 2 ]
	[[ "$stderr" == *"SLURM_JOB_NODELIST entry 1: 'sn[3-1]': a range ends before it starts"* ]]
	# outside Slurm, asked for by name
	run env -u SLURM_JOB_NODELIST -u SLURM_PROCID "$SR" run --peers slurm: --dry-run </dev/null
	[ "$status" -eq 2 ]
	[[ "$output" == *"--peers 'slurm:' needs a Slurm job step's environment (SLURM_JOB_NODELIST and SLURM_PROCID: run it under srun)"* ]]
}
