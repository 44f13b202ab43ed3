#!/usr/bin/env bats
# launch --hosts over real ssh: four network-namespace hosts, each with
# its own sshd (Debian's openssh-server, key authentication, listening on
# that host's address only), and a fifth namespace, the login node, where
# the launcher runs.  The hosts and their sshds are made once for the
# file (setup_file) and always removed (teardown_file).  Each case checks
# what a user sees (status, messages, output) and, for every failure,
# that nothing is left on any host: the pids each namespace held during
# the run, learned from `ip netns pids`, are all gone afterwards, and
# each namespace holds its sshd alone.

bats_require_minimum_version 1.5.0

load helpers

NETNS_TOOL=$BATS_TEST_DIRNAME/../../scripts/netns-hosts
BATS_TEST_TIMEOUT=${BATS_TEST_TIMEOUT:-120}

# The file's hosts: written by setup_file to $BATS_FILE_TMPDIR/env and
# read back by every test (setup), since bats runs each in a new shell.
setup_file() {
	local rc dir=$BATS_FILE_TMPDIR
	[ -x "$SR" ] || { echo "no binary at $SR: run make first" >&2; return 1; }
	[ -x /usr/sbin/sshd ] || { echo "sshd is not installed (Debian: openssh-server; scripts/install-deps installs it)" >&2; return 1; }
	command -v ssh >/dev/null || { echo "ssh is not installed (Debian: openssh-client)" >&2; return 1; }
	"$NETNS_TOOL" up 1 >"$dir/probe" 2>"$dir/netns.err" && rc=0 || rc=$?
	[ "$rc" -eq 77 ] && skip "no network namespaces here: $(cat "$dir/netns.err")"
	"$NETNS_TOOL" down "$(sed -n 's/^NETNS_ID=//p' "$dir/probe")"
	# teardown_file does not follow a setup_file that failed: undo here.
	hosts_up || { teardown_file; return 1; }
}

# hosts_up: the five namespaces, keys, and an sshd on hosts 1-4.
hosts_up() {
	local env i ns ip pid dir=$BATS_FILE_TMPDIR
	env=$("$NETNS_TOOL" up 5 2>"$dir/netns.err") || { cat "$dir/netns.err" >&2; return 1; }
	printf '%s\n' "$env" >"$dir/env"
	eval "$env"
	"$NETNS_TOOL" ssh-keys "$dir/keys" || return 1
	: >"$dir/sshd.pids"
	for i in 1 2 3 4; do
		eval "ns=\$NS_$i ip=\$IP_$i"
		pid=$("$NETNS_TOOL" sshd "$dir/keys" "$ns" "$ip" 3>&-) || return 1
		echo "$pid" >>"$dir/sshd.pids"
		echo "SSHD_$i=$pid" >>"$dir/env"
	done
}

teardown_file() {
	local pid id
	if [ -f "$BATS_FILE_TMPDIR/sshd.pids" ]; then
		while read -r pid; do
			kill "$pid" 2>/dev/null
		done <"$BATS_FILE_TMPDIR/sshd.pids"
	fi
	id=$(sed -n 's/^NETNS_ID=//p' "$BATS_FILE_TMPDIR/env" 2>/dev/null)
	[ -n "$id" ] && "$NETNS_TOOL" down "$id"
	return 0
}

setup() {
	# shellcheck disable=SC1091
	source "$BATS_FILE_TMPDIR/env"
	T=$BATS_TEST_TMPDIR
	SSH="ssh -F $BATS_FILE_TMPDIR/keys/ssh_config"
	NET=${IP_1%.*}
	LPID=
}

teardown() {
	[ -n "$LPID" ] && kill -9 "$LPID" 2>/dev/null
	kill_bg
	return 0
}

