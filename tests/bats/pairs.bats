#!/usr/bin/env bats
# What `bench pairs` and `bench connect` write, read by other parsers:
# the SVG heatmaps through python3's XML parser (every cell, the verdict's
# cells outlined, labels escaped, the caption the verdict's words), and
# the JSON records' fields against the man page's lists.  The samples
# come from the C test binaries' --write mode (synthetic matrices through
# the same writers the command calls).

load helpers

TOP=$(cd "$BATS_TEST_DIRNAME/../.." && pwd)
TESTS=${SR_BUILD_DIR:-$TOP/build}/tests

setup() {
	for t in test_pairs_out test_connect; do
		[ -x "$TESTS/$t" ] || { echo "no $TESTS/$t: run make check (or make unit) first" >&2; return 1; }
	done
	command -v python3 >/dev/null || { echo "python3 is needed to parse XML and JSON" >&2; return 1; }
	"$TESTS/test_pairs_out" --write "$BATS_TEST_TMPDIR"
	"$TESTS/test_connect" --write "$BATS_TEST_TMPDIR"
}

@test "bench pairs --svg: valid XML with every cell, the verdict's cells outlined, labels escaped" {
	run python3 - "$BATS_TEST_TMPDIR" <<'PY'
import json, sys
import xml.etree.ElementTree as ET

NS = "{http://www.w3.org/2000/svg}"
d = sys.argv[1]

def records(name):
    return [json.loads(l) for l in open("%s/%s.json" % (d, name))]

def check(name):
    root = ET.parse("%s/%s.svg" % (d, name)).getroot()
    assert root.tag == NS + "svg", root.tag
    recs = records(name)
    head = recs[0]
    n = head["world"]
    pairs = [r for r in recs if r["type"] == "pair"]
    verdict = recs[-1]
    assert verdict["type"] == "verdict"
    for mode in ("alone", "both"):
        panel = [g for g in root.iter(NS + "g") if g.get("data-mode") == mode]
        assert len(panel) == 1, (name, mode)
        rects = list(panel[0].iter(NS + "rect"))
        cells = [r for r in rects if r.get("class", "").startswith("cell")]
        assert len(cells) == n * (n - 1), (name, mode, len(cells))
        diag = [r for r in rects if r.get("class") == "diagonal"]
        assert len(diag) == n, (name, mode, len(diag))
        outlined = {(int(r.get("data-from")), int(r.get("data-to")))
                    for r in rects if r.get("class") == "outline"}
        slow = {(p["from"], p["to"]) for p in pairs if p["slow_" + mode]}
        assert outlined == slow, (name, mode, outlined, slow)
        for c in cells:
            assert c.get("fill").startswith("#") and len(c.get("fill")) == 7
            assert c.find(NS + "title") is not None
    # The labels on both axes, as the hosts are (escaped, then read back;
    # XML has no control characters: they show as U+FFFD).
    texts = ["".join(t.itertext()) for t in root.iter(NS + "text")]
    for r, host in enumerate(head["hosts"]):
        host = "".join("\ufffd" if ord(c) < 0x20 or c == "\x7f" else c
                       for c in host)
        label = "r%d %s" % (r, host)
        rows = [t for t in root.iter(NS + "text") if t.get("class") == "from"
                and t.text == label]
        cols = [t for t in root.iter(NS + "text") if t.get("class") == "to"
                and t.text == label]
        assert len(rows) == 1 and len(cols) == 2, (name, label, texts)
    # The caption is every finding's words (or the ok line), wrapped.
    caption = " ".join(t.text.strip() for t in root.iter(NS + "text")
                       if t.get("class") == "verdict")
    words = " ".join(f["text"] for f in verdict["findings"]) or verdict["text"]
    assert caption.split() == words.split(), (caption, words)
    desc = root.find(NS + "desc").text
    assert desc == verdict["text"], (desc, verdict["text"])
    return verdict

assert check("host")["verdict"] == "host"
assert check("link")["verdict"] == "link"
assert check("ok")["verdict"] == "ok"
v = check("escape")
# Labels with XML's and JSON's special characters, a control character
# and a byte that is not UTF-8 came through as text.
hosts = records("escape")[0]["hosts"]
assert hosts[0] == "<a&b>" and hosts[1] == "\"q'\x01\ufffd", hosts
raw = open(d + "/escape.svg", "rb").read()
assert b"&lt;a&amp;b&gt;" in raw and b"\xff" not in raw and b"\x01" not in raw
# A world of 300: blocks of 2 x 2 ranks, the slow cell's block outlined.
root = ET.parse(d + "/large.svg").getroot()
cells = [r for r in root.iter(NS + "rect") if r.get("class", "").startswith("cell")]
assert len(cells) == 2 * 150 * 150, len(cells)
outlines = [(r.get("data-from"), r.get("data-to")) for r in root.iter(NS + "rect")
            if r.get("class") == "outline"]
assert sorted(outlines) == [("2", "290"), ("290", "2"), ("290", "2")], outlines
print("ok")
PY
	[ "$status" -eq 0 ] || { echo "$output" >&2; false; }
	[ "$output" = ok ]
}

