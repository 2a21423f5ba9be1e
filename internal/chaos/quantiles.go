package chaos

import (
	"fmt"
	"slices"
	"time"
)

// Quantiles is the soaks' one report of a set of durations (stalls,
// failovers): "n N, p50 A, p90 B, p99 C, max D", or "none". It sorts ds.
// Each figure keeps about three significant digits: milliseconds from a
// second up, tens of microseconds from a millisecond, microseconds below.
func Quantiles(ds []time.Duration) string {
	if len(ds) == 0 {
		return "none"
	}
	slices.Sort(ds)
	q := func(p int) time.Duration { return roundFigure(ds[min(len(ds)-1, len(ds)*p/100)]) }
	return fmt.Sprintf("n %d, p50 %v, p90 %v, p99 %v, max %v", len(ds), q(50), q(90), q(99), roundFigure(ds[len(ds)-1]))
}

func roundFigure(d time.Duration) time.Duration {
	switch {
	case d >= time.Second:
		return d.Round(time.Millisecond)
	case d >= time.Millisecond:
		return d.Round(10 * time.Microsecond)
	}
	return d.Round(time.Microsecond)
}
