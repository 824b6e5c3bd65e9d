package http_test

import (
	"context"
	"encoding/json"
	"fmt"
	"log/slog"
	"net/http/httptest"
	"net/url"
	"os"
	"slices"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/vdibroker/vdibroker"
	vhttp "github.com/vdibroker/vdibroker/http"
	"github.com/vdibroker/vdibroker/internal/syncbuf"
	"github.com/vdibroker/vdibroker/internal/testserver"
	"github.com/vdibroker/vdibroker/store"
)

// oneEntry fails unless the audit trail holds exactly one entry of action
// on target, and returns it with its before and after decoded.
func oneEntry(t *testing.T, e *env, action, target string) (*vdibroker.AuditEntry, map[string]any, map[string]any) {
	t.Helper()
	list, err := e.admin.ListAudit(context.Background(), vhttp.AuditQuery{Action: action, Target: target})
	if err != nil {
		t.Fatalf("list audit: %v", err)
	}
	if len(list) != 1 {
		var b strings.Builder
		for _, a := range list {
			j, _ := json.Marshal(a)
			b.Write(j)
			b.WriteByte('\n')
		}
		t.Fatalf("%s on %s: %d audit entries, want 1:\n%s", action, target, len(list), b.String())
	}
	var before, after map[string]any
	_ = json.Unmarshal(list[0].Before, &before)
	_ = json.Unmarshal(list[0].After, &after)
	return list[0], before, after
}

