package main

import (
	"context"
	"encoding/json"
	"fmt"
	"io"
	"net"
	"net/http"
	"net/http/httptest"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/vdibroker/vdibroker"
	"github.com/vdibroker/vdibroker/federation"
	vhttp "github.com/vdibroker/vdibroker/http"
	"github.com/vdibroker/vdibroker/internal/testop"
)

// The route × credential matrix (R-SEC): every route the real serve
// registers (http.Server.Routes and the console's Routes, so a route
// without an expectation here fails the test), called with every kind of
// credential, scoped ones in and out of their scope, with the exact
// status wanted.

// Route classes: what a route needs of the caller.
const (
	mPublic        = iota // anyone, the same answer
	mRead                 // Reader and up; the pool's scope applies
	mInspect              // Contributor and up, reading; the pool's scope applies (404 out of it)
	mWrite                // Contributor and up; the pool's scope applies
	mConnect              // Contributor, admin, a User for itself; scope applies
	mAdmin                // the admin token only
	mAny                  // every API principal, scoped ones included
	mGRead                // read, global: refused to a scoped principal
	mGWrite               // write, global
	mGConnect             // connect, global
	mList                 // read, global, filtered by scope
	mAudit                // Contributor, Helpdesk and the admin, global, filtered by scope
	mPlanRead             // a scaling plan: 404 to a scoped principal for another pool's
	mPlanWrite            // 403 to a scoped principal for a PUT naming another pool, 404 else
	mRegister             // the agent's registration: a registration token in the body
	mHeartbeat            // the agent's heartbeat: the host's credential
	mPod                  // pod-to-pod: the federation secret's signature
	mConsole              // a console page: its own sign-in; bearer tokens change nothing
	mGroup                // an application group or its applications, by name: read (Reader and up) or change (Contributor and up); 404 out of scope
	mGroupPut             // an application group's PUT: Contributor and up; 403 for a pool out of scope (the body names it)
	mAppConnect           // an application's connect: as mConnect, but 404 out of scope (the group is not seen)
	mGatewayReport        // an RD gateway's tunnel report: a Gateway token or the admin
	mGatewayCheck         // an RD gateway's check of its tunnels: a Gateway token or the admin; out of scope left out of the answer, not refused
	mOwnSession           // log off or disconnect alice's session: Contributor, Helpdesk and the admin, or alice herself (R-U3); scope applies
	mGSelf                // read alice's, global: Reader and up, or alice herself; refused to a scoped principal
	mMessage              // message users' sessions: Contributor, Helpdesk and the admin; scope applies
	mGOwnSession          // log off or disconnect alice's session in another pod: Contributor, Helpdesk and the admin, or alice herself (R-U3); refused to a scoped principal
)

// route is how the matrix calls one registered pattern: the request (its
// path and body with placeholders the world fills) and what an allowed
// caller gets.
type route struct {
	pattern string
	method  string
	path    string // placeholders: {pool}, {sid}, {spareReg}, {spareTok}, {token}, {tunnel}
	body    string
	class   int
	ok      int
}

