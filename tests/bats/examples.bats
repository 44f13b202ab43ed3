#!/usr/bin/env bats
# examples/ and the README's commands, run on this machine as far as it
# allows: the Slurm batch script through a stand-in `srun` that starts
# the tasks here with Slurm's variables; the Kubernetes manifest parsed,
# then its command run as local processes with JOB_COMPLETION_INDEX set;
# the CI gate on real loopback ranks; the plot on a real `bench --json`;
# and the command lines of the README's set-up and "Using it" sections,
# so that the page cannot rot.  All traffic stays on loopback: where a
# command would listen on every interface, the test adds --host
# 127.0.0.1 and says so.

bats_require_minimum_version 1.5.0

load helpers

TOP=$(cd "$BATS_TEST_DIRNAME/../.." && pwd)
EX=$TOP/examples

setup() {
	[ -x "$SR" ] || { echo "no binary at $SR: run make first" >&2; return 1; }
	command -v python3 >/dev/null || { echo "python3 is needed to parse JSON" >&2; return 1; }
	T=$BATS_TEST_TMPDIR
	# a directory where the README's relative paths hold: build/silvic-ring,
	# examples/, and silvic-ring, srun on PATH
	W=$T/w
	mkdir -p "$W/build" "$W/bin" "$T/home"
	ln -s "$SR" "$W/build/silvic-ring"
	ln -s "$SR" "$W/bin/silvic-ring"
	ln -s "$EX" "$W/examples"
	write_srun >"$W/bin/srun"
	chmod +x "$W/bin/srun"
}

# A stand-in for Slurm's srun: starts `-n N` (else -N NODES times
# --ntasks-per-node, else SLURM_NTASKS) copies of the command here, each
# with Slurm's per-task variables, a new step id per call as Slurm gives
# each job step; then prints the tasks' output in rank order and exits
# with the first failure's status.  With -N it makes up the allocation's
# node list (sn1, sn2, ...: names the test's private /etc/hosts serves);
# with a node list each task gets its node and local id by block
# distribution, Slurm's default.
write_srun() {
	cat <<'EOF'
#!/bin/bash
set -u
n=${SLURM_NTASKS:-1} nodes= per=1
while [ $# -gt 0 ]; do
	case $1 in
	-n) n=$2; shift 2 ;;
	-N) nodes=$2; shift 2 ;;
	--ntasks-per-node) per=$2; shift 2 ;;
	*) break ;;
	esac
done
if [ -n "$nodes" ]; then
	n=$((nodes * per))
	export SLURM_JOB_NODELIST="sn[1-$nodes]" SLURM_TASKS_PER_NODE="$per(x$nodes)"
fi
# the tasks of each node, from SLURM_TASKS_PER_NODE ("2(x3),1")
counts=()
if [ -n "${SLURM_JOB_NODELIST:-}" ]; then
	IFS=, read -r -a items <<<"${SLURM_TASKS_PER_NODE:-}"
	for it in "${items[@]}"; do
		if [[ $it =~ ^([0-9]+)\(x([0-9]+)\)$ ]]; then
			for ((k = 0; k < BASH_REMATCH[2]; k++)); do counts+=("${BASH_REMATCH[1]}"); done
		else
			counts+=("$it")
		fi
	done
