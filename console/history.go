package console

import (
	"sort"
	"sync"
	"time"
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