// matrixRoutes are the calls, changes before deletes so that each finds
// what it needs. A pattern may appear more than once (alice and bob
// connecting).
var matrixRoutes = []route{
	{"GET /healthz", "GET", "/healthz", "", mPublic, 200},
	{"GET /api/v1/hostpools", "GET", "/api/v1/hostpools", "", mList, 200},
	{"GET /api/v1/hostpools/{pool}", "GET", "/api/v1/hostpools/{pool}", "", mRead, 200},
	{"PUT /api/v1/hostpools/{pool}", "PUT", "/api/v1/hostpools/{pool}", `{}`, mWrite, 200},
	{"PATCH /api/v1/hostpools/{pool}", "PATCH", "/api/v1/hostpools/{pool}", `{"description": "x"}`, mWrite, 200},
	{"GET /api/v1/hostpools/{pool}/sessionhosts", "GET", "/api/v1/hostpools/{pool}/sessionhosts", "", mRead, 200},
	{"GET /api/v1/hostpools/{pool}/sessionhosts/{host}", "GET", "/api/v1/hostpools/{pool}/sessionhosts/{pool}-h1", "", mRead, 200},
	{"PUT /api/v1/hostpools/{pool}/sessionhosts/{host}", "PUT", "/api/v1/hostpools/{pool}/sessionhosts/{pool}-h2", `{"address": "x.example.test:3389"}`, mWrite, 200},
	{"PATCH /api/v1/hostpools/{pool}/sessionhosts/{host}", "PATCH", "/api/v1/hostpools/{pool}/sessionhosts/{pool}-h3", `{"allowNewSession": false}`, mWrite, 200},
	{"GET /api/v1/hostpools/{pool}/usersessions", "GET", "/api/v1/hostpools/{pool}/usersessions", "", mRead, 200},
	{"GET /api/v1/hostpools/{pool}/usersessions/{id}", "GET", "/api/v1/hostpools/{pool}/usersessions/{sid}", "", mRead, 200},
	{"GET /api/v1/hostpools/{pool}/usersessions/{id}/placement", "GET", "/api/v1/hostpools/{pool}/usersessions/{sid}/placement", "", mRead, 200},
	{"GET /api/v1/hostpools/{pool}/autoscale/evaluations", "GET", "/api/v1/hostpools/{pool}/autoscale/evaluations", "", mRead, 200},
	{"POST /api/v1/hostpools/{pool}/usersessions/{id}/disconnect", "POST", "/api/v1/hostpools/{pool}/usersessions/{sid}/disconnect", "", mOwnSession, 202},
	{"POST /api/v1/hostpools/{pool}/usersessions/{id}/sendmessage", "POST", "/api/v1/hostpools/{pool}/usersessions/{sid}/sendmessage", `{"message": "hi"}`, mMessage, 202},
	{"POST /api/v1/hostpools/{pool}/sessionhosts/{host}/sendmessage", "POST", "/api/v1/hostpools/{pool}/sessionhosts/{pool}-h1/sendmessage", `{"message": "hi"}`, mMessage, 202},
	{"POST /api/v1/hostpools/{pool}/connect", "POST", "/api/v1/hostpools/{pool}/connect", `{"user": "alice", "dryRun": true}`, mConnect, 200},
	{"POST /api/v1/hostpools/{pool}/connect", "POST", "/api/v1/hostpools/{pool}/connect", `{"user": "bob", "dryRun": true}`, mConnect, 200},
	{"POST /api/v1/hostpools/{pool}/registrationtoken", "POST", "/api/v1/hostpools/{pool}/registrationtoken", `{}`, mWrite, 201},
	{"GET /api/v1/hostpools/{pool}/registrationtokens", "GET", "/api/v1/hostpools/{pool}/registrationtokens", "", mInspect, 200},
	{"DELETE /api/v1/hostpools/{pool}/registrationtokens/{id}", "DELETE", "/api/v1/hostpools/{pool}/registrationtokens/{spareReg}", "", mWrite, 204},
	{"POST /api/v1/hostpools/{pool}/sessionhosts/{host}/resetregistration", "POST", "/api/v1/hostpools/{pool}/sessionhosts/{pool}-h3/resetregistration", "", mWrite, 204},
	// No power driver: an allowed caller is answered 409.
	{"POST /api/v1/hostpools/{pool}/sessionhosts/{host}/start", "POST", "/api/v1/hostpools/{pool}/sessionhosts/{pool}-h4/start", "", mWrite, 409},
	{"POST /api/v1/hostpools/{pool}/sessionhosts/{host}/stop", "POST", "/api/v1/hostpools/{pool}/sessionhosts/{pool}-h4/stop?force=true", "", mWrite, 409},
	{"DELETE /api/v1/hostpools/{pool}/sessionhosts/{host}", "DELETE", "/api/v1/hostpools/{pool}/sessionhosts/{pool}-h4", "", mWrite, 204},
	{"DELETE /api/v1/hostpools/{pool}/usersessions/{id}", "DELETE", "/api/v1/hostpools/{pool}/usersessions/{sid}", "", mOwnSession, 202},
	{"GET /api/v1/tokens", "GET", "/api/v1/tokens", "", mAdmin, 200},
	{"POST /api/v1/tokens", "POST", "/api/v1/tokens", `{"role": "Reader", "subject": "x"}`, mAdmin, 201},
	{"DELETE /api/v1/tokens/{id}", "DELETE", "/api/v1/tokens/{spareTok}", "", mAdmin, 204},
	{"GET /api/v1/whoami", "GET", "/api/v1/whoami", "", mAny, 200},
	{"POST /api/v1/signin", "POST", "/api/v1/signin", "", mAny, 200},
	{"POST /api/v1/signout", "POST", "/api/v1/signout", "", mAny, 204},
	{"GET /api/v1/auditlog", "GET", "/api/v1/auditlog", "", mAudit, 200},
	{"GET /api/v1/federation", "GET", "/api/v1/federation", "", mGRead, 200},
	{"PUT /api/v1/federation", "PUT", "/api/v1/federation", `{}`, mGWrite, 400},
	{"GET /api/v1/globalentitlements", "GET", "/api/v1/globalentitlements", "", mGRead, 200},
	{"GET /api/v1/globalentitlements/{name}", "GET", "/api/v1/globalentitlements/g", "", mGRead, 200},
	{"POST /api/v1/globalentitlements/{name}/connect", "POST", "/api/v1/globalentitlements/g/connect", `{"user": "alice", "dryRun": true}`, mGConnect, 200},
	{"GET " + federation.LoadsPath, "GET", federation.LoadsPath, "", mPod, 200},
	{"POST " + federation.SessionsPath, "POST", federation.SessionsPath, `{"user": "alice", "hostPools": ["pin"]}`, mPod, 200},
	{"POST " + federation.ConnectPath, "POST", federation.ConnectPath, `{"globalEntitlement": "g", "hostPool": "pin", "user": "alice", "dryRun": true}`, mPod, 200},
	{"POST " + federation.DirectoryPath, "POST", federation.DirectoryPath, `{"generation": 1, "users": ["alice"]}`, mPod, 204},
	{"POST " + federation.LookupPath, "POST", federation.LookupPath, `{"user": "alice"}`, mPod, 200},
	// No open session of alice by that id in pin: 404 past the signature.
	{"POST " + federation.SessionCommandPath, "POST", federation.SessionCommandPath, `{"user": "alice", "id": "none", "hostPools": ["pin"], "command": "Logoff"}`, mPod, 404},
	// A peer console's write of the document (R-G5): one with no pods
	// is refused past the signature, 400, and the document stays.
	{"PUT " + federation.DocumentPath, "PUT", federation.DocumentPath, `{"document": {"generation": 99}, "principal": "token:matrix"}`, mPod, 400},
	// pod1 is this pod: 404 to a caller allowed (its own sessions are
	// the pools' calls), the refusal of one that is not.
	{"DELETE /api/v1/users/{user}/globalsessions/{pod}/{id}", "DELETE", "/api/v1/users/alice/globalsessions/pod1/{sid}", "", mGOwnSession, 404},
	{"POST /api/v1/users/{user}/globalsessions/{pod}/{id}/disconnect", "POST", "/api/v1/users/alice/globalsessions/pod1/{sid}/disconnect", "", mGOwnSession, 404},
	{"POST /api/v1/agent/register", "POST", "/api/v1/agent/register", `{"token": "{token}", "hostName": "new-{pool}", "address": "n.example.test:3389"}`, mRegister, 201},
	{"POST /api/v1/agent/heartbeat", "POST", "/api/v1/agent/heartbeat", `{"sessions": []}`, mHeartbeat, 200},
	{"GET /api/v1/scalingplans", "GET", "/api/v1/scalingplans", "", mList, 200},
	{"GET /api/v1/scalingplans/{name}", "GET", "/api/v1/scalingplans/plan-{pool}", "", mPlanRead, 200},
	{"PUT /api/v1/scalingplans/{name}", "PUT", "/api/v1/scalingplans/plan-{pool}", "{plan}", mPlanWrite, 200},
	{"DELETE /api/v1/scalingplans/{name}", "DELETE", "/api/v1/scalingplans/plan-{pool}", "", mPlanWrite, 204},
	{"/api/v1/", "GET", "/api/v1/no/such/route", "", mPublic, 404},
	{"GET /metrics", "GET", "/metrics", "", mPublic, 200},
	// Application groups (R-E1..R-E4): pin's and pout's apps-{pool}, a
	// RemoteApp group assigned to alice with one application.
	{"GET /api/v1/applicationgroups", "GET", "/api/v1/applicationgroups", "", mList, 200},
	{"GET /api/v1/applicationgroups/{name}", "GET", "/api/v1/applicationgroups/apps-{pool}", "", mGroup, 200},
	{"PUT /api/v1/applicationgroups/{name}", "PUT", "/api/v1/applicationgroups/apps-{pool}", appGroupJSON, mGroupPut, 200},
	{"GET /api/v1/applicationgroups/{name}/applications", "GET", "/api/v1/applicationgroups/apps-{pool}/applications", "", mGroup, 200},
	{"GET /api/v1/applicationgroups/{name}/applications/{app}", "GET", "/api/v1/applicationgroups/apps-{pool}/applications/app", "", mGroup, 200},
	{"PUT /api/v1/applicationgroups/{name}/applications/{app}", "PUT", "/api/v1/applicationgroups/apps-{pool}/applications/app", `{"filePath": "app.exe"}`, mGroup, 200},
	{"POST /api/v1/applicationgroups/{name}/connect", "POST", "/api/v1/applicationgroups/apps-{pool}/connect", `{"user": "alice", "application": "app", "dryRun": true}`, mAppConnect, 200},
	{"GET /api/v1/users/{user}/entitlements", "GET", "/api/v1/users/alice/entitlements", "", mAny, 200},
	// The user's side (R-U3, R-U5): every principal asks about itself;
	// alice's sessions are read by alice and by every role that reads.
	{"GET /api/v1/users/{user}/sessions", "GET", "/api/v1/users/alice/sessions", "", mAny, 200},
	{"GET /api/v1/feed", "GET", "/api/v1/feed", "", mAny, 200},
	{"GET /api/v1/users/{user}/globalsessions", "GET", "/api/v1/users/alice/globalsessions", "", mGSelf, 200},
	{"DELETE /api/v1/applicationgroups/{name}/applications/{app}", "DELETE", "/api/v1/applicationgroups/apps-{pool}/applications/app", "", mGroup, 204},
	{"DELETE /api/v1/applicationgroups/{name}", "DELETE", "/api/v1/applicationgroups/apps-{pool}", "", mGroup, 204},
	// The RD gateway (R-GW4, R-GW6): the keys are public, rotating them is
	// the admin's; a report of a token the broker never issued is
	// NotFound to whoever may report.
	{"GET /api/v1/gateway/keys", "GET", "/api/v1/gateway/keys", "", mPublic, 200},
	{"POST /api/v1/gateway/keys/rotate", "POST", "/api/v1/gateway/keys/rotate", "", mAdmin, 204},
	{"POST /api/v1/gateway/tunnels/open", "POST", "/api/v1/gateway/tunnels/open", "{tunnel}", mGatewayReport, 404},
	{"POST /api/v1/gateway/tunnels/channel", "POST", "/api/v1/gateway/tunnels/channel", "{tunnel}", mGatewayReport, 404},
	{"POST /api/v1/gateway/tunnels/close", "POST", "/api/v1/gateway/tunnels/close", "{tunnel}", mGatewayReport, 404},
	{"POST /api/v1/gateway/tunnels/check", "POST", "/api/v1/gateway/tunnels/check", `{"gateway": "rdgw-1", "tunnels": [{tunnel}]}`, mGatewayCheck, 200},
	// A forced delete answers what went (200).
	{"DELETE /api/v1/hostpools/{pool}", "DELETE", "/api/v1/hostpools/{pool}?force=true", "", mWrite, 200},
	// The console, mounted at "/": its pages want its own sign-in.
	{"/", "GET", "/", "", mConsole, 303},
	{"GET /static/", "GET", "/static/console.css", "", mConsole, 200},
	{"GET /signin", "GET", "/signin", "", mConsole, 200},
	{"POST /signin", "POST", "/signin", "", mConsole, 403},
	{"POST /signout", "POST", "/signout", "", mConsole, 401},
	{"GET /{$}", "GET", "/", "", mConsole, 303},
	{"GET /pools/{pool}", "GET", "/pools/{pool}", "", mConsole, 303},
	{"POST /pools/{pool}/settings", "POST", "/pools/{pool}/settings", "", mConsole, 401},
	{"POST /pools/{pool}/hosts/{host}/drain", "POST", "/pools/{pool}/hosts/{pool}-h1/drain", "", mConsole, 401},
	{"POST /pools/{pool}/hosts/{host}/power", "POST", "/pools/{pool}/hosts/{pool}-h1/power", "", mConsole, 401},
	{"GET /pools/{pool}/hosts/{host}", "GET", "/pools/{pool}/hosts/{pool}-h1", "", mConsole, 303},
	{"GET /pools/{pool}/autoscale", "GET", "/pools/{pool}/autoscale", "", mConsole, 303},
	{"GET /sessions", "GET", "/sessions", "", mConsole, 303},
	{"GET /audit", "GET", "/audit", "", mConsole, 303},
	{"GET /scalingplans", "GET", "/scalingplans", "", mConsole, 303},
	{"GET /scalingplans/{name}", "GET", "/scalingplans/plan-{pool}", "", mConsole, 303},
	{"GET /rules", "GET", "/rules", "", mConsole, 200},
	{"POST /pools/{pool}/sessions/{id}/logoff", "POST", "/pools/{pool}/sessions/{sid}/logoff", "", mConsole, 401},
	{"GET /pools/{pool}/sessions/{id}/message", "GET", "/pools/{pool}/sessions/{sid}/message", "", mConsole, 303},
	{"POST /pools/{pool}/sessions/{id}/message", "POST", "/pools/{pool}/sessions/{sid}/message", "", mConsole, 401},
	{"GET /pools/{pool}/hosts/{host}/message", "GET", "/pools/{pool}/hosts/{pool}-h1/message", "", mConsole, 303},
	{"POST /pools/{pool}/hosts/{host}/message", "POST", "/pools/{pool}/hosts/{pool}-h1/message", "", mConsole, 401},
	{"POST /pools", "POST", "/pools", "", mConsole, 401},
	{"POST /pools/{pool}/delete", "POST", "/pools/{pool}/delete", "", mConsole, 401},
	{"POST /pools/{pool}/registrationtoken", "POST", "/pools/{pool}/registrationtoken", "", mConsole, 401},
	{"POST /pools/{pool}/hosts/drain", "POST", "/pools/{pool}/hosts/drain", "", mConsole, 401},
	{"POST /pools/{pool}/hosts/{host}/delete", "POST", "/pools/{pool}/hosts/{pool}-h1/delete", "", mConsole, 401},
	{"GET /entitlements", "GET", "/entitlements", "", mConsole, 303},
	{"POST /pools/{pool}/appgroups", "POST", "/pools/{pool}/appgroups", "", mConsole, 401},
	{"POST /pools/{pool}/appgroups/{group}/assignments", "POST", "/pools/{pool}/appgroups/apps-{pool}/assignments", "", mConsole, 401},
	{"POST /pools/{pool}/appgroups/{group}/delete", "POST", "/pools/{pool}/appgroups/apps-{pool}/delete", "", mConsole, 401},
	{"POST /pools/{pool}/appgroups/{group}/apps", "POST", "/pools/{pool}/appgroups/apps-{pool}/apps", "", mConsole, 401},
	{"POST /pools/{pool}/appgroups/{group}/apps/remove", "POST", "/pools/{pool}/appgroups/apps-{pool}/apps/remove", "", mConsole, 401},
	{"POST /pools/{pool}/sessions/{id}/disconnect", "POST", "/pools/{pool}/sessions/{sid}/disconnect", "", mConsole, 401},
	{"GET /pools/{pool}/sessions/{id}/placement", "GET", "/pools/{pool}/sessions/{sid}/placement", "", mConsole, 303},
	{"GET /federation", "GET", "/federation", "", mConsole, 303},
	{"POST /federation/globalentitlements", "POST", "/federation/globalentitlements", "", mConsole, 401},
	{"POST /federation/globalentitlements/members", "POST", "/federation/globalentitlements/members", "", mConsole, 401},
	{"POST /federation/globalentitlements/assignments", "POST", "/federation/globalentitlements/assignments", "", mConsole, 401},
	{"POST /federation/globalentitlements/delete", "POST", "/federation/globalentitlements/delete", "", mConsole, 401},
	{"POST /federation/globalentitlements/settings", "POST", "/federation/globalentitlements/settings", "", mConsole, 401},
	{"POST /federation/homesites", "POST", "/federation/homesites", "", mConsole, 401},
	{"POST /federation/resend", "POST", "/federation/resend", "", mConsole, 401},
	{"POST /users/{user}/globalsessions/{pod}/{id}/logoff", "POST", "/users/alice/globalsessions/pod2/{sid}/logoff", "", mConsole, 401},
	{"POST /users/{user}/globalsessions/{pod}/{id}/disconnect", "POST", "/users/alice/globalsessions/pod2/{sid}/disconnect", "", mConsole, 401},
	// Single sign-on: to the provider; its callback without a sign-in
	// under way is refused.
	{"GET /signin/oidc", "GET", "/signin/oidc", "", mConsole, 303},
	{"GET /signin/oidc/callback", "GET", "/signin/oidc/callback", "", mConsole, 403},
	// The user portal (R-U1), mounted at /portal/: its own sign-in too;
	// a bearer token signs nobody in, so every credential gets what an
	// anonymous browser gets.
	{"/portal/", "GET", "/portal/no/such/page", "", mConsole, 404},
	{"GET /portal/static/", "GET", "/portal/static/portal.css", "", mConsole, 200},
	{"GET /portal/icons/", "GET", "/portal/icons/desktop.svg", "", mConsole, 200},
	{"GET /portal/signin", "GET", "/portal/signin", "", mConsole, 200},
	{"POST /portal/signin", "POST", "/portal/signin", "", mConsole, 403},
	{"GET /portal/signin/oidc", "GET", "/portal/signin/oidc", "", mConsole, 303},
	{"GET /portal/signin/oidc/callback", "GET", "/portal/signin/oidc/callback", "", mConsole, 403},
	{"POST /portal/signout", "POST", "/portal/signout", "", mConsole, 401},
	{"GET /portal/{$}", "GET", "/portal/", "", mConsole, 303},
	{"GET /portal/sessions", "GET", "/portal/sessions", "", mConsole, 303},
	{"POST /portal/sessions/{pool}/{id}/logoff", "POST", "/portal/sessions/{pool}/{sid}/logoff", "", mConsole, 401},
	{"POST /portal/sessions/{pool}/{id}/disconnect", "POST", "/portal/sessions/{pool}/{sid}/disconnect", "", mConsole, 401},
	{"POST /portal/globalsessions/{pod}/{id}/logoff", "POST", "/portal/globalsessions/pod2/{sid}/logoff", "", mConsole, 401},
	{"POST /portal/globalsessions/{pod}/{id}/disconnect", "POST", "/portal/globalsessions/pod2/{sid}/disconnect", "", mConsole, 401},
	{"POST /portal/launch", "POST", "/portal/launch", "", mConsole, 401},
	{"GET /portal/launches/{id}", "GET", "/portal/launches/x", "", mConsole, 303},
	{"GET /portal/launches/{id}/status", "GET", "/portal/launches/x/status", "", mConsole, 303},
	{"GET /portal/launches/{id}/file", "GET", "/portal/launches/x/file", "", mConsole, 303},
}