// TestAudit_EveryAction: each audited action, made through the API, leaves
// exactly one entry naming its principal, target and the fields before and
// after.
func TestAudit_EveryAction(t *testing.T) {
	e := newEnvWith(t, envOptions{maintenance: time.Hour})
	ctx := context.Background()
	ctr, err := e.admin.CreateToken(ctx, vhttp.TokenRequest{Role: "Contributor", Subject: "ops", HostPools: []string{"aud1"}})
	if err != nil {
		t.Fatal(err)
	}
	ops := ctr.Secret
	do := func(method, path, body string, want int) []byte {
		t.Helper()
		status, _, raw := rawDo(t, e, method, path, ops, body)
		if status != want {
			t.Fatalf("%s %s: %d %s, want %d", method, path, status, raw, want)
		}
		return raw
	}
	byOps := func(a *vdibroker.AuditEntry) {
		t.Helper()
		p := a.Principal
		if p.Kind != "token" || p.ID != ctr.ID || p.Name != "ops" || p.Role != "Contributor" ||
			strings.Join(p.HostPools, ",") != "aud1" || a.Outcome != "ok" || a.RemoteAddr != "127.0.0.1" || a.RequestID == "" {
			t.Errorf("%s: entry %+v, want by token %s (ops, Contributor, [aud1]) from 127.0.0.1, ok", a.Action, a, ctr.ID)
		}
	}
	const p = "/api/v1/hostpools/aud1"

	do("PUT", p, `{"description": "first"}`, 201)
	a, before, after := oneEntry(t, e, "hostpool.put", "hostpools/aud1")
	byOps(a)
	if before != nil || after["name"] != "aud1" || after["description"] != "first" || a.HostPool != "aud1" {
		t.Errorf("hostpool.put: before %v after %v pool %q", before, after, a.HostPool)
	}

	do("PATCH", p, `{"description": "second"}`, 200)
	a, before, after = oneEntry(t, e, "hostpool.update", "hostpools/aud1")
	byOps(a)
	if before["description"] != "first" || after["description"] != "second" {
		t.Errorf("hostpool.update: before %v after %v", before, after)
	}

	// Registration: by the registration token, into its pool.
	raw := do("POST", p+"/registrationtoken", `{}`, 201)
	var rt vhttp.RegistrationTokenResponse
	_ = json.Unmarshal(raw, &rt)
	a, _, after = oneEntry(t, e, "registrationtoken.create", "hostpools/aud1/registrationtoken")
	byOps(a)
	if after["id"] != rt.ID || strings.Contains(string(a.After), rt.Token) {
		t.Errorf("registrationtoken.create: after %s (token %s)", a.After, rt.ID)
	}
	cred := e.register(rt.Token, "audh1")
	a, before, after = oneEntry(t, e, "sessionhost.register", "hostpools/aud1/sessionhosts/audh1")
	if a.Principal.Kind != "registration" || a.Principal.ID != rt.ID || before != nil || after["name"] != "audh1" || a.Outcome != "ok" {
		t.Errorf("sessionhost.register: %+v before %v after %v", a, before, after)
	}
	if strings.Contains(string(a.After), cred) {
		t.Errorf("the register entry shows the credential: %s", a.After)
	}
	res, err := e.admin.ReKey(ctx, cred, &vdibroker.RegisterRequest{Token: rt.Token, HostName: "audh1", Address: "audh1.example.test:3389"})
	if err != nil {
		t.Fatal(err)
	}
	e.agents["audh1"] = res.Credential
	a, before, after = oneEntry(t, e, "sessionhost.rekey", "hostpools/aud1/sessionhosts/audh1")
	if a.Principal.Kind != "registration" || before["name"] != "audh1" || after["name"] != "audh1" {
		t.Errorf("sessionhost.rekey: %+v before %v after %v", a, before, after)
	}
	e.heartbeat("audh1")

	// Drain.
	do("PATCH", p+"/sessionhosts/audh1", `{"allowNewSession": false}`, 200)
	a, before, after = oneEntry(t, e, "sessionhost.update", "hostpools/aud1/sessionhosts/audh1")
	byOps(a)
	if before["allowNewSession"] != true || after["allowNewSession"] != false {
		t.Errorf("drain: before %v after %v", before, after)
	}
	do("PUT", p+"/sessionhosts/audh1", `{"address": "moved.example.test:3389", "allowNewSession": true}`, 200)
	a, before, after = oneEntry(t, e, "sessionhost.put", "hostpools/aud1/sessionhosts/audh1")
	byOps(a)
	if before["address"] != "audh1.example.test:3389" || after["address"] != "moved.example.test:3389" {
		t.Errorf("sessionhost.put: before %v after %v", before, after)
	}

	// Sessions: message, disconnect, logoff.
	c := e.mustConnect("aud1", "alice")
	e.heartbeat("audh1", vdibroker.AgentSession{ID: "1", User: "alice", State: "Active"})
	sp := p + "/usersessions/" + c.SessionID
	do("POST", sp+"/sendmessage", `{"message": "maintenance at 03:00"}`, 202)
	a, before, after = oneEntry(t, e, "usersession.sendmessage", "hostpools/aud1/usersessions/"+c.SessionID+"/sendmessage")
	byOps(a)
	if before != nil || after["type"] != "SendMessage" || after["message"] != "maintenance at 03:00" || after["user"] != "alice" {
		t.Errorf("sendmessage: before %v after %v", before, after)
	}
	// One entry for a host's message, not one a session (R-S4).
	do("POST", p+"/sessionhosts/audh1/sendmessage", `{"message": "restart in 10 minutes"}`, 202)
	a, before, after = oneEntry(t, e, "sessionhost.sendmessage", "hostpools/aud1/sessionhosts/audh1/sendmessage")
	byOps(a)
	if before != nil || after["message"] != "restart in 10 minutes" || after["queued"] != 1.0 || after["sessionHost"] != "audh1" {
		t.Errorf("sessionhost.sendmessage: before %v after %v", before, after)
	}
	do("POST", sp+"/disconnect", "", 202)
	a, _, after = oneEntry(t, e, "usersession.disconnect", "hostpools/aud1/usersessions/"+c.SessionID+"/disconnect")
	byOps(a)
	if after["type"] != "Disconnect" || after["sessionId"] != c.SessionID {
		t.Errorf("disconnect: after %v", after)
	}
	do("DELETE", sp, "", 202)
	a, _, after = oneEntry(t, e, "usersession.logoff", "hostpools/aud1/usersessions/"+c.SessionID)
	byOps(a)
	if after["type"] != "Logoff" || after["sessionId"] != c.SessionID {
		t.Errorf("logoff: after %v", after)
	}
	// A Pending session ends at once: the entry shows its state change.
	e.pool("aud2", nil)
	e.addHosts("aud2", "aud2h", 1)
	c2 := e.mustConnect("aud2", "bob")
	if _, err := e.admin.Logoff(ctx, "aud2", c2.SessionID); err != nil {
		t.Fatal(err)
	}
	a, before, after = oneEntry(t, e, "usersession.logoff", "hostpools/aud2/usersessions/"+c2.SessionID)
	if a.Principal.Kind != "admin" || before["state"] != "Pending" || after["state"] != "LoggedOff" {
		t.Errorf("logoff of a Pending session: %+v before %v after %v", a, before, after)
	}

	do("POST", p+"/sessionhosts/audh1/resetregistration", "", 204)
	a, before, after = oneEntry(t, e, "sessionhost.resetregistration", "hostpools/aud1/sessionhosts/audh1/resetregistration")
	byOps(a)
	if before["registered"] != true || after["registered"] != false {
		t.Errorf("resetregistration: before %v after %v", before, after)
	}
	do("DELETE", p+"/registrationtokens/"+rt.ID, "", 204)
	a, before, after = oneEntry(t, e, "registrationtoken.revoke", "hostpools/aud1/registrationtokens/"+rt.ID)
	byOps(a)
	if before["id"] != rt.ID || after != nil {
		t.Errorf("registrationtoken.revoke: before %v after %v", before, after)
	}
	do("DELETE", p+"/sessionhosts/audh1?force=true", "", 204)
	a, before, after = oneEntry(t, e, "sessionhost.delete", "hostpools/aud1/sessionhosts/audh1")
	byOps(a)
	if before["name"] != "audh1" || after != nil {
		t.Errorf("sessionhost.delete: before %v after %v", before, after)
	}
	do("DELETE", p+"?force=true", "", 200) // with what went (SPEC §9)
	a, before, after = oneEntry(t, e, "hostpool.delete", "hostpools/aud1")
	byOps(a)
	if before["description"] != "second" || after != nil {
		t.Errorf("hostpool.delete: before %v after %v", before, after)
	}

	// Tokens, by the admin.
	tr, err := e.admin.CreateToken(ctx, vhttp.TokenRequest{Role: "Reader", Subject: "auditor", HostPools: []string{"aud2"}})
	if err != nil {
		t.Fatal(err)
	}
	list, _ := e.admin.ListAudit(ctx, vhttp.AuditQuery{Action: "token.create"})
	var found *vdibroker.AuditEntry
	for _, x := range list {
		var af map[string]any
		_ = json.Unmarshal(x.After, &af)
		if af["id"] == tr.ID {
			found, after = x, af
		}
	}
	if found == nil || found.Principal.Kind != "admin" || after["role"] != "Reader" || strings.Contains(string(found.After), tr.Secret) {
		t.Errorf("token.create: %+v after %v", found, after)
	}
	if err := e.admin.DeleteToken(ctx, tr.ID); err != nil {
		t.Fatal(err)
	}
	a, before, _ = oneEntry(t, e, "token.revoke", "tokens/"+tr.ID)
	if a.Principal.Kind != "admin" || before["subject"] != "auditor" || a.After == nil {
		t.Errorf("token.revoke: %+v before %v", a, before)
	}

	// Sign-in.
	do("POST", "/api/v1/signin", "", 200)
	a, _, _ = oneEntry(t, e, "signin", "signin")
	byOps(a)

	// The filters: by principal, since.
	mine, err := e.admin.ListAudit(ctx, vhttp.AuditQuery{Principal: ctr.ID})
	if err != nil || len(mine) < 10 {
		t.Errorf("?principal=%s: %d entries, %v", ctr.ID, len(mine), err)
	}
	for _, m := range mine {
		if m.Principal.ID != ctr.ID {
			t.Errorf("?principal= answered %+v", m.Principal)
		}
	}
	later, err := e.admin.ListAudit(ctx, vhttp.AuditQuery{Since: e.clock.Now().Add(time.Hour)})
	if err != nil || len(later) != 0 {
		t.Errorf("?since= an hour ahead: %d entries, %v", len(later), err)
	}
	pool1, err := e.admin.ListAudit(ctx, vhttp.AuditQuery{Target: "hostpools/aud1/"})
	if err != nil || len(pool1) < 10 {
		t.Errorf("?target=hostpools/aud1/: %d, %v", len(pool1), err)
	}
	// Paging follows nextLink.
	small := e.client(0, adminToken)
	small.PageSize = 3
	all, err := small.ListAudit(ctx, vhttp.AuditQuery{})
	if err != nil {
		t.Fatal(err)
	}
	big, _ := e.admin.ListAudit(ctx, vhttp.AuditQuery{})
	if len(all) != len(big) || len(all) < 15 {
		t.Errorf("paged %d entries, unpaged %d", len(all), len(big))
	}
	for i := 1; i < len(all); i++ {
		if all[i].Seq <= all[i-1].Seq {
			t.Errorf("entries out of order: %d after %d", all[i].Seq, all[i-1].Seq)
		}
	}
	// A scoped Contributor sees the entries of its pools only.
	scoped, err := e.client(0, ops).ListAudit(ctx, vhttp.AuditQuery{})
	if err != nil || len(scoped) == 0 {
		t.Fatalf("scoped list: %d, %v", len(scoped), err)
	}
	for _, s := range scoped {
		if s.HostPool != "aud1" {
			t.Errorf("scoped Contributor sees %s %s (pool %q)", s.Action, s.Target, s.HostPool)
		}
	}
	// Nor by a request id or a principal: the admin's logoff in aud2 is
	// found by the admin, not by the Contributor scoped to aud1.
	var other *vdibroker.AuditEntry
	for _, a := range big {
		if a.HostPool == "aud2" && a.Action == "usersession.logoff" {
			other = a
		}
	}
	if other == nil || other.RequestID == "" || other.Principal.Name == "" {
		t.Fatalf("the logoff in aud2: %+v", other)
	}
	for _, q := range []vhttp.AuditQuery{{RequestID: other.RequestID}, {Principal: other.Principal.ID}, {Principal: strings.ToUpper(other.Principal.Name)}} {
		if got, err := e.admin.ListAudit(ctx, q); err != nil || len(got) == 0 {
			t.Errorf("admin %+v: %d entries, %v; want the logoff in aud2 among them", q, len(got), err)
		}
		got, err := e.client(0, ops).ListAudit(ctx, q)
		if err != nil {
			t.Fatal(err)
		}
		for _, s := range got {
			if s.HostPool != "aud1" {
				t.Errorf("scoped Contributor %+v sees %s %s (pool %q)", q, s.Action, s.Target, s.HostPool)
			}
		}
	}
}

