package console

import (
	"fmt"
	"html/template"
	"math"
	"strings"
	"time"

	"github.com/vdibroker/vdibroker"
	"github.com/vdibroker/vdibroker/loadindex"
)

// Charts are drawn on the server as inline SVG: no script, no library, and
// the page's CSS colours them (classes, not inline styles, so the Content
// Security Policy can forbid inline styles).

const (
	chartWidth    = 1000 // time chart, a full-width card
	barChartWidth = 480  // bar charts, half-width cards
	valueWidth    = 84   // room right of the bars for "100 Blocked"
	rowHeight     = 22
	barHeight     = 14
)

// labelWidth fits the longest host name (about 7 units a character at the
// charts' font size), within 60..180.
func labelWidth(hosts []hostBar) int {
	n := 0
	for _, h := range hosts {
		n = max(n, len(h.Name))
	}
	return min(180, max(60, n*7+12))
}

// svgText escapes s for SVG text and attributes.
func svgText(s string) string { return template.HTMLEscapeString(s) }

// hostBar is one host's row in a bar chart.
type hostBar struct {
	Name       string
	Sessions   int
	Connecting int
	LoadIndex  int
	Drained    bool
	Status     string
}

// sessionsChart draws sessions per host as horizontal bars against the
// pool's maxSessionLimit (a dashed line; R-C4 keeps every bar at or left of
// it). Pending (connecting) sessions are the lighter end of each bar. With
// no real limit (999999) the scale is the busiest host.
func sessionsChart(hosts []hostBar, limit int) template.HTML {
	scale := float64(limit)
	hasLimit := limit > 0 && limit < vdibroker.NoSessionLimit
	if !hasLimit {
		most := 1
		for _, h := range hosts {
			most = max(most, h.Sessions)
		}
		scale = float64(most) * 1.25
	}
	labelWidth := labelWidth(hosts)
	plot := float64(barChartWidth - labelWidth - valueWidth)
	height := len(hosts)*rowHeight + 30
	var b strings.Builder
	fmt.Fprintf(&b, `<svg class="chart" viewBox="0 0 %d %d" role="img" aria-label="Sessions per host against the limit">`, barChartWidth, height)
	for i, h := range hosts {
		y := 6 + i*rowHeight
		fmt.Fprintf(&b, `<text class="label" x="%d" y="%d" text-anchor="end">%s</text>`, labelWidth-8, y+barHeight-3, svgText(h.Name))
		fmt.Fprintf(&b, `<rect class="track" x="%d" y="%d" width="%.1f" height="%d" rx="3"/>`, labelWidth, y, plot, barHeight)
		w := math.Min(plot, plot*float64(h.Sessions)/scale)
		wc := math.Min(w, plot*float64(h.Connecting)/scale)
		cls := "bar"
		if h.Drained {
			cls += " drained"
		}
		if !vdibroker.Placeable(h.Status) {
			cls += " down"
		}
		if w > 0 {
			fmt.Fprintf(&b, `<rect class="%s" x="%d" y="%d" width="%.1f" height="%d" rx="3"><title>%s: %s, %d connecting</title></rect>`,
				cls, labelWidth, y, w, barHeight, svgText(h.Name), vdibroker.Plural(h.Sessions, "session"), h.Connecting)
		}
		if wc > 0 {
			fmt.Fprintf(&b, `<rect class="bar-connecting" x="%.1f" y="%d" width="%.1f" height="%d"/>`, float64(labelWidth)+w-wc, y, wc, barHeight)
		}
		value := fmt.Sprint(h.Sessions)
		if hasLimit {
			value += " / " + fmt.Sprint(limit)
		}
		fmt.Fprintf(&b, `<text class="value" x="%.1f" y="%d">%s</text>`, float64(labelWidth)+plot+6, y+barHeight-3, value)
	}
	if hasLimit {
		x := float64(labelWidth) + plot
		fmt.Fprintf(&b, `<line class="limit" x1="%.1f" y1="2" x2="%.1f" y2="%d"/>`, x, x, height-22)
		fmt.Fprintf(&b, `<text class="axis" x="%.1f" y="%d" text-anchor="end">maxSessionLimit %d</text>`, x, height-6, limit)
	} else {
		fmt.Fprintf(&b, `<text class="axis" x="%d" y="%d">no limit: scaled to the busiest host</text>`, labelWidth, height-6)
	}
	b.WriteString(`</svg>`)
	return template.HTML(b.String())
}

