package placement

import (
	"flag"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"
)

var update = flag.Bool("update", false, "rewrite the golden files in testdata/")

// TestDescribeGolden_RC7 holds the wording of a decision record, once for
// the CLI and the console (both print what describe.go says): one golden
// file per way a host is chosen or excluded. go test -update rewrites them.
func TestDescribeGolden_RC7(t *testing.T) {
	at := time.Date(2026, 11, 29, 13, 40, 0, 0, time.UTC)
	tests := []struct {
		name string
		rec  Explain
	}{
		{"loadindex_bucket1_round_robin", Explain{
			Pool: "contosohp01", User: "alice", Algorithm: "LoadIndex", Time: at,
			Candidates: []Candidate{
				{Host: "sh-03", Sessions: 1, LoadIndex: 5, Bucket: 1},
				{Host: "sh-04", Sessions: 2, Connecting: 1, LoadIndex: 10, Bucket: 1},
			},
			Excluded: []Exclusion{{Host: "sh-07", Reason: ReasonDrained, Detail: "allowNewSession is false"}},
			Chosen:   "sh-03", Bucket: 1, Rank: 1, RoundRobinAfter: "sh-02",
		}},
		{"loadindex_bucket1_first_host", Explain{
			Pool: "p", User: "u", Algorithm: "LoadIndex",
			Candidates: []Candidate{{Host: "sh-01", Bucket: 1}, {Host: "sh-02", Bucket: 1}},
			Chosen:     "sh-01", Bucket: 1, Rank: 1,
		}},
		{"loadindex_bucket2_raised_threshold", Explain{
			Pool: "p", User: "u", Algorithm: "LoadIndex",
			Candidates: []Candidate{{Host: "sh-9", LoadIndex: 40, Bucket: 2}},
			Excluded:   []Exclusion{{Host: "sh-1", Reason: ReasonHostThreshold, Detail: "loadIndex 90 >= hostLoadIndexThreshold 80"}},
			Chosen:     "sh-9", Rank: 1, Bucket: 2, RaisedThreshold: 41,
		}},
		{
			// Five candidates: the draw is among the first ceil(5/2) = 3 (R-BF2).
			"breadthfirst_random_draw", Explain{
				Pool: "p", User: "bob", Algorithm: "BreadthFirst",
				Candidates: []Candidate{{Host: "a"}, {Host: "b"}, {Host: "c"}, {Host: "d"}, {Host: "e"}},
				Excluded:   []Exclusion{{Host: "z", Reason: ReasonAtLimit, Detail: "10 sessions, maxSessionLimit 10"}},
				Chosen:     "c", Rank: 3, Draw: &Draw{Of: 3, Value: 2},
			}},
		{"depthfirst", Explain{
			Pool: "p", User: "u", Algorithm: "DepthFirst", Time: at,
			Candidates: []Candidate{{Host: "sh-1", Sessions: 9}, {Host: "sh-2", Sessions: 3}},
			Excluded:   []Exclusion{{Host: "sh-3", Reason: ReasonShutdown, Detail: "the agent reported it is shutting down"}},
			Chosen:     "sh-1", Rank: 1,
		}},
		{
			// The record lists the first hosts only; the counts say how many.
			"long_lists", Explain{
				Pool: "p", User: "u", Algorithm: "DepthFirst",
				Candidates:     []Candidate{{Host: "a", Sessions: 3}},
				CandidateCount: 40,
				Excluded:       []Exclusion{{Host: "x", Reason: ReasonDrained}},
				ExcludedCounts: map[string]int{ReasonDrained: 5, ReasonAtLimit: 7},
				Chosen:         "a", Rank: 1,
			}},
		{
			// A gateway reached the host with the broker's token (R-GW2).
			"reached_through_gateway", Explain{
				Pool: "p", User: "u", Algorithm: "BreadthFirst", Time: at,
				Candidates: []Candidate{{Host: "sh-1"}},
				Chosen:     "sh-1", Rank: 1, Draw: &Draw{Of: 1, Value: 0},
				Gateway: &GatewayReach{Name: "rdgw-1", Time: at.Add(9 * time.Second)},
			}},
		{
			// No capacity; the host started for the user, who waits at
			// the gateway (R-GW5).
			"started_on_connect", Explain{
				Pool: "p", User: "u", Algorithm: "BreadthFirst", Time: at,
				Excluded:         []Exclusion{{Host: "sh-1", Reason: ReasonShutdown, Detail: "stopped by its power driver"}},
				NoCapacityReason: "its only session host is shut down",
				Chosen:           "sh-1", StartedOnConnect: true,
			}},
		{"reconnect", Explain{
			Pool: "p", User: "u", Algorithm: "BreadthFirst", Reconnect: true, Chosen: "sh-2",
			Note: "existing Active session s-1",
		}},
		{"no_capacity", Explain{
			Pool: "p", User: "u", Algorithm: "DepthFirst",
			Excluded: []Exclusion{
				{Host: "sh-1", Reason: ReasonUnavailable, Detail: "no heartbeat yet"},
				{Host: "sh-22", Reason: ReasonAssignedToOthers, Detail: "assigned to another user"},
			},
			NoCapacityReason: "its only session host is unavailable (no heartbeat within 1m30s)",
		}},
		{"personal_first_assignment", Explain{
			Pool: "hp-personal", User: "carol", Algorithm: "Persistent",
			Candidates: []Candidate{{Host: "pc-01"}},
			Excluded:   []Exclusion{{Host: "pc-02", Reason: ReasonNotAssigned, Detail: "assigned to dave"}},
			Chosen:     "pc-01", Rank: 1, Note: "first unassigned host in query order, assigned to the user (R-PE1)",
		}},
		{"unknown_reason", Explain{
			Pool: "p", User: "u", Algorithm: "DepthFirst",
			Excluded: []Exclusion{{Host: "sh-1", Reason: "FutureReason", Detail: "a reason this build does not know"}},
		}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			var b strings.Builder
			if err := WriteText(&b, &tt.rec); err != nil {
				t.Fatal(err)
			}
			checkGolden(t, filepath.Join("testdata", "describe", tt.name+".golden"), b.String())
			// The text's decision is Describe's sentences, word for word.
			for _, line := range Describe(&tt.rec) {
				if !strings.Contains(b.String(), "\n  "+line+"\n") {
					t.Errorf("WriteText lacks Describe's %q", line)
				}
			}
		})
	}
}

func checkGolden(tb testing.TB, path, got string) {
	tb.Helper()
	if *update {
		if err := os.MkdirAll(filepath.Dir(path), 0o755); err != nil {
			tb.Fatal(err)
		}
		if err := os.WriteFile(path, []byte(got), 0o644); err != nil {
			tb.Fatal(err)
		}
		return
	}
	want, err := os.ReadFile(path)
	if err != nil {
		tb.Fatalf("read golden file (go test -update creates it): %v", err)
	}
	if diff := cmp.Diff(string(want), got); diff != "" {
		tb.Errorf("%s (-want +got):\n%s", path, diff)
	}
}

// TestReasonTextCoversEveryReason: every reason the engine records has
// words, so no view shows a bare code.
func TestReasonTextCoversEveryReason(t *testing.T) {
	for _, r := range reasonOrder {
		if ReasonText(r) == r {
			t.Errorf("reason %s has no words", r)
		}
	}
	if got, want := ExclusionText(Exclusion{Reason: ReasonAssignedToOthers, Detail: "assigned to another user"}), "assigned to another user (R-PE1)"; got != want {
		t.Errorf("a detail that repeats the words: %q, want %q", got, want)
	}
}
