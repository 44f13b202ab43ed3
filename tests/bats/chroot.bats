#!/usr/bin/env bats
# The tests and the command in a plain chroot, as a newcomer makes one
# (debootstrap, then chroot DIR).  Its / is a directory, not a mount
# point, so `ip netns exec` and `unshare --propagation private` fail on
# it: scripts/run-tests then runs the tests in a mount namespace rooted
# at a private bind mount of the chroot (mounting /proc there if the
# chroot has none), and scripts/netns-hosts, run by hand there, names
# the cause.  Without /proc, `launch` still finds its own binary for its
# ranks, and `launch --hosts` the path it gives ssh.  The chroot here is
# built from bind mounts of this machine's /usr and /etc, inside a
# private mount namespace, so nothing it mounts is seen outside the test.

load helpers

TOP=$(cd "$BATS_TEST_DIRNAME/../.." && pwd)

need_chroot() {
	[ "$(id -u)" -eq 0 ] || { echo "building a chroot needs root" >&2; return 1; }
	command -v unshare >/dev/null || { echo "unshare is not installed (Debian: util-linux)" >&2; return 1; }
	command -v ip >/dev/null || { echo "ip(8) is not installed (Debian: iproute2)" >&2; return 1; }
	mkdir -p "$BATS_TEST_TMPDIR/build"
}

# in_plain_chroot [--no-proc] CMD: runs the shell command CMD as root in
# a chroot at $BATS_TEST_TMPDIR/shared/root whose / is not a mount point,
# with the checkout, the binary's directory and $BATS_TEST_TMPDIR/build
# at their own paths, and /proc mounted unless --no-proc.  The chroot's
# directory is on a shared mount (as on a systemd host), so a mount that
# CMD makes in a namespace of its own would reach this one.  Prints,
# after CMD's output, "mounts outside: N": the mounts CMD left outside
# the chroot's own (0 when nothing leaked).
in_plain_chroot() {
	local proc=1
	[ "$1" != --no-proc ] || { proc=0; shift; }
	unshare --mount --propagation private bash -c '
		s=$1/shared top=$2 bin=$3 proc=$4 cmd=$5 r=$1/shared/root
		mkdir -p "$s" && mount -t tmpfs tmpfs "$s" && mount --make-shared "$s" &&
			mkdir -p "$r"/{usr,etc,dev,sys,proc,tmp,run} "$r$top" "$r$bin" \
				"$r$1/build" || exit 1
		for l in bin sbin lib lib32 lib64 libx32; do
			if [ -L "/$l" ]; then
				ln -s "$(readlink "/$l")" "$r/$l"
			elif [ -d "/$l" ]; then
				mkdir -p "$r/$l" && mount --bind "/$l" "$r/$l"
			fi
		done
		for d in usr etc dev sys; do mount --bind "/$d" "$r/$d" || exit 1; done
		{ [ "$proc" = 0 ] || mount -t proc proc "$r/proc"; } &&
			mount --bind "$top" "$r$top" && mount --bind "$bin" "$r$bin" &&
			mount --bind "$1/build" "$r$1/build" || exit 1
		# A sanitizer build (make SAN=1): LeakSanitizer reads
		# /proc/PID/task at exit and fails the process without it, and
		# the sanitizers read their options from /proc/self/environ.
		# So there /proc holds that one file, turning the leak check
		# off; still no /proc/self/exe, and AddressSanitizer and UBSan
		# still check every access.
		if [ "$proc" = 0 ] && ldd "$bin/silvic-ring" 2>/dev/null | grep -q libasan; then
			mount -t tmpfs tmpfs "$r/proc" && mkdir "$r/proc/self" &&
				printf "ASAN_OPTIONS=%sdetect_leaks=0\\0" \
					"${ASAN_OPTIONS:+$ASAN_OPTIONS:}" >"$r/proc/self/environ" || exit 1
		fi
		before=$(wc -l </proc/self/mountinfo)
		chroot "$r" bash -c "$cmd"
		rc=$?
		echo "mounts outside: $(($(wc -l </proc/self/mountinfo) - before))"
		exit $rc
	' in-plain-chroot "$BATS_TEST_TMPDIR" "$TOP" "$(dirname "$SR")" "$proc" "$1"
}

