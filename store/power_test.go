package store_test

import (
	"context"
	"errors"
	"sync"
	"testing"
	"time"

	"github.com/vdibroker/vdibroker"
	"github.com/vdibroker/vdibroker/store"
)

// TestPoolPowerSettings: powerDriver and startVMOnConnect are stored with
// the pool's other settings, on create and on replace (R-A4).
func TestPoolPowerSettings(t *testing.T) {
	each(t, func(t *testing.T, s *store.DB) {
		p := pool("pw", vdibroker.Pooled)
		p.PowerDriver, p.StartVMOnConnect = "lab", true
		mustPool(t, s, p)
		got, err := s.GetHostPool(t.Context(), "pw")
		if err != nil || got.PowerDriver != "lab" || !got.StartVMOnConnect {
			t.Fatalf("created: %+v, %v", got, err)
		}
		p.PowerDriver, p.StartVMOnConnect, p.UpdateTime = "", false, t0.Add(time.Second)
		mustPool(t, s, p)
		list, err := s.ListHostPools(t.Context())
		if err != nil || len(list) != 1 || list[0].PowerDriver != "" || list[0].StartVMOnConnect {
			t.Fatalf("replaced: %+v, %v", list[0], err)
		}
	})
}

// TestSetPowerState: the state and its time are recorded; with from, only
// while the recorded state is one of them ("" reads as Unknown); a bad
// state is a field error that writes nothing.
func TestSetPowerState(t *testing.T) {
	each(t, func(t *testing.T, s *store.DB) {
		ctx := t.Context()
		mustPool(t, s, pool("pw", vdibroker.Pooled))
		mustHost(t, s, "pw", "h1")
		h, err := s.GetSessionHost(ctx, "pw", "h1")
		if err != nil || h.PowerState != "" || h.PowerStateTime != nil || h.AutoscaleDrain {
			t.Fatalf("new host: %+v, %v", h, err)
		}
		at := t0.Add(time.Minute)
		h, changed, err := s.SetPowerState(ctx, "pw", "h1", vdibroker.PowerStarting, at, vdibroker.PowerStopped, vdibroker.PowerUnknown)
		if err != nil || !changed || h.PowerState != vdibroker.PowerStarting {
			t.Fatalf("from Unknown: %+v, %v, %v", h, changed, err)
		}
		// A status poll that read Stopped before the start must not undo it.
		_, changed, err = s.SetPowerState(ctx, "pw", "h1", vdibroker.PowerStopped, at, vdibroker.PowerStopping)
		if err != nil || changed {
			t.Fatalf("conditional write over Starting: changed=%v, %v", changed, err)
		}
		h, err = s.GetSessionHost(ctx, "pw", "h1")
		if err != nil || h.PowerState != vdibroker.PowerStarting || h.PowerStateTime == nil || !h.PowerStateTime.Equal(at) {
			t.Fatalf("read back: %+v, %v", h, err)
		}
		_, _, err = s.SetPowerState(ctx, "pw", "h1", "Hibernating", at)
		wantCode(t, err, vdibroker.EInvalid)
		_, _, err = s.SetPowerState(ctx, "pw", "nope", vdibroker.PowerStopped, at)
		wantCode(t, err, vdibroker.ENotFound)
	})
}

