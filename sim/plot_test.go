package sim

import (
	"os"
	"path/filepath"
	"regexp"
	"sort"
	"strings"
	"testing"
)

// TestTradeoffLabelsDoNotOverlap: labels beside points that crowd (two
// algorithms on nearly the same points, as a sweep gives) cover no other
// label, no point and not the legend band; crowded ones are dropped rather
// than drawn on top of each other, and at least the spread-out ones show.
func TestTradeoffLabelsDoNotOverlap(t *testing.T) {
	var pts []labelPoint
	for i, limit := range []string{"4", "6", "8", "10", "12", "none"} {
		// Two series 1 % apart on both axes: a worst case of overlap.
		pts = append(pts, labelPoint{X: 40 + float64(i)*10, Y: 20 - float64(i)*2, Text: limit, Series: 0})
		pts = append(pts, labelPoint{X: 40.5 + float64(i)*10, Y: 20.2 - float64(i)*2, Text: limit, Series: 1})
	}
	xmin, xmax, ymin, ymax := bounds(pts)
	xr, yr := rangeOf(xmin, xmax), rangeOf(ymin, ymax)
	f := labelFrame{xmin: xmin - 0.08*xr, xmax: xmax + 0.12*xr, ymin: ymin - 0.12*yr, ymax: ymax + 0.4*yr, top: 0.76}
	got := placeLabels(pts, f)
	w, h := f.xmax-f.xmin, f.ymax-f.ymin
	var boxes []box
	shown := 0
	for _, p := range got {
		if !p.Shown {
			continue
		}
		shown++
		u, v := (p.LX-f.xmin)/w, (p.LY-f.ymin)/h
		b := box{u, v, u + labelCharW*float64(len(p.Text)) + 0.004, v + labelH}
		if b.y1 > f.top || b.x0 < 0 || b.x1 > 1 || b.y0 < 0 {
			t.Errorf("label %q at %+v leaves the area below the legend", p.Text, b)
		}
		for _, o := range boxes {
			if b.overlaps(o) {
				t.Errorf("label %q overlaps another label", p.Text)
			}
		}
		for _, q := range got {
			pu, pv := (q.X-f.xmin)/w, (q.Y-f.ymin)/h
			if b.overlaps(box{pu - pointHalf, pv - pointHalf*16/9, pu + pointHalf, pv + pointHalf*16/9}) {
				t.Errorf("label %q covers the point at (%g, %g)", p.Text, q.X, q.Y)
			}
		}
		boxes = append(boxes, b)
	}
	if shown < len(pts)/2 {
		t.Errorf("only %d of %d labels shown", shown, len(pts))
	}
}

// TestIndexShowsTableAndPlots: a sweep's output folder has index.html with
// a row per result and every PNG plot written, each linking its SVG; every
// file it names exists. Without plots the index still has the table.
func TestIndexShowsTableAndPlots(t *testing.T) {
	sc := parse(t, `
duration: 2h
pool: {hosts: 4, maxSessionLimit: [4, 8]}
algorithms: [BreadthFirst, DepthFirst]
users: [{pattern: storm, count: 20, over: 10m}]
`)
	rep := run(t, sc)
	dir := t.TempDir()
	if err := rep.WriteFiles(dir, false); err != nil {
		t.Fatal(err)
	}
	b, err := os.ReadFile(filepath.Join(dir, "index.html"))
	if err != nil {
		t.Fatal(err)
	}
	page := string(b)
	if got := strings.Count(page, "<tr><td>"); got != len(rep.Results) {
		t.Errorf("index has %d result rows, want %d", got, len(rep.Results))
	}
	pngs, _ := filepath.Glob(filepath.Join(dir, "*.png"))
	var want []string
	for _, p := range pngs {
		want = append(want, filepath.Base(p))
	}
	var got []string
	for _, m := range regexp.MustCompile(`<img src="([^"]+)"`).FindAllStringSubmatch(page, -1) {
		got = append(got, m[1])
	}
	sort.Strings(want)
	shown := append([]string(nil), got...)
	sort.Strings(shown)
	if strings.Join(shown, " ") != strings.Join(want, " ") || len(want) == 0 {
		t.Errorf("index shows %v, the folder has %v", shown, want)
	}
	if len(got) > 0 && got[0] != "tradeoff.png" {
		t.Errorf("first plot %s, want the trade-off first", got[0])
	}
	for _, m := range regexp.MustCompile(`href="([^"]+)"`).FindAllStringSubmatch(page, -1) {
		if !fileExists(filepath.Join(dir, m[1])) {
			t.Errorf("index links %s, which is not in the folder", m[1])
		}
	}

	dir = t.TempDir()
	if err := rep.WriteFiles(dir, true); err != nil {
		t.Fatal(err)
	}
	if b, err := os.ReadFile(filepath.Join(dir, "index.html")); err != nil || !strings.Contains(string(b), `id="summary"`) || strings.Contains(string(b), "<img") {
		t.Errorf("index without plots: %v\n%s", err, b)
	}
}
