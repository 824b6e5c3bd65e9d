package placement

import (
	"testing"
	"time"

	"github.com/vdibroker/vdibroker"
)

// TestAnswersAdopted_RS2_RC1: a reconnect answers an adopted session only
// where placement would have put the user; the host's Sessions count the
// adopted session itself.
func TestAnswersAdopted_RS2_RC1(t *testing.T) {
	limit1 := pooled(vdibroker.BreadthFirst, 1)
	limit5 := pooled(vdibroker.BreadthFirst, 5)
	desks := personalPool(vdibroker.Persistent, vdibroker.Direct)
	drained := func(h *Host) { h.AllowNewSession = false }
	tests := []struct {
		name string
		pool Pool
		host Host
		want bool
	}{
		// 1 session (this one), limit 1: 0 others < 1.
		{"pooled, alone under the limit", limit1, liveHost("h", 1), true},
		// The review's case: drained, limit 1, five adopted (4 others).
		{"pooled, drained", limit1, with(liveHost("h", 5), drained), false},
		{"pooled, drained alone", limit5, with(liveHost("h", 1), drained), false},
		{"pooled, autoscale drained", limit5, with(liveHost("h", 1), func(h *Host) { h.AutoscaleDrain = true }), false},
		// 5 sessions, limit 5: 4 others < 5; 6 sessions: 5 others.
		{"pooled, at the limit with it", limit5, liveHost("h", 5), true},
		{"pooled, over the limit", limit5, liveHost("h", 6), false},
		{"pooled, unavailable", limit5, with(liveHost("h", 1), func(h *Host) { h.LastHeartBeat = nil }), false},
		{"personal, the user's desktop", desks, with(liveHost("h", 1), assigned("vip")), true},
		// R-PE4: drain does not stop the assigned user.
		{"personal, the user's drained desktop", desks, with(with(liveHost("h", 1), assigned("vip")), drained), true},
		{"personal, another user's desktop", desks, with(liveHost("h", 1), assigned("other")), false},
		{"personal, nobody's desktop", desks, liveHost("h", 1), false},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			if got := AnswersAdopted(tt.pool, &tt.host, "vip", testNow.Add(time.Second)); got != tt.want {
				t.Errorf("AnswersAdopted = %v, want %v", got, tt.want)
			}
		})
	}
}