# launch_bg NAME ARGS...: `silvic-ring launch ARGS...` on the login node,
# in the background, stdin from $T/NAME.in when it exists; output in
# NAME.out and NAME.err.  BG is the job (a timeout as the backstop), LPID
# the launcher's own pid.
launch_bg() {
	local name=$1 pidfile=$T/$1.pid in=/dev/null
	shift
	[ -f "$T/$name.in" ] && in=$T/$name.in
	timeout 90 ip netns exec "$NS_5" bash -c 'echo $$ >"$0" && exec "$@"' \
		"$pidfile" "$SR" launch --ssh "$SSH" "$@" <"$in" \
		>"$T/$name.out" 2>"$T/$name.err" 3>&- &
	BG=$!
	BG_PIDS+=("$BG")
	LPID=$(wait_pidfile "$pidfile")
}

# launch_fg NAME ARGS...: the same, waited for; sets STATUS and MS (the
# milliseconds it took).
launch_fg() {
	local t0
	t0=$(date +%s%N)
	launch_bg "$@"
	job_end
	MS=$((($(date +%s%N) - t0) / 1000000))
}

# on_host I: the pids in host I's namespace but its sshd.
on_host() {
	local listener
	eval "listener=\$SSHD_$1"
	ip netns pids "$(eval echo "\$NS_$1")" | grep -vxF "$listener" || true
}

# running PID: a live process (not gone, not a zombie).
running() {
	local state
	state=$(sed -n 's/^State:[[:space:]]*\([A-Z]\).*/\1/p' "/proc/$1/status" 2>/dev/null)
	[ -n "$state" ] && [ "$state" != Z ] && [ "$state" != X ]
}

# learn_pids: every pid on hosts 1-4 now (agents, ranks, sshd sessions),
# into $T/learned, one "HOST PID ARGS" a line; RANK_PIDS_I the ranks'.
learn_pids() {
	local i pid
	: >"$T/learned"
	for i in 1 2 3 4; do
		for pid in $(on_host "$i"); do
			echo "$i $pid $(tr '\0' ' ' <"/proc/$pid/cmdline" 2>/dev/null)" >>"$T/learned"
		done
	done
	sed 's/^/# learned on host /' "$T/learned" >&3
}

# nothing_left [SECONDS]: within SECONDS (default 10) every learned pid
# is gone and every host holds its sshd alone.
nothing_left() {
	local limit=${1:-10} i left pid
	for ((i = 0; i < limit * 20; i++)); do
		left=
		while read -r _ pid _; do
			running "$pid" && left="$left $pid"
		done <"$T/learned"
		for h in 1 2 3 4; do
			for pid in $(on_host "$h"); do
				running "$pid" && left="$left $pid"
			done
		done
		[ -z "$left" ] && return 0
		sleep 0.05
	done
	echo "still running after ${limit}s:" >&2
	for pid in $left; do
		echo "  $pid: $(tr '\0' ' ' <"/proc/$pid/cmdline" 2>/dev/null)" >&2
	done
	return 1
}

# ranks_of HOST: the learned pids of HOST's ranks.
ranks_of() {
	awk -v h="$1" '$1 == h && / run / && !/ launch /{print $2}' "$T/learned"
}

# wait_lines FILE REGEX N [SECONDS]: N lines of FILE match.
wait_lines() {
	local i limit=${4:-30}
	for ((i = 0; i < limit * 20; i++)); do
		[ "$(grep -Ec -- "$2" "$1" 2>/dev/null)" -ge "$3" ] && return 0
		sleep 0.05
	done
	echo "timed out waiting for $3 lines /$2/ in $1:" >&2
	cat "$1" "${1%.out}.err" >&2
	return 1
}

show() {
	local f
	for f in "$@"; do
		echo "--- $f" >&2
		cat "$f" >&2
	done
}

# slow_job NAME RANKS ARGS...: launch ARGS... run with a script that
# sleeps past a barrier, once all RANKS ranks are past it; the pids of
# every host learned (learn_pids), RANKS ranks among them.
slow_job() {
	local name=$1 ranks=$2
	shift 2
	printf 'barrier\nsleep 60\nbarrier\n' >"$T/$name.in"
	launch_bg "$name" "$@" run --timeout 30
	wait_lines "$T/$name.out" 'line 1: barrier = ok' "$ranks"
	learn_pids
	[ "$(grep -c ' silvic-ring run ' "$T/learned")" -eq "$ranks" ] || { cat "$T/learned" >&2; false; }
}

