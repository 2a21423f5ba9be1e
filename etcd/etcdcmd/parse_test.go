package etcdcmd

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
		{map[string]string{}, "no etcd cluster given"},
		{map[string]string{"etcd-endpoints": " , "}, "no etcd cluster given"},
		{map[string]string{"etcd-endpoints": "http://a:2379", "ttl": "1500ms"}, "whole number of seconds"},
		{map[string]string{"etcd-endpoints": "http://a:2379", "ttl": "1s"}, "at least"},
		{map[string]string{"etcd-endpoints": "http://a:2379", "ttl": "2s", "grace": "5s"}, "--grace 5s does not fit in --ttl 2s"},
		{map[string]string{"etcd-endpoints": "http://a:2379", "ttl": "4s"}, ""}, // status: no --grace
		{map[string]string{"etcd-endpoints": "http://a:2379", "ttl": "4s", "grace": "1s"}, ""},
		{map[string]string{"etcd-endpoints": "http://a:2379", "cert": "c.pem"}, "--cert and --key go together"},
		{map[string]string{"etcd-endpoints": "http://a:2379", "dial-timeout": "0s"}, "--dial-timeout"},
		{map[string]string{"etcd-endpoints": "http://a:2379", "grace": "soon"}, "--grace"},
		{map[string]string{"etcd-endpoints": "http://a:2379,http://b:2379"}, ""},
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

// TestParseMargin: the term ends --grace and a second before the lease can
// expire, and never later than etcd's own default margin.
func TestParseMargin(t *testing.T) {
	s, cfg, err := parse(values(map[string]string{"etcd-endpoints": "http://a:2379, http://b:2379", "grace": "2s", "ttl": "6s", "user": "me:pw:x", "host": "h1"}))
	if err != nil {
		t.Fatal(err)
	}
	if cfg.Margin != 3*time.Second || cfg.TTL != 6*time.Second || cfg.Host != "h1" {
		t.Errorf("cfg = %+v, want margin 3s, TTL 6s, host h1", cfg)
	}
	if len(s.Endpoints) != 2 || s.Endpoints[1] != "http://b:2379" || s.User != "me" || s.Password != "pw:x" {
		t.Errorf("settings = %+v", s)
	}
	if _, cfg, _ := parse(values(map[string]string{"etcd-endpoints": "http://a:2379", "grace": "0s", "ttl": "30s"})); cfg.Margin != 6*time.Second {
		t.Errorf("margin %v, want TTL/5 = 6s", cfg.Margin)
	}
}

// TestFitGrace: a --grace that does not fit --ttl is fitted to it when it
// was not given (the default), and refused when it was; the margin is
// the fitted grace's.
func TestFitGrace(t *testing.T) {
	s, cfg, err := parse(values(map[string]string{"etcd-endpoints": "http://a:2379", "ttl": "5s", "grace": "5s"}))
	if err != nil {
		t.Fatal(err)
	}
	if cfg.Margin != 2500*time.Millisecond {
		t.Errorf("margin %v, want 2.5s (the fitted grace 1.5s and a second)", cfg.Margin)
	}
	b := &backend{s: s}
	if g, note, err := b.FitGrace(5*time.Second, false); err != nil || g != 1500*time.Millisecond || !strings.Contains(note, "does not fit in --ttl 5s") {
		t.Errorf("default --grace: %v %q %v, want 1.5s and a note", g, note, err)
	}
	if _, _, err := b.FitGrace(5*time.Second, true); err == nil || cmd.ExitCode(err) != cmd.ExitUsage || !strings.Contains(err.Error(), "give --ttl 12s or more") {
		t.Errorf("--grace 5s given: %v, want a usage error", err)
	}
	s, _, _ = parse(values(map[string]string{"etcd-endpoints": "http://a:2379", "ttl": "15s", "grace": "5s"}))
	if g, _, err := (&backend{s: s}).FitGrace(5*time.Second, true); err != nil || g != 5*time.Second {
		t.Errorf("a --grace that fits: %v %v", g, err)
	}
}

// TestEndTermBadToken: a token that is not one gives an error, not a
// revoke of lease 0.
func TestEndTermBadToken(t *testing.T) {
	for _, tok := range []string{"", "!!", "e30"} { // e30 is {}
		if err := EndTerm(t.Context(), tok); err == nil {
			t.Errorf("EndTerm(%q) = nil", tok)
		}
	}
}
