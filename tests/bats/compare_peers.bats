#!/usr/bin/env bats
# scripts/compare-peers and its ceilings (scripts/raw_ring_bench.c): the
# numbers the performance page is made of.  Exactness and errors only:
# no test here times anything.

load helpers

TOP=$BATS_TEST_DIRNAME/../..

setup() {
	RAW=$BATS_TEST_TMPDIR/raw_ring_bench
	cc -O2 -pthread -o "$RAW" "$TOP/scripts/raw_ring_bench.c"
}

# rows OUTPUT SIZES...: OUTPUT has one "SIZE TIME BUSBW" line per size,
# in order, with numbers.
rows() {
	local out=$1 i=0 s
	shift
	mapfile -t lines <<<"$out"
	[ "${#lines[@]}" -eq $# ] || { echo "expected $# rows, got: $out"; return 1; }
	for s in "$@"; do
		[[ ${lines[i]} =~ ^$s\ [0-9]+\.[0-9]+\ [0-9]+\.[0-9]+$ ]] ||
			{ echo "row $i is '${lines[i]}', expected size $s"; return 1; }
		i=$((i + 1))
	done
}

@test "raw_ring_bench moves every block to every rank, world 2, 3 and 5, sizes not divisible by the world" {
	for w in 2 3 5; do
		run timeout 120 "$RAW" "$w" 1,7,1001,65537,1048577 3 1 3 1
		[ "$status" -eq 0 ] || { echo "world $w: $output"; false; }
		rows "$output" 1 7 1001 65537 1048577
	done
}

@test "raw_ring_bench --sum ends with every f64 the ranks' sum, world 2, 3 and 5" {
	# 8 B at world 5 leaves four ranks an empty block; 1048584 B is
	# 131073 f64s, one block longer than the others.
	for w in 2 3 5; do
		run timeout 120 "$RAW" --sum "$w" 8,24,1000,65536,1048584 3 1 3 1 reno
		[ "$status" -eq 0 ] || { echo "world $w: $output"; false; }
		rows "$output" 8 24 1000 65536 1048584
	done
}

@test "raw_ring_bench refuses bad arguments with exit 2, naming them" {
	run "$RAW" --sum 3 8,12 1 1 1 1
	[ "$status" -eq 2 ]
	[[ $output == *"size '12' is not a multiple of 8 (one f64)"* ]]
	run "$RAW" 1 8 1 1 1 1
	[ "$status" -eq 2 ]
	[[ $output == *"WORLD '1' is not 2 to 256"* ]]
	run "$RAW" 2 8,x 1 1 1 1
	[ "$status" -eq 2 ]
	[[ $output == *"size 'x' is not a number"* ]]
	run "$RAW" --sum 2 8
	[ "$status" -eq 2 ]
	[[ $output == *"usage: raw_ring_bench [--sum] WORLD SIZES"* ]]
}

@test "compare-peers: one run prints a row per size with silvic-ring, both ceilings and the ratios" {
	[ -x "$SR" ] || { echo "no binary at $SR: run make first"; false; }
	run timeout 600 "$TOP/scripts/compare-peers" --runs 1 --worlds 2 --sizes 8,65536
	[ "$status" -eq 0 ] || { echo "$output"; false; }
	echo "$output"
	[[ $output == *"# raw sum: the same ring with the fold"* ]]
	[[ $output == *"/ raw sum"* ]]
	# world, size, then five tools of two columns (gloo may say
	# unavailable where torch is not installed), then three ratios.
	local num='[0-9]+\.[0-9]+' row
	for size in 8 64K; do
		row=$(grep -E "^ +2 +$size " <<<"$output")
		[[ $row =~ ^\ +2\ +$size\ +$num\ +$num\ +$num\ +$num\ +($num\ +$num|unavailable)\ +$num\ +$num\ +$num\ +$num\ +$num\ +$num\ +$num$ ]] ||
			{ echo "row for $size: '$row'"; false; }
	done
}

@test "compare-peers refuses bad options with exit 2, naming them" {
	run "$TOP/scripts/compare-peers" --sizes 8,12
	[ "$status" -eq 2 ]
	[[ $output == *"--sizes: '12' is not a multiple of 8 (one f64)"* ]]
	run "$TOP/scripts/compare-peers" --runs 0
	[ "$status" -eq 2 ]
	[[ $output == *"--runs '0' is not a count"* ]]
	run "$TOP/scripts/compare-peers" --worlds 1
	[ "$status" -eq 2 ]
	[[ $output == *"--worlds: '1' is not a world size (2 or more)"* ]]
	run "$TOP/scripts/compare-peers" --bogus
	[ "$status" -eq 2 ]
	[[ $output == *"unknown option '--bogus'"* ]]
}
