package http_test

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"strings"
	"testing"

	"github.com/google/go-cmp/cmp"
	"github.com/google/go-cmp/cmp/cmpopts"

	"github.com/vdibroker/vdibroker"
	vhttp "github.com/vdibroker/vdibroker/http"
)

// rawDo sends a raw body and returns status and the decoded error (if any).
func rawDo(t *testing.T, e *env, method, path, token, body string) (int, *vdibroker.Error, []byte) {
	t.Helper()
	resp, ve, data := rawDoAt(t, e.urls[0], method, path, token, body)
	return resp.StatusCode, ve, data
}

// rawDoAt is rawDo to the server at base; it returns the answer too (for
// its headers; the body is read).
func rawDoAt(t *testing.T, base, method, path, token, body string) (*http.Response, *vdibroker.Error, []byte) {
	t.Helper()
	req, err := http.NewRequest(method, base+path, strings.NewReader(body))
	if err != nil {
		t.Fatal(err)
	}
	if token != "" {
		req.Header.Set("Authorization", "Bearer "+token)
	}
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	data, _ := io.ReadAll(resp.Body)
	var eb struct {
		Error *vdibroker.Error `json:"error"`
	}
	json.Unmarshal(data, &eb)
	return resp, eb.Error, data
}

// TestPutHostPoolDefaults_SPEC2: an empty PUT body gets every §2 and §6
// default; 201 on create, 200 on replace.
func TestPutHostPoolDefaults_SPEC2(t *testing.T) {
	e := newEnv(t)
	got := e.pool("contosohp01", nil)
	if !got.Created {
		t.Error("first PUT: want 201 Created")
	}
	want := vdibroker.HostPool{
		Name: "contosohp01", HostPoolType: "Pooled", LoadBalancerType: "BreadthFirst",
		MaxSessionLimit: 999999, PersonalDesktopAssignmentType: "Automatic",
		LoadBalancing:           vdibroker.DefaultLoadBalancing(),
		HeartbeatTimeoutSeconds: 90, PendingTimeoutSeconds: 300, GatewayUsage: "Gateway",
	}
	if d := cmp.Diff(want, *got.HostPool, cmpopts.IgnoreFields(vdibroker.HostPool{}, "CreateTime", "UpdateTime")); d != "" {
		t.Errorf("defaults (-want +got):\n%s", d)
	}
	personal := e.pool("personal01", map[string]any{"hostPoolType": "Personal"})
	if personal.LoadBalancerType != "Persistent" {
		t.Errorf("Personal default loadBalancerType = %q, want Persistent", personal.LoadBalancerType)
	}
	again := e.pool("contosohp01", map[string]any{"maxSessionLimit": 10})
	if again.Created || again.MaxSessionLimit != 10 {
		t.Errorf("second PUT: created=%v limit=%d, want replace with limit 10", again.Created, again.MaxSessionLimit)
	}
	if !again.CreateTime.Equal(got.CreateTime) {
		t.Errorf("replace changed createTime %v -> %v", got.CreateTime, again.CreateTime)
	}
}