// TestHeartbeatMakesHostRunning: a Starting host whose agent heartbeats is
// Running; the heartbeats just after a stop do not bring it back, a later
// one (started outside the broker) does; a shutting-down agent changes
// nothing (R-A4).
func TestHeartbeatMakesHostRunning(t *testing.T) {
	each(t, func(t *testing.T, s *store.DB) {
		ctx := t.Context()
		mustPool(t, s, pool("pw", vdibroker.Pooled)) // heartbeat timeout 90 s
		mustHost(t, s, "pw", "h1")
		power := func(at time.Time, shutting bool) string {
			t.Helper()
			res, err := s.ApplyHeartbeat(ctx, "pw", "h1", &vdibroker.HeartbeatRequest{ShuttingDown: shutting}, at)
			if err != nil {
				t.Fatal(err)
			}
			h, err := s.GetSessionHost(ctx, "pw", "h1")
			if err != nil {
				t.Fatal(err)
			}
			if res.Host.PowerState != h.PowerState {
				t.Fatalf("heartbeat answered %q, store has %q", res.Host.PowerState, h.PowerState)
			}
			return h.PowerState
		}
		if got := power(t0, false); got != "" {
			t.Fatalf("never power-managed: %q, want \"\" (read from the heartbeat)", got)
		}
		s.SetPowerState(ctx, "pw", "h1", vdibroker.PowerStarting, t0)
		if got := power(t0.Add(time.Second), false); got != vdibroker.PowerRunning {
			t.Fatalf("Starting + heartbeat: %q", got)
		}
		s.SetPowerState(ctx, "pw", "h1", vdibroker.PowerStopped, t0.Add(2*time.Second))
		if got := power(t0.Add(3*time.Second), true); got != vdibroker.PowerStopped {
			t.Fatalf("shutting-down heartbeat after the stop: %q", got)
		}
		if got := power(t0.Add(4*time.Second), false); got != vdibroker.PowerStopped {
			t.Fatalf("a last heartbeat 2 s after the stop: %q", got)
		}
		// 2 s + 90 s timeout = 92 s: a heartbeat at 93 s is a running host.
		if got := power(t0.Add(93*time.Second), false); got != vdibroker.PowerRunning {
			t.Fatalf("a heartbeat past the timeout after the stop: %q", got)
		}
	})
}

// TestAutoscaleDrain (R-A3): the autoscale drain keeps new sessions off
// like an admin's drain, in the store's own conditional write, and neither
// drain clears the other.
func TestAutoscaleDrain(t *testing.T) {
	each(t, func(t *testing.T, s *store.DB) {
		ctx := t.Context()
		mustPool(t, s, pool("pw", vdibroker.Pooled))
		mustHost(t, s, "pw", "h1")
		h, err := s.SetAutoscaleDrain(ctx, "pw", "h1", true)
		if err != nil || !h.AutoscaleDrain || !h.AllowNewSession {
			t.Fatalf("drain: %+v, %v", h, err)
		}
		if err := s.CommitPlacement(ctx, placement("pw", "h1", "u1", 10)); !errors.Is(err, vdibroker.ErrHostFull) {
			t.Fatalf("connect to an autoscale-drained host: %v, want ErrHostFull", err)
		}
		// An admin's drain and undrain leave the autoscale drain on.
		for _, allow := range []bool{false, true} {
			if _, err := s.UpdateSessionHost(ctx, "pw", "h1", func(h *vdibroker.SessionHost) error { h.AllowNewSession = allow; return nil }); err != nil {
				t.Fatal(err)
			}
		}
		h, _ = s.GetSessionHost(ctx, "pw", "h1")
		if !h.AutoscaleDrain || !h.AllowNewSession {
			t.Fatalf("after an admin's drain and undrain: %+v", h)
		}
		if err := s.CommitPlacement(ctx, placement("pw", "h1", "u1", 10)); !errors.Is(err, vdibroker.ErrHostFull) {
			t.Fatalf("admin's undrain cleared the autoscale drain: %v", err)
		}
		// The admin drains; clearing the autoscale drain keeps the admin's.
		s.UpdateSessionHost(ctx, "pw", "h1", func(h *vdibroker.SessionHost) error { h.AllowNewSession = false; return nil })
		h, err = s.SetAutoscaleDrain(ctx, "pw", "h1", false)
		if err != nil || h.AutoscaleDrain || h.AllowNewSession {
			t.Fatalf("undrain by the autoscaler: %+v, %v", h, err)
		}
		if err := s.CommitPlacement(ctx, placement("pw", "h1", "u1", 10)); !errors.Is(err, vdibroker.ErrHostFull) {
			t.Fatalf("the admin's drain was cleared: %v", err)
		}
		s.UpdateSessionHost(ctx, "pw", "h1", func(h *vdibroker.SessionHost) error { h.AllowNewSession = true; return nil })
		mustCommit(t, s, placement("pw", "h1", "u1", 10))
	})
}

