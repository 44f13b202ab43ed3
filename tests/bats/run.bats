#!/usr/bin/env bats
# The command as a user meets it: usage errors, a world of one, scripts,
# expect, JSON, help and the man page.

load helpers

@test "an unknown command is a usage error naming it" {
	run "$SR" frobnicate
	[ "$status" -eq 2 ]
	[[ "$output" == *"'frobnicate' is not a command"* ]]
	[[ "$output" == *"try 'silvic-ring --help'"* ]]
}

@test "an unknown option is a usage error naming it" {
	run "$SR" run --frobnicate
	[ "$status" -eq 2 ]
	[[ "$output" == *"unknown option '--frobnicate'"* ]]
}

@test "a missing option value is a usage error" {
	run "$SR" run --peers
	[ "$status" -eq 2 ]
	[[ "$output" == *"--peers needs a value"* ]]
}

@test "bad numbers are usage errors naming option and value" {
	run "$SR" run --port 70000
	[ "$status" -eq 2 ]
	[[ "$output" == *"--port '70000' is not a port"* ]]
	run "$SR" run --rank -1
	[ "$status" -eq 2 ]
	[[ "$output" == *"--rank '-1' is not a rank number"* ]]
	run "$SR" run --world 0
	[ "$status" -eq 2 ]
	[[ "$output" == *"--world '0' is not a world size"* ]]
	run "$SR" run --world 100000000
	[ "$status" -eq 2 ]
	[[ "$output" == *"--world '100000000' is not a world size (1-65536)"* ]]
	run env SLURM_PROCID=0 SLURM_NTASKS=100000000 "$SR" run --dry-run </dev/null
	[ "$status" -eq 2 ]
	[[ "$output" == *"SLURM_NTASKS='100000000' is not a world size (1-65536)"* ]]
	run "$SR" run --timeout 0
	[ "$status" -eq 2 ]
	[[ "$output" == *"--timeout '0' is not a positive number of seconds"* ]]
	run "$SR" run --timeout abc
	[ "$status" -eq 2 ]
	[[ "$output" == *"--timeout 'abc'"* ]]
}

@test "a missing script file is a usage error naming it" {
	run "$SR" run --script "$BATS_TEST_TMPDIR/nope.txt"
	[ "$status" -eq 2 ]
	[[ "$output" == *"--script '$BATS_TEST_TMPDIR/nope.txt': No such file or directory"* ]]
}

@test "an extra argument to run is a usage error" {
	run "$SR" run extra
	[ "$status" -eq 2 ]
	[[ "$output" == *"unexpected argument 'extra'"* ]]
}

@test "rank out of range for the world is a configuration error" {
	run "$SR" run --rank 3 --world 2 </dev/null
	[ "$status" -eq 2 ]
	[[ "$output" == *"rank 3 (--rank) is out of range for a world of 2 (--world)"* ]]
}

@test "a world above one with no address list says to pass --peers" {
	run env -u SILVIC_RING_PEERS -u MLX_HOSTFILE "$SR" run --world 3 --rank 0 </dev/null
	[ "$status" -eq 2 ]
	[[ "$output" == *"the world size is 3 (--world) but no address list was given; pass --peers"* ]]
}

@test "--version names the version and the compiled-in features" {
	run "$SR" --version
	[ "$status" -eq 0 ]
	[[ "${lines[0]}" =~ ^silvic-ring\ [0-9]+\.[0-9]+\.[0-9]+$ ]]
	[[ "${lines[1]}" == *"http rendezvous: "* ]]
}

@test "help for an unknown command is a usage error" {
	run "$SR" help nope
	[ "$status" -eq 2 ]
	[[ "$output" == *"help: 'nope' is not a command"* ]]
}

