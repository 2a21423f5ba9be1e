package pgcmd

import (
	"strings"
	"testing"
	"time"

	"github.com/leaderrun/leaderrun/cmd"
	"github.com/leaderrun/leaderrun/internal/backendtest"
)

// values is a cmd.FlagValue over m, with Flags' defaults.
func values(m map[string]string) cmd.FlagValue { return backendtest.FlagValues(Flags, m) }

func TestParse(t *testing.T) {
	for _, tc := range []struct {
		flags map[string]string
		err   string // a part of the message; "" for none
	}{
		{map[string]string{}, ""}, // libpq's defaults and PG* variables
		{map[string]string{"pg-url": "postgres://u@h:5432/d"}, ""},
		{map[string]string{"pg-url": "host=h dbname=d"}, ""},
		{map[string]string{"pg-url": "postgres://u@[::1"}, "does not parse"},
		{map[string]string{"pg-url": "host=h sslmode=bogus"}, "does not parse"},
		{map[string]string{"ttl": "1s"}, "at least 2s"},
		{map[string]string{"ttl": "soon"}, "--ttl"},
		{map[string]string{"ttl": "2s", "grace": "5s"}, "--grace 5s does not fit in --ttl 2s"}, // nothing to fit
		{map[string]string{"ttl": "4s"}, ""},                                                   // status: no --grace
		{map[string]string{"ttl": "4s", "grace": "1s"}, ""},
		{map[string]string{"grace": "soon"}, "--grace"},
		{map[string]string{"connect-timeout": "0s"}, "--connect-timeout"},
		{map[string]string{"pg-schema": ""}, "--pg-schema"},
		{map[string]string{"pg-schema": strings.Repeat("s", 64)}, "--pg-schema"},
	} {
		_, _, err := parse(values(tc.flags))
		switch {
		case tc.err == "" && err != nil:
			t.Errorf("%v: %v", tc.flags, err)
		case tc.err != "" && (err == nil || !strings.Contains(err.Error(), tc.err)):
			t.Errorf("%v: err = %v, want one saying %q", tc.flags, err, tc.err)
		case err != nil && cmd.ExitCode(err) != cmd.ExitUsage:
			t.Errorf("%v: exit %d, want %d", tc.flags, cmd.ExitCode(err), cmd.ExitUsage)
		}
	}
}

// TestConnectTimeout: --connect-timeout applies unless the connection
// string sets its own.
func TestConnectTimeout(t *testing.T) {
	_, cfg, err := parse(values(map[string]string{"pg-url": "postgres://u@h/d", "connect-timeout": "3s"}))
	if err != nil || cfg.ConnConfig.ConnectTimeout != 3*time.Second {
		t.Fatalf("%v %v", cfg.ConnConfig.ConnectTimeout, err)
	}
	_, cfg, err = parse(values(map[string]string{"pg-url": "postgres://u@h/d?connect_timeout=7", "connect-timeout": "3s"}))
	if err != nil || cfg.ConnConfig.ConnectTimeout != 7*time.Second {
		t.Fatalf("%v %v", cfg.ConnConfig.ConnectTimeout, err)
	}
}

// TestFitGrace: a --grace that does not fit --ttl is fitted to it when it
// was not given (the default), and refused when it was, as over etcd;
// the margin is the fitted grace's.
func TestFitGrace(t *testing.T) {
	s, cfg, err := parse(values(map[string]string{"ttl": "10s", "grace": "5s"}))
	if err != nil {
		t.Fatal(err)
	}
	if cfg.Margin != 5*time.Second {
		t.Errorf("margin %v, want 5s (the fitted grace 4s and a second)", cfg.Margin)
	}
	b := &backend{s: s}
	if g, note, err := b.FitGrace(5*time.Second, false); err != nil || g != 4*time.Second || !strings.Contains(note, "does not fit in --ttl 10s") {
		t.Errorf("default --grace: %v %q %v, want 4s and a note", g, note, err)
	}
	if _, _, err := b.FitGrace(5*time.Second, true); err == nil || cmd.ExitCode(err) != cmd.ExitUsage || !strings.Contains(err.Error(), "give --ttl 12s or more") {
		t.Errorf("--grace 5s given: %v, want a usage error", err)
	}
	s, _, _ = parse(values(map[string]string{"ttl": "15s", "grace": "5s"}))
	if g, _, err := (&backend{s: s}).FitGrace(5*time.Second, true); err != nil || g != 5*time.Second {
		t.Errorf("a --grace that fits: %v %v", g, err)
	}
}
