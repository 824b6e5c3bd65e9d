package http_test

import (
	"context"
	"encoding/json"
	"fmt"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/vdibroker/vdibroker"
	vhttp "github.com/vdibroker/vdibroker/http"
)

// planJSON is a valid PUT body of a Pooled scaling plan over pools.
func planJSON(pools ...string) string {
	b, _ := json.Marshal(planBody(pools...))
	return string(b)
}

func planBody(pools ...string) map[string]any {
	return map[string]any{
		"timeZone": "Europe/Berlin", "hostPools": pools,
		"schedules": []map[string]any{{
			"name": "workweek", "daysOfWeek": []string{"Monday", "Tuesday", "Wednesday", "Thursday", "Friday"},
			"rampUpStartTime": "07:00", "rampUpMinimumHostsPct": 20, "rampUpCapacityThresholdPct": 60,
			"peakStartTime": "09:00", "peakMinimumHostsPct": 50,
			"rampDownStartTime": "17:00", "rampDownMinimumHostsPct": 10, "rampDownCapacityThresholdPct": 90,
			"rampDownForceLogoffUsers": true, "rampDownWaitTimeMinutes": 15, "rampDownNotificationMessage": "Log off in 15 minutes.",
			"offPeakStartTime": "19:00",
		}},
	}
}

// TestScalingPlanAPI: PUT creates (201) then replaces (200) keeping
// createTime, with the defaults filled; GET, list and DELETE answer the
// plan; a deleted plan is 404.
func TestScalingPlanAPI(t *testing.T) {
	e := newEnv(t)
	e.pool("office", nil)
	status, _, raw := rawDo(t, e, "PUT", "/api/v1/scalingplans/weekdays", adminToken, planJSON("office"))
	if status != 201 {
		t.Fatalf("create: %d %s", status, raw)
	}
	var first vdibroker.ScalingPlan
	if err := json.Unmarshal(raw, &first); err != nil {
		t.Fatal(err)
	}
	s := first.Schedules[0]
	if first.Name != "weekdays" || first.HostPoolType != "Pooled" || s.RampUpLoadBalancingAlgorithm != "BreadthFirst" ||
		s.RampDownLoadBalancingAlgorithm != "DepthFirst" || s.RampDownStopHostsWhen != "ZeroSessions" || *s.PeakMinimumHostsPct != 50 {
		t.Errorf("created plan lacks its defaults or fields: %s", raw)
	}
	// The answer sent back is a valid PUT body (round trip).
	status, _, raw = rawDo(t, e, "PUT", "/api/v1/scalingplans/weekdays", adminToken, string(raw))
	if status != 200 {
		t.Fatalf("replace with the answer: %d %s", status, raw)
	}
	ctx := context.Background()
	got, err := e.admin.GetScalingPlan(ctx, "weekdays")
	if err != nil {
		t.Fatal(err)
	}
	if !got.CreateTime.Equal(first.CreateTime) || !got.UpdateTime.After(first.UpdateTime) {
		t.Errorf("replace: createTime %v (want %v), updateTime %v (want after %v)", got.CreateTime, first.CreateTime, got.UpdateTime, first.UpdateTime)
	}
	list, err := e.admin.ListScalingPlans(ctx)
	if err != nil || len(list) != 1 || list[0].Name != "weekdays" || strings.Join(list[0].HostPools, ",") != "office" {
		t.Errorf("list: %v %+v", err, list)
	}
	if err := e.admin.DeleteScalingPlan(ctx, "weekdays"); err != nil {
		t.Fatal(err)
	}
	_, err = e.admin.GetScalingPlan(ctx, "weekdays")
	wantCode(t, err, vdibroker.ENotFound)
	wantCode(t, e.admin.DeleteScalingPlan(ctx, "weekdays"), vdibroker.ENotFound)
}