// appGroupJSON is the body of apps-{pool}: a RemoteApp group of the pool
// assigned to alice.
const appGroupJSON = `{"hostPool": "{pool}", "applicationGroupType": "RemoteApp", "assignments": {"users": ["alice"]}}`

// matrixCred is one kind of credential and what it may do.
type matrixCred struct {
	name string
	// role is Admin, Contributor, Helpdesk, Reader, User or Gateway; "" for a credential
	// that is no API principal.
	role   string
	scoped bool   // scoped to pin only
	user   string // a User's subject
	// secret returns the bearer token; signed marks the federation peer,
	// whose requests carry a pod-to-pod signature instead.
	secret func(t *testing.T, w *matrixWorld) string
	signed bool
	// verified: the user portal's principal (R-U2), which no request
	// from outside carries: called in-process with vdibroker.WithVerified
	// and no bearer token, as the portal calls the API.
	verified *vdibroker.Principal
}

// matrixWorld is one credential kind's fresh broker: pools pin and pout
// with four hosts each and alice's Active session, her desktop and
// application groups, a scaling plan, a
// spare registration token and API token each, a federation document
// with global entitlement g on pin, and an identity provider.
type matrixWorld struct {
	m        *Main
	admin    *vhttp.Client
	op       *testop.OP
	secret   []byte
	session  map[string]string // pool -> alice's session
	spareReg map[string]string // pool -> a registration token id
	spareTok string
	regToken string // a registration token of pout, as a secret
	hostCred string // the credential of pout's first host
}

