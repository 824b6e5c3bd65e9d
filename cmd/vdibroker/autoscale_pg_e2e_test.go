//go:build unix

package main

// Two replicas of `vdibroker serve` on one PostgreSQL database, both with
// the autoscaler on (docs/behaviour.md §8 "One replica acts").

import (
	"fmt"
	"github.com/vdibroker/vdibroker/internal/pgtest"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"syscall"
	"testing"
	"time"

	_ "github.com/jackc/pgx/v5/stdlib" // the schema of the test
	"github.com/vdibroker/vdibroker"
)

// e2ePostgresDSN creates a schema of the test's own on the database of
// VDIBROKER_TEST_POSTGRES_DSN (skipping without it) and returns a DSN whose
// search_path is it; the schema is dropped when the test ends.
func e2ePostgresDSN(t testing.TB) string {
	t.Helper()
	return pgtest.SchemaDSN(t, "vdibroker_e2e_", "PostgreSQL end-to-end test")
}

// TestAutoscaleReplicasE2E: replicas A and B serve one PostgreSQL
// database with the autoscaler on. A starts first and takes the lease; B
// evaluates nothing while A lives. Ramp-up: rp-1 runs with 2 sessions of
// maxSessionLimit 2 (100% > 60%), so rp-2 is started, once, by A. A is
// killed (SIGKILL: no release of the lease); once its lease of two
// intervals expires B evaluates, and when rp-2's users fill it (4/4) B
// starts rp-3. The evaluations are A's then B's, never interleaved, and
// each host was started once. The agents talk to B, which lives.
func TestAutoscaleReplicasE2E(t *testing.T) {
	if testing.Short() {
		t.Skip("end-to-end: builds the binary and runs agents")
	}
	dsn := e2ePostgresDSN(t)
	dir := t.TempDir()
	bin := e2eBuild(t, dir)
	lab := e2eNewLab(t, dir)
	const admin = "vdb_admin_e2e_replicas_test_0123456789"
	flags := []string{"--database", dsn, "--power-config", lab.cfg, "--autoscale-interval", "1s"}
	procA, _ := e2eServeAt(t, bin, filepath.Join(dir, "a"), admin, "127.0.0.1:0", flags...)
	procB, baseB := e2eServeAt(t, bin, filepath.Join(dir, "b"), admin, "127.0.0.1:0", flags...)
	host, _ := os.Hostname()
	holderA, holderB := fmt.Sprintf("%s:%d", host, procA.cmd.Process.Pid), fmt.Sprintf("%s:%d", host, procB.cmd.Process.Pid)
	lab.install(bin, baseB)
	e := &e2eAutoscale{bin: bin, base: baseB, api: e2eAPI{tb: t, base: baseB, token: admin}, lab: lab, zone: e2ePlanZone(time.Now())}

	const pool = "as-replicas"
	e.pool(t, pool, 2, map[string][]vdibroker.AgentSession{"rp-1": e2eSessions("kim", "lee")}, "rp-2", "rp-3")
	e.plan("plan-replicas", pool, e2eSchedule(11, 15, 16, 18)) // 12:xx is ramp-up
	api := e.api
	e2eEventually(t, "rp-2 started, its agent heartbeating", 60*time.Second, func() bool {
		h := api.host(pool, "rp-2")
		return h.Status == vdibroker.StatusAvailable && h.PowerState == vdibroker.PowerRunning
	})
	n := len(e.evaluations(pool))
	e2eEventually(t, "two more evaluations", 30*time.Second, func() bool { return len(e.evaluations(pool)) >= n+2 })
	for _, ev := range e.evaluations(pool) {
		if ev.Holder != holderA {
			t.Fatalf("evaluation %d by %q while A (%s) lives, want only A's", ev.Seq, ev.Holder, holderA)
		}
	}

	procA.cmd.Process.Signal(syscall.SIGKILL)
	procA.wait(t)
	e2eEventually(t, "B evaluates", 30*time.Second, func() bool {
		evs := e.evaluations(pool)
		return evs[len(evs)-1].Holder == holderB
	})
	lab.sessions("rp-2", e2eSessions("mia", "ned"))
	// The evaluation is recorded after the start it did (the host is
	// Starting a moment before).
	e2eEventually(t, "rp-3's start recorded", 60*time.Second, func() bool {
		return slices.Contains(e.actions(t, pool), "Start rp-3")
	})
	if h := api.host(pool, "rp-3"); h.PowerState == vdibroker.PowerStopped {
		t.Errorf("rp-3 %s after its start", h.PowerState)
	}

	evs := e.evaluations(pool)
	var holders []string
	starts := map[string]string{}
	for _, ev := range evs {
		if len(holders) == 0 || holders[len(holders)-1] != ev.Holder {
			holders = append(holders, ev.Holder)
		}
		for _, a := range ev.Actions {
			if a.Action == vdibroker.ActionStart {
				if by, ok := starts[a.Host]; ok {
					t.Errorf("%s started twice: by %s and by %s", a.Host, by, ev.Holder)
				}
				starts[a.Host] = ev.Holder
			}
		}
	}
	if fmt.Sprint(holders) != fmt.Sprint([]string{holderA, holderB}) {
		t.Errorf("evaluations by %q in turn, want A's then B's: %q", holders, []string{holderA, holderB})
	}
	if starts["rp-2"] != holderA || starts["rp-3"] != holderB {
		t.Errorf("starts %v, want rp-2 by A (%s) and rp-3 by B (%s)", starts, holderA, holderB)
	}
	if got := lab.actions(); strings.Count(got, "start rp-2 ") != 1 || strings.Count(got, "start rp-3 ") != 1 {
		t.Errorf("driver actions %q: want rp-2 and rp-3 started once each", got)
	}
}
