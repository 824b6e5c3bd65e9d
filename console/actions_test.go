package console_test

import (
	"context"
	"errors"
	"fmt"
	"html"
	"net/http"
	"net/url"
	"os"
	"regexp"
	"slices"
	"strings"
	"testing"

	"github.com/vdibroker/vdibroker"
	vhttp "github.com/vdibroker/vdibroker/http"
)

// The console's actions, through HTTP as a browser posts them: each needs
// the session's CSRF token, is decided by the API's access checker (role
// and host-pool scope, R-SEC) and leaves an audit entry; a refusal changes
// nothing. TestConsolePostgres runs them again on PostgreSQL.

// lastAudit returns the newest audit entry of action on target, or nil.
func (e *env) lastAudit(action, target string) *vdibroker.AuditEntry {
	e.t.Helper()
	l, err := e.admin.ListAudit(context.Background(), vhttp.AuditQuery{Action: action, Target: target, Newest: true})
	if err != nil {
		e.t.Fatalf("audit: %v", err)
	}
	for _, a := range l {
		if a.Outcome == vdibroker.AuditOK {
			return a
		}
	}
	return nil
}

// wantAudited fails unless the newest ok entry of action on target is by
// the principal named name.
func (e *env) wantAudited(action, target, name string) {
	e.t.Helper()
	a := e.lastAudit(action, target)
	if a == nil {
		e.t.Errorf("no audit entry %s on %s", action, target)
		return
	}
	if a.Principal.Name != name && a.Principal.ID != name {
		e.t.Errorf("audit entry %s on %s by %+v, want %s", action, target, a.Principal, name)
	}
}

func TestActionCreatePool(t *testing.T) {
	e := newEnv(t)
	ctx := context.Background()
	b := e.browser()
	b.signin(adminToken)
	csrf := b.csrf("/")
	wantContains(t, b.get("/"), `id="create-pool-form"`)

	// Without the CSRF token nothing is created, and the refusal is
	// audited (bounded, as a refused sign-in).
	wantStatus(t, b.post("/pools", url.Values{"name": {"nocsrf"}}), http.StatusForbidden)
	if l, err := e.admin.ListAudit(ctx, vhttp.AuditQuery{Action: "form"}); err != nil || len(l) != 1 || l[0].Target != "console/csrf" ||
		l[0].Outcome != vdibroker.AuditRefused || !strings.HasPrefix(l[0].Error, "POST /pools: ") {
		t.Errorf("the refused form's audit: %+v, %v", l, err)
	}
	a := b.post("/pools", url.Values{"csrf": {csrf}, "name": {"pool-new"}, "hostPoolType": {"Pooled"},
		"loadBalancerType": {"DepthFirst"}, "maxSessionLimit": {"6"}, "friendlyName": {"Finance"}})
	wantStatus(t, a, http.StatusSeeOther)
	if a.location != "/pools/pool-new" {
		t.Errorf("redirect to %q", a.location)
	}
	p, err := e.admin.GetHostPool(ctx, "pool-new")
	if err != nil || p.LoadBalancerType != "DepthFirst" || p.MaxSessionLimit != 6 || p.FriendlyName != "Finance" {
		t.Fatalf("created pool: %+v, %v", p, err)
	}
	e.wantAudited("hostpool.put", "hostpools/pool-new", "admin")
	// The entry names the console's request (R-SEC: an entry is found
	// from the request a log line names).
	if got, want := e.lastAudit("hostpool.put", "hostpools/pool-new").RequestID, a.header.Get("X-Request-Id"); got == "" || got != want {
		t.Errorf("the create's audit entry has request id %q, want the console request's %q", got, want)
	}
	wantContains(t, b.get("/pools/pool-new"), "Host pool pool-new created")

	// A second create of the name replaces nothing (If-None-Match: *):
	// the API's 412 (R-E13), saying it exists.
	a = b.post("/pools", url.Values{"csrf": {csrf}, "name": {"pool-new"}, "maxSessionLimit": {"2"}})
	wantStatus(t, a, http.StatusPreconditionFailed)
	wantContains(t, a, "exists already")
	if p, _ := e.admin.GetHostPool(ctx, "pool-new"); p.MaxSessionLimit != 6 {
		t.Errorf("a refused create changed the pool: limit %d", p.MaxSessionLimit)
	}
	// Bad values are refused beside their field, and the form stays open.
	for _, c := range []struct {
		limit, want string
	}{
		{"lots", "maxSessionLimit: must be a whole number"},
		{"0", "maxSessionLimit"},
	} {
		a = b.post("/pools", url.Values{"csrf": {csrf}, "name": {"pool-bad"}, "maxSessionLimit": {c.limit}})
		wantStatus(t, a, http.StatusBadRequest)
		wantContains(t, a, `<details open>`, `class="field invalid"`, c.want, `value="pool-bad"`)
		if _, err := e.admin.GetHostPool(ctx, "pool-bad"); vdibroker.ErrorCode(err) != vdibroker.ENotFound {
			t.Errorf("maxSessionLimit %q: a refused create made the pool (%v)", c.limit, err)
		}
	}
	a = b.post("/pools", url.Values{"csrf": {csrf}, "name": {""}})
	wantStatus(t, a, http.StatusBadRequest)
	wantContains(t, a, "name: is required")
}