@test "a world of one runs a script with exact results" {
	run "$SR" run --world 1 <<'S'
# a comment
allreduce sum i64 1 2 {rank}
expect 1 2 0
allreduce max f64 {world}*2.5
allgather host-{rank}
broadcast 0 hello world
barrier
S
	[ "$status" -eq 0 ]
	[[ "${lines[0]}" == "line 2: allreduce sum i64 = 1 2 0 ("*" us)" ]]
	[ "${lines[1]}" = "line 3: expect = ok" ]
	[[ "${lines[2]}" == "line 4: allreduce max f64 = 2.5 ("*" us)" ]]
	[[ "${lines[3]}" == 'line 5: allgather = ["host-0"] ('*' us)' ]]
	[[ "${lines[4]}" == "line 6: broadcast 0 = hello world ("*" us)" ]]
	[[ "${lines[5]}" == "line 7: barrier = ok"* ]]
}

@test "a syntax error fails before any network activity with line and column" {
	printf '127.0.0.1:1\n127.0.0.1:2\n' >"$BATS_TEST_TMPDIR/peers"
	run "$SR" run --peers "$BATS_TEST_TMPDIR/peers" --rank 0 --timeout 1 <<'S'
allreduce sum i64 1
allreduce sum f16 1 2
S
	[ "$status" -eq 2 ]
	[[ "$output" == *"<stdin>:2:15: unknown dtype 'f16' in 'allreduce sum f16 1 2'"* ]]
	[[ "$output" != *"listening"* ]]
}

@test "a failed expect exits 1 naming the line" {
	run "$SR" run --world 1 <<'S'
allreduce sum i64 1 2
expect 1 3
S
	[ "$status" -eq 1 ]
	[[ "$output" == *"<stdin>:2: expect failed"* ]]
}

@test "--json prints one valid JSON object per statement, then the summary" {
	run bash -c "printf 'allreduce sum i64 5\nexpect 5\nallgather x\n' | '$SR' run --world 1 --json"
	[ "$status" -eq 0 ]
	[ "${#lines[@]}" -eq 4 ]
	printf '%s\n' "${lines[@]}" | python3 -c '
import json, sys
recs = [json.loads(l) for l in sys.stdin]
assert recs[0]["type"] == "result" and recs[0]["result"] == [5], recs[0]
assert recs[0]["rank"] == 0 and recs[0]["line"] == 1
assert recs[1] == {"type": "expect", "rank": 0, "line": 2, "ok": True}, recs[1]
assert recs[2]["result"] == ["x"], recs[2]
assert recs[3]["type"] == "summary" and recs[3]["statements"] == 3, recs[3]
'
}

@test "errors become JSON records with --json" {
	run bash -c "printf 'allreduce sum i64 1\nexpect 2\n' | '$SR' run --world 1 --json 2>/dev/null"
	[ "$status" -eq 1 ]
	printf '%s\n' "${lines[@]}" | python3 -c '
import json, sys
recs = [json.loads(l) for l in sys.stdin]
assert recs[-2]["type"] == "error" and recs[-2]["code"] == "expect", recs[-2]
assert recs[-1]["type"] == "summary" and recs[-1]["exit"] == 1, recs[-1]
'
}

@test "every long option in --help appears in the man page" {
	man="$BATS_TEST_DIRNAME/../../man/silvic-ring.1"
	missing=()
	for cmd in run launch bench serve; do
		for opt in $("$SR" help "$cmd" | grep -oE -- '--[a-z][a-z_-]+' | sort -u); do
			grep -q -- "Fl -${opt#--}\b" "$man" || missing+=("$cmd $opt")
		done
	done
	for sub in connect; do
		for opt in $("$SR" bench "$sub" --help | grep -oE -- '--[a-z][a-z_-]+' | sort -u); do
			grep -q -- "Fl -${opt#--}\b" "$man" || missing+=("bench $sub $opt")
		done
	done
	[ ${#missing[@]} -eq 0 ] || { printf 'not in the man page: %s\n' "${missing[@]}"; false; }
}
