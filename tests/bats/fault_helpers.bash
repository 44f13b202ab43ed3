# Helpers for faults.bats only: rings of real ranks with their pids
# remembered, exit times measured in milliseconds, network namespaces made
# and removed, and the small Python peers (a fake rank, an authenticating
# client) that speak the wire protocol byte for byte.

load helpers

TOP=$(cd "$BATS_TEST_DIRNAME/../.." && pwd)
FAULT_PROXY=$TOP/scripts/fault-proxy
FLOOD=$TOP/scripts/flood
NETNS_HOSTS=$TOP/scripts/netns-hosts
NETNS_ID=
RANK_PIDS=()

now_ns() {
	date +%s%N
}

# ms_since NS: whole milliseconds from NS (a now_ns) to now.
ms_since() {
	echo $((($(now_ns) - $1) / 1000000))
}

# write_list FILE ADDRESS...: an address list, one a line.
write_list() {
	local file=$1
	shift
	printf '%s\n' "$@" >"$file"
}

# loopback_list FILE PORT...: 127.0.0.1:PORT lines.
loopback_list() {
	local file=$1 port
	shift
	: >"$file"
	for port in "$@"; do
		echo "127.0.0.1:$port" >>"$file"
	done
}

# start_rank R LIST SCRIPT [OPTIONS...]: rank R of `run` in the background,
# output in rR.out / rR.err; its pid in RANK_PIDS[R].  The ranks of one
# ring take the same --token, so lists that differ (a proxy in one entry)
# still agree.
start_rank() {
	local r=$1 list=$2 script=$3
	shift 3
	bg "r$r" "$SR" run --peers "$list" --rank "$r" --script "$script" "$@"
	RANK_PIDS[$r]=$BG_PID
}

# start_rank_in NS R LIST SCRIPT [OPTIONS...]: the same inside namespace
# NS (ip netns exec execs the rank itself, so the pid is the rank's).
start_rank_in() {
	local ns=$1 r=$2 list=$3 script=$4
	shift 4
	bg "r$r" ip netns exec "$ns" "$SR" run --peers "$list" --rank "$r" \
		--script "$script" "$@"
	RANK_PIDS[$r]=$BG_PID
}

# out R / err R: rank R's stdout and stderr files.
out() { echo "$BATS_TEST_TMPDIR/r$1.out"; }
err() { echo "$BATS_TEST_TMPDIR/r$1.err"; }

# wait_ranks_line REGEX SECONDS R...: every listed rank printed REGEX.
wait_ranks_line() {
	local re=$1 limit=$2 r
	shift 2
	for r in "$@"; do
		wait_line "$(out "$r")" "$re" "$limit" || return 1
	done
}

# wait_exit_ms PID SECONDS START_NS: polls every 10 ms for PID to end;
# sets WAIT_STATUS and WAIT_MS (milliseconds from START_NS to the moment
# it was seen gone).  Fails when PID is still running after SECONDS.
wait_exit_ms() {
	local pid=$1 limit=$2 start=$3 i
	for ((i = 0; i < limit * 100; i++)); do
		if ! kill -0 "$pid" 2>/dev/null; then
			WAIT_MS=$(ms_since "$start")
			WAIT_STATUS=0
			wait "$pid" || WAIT_STATUS=$?
			return 0
		fi
		sleep 0.01
	done
	echo "pid $pid still running after ${limit}s" >&2
	return 1
}

# start_proxy NAME ARGS...: scripts/fault-proxy ARGS in the background;
# waits for the port it prints and sets PROXY_PORT and PROXY_PID.
start_proxy() {
	local name=$1
	shift
	bg "$name" "$FAULT_PROXY" "$@"
	PROXY_PID=$BG_PID
	wait_line "$BATS_TEST_TMPDIR/$name.out" '^[0-9]+$' 10 || return 1
	PROXY_PORT=$(head -n 1 "$BATS_TEST_TMPDIR/$name.out")
}

# fd_count PID: open descriptors of PID.
fd_count() {
	ls "/proc/$1/fd" 2>/dev/null | wc -l
}

