# Shared by the HTTP suites (http.bats, http_dos.bats): the server and
# ranks on loopback, started in the background with fd 3 closed,
# remembered in pids and killed by pid in teardown.

# http_setup: the binary, curl and an HTTP build, or fail loudly.
http_setup() {
	bin=${SR_BUILD_DIR:-$BATS_TEST_DIRNAME/../../build}/silvic-ring
	if [ ! -x "$bin" ]; then
		echo "no binary at $bin: run make first" >&2
		return 1
	fi
	command -v curl >/dev/null || { echo "curl is not installed" >&2; return 1; }
	if ! "$bin" --version | grep -q 'http rendezvous: yes'; then
		echo "$bin was built without HTTP rendezvous" >&2
		return 1
	fi
	T=$BATS_TEST_TMPDIR
	pids=()
}

teardown() {
	local p
	for p in "${pids[@]}"; do
		kill "$p" 2>/dev/null
		wait "$p" 2>/dev/null
	done
	return 0
}

# wait_for FILE REGEX [SECONDS]: until a line of FILE matches, or fail.
wait_for() {
	local file=$1 re=$2 deadline=$((SECONDS + ${3:-10}))
	until grep -Eq -- "$re" "$file" 2>/dev/null; do
		if [ $SECONDS -ge $deadline ]; then
			echo "no line matching '$re' in $file after ${3:-10}s:" >&2
			cat "$file" >&2
			return 1
		fi
		sleep 0.02
	done
}

# start_server [OPTIONS]: serve -$SERVE_VERBOSE (default vv) in the
# background; sets url (with the trailing slash) and server_pid.
start_server() {
	"$bin" serve "-${SERVE_VERBOSE:-vv}" "$@" >"$T/serve.out" 2>"$T/serve.err" 3>&- &
	server_pid=$!
	pids+=("$server_pid")
	wait_for "$T/serve.out" '^http://' 10 || return 1
	url=$(head -n 1 "$T/serve.out")
}

# start_rank NAME SCRIPT ARGS...: a `run` rank on 127.0.0.1 in the
# background, its output in $T/NAME.out and $T/NAME.err; its pid in
# pid_NAME.
start_rank() {
	local name=$1 script=$2
	shift 2
	timeout 60 "$bin" run --host 127.0.0.1 "$@" <"$script" \
	    >"$T/$name.out" 2>"$T/$name.err" 3>&- &
	pids+=($!)
	printf -v "pid_$name" '%s' $!
}

# finish NAME: waits for rank NAME; its exit status in status_NAME.
finish() {
	local pid_var=pid_$1 rc=0
	wait "${!pid_var}" || rc=$?
	printf -v "status_$1" '%s' "$rc"
}

# progress JOB: what the server says of JOB now.
progress() {
	curl -s --max-time 5 "${url}jobs/$1"
}

# wait_progress JOB TEXT [SECONDS]
wait_progress() {
	local deadline=$((SECONDS + ${3:-10}))
	until progress "$1" | grep -qF -- "$2"; do
		if [ $SECONDS -ge $deadline ]; then
			echo "job $1 never reached '$2': $(progress "$1")" >&2
			return 1
		fi
		sleep 0.02
	done
}

# expect_ring SUM NAMES...: every rank exited 0 with that sum.
expect_ring() {
	local sum=$1 n s
	shift
	for n in "$@"; do
		finish "$n"
		s=status_$n
		if [ "${!s}" != 0 ] ||
		    ! grep -q "line 1: allreduce sum i64 = $sum" "$T/$n.out"; then
			echo "rank $n: status ${!s}" >&2
			cat "$T/$n.out" "$T/$n.err" >&2
			return 1
		fi
	done
}