// TestScalingPlanBadInput_RSP1: every refusal is 400 with the §9 body
// naming the field and its range, and stores nothing.
func TestScalingPlanBadInput_RSP1(t *testing.T) {
	e := newEnv(t)
	e.pool("office", nil)
	e.pool("desks", map[string]any{"hostPoolType": "Personal"})
	e.pool("taken", nil)
	if _, err := e.admin.PutScalingPlan(context.Background(), "owner", planBody("taken")); err != nil {
		t.Fatal(err)
	}
	sched := func(k string, v any) string {
		b := planBody("office")
		b["schedules"].([]map[string]any)[0][k] = v
		j, _ := json.Marshal(b)
		return string(j)
	}
	top := func(k string, v any) string {
		b := planBody("office")
		b[k] = v
		j, _ := json.Marshal(b)
		return string(j)
	}
	for _, tc := range []struct {
		name, body   string
		status       int
		field, inMsg string
	}{
		{"threshold 0", sched("rampUpCapacityThresholdPct", 0), 400, "schedules[0].rampUpCapacityThresholdPct", "must be 1..100, got 0"},
		{"min 101", sched("rampDownMinimumHostsPct", 101), 400, "schedules[0].rampDownMinimumHostsPct", "0..100"},
		{"wait 2000", sched("rampDownWaitTimeMinutes", 2000), 400, "schedules[0].rampDownWaitTimeMinutes", "0..1440"},
		{"time 25:00", sched("peakStartTime", "25:00"), 400, "schedules[0].peakStartTime", "00:00..23:59"},
		{"out of order", sched("rampDownStartTime", "08:00"), 400, "schedules[0].rampDownStartTime", "after peakStartTime"},
		{"stop when", sched("rampDownStopHostsWhen", "Sometimes"), 400, "schedules[0].rampDownStopHostsWhen", "ZeroSessions, ZeroActiveSessions"},
		{"unknown schedule field", sched("rampUpCapacity", 5), 400, "schedules[0].rampUpCapacity", ""},
		// encoding/json's type errors carry no index: the shared decoder
		// names the path without it.
		{"wrong type", sched("rampUpMinimumHostsPct", "20"), 400, "schedules.rampUpMinimumHostsPct", "integer"},
		{"unknown top field", top("timeZones", "UTC"), 400, "timeZones", ""},
		{"time zone", top("timeZone", "Europe/Atlantis"), 400, "timeZone", "IANA"},
		{"name mismatch", top("name", "other"), 400, "name", "must match"},
		{"missing pool", top("hostPools", []string{"nope"}), 400, "hostPools", `"nope" does not exist`},
		{"personal pool in pooled plan", top("hostPools", []string{"desks"}), 400, "hostPools", `"desks" is Personal`},
		{"pool of another plan", top("hostPools", []string{"office", "taken"}), 409, "hostPools", `already in scaling plan "owner"`},
	} {
		status, ve, raw := rawDo(t, e, "PUT", "/api/v1/scalingplans/weekdays", adminToken, tc.body)
		if status != tc.status || ve == nil || ve.Field != tc.field || !strings.Contains(ve.Message, tc.inMsg) {
			t.Errorf("%s: %d %s, want %d naming %s with %q", tc.name, status, raw, tc.status, tc.field, tc.inMsg)
		}
	}
	if _, err := e.admin.GetScalingPlan(context.Background(), "weekdays"); vdibroker.ErrorCode(err) != vdibroker.ENotFound {
		t.Errorf("a refused plan was stored: %v", err)
	}
	// Two schedules sharing Friday (R-SP2).
	b := planBody("office")
	s0 := b["schedules"].([]map[string]any)[0]
	s1 := map[string]any{}
	for k, v := range s0 {
		s1[k] = v
	}
	s1["name"], s1["daysOfWeek"] = "friday", []string{"Friday"}
	b["schedules"] = []map[string]any{s0, s1}
	j, _ := json.Marshal(b)
	status, ve, raw := rawDo(t, e, "PUT", "/api/v1/scalingplans/weekdays", adminToken, string(j))
	if status != 400 || ve.Field != "schedules[1].daysOfWeek" || !strings.Contains(ve.Message, "Friday") {
		t.Errorf("overlapping schedules: %d %s", status, raw)
	}
}

