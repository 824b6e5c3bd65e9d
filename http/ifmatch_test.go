package http_test

import (
	"encoding/json"
	"io"
	"net/http"
	"slices"
	"strings"
	"testing"

	"github.com/vdibroker/vdibroker"
)

// condDo sends method path with the admin token, body and the request
// headers h (name, value, ...); it returns the status, the ETag answered,
// the decoded error (if any) and the body.
func condDo(t *testing.T, e *env, method, path, body string, h ...string) (int, string, *vdibroker.Error, string) {
	t.Helper()
	return condDoAs(t, e, adminToken, method, path, body, h...)
}

// condDoAs is condDo with token.
func condDoAs(t *testing.T, e *env, token, method, path, body string, h ...string) (int, string, *vdibroker.Error, string) {
	t.Helper()
	req, err := http.NewRequest(method, e.urls[0]+path, strings.NewReader(body))
	if err != nil {
		t.Fatal(err)
	}
	req.Header.Set("Authorization", "Bearer "+token)
	for i := 0; i+1 < len(h); i += 2 {
		req.Header.Set(h[i], h[i+1])
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
	return resp.StatusCode, resp.Header.Get("ETag"), eb.Error, string(data)
}

// TestIfMatch_RE13: a GET of an application group, an application and a
// scaling plan answers a strong ETag; a PUT with If-Match of an older one
// is 412 PreconditionFailed, telling to read again, and changes nothing;
// If-None-Match: * over an existing object is 412 and If-Match: * on a
// missing one creates nothing; a PUT without the headers replaces as it
// always did; malformed headers are 400 naming the header.
func TestIfMatch_RE13(t *testing.T) {
	e := newEnv(t)
	e.pool("office", nil)
	e.pool("spare", nil)
	const g = "/api/v1/applicationgroups/office-apps"
	const app = g + "/applications/word"
	const plan = "/api/v1/scalingplans/weekdays"
	type object struct {
		name, path, create, first, second string
		// users reads what the object holds that the writes change.
		holds func(body string) string
	}
	field := func(name string) func(string) string {
		return func(body string) string {
			var m map[string]any
			json.Unmarshal([]byte(body), &m)
			b, _ := json.Marshal(m[name])
			return string(b)
		}
	}
	for _, o := range []object{
		{"application group", g,
			`{"hostPool": "office", "applicationGroupType": "RemoteApp", "assignments": {"users": ["alice"]}}`,
			`{"hostPool": "office", "applicationGroupType": "RemoteApp", "assignments": {"users": ["alice", "bob"]}}`,
			`{"hostPool": "office", "applicationGroupType": "RemoteApp", "assignments": {"users": ["alice", "carol"]}}`,
			field("assignments")},
		{"application", app, `{"filePath": "w.exe", "friendlyName": "Word"}`,
			`{"filePath": "w.exe", "friendlyName": "Word 2"}`, `{"filePath": "w.exe", "friendlyName": "Word 3"}`,
			field("friendlyName")},
		{"scaling plan", plan, planJSON("office"), planJSON("office", "spare"), planJSON("spare"), field("hostPools")},
		{"host pool", "/api/v1/hostpools/lab", `{"description": "first"}`, `{"description": "second"}`, `{"description": "third"}`,
			field("description")},
	} {
		t.Run(strings.ReplaceAll(o.name, " ", "_"), func(t *testing.T) {
			// If-Match: * on what does not exist creates nothing.
			if st, _, ve, raw := condDo(t, e, "PUT", o.path, o.create, "If-Match", "*"); st != 412 || ve == nil || ve.Code != vdibroker.EPreconditionFailed {
				t.Fatalf("If-Match: * on a missing %s: %d %s, want 412 PreconditionFailed", o.name, st, raw)
			}
			if st, _, _, _ := condDo(t, e, "GET", o.path, ""); st != 404 {
				t.Fatalf("after If-Match: * on a missing %s: GET %d, want 404", o.name, st)
			}
			// Created with If-None-Match: *; its ETag strong and quoted.
			st, created, _, raw := condDo(t, e, "PUT", o.path, o.create, "If-None-Match", "*")
			if st != 201 || !strings.HasPrefix(created, `"`) || !strings.HasSuffix(created, `"`) || len(created) < 3 {
				t.Fatalf("create: %d ETag %q %s", st, created, raw)
			}
			st, read, _, body := condDo(t, e, "GET", o.path, "")
			if st != 200 || read != created {
				t.Fatalf("GET: %d ETag %q, want the create's %q", st, read, created)
			}
			before := o.holds(body)
			// A second create is refused, and changes nothing.
			if st, _, ve, raw := condDo(t, e, "PUT", o.path, o.first, "If-None-Match", "*"); st != 412 || ve == nil ||
				ve.Code != vdibroker.EPreconditionFailed || !strings.Contains(ve.Message, "exists already") {
				t.Errorf("If-None-Match: * on an existing %s: %d %s, want 412 PreconditionFailed", o.name, st, raw)
			}
			// The first writer with the ETag read lands; the ETag moves.
			st, first, _, raw := condDo(t, e, "PUT", o.path, o.first, "If-Match", read)
			if st != 200 || first == read || first == "" {
				t.Fatalf("PUT with the ETag read: %d ETag %q (read %q) %s", st, first, read, raw)
			}
			_, _, _, body = condDo(t, e, "GET", o.path, "")
			landed := o.holds(body)
			if landed == before {
				t.Fatalf("the first writer's change did not land: %s", landed)
			}
			// The second writer read the same ETag: refused, nothing
			// written, told to read again.
			st, _, ve, raw := condDo(t, e, "PUT", o.path, o.second, "If-Match", read)
			if st != 412 || ve == nil || ve.Code != vdibroker.EPreconditionFailed ||
				!strings.Contains(ve.Message, "changed since it was read") || !strings.Contains(ve.Message, "read it again") {
				t.Errorf("PUT with a stale If-Match: %d %s, want 412 PreconditionFailed telling to read again", st, raw)
			}
			if _, now, _, body := condDo(t, e, "GET", o.path, ""); o.holds(body) != landed || now != first {
				t.Errorf("after the stale PUT: %s (ETag %s), want %s (ETag %s) unchanged", o.holds(body), now, landed, first)
			}
			// A list of tags matches any; a weak one never (RFC 9110).
			if st, _, _, raw := condDo(t, e, "PUT", o.path, o.first, "If-Match", "W/"+first); st != 412 {
				t.Errorf("weak If-Match: %d %s, want 412", st, raw)
			}
			st, listed, _, raw := condDo(t, e, "PUT", o.path, o.first, "If-Match", read+", "+first)
			if st != 200 {
				t.Errorf("If-Match listing the current ETag: %d %s, want 200", st, raw)
			}
			// If-Match: * on an existing object writes.
			if st, _, _, raw := condDo(t, e, "PUT", o.path, o.first, "If-Match", "*"); st != 200 {
				t.Errorf("If-Match: * on an existing %s: %d %s, want 200", o.name, st, raw)
			}
			// Without the headers a PUT replaces as it always did, over
			// whatever is there.
			if st, now, _, raw := condDo(t, e, "PUT", o.path, o.second); st != 200 || now == listed {
				t.Errorf("PUT without headers: %d ETag %q %s, want 200 and a new ETag", st, now, raw)
			}
			if _, _, _, body := condDo(t, e, "GET", o.path, ""); o.holds(body) == landed {
				t.Errorf("PUT without headers did not replace: %s", o.holds(body))
			}
			// Malformed headers: 400 naming the header; nothing written.
			for _, h := range [][2]string{{"If-Match", "abc"}, {"If-Match", `"a"b"`}, {"If-None-Match", read}, {"If-Match", strings.TrimSuffix(strings.Repeat(read+", ", 17), ", ")}} {
				if st, _, ve, raw := condDo(t, e, "PUT", o.path, o.first, h[0], h[1]); st != 400 || ve == nil || ve.Field != h[0] {
					t.Errorf("%s: %.40s: %d %s, want 400 naming %s", h[0], h[1], st, raw, h[0])
				}
			}
		})
	}

	// A pool deleted out of a plan changes the plan (its hostPools), so
	// its ETag: a PUT of what was read before is refused.
	st, read, _, body := condDo(t, e, "GET", plan, "")
	if st != 200 || !strings.Contains(body, `"spare"`) {
		t.Fatalf("plan: %d %s, want it with pool spare", st, body)
	}
	if st, _, _, raw := condDo(t, e, "DELETE", "/api/v1/hostpools/spare", ""); st != 200 {
		t.Fatalf("delete pool spare: %d %s", st, raw)
	}
	_, now, _, body := condDo(t, e, "GET", plan, "")
	if now == read || strings.Contains(body, `"spare"`) {
		t.Errorf("plan after its pool went: ETag %s (was %s) %s, want a new ETag and no spare", now, read, body)
	}
	e.pool("spare", nil)
	if st, _, ve, raw := condDo(t, e, "PUT", plan, planJSON("spare"), "If-Match", read); st != 412 || ve == nil || ve.Code != vdibroker.EPreconditionFailed {
		t.Errorf("PUT of the plan read before its pool went: %d %s, want 412", st, raw)
	}
	if list, _ := e.admin.ListScalingPlans(t.Context()); len(list) != 1 || !slices.Equal(list[0].HostPools, []string{}) {
		t.Errorf("plans after the refused PUT: %+v, want weekdays without pools", list)
	}
}

// TestIfMatchPatchDelete_RE13: a DELETE of a host pool, an application
// group, an application or a scaling plan with If-Match deletes only the
// object read: a stale tag is 412 PreconditionFailed and the object stays;
// the current one deletes; If-Match on one that is gone is 412, as a
// PUT's (without it 404); If-None-Match on a DELETE is 400 naming it. A
// host pool's GET, PUT and PATCH answer its ETag, and a PATCH with a stale
// If-Match is 412 and changes nothing; a PATCH body that is not valid is
// 400 before the precondition is looked at.
func TestIfMatchPatchDelete_RE13(t *testing.T) {
	e := newEnv(t)
	e.pool("office", nil)
	const pool = "/api/v1/hostpools/lab"
	const g = "/api/v1/applicationgroups/office-apps"
	if st, _, _, raw := condDo(t, e, "PUT", "/api/v1/applicationgroups/word-apps", `{"hostPool": "office", "applicationGroupType": "RemoteApp"}`); st != 201 {
		t.Fatalf("group of the application: %d %s", st, raw)
	}
	for _, o := range []struct{ name, path, create, change string }{
		{"host pool", pool, `{"description": "a"}`, `{"description": "b"}`},
		{"application group", g, `{"hostPool": "office", "applicationGroupType": "RemoteApp"}`,
			`{"hostPool": "office", "applicationGroupType": "RemoteApp", "description": "b"}`},
		{"application", "/api/v1/applicationgroups/word-apps/applications/word", `{"filePath": "w.exe"}`, `{"filePath": "w2.exe"}`},
		{"scaling plan", "/api/v1/scalingplans/weekdays", planJSON("office"), planJSON()},
	} {
		t.Run(strings.ReplaceAll(o.name, " ", "_"), func(t *testing.T) {
			if st, _, _, raw := condDo(t, e, "PUT", o.path, o.create); st != 201 {
				t.Fatalf("create: %d %s", st, raw)
			}
			_, read, _, _ := condDo(t, e, "GET", o.path, "")
			st, now, _, raw := condDo(t, e, "PUT", o.path, o.change, "If-Match", read)
			if st != 200 || now == read {
				t.Fatalf("PUT with If-Match: %d ETag %q %s", st, now, raw)
			}
			if st, _, ve, raw := condDo(t, e, "DELETE", o.path, "", "If-Match", read); st != 412 || ve == nil ||
				ve.Code != vdibroker.EPreconditionFailed || !strings.Contains(ve.Message, "changed since it was read") {
				t.Errorf("DELETE with a stale If-Match: %d %s, want 412", st, raw)
			}
			if st, _, _, _ := condDo(t, e, "GET", o.path, ""); st != 200 {
				t.Errorf("after the refused DELETE: GET %d, want it there", st)
			}
			if st, _, ve, raw := condDo(t, e, "DELETE", o.path, "", "If-None-Match", "*"); st != 400 || ve == nil || ve.Field != "If-None-Match" {
				t.Errorf("DELETE with If-None-Match: %d %s, want 400 naming it", st, raw)
			}
			if st, _, _, raw := condDo(t, e, "DELETE", o.path, "", "If-Match", "W/"+now); st != 412 {
				t.Errorf("DELETE with a weak If-Match: %d %s, want 412", st, raw)
			}
			if st, _, _, raw := condDo(t, e, "DELETE", o.path, "", "If-Match", read+", "+now); st/100 != 2 {
				t.Errorf("DELETE with If-Match listing the current ETag: %d %s", st, raw)
			}
			if st, _, _, _ := condDo(t, e, "GET", o.path, ""); st != 404 {
				t.Errorf("after the DELETE: GET %d, want 404", st)
			}
			for _, tag := range []string{now, "*"} {
				if st, _, ve, raw := condDo(t, e, "DELETE", o.path, "", "If-Match", tag); st != 412 || ve == nil || !strings.Contains(ve.Message, "does not exist") {
					t.Errorf("DELETE of a missing one with If-Match: %s: %d %s, want 412 as a PUT's", tag, st, raw)
				}
			}
			if st, _, _, raw := condDo(t, e, "DELETE", o.path, ""); st != 404 {
				t.Errorf("DELETE of a missing one: %d %s, want 404", st, raw)
			}
		})
	}

	// A pool's PATCH: ETag answered, If-Match honoured.
	if st, _, _, raw := condDo(t, e, "PUT", pool, `{"description": "a"}`); st != 201 {
		t.Fatalf("create: %d %s", st, raw)
	}
	_, read, _, _ := condDo(t, e, "GET", pool, "")
	if _, sum, _, _ := condDo(t, e, "GET", pool+"?summary=true", ""); sum != read {
		t.Errorf("GET with summary: ETag %q, want %q", sum, read)
	}
	st, now, _, raw := condDo(t, e, "PATCH", pool, `{"maxSessionLimit": 5}`, "If-Match", read)
	if st != 200 || now == read || !strings.HasPrefix(now, `"`) {
		t.Fatalf("PATCH with the ETag read: %d ETag %q %s", st, now, raw)
	}
	if _, got, _, _ := condDo(t, e, "GET", pool, ""); got != now {
		t.Errorf("GET after PATCH: ETag %q, want the PATCH's %q", got, now)
	}
	if st, _, ve, raw := condDo(t, e, "PATCH", pool, `{"description": "lost?"}`, "If-Match", read); st != 412 || ve == nil || ve.Code != vdibroker.EPreconditionFailed {
		t.Errorf("PATCH with a stale If-Match: %d %s, want 412", st, raw)
	}
	if st, _, ve, raw := condDo(t, e, "PATCH", pool, `{"maxSessionLimit": 0}`, "If-Match", read); st != 400 || ve == nil || ve.Field != "maxSessionLimit" {
		t.Errorf("invalid PATCH with a stale If-Match: %d %s, want 400 naming maxSessionLimit", st, raw)
	}
	if st, _, ve, raw := condDo(t, e, "PATCH", "/api/v1/hostpools/none", `{"maxSessionLimit": 5}`, "If-Match", "*"); st != 412 || ve == nil || ve.Code != vdibroker.EPreconditionFailed {
		t.Errorf("PATCH of a missing pool with If-Match: %d %s, want 412", st, raw)
	}
	if st, _, _, raw := condDo(t, e, "PATCH", "/api/v1/hostpools/none", `{"maxSessionLimit": 5}`); st != 404 {
		t.Errorf("PATCH of a missing pool: %d %s, want 404", st, raw)
	}
	if _, got, _, body := condDo(t, e, "GET", pool, ""); got != now || strings.Contains(body, "lost?") {
		t.Errorf("after the refused PATCHes: ETag %q (want %q) %s", got, now, body)
	}
}

// TestIfMatchOutOfScope_RE13: to a Reader and a Contributor scoped to
// another pool, a PUT with If-Match or If-None-Match of an application
// group, application or scaling plan they may not see answers what the
// same PUT without them answers (403 or 404, never 412), with no ETag and
// nothing of the object; a GET answers 404 without an ETag. So do a
// DELETE of each with If-Match, and a GET, PUT, PATCH or DELETE of their
// host pool (403). Authorization
// comes before the precondition, so the headers tell nothing more.
func TestIfMatchOutOfScope_RE13(t *testing.T) {
	e := newEnv(t)
	e.pool("theirs", nil)
	e.pool("mine", nil)
	const g = "/api/v1/applicationgroups/their-apps"
	const app = g + "/applications/word"
	const plan = "/api/v1/scalingplans/theirplan"
	for _, c := range [][2]string{
		{g, `{"hostPool": "theirs", "applicationGroupType": "RemoteApp", "assignments": {"users": ["alice"]}}`},
		{app, `{"filePath": "w.exe"}`},
		{plan, planJSON("theirs")},
	} {
		if st, _, _, raw := condDo(t, e, "PUT", c[0], c[1]); st != 201 {
			t.Fatalf("create %s: %d %s", c[0], st, raw)
		}
	}
	_, groupTag, _, _ := condDo(t, e, "GET", g, "")
	scoped := e.roleToken("Contributor", "mallory", "mine")
	reader := e.roleToken("Reader", "rita", "mine")
	for who, token := range map[string]string{"scoped Contributor": scoped, "scoped Reader": reader} {
		for _, c := range [][2]string{
			{g, `{"hostPool": "mine", "applicationGroupType": "RemoteApp", "assignments": {"users": ["mallory"]}}`},
			{app, `{"filePath": "evil.exe"}`},
			{plan, planJSON("mine")},
		} {
			if st, tag, _, raw := condDoAs(t, e, token, "GET", c[0], ""); tag != "" || st != 404 {
				t.Errorf("%s: GET %s: %d ETag %q %s, want no ETag", who, c[0], st, tag, raw)
			}
			want, _, wantErr, _ := condDoAs(t, e, token, "PUT", c[0], c[1])
			if want/100 != 4 || wantErr == nil {
				t.Fatalf("%s: PUT %s without headers: %d, want a refusal", who, c[0], want)
			}
			for _, h := range [][2]string{{"If-Match", "*"}, {"If-Match", `"1"`}, {"If-Match", groupTag}, {"If-None-Match", "*"}} {
				st, tag, ve, raw := condDoAs(t, e, token, "PUT", c[0], c[1], h[0], h[1])
				if st != want || tag != "" || ve == nil || ve.Code != wantErr.Code || strings.Contains(raw, "ETag") {
					t.Errorf("%s: PUT %s with %s: %s: %d %s, want %d %s as without it", who, c[0], h[0], h[1], st, raw, want, wantErr.Code)
				}
			}
		}
	}
	// Their pool (403 at the route), and DELETEs of each with the headers
	// or without: the same answer, no ETag.
	_, poolTag, _, _ := condDo(t, e, "GET", "/api/v1/hostpools/theirs", "")
	for who, token := range map[string]string{"scoped Contributor": scoped, "scoped Reader": reader} {
		for _, c := range [][3]string{
			{"GET", "/api/v1/hostpools/theirs", ""},
			{"PUT", "/api/v1/hostpools/theirs", `{"description": "mallory"}`},
			{"PATCH", "/api/v1/hostpools/theirs", `{"description": "mallory"}`},
			{"DELETE", "/api/v1/hostpools/theirs?force=true", ""},
			{"DELETE", g, ""},
			{"DELETE", app, ""},
			{"DELETE", plan, ""},
		} {
			want, tag, wantErr, raw := condDoAs(t, e, token, c[0], c[1], c[2])
			if want/100 != 4 || wantErr == nil || tag != "" {
				t.Fatalf("%s: %s %s without headers: %d ETag %q %s, want a refusal", who, c[0], c[1], want, tag, raw)
			}
			for _, h := range [][2]string{{"If-Match", "*"}, {"If-Match", `"1"`}, {"If-Match", poolTag}, {"If-Match", groupTag}} {
				st, tag, ve, raw := condDoAs(t, e, token, c[0], c[1], c[2], h[0], h[1])
				if st != want || tag != "" || ve == nil || ve.Code != wantErr.Code {
					t.Errorf("%s: %s %s with %s: %s: %d %s, want %d %s as without it", who, c[0], c[1], h[0], h[1], st, raw, want, wantErr.Code)
				}
			}
		}
	}
	if _, tag, _, _ := condDo(t, e, "GET", "/api/v1/hostpools/theirs", ""); tag != poolTag {
		t.Errorf("their pool after the refused writes: ETag %s (was %s)", tag, poolTag)
	}
	for _, p := range []string{app, plan} {
		if st, _, _, _ := condDo(t, e, "GET", p, ""); st != 200 {
			t.Errorf("%s after the refused DELETEs: %d, want it there", p, st)
		}
	}
	// Nothing of theirs changed.
	if _, tag, _, body := condDo(t, e, "GET", g, ""); tag != groupTag || strings.Contains(body, "mallory") {
		t.Errorf("their group after the refused PUTs: ETag %s (was %s) %s", tag, groupTag, body)
	}
}

// TestGroupETagCoversApps_RE13: an application group's ETag covers its
// set of applications. Another administrator adds excel to a RemoteApp
// group after its GET: a DELETE of the group with the ETag read is 412
// and excel and the group stay (a RemoteApp group's delete takes its
// applications, R-E1); a PUT with it is 412 and changes nothing. A
// change of an application keeps the group's ETag; a removal moves it.
// The ETag read now deletes the group with its applications.
func TestGroupETagCoversApps_RE13(t *testing.T) {
	e := newEnv(t)
	e.pool("office", nil)
	const g = "/api/v1/applicationgroups/office-apps"
	if st, _, _, raw := condDo(t, e, "PUT", g, `{"hostPool": "office", "applicationGroupType": "RemoteApp", "assignments": {"users": ["alice"]}}`); st != 201 {
		t.Fatalf("create the group: %d %s", st, raw)
	}
	if st, _, _, raw := condDo(t, e, "PUT", g+"/applications/word", `{"filePath": "w.exe"}`); st != 201 {
		t.Fatalf("create word: %d %s", st, raw)
	}
	_, read, _, _ := condDo(t, e, "GET", g, "")
	if st, _, _, raw := condDo(t, e, "PUT", g+"/applications/excel", `{"filePath": "x.exe"}`, "If-None-Match", "*"); st != 201 {
		t.Fatalf("another administrator's excel: %d %s", st, raw)
	}
	_, added, _, _ := condDo(t, e, "GET", g, "")
	if added == read {
		t.Errorf("adding excel left the group's ETag %s as it was", read)
	}
	if st, _, ve, raw := condDo(t, e, "DELETE", g, "", "If-Match", read); st != 412 || ve == nil || ve.Code != vdibroker.EPreconditionFailed ||
		!strings.Contains(ve.Message, "changed since it was read") {
		t.Errorf("DELETE with the ETag read before excel was added: %d %s, want 412", st, raw)
	}
	if st, _, _, raw := condDo(t, e, "GET", g+"/applications/excel", ""); st != 200 {
		t.Errorf("excel after the refused DELETE: %d %s, want it there", st, raw)
	}
	if st, _, _, raw := condDo(t, e, "PUT", g, `{"hostPool": "office", "applicationGroupType": "RemoteApp", "assignments": {"users": ["alice", "bob"]}}`,
		"If-Match", read); st != 412 {
		t.Errorf("PUT with the ETag read before excel was added: %d %s, want 412", st, raw)
	}
	if _, tag, _, body := condDo(t, e, "GET", g, ""); tag != added || strings.Contains(body, "bob") {
		t.Errorf("after the refused PUT: ETag %s (want %s) %s", tag, added, body)
	}
	if st, _, _, raw := condDo(t, e, "PUT", g+"/applications/excel", `{"filePath": "x2.exe"}`); st != 200 {
		t.Fatalf("change excel: %d %s", st, raw)
	}
	if _, tag, _, _ := condDo(t, e, "GET", g, ""); tag != added {
		t.Errorf("changing an application moved its group's ETag %s to %s", added, tag)
	}
	if st, _, _, raw := condDo(t, e, "DELETE", g+"/applications/word", ""); st/100 != 2 {
		t.Fatalf("remove word: %d %s", st, raw)
	}
	_, removed, _, _ := condDo(t, e, "GET", g, "")
	if removed == added {
		t.Errorf("removing word left the group's ETag %s as it was", added)
	}
	if st, _, _, raw := condDo(t, e, "DELETE", g, "", "If-Match", added); st != 412 {
		t.Errorf("DELETE with the ETag read before word was removed: %d %s, want 412", st, raw)
	}
	if st, _, _, raw := condDo(t, e, "DELETE", g, "", "If-Match", removed); st/100 != 2 {
		t.Fatalf("DELETE with the ETag read now: %d %s", st, raw)
	}
	if st, _, _, raw := condDo(t, e, "GET", g+"/applications/excel", ""); st != 404 {
		t.Errorf("excel after its group's delete: %d %s, want 404", st, raw)
	}
}
