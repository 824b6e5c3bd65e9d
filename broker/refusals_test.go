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

// TestPrincipalRefusalBudget_RSEC: the refusals of callers with a valid
// API credential are counted per principal. Worked numbers, with
// PrincipalRefusalsPerWindow 20:
//   - token A is refused 25 times (from two addresses): 20 written whole,
//     5 counted; token B, refused 3 times after A's flood, has all 3
//     written (A spends only its own budget);
//   - when the window closes: one summary, A's, "5 more refused requests
//     of token A"; none for B, whose refusals were all written;
//   - a new window writes A's refusals whole again;
//   - 5,000 principals refused twice each: 4,096 keys, every key's second
//     refusal written whole too (budget 20), the rest one count; the
//     window closes with one summary, the other credentials' 904 × 2.
func TestPrincipalRefusalBudget_RSEC(t *testing.T) {
	t0 := time.Date(2026, 12, 5, 9, 0, 0, 0, time.UTC)
	entry := func(id, addr string) *vdibroker.AuditEntry {
		return &vdibroker.AuditEntry{RemoteAddr: addr, Principal: vdibroker.AuditPrincipal{Kind: vdibroker.PrincipalToken, ID: id, Role: "User"},
			Action: "hostpool.update", Target: "hostpools/p", Error: "PermissionDenied: a User token"}
	}
	r := refusals{byPrincipal: true}
	written := map[string]int{}
	add := func(e *vdibroker.AuditEntry, at time.Time) {
		t.Helper()
		sums, write := r.add(e, at)
		if len(sums) > 0 {
			t.Fatalf("summaries within the window: %d", len(sums))
		}
		if write {
			written[e.Principal.ID]++
		}
	}
	for i := range 25 {
		add(entry("A", fmt.Sprintf("10.0.0.%d", i%2)), t0.Add(time.Duration(i)*time.Second))
	}
	for range 3 {
		add(entry("B", "10.0.0.9"), t0.Add(time.Minute))
	}
	if written["A"] != vdibroker.PrincipalRefusalsPerWindow || written["B"] != 3 {
		t.Errorf("written whole: A %d, B %d; want %d and 3", written["A"], written["B"], vdibroker.PrincipalRefusalsPerWindow)
	}
	sums := r.roll(t0.Add(vdibroker.RefusalWindow), false)
	if len(sums) != 1 {
		t.Fatalf("%d summaries, want 1 (A's): %+v", len(sums), sums)
	}
	s := sums[0]
	if s.Action != vdibroker.RefusalSummaryAction || s.Principal.ID != "A" || s.Principal.Kind != vdibroker.PrincipalToken ||
		!strings.HasPrefix(s.Error, "5 more refused requests of token A (the last from 10.0.0.0)") {
		t.Errorf("A's summary: %+v", s)
	}
	if _, write := r.add(entry("A", "10.0.0.1"), t0.Add(vdibroker.RefusalWindow+time.Second)); !write {
		t.Error("A's first refusal of a new window was not written")
	}

	many := refusals{byPrincipal: true}
	whole := 0
	for round := range 2 {
		for p := range 5000 {
			if _, write := many.add(entry(fmt.Sprintf("tok-%d", p), "10.0.0.1"), t0.Add(time.Duration(round)*time.Second)); write {
				whole++
			}
		}
	}
	if len(many.keys) != maxRefusalKeys || whole != 2*maxRefusalKeys || many.others.counted != 2*(5000-maxRefusalKeys) {
		t.Errorf("%d keys, %d written whole, %d others; want %d, %d, %d", len(many.keys), whole, many.others.counted,
			maxRefusalKeys, 2*maxRefusalKeys, 2*(5000-maxRefusalKeys))
	}
	sums = many.roll(t0.Add(vdibroker.RefusalWindow), false)
	if len(sums) != 1 || !strings.HasPrefix(sums[0].Error, fmt.Sprintf("%d more refused requests of other credentials", 2*(5000-maxRefusalKeys))) ||
		sums[0].Principal.Kind != vdibroker.PrincipalAnonymous {
		t.Errorf("summaries of the flood: %+v", sums)
	}

	// More principals past their budget than an address's summaries
	// take (RefusalsPerWindow): each still has its own summary, naming
	// its credential to revoke, none folded into "other credentials".
	past := refusals{byPrincipal: true}
	const n = vdibroker.RefusalsPerWindow + 5
	for p := range n {
		for range vdibroker.PrincipalRefusalsPerWindow + 1 {
			past.add(entry(fmt.Sprintf("tok-%d", p), "10.0.0.1"), t0)
		}
	}
	sums = past.roll(t0.Add(vdibroker.RefusalWindow), false)
	ids := map[string]bool{}
	for _, s := range sums {
		if strings.HasPrefix(s.Error, "1 more refused requests of token ") {
			ids[s.Principal.ID] = true
		}
	}
	if len(sums) != n || len(ids) != n {
		t.Errorf("%d principals one refusal past the budget: %d summaries of %d credentials, want %d of each", n, len(sums), len(ids), n)
	}
}

// TestPodRefusalSummaryNamesNoUser_RSEC: a peer pod's calls are refused
// under the pod's budget (principal kind pod, its name the user each is
// for); past it, the window's summary is the pod's and names no user when
// they were for several: it named the last one's, and a helpdesk reading
// a user's trail found the others' refusals under it. Calls for one user
// keep her name.
func TestPodRefusalSummaryNamesNoUser_RSEC(t *testing.T) {
	t0 := time.Date(2026, 12, 6, 9, 0, 0, 0, time.UTC)
	entry := func(user string) *vdibroker.AuditEntry {
		return &vdibroker.AuditEntry{RemoteAddr: "10.0.0.1", Principal: vdibroker.AuditPrincipal{Kind: vdibroker.PrincipalPod, ID: "fra1", Name: user},
			Action: "usersession.logoff", Target: "hostpools/p/usersessions/x", Error: "Conflict: the session has ended"}
	}
	for _, tt := range []struct {
		users []string
		name  string
	}{{[]string{"alice", "bob"}, ""}, {[]string{"alice", "alice"}, "alice"}} {
		// RecordRefusal counts a pod's refusals by address, as it holds
		// no API credential: the summary there named the last user too.
		if (vdibroker.AuditPrincipal{Kind: vdibroker.PrincipalPod}).HoldsAPICredential() {
			t.Fatal("a pod holds an API credential: its refusals are counted per principal")
		}
		for _, byPrincipal := range []bool{false, true} {
			r := refusals{byPrincipal: byPrincipal}
			for i := range vdibroker.PrincipalRefusalsPerWindow + 6 {
				r.add(entry(tt.users[i%2]), t0)
			}
			sums := r.roll(t0.Add(vdibroker.RefusalWindow), false)
			if len(sums) != 1 || sums[0].Principal.ID != "fra1" || sums[0].Principal.Name != tt.name {
				t.Fatalf("refusals for %v (byPrincipal %v): summaries %+v, want one of pod fra1 naming %q", tt.users, byPrincipal, sums, tt.name)
			}
			if tt.name == "" && !strings.Contains(sums[0].Error, "for several users") {
				t.Errorf("the summary of several users' refusals (byPrincipal %v) says %q", byPrincipal, sums[0].Error)
			}
		}
	}
}