// TestHostPoolValidation_RP4 sends one bad value per field of §2 and §6:
// each is a 400 naming the field and its allowed range, and the pool is
// unchanged afterwards.
func TestHostPoolValidation_RP4(t *testing.T) {
	e := newEnv(t)
	ctx := context.Background()
	e.pool("valid-pool", map[string]any{"maxSessionLimit": 5, "description": "before"})
	before, _ := e.admin.GetHostPool(ctx, "valid-pool")
	lb := func(k string, v any) map[string]any { return map[string]any{"loadBalancing": map[string]any{k: v}} }
	cases := []struct {
		name  string
		body  map[string]any
		field string
		want  string // in the message: the allowed range or values
	}{
		{"maxSessionLimit 0", map[string]any{"maxSessionLimit": 0}, "maxSessionLimit", "1..999999"},
		{"maxSessionLimit 1000000", map[string]any{"maxSessionLimit": 1000000}, "maxSessionLimit", "1..999999"},
		{"maxSessionLimit not integer", map[string]any{"maxSessionLimit": 2.5}, "maxSessionLimit", "1..999999"},
		{"maxSessionLimit string", map[string]any{"maxSessionLimit": "10"}, "maxSessionLimit", "integer"},
		{"hostPoolType", map[string]any{"hostPoolType": "Shared"}, "hostPoolType", "Pooled, Personal"},
		{"loadBalancerType", map[string]any{"loadBalancerType": "Random"}, "loadBalancerType", "BreadthFirst, DepthFirst, LoadIndex"},
		{"loadBalancerType Persistent on Pooled", map[string]any{"loadBalancerType": "Persistent"}, "loadBalancerType", "BreadthFirst, DepthFirst, LoadIndex"},
		{"personalDesktopAssignmentType on Pooled", map[string]any{"personalDesktopAssignmentType": "Direct"}, "personalDesktopAssignmentType", "Automatic"},
		{"heartbeatTimeoutSeconds 9", map[string]any{"heartbeatTimeoutSeconds": 9}, "heartbeatTimeoutSeconds", "10..3600"},
		{"heartbeatTimeoutSeconds 3601", map[string]any{"heartbeatTimeoutSeconds": 3601}, "heartbeatTimeoutSeconds", "10..3600"},
		{"pendingTimeoutSeconds 9", map[string]any{"pendingTimeoutSeconds": 9}, "pendingTimeoutSeconds", "10..3600"},
		{"pendingTimeoutSeconds 3601", map[string]any{"pendingTimeoutSeconds": 3601}, "pendingTimeoutSeconds", "10..3600"},
		{"disconnectedSessionTimeoutMinutes -1", map[string]any{"disconnectedSessionTimeoutMinutes": -1}, "disconnectedSessionTimeoutMinutes", "0..10080"},
		{"disconnectedSessionTimeoutMinutes 10081", map[string]any{"disconnectedSessionTimeoutMinutes": 10081}, "disconnectedSessionTimeoutMinutes", "0..10080"},
		{"description 513", map[string]any{"description": strings.Repeat("d", 513)}, "description", "512"},
		{"friendlyName 513", map[string]any{"friendlyName": strings.Repeat("f", 513)}, "friendlyName", "512"},
		{"name in body differs", map[string]any{"name": "other-pool"}, "name", "valid-pool"},
		{"cpuThreshold 101", lb("cpuThreshold", 101), "loadBalancing.cpuThreshold", "0..100"},
		{"cpuThreshold -1", lb("cpuThreshold", -1), "loadBalancing.cpuThreshold", "0..100"},
		{"memoryThreshold 101", lb("memoryThreshold", 101), "loadBalancing.memoryThreshold", "0..100"},
		{"diskQueueLengthThreshold -1", lb("diskQueueLengthThreshold", -1), "loadBalancing.diskQueueLengthThreshold", "≥ 0"},
		{"diskReadLatencyThreshold -1", lb("diskReadLatencyThreshold", -0.5), "loadBalancing.diskReadLatencyThreshold", "≥ 0"},
		{"diskWriteLatencyThreshold -1", lb("diskWriteLatencyThreshold", -1), "loadBalancing.diskWriteLatencyThreshold", "≥ 0"},
		{"loadIndexThreshold 101", lb("loadIndexThreshold", 101), "loadBalancing.loadIndexThreshold", "0..100"},
		{"loadIndexThreshold -1", lb("loadIndexThreshold", -1), "loadBalancing.loadIndexThreshold", "0..100"},
		{"connectingSessionThreshold 151", lb("connectingSessionThreshold", 151), "loadBalancing.connectingSessionThreshold", "0..150"},
		{"minServersInQueue 0", lb("minServersInQueue", 0), "loadBalancing.minServersInQueue", "1..1000"},
		{"minServersInQueue 1001", lb("minServersInQueue", 1001), "loadBalancing.minServersInQueue", "1..1000"},
		{"hostLoadIndexThreshold 101", lb("hostLoadIndexThreshold", 101), "loadBalancing.hostLoadIndexThreshold", "0..100"},
		{"hostConnectingSessionThreshold 151", lb("hostConnectingSessionThreshold", 151), "loadBalancing.hostConnectingSessionThreshold", "0..150"},
		{"sampleIntervalSeconds 4", lb("sampleIntervalSeconds", 4), "loadBalancing.sampleIntervalSeconds", "5..3600"},
		{"sampleIntervalSeconds 3601", lb("sampleIntervalSeconds", 3601), "loadBalancing.sampleIntervalSeconds", "5..3600"},
		{"useCustomScript not bool", lb("useCustomScript", "yes"), "loadBalancing.useCustomScript", "true or false"},
		{"unknown field", map[string]any{"maxSessionLimt": 5}, "maxSessionLimt", "unknown field"},
		{"unknown nested field", lb("cpu", 5), "loadBalancing.cpu", "unknown field"},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			for _, op := range []string{"PUT", "PATCH"} {
				var err error
				if op == "PUT" {
					_, err = e.admin.PutHostPool(ctx, "valid-pool", tc.body)
				} else {
					_, err = e.admin.PatchHostPool(ctx, "valid-pool", tc.body)
				}
				ve := wantCode(t, err, vdibroker.EInvalid, tc.want)
				if ve.Field != tc.field {
					t.Errorf("%s: field = %q, want %q", op, ve.Field, tc.field)
				}
				if !strings.HasPrefix(ve.Message, tc.field) && !strings.Contains(ve.Message, tc.field) {
					t.Errorf("%s: message %q does not name the field %q", op, ve.Message, tc.field)
				}
			}
			after, err := e.admin.GetHostPool(ctx, "valid-pool")
			if err != nil {
				t.Fatal(err)
			}
			if d := cmp.Diff(before, after); d != "" {
				t.Errorf("refused change changed the pool (-before +after):\n%s", d)
			}
		})
	}
	t.Run("bad pool name", func(t *testing.T) {
		for _, name := range []string{"ab", strings.Repeat("x", 65), "bad/name", "bad%21name", " lead"} {
			_, err := e.admin.PutHostPool(ctx, name, map[string]any{})
			if vdibroker.ErrorCode(err) != vdibroker.EInvalid && vdibroker.ErrorCode(err) != vdibroker.ENotFound {
				t.Errorf("PUT pool %q: got %v, want InvalidArgument", name, err)
			}
		}
		_, err := e.admin.PutHostPool(ctx, "ab", map[string]any{})
		if ve := wantCode(t, err, vdibroker.EInvalid, "3..64"); ve.Field != "name" {
			t.Errorf("field %q, want name", ve.Field)
		}
	})
}