func TestActionRegistrationKey(t *testing.T) {
	e := newEnv(t)
	e.seed()
	ctx := context.Background()
	b := e.browser()
	b.signin(adminToken)
	csrf := b.csrf("/pools/pool-a")
	a := b.post("/pools/pool-a/registrationtoken", url.Values{"csrf": {csrf}, "expiresInHours": {"8"}, "maxHosts": {"1"}})
	wantStatus(t, a, http.StatusCreated)
	if a.header.Get("Cache-Control") != "no-store" {
		t.Errorf("the key's page may be cached: Cache-Control %q", a.header.Get("Cache-Control"))
	}
	m := regexp.MustCompile(`id="key" value="([^"]+)"`).FindStringSubmatch(a.body)
	if m == nil {
		t.Fatalf("no key on the page:\n%s", a.body)
	}
	key := html.UnescapeString(m[1])
	wantContains(t, a, `data-copy="key"`, `id="key-expiry"`, "for 1 new host", "--registration-token "+m[1])
	list, err := e.admin.ListRegistrationTokens(ctx, "pool-a")
	if err != nil {
		t.Fatal(err)
	}
	var issued *vdibroker.RegistrationToken
	for _, k := range list {
		if k.MaxHosts == 1 {
			issued = k
		}
	}
	if issued == nil {
		t.Fatalf("the API lists no key for 1 host: %+v", list)
	}
	if d := issued.ExpireTime.Sub(issued.CreateTime).Hours(); d != 8 {
		t.Errorf("the key is valid %.2f hours, want 8", d)
	}
	wantContains(t, a, "Valid until <strong>"+issued.ExpireTime.UTC().Format("2006-01-02 15:04 UTC"))
	// It registers a host, once.
	if _, err := e.admin.Register(ctx, &vdibroker.RegisterRequest{Token: key, HostName: "host-9", Address: "host-9:3389"}); err != nil {
		t.Fatalf("register with the console's key: %v", err)
	}
	e.wantAudited("registrationtoken.create", "hostpools/pool-a/registrationtoken", "admin")
	wantContains(t, b.get("/pools/pool-a"), `data-key="`+issued.ID+`"`, "used up")

	// Bad input changes nothing.
	for _, form := range []url.Values{{"expiresInHours": {"soon"}}, {"expiresInHours": {"1000"}}, {"expiresInHours": {"8"}, "maxHosts": {"-1"}}} {
		form.Set("csrf", csrf)
		if a := b.post("/pools/pool-a/registrationtoken", form); a.status != http.StatusBadRequest {
			t.Errorf("%v: HTTP %d, want 400", form, a.status)
		}
	}
	if l, _ := e.admin.ListRegistrationTokens(ctx, "pool-a"); len(l) != len(list) {
		t.Errorf("refused keys were issued: %d keys, want %d", len(l), len(list))
	}
}

func TestActionRemoveHost(t *testing.T) {
	e := newEnv(t)
	e.seed("alice")
	ctx := context.Background()
	b := e.browser()
	b.signin(adminToken)
	csrf := b.csrf("/pools/pool-a/hosts/host-1")
	wantContains(t, b.get("/pools/pool-a/hosts/host-1"), `data-action="remove-host"`, `id="remove-force"`)
	// host-1 has alice's session: refused without force, on the host page.
	a := b.post("/pools/pool-a/hosts/host-1/delete", url.Values{"csrf": {csrf}})
	wantStatus(t, a, http.StatusConflict)
	wantContains(t, a, `id="verdict"`, "1 open session;")
	if _, err := e.admin.GetSessionHost(ctx, "pool-a", "host-1"); err != nil {
		t.Fatalf("a refused remove removed the host: %v", err)
	}
	a = b.post("/pools/pool-a/hosts/host-1/delete", url.Values{"csrf": {csrf}, "force": {"true"}})
	wantStatus(t, a, http.StatusSeeOther)
	if _, err := e.admin.GetSessionHost(ctx, "pool-a", "host-1"); vdibroker.ErrorCode(err) != vdibroker.ENotFound {
		t.Errorf("host-1 after its removal: %v", err)
	}
	if _, err := e.admin.Heartbeat(ctx, e.agents["host-1"], &vdibroker.HeartbeatRequest{}); vdibroker.ErrorCode(err) != vdibroker.EUnauthenticated {
		t.Errorf("the removed host's agent still heartbeats: %v", err)
	}
	e.wantAudited("sessionhost.delete", "hostpools/pool-a/sessionhosts/host-1", "admin")
	wantContains(t, b.get(a.location), "host-1 removed")
}

func TestActionResumeDrainedHost(t *testing.T) {
	e := newEnv(t)
	e.seed()
	ctx := context.Background()
	if _, err := e.admin.PatchSessionHost(ctx, "pool-a", "host-2", map[string]any{"allowNewSession": false}); err != nil {
		t.Fatal(err)
	}
	ops := e.token(vdibroker.RoleContributor)
	b := e.browser()
	b.signin(ops)
	page := b.get("/pools/pool-a/hosts/host-2")
	wantContains(t, page, "Drained by admin", `data-action="undrain"`)
	a := b.post("/pools/pool-a/hosts/host-2/drain", url.Values{"csrf": {b.csrf("/")}, "drain": {"false"}, "back": {"host"}})
	wantStatus(t, a, http.StatusSeeOther)
	if a.location != "/pools/pool-a/hosts/host-2" {
		t.Errorf("resume went back to %q, want the host page", a.location)
	}
	if h, err := e.admin.GetSessionHost(ctx, "pool-a", "host-2"); err != nil || !h.AllowNewSession {
		t.Fatalf("host-2 after Resume: %+v, %v", h, err)
	}
	e.wantAudited("sessionhost.update", "hostpools/pool-a/sessionhosts/host-2", "contributor-1")
	page = b.get(a.location)
	wantContains(t, page, "host-2 takes new sessions again", `data-action="drain"`)
	if strings.Contains(textOf(page.body), "Drained by") {
		t.Error("the resumed host's page still says it is drained")
	}
}

