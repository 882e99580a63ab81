#!/bin/sh
# No layer of lib/ calls a function defined in a layer above it. The
# include paths keep a layer from the headers above it, but every layer
# sees sotto.h, so a call up through the public API would compile (a
# model file calling sotto_transcribe()): this reads the layers' static
# libraries instead.
#   tests/unit/lib-calls.sh LIB...	(the layers' .a files, lowest first)
set -u
export LC_ALL=C	# sort and comm in one collation
work=$(mktemp -d)
trap 'rm -rf "$work"' EXIT
: > "$work/above"
status=0
# From the top down: what each layer needs against what those above define.
for lib in $(printf '%s\n' "$@" | tac); do
	[ -r "$lib" ] || { echo "lib-calls: no $lib" >&2; exit 2; }
	nm -u "$lib" | awk 'NF == 2 && $1 == "U" { print $2 }' |
	    sort -u > "$work/needs" || exit 2
	comm -12 "$work/needs" "$work/above" > "$work/up"
	if [ -s "$work/up" ]; then
		echo "lib-calls: $(basename "$lib") calls up:" \
		    $(cat "$work/up") >&2
		status=1
	fi
	nm -g --defined-only "$lib" | awk 'NF == 3 { print $3 }' |
	    sort -u - "$work/above" > "$work/defs" || exit 2
	mv "$work/defs" "$work/above"
done
exit $status
