//go:build linux

package main

import (
	"fmt"
	"html"
	"math"
	"slices"
	"strings"
)

// series is one tool's latency samples (ns) in a panel of the picture.
type series struct {
	panel, tool string
	ns          []float64
	ours        bool
}

// latencySVG draws, per panel, one row per tool: every sample as a faint
// dot on a log time axis (jittered vertically so that density shows), a
// bar from p50 to p99, and the p50 as a tick. Hand-written: no plotting
// dependency.
func latencySVG(all []series) string {
	const (
		width, left, right = 900.0, 230.0, 20.0
		rowH, panelGap     = 26.0, 34.0
		top                = 40.0
	)
	lo, hi := math.Inf(1), math.Inf(-1)
	for _, s := range all {
		for _, v := range s.ns {
			if v > 0 {
				lo, hi = min(lo, v), max(hi, v)
			}
		}
	}
	if math.IsInf(lo, 1) {
		lo, hi = 1e4, 1e9
	}
	lo = math.Pow(10, math.Floor(math.Log10(lo)))
	hi = math.Pow(10, math.Ceil(math.Log10(hi)))
	plotW := width - left - right
	x := func(v float64) float64 {
		v = min(max(v, lo), hi)
		return left + plotW*(math.Log10(v)-math.Log10(lo))/(math.Log10(hi)-math.Log10(lo))
	}
	height := top + 30
	var panels []string
	for _, s := range all {
		if !slices.Contains(panels, s.panel) {
			panels = append(panels, s.panel)
			height += panelGap
		}
		height += rowH
	}
	var b strings.Builder
	fmt.Fprintf(&b, `<svg xmlns="http://www.w3.org/2000/svg" width="%.0f" height="%.0f" viewBox="0 0 %.0f %.0f" font-family="sans-serif" font-size="12">`+"\n", width, height, width, height)
	fmt.Fprintf(&b, `<rect width="100%%" height="100%%" fill="white"/>`+"\n")
	fmt.Fprintf(&b, `<text x="%.0f" y="20" font-size="14" font-weight="bold">Latency per tool (log scale): dots are samples, bar p50–p99, tick p50</text>`+"\n", left-220)
	axisBottom := height - 30
	for d := lo; d <= hi*1.001; d *= 10 {
		fmt.Fprintf(&b, `<line x1="%.1f" y1="%.0f" x2="%.1f" y2="%.0f" stroke="#ddd"/>`+"\n", x(d), top, x(d), axisBottom)
		fmt.Fprintf(&b, `<text x="%.1f" y="%.0f" text-anchor="middle" fill="#555">%s</text>`+"\n", x(d), axisBottom+16, durLabel(d))
	}
	y := top
	panel := ""
	for i, s := range all {
		if s.panel != panel {
			panel = s.panel
			y += panelGap
			fmt.Fprintf(&b, `<text x="10" y="%.0f" font-weight="bold">%s</text>`+"\n", y-10, html.EscapeString(panel))
		}
		mid := y + rowH/2
		color := "#888"
		if s.ours {
			color = "#1f6feb"
		}
		fmt.Fprintf(&b, `<text x="%.0f" y="%.0f" text-anchor="end" dominant-baseline="middle">%s</text>`+"\n", left-10, mid, html.EscapeString(s.tool))
		if len(s.ns) == 0 {
			fmt.Fprintf(&b, `<text x="%.0f" y="%.0f" dominant-baseline="middle" fill="#a00">no samples</text>`+"\n", left+4, mid)
			y += rowH
			continue
		}
		for j, v := range s.ns {
			jit := (float64((j*7919+i*104729)%17)/16 - 0.5) * (rowH - 10)
			fmt.Fprintf(&b, `<circle cx="%.1f" cy="%.1f" r="2" fill="%s" fill-opacity="0.35"/>`+"\n", x(v), mid+jit, color)
		}
		sorted := slices.Clone(s.ns)
		slices.Sort(sorted)
		p50, p99 := pct(sorted, 50), pct(sorted, 99)
		fmt.Fprintf(&b, `<line x1="%.1f" y1="%.1f" x2="%.1f" y2="%.1f" stroke="%s" stroke-width="3" stroke-opacity="0.8"/>`+"\n", x(p50), mid, x(p99), mid, color)
		fmt.Fprintf(&b, `<line x1="%.1f" y1="%.1f" x2="%.1f" y2="%.1f" stroke="black" stroke-width="2"/>`+"\n", x(p50), mid-rowH/2+3, x(p50), mid+rowH/2-3)
		y += rowH
	}
	b.WriteString("</svg>\n")
	return b.String()
}

func durLabel(ns float64) string {
	switch {
	case ns >= 1e9:
		return fmt.Sprintf("%gs", ns/1e9)
	case ns >= 1e6:
		return fmt.Sprintf("%gms", ns/1e6)
	case ns >= 1e3:
		return fmt.Sprintf("%gµs", ns/1e3)
	}
	return fmt.Sprintf("%gns", ns)
}

// pct is the nearest-rank p-th percentile of sorted s.
func pct(s []float64, p int) float64 {
	if len(s) == 0 {
		return math.NaN()
	}
	i := (len(s)*p + 99) / 100
	return s[max(i-1, 0)]
}