// TestBadBodies_SPEC9: bodies that are not JSON, have trailing data, are
// empty or are not objects are 400 InvalidArgument with the error body.
func TestBadBodies_SPEC9(t *testing.T) {
	e := newEnv(t)
	for _, body := range []string{"", "not json", "{", `{"maxSessionLimit": 5} {}`, `[1,2]`, `"x"`, `{"maxSessionLimit": 5,}`} {
		status, ve, raw := rawDo(t, e, "PUT", "/api/v1/hostpools/pool01", adminToken, body)
		if status != 400 || ve == nil || ve.Code != vdibroker.EInvalid || ve.Message == "" {
			t.Errorf("body %q: got %d %s, want 400 InvalidArgument", body, status, raw)
		}
	}
	big := `{"description": "` + strings.Repeat("x", 2<<20) + `"}`
	if status, ve, _ := rawDo(t, e, "PUT", "/api/v1/hostpools/pool01", adminToken, big); status != 400 || ve == nil {
		t.Errorf("2 MiB body: got %d, want 400", status)
	}
	if _, err := e.admin.GetHostPool(context.Background(), "pool01"); vdibroker.ErrorCode(err) != vdibroker.ENotFound {
		t.Errorf("refused bodies created the pool: %v", err)
	}
	status, ve, _ := rawDo(t, e, "GET", "/api/v1/nothing-here", adminToken, "")
	if status != 404 || ve == nil || ve.Code != vdibroker.ENotFound {
		t.Errorf("unknown path: %d %v, want 404 NotFound", status, ve)
	}
}