func newMatrixWorld(t *testing.T) *matrixWorld {
	t.Helper()
	t.Setenv("VDIBROKER_ADMIN_TOKEN", "")
	dir := t.TempDir()
	w := &matrixWorld{session: map[string]string{}, spareReg: map[string]string{}, secret: []byte("matrix-federation-secret-0123456789")}
	secretFile, roles, clientSecret := filepath.Join(dir, "fed.secret"), filepath.Join(dir, "roles.yaml"), filepath.Join(dir, "oidc.secret")
	w.op = testop.Start(t, "vdibroker-matrix", "matrix-secret")
	for f, content := range map[string]string{
		secretFile:   string(w.secret),
		clientSecret: "matrix-secret",
		roles: "groups:\n  ops:\n    role: Contributor\n  pin-ops:\n    role: Contributor\n    hostPools: [pin]\n" +
			"  readers:\n    role: Reader\n  pin-users:\n    role: User\n    hostPools: [pin]\n" +
			"  desk:\n    role: Helpdesk\n  pin-desk:\n    role: Helpdesk\n    hostPools: [pin]\n",
	} {
		if err := os.WriteFile(f, []byte(content), 0o600); err != nil {
			t.Fatal(err)
		}
	}
	w.m = &Main{Listen: "127.0.0.1:0", DataDir: filepath.Join(dir, "data"),
		Federation: FederationFlags{PodName: "pod1", SecretFile: secretFile, PodTimeout: 200 * time.Millisecond},
		OIDC:       OIDCFlags{Issuer: w.op.Issuer, ClientID: w.op.ClientID, ClientSecretFile: clientSecret, RoleMapFile: roles, GroupsClaim: "groups"}}
	if err := w.m.Open(context.Background()); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { w.m.Close() })
	ctx := context.Background()
	w.admin = vhttp.NewClient(w.m.URL(), w.m.AdminToken)
	for _, p := range []string{"pin", "pout"} {
		if _, err := w.admin.PutHostPool(ctx, p, map[string]any{"loadBalancerType": "DepthFirst", "maxSessionLimit": 10}); err != nil {
			t.Fatal(err)
		}
		rt, err := w.admin.CreateRegistrationToken(ctx, p, vhttp.RegistrationTokenRequest{ExpiresInSeconds: 3600})
		if err != nil {
			t.Fatal(err)
		}
		var creds []string
		for i := 1; i <= 4; i++ {
			reg, err := w.admin.Register(ctx, &vdibroker.RegisterRequest{Token: rt.Token, HostName: fmt.Sprintf("%s-h%d", p, i), Address: "127.0.0.1:3389"})
			if err != nil {
				t.Fatal(err)
			}
			creds = append(creds, reg.Credential)
			if _, err := w.admin.Heartbeat(ctx, reg.Credential, &vdibroker.HeartbeatRequest{}); err != nil {
				t.Fatal(err)
			}
		}
		c, err := w.admin.Connect(ctx, p, vhttp.ConnectRequest{User: "alice"})
		if err != nil {
			t.Fatal(err)
		}
		if _, err := w.admin.Heartbeat(ctx, creds[0], &vdibroker.HeartbeatRequest{Sessions: []vdibroker.AgentSession{{ID: "1", User: "alice", State: vdibroker.StateActive}}}); err != nil {
			t.Fatal(err)
		}
		w.session[p] = c.SessionID
		if _, err := w.admin.PutScalingPlan(ctx, "plan-"+p, matrixPlan(p)); err != nil {
			t.Fatal(err)
		}
		spare, err := w.admin.CreateRegistrationToken(ctx, p, vhttp.RegistrationTokenRequest{ExpiresInSeconds: 3600})
		if err != nil {
			t.Fatal(err)
		}
		w.spareReg[p] = spare.ID
		if p == "pout" {
			w.regToken, w.hostCred = rt.Token, creds[1]
		}
		// alice is entitled to the pool's desktop and to its application
		// (R-E3): a User token's connects are refused only for whom they
		// are and where they are.
		if _, err := w.admin.PutApplicationGroup(ctx, "desktop-"+p, map[string]any{"hostPool": p, "applicationGroupType": "Desktop",
			"assignments": map[string]any{"users": []string{"alice"}}}); err != nil {
			t.Fatal(err)
		}
		if _, err := w.admin.PutApplicationGroup(ctx, "apps-"+p, map[string]any{"hostPool": p, "applicationGroupType": "RemoteApp",
			"assignments": map[string]any{"users": []string{"alice"}}}); err != nil {
			t.Fatal(err)
		}
		if _, err := w.admin.PutApplication(ctx, "apps-"+p, "app", map[string]any{"filePath": "app.exe"}); err != nil {
			t.Fatal(err)
		}
	}
	tr, err := w.admin.CreateToken(ctx, vhttp.TokenRequest{Role: "Reader", Subject: "spare"})
	if err != nil {
		t.Fatal(err)
	}
	w.spareTok = tr.ID
	doc := &vdibroker.Federation{Generation: 1, Sites: []vdibroker.Site{{Name: "s"}},
		Pods:               []vdibroker.Pod{{Name: "pod1", Site: "s", URL: "https://pod1.example.test"}, {Name: "pod2", Site: "s", URL: "https://pod2.example.test"}},
		GlobalEntitlements: []vdibroker.GlobalEntitlement{{Name: "g", Members: []vdibroker.Member{{Pod: "pod1", HostPool: "pin"}}}}}
	if _, err := w.admin.PutFederation(ctx, doc); err != nil {
		t.Fatal(err)
	}
	return w
}

