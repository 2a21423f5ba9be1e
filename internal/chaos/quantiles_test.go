package chaos

import (
	"testing"
	"time"
)

func TestQuantiles(t *testing.T) {
	if got := Quantiles(nil); got != "none" {
		t.Errorf("Quantiles(nil) = %q", got)
	}
	var ds []time.Duration
	for i := 100; i >= 1; i-- {
		ds = append(ds, time.Duration(i)*time.Millisecond+1234*time.Nanosecond)
	}
	ds = append(ds, 1500*time.Millisecond+777*time.Microsecond, 300*time.Microsecond+400)
	want := "n 102, p50 51ms, p90 91ms, p99 100ms, max 1.501s"
	if got := Quantiles(ds); got != want {
		t.Errorf("Quantiles = %q, want %q", got, want)
	}
	if ds[0] != 300*time.Microsecond+400 {
		t.Errorf("ds not sorted: %v first", ds[0])
	}
}