// TestScalingPlanAttackers_RSP5: the weakest credentials get nothing: no
// token and a host credential or registration token 401, a User 403, a
// Reader reads but cannot write; a scoped Contributor cannot take a pool
// outside its scope, nor change or delete a plan holding one, and a
// scoped Reader sees only plans touching its pools.
func TestScalingPlanAttackers_RSP5(t *testing.T) {
	w := newScopeWorld(t) // plans plan-pin (pin) and plan-pout (pout)
	e := w.e
	ctx := context.Background()
	if _, err := e.admin.PutScalingPlan(ctx, "plan-pin", planBody("pin")); err != nil {
		t.Fatal(err)
	}
	e.pool("pboth", nil)
	e.pool("pboth2", nil)
	if _, err := e.admin.PutScalingPlan(ctx, "mixed", planBody("pboth")); err != nil {
		t.Fatal(err)
	}
	user := w.token(t, "User", "alice", nil, 0)
	reader := w.token(t, "Reader", "r", nil, 0)
	scopedReader := w.token(t, "Reader", "sr", []string{"pin"}, 0)
	scoped := w.token(t, "Contributor", "pin-ops", []string{"pin", "pboth"}, 0)
	put := planJSON("pin")
	for _, c := range []struct {
		name, token, method, path, body string
		want                            int
	}{
		{"no token list", "", "GET", "/api/v1/scalingplans", "", 401},
		{"no token put", "", "PUT", "/api/v1/scalingplans/x", put, 401},
		{"host credential", w.hostCred, "GET", "/api/v1/scalingplans/plan-pin", "", 401},
		{"host credential put", w.hostCred, "PUT", "/api/v1/scalingplans/plan-pin", put, 401},
		{"registration token", w.regSecret, "GET", "/api/v1/scalingplans", "", 401},
		{"registration token delete", w.regSecret, "DELETE", "/api/v1/scalingplans/plan-pin", "", 401},
		{"User list", user, "GET", "/api/v1/scalingplans", "", 403},
		{"User put", user, "PUT", "/api/v1/scalingplans/plan-pin", put, 403},
		{"Reader get", reader, "GET", "/api/v1/scalingplans/plan-pout", "", 200},
		{"Reader put", reader, "PUT", "/api/v1/scalingplans/plan-pin", put, 403},
		{"Reader delete", reader, "DELETE", "/api/v1/scalingplans/plan-pin", "", 403},
		{"scoped Reader other plan", scopedReader, "GET", "/api/v1/scalingplans/plan-pout", "", 404},
		{"scoped takes pout into its plan", scoped, "PUT", "/api/v1/scalingplans/plan-pin", planJSON("pin", "pout"), 403},
		{"scoped takes pout in a new plan", scoped, "PUT", "/api/v1/scalingplans/grab", planJSON("pout"), 403},
		{"scoped plan of no pool", scoped, "PUT", "/api/v1/scalingplans/empty", planJSON(), 403},
		{"scoped replaces plan-pout", scoped, "PUT", "/api/v1/scalingplans/plan-pout", planJSON("pin"), 403},
		{"scoped deletes plan-pout", scoped, "DELETE", "/api/v1/scalingplans/plan-pout", "", 404},
	} {
		status, ve, raw := rawDo(t, e, c.method, c.path, c.token, c.body)
		if status != c.want {
			t.Errorf("%s: %d %s, want %d", c.name, status, raw, c.want)
		}
		if status >= 400 && (ve == nil || ve.Message == "") {
			t.Errorf("%s: no §9 error body: %s", c.name, raw)
		}
		// A plan the token cannot read is not described to it: the
		// refusal does not name the pools outside its scope.
		if c.token == scoped && strings.Contains(c.path, "plan-pout") && ve != nil && strings.Contains(ve.Message, `"pout"`) {
			t.Errorf("%s: the refusal names a pool outside the token's scope: %s", c.name, raw)
		}
	}
	// Nothing changed: plan-pin still holds pin only, plan-pout pout.
	for name, pool := range map[string]string{"plan-pin": "pin", "plan-pout": "pout"} {
		p, err := e.admin.GetScalingPlan(ctx, name)
		if err != nil || strings.Join(p.HostPools, ",") != pool {
			t.Errorf("%s after the refusals: %v %+v", name, err, p)
		}
	}
	// Now the mixed plan holds pin's neighbour pboth and pboth2 (outside
	// the scoped token's scope): the scoped Contributor sees it but may
	// neither replace nor delete it.
	if _, err := e.admin.PutScalingPlan(ctx, "mixed", planBody("pboth", "pboth2")); err != nil {
		t.Fatal(err)
	}
	for _, c := range []struct{ method, body string }{{"PUT", planJSON("pboth")}, {"DELETE", ""}} {
		if status, _, raw := rawDo(t, e, c.method, "/api/v1/scalingplans/mixed", scoped, c.body); status != 403 {
			t.Errorf("scoped %s of a plan holding pboth2: %d %s, want 403", c.method, status, raw)
		}
	}
	_, _, raw := rawDo(t, e, "GET", "/api/v1/scalingplans", scoped, "")
	if !strings.Contains(string(raw), `"mixed"`) || strings.Contains(string(raw), "plan-pout") {
		t.Errorf("scoped list: %s, want mixed and not plan-pout", raw)
	}
	_, _, raw = rawDo(t, e, "GET", "/api/v1/scalingplans", scopedReader, "")
	if strings.Contains(string(raw), `"mixed"`) || !strings.Contains(string(raw), "plan-pin") {
		t.Errorf("scoped reader list: %s, want plan-pin only", raw)
	}
	// Within its scope the scoped Contributor writes.
	if status, _, raw := rawDo(t, e, "PUT", "/api/v1/scalingplans/plan-pin", scoped, planJSON("pin")); status != 200 {
		t.Errorf("scoped replace of its own plan: %d %s", status, raw)
	}
}