func TestActionSendMessage(t *testing.T) {
	e := newEnv(t)
	e.seed("alice")
	id := e.activeSession("alice")
	b := e.browser()
	b.signin(adminToken)
	wantContains(t, b.get("/sessions"), `/pools/pool-a/sessions/`+id+`/message?back=`)
	form := b.get("/pools/pool-a/sessions/" + id + "/message")
	wantStatus(t, form, http.StatusOK)
	wantContains(t, form, "Message to alice", `id="message-form"`)
	csrf := b.csrf("/pools/pool-a/sessions/" + id + "/message")

	a := b.post("/pools/pool-a/sessions/"+id+"/message", url.Values{"csrf": {csrf}, "message": {"bell\x07"}, "user": {"alice"}})
	wantStatus(t, a, http.StatusBadRequest)
	wantContains(t, a, "control characters", `id="e-message"`)
	a = b.post("/pools/pool-a/sessions/"+id+"/message", url.Values{"csrf": {csrf}, "message": {"Maintenance at 18:00.\r\nSave your work."}, "user": {"alice"}, "back": {"/sessions?pool=pool-a"}})
	wantStatus(t, a, http.StatusSeeOther)
	if a.location != "/sessions?pool=pool-a" {
		t.Errorf("back to %q", a.location)
	}
	// The textarea's CRLF reaches the agent as the LF typed.
	cmds := e.heartbeat("host-1", []vdibroker.AgentSession{{ID: "7", User: "alice", State: vdibroker.StateActive}})
	if len(cmds) != 1 || cmds[0].Type != vdibroker.CommandSendMessage || cmds[0].Message != "Maintenance at 18:00.\nSave your work." || cmds[0].AgentSessionID != "7" {
		t.Errorf("the agent got %+v, want the message once", cmds)
	}
	e.wantAudited("usersession.sendmessage", "hostpools/pool-a/usersessions/"+id+"/sendmessage", "admin")
	wantContains(t, b.get(a.location), "The message to alice is queued")
	if page := b.get(a.location); strings.Contains(page.body, "Warning:") {
		t.Errorf("a message to an Available host warns:\n%s", page.body)
	}

	// Her host's agent says it is stopping (Shutdown): the message and
	// the log off are queued all the same, and the flash says the host
	// cannot carry them out now (R-S4), as the API's answer does.
	if _, err := e.admin.Heartbeat(context.Background(), e.agents["host-1"], &vdibroker.HeartbeatRequest{ShuttingDown: true,
		Sessions: []vdibroker.AgentSession{{ID: "7", User: "alice", State: vdibroker.StateActive}}}); err != nil {
		t.Fatal(err)
	}
	a = b.post("/pools/pool-a/sessions/"+id+"/message", url.Values{"csrf": {csrf}, "message": {"Still there?"}, "user": {"alice"}})
	wantStatus(t, a, http.StatusSeeOther)
	wantContains(t, b.get(a.location), "The message to alice is queued", "Warning: session host host-1 is Shutdown")
	a = b.post("/pools/pool-a/sessions/"+id+"/logoff", url.Values{"csrf": {b.csrf("/sessions")}, "user": {"alice"}})
	wantStatus(t, a, http.StatusSeeOther)
	wantContains(t, b.get(a.location), "The log off of alice", "session is queued", "Warning: session host host-1 is Shutdown")
}

// TestActionLogoffOfPendingSession_RS4: the console's log off of a
// session its agent never reported says the session is logged off, as
// the broker ended it at once (R-S4), not that the host's agent will run
// it on its next heartbeat: the sessions page no longer lists it.
func TestActionLogoffOfPendingSession_RS4(t *testing.T) {
	e := newEnv(t)
	e.seed("alice")
	open, err := e.admin.ListUserSessions(t.Context(), "pool-a", vhttp.SessionQuery{})
	if err != nil || len(open) != 1 || open[0].State != vdibroker.StatePending {
		t.Fatalf("alice's session: %+v %v; want one Pending", open, err)
	}
	b := e.browser()
	b.signin(adminToken)
	a := b.post("/pools/pool-a/sessions/"+open[0].ID+"/logoff", url.Values{"csrf": {b.csrf("/sessions")}, "user": {"alice"}})
	wantStatus(t, a, http.StatusSeeOther)
	page := b.get(a.location)
	wantContains(t, page, "alice&#39;s session is logged off: it ended now, as its host&#39;s agent had not reported it yet")
	if strings.Contains(page.body, "runs it on its next heartbeat") {
		t.Errorf("the flash says the agent will run the logoff of a session already ended:\n%s", page.body)
	}
}

