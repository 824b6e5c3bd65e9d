package placement

import (
	"encoding/json"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"
	"pgregory.net/rapid"
)

// genExplain draws an arbitrary decision record, strings included (any
// Unicode, as host and user names come from outside).
func genExplain(t *rapid.T) Explain {
	str := rapid.String()
	cands := rapid.SliceOfN(rapid.Custom(func(t *rapid.T) Candidate {
		return Candidate{Host: str.Draw(t, "host"), Sessions: rapid.IntRange(0, 999999).Draw(t, "sessions"),
			Connecting: rapid.IntRange(0, 150).Draw(t, "connecting"), LoadIndex: rapid.IntRange(-1, 100).Draw(t, "li"),
			Bucket: rapid.IntRange(0, 3).Draw(t, "bucket")}
	}), 0, 12).Draw(t, "candidates")
	excl := rapid.SliceOfN(rapid.Custom(func(t *rapid.T) Exclusion {
		return Exclusion{Host: str.Draw(t, "host"), Reason: rapid.SampledFrom(reasonOrder).Draw(t, "reason"), Detail: str.Draw(t, "detail")}
	}), 0, 12).Draw(t, "excluded")
	ex := Explain{
		Pool: str.Draw(t, "pool"), User: str.Draw(t, "user"), Algorithm: str.Draw(t, "algorithm"),
		Time:       time.Unix(rapid.Int64Range(0, 1<<33).Draw(t, "sec"), rapid.Int64Range(0, 999999999).Draw(t, "nsec")).UTC(),
		Reconnect:  rapid.Bool().Draw(t, "reconnect"),
		Candidates: cands, CandidateCount: rapid.IntRange(0, 100000).Draw(t, "count"),
		Excluded: excl, Chosen: str.Draw(t, "chosen"),
		Bucket: rapid.IntRange(0, 3).Draw(t, "bucket"), Rank: rapid.IntRange(0, 100000).Draw(t, "rank"),
		RaisedThreshold: rapid.IntRange(0, 101).Draw(t, "raised"), RoundRobinAfter: str.Draw(t, "rr"),
		NoCapacityReason: str.Draw(t, "why"), Note: str.Draw(t, "note"),
	}
	if rapid.Bool().Draw(t, "hasDraw") {
		ex.Draw = &Draw{Of: rapid.IntRange(1, 50000).Draw(t, "of"), Value: rapid.IntRange(0, 49999).Draw(t, "value")}
	}
	if rapid.Bool().Draw(t, "hasCounts") {
		ex.ExcludedCounts = rapid.MapOfN(rapid.SampledFrom(reasonOrder), rapid.IntRange(1, 100000), 1, -1).Draw(t, "counts")
	}
	return ex
}

// TestExplainJSONRoundTrip_RC7: the record the server stores and returns
// decodes to the same value (strings that are valid UTF-8 survive exactly;
// rapid.String draws valid UTF-8).
func TestExplainJSONRoundTrip_RC7(t *testing.T) {
	rapid.Check(t, func(t *rapid.T) {
		ex := genExplain(t)
		b, err := json.Marshal(ex)
		if err != nil {
			t.Fatalf("marshal: %v", err)
		}
		var got Explain
		if err := json.Unmarshal(b, &got); err != nil {
			t.Fatalf("unmarshal %s: %v", b, err)
		}
		if diff := cmp.Diff(ex, got); diff != "" {
			t.Fatalf("round trip (-sent +decoded):\n%s", diff)
		}
	})
}

// TestExplainJSONShape_RC7 pins the field names the API returns.
func TestExplainJSONShape_RC7(t *testing.T) {
	p := New(pooled("BreadthFirst", 5), []Host{liveHost("a", 5), liveHost("b", 1)}, testOptions(1))
	d := mustPlace(t, p, Request{User: "ann"})
	var got map[string]any
	b, _ := json.Marshal(d.Explain)
	if err := json.Unmarshal(b, &got); err != nil {
		t.Fatal(err)
	}
	for _, k := range []string{"hostPool", "user", "algorithm", "time", "candidates", "candidateCount", "excluded", "excludedCounts", "chosen", "rank", "draw"} {
		if _, ok := got[k]; !ok {
			t.Errorf("explain JSON %s lacks %q", b, k)
		}
	}
}
