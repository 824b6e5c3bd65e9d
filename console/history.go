package console

import (
	"math"
	"sort"
	"sync"
	"time"

	"github.com/vdibroker/vdibroker"
)

// history keeps each pool's session count over a window (one hour) in
// fixed time slots: a ring of window/interval samples per pool. A second
// sample in the same slot replaces the first, so page views and the
// sampler can both record without crowding the ring.
type history struct {
	interval time.Duration
	size     int

	mu    sync.Mutex
	pools map[string][]point
}

type point struct {
	t time.Time
	n int
}

func newHistory(interval, window time.Duration) *history {
	size := int(window/interval) + 1
	return &history{interval: interval, size: size, pools: map[string][]point{}}
}

// record stores counts (pool -> sessions) at now.
func (h *history) record(now time.Time, counts map[string]int) {
	slot := now.Truncate(h.interval)
	h.mu.Lock()
	defer h.mu.Unlock()
	for pool, n := range counts {
		pts := h.pools[pool]
		if len(pts) > 0 && !pts[len(pts)-1].t.Truncate(h.interval).Before(slot) {
			pts[len(pts)-1] = point{now, n}
			continue
		}
		pts = append(pts, point{now, n})
		if len(pts) > h.size {
			pts = append(pts[:0], pts[len(pts)-h.size:]...)
		}
		h.pools[pool] = pts
	}
}

// series returns a copy of each pool's points, pools sorted by name.
func (h *history) series() []series {
	h.mu.Lock()
	defer h.mu.Unlock()
	out := make([]series, 0, len(h.pools))
	for pool, pts := range h.pools {
		out = append(out, series{Name: pool, Points: append([]point(nil), pts...)})
	}
	sort.Slice(out, func(i, j int) bool { return out[i].Name < out[j].Name })
	return out
}

type series struct {
	Name   string
	Points []point
}

// maxHostHistories bounds the hosts whose metrics the console keeps (about
// 2 KB each for the hour): a fleet larger than this keeps the first hosts
// it saw, and the host page of another says it has no history yet.
const maxHostHistories = 5000

// hostPoint is one sample of a host for its page's chart.
type hostPoint struct {
	t                time.Time
	sessions         int
	cpu, memory      int // percent, rounded; -1 when the host sent none
	hasMetricsSample bool
}

// hostHistory keeps each host's sessions, CPU and memory over the window,
// in the fixed slots history uses.
type hostHistory struct {
	interval time.Duration
	size     int

	mu    sync.Mutex
	hosts map[string][]hostPoint // by pool + "\x00" + host
}

func newHostHistory(interval, window time.Duration) *hostHistory {
	return &hostHistory{interval: interval, size: int(window/interval) + 1, hosts: map[string][]hostPoint{}}
}

func hostKey(pool, host string) string { return pool + "\x00" + host }

// record stores one sample of host at now.
func (h *hostHistory) record(now time.Time, pool, host string, p hostPoint) {
	p.t = now
	key := hostKey(pool, host)
	slot := now.Truncate(h.interval)
	h.mu.Lock()
	defer h.mu.Unlock()
	pts, ok := h.hosts[key]
	if !ok && len(h.hosts) >= maxHostHistories {
		return
	}
	if len(pts) > 0 && !pts[len(pts)-1].t.Truncate(h.interval).Before(slot) {
		pts[len(pts)-1] = p
		return
	}
	pts = append(pts, p)
	if len(pts) > h.size {
		pts = append(pts[:0], pts[len(pts)-h.size:]...)
	}
	h.hosts[key] = pts
}

// series returns the host's history as chart lines: sessions, CPU % and
// memory % (the metric lines only when the host sent samples).
func (h *hostHistory) series(pool, host string) []series {
	h.mu.Lock()
	pts := append([]hostPoint(nil), h.hosts[hostKey(pool, host)]...)
	h.mu.Unlock()
	sessions := series{Name: "sessions"}
	cpu, mem := series{Name: "CPU %"}, series{Name: "memory %"}
	for _, p := range pts {
		sessions.Points = append(sessions.Points, point{p.t, p.sessions})
		if p.hasMetricsSample {
			cpu.Points = append(cpu.Points, point{p.t, p.cpu})
			mem.Points = append(mem.Points, point{p.t, p.memory})
		}
	}
	out := []series{sessions}
	if len(cpu.Points) > 0 {
		out = append(out, cpu, mem)
	}
	if len(pts) == 0 {
		return nil
	}
	return out
}

// hostSample is a host's chart sample from its current figures.
func hostSample(h *vdibroker.SessionHost) hostPoint {
	p := hostPoint{sessions: h.Sessions, cpu: -1, memory: -1}
	if h.Metrics != nil {
		p.hasMetricsSample = true
		p.cpu, p.memory = int(math.Round(h.Metrics.CPUPercent)), int(math.Round(h.Metrics.MemoryPercent))
	}
	return p
}
