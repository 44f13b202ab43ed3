#!/bin/sh
# Plots busbw against size from `silvic-ring bench --json` records, one
# line per collective, dtype and op, out of place and in place, on a log
# size axis, with gnuplot (scripts/install-deps installs gnuplot-nox).
#
# usage: examples/plot-busbw.sh BENCH.json OUT.svg|OUT.png
#   silvic-ring launch -n 4 bench -b 8 -e 64M --json > bench.json
#   examples/plot-busbw.sh bench.json busbw.svg
set -eu

[ $# -eq 2 ] || { echo "usage: plot-busbw.sh BENCH.json OUT.svg|OUT.png" >&2; exit 2; }
in=$1
out=$2
case $out in
*.svg) terminal="svg size 900,560 dynamic" ;;
*.png) terminal="pngcairo size 900,560" ;;
*) echo "plot-busbw: '$out' is neither .svg nor .png" >&2; exit 2 ;;
esac
command -v gnuplot >/dev/null ||
	{ echo "plot-busbw: gnuplot is not installed (apt-get install gnuplot-nox)" >&2; exit 2; }

tmp=$(mktemp -d)
trap 'rm -rf "$tmp"' EXIT

# One data file per series: "size busbw inplace_busbw" from the result
# records (one JSON object a line; a launcher's "[0] " tag is dropped).
sed 's/^\[[0-9]*\] //' "$in" | awk -v dir="$tmp" '
function field(name,   m) {
	if (match($0, "\"" name "\":(\"[^\"]*\"|[^,}]*)")) {
		m = substr($0, RSTART + length(name) + 3, RLENGTH - length(name) - 3)
		gsub(/"/, "", m)
		return m
	}
	return ""
}
/"type":"result"/ {
	series = field("collective") " " field("dtype") \
	    (field("op") == "none" ? "" : " " field("op"))
	file = dir "/" series
	gsub(/ /, "_", file)
	if (!(file in seen)) {
		seen[file] = 1
		print series > (dir "/series")
		print file > (dir "/files")
	}
	print field("size"), field("busbw_gbps"), field("inplace_busbw_gbps") > file
}'
[ -s "$tmp/files" ] || { echo "plot-busbw: no result records in $in" >&2; exit 1; }

{
	echo "set terminal $terminal"
	echo "set output '$out'"
	echo "set title 'silvic-ring bench: busbw by size'"
	echo "set xlabel 'size (bytes)'"
	echo "set ylabel 'busbw (GB/s)'"
	echo "set logscale x 2"
	echo "set format x '2^{%L}'"
	echo "set key left top"
	echo "set grid"
	printf 'plot '
	paste -d '\t' "$tmp/files" "$tmp/series" | {
		sep=
		while IFS='	' read -r file series; do
			printf "%s'%s' using 1:2 with linespoints title '%s', " "$sep" "$file" "$series"
			printf "'%s' using 1:3 with linespoints dashtype 2 title '%s in place'" "$file" "$series"
			sep=", "
		done
	}
	echo
} >"$tmp/plot.gp"
gnuplot "$tmp/plot.gp"
