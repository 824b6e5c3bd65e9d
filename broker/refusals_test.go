package broker

import (
	"fmt"
	"strings"
	"testing"
	"time"

	"github.com/vdibroker/vdibroker"
)

// TestRefusalBudget_RSEC: the bounded refusal audit. Worked numbers, with
// RefusalsPerWindow 20 and maxRefusalKeys 4096:
//   - 30 addresses refuse 3 times each in one window: the first of each of
//     the first 20 addresses is written (20), the other 70 are counted;
//   - when the window closes: 20 summaries (the first 20 keys that were
//     counted; map order) and one for the other addresses, whose count is
//     what is left: 90 - 20 written - the summaries' own counts;
//   - 5,000 addresses in one window: 4,096 keys, the rest counted as
//     others; no window writes more than 20 + 20 + 1 entries.
func TestRefusalBudget_RSEC(t *testing.T) {
	t0 := time.Date(2026, 12, 2, 9, 0, 0, 0, time.UTC)
	entry := func(addr string) *vdibroker.AuditEntry {
		return &vdibroker.AuditEntry{RemoteAddr: addr, Principal: vdibroker.AuditPrincipal{Kind: vdibroker.PrincipalAnonymous},
			Action: "hostpool.put", Target: "hostpools/p", Error: "Unauthenticated: no token"}
	}
	var r refusals
	written := 0
	for round := range 3 {
		for a := range 30 {
			sums, write := r.add(entry(fmt.Sprintf("10.0.0.%d", a)), t0.Add(time.Duration(round)*time.Second))
			if len(sums) > 0 {
				t.Fatalf("summaries within the window: %d", len(sums))
			}
			if write {
				written++
			}
		}
	}
	if written != vdibroker.RefusalsPerWindow {
		t.Errorf("%d written whole, want %d", written, vdibroker.RefusalsPerWindow)
	}
	// Not yet over: nothing to flush.
	if sums := r.roll(t0.Add(vdibroker.RefusalWindow-time.Second), false); sums != nil {
		t.Errorf("roll before the window's end: %d summaries", len(sums))
	}
	sums := r.roll(t0.Add(vdibroker.RefusalWindow), false)
	if len(sums) != vdibroker.RefusalsPerWindow+1 {
		t.Fatalf("%d summaries, want %d", len(sums), vdibroker.RefusalsPerWindow+1)
	}
	counted := 0
	for i, s := range sums {
		var n int
		if _, err := fmt.Sscanf(s.Error, "%d more refused requests", &n); err != nil {
			t.Fatalf("summary %d: %q", i, s.Error)
		}
		counted += n
		others := i == len(sums)-1
		if s.Action != vdibroker.RefusalSummaryAction || s.Outcome != vdibroker.AuditRefused || (s.RemoteAddr == "") != others {
			t.Errorf("summary %d: %+v", i, s)
		}
		if others && !strings.Contains(s.Error, "from other addresses") {
			t.Errorf("the last summary is not the others': %q", s.Error)
		}
	}
	if counted+written != 90 {
		t.Errorf("summaries count %d and %d were written, want 90 in all", counted, written)
	}
	// The window is new: the first refusal is written again.
	if _, write := r.add(entry("10.0.0.1"), t0.Add(vdibroker.RefusalWindow+time.Second)); !write {
		t.Error("the first refusal of a new window was not written")
	}

	// Past maxRefusalKeys, one count for the rest.
	var big refusals
	for a := range 5000 {
		big.add(entry(fmt.Sprintf("addr-%d", a)), t0)
	}
	if len(big.keys) != maxRefusalKeys || big.others.counted != 5000-maxRefusalKeys {
		t.Errorf("%d keys and %d others, want %d and %d", len(big.keys), big.others.counted, maxRefusalKeys, 5000-maxRefusalKeys)
	}
	if sums := big.roll(t0, true); len(sums) > 2*vdibroker.RefusalsPerWindow+1 {
		t.Errorf("%d summaries, want at most %d", len(sums), 2*vdibroker.RefusalsPerWindow+1)
	}
}
