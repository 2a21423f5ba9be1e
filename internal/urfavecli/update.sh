#!/usr/bin/env bash
# Copies urfave/cli/v2 at VERSION from the module cache into this
# directory, without its tests and without docs.go, the man-page and
# Markdown generator (see doc.go), and applies local.patch. Run from the
# repository root:
#
#   internal/urfavecli/update.sh v2.27.7
set -euo pipefail
version="${1:?usage: internal/urfavecli/update.sh VERSION}"
dir=$(go mod download -json "github.com/urfave/cli/v2@$version" | sed -n 's/^\s*"Dir": "\(.*\)",$/\1/p')
cd "$(dirname "$0")"
find . -maxdepth 1 -name "*.go" ! -name doc.go -delete
for f in "$dir"/*.go; do
  case "$(basename "$f")" in *_test.go | docs.go) continue ;; esac
  cp "$f" . && chmod u+w "$(basename "$f")"
done
cp "$dir/LICENSE" LICENSE && chmod u+w LICENSE
# leaderrun's local changes, each marked "leaderrun:" in the code.
patch -p1 < local.patch
sed -i "s/^\/\/ Version: .*/\/\/ Version: $version/" doc.go
echo "copied urfave/cli $version; now: go build ./... && go test ./..."