# write_test_root: a test program in TAP, as the C tests are, in
# $BATS_TEST_TMPDIR/build/tests: /proc there, / a mount point, a command
# run in a network namespace of its own, and a terminal (script(1)).
write_test_root() {
	mkdir -p "$BATS_TEST_TMPDIR/build/tests"
	cat >"$BATS_TEST_TMPDIR/build/tests/test_root" <<'SH'
#!/bin/bash
echo 1..4
if [ -r /proc/self/mountinfo ]; then
	echo "ok 1 /proc is mounted"
else
	echo "not ok 1 /proc is mounted"
fi
if awk '$5 == "/" { f = 1 } END { exit !f }' /proc/self/mountinfo; then
	echo "ok 2 / is a mount point"
else
	echo "not ok 2 / is a mount point"
fi
ns=srt-chroot-$$
if ip netns add "$ns" && ip netns exec "$ns" ip link set lo up; then
	echo "ok 3 a command in a network namespace"
else
	echo "not ok 3 a command in a network namespace"
fi
ip netns del "$ns" 2>/dev/null
if script -qec tty /dev/null </dev/null | grep -q '^/dev/pts/'; then
	echo "ok 4 a terminal"
else
	echo "not ok 4 a terminal"
fi
SH
	chmod +x "$BATS_TEST_TMPDIR/build/tests/test_root"
}

@test "run-tests in a plain chroot: runs the tests in a mounted root, and network namespaces work there" {
	need_chroot
	write_test_root
	run in_plain_chroot "cd '$TOP' && scripts/run-tests --unit-only '$BATS_TEST_TMPDIR/build'"
	echo "$output"
	[ "$status" -eq 0 ]
	[[ "$output" == *"run-tests: / is not a mount point here (a chroot?); running the tests in a mount namespace whose root is a bind mount of it"* ]]
	[[ "$output" != *"/proc is not mounted"* ]]
	[[ "$output" == *"ok 2 / is a mount point"* ]]
	[[ "$output" == *"ok 3 a command in a network namespace"* ]]
	[[ "$output" == *"ok 4 a terminal"* ]]
	[[ "$output" != *"not ok"* ]]
	[ "$(grep -c 'passed, .* failed' <<<"$output")" -eq 1 ]
	[[ "$output" == *$'\n'"4 passed, 0 failed"$'\n'"mounts outside: 0" ]]
}

@test "run-tests in a chroot without /proc: mounts it for the tests, and leaves nothing mounted" {
	need_chroot
	write_test_root
	run in_plain_chroot --no-proc "[ ! -e /proc/self/mountinfo ] || { echo '/proc is mounted'; exit 1; }
		cd '$TOP' && scripts/run-tests --unit-only '$BATS_TEST_TMPDIR/build' || exit
		[ ! -e /proc/self/mountinfo ] || { echo '/proc is left mounted'; exit 1; }"
	echo "$output"
	[ "$status" -eq 0 ]
	[[ "$output" == *"run-tests: /proc is not mounted here (a chroot?); mounting it for the tests in a mount namespace of their own"* ]]
	[[ "$output" == *"run-tests: / is not a mount point here (a chroot?); running the tests in a mount namespace whose root is a bind mount of it"* ]]
	[[ "$output" == *"ok 1 /proc is mounted"* ]]
	[[ "$output" == *"ok 2 / is a mount point"* ]]
	[[ "$output" == *"ok 3 a command in a network namespace"* ]]
	[[ "$output" == *"ok 4 a terminal"* ]]
	[[ "$output" != *"not ok"* ]]
	[[ "$output" != *"left mounted"* ]]
	[[ "$output" == *$'\n'"4 passed, 0 failed"$'\n'"mounts outside: 0" ]]
}

