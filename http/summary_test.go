package http_test

import (
	"context"
	"encoding/json"
	"net/http"
	"testing"
	"time"
)

// TestPoolSummaries: GET /hostpools?summary=true gives each pool's hosts by
// status, drained hosts and open sessions from one read of its hosts (the
// console's overview; it used to list every host of every pool, a page at
// a time).
func TestPoolSummaries(t *testing.T) {
	e := newEnv(t)
	ctx := context.Background()
	e.pool("sumpool", map[string]any{"loadBalancerType": "DepthFirst", "maxSessionLimit": 5})
	hosts := e.addHosts("sumpool", "sum", 3)
	if _, err := e.admin.PatchSessionHost(ctx, "sumpool", hosts[2], map[string]any{"allowNewSession": false}); err != nil {
		t.Fatal(err)
	}
	e.mustConnect("sumpool", "alice")
	e.mustConnect("sumpool", "bob")
	e.clock.Advance(60 * time.Second)
	e.heartbeat(hosts[0]) // the others' heartbeats age past 90 s below
	e.clock.Advance(40 * time.Second)

	status, _, body := rawDo(t, e, "GET", "/api/v1/hostpools?summary=true", adminToken, "")
	if status != http.StatusOK {
		t.Fatalf("GET ?summary=true = %d: %s", status, body)
	}
	var out struct {
		Value []struct {
			Name    string `json:"name"`
			Summary *struct {
				Hosts, Available, Drained, Sessions int
				ByStatus                            map[string]int
			} `json:"summary"`
		} `json:"value"`
	}
	if err := json.Unmarshal(body, &out); err != nil {
		t.Fatal(err)
	}
	if len(out.Value) != 1 || out.Value[0].Summary == nil {
		t.Fatalf("answer %s, want one pool with a summary", body)
	}
	s := out.Value[0].Summary
	// 3 hosts; only the one that sent a heartbeat 40 s ago is Available
	// (R-H1: 90 s); one drained; alice and bob on the first (R-DF2).
	if s.Hosts != 3 || s.Available != 1 || s.Drained != 1 || s.Sessions != 2 || s.ByStatus["Unavailable"] != 2 {
		t.Errorf("summary %+v, want 3 hosts, 1 available, 1 drained, 2 sessions, 2 Unavailable", *s)
	}
	// Without the parameter there is none.
	_, _, plain := rawDo(t, e, "GET", "/api/v1/hostpools", adminToken, "")
	var bare struct {
		Value []map[string]any `json:"value"`
	}
	if err := json.Unmarshal(plain, &bare); err != nil || len(bare.Value) != 1 || bare.Value[0]["summary"] != nil {
		t.Errorf("a plain list carries a summary: %s", plain)
	}
}