// TestAudit_PrincipalRefusalsBounded_RSEC: a caller with a valid API
// credential (here an end user's User token) that sends refused requests
// without end leaves PrincipalRefusalsPerWindow entries a window and one
// summary naming it, not a row each; another credential's refusals are
// still written whole.
func TestAudit_PrincipalRefusalsBounded_RSEC(t *testing.T) {
	e := newEnvWith(t, envOptions{maintenance: time.Hour})
	ctx := context.Background()
	e.pool("ref2", map[string]any{"description": "kept"})
	user, err := e.admin.CreateToken(ctx, vhttp.TokenRequest{Role: "User", Subject: "mallory"})
	if err != nil {
		t.Fatal(err)
	}
	rd, err := e.admin.CreateToken(ctx, vhttp.TokenRequest{Role: "Reader", Subject: "auditor"})
	if err != nil {
		t.Fatal(err)
	}
	refused := func(q vhttp.AuditQuery) []*vdibroker.AuditEntry {
		t.Helper()
		list, err := e.admin.ListAudit(ctx, q)
		if err != nil {
			t.Fatal(err)
		}
		return list
	}
	const sent = vdibroker.PrincipalRefusalsPerWindow + 5
	for i := range sent {
		if status, _, raw := rawDo(t, e, "PATCH", "/api/v1/hostpools/ref2", user.Secret, `{"description": "changed"}`); status != 403 {
			t.Fatalf("User PATCH %d: %d %s", i, status, raw)
		}
	}
	if got := refused(vhttp.AuditQuery{Principal: user.ID}); len(got) != vdibroker.PrincipalRefusalsPerWindow {
		t.Errorf("%d entries of the User token after %d refusals, want %d", len(got), sent, vdibroker.PrincipalRefusalsPerWindow)
	}
	if status, _, _ := rawDo(t, e, "PATCH", "/api/v1/hostpools/ref2", rd.Secret, `{"description": "changed"}`); status != 403 {
		t.Fatalf("Reader PATCH: %d", status)
	}
	if got := refused(vhttp.AuditQuery{Principal: rd.ID}); len(got) != 1 || got[0].Outcome != "refused" {
		t.Errorf("the Reader's refusal: %+v", got)
	}
	// The window closes: the next refusal writes the count, and itself.
	e.clock.Advance(vdibroker.RefusalWindow)
	if status, _, _ := rawDo(t, e, "PATCH", "/api/v1/hostpools/ref2", user.Secret, `{"description": "changed"}`); status != 403 {
		t.Fatalf("User PATCH: %d", status)
	}
	sum, _, _ := oneEntry(t, e, vdibroker.RefusalSummaryAction, "hostpools/ref2")
	if sum.Principal.ID != user.ID || !strings.HasPrefix(sum.Error, fmt.Sprintf("5 more refused requests of token %s", user.ID)) ||
		!strings.Contains(sum.Error, "PermissionDenied") {
		t.Errorf("summary %+v", sum)
	}
	if got := refused(vhttp.AuditQuery{Principal: user.ID, Action: "hostpool.update"}); len(got) != vdibroker.PrincipalRefusalsPerWindow+1 {
		t.Errorf("%d whole entries of the User token, want %d", len(got), vdibroker.PrincipalRefusalsPerWindow+1)
	}
	if p, _ := e.admin.GetHostPool(ctx, "ref2"); p.Description != "kept" {
		t.Errorf("a refused PATCH changed the pool: %q", p.Description)
	}
}