func matrixPlan(pool string) map[string]any {
	return map[string]any{
		"timeZone": "Europe/Berlin", "hostPools": []string{pool},
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

func (w *matrixWorld) token(t *testing.T, role, subject string, pools []string) string {
	t.Helper()
	tr, err := w.admin.CreateToken(context.Background(), vhttp.TokenRequest{Role: role, Subject: subject, HostPools: pools})
	if err != nil {
		t.Fatal(err)
	}
	return tr.Secret
}

// fill puts the world's names into a route's path or body for pool.
func (w *matrixWorld) fill(s, pool, token string) string {
	plan, _ := json.Marshal(matrixPlan(pool))
	// A report of a tunnel whose token the broker never issued.
	tunnel := `{"tokenId": "` + strings.Repeat("ab", 32) + `", "user": "alice", "sessionId": "` + w.session[pool] + `", "hostPool": "` + pool +
		`", "host": "127.0.0.1:3389", "gateway": "rdgw-1", "tokenExpiry": "2030-01-01T00:00:00Z"}`
	return strings.NewReplacer("{tunnel}", tunnel, "{pool}", pool, "{sid}", w.session[pool], "{spareReg}", w.spareReg[pool],
		"{spareTok}", w.spareTok, "{token}", token, "{plan}", string(plan)).Replace(s)
}

// matrixWant is the exact status of route r called by credential k on
// pool.
func matrixWant(k matrixCred, r route, pool string) int {
	switch r.class {
	case mPublic, mConsole:
		return r.ok
	case mRegister:
		if k.name == "registration token" {
			return r.ok
		}
		return 401
	case mHeartbeat:
		if k.name == "host credential" {
			return r.ok
		}
		return 401
	case mPod:
		if k.signed {
			return r.ok
		}
		return 401
	}
	if k.role == "" {
		return 401
	}
	if k.role == "Gateway" && r.class != mGatewayReport && r.class != mGatewayCheck {
		return 403 // it reports tunnels and does nothing else (R-GW4)
	}
	var allowed bool
	switch r.class {
	case mGroup:
		allowed = k.role != "User" && (r.method == "GET" || k.role == "Admin" || k.role == "Contributor")
	case mGroupPut:
		allowed = k.role == "Admin" || k.role == "Contributor"
	case mAppConnect:
		allowed = k.role == "Admin" || k.role == "Contributor" || k.role == "User"
	case mGatewayReport, mGatewayCheck:
		allowed = k.role == "Admin" || k.role == "Gateway"
	case mRead, mGRead, mList, mPlanRead:
		allowed = k.role != "User"
	case mGSelf:
		allowed = k.role != "User" || k.user == "alice"
	case mInspect, mWrite, mGWrite, mPlanWrite:
		allowed = k.role == "Admin" || k.role == "Contributor"
	case mAudit, mMessage:
		allowed = k.role == "Admin" || k.role == "Contributor" || k.role == "Helpdesk"
	case mOwnSession, mGOwnSession:
		allowed = k.role == "Admin" || k.role == "Contributor" || k.role == "Helpdesk" || (k.role == "User" && k.user == "alice")
	case mConnect, mGConnect:
		allowed = k.role == "Admin" || k.role == "Contributor" || k.role == "User"
	case mAdmin:
		allowed = k.role == "Admin"
	case mAny:
		allowed = true
	}
	if !allowed {
		return 403
	}
	if k.scoped {
		switch r.class {
		case mGRead, mGWrite, mGConnect, mAdmin, mGSelf, mGOwnSession:
			return 403
		case mPlanRead, mPlanWrite:
			if pool != "pin" {
				if r.method == "PUT" {
					return 403
				}
				return 404
			}
		case mGroup, mAppConnect:
			if pool != "pin" {
				return 404
			}
		case mGroupPut:
			if pool != "pin" {
				return 403
			}
		case mRead, mInspect, mWrite, mConnect, mOwnSession, mMessage:
			if pool != "pin" {
				if r.method == "GET" {
					return 404
				}
				return 403
			}
		}
	}
	// A User connects only itself (the connect checks it after scope).
	if k.role == "User" && (r.class == mConnect || r.class == mGConnect || r.class == mAppConnect) && !strings.Contains(r.body, `"`+k.user+`"`) {
		return 403
	}
	return r.ok
}

// TestRouteCredentialMatrix_RSEC: every route the broker serves against
// every kind of credential, each on a fresh broker (changes of one do not
// meet another's, and no address reaches the failed-authentication limit).
func TestRouteCredentialMatrix_RSEC(t *testing.T) {
	if testing.Short() {
		t.Skip("the route matrix starts a broker per credential")
	}
	tok := func(role, subject string, pools []string) func(*testing.T, *matrixWorld) string {
		return func(t *testing.T, w *matrixWorld) string { return w.token(t, role, subject, pools) }
	}
	mint := func(group string) func(*testing.T, *matrixWorld) string {
		return func(t *testing.T, w *matrixWorld) string {
			return w.op.Mint(map[string]any{"sub": "alice", "groups": []string{group}})
		}
	}
	creds := []matrixCred{
		{name: "none", secret: func(*testing.T, *matrixWorld) string { return "" }},
		{name: "forged", secret: func(*testing.T, *matrixWorld) string { return "vdbt_forged-0123456789abcdef" }},
		{name: "registration token", secret: func(_ *testing.T, w *matrixWorld) string { return w.regToken }},
		{name: "host credential", secret: func(_ *testing.T, w *matrixWorld) string { return w.hostCred }},
		{name: "admin", role: "Admin", secret: func(_ *testing.T, w *matrixWorld) string { return w.m.AdminToken }},
		{name: "Reader", role: "Reader", secret: tok("Reader", "auditor", nil)},
		{name: "scoped Reader", role: "Reader", scoped: true, secret: tok("Reader", "pin-auditor", []string{"pin"})},
		{name: "Helpdesk", role: "Helpdesk", secret: tok("Helpdesk", "desk", nil)},
		{name: "scoped Helpdesk", role: "Helpdesk", scoped: true, secret: tok("Helpdesk", "pin-desk", []string{"pin"})},
		{name: "Contributor", role: "Contributor", secret: tok("Contributor", "ops", nil)},
		{name: "scoped Contributor", role: "Contributor", scoped: true, secret: tok("Contributor", "pin-ops", []string{"pin"})},
		{name: "User alice", role: "User", user: "alice", secret: tok("User", "alice", nil)},
		{name: "scoped User alice", role: "User", user: "alice", scoped: true, secret: tok("User", "alice", []string{"pin"})},
		{name: "OIDC Reader", role: "Reader", secret: mint("readers")},
		{name: "OIDC Contributor", role: "Contributor", secret: mint("ops")},
		{name: "OIDC scoped Contributor", role: "Contributor", scoped: true, secret: mint("pin-ops")},
		{name: "OIDC scoped User alice", role: "User", user: "alice", scoped: true, secret: mint("pin-users")},
		{name: "OIDC Helpdesk", role: "Helpdesk", secret: mint("desk")},
		{name: "OIDC scoped Helpdesk", role: "Helpdesk", scoped: true, secret: mint("pin-desk")},
		// A Contributor's token revoked (token delete): every API route
		// refuses it, 401, as a token never issued.
		{name: "revoked Contributor", secret: func(t *testing.T, w *matrixWorld) string {
			tr, err := w.admin.CreateToken(context.Background(), vhttp.TokenRequest{Role: "Contributor", Subject: "gone"})
			if err != nil {
				t.Fatal(err)
			}
			if err := w.admin.DeleteToken(context.Background(), tr.ID); err != nil {
				t.Fatal(err)
			}
			return tr.Secret
		}},
		{name: "Gateway token", role: "Gateway", secret: tok("Gateway", "rdgw-1", nil)},
		{name: "federation peer", signed: true, secret: func(*testing.T, *matrixWorld) string { return "" }},
		{name: "portal's single sign-on alice", role: "User", user: "alice", secret: func(*testing.T, *matrixWorld) string { return "" },
			verified: &vdibroker.Principal{Kind: vdibroker.PrincipalOIDC, Role: vdibroker.RoleUser, Subject: "alice", Groups: []string{"ops", "readers"}}},
	}
	// Every route served has an expectation, and every expectation is of
	// a route served.
	w := newMatrixWorld(t)
	served := append(append(w.m.Server.Routes(), w.m.console.Routes()...), w.m.portal.Routes()...)
	var expected []string
	for _, r := range matrixRoutes {
		expected = append(expected, r.pattern)
	}
	for _, p := range served {
		if !slices.Contains(expected, p) {
			t.Errorf("route %q is served but the matrix has no expectation for it: add it to matrixRoutes", p)
		}
	}
	for _, p := range expected {
		if !slices.Contains(served, p) {
			t.Errorf("the matrix expects route %q, which is not served", p)
		}
	}
	if t.Failed() {
		t.FailNow()
	}
	// Every 40 calls come from another loopback address (127.0.0.2,
	// 127.0.0.3...): an anonymous caller's refusals spend its address's
	// failed authentications (60, AuthFailureBurst), and a route must
	// be answered for what it is, not for the routes called before it.
	calls := 0
	noRedirect := &http.Client{Timeout: 10 * time.Second, CheckRedirect: func(*http.Request, []*http.Request) error { return http.ErrUseLastResponse },
		Transport: &http.Transport{DisableKeepAlives: true, DialContext: func(ctx context.Context, network, addr string) (net.Conn, error) {
			local := &net.TCPAddr{IP: net.IPv4(127, 0, 0, byte(2+calls/40))}
			return (&net.Dialer{LocalAddr: local}).DialContext(ctx, network, addr)
		}}}
	for i, k := range creds {
		t.Run(k.name, func(t *testing.T) {
			if i > 0 {
				w = newMatrixWorld(t)
			}
			secret := k.secret(t, w)
			pools := []string{"pin"}
			if k.scoped {
				pools = []string{"pout", "pin"} // out of scope first: refusals change nothing
			}
			for _, pool := range pools {
				for _, r := range matrixRoutes {
					path, body := w.fill(r.path, pool, secret), w.fill(r.body, pool, secret)
					if r.class == mRegister && secret == "" {
						body = w.fill(r.body, pool, "vdbr_bogus-0123456789")
					}
					req, err := http.NewRequest(r.method, w.m.URL()+path, strings.NewReader(body))
					if err != nil {
						t.Fatal(err)
					}
					if body != "" {
						req.Header.Set("Content-Type", "application/json")
					}
					if secret != "" {
						req.Header.Set("Authorization", "Bearer "+secret)
					}
					if k.signed {
						pathOnly, _, _ := strings.Cut(path, "?")
						for h, v := range federation.Sign(w.secret, r.method, pathOnly, "pod2", []byte(body), time.Now()) {
							req.Header.Set(h, v)
						}
					}
					var resp *http.Response
					if k.verified != nil {
						rec := httptest.NewRecorder()
						req.RequestURI, req.RemoteAddr = path, "127.0.0.1:1"
						w.m.Server.Handler().ServeHTTP(rec, req.WithContext(vdibroker.WithVerified(req.Context(), k.verified)))
						resp = rec.Result()
					} else if resp, err = noRedirect.Do(req); err != nil {
						t.Fatal(err)
					}
					raw, _ := io.ReadAll(resp.Body)
					resp.Body.Close()
					calls++
					want := matrixWant(k, r, pool)
					if resp.StatusCode != want {
						t.Errorf("%s %s (%s) on %s: %d %.300s, want %d", r.method, path, r.pattern, pool, resp.StatusCode, raw, want)
					}
					if resp.StatusCode >= 400 && strings.HasPrefix(path, "/api/") {
						var eb struct {
							Error *vdibroker.Error `json:"error"`
						}
						if json.Unmarshal(raw, &eb) != nil || eb.Error == nil || eb.Error.Message == "" {
							t.Errorf("%s %s: an error answer without the error body: %.300s", r.method, path, raw)
						}
					}
				}
			}
		})
	}
	t.Logf("%d requests, %d routes, %d credentials", calls, len(served), len(creds))
}