// TestActionSendHostMessage_RS4: a Helpdesk sends every user of a host a
// message from the host page (R-S4), as `sessionhost send-message` does:
// one command per Active and Disconnected session, one audit entry, the
// flash saying how many and the API's warning when the host cannot show
// it now. A Reader sees no such control and the broker refuses its post.
func TestActionSendHostMessage_RS4(t *testing.T) {
	e := newEnv(t)
	e.seed("alice", "bob") // DepthFirst: both on host-1
	agentSessions := []vdibroker.AgentSession{{ID: "7", User: "alice", State: vdibroker.StateActive}, {ID: "8", User: "bob", State: vdibroker.StateDisconnected}}
	e.heartbeat("host-1", agentSessions)
	b := e.browser()
	b.signin(e.token(vdibroker.RoleHelpdesk))
	wantContains(t, b.get("/pools/pool-a/hosts/host-1"), `href="/pools/pool-a/hosts/host-1/message"`, `data-action="message-host"`)
	// The pool's list offers it for the hosts with sessions.
	pool := b.get("/pools/pool-a")
	wantContains(t, pool, `/pools/pool-a/hosts/host-1/message?back=/pools/pool-a`)
	if strings.Contains(pool.body, `data-action="message-host" data-host="host-2"`) {
		t.Error("the pool page offers to message host-2's users; it has no session")
	}
	form := b.get("/pools/pool-a/hosts/host-1/message?back=/pools/pool-a")
	wantStatus(t, form, http.StatusOK)
	wantContains(t, form, "Message to every user of host-1", `id="message-form"`, `action="/pools/pool-a/hosts/host-1/message"`, `name="back" value="/pools/pool-a"`)
	csrf := b.csrf("/pools/pool-a/hosts/host-1/message")

	// Without this sign-in's CSRF token nothing is queued.
	a := b.post("/pools/pool-a/hosts/host-1/message", url.Values{"message": {"forged"}})
	wantStatus(t, a, http.StatusForbidden)
	a = b.post("/pools/pool-a/hosts/host-1/message", url.Values{"csrf": {csrf}, "message": {"bell\x07"}})
	wantStatus(t, a, http.StatusBadRequest)
	wantContains(t, a, "control characters", `id="e-message"`, "Message to every user of host-1")
	if cmds := e.heartbeat("host-1", agentSessions); len(cmds) != 0 {
		t.Fatalf("a refused message reached the agent: %+v", cmds)
	}

	a = b.post("/pools/pool-a/hosts/host-1/message", url.Values{"csrf": {csrf}, "message": {"Restart at 18:00.\r\nSave your work."}, "back": {"/pools/pool-a"}})
	wantStatus(t, a, http.StatusSeeOther)
	if a.location != "/pools/pool-a" {
		t.Errorf("back to %q, want the pool page", a.location)
	}
	page := b.get(a.location)
	wantContains(t, page, "The message is queued for 2 sessions on host-1")
	if strings.Contains(page.body, "Warning:") {
		t.Errorf("a message to an Available host warns:\n%s", page.body)
	}
	cmds := e.heartbeat("host-1", agentSessions)
	got := map[string]string{}
	for _, c := range cmds {
		if c.Type == vdibroker.CommandSendMessage {
			got[c.AgentSessionID] = c.Message
		}
	}
	if want := "Restart at 18:00.\nSave your work."; len(cmds) != 2 || got["7"] != want || got["8"] != want {
		t.Errorf("the agent got %+v, want the message once for each of sessions 7 and 8", cmds)
	}
	e.wantAudited("sessionhost.sendmessage", "hostpools/pool-a/sessionhosts/host-1/sendmessage", "helpdesk-1")

	// A host without sessions: nothing queued, and the flash says so.
	a = b.post("/pools/pool-a/hosts/host-2/message", url.Values{"csrf": {csrf}, "message": {"hello"}})
	wantStatus(t, a, http.StatusSeeOther)
	if a.location != "/pools/pool-a/hosts/host-2" {
		t.Errorf("back to %q, want host-2's page", a.location)
	}
	wantContains(t, b.get(a.location), "host-2 has no Active or Disconnected session: no message was queued")

	// host-1's agent says it is stopping: the messages are queued all the
	// same and the flash carries the API's warning (R-S4).
	if _, err := e.admin.Heartbeat(context.Background(), e.agents["host-1"], &vdibroker.HeartbeatRequest{ShuttingDown: true, Sessions: agentSessions}); err != nil {
		t.Fatal(err)
	}
	a = b.post("/pools/pool-a/hosts/host-1/message", url.Values{"csrf": {csrf}, "message": {"Still there?"}})
	wantStatus(t, a, http.StatusSeeOther)
	wantContains(t, b.get(a.location), "The message is queued for 2 sessions on host-1", "Warning: session host host-1 is Shutdown")
	// The same text again, still queued: the flash says they get it once.
	a = b.post("/pools/pool-a/hosts/host-1/message", url.Values{"csrf": {csrf}, "message": {"Still there?"}})
	wantStatus(t, a, http.StatusSeeOther)
	wantContains(t, b.get(a.location), "2 of them had it queued already and get it once")

	// A Reader is offered no such control, and the broker refuses its post.
	r := e.browser()
	r.signin(e.token(vdibroker.RoleReader))
	if pages := r.get("/pools/pool-a").body + r.get("/pools/pool-a/hosts/host-1").body; strings.Contains(pages, `data-action="message-host"`) {
		t.Error("a Reader is offered to message a host's users")
	}
	// Nor the form itself, typed in the address bar: it would offer a
	// send the broker refuses.
	form = r.get("/pools/pool-a/hosts/host-1/message")
	wantStatus(t, form, http.StatusForbidden)
	if strings.Contains(form.body, `id="message-form"`) {
		t.Errorf("a Reader is shown the form to message host-1's users:\n%s", form.body)
	}
	a = r.post("/pools/pool-a/hosts/host-1/message", url.Values{"csrf": {r.csrf("/pools/pool-a")}, "message": {"from a reader"}})
	wantStatus(t, a, http.StatusForbidden)
	wantContains(t, a, "Refused by the broker")
	if cmds := e.heartbeat("host-1", agentSessions); len(cmds) != 2 {
		t.Errorf("after the Reader's post the agent got %+v, want only the 2 queued before", cmds)
	}
}

