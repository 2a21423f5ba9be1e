package cmd

import (
	"slices"
	"testing"
)

func TestHoistFlags(t *testing.T) {
	app := New()
	for _, tc := range []struct{ in, want []string }{
		{[]string{"lr", "who", "a", "--json"}, []string{"lr", "who", "--json", "a"}},
		{[]string{"lr", "status", "a", "--dir", "/x", "--json"}, []string{"lr", "status", "--dir", "/x", "--json", "a"}},
		{[]string{"lr", "publish", "a", "-5", "degrees", "--", "--json"}, []string{"lr", "publish", "a", "-5", "degrees", "--", "--json"}},
		{[]string{"lr", "--name", "x", "--", "who", "--json"}, []string{"lr", "--name", "x", "--", "who", "--json"}},
		{[]string{"lr", "--dir", "/x", "who", "a", "--json"}, []string{"lr", "--dir", "/x", "who", "--json", "a"}},
		{[]string{"lr", "--dir=/x", "-v", "status", "a", "--json"}, []string{"lr", "--dir=/x", "-v", "status", "--json", "a"}},
		{[]string{"lr", "--name", "who", "--", "status", "--json"}, []string{"lr", "--name", "who", "--", "status", "--json"}},
		{[]string{"lr", "-n", "who", "a", "--json"}, []string{"lr", "-n", "who", "--json", "a"}},
	} {
		if got := hoistFlags(tc.in, app.Flags, app.Commands); !slices.Equal(got, tc.want) {
			t.Errorf("hoistFlags(%q) = %q, want %q", tc.in, got, tc.want)
		}
	}
}

func TestProtectDashDash(t *testing.T) {
	app := New()
	for _, tc := range []struct{ in, want []string }{
		{[]string{"lr", "--name", "x", "--", "who"}, []string{"lr", "--name", "x", "--", "--", "who"}},
		{[]string{"lr", "-nE", "3", "--", "who"}, []string{"lr", "-nE", "3", "--", "--", "who"}},
		{[]string{"lr", "who", "--", "x"}, []string{"lr", "who", "--", "x"}},
		{[]string{"lr", "-n", "sleep", "1"}, []string{"lr", "-n", "sleep", "1"}},
	} {
		if got := protectDashDash(tc.in, app.Flags); !slices.Equal(got, tc.want) {
			t.Errorf("protectDashDash(%q) = %q, want %q", tc.in, got, tc.want)
		}
	}
}

func TestParseDuration(t *testing.T) {
	for in, want := range map[string]string{"1.5": "1.5s", "1500ms": "1.5s", "0": "0s", "0.3": "300ms", "2m": "2m0s"} {
		d, err := parseDuration(in)
		if err != nil || d.String() != want {
			t.Errorf("parseDuration(%q) = %v, %v; want %s", in, d, err, want)
		}
	}
	for _, in := range []string{"", "-1", "soon", "1e300"} {
		if _, err := parseDuration(in); err == nil {
			t.Errorf("parseDuration(%q) succeeded", in)
		}
	}
}

func TestDeriveName(t *testing.T) {
	if got := deriveName([]string{"/usr/bin/backup.sh", "/home"}); len(got) != len("backup.sh-")+8 || got[:10] != "backup.sh-" {
		t.Errorf("deriveName = %q", got)
	}
	if a, b := deriveName([]string{"x", "a b"}), deriveName([]string{"x a", "b"}); a == b {
		t.Errorf("argument boundaries are lost: %q", a)
	}
	if got := deriveName([]string{"..."}); got[:4] != "cmd-" {
		t.Errorf("deriveName(...) = %q", got)
	}
}
