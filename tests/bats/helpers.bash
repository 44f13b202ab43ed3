# Shared by the bats suites: the binary, background ranks with pids
# remembered, waiting for a line with a deadline, free ports.

SR=${SR_BUILD_DIR:-$BATS_TEST_DIRNAME/../../build}/silvic-ring
BG_PIDS=()

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

# free_ports N: N ports free on 127.0.0.1 right now, one a line.
free_ports() {
	python3 - "$1" <<'PY'
import socket, sys
socks = []
for _ in range(int(sys.argv[1])):
    s = socket.socket()
    s.bind(("127.0.0.1", 0))
    socks.append(s)
for s in socks:
    print(s.getsockname()[1])
PY
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
}

teardown() {
	kill_bg
}
