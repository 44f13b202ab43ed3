# Shared by the bats suites: the binary, background ranks with pids
# remembered, waiting for a line with a deadline, ports: port 0 with
# --address-file and a list published afterwards, or ports held.

SR=${SR_BUILD_DIR:-$BATS_TEST_DIRNAME/../../build}/silvic-ring
BG_PIDS=()
# A caller's choice of paths (launch -n sets it where it decides) is not
# the tests': each test that cares says so.
unset SILVIC_RING_SHARED_CORES

# bg NAME CMD...: runs CMD in the background, stdout to $BATS_TEST_TMPDIR/NAME.out,
# stderr to NAME.err, and remembers its pid (in $BG_PID and for teardown).
bg() {
	local name=$1
	shift
	"$@" >"$BATS_TEST_TMPDIR/$name.out" 2>"$BATS_TEST_TMPDIR/$name.err" 3>&- &
	BG_PID=$!
	BG_PIDS+=("$BG_PID")
}

# wait_line FILE REGEX [SECONDS]: waits until FILE has a line matching REGEX.
wait_line() {
	local file=$1 re=$2 limit=${3:-20} i
	for ((i = 0; i < limit * 20; i++)); do
		grep -Eq -- "$re" "$file" 2>/dev/null && return 0
		sleep 0.05
	done
	echo "timed out after ${limit}s waiting for /$re/ in $file:" >&2
	cat "$file" >&2 2>/dev/null
	return 1
}

# wait_pidfile FILE: the pid a process wrote to FILE (bash -c 'echo $$
# >FILE && exec ...': its own pid, whatever runs it), once it has, within
# 10s.
wait_pidfile() {
	local i
	for ((i = 0; i < 200; i++)); do
		[ -s "$1" ] && { cat "$1"; return 0; }
		sleep 0.05
	done
	echo "no pid in $1 after 10s" >&2
	return 1
}

# need_private_net: the binary and unshare(1), for in_private_net.
need_private_net() {
	[ -x "$SR" ] || { echo "no binary at $SR: run make first" >&2; return 1; }
	command -v unshare >/dev/null || { echo "unshare is not installed (Debian: util-linux)" >&2; return 1; }
}

# wait_exit PID [SECONDS]: waits for a background pid; sets WAIT_STATUS.
wait_exit() {
	local pid=$1 limit=${2:-30} i
	for ((i = 0; i < limit * 20; i++)); do
		if ! kill -0 "$pid" 2>/dev/null; then
			WAIT_STATUS=0
			wait "$pid" || WAIT_STATUS=$?
			return 0
		fi
		sleep 0.05
	done
	echo "pid $pid still running after ${limit}s" >&2
	return 1
}

# free_ports N: N ports of 127.0.0.1, one a line, held until the test
# ends.  A holder in the background keeps each bound (SO_REUSEADDR, never
# listening): the kernel then hands none of them to anyone else, neither
# as a connect's ephemeral port nor to a bind to port 0, yet a rank, which
# binds with SO_REUSEADDR, can bind and listen on it.  Only for lists that
# must be complete before the ranks bind (a static list is the subject);
# otherwise start the ranks on port 0 with --address-file (rank_address,
# publish_list).  The holder goes in kill_bg, or by itself once this
# test's process has ended.
free_ports() {
	local file i
	file=$(mktemp "$BATS_TEST_TMPDIR/.ports.XXXXXX") || return 1
	rm -f "$file"
	# The path goes in the environment: nothing on the holder's command
	# line names this test's directory (faults.bats' no_process_left).
	HOLD_FILE=$file python3 - "$1" "$$" >/dev/null 2>&1 3>&- <<'PY' &
import os, socket, sys, time
socks = []
for _ in range(int(sys.argv[1])):
    s = socket.socket()
    s.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
    s.bind(("127.0.0.1", 0))
    socks.append(s)
out = os.environ["HOLD_FILE"]
with open(out + ".tmp", "w") as f:
    f.write("".join("%d\n" % s.getsockname()[1] for s in socks))
os.rename(out + ".tmp", out)
watched, deadline = int(sys.argv[2]), time.monotonic() + 3600
while time.monotonic() < deadline:
    try:
        os.kill(watched, 0)
    except ProcessLookupError:
        break
    time.sleep(0.2)
PY
	echo "$!" >>"$BATS_TEST_TMPDIR/.port-holders"
	for ((i = 0; i < 400; i++)); do
		[ -s "$file" ] && break
		sleep 0.05
	done
	cat "$file" || { echo "free_ports: no ports held after 20s" >&2; return 1; }
}

