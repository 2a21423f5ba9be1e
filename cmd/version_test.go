package cmd

import (
	"runtime/debug"
	"testing"
)

// TestVersionOf covers the build infos --version meets: a checkout built
// with VCS stamping, a go install of a pseudo-version (no vcs settings:
// the revision comes from the version), of a tag, and a build without
// either.
func TestVersionOf(t *testing.T) {
	for _, c := range []struct {
		bi   debug.BuildInfo
		want string
	}{
		{debug.BuildInfo{GoVersion: "go1.26.8", Main: debug.Module{Version: "(devel)"}, Settings: []debug.BuildSetting{
			{Key: "vcs.revision", Value: "8e5adaacf4b6efe2a43b3c9d98cc610a0a740c9d"}, {Key: "vcs.modified", Value: "true"}}},
			"leaderrun (devel) (revision 8e5adaacf4b6efe2a43b3c9d98cc610a0a740c9d+dirty, go1.26.8)"},
		{debug.BuildInfo{GoVersion: "go1.26.8", Main: debug.Module{Version: "v0.0.0-20261201103559-8e5adaacf4b6"}},
			"leaderrun v0.0.0-20261201103559-8e5adaacf4b6 (revision 8e5adaacf4b6, go1.26.8)"},
		{debug.BuildInfo{GoVersion: "go1.26.8", Main: debug.Module{Version: "v1.2.3"}},
			"leaderrun v1.2.3 (revision unknown, go1.26.8)"},
		{debug.BuildInfo{GoVersion: "go1.26.8"},
			"leaderrun (devel) (revision unknown, go1.26.8)"},
	} {
		if got := versionOf(&c.bi); got != c.want {
			t.Errorf("versionOf(%+v)\n = %s\nwant %s", c.bi.Main, got, c.want)
		}
	}
}