// loadIndexChart draws each host's load index 0..100 coloured by its
// preference (R-IDX4) with the pool's loadIndexThreshold as a dashed line
// (bucket 1 of R-LI3 is left of it). Hosts without a load index (-1, load
// balancing off) are labelled "off".
func loadIndexChart(hosts []hostBar, threshold int) template.HTML {
	labelWidth := labelWidth(hosts)
	plot := float64(barChartWidth - labelWidth - valueWidth)
	height := len(hosts)*rowHeight + 30 // bars and the axis
	if threshold > 0 && threshold <= 100 {
		height += 12 // the threshold's label
	}
	// Lines end above the axis and, when there is one, the threshold's label.
	lineEnd := height - 22
	if threshold > 0 && threshold <= 100 {
		lineEnd = height - 40
	}
	var b strings.Builder
	fmt.Fprintf(&b, `<svg class="chart" viewBox="0 0 %d %d" role="img" aria-label="Load index per host">`, barChartWidth, height)
	for _, tick := range []int{25, 50, 75} { // under the bars
		x := float64(labelWidth) + plot*float64(tick)/100
		fmt.Fprintf(&b, `<line class="grid" x1="%.1f" y1="2" x2="%.1f" y2="%d"/>`, x, x, lineEnd)
	}
	for i, h := range hosts {
		y := 6 + i*rowHeight
		fmt.Fprintf(&b, `<text class="label" x="%d" y="%d" text-anchor="end">%s</text>`, labelWidth-8, y+barHeight-3, svgText(h.Name))
		fmt.Fprintf(&b, `<rect class="track" x="%d" y="%d" width="%.1f" height="%d" rx="3"/>`, labelWidth, y, plot, barHeight)
		if h.LoadIndex < 0 {
			fmt.Fprintf(&b, `<text class="value" x="%.1f" y="%d">off</text>`, float64(labelWidth)+plot+6, y+barHeight-3)
			continue
		}
		pref := loadindex.Preference(h.LoadIndex)
		w := plot * float64(min(h.LoadIndex, 100)) / 100
		if w > 0 {
			fmt.Fprintf(&b, `<rect class="bar pref-%s" x="%d" y="%d" width="%.1f" height="%d" rx="3"><title>%s: load index %d (%s)</title></rect>`,
				pref, labelWidth, y, w, barHeight, svgText(h.Name), h.LoadIndex, pref)
		}
		fmt.Fprintf(&b, `<text class="value" x="%.1f" y="%d">%d %s</text>`, float64(labelWidth)+plot+6, y+barHeight-3, h.LoadIndex, pref)
	}
	// Every quarter is labelled (0, 25, 50, 75, 100): the preference
	// bands of R-IDX4 start at 25 and 75, and 50 is where an eye looks for
	// the middle.
	for _, tick := range []int{0, 25, 50, 75, 100} {
		x := float64(labelWidth) + plot*float64(tick)/100
		fmt.Fprintf(&b, `<text class="axis" x="%.1f" y="%d" text-anchor="middle">%d</text>`, x, height-6, tick)
	}
	if threshold > 0 && threshold <= 100 {
		// The threshold's label has a row of its own between the bars and
		// the axis, beside its line on the side with room (left of the
		// line past the middle), so it covers neither a bar nor a tick.
		x := float64(labelWidth) + plot*float64(threshold)/100
		fmt.Fprintf(&b, `<line class="limit" x1="%.1f" y1="2" x2="%.1f" y2="%d"><title>loadIndexThreshold %d</title></line>`, x, x, lineEnd, threshold)
		anchor, dx := "start", 4.0
		if threshold > 50 {
			anchor, dx = "end", -4
		}
		fmt.Fprintf(&b, `<text class="threshold" x="%.1f" y="%d" text-anchor="%s">loadIndexThreshold %d</text>`, x+dx, height-26, anchor, threshold)
	}
	b.WriteString(`</svg>`)
	return template.HTML(b.String())
}

// timeChart draws each pool's session count over [now-window, now] as a
// line, with a legend. Pools are given colour classes s0..s5 in name order.
func timeChart(ss []series, now time.Time, window time.Duration) template.HTML {
	return timeChartLabeled(ss, now, window, "Sessions over the last hour")
}