// TestAudit_Refusals: a refused request leaves one refusal entry and
// changes nothing.
func TestAudit_Refusals(t *testing.T) {
	e := newEnvWith(t, envOptions{maintenance: time.Hour})
	ctx := context.Background()
	e.pool("ref1", map[string]any{"description": "kept"})
	rd, err := e.admin.CreateToken(ctx, vhttp.TokenRequest{Role: "Reader", Subject: "auditor"})
	if err != nil {
		t.Fatal(err)
	}
	status, _, raw := rawDo(t, e, "PATCH", "/api/v1/hostpools/ref1", rd.Secret, `{"description": "changed"}`)
	if status != 403 {
		t.Fatalf("Reader PATCH: %d %s", status, raw)
	}
	a, _, _ := oneEntry(t, e, "hostpool.update", "hostpools/ref1")
	if a.Outcome != "refused" || a.Principal.ID != rd.ID || a.Principal.Role != "Reader" || !strings.HasPrefix(a.Error, "PermissionDenied") {
		t.Errorf("refusal entry %+v", a)
	}
	if p, _ := e.admin.GetHostPool(ctx, "ref1"); p.Description != "kept" {
		t.Errorf("refused PATCH changed the pool: %q", p.Description)
	}

	// No API deletes the trail: only the retention prune does.
	ctr, _ := e.admin.CreateToken(ctx, vhttp.TokenRequest{Role: "Contributor", Subject: "ops"})
	for _, m := range []string{"DELETE", "PUT", "PATCH", "POST"} {
		if status, _, raw := rawDo(t, e, m, "/api/v1/auditlog", ctr.Secret, `{}`); status != 405 {
			t.Errorf("%s /api/v1/auditlog: %d %s, want 405", m, status, raw)
		}
	}
	// A forged token: refused as anonymous.
	if status, _, _ := rawDo(t, e, "DELETE", "/api/v1/hostpools/ref1", "vdbt_forged", ""); status != 401 {
		t.Fatalf("forged DELETE: %d", status)
	}
	a, _, _ = oneEntry(t, e, "hostpool.delete", "hostpools/ref1")
	if a.Outcome != "refused" || a.Principal.Kind != "anonymous" || !strings.HasPrefix(a.Error, "Unauthenticated") {
		t.Errorf("forged refusal %+v", a)
	}
	// A failed sign-in from the same address in the same window
	// (RefusalWindow) is counted, not written (R-SEC: an anonymous
	// caller's refusals are bounded); when the window has passed, the
	// next refusal writes the count as one summary entry, and is itself
	// written whole, the first of its window.
	if status, _, _ := rawDo(t, e, "POST", "/api/v1/signin", "vdbt_wrong", ""); status != 401 {
		t.Fatalf("bad sign-in: %d", status)
	}
	if list, _ := e.admin.ListAudit(ctx, vhttp.AuditQuery{Action: "signin"}); len(list) != 0 {
		t.Errorf("the second refusal of a window was written: %+v", list)
	}
	e.clock.Advance(vdibroker.RefusalWindow)
	if status, _, _ := rawDo(t, e, "POST", "/api/v1/signin", "vdbt_wrong2", ""); status != 401 {
		t.Fatalf("bad sign-in: %d", status)
	}
	sum, _, _ := oneEntry(t, e, vdibroker.RefusalSummaryAction, "signin")
	if sum.Outcome != "refused" || sum.Principal.Kind != "anonymous" || sum.RemoteAddr == "" ||
		!strings.HasPrefix(sum.Error, "1 more refused requests from "+sum.RemoteAddr) || !strings.Contains(sum.Error, "signin signin: Unauthenticated") {
		t.Errorf("summary of the window's refusals %+v", sum)
	}
	a, _, _ = oneEntry(t, e, "signin", "signin")
	if a.Outcome != "refused" {
		t.Errorf("failed sign-in %+v", a)
	}

	// Registrations refused: a bogus token, and a takeover of a
	// registered host; the host keeps its credential.
	_, err = e.admin.Register(ctx, &vdibroker.RegisterRequest{Token: "vdbr_bogus", HostName: "refh1", Address: "refh1.example.test:3389"})
	wantCode(t, err, vdibroker.EUnauthenticated)
	a, _, _ = oneEntry(t, e, "sessionhost.register", "agent/register/refh1")
	if a.Outcome != "refused" || a.Principal.Kind != "registration" {
		t.Errorf("bogus registration %+v", a)
	}
	hosts := e.addHosts("ref1", "refh", 1)
	rt, err := e.admin.CreateRegistrationToken(ctx, "ref1", vhttp.RegistrationTokenRequest{})
	if err != nil {
		t.Fatal(err)
	}
	_, err = e.admin.Register(ctx, &vdibroker.RegisterRequest{Token: rt.Token, HostName: hosts[0], Address: "evil.example.test:3389"})
	wantCode(t, err, vdibroker.EConflict)
	// The token was valid: the refusal names its pool and the token.
	list, _ := e.admin.ListAudit(ctx, vhttp.AuditQuery{Action: "sessionhost.register", Target: "hostpools/ref1/sessionhosts/" + hosts[0]})
	if len(list) != 2 || list[0].Outcome != "ok" || list[1].Outcome != "refused" || !strings.HasPrefix(list[1].Error, "Conflict") ||
		list[1].Principal.ID != rt.ID {
		t.Errorf("registration then refused takeover: %+v", list)
	}
	e.heartbeat(hosts[0]) // its old credential still works
	if h, _ := e.admin.GetSessionHost(ctx, "ref1", hosts[0]); h.Address == "evil.example.test:3389" {
		t.Errorf("refused registration changed the host")
	}
	// Out of scope: refused, recorded, nothing changed.
	sc, _ := e.admin.CreateToken(ctx, vhttp.TokenRequest{Role: "Contributor", Subject: "other", HostPools: []string{"elsewhere"}})
	if status, _, _ := rawDo(t, e, "PATCH", "/api/v1/hostpools/ref1", sc.Secret, `{"description": "x"}`); status != 403 {
		t.Fatalf("out of scope PATCH: %d", status)
	}
	list, _ = e.admin.ListAudit(ctx, vhttp.AuditQuery{Action: "hostpool.update", Principal: sc.ID})
	if len(list) != 1 || list[0].Outcome != "refused" || !strings.Contains(list[0].Error, "outside") {
		t.Errorf("out of scope refusal %+v", list)
	}
	if p, _ := e.admin.GetHostPool(ctx, "ref1"); p.Description != "kept" {
		t.Errorf("out of scope PATCH changed the pool")
	}
}

// loggedServer is the API on a store of its own, its log lines (JSON) in
// the buffer returned.
func loggedServer(t *testing.T) (*httptest.Server, *syncbuf.Buffer) {
	t.Helper()
	st, err := store.Open(t.Context(), "", t.TempDir(), nil)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { st.Close() })
	logs := &syncbuf.Buffer{}
	srv := testserver.New(testserver.Config{Store: st, AdminToken: adminToken, Logger: slog.New(slog.NewJSONHandler(logs, nil))})
	ts := httptest.NewServer(srv.Handler())
	t.Cleanup(func() { ts.Close(); srv.Close() })
	return ts, logs
}