func TestActionBulkDrain(t *testing.T) {
	e := newEnv(t)
	e.seed()
	ctx := context.Background()
	b := e.browser()
	b.signin(adminToken)
	page := b.get("/pools/pool-a")
	wantContains(t, page, `name="host" value="host-1" form="bulk"`, `id="bulk-drain"`)
	csrf := b.csrf("/pools/pool-a")
	allowed := func() string {
		t.Helper()
		var s []string
		for _, h := range []string{"host-1", "host-2", "host-3"} {
			got, err := e.admin.GetSessionHost(ctx, "pool-a", h)
			if err != nil {
				t.Fatal(err)
			}
			s = append(s, fmt.Sprint(got.AllowNewSession))
		}
		return strings.Join(s, ",")
	}
	a := b.post("/pools/pool-a/hosts/drain", url.Values{"csrf": {csrf}, "action": {"drain"}, "host": {"host-1", "host-3"}})
	wantStatus(t, a, http.StatusSeeOther)
	if got := allowed(); got != "false,true,false" {
		t.Errorf("after draining host-1 and host-3: allowNewSession %s", got)
	}
	for _, h := range []string{"host-1", "host-3"} {
		e.wantAudited("sessionhost.update", "hostpools/pool-a/sessionhosts/"+h, "admin")
	}
	wantContains(t, b.get("/pools/pool-a"), "Drained 2 hosts: host-1, host-3.")

	// One unknown host: the others are resumed, the page says which failed.
	a = b.post("/pools/pool-a/hosts/drain", url.Values{"csrf": {csrf}, "action": {"resume"}, "host": {"host-1", "nope", "host-3"}})
	wantStatus(t, a, http.StatusNotFound)
	wantContains(t, a, "Resumed 2 hosts: host-1, host-3.", "Refused by the broker for nope:")
	if got := allowed(); got != "true,true,true" {
		t.Errorf("after resuming: allowNewSession %s", got)
	}
	// Bad input changes nothing.
	many := url.Values{"csrf": {csrf}, "action": {"drain"}}
	for i := range 101 {
		many.Add("host", fmt.Sprintf("h%d", i))
	}
	for _, form := range []url.Values{
		many,
		{"csrf": {csrf}, "action": {"drain"}},
		{"csrf": {csrf}, "action": {"explode"}, "host": {"host-2"}},
	} {
		if a := b.post("/pools/pool-a/hosts/drain", form); a.status != http.StatusBadRequest {
			t.Errorf("%.80v: HTTP %d, want 400", form, a.status)
		}
	}
	if got := allowed(); got != "true,true,true" {
		t.Errorf("refused bulk drains changed hosts: %s", got)
	}
}