# job_end: waits for the launcher; its status in STATUS.
job_end() {
	STATUS=0
	wait "$BG" || STATUS=$?
	LPID=
}

# were_stopped NAME RANK...: each RANK's sleep ended by the launcher's stop.
were_stopped() {
	local name=$1 r
	shift
	for r in "$@"; do
		grep -q "^silvic-ring: rank $r: .*interrupted while sleeping" "$T/$name.err" ||
			{ show "$T/$name.err"; false; }
	done
}

# ---------------------------------------------------------------- usage

@test "launch --hosts: options only hosts use, and bad host lists, are usage errors naming them" {
	run "$SR" launch -n 2 --ssh "ssh -p 2222" run
	[ "$status" -eq 2 ]
	[[ "$output" == *"launch: --ssh is for ranks on other hosts: add --hosts or --hostfile"* ]]
	run "$SR" launch -n 2 --fanout 4 run
	[ "$status" -eq 2 ]
	[[ "$output" == *"launch: --fanout is for ranks on other hosts"* ]]
	run "$SR" launch --hosts a,b --hostfile f run
	[ "$status" -eq 2 ]
	[[ "$output" == *"--hosts and --hostfile both name the hosts; give one"* ]]
	run "$SR" launch --hosts 'node[3-1]' run
	[ "$status" -eq 2 ]
	[[ "$output" == *"launch: --hosts entry 1: 'node[3-1]': a range ends before it starts"* ]]
	run "$SR" launch --hosts 'a,-oProxyCommand=x' run
	[ "$status" -eq 2 ]
	[[ "$output" == *"'-oProxyCommand=x' is not a host name"* ]]
	run "$SR" launch --hosts a:2,b -n 4 run
	[ "$status" -eq 2 ]
	[[ "$output" == *"launch: -n 4 is more than the 3 slot(s) of the 2 host(s) given"* ]]
	run "$SR" launch --hosts a:2 run --port 4000
	[ "$status" -eq 2 ]
	[[ "$output" == *"--port 4000 would be the same for the 2 ranks of one host"* ]]
	run "$SR" launch --hostfile "$T/none" run
	[ "$status" -eq 2 ]
	[[ "$output" == *"launch: --hostfile '$T/none': No such file or directory"* ]]
	printf 'a\nb cpus=4\n' >"$T/hf"
	run "$SR" launch --hostfile "$T/hf" run
	[ "$status" -eq 2 ]
	[[ "$output" == *"launch: --hostfile $T/hf:2: 'cpus=4' is not slots=N"* ]]
	run "$SR" launch --hosts a --fanout 0 run
	[ "$status" -eq 2 ]
	[[ "$output" == *"--fanout '0' is not a number of hosts from 1 to 1024"* ]]
	# The agent alone, by hand: it says what it is and waits for nothing.
	run timeout 60 "$SR" launch --agent </dev/null
	[ "$status" -eq 2 ]
	[[ "$output" == *"launch --agent: stdin ended before the orders did (it is what launch --hosts runs on each host)"* ]]
}

# ------------------------------------------------------------- running

@test "4 hosts run a script from stdin: every rank gets all of it, ranks consecutive per host, tagged" {
	local r
	{
		for ((r = 0; r < 3000; r++)); do
			echo "# padding line $r: more than a pipe holds, to every rank"
		done
		echo 'allreduce sum i64 {rank}'
		echo 'expect {world}*({world}-1)/2'
		echo 'allgather {rank}'
	} >"$T/job.in"
	[ "$(wc -c <"$T/job.in")" -gt 131072 ]
	launch_fg job -l --hosts "$IP_1,$IP_2:2,$IP_3,$IP_4" run --timeout 30 -v
	[ "$STATUS" -eq 0 ] || { show "$T/job.out" "$T/job.err"; false; }
	echo "# 5 ranks on 4 hosts over ssh, 3000-line script on stdin: ${MS}ms" >&3
	[ "$(wc -l <"$T/job.out")" -eq 15 ] || { show "$T/job.out"; false; }
	for r in 0 1 2 3 4; do
		grep -qx "\[$r\] line 3001: allreduce sum i64 = 10 (.*)" "$T/job.out"
		grep -qx "\[$r\] line 3002: expect = ok" "$T/job.out"
		grep -qx "\[$r\] line 3003: allgather = \[\"0\", \"1\", \"2\", \"3\", \"4\"\] (.*)" "$T/job.out"
	done
	# Each rank listens on its host's address: 1 and 2 share host 2.
	grep -q "^\[0\] silvic-ring: listening on $IP_1:" "$T/job.err"
	grep -q "^\[1\] silvic-ring: listening on $IP_2:" "$T/job.err"
	grep -q "^\[2\] silvic-ring: listening on $IP_2:" "$T/job.err"
	grep -q "^\[3\] silvic-ring: listening on $IP_3:" "$T/job.err"
	grep -q "^\[4\] silvic-ring: listening on $IP_4:" "$T/job.err"
	# The secret is on no command line: the agents are `launch --agent`.
	! grep -Eq '[0-9a-f]{64}' "$T/job.err"
}

