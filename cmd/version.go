package cmd

import (
	"runtime/debug"
	"strings"
)

// version is what `leaderrun --version` prints: the module version and
// the VCS revision from the build info, the fields `go version -m` shows
// as "mod" and "build vcs.revision". A `go install ...@vX` build has the
// version; a build from a checkout has "(devel)" and, unless built with
// -buildvcs=false, the revision. A pseudo-version (v0.0.0-2025...-abcdef)
// carries the revision's prefix, which is printed when no vcs.revision is
// recorded.
func version() string {
	bi, ok := debug.ReadBuildInfo()
	if !ok {
		return "leaderrun (no build info)"
	}
	return versionOf(bi)
}

func versionOf(bi *debug.BuildInfo) string {
	v := bi.Main.Version
	if v == "" {
		v = "(devel)"
	}
	var rev, modified string
	for _, s := range bi.Settings {
		switch s.Key {
		case "vcs.revision":
			rev = s.Value
		case "vcs.modified":
			if s.Value == "true" {
				modified = "+dirty"
			}
		}
	}
	if rev == "" {
		// v0.0.0-20250101120000-abcdef123456[+incompatible]
		if parts := strings.Split(strings.TrimSuffix(v, "+incompatible"), "-"); len(parts) >= 3 && len(parts[len(parts)-1]) == 12 {
			rev = parts[len(parts)-1]
		}
	}
	if rev == "" {
		rev = "unknown"
	}
	return "leaderrun " + v + " (revision " + rev + modified + ", " + bi.GoVersion + ")"
}
