// Package remote holds what the lease backends (etcd, pg, each in a
// module of its own) and their command lines decide alike: the deadline
// by which a session's terms end (Deadline), and how a lease's TTL and
// --grace give the margin by which a term ends before the lease can
// expire (Lease).
package remote

import (
	"fmt"
	"math"
	"time"

	"github.com/leaderrun/leaderrun/cmd"
)

// Usage is a usage error (exit 64) saying format's message.
func Usage(format string, args ...any) error {
	return cmd.Exitf(cmd.ExitUsage, "leaderrun: "+format, args...)
}

// Lease is a lease's margin for --ttl and --grace: a term ends Margin
// before its lease can expire by the server's clock, and COMMAND has
// --grace after the term's end (SIGTERM, then SIGKILL) and a second for
// the kill to land, within half the TTL. A --grace that does not fit is
// fitted to the TTL if it was not given (FitGrace).
type Lease struct {
	Margin time.Duration
	fit    time.Duration // the fitted grace, 0 when --grace fits
	note   string        // what -v says of the fit
	misfit error         // the usage error when --grace was given
}

// LeaseFor parses --grace (grace; "" for a command that runs no COMMAND,
// such as status) against ttl. It fails, as a usage error, for a --grace
// that does not parse, or that does not fit and cannot be fitted (the
// TTL leaves no grace at all).
func LeaseFor(ttl time.Duration, grace string) (Lease, error) {
	var g time.Duration
	if grace != "" {
		var err error
		if g, err = time.ParseDuration(grace); err != nil {
			return Lease{}, Usage("--grace %q is not a duration", grace)
		}
	}
	margin := max(time.Second, ttl/5, g+time.Second)
	if margin <= ttl/2 {
		return Lease{Margin: margin}, nil
	}
	need := time.Duration(math.Ceil((2 * margin).Seconds())) * time.Second
	misfit := Usage("--grace %v does not fit in --ttl %v: COMMAND is stopped (SIGTERM, SIGKILL after --grace) a second before the lease can expire, within half the TTL; give --ttl %v or more, or a shorter --grace", g, ttl, need)
	fit := (ttl/2 - time.Second).Truncate(100 * time.Millisecond)
	if fit <= 0 {
		return Lease{}, misfit
	}
	return Lease{
		Margin: max(time.Second, ttl/5, fit+time.Second),
		fit:    fit,
		note:   fmt.Sprintf("--grace %v: the default %v does not fit in --ttl %v (COMMAND is stopped a second before the lease can expire, within half the TTL); give --grace to choose another, within that", fit, g, ttl),
		misfit: misfit,
	}, nil
}

// FitGrace is cmd.GraceFitter's method for a backend whose lease is l: a
// --grace that was not given is fitted to --ttl when the default does
// not fit; one that was given and does not fit is a usage error.
func (l Lease) FitGrace(grace time.Duration, given bool) (time.Duration, string, error) {
	switch {
	case l.fit == 0:
		return grace, "", nil
	case given:
		return grace, "", l.misfit
	}
	return l.fit, l.note, nil
}
