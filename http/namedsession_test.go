package http_test

import (
	"bytes"
	"encoding/json"
	"io"
	nethttp "net/http"
	"strconv"
	"strings"
	"sync/atomic"
	"testing"

	"github.com/vdibroker/vdibroker"
	"github.com/vdibroker/vdibroker/federation"
	vhttp "github.com/vdibroker/vdibroker/http"
)

// TestConnectNamedSession_RC1_RPE3: erin has sessions on both her hosts
// of a MultiplePersistent pool. A connect naming the second's id
// (sessionId, as the user portal's Reconnect of that row sends it)
// reconnects that one; without it, or naming bob's session in the pool
// or an id of none, the first host's (R-PE3: the first in query order).
// A malformed id is 400 on sessionId.
func TestConnectNamedSession_RC1_RPE3(t *testing.T) {
	e := newEnv(t)
	ctx := t.Context()
	e.pool("multi", map[string]any{"hostPoolType": "Personal", "loadBalancerType": "MultiplePersistent", "personalDesktopAssignmentType": "Direct"})
	hosts := e.addHosts("multi", "mph", 3)
	for i, user := range []string{"erin", "erin", "bob"} {
		if _, err := e.admin.PatchSessionHost(ctx, "multi", hosts[i], map[string]any{"assignedUsers": []string{user}}); err != nil {
			t.Fatal(err)
		}
	}
	var ids []string
	for i, user := range []string{"erin", "erin", "bob"} {
		c, err := e.admin.Connect(ctx, "multi", vhttp.ConnectRequest{User: user, SessionHost: hosts[i]})
		if err != nil {
			t.Fatal(err)
		}
		ids = append(ids, c.SessionID)
		e.heartbeat(hosts[i], vdibroker.AgentSession{ID: "1", User: user, State: vdibroker.StateDisconnected})
	}
	for _, tc := range []struct {
		name, sessionID string
		want            int // of ids and hosts
	}{
		{"none named", "", 0},
		{"her second", ids[1], 1},
		{"bob's", ids[2], 0},
		{"an id of none", "no-such-session", 0},
	} {
		t.Run(tc.name, func(t *testing.T) {
			r, err := e.admin.Connect(ctx, "multi", vhttp.ConnectRequest{User: "erin", SessionID: tc.sessionID})
			if err != nil {
				t.Fatal(err)
			}
			if !r.Reconnect || r.SessionID != ids[tc.want] || r.SessionHost != hosts[tc.want] {
				t.Errorf("erin's connect naming %q: session %s on %s (reconnect %v), want %s on %s", tc.sessionID, r.SessionID, r.SessionHost, r.Reconnect, ids[tc.want], hosts[tc.want])
			}
		})
	}
	if n := e.sessionsPerHost("multi"); n[hosts[0]] != 1 || n[hosts[1]] != 1 || n[hosts[2]] != 1 {
		t.Errorf("sessions per host after the connects: %v, want one each", n)
	}
	// Drained, her second host still answers its session named (R-C1:
	// drain mode is ignored for a reconnect; only an Unavailable or
	// Shutdown host's session is passed over).
	if _, err := e.admin.PatchSessionHost(ctx, "multi", hosts[1], map[string]any{"allowNewSession": false}); err != nil {
		t.Fatal(err)
	}
	if r, err := e.admin.Connect(ctx, "multi", vhttp.ConnectRequest{User: "erin", SessionID: ids[1]}); err != nil || !r.Reconnect || r.SessionID != ids[1] {
		t.Errorf("erin's connect naming her session on her drained host: %+v %v, want a reconnect of %s", r, err, ids[1])
	}
	status, ve, raw := rawDo(t, e, "POST", "/api/v1/hostpools/multi/connect", adminToken, `{"user":"erin","sessionId":"`+strings.Repeat("x", 65)+`"}`)
	if status != nethttp.StatusBadRequest || ve == nil || ve.Field != "sessionId" || !strings.Contains(ve.Message, "64") {
		t.Errorf("a session id of 65 characters: %d %s, want 400 on sessionId naming its bound", status, raw)
	}
}

// TestGlobalConnectNamedSession_RG1 is testGlobalConnectNamedSession on
// SQLite.
func TestGlobalConnectNamedSession_RG1(t *testing.T) { testGlobalConnectNamedSession(t, "") }