// TestActionDrainHostsLeftWithTwoUsers_RPE1: a Persistent host is one
// user's (R-PE1), but the pool's loadBalancerType may be changed at any
// time (R-P1): a MultiplePersistent pool made Persistent keeps its hosts
// of two users. The console's drains of such a host, one host's and the
// bulk one, are PATCHes of allowNewSession alone and are taken (an
// emergency cannot wait for its list to be mended); a PUT, which replaces
// the list, is checked whole and refused naming assignedUsers, and a
// PATCH that sets one user is taken.
func TestActionDrainHostsLeftWithTwoUsers_RPE1(t *testing.T) {
	e := newEnv(t)
	ctx := context.Background()
	if _, err := e.admin.PutHostPool(ctx, "pers", map[string]any{"hostPoolType": "Personal", "loadBalancerType": "MultiplePersistent", "personalDesktopAssignmentType": "Direct"}); err != nil {
		t.Fatal(err)
	}
	for host, users := range map[string][]string{"pd-1": {"alice", "bob"}, "pd-2": {"carol"}} {
		if _, err := e.admin.PutSessionHost(ctx, "pers", host, vhttp.SessionHostRequest{Address: vhttp.Ptr(host + ".example:3389"), AssignedUsers: &users}); err != nil {
			t.Fatalf("PUT %s with %v: %v", host, users, err)
		}
	}
	if _, err := e.admin.PatchHostPool(ctx, "pers", map[string]any{"loadBalancerType": "Persistent"}); err != nil {
		t.Fatalf("the pool made Persistent (R-P1): %v", err)
	}
	allowed := func() string {
		t.Helper()
		var s []string
		for _, h := range []string{"pd-1", "pd-2"} {
			got, err := e.admin.GetSessionHost(ctx, "pers", h)
			if err != nil {
				t.Fatal(err)
			}
			s = append(s, fmt.Sprint(got.AllowNewSession))
		}
		return strings.Join(s, ",")
	}
	b := e.browser()
	b.signin(adminToken)
	csrf := b.csrf("/pools/pers")
	a := b.post("/pools/pers/hosts/pd-1/drain", url.Values{"csrf": {csrf}, "drain": {"true"}})
	wantStatus(t, a, http.StatusSeeOther)
	if got := allowed(); got != "false,true" {
		t.Errorf("after draining pd-1: allowNewSession %s, want false,true", got)
	}
	a = b.post("/pools/pers/hosts/drain", url.Values{"csrf": {csrf}, "action": {"drain"}, "host": {"pd-1", "pd-2"}})
	wantStatus(t, a, http.StatusSeeOther)
	if got := allowed(); got != "false,false" {
		t.Errorf("after the bulk drain: allowNewSession %s, want false,false", got)
	}
	a = b.post("/pools/pers/hosts/drain", url.Values{"csrf": {csrf}, "action": {"resume"}, "host": {"pd-1", "pd-2"}})
	wantStatus(t, a, http.StatusSeeOther)
	if got := allowed(); got != "true,true" {
		t.Errorf("after the bulk resume: allowNewSession %s, want true,true", got)
	}

	two := []string{"alice", "bob"}
	_, err := e.admin.PutSessionHost(ctx, "pers", "pd-1", vhttp.SessionHostRequest{AssignedUsers: &two})
	var ve *vdibroker.Error
	if !errors.As(err, &ve) || ve.Code != vdibroker.EInvalid || ve.Field != "assignedUsers" || !strings.Contains(ve.Message, "0..1 users, got 2") {
		t.Errorf("a PUT of pd-1 with its two users: %v; want 400 naming assignedUsers and 0..1", err)
	}
	h, err := e.admin.PatchSessionHost(ctx, "pers", "pd-1", map[string]any{"assignedUsers": []string{"alice"}})
	if err != nil || !slices.Equal(h.AssignedUsers, []string{"alice"}) || !h.AllowNewSession {
		t.Errorf("a PATCH of pd-1 to alice alone: %v, %+v", err, h)
	}
}

func TestActionDeletePool(t *testing.T) {
	e := newEnv(t)
	e.seed("alice")
	ctx := context.Background()
	b := e.browser()
	b.signin(adminToken)
	csrf := b.csrf("/pools/pool-a")
	wantContains(t, b.get("/pools/pool-a"), `id="delete-pool-form"`, "also its 3 hosts and 1 session")
	a := b.post("/pools/pool-a/delete", url.Values{"csrf": {csrf}})
	wantStatus(t, a, http.StatusConflict)
	wantContains(t, a, "has 3 session hosts (host-1, host-2, host-3), 1 open session", "revoke their agents&#39; credentials")
	if _, err := e.admin.GetHostPool(ctx, "pool-a"); err != nil {
		t.Fatalf("a refused delete deleted the pool: %v", err)
	}
	a = b.post("/pools/pool-a/delete", url.Values{"csrf": {csrf}, "force": {"true"}})
	wantStatus(t, a, http.StatusSeeOther)
	if a.location != "/" {
		t.Errorf("after the delete: to %q", a.location)
	}
	if _, err := e.admin.GetHostPool(ctx, "pool-a"); vdibroker.ErrorCode(err) != vdibroker.ENotFound {
		t.Errorf("pool-a after its delete: %v", err)
	}
	e.wantAudited("hostpool.delete", "hostpools/pool-a", "admin")
	wantContains(t, b.get("/"), "Host pool pool-a deleted: 3 session hosts (host-1, host-2, host-3) deleted and their agents&#39; credentials revoked; 1 open session ended")
}

