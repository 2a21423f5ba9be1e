package cmd

import (
	"slices"
	"testing"
)

// A backend whose program is not known to cmd fits through WithHandovers:
// its flag hands over (before `--` only), shows in the manual on the app
// and on every subcommand, and its variables in the environment list,
// among those leaderrun reads. Without the option nothing hands over.
func TestHandoverOfAThirdBackend(t *testing.T) {
	x := Handover{Flag: "x-url", Usage: "elect over X at `URL`", Program: "leaderrun-x", Install: "cd x && go install ./cmd/leaderrun-x",
		Env: []EnvRow{{Name: "LEADERRUN_X_URL", Meaning: "Read by leaderrun-x only, as its --x-url."}}}
	a := New(WithHandovers(x))
	for _, tc := range []struct {
		args []string
		want bool
	}{
		{[]string{"leaderrun", "--x-url", "u", "-n", "--", "true"}, true},
		{[]string{"leaderrun", "--x-url=u", "status"}, true},
		{[]string{"leaderrun", "who", "job", "--x-url", "u"}, true},
		{[]string{"leaderrun", "--name", "--x-url", "--", "true"}, false}, // --name's value
		{[]string{"leaderrun", "--name", "job", "--", "echo", "--x-url"}, false},
		{[]string{"leaderrun", "--etcd-endpoints", "u", "--", "true"}, false},
	} {
		h, ok := a.namesHandover(tc.args)
		if ok != tc.want || (ok && h.Program != "leaderrun-x") {
			t.Errorf("%q: handed over to %q (%v), want %v", tc.args, h.Program, ok, tc.want)
		}
	}
	if h, ok := New().namesHandover([]string{"leaderrun", "--x-url", "u", "status"}); ok {
		t.Errorf("an app without handovers hands over to %q", h.Program)
	}

	m := ManualOf(WithHandovers(x))
	hasFlag := func(m Manual) bool {
		return slices.ContainsFunc(m.Flags, func(f ManualFlag) bool { return slices.Contains(f.Names, "x-url") })
	}
	if !hasFlag(m) {
		t.Error("the app has no --x-url")
	}
	for _, sub := range m.Commands {
		if sub.Name != "completion" && sub.Name != "help" && !hasFlag(sub) {
			t.Errorf("%s has no --x-url", sub.Name)
		}
	}
	if hasFlag(ManualOf()) {
		t.Error("an app without handovers has --x-url")
	}
	names := func(rows []EnvRow) []string {
		var out []string
		for _, r := range rows {
			out = append(out, r.Name)
		}
		return out
	}
	env := names(m.Environment)
	i, j := slices.Index(env, "LEADERRUN_X_URL"), slices.Index(env, "LEADERRUN_NAME")
	if i < 0 || j < 0 || i > j || len(env) != len(Environment)+1 {
		t.Errorf("environment %q: want Environment with LEADERRUN_X_URL among the variables read, before LEADERRUN_NAME", env)
	}
}