// TestAudit_LogLine: every entry written is one JSON log line, message
// "audit", for a SIEM; refusals too.
func TestAudit_LogLine(t *testing.T) {
	ts, logs := loggedServer(t)
	c := vhttp.NewClient(ts.URL, adminToken)
	if _, err := c.PutHostPool(context.Background(), "logp", map[string]any{}); err != nil {
		t.Fatal(err)
	}
	if _, err := vhttp.NewClient(ts.URL, "forged").DeleteHostPool(context.Background(), "logp", false); vdibroker.ErrorCode(err) != vdibroker.EUnauthenticated {
		t.Fatalf("forged delete: %v", err)
	}
	var lines []map[string]any
	for _, l := range strings.Split(strings.TrimSpace(logs.String()), "\n") {
		var m map[string]any
		if err := json.Unmarshal([]byte(l), &m); err != nil {
			t.Fatalf("not a JSON line: %q", l)
		}
		if m["msg"] == "audit" {
			lines = append(lines, m)
		}
	}
	if len(lines) != 2 {
		t.Fatalf("%d audit log lines, want 2 (the put, the refused delete): %s", len(lines), logs.String())
	}
	a, _ := lines[0]["audit"].(map[string]any)
	if a["action"] != "hostpool.put" || a["target"] != "hostpools/logp" || a["outcome"] != "ok" || lines[0]["request_id"] == nil {
		t.Errorf("put line %v", lines[0])
	}
	b, _ := lines[1]["audit"].(map[string]any)
	if b["action"] != "hostpool.delete" || b["outcome"] != "refused" {
		t.Errorf("refusal line %v", lines[1])
	}
}

// TestAudit_Federation: applying the federation document is audited with
// the document before and after.
func TestAudit_Federation(t *testing.T) {
	envs := fedPods(t, 1, 1, 1, vdibroker.DistributionSessionCount)
	e := envs[0]
	a, before, after := oneEntry(t, e, "federation.put", "federation")
	if a.Principal.Kind != "admin" || before != nil || after["generation"] == nil || after["pods"] == nil {
		t.Errorf("first apply: %+v before %v after %v", a, before, after)
	}
}

// TestAudit_NewestFirst: ?order=desc lists newest first and pages on
// backwards with nextLink (with 30 days kept, page 1 is today); ?since=
// and ?until= bound the time (since <= time < until); bad values are 400
// naming the field.
func TestAudit_NewestFirst(t *testing.T) {
	e := newEnvWith(t, envOptions{maintenance: time.Hour})
	ctx := context.Background()
	start := e.clock.Now()
	for i := range 5 {
		e.pool(fmt.Sprintf("day%d", i), nil) // one hostpool.put a day
		e.clock.Advance(24 * time.Hour)
	}
	all, err := e.admin.ListAudit(ctx, vhttp.AuditQuery{Action: "hostpool.put"})
	if err != nil || len(all) != 5 {
		t.Fatalf("oldest first: %d entries, %v", len(all), err)
	}
	newest, err := e.admin.ListAudit(ctx, vhttp.AuditQuery{Action: "hostpool.put", Newest: true})
	if err != nil {
		t.Fatal(err)
	}
	var got []string
	for _, a := range newest {
		got = append(got, a.Target)
	}
	if want := []string{"hostpools/day4", "hostpools/day3", "hostpools/day2", "hostpools/day1", "hostpools/day0"}; !slices.Equal(got, want) {
		t.Errorf("newest first: %v, want %v", got, want)
	}
	// Pages of 2, newest first: day4 day3 | day2 day1 | day0.
	status, _, raw := rawDo(t, e, "GET", "/api/v1/auditlog?action=hostpool.put&order=desc&limit=2", adminToken, "")
	var page struct {
		Value    []vdibroker.AuditEntry
		NextLink string
	}
	if err := json.Unmarshal(raw, &page); status != 200 || err != nil || len(page.Value) != 2 || page.Value[0].Target != "hostpools/day4" {
		t.Fatalf("first page: %d %s", status, raw)
	}
	status, _, raw = rawDo(t, e, "GET", page.NextLink, adminToken, "")
	if err := json.Unmarshal(raw, &page); status != 200 || err != nil || len(page.Value) != 2 || page.Value[0].Target != "hostpools/day2" || page.Value[1].Target != "hostpools/day1" {
		t.Fatalf("second page: %d %s", status, raw)
	}
	// Days 1 and 2: since the start of day 1, until the start of day 3.
	mid, err := e.admin.ListAudit(ctx, vhttp.AuditQuery{Action: "hostpool.put", Since: start.Add(24 * time.Hour), Until: start.Add(72*time.Hour - time.Second)})
	if err != nil || len(mid) != 2 || mid[0].Target != "hostpools/day1" || mid[1].Target != "hostpools/day2" {
		t.Errorf("since day 1 until day 3: %+v, %v", mid, err)
	}
	wantBadQueries(t, e, "/api/v1/auditlog", map[string]string{
		"order=newest":    "order",
		"until=yesterday": "until",
		"since=2026-12-02T00:00:00Z&until=2026-12-01T00:00:00Z": "until",
	})
}

// TestAudit_AfterSeq: AuditQuery.After lists the entries written after
// the one of that seq, by seq, not by time: an entry whose time is
// earlier than the one read last (a request that began before it and
// was written after) is still listed after it. A reader that follows
// the trail one page a look (MaxPages 1, as the demo's portal loop)
// reads a backlog in steps, losing nothing.
func TestAudit_AfterSeq(t *testing.T) {
	e := newEnvWith(t, envOptions{maintenance: time.Hour})
	ctx := context.Background()
	for i := range 5 {
		e.pool(fmt.Sprintf("seq%d", i), nil)
		if i == 2 {
			e.clock.Advance(-time.Hour) // seq3 and seq4 are written after seq2, an hour "earlier"
		}
	}
	all, err := e.admin.ListAudit(ctx, vhttp.AuditQuery{Action: "hostpool.put"})
	if err != nil || len(all) != 5 {
		t.Fatalf("all: %d entries, %v", len(all), err)
	}
	targets := func(list []*vdibroker.AuditEntry) []string {
		var out []string
		for _, a := range list {
			out = append(out, a.Target)
		}
		return out
	}
	after, err := e.admin.ListAudit(ctx, vhttp.AuditQuery{Action: "hostpool.put", After: all[2].Seq})
	if want := []string{"hostpools/seq3", "hostpools/seq4"}; err != nil || !slices.Equal(targets(after), want) {
		t.Errorf("after seq2: %v, %v; want %v", targets(after), err, want)
	}
	// One page of 2 a look: seq0 seq1 | seq2 seq3 | seq4 | nothing.
	step := vhttp.NewClient(e.urls[0], adminToken)
	step.PageSize, step.MaxPages = 2, 1
	var got [][]string
	q := vhttp.AuditQuery{Action: "hostpool.put"}
	for range 4 {
		list, err := step.ListAudit(ctx, q)
		if err != nil {
			t.Fatal(err)
		}
		got = append(got, targets(list))
		for _, a := range list {
			q.After = a.Seq
		}
	}
	want := [][]string{{"hostpools/seq0", "hostpools/seq1"}, {"hostpools/seq2", "hostpools/seq3"}, {"hostpools/seq4"}, nil}
	if !slices.EqualFunc(got, want, slices.Equal) {
		t.Errorf("a page a look: %v, want %v", got, want)
	}
}

