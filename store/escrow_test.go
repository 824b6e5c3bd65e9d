package store_test

import (
	"errors"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"sync"
	"syscall"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"

	"github.com/vdibroker/vdibroker"
	"github.com/vdibroker/vdibroker/store"
)

// TestEscrows (R-OUT2): a replica's escrow is trimmed to what
// the host has free after its sessions and the other replicas' escrows;
// putting again replaces the replica's own; an expired escrow no longer
// counts; two replicas putting at once are never granted more than the
// host has free.
func TestEscrows(t *testing.T) {
	run(t, func(t *testing.T, tg target) {
		s := tg.open(t, store.Options{})
		ctx := t.Context()
		p := pool("esc", vdibroker.Pooled)
		p.MaxSessionLimit = 4
		mustPool(t, s, p)
		mustHost(t, s, "esc", "h1")
		mustHost(t, s, "esc", "h2")
		mustCommit(t, s, placement("esc", "h1", "u1", 4)) // h1: 1 session, 3 free
		exp := t0.Add(time.Minute)
		want := func(host string, n int) vdibroker.Escrow {
			return vdibroker.Escrow{HostPool: "esc", Host: host, Slots: n, Expire: exp}
		}
		// A asks 2 of h1 and 5 of h2: h2 has only 4 free.
		got, err := s.PutEscrows(ctx, "A", []vdibroker.Escrow{want("h1", 2), want("h2", 5)}, t0)
		if err != nil {
			t.Fatal(err)
		}
		a := []vdibroker.Escrow{{Replica: "A", HostPool: "esc", Host: "h1", Slots: 2, Expire: exp}, {Replica: "A", HostPool: "esc", Host: "h2", Slots: 4, Expire: exp}}
		if d := cmp.Diff(a, got); d != "" {
			t.Errorf("A granted (-want +got):\n%s", d)
		}
		// B asks 2 of each: h1 has 4-1-2 = 1 left, h2 4-0-4 = 0.
		got, err = s.PutEscrows(ctx, "B", []vdibroker.Escrow{want("h1", 2), want("h2", 2)}, t0)
		if err != nil {
			t.Fatal(err)
		}
		if d := cmp.Diff([]vdibroker.Escrow{{Replica: "B", HostPool: "esc", Host: "h1", Slots: 1, Expire: exp}}, got); d != "" {
			t.Errorf("B granted (-want +got):\n%s", d)
		}
		list, err := s.ListEscrows(ctx, "esc", t0)
		if err != nil {
			t.Fatal(err)
		}
		if len(list) != 3 {
			t.Errorf("listed %d escrows, want 3: %+v", len(list), list)
		}
		// A gives its escrows back (a clean shutdown): only B's is left.
		if _, err := s.PutEscrows(ctx, "A", nil, t0); err != nil {
			t.Fatal(err)
		}
		if list, _ = s.ListEscrows(ctx, "esc", t0); len(list) != 1 || list[0].Replica != "B" {
			t.Errorf("after A's release: %+v, want B's alone", list)
		}
		// Expired: listed no more, and its slots are free for A.
		later := exp.Add(time.Second)
		if list, _ = s.ListEscrows(ctx, "esc", later); len(list) != 0 {
			t.Errorf("expired escrows listed: %+v", list)
		}
		got, err = s.PutEscrows(ctx, "A", []vdibroker.Escrow{{HostPool: "esc", Host: "h1", Slots: 9, Expire: later.Add(time.Minute)}}, later)
		if err != nil || len(got) != 1 || got[0].Slots != 3 {
			t.Errorf("A after B's expiry: %+v %v, want 3 slots of h1 (4-1)", got, err)
		}
		if _, err := s.PutEscrows(ctx, "", nil, t0); vdibroker.ErrorCode(err) != vdibroker.EInvalid {
			t.Errorf("empty replica: %v, want InvalidArgument", err)
		}

		// Concurrency: 8 replicas at once on h2 (4 free); never more than 4.
		s2 := tg.open(t, store.Options{})
		var wg sync.WaitGroup
		for i := range 8 {
			wg.Add(1)
			go func() {
				defer wg.Done()
				st := s
				if i%2 == 1 {
					st = s2
				}
				if _, err := st.PutEscrows(ctx, "R"+string(rune('0'+i)), []vdibroker.Escrow{{HostPool: "esc", Host: "h2", Slots: 1, Expire: later.Add(time.Hour)}}, later); err != nil {
					t.Error(err)
				}
			}()
		}
		wg.Wait()
		list, _ = s.ListEscrows(ctx, "esc", later)
		total := 0
		for _, e := range list {
			if e.Host == "h2" {
				total += e.Slots
			}
		}
		if total != 4 {
			t.Errorf("h2 escrowed %d slots after 8 concurrent puts, want 4 (its free slots)", total)
		}
	})
}

