#!/bin/sh
# Short fuzz run for CI: every fuzz target of the listed packages for
# FUZZTIME each (default 5s). A failure leaves its input under
# <pkg>/testdata/fuzz/<target>/; commit it as a seed once fixed.
set -eu
cd "$(dirname "$0")/.."
fuzztime=${FUZZTIME:-5s}
status=0
for pkg in ${FUZZ_PKGS:-./elect ./oslock ./bus ./cmd .}; do
	[ -d "$pkg" ] || continue
	for target in $(go test -list '^Fuzz' "$pkg" | grep '^Fuzz' || true); do
		echo "fuzz $pkg $target ($fuzztime)"
		go test "$pkg" -run '^$' -fuzz "^${target}\$" -fuzztime "$fuzztime" || status=1
	done
done
exit $status