// TestActionsRefusedByScope (R-SEC): a Reader and a Contributor scoped to
// another pool post every action on pool-a with a valid CSRF token: the
// API refuses each (403, or 404 for what they may not see), nothing
// changes, and the refusal is in the audit trail.
func TestActionsRefusedByScope(t *testing.T) {
	e := newEnv(t)
	e.seed("alice")
	ctx := context.Background()
	if _, err := e.admin.PutHostPool(ctx, "pool-b", map[string]any{}); err != nil {
		t.Fatal(err)
	}
	open, err := e.admin.ListUserSessions(ctx, "pool-a", vhttp.SessionQuery{})
	if err != nil || len(open) != 1 {
		t.Fatalf("sessions: %v %v", open, err)
	}
	scoped, err := e.admin.CreateToken(ctx, vhttp.TokenRequest{Role: vdibroker.RoleContributor, Subject: "ops-b", HostPools: []string{"pool-b"}})
	if err != nil {
		t.Fatal(err)
	}
	actions := []struct {
		path string
		form url.Values
	}{
		{"/pools", url.Values{"name": {"pool-c"}}},
		{"/pools/pool-a/registrationtoken", url.Values{"expiresInHours": {"1"}}},
		{"/pools/pool-a/hosts/host-1/delete", url.Values{"force": {"true"}}},
		{"/pools/pool-a/hosts/drain", url.Values{"action": {"drain"}, "host": {"host-2"}}},
		{"/pools/pool-a/hosts/host-3/drain", url.Values{"drain": {"true"}, "back": {"host"}}},
		{"/pools/pool-a/sessions/" + open[0].ID + "/message", url.Values{"message": {"hi"}}},
		{"/pools/pool-a/hosts/host-1/message", url.Values{"message": {"hi"}}},
		{"/pools/pool-a/delete", url.Values{"force": {"true"}}},
	}
	for _, who := range []struct {
		name, token string
	}{{"Reader", e.token(vdibroker.RoleReader)}, {"scoped Contributor", scoped.Secret}} {
		b := e.browser()
		b.signin(who.token)
		csrf := b.csrf("/")
		// Nor are they shown the message forms (R-S4).
		for _, form := range []string{"/pools/pool-a/sessions/" + open[0].ID + "/message", "/pools/pool-a/hosts/host-1/message"} {
			if g := b.get(form); g.status != http.StatusForbidden && g.status != http.StatusNotFound || strings.Contains(g.body, `id="message-form"`) {
				t.Errorf("%s GET %s: HTTP %d, want 403 or 404 without the form", who.name, form, g.status)
			}
		}
		for _, act := range actions {
			if who.name == "scoped Contributor" && act.path == "/pools" {
				continue // pool-c is not pool-b either: below
			}
			act.form.Set("csrf", csrf)
			a := b.post(act.path, act.form)
			if a.status != http.StatusForbidden && a.status != http.StatusNotFound {
				t.Errorf("%s POST %s: HTTP %d, want 403 or 404", who.name, act.path, a.status)
			}
		}
	}
	// The scoped Contributor may not create a pool outside its scope.
	b := e.browser()
	b.signin(scoped.Secret)
	if a := b.post("/pools", url.Values{"csrf": {b.csrf("/")}, "name": {"pool-c"}}); a.status != http.StatusForbidden {
		t.Errorf("scoped create of pool-c: HTTP %d, want 403", a.status)
	}
	// Nothing changed.
	if _, err := e.admin.GetHostPool(ctx, "pool-c"); vdibroker.ErrorCode(err) != vdibroker.ENotFound {
		t.Errorf("pool-c was created: %v", err)
	}
	hosts, err := e.admin.ListSessionHosts(ctx, "pool-a")
	if err != nil || len(hosts) != 3 {
		t.Fatalf("pool-a's hosts: %d, %v", len(hosts), err)
	}
	for _, h := range hosts {
		if !h.AllowNewSession {
			t.Errorf("%s was drained", h.Name)
		}
	}
	if keys, _ := e.admin.ListRegistrationTokens(ctx, "pool-a"); len(keys) != 1 {
		t.Errorf("pool-a has %d registration keys, want seed's 1", len(keys))
	}
	if a := e.lastAudit("", "hostpools/pool-a/sessionhosts/host-2"); a != nil && a.Action == "sessionhost.update" {
		t.Errorf("an ok update of host-2 was audited: %+v", a)
	}
	refused, err := e.admin.ListAudit(ctx, vhttp.AuditQuery{Principal: "ops-b"})
	if err != nil || len(refused) == 0 || refused[len(refused)-1].Outcome != vdibroker.AuditRefused {
		t.Errorf("the scoped Contributor's refusals are not in the audit trail: %d entries, %v", len(refused), err)
	}
}

