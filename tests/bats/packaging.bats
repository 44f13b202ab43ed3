#!/usr/bin/env bats
# Packaging as a user or a distribution meets it: make install (the
# shared library and its soname, pkg-config, a program built against the
# installed library), --version, bash completion, make dist, and the
# configuration stamp that rebuilds when the features change.

load helpers

TOP=$(cd "$BATS_TEST_DIRNAME/../.." && pwd -P)

# make in the top directory, for the build the suite tests (SAN=1 when it
# is build-san/); other variables of an outer `make check` come through
# MAKEFLAGS.  V= keeps the short "  CC  file" lines the tests read.
sr_make() {
	local san=
	[ "$(basename "${SR_BUILD_DIR:-build}")" = build-san ] && san=SAN=1
	make -C "$TOP" --no-print-directory V= $san "$@"
}

# The sanitizers of the build under test: a program linked against an
# instrumented library needs them too.
san_flags() {
	[ "$(basename "${SR_BUILD_DIR:-build}")" = build-san ] &&
		echo -fsanitize=address,undefined
	return 0
}

# Whether this tree is a git checkout (else an unpacked `make dist`).
in_git() {
	[ "$(git -C "$TOP" rev-parse --show-toplevel 2>/dev/null)" = "$TOP" ]
}

version() {
	sed -n 's/^#define SR_VERSION "\(.*\)"/\1/p' "$TOP/src/silvic_ring.h"
}

# The functions src/silvic_ring.h declares, one a line, sorted.
public_functions() {
	grep -oE '\bsr_[a-z0-9_]+\(' "$1" | tr -d '(' | sort -u
}

# A program that uses the library through its public header only: a
# world of one (no sockets), an allreduce, a code's name.
write_program() {
	cat >"$1" <<'EOF'
#include <inttypes.h>
#include <stdio.h>
#include <string.h>

#include <silvic_ring.h>

int
main(void)
{
	struct sr_error err;
	struct sr_listener *listener;
	struct sr_ring *ring;
	struct sr_ring_options options;
	char address[SR_ADDR_MAX];
	const char *addresses[1] = { address };
	int64_t v[3] = { 1, 2, 3 };

	sr_error_clear(&err);
	if (sr_listener_open(&listener, "127.0.0.1", NULL, 0, &err) != 0)
		return 1;
	snprintf(address, sizeof(address), "%s", sr_listener_address(listener));
	sr_ring_options_init(&options);
	options.timeout_ms = 10000;
	if (sr_ring_connect(&ring, listener, 0, addresses, 1, 7, &options,
	    &err) != 0 || sr_allreduce_sum_i64(ring, v, 3, &err) != 0) {
		fprintf(stderr, "%s\n", err.message);
		return 1;
	}
	printf("silvic-ring %s: world %" PRIu32 ", sum %" PRId64 " %" PRId64
	    " %" PRId64 ", %s\n", SR_VERSION, sr_ring_world(ring), v[0], v[1],
	    v[2], sr_code_name(SR_ETIMEOUT));
	sr_ring_close(ring);
	return 0;
}
EOF
}

