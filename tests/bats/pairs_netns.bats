#!/usr/bin/env bats
# bench pairs on network-namespace hosts (scripts/netns-hosts), one rank a
# host: a host whose egress is slowed (a tbf) is named as the host, not a
# link; a path slowed one way (htb and a u32 match on the destination) is
# named as that link, in that direction.  Each verdict is asked for ten
# times and must be right ten times; the JSON and the SVG of a run agree
# with it.  Speeds are judged by the verdict's ratios, never by a clock.

bats_require_minimum_version 1.5.0

load fault_helpers

BATS_TEST_TIMEOUT=${BATS_TEST_TIMEOUT:-600}

# The fabric: every host's egress shaped to FABRIC_MBIT, so a path's
# speed is the shaper's and not what the cores left over (an unshaped
# veth runs as fast as a busy core copies, which varies run to run by
# more than any threshold).  The rate is one the cores carry even beside
# two CPU hogs: at 1000 Mbit/s the three pairs of a round (3 Gbit/s of
# veth, bridge and shaper on these 2 cores) left healthy cells at
# 0.52-0.6x the median there, and named links that were fine; at 400
# every healthy cell stayed within 0.91-1.36x (10 runs beside two hogs).
# The slow host and the slow link run at SLOW_MBIT, a quarter; the
# transfers' size keeps a run to seconds.
FABRIC_MBIT=400
SLOW_MBIT=100
BYTES=1M
HOSTS=6

setup_file() {
	[ -x "$SR" ] || { echo "no binary at $SR: run make first" >&2; return 1; }
}

setup() {
	netns_up "$HOSTS"
	local i ns all=()
	for ((i = 1; i <= HOSTS; i++)); do
		ns=NS_$i
		all+=("${!ns}")
	done
	"$NETNS_HOSTS" fabric "$FABRIC_MBIT" "${all[@]}"
}

teardown() {
	kill_bg
	netns_down
}

# pairs_run N [OPTIONS...]: bench pairs with rank i-1 on host i, the list
# published once all have written their address; waits for every rank,
# sets STATUS (every rank's, which must agree) and the outputs in
# r0.out..; run N's files kept as r0.out.N.
pairs_run() {
	local n=$1 i s
	shift
	rm -f "$BATS_TEST_TMPDIR"/peers "$BATS_TEST_TMPDIR"/addr.*
	for ((i = 1; i <= HOSTS; i++)); do
		local ns=NS_$i ip=IP_$i
		bg "r$((i - 1))" ip netns exec "${!ns}" "$SR" bench pairs \
			--peers "$BATS_TEST_TMPDIR/peers" --rank $((i - 1)) \
			--host "${!ip}" --address-file "$BATS_TEST_TMPDIR/addr.$((i - 1))" \
			--timeout 60 -e "$BYTES" "$@"
		RANK_PIDS[$((i - 1))]=$BG_PID
	done
	publish_ranks "$BATS_TEST_TMPDIR/peers" "$HOSTS"
	STATUS=
	for ((i = 0; i < HOSTS; i++)); do
		wait_exit "${RANK_PIDS[$i]}" 120
		s=$WAIT_STATUS
		[ -z "$STATUS" ] && STATUS=$s
		[ "$s" -eq "$STATUS" ] || { echo "rank $i exited $s, rank 0 $STATUS" >&2; return 1; }
	done
	cp "$(out 0)" "$(out 0).$n"
}

# verdict_lines FILE: the "# verdict: " lines of rank 0's pairs table
# (after the preflight's).
verdict_lines() {
	awk '/^# silvic-ring .* bench pairs/ { on = 1 } on && /^# verdict: /' "$1"
}

@test "a slow host (its egress at $SLOW_MBIT Mbit/s) is named as the host, not a link, 10 runs of 10" {
	"$NETNS_HOSTS" rate "$NS_3" "$SLOW_MBIT"
	right=0
	for run in $(seq 1 10); do
		pairs_run "$run"
		v=$(verdict_lines "$(out 0)")
		echo "# run $run: status $STATUS: $v" >&3
		if [ "$STATUS" -eq 6 ] && [ "$(wc -l <<<"$v")" -eq 1 ] &&
			grep -q "^# verdict: host $IP_3 (rank 2) is slow: " <<<"$v"; then
			right=$((right + 1))
		fi
	done
	[ "$right" -eq 10 ]
}

@test "a slow link (host 2 to host 5 at $SLOW_MBIT Mbit/s, one way) is named as that link and that direction only, 10 runs of 10" {
	"$NETNS_HOSTS" link-rate "$NS_2" "$IP_5" "$SLOW_MBIT"
	right=0
	for run in $(seq 1 10); do
		pairs_run "$run"
		v=$(verdict_lines "$(out 0)")
		echo "# run $run: status $STATUS: $v" >&3
		if [ "$STATUS" -eq 6 ] && [ "$(wc -l <<<"$v")" -eq 1 ] &&
			grep -q "^# verdict: link $IP_2 -> $IP_5 (rank 1 -> rank 4) is slow: " <<<"$v"; then
			right=$((right + 1))
		fi
	done
	[ "$right" -eq 10 ]
}

@test "a healthy fabric passes; a slow host's JSON and SVG say what the table says, and an earlier run is a baseline" {
	pairs_run 0 --json
	[ "$STATUS" -eq 0 ]
	cp "$(out 0)" "$BATS_TEST_TMPDIR/healthy.json"
	tail -n 1 "$BATS_TEST_TMPDIR/healthy.json" | grep -q '"type":"verdict",.*"pass":true,.*"passes":1,"exit":0}$'
	"$NETNS_HOSTS" rate "$NS_4" "$SLOW_MBIT"
	pairs_run 1 --json --svg "$BATS_TEST_TMPDIR/m.svg" \
		--baseline "$BATS_TEST_TMPDIR/healthy.json"
	[ "$STATUS" -eq 6 ]
	python3 - "$(out 0)" "$BATS_TEST_TMPDIR/m.svg" "$IP_4" <<'PY'
import json, sys
import xml.etree.ElementTree as ET
recs = [json.loads(l) for l in open(sys.argv[1])]
pairs = [r for r in recs if r["type"] == "pair"]
hosts = [r for r in recs if r["type"] == "host"]
verdict = recs[-1]
assert len(pairs) == 30, len(pairs)
assert verdict["type"] == "verdict" and not verdict["pass"], verdict
assert verdict["exit"] == 6 and verdict["baseline"], verdict
assert verdict["passes"] == 2, verdict
kinds = [f["kind"] for f in verdict["findings"]]
assert kinds == ["host"], kinds
assert verdict["findings"][0]["host"] == sys.argv[3], verdict["findings"]
slow = [h for h in hosts if h["slow"]]
assert [h["host"] for h in slow] == [sys.argv[3]], slow
# Every cell the verdict marks slow has the host at one end.
for p in pairs:
    if p["slow_alone"] or p["slow_both"]:
        assert sys.argv[3] in (p["from_host"], p["to_host"]), p
svg = ET.parse(sys.argv[2]).getroot()
text = ET.tostring(svg, encoding="unicode")
assert sys.argv[3] in text, "the host is not labelled"
assert "is slow" in text, "no verdict caption"
PY
}
