package main

import (
	"bytes"
	"encoding/json"
	"github.com/vdibroker/vdibroker/federation"
	"io"
	"strings"
	"testing"
	"time"

	"github.com/vdibroker/vdibroker/internal/cputime"
)

// TestBenchFederation runs bench federation at its smallest (pods of 2
// and 5, a few sessions and connects) and checks the report: each size's
// connects all answered, and the pod-to-pod calls counted as the global
// connect makes them. With 2 pods, R-G1 asks every other pod in scope
// (AllSites) for the user's sessions, at most one call per global
// connect (concurrent ones share calls). With 5, the pods keep a session
// directory (serve runs its passes): each global connect looks the user
// up at their directory pod (a call unless it is the entry pod), and no
// pod is asked for sessions, every pod's whole list being at its
// directory pods before the connects. Not how fast anything is.
func TestBenchFederation(t *testing.T) {
	var out bytes.Buffer
	opt := benchFederationOptions{pods: []int{2, 5}, sites: 15, sessions: 50, hostsPerPod: 2, connects: 12, rounds: 1,
		concurrency: 3, rate: 200, pacedConnects: 6, podTimeout: 5 * time.Second, output: "json"}
	if err := runBenchFederation(t.Context(), opt, &out, io.Discard); err != nil {
		t.Fatal(err)
	}
	var sizes []FederationSize
	if err := json.Unmarshal(out.Bytes(), &sizes); err != nil {
		t.Fatalf("%v:\n%s", err, out.String())
	}
	if len(sizes) != 2 {
		t.Fatalf("%d sizes reported, want 2:\n%s", len(sizes), out.String())
	}
	for i, s := range sizes {
		want := opt.pods[i]
		if s.Pods != want || s.Sites != want || s.Sessions != 10*want {
			t.Errorf("size %d: pods %d sites %d sessions %d; want %d, %d, %d", i, s.Pods, s.Sites, s.Sessions, want, want, 10*want)
		}
		if s.Local.Connects != 12 || s.Global.Connects != 12 || s.Local.Errors+s.Global.Errors != 0 {
			t.Errorf("%d pods: connects %+v %+v; want 12 each, no errors", want, s.Local, s.Global)
		}
		switch got := s.CallsPerConnect["sessions"]; {
		case want < federation.DirectoryMinPods && (got <= 0 || got > float64(want-1)):
			// Each other pod is asked about every user; concurrent
			// connects' look-ups share calls, so at most one call per
			// pod each.
			t.Errorf("%d pods: %.2f sessions calls per global connect, want more than 0 and at most %d (every other pod, R-G1)", want, got, want-1)
		case want >= federation.DirectoryMinPods && (got != 0 || s.CallsPerConnect["lookup"] < 0.5 || s.Directory <= 0):
			t.Errorf("%d pods: calls per global connect %v, whole lists in %s; want no sessions call, a look-up at most connects, the lists' time measured", want, s.CallsPerConnect, s.Directory)
		}
		// Paced rounds (--rate): their own connects, each measured.
		if l, g := s.PacedLocal, s.PacedGlobal; l == nil || g == nil || l.Connects != 6 || g.Connects != 6 || l.Errors+g.Errors != 0 || l.P50 <= 0 || g.P99 <= 0 {
			t.Errorf("%d pods: paced pool %+v, paced global %+v; want 6 connects each, no errors, latencies measured", want, l, g)
		}
		if s.BytesPerConnect <= 0 || s.Global.P50 <= 0 || s.Local.P99 <= 0 {
			t.Errorf("%d pods: bytes %.0f, global p50 %s, pool p99 %s: want them measured", want, s.BytesPerConnect, s.Global.P50, s.Local.P99)
		}
		// Each phase's CPU is its own (a global connect asks the other
		// pods too), and no connect is free (where the process's CPU time
		// can be read).
		if cputime.Process() > 0 && s.Local.CPU <= 0 || s.Global.CPU <= 0 || s.Local.CPU > time.Second || s.Global.CPU > time.Second {
			t.Errorf("%d pods: CPU per pool connect %s, per global connect %s; want each measured, under a second", want, s.Local.CPU, s.Global.CPU)
		}
	}
	var table bytes.Buffer
	writeFederationTable(&table, sizes, opt)
	if !strings.Contains(table.String(), "at 5 pods, paced at 200/s: ") {
		t.Errorf("the table has no verdict for the paced rounds:\n%s", table.String())
	}
}
