package store

import (
	"testing"
	"time"

	"github.com/vdibroker/vdibroker"
)

// TestCheckpointerCopiesBesideTheWriter: the checkpointer's own connection
// copies every committed WAL frame into the database file (so the writer's
// automatic checkpoint finds nothing left and never stalls a batch), and a
// negative interval leaves only SQLite's automatic checkpoint.
func TestCheckpointerCopiesBesideTheWriter(t *testing.T) {
	s, err := OpenWith(t.Context(), "", t.TempDir(), nil, Options{CheckpointInterval: time.Hour})
	if err != nil {
		t.Fatal(err)
	}
	defer s.Close()
	if s.ckpt == nil {
		t.Fatal("no checkpointer on SQLite")
	}
	p := &vdibroker.HostPool{Name: "p", HostPoolType: vdibroker.Pooled, LoadBalancerType: vdibroker.BreadthFirst,
		MaxSessionLimit: 100, LoadBalancing: vdibroker.DefaultLoadBalancing(), HeartbeatTimeoutSeconds: 90,
		PendingTimeoutSeconds: 300}
	if _, err := s.PutHostPool(t.Context(), p, vdibroker.Precondition{}); err != nil {
		t.Fatal(err)
	}
	if _, err := s.PutSessionHost(t.Context(), &vdibroker.SessionHost{HostPool: "p", Name: "h1", Address: "h1:3389", AllowNewSession: true}); err != nil {
		t.Fatal(err)
	}
	for i := range 20 {
		c := &vdibroker.PlacementCommit{Session: &vdibroker.UserSession{ID: vdibroker.NewID(), User: "u" + string(rune('a'+i)), HostPool: "p", SessionHost: "h1",
			State: vdibroker.StatePending, CreateTime: time.Now(), StateTime: time.Now()}, MaxSessionLimit: 100, Pooled: true}
		if err := s.CommitPlacement(t.Context(), c); err != nil {
			t.Fatal(err)
		}
	}
	frames, copied, err := s.ckpt.checkpoint(t.Context())
	if err != nil {
		t.Fatal(err)
	}
	if frames == 0 || copied != frames {
		t.Errorf("checkpoint copied %d of %d WAL frames, want all of them (and some)", copied, frames)
	}

	off, err := OpenWith(t.Context(), "", t.TempDir(), nil, Options{CheckpointInterval: -1})
	if err != nil {
		t.Fatal(err)
	}
	defer off.Close()
	if off.ckpt != nil {
		t.Error("CheckpointInterval -1 still starts a checkpointer")
	}
}
