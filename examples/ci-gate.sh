#!/bin/sh
# A CI job's network gate: runs the allreduce benchmark on this job's
# ranks with --json, keeps the records as an artifact, and passes or fails
# on what the summary record says (the check, the --min-busbw threshold
# and what it checked), not on the text of the table.
#
# usage: examples/ci-gate.sh [-n RANKS] GBPS@SIZE [bench options...]
#   -n RANKS      start RANKS ranks on this host (silvic-ring launch);
#                 without it this is one rank of a job whose ranks come
#                 from the environment (--peers, SILVIC_RING_PEERS, a
#                 launcher), and only rank 0 judges
#   SILVIC_RING   the binary (default: silvic-ring on PATH)
#   ARTIFACT      where the JSON records go (default: busbw.json)
# Exits with the benchmark's status: 0 passed, 1 a wrong result, 6 below
# the threshold, 2 a usage error, 3-5 and 7 the ring failed.
set -eu

sr=${SILVIC_RING:-silvic-ring}
artifact=${ARTIFACT:-busbw.json}
launch=
if [ "${1:-}" = "-n" ]; then
	[ $# -ge 2 ] || { echo "ci-gate: -n needs a number of ranks" >&2; exit 2; }
	launch=$2
	shift 2
fi
[ $# -ge 1 ] || { echo "usage: ci-gate.sh [-n RANKS] GBPS@SIZE [bench options...]" >&2; exit 2; }
gate=$1
shift

status=0
if [ -n "$launch" ]; then
	"$sr" launch -n "$launch" bench allreduce --min-busbw "$gate" --json "$@" \
		>"$artifact" || status=$?
else
	"$sr" bench allreduce --min-busbw "$gate" --json "$@" >"$artifact" ||
		status=$?
fi

# Ranks other than 0 print nothing: rank 0 judges for the job.
[ -s "$artifact" ] || exit "$status"

python3 - "$artifact" "$status" <<'PY'
import json, re, sys

path, status = sys.argv[1], int(sys.argv[2])
records = []
for line in open(path):
    # A launcher may tag lines with the rank: "[0] {...}".
    line = re.sub(r"^\[\d+\] ", "", line.strip())
    if line.startswith("{"):
        records.append(json.loads(line))
summary = next((r for r in records if r["type"] == "summary"), None)
error = next((r for r in records if r["type"] == "error"), None)
if summary is None:
    what = error["message"] if error else "no summary record"
    print("ci-gate: FAILED: the benchmark did not finish (exit %d): %s"
          % (status, what))
    sys.exit(status or 1)
t = summary["threshold"]
ok = (summary["exit"] == 0 and summary["check"] == "passed"
      and t is not None and t["passed"] and t["checked_rows"] > 0)
low = t["lowest"] if t else None
print("ci-gate: %s: %d row(s), check %s; --min-busbw %g GB/s on %s row(s)"
      "%s" % ("passed" if ok else "FAILED", summary["rows"], summary["check"],
              t["min_busbw_gbps"] if t else 0,
              t["checked_rows"] if t else 0,
              ", lowest %.3f GB/s (%s at %d B)" % (low["busbw_gbps"],
              low["collective"], low["size"]) if low else ""))
for b in (t or {}).get("below", []):
    print("ci-gate: below the threshold: %s %s at %d B: %.3f GB/s"
          % (b["collective"], b["dtype"], b["size"], b["busbw_gbps"]))
sys.exit(0 if ok else (summary["exit"] or status or 1))
PY