// TestNullBody_SPEC9: a body that is JSON null is not an object either:
// 400 InvalidArgument saying so, as for an array, and nothing is stored.
// It was taken as {}: PUT made a pool of defaults, PATCH wrote the pool
// again (a new updateTime, an audit entry of a change that changed
// nothing) and a registration token was issued.
func TestNullBody_SPEC9(t *testing.T) {
	e := newEnv(t)
	ctx := context.Background()
	e.pool("nullpool", map[string]any{"maxSessionLimit": 7})
	before, err := e.admin.GetHostPool(ctx, "nullpool")
	if err != nil {
		t.Fatal(err)
	}
	for _, c := range []struct{ method, path string }{
		{"PUT", "/api/v1/hostpools/pool01"},
		{"PATCH", "/api/v1/hostpools/nullpool"},
		{"POST", "/api/v1/hostpools/nullpool/registrationtoken"},
		{"POST", "/api/v1/tokens"},
	} {
		for _, body := range []string{"null", " null\n"} {
			status, ve, raw := rawDo(t, e, c.method, c.path, adminToken, body)
			if status != 400 || ve == nil || ve.Code != vdibroker.EInvalid || ve.Message != "request body must be a JSON object, got null" {
				t.Errorf("%s %s %q: got %d %s, want 400 InvalidArgument: request body must be a JSON object, got null", c.method, c.path, body, status, raw)
			}
		}
	}
	if _, err := e.admin.GetHostPool(ctx, "pool01"); vdibroker.ErrorCode(err) != vdibroker.ENotFound {
		t.Errorf("PUT null created the pool: %v", err)
	}
	after, err := e.admin.GetHostPool(ctx, "nullpool")
	if err != nil {
		t.Fatal(err)
	}
	if !after.UpdateTime.Equal(before.UpdateTime) {
		t.Errorf("PATCH null wrote the pool: updateTime %v, was %v", after.UpdateTime, before.UpdateTime)
	}
	if l, err := e.admin.ListRegistrationTokens(ctx, "nullpool"); err != nil || len(l) != 0 {
		t.Errorf("POST null issued registration tokens: %v, %v", l, err)
	}
}