// TestConsolePostgres reruns the action tests on PostgreSQL, each in a
// schema of its own (skipped unless VDIBROKER_TEST_POSTGRES_DSN is set).
func TestConsolePostgres(t *testing.T) {
	if os.Getenv("VDIBROKER_TEST_POSTGRES_DSN") == "" {
		t.Skip("console PostgreSQL tests: set VDIBROKER_TEST_POSTGRES_DSN=postgres://... to run them")
	}
	suitePostgres = true // the subtests run one at a time
	defer func() { suitePostgres = false }()
	for _, tc := range []struct {
		name string
		fn   func(*testing.T)
	}{
		{"ActionCreatePool", TestActionCreatePool},
		{"ActionRegistrationKey", TestActionRegistrationKey},
		{"ActionRemoveHost", TestActionRemoveHost},
		{"ActionResumeDrainedHost", TestActionResumeDrainedHost},
		{"ActionSendMessage", TestActionSendMessage},
		{"ActionSendHostMessage", TestActionSendHostMessage_RS4},
		{"ActionBulkDrain", TestActionBulkDrain},
		{"ActionDrainHostsLeftWithTwoUsers", TestActionDrainHostsLeftWithTwoUsers_RPE1},
		{"ActionDeletePool", TestActionDeletePool},
		{"ActionsRefusedByScope", TestActionsRefusedByScope},
		{"GlobalSessionActions", TestGlobalSessionActions_RU3},
		{"AuditPage", TestAuditPage},
		{"AuditPageNewestFirstFiltersDiff", TestAuditPageNewestFirstFiltersDiff},
		{"SessionsUserSearch", TestSessionsUserSearch},
		{"LabelHostsTakingSessions", TestLabelHostsTakingSessions},
		{"LabelAdminLogoffEndReason", TestLabelAdminLogoffEndReason},
		{"LabelNoCapacityAllDrained", TestLabelNoCapacityAllDrained},
		{"PoolPagePublishedAsksNoPeer", TestPoolPagePublishedAsksNoPeer_RG5},
		{"PublishDesktopFromCard", TestPublishDesktopFromCard_RE1_RE2_RE4},
		{"PublishRemoteAppFromCard", TestPublishRemoteAppFromCard_RE7},
		{"PublishStaleForm", TestPublishStaleForm_RE13},
		{"PublishDeleteUnseenApp", TestPublishDeleteUnseenApp_RE13},
		{"PublishDeleteAppAddedInWindow", TestPublishDeleteAppAddedInWindow_RE13},
		{"PublishDotNamedApp", TestPublishDotNamedApp_RE7},
		{"PublishBadInput", TestPublishBadInput},
		{"PublishRefusedByRole", TestPublishRefusedByRole_RSEC},
		{"GlobalEntitlementFromConsoleReachesPeer", TestGlobalEntitlementFromConsoleReachesPeer_RE9_RG1},
		{"GlobalEntitlementStalePage", TestGlobalEntitlementStalePage_RE13},
		{"GlobalEntitlementPeerRefuses", TestGlobalEntitlementPeerRefuses_RG5},
		{"GlobalEntitlementNewerPeer", TestGlobalEntitlementNewerPeer_RG5},
		{"GlobalEntitlementRefusedByRole", TestGlobalEntitlementRefusedByRole_RSEC},
		{"GlobalEntitlementBadInput", TestGlobalEntitlementBadInput},
		{"GlobalEntitlementSendsNoToken", TestGlobalEntitlementSendsNoToken_RSEC},
		{"GlobalEntitlementSettingsFromConsole", TestGlobalEntitlementSettingsFromConsole_RG3},
		{"HomeSitesFromConsole", TestHomeSitesFromConsole_RG3},
		{"HomeSiteNamesBeyondASCII", TestHomeSiteNamesBeyondASCII_RSEC},
		{"GlobalEntitlementMemberPoolNotFound", TestGlobalEntitlementMemberPoolNotFound_RG3},
		{"GlobalEntitlementDeleteMissedByPeer", TestGlobalEntitlementDeleteMissedByPeer_RG5},
		{"FederationPeerLatency", TestFederationPeerLatency_RG5},
		{"HomeSiteKindRefused", TestHomeSiteKindRefused_RG3},
	} {
		t.Run(tc.name, tc.fn)
	}
}

// TestRefusalFitsPrincipal (R-SEC): a refused change says why in the
// terms of the principal refused. A Reader is told that Reader tokens
// change nothing; a Contributor or Helpdesk scoped to another pool is
// told the pools it may act on, not the Reader's sentence, which would
// tell it that its role changes nothing; an unscoped Helpdesk is told
// what Helpdesk may do.
func TestRefusalFitsPrincipal(t *testing.T) {
	e := newEnv(t)
	e.seed("alice")
	ctx := t.Context()
	if _, err := e.admin.PutHostPool(ctx, "pool-b", map[string]any{}); err != nil {
		t.Fatal(err)
	}
	open, err := e.admin.ListUserSessions(ctx, "pool-a", vhttp.SessionQuery{})
	if err != nil || len(open) != 1 {
		t.Fatalf("sessions: %v %v", open, err)
	}
	scoped := func(role string) string {
		tok, err := e.admin.CreateToken(ctx, vhttp.TokenRequest{Role: role, Subject: "b-" + role, HostPools: []string{"pool-b"}})
		if err != nil {
			t.Fatal(err)
		}
		return tok.Secret
	}
	const readerText = "Reader tokens can look at everything and change nothing"
	createPool := func(b *browser) answer {
		return b.post("/pools", url.Values{"csrf": {b.csrf("/")}, "name": {"pool-c"}})
	}
	logOff := func(b *browser) answer {
		return b.post("/pools/pool-a/sessions/"+open[0].ID+"/logoff", url.Values{"csrf": {b.csrf("/")}, "back": {"/sessions"}})
	}
	for _, tc := range []struct {
		name, token string
		do          func(*browser) answer
		want        string
		reader      bool // the Reader's sentence is shown
	}{
		{"Reader creates a pool", e.token(vdibroker.RoleReader), createPool, "role Reader may only read (GET)", true},
		{"scoped Contributor creates a pool", scoped(vdibroker.RoleContributor), createPool,
			"host pool &#34;pool-c&#34; is outside this token&#39;s host pools: it may act only on host pools pool-b", false},
		{"scoped Helpdesk logs off another pool's session", scoped(vdibroker.RoleHelpdesk), logOff,
			"host pool &#34;pool-a&#34; is outside this token&#39;s host pools: it may act only on host pools pool-b", false},
		{"Helpdesk creates a pool", e.token(vdibroker.RoleHelpdesk), createPool,
			"role Helpdesk may read, read the audit trail, and log off, disconnect and message sessions; this changes more", false},
	} {
		t.Run(tc.name, func(t *testing.T) {
			b := e.browser()
			b.signin(tc.token)
			a := tc.do(b)
			if a.status != http.StatusForbidden {
				t.Errorf("HTTP %d, want 403", a.status)
			}
			wantContains(t, a, "Refused by the broker: your token may not make this change ("+tc.want+").")
			if got := strings.Contains(a.body, readerText); got != tc.reader {
				t.Errorf("the Reader's sentence shown: %v, want %v:\n%s", got, tc.reader, a.body)
			}
		})
	}
}