@test "run-tests in a plain chroot: a failing test still fails the run" {
	need_chroot
	mkdir -p "$BATS_TEST_TMPDIR/build/tests"
	printf '#!/bin/sh\necho 1..1\necho "not ok 1 fails on purpose"\nexit 1\n' \
		>"$BATS_TEST_TMPDIR/build/tests/test_fails"
	chmod +x "$BATS_TEST_TMPDIR/build/tests/test_fails"
	run in_plain_chroot "cd '$TOP' && scripts/run-tests --unit-only '$BATS_TEST_TMPDIR/build'"
	echo "$output"
	[ "$status" -eq 1 ]
	[[ "$output" == *"test_fails: 1 fails on purpose"* ]]
	[[ "$output" == *$'\n'"0 passed, 1 failed"$'\n'"mounts outside: 0" ]]
}

@test "run-tests in a plain chroot whose mounts fail: says what to do, a summary line, exit 2" {
	need_chroot
	write_test_root
	# mount(8) refusing, as it would without CAP_SYS_ADMIN.
	mkdir -p "$BATS_TEST_TMPDIR/build/fake"
	printf '#!/bin/sh\necho "mount: permission denied" >&2\nexit 32\n' \
		>"$BATS_TEST_TMPDIR/build/fake/mount"
	chmod +x "$BATS_TEST_TMPDIR/build/fake/mount"
	run in_plain_chroot "cd '$TOP' && PATH='$BATS_TEST_TMPDIR/build/fake':\$PATH timeout 100 scripts/run-tests --unit-only '$BATS_TEST_TMPDIR/build'"
	echo "$output"
	[ "$status" -eq 2 ]
	[[ "$output" == *"mount: permission denied"* ]]
	[[ "$output" == *"run-tests: could not mount what the tests need; in a chroot, mount /proc and bind-mount its directory on itself first (mount --bind DIR DIR)"* ]]
	[[ "$output" != *"test_root"* ]]
	[[ "$output" == *$'\n'"0 passed, 1 failed"$'\n'"mounts outside: 0" ]]
}

@test "netns-hosts in a plain chroot: names / not being a mount point, and what to do" {
	need_chroot
	run in_plain_chroot "'$TOP/scripts/netns-hosts' up 2"
	echo "$output"
	[ "$status" -eq 77 ]
	[[ "$output" == *'netns-hosts: cannot run a command in a network namespace: "mount --make-rslave /" failed: Invalid argument'* ]]
	[[ "$output" == *"netns-hosts: / is not a mount point here (a chroot?): bind-mount the chroot's directory on itself (mount --bind DIR DIR) before entering it"* ]]
	[[ "$output" != *NETNS_ID=* ]]
}

# launch_script WORLD: a script every rank of WORLD answers exactly.
launch_script() {
	printf 'allreduce sum i64 1 {rank}\nexpect %d %d\n' "$1" $(($1 * ($1 - 1) / 2)) \
		>"$BATS_TEST_TMPDIR/build/script"
}