// TestPatchHostPool_RP1_RP3: PATCH changes only what it names; the load
// balancer type may change any time (R-P1) but hostPoolType never; DepthFirst
// without a real limit is accepted with a warning (R-P3).
func TestPatchHostPool_RP1_RP3(t *testing.T) {
	e := newEnv(t)
	ctx := context.Background()
	e.pool("patchme", map[string]any{"maxSessionLimit": 7, "loadBalancing": map[string]any{"cpuThreshold": 80}})

	got, err := e.admin.PatchHostPool(ctx, "patchme", map[string]any{"loadBalancing": map[string]any{"memoryThreshold": 70}})
	if err != nil {
		t.Fatal(err)
	}
	if got.MaxSessionLimit != 7 || got.LoadBalancing.CPUThreshold != 80 || got.LoadBalancing.MemoryThreshold != 70 || got.LoadBalancing.MinServersInQueue != 4 {
		t.Errorf("PATCH merged wrongly: %+v", got.HostPool)
	}

	got, err = e.admin.PatchHostPool(ctx, "patchme", vhttp.HostPoolFields{LoadBalancerType: vhttp.Ptr("DepthFirst")})
	if err != nil || got.LoadBalancerType != "DepthFirst" || len(got.Warnings) != 0 {
		t.Fatalf("R-P1 change to DepthFirst with limit 7: %v %+v", err, got)
	}

	_, err = e.admin.PatchHostPool(ctx, "patchme", map[string]any{"hostPoolType": "Personal", "loadBalancerType": "Persistent"})
	wantCode(t, err, vdibroker.EInvalid, "cannot be changed")
	_, err = e.admin.PutHostPool(ctx, "patchme", map[string]any{"hostPoolType": "Personal"})
	if ve := wantCode(t, err, vdibroker.EInvalid); ve.Field != "hostPoolType" {
		t.Errorf("PUT hostPoolType change: field %q", ve.Field)
	}

	// R-P3: accepted, with the warning in the body and a Warning header.
	req, _ := http.NewRequest("PATCH", e.urls[0]+"/api/v1/hostpools/patchme", bytes.NewBufferString(`{"maxSessionLimit": 999999}`))
	req.Header.Set("Authorization", "Bearer "+adminToken)
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	resp.Body.Close()
	if resp.StatusCode != 200 || !strings.Contains(resp.Header.Get("Warning"), "depth-first needs a real maxSessionLimit") {
		t.Errorf("R-P3: status %d, Warning header %q", resp.StatusCode, resp.Header.Get("Warning"))
	}
	got, err = e.admin.GetHostPool(ctx, "patchme")
	if err != nil || len(got.Warnings) != 1 || got.MaxSessionLimit != 999999 {
		t.Errorf("R-P3: GET after: %v %+v", err, got)
	}

	_, err = e.admin.PatchHostPool(ctx, "nosuchpool", map[string]any{"maxSessionLimit": 3})
	wantCode(t, err, vdibroker.ENotFound)
}