// TestSetPowerStateRace: connects on two replicas race to start one
// stopped host; the conditional write lets exactly one claim it (R-A4:
// "repeated connects start no second host").
func TestSetPowerStateRace(t *testing.T) {
	run(t, func(t *testing.T, tg target) {
		replicas := []*store.DB{tg.open(t, store.Options{}), tg.open(t, store.Options{})}
		ctx := t.Context()
		mustPool(t, replicas[0], pool("pw", vdibroker.Pooled))
		mustHost(t, replicas[0], "pw", "h1")
		if _, _, err := replicas[0].SetPowerState(ctx, "pw", "h1", vdibroker.PowerStopped, t0); err != nil {
			t.Fatal(err)
		}
		winners := concurrentClaims(t, 16, func(i int) (bool, error) {
			_, won, err := replicas[i%2].SetPowerState(ctx, "pw", "h1", vdibroker.PowerStarting, t0.Add(time.Second), vdibroker.PowerStopped)
			return won, err
		})
		if winners != 1 {
			t.Fatalf("%d claims won the start of one stopped host, want 1", winners)
		}
	})
}

// TestRestartStartRace: admins on two replicas race to start again a host
// Starting since the start timeout (its agent never came back, R-A4); the
// write's condition (Starting, recorded at or before the cutoff) lets
// exactly one claim it, and records Starting at its time. A host Starting
// since after the cutoff, or in another state (Stopped; Running, recorded
// by a heartbeat before the cutoff; Stopping, an admin's stop), is not
// claimed and keeps its state.
func TestRestartStartRace(t *testing.T) {
	run(t, func(t *testing.T, tg target) {
		replicas := []*store.DB{tg.open(t, store.Options{}), tg.open(t, store.Options{})}
		ctx := t.Context()
		mustPool(t, replicas[0], pool("pw", vdibroker.Pooled))
		for _, h := range []string{"h1", "h2", "h3", "h4"} {
			mustHost(t, replicas[0], "pw", h)
		}
		for h, st := range map[string]string{"h1": vdibroker.PowerStarting, "h2": vdibroker.PowerStopped, "h3": vdibroker.PowerStarting, "h4": vdibroker.PowerStarting} {
			if _, _, err := replicas[0].SetPowerState(ctx, "pw", h, st, t0); err != nil {
				t.Fatal(err)
			}
		}
		// h3's agent came up a minute after its start: Running since
		// then, long before the cutoff below. h4 is being stopped.
		if _, err := replicas[0].ApplyHeartbeat(ctx, "pw", "h3", nil, t0.Add(time.Minute)); err != nil {
			t.Fatal(err)
		}
		if _, _, err := replicas[0].SetPowerState(ctx, "pw", "h4", vdibroker.PowerStopping, t0.Add(time.Minute)); err != nil {
			t.Fatal(err)
		}
		now := t0.Add(vdibroker.HostStartTimeout)
		cutoff := now.Add(-vdibroker.HostStartTimeout)
		if _, changed, err := replicas[0].RestartStart(ctx, "pw", "h1", cutoff.Add(-time.Nanosecond), now.Add(-time.Minute), now); err != nil || changed {
			t.Fatalf("restart of a start younger than the cutoff: changed=%v, %v", changed, err)
		}
		for h, want := range map[string]string{"h2": vdibroker.PowerStopped, "h3": vdibroker.PowerRunning, "h4": vdibroker.PowerStopping} {
			late := cutoff.Add(time.Hour) // every state is older than this
			got, changed, err := replicas[0].RestartStart(ctx, "pw", h, late, late, late.Add(vdibroker.HostStartTimeout))
			if err != nil || changed || got.PowerState != want {
				t.Fatalf("restart of %s (%s): changed=%v, %+v, %v; want %s kept", h, want, changed, got, err, want)
			}
		}
		winners := concurrentClaims(t, 16, func(i int) (bool, error) {
			_, won, err := replicas[i%2].RestartStart(ctx, "pw", "h1", cutoff, now.Add(-time.Minute), now)
			return won, err
		})
		if winners != 1 {
			t.Fatalf("%d claims won the restart of one host, want 1", winners)
		}
		h, err := replicas[1].GetSessionHost(ctx, "pw", "h1")
		if err != nil || h.PowerState != vdibroker.PowerStarting || h.PowerStateTime == nil || !h.PowerStateTime.Equal(now) {
			t.Fatalf("after the restart: %+v, %v; want Starting since %s", h, err, now)
		}
		_, _, err = replicas[0].RestartStart(ctx, "pw", "nope", cutoff, now.Add(-time.Minute), now)
		wantCode(t, err, vdibroker.ENotFound)
	})
}

