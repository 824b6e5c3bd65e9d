package http_test

import (
	"bytes"
	"context"
	"encoding/json"
	"net/http"
	"net/http/httptest"
	"testing"

	"github.com/google/go-cmp/cmp"

	"github.com/vdibroker/vdibroker"
	"github.com/vdibroker/vdibroker/internal/testserver"
	"github.com/vdibroker/vdibroker/store"
)

// FuzzAPIBodies sends fuzzed bodies to every API route that decodes one,
// on a real server and store, with the admin token. Whatever
// the body, the answer is never a 500 nor a panic; a refusal is the §9
// error body; and a refused change leaves the pool and its host exactly as
// they were (R-P4: nothing already stored is lost or half-written).
func FuzzAPIBodies(f *testing.F) {
	routes := []struct{ method, path string }{
		{"PUT", "/api/v1/hostpools/fz-pool"},
		{"PATCH", "/api/v1/hostpools/fz-pool"},
		{"PUT", "/api/v1/hostpools/fz-pool/sessionhosts/fz-host"},
		{"PATCH", "/api/v1/hostpools/fz-pool/sessionhosts/fz-host"},
		{"POST", "/api/v1/hostpools/fz-pool/connect"},
		{"POST", "/api/v1/hostpools/fz-pool/registrationtoken"},
		{"POST", "/api/v1/tokens"},
		{"POST", "/api/v1/agent/register"},
		{"PUT", "/api/v1/scalingplans/fz-plan"},
		// Entitlements (R-E1, R-E7).
		{"PUT", "/api/v1/applicationgroups/fz-apps"},
		{"PUT", "/api/v1/applicationgroups/fz-apps/applications/fz-app"},
		{"POST", "/api/v1/applicationgroups/fz-apps/connect"},
		// A gateway's check of its open tunnels (R-GW4).
		{"POST", "/api/v1/gateway/tunnels/check"},
	}
	seeds := []string{
		`{}`, `{"maxSessionLimit":5}`, `{"maxSessionLimit":0}`, `{"loadBalancerType":"DepthFirst","maxSessionLimit":10}`,
		`{"hostPoolType":"Personal"}`, `{"loadBalancing":{"cpuThreshold":101}}`, `{"loadBalancing":{"minServersInQueue":1e9}}`,
		`{"allowNewSession":false}`, `{"assignedUsers":["alice"]}`, `{"address":"a:1"}`, `{"protocols":["VNC"]}`,
		`{"user":"alice"}`, `{"user":"alice","dryRun":true}`, `{"user":""}`, `{"user":"a\u0000b"}`,
		// A connect naming the session to reconnect (R-C1, R-U3).
		`{"user":"alice","sessionId":"01a24abcc7a67a0aadddc7103a9d72f3"}`, `{"user":"alice","sessionId":" x"}`,
		`{"expiresInSeconds":3600,"maxHosts":1}`, `{"role":"Reader","subject":"x"}`, `{"role":"Admin","subject":"x"}`,
		`{"token":"nope","hostName":"fz-host","address":"fz:3389"}`,
		planJSON("fz-pool"), planJSON("fz-pool", "nope"), `{"timeZone":"UTC","schedules":[{"name":"s","daysOfWeek":["Monday"],"rampUpStartTime":"23:00","peakStartTime":"01:00","rampDownStartTime":"02:00","offPeakStartTime":"22:59","rampUpCapacityThresholdPct":1,"rampDownCapacityThresholdPct":1}]}`,
		`{"hostPool":"fz-pool","applicationGroupType":"Desktop"}`, `{"hostPool":"fz-pool","applicationGroupType":"RemoteApp","assignments":{"users":["a","A"]}}`,
		`{"filePath":"x.exe","commandLineSetting":"Require"}`, `{"user":"alice","application":"fz-app","commandLine":"/x"}`,
		`{"gateway":"rdgw-1","tunnels":[]}`, `{"gateway":"rdgw-1","tunnels":[{"tokenId":"` + string(bytes.Repeat([]byte("ab"), 32)) + `","user":"alice","sessionId":"s","hostPool":"fz-pool","host":"fz:3389","tokenExpiry":"2030-01-01T00:00:00Z"}]}`,
		`{"gateway":"rdgw-1","tunnels":[{"tokenId":"x"}]}`,
		`null`, `[]`, `"x"`, `{"name":"other"}`, `{} {}`, `{"unknown":1}`, "\xff\xfe", `{"description":"` + string(bytes.Repeat([]byte("d"), 600)) + `"}`,
	}
	for i := range routes {
		for _, s := range seeds {
			f.Add(i, []byte(s))
		}
	}
	st, err := store.Open(context.Background(), "", f.TempDir(), nil)
	if err != nil {
		f.Fatal(err)
	}
	f.Cleanup(func() { st.Close() })
	srv := testserver.New(testserver.Config{Store: st, AdminToken: adminToken})
	f.Cleanup(func() { srv.Close() })
	h := srv.Handler()
	do := func(method, path string, body []byte) *httptest.ResponseRecorder {
		req := httptest.NewRequest(method, path, bytes.NewReader(body))
		req.Header.Set("Authorization", "Bearer "+adminToken)
		req.Header.Set("Content-Type", "application/json")
		rec := httptest.NewRecorder()
		h.ServeHTTP(rec, req)
		return rec
	}
	// The state a refused change must leave alone.
	for _, seed := range []struct{ path, body string }{
		{"/api/v1/hostpools/fz-pool", `{"maxSessionLimit":7}`},
		{"/api/v1/applicationgroups/fz-apps", `{"hostPool":"fz-pool","applicationGroupType":"RemoteApp","assignments":{"groups":["g"]}}`},
		{"/api/v1/applicationgroups/fz-apps/applications/fz-app", `{"filePath":"fz.exe","commandLineSetting":"Allow"}`},
	} {
		if rec := do("PUT", seed.path, []byte(seed.body)); rec.Code/100 != 2 {
			f.Fatalf("seed %s: %d %s", seed.path, rec.Code, rec.Body)
		}
	}
	f.Fuzz(func(t *testing.T, route int, body []byte) {
		if route < 0 || route >= len(routes) {
			return
		}
		r := routes[route]
		before := snapshot(do)
		rec := do(r.method, r.path, body)
		if rec.Code >= 500 && rec.Code != http.StatusServiceUnavailable {
			t.Fatalf("%s %s with %q: %d %s", r.method, r.path, body, rec.Code, rec.Body)
		}
		if rec.Code >= 400 {
			var eb struct {
				Error *vdibroker.Error `json:"error"`
			}
			if err := json.Unmarshal(rec.Body.Bytes(), &eb); err != nil || eb.Error == nil || eb.Error.Code == "" || eb.Error.Message == "" {
				t.Fatalf("%s %s: %d without the §9 error body: %s", r.method, r.path, rec.Code, rec.Body)
			}
			if r.method == "PUT" || r.method == "PATCH" {
				if diff := cmp.Diff(before, snapshot(do)); diff != "" {
					t.Fatalf("%s %s refused (%d %s) but changed the state (-before +after):\n%s", r.method, r.path, rec.Code, eb.Error.Message, diff)
				}
			}
		}
	})
}

// snapshot reads the pool and its host as the API shows them (without the
// times a write moves and the fields read-time computes).
func snapshot(do func(string, string, []byte) *httptest.ResponseRecorder) map[string]any {
	out := map[string]any{}
	for _, path := range []string{"/api/v1/hostpools/fz-pool", "/api/v1/hostpools/fz-pool/sessionhosts/fz-host", "/api/v1/scalingplans/fz-plan",
		"/api/v1/applicationgroups/fz-apps", "/api/v1/applicationgroups/fz-apps/applications/fz-app"} {
		rec := do("GET", path, nil)
		var v map[string]any
		json.Unmarshal(rec.Body.Bytes(), &v)
		for _, k := range []string{"updateTime", "lastHeartBeat", "status", "loadIndex"} {
			delete(v, k)
		}
		out[path] = v
	}
	return out
}