# rank_address R [SECONDS]: the address a rank given --address-file
# $BATS_TEST_TMPDIR/addr.R wrote there, once it has (start it with
# --host 127.0.0.1, no --port: port 0).
rank_address() {
	wait_line "$BATS_TEST_TMPDIR/addr.$1" '^.+:[0-9]+$' "${2:-30}" >/dev/null || return 1
	head -n 1 "$BATS_TEST_TMPDIR/addr.$1"
}

# publish_ranks FILE N: publish_list FILE with the addresses of ranks 0
# to N-1 (rank_address), once all have written them.
publish_ranks() {
	local file=$1 n=$2 r a addrs=()
	for ((r = 0; r < n; r++)); do
		a=$(rank_address "$r") || return 1
		addrs+=("$a")
	done
	publish_list "$file" "${addrs[@]}"
}

# publish_list FILE ADDRESS...: the list, one address a line, written
# atomically (ranks already wait for it and must never read half).
publish_list() {
	local file=$1
	shift
	printf '%s\n' "$@" >"$file.tmp" && mv "$file.tmp" "$file"
}

kill_bg() {
	local pid
	for pid in "${BG_PIDS[@]}"; do
		kill -9 "$pid" 2>/dev/null || true
	done
	for pid in "${BG_PIDS[@]}"; do
		wait "$pid" 2>/dev/null || true
	done
	BG_PIDS=()
	if [ -f "$BATS_TEST_TMPDIR/.port-holders" ]; then
		while read -r pid; do
			kill "$pid" 2>/dev/null || true
		done <"$BATS_TEST_TMPDIR/.port-holders"
		rm -f "$BATS_TEST_TMPDIR/.port-holders"
	fi
}

teardown() {
	kill_bg
}

# in_private_net HOSTS CMD...: runs CMD in a network namespace of its
# own (loopback alone, up) and a mount namespace where /etc/hosts is the
# file HOSTS and names resolve from it alone (nsswitch "hosts: files"):
# fixed ports and names of the test's own, and nothing that reaches past
# this machine.  HOSTS is bind-mounted, so lines appended to it later
# (in place: never write it by rename) are seen at once.  A machine with
# no /etc/hosts at all (a minbase chroot has none) has nothing to mount
# on: there the namespace's /etc is a copy of the machine's, the missing
# files added, and the machine's own /etc is left as it was.
#
# With PRIVATE_RESOLV=FILE, names not in HOSTS go on to DNS ("hosts:
# files dns") as FILE, a resolv.conf, says: a server the test runs in
# the namespace itself (its loopback is all there is).
in_private_net() {
	local hosts=$1 nss etc=- resolv=${PRIVATE_RESOLV:--} f
	shift
	nss=$(mktemp "$BATS_TEST_TMPDIR/.nsswitch.XXXXXX") || return 1
	printf 'hosts: files%s\n' "$([ "$resolv" = - ] || echo ' dns')" >"$nss"
	if [ ! -e /etc/hosts ] || { [ "$resolv" != - ] && [ ! -e /etc/resolv.conf ]; }; then
		etc=$(mktemp -d "$BATS_TEST_TMPDIR/.etc.XXXXXX") || return 1
		cp -a /etc/. "$etc/" || return 1
		# Either may be missing, or a symlink to nothing (a resolver's
		# file in /run): a file of its own to mount on.
		for f in hosts resolv.conf; do
			[ -e "$etc/$f" ] || { rm -f "$etc/$f" && : >"$etc/$f"; } || return 1
		done
	fi
	unshare --mount --net --propagation private bash -c \
		'ip link set lo up &&
		{ [ "$2" = - ] || mount --bind "$2" /etc; } &&
		mount --bind "$0" /etc/hosts &&
		{ [ "$3" = - ] || mount --bind "$3" /etc/resolv.conf; } &&
		mount --bind "$1" /etc/nsswitch.conf && shift 3 && exec "$@"' \
		"$hosts" "$nss" "$etc" "$resolv" "$@"
}

# readme_cmds TEXT: the command lines of the README's set-up and "Using
# it" sections that contain TEXT (all of them for ''), trailing comments
# dropped, one a line.
readme_cmds() {
	python3 - "$BATS_TEST_DIRNAME/../../README.md" "$1" <<'PY'
import re, sys
text = open(sys.argv[1]).read()
part = text[text.index("\n## Set-up"):text.index("\n## Examples")]
for block in re.findall(r"```sh\n(.*?)```", part, re.S):
    for line in block.splitlines():
        line = re.sub(r"\s{2,}#\s.*$", "", line).rstrip()
        if line and not line.startswith("#") and sys.argv[2] in line:
            print(line)
PY
}
