#!/bin/sh
# Short fuzz run for CI: every fuzz target of the listed packages for
# FUZZTIME each (default 5s). A failure leaves its input under
# <pkg>/testdata/fuzz/<target>/; commit it as a seed once fixed.
#
# The Go fuzzer sometimes ends a run at its time limit with a bare
# "context deadline exceeded" while a worker is busy (no input found, none
# written) on a loaded machine. Such a run is tried once more; only a run
# that reports a failing input, or fails for another reason twice, fails CI.
set -eu
cd "$(dirname "$0")/.."
fuzztime=${FUZZTIME:-5s}
status=0
out=$(mktemp)
trap 'rm -f "$out"' EXIT
fuzz_once() {
	go test "$1" -run '^$' -fuzz "^$2\$" -fuzztime "$fuzztime" >"$out" 2>&1
	rc=$?
	cat "$out"
	return $rc
}
for pkg in ${FUZZ_PKGS:-./elect ./oslock ./bus ./cmd .}; do
	[ -d "$pkg" ] || continue
	for target in $(go test -list '^Fuzz' "$pkg" | grep '^Fuzz' || true); do
		echo "fuzz $pkg $target ($fuzztime)"
		if fuzz_once "$pkg" "$target"; then
			continue
		fi
		if grep -q 'Failing input written' "$out" || ! grep -q 'context deadline exceeded' "$out"; then
			status=1
			continue
		fi
		echo "fuzz $pkg $target: the fuzzer timed out without a finding; once more"
		fuzz_once "$pkg" "$target" || status=1
	done
done
exit $status