// timeChartLabeled is timeChart with its own accessible label (the host
// page's chart of one host's sessions, CPU and memory).
func timeChartLabeled(ss []series, now time.Time, window time.Duration, label string) template.HTML {
	const (
		left, right, top, bottom = 44, 12, 12, 46
		height                   = 250
	)
	plotW := float64(chartWidth - left - right)
	plotH := float64(height - top - bottom)
	most := 1
	for _, s := range ss {
		for _, p := range s.Points {
			most = max(most, p.n)
		}
	}
	yMax := niceCeil(most)
	start := now.Add(-window)
	x := func(t time.Time) float64 {
		return left + plotW*math.Max(0, float64(t.Sub(start)))/float64(window)
	}
	y := func(n int) float64 { return top + plotH - plotH*float64(n)/float64(yMax) }

	var b strings.Builder
	fmt.Fprintf(&b, `<svg class="chart" viewBox="0 0 %d %d" role="img" aria-label="%s">`, chartWidth, height, svgText(label))
	for i := 0; i <= 4; i++ {
		v := yMax * i / 4
		fmt.Fprintf(&b, `<line class="grid" x1="%d" y1="%.1f" x2="%d" y2="%.1f"/>`, left, y(v), chartWidth-right, y(v))
		fmt.Fprintf(&b, `<text class="axis" x="%d" y="%.1f" text-anchor="end">%d</text>`, left-6, y(v)+4, v)
	}
	for m := 0; m <= 60; m += 15 {
		t := start.Add(time.Duration(m) * window / 60)
		label := fmt.Sprintf("-%dm", 60-m)
		if m == 60 {
			label = "now"
		}
		fmt.Fprintf(&b, `<text class="axis" x="%.1f" y="%d" text-anchor="middle">%s</text>`, x(t), height-bottom+16, label)
	}
	for i, s := range ss {
		var pts []string
		for _, p := range s.Points {
			if p.t.Before(start) {
				continue
			}
			pts = append(pts, fmt.Sprintf("%.1f,%.1f", x(p.t), y(p.n)))
		}
		cls := fmt.Sprintf("s%d", i%6)
		if len(pts) == 1 {
			fmt.Fprintf(&b, `<circle class="dot %s" cx="%s" r="3"/>`, cls, strings.Replace(pts[0], ",", `" cy="`, 1))
		} else if len(pts) > 1 {
			fmt.Fprintf(&b, `<polyline class="line %s" points="%s"><title>%s</title></polyline>`, cls, strings.Join(pts, " "), svgText(s.Name))
		}
		lx := left + (i%4)*220
		ly := height - 8 + (i/4)*14
		last := 0
		if len(s.Points) > 0 {
			last = s.Points[len(s.Points)-1].n
		}
		fmt.Fprintf(&b, `<rect class="swatch %s" x="%d" y="%d" width="10" height="10" rx="2"/><text class="label" x="%d" y="%d">%s (%d)</text>`,
			cls, lx, ly-9, lx+14, ly, svgText(s.Name), last)
	}
	if len(ss) == 0 {
		fmt.Fprintf(&b, `<text class="axis" x="%d" y="%d">no samples yet</text>`, left+10, top+20)
	}
	b.WriteString(`</svg>`)
	return template.HTML(b.String())
}

// niceCeil rounds n up to 1, 2 or 5 times a power of ten, and to a multiple
// of 4 so the four grid steps are whole numbers.
func niceCeil(n int) int {
	if n <= 4 {
		return 4
	}
	p := 1
	for p*10 < n {
		p *= 10
	}
	for _, m := range []int{1, 2, 4, 5, 8, 10} {
		if v := m * p; v >= n && v%4 == 0 {
			return v
		}
	}
	return (n + 3) / 4 * 4
}

// meter draws a small capacity bar for percent 0..100 (more is allowed and
// drawn full).
func meter(percent float64) template.HTML {
	w := math.Max(0, math.Min(100, percent))
	cls := "ok"
	switch {
	case percent >= 90:
		cls = "hot"
	case percent >= 70:
		cls = "warm"
	}
	return template.HTML(fmt.Sprintf(`<svg class="meter" viewBox="0 0 100 8" preserveAspectRatio="none" aria-hidden="true"><rect class="track" width="100" height="8" rx="4"/><rect class="fill %s" width="%.1f" height="8" rx="4"/></svg>`, cls, w))
}