# cpu_ticks PID: utime + stime of PID in clock ticks (/proc/PID/stat
# fields 14 and 15, counted after the parenthesised command name).
cpu_ticks() {
	local stat
	stat=$(cat "/proc/$1/stat") || return 1
	stat=${stat##*) }
	# shellcheck disable=SC2086
	set -- $stat
	echo $((${12} + ${13}))
}

# no_process_left: nothing whose command line names this test's temp
# directory (every rank, proxy and peer started here does) still runs.
no_process_left() {
	local left
	left=$(pgrep -a -f -- "$BATS_TEST_TMPDIR/" || true)
	if [ -n "$left" ]; then
		echo "still running:" >&2
		echo "$left" >&2
		return 1
	fi
}

# ------------------------------------------------------------- namespaces

# netns_up K: K hosts from scripts/netns-hosts (NS_i, IP_i set here and
# removed in teardown).  Skips, with the tool's reason, only when it says
# this machine cannot make namespaces (status 77); any other failure
# fails the test.
netns_up() {
	local env rc line
	env=$("$NETNS_HOSTS" up "$1" 2>"$BATS_TEST_TMPDIR/netns.err") && rc=0 || rc=$?
	if [ "$rc" -eq 77 ]; then
		skip "cannot inject this fault without network namespaces: $(cat "$BATS_TEST_TMPDIR/netns.err")"
	fi
	if [ "$rc" -ne 0 ]; then
		echo "netns-hosts up $1 failed with status $rc:" >&2
		cat "$BATS_TEST_TMPDIR/netns.err" >&2
		return 1
	fi
	while IFS= read -r line; do
		case $line in
		NETNS_ID=* | NS_[0-9]*=* | IP_[0-9]*=*) eval "${line%%=*}=\${line#*=}" ;;
		esac
	done <<<"$env"
	[ -n "$NETNS_ID" ]
}

netns_down() {
	if [ -n "$NETNS_ID" ]; then
		"$NETNS_HOSTS" down "$NETNS_ID"
		NETNS_ID=
	fi
}

# ----------------------------------------------------- Python wire peers

