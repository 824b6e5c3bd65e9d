//go:build unix

package main

// The read-only disk of R-OUT1: SQLite's data directory on an ext4 file
// system that the kernel turns read-only under the broker, as it does a
// failing disk (internal/faildisk). See testOutageReadOnlyDiskE2E.

import (
	"bytes"
	"encoding/json"
	"net/http"
	"net/url"
	"os"
	"path/filepath"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/vdibroker/vdibroker"
	"github.com/vdibroker/vdibroker/internal/faildisk"
)

// storeReason returns the store's reason in /healthz, as the admin token
// reads it (anyone else gets vhttp.PublicStoreReason).
func storeReason(t testing.TB, api e2eAPI) string {
	t.Helper()
	_, reason := healthReason(t, api.base, api.token)
	return reason
}

// heartbeat posts one heartbeat as host h to broker i, with its agent's
// credential and the sessions its agent reports (its sessions file), and
// returns the status.
func (w *outageWorld) heartbeat(i int, h *outageHost) int {
	w.t.Helper()
	data, err := os.ReadFile(filepath.Join(h.stateDir, "credential.json"))
	if err != nil {
		w.t.Fatal(err)
	}
	var cred struct {
		Credential string `json:"credential"`
	}
	if err := json.Unmarshal(data, &cred); err != nil {
		w.t.Fatal(err)
	}
	hb := vdibroker.HeartbeatRequest{Sessions: []vdibroker.AgentSession{}}
	if data, err = os.ReadFile(h.file); err != nil {
		w.t.Fatal(err)
	}
	if err := json.Unmarshal(data, &hb.Sessions); err != nil {
		w.t.Fatalf("%s: %v", h.file, err)
	}
	body, _ := json.Marshal(hb)
	req, _ := http.NewRequest("POST", w.brokers[i].api.base+"/api/v1/agent/heartbeat", bytes.NewReader(body))
	req.Header.Set("Authorization", "Bearer "+cred.Credential)
	req.Header.Set("Content-Type", "application/json")
	res, err := outageClient.Do(req)
	if err != nil {
		w.t.Fatalf("heartbeat of %s: %v", h.name, err)
	}
	res.Body.Close()
	return res.StatusCode
}

// restart stops broker i with SIGTERM, which it must obey within bound and
// with exit status 0, runs between (the broker is down), and starts it
// again with the same flags, data directory and address, so the agents
// find it where it was.
func (w *outageWorld) restart(i int, bound time.Duration, between func()) {
	w.t.Helper()
	b := w.brokers[i]
	if err := b.proc.cmd.Process.Signal(syscall.SIGTERM); err != nil {
		w.t.Fatal(err)
	}
	select {
	case <-b.proc.done:
	case <-time.After(bound):
		w.t.Fatalf("broker %d did not exit within %v of SIGTERM; output:\n%s", i, bound, b.proc.stderr.String())
	}
	if code := b.proc.cmd.ProcessState.ExitCode(); code != 0 {
		w.t.Errorf("broker %d exited with status %d on SIGTERM, want 0; output:\n%s", i, code, b.proc.stderr.String())
	}
	between()
	u, err := url.Parse(b.api.base)
	if err != nil {
		w.t.Fatal(err)
	}
	p, base := e2eServeAt(w.t, w.bin, b.dataDir, outageAdmin, u.Host, b.args...)
	if base != b.api.base {
		w.t.Fatalf("broker %d restarted on %s, was %s", i, base, b.api.base)
	}
	b.proc = p
}

