#!/usr/bin/env bats
# The HTTP rendezvous server under a misbehaving client, dead ranks and
# reruns: `silvic-ring serve` on 127.0.0.1, the attacker
# (scripts/http-load --attack) from 127.0.0.2 so that the per-client
# limits tell it from the ranks, all on loopback.  Every server, rank and
# attacker is started here in the background with fd 3 closed,
# remembered, and killed by pid in teardown.

load http_helpers

setup() {
	http_setup || return 1
	load_script=$BATS_TEST_DIRNAME/../../scripts/http-load
	command -v python3 >/dev/null || { echo "python3 is not installed" >&2; return 1; }
	printf 'allreduce sum i64 1\nexpect 4\n' >"$T/script4"
	printf 'allreduce sum i64 1\nexpect 3\n' >"$T/script3"
	printf 'allreduce sum i64 1\nexpect 2\n' >"$T/script2"
	SERVE_VERBOSE=v
}

# attack MODE [OPTIONS]: the attacker from 127.0.0.2, until its first
# report.
attack() {
	local mode=$1
	shift
	"$load_script" --attack "$mode" --url "$url" --from 127.0.0.2 "$@" \
	    >"$T/attack.out" 2>"$T/attack.err" 3>&- &
	pids+=($!)
	wait_for "$T/attack.out" '^attack: ' 60 || { cat "$T/attack.err" >&2; return 1; }
}

# start_bare_rank NAME SCRIPT ARGS...: as start_rank, but pid_NAME is the
# rank itself (no timeout(1) in between), for SIGKILL; its --timeout
# bounds it.
start_bare_rank() {
	local name=$1 script=$2
	shift 2
	"$bin" run --host 127.0.0.1 "$@" <"$script" \
	    >"$T/$name.out" 2>"$T/$name.err" 3>&- &
	pids+=($!)
	printf -v "pid_$name" '%s' $!
}

# four_ranks JOB [RUN OPTIONS]: a 4-rank job through the server; the
# ring must form within the ranks' 10 s rendezvous timeout.
four_ranks() {
	local job=$1 r
	shift
	for r in 0 1 2 3; do
		start_rank "$job$r" "$T/script4" --peers "${url}jobs/$job" \
		    --world 4 --timeout 10 "$@"
	done
	expect_ring 4 "${job}0" "${job}1" "${job}2" "${job}3"
}

token_file() {
	printf 'dos-s3cret\n' >"$T/token"
	chmod 600 "$T/token"
}

# ----------------------------------------------------------- the attacks

@test "dos: a 4-rank job forms while one client holds 4,200 idle connections" {
	start_server
	attack idle --count 4200
	four_ranks idle
	# The server kept 256 of them (--max-client-connections) and
	# closed the rest at once.
	grep -E '^attack: tried 4200 idle connections from 127\.0\.0\.2 .*: 256 open' "$T/attack.out"
	wait_for "$T/serve.err" 'closed [0-9]+ connection\(s\) at once in the last 5s: over --max-client-connections 256 from one address' 20
}

@test "dos: with --token-file, a 4-rank job forms while one client holds 4,200 idle connections" {
	token_file
	start_server --token-file "$T/token"
	attack idle --count 4200
	export SILVIC_RING_HTTP_TOKEN_FILE=$T/token
	four_ranks idlet
	unset SILVIC_RING_HTTP_TOKEN_FILE
	wait_for "$T/serve.err" 'closed [0-9]+ connection\(s\) at once' 20
}

@test "dos: a 4-rank job forms while one client has created 1,024 junk jobs" {
	start_server
	attack jobs --count 1024
	four_ranks junk
	grep -E '^attack: asked for 1024 jobs from 127\.0\.0\.2 .*: 64 held, [0-9]+ refused' "$T/attack.out"
	grep -F 'answered 127.0.0.2 with 429: 127.0.0.2 created 64 jobs that are not finished, the limit for one client (--max-client-jobs); try again later' "$T/serve.err"
	# The error answers beyond the first ten are summed up, not listed.
	wait_for "$T/serve.err" '[0-9]+ more error answer\(s\) not shown in the last 5s' 20
	[ "$(grep -c 'answered 127.0.0.2 with 429' "$T/serve.err")" -le 20 ]
}