// TestSigninsOfOnePrincipalAreBounded (R-SEC, audit): POST /signin is
// any principal's whoami recorded as a sign-in, the console's and the
// portal's; a User or Reader token calling it in a loop wrote an audit
// entry and a log line each time, without bound. A principal's sign-ins
// are as many as the web sessions take (16 a minute, R-SEC "Web
// sessions"); past them 429 with Retry-After, not recorded one by one.
func TestSigninsOfOnePrincipalAreBounded(t *testing.T) {
	e := newEnv(t)
	e.clock.Freeze() // the bucket refills by the test's clock alone, not a slow machine's
	ctx := context.Background()
	tr, err := e.admin.CreateToken(ctx, vhttp.TokenRequest{Role: "User", Subject: uniq("looper")})
	if err != nil {
		t.Fatal(err)
	}
	other := e.userToken(uniq("other"), nil)
	refused := 0
	for range 40 {
		status, _, _ := rawDo(t, e, "POST", "/api/v1/signin", tr.Secret, "")
		switch status {
		case 200:
		case 429:
			refused++
		default:
			t.Fatalf("sign-in answered %d", status)
		}
	}
	list, err := e.admin.ListAudit(ctx, vhttp.AuditQuery{Action: "signin", Principal: tr.ID})
	if err != nil {
		t.Fatal(err)
	}
	if len(list) != vhttp.SigninsPerPrincipal || refused != 40-vhttp.SigninsPerPrincipal {
		t.Errorf("%d sign-ins recorded, %d refused of 40; want %d recorded", len(list), refused, vhttp.SigninsPerPrincipal)
	}
	// Another principal's are its own; the looper's come back with time.
	if status, _, _ := rawDo(t, e, "POST", "/api/v1/signin", other, ""); status != 200 {
		t.Errorf("another user's sign-in answered %d", status)
	}
	e.clock.Advance(time.Minute)
	if status, _, _ := rawDo(t, e, "POST", "/api/v1/signin", tr.Secret, ""); status != 200 {
		t.Errorf("a sign-in a minute later answered %d", status)
	}
}

// TestSignoutsRecordedAndBounded (R-SEC, audit): POST /signout records a
// sign-in's end as the principal's "signout" (the console and the portal
// call it), so a helpdesk tells a sign-out from an expiry; a principal
// calling it in a loop is refused past the sign-ins' bound, in a bucket
// of its own: its sign-ins are not spent by it.
func TestSignoutsRecordedAndBounded(t *testing.T) {
	e := newEnv(t)
	e.clock.Freeze() // the bucket refills by the test's clock alone, not a slow machine's
	ctx := context.Background()
	tr, err := e.admin.CreateToken(ctx, vhttp.TokenRequest{Role: "User", Subject: uniq("leaver")})
	if err != nil {
		t.Fatal(err)
	}
	refused := 0
	for range 40 {
		switch status, body, _ := rawDo(t, e, "POST", "/api/v1/signout", tr.Secret, ""); status {
		case 204:
		case 429:
			refused++
		default:
			t.Fatalf("sign-out answered %d %s", status, body)
		}
	}
	list, err := e.admin.ListAudit(ctx, vhttp.AuditQuery{Action: "signout", Principal: tr.ID})
	if err != nil {
		t.Fatal(err)
	}
	if len(list) != vhttp.SigninsPerPrincipal || refused != 40-vhttp.SigninsPerPrincipal {
		t.Errorf("%d sign-outs recorded, %d refused of 40; want %d recorded", len(list), refused, vhttp.SigninsPerPrincipal)
	}
	if status, _, _ := rawDo(t, e, "POST", "/api/v1/signin", tr.Secret, ""); status != 200 {
		t.Errorf("a sign-in after the sign-outs' bound answered %d: it has a bucket of its own", status)
	}
	if status, _, _ := rawDo(t, e, "POST", "/api/v1/signout", "", ""); status != 401 {
		t.Errorf("an anonymous sign-out answered %d, want 401", status)
	}
}

// TestAudit_PrincipalInAnyCase_RE5: ?principal= finds a user's entries
// whichever case her name is typed in (R-E5: user names compare in any
// case), as the sessions of `usersession list --user` do; a helpdesk types
// the name as the user spells it. A token id still matches exactly.
func TestAudit_PrincipalInAnyCase_RE5(t *testing.T) {
	e := newEnv(t)
	ctx := context.Background()
	e.pool("casep", nil)
	tr, err := e.admin.CreateToken(ctx, vhttp.TokenRequest{Role: "Contributor", Subject: "Carol.Ops@Contoso.com"})
	if err != nil {
		t.Fatal(err)
	}
	carol := vhttp.NewClient(e.urls[0], tr.Secret)
	if _, err := carol.PatchHostPool(ctx, "casep", map[string]any{"description": "by carol"}); err != nil {
		t.Fatal(err)
	}
	for _, who := range []string{"Carol.Ops@Contoso.com", "carol.ops@contoso.com", "CAROL.OPS@CONTOSO.COM", tr.ID} {
		list, err := e.admin.ListAudit(ctx, vhttp.AuditQuery{Principal: who, Action: "hostpool.update"})
		if err != nil || len(list) != 1 || list[0].Principal.ID != tr.ID {
			t.Errorf("?principal=%s: %+v, %v; want carol's one update", who, list, err)
		}
	}
	if list, err := e.admin.ListAudit(ctx, vhttp.AuditQuery{Principal: strings.ToUpper(tr.ID)}); err != nil || len(list) != 0 {
		t.Errorf("?principal= her token id in upper case: %d entries, %v; a token id is matched exactly", len(list), err)
	}
}