@test "4 hosts: bench links and --json are rank 0's output alone, clean" {
	launch_fg links --hosts "$IP_1,$IP_2,$IP_3,$IP_4" bench links -e 256K --timeout 30
	[ "$STATUS" -eq 0 ] || { show "$T/links.out" "$T/links.err"; false; }
	# One row per link, each host to the next, untagged.
	grep -Eq "^ +0 $IP_1:[0-9]+ +1 $IP_2:[0-9]+ +262144 " "$T/links.out"
	grep -Eq "^ +1 $IP_2:[0-9]+ +2 $IP_3:[0-9]+ +262144 " "$T/links.out"
	grep -Eq "^ +2 $IP_3:[0-9]+ +3 $IP_4:[0-9]+ +262144 " "$T/links.out"
	grep -Eq "^ +3 $IP_4:[0-9]+ +0 $IP_1:[0-9]+ +262144 " "$T/links.out"
	grep -q '^# slowest link: rank' "$T/links.out"
	! grep -q '^\[' "$T/links.out"
	printf 'allreduce sum i64 1\n' >"$T/json.in"
	launch_fg json --hosts "$IP_1,$IP_2:2,$IP_3" run --json --timeout 30
	[ "$STATUS" -eq 0 ] || { show "$T/json.out" "$T/json.err"; false; }
	python3 - "$T/json.out" "$IP_1" "$IP_2" "$IP_3" <<'PY'
import json, sys
recs = [json.loads(l) for l in open(sys.argv[1])]
assert [r["rank"] for r in recs] == [0, 0], recs
s = recs[-1]
assert s["type"] == "summary" and s["exit"] == 0 and s["world"] == 4, s
hosts = [a.rsplit(":", 1)[0] for a in s["addresses"]]
assert hosts == [sys.argv[2], sys.argv[3], sys.argv[3], sys.argv[4]], hosts
PY
}

@test "a hostfile with slots and ranges: -n fills the slots in host order" {
	printf '# two hosts by range, two slots each\n%s.[1-2] slots=2\n%s.3:1   # one\n%s.4 slots=3 max_slots=8\n' \
		"$NET" "$NET" "$NET" >"$T/hostfile"
	printf 'allgather {rank}\n' >"$T/hf.in"
	launch_fg hf -n 6 --hostfile "$T/hostfile" run --json --timeout 30
	[ "$STATUS" -eq 0 ] || { show "$T/hf.out" "$T/hf.err"; false; }
	python3 - "$T/hf.out" "$NET" <<'PY'
import json, sys
s = [json.loads(l) for l in open(sys.argv[1])][-1]
net = sys.argv[2]
hosts = [a.rsplit(":", 1)[0] for a in s["addresses"]]
# 8 slots: 2, 2, 1, 3; six ranks fill the first five and one of the last.
want = [net + ".1"] * 2 + [net + ".2"] * 2 + [net + ".3", net + ".4"]
assert hosts == want, hosts
PY
	run "$SR" launch -n 9 --hostfile "$T/hostfile" run
	[ "$status" -eq 2 ]
	[[ "$output" == *"-n 9 is more than the 8 slot(s) of the 4 host(s) given"* ]]
}

# ------------------------------------------------------------- failures

