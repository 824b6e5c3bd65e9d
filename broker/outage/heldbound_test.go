package outage

import (
	"encoding/json"
	"fmt"
	"runtime"
	"strings"
	"testing"
	"time"

	"github.com/vdibroker/vdibroker"
	"github.com/vdibroker/vdibroker/broker/poolview"
)

// heartbeatOf returns a heartbeat of n sessions of users padded to size
// bytes and results command results, decoded from JSON as the server
// decodes an agent's (the decoder's slices and strings, not a literal's).
func heartbeatOf(tb testing.TB, prefix string, n, size, results int) *vdibroker.HeartbeatRequest {
	tb.Helper()
	hb := vdibroker.HeartbeatRequest{Sessions: sessionsOf(prefix, n, size)}
	logon := time.Date(2026, 12, 1, 8, 0, 0, 0, time.UTC)
	for i := range hb.Sessions {
		hb.Sessions[i].LogonTime = &logon
	}
	for i := range results {
		hb.Results = append(hb.Results, vdibroker.CommandResult{ID: fmt.Sprint(prefix, "c", i), Success: true, Message: strings.Repeat("m", size)})
	}
	b, err := json.Marshal(hb)
	if err != nil {
		tb.Fatal(err)
	}
	var out vdibroker.HeartbeatRequest
	if err := json.Unmarshal(b, &out); err != nil {
		tb.Fatal(err)
	}
	out.CredentialHash = strings.Repeat("h", 64)
	return &out
}

// TestHeldBound (R-SEC, R-OUT1): every host's credential has a heartbeat
// held at every heartbeat during an outage, and a registration token
// with maxHosts 0 registers any number of hosts. All hosts' held
// heartbeats hold at most the bound: a heartbeat past it is not held
// (said once a sweepEvery), the host's earlier one stays as it was, a
// smaller one of a held host replaces its own, a heartbeat taken or
// forgotten gives its bytes back, and one given back by a write that
// failed is kept past the bound (its results are nowhere else).
func TestHeldBound(t *testing.T) {
	t0 := time.Date(2026, 12, 1, 9, 0, 0, 0, time.UTC)
	k := func(i int) hostKey { return hostKey{"p", fmt.Sprint("h", i)} }
	one := heldBytes(k(0), heartbeatOf(t, "u", 100, 100, 0))
	hh := heldHeartbeats{max: 3*one + one/4} // room for three and a quarter
	for i := range 3 {
		if kept, _ := hh.hold(k(i), heartbeatOf(t, "u", 100, 100, 0), t0, false); !kept {
			t.Fatalf("heartbeat %d not held within the bound", i)
		}
	}
	if hosts, bytes := hh.size(); hosts != 3 || bytes != 3*one {
		t.Fatalf("three held: %d hosts, %d bytes; want 3, %d", hosts, bytes, 3*one)
	}
	kept, warn := hh.hold(k(3), heartbeatOf(t, "v", 100, 100, 0), t0, false)
	if kept || !warn {
		t.Fatalf("a heartbeat past the bound: kept %v, warn %v; want not kept, warned", kept, warn)
	}
	if _, warn := hh.hold(k(3), heartbeatOf(t, "v", 100, 100, 0), t0.Add(time.Second), false); warn {
		t.Error("a second heartbeat past the bound within sweepEvery is warned again")
	}
	if _, warn := hh.hold(k(3), heartbeatOf(t, "v", 100, 100, 0), t0.Add(sweepEvery), false); !warn {
		t.Error("a heartbeat past the bound sweepEvery after the last warned is not warned")
	}
	// h0's larger heartbeat (200 sessions) does not fit: its earlier one
	// stays, sessions and time.
	if kept, _ := hh.hold(k(0), heartbeatOf(t, "w", 200, 100, 0), t0.Add(2*time.Second), false); kept {
		t.Fatal("h0's larger heartbeat held past the bound")
	}
	// A smaller one of h0 replaces its own.
	if kept, _ := hh.hold(k(0), heartbeatOf(t, "w", 50, 100, 0), t0.Add(3*time.Second), false); !kept {
		t.Fatal("h0's smaller heartbeat not held")
	}
	if _, bytes := hh.size(); bytes > hh.bound() {
		t.Errorf("%d bytes held, past the bound %d", bytes, hh.bound())
	}
	// Taken (written when the store is back) gives its bytes back: h3
	// fits; given back by a failed write it is kept past the bound.
	got := hh.take(k(1))
	if got == nil {
		t.Fatal("h1's held heartbeat is gone")
	}
	if kept, _ := hh.hold(k(3), heartbeatOf(t, "v", 100, 100, 0), t0.Add(4*time.Second), false); !kept {
		t.Error("h3 not held after h1's was taken")
	}
	if kept, _ := hh.hold(k(1), got.hb, got.at, true); !kept {
		t.Error("h1's heartbeat given back by a failed write is not kept")
	}
	hh.forget(func(hostKey) bool { return true })
	if hosts, bytes := hh.size(); hosts != 0 || bytes != 0 {
		t.Errorf("all forgotten: %d hosts, %d bytes; want none", hosts, bytes)
	}
}