fi
state=${SRUN_STATE:?}
step=$(cat "$state/step" 2>/dev/null || echo 0)
echo $((step + 1)) >"$state/step"
export SLURM_JOB_ID=${SLURM_JOB_ID:-4242} SLURM_NTASKS=$n SLURM_STEP_ID=$step
pids=()
node=0 local=0
for ((i = 0; i < n; i++)); do
	if [ ${#counts[@]} -gt 0 ]; then
		while [ "$local" -ge "${counts[$node]}" ]; do node=$((node + 1)) local=0; done
	else
		local=$i
	fi
	SLURM_PROCID=$i SLURM_LOCALID=$local SLURM_NODEID=$node "$@" \
		>"$state/step$step.rank$i.out" 2>"$state/step$step.rank$i.err" </dev/null 3>&- &
	pids+=($!)
	local=$((local + 1))
done
status=0
for ((i = 0; i < n; i++)); do
	wait "${pids[$i]}" || { s=$?; [ "$status" -eq 0 ] && status=$s; }
done
for ((i = 0; i < n; i++)); do
	cat "$state/step$step.rank$i.out"
	cat "$state/step$step.rank$i.err" >&2
done
exit "$status"
EOF
}

# sn_hosts N: $T/hosts naming sn1..snN at 127.0.0.1..N, for in_private_net.
sn_hosts() {
	local i
	: >"$T/hosts"
	for ((i = 1; i <= $1; i++)); do
		echo "127.0.0.$i sn$i" >>"$T/hosts"
	done
}

# in_w CMD: runs the shell command line CMD in $W as a user would, with
# silvic-ring and srun on PATH and HOME in the test's directory.
in_w() {
	(cd "$W" && PATH="$W/bin:$PATH" HOME="$T/home" SRUN_STATE="$T" \
		timeout 120 bash -c "$1") 3>&-
}

show() {
	local f
	for f in "$@"; do
		echo "--- $f" >&2
		cat "$f" >&2 2>/dev/null
	done
}

# ------------------------------------------------ rank discovery

@test "a Kubernetes Indexed Job's JOB_COMPLETION_INDEX gives the rank; launchers before it win" {
	local i pids=()
	install -d -m 0700 "$T/ring"
	for i in 0 1 2; do
		echo 'allgather r{rank}' | env -u SILVIC_RING_RANK -u SILVIC_RING_WORLD \
			JOB_COMPLETION_INDEX=$i timeout 60 "$SR" run --peers "dir:$T/ring" \
			--token 11 --world 3 --host 127.0.0.1 -v >"$T/k$i.out" 2>"$T/k$i.err" 3>&- &
		pids+=($!)
		BG_PIDS+=($!)
	done
	for i in 0 1 2; do
		wait "${pids[$i]}" || { show "$T"/k*.err; false; }
	done
	grep -q "rank 1: rank 1 of 3 (a Kubernetes Indexed Job (JOB_COMPLETION_INDEX); world from --world)" "$T/k1.err" || { show "$T/k1.err"; false; }
	for i in 0 1 2; do
		grep -q '^line 1: allgather = \["r0", "r1", "r2"\]' "$T/k$i.out" || { show "$T/k$i.out"; false; }
	done
	# a malformed index is named
	run env -u SILVIC_RING_RANK JOB_COMPLETION_INDEX=x "$SR" run --world 3 --dry-run </dev/null
	[ "$status" -eq 2 ]
	[[ "$output" == *"JOB_COMPLETION_INDEX='x' is not a rank number (0-65535)"* ]]
	# torchrun's RANK, set too, comes first: the bad index is never read
	install -d -m 0700 "$T/ring2"
	run env -u SILVIC_RING_RANK RANK=2 WORLD_SIZE=3 JOB_COMPLETION_INDEX=x "$SR" run \
		--peers "dir:$T/ring2" --token 12 --host 127.0.0.1 --dry-run </dev/null
	[[ "$output" != *"JOB_COMPLETION_INDEX"* ]] || { echo "$output"; false; }
	[[ "$output" == *"rank 2: waiting for dir:$T/ring2"* ]] || { echo "$output"; false; }
}

# ------------------------------------------------ examples/

@test "examples/slurm.sbatch: the smoke test, then the link test, the list from Slurm's environment alone" {
	local st=0 r
	# The allocation sbatch would make: three nodes, a task on each.
	sn_hosts 3
	(cd "$W" && export PATH="$W/bin:$PATH" SRUN_STATE="$T" SLURM_JOB_ID=777 SLURM_NTASKS=3 \
		SLURM_JOB_NODELIST='sn[1-3]' SLURM_TASKS_PER_NODE='1(x3)' \
		SILVIC_RING="$SR" LINK_BYTES=256K LINK_THRESHOLD=0.001 &&
		in_private_net "$T/hosts" timeout 150 bash "$EX/slurm.sbatch" \
		--timeout 60 -v >"$T/slurm.out" 2>"$T/slurm.err" </dev/null 3>&-) || st=$?
	# LINK_THRESHOLD: loopback links on a busy machine differ by noise alone
	[ "$st" -eq 0 ] || { show "$T/slurm.out" "$T/slurm.err"; false; }
	# step 0: every rank passed every expect, ranks from SLURM_PROCID, the
	# list from the node list, each rank on its node's address
	for r in 0 1 2; do
		[ "$(grep -c '^line [0-9]*: expect = ok$' "$T/step0.rank$r.out")" -eq 4 ] || { show "$T/step0.rank$r.out"; false; }
		grep -q "rank $r: rank $r of 3 (Slurm (SLURM_PROCID); world from SLURM_NTASKS)" "$T/step0.rank$r.err" || { show "$T/step0.rank$r.err"; false; }
		grep -q "slurm: 3 node(s) from SLURM_JOB_NODELIST, tasks from SLURM_TASKS_PER_NODE, ports from 47000: 3 addresses" "$T/step0.rank$r.err"
		grep -q "listening on 127\.0\.0\.$((r + 1)):47000" "$T/step0.rank$r.err"
	done
	# step 1: the link table from rank 0 only, one row per link, by name
	for r in 0 1 2; do
		grep -Eq "^ +$r sn$((r + 1)):47000 +$(((r + 1) % 3)) sn$(((r + 1) % 3 + 1)):47000 +262144 " "$T/step1.rank0.out" || { show "$T/step1.rank0.out"; false; }
	done
	grep -q '^# slowest link: rank' "$T/step1.rank0.out"
	[ ! -s "$T/step1.rank1.out" ] && [ ! -s "$T/step1.rank2.out" ]
	# nothing shared: no directory was made
	[ -z "$(ls -A "$T/home")" ]
}

# k8s_facts: checks the manifests (parsed by Debian's python3-yaml, which
# scripts/install-deps installs) and writes the ConfigMap's files into
# $T/config; prints the completions, the mount path, the pods' names
# (JOB-N.SERVICE, one a line) and the command (tab-separated).
k8s_facts() {
	/usr/bin/python3 - "$EX/kubernetes" "$T/config" <<'PY'
import glob, os, re, sys
import yaml
where, config = sys.argv[1], sys.argv[2]
docs = []
for path in sorted(glob.glob(os.path.join(where, "*.yaml"))):
    docs += [d for d in yaml.safe_load_all(open(path)) if d]
kinds = {d["kind"]: d for d in docs}
svc, cm, job = kinds["Service"], kinds["ConfigMap"], kinds["Job"]
assert svc["spec"]["clusterIP"] == "None", "the Service is not headless"
assert svc["spec"]["publishNotReadyAddresses"] is True, svc["spec"]
spec = job["spec"]
assert spec["completionMode"] == "Indexed", spec
assert spec["parallelism"] == spec["completions"], spec
pod = spec["template"]["spec"]
assert pod["subdomain"] == svc["metadata"]["name"], pod
assert svc["spec"]["selector"] == {"job-name": job["metadata"]["name"]}
c = pod["containers"][0]
command = c["command"]
mount = c["volumeMounts"][0]["mountPath"]
assert pod["volumes"][0]["configMap"]["name"] == cm["metadata"]["name"]
completions, job_name = spec["completions"], job["metadata"]["name"]
svc_name, port = svc["metadata"]["name"], svc["spec"]["ports"][0]["port"]
# the fixed port: the Service's, the container's, the pattern's
assert c["ports"][0]["containerPort"] == port
assert svc["spec"]["ports"][0]["targetPort"] == port
# the pattern names each pod under the Service: JOB-{rank}.SERVICE:PORT
peers = command[command.index("--peers") + 1]
assert peers == "dns:%s-{rank}.%s:%d" % (job_name, svc_name, port), peers
# the world the command gives is the number of pods
assert command[command.index("--world") + 1] == str(completions), command
os.makedirs(config, exist_ok=True)
for name, body in cm["data"].items():
    open(os.path.join(config, name), "w").write(body)
print(completions)
print(mount)
print(" ".join("%s-%d.%s" % (job_name, i, svc_name) for i in range(completions)))
print("\t".join(command))
PY
}

@test "examples/kubernetes/: parsed, and its command run as local pods with JOB_COMPLETION_INDEX, found by name" {
	local facts n mount names cmd=() i
	facts=$(k8s_facts) || { echo "$facts" >&2; false; }
	n=$(sed -n 1p <<<"$facts")
	mount=$(sed -n 2p <<<"$facts")
	read -r -a names <<<"$(sed -n 3p <<<"$facts")"
	IFS=$'\t' read -r -a cmd <<<"$(sed -n 4p <<<"$facts")"
	[ "$n" -eq 4 ] && [ "${cmd[0]}" = silvic-ring ]
	# The pods' names as the headless Service's DNS would give them, in a
	# private /etc/hosts; each pod binds the fixed port on its own address.
	# The pods start one by one, each name appearing as its pod does, as
	# when the scheduler places them; the others come once the first has
	# said it waits for them.
	: >"$T/hosts"
	{
		for ((i = 0; i < n; i++)); do
			printf 'echo "127.0.0.%d %s" >>%q\n' $((i + 1)) "${names[$i]}" "$T/hosts"
			printf '(cd %q && PATH=%q env -u SILVIC_RING_RANK -u SILVIC_RING_WORLD JOB_COMPLETION_INDEX=%d timeout 90' \
				"$W" "$W/bin:$PATH" "$i"
			printf ' %q' "${cmd[@]//$mount/$T/config}" -v --progress-interval 0.5
			printf ' >%q 2>%q </dev/null; echo $? >%q) &\n' "$T/pod$i.out" "$T/pod$i.err" "$T/pod$i.status"
			[ "$i" -eq 0 ] && printf 'for ((j = 0; j < 1200; j++)); do grep -q "names resolve; missing" %q 2>/dev/null && break; sleep 0.05; done\n' "$T/pod0.err"
		done
		echo wait
	} >"$T/pods.sh"
	run in_private_net "$T/hosts" timeout 120 bash "$T/pods.sh"
	[ "$status" -eq 0 ] || { show "$T"/pod*.err; false; }
	for ((i = 0; i < n; i++)); do
		[ "$(cat "$T/pod$i.status")" -eq 0 ] || { show "$T/pod$i.err"; false; }
		grep -q "rank $i of 4 (a Kubernetes Indexed Job (JOB_COMPLETION_INDEX); world from --world)" "$T/pod$i.err" || { show "$T/pod$i.err"; false; }
		[ "$(grep -c '^line [0-9]*: expect = ok$' "$T/pod$i.out")" -eq 2 ] || { show "$T/pod$i.out"; false; }
		grep -q '^line 4: allgather = \["0", "1", "2", "3"\]' "$T/pod$i.out"
		grep -q "listening on 127\.0\.0\.$((i + 1)):47000" "$T/pod$i.err"
	done
	# The first pod waited for the others' names, and said which.
	grep -q "waiting for dns:silvic-ring-{rank}.silvic-ring:47000: 1 of 4 names resolve; missing silvic-ring-1.silvic-ring (Name or service not known), silvic-ring-2.silvic-ring, silvic-ring-3.silvic-ring; " "$T/pod0.err" ||
		{ show "$T/pod0.err"; false; }
}

@test "examples/ci-gate.sh: passes, fails below the threshold, refuses a gate that checks nothing" {
	local st=0
	(cd "$T" && SILVIC_RING="$SR" timeout 120 "$EX/ci-gate.sh" -n 2 0.000000001@16K \
		-b 4K -e 64K -n 2 -w 1 >"$T/gate.out" 2>"$T/gate.err" </dev/null 3>&-) || st=$?
	[ "$st" -eq 0 ] || { show "$T/gate.out" "$T/gate.err"; false; }
	grep -Eq '^ci-gate: passed: 5 row\(s\), check passed; --min-busbw 1e-09 GB/s on 3 row\(s\), lowest [0-9.]+ GB/s \(allreduce at (16384|32768|65536) B\)$' "$T/gate.out" || { show "$T/gate.out"; false; }
	# the records are kept as the artifact
	grep -q '"type":"summary"' "$T/busbw.json"
	st=0
	(cd "$T" && SILVIC_RING="$SR" ARTIFACT="$T/slow.json" timeout 120 "$EX/ci-gate.sh" \
		-n 2 1000000@16K -b 4K -e 64K -n 2 -w 1 >"$T/gate.out" 2>"$T/gate.err" </dev/null 3>&-) || st=$?
	[ "$st" -eq 6 ] || { show "$T/gate.out" "$T/gate.err"; false; }
	grep -q '^ci-gate: FAILED: 5 row(s), check passed; --min-busbw 1e+06 GB/s on 3 row(s)' "$T/gate.out" || { show "$T/gate.out"; false; }
	[ "$(grep -c '^ci-gate: below the threshold: allreduce f32 at ' "$T/gate.out")" -eq 3 ]
	st=0
	(cd "$T" && SILVIC_RING="$SR" ARTIFACT="$T/none.json" timeout 60 "$EX/ci-gate.sh" \
		-n 2 5@16M -b 4K -e 64K >"$T/gate.out" 2>"$T/gate.err" </dev/null 3>&-) || st=$?
	[ "$st" -eq 2 ] || { show "$T/gate.out" "$T/gate.err"; false; }
	grep -q -- "--min-busbw 5@16M: 16M is outside the sweep (4K to 64K)" "$T/gate.err"
}

@test "examples/plot-busbw.sh: an SVG and a PNG of busbw against size from bench --json" {
	command -v gnuplot >/dev/null || { echo "gnuplot is not installed: run scripts/install-deps" >&2; false; }
	timeout 120 "$SR" launch -n 2 bench all -b 8 -e 64K -f 8 -n 2 -w 1 --json \
		>"$T/bench.json" 2>"$T/bench.err" </dev/null 3>&- || { show "$T/bench.err"; false; }
	run timeout 60 "$EX/plot-busbw.sh" "$T/bench.json" "$T/busbw.svg"
	[ "$status" -eq 0 ] || { echo "$output" >&2; false; }
	[ -s "$T/busbw.svg" ]
	grep -q '<svg' "$T/busbw.svg"
	# one line a series, each half: the legend names them
	for s in "allreduce f32 sum" "allreduce f32 sum in place" "allgather f32" "broadcast f32 in place"; do
		grep -q ">$s<" "$T/busbw.svg" || { echo "no '$s' in the SVG" >&2; false; }
	done
	grep -q '>busbw (GB/s)<' "$T/busbw.svg"
	run timeout 60 "$EX/plot-busbw.sh" "$T/bench.json" "$T/busbw.png"
	[ "$status" -eq 0 ] || { echo "$output" >&2; false; }
	[ "$(head -c 8 "$T/busbw.png" | od -An -tx1 | tr -d ' \n')" = 89504e470d0a1a0a ]
	[ "$(stat -c %s "$T/busbw.png")" -gt 1000 ]
	# usage errors
	run "$EX/plot-busbw.sh" "$T/bench.json" "$T/busbw.gif"
	[ "$status" -eq 2 ]
	[[ "$output" == *"'$T/busbw.gif' is neither .svg nor .png"* ]]
	: >"$T/empty.json"
	run "$EX/plot-busbw.sh" "$T/empty.json" "$T/x.svg"
	[ "$status" -eq 1 ]
	[[ "$output" == *"no result records in $T/empty.json"* ]]
}

# ------------------------------------------------ the README's commands

@test "the README's command lines are each run by a test here" {
	local line missing=()
	# Each pattern is a command a test below runs.
	# (ssh.bats runs the launch --hosts and --hostfile lines.)
	local patterns=("make demo" "make check" "launch -n 4 run"
		"--print-address --peers ring.txt" "> ring.txt.new && mv ring.txt.new ring.txt"
		"launch --hosts " "launch --hostfile " "srun -N 4 " "install -d -m 0700 /tmp/ring"
		"mpirun -np 4 " "bench allreduce -b 8 -e 64M --json" "bench links"
		"bench --peers hosts.txt" "serve --listen" "--peers http://"
		"launch -n 4 bench connect" "bench pairs --peers hosts.txt")
	while IFS= read -r line; do
		local p hit=
		for p in "${patterns[@]}"; do
			[[ "$line" == *"$p"* ]] && hit=1
		done
		[ -n "$hit" ] || missing+=("$line")
	done < <(readme_cmds '')
	[ ${#missing[@]} -eq 0 ] || { printf 'README command no test runs: %s\n' "${missing[@]}" >&2; false; }
	[ "$(readme_cmds '' | wc -l)" -eq 19 ]
}

@test "README set-up: make demo runs a ring and every expect passes" {
	local cmd
	cmd=$(readme_cmds 'make demo')
	[ "$cmd" = "make demo" ]
	# `make check` is this suite; it is not run from inside itself
	[ "$(readme_cmds 'make check')" = "make check" ]
	# make demo builds (done: this is the built tree), then runs
	# scripts/demo on the binary; run that, not a make inside make check
	grep -q '^demo:' "$TOP/Makefile"
	grep -q '^	$(Q)$(MAKE) --no-print-directory all$' "$TOP/Makefile"
	grep -q '^	$(Q)scripts/demo $(B)/silvic-ring$' "$TOP/Makefile"
	run timeout 120 "$TOP/scripts/demo" "$SR" 3>&-
	[ "$status" -eq 0 ] || { echo "$output" >&2; false; }
	[[ "$output" == *"expect = ok"* ]]
}

@test "README Using it: four ranks on this machine, a script on stdin" {
	local cmd
	cmd=$(readme_cmds 'launch -n 4 run')
	run in_w "$cmd"
	[ "$status" -eq 0 ] || { echo "$output" >&2; false; }
	[ "$(grep -c '^\(\[[0-3]\] \)\?line 1: allreduce sum i64 = 4 6 ' <<<"$output")" -eq 4 ] || { echo "$output" >&2; false; }
}

@test "README Using it: two shells through a shared file print 127.0.0.1:PORT, then run" {
	local cmds=() a1 a2 st=0
	mapfile -t cmds < <(readme_cmds '--print-address --peers ring.txt')
	[ ${#cmds[@]} -eq 2 ]
	(cd "$W" && exec timeout 90 bash -c "${cmds[0]}" >"$T/shell1.out" 2>"$T/shell1.err" 3>&-) &
	BG_PIDS+=($!)
	local p1=$!
	(cd "$W" && exec timeout 90 bash -c "${cmds[1]}" >"$T/shell2.out" 2>"$T/shell2.err" 3>&-) &
	BG_PIDS+=($!)
	local p2=$!
	# each prints what the README says it prints
	wait_line "$T/shell1.out" '^127\.0\.0\.1:[0-9]+$' 30
	wait_line "$T/shell2.out" '^127\.0\.0\.1:[0-9]+$' 30
	a1=$(head -n 1 "$T/shell1.out")
	a2=$(head -n 1 "$T/shell2.out")
	cmd=$(readme_cmds '> ring.txt.new && mv ring.txt.new ring.txt')
	cmd=${cmd//127.0.0.1:PORT1/$a1}
	cmd=${cmd//127.0.0.1:PORT2/$a2}
	run in_w "$cmd"
	[ "$status" -eq 0 ]
	wait "$p1" || st=$?
	[ "$st" -eq 0 ] || { show "$T"/shell*.err; false; }
	wait "$p2" || st=$?
	[ "$st" -eq 0 ] || { show "$T"/shell*.err; false; }
	[ "$(grep -c '^line [0-9]*: expect = ok$' "$T/shell1.out")" -eq 4 ] || { show "$T/shell1.out"; false; }
	[ "$(grep -c '^line [0-9]*: expect = ok$' "$T/shell2.out")" -eq 4 ]
}

@test "README Using it: Slurm, with nothing shared" {
	local cmd r
	cmd=$(readme_cmds 'srun -N 4 ')
	# srun is the stand-in, making up the allocation's four nodes (sn1-4),
	# which the private /etc/hosts names; eight ranks, two a node (-v to
	# see where each listens).
	sn_hosts 4
	run in_private_net "$T/hosts" bash -c "$(declare -f in_w); W='$W' T='$T'; in_w \"\$1\"" _ "$cmd -v"
	[ "$status" -eq 0 ] || { echo "$output" >&2; false; }
	for r in 0 1 2 3 4 5 6 7; do
		[ "$(grep -c '^line [0-9]*: expect = ok$' "$T/step0.rank$r.out")" -eq 4 ] || { show "$T/step0.rank$r.out" "$T/step0.rank$r.err"; false; }
	done
	grep -q "slurm: 4 node(s) from SLURM_JOB_NODELIST, tasks from SLURM_TASKS_PER_NODE, ports from 47000: 8 addresses" "$T/step0.rank7.err"
	grep -q "listening on 127\.0\.0\.4:47001" "$T/step0.rank7.err"
}

@test "README Using it: Open MPI on one host, after making the dir: directory as shown" {
	local cmd
	command -v mpirun >/dev/null || { echo "mpirun is not installed: run scripts/install-deps" >&2; false; }
	# the test's own directory instead of /tmp/ring, shared by nobody
	cmd=$(readme_cmds 'install -d -m 0700 /tmp/ring')
	run in_w "${cmd//\/tmp\/ring/$T/ring}"
	[ "$status" -eq 0 ]
	[ "$(stat -c %a "$T/ring")" = 700 ]
	cmd=$(readme_cmds 'mpirun -np 4 ')
	# as root, with four ranks on fewer cores, mpirun needs to be told;
	# its own control traffic stays on loopback
	OMPI_ALLOW_RUN_AS_ROOT=1 OMPI_ALLOW_RUN_AS_ROOT_CONFIRM=1 \
		OMPI_MCA_rmaps_base_oversubscribe=1 OMPI_MCA_oob_tcp_if_include=lo \
		OMPI_MCA_btl_tcp_if_include=lo run in_w "${cmd//\/tmp\/ring/$T/ring}"
	[ "$status" -eq 0 ] || { echo "$output" >&2; false; }
	[ "$(grep -c '^line [0-9]*: expect = ok$' <<<"$output")" -eq 16 ] || { echo "$output" >&2; false; }
}

@test "README Using it: the benchmark and link test lines (smaller sizes)" {
	local cmd
	cmd=$(readme_cmds 'bench allreduce -b 8 -e 64M --json')
	# a later -e wins: the same command, a short sweep
	run in_w "$cmd -e 64K -n 2 -w 1 2>/dev/null"
	[ "$status" -eq 0 ] || { echo "$output" >&2; false; }
	grep -q '"type":"summary".*"check":"passed"' <<<"$output"
	cmd=$(readme_cmds 'launch -n 4 bench links')
	run in_w "$cmd -e 256K 2>/dev/null"
	[ "$status" -eq 0 ] || { echo "$output" >&2; false; }
	[ "$(grep -Ec '^(\[0\] )? +[0-3] 127\.0\.0\.1:[0-9]+ +[0-3] ' <<<"$output")" -eq 4 ] || { echo "$output" >&2; false; }
}

@test "README Using it: the gate line, two ranks meeting through hosts.txt" {
	local cmd a1 a2 st1=0 st2=0 p1 p2
	cmd=$(readme_cmds 'bench --peers hosts.txt')
	# Two ranks print their addresses, then hosts.txt is written; one row
	# of 16M (the gate's size) keeps it short.  Whether loopback makes 5
	# GB/s depends on the machine: either verdict is fine, saying what it
	# checked is not optional.
	(cd "$W" && exec timeout 90 bash -c "$cmd --host 127.0.0.1 --print-address -b 16M -e 16M -n 2 -w 1" \
		>"$T/g1.out" 2>"$T/g1.err" 3>&-) &
	p1=$!
	BG_PIDS+=($p1)
	(cd "$W" && exec timeout 90 bash -c "$cmd --host 127.0.0.1 --print-address -b 16M -e 16M -n 2 -w 1" \
		>"$T/g2.out" 2>"$T/g2.err" 3>&-) &
	p2=$!
	BG_PIDS+=($p2)
	wait_line "$T/g1.out" '^127\.0\.0\.1:[0-9]+$' 30
	wait_line "$T/g2.out" '^127\.0\.0\.1:[0-9]+$' 30
	a1=$(head -n 1 "$T/g1.out")
	a2=$(head -n 1 "$T/g2.out")
	printf '%s\n%s\n' "$a1" "$a2" >"$W/hosts.txt.new" && mv "$W/hosts.txt.new" "$W/hosts.txt"
	wait "$p1" || st1=$?
	wait "$p2" || st2=$?
	[[ "$st1" == [06] && "$st1" == "$st2" ]] || { show "$T"/g*.err; false; }
	cat "$T/g1.out" "$T/g2.out" >"$T/g.out"
	grep -Eq "^# --min-busbw 5 GB/s: 1 row\(s\) of 16M checked, lowest busbw [0-9.]+ GB/s \(allreduce f32 sum at 16M\): $([ "$st1" -eq 0 ] && echo passed || echo FAILED)$" "$T/g.out" || { show "$T/g.out"; false; }
}

@test "README Using it: bench connect on four ranks of this machine" {
	local cmd
	cmd=$(readme_cmds 'launch -n 4 bench connect')
	run in_w "$cmd"
	[ "$status" -eq 0 ] || { echo "$output" >&2; false; }
	grep -q '^# verdict: ok: all 12 connections reached' <<<"$output" || { echo "$output" >&2; false; }
}

# pairs_two CMD NAME: two ranks of the README's bench pairs command line
# CMD meeting through hosts.txt (their --print-address lines), small
# transfers; both statuses in ST1 ST2.  Rank 0's stdout goes where CMD
# sends it (a "> FILE" at its end, else $T/NAME1.out), rank 1's to
# FILE.2 (or $T/NAME2.out).
pairs_two() {
	local cmd=$1 name=$2 out1 out2 p1 p2
	cmd=${cmd/bench pairs/bench pairs --host 127.0.0.1 --print-address -e 1M -n 2 -w 0}
	if [[ "$cmd" =~ \>\ ([^ ]+)$ ]]; then
		out1=$W/${BASH_REMATCH[1]}
		out2=$out1.2
		cmd=${cmd% > *}
	else
		out1=$T/${name}1.out
		out2=$T/${name}2.out
	fi
	rm -f "$W/hosts.txt" "$out1" "$out2"
	(cd "$W" && exec timeout 90 bash -c "$cmd" >"$out1" 2>"$T/${name}1.err" 3>&-) &
	p1=$!
	BG_PIDS+=($p1)
	(cd "$W" && exec timeout 90 bash -c "$cmd" >"$out2" 2>"$T/${name}2.err" 3>&-) &
	p2=$!
	BG_PIDS+=($p2)
	# The address: a line of its own, or with --json a record.
	wait_line "$out1" '^(\{.*"address":")?127\.0\.0\.1:[0-9]+' 30
	wait_line "$out2" '^(\{.*"address":")?127\.0\.0\.1:[0-9]+' 30
	printf '%s\n%s\n' "$(head -n 1 "$out1" | grep -Eo '127\.0\.0\.1:[0-9]+')" \
		"$(head -n 1 "$out2" | grep -Eo '127\.0\.0\.1:[0-9]+')" >"$W/hosts.txt.new" &&
		mv "$W/hosts.txt.new" "$W/hosts.txt"
	ST1=0 ST2=0
	wait "$p1" || ST1=$?
	wait "$p2" || ST2=$?
}

@test "README Using it: bench pairs with an SVG, then against a baseline, two ranks meeting through hosts.txt" {
	local cmd
	cmd=$(readme_cmds 'bench pairs --peers hosts.txt --svg')
	pairs_two "$cmd" svg
	# Two ranks on one machine: a verdict either way; what matters is
	# that they agree and rank 0 drew the matrix.
	[[ "$ST1" == [06] && "$ST1" == "$ST2" ]] || { show "$T"/svg*.err; false; }
	python3 -c 'import sys, xml.etree.ElementTree as E; E.parse(sys.argv[1])' "$W/m.svg"
	grep -q 'bench pairs' "$W/m.svg"
	# An earlier run's JSON as last week's (without rank 0's address).
	cmd=$(readme_cmds 'bench pairs --peers hosts.txt --svg')
	pairs_two "${cmd/--svg m.svg/--json > week.json}" base
	[[ "$ST1" == [06] && "$ST1" == "$ST2" ]] || { show "$T"/base*.err; false; }
	tail -n +2 "$W/week.json" >"$W/last-week.json"
	cmd=$(readme_cmds 'bench pairs --peers hosts.txt --baseline')
	pairs_two "$cmd" today
	[[ "$ST1" == [06] && "$ST1" == "$ST2" ]] || { show "$T"/today*.err; false; }
	# Rank 0's today.json: its address, then the records, the verdict
	# against last week's last.
	tail -n +2 "$W/today.json" | python3 -c '
import json, sys
recs = [json.loads(l) for l in sys.stdin if l.strip()]
assert recs[-1]["type"] == "verdict" and recs[-1]["baseline"] == "last-week.json", recs[-1]
assert len([r for r in recs if r["type"] == "pair"]) == 2, recs
'
}

@test "README Using it: the CI rendezvous over HTTP (serve on loopback, port 0)" {
	local cmd url i pids=()
	"$SR" --version | grep -q 'http rendezvous: yes' || { echo "$SR was built without HTTP rendezvous" >&2; false; }
	head -c 32 /dev/urandom >"$W/key"
	cp "$EX/smoke.txt" "$W/check.txt"
	cmd=$(readme_cmds 'serve --listen')
	# loopback and a port the kernel picks, not 0.0.0.0:8470
	cmd=${cmd//0.0.0.0:8470/127.0.0.1:0}
	(cd "$W" && exec bash -c "exec $cmd" >"$T/serve.out" 2>"$T/serve.err" 3>&-) &
	BG_PIDS+=($!)
	wait_line "$T/serve.out" '^http://127\.0\.0\.1:[0-9]+/$' 30
	url=$(head -n 1 "$T/serve.out")
	cmd=$(readme_cmds '--peers http://')
	cmd=${cmd//http:\/\/HOST:8470\//$url}
	for i in 0 1 2 3; do
		(cd "$W" && CI_JOB_ID=readme exec timeout 90 bash -c "$cmd --host 127.0.0.1" \
			>"$T/ci$i.out" 2>"$T/ci$i.err" 3>&-) &
		pids+=($!)
		BG_PIDS+=($!)
	done
	for i in 0 1 2 3; do
		wait "${pids[$i]}" || { show "$T"/ci*.err "$T/serve.err"; false; }
	done
	for i in 0 1 2 3; do
		[ "$(grep -c '^line [0-9]*: expect = ok$' "$T/ci$i.out")" -eq 4 ] || { show "$T/ci$i.out"; false; }
	done
}