// TestAuditActionsDocumented: every action an audit list filters by is in
// docs/behaviour.md's "Audit actions", the list the refusal of an unknown
// one points at (R-SEC).
func TestAuditActionsDocumented(t *testing.T) {
	doc, err := os.ReadFile("../docs/behaviour.md")
	if err != nil {
		t.Fatal(err)
	}
	_, section, _ := strings.Cut(string(doc), "- **Audit actions**")
	section, _, _ = strings.Cut(section, "\n- **")
	for _, a := range vhttp.AuditActions() {
		if !strings.Contains(section, "`"+a+"`") {
			t.Errorf("docs/behaviour.md \"Audit actions\" does not list %s", a)
		}
	}
}

// TestAuditUnknownActionEchoBounded: the refusal of an unknown ?action=
// quotes a long one cut (R-SEC): a Helpdesk token's URL of a megabyte is
// not answered back whole.
func TestAuditUnknownActionEchoBounded(t *testing.T) {
	e := newEnv(t)
	for _, action := range []string{strings.Repeat("x", 4000), "sessionhost." + strings.Repeat("é", 2000)} {
		status, _, raw := rawDo(t, e, "GET", "/api/v1/auditlog?action="+action, adminToken, "")
		var body struct{ Error vdibroker.Error }
		_ = json.Unmarshal(raw, &body)
		if status != 400 || body.Error.Field != "action" || len(body.Error.Message) > 600 || !strings.Contains(body.Error.Message, action[:100]) {
			t.Errorf("?action= of %d bytes: %d, field %q, message of %d bytes; want 400 naming action, the value cut", len(action), status, body.Error.Field, len(body.Error.Message))
		}
	}
}

// TestAuditActionNotARouteOfTheAPI_RSEC: ?action= of a pattern the server
// serves but does not audit (the console's "/", Prometheus's "GET
// /metrics", the API's 404 "/api/v1/") finds nothing and is no audit
// action: a 400 naming action, as a typo is, not an empty answer that
// reads as "nobody did it". A refused API route's pattern is an action,
// with entries or not yet.
func TestAuditActionNotARouteOfTheAPI_RSEC(t *testing.T) {
	e := newEnvWith(t, envOptions{mount: []string{"/", "GET /metrics"}})
	for _, path := range []string{"/", "/metrics"} {
		if status, _, raw := rawDo(t, e, "GET", path, "", ""); status != 200 || string(raw) != "mounted" {
			t.Fatalf("GET %s: %d %q; want the mounted handler's 200", path, status, raw)
		}
	}
	// A refused read is recorded under its route's pattern.
	if status, _, _ := rawDo(t, e, "GET", "/api/v1/hostpools", "not-a-token", ""); status != 401 {
		t.Fatalf("GET /hostpools with a bad token: %d, want 401", status)
	}
	for action, want := range map[string]int{"GET /api/v1/hostpools": 1, "GET /api/v1/hostpools/{pool}": 0} {
		status, ve, raw := rawDo(t, e, "GET", "/api/v1/auditlog?action="+url.QueryEscape(action), adminToken, "")
		var body struct{ Value []vdibroker.AuditEntry }
		_ = json.Unmarshal(raw, &body)
		if status != 200 || len(body.Value) != want {
			t.Errorf("?action=%s: %d %v, %d entries; want 200 and %d", action, status, ve, len(body.Value), want)
		}
	}
	// No prefixes: the docs promise exact actions.
	for _, action := range []string{"hostpool.", "hostpool.*"} {
		status, ve, _ := rawDo(t, e, "GET", "/api/v1/auditlog?action="+url.QueryEscape(action), adminToken, "")
		if status != 400 || ve == nil || ve.Field != "action" || !strings.Contains(ve.Message, "hostpool.put") {
			t.Errorf("?action=%s: %d %+v; want 400 naming action and the hostpool actions", action, status, ve)
		}
	}
	for action, served := range map[string]bool{"/": true, "GET /metrics": true, "/api/v1/": true, "GET /": false, "/metrics": false} {
		status, ve, _ := rawDo(t, e, "GET", "/api/v1/auditlog?action="+url.QueryEscape(action), adminToken, "")
		if status != 400 || ve == nil || ve.Code != vdibroker.EInvalid || ve.Field != "action" ||
			!strings.Contains(ve.Message, fmt.Sprintf("%q", action)) || !strings.Contains(ve.Message, `"GET /api/v1/hostpools"`) ||
			!strings.Contains(ve.Message, "docs/behaviour.md") {
			t.Errorf("?action=%s: %d %+v; want 400 InvalidArgument naming action, quoting it, with the allowed values", action, status, ve)
			continue
		}
		if says := strings.Contains(ve.Message, "not one of the API's"); says != served {
			t.Errorf("?action=%s: %q; says it is a route served but not audited: %v, want %v", action, ve.Message, says, served)
		}
		// Not "not audited": the console's and the portal's sign-ins,
		// refused forms and launches are, under actions of their own.
		if served && (strings.Contains(ve.Message, "are not audited") || !strings.Contains(ve.Message, "under its pattern") ||
			!strings.Contains(ve.Message, "portal.launch")) {
			t.Errorf("?action=%s: %q; want it to say no entry is under its pattern, and the console's and portal's actions", action, ve.Message)
		}
	}
}

// TestAuditActionsIncludeRestore: the action vdibroker restore writes is
// one an audit list filters by, so asking whether a store was ever
// restored answers an empty list, not "no such action" (R-SEC).
func TestAuditActionsIncludeRestore(t *testing.T) {
	if !slices.Contains(vhttp.AuditActions(), store.ActionStoreRestore) {
		t.Errorf("AuditActions lacks %s, which vdibroker restore writes", store.ActionStoreRestore)
	}
}