@test "hosts that are down are named within the connect timeout, with ssh's words, and no rank starts" {
	printf 'allgather {rank}\n' >"$T/down.in"
	# .200 has no namespace (no answer at all); the login node has no sshd.
	launch_fg down -v --connect-timeout 2 --hosts "$IP_1,$IP_2,$NET.200,$IP_5" run --timeout 30
	echo "# two hosts down: status $STATUS after ${MS}ms" >&3
	[ "$STATUS" -eq 3 ] || { show "$T/down.out" "$T/down.err"; false; }
	grep -q "^silvic-ring: host $NET.200 (rank 2): ssh exited with status 255 before its agent answered: ssh: connect to host $NET.200 port 22: Connection timed out$" "$T/down.err" ||
		grep -q "^silvic-ring: host $NET.200 (rank 2): ssh exited with status 255 before its agent answered: ssh: connect to host $NET.200 port 22: No route to host$" "$T/down.err" ||
		{ show "$T/down.err"; false; }
	grep -q "^silvic-ring: host $IP_5 (rank 3): ssh exited with status 255 before its agent answered: ssh: connect to host $IP_5 port 22: Connection refused$" "$T/down.err"
	grep -q '^silvic-ring: launch: 2 of 4 host(s) did not answer; no rank was started$' "$T/down.err"
	# Within the connect timeout and the launcher's slack (10s) after it.
	[ "$MS" -le 12000 ]
	# The two hosts that answered started nothing, and are empty again.
	grep -q "host $IP_1: reached the launcher" "$T/down.err"
	! grep -q 'starting rank' "$T/down.err"
	[ ! -s "$T/down.out" ]
	: >"$T/learned"
	nothing_left
	# A binary that is not there is named too, with the remote shell's words.
	launch_fg nobin --remote-path /nonexistent/silvic-ring --hosts "$IP_1" run --timeout 30
	[ "$STATUS" -eq 3 ]
	grep -q "^silvic-ring: host $IP_1 (rank 0): ssh exited with status 127 before its agent answered: .*/nonexistent/silvic-ring: No such file or directory$" "$T/nobin.err" ||
		{ show "$T/nobin.err"; false; }
	# An agent that cannot reach the launcher back says so, through ssh.
	launch_fg back --launcher-address 127.0.0.1 --hosts "$IP_1" run --timeout 30
	[ "$STATUS" -eq 3 ]
	grep -q "^silvic-ring: host $IP_1 (rank 0): ssh exited with status 3 before its agent answered: silvic-ring: host $IP_1: cannot reach the launcher at 127.0.0.1 port [0-9]*: Connection refused$" "$T/back.err" ||
		{ show "$T/back.err"; false; }
	grep -q '^silvic-ring: launch: 1 of 1 host(s) did not answer; no rank was started$' "$T/back.err"
	nothing_left
}

@test "a remote rank SIGKILLed: the launcher names it, exits 137, and every rank on every host stops" {
	local victim
	slow_job kill 5 --grace 1 --hosts "$IP_1,$IP_2:2,$IP_3,$IP_4"
	victim=$(ranks_of 3)
	[ -n "$victim" ]
	kill -9 "$victim"
	job_end
	[ "$STATUS" -eq 137 ] || { show "$T/kill.err"; false; }
	grep -q "^silvic-ring: rank 3 (host $IP_3) failed with status 137; stopping the others$" "$T/kill.err"
	# The others were in their sleep, which the ring cannot end: the
	# launcher's stop did, on every other host.
	were_stopped kill 0 1 2 4
	nothing_left
}

@test "SIGINT to the launcher: exit 130, every rank stopped, nothing left on any host" {
	slow_job int 5 --hosts "$IP_1,$IP_2:2,$IP_3,$IP_4"
	[ "$(grep -c ' launch --agent' "$T/learned")" -eq 4 ]
	kill -INT "$LPID"
	job_end
	[ "$STATUS" -eq 130 ] || { show "$T/int.err"; false; }
	grep -q '^silvic-ring: interrupted; stopping the ranks$' "$T/int.err"
	were_stopped int 0 1 2 3 4
	nothing_left
}