// TestGlobalConnectNamedSessionPostgres_RG1 is
// testGlobalConnectNamedSession on PostgreSQL, each pod in a schema of its
// own.
func TestGlobalConnectNamedSessionPostgres_RG1(t *testing.T) {
	testGlobalConnectNamedSession(t, postgresDSN(t))
}

// testGlobalConnectNamedSession (R-G1, R-C1, R-U3): alice has Disconnected
// sessions in four member pools of "office": office-pod0 and lab-pod0 in
// pod0, office-pod1 and multi-pod1 (MultiplePersistent, two hosts of hers,
// a session on each) in pod1; and one in solo-pod0, a pool of no
// entitlement. Her global connect at pod0 naming one of them (session, as
// the user portal's Reconnect of its row sends it) reconnects exactly that
// one, in this pod or in pod1 (the pod asked reconnects the one named,
// not its pool's first); naming none, bob's, one out of the entitlement,
// one named by the wrong pool or pod, or once the scope leaves pod1 out,
// one there, it reconnects the first in search order (office-pod0's), as
// without. Nothing new is made, bob's session is left alone, and a
// malformed session is 400 naming the part.
func testGlobalConnectNamedSession(t *testing.T, dsn string) {
	envs := fedPodsOn(t, dsn, 2, 1, 5, vdibroker.DistributionNone, false, nil)
	ctx := t.Context()
	near, far := envs[0], envs[1]
	near.pool("lab-pod0", map[string]any{"maxSessionLimit": 5})
	near.addHosts("lab-pod0", "lab-h", 1)
	near.pool("solo-pod0", map[string]any{"maxSessionLimit": 5})
	near.addHosts("solo-pod0", "solo-h", 1)
	far.pool("multi-pod1", map[string]any{"hostPoolType": "Personal", "loadBalancerType": "MultiplePersistent", "personalDesktopAssignmentType": "Direct"})
	mp := far.addHosts("multi-pod1", "mp-h", 2)
	for _, h := range mp {
		if _, err := far.admin.PatchSessionHost(ctx, "multi-pod1", h, map[string]any{"assignedUsers": []string{"alice"}}); err != nil {
			t.Fatal(err)
		}
	}
	st, err := near.admin.GetFederation(ctx)
	if err != nil {
		t.Fatal(err)
	}
	doc := *st.Document
	doc.Generation++
	office := doc.GlobalEntitlements[0]
	office.Members = []vdibroker.Member{{Pod: "pod0", HostPool: "office-pod0"}, {Pod: "pod0", HostPool: "lab-pod0"},
		{Pod: "pod1", HostPool: "office-pod1"}, {Pod: "pod1", HostPool: "multi-pod1"}}
	doc.GlobalEntitlements = []vdibroker.GlobalEntitlement{office}
	putDoc := func() {
		t.Helper()
		for _, e := range envs {
			d := doc
			if _, err := e.admin.PutFederation(ctx, &d); err != nil {
				t.Fatal(err)
			}
		}
	}
	putDoc()

	// A Disconnected session of user in pool of e, on host (named when
	// the pool is personal).
	type session struct{ pod, pool, id, host string }
	open := func(e *env, pod, pool, user, host string, named bool) session {
		t.Helper()
		req := vhttp.ConnectRequest{User: user}
		if named {
			req.SessionHost = host
		}
		c, err := e.admin.Connect(ctx, pool, req)
		if err != nil || c.SessionHost != host {
			t.Fatalf("%s's session in %s: %+v %v; want one on %s", user, pool, c, err, host)
		}
		return session{pod, pool, c.SessionID, host}
	}
	first := open(near, "pod0", "office-pod0", "alice", "pod0-h001", false)
	lab := open(near, "pod0", "lab-pod0", "alice", "lab-h001", false)
	bobs := open(near, "pod0", "lab-pod0", "bob", "lab-h001", false)
	solo := open(near, "pod0", "solo-pod0", "alice", "solo-h001", false)
	far1 := open(far, "pod1", "office-pod1", "alice", "pod1-h001", false)
	mp1 := open(far, "pod1", "multi-pod1", "alice", mp[0], true)
	mp2 := open(far, "pod1", "multi-pod1", "alice", mp[1], true)
	disconnected := func(user string) vdibroker.AgentSession {
		return vdibroker.AgentSession{ID: user, User: user, State: vdibroker.StateDisconnected}
	}
	near.heartbeat("pod0-h001", disconnected("alice"))
	near.heartbeat("lab-h001", disconnected("alice"), disconnected("bob"))
	near.heartbeat("solo-h001", disconnected("alice"))
	for _, h := range append([]string{"pod1-h001"}, mp...) {
		far.heartbeat(h, disconnected("alice"))
	}

	alice := near.client(0, near.userToken("alice", nil))
	ref := func(s session, pod string) *vdibroker.SessionRef {
		return &vdibroker.SessionRef{Pod: pod, HostPool: s.pool, ID: s.id}
	}
	check := func(name string, named *vdibroker.SessionRef, want session) {
		t.Helper()
		a, err := alice.GlobalConnect(ctx, "office", vdibroker.GlobalConnectRequest{User: "alice", Session: named})
		if err != nil {
			t.Fatalf("%s: %v", name, err)
		}
		if a.Pod != want.pod || a.HostPool != want.pool || a.SessionID != want.id || a.SessionHost != want.host || !a.Reconnect || a.Created {
			t.Errorf("%s: session %s in %s on %s at %s (reconnect %v, created %v); want a reconnect of %s in %s on %s at %s",
				name, a.SessionID, a.HostPool, a.SessionHost, a.Pod, a.Reconnect, a.Created, want.id, want.pool, want.host, want.pod)
		}
		if ex := a.Decision.ExistingSession; ex == nil || *ex != (vdibroker.MemberCandidate{Pod: want.pod, HostPool: want.pool}) {
			t.Errorf("%s: decision.existingSession %+v, want %s/%s", name, ex, want.pod, want.pool)
		}
	}
	for _, tc := range []struct {
		name  string
		named *vdibroker.SessionRef
		want  session
	}{
		{"none named: the first in search order", nil, first},
		{"her session in this pod's second member pool", ref(lab, ""), lab},
		{"the same, its pod named", ref(lab, "pod0"), lab},
		{"her session in pod1", ref(far1, "pod1"), far1},
		{"the second of her sessions in a personal pool of pod1", ref(mp2, "pod1"), mp2},
		{"the first of them", ref(mp1, "pod1"), mp1},
		{"bob's session", ref(bobs, "pod0"), first},
		{"hers in a pool of no member", ref(solo, ""), first},
		{"hers in pod1, named in another pool", &vdibroker.SessionRef{Pod: "pod1", HostPool: "multi-pod1", ID: far1.id}, first},
		{"hers in pod1, named in this pod", ref(far1, ""), first},
		{"hers, named in a pod of no document", ref(far1, "pod9"), first},
		{"an id of none", &vdibroker.SessionRef{HostPool: "lab-pod0", ID: "no-such-session"}, first},
	} {
		check(tc.name, tc.named, tc.want)
	}
	// Within pod0 only, her session in pod1 is out of scope (R-G1).
	doc.Generation++
	doc.GlobalEntitlements[0].Scope = vdibroker.ScopeWithinPod
	putDoc()
	check("her session in pod1 with the scope WithinPod", ref(far1, "pod1"), first)

	// Nothing new anywhere, and bob's session as it was.
	for _, e := range envs {
		for _, user := range []string{"alice", "bob"} {
			l, err := e.admin.UserSessions(ctx, user)
			if err != nil {
				t.Fatal(err)
			}
			want := map[string]int{"alice": 3, "bob": 1}[user] // pod0: office, lab and solo; lab
			if e == far {
				want = map[string]int{"alice": 3, "bob": 0}[user] // pod1: office and multi's two
			}
			if len(l) != want {
				t.Errorf("%s's open sessions at %s after the connects: %d, want %d", user, e.urls[0], len(l), want)
			}
			for _, s := range l {
				if s.ID == bobs.id && s.State != vdibroker.StateDisconnected {
					t.Errorf("bob's session after alice's connects naming it: %s", s.State)
				}
			}
		}
	}

	tok := near.userToken("alice", nil)
	for _, tc := range []struct{ session, field string }{
		{`{"id":"x"}`, "session.hostPool"},
		{`{"hostPool":"lab-pod0"}`, "session.id"},
		{`{"hostPool":"lab-pod0","id":"` + strings.Repeat("x", 65) + `"}`, "session.id"},
		{`{"pod":"pod/1","hostPool":"lab-pod0","id":"x"}`, "session.pod"},
		{`{"hostPool":"lab-pod0","id":"x","host":"lab-h001"}`, "session.host"},
		{`"x"`, "session"},
	} {
		body := `{"user":"alice","session":` + tc.session + `}`
		status, ve, raw := rawDo(t, near, "POST", "/api/v1/globalentitlements/office/connect", tok, body)
		if status != nethttp.StatusBadRequest || ve == nil || ve.Field != tc.field {
			t.Errorf("%s: %d %s, want 400 on %s", body, status, raw, tc.field)
		}
	}
}