// TestAuditActionOfRouteNeverAudited_RSEC: the API's routes that refuse
// no one, the health probe (GET /healthz, probed without a token or
// with a bad one) and the gateways' public keys (GET
// /api/v1/gateway/keys), write no entry, whatever the caller sends, so
// their patterns are no actions: ?action= of one is a 400 naming
// action, saying its requests are not audited, as a typo is, not an
// empty answer that reads as "nobody did it". The pattern of a route
// whose refusals are recorded under it (a host's heartbeat with a bad
// credential) is still an action.
func TestAuditActionOfRouteNeverAudited_RSEC(t *testing.T) {
	e := newEnv(t)
	for _, path := range []string{"/healthz", "/healthz?live", "/api/v1/gateway/keys"} {
		for _, token := range []string{"", "not-a-token", adminToken} {
			if status, ve, _ := rawDo(t, e, "GET", path, token, ""); status != 200 {
				t.Fatalf("GET %s with token %q: %d %+v, want 200", path, token, status, ve)
			}
		}
	}
	if status, _, _ := rawDo(t, e, "POST", "/api/v1/agent/heartbeat", "not-a-credential", "{}"); status != 401 {
		t.Fatalf("a heartbeat with a bad credential: %d, want 401", status)
	}
	never := []string{"GET /healthz", "GET /api/v1/gateway/keys"}
	all, err := e.store.ListAudit(t.Context(), vdibroker.AuditFilter{Limit: 1000})
	if err != nil {
		t.Fatal(err)
	}
	for _, a := range all {
		if slices.Contains(never, a.Action) {
			t.Errorf("entry %d has action %q: a route that refuses no one was audited", a.Seq, a.Action)
		}
	}
	for _, action := range never {
		status, ve, _ := rawDo(t, e, "GET", "/api/v1/auditlog?action="+url.QueryEscape(action), adminToken, "")
		if status != 400 || ve == nil || ve.Code != vdibroker.EInvalid || ve.Field != "action" ||
			!strings.Contains(ve.Message, fmt.Sprintf("%q", action)) || !strings.Contains(ve.Message, "requests are not audited") ||
			!strings.Contains(ve.Message, `"GET /api/v1/hostpools"`) || !strings.Contains(ve.Message, "docs/behaviour.md") {
			t.Errorf("?action=%s: %d %+v; want 400 InvalidArgument naming action, quoting it, saying its requests are not audited, with the allowed values", action, status, ve)
		}
	}
	status, ve, raw := rawDo(t, e, "GET", "/api/v1/auditlog?action="+url.QueryEscape("POST /api/v1/agent/heartbeat"), adminToken, "")
	var body struct{ Value []vdibroker.AuditEntry }
	_ = json.Unmarshal(raw, &body)
	if status != 200 || len(body.Value) != 1 || body.Value[0].Outcome != vdibroker.AuditRefused {
		t.Errorf("?action=POST /api/v1/agent/heartbeat: %d %+v, %d entries; want 200 and the refused heartbeat", status, ve, len(body.Value))
	}
}

// TestAuditActionOfAnAuditedRoutesPattern_RSEC: a route of
// auditedActions writes its entries, refusals too, under its action
// (PUT /api/v1/hostpools/{pool}: hostpool.put), never under its
// pattern, so ?action= of the pattern finds nothing: a 400 naming
// action and the action to ask for, not an empty answer.
func TestAuditActionOfAnAuditedRoutesPattern_RSEC(t *testing.T) {
	e := newEnv(t)
	e.pool("audp", nil)
	if status, _, _ := rawDo(t, e, "PUT", "/api/v1/hostpools/audq", "not-a-token", "{}"); status != 401 {
		t.Fatalf("PUT of a pool with a bad token: %d, want 401", status)
	}
	list, err := e.admin.ListAudit(t.Context(), vhttp.AuditQuery{Action: "hostpool.put"})
	if err != nil || len(list) != 2 || list[0].Outcome == list[1].Outcome {
		t.Fatalf("?action=hostpool.put: %d entries, %v; want the put and the refused one", len(list), err)
	}
	for pattern, action := range map[string]string{"PUT /api/v1/hostpools/{pool}": "hostpool.put", "POST /api/v1/agent/register": "sessionhost.register"} {
		status, ve, _ := rawDo(t, e, "GET", "/api/v1/auditlog?action="+url.QueryEscape(pattern), adminToken, "")
		if status != 400 || ve == nil || ve.Code != vdibroker.EInvalid || ve.Field != "action" ||
			!strings.Contains(ve.Message, fmt.Sprintf("%q", pattern)) || !strings.Contains(ve.Message, "under its action, "+action) {
			t.Errorf("?action=%s: %d %+v; want 400 naming action, quoting it, naming %s", pattern, status, ve, action)
		}
	}
}

// TestAuditActionOfAnEarlierReleaseNarrowed_RSEC: an entry an earlier
// release wrote under a route's pattern that now has an action of its
// own (POST /api/v1/gateway/keys/rotate, before gatewaykey.rotate) is
// still found by ?action= of the pattern; and narrowed by other filters
// (?since= after it, another ?target=, a page ?after= it) to nothing,
// the answer is an empty list, not a 400 saying no entry has that
// action. An action no entry has stays a 400, narrowed or not.
func TestAuditActionOfAnEarlierReleaseNarrowed_RSEC(t *testing.T) {
	e := newEnv(t)
	const pattern = "POST /api/v1/gateway/keys/rotate"
	old := &vdibroker.AuditEntry{Time: time.Date(2026, 1, 2, 3, 4, 5, 0, time.UTC), Action: pattern, Target: "gateway/keys/rotate",
		Principal: vdibroker.AuditPrincipal{Kind: vdibroker.PrincipalAnonymous}, Outcome: vdibroker.AuditRefused, Error: "Unauthenticated: no token"}
	if err := e.store.AppendAudit(t.Context(), old); err != nil {
		t.Fatal(err)
	}
	q := "/api/v1/auditlog?action=" + url.QueryEscape(pattern)
	for query, want := range map[string]int{
		"":                            1,
		"&since=2026-02-01T00:00:00Z": 0,
		"&until=2026-01-01T00:00:00Z": 0,
		"&target=hostpools/":          0,
		"&principal=alice":            0,
		"&requestId=no-such-request":  0,
		"&after=" + strconv.FormatInt(old.Seq, 10): 0,
	} {
		status, ve, raw := rawDo(t, e, "GET", q+query, adminToken, "")
		var body struct{ Value []vdibroker.AuditEntry }
		_ = json.Unmarshal(raw, &body)
		if status != 200 || len(body.Value) != want {
			t.Errorf("?action=%s%s: %d %+v, %d entries; want 200 and %d: an earlier release wrote an entry under it", pattern, query, status, ve, len(body.Value), want)
		}
	}
	for _, action := range []string{"GET /healthz", "PUT /api/v1/hostpools/{pool}", "sessionhost.updat"} {
		status, ve, _ := rawDo(t, e, "GET", "/api/v1/auditlog?since=2026-02-01T00:00:00Z&action="+url.QueryEscape(action), adminToken, "")
		if status != 400 || ve == nil || ve.Field != "action" {
			t.Errorf("?action=%s&since=: %d %+v; want 400 naming action: no entry has it", action, status, ve)
		}
	}
}