@test "the launcher SIGKILLed, or its ssh to one host killed: no remote rank is left behind" {
	local ssh
	slow_job k9 5 --hosts "$IP_1,$IP_2:2,$IP_3,$IP_4"
	kill -9 "$LPID"
	nothing_left
	# One host's ssh killed: that host's agent sees its session end, the
	# launcher sees ssh gone and stops the others.
	slow_job drop 5 --hosts "$IP_1,$IP_2:2,$IP_3,$IP_4"
	ssh=$(pgrep -P "$LPID" -f " $IP_2 ")
	[ -n "$ssh" ]
	kill -9 "$ssh"
	job_end
	[ "$STATUS" -eq 5 ] || { show "$T/drop.err"; false; }
	were_stopped drop 0 3 4
	grep -q "^silvic-ring: host $IP_2 (ranks 1-2): ssh exited with status 137; stopping the others$" "$T/drop.err"
	nothing_left
}

@test "a host whose network is cut: its ranks stop by themselves, the launcher names it and stops the rest" {
	local t0 ms left i p
	slow_job cut 4 --keepalive 2 --hosts "$IP_1,$IP_2,$IP_3,$IP_4"
	t0=$(date +%s%N)
	ip -n "$NS_3" link set eth0 down
	# Host 3 can tell nobody: its agent and rank end on their own (the
	# sshd session waits for its network, which comes back below).
	for ((i = 0; i < 400; i++)); do
		left=$(awk '$1 == 3 && !/sshd/ {print $2}' "$T/learned" |
			while read -r p; do running "$p" && echo "$p"; done || true)
		[ -z "$left" ] && break
		sleep 0.05
	done
	ms=$((($(date +%s%N) - t0) / 1000000))
	echo "# host 3 cut off: its agent and rank gone after ${ms}ms (--keepalive 2)" >&3
	[ -z "$left" ] || { echo "still on host 3: $left" >&2; false; }
	job_end
	ip -n "$NS_3" link set eth0 up
	[ "$STATUS" -eq 5 ] || { show "$T/cut.err"; false; }
	grep -q "^silvic-ring: host $IP_3 (rank 2): no answer to keepalives: its network connection is gone; stopping the others$" "$T/cut.err" ||
		{ show "$T/cut.err"; false; }
	nothing_left 20
}

# ---------------------------------------------------------- the README

@test "README Across hosts: the --hosts and --hostfile lines as written, on the four hosts" {
	local cmd w=$T/w
	mkdir -p "$w/build"
	ln -s "$SR" "$w/build/silvic-ring"
	ln -s "$BATS_TEST_DIRNAME/../../examples" "$w/examples"
	cmd=$(readme_cmds 'launch --hosts ')
	[[ "$cmd" == *"'node[01-04]:2'"* ]]
	# The four test hosts for node01-04; the test's ssh keys.
	cmd=${cmd//"'node[01-04]:2'"/"'$NET.[1-4]:2'"}
	cmd=${cmd/launch /"launch --ssh '$SSH' "}
	run timeout 90 ip netns exec "$NS_5" bash -c "cd '$w' && $cmd" 3>&-
	[ "$status" -eq 0 ] || { echo "$output" >&2; false; }
	# eight ranks, two a host, each passing the smoke test's four expects
	# (untagged: across hosts lines are tagged only with -l)
	[ "$(grep -c '^line [0-9]*: expect = ok$' <<<"$output")" -eq 32 ] || { echo "$output" >&2; false; }
	cmd=$(readme_cmds 'launch --hostfile ')
	printf '# the test hosts\n%s.[1-4] slots=1\n' "$NET" >"$w/hosts"
	cmd=${cmd/launch /"launch --ssh '$SSH' "}
	run timeout 90 ip netns exec "$NS_5" bash -c "cd '$w' && $cmd -e 64K" 3>&-
	[ "$status" -eq 0 ] || { echo "$output" >&2; false; }
	[ "$(grep -Ec "^ +[0-3] $NET\.[1-4]:[0-9]+ +[0-3] $NET\.[1-4]:[0-9]+ +65536 " <<<"$output")" -eq 4 ] || { echo "$output" >&2; false; }
}