// testOutageReadOnlyDiskE2E (R-OUT1): one broker on SQLite whose
// data directory's file system fails under it (internal/faildisk) with
// sessions open and acknowledged. /healthz says 503 and names the
// read-only disk (?live stays 200), reconnects of known users are
// answered on their host with reconnect: true, a new user is refused with
// 503 StoreUnavailable and Retry-After within the store timeout, and the
// hosts' heartbeats are still answered.
//
// Recovery here needs a restart, unlike the full disk (testOutageDiskFullE2E,
// which recovers by itself once there is room): the kernel does not let an
// ext4 that went emergency read-only back read-write while it is mounted
// (`mount -o remount,rw` is refused), so an administrator stops the broker,
// unmounts, runs e2fsck and mounts again. The broker must obey SIGTERM
// promptly on the failed disk and exit cleanly; started again on the same
// data directory, every session acknowledged before the failure is there
// and open, and the hosts' counts are exact: every commit it answered was
// fsynced (R-D2), so the journal the kernel stopped still holds it.
func testOutageReadOnlyDiskE2E(t *testing.T, bin string) {
	disk := faildisk.New(t)
	w := startOutageWorld(t, bin, "", []string{filepath.Join(disk.Dir, "broker")}, 2)
	w.place(4)
	// The last session before the failure is acknowledged but its user has
	// not logged on yet: Pending, known to the broker only from its commit.
	last := w.connect(0, "last-before-failure")
	if last.Status != http.StatusCreated {
		t.Fatalf("connect just before the failure: %d %+v", last.Status, last.Error)
	}
	w.placed["last-before-failure"] = last
	disk.Fail()
	// The first request after the failure is a new user's, so the broker
	// learns of it from a commit that fails (not from its probe): refused
	// cleanly all the same, never a 500.
	if a := w.connect(0, "first-after-failure"); a.Status != http.StatusServiceUnavailable || a.Error == nil || a.Error.Code != vdibroker.EStoreUnavailable || a.RetryAfter == "" {
		t.Errorf("new user just after the failure: %d %+v Retry-After %q, want 503 StoreUnavailable with Retry-After", a.Status, a.Error, a.RetryAfter)
	} else if a.Took > outageStoreTimeout {
		t.Errorf("new user just after the failure refused after %v, want within the store timeout %v", a.Took, outageStoreTimeout)
	}
	w.duringOutage(true)
	if reason := storeReason(t, w.brokers[0].api); !strings.Contains(reason, "read-only") && !strings.Contains(reason, "readonly") {
		t.Errorf("/healthz reason %q, want the read-only disk named", reason)
	}
	for _, h := range w.hosts {
		if got := w.heartbeat(0, h); got != http.StatusOK {
			t.Errorf("heartbeat of %s during the outage: %d, want 200 (held in memory)", h.name, got)
		}
		if log := h.agent.stderr.String(); strings.Contains(log, "rejected the heartbeat") {
			t.Errorf("agent of %s had a heartbeat rejected during the outage:\n%s", h.name, log)
		}
	}
	// The agents' own heartbeats are answered too: two of each (one a
	// second), so the outage also spans several maintenance ticks
	// (500 ms), which must not log an error each: the outage is logged
	// once, when it begins.
	const outageLine = "store unavailable: brokering from memory"
	e2eEventually(t, "two heartbeats of each agent answered during the outage", 30*time.Second, func() bool {
		n := 0
		for _, l := range linesAfter(w.brokers[0].proc.stderr.String(), outageLine) {
			if strings.Contains(l, "path=/api/v1/agent/heartbeat") {
				if !strings.Contains(l, "status=200") {
					t.Fatalf("a heartbeat refused during the outage: %s", l)
				}
				n++
			}
		}
		return n >= 3*len(w.hosts) // the agents' two each and the test's one
	})
	for _, l := range linesAfter(w.brokers[0].proc.stderr.String(), outageLine) {
		if strings.Contains(l, "level=ERROR") {
			t.Errorf("logged during the outage, after the outage itself: %s", l)
		}
	}
	w.restart(0, 30*time.Second, disk.Repair)
	w.logOn() // the last user logs on now; every session turns Active
	w.afterRecovery()
	if a := w.connect(0, "after-disk"); a.Status != http.StatusCreated {
		t.Errorf("new user after the disk was repaired: %d %+v", a.Status, a.Error)
	}
}

// linesAfter returns the lines of log after the first that holds mark
// (none when none does).
func linesAfter(log, mark string) []string {
	i := strings.Index(log, mark)
	if i < 0 {
		return nil
	}
	_, rest, _ := strings.Cut(log[i:], "\n")
	return strings.Split(strings.TrimRight(rest, "\n"), "\n")
}