// TestPingWriteProbe (R-OUT1): Ping writes, so a SQLite data directory
// on a full disk is an unhealthy store though reads still work, and a
// failed write is marked ErrStoreWrite; with room again, Ping passes. The
// disk is a tiny tmpfs the test mounts (root ignores file permissions, and
// a filesystem with open files cannot be remounted read-only); the test
// skips where it cannot mount.
func TestPingWriteProbe(t *testing.T) {
	dir := tinyDisk(t)
	s, err := store.OpenWith(t.Context(), "", dir, nil, store.Options{})
	if err != nil {
		t.Fatal(err)
	}
	defer s.Close()
	if err := s.Ping(t.Context()); err != nil {
		t.Fatalf("ping on a healthy disk: %v", err)
	}
	fill := fillDisk(t, dir)
	time.Sleep(600 * time.Millisecond) // past probeEvery: a passed probe stands that long
	err = s.Ping(t.Context())
	if err == nil || !errors.Is(err, vdibroker.ErrStoreWrite) {
		t.Errorf("ping on a full disk: %v, want an ErrStoreWrite", err)
	}
	if _, err := s.ListHostPools(t.Context()); err != nil {
		t.Errorf("reads on a full disk: %v (they should still work; the probe is what finds it)", err)
	}
	os.Remove(fill)
	if err := s.Ping(t.Context()); err != nil {
		t.Errorf("ping with room again: %v", err)
	}
}

// tinyDisk mounts a 4 MiB tmpfs for the test and returns it; skips when
// mounting is not allowed here.
func tinyDisk(t testing.TB) string {
	t.Helper()
	dir := t.TempDir()
	if os.Geteuid() != 0 {
		t.Skip("disk-failure test: needs root to mount a tiny tmpfs")
	}
	if out, err := exec.Command("mount", "-t", "tmpfs", "-o", "size=4m", "tmpfs", dir).CombinedOutput(); err != nil {
		t.Skipf("disk-failure test: cannot mount a tmpfs here: %v %s", err, out)
	}
	t.Cleanup(func() {
		if out, err := exec.Command("umount", "-l", dir).CombinedOutput(); err != nil {
			t.Errorf("umount -l %s: %v %s", dir, err, out)
		}
	})
	return dir
}

// fillDisk writes a file to dir until the disk is full and returns its path.
func fillDisk(t testing.TB, dir string) string {
	t.Helper()
	path := filepath.Join(dir, "filler")
	f, err := os.Create(path)
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	buf := make([]byte, 64<<10)
	for {
		if _, err := f.Write(buf); err != nil {
			if errors.Is(err, syscall.ENOSPC) {
				return path
			}
			t.Fatal(err)
		}
	}
}

// TestReconcileTwin (R-OUT3, R-S2): a user with two open
// sessions on one host (one replica adopted the logon from the host's
// report while another wrote the session it had placed for it during an
// outage) keeps the one acknowledged first; the twin ends with reason
// OutagePlacementWritten, and the counts stay exact.
func TestReconcileTwin(t *testing.T) {
	each(t, func(t *testing.T, s *store.DB) {
		ctx := t.Context()
		p := pool("twin", vdibroker.Pooled)
		p.MaxSessionLimit = 10
		mustPool(t, s, p)
		mustHost(t, s, "twin", "h1")
		report := &vdibroker.HeartbeatRequest{Sessions: []vdibroker.AgentSession{{ID: "s-twin", User: "twin", State: vdibroker.StateActive}}}
		// The adoption, at t0+10s.
		if _, err := s.ApplyHeartbeat(ctx, "twin", "h1", report, t0.Add(10*time.Second)); err != nil {
			t.Fatal(err)
		}
		// The outage placement, placed at t0 and written since (as the race
		// leaves it: past the commit's check).
		placedID := vdibroker.NewID()
		if err := s.ExecRaw(ctx, fmt.Sprintf(`INSERT INTO user_sessions (id, host_pool, session_host, user_name, user_key, state,
			create_time, state_time, agent_session_id, end_reason, pooled, logoff_queued, placement)
			VALUES ('%s', 'twin', 'h1', 'twin', 'twin', 'Pending', %d, %d, '', '', TRUE, FALSE, '{"outageMode":true}')`, placedID, t0.UnixNano(), t0.UnixNano())); err != nil {
			t.Fatal(err)
		}
		if err := s.ExecRaw(ctx, `UPDATE host_counts SET sessions = sessions + 1, connecting_sessions = connecting_sessions + 1 WHERE host_pool = 'twin' AND name = 'h1'`); err != nil {
			t.Fatal(err)
		}
		if _, err := s.ApplyHeartbeat(ctx, "twin", "h1", report, t0.Add(20*time.Second)); err != nil {
			t.Fatal(err)
		}
		open, err := s.ListUserSessions(ctx, vdibroker.SessionFilter{HostPool: "twin", User: "twin"})
		if err != nil {
			t.Fatal(err)
		}
		var still []*vdibroker.UserSession
		for _, us := range open {
			if us.Open() {
				still = append(still, us)
			} else if us.EndReason != vdibroker.EndOutagePlacementWritten {
				t.Errorf("the twin ended with reason %q, want %s", us.EndReason, vdibroker.EndOutagePlacementWritten)
			}
		}
		if len(still) != 1 || still[0].ID != placedID || still[0].State != vdibroker.StateActive || still[0].AgentSessionID != "s-twin" {
			t.Fatalf("open sessions of twin: %+v, want the placed one %s alone, Active with agent id s-twin", still, placedID)
		}
		wantCounts(t, s, "twin", "h1", 1, 0)
		if bad, err := s.CheckCounts(ctx); err != nil || len(bad) > 0 {
			t.Errorf("counts: %v %v", bad, err)
		}
	})
}