// TestPersistentChangeWarnsOfSharedHosts_RP1: a Personal pool changed
// from MultiplePersistent to Persistent is taken as R-P1 says, hosts'
// lists and all, and the write's answer warns, in its body and a Warning
// header as R-P3's, how many hosts keep more than one assigned user,
// naming the first five. A user named twice in two spellings is one user.
// The warning is the write's: a read after it, and a write that does not
// change the type, do not repeat it; a PUT that changes it warns as a
// PATCH does, and a pool with no shared host is not warned about. What
// the warning says connects do, they do: both users of a shared host
// land on it.
func TestPersistentChangeWarnsOfSharedHosts_RP1(t *testing.T) {
	e := newEnv(t)
	ctx := context.Background()
	pool := uniq("shared")
	multi := map[string]any{"hostPoolType": "Personal", "loadBalancerType": "MultiplePersistent", "personalDesktopAssignmentType": "Direct"}
	persistent := map[string]any{"hostPoolType": "Personal", "loadBalancerType": "Persistent", "personalDesktopAssignmentType": "Direct"}
	e.pool(pool, multi)
	hosts := e.addHosts(pool, "sh", 9)
	// sh001: one user. sh002: one user in two spellings, as an older
	// release stored it (straight into the store: the API refuses it now).
	// sh003..sh009: two users each, 7 shared hosts.
	if _, err := e.admin.PatchSessionHost(ctx, pool, hosts[0], map[string]any{"assignedUsers": []string{"solo"}}); err != nil {
		t.Fatal(err)
	}
	if _, err := e.store.UpdateSessionHost(ctx, pool, hosts[1], func(h *vdibroker.SessionHost) error {
		h.AssignedUsers = []string{"dora", "DORA"}
		return nil
	}); err != nil {
		t.Fatal(err)
	}
	for i, h := range hosts[2:] {
		if _, err := e.admin.PatchSessionHost(ctx, pool, h, map[string]any{"assignedUsers": []string{fmt.Sprintf("u%da", i), fmt.Sprintf("u%db", i)}}); err != nil {
			t.Fatal(err)
		}
	}
	const want = "7 session hosts keep more than one assigned user (sh003, sh004, sh005, sh006, sh007 and 2 more)"
	warned := func(what string, warnings []string, header []string) {
		t.Helper()
		if len(warnings) != 1 || !strings.Contains(warnings[0], want) || !strings.Contains(warnings[0], "still connects to it") {
			t.Errorf("%s: warnings %q, want one saying %q and what connects do", what, warnings, want)
		}
		if header != nil && (len(header) != 1 || !strings.Contains(header[0], want)) {
			t.Errorf("%s: Warning headers %q, want one saying %q", what, header, want)
		}
	}

	resp, ve, data := rawDoAt(t, e.urls[0], "PATCH", "/api/v1/hostpools/"+pool, adminToken, `{"loadBalancerType": "Persistent"}`)
	if resp.StatusCode != http.StatusOK || ve != nil {
		t.Fatalf("PATCH to Persistent: %d %v, want 200", resp.StatusCode, ve)
	}
	var got vhttp.HostPoolResponse
	if err := json.Unmarshal(data, &got); err != nil {
		t.Fatal(err)
	}
	if got.LoadBalancerType != "Persistent" {
		t.Errorf("loadBalancerType %q after the PATCH, want Persistent", got.LoadBalancerType)
	}
	warned("PATCH to Persistent", got.Warnings, resp.Header.Values("Warning"))
	if h, err := e.admin.GetSessionHost(ctx, pool, "sh003"); err != nil || len(h.AssignedUsers) != 2 {
		t.Errorf("sh003 after the change: %v; want its 2 users kept", err)
	}

	if p, err := e.admin.GetHostPool(ctx, pool); err != nil || len(p.Warnings) != 0 {
		t.Errorf("GET after the change: %v, warnings %q; want none (the write's alone)", err, p.Warnings)
	}
	if p, err := e.admin.PatchHostPool(ctx, pool, map[string]any{"maxSessionLimit": 4}); err != nil || len(p.Warnings) != 0 {
		t.Errorf("PATCH of the limit, Persistent still: %v, warnings %q; want none", err, p.Warnings)
	}

	// Both users of a shared host connect to it (R-PE4 holds for each).
	for _, u := range []string{"u0a", "u0b"} {
		if r := e.mustConnect(pool, u); r.SessionHost != "sh003" {
			t.Errorf("%s connected to %s, want sh003, the host that lists them", u, r.SessionHost)
		}
	}

	if p, err := e.admin.PutHostPool(ctx, pool, multi); err != nil || len(p.Warnings) != 0 {
		t.Errorf("PUT back to MultiplePersistent: %v, warnings %q; want none", err, p.Warnings)
	}
	p, err := e.admin.PutHostPool(ctx, pool, persistent)
	if err != nil {
		t.Fatal(err)
	}
	warned("PUT to Persistent", p.Warnings, nil)

	solo := uniq("solo")
	e.pool(solo, multi)
	one := e.addHosts(solo, "so", 1)
	if _, err := e.admin.PatchSessionHost(ctx, solo, one[0], map[string]any{"assignedUsers": []string{"ann"}}); err != nil {
		t.Fatal(err)
	}
	if p, err := e.admin.PatchHostPool(ctx, solo, map[string]any{"loadBalancerType": "Persistent"}); err != nil || len(p.Warnings) != 0 {
		t.Errorf("PATCH to Persistent, no shared host: %v, warnings %q; want none", err, p.Warnings)
	}
}