@test "make install puts the library, its soname links, silvic-ring.pc and the completion under DESTDIR" {
	local root=$BATS_TEST_TMPDIR/root lib ver
	lib=$root/usr/local/lib
	ver=$(version)
	run sr_make install DESTDIR="$root"
	[ "$status" -eq 0 ]
	[ -x "$root/usr/local/bin/silvic-ring" ]
	[ -f "$root/usr/local/include/silvic_ring.h" ]
	[ -f "$root/usr/local/share/man/man1/silvic-ring.1" ]
	[ -f "$root/usr/local/share/bash-completion/completions/silvic-ring" ]
	[ -f "$lib/libsilvic_ring.a" ]
	# libsilvic_ring.so.MAJOR.MINOR, its soname .so.MAJOR, and the
	# link the linker's -lsilvic_ring finds.
	local major=${ver%%.*} minor
	minor=${ver#*.}
	minor=${minor%%.*}
	[ -f "$lib/libsilvic_ring.so.$major.$minor" ]
	[ "$(readlink "$lib/libsilvic_ring.so.$major")" = "libsilvic_ring.so.$major.$minor" ]
	[ "$(readlink "$lib/libsilvic_ring.so")" = "libsilvic_ring.so.$major" ]
	run readelf -d "$lib/libsilvic_ring.so.$major.$minor"
	[ "$status" -eq 0 ]
	[[ "$output" == *"Library soname: [libsilvic_ring.so.$major]"* ]]
	run cat "$lib/pkgconfig/silvic-ring.pc"
	[[ "$output" == *"Version: $ver"* ]]
	[[ "$output" == *"Libs: -L\${libdir} -lsilvic_ring"* ]]
	if "$SR" --version | grep -q 'authentication: yes'; then
		[[ "$output" == *"Requires.private: libcrypto"* ]]
	else
		[[ "$output" != *"libcrypto"* ]]
	fi
	# make uninstall takes every file back.
	run sr_make uninstall DESTDIR="$root"
	[ "$status" -eq 0 ]
	run find "$root" ! -type d
	[ "$output" = "" ]
}

@test "the shared library exports exactly the functions silvic_ring.h declares" {
	local so
	so=$(echo "${SR_BUILD_DIR:-$TOP/build}"/libsilvic_ring.so.*.*)
	[ -f "$so" ]
	nm -D --defined-only "$so" | awk '$2 == "T" { print $3 }' | sort -u \
	    >"$BATS_TEST_TMPDIR/exported"
	public_functions "$TOP/src/silvic_ring.h" >"$BATS_TEST_TMPDIR/declared"
	run diff "$BATS_TEST_TMPDIR/declared" "$BATS_TEST_TMPDIR/exported"
	[ "$status" -eq 0 ]
	# The internals the command never calls stay inside.
	run grep -c '^sr_frame_\|^sr_sock_\|^sr_engine_' "$BATS_TEST_TMPDIR/exported"
	[ "$output" = 0 ]
}

@test "a program builds with pkg-config against the installed library, shared and static, and runs" {
	local root=$BATS_TEST_TMPDIR/root cflags libs static crypto=0
	run sr_make install DESTDIR="$root"
	[ "$status" -eq 0 ]
	"$SR" --version | grep -q 'authentication: yes' && crypto=1
	export PKG_CONFIG_PATH=$root/usr/local/lib/pkgconfig
	export PKG_CONFIG_SYSROOT_DIR=$root
	run pkg-config --modversion silvic-ring
	[ "$status" -eq 0 ]
	[ "$output" = "$(version)" ]
	cflags=$(pkg-config --cflags silvic-ring)
	libs=$(pkg-config --libs silvic-ring)
	static=$(pkg-config --static --libs silvic-ring)
	[[ "$cflags" == *"-I$root/usr/local/include"* ]]
	[[ "$libs" == *"-L$root/usr/local/lib"*"-lsilvic_ring"* ]]
	# libcrypto is private: a shared link does not name it, a static
	# one must.
	[[ "$libs" != *"-lcrypto"* ]]
	if [ $crypto -eq 1 ]; then
		[[ "$static" == *"-lcrypto"* ]]
	fi
	write_program "$BATS_TEST_TMPDIR/prog.c"
	# shellcheck disable=SC2086
	cc -Wall -Werror $(san_flags) $cflags -o "$BATS_TEST_TMPDIR/prog-shared" \
	    "$BATS_TEST_TMPDIR/prog.c" $libs
	run readelf -d "$BATS_TEST_TMPDIR/prog-shared"
	[[ "$output" == *"Shared library: [libsilvic_ring.so."* ]]
	LD_LIBRARY_PATH=$root/usr/local/lib run "$BATS_TEST_TMPDIR/prog-shared"
	[ "$status" -eq 0 ]
	[ "$output" = "silvic-ring $(version): world 1, sum 1 2 3, timeout" ]
	LD_LIBRARY_PATH=$root/usr/local/lib run ldd "$BATS_TEST_TMPDIR/prog-shared"
	[[ "$output" == *"libsilvic_ring.so."*" => $root/usr/local/lib/libsilvic_ring.so."* ]]
	# Static: the archive, and what --static adds (libcrypto).
	# shellcheck disable=SC2086
	cc -Wall -Werror $(san_flags) $cflags -o "$BATS_TEST_TMPDIR/prog-static" \
	    "$BATS_TEST_TMPDIR/prog.c" ${static/-lsilvic_ring/-l:libsilvic_ring.a}
	run readelf -d "$BATS_TEST_TMPDIR/prog-static"
	[[ "$output" != *"libsilvic_ring"* ]]
	run "$BATS_TEST_TMPDIR/prog-static"
	[ "$status" -eq 0 ]
	[ "$output" = "silvic-ring $(version): world 1, sum 1 2 3, timeout" ]
}

# join A B C: "A, B, C".
join() {
	local out=$1
	shift
	for x in "$@"; do
		out+=", $x"
	done
	printf '%s' "$out"
}

@test "--version shows the revision and the libraries it was built and runs with" {
	run "$SR" --version
	[ "$status" -eq 0 ]
	[ "${lines[0]}" = "silvic-ring $(version)" ]
	[[ "${lines[1]}" == "features: "*"http rendezvous: "* ]]
	# The revision: git's, else the tarball's REVISION, else none (a
	# checkout git will not read, say another user's).
	local want=
	if in_git; then
		want=$(git -C "$TOP" describe --always --dirty)
	elif [ -f "$TOP/REVISION" ]; then
		want=$(cat "$TOP/REVISION")
	fi
	if [ -n "$want" ]; then
		[ "${lines[2]}" = "revision: $want" ]
		lines=("${lines[@]:0:2}" "${lines[@]:3}")
	else
		[[ "$output" != *"revision:"* ]]
	fi
	local built=() running=()
	if [[ "${lines[1]}" == *"http rendezvous: yes"* ]]; then
		built+=("libcurl $(pkg-config --modversion libcurl)"
		    "libmicrohttpd $(pkg-config --modversion libmicrohttpd)")
		running+=("libcurl [0-9.]+" "libmicrohttpd [0-9.]+")
	fi
	if [[ "${lines[1]}" == *"authentication: yes"* ]]; then
		built+=("libcrypto $(pkg-config --modversion libcrypto)")
		running+=("libcrypto [0-9.]+[a-z]*")
	fi
	if [ ${#built[@]} -eq 0 ]; then
		[ "${lines[2]}" = "built with: no optional library" ]
		[ ${#lines[@]} -eq 3 ]
	else
		[ "${lines[2]}" = "built with: $(join "${built[@]}")" ]
		[[ "${lines[3]}" =~ ^"running with: "$(join "${running[@]}")$ ]]
		[ ${#lines[@]} -eq 4 ]
	fi
}

# complete WORDS...: what the completion offers for the last word.
complete_words() {
	bash -c 'source "$1/completions/silvic-ring.bash"; shift
		complete -p silvic-ring >/dev/null || exit 9
		COMP_WORDS=("$@"); COMP_CWORD=$(($# - 1))
		_silvic_ring; printf "%s\n" "${COMPREPLY[@]}"' _ "$TOP" "$@"
}

@test "bash completion: commands, each command's long options, files for file options" {
	run complete_words "$SR" ru
	[ "$status" -eq 0 ]
	[ "$output" = run ]
	run complete_words "$SR" ""
	[ "$output" = $'run\nlaunch\nbench\nserve\nhelp' ]
	run complete_words "$SR" bench --min
	[ "$output" = $'--min-busbw\n--min-time\n--minbytes' ]
	run complete_words "$SR" launch -n 4 run --pe
	[ "$output" = --peers ]
	run complete_words "$SR" bench -d f
	[ "$output" = $'f32\nf64' ]
	# Every long option of a command's help is offered after --.
	local cmd opt
	for cmd in run launch bench serve; do
		run complete_words "$SR" "$cmd" --
		for opt in $("$SR" help "$cmd" | grep -oE '^ +(-[a-zA-Z0-9], )?--[a-z0-9_-]+' | grep -oE -- '--[a-z0-9_-]+'); do
			[[ $'\n'"$output"$'\n' == *$'\n'"$opt"$'\n'* ]] ||
				{ echo "$cmd: $opt not offered" >&2; return 1; }
		done
	done
	# A file option completes file names.
	mkdir "$BATS_TEST_TMPDIR/d"
	touch "$BATS_TEST_TMPDIR/d/check.txt" "$BATS_TEST_TMPDIR/d/key"
	run complete_words "$SR" run --script "$BATS_TEST_TMPDIR/d/ch"
	[ "$output" = "$BATS_TEST_TMPDIR/d/check.txt" ]
	run complete_words "$SR" serve --token-file "$BATS_TEST_TMPDIR/d/k"
	[ "$output" = "$BATS_TEST_TMPDIR/d/key" ]
}

@test "make dist writes silvic-ring-VERSION.tar.gz with every tracked file, MANIFEST and REVISION" {
	local out=$BATS_TEST_TMPDIR/dist name
	name=silvic-ring-$(version)
	run sr_make dist DIST_DIR="$out"
	if ! in_git && [ ! -f "$TOP/MANIFEST" ]; then
		# No list of files to ship: a clear refusal.
		[ "$status" -ne 0 ]
		[[ "$output" == *"dist: $TOP is neither a git checkout nor an unpacked tarball (no MANIFEST)"* ]]
		return 0
	fi
	[ "$status" -eq 0 ]
	[[ "$output" == *"dist: $out/$name.tar.gz ("* ]]
	[ -f "$out/$name.tar.gz" ]
	tar -tzf "$out/$name.tar.gz" | sed -n "s|^$name/||p" | grep -v '/$' | sort \
	    >"$BATS_TEST_TMPDIR/shipped"
	if in_git; then
		git -C "$TOP" ls-files | while IFS= read -r f; do
			[ -e "$TOP/$f" ] && echo "$f"
		done | sort >"$BATS_TEST_TMPDIR/want"
	else
		grep -v '^MANIFEST$\|^REVISION$' "$TOP/MANIFEST" >"$BATS_TEST_TMPDIR/want"
	fi
	[ "$(wc -l <"$BATS_TEST_TMPDIR/want")" -gt 50 ]
	run comm -23 "$BATS_TEST_TMPDIR/want" "$BATS_TEST_TMPDIR/shipped"
	[ "$status" -eq 0 ]
	[ -z "$output" ]
	for f in LICENSE Makefile README.md MANIFEST REVISION silvic-ring.pc.in \
	    completions/silvic-ring.bash scripts/install-deps .ci/run; do
		grep -qx "$f" "$BATS_TEST_TMPDIR/shipped" ||
			{ echo "$f is not in the tarball" >&2; return 1; }
	done
	run tar -xzOf "$out/$name.tar.gz" "$name/REVISION"
	if in_git; then
		[ "$output" = "$(git -C "$TOP" describe --always --dirty)" ]
	fi
	# Scripts keep their execute bits.
	run tar -tvzf "$out/$name.tar.gz" "$name/scripts/install-deps"
	[[ "$output" == -rwx* ]]
}

@test "a change of features rebuilds every object (the configuration stamp)" {
	local b=$BATS_TEST_TMPDIR/b
	run sr_make -j2 B="$b" HTTP=0 "$b/silvic-ring"
	[ "$status" -eq 0 ]
	grep -qx 'HTTP=0' "$b/config.mk"
	run "$b/silvic-ring" --version
	[[ "${lines[1]}" == *"http rendezvous: no"* ]]
	run sr_make -j2 B="$b" HTTP=1 "$b/silvic-ring"
	[ "$status" -eq 0 ]
	[[ "$output" == *"CONFIG $b/config.mk: HTTP=1"* ]]
	[[ "$output" == *"CC     $b/src/ring.o"* ]]
	[[ "$output" == *"CC     $b/cli/serve.o"* ]]
	run "$b/silvic-ring" --version
	[[ "${lines[1]}" == *"http rendezvous: yes"* ]]
	# Unchanged: nothing is built again.
	run sr_make B="$b" HTTP=1 "$b/silvic-ring"
	[ "$status" -eq 0 ]
	[[ "$output" != *"CC "* ]]
	[[ "$output" != *"LD "* ]]
}

# fake_tools DIR: a dpkg-query that finds no package and an id that is
# not root, first on PATH: a fresh machine seen by a user.
fake_tools() {
	mkdir -p "$1"
	printf '#!/bin/sh\nexit 1\n' >"$1/dpkg-query"
	printf '#!/bin/sh\n[ "$1" = -u ] && echo 1000 && exit 0\nexec /usr/bin/id "$@"\n' >"$1/id"
	chmod +x "$1/dpkg-query" "$1/id"
}

@test "install-deps: --build lists the build's libraries; the tests' list has time and curl" {
	fake_tools "$BATS_TEST_TMPDIR/bin"
	PATH=$BATS_TEST_TMPDIR/bin:$PATH run "$TOP/scripts/install-deps" --build --check
	[ "$status" -eq 1 ]
	[ "$output" = "missing: build-essential pkg-config libcurl4-openssl-dev libmicrohttpd-dev libssl-dev" ]
	PATH=$BATS_TEST_TMPDIR/bin:$PATH run "$TOP/scripts/install-deps" --check
	[ "$status" -eq 1 ]
	local p
	for p in libcurl4-openssl-dev bats python3 curl time iproute2 procps git; do
		[[ " ${output#missing: } " == *" $p "* ]] ||
			{ echo "$p is not in: $output" >&2; return 1; }
	done
	PATH=$BATS_TEST_TMPDIR/bin:$PATH run "$TOP/scripts/install-deps" --build
	[ "$status" -eq 1 ]
	[ "${lines[0]}" = "install-deps: missing packages: build-essential pkg-config libcurl4-openssl-dev libmicrohttpd-dev libssl-dev" ]
	[ "${lines[1]}" = "install-deps: run as root: sudo scripts/install-deps --build" ]
	run "$TOP/scripts/install-deps" --frobnicate
	[ "$status" -eq 2 ]
	[[ "$output" == *"unknown option '--frobnicate'"* ]]
}

@test "make demo as a user on a machine without the libraries says what is missing, then runs with what is there" {
	fake_tools "$BATS_TEST_TMPDIR/bin"
	PATH=$BATS_TEST_TMPDIR/bin:$PATH run sr_make demo
	[ "$status" -eq 0 ]
	[[ "$output" == *"install-deps: missing packages: build-essential pkg-config"* ]]
	[[ "$output" == *"make demo: going on with what is installed (see silvic-ring --version)"* ]]
	[[ "$output" == *"barrier = ok"* ]]
	# install-deps ran before the build (which finds what it installed).
	[[ "${output%%make demo: going on*}" != *"line 2: allreduce"* ]]
}
