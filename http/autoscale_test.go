package http_test

import (
	"context"
	"encoding/json"
	"io"
	nethttp "net/http"
	"testing"
	"time"

	"github.com/vdibroker/vdibroker"
	vhttp "github.com/vdibroker/vdibroker/http"
)

func apiToken(t *testing.T, e *env, role, subject string, pools []string) string {
	t.Helper()
	tr, err := e.admin.CreateToken(context.Background(), vhttp.TokenRequest{Role: role, Subject: subject, HostPools: pools})
	if err != nil {
		t.Fatal(err)
	}
	return tr.Secret
}

// TestAutoscaleEvaluationsAPI: GET .../autoscale/evaluations answers the
// pool's records newest first, paged, to a Reader; bad paging is a 400
// naming the field; and read as an attacker: no token 401, a User 403, a
// Reader scoped to another pool 404 (a GET does not say the pool exists,
// as every pool-scoped GET), a host credential 401.
func TestAutoscaleEvaluationsAPI(t *testing.T) {
	e := newEnv(t)
	ctx := context.Background()
	e.pool("as1", nil)
	e.pool("as2", nil)
	hosts := e.addHosts("as1", "as1h", 1)
	t0 := time.Date(2026, 11, 30, 19, 0, 0, 0, time.UTC)
	for i := range 3 {
		if err := e.store.AppendAutoscaleEvaluation(ctx, &vdibroker.AutoscaleEvaluation{
			HostPool: "as1", Time: t0.Add(time.Duration(i) * time.Minute), Plan: "plan", Phase: vdibroker.PhaseRampDown,
			RunningHosts: 3 - i, AvailableCapacity: 30, UsedCapacityPct: 40, ThresholdPct: 90,
			Actions: []vdibroker.AutoscaleAction{{Action: vdibroker.ActionDrain, Host: "as1h001", Reason: "fewest sessions"}},
		}); err != nil {
			t.Fatal(err)
		}
	}
	reader := e.client(0, apiToken(t, e, "Reader", "r", nil))
	got, err := reader.AutoscaleEvaluations(ctx, "as1", 2)
	if err != nil {
		t.Fatal(err)
	}
	if len(got) != 2 || got[0].RunningHosts != 1 || got[1].RunningHosts != 2 || got[0].Actions[0].Reason != "fewest sessions" {
		t.Fatalf("evaluations: %+v", got)
	}
	if other, err := reader.AutoscaleEvaluations(ctx, "as2", 0); err != nil || len(other) != 0 {
		t.Fatalf("as2: %v, %v", other, err)
	}

	get := func(path, token string) (int, map[string]any) {
		t.Helper()
		req, _ := nethttp.NewRequest("GET", e.urls[0]+path, nil)
		if token != "" {
			req.Header.Set("Authorization", "Bearer "+token)
		}
		resp, err := nethttp.DefaultClient.Do(req)
		if err != nil {
			t.Fatal(err)
		}
		defer resp.Body.Close()
		b, _ := io.ReadAll(resp.Body)
		var m map[string]any
		_ = json.Unmarshal(b, &m)
		return resp.StatusCode, m
	}
	path := "/api/v1/hostpools/as1/autoscale/evaluations"
	code, body := get(path+"?limit=1", adminToken)
	if code != 200 || body["nextLink"] == nil {
		t.Fatalf("limit=1: %d %v", code, body)
	}
	code, body = get(body["nextLink"].(string), adminToken)
	if code != 200 || len(body["value"].([]any)) != 1 {
		t.Fatalf("next page: %d %v", code, body)
	}
	for _, tt := range []struct {
		name, path, token string
		status            int
		field             string
	}{
		{"no token", path, "", 401, ""},
		{"User token", path, apiToken(t, e, "User", "alice", nil), 403, ""},
		{"Reader of another pool", path, apiToken(t, e, "Reader", "r2", []string{"as2"}), 404, ""},
		{"host credential", path, e.agents[hosts[0]], 401, ""},
		{"unknown pool", "/api/v1/hostpools/nope/autoscale/evaluations", adminToken, 404, ""},
		{"bad after", path + "?after=x", adminToken, 400, "after"},
		{"bad limit", path + "?limit=0", adminToken, 400, "limit"},
	} {
		t.Run(tt.name, func(t *testing.T) {
			code, body := get(tt.path, tt.token)
			if code != tt.status {
				t.Fatalf("status %d, want %d: %v", code, tt.status, body)
			}
			if tt.field != "" {
				errBody, _ := body["error"].(map[string]any)
				if errBody["field"] != tt.field {
					t.Errorf("error body %v, want field %s", body, tt.field)
				}
			}
		})
	}
}