# write_peer_tools: $BATS_TEST_TMPDIR/srpeer.py, a fake rank and an
# authenticating client speaking the hello, verdict, challenge, response,
# proof and result messages and the 24-byte frame header byte for byte.
write_peer_tools() {
	cat >"$BATS_TEST_TMPDIR/srpeer.py" <<'PY'
import argparse, hashlib, hmac, os, socket, struct, sys, threading, time

MAGIC = b"silvicn\x01"
AUTH_MAGIC = b"silvica\x01"
LABELS = (b"silvic-ring auth v1: connector proves",
          b"silvic-ring auth v1: acceptor proves")
DEADLINE = time.monotonic() + 20

SAY_LOCK = threading.Lock()


def say(*a):
    # One write per line, under a lock: two threads must not interleave.
    line = "peer: " + " ".join(str(x) for x in a) + "\n"
    with SAY_LOCK:
        sys.stdout.write(line)
        sys.stdout.flush()

def hello(rank, world, token, flags=0):
    return (MAGIC + struct.pack("=I", 0x01020304) +
            struct.pack("<III", rank, world, flags) + struct.pack("<Q", token))

def recv_exact(s, n):
    buf = b""
    while len(buf) < n:
        s.settimeout(max(0.01, DEADLINE - time.monotonic()))
        try:
            got = s.recv(n - len(buf))
        except (ConnectionResetError, socket.timeout) as e:
            say(f"no more bytes after {len(buf)} of {n}: {e}")
            return None
        if not got:
            say(f"closed after {len(buf)} of {n} bytes")
            return None
        buf += got
    return buf

def connect(port):
    while True:
        try:
            s = socket.create_connection(("127.0.0.1", port), timeout=1)
            say("connected to", port)
            return s
        except ConnectionRefusedError:
            if time.monotonic() > DEADLINE:
                raise
            time.sleep(0.02)

def verdict(v):
    if v is None or v[:8] != MAGIC:
        return None
    return struct.unpack("<II", v[8:16])

def mac(key, role, nc, na, connector, acceptor, world, token):
    text = (LABELS[role] + MAGIC[7:8] + struct.pack("<I", 1) + nc + na +
            struct.pack("<IIIQ", connector, acceptor, world, token))
    return hmac.new(key, text, hashlib.sha256).digest()

def key_of(path):
    # As the ranks read a key file (cli_key_length): a text key loses one
    # trailing newline (LF or CRLF), a binary key none.
    raw = open(path, "rb").read()
    body = raw
    if body.endswith(b"\r\n"):
        body = body[:-2]
    elif body.endswith(b"\n"):
        body = body[:-1]
    if any((c < 0x20 and c != 0x09) or c >= 0x7f for c in body):
        return raw
    return body

# --- a fake rank 0 of a world of 2, keyless ---------------------------------

def frame(kind, dtype, op, step, seq, length):
    return struct.pack("<BBBBIQQ", kind, dtype, op, 0, step, seq, length)

def describe(h):
    k, d, o, _, step, seq, length = struct.unpack("<BBBBIQQ", h)
    return f"kind {k} dtype {d} op {o} step {step} seq {seq} length {length}"

def fake(o):
    lsock = socket.socket()
    lsock.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
    lsock.bind(("127.0.0.1", o.listen))
    lsock.listen(4)
    prev = connect(o.connect)          # rank 1's previous rank is us
    prev.sendall(hello(0, 2, o.token))
    v = verdict(recv_exact(prev, 16))
    if v != (0, 1):
        say("rank 1 did not accept the hello:", v); sys.exit(3)
    lsock.settimeout(10)
    nxt, _ = lsock.accept()            # rank 1's next rank is us too
    h = recv_exact(nxt, 32)
    if h is None or h[:8] != MAGIC:
        say("no hello from rank 1"); sys.exit(3)
    nxt.sendall(MAGIC + struct.pack("<II", 0, 0))
    say("formed")
    lock = threading.Lock()
    sent = threading.Event()

    def drain(sock, echo):
        # Reads rank 1's frames on one link, printing its aborts.  With
        # echo, sends each frame back from its previous rank: in a world
        # of two that completes its collectives.
        while True:
            h = recv_exact(sock, 24)
            if h is None:
                return
            k, length = h[0], struct.unpack("<Q", h[16:24])[0]
            if k == 7:
                body = recv_exact(sock, min(length, 412)) or b""
                say("abort from rank 1:", body[12:].decode("ascii", "replace"))
                continue
            say("rank 1 sent", describe(h))
            if length > 64 << 20:
                return
            body = recv_exact(sock, length) if length else b""
            if echo:
                # Rank 1's second collective completes only after the
                # unsolicited frame: it cannot finish before the test
                # says go, however late that comes.
                seq = struct.unpack("<Q", h[8:16])[0]
                if seq >= 2 and not sent.wait(max(0, DEADLINE - time.monotonic())):
                    say("no go before the deadline"); return
                with lock:
                    prev.sendall(h + body)

    mirror = threading.Thread(target=drain,
                              args=(nxt, o.mode == "unsolicited"))

    if o.mode == "huge":
        # Rank 1's own header is exactly what it expects back, but for the
        # length: send that with length 2^63.
        h = recv_exact(nxt, 24)
        say("rank 1 sent", describe(h))
        recv_exact(nxt, struct.unpack("<Q", h[16:24])[0])
        bad = h[:16] + struct.pack("<Q", 1 << 63)
        say("sending", describe(bad))
        prev.sendall(bad)
    mirror.start()
    if o.mode == "random":
        junk = bytearray(os.urandom(24))
        if junk[0] in (7, 8):          # an abort or goodbye would be read
            junk[0] = 0x5a             # as one: keep it garbage
        say("sending", junk.hex())
        prev.sendall(bytes(junk))
    elif o.mode == "hello":
        say("sending a second hello")
        prev.sendall(hello(0, 2, o.token))
    elif o.mode == "unsolicited":
        while not os.path.exists(o.go):
            if time.monotonic() > DEADLINE:
                say("no go"); sys.exit(3)
            time.sleep(0.01)
        bad = frame(1, 0, 0, 0, 99, 8)
        say("sending unsolicited", describe(bad))
        with lock:
            prev.sendall(bad + struct.pack("<d", 1.0))
        sent.set()
    # Hold both links until rank 1 closes them (or the deadline).
    drain(prev, False)
    mirror.join()
    say("rank 1 closed both links")

# --- authentication attacks on an acceptor -----------------------------------

def handshake_to_response(port, o, nonce):
    s = connect(port)
    s.sendall(hello(o.claim, o.world, o.token, 1))
    v = verdict(recv_exact(s, 16))
    if v != (0, o.acceptor):
        say("hello not accepted:", v); sys.exit(3)
    s.sendall(AUTH_MAGIC + nonce)
    r = recv_exact(s, 72)
    if r is None or r[:8] != AUTH_MAGIC:
        say("no response"); sys.exit(3)
    return s, r[8:40], r[40:72]

def result(s):
    r = recv_exact(s, 12)
    if r is None:
        return "closed"
    return "status %d" % struct.unpack("<I", r[8:12])[0]

def reflect(o):
    key = key_of(o.key_file)
    nc1 = os.urandom(32)
    s1, na1, mac_a1 = handshake_to_response(o.port, o, nc1)
    want = mac(key, 1, nc1, na1, o.claim, o.acceptor, o.world, o.token)
    # Our transcript must be the rank's, or the test below proves nothing.
    say("transcript", "matches" if want == mac_a1 else "DIFFERS")
    proof = mac(key, 0, nc1, na1, o.claim, o.acceptor, o.world, o.token)
    say("role labels", "differ" if proof != mac_a1 else "AGREE")
    # A second connection whose challenge is the first one's nonce: its
    # response MACs the same connector nonce, with a fresh acceptor nonce.
    s2, na2, mac_a2 = handshake_to_response(o.port, o, nc1)
    s1.sendall(AUTH_MAGIC + mac_a1)
    say("own response as proof:", result(s1))
    s2.sendall(AUTH_MAGIC + mac_a1)
    say("other connection's response as proof:", result(s2))

def stranger(o):
    if o.key_file is None:
        s = connect(o.port)
        s.sendall(hello(o.claim, o.world, o.token, 0))
        say("keyless hello:", "verdict %s" % (verdict(recv_exact(s, 16)),))
        return
    key = key_of(o.key_file)
    nc = os.urandom(32)
    s, na, mac_a = handshake_to_response(o.port, o, nc)
    s.sendall(AUTH_MAGIC + mac(key, 0, nc, na, o.claim, o.acceptor,
                               o.world, o.token))
    say("wrong-key proof:", result(s))

def replay(o):
    data = open(o.file, "rb").read()
    if len(data) < 112:
        say(f"the recording has {len(data)} bytes, not a keyed handshake")
        sys.exit(3)
    s = connect(o.port)
    s.sendall(data[:32])
    say("replayed hello:", "verdict %s" % (verdict(recv_exact(s, 16)),))
    s.sendall(data[32:72])
    r = recv_exact(s, 72)
    say("replayed challenge:", "answered" if r else "no answer")
    s.sendall(data[72:112])
    say("replayed proof:", result(s))

# --- a fake rank 1 of 3 whose formation fails, and a rank 2 midway --------

def leaving(o):
    # Rank 1: rank 0 dials it, and their link forms with the key.
    key = key_of(o.key_file)
    lsock = socket.socket()
    lsock.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
    lsock.bind(("127.0.0.1", o.listen))
    lsock.listen(4)
    lsock.settimeout(10)
    nxt, _ = lsock.accept()
    if recv_exact(nxt, 32) is None:
        say("no hello from rank 0"); sys.exit(3)
    nxt.sendall(MAGIC + struct.pack("<II", 0, 1))
    c = recv_exact(nxt, 40)
    na = os.urandom(32)
    nxt.sendall(AUTH_MAGIC + na + mac(key, 1, c[8:40], na, 0, 1, o.world,
                                      o.token))
    if recv_exact(nxt, 40) is None:
        say("no proof from rank 0"); sys.exit(3)
    nxt.sendall(AUTH_MAGIC + struct.pack("<I", 0))
    say("rank 1 formed with rank 0")
    # Rank 2: dials rank 0 and is let past the hello.
    prev = connect(o.connect)
    prev.sendall(hello(2, o.world, o.token, 1))
    say("rank 2's hello:", verdict(recv_exact(prev, 16)))
    # Rank 1's formation fails (authentication with rank 2): the abort of
    # a rank that never formed, on its formed link.
    body = struct.pack("<III", 1, 7, 2) + b"authentication with rank 2 failed"
    nxt.sendall(frame(7, 0, 0, 1, 0, len(body)) + body)
    # Rank 0 has read the abort once it closes that link.
    recv_exact(nxt, 1)
    say("rank 0 closed its link to rank 1")
    nc = os.urandom(32)
    try:
        prev.sendall(AUTH_MAGIC + nc)
    except OSError as e:
        say("rank 2's challenge:", e)
    r = recv_exact(prev, 72)
    if r is None or r[:8] != AUTH_MAGIC:
        say("rank 0 left without answering rank 2"); sys.exit(4)
    good = mac(key, 1, nc, r[8:40], 2, 0, o.world, o.token)
    say("rank 0's response:", "valid" if r[40:72] == good else "INVALID")
    prev.sendall(AUTH_MAGIC + mac(key, 0, nc, r[8:40], 2, 0, o.world,
                                  o.token))
    say("rank 2's proof:", result(prev))

p = argparse.ArgumentParser()
p.add_argument("mode")
p.add_argument("--listen", type=int)
p.add_argument("--connect", type=int)
p.add_argument("--port", type=int)
p.add_argument("--token", type=int, default=1234)
p.add_argument("--world", type=int, default=2)
p.add_argument("--claim", type=int, default=0)
p.add_argument("--acceptor", type=int, default=1)
p.add_argument("--key-file")
p.add_argument("--file")
p.add_argument("--go")
o = p.parse_args()
if o.mode in ("random", "huge", "unsolicited", "hello"):
    fake(o)
else:
    {"reflect": reflect, "stranger": stranger, "replay": replay,
     "leaving": leaving}[o.mode](o)
PY
}
