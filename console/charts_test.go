package console

import (
	"strings"
	"testing"
	"time"
)

func TestNiceCeil(t *testing.T) {
	tests := []struct{ n, want int }{
		{0, 4}, {3, 4}, {5, 8}, {9, 12}, {17, 20}, {21, 40}, {41, 80}, {90, 100}, {101, 200}, {999, 1000},
	}
	for _, tt := range tests {
		if got := niceCeil(tt.n); got != tt.want || got%4 != 0 || got < tt.n {
			t.Errorf("niceCeil(%d) = %d, want %d (a multiple of 4, >= n)", tt.n, got, tt.want)
		}
	}
}

func TestSessionsChartScale(t *testing.T) {
	hosts := []hostBar{{Name: "a", Sessions: 5, Status: "Available"}, {Name: "b", Sessions: 10, Status: "Available"}}
	// Limit 10: labels 60 wide (the minimum), plot width 480-60-84 = 336;
	// a is 5/10 -> 168, b is full 336.
	svg := string(sessionsChart(hosts, 10))
	for _, want := range []string{`width="168.0"`, `width="336.0"`, `class="limit"`, "maxSessionLimit 10", ">10 / 10<"} {
		if !strings.Contains(svg, want) {
			t.Errorf("chart lacks %q", want)
		}
	}
	// No limit (999999): scaled to the busiest host × 1.25, no limit line.
	svg = string(sessionsChart(hosts, 999999))
	if strings.Contains(svg, `class="limit"`) || !strings.Contains(svg, `width="268.8"`) {
		t.Errorf("no-limit chart: want no limit line and b at 336/1.25 = 268.8\n%s", svg)
	}
}

func TestChartsEscapeNames(t *testing.T) {
	hosts := []hostBar{{Name: `<script>x</script>`, Sessions: 1, LoadIndex: 50, Status: "Available"}}
	for _, svg := range []string{string(sessionsChart(hosts, 4)), string(loadIndexChart(hosts, 20))} {
		if strings.Contains(svg, "<script>") {
			t.Fatalf("host name not escaped:\n%s", svg)
		}
	}
	ss := []series{{Name: `"><b>`, Points: []point{{time.Now(), 1}}}}
	if strings.Contains(string(timeChart(ss, time.Now(), time.Hour)), `"><b>`) {
		t.Fatal("pool name not escaped")
	}
}

func TestLoadIndexChartPreference(t *testing.T) {
	// R-IDX4: 10 Light, 50 Normal, 80 Heavy, 100 Blocked, -1 off.
	hosts := []hostBar{{Name: "l", LoadIndex: 10}, {Name: "n", LoadIndex: 50}, {Name: "h", LoadIndex: 80}, {Name: "b", LoadIndex: 100}, {Name: "o", LoadIndex: -1}}
	svg := string(loadIndexChart(hosts, 20))
	for _, want := range []string{"pref-Light", "pref-Normal", "pref-Heavy", "pref-Blocked", ">off<", "loadIndexThreshold 20"} {
		if !strings.Contains(svg, want) {
			t.Errorf("chart lacks %q", want)
		}
	}
}

func TestHistoryRing(t *testing.T) {
	h := newHistory(30*time.Second, time.Hour) // 121 slots
	t0 := time.Date(2026, 11, 29, 12, 0, 0, 0, time.UTC)
	h.record(t0, map[string]int{"p": 1})
	h.record(t0.Add(10*time.Second), map[string]int{"p": 2}) // same slot: replaces
	if got := h.series()[0].Points; len(got) != 1 || got[0].n != 2 {
		t.Fatalf("same-slot samples: %+v, want one point with 2", got)
	}
	for i := 1; i <= 200; i++ {
		h.record(t0.Add(time.Duration(i)*30*time.Second), map[string]int{"p": i})
	}
	pts := h.series()[0].Points
	if len(pts) != h.size {
		t.Fatalf("ring holds %d points, want %d", len(pts), h.size)
	}
	if pts[len(pts)-1].n != 200 || pts[0].n != 200-h.size+1 {
		t.Fatalf("ring kept %d..%d, want the newest %d", pts[0].n, pts[len(pts)-1].n, h.size)
	}
}