// TestGlobalConnectNamedSessionOlderPod_RG1_RG5: pod1 is of the version
// before a connect could name a session: its pod-to-pod connect refuses
// the field, as every unknown field of a body, before it does anything.
// alice's global connect at pod0 naming her session in pod1 still
// reconnects it: pod0 asks pod1 again without the field, and pod1's
// pool connect answers her one session there (R-C1).
func TestGlobalConnectNamedSessionOlderPod_RG1_RG5(t *testing.T) {
	var refused atomic.Int32
	envs := fedPodsWith(t, 2, 1, 5, vdibroker.DistributionNone, false, func(i int, h nethttp.Handler) nethttp.Handler {
		if i == 1 {
			return olderPodConnect(h, &refused)
		}
		return h
	})
	ctx := t.Context()
	first := envs[0].mustConnect("office-pod0", "alice")
	far := envs[1].mustConnect("office-pod1", "alice")
	alice := envs[0].client(0, envs[0].userToken("alice", nil))
	a, err := alice.GlobalConnect(ctx, "office", vdibroker.GlobalConnectRequest{User: "alice",
		Session: &vdibroker.SessionRef{Pod: "pod1", HostPool: "office-pod1", ID: far.SessionID}})
	if err != nil {
		t.Fatal(err)
	}
	if a.Pod != "pod1" || a.SessionID != far.SessionID || !a.Reconnect {
		t.Errorf("alice's connect naming her session on the older pod1: %s at %s (reconnect %v); want %s at pod1 (pod0's is %s)",
			a.SessionID, a.Pod, a.Reconnect, far.SessionID, first.SessionID)
	}
	if n := refused.Load(); n != 1 {
		t.Errorf("pod1 refused %d connects naming a session, want 1 (then asked without)", n)
	}
}