@test "dos: with --token-file, a 4-rank job forms while a client with the token has created 1,024 junk jobs" {
	token_file
	start_server --token-file "$T/token"
	attack jobs --count 1024 --token-file "$T/token"
	export SILVIC_RING_HTTP_TOKEN_FILE=$T/token
	four_ranks junkt
	unset SILVIC_RING_HTTP_TOKEN_FILE
	grep -E '^attack: asked for 1024 jobs .*: 64 held' "$T/attack.out"
	grep -F 'answered 127.0.0.2 with 429' "$T/serve.err"
}

@test "dos: a connection that trickles its request is closed after --request-timeout" {
	start_server --request-timeout 1
	port=${url##*:}
	port=${port%/}
	# One byte of a request line every 0.2 s: each byte restarts
	# libmicrohttpd's own idle timeout, so only the request deadline
	# ends it.  The client gives up after 30 s.
	run timeout 60 python3 - "$port" <<'EOF'
import socket, sys, time
s = socket.create_connection(("127.0.0.1", int(sys.argv[1])))
start = time.monotonic()
try:
    for b in b"GET /jobs/slow HTTP/1.1\r\nX-Padding: " + b"a" * 1000:
        s.send(bytes([b]))
        if time.monotonic() - start > 30:
            print("still open after 30s")
            sys.exit(1)
        time.sleep(0.2)
    print("the whole request went in")
    sys.exit(1)
except OSError as e:
    print(f"closed by the server: {e.strerror}")
EOF
	[ "$status" -eq 0 ]
	[[ $output == "closed by the server: "* ]]
	wait_for "$T/serve.err" 'closed 1 connection\(s\) in the last 5s that sent no complete request within --request-timeout 1s' 20
}

# --------------------------------------------------- leases and reruns

@test "rerun: ranks SIGKILLed while the job forms leave nothing behind; a rerun forms" {
	start_server
	start_bare_rank k0 "$T/script3" --peers "${url}jobs/k" --world 3 --timeout 30
	start_bare_rank k1 "$T/script3" --peers "${url}jobs/k" --world 3 --timeout 30
	wait_progress k "not yet: 2 of 3 ranks; missing 2"
	kill -KILL "$pid_k0" "$pid_k1"
	finish k0
	finish k1
	# At once, without waiting for the server to notice: the rank that
	# would complete the job must not get the dead addresses.
	for r in 0 1 2; do
		start_rank "again$r" "$T/script3" --peers "${url}jobs/k" \
		    --world 3 --timeout 5
	done
	expect_ring 3 again0 again1 again2
	[ "$(grep -c 'job k: rank [01] (127\.0\.0\.1:[0-9]*) lapsed: it closed its connection while waiting' "$T/serve.err")" -eq 2 ]
	[ "$(grep -c 'with 409' "$T/serve.err")" -eq 0 ]
}

@test "rerun: a job that formed and was killed runs again under the same name" {
	start_server
	printf 'barrier\nsleep 60\nbarrier\n' >"$T/slow"
	start_bare_rank f0 "$T/slow" --peers "${url}jobs/f" --world 2 --timeout 30
	start_bare_rank f1 "$T/slow" --peers "${url}jobs/f" --world 2 --timeout 30
	wait_for "$T/serve.err" 'job f: complete with 2 ranks'
	[ "$(progress f | grep -c '^127\.0\.0\.1:')" -eq 2 ]
	kill -KILL "$pid_f0"
	finish f0
	kill -KILL "$pid_f1"
	finish f1
	start_rank g0 "$T/script2" --peers "${url}jobs/f" --world 2 --timeout 5
	start_rank g1 "$T/script2" --peers "${url}jobs/f" --world 2 --timeout 5
	expect_ring 2 g0 g1
	[ "$(grep -c 'job f: complete with 2 ranks' "$T/serve.err")" -eq 2 ]
	[ "$(grep -c 'with 409' "$T/serve.err")" -eq 0 ]
}

@test "lease: a registration nobody polls for lapses after --lease, and its address gets 410" {
	start_server --lease 3
	run curl -s -w ' %{http_code}' -X POST \
	    --data-binary $'address=127.0.0.1:5000\nworld=2\n' "${url}jobs/l"
	[ "$output" = $'rank=0\nworld=2\n 200' ]
	wait_progress l "not yet: 0 of ? ranks" 20
	run curl -s -w ' %{http_code}' "${url}jobs/l?address=127.0.0.1:5000"
	[ "$output" = $'127.0.0.1:5000 holds no rank in job l: its registration lapsed or was taken back; register again\n 410' ]
	# A poll naming the address keeps it while it waits (8 s, more
	# than twice the lease) and a lease after.
	curl -s -X POST --data-binary $'address=127.0.0.1:5001\nworld=2\n' \
	    "${url}jobs/m" >/dev/null
	run curl -s -w ' %{http_code}' "${url}jobs/m?wait=8&address=127.0.0.1:5001"
	[ "$output" = $'not yet: 1 of 2 ranks; missing 1\n 202' ]
	[ "$(progress m)" = "not yet: 1 of 2 ranks; missing 1" ]
	run "$bin" serve --lease 0
	[ "$status" -eq 2 ]
	[[ $output == *"--lease '0' is not a positive number of seconds up to 86400"* ]]
}

@test "lease: a rank whose registration was lost registers again with the same rank" {
	start_server -vv
	start_rank lost0 "$T/script2" --peers "${url}jobs/lost" --world 2 \
	    --timeout 20 -v
	wait_for "$T/serve.err" 'job lost: rank 0 is 127\.0\.0\.1:[0-9]+'
	addr=$(sed -n 's/.*job lost: rank 0 is \(127\.0\.0\.1:[0-9]*\).*/\1/p' "$T/serve.err" | head -n 1)
	[ "$(curl -s -X DELETE --data-binary "address=$addr" "${url}jobs/lost")" = "removed rank 0" ]
	# The rank hears 410 at its next poll (its long poll ends a second
	# before its deadline at the latest) and registers again.
	wait_for "$T/lost0.err" "holds no rank in job lost: .*; registering $addr again as rank 0" 25
	wait_progress lost "not yet: 1 of 2 ranks; missing 1"
	start_rank lost1 "$T/script2" --peers "${url}jobs/lost" --world 2 \
	    --timeout 20
	expect_ring 2 lost0 lost1
}

@test "dos: a client's jobs count against it only until they finish" {
	# A long lease: only polls finish these jobs, however slow the machine.
	start_server --max-client-jobs 2 --lease 600
	post() { curl -s -o /dev/null -w '%{http_code}' -X POST --data-binary "$1" "${url}jobs/$2"; }
	[ "$(post $'address=127.0.0.1:5000\nworld=2\n' q1)" = 200 ]
	[ "$(post $'address=127.0.0.1:5001\nworld=2\n' q2)" = 200 ]
	run curl -s -w ' %{http_code}' -X POST \
	    --data-binary $'address=127.0.0.1:5002\nworld=2\n' "${url}jobs/q3"
	[ "$output" = $'127.0.0.1 created 2 jobs that are not finished, the limit for one client (--max-client-jobs); try again later\n 429' ]
	# Completing q1 is not enough: its ranks must have the list.
	[ "$(post $'address=127.0.0.1:5003\n' q1)" = 200 ]
	[ "$(post $'address=127.0.0.1:5002\nworld=2\n' q3)" = 429 ]
	[ "$(curl -s -o /dev/null -w '%{http_code}' "${url}jobs/q1?address=127.0.0.1:5000")" = 200 ]
	[ "$(curl -s -o /dev/null -w '%{http_code}' "${url}jobs/q1?address=127.0.0.1:5003")" = 200 ]
	[ "$(post $'address=127.0.0.1:5002\nworld=2\n' q3)" = 200 ]
	# A finished job still answers GETs, and a new registration starts
	# it afresh.
	[ "$(progress q1)" = $'# silvic-ring job q1, world 2\n127.0.0.1:5000\n127.0.0.1:5003' ]
	run curl -s -X POST --data-binary $'address=127.0.0.1:6000\nworld=3\n' "${url}jobs/q1"
	[ "$output" = $'127.0.0.1 created 2 jobs that are not finished, the limit for one client (--max-client-jobs); try again later' ]
	curl -s -X DELETE --data-binary 'address=127.0.0.1:5001' "${url}jobs/q2" >/dev/null
	run curl -s -X POST --data-binary $'address=127.0.0.1:6000\nworld=3\n' "${url}jobs/q1"
	[ "$output" = $'rank=0\nworld=3' ]
	[ "$(progress q1)" = "not yet: 1 of 3 ranks; missing 1, 2" ]
}

# ----------------------------------------------------------- the token

@test "serve --print-token: the token ranks derive from a key, which the server takes; never the key" {
	head -c 32 /dev/urandom >"$T/key"
	chmod 600 "$T/key"
	run "$bin" serve --token-file "$T/key" --print-token
	[ "$status" -eq 0 ]
	[ "${#lines[@]}" -eq 1 ]
	[[ $output =~ ^[0-9a-f]{64}$ ]]
	token=$output
	# Neither the key's bytes nor their hex are in what it printed.
	"$bin" serve --token-file "$T/key" --print-token >"$T/printed"
	! grep -qF -f <(od -An -tx1 "$T/key" | tr -d ' \n'; echo) "$T/printed" || false
	python3 -c 'import sys; k = open(sys.argv[1], "rb").read(); p = open(sys.argv[2], "rb").read(); sys.exit(k in p or k[:8] in p)' "$T/key" "$T/printed"
	start_server --token-file "$T/key"
	[ "$(curl -s -o /dev/null -w '%{http_code}' -H "Authorization: Bearer $token" "${url}jobs/p")" = 202 ]
	[ "$(curl -s -o /dev/null -w '%{http_code}' "${url}jobs/p")" = 401 ]
	bad=${token:0:63}$([ "${token:63}" = 0 ] && echo 1 || echo 0)
	[ "$(curl -s -o /dev/null -w '%{http_code}' -H "Authorization: Bearer $bad" "${url}jobs/p")" = 401 ]
	# It is what ranks with the key as --key-file send.
	start_rank p0 "$T/script2" --peers "${url}jobs/p" --world 2 --timeout 20 --key-file "$T/key"
	start_rank p1 "$T/script2" --peers "${url}jobs/p" --world 2 --timeout 20 --key-file "$T/key"
	expect_ring 2 p0 p1
	# A key typed into a file with a newline: the same token as without.
	printf 'a-typed-key-of-24-bytes!\n' >"$T/typed"
	printf 'a-typed-key-of-24-bytes!' >"$T/typed-bare"
	chmod 600 "$T/typed" "$T/typed-bare"
	[ "$("$bin" serve --token-file "$T/typed" --print-token)" = "$("$bin" serve --token-file "$T/typed-bare" --print-token)" ]
	! "$bin" serve --token-file "$T/typed" --print-token | grep -q 'a-typed-key' || false
}

@test "serve --print-token: a short secret is not printed, and it needs a file" {
	printf 's3cret\n' >"$T/short"
	chmod 600 "$T/short"
	run "$bin" serve --token-file "$T/short" --print-token
	[ "$status" -eq 2 ]
	[[ $output == *"--token-file '$T/short' is not a key (a key holds at least 16 bytes): its text is the bearer secret itself, and --print-token does not print secrets"* ]]
	! grep -q 's3cret' <<<"${output//$T\/short/}" || false
	run "$bin" serve --print-token
	[ "$status" -eq 2 ]
	[[ $output == *"--print-token needs --token-file (the ranks' --key-file)"* ]]
}