// TestNoRestartAfterShutdownHeartbeat (R-A4): the restart's condition
// holds only while the host's agent has not heartbeated after its Starting
// record at silentSince or later: such a heartbeat said it shuts down (it
// left the host Starting), so its machine is going down. h1's agent said
// so after its start; h2's last heartbeat came before its start, and
// counts for nothing.
func TestNoRestartAfterShutdownHeartbeat(t *testing.T) {
	each(t, func(t *testing.T, s *store.DB) {
		ctx := t.Context()
		mustPool(t, s, pool("pw", vdibroker.Pooled))
		for _, h := range []string{"h1", "h2"} {
			mustHost(t, s, "pw", h)
		}
		if _, err := s.ApplyHeartbeat(ctx, "pw", "h2", nil, t0); err != nil {
			t.Fatal(err)
		}
		for _, h := range []string{"h1", "h2"} {
			if _, _, err := s.SetPowerState(ctx, "pw", h, vdibroker.PowerStarting, t0.Add(time.Second)); err != nil {
				t.Fatal(err)
			}
		}
		said := t0.Add(vdibroker.HostStartTimeout)
		if _, err := s.ApplyHeartbeat(ctx, "pw", "h1", &vdibroker.HeartbeatRequest{ShuttingDown: true}, said); err != nil {
			t.Fatal(err)
		}
		now := said.Add(time.Minute)
		cutoff := now.Add(-vdibroker.HostStartTimeout)
		got, changed, err := s.RestartStart(ctx, "pw", "h1", cutoff, said, now)
		if err != nil || changed || got.PowerState != vdibroker.PowerStarting || !got.PowerStateTime.Equal(t0.Add(time.Second)) {
			t.Fatalf("restart of h1, its agent said it shuts down at silentSince: changed=%v, %+v, %v; want Starting since its start kept", changed, got, err)
		}
		if _, changed, err := s.RestartStart(ctx, "pw", "h1", cutoff, said.Add(time.Nanosecond), now); err != nil || !changed {
			t.Fatalf("restart of h1, its agent silent since before silentSince: changed=%v, %v; want restarted", changed, err)
		}
		if _, changed, err := s.RestartStart(ctx, "pw", "h2", cutoff, t0.Add(-time.Hour), now); err != nil || !changed {
			t.Fatalf("restart of h2, its last heartbeat before its start: changed=%v, %v; want restarted", changed, err)
		}
	})
}

