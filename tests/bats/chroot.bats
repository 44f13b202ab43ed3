#!/usr/bin/env bats
# The tests in a plain chroot, as a newcomer makes one (debootstrap, then
# chroot DIR with /proc mounted): its / is a directory, not a mount
# point, so `ip netns exec` and `unshare --propagation private` fail on
# it.  scripts/run-tests then runs the tests in a mount namespace rooted
# at a private bind mount of the chroot, and scripts/netns-hosts, run by
# hand there, names the cause.  The chroot here is built from bind mounts
# of this machine's /usr and /etc, inside a private mount namespace, so
# nothing it mounts is seen outside the test.

load helpers

TOP=$(cd "$BATS_TEST_DIRNAME/../.." && pwd)

need_chroot() {
	[ "$(id -u)" -eq 0 ] || { echo "building a chroot needs root" >&2; return 1; }
	command -v unshare >/dev/null || { echo "unshare is not installed (Debian: util-linux)" >&2; return 1; }
	command -v ip >/dev/null || { echo "ip(8) is not installed (Debian: iproute2)" >&2; return 1; }
}

# in_plain_chroot CMD: runs the shell command CMD as root in a chroot at
# $BATS_TEST_TMPDIR/root whose / is not a mount point, with the checkout
# and $BATS_TEST_TMPDIR at their own paths.  Prints, after CMD's output,
# "mounts outside: N" with the number of mounts that CMD left outside
# the chroot's own ones (0 when nothing leaked).
in_plain_chroot() {
	unshare --mount --propagation private bash -c '
		r=$1/root top=$2 cmd=$3
		mkdir -p "$r"/{usr,etc,dev,sys,proc,tmp,run} "$r$top" "$r$1/build" || exit 1
		for l in bin sbin lib lib32 lib64 libx32; do
			if [ -L "/$l" ]; then
				ln -s "$(readlink "/$l")" "$r/$l"
			elif [ -d "/$l" ]; then
				mkdir -p "$r/$l" && mount --bind "/$l" "$r/$l"
			fi
		done
		for d in usr etc dev sys; do mount --bind "/$d" "$r/$d" || exit 1; done
		mount -t proc proc "$r/proc" && mount --bind "$top" "$r$top" &&
			mount --bind "$1/build" "$r$1/build" || exit 1
		before=$(wc -l </proc/self/mountinfo)
		chroot "$r" bash -c "$cmd"
		rc=$?
		echo "mounts outside: $(($(wc -l </proc/self/mountinfo) - before))"
		exit $rc
	' in-plain-chroot "$BATS_TEST_TMPDIR" "$TOP" "$1"
}

@test "run-tests in a plain chroot: runs the tests in a mounted root, and network namespaces work there" {
	need_chroot
	mkdir -p "$BATS_TEST_TMPDIR/build/tests"
	# A test program in TAP, as the C tests are: / a mount point, and a
	# command run in a network namespace of its own.
	cat >"$BATS_TEST_TMPDIR/build/tests/test_root" <<'SH'
#!/bin/bash
echo 1..2
if awk '$5 == "/" { f = 1 } END { exit !f }' /proc/self/mountinfo; then
	echo "ok 1 / is a mount point"
else
	echo "not ok 1 / is a mount point"
fi
ns=srt-chroot-$$
if ip netns add "$ns" && ip netns exec "$ns" ip link set lo up; then
	echo "ok 2 a command in a network namespace"
else
	echo "not ok 2 a command in a network namespace"
fi
ip netns del "$ns" 2>/dev/null
SH
	chmod +x "$BATS_TEST_TMPDIR/build/tests/test_root"
	# Outside the chroot the same program fails its first test only
	# where / is not a mount point here either: it tests what it says.
	run in_plain_chroot "cd '$TOP' && scripts/run-tests --unit-only '$BATS_TEST_TMPDIR/build'"
	echo "$output"
	[ "$status" -eq 0 ]
	[[ "$output" == *"run-tests: / is not a mount point here (a chroot?); running the tests in a mount namespace whose root is a bind mount of it"* ]]
	[[ "$output" == *"ok 1 / is a mount point"* ]]
	[[ "$output" == *"ok 2 a command in a network namespace"* ]]
	[[ "$output" != *"not ok"* ]]
	[ "$(grep -c 'passed, .* failed' <<<"$output")" -eq 1 ]
	[[ "$output" == *$'\n'"2 passed, 0 failed"$'\n'"mounts outside: 0" ]]
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

@test "netns-hosts in a plain chroot: names / not being a mount point, and what to do" {
	need_chroot
	mkdir -p "$BATS_TEST_TMPDIR/build"
	run in_plain_chroot "'$TOP/scripts/netns-hosts' up 2"
	echo "$output"
	[ "$status" -eq 77 ]
	[[ "$output" == *'netns-hosts: cannot run a command in a network namespace: "mount --make-rslave /" failed: Invalid argument'* ]]
	[[ "$output" == *"netns-hosts: / is not a mount point here (a chroot?): bind-mount the chroot's directory on itself (mount --bind DIR DIR) before entering it"* ]]
	[[ "$output" != *NETNS_ID=* ]]
}