// olderPodConnect serves h as a pod whose pod-to-pod connect knows the
// fields of PodConnectRequest before sessionId (olderPodCall).
func olderPodConnect(h nethttp.Handler, refused *atomic.Int32) nethttp.Handler {
	return olderPodCall(h, federation.ConnectPath, func() any {
		return &struct {
			GlobalEntitlement string `json:"globalEntitlement"`
			HostPool          string `json:"hostPool"`
			User              string `json:"user"`
			DryRun            bool   `json:"dryRun,omitempty"`
			Application       string `json:"application,omitempty"`
			Existing          bool   `json:"existing,omitempty"`
		}{}
	}, refused)
}

// olderPodCall serves h as a pod whose pod-to-pod call at path knows only
// the fields of the struct old returns: it decodes the body strictly, as
// every version's server does, and answers an unknown field as it does
// (400 InvalidArgument naming it) before anything is done.
func olderPodCall(h nethttp.Handler, path string, old func() any, refused *atomic.Int32) nethttp.Handler {
	return nethttp.HandlerFunc(func(w nethttp.ResponseWriter, r *nethttp.Request) {
		if r.Method != nethttp.MethodPost || r.URL.Path != path {
			h.ServeHTTP(w, r)
			return
		}
		body, _ := io.ReadAll(r.Body)
		dec := json.NewDecoder(bytes.NewReader(body))
		dec.DisallowUnknownFields()
		if err := dec.Decode(old()); err != nil {
			refused.Add(1)
			field, _ := strconv.Unquote(strings.TrimPrefix(err.Error(), "json: unknown field "))
			w.Header().Set("Content-Type", "application/json")
			w.WriteHeader(nethttp.StatusBadRequest)
			json.NewEncoder(w).Encode(map[string]any{"error": vdibroker.FieldError(field, "unknown field")})
			return
		}
		r.Body = io.NopCloser(bytes.NewReader(body))
		h.ServeHTTP(w, r)
	})
}
