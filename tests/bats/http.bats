#!/usr/bin/env bats
# The HTTP rendezvous: `silvic-ring serve` and ranks started with
# --peers http://.../jobs/NAME, over loopback only.  Every server and rank
# is started here in the background with fd 3 closed, remembered, and
# killed by pid in teardown.

load http_helpers

setup() {
	http_setup || return 1
	printf 'allreduce sum i64 1\nexpect 8\n' >"$T/script8"
}

@test "serve: prints its URL first and answers an unknown job with 202" {
	start_server
	[[ $url =~ ^http://127\.0\.0\.1:[0-9]+/$ ]]
	run curl -s -w ' %{http_code}' "${url}jobs/nobody"
	[ "$output" = "not yet: 0 of ? ranks
 202" ]
	run curl -s -w ' %{http_code}' "${url}elsewhere"
	[[ $output == *"no such path"*" 404" ]]
}

@test "serve: --listen [::1]:0 serves IPv6 loopback" {
	start_server --lease 600 --listen '[::1]:0'
	[[ $url =~ ^http://\[::1\]:[0-9]+/$ ]]
	run curl -s -X POST --data-binary $'address=[::1]:4000\nworld=1\n' \
	    "${url}jobs/six"
	[ "$output" = $'rank=0\nworld=1' ]
	run curl -s "${url}jobs/six"
	[ "$output" = $'# silvic-ring job six, world 1\n[::1]:4000' ]
}

@test "serve: bad options are usage errors" {
	run "$bin" serve --max-jobs 0
	[ "$status" -eq 2 ]
	[[ $output == *"--max-jobs '0' is not a number from 1 to 1000000"* ]]
	run "$bin" serve --listen nonsense
	[ "$status" -eq 2 ]
	[[ $output == *"--listen 'nonsense' is not HOST:PORT"* ]]
	run "$bin" serve --token-file "$T/absent"
	[ "$status" -eq 2 ]
	[[ $output == *"absent"*"No such file"* ]]
	run "$bin" serve --max-client-connections 0
	[ "$status" -eq 2 ]
	[[ $output == *"--max-client-connections '0' is not a number from 1 to 1000000"* ]]
	run "$bin" serve --max-client-jobs x
	[ "$status" -eq 2 ]
	[[ $output == *"--max-client-jobs 'x' is not a number from 1 to 1000000"* ]]
	run "$bin" serve --request-timeout 1.5
	[ "$status" -eq 2 ]
	[[ $output == *"--request-timeout '1.5' is not a whole number of seconds from 1 to 3600"* ]]
	run "$bin" serve --help
	[ "$status" -eq 0 ]
	for opt in --listen --token-file --max-jobs --max-ranks --job-ttl \
	    --max-connections --max-client-connections --max-client-jobs \
	    --lease --request-timeout --print-token --verbose --help; do
		[[ $output == *"$opt"* ]]
	done
}

@test "http: 8 ranks with given ranks form a ring through the server" {
	start_server
	for r in 0 1 2 3 4 5 6 7; do
		start_rank "r$r" "$T/script8" --peers "${url}jobs/given" \
		    --rank "$r" --world 8 --timeout 30
	done
	expect_ring 8 r0 r1 r2 r3 r4 r5 r6 r7
	run curl -s "${url}jobs/given"
	[ "${#lines[@]}" -eq 9 ]
	[ "${lines[0]}" = "# silvic-ring job given, world 8" ]
}

@test "http: 8 ranks with only --world get ranks 0-7 from the server" {
	start_server
	for r in 0 1 2 3 4 5 6 7; do
		start_rank "a$r" "$T/script8" --peers "${url}jobs/assigned" \
		    --world 8 --timeout 30 -v
	done
	expect_ring 8 a0 a1 a2 a3 a4 a5 a6 a7
	run bash -c "cat '$T'/a?.err | sed -n 's/.* as rank \([0-9]*\) of 8$/\1/p' | sort -n | tr '\n' ' '"
	[ "$output" = "0 1 2 3 4 5 6 7 " ]
}

@test "http: a late rank completes the job" {
	start_server
	for r in 0 1 2 3 4 5 6; do
		start_rank "l$r" "$T/script8" --peers "${url}jobs/late" \
		    --rank "$r" --world 8 --timeout 30
	done
	wait_progress late "not yet: 7 of 8 ranks; missing 7" 20
	start_rank l7 "$T/script8" --peers "${url}jobs/late" --rank 7 \
	    --world 8 --timeout 30
	expect_ring 8 l0 l1 l2 l3 l4 l5 l6 l7
}

@test "http: a missing rank: every waiting rank exits 3 naming the URL and what is missing" {
	start_server
	for r in 0 1 2 3 4 5 6; do
		start_rank "m$r" "$T/script8" --peers "${url}jobs/short" \
		    --rank "$r" --world 8 --timeout 3
	done
	for r in 0 1 2 3 4 5 6; do
		finish "m$r"
		s=status_m$r
		[ "${!s}" -eq 3 ]
		grep -F "${url}jobs/short" "$T/m$r.err"
		grep -F "timed out after 3s" "$T/m$r.err"
		# What the server said last: rank 7 missing, and any rank that
		# timed out earlier and took its registration back (on a busy
		# machine the ranks start, so time out, seconds apart).
		said=$(grep -oE "not yet: [0-9]+ of 8 ranks; missing [0-9]+(, [0-9]+)*" "$T/m$r.err")
		missing=${said##*missing }
		have=${said#not yet: }
		have=${have%% of *}
		[[ ", $missing," == *", 7,"* ]] || { echo "rank $r: $said" >&2; false; }
		[ $((have + $(tr ',' '\n' <<<"$missing" | grep -c .))) -eq 8 ] ||
			{ echo "rank $r: $said" >&2; false; }
	done
	# The first to time out saw all seven.
	cat "$T"/m?.err | grep -qF "not yet: 7 of 8 ranks; missing 7"
}

@test "http: conflicts: world mismatch and duplicate rank" {
	# Registrations made by hand, polled by no one: a long lease.
	start_server --lease 600
	run curl -s -w ' %{http_code}' -X POST \
	    --data-binary $'address=127.0.0.1:5000\nworld=4\nrank=2\n' "${url}jobs/c"
	[ "$output" = $'rank=2\nworld=4\n 200' ]
	# The same address again: the same rank, nothing new.
	run curl -s -X POST --data-binary $'address=127.0.0.1:5000\n' "${url}jobs/c"
	[ "$output" = $'rank=2\nworld=4' ]
	run curl -s -w ' %{http_code}' -X POST \
	    --data-binary $'address=127.0.0.1:5001\nworld=3\n' "${url}jobs/c"
	[ "$output" = $'world size 3 differs from the job\'s 4\n 409' ]
	run curl -s -w ' %{http_code}' -X POST \
	    --data-binary $'address=127.0.0.1:5001\nrank=2\n' "${url}jobs/c"
	[ "$output" = $'rank 2 is held by 127.0.0.1:5000\n 409' ]
	run curl -s -w ' %{http_code}' -X POST \
	    --data-binary $'address=127.0.0.1:5001\nrank=4\n' "${url}jobs/c"
	[ "$output" = $'rank 4 is out of range for a world of 4\n 400' ]
	run curl -s -w ' %{http_code}' -X POST \
	    --data-binary $'address=127.0.0.1:5001\n' "${url}jobs/new"
	[ "$output" = $'world is required for a new job\n 400' ]
	# Through run: a conflict is a failed rendezvous (status 3) and the
	# message has the URL, the HTTP status and the server's words.
	start_rank w "$T/script8" --peers "${url}jobs/c" --world 3 --timeout 10
	finish w
	[ "$status_w" -eq 3 ]
	grep -F "POST ${url}jobs/c: 409: world size 3 differs from the job's 4" "$T/w.err"
	start_rank d "$T/script8" --peers "${url}jobs/c" --rank 2 --world 4 --timeout 10
	finish d
	[ "$status_d" -eq 3 ]
	grep -F "409: rank 2 is held by 127.0.0.1:5000" "$T/d.err"
	# A complete job takes no one else: 409, status 3.
	curl -s -X POST --data-binary $'address=127.0.0.1:5000\nworld=1\n' \
	    "${url}jobs/full" >/dev/null
	start_rank f "$T/script8" --peers "${url}jobs/full" --world 1 --timeout 10
	finish f
	[ "$status_f" -eq 3 ]
	grep -F "POST ${url}jobs/full: 409: job full is complete" "$T/f.err"
	# A malformed request stays a usage error (status 2).
	start_rank big "$T/script8" --peers "${url}jobs/c" --rank 4 --timeout 10
	finish big
	[ "$status_big" -eq 2 ]
	grep -F "POST ${url}jobs/c: 400: rank 4 is out of range for a world of 4" "$T/big.err"
}

@test "serve: DELETE takes a registration back until the job is complete" {
	# Registrations made by hand, polled by no one: a long lease.
	start_server --lease 600
	post() { curl -s -X POST --data-binary "$1" "${url}jobs/$2"; }
	del() { curl -s -w ' %{http_code}' -X DELETE --data-binary "$1" "${url}jobs/$2"; }
	[ "$(post $'address=127.0.0.1:5000\nworld=3\n' d)" = $'rank=0\nworld=3' ]
	[ "$(post $'address=127.0.0.1:5001\n' d)" = $'rank=1\nworld=3' ]
	run del $'address=127.0.0.1:5000\n' d
	[ "$output" = $'removed rank 0\n 200' ]
	grep -F "job d: 127.0.0.1:5000 took rank 0 back" "$T/serve.err"
	[ "$(progress d)" = "not yet: 1 of 3 ranks; missing 0, 2" ]
	run del $'address=127.0.0.1:5000\n' d
	[ "$output" = $'127.0.0.1:5000 holds no rank in job d\n 404' ]
	run del $'address=127.0.0.1:5000\n' nosuchjob
	[ "$output" = $'127.0.0.1:5000 holds no rank in job nosuchjob\n 404' ]
	run del $'address=127.0.0.1:5001\nrank=1\n' d
	[ "$output" = $'a DELETE body is address=HOST:PORT alone, without world or rank\n 400' ]
	run del '' d
	[ "$output" = $'the body has no address=HOST:PORT line\n 400' ]
	run del 'address=nope' d
	[[ $output == *" 400" ]]
	# The freed rank is given again; then the job completes.
	[ "$(post $'address=127.0.0.1:5002\n' d)" = $'rank=0\nworld=3' ]
	[ "$(post $'address=127.0.0.1:5003\n' d)" = $'rank=2\nworld=3' ]
	run del $'address=127.0.0.1:5003\n' d
	[ "$output" = $'job d is complete\n 409' ]
	[ "$(curl -s "${url}jobs/d")" = $'# silvic-ring job d, world 3\n127.0.0.1:5002\n127.0.0.1:5001\n127.0.0.1:5003' ]
	# The last registration out takes the job with it: a rerun may
	# choose another world size.
	[ "$(post $'address=127.0.0.1:6000\nworld=2\n' e)" = $'rank=0\nworld=2' ]
	run del $'address=127.0.0.1:6000\n' e
	[ "$output" = $'removed rank 0\n 200' ]
	[ "$(progress e)" = "not yet: 0 of ? ranks" ]
	[ "$(post $'address=127.0.0.1:6000\nworld=5\n' e)" = $'rank=0\nworld=5' ]
}

@test "http: a rank that timed out takes its registration back, and a rerun of the job forms" {
	start_server
	printf 'allreduce sum i64 1\nexpect 2\n' >"$T/script2"
	start_rank gone "$T/script2" --peers "${url}jobs/rerun" --world 2 \
	    --timeout 2 -v
	finish gone
	[ "$status_gone" -eq 3 ]
	grep -F "waiting for ${url}jobs/rerun: timed out after 2s" "$T/gone.err"
	grep -E "took the registration of 127\.0\.0\.1:[0-9]+ back from ${url}jobs/rerun: 200: removed rank 0" "$T/gone.err"
	grep -E "job rerun: 127\.0\.0\.1:[0-9]+ took rank 0 back" "$T/serve.err"
	[ "$(progress rerun)" = "not yet: 0 of ? ranks" ]
	# Without that, one rank of the rerun would get the dead address
	# (status 4) and the other "job rerun is complete".
	start_rank again0 "$T/script2" --peers "${url}jobs/rerun" --world 2 \
	    --timeout 30 -v
	start_rank again1 "$T/script2" --peers "${url}jobs/rerun" --world 2 \
	    --timeout 30 -v
	for n in again0 again1; do
		finish "$n"
		s=status_$n
		[ "${!s}" -eq 0 ] || { cat "$T/$n.err" >&2; false; }
		grep -q 'allreduce sum i64 = 2' "$T/$n.out"
		# The ring formed: nothing is taken back.
		[ "$(grep -c 'registration of' "$T/$n.err")" -eq 0 ]
	done
	[ "$(curl -s "${url}jobs/rerun" | grep -c '^127\.0\.0\.1:')" -eq 2 ]
	[ "$(grep -c 'took rank' "$T/serve.err")" -eq 1 ]
	[ "$(grep -c 'with 409' "$T/serve.err")" -eq 0 ]
}

@test "http: an interrupted rank takes its registration back" {
	start_server
	printf 'allreduce sum i64 1\nexpect 2\n' >"$T/script2"
	start_rank int "$T/script2" --peers "${url}jobs/intr" --world 2 \
	    --timeout 30 -v
	wait_progress intr "not yet: 1 of 2 ranks; missing 1"
	kill -INT "$pid_int"
	finish int
	[ "$status_int" -eq 130 ]
	grep -F "interrupted" "$T/int.err"
	grep -F "back from ${url}jobs/intr: 200: removed rank 0" "$T/int.err"
	[ "$(progress intr)" = "not yet: 0 of ? ranks" ]
}

@test "http: two jobs at once" {
	start_server
	printf 'allreduce sum i64 1\nexpect 3\n' >"$T/script3"
	printf 'allreduce sum i64 1\nexpect 5\n' >"$T/script5"
	for r in 0 1 2 3 4; do
		start_rank "five$r" "$T/script5" --peers "${url}jobs/five" \
		    --world 5 --timeout 30
		[ $r -lt 3 ] && start_rank "three$r" "$T/script3" \
		    --peers "${url}jobs/three" --world 3 --timeout 30
	done
	for n in five0 five1 five2 five3 five4 three0 three1 three2; do
		finish "$n"
		s=status_$n
		[ "${!s}" -eq 0 ] || { cat "$T/$n.err" >&2; false; }
	done
	grep -q 'allreduce sum i64 = 5' "$T/five4.out"
	grep -q 'allreduce sum i64 = 3' "$T/three2.out"
	[ "$(curl -s "${url}jobs/five" | grep -c '^127\.0\.0\.1:')" -eq 5 ]
	[ "$(curl -s "${url}jobs/three" | grep -c '^127\.0\.0\.1:')" -eq 3 ]
}

@test "http: malformed and oversized requests get 4xx and the server keeps serving" {
	start_server
	code() { curl -s -o /dev/null -w '%{http_code}' "$@"; }
	[ "$(code -X POST --data-binary 'garbage' "${url}jobs/m")" = 400 ]
	[ "$(code -X POST --data-binary $'address=nope\nworld=2\n' "${url}jobs/m")" = 400 ]
	[ "$(code -X POST --data-binary $'address=1.2.3.4:1\nworld=2\nsize=9\n' "${url}jobs/m")" = 400 ]
	head -c 5000 /dev/zero | tr '\0' 'a' >"$T/big"
	[ "$(code -X POST --data-binary @"$T/big" "${url}jobs/m")" = 413 ]
	[ "$(code -X POST -H 'Transfer-Encoding: chunked' --data-binary @"$T/big" "${url}jobs/m")" = 413 ]
	[ "$(code -X POST --data-binary 'address=1.2.3.4:1' "${url}jobs/bad%20name")" = 400 ]
	[ "$(code -X POST --data-binary 'address=1.2.3.4:1' "${url}jobs/")" = 400 ]
	[ "$(code -X PUT --data-binary 'address=1.2.3.4:1' "${url}jobs/m")" = 405 ]
	[ "$(code -X DELETE "${url}jobs/m")" = 400 ]
	[ "$(code -X DELETE --data-binary @"$T/big" "${url}jobs/m")" = 413 ]
	[ "$(code "${url}jobs/m?wait=soon")" = 400 ]
	[ "$(code "${url}")" = 404 ]
	# Not HTTP at all, on a raw loopback connection.
	port=${url##*:}
	port=${port%/}
	exec 4<>"/dev/tcp/127.0.0.1/$port"
	printf 'HELLO THERE\r\n\r\n' >&4
	read -r -t 5 line <&4
	exec 4<&-
	[[ $line == "HTTP/1.1 400"* ]]
	# Nothing of that created a job, and a new job still forms.
	[ "$(curl -s "${url}jobs/m")" = "not yet: 0 of ? ranks" ]
	printf 'allreduce sum i64 1\nexpect 2\n' >"$T/script2"
	start_rank ok0 "$T/script2" --peers "${url}jobs/after" --world 2 --timeout 30
	start_rank ok1 "$T/script2" --peers "${url}jobs/after" --world 2 --timeout 30
	finish ok0
	finish ok1
	[ "$status_ok0" -eq 0 ] && [ "$status_ok1" -eq 0 ]
	kill -0 "$server_pid"
}

@test "http: the bearer token: 401 without it, a ring with it" {
	printf 's3cret-token\n' >"$T/token"
	chmod 600 "$T/token"
	start_server --token-file "$T/token"
	! grep -q 'readable by group' "$T/serve.err" || false
	[ "$(curl -s -o /dev/null -w '%{http_code}' "${url}jobs/t")" = 401 ]
	[ "$(curl -s -o /dev/null -w '%{http_code}' -H 'Authorization: Bearer wrong' "${url}jobs/t")" = 401 ]
	[ "$(curl -s -o /dev/null -w '%{http_code}' -H 'Authorization: Bearer s3cret-token' "${url}jobs/t")" = 202 ]
	[ "$(curl -s -o /dev/null -w '%{http_code}' -X DELETE --data-binary 'address=1.2.3.4:1' "${url}jobs/t")" = 401 ]
	[ "$(curl -s -o /dev/null -w '%{http_code}' -X DELETE --data-binary 'address=1.2.3.4:1' -H 'Authorization: Bearer s3cret-token' "${url}jobs/t")" = 404 ]
	printf 'allreduce sum i64 1\nexpect 2\n' >"$T/script2"
	start_rank no "$T/script2" --peers "${url}jobs/t" --world 2 --timeout 10
	finish no
	[ "$status_no" -eq 7 ]
	grep -F "POST ${url}jobs/t: 401" "$T/no.err"
	! grep -q 's3cret' "$T/no.err" || false
	export SILVIC_RING_HTTP_TOKEN_FILE=$T/token
	start_rank yes0 "$T/script2" --peers "${url}jobs/t" --world 2 --timeout 30
	start_rank yes1 "$T/script2" --peers "${url}jobs/t" --world 2 --timeout 30
	finish yes0
	finish yes1
	[ "$status_yes0" -eq 0 ] && [ "$status_yes1" -eq 0 ]
	unset SILVIC_RING_HTTP_TOKEN_FILE
}

@test "http: a token file readable by others gets a warning" {
	printf 'open-secret\n' >"$T/token"
	chmod 644 "$T/token"
	start_server --token-file "$T/token"
	grep -F "readable by group or others" "$T/serve.err"
}

@test "http: the server killed during the rendezvous: ranks exit 3, no hang" {
	start_server
	printf 'allreduce sum i64 1\nexpect 3\n' >"$T/script3"
	start_rank k0 "$T/script3" --peers "${url}jobs/k" --world 3 --timeout 4
	start_rank k1 "$T/script3" --peers "${url}jobs/k" --world 3 --timeout 4
	wait_progress k "not yet: 2 of 3 ranks; missing 2"
	kill -KILL "$server_pid"
	wait "$server_pid" || true
	for n in k0 k1; do
		finish "$n"
		s=status_$n
		[ "${!s}" -eq 3 ]
		grep -F "waiting for ${url}jobs/k: timed out after 4s" "$T/$n.err"
		grep -E "the last attempt failed: .*(connect|reset|Empty reply)" "$T/$n.err"
	done
}

@test "serve: a waiting GET gets the list as soon as the job completes" {
	# Registrations made by hand, polled by no one: a long lease.
	start_server --lease 600
	curl -s -X POST --data-binary $'address=127.0.0.1:6000\nworld=2\n' \
	    "${url}jobs/soon" >/dev/null
	# Without the wake-up on completion this would take 30s and fail.
	curl -s --max-time 10 -w ' %{http_code}' "${url}jobs/soon?wait=30" \
	    >"$T/curl.out" 3>&- &
	curl_pid=$!
	pids+=("$curl_pid")
	wait_for "$T/serve.err" 'job soon: a request waits up to 30s'
	curl -s -X POST --data-binary $'address=127.0.0.1:6001\n' \
	    "${url}jobs/soon" >/dev/null
	wait "$curl_pid"
	[ "$(cat "$T/curl.out")" = $'# silvic-ring job soon, world 2\n127.0.0.1:6000\n127.0.0.1:6001\n 200' ]
}

@test "serve: SIGTERM answers waiting requests with 503 and exits 130" {
	start_server
	curl -s -w ' %{http_code}' "${url}jobs/w?wait=30" >"$T/curl.out" 3>&- &
	curl_pid=$!
	pids+=("$curl_pid")
	wait_for "$T/serve.err" 'job w: a request waits up to 30s'
	kill -TERM "$server_pid"
	rc=0
	wait "$server_pid" || rc=$?
	[ "$rc" -eq 130 ]
	grep -q "stopping (SIGTERM)" "$T/serve.err"
	wait "$curl_pid"
	[ "$(cat "$T/curl.out")" = $'the server is stopping\n 503' ]
}

@test "http: a static list served by python3 -m http.server (read-only)" {
	command -v python3 >/dev/null || { echo "python3 is not installed" >&2; false; }
	mkdir "$T/www"
	python3 -u -m http.server 0 --bind 127.0.0.1 --directory "$T/www" \
	    >"$T/py.out" 2>&1 3>&- &
	pids+=($!)
	wait_for "$T/py.out" 'Serving HTTP on 127\.0\.0\.1 port [0-9]+'
	port=$(sed -n 's/.*Serving HTTP on 127\.0\.0\.1 port \([0-9]*\).*/\1/p' "$T/py.out" | head -n 1)
	printf 'allreduce sum i64 1\nexpect 2\n' >"$T/script2"
	for r in 0 1; do
		start_rank "s$r" "$T/script2" \
		    --peers "http://127.0.0.1:$port/hosts.txt" --rank "$r" \
		    --world 2 --timeout 30 --address-file "$T/addr$r" -v
	done
	# The list appears once both ranks are listening, as an
	# orchestrator would write it.
	wait_for "$T/addr0" ':[0-9]+$'
	wait_for "$T/addr1" ':[0-9]+$'
	cat "$T/addr0" "$T/addr1" >"$T/www/.hosts.tmp"
	mv "$T/www/.hosts.tmp" "$T/www/hosts.txt"
	for n in s0 s1; do
		finish "$n"
		s=status_$n
		[ "${!s}" -eq 0 ] || { cat "$T/$n.err" >&2; false; }
		grep -q 'allreduce sum i64 = 2' "$T/$n.out"
		grep -q 'reading it as a static address list' "$T/$n.err"
	done
}

@test "http: a rank interrupted before the server's answer to its registration still takes it back" {
	# A server that takes the POST and never answers it: the rank is
	# interrupted mid-request, and must DELETE what the server may hold.
	cat >"$T/mute.py" <<'PY'
import socket, sys, threading
srv = socket.socket()
srv.bind(("127.0.0.1", 0))
srv.listen(8)
print("port", srv.getsockname()[1], flush=True)
srv.settimeout(60)
held = []
while True:
    c, _ = srv.accept()
    c.settimeout(30)
    data = b""
    while b"\r\n\r\n" not in data:
        data += c.recv(4096)
    head, _, body = data.partition(b"\r\n\r\n")
    length = [int(l.split(b":")[1]) for l in head.split(b"\r\n")
              if l.lower().startswith(b"content-length:")]
    while length and len(body) < length[0]:
        body += c.recv(4096)
    method = head.split(b" ")[0].decode()
    print(method, body.decode().strip(), flush=True)
    if method == "DELETE":
        c.sendall(b"HTTP/1.1 200 OK\r\nContent-Length: 15\r\n\r\nremoved rank 0\n")
        c.close()
        break
    held.append(c)  # POST: held, never answered
PY
	/usr/bin/python3 -u "$T/mute.py" >"$T/mute.out" 2>&1 3>&- &
	pids+=($!)
	wait_for "$T/mute.out" '^port [0-9]+$'
	port=$(sed -n 's/^port //p' "$T/mute.out")
	start_rank mute "$T/script8" --peers "http://127.0.0.1:$port/jobs/m" \
	    --world 2 --rank 0 --timeout 30 -v
	wait_for "$T/mute.out" '^POST '
	kill -INT "$pid_mute"
	finish mute
	[ "$status_mute" -eq 130 ] || { cat "$T/mute.err" >&2; false; }
	wait_for "$T/mute.out" '^DELETE address=127\.0\.0\.1:[0-9]+$'
	grep -F "took the registration of 127.0.0.1:" "$T/mute.err"
}
