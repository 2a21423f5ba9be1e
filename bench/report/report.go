//go:build linux

package main

import (
	"fmt"
	"math"
	"os"
	"strings"
)

// report collects the tables, the verdicts on the targets of issue 5, and
// the samples for the picture.
type report struct {
	cfg                     config
	root, tmp, samples, rev string

	sections []section
	targets  []target
	series   []series
	skips    []string

	electBin, cliBin string
	cliErr           error
}

type section struct{ title, body string }

// target is one goal of issue 5 and what this run measured for it.
type target struct{ what, goal, measured, verdict string }

func (r *report) add(title string, t *table) {
	r.sections = append(r.sections, section{title, t.String()})
}

func (r *report) skip(part, why string) {
	line := fmt.Sprintf("%s: skipped: %s", part, why)
	fmt.Fprintln(os.Stderr, line)
	r.skips = append(r.skips, line)
}

// check records a target: ok reports whether it was met; with no figures
// the verdict is "not measured".
func (r *report) check(what, goal, measured string, ok, measuredOK bool) {
	v := "**missed**"
	switch {
	case !measuredOK:
		v = "not measured"
	case ok:
		v = "met"
	}
	r.targets = append(r.targets, target{what, goal, measured, v})
}

// figure adds a row to the targets table that has no target: a measure
// the targets are read against (say, what the Go runtime costs here).
func (r *report) figure(what, about, measured string, measuredOK bool) {
	if !measuredOK {
		measured = "not measured"
	}
	r.targets = append(r.targets, target{what, about, measured, "—"})
}

func (r *report) markdown() string {
	var b strings.Builder
	fmt.Fprintf(&b, "## leaderrun beside its peers\n\nMachine: %s.  \nCode: %s.  \nCommand: `go run ./bench/report`", machine(), r.rev)
	if len(os.Args) > 1 {
		fmt.Fprintf(&b, " (this run: `%s`)", strings.Join(os.Args[1:], " "))
	}
	b.WriteString(".  \nRatios are leaderrun ÷ peer from the same run: for times and CPU below 1 is better, for deliveries/s above 1.\n\n")
	if len(r.targets) > 0 {
		t := newTable("Target (issues 5, 10, 12, 13, 24)", "Goal", "Measured", "Verdict")
		for _, x := range r.targets {
			t.row(x.what, x.goal, x.measured, x.verdict)
		}
		b.WriteString("### Targets\n\n" + t.String() + "\n")
	}
	for _, s := range r.sections {
		fmt.Fprintf(&b, "### %s\n\n%s\n", s.title, s.body)
	}
	if len(r.skips) > 0 {
		b.WriteString("### Skipped\n\n")
		for _, s := range r.skips {
			fmt.Fprintf(&b, "- %s\n", s)
		}
		b.WriteString("\n")
	}
	return b.String()
}

// table is a markdown table.
type table struct {
	head []string
	rows [][]string
	note []string
}

func newTable(head ...string) *table { return &table{head: head} }

func (t *table) row(cells ...string) { t.rows = append(t.rows, cells) }

func (t *table) notef(format string, a ...any) { t.note = append(t.note, fmt.Sprintf(format, a...)) }

func (t *table) String() string {
	var b strings.Builder
	b.WriteString("| " + strings.Join(t.head, " | ") + " |\n|")
	for i := range t.head {
		if i == 0 {
			b.WriteString("---|")
		} else {
			b.WriteString("--:|")
		}
	}
	b.WriteString("\n")
	for _, r := range t.rows {
		b.WriteString("| " + strings.Join(r, " | ") + " |\n")
	}
	for _, n := range t.note {
		b.WriteString("\n" + n + "\n")
	}
	return b.String()
}

// dur formats nanoseconds with three significant digits.
func dur(ns float64) string {
	switch {
	case math.IsNaN(ns):
		return "—"
	case ns >= 1e9:
		return fmt.Sprintf("%.3g s", ns/1e9)
	case ns >= 1e6:
		return fmt.Sprintf("%.3g ms", ns/1e6)
	default:
		return fmt.Sprintf("%.3g µs", ns/1e3)
	}
}

func ratio(a, b float64) string {
	if math.IsNaN(a) || math.IsNaN(b) || b == 0 {
		return "—"
	}
	if r := a / b; r < 0.01 {
		return fmt.Sprintf("%.4f×", r)
	}
	return fmt.Sprintf("%.2f×", a/b)
}

func num(v float64) string {
	if math.IsNaN(v) {
		return "—"
	}
	if v == math.Trunc(v) && math.Abs(v) < 1e15 {
		return fmt.Sprintf("%.0f", v)
	}
	return fmt.Sprintf("%.3g", v)
}

// or returns v if ok, else NaN.
func or(v float64, ok bool) float64 {
	if !ok {
		return math.NaN()
	}
	return v
}

// loadNow is the 1-minute load average as the figure beside it was taken:
// on a shared machine it says how much a ratio can be trusted.
func loadNow() string {
	b, err := os.ReadFile("/proc/loadavg")
	if f := strings.Fields(string(b)); err == nil && len(f) > 0 {
		return f[0]
	}
	return "?"
}