// TestRestartWaitingForHeartbeatKeepsRunning (PostgreSQL, R-A4): an
// admin's restart of a host whose start timed out that waits for the
// host's lock while its agent's first heartbeat records it Running must
// not write Starting over that Running: the restart's condition is read
// on the row the heartbeat left.
func TestRestartWaitingForHeartbeatKeepsRunning(t *testing.T) {
	s, dsn := postgresStore(t)
	ctx := t.Context()
	mustPool(t, s, pool("p", vdibroker.Pooled))
	mustHost(t, s, "p", "h1")
	now := time.Now().UTC()
	if _, _, err := s.SetPowerState(ctx, "p", "h1", vdibroker.PowerStarting, now.Add(-vdibroker.HostStartTimeout-time.Minute)); err != nil {
		t.Fatal(err)
	}
	// The heartbeat's transaction: the host's lock, then Running.
	tx := holdHostLock(t, dsn, "p", "h1")
	if _, err := tx.ExecContext(ctx, `UPDATE session_hosts SET power_state = 'Running', power_state_time = $1, last_heartbeat = $1 WHERE host_pool = 'p' AND name = 'h1'`, now.UnixNano()); err != nil {
		t.Fatal(err)
	}
	type result struct {
		changed bool
		err     error
	}
	done := make(chan result, 1)
	go func() {
		_, changed, err := s.RestartStart(context.WithoutCancel(ctx), "p", "h1", now.Add(-vdibroker.HostStartTimeout), now.Add(-time.Minute), now)
		done <- result{changed, err}
	}()
	waitForLockWaiter(t, s, "the restart")
	if err := tx.Commit(); err != nil {
		t.Fatal(err)
	}
	if r := <-done; r.err != nil || r.changed {
		t.Fatalf("restart that waited for the heartbeat: changed=%v, %v; want not written", r.changed, r.err)
	}
	h, err := s.GetSessionHost(ctx, "p", "h1")
	if err != nil || h.PowerState != vdibroker.PowerRunning {
		t.Fatalf("after the restart that waited: %+v, %v; want Running kept", h, err)
	}
}

// TestRestartWaitingForShutdownHeartbeatKeepsStart (PostgreSQL, R-A4):
// an admin's restart of a host whose start timed out that waits for the
// host's lock while its agent's heartbeat saying it shuts down lands
// (the host stays Starting, its last heartbeat now after the start) must
// not record the restart: the no-heartbeat condition is read on the row
// the heartbeat left, not on the one the restart read before its wait.
func TestRestartWaitingForShutdownHeartbeatKeepsStart(t *testing.T) {
	s, dsn := postgresStore(t)
	ctx := t.Context()
	mustPool(t, s, pool("p", vdibroker.Pooled))
	mustHost(t, s, "p", "h1")
	now := time.Now().UTC()
	started := now.Add(-vdibroker.HostStartTimeout - time.Minute)
	if _, _, err := s.SetPowerState(ctx, "p", "h1", vdibroker.PowerStarting, started); err != nil {
		t.Fatal(err)
	}
	// The heartbeat's transaction: the host's lock, then the heartbeat
	// time, the state left Starting (it said it shuts down).
	tx := holdHostLock(t, dsn, "p", "h1")
	if _, err := tx.ExecContext(ctx, `UPDATE session_hosts SET last_heartbeat = $1, shutting_down = true WHERE host_pool = 'p' AND name = 'h1'`, now.Add(-time.Second).UnixNano()); err != nil {
		t.Fatal(err)
	}
	type result struct {
		changed bool
		err     error
	}
	done := make(chan result, 1)
	go func() {
		_, changed, err := s.RestartStart(context.WithoutCancel(ctx), "p", "h1", now.Add(-vdibroker.HostStartTimeout), now.Add(-time.Minute), now)
		done <- result{changed, err}
	}()
	waitForLockWaiter(t, s, "the restart")
	if err := tx.Commit(); err != nil {
		t.Fatal(err)
	}
	if r := <-done; r.err != nil || r.changed {
		t.Fatalf("restart that waited for a shutting-down heartbeat: changed=%v, %v; want not written", r.changed, r.err)
	}
	h, err := s.GetSessionHost(ctx, "p", "h1")
	if err != nil || h.PowerState != vdibroker.PowerStarting || !h.PowerStateTime.Equal(started) {
		t.Fatalf("after the restart that waited: %+v, %v; want Starting since %s kept", h, err, started)
	}
}