// TestScalingPlanAudit: create, replace and delete each leave one entry
// with the plan before and after and the plan's pool, so a Contributor
// scoped to the pool finds it; a refused write leaves a refusal.
func TestScalingPlanAudit(t *testing.T) {
	e := newEnvWith(t, envOptions{maintenance: time.Hour})
	e.pool("aud1", nil)
	const path = "/api/v1/scalingplans/audplan"
	if status, _, raw := rawDo(t, e, "PUT", path, adminToken, planJSON("aud1")); status != 201 {
		t.Fatalf("create: %d %s", status, raw)
	}
	a, before, after := oneEntry(t, e, "scalingplan.put", "scalingplans/audplan")
	if before != nil || after["name"] != "audplan" || a.HostPool != "aud1" || a.Principal.Kind != "admin" {
		t.Errorf("create entry: before %v after %v pool %q principal %+v", before, after, a.HostPool, a.Principal)
	}
	b := planBody("aud1")
	b["description"] = "second"
	j, _ := json.Marshal(b)
	if status, _, raw := rawDo(t, e, "PUT", path, adminToken, string(j)); status != 200 {
		t.Fatalf("replace: %d %s", status, raw)
	}
	list, err := e.admin.ListAudit(context.Background(), vhttp.AuditQuery{Action: "scalingplan.put"})
	if err != nil || len(list) != 2 {
		t.Fatalf("put entries: %v %d", err, len(list))
	}
	var b2, a2 map[string]any
	_ = json.Unmarshal(list[1].Before, &b2)
	_ = json.Unmarshal(list[1].After, &a2)
	if b2["description"] != "" || a2["description"] != "second" {
		t.Errorf("replace entry: before %v after %v", b2, a2)
	}
	if status, _, raw := rawDo(t, e, "DELETE", path, adminToken, ""); status != 204 {
		t.Fatalf("delete: %d %s", status, raw)
	}
	a, before, after = oneEntry(t, e, "scalingplan.delete", "scalingplans/audplan")
	if before["name"] != "audplan" || after != nil || a.HostPool != "aud1" {
		t.Errorf("delete entry: before %v after %v pool %q", before, after, a.HostPool)
	}
	tr, err := e.admin.CreateToken(context.Background(), vhttp.TokenRequest{Role: "Reader", Subject: "r"})
	if err != nil {
		t.Fatal(err)
	}
	reader := tr.Secret
	rawDo(t, e, "PUT", path, reader, planJSON("aud1"))
	list, _ = e.admin.ListAudit(context.Background(), vhttp.AuditQuery{Action: "scalingplan.put"})
	if n := len(list); n != 3 || list[2].Outcome != vdibroker.AuditRefused {
		t.Errorf("the Reader's refused PUT: %d put entries, last %+v", n, list[n-1])
	}
}

// TestDeletePoolLeavesPlanAPI_RSP4: deleting a host pool through the API
// takes it out of its plan; the plan stays with its other pools.
func TestDeletePoolLeavesPlanAPI_RSP4(t *testing.T) {
	e := newEnv(t)
	e.pool("stay", nil)
	e.pool("gone", nil)
	ctx := context.Background()
	if _, err := e.admin.PutScalingPlan(ctx, "plan", planBody("stay", "gone")); err != nil {
		t.Fatal(err)
	}
	if _, err := e.admin.DeleteHostPool(ctx, "gone", false); err != nil {
		t.Fatal(err)
	}
	p, err := e.admin.GetScalingPlan(ctx, "plan")
	if err != nil || strings.Join(p.HostPools, ",") != "stay" {
		t.Errorf("plan after deleting pool gone: %v %+v", err, p)
	}
}

// TestScalingPlanReplicasRace_RSP4: plans naming one pool PUT at once
// through two replicas (each its own store handle on PostgreSQL): one is
// created, every other is 409 naming a plan, and the pool is in one plan.
func TestScalingPlanReplicasRace_RSP4(t *testing.T) {
	e := newEnvWith(t, envOptions{replicas: 2})
	e.pool("shared", nil)
	const n = 6
	statuses := make([]int, n)
	var wg sync.WaitGroup
	for i := range n {
		wg.Add(1)
		go func() {
			defer wg.Done()
			_, err := e.client(i%2, adminToken).PutScalingPlan(context.Background(), fmt.Sprintf("plan-%d", i), planBody("shared"))
			statuses[i] = vdibroker.HTTPStatus(vdibroker.ErrorCode(err))
			if err == nil {
				statuses[i] = 201
			}
		}()
	}
	wg.Wait()
	created := 0
	for i, st := range statuses {
		switch st {
		case 201:
			created++
		case 409:
		default:
			t.Errorf("plan-%d: status %d", i, st)
		}
	}
	plans, err := e.admin.ListScalingPlans(context.Background())
	if created != 1 || err != nil || len(plans) != 1 {
		t.Errorf("%d created, %d stored (%v), want 1 and 1: statuses %v", created, len(plans), err, statuses)
	}
}
