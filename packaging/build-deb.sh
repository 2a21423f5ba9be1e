#!/usr/bin/env bash
# Builds the leaderrun .deb and .rpm into dist/: the static binary (with its
# VCS revision stamped, for --version), the manual page, the bash, zsh and
# fish completion scripts the binary prints, the README, LICENSE and
# THIRD_PARTY_NOTICES, and in the .deb Debian's copyright file (made by
# packaging/notices.sh --copyright), packaged by nfpm (pinned in tools.env,
# run with go run). Prints the absolute path of the .deb, then of the .rpm, one a
# line, wherever it is run from.
#
#   packaging/build-deb.sh            # version from git describe
#   LEADERRUN_VERSION=1.2.3 packaging/build-deb.sh
set -euo pipefail
cd "$(dirname "$0")/.."
. ./tools.env

rm -rf dist && mkdir -p dist/completion
export LEADERRUN_ARCH="${LEADERRUN_ARCH:-$(go env GOARCH)}"
if [ -z "${LEADERRUN_VERSION:-}" ]; then
  # A Debian version must start with a digit: 0.0.0~git<date>.<revision>
  # until the project tags releases (v1.2.3 -> 1.2.3).
  if tag=$(git describe --tags --exact-match 2>/dev/null); then
    LEADERRUN_VERSION="${tag#v}"
  else
    LEADERRUN_VERSION="0.0.0~git$(git log -1 --format=%cd --date=format:%Y%m%d 2>/dev/null || date +%Y%m%d).$(git rev-parse --short=12 HEAD 2>/dev/null || echo unknown)"
  fi
fi
export LEADERRUN_VERSION

# Stamp the VCS revision, for --version, even where GOFLAGS says
# -buildvcs=false; -buildvcs=auto leaves it out where there is no git.
GOFLAGS="$(go env GOFLAGS | sed "s/-buildvcs=false//")" CGO_ENABLED=0 GOOS=linux GOARCH="$LEADERRUN_ARCH" \
  go build -trimpath -buildvcs=auto -o dist/leaderrun .
gzip -9n < docs/leaderrun.1 > dist/leaderrun.1.gz
# The completion scripts come from the binary built for this machine.
go run . completion bash > dist/completion/leaderrun.bash
go run . completion zsh > dist/completion/_leaderrun
go run . completion fish > dist/completion/leaderrun.fish

packaging/notices.sh --copyright > dist/copyright
if ! packaging/notices.sh | cmp -s - THIRD_PARTY_NOTICES; then
  echo "packaging/build-deb.sh: THIRD_PARTY_NOTICES is not current: run packaging/notices.sh > THIRD_PARTY_NOTICES" >&2
  exit 1
fi

for packager in deb rpm; do
  go run "$NFPM" package --config packaging/nfpm.yaml --packager "$packager" --target dist/ >&2
done
for f in dist/*.deb dist/*.rpm; do
  echo "$(pwd)/$f"
done