// TestHeartbeatWaitingForStopKeepsIt (PostgreSQL): a heartbeat that waits
// for the host's lock while a stop is being recorded must not write back
// the Running it would have read before the wait: the stop stands
// (R-A4). The heartbeat's read under the lock may return the host's row as
// it was before the wait, so the rule is the UPDATE's own.
func TestHeartbeatWaitingForStopKeepsIt(t *testing.T) {
	s, dsn := postgresStore(t)
	ctx := t.Context()
	mustPool(t, s, pool("p", vdibroker.Pooled))
	mustHost(t, s, "p", "h1")
	now := time.Now().UTC()
	if _, _, err := s.SetPowerState(ctx, "p", "h1", vdibroker.PowerStarting, now.Add(-time.Minute)); err != nil {
		t.Fatal(err)
	}
	if _, err := s.ApplyHeartbeat(ctx, "p", "h1", nil, now.Add(-30*time.Second)); err != nil {
		t.Fatal(err)
	}
	// The stop's transaction: the host's lock, then the Stopped record.
	tx := holdHostLock(t, dsn, "p", "h1")
	if _, err := tx.ExecContext(ctx, `UPDATE session_hosts SET power_state = 'Stopped', power_state_time = $1 WHERE host_pool = 'p' AND name = 'h1'`, now.UnixNano()); err != nil {
		t.Fatal(err)
	}
	done := make(chan error, 1)
	go func() {
		_, err := s.ApplyHeartbeat(context.WithoutCancel(ctx), "p", "h1", nil, now.Add(time.Second))
		done <- err
	}()
	waitForLockWaiter(t, s, "the heartbeat")
	if err := tx.Commit(); err != nil {
		t.Fatal(err)
	}
	if err := <-done; err != nil {
		t.Fatal(err)
	}
	h, err := s.GetSessionHost(ctx, "p", "h1")
	if err != nil || h.PowerState != vdibroker.PowerStopped {
		t.Fatalf("after the heartbeat that waited: %+v, %v; want Stopped kept", h, err)
	}
}

// TestStoppingHostRefusesCommits (R-H1, R-A3): from the moment a stop is
// recorded the host's conditional write refuses new sessions, so a
// connect decided on a view from before the stop cannot land on a host
// being taken down; a host that runs again (its agent heartbeats past the
// timeout after the stop) takes sessions again.
func TestStoppingHostRefusesCommits(t *testing.T) {
	each(t, func(t *testing.T, s *store.DB) {
		ctx := t.Context()
		mustPool(t, s, pool("pw", vdibroker.Pooled)) // heartbeat timeout 90 s
		mustHost(t, s, "pw", "h1")
		for _, st := range []string{vdibroker.PowerStopping, vdibroker.PowerStopped} {
			if _, _, err := s.SetPowerState(ctx, "pw", "h1", st, t0); err != nil {
				t.Fatal(err)
			}
			if err := s.CommitPlacement(ctx, placement("pw", "h1", "u-"+st, 10)); !errors.Is(err, vdibroker.ErrHostFull) {
				t.Fatalf("connect to a %s host: %v, want ErrHostFull", st, err)
			}
		}
		if _, err := s.ApplyHeartbeat(ctx, "pw", "h1", &vdibroker.HeartbeatRequest{}, t0.Add(91*time.Second)); err != nil {
			t.Fatal(err)
		}
		mustCommit(t, s, placement("pw", "h1", "u-after", 10))
		// An admin's start back to Running lifts it as well.
		if _, _, err := s.SetPowerState(ctx, "pw", "h1", vdibroker.PowerStopping, t0.Add(92*time.Second)); err != nil {
			t.Fatal(err)
		}
		if _, _, err := s.SetPowerState(ctx, "pw", "h1", vdibroker.PowerRunning, t0.Add(93*time.Second)); err != nil {
			t.Fatal(err)
		}
		mustCommit(t, s, placement("pw", "h1", "u-running", 10))
	})
}

// concurrentClaims runs claim n times at once and counts those that won;
// any error fails the test.
func concurrentClaims(t *testing.T, n int, claim func(i int) (won bool, err error)) int {
	t.Helper()
	won := make([]bool, n)
	errs := make([]error, n)
	var wg sync.WaitGroup
	for i := range n {
		wg.Go(func() { won[i], errs[i] = claim(i) })
	}
	wg.Wait()
	winners := 0
	for i := range n {
		if errs[i] != nil {
			t.Fatalf("claim %d: %v", i, errs[i])
		}
		if won[i] {
			winners++
		}
	}
	return winners
}
