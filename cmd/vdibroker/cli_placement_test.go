package main

import (
	"strings"
	"testing"
	"time"

	"github.com/vdibroker/vdibroker/placement"
)

// TestExplainWords checks the decision record of R-C7 in words, one case
// per way a host is chosen or excluded.
func TestExplainWords(t *testing.T) {
	at := time.Date(2026, 11, 29, 13, 40, 0, 0, time.UTC)
	tests := []struct {
		name string
		rec  placement.Explain
		want string
	}{
		{
			name: "LoadIndex bucket 1 round robin, drained host excluded",
			rec: placement.Explain{
				Pool: "contosohp01", User: "alice", Algorithm: "LoadIndex", Time: at,
				Candidates: []placement.Candidate{
					{Host: "sh-03", Sessions: 1, LoadIndex: 5, Bucket: 1},
					{Host: "sh-04", Sessions: 2, Connecting: 1, LoadIndex: 10, Bucket: 1},
				},
				Excluded: []placement.Exclusion{{Host: "sh-07", Reason: placement.ReasonDrained, Detail: "allowNewSession is false"}},
				Chosen:   "sh-03", Bucket: 1, Rank: 1, RoundRobinAfter: "sh-02",
			},
			want: "Placement of alice in host pool contosohp01 (LoadIndex), 2026-11-29T13:40:00Z\n" +
				"Candidates:\n" +
				"  sh-03  1 session, 0 connecting, load index 5, bucket 1\n" +
				"  sh-04  2 sessions, 1 connecting, load index 10, bucket 1\n" +
				"Excluded:\n" +
				"  sh-07 excluded: drain mode (allowNewSession is false)\n" +
				"Decision:\n" +
				"  chosen sh-03: bucket 1, round robin after sh-02, rank 1\n",
		},
		{
			// Five candidates: the draw is among the first ceil(5/2) = 3 (R-BF2).
			name: "BreadthFirst random draw",
			rec: placement.Explain{
				Pool: "p", User: "bob", Algorithm: "BreadthFirst",
				Candidates: []placement.Candidate{{Host: "a"}, {Host: "b"}, {Host: "c"}, {Host: "d"}, {Host: "e"}},
				Excluded:   []placement.Exclusion{{Host: "z", Reason: placement.ReasonAtLimit, Detail: "10 sessions, maxSessionLimit 10"}},
				Chosen:     "c", Rank: 3, Draw: &placement.Draw{Of: 3, Value: 2},
			},
			want: "Placement of bob in host pool p (BreadthFirst)\n" +
				"Candidates:\n" +
				"  a  0 sessions, 0 connecting, load index 0\n" +
				"  b  0 sessions, 0 connecting, load index 0\n" +
				"  c  0 sessions, 0 connecting, load index 0\n" +
				"  d  0 sessions, 0 connecting, load index 0\n" +
				"  e  0 sessions, 0 connecting, load index 0\n" +
				"Excluded:\n" +
				"  z excluded: at maxSessionLimit (10 sessions, maxSessionLimit 10)\n" +
				"Decision:\n" +
				"  chosen c: random draw 2 of 3 (0-based) among the least loaded half, rank 3\n",
		},
		{
			name: "DepthFirst",
			rec: placement.Explain{
				Pool: "p", User: "u", Algorithm: "DepthFirst",
				Candidates: []placement.Candidate{{Host: "sh-1", Sessions: 9}, {Host: "sh-2", Sessions: 3}},
				Chosen:     "sh-1", Rank: 1,
			},
			want: "  chosen sh-1: most sessions, first in query order on a tie, rank 1\n",
		},
		{
			name: "LoadIndex bucket 2 with raised threshold",
			rec: placement.Explain{
				Pool: "p", User: "u", Algorithm: "LoadIndex",
				Candidates: []placement.Candidate{{Host: "sh-9", LoadIndex: 40, Bucket: 2}},
				Chosen:     "sh-9", Rank: 1, Bucket: 2, RaisedThreshold: 41,
			},
			want: "  chosen sh-9: bucket 2, lowest load index\n" +
				"  load index threshold raised to 41 for this decision (too few hosts in bucket 1)\n",
		},
		{
			// The record lists the first hosts only; the counts say how many.
			name: "long lists",
			rec: placement.Explain{
				Pool: "p", User: "u", Algorithm: "DepthFirst",
				Candidates:     []placement.Candidate{{Host: "a", Sessions: 3}},
				CandidateCount: 40,
				Excluded:       []placement.Exclusion{{Host: "x", Reason: placement.ReasonDrained}},
				ExcludedCounts: map[string]int{placement.ReasonDrained: 5, placement.ReasonAtLimit: 7},
				Chosen:         "a", Rank: 1,
			},
			want: "Placement of u in host pool p (DepthFirst)\n" +
				"Candidates (first 1 of 40):\n" +
				"  a  3 sessions, 0 connecting, load index 0\n" +
				"Excluded (first 1 of 12: 7 at maxSessionLimit, 5 drain mode):\n" +
				"  x excluded: drain mode\n" +
				"Decision:\n" +
				"  chosen a: most sessions, first in query order on a tie\n",
		},
		{
			name: "reconnect",
			rec: placement.Explain{
				Pool: "p", User: "u", Algorithm: "BreadthFirst", Reconnect: true, Chosen: "sh-2",
				Note: "existing Active session s-1",
			},
			want: "Decision:\n  reconnect to the user's existing session on sh-2\n  note: existing Active session s-1\n",
		},
		{
			name: "no capacity",
			rec: placement.Explain{
				Pool: "p", User: "u", Algorithm: "DepthFirst",
				Excluded: []placement.Exclusion{
					{Host: "sh-1", Reason: placement.ReasonUnavailable, Detail: "no heartbeat yet"},
					{Host: "sh-2", Reason: placement.ReasonAssignedToOthers, Detail: "assigned to another user"},
				},
				NoCapacityReason: "all hosts unavailable",
			},
			want: "Excluded:\n" +
				"  sh-1 excluded: unavailable (no heartbeat yet)\n" +
				"  sh-2 excluded: assigned to another user\n" +
				"Decision:\n" +
				"  no host can take the session: all hosts unavailable\n",
		},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			var b strings.Builder
			if err := writeExplain(&b, &tt.rec); err != nil {
				t.Fatal(err)
			}
			got := b.String()
			// Full text for the first cases, the tail for the shorter ones.
			if !strings.HasSuffix(got, tt.want) || (strings.HasPrefix(tt.want, "Placement") && got != tt.want) {
				t.Errorf("got:\n%s\nwant (suffix):\n%s", got, tt.want)
			}
		})
	}
}