// TestDeleteHostPool_SPEC9: refused with 409 while sessions exist, unless
// force.
func TestDeleteHostPool_SPEC9(t *testing.T) {
	e := newEnv(t)
	ctx := context.Background()
	e.pool("delpool", nil)
	e.addHosts("delpool", "dh", 1)
	e.mustConnect("delpool", "alice")
	_, err := e.admin.DeleteHostPool(ctx, "delpool", false)
	wantCode(t, err, vdibroker.EConflict, "1 open session", "end the sessions")
	del, err := e.admin.DeleteHostPool(ctx, "delpool", true)
	if err != nil {
		t.Fatal(err)
	}
	if del.OpenSessions != 1 || del.SessionHosts != 1 {
		t.Errorf("forced delete answered %+v, want 1 host and 1 session", del)
	}
	_, err = e.admin.GetHostPool(ctx, "delpool")
	wantCode(t, err, vdibroker.ENotFound)
	_, err = e.connect("delpool", "alice")
	wantCode(t, err, vdibroker.ENotFound)
}

// TestDeletePoolWithRunningHost_SPEC9: a pool whose registered host
// heartbeats and has no session is not deleted at once (its agent would
// lose its credential, its plan the pool, unseen): 409 naming the host
// and the plan, and nothing changes; ?force=true answers what went, the
// agent's credential is revoked, and the plan's loss of the pool is in
// the audit trail beside the delete.
func TestDeletePoolWithRunningHost_SPEC9(t *testing.T) {
	e := newEnv(t)
	ctx := context.Background()
	e.pool("running", nil)
	e.pool("stays", nil)
	e.addHosts("running", "rh", 2)
	if _, err := e.admin.PutScalingPlan(ctx, "office", planBody("stays", "running")); err != nil {
		t.Fatal(err)
	}
	_, err := e.admin.DeleteHostPool(ctx, "running", false)
	wantCode(t, err, vdibroker.EConflict, `host pool "running" has 2 session hosts (rh001, rh002)`,
		`scaling plan "office"`, "revoke their agents' credentials", "force=true", "--force")
	for query, want := range map[string]int{"?force=false": http.StatusConflict, "?force=maybe": http.StatusBadRequest} {
		status, ve, _ := rawDo(t, e, http.MethodDelete, "/api/v1/hostpools/running"+query, adminToken, "")
		if status != want || ve == nil || ve.Field != "force" {
			t.Errorf("DELETE %s: HTTP %d %+v, want %d naming field force", query, status, ve, want)
		}
	}
	e.heartbeat("rh001") // the agent still works
	if p, err := e.admin.GetScalingPlan(ctx, "office"); err != nil || len(p.HostPools) != 2 {
		t.Fatalf("a refused delete changed the plan: %+v, %v", p, err)
	}

	del, err := e.admin.DeleteHostPool(ctx, "running", true)
	if err != nil {
		t.Fatal(err)
	}
	// addHosts' registration token has no host limit and has not expired.
	want := &vdibroker.PoolDeletion{HostPool: "running", SessionHosts: 2, HostNames: []string{"rh001", "rh002"}, RegistrationTokens: 1, ScalingPlan: "office"}
	if diff := cmp.Diff(want, del); diff != "" {
		t.Errorf("what went (-want +got):\n%s", diff)
	}
	_, err = e.heartbeatErr("rh001", &vdibroker.HeartbeatRequest{})
	wantCode(t, err, vdibroker.EUnauthenticated)
	if p, err := e.admin.GetScalingPlan(ctx, "office"); err != nil || strings.Join(p.HostPools, ",") != "stays" {
		t.Errorf("plan after the forced delete: %+v, %v", p, err)
	}
	entries, err := e.admin.ListAudit(ctx, vhttp.AuditQuery{Target: "scalingplans/office"})
	if err != nil {
		t.Fatal(err)
	}
	last := entries[len(entries)-1]
	if last.Action != "scalingplan.update" || last.Principal.Kind != vdibroker.PrincipalAdmin || !strings.Contains(string(last.After), `"hostPools":["stays"]`) {
		t.Errorf("the plan's last audit entry: %s by %+v, after %s", last.Action, last.Principal, last.After)
	}

	e.pool("empty", nil)
	if _, err = e.admin.DeleteHostPool(ctx, "empty", false); err != nil {
		t.Errorf("an empty pool is deleted without force: %v", err)
	}
}