// TestHoldHeartbeatPastTheBound (R-OUT1, R-SEC): past the bound a
// heartbeat without command results is answered as during an outage (its
// host is alive), one with results is refused StoreUnavailable with a
// Retry-After, so the agent keeps its results and sends them again.
func TestHoldHeartbeatPastTheBound(t *testing.T) {
	t0 := time.Date(2026, 12, 1, 9, 0, 0, 0, time.UTC)
	m := New(Config{Views: poolview.New(poolview.Config{})})
	full := heartbeatOf(t, "u", 10, 10, 0)
	m.held.max = heldBytes(hostKey{"p", "h0"}, full)
	h := func(name string) *vdibroker.SessionHost { return &vdibroker.SessionHost{HostPool: "p", Name: name} }
	if _, err := m.HoldHeartbeat(h("h0"), full, t0, nil); err != nil {
		t.Fatalf("within the bound: %v", err)
	}
	res, err := m.HoldHeartbeat(h("h1"), heartbeatOf(t, "v", 10, 10, 0), t0, nil)
	if err != nil || res == nil {
		t.Errorf("past the bound without results: %+v, %v; want answered", res, err)
	}
	_, err = m.HoldHeartbeat(h("h1"), heartbeatOf(t, "v", 10, 10, 1), t0, nil)
	if !IsStoreDown(err) || vdibroker.ErrorRetryAfter(err) <= 0 {
		t.Errorf("past the bound with results: %v (retry after %s); want StoreUnavailable with a Retry-After", err, vdibroker.ErrorRetryAfter(err))
	}
	if st := m.State(); st.HeldHosts != 1 || st.HeldBytes != m.held.max {
		t.Errorf("held %+v, want h0's alone", st)
	}
}

// TestHeldBytesMeasured: heldBytes counts at least what held heartbeats
// hold in memory (heap measured after a collection), decoded as the
// server decodes them, for short and long strings, with and without
// results.
func TestHeldBytesMeasured(t *testing.T) {
	if testing.Short() {
		t.Skip("measures the heap")
	}
	t0 := time.Date(2026, 12, 1, 9, 0, 0, 0, time.UTC)
	for _, tc := range []struct{ sessions, size, results int }{
		{2000, 8, 0}, {2000, 200, 0}, {50, 20, 0}, {1, 8, 200}, {129, 30, 200}, {0, 0, 0},
	} {
		t.Run(fmt.Sprint(tc), func(t *testing.T) {
			const hosts = 20
			hbs := make([]*vdibroker.HeartbeatRequest, hosts)
			for h := range hbs {
				hbs[h] = heartbeatOf(t, fmt.Sprint(h, "u"), tc.sessions, tc.size, tc.results)
			}
			var hh heldHeartbeats
			var a, b runtime.MemStats
			runtime.GC()
			runtime.ReadMemStats(&a)
			for h, hb := range hbs {
				hh.hold(hostKey{"p", fmt.Sprint("h", h)}, hb, t0, false)
			}
			hbs = nil // only hh holds them now
			runtime.GC()
			runtime.ReadMemStats(&b)
			_, counted := hh.size()
			// The heartbeats were made before a: count them in.
			var c runtime.MemStats
			hh.forget(func(hostKey) bool { return true })
			runtime.GC()
			runtime.ReadMemStats(&c)
			held := int64(b.HeapAlloc) - int64(c.HeapAlloc)
			t.Logf("%d hosts of %+v: %d bytes held, %d counted", hosts, tc, held, counted)
			if held > int64(counted) {
				t.Errorf("the held heartbeats hold %d bytes, heldBytes counts %d", held, counted)
			}
			runtime.KeepAlive(&hh)
			_ = a
		})
	}
}

// TestMaxHeldBytesBoundsTheLargestHeartbeats (R-SEC): the largest
// heartbeat one host's credential can make this broker hold during an
// outage, 2,000 sessions of 256-byte ids and users and 1,000 results of
// 256-byte ids and 512-byte messages, counts some 2.1 MB; the bound
// holds over a hundred of them, and a pod of 10,000 hosts of 50
// sessions (ids of 36 bytes, users of 20) fits twice over.
func TestMaxHeldBytesBoundsTheLargestHeartbeats(t *testing.T) {
	hb := &vdibroker.HeartbeatRequest{Sessions: make([]vdibroker.AgentSession, 2000), Results: make([]vdibroker.CommandResult, maxHeldResults)}
	for i := range hb.Sessions {
		hb.Sessions[i] = vdibroker.AgentSession{ID: strings.Repeat("i", 256), User: strings.Repeat("u", 256), State: vdibroker.StateDisconnected}
	}
	for i := range hb.Results {
		hb.Results[i] = vdibroker.CommandResult{ID: strings.Repeat("c", 256), Message: strings.Repeat("m", 512)}
	}
	largest := heldBytes(hostKey{"p", "h"}, hb)
	if n := maxHeldBytes / largest; n < 100 || n > 200 {
		t.Errorf("the bound holds %d of the largest heartbeats (%d bytes), want 100..200", n, largest)
	}
	typical := &vdibroker.HeartbeatRequest{Sessions: make([]vdibroker.AgentSession, 50)}
	for i := range typical.Sessions {
		typical.Sessions[i] = vdibroker.AgentSession{ID: strings.Repeat("i", 36), User: strings.Repeat("u", 20), State: vdibroker.StateActive}
	}
	pod := 10_000 * heldBytes(hostKey{"pool-name", "host-name-001"}, typical)
	if 2*pod > maxHeldBytes {
		t.Errorf("a pod of 10,000 hosts of 50 sessions holds %d bytes, over half the bound %d", pod, maxHeldBytes)
	}
	t.Logf("largest %d bytes, a pod of 10,000 typical hosts %d", largest, pod)
}