@test "launch in a chroot without /proc: the ranks run this binary, found by its path or on PATH" {
	need_chroot
	[ -x "$SR" ] || { echo "no binary at $SR: run make first" >&2; return 1; }
	launch_script 3
	local script=$BATS_TEST_TMPDIR/build/script dir
	dir=$(dirname "$SR")
	run in_plain_chroot --no-proc "[ ! -e /proc/self/exe ] || { echo '/proc is mounted'; exit 1; }
		echo 'by its path:'
		timeout 60 '$SR' launch -n 3 run --timeout 30 <'$script' || exit
		echo 'on PATH:'
		cd / && PATH='$dir':/usr/bin timeout 60 silvic-ring launch -n 3 run --timeout 30 <'$script'"
	echo "$output"
	[ "$status" -eq 0 ]
	[[ "$output" != *"cannot run"* ]]
	local part r
	for part in "by its path:" "on PATH:"; do
		local text=${output#*"$part"}
		[ "$part" = "on PATH:" ] || text=${text%%"on PATH:"*}
		for r in 0 1 2; do
			[[ "$text" == *"[$r] line 1: allreduce sum i64 = 3 3"* ]]
			[[ "$text" == *"[$r] line 2: expect = ok"* ]]
		done
	done
}

@test "launch in a chroot without /proc, its argv[0] on no path: names what it looked for, exit 8, no rank started" {
	need_chroot
	[ -x "$SR" ] || { echo "no binary at $SR: run make first" >&2; return 1; }
	launch_script 2
	run in_plain_chroot --no-proc "cd / && PATH=/usr/bin timeout 60 bash -c 'exec -a no-such-silvic-ring \"\$0\" launch -n 2 run --timeout 30' '$SR' <'$BATS_TEST_TMPDIR/build/script'"
	echo "$output"
	[ "$status" -eq 8 ]
	[[ "$output" == *"silvic-ring: launch: cannot find this program's own path to run the ranks (/proc/self/exe, or argv[0] 'no-such-silvic-ring' on PATH): No such file or directory"* ]]
	# No rank started: no line of a rank's, prefixed "[R] ".
	! grep -q '^\[[0-9]*\] ' <<<"$output"
}

@test "launch --hosts in a chroot without /proc, its argv[0] on no path: says to give --remote-path, exit 8, no ssh run" {
	need_chroot
	[ -x "$SR" ] || { echo "no binary at $SR: run make first" >&2; return 1; }
	launch_script 2
	# A stand-in for ssh that leaves a mark if it is ever run.
	local fake=$BATS_TEST_TMPDIR/build/fake-ssh mark=$BATS_TEST_TMPDIR/build/ssh-ran
	printf '#!/bin/sh\ntouch %s\nexit 0\n' "$mark" >"$fake"
	chmod +x "$fake"
	run in_plain_chroot --no-proc "cd / && PATH=/usr/bin timeout 60 bash -c 'exec -a no-such-silvic-ring \"\$0\" launch --hosts 127.0.0.1:1,127.0.0.2:1 --ssh \"\$1\" run --timeout 30' '$SR' '$fake' <'$BATS_TEST_TMPDIR/build/script'"
	echo "$output"
	[ "$status" -eq 8 ]
	[[ "$output" == *"silvic-ring: launch: cannot find this program's own path for the hosts to run (/proc/self/exe, or argv[0] 'no-such-silvic-ring' on PATH): No such file or directory; give --remote-path"* ]]
	[ ! -e "$mark" ]
	! grep -q '^\[[0-9]*\] ' <<<"$output"
}

@test "launch --hosts in a chroot without /proc: ssh is given this binary's path, found on PATH" {
	need_chroot
	[ -x "$SR" ] || { echo "no binary at $SR: run make first" >&2; return 1; }
	launch_script 2
	local dir fake=$BATS_TEST_TMPDIR/build/fake-ssh args=$BATS_TEST_TMPDIR/build/ssh-args
	dir=$(cd "$(dirname "$SR")" && pwd -P)
	# A stand-in for ssh that keeps the command it was given, then fails
	# as ssh does when a host cannot be reached.
	printf '#!/bin/sh\nprintf "%%s\\n" "$@" >>%s\necho "ssh: stand-in, no host reached" >&2\nexit 255\n' "$args" >"$fake"
	chmod +x "$fake"
	run in_plain_chroot --no-proc "[ ! -e /proc/self/exe ] || { echo '/proc is mounted'; exit 1; }
		cd / && PATH='$dir':/usr/bin timeout 60 silvic-ring launch --hosts 127.0.0.1 --ssh '$fake' run --timeout 30 <'$BATS_TEST_TMPDIR/build/script'"
	echo "$output"
	[ ! -e "$args" ] || cat "$args"
	[ "$status" -eq 3 ]
	[[ "$output" == *"silvic-ring: host 127.0.0.1 (rank 0): ssh exited with status 255 before its agent answered: ssh: stand-in, no host reached"* ]]
	[[ "$output" != *"cannot find this program's own path"* ]]
	# The host was to run the binary found on PATH, by its full path.
	grep -qF "exec '$dir/silvic-ring' launch --agent" "$args"
	! grep -q '/proc/self/exe' "$args"
}