# man_fields SECTION TYPE [N]: the words of the Nth (default 1st) literal
# block after ".It Ql TYPE" in the man page's ".Ss SECTION" part.
man_fields() {
	python3 - "$TOP/man/silvic-ring.1" "$1" "$2" "${3:-1}" <<'PY'
import sys
man, section, kind, nth = sys.argv[1], sys.argv[2], sys.argv[3], int(sys.argv[4])
lines = open(man).read().split("\n")
start = lines.index(".Ss " + section)
end = next(i for i in range(start + 1, len(lines)) if lines[i].startswith((".Ss", ".Sh")))
part = lines[start:end]
at = part.index(".It Ql " + kind)
blocks, i = [], at
while len(blocks) < nth:
    i = part.index(".Bd -literal -offset indent", i) + 1
    j = part.index(".Ed", i)
    blocks.append(" ".join(part[i:j]).split())
    i = j
print(" ".join(blocks[-1]))
PY
}

# json_fields FILE TYPE [findings]: the keys of FILE's TYPE records (all
# alike), or of their findings' objects, in order.
json_fields() {
	python3 - "$@" <<'PY'
import json, sys
path, kind = sys.argv[1], sys.argv[2]
findings = len(sys.argv) > 3
keys = None
for line in open(path):
    r = json.loads(line, parse_constant=lambda c: sys.exit("non-finite " + c))
    if r["type"] != kind:
        continue
    for k in ([list(f) for f in r["findings"]] if findings else [list(r)]):
        assert keys is None or k == keys, (k, keys)
        keys = k
assert keys, "no %s record in %s" % (kind, path)
print(" ".join(keys))
PY
}

# same_fields DOCUMENTED WRITTEN: the same words, in any order.
same_fields() {
	local a b
	a=$(tr ' ' '\n' <<<"$1" | sort)
	b=$(tr ' ' '\n' <<<"$2" | sort)
	[ "$a" = "$b" ] || { diff <(echo "$a") <(echo "$b") >&2; return 1; }
}

@test "bench pairs --json: each record's fields are the man page's list" {
	local d=$BATS_TEST_TMPDIR kind f
	for f in host link ok escape; do
		for kind in pairs pair host verdict; do
			same_fields "$(man_fields "bench pairs" "$kind")" "$(json_fields "$d/$f.json" "$kind")"
		done
	done
	same_fields "$(man_fields "bench pairs" verdict 2)" "$(json_fields "$d/host.json" verdict findings)"
	same_fields "$(man_fields "bench pairs" verdict 2)" "$(json_fields "$d/link.json" verdict findings)"
	# The exact list, so a field added to one and not the other shows.
	[ "$(json_fields "$d/link.json" pair)" = "type schema from from_host to to_host round bytes repeats gbps_both gbps_both_repeats reference_both ratio_both slow_both baseline_both gbps_alone gbps_alone_repeats reference_alone ratio_alone slow_alone baseline_alone latency_us" ]
	[ "$(json_fields "$d/link.json" host)" = "type schema host index ranks send_gbps_both receive_gbps_both send_gbps_alone receive_gbps_alone latency_us slow_cells slow" ]
	# One record per direction, one per host, the verdict last.
	run python3 - "$d/link.json" <<'PY'
import json, sys
recs = [json.loads(l) for l in open(sys.argv[1])]
assert [r["type"] for r in recs] == ["pairs"] + ["pair"] * 30 + ["host"] * 6 + ["verdict"]
assert sorted((r["from"], r["to"]) for r in recs if r["type"] == "pair") == \
    [(i, j) for i in range(6) for j in range(6) if i != j]
v = recs[-1]
assert v["verdict"] == "link" and v["exit"] == 6 and v["pass"] is False
assert v["passes"] == 2, v["passes"]
f = v["findings"][0]
assert (f["from"], f["to"], f["direction"]) == (1, 4, "one"), f
print("ok")
PY
	[ "$status" -eq 0 ] && [ "$output" = ok ] || { echo "$output" >&2; false; }
}

@test "bench connect --json: each record's fields are the man page's list" {
	local d=$BATS_TEST_TMPDIR
	same_fields "$(man_fields "bench connect" connect)" "$(json_fields "$d/connect.json" connect)"
	same_fields "$(man_fields "bench connect" connect_verdict)" "$(json_fields "$d/connect.json" connect_verdict)"
	same_fields "$(man_fields "bench connect" connect_verdict 2)" "$(json_fields "$d/connect.json" connect_verdict findings)"
	grep -qxF '# verdict: rank 1 (10.0.0.2) cannot reach rank 2 (10.0.0.3): No route to host' "$d/connect.txt"
	grep -qxF '# verdict: MTU 9000 on rank 0, 1500 elsewhere' "$d/connect.txt"
}
