package http

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net"
	nethttp "net/http"
	"net/netip"
	"net/url"
	"strconv"
	"strings"
	"time"
	"unicode/utf8"

	"github.com/vdibroker/vdibroker"
	"github.com/vdibroker/vdibroker/federation"
)

// The Cloud Pod Architecture API (SPEC §7): the federation
// document, global entitlements and their connect, and the pod-to-pod API
// (federation.LoadsPath and the others), which takes no bearer token but
// the federation secret's signature.

// federationState is a pod's federation service and the verifier of its
// peers' signatures; nil on a broker that is not a pod.
type federationState struct {
	g        vdibroker.FederationService
	verifier *federation.Verifier
}

// federationRoutes registers the federation API (routes.go calls it).
func (s *Server) federationRoutes() {
	const ge = "/api/v1/globalentitlements"
	s.handle("PUT /api/v1/federation", vdibroker.ActionWrite, s.putFederation)
	s.handle("GET /api/v1/federation", vdibroker.ActionRead, s.getFederation)
	s.handle("GET "+ge, vdibroker.ActionRead, s.listGlobalEntitlements)
	s.handle("GET "+ge+"/{name}", vdibroker.ActionRead, s.getGlobalEntitlement)
	s.handle("POST "+ge+"/{name}/connect", vdibroker.ActionConnect, s.globalConnect)
	s.handle("GET /api/v1/users/{user}/globalsessions", vdibroker.ActionIdentify, s.globalSessions)
	// An end user logs off and disconnects her own sessions in other
	// pods, as her own here (R-U3); the service authorizes the user.
	s.handle("DELETE /api/v1/users/{user}/globalsessions/{pod}/{id}", vdibroker.ActionOwnSession, s.globalSessionCommand(vdibroker.CommandLogoff))
	s.handle("POST /api/v1/users/{user}/globalsessions/{pod}/{id}/disconnect", vdibroker.ActionOwnSession, s.globalSessionCommand(vdibroker.CommandDisconnect))
	// Signed with the federation secret, checked inside (podCall).
	s.handle("GET "+federation.LoadsPath, public, s.podCall(s.podLoads, podRead))
	s.handle("POST "+federation.SessionsPath, public, s.podCall(s.podSessions, podRead))
	s.handle("POST "+federation.ConnectPath, public, s.podCall(s.podConnect, podHeld))
	s.handle("POST "+federation.DirectoryPath, public, s.podCall(s.podRegister, podHeld))
	// A look-up may register its user (PodLookupRequest.Register, R-G1),
	// an idempotent write bounded as a registration's: its nonce is still
	// a read's (in memory on a one-process store, where a call signed
	// before this process started is refused), so a replay is refused all
	// the same.
	s.handle("POST "+federation.LookupPath, public, s.podCall(s.podLookup, podRead))
	s.handle("POST "+federation.SessionCommandPath, public, s.podCall(s.podSessionCommand, podRecord))
	s.handle("PUT "+federation.DocumentPath, public, s.podCall(s.podDocument, podRecord))
}

// federated returns the pod's federation service, or NotFound on a broker
// started without --pod-name.
func (s *Server) federated() (*federationState, error) {
	if s.fed == nil {
		return nil, vdibroker.Errorf(vdibroker.ENotFound, "this broker is not a pod of a federation: start serve with --pod-name, --site, --external-url and --federation-secret-file")
	}
	return s.fed, nil
}

func (s *Server) putFederation(w nethttp.ResponseWriter, r *nethttp.Request) error {
	fed, err := s.federated()
	if err != nil {
		return err
	}
	var doc vdibroker.Federation
	if err := decodeJSON(w, r, &doc); err != nil {
		return err
	}
	created, err := fed.g.PutDocument(r.Context(), &doc)
	if err != nil {
		return err
	}
	writeJSON(w, createdStatus(created), &doc)
	return nil
}

// getFederation is GET /federation[?askPeers=false][&peerWait=1s]: the
// document and each peer's health, the peers whose load summary is not
// cached asked for it first, waited for at most peerWait; with
// askPeers=false none is asked and each is as last heard of (the
// console's pool page reads the document alone, and would otherwise wait
// out a peer that does not answer).
func (s *Server) getFederation(w nethttp.ResponseWriter, r *nethttp.Request) error {
	wait, err := peerWait(r)
	if err != nil {
		return err
	}
	ask := true
	if q := r.URL.Query(); q.Has("askPeers") {
		switch v := q.Get("askPeers"); v {
		case "true":
		case "false":
			ask = false
		default:
			return vdibroker.FieldError("askPeers", "must be true or false, got %q", vdibroker.Cut(v, 64))
		}
	}
	fed, err := s.federated()
	if err != nil {
		return err
	}
	st, err := fed.g.Status(r.Context(), ask, wait)
	if err != nil {
		return err
	}
	writeJSON(w, nethttp.StatusOK, st)
	return nil
}

// MaxPeerWait bounds peerWait: longer is no read a page waits for.
const MaxPeerWait = time.Minute

// peerWait is the request's peerWait (0 when absent: each peer is waited
// for until it answers or the pod timeout passes): how long a read of
// the federation waits for the peers it asks (R-G5). The console's
// Federation page asks with a second or two, so a peer that accepts the
// connection and never answers does not hold the page for the pod
// timeout; it is named as not answering (vdibroker.NoAnswer,
// PeerStatus.AskedAt).
func peerWait(r *nethttp.Request) (time.Duration, error) {
	q := r.URL.Query()
	if !q.Has("peerWait") {
		return 0, nil
	}
	v := q.Get("peerWait")
	d, err := time.ParseDuration(v)
	if err != nil || len(v) > 32 || strings.HasPrefix(v, "+") || d < time.Millisecond || d > MaxPeerWait {
		return 0, vdibroker.FieldError("peerWait", "must be a duration from 1ms to %s, such as 1s or 1500ms, got %q", MaxPeerWait, vdibroker.Cut(v, 64))
	}
	return d, nil
}

// listGlobalEntitlements is GET /globalentitlements[?peerWait=1s]: the
// members' loads as their pods answer them, each peer waited for at most
// peerWait.
func (s *Server) listGlobalEntitlements(w nethttp.ResponseWriter, r *nethttp.Request) error {
	wait, err := peerWait(r)
	if err != nil {
		return err
	}
	fed, err := s.federated()
	if err != nil {
		return err
	}
	list, err := fed.g.Entitlements(r.Context(), "", wait)
	if err != nil {
		return err
	}
	writeJSON(w, nethttp.StatusOK, page[vdibroker.EntitlementView]{Value: list})
	return nil
}

func (s *Server) getGlobalEntitlement(w nethttp.ResponseWriter, r *nethttp.Request) error {
	wait, err := peerWait(r)
	if err != nil {
		return err
	}
	fed, err := s.federated()
	if err != nil {
		return err
	}
	list, err := fed.g.Entitlements(r.Context(), r.PathValue("name"), wait)
	if err != nil {
		return err
	}
	writeJSON(w, nethttp.StatusOK, list[0])
	return nil
}

// globalConnect is POST /globalentitlements/{name}/connect. A User token
// connects only its own user, and its groups come from its identity (a
// token has none), so only a Contributor may name groups.
func (s *Server) globalConnect(w nethttp.ResponseWriter, r *nethttp.Request) error {
	fed, err := s.federated()
	if err != nil {
		return err
	}
	var req vdibroker.GlobalConnectRequest
	if err := decodeJSON(w, r, &req); err != nil {
		return err
	}
	if r.URL.Query().Has("wait") {
		// A global connect moves past a starting host to the next
		// member pool or pod (R-G2): it has no one host to wait for.
		return vdibroker.FieldError("wait", "is not taken by a global connect, which places the user in another member pool while a host starts; connect to a host pool or an application group to wait")
	}
	if err := vdibroker.Authorize(vdibroker.PrincipalFrom(r.Context()), vdibroker.ActionConnect,
		vdibroker.Target{Global: r.Method + " " + r.URL.Path, For: &vdibroker.UserIdentity{User: req.User, Groups: req.Groups}}); err != nil {
		return err
	}
	a, err := fed.g.Connect(r.Context(), r.PathValue("name"), req)
	if err != nil {
		return err
	}
	writeJSON(w, createdStatus(a.Created), a)
	return nil
}

// globalSessions is GET /users/{user}/globalsessions (R-U3 across the
// federation): the user's open sessions in the other pods' member pools.
// The service authorizes it: an end user its own only. A principal
// lists at most GlobalSessionListsPerPrincipal a minute (429 beyond, no
// pod asked).
func (s *Server) globalSessions(w nethttp.ResponseWriter, r *nethttp.Request) error {
	fed, err := s.federated()
	if err != nil {
		return err
	}
	// A principal's listings are bounded (R-SEC): each is a round of pod
	// calls spending this pod's budget at its peers, which listings at
	// once share but listings one after another did not.
	if p := vdibroker.PrincipalFrom(r.Context()); p != nil {
		a := p.Audit()
		if !s.globalLists.Spend(a.Kind+":"+a.ID+":"+a.Name, s.now()) {
			return throttled("this principal lists sessions in other pods faster than "+
				strconv.Itoa(GlobalSessionListsPerPrincipal)+" a minute", GlobalSessionListsPerPrincipal/60.0)
		}
	}
	list, err := fed.g.UserSessions(r.Context(), r.PathValue("user"))
	if err != nil {
		return err
	}
	writeJSON(w, nethttp.StatusOK, list)
	return nil
}

// globalSessionCommand is DELETE /users/{user}/globalsessions/{pod}/{id}
// (command Logoff) and POST .../disconnect (R-U3 across the federation):
// the pod asked queues it as its own API does; 202 with its command and
// its warnings. The service authorizes it (an end user her own, in the
// member pools of the global entitlements that grant her). Its audit
// entry is written here, as nothing of this pod changes: the session's
// pod writes its own, naming this pod and the user.
func (s *Server) globalSessionCommand(command string) func(w nethttp.ResponseWriter, r *nethttp.Request) error {
	return func(w nethttp.ResponseWriter, r *nethttp.Request) error {
		fed, err := s.federated()
		if err != nil {
			return err
		}
		ctx := r.Context()
		if p := vdibroker.PrincipalFrom(ctx); p != nil {
			a := p.Audit()
			if !s.globalCommands.Spend(a.Kind+":"+a.ID+":"+a.Name, s.now()) {
				return throttled("this principal logs off or disconnects sessions in other pods faster than "+
					strconv.Itoa(GlobalSessionCommandsPerPrincipal)+" a minute", GlobalSessionCommandsPerPrincipal/60.0)
			}
		}
		c, err := fed.g.GlobalSessionCommand(ctx, r.PathValue("user"), r.PathValue("pod"), r.PathValue("id"), command)
		if err != nil {
			return err
		}
		if ev := vdibroker.AuditFrom(ctx); ev != nil {
			ev.Before, ev.After = json.RawMessage("null"), nil
			if b, err := json.Marshal(c); err == nil {
				ev.After = b
			}
			// The pod asked has done it: an entry that cannot be written
			// here is logged, the answer is still the command.
			if err := s.svc.Audit.AppendAudit(context.WithoutCancel(ctx), ev); err != nil {
				s.loggerFrom(ctx).Error("audit: cannot record a logoff or disconnect in another pod", "err", err, "action", ev.Action, "target", ev.Target)
			}
		}
		return writeCommand(w, c, nil)
	}
}

// What a pod-to-pod call does, for how its nonce is recorded (R-G5).
const (
	podRecord = federation.KindRecord // it changes something: its nonce is recorded in the store before it is answered
	podRead   = federation.KindRead   // it only reads
	podHeld   = federation.KindHeld   // h records the nonce (vdibroker.CallNonce, recordNonce)
)

// podCall checks a pod-to-pod call (R-G5) and passes its body on, cheapest
// check first, so that a call that fails one before its body is read has
// none of its body read and hashed (up to maxBodyBytes):
//
//  1. it carries no query string, which its signature does not cover
//     (no pod handler reads one; Unauthenticated);
//  2. its signature headers (federation.Verifier.Check: all four there,
//     the nonce's length, the timestamp within federation.MaxSkew, signed
//     for this pod or for none; Unauthenticated);
//  3. the pod it names is in this pod's document (PermissionDenied), or
//     there is none yet (then every caller spends one budget of calls,
//     vdibroker.NoDocumentBudget); a document that cannot be read
//     refuses the call with that read's error (fails closed);
//  4. its body is read and its signature over method, path and body
//     checked, and its nonce recorded (federation.Verifier.Finish: a wrong
//     signature or a replay is Unauthenticated).
//
// A held nonce rides in the request's context (vdibroker.WithCallNonce).
func (s *Server) podCall(h func(w nethttp.ResponseWriter, r *nethttp.Request, fed *federationState, pod string, body []byte) error, kind federation.Kind) func(nethttp.ResponseWriter, *nethttp.Request) error {
	return func(w nethttp.ResponseWriter, r *nethttp.Request) error {
		fed, err := s.federated()
		if err != nil {
			return err
		}
		if r.URL.RawQuery != "" || r.URL.ForceQuery {
			return vdibroker.Errorf(vdibroker.EUnauthenticated, "pod-to-pod call with a query string, which its federation signature does not cover")
		}
		call, err := fed.verifier.Check(r.Header.Get, kind)
		if err != nil {
			return err
		}
		// The secret is the federation's; the caller must also be one of
		// its pods as this pod's document lists them (none yet: anyone
		// with the secret, so a new federation can start). A document
		// that cannot be read refuses the call: the check fails closed.
		// Checked before the signature, whose check reads the body: the
		// refusal tells a caller without the secret only that the name
		// is not a pod of the document.
		doc, err := fed.g.Document(r.Context())
		switch {
		case vdibroker.ErrorCode(err) == vdibroker.ENotFound:
			// Any name is taken: the calls share one budget
			// (vdibroker.MaxNoncesPerMinute), so names made up at
			// every call do not multiply it.
			call.Budget = vdibroker.NoDocumentBudget
		case err != nil:
			return err
		case doc.Pod(call.Pod) == nil:
			return vdibroker.Errorf(vdibroker.EPermission, "pod %q is not in the federation document pod %s holds (generation %d)", call.Pod, fed.g.Pod(), doc.Generation)
		}
		body, err := io.ReadAll(nethttp.MaxBytesReader(w, r.Body, maxBodyBytes))
		if err != nil {
			return decodeError(err, nil, nil)
		}
		// Not with the request's audit entry: the nonce's commit would
		// write it, before the call has done anything (podSessionCommand).
		nonce, err := fed.verifier.Finish(vdibroker.WithAudit(r.Context(), nil), call, r.Method, r.URL.Path, body)
		if err != nil {
			return err
		}
		if nonce != nil {
			r = r.WithContext(vdibroker.WithCallNonce(r.Context(), nonce))
		}
		authenticated(r)
		return h(w, r, fed, call.Pod, body)
	}
}

func (s *Server) podLoads(w nethttp.ResponseWriter, r *nethttp.Request, fed *federationState, _ string, _ []byte) error {
	resp, err := fed.g.PodLoads(r.Context())
	if err != nil {
		return err
	}
	writeJSON(w, nethttp.StatusOK, resp)
	return nil
}

func (s *Server) podSessions(w nethttp.ResponseWriter, r *nethttp.Request, fed *federationState, _ string, body []byte) error {
	var req vdibroker.PodSessionsRequest
	if err := decodeStrict(bytes.NewReader(body), &req); err != nil {
		return err
	}
	resp, err := fed.g.PodSessions(r.Context(), req)
	if err != nil {
		return err
	}
	writeJSON(w, nethttp.StatusOK, resp)
	return nil
}

func (s *Server) podConnect(w nethttp.ResponseWriter, r *nethttp.Request, fed *federationState, _ string, body []byte) error {
	var req vdibroker.PodConnectRequest
	if err := decodeStrict(bytes.NewReader(body), &req); err != nil {
		return err
	}
	if err := vdibroker.ValidateUser("user", req.User); err != nil {
		return err
	}
	a, err := fed.g.PodConnect(r.Context(), req)
	if rerr := recordNonce(r.Context(), fed); rerr != nil {
		return rerr // a replay (or no way to tell): nothing is answered
	}
	return writeConnect(w, a, err)
}

// podRegister records the calling pod's users with open sessions (R-G1):
// the pod is the one the signature names, never the body's word. Its
// nonce is recorded in the registration's transaction (the store's
// RegisterDirectory), or on its own when nothing was registered, so a
// replayed whole list cannot drop entries registered since.
func (s *Server) podRegister(w nethttp.ResponseWriter, r *nethttp.Request, fed *federationState, pod string, body []byte) error {
	var req vdibroker.PodDirectoryRequest
	if err := decodeStrict(bytes.NewReader(body), &req); err != nil {
		return err
	}
	err := fed.g.PodRegister(r.Context(), pod, req)
	if rerr := recordNonce(r.Context(), fed); rerr != nil {
		return rerr // a replay (or no way to tell): nothing is answered
	}
	if err != nil {
		return err
	}
	w.WriteHeader(nethttp.StatusNoContent)
	return nil
}

// podSessionCommand is a peer's logoff or disconnect of one of a user's
// sessions here (R-U3 across the federation). Its nonce was recorded in
// the store before it is done (podRecord): a replay changes nothing. Its
// audit entry is this pod's own API's (usersession.logoff or
// usersession.disconnect, the session as target), its principal the
// calling pod (its verified name) acting for the user. A pod asks for at
// most PodSessionCommandsPerPod a minute.
func (s *Server) podSessionCommand(w nethttp.ResponseWriter, r *nethttp.Request, fed *federationState, pod string, body []byte) error {
	// Spent by the pod the signature proved, before the body is decoded:
	// each is an audit entry, a command asked again too (R-SEC).
	if !s.podCommands.Spend(pod, s.now()) {
		if ev := vdibroker.AuditFrom(r.Context()); ev != nil {
			ev.Principal = vdibroker.AuditPrincipal{Kind: vdibroker.PrincipalPod, ID: pod}
			ev.Bound()
		}
		return throttled("pod "+pod+" logs off or disconnects sessions here faster than "+strconv.Itoa(PodSessionCommandsPerPod)+" a minute", PodSessionCommandsPerPod/60.0)
	}
	var req vdibroker.PodSessionCommandRequest
	if err := decodeStrict(bytes.NewReader(body), &req); err != nil {
		return err
	}
	if ev := vdibroker.AuditFrom(r.Context()); ev != nil {
		ev.Principal = vdibroker.AuditPrincipal{Kind: vdibroker.PrincipalPod, ID: pod, Name: req.User}
		switch req.Command {
		case vdibroker.CommandLogoff:
			ev.Action = "usersession.logoff"
		case vdibroker.CommandDisconnect:
			ev.Action = "usersession.disconnect"
		}
		ev.Bound()
	}
	c, err := fed.g.PodSessionCommand(r.Context(), pod, req)
	return writeCommand(w, c, err)
}

// maxDocumentPrincipal bounds PodDocumentRequest.Principal, in
// characters: the longest a console's sign-in is named, "oidc:" and a
// subject of up to vdibroker.MaxUserLen characters, any of them beyond
// ASCII (what the broker takes of an ID token's sub claim).
const maxDocumentPrincipal = len("oidc:") + vdibroker.MaxUserLen

// podDocument is a peer's console's write of the federation document
// (vdibroker.PodDocumentRequest, R-G5): stored as PUT /api/v1/federation
// stores it, its generation checked the same, once the calling pod's API
// took it from a principal allowed to write it there. Only a pod of the
// document this pod holds sends one (podCall; with no document yet none
// does: the first is applied with federation apply). Its nonce was
// recorded before it is stored (podRecord), and a pod writes at most
// PodDocumentsPerPod a minute. Its audit entry is
// federation.put on target federation, its principal the calling pod
// acting for the writer.
func (s *Server) podDocument(w nethttp.ResponseWriter, r *nethttp.Request, fed *federationState, pod string, body []byte) error {
	// Spent by the pod the signature proved, before the body is decoded:
	// each write is an audit entry holding the document twice (R-SEC).
	if !s.podDocuments.Spend(pod, s.now()) {
		if ev := vdibroker.AuditFrom(r.Context()); ev != nil {
			ev.Principal = vdibroker.AuditPrincipal{Kind: vdibroker.PrincipalPod, ID: pod}
			ev.Bound()
		}
		return throttled("pod "+pod+" writes the federation document faster than "+strconv.Itoa(PodDocumentsPerPod)+" a minute", PodDocumentsPerPod/60.0)
	}
	var req vdibroker.PodDocumentRequest
	if err := decodeStrict(bytes.NewReader(body), &req); err != nil {
		return err
	}
	if n := utf8.RuneCountInString(req.Principal); n < 1 || n > maxDocumentPrincipal {
		return vdibroker.FieldError("principal", "must be 1..%d characters, got %d", maxDocumentPrincipal, n)
	}
	// Written to this pod's audit trail as the writer's name: no control
	// characters, as every name it holds (R-SEC).
	if err := vdibroker.ValidateText("principal", req.Principal, maxDocumentPrincipal); err != nil {
		return err
	}
	if ev := vdibroker.AuditFrom(r.Context()); ev != nil {
		ev.Principal = vdibroker.AuditPrincipal{Kind: vdibroker.PrincipalPod, ID: pod, Name: req.Principal}
		// As this pod's own PUT /api/v1/federation records it.
		ev.Action, ev.Target = "federation.put", "federation"
		ev.Bound()
	}
	if _, err := fed.g.Document(r.Context()); err != nil {
		if vdibroker.ErrorCode(err) == vdibroker.ENotFound {
			return vdibroker.Errorf(vdibroker.EPermission, "pod %s holds no federation document yet, and takes its first from federation apply, not from a peer", fed.g.Pod())
		}
		return err
	}
	created, err := fed.g.PutDocument(r.Context(), &req.Document)
	if err != nil {
		return err
	}
	writeJSON(w, createdStatus(created), &req.Document)
	return nil
}

func (s *Server) podLookup(w nethttp.ResponseWriter, r *nethttp.Request, fed *federationState, _ string, body []byte) error {
	var req vdibroker.PodLookupRequest
	if err := decodeStrict(bytes.NewReader(body), &req); err != nil {
		return err
	}
	resp, err := fed.g.PodLookup(r.Context(), req)
	if err != nil {
		return err
	}
	writeJSON(w, nethttp.StatusOK, resp)
	return nil
}

// recordNonce records the call's held nonce unless its placement's commit
// did (vdibroker.CallNonce): a replay is Unauthenticated, and so is a
// nonce committed past its RecordBy (federation.Verifier.Recorded).
func recordNonce(ctx context.Context, fed *federationState) error {
	n := vdibroker.CallNonceFrom(ctx)
	if n == nil {
		return nil
	}
	fresh, err := fed.g.UseNonce(ctx, n.Pod, n.Nonce, n.Expires)
	if err != nil {
		return err
	}
	if !fresh {
		return vdibroker.ErrReplayed()
	}
	return fed.verifier.Recorded(n)
}

// PodClient is vdibroker.PodClient over HTTP: it signs every call with the
// federation's signing secret as pod Pod. The caller bounds each call with
// its ctx.
type PodClient struct {
	Pod     string
	Secrets *federation.Secrets
	// HTTPClient does the requests (nil: one with keep-alive connections
	// to each peer).
	HTTPClient *nethttp.Client
	Now        func() time.Time

	policy *federation.PeerPolicy // Restrict
}

var _ vdibroker.PodClient = (*PodClient)(nil)

// NewPodClient returns the pod-to-pod client of pod signing with secret
// (set Secrets to sign with a pod's secrets as they are reloaded).
func NewPodClient(pod string, secret []byte) *PodClient {
	tr := nethttp.DefaultTransport.(*nethttp.Transport).Clone()
	tr.MaxIdleConnsPerHost = 64
	return &PodClient{Pod: pod, Secrets: federation.NewSecrets(secret), HTTPClient: &nethttp.Client{Transport: tr}}
}

// Restrict makes c call only the peers policy allows (R-SEC): each call's
// URL is checked, each connection's resolved address too (a name that
// resolves elsewhere later does not get past it), redirects are not
// followed, and no HTTP proxy is used (the proxy would connect instead,
// past the check). c.HTTPClient must be NewPodClient's.
func (c *PodClient) Restrict(policy *federation.PeerPolicy) {
	c.policy = policy
	tr := c.HTTPClient.Transport.(*nethttp.Transport)
	tr.Proxy = nil
	d := &net.Dialer{Timeout: 30 * time.Second, KeepAlive: 30 * time.Second}
	tr.DialContext = func(ctx context.Context, network, addr string) (net.Conn, error) {
		host, portText, err := net.SplitHostPort(addr)
		if err != nil {
			return nil, err
		}
		port, err := strconv.Atoi(portText)
		if err != nil {
			return nil, err
		}
		ips, err := net.DefaultResolver.LookupNetIP(ctx, "ip", host)
		if err != nil {
			return nil, err
		}
		var last error
		for _, ip := range ips {
			if last = policy.CheckDial(host, ip, port); last != nil {
				continue
			}
			conn, err := d.DialContext(ctx, network, netip.AddrPortFrom(ip.Unmap(), uint16(port)).String())
			if err == nil {
				return conn, nil
			}
			last = err
		}
		if last == nil {
			last = fmt.Errorf("%s has no address", host)
		}
		return nil, last
	}
	c.HTTPClient.CheckRedirect = func(*nethttp.Request, []*nethttp.Request) error {
		return errors.New("a pod does not follow a peer's redirect")
	}
}

// answerBound bounds a peer's answer to a pod-to-pod call before it is
// decoded (R-G5, R-SEC): a pod compromised, or whatever answers at its
// URL, chooses it, and decoding takes far more memory than an answer
// holds: a list of empty objects (`[{},{},...]`) is a struct of up to
// 200 bytes for each 3 of the answer, so the 64 MiB the client read
// before took some 5 GB, and a pod asks every peer at once. An answer of
// more bytes than bytes, or of more JSON objects than objects (0: not
// counted, for an answer of one object with no list of them), is the
// call's failure: it is neither decoded nor a refusal of the peer, which
// is passed over as if it had not answered. Counting objects bounds the
// lists of objects only with their elements taken as objects alone
// (object): the answers' lists of other values hold numbers and strings
// (a pool's load indexes, an entitlement's users), a few times their
// size in memory at most.
type answerBound struct {
	bytes   int64
	objects int
}

// The bounds of each call's answer (answerBound), each far above what a
// vdibroker pod answers.
var (
	// A PoolFacts per member pool of the peer, at most
	// federation.MaxDocumentMembers in a valid document, with its farm
	// hosts' load indexes (8 MiB holds 10,000 pools and a million
	// hosts').
	loadsAnswer = answerBound{bytes: 8 << 20, objects: 1 + federation.MaxDocumentMembers}
	// The open sessions of the users asked (at most
	// vdibroker.MaxPodSessionUsers) in the pools asked (at most
	// vdibroker.MaxPodSessionPools), some hundreds of bytes each.
	sessionsAnswer = answerBound{bytes: 8 << 20, objects: 1 << 16}
	// The pods holding one user's entries and the pods the directory
	// vouches for, at most federation.MaxPods of 64 characters each.
	lookupAnswer = answerBound{bytes: 256 << 10}
	// A connect's answer (its .rdp file's custom properties at most
	// vdibroker.MaxCustomRdpPropertyLen), a queued command, a refusal.
	oneAnswer = answerBound{bytes: 1 << 20}
	// The document the peer stored, which it took in a body of at most
	// maxBodyBytes.
	documentAnswer = answerBound{bytes: 2 * maxBodyBytes, objects: 1 << 16}
)

// read reads resp's body within b.bytes: a body longer is an error,
// refused before it is read when its Content-Length says so.
func (b answerBound) read(resp *nethttp.Response) ([]byte, error) {
	if resp.ContentLength > b.bytes {
		return nil, fmt.Errorf("an answer of more than %d bytes, this call's bound: not a vdibroker answer", b.bytes)
	}
	data, err := io.ReadAll(io.LimitReader(resp.Body, b.bytes+1))
	if err == nil && int64(len(data)) > b.bytes {
		err = fmt.Errorf("an answer of more than %d bytes, this call's bound: not a vdibroker answer", b.bytes)
	}
	return data, err
}

// checkObjects refuses data of more JSON objects than b.objects (none
// set: any).
func (b answerBound) checkObjects(data []byte) error {
	if b.objects > 0 && jsonObjects(data, b.objects) > b.objects {
		return fmt.Errorf("an answer of more than %d JSON objects, this call's bound: not a vdibroker answer", b.objects)
	}
	return nil
}

// jsonObjects counts the objects of the JSON text data (its '{' outside
// strings), up to max+1: exact for valid JSON, which is all that is
// decoded after it.
func jsonObjects(data []byte, max int) int {
	n, inString := 0, false
	for i := 0; i < len(data) && n <= max; i++ {
		switch c := data[i]; {
		case inString && c == '\\':
			i++ // what it escapes, a quote or a backslash too
		case c == '"':
			inString = !inString
		case c == '{' && !inString:
			n++
		}
	}
	return n
}

// object is an element of a list of objects in a peer's answer (R-G5,
// R-SEC), decoded only when it is a JSON object: anything else (a number,
// null, a list, a string) fails the whole answer at once. encoding/json
// grows a list by one element for each value it meets, of whatever kind,
// and goes on past one of the wrong kind: `[0,0,...]` for a peer's pools,
// no object among them for jsonObjects to count, grew a list of 4
// million pools' facts from 8 MiB (some 3 GB allocated), and a null
// among a user's sessions was a nil session, which crashed the pod that
// asked.
type object[T any] struct{ v T }

func (o *object[T]) UnmarshalJSON(b []byte) error {
	if len(b) == 0 || b[0] != '{' {
		return errNotObject
	}
	return json.Unmarshal(b, &o.v)
}

var errNotObject = errors.New("a list element that is not a JSON object: not a vdibroker answer")

// objects are the values of list (nil for nil).
func objects[T any](list []object[T]) []T {
	if list == nil {
		return nil
	}
	out := make([]T, len(list))
	for i := range list {
		out[i] = list[i].v
	}
	return out
}

// documentAnswerWire is a peer's answer of a document (PutDocument), its
// lists of objects decoded as objects only.
type documentAnswerWire struct {
	vdibroker.Federation
	Sites              []object[vdibroker.Site]     `json:"sites"`
	Pods               []object[vdibroker.Pod]      `json:"pods"`
	GlobalEntitlements []object[entitlementWire]    `json:"globalEntitlements"`
	HomeSites          []object[vdibroker.HomeSite] `json:"homeSites"`
}

type entitlementWire struct {
	vdibroker.GlobalEntitlement
	Members []object[vdibroker.Member] `json:"members"`
}

func (a *documentAnswerWire) document() vdibroker.Federation {
	f := a.Federation
	f.Sites, f.Pods, f.HomeSites = objects(a.Sites), objects(a.Pods), objects(a.HomeSites)
	if a.GlobalEntitlements != nil {
		f.GlobalEntitlements = make([]vdibroker.GlobalEntitlement, len(a.GlobalEntitlements))
		for i, e := range a.GlobalEntitlements {
			f.GlobalEntitlements[i] = e.v.GlobalEntitlement
			f.GlobalEntitlements[i].Members = objects(e.v.Members)
		}
	}
	return f
}

func (c *PodClient) call(ctx context.Context, pod vdibroker.Pod, method, path string, body, out any, b answerBound) (int, error) {
	status, _, err := c.callHeader(ctx, pod, method, path, body, out, b)
	return status, err
}

// callHeader is call that returns the answer's headers too (a refusal's
// Retry-After). The answer is bounded by b.
func (c *PodClient) callHeader(ctx context.Context, pod vdibroker.Pod, method, path string, body, out any, b answerBound) (int, nethttp.Header, error) {
	if c.policy != nil {
		if err := c.policy.CheckURL(pod.URL); err != nil {
			return 0, nil, fmt.Errorf("pod %s's URL %w", pod.Name, err)
		}
	}
	var raw []byte
	var send any
	if body != nil {
		var err error
		if raw, err = json.Marshal(body); err != nil {
			return 0, nil, err
		}
		send = json.RawMessage(raw)
	}
	now := time.Now
	if c.Now != nil {
		now = c.Now
	}
	h := nethttp.Header{}
	// Signed for pod alone: a copy of the call is refused by every other
	// pod, whose nonces are their own.
	for k, v := range federation.SignTo(c.Secrets.Signing(), method, path, c.Pod, pod.Name, raw, now()) {
		h.Set(k, v)
	}
	// The request it is made for names the call too (R-G5, R-SEC): what
	// the peer records of it (a session placed, a logoff queued, a
	// refusal) carries the same request id as this pod's entry, so a
	// helpdesk's reference finds both.
	if id := vdibroker.RequestIDFrom(ctx); id != "" {
		h.Set("X-Request-Id", id)
	}
	cl := &Client{BaseURL: pod.URL, HTTPClient: c.HTTPClient, opaque: true, answer: b}
	return cl.doHeader(ctx, method, path, nil, send, out, h)
}

// Loads asks pod for its member pools' facts.
func (c *PodClient) Loads(ctx context.Context, pod vdibroker.Pod) (*vdibroker.PodLoads, error) {
	var a struct {
		vdibroker.PodLoads
		Pools []object[vdibroker.PoolFacts] `json:"pools"`
	}
	_, err := c.call(ctx, pod, "GET", federation.LoadsPath, nil, &a, loadsAnswer)
	out := a.PodLoads
	out.Pools = objects(a.Pools)
	return resultOrNil(&out, err)
}

// Sessions asks pod for the user's open sessions in its pools.
func (c *PodClient) Sessions(ctx context.Context, pod vdibroker.Pod, req vdibroker.PodSessionsRequest) ([]*vdibroker.UserSession, error) {
	var a struct {
		Sessions []object[vdibroker.UserSession] `json:"sessions"`
	}
	if _, err := c.call(ctx, pod, "POST", federation.SessionsPath, req, &a, sessionsAnswer); err != nil {
		return nil, err
	}
	if a.Sessions == nil {
		return nil, nil
	}
	out := make([]*vdibroker.UserSession, len(a.Sessions))
	for i := range a.Sessions {
		out[i] = &a.Sessions[i].v
	}
	return out, nil
}

// Connect asks pod to connect the user into one of its member pools. A
// pod's 429 or 503 carries its Retry-After (retryAfter): a member pool
// whose host is starting (HostStarting, R-A4) says when to try again
// only there, and the global decision repeats it (R-G1).
func (c *PodClient) Connect(ctx context.Context, pod vdibroker.Pod, req vdibroker.PodConnectRequest) (*vdibroker.ConnectAnswer, error) {
	var out vdibroker.ConnectAnswer
	status, h, err := c.callHeader(ctx, pod, "POST", federation.ConnectPath, req, &out.ConnectResponse, oneAnswer)
	if err != nil {
		var e *vdibroker.Error
		if errors.As(err, &e) && e.Code != vdibroker.EInternal && // a vdibroker pod's answer
			(status == nethttp.StatusTooManyRequests || status == nethttp.StatusServiceUnavailable) {
			e.RetryAfter = retryAfter(h.Get("Retry-After"))
		}
		return nil, err
	}
	out.Created = status == nethttp.StatusCreated
	return &out, nil
}

// Register registers this pod's users with open sessions at directory
// pod pod (R-G1).
// A pod whose router does not know the call (404 or 405: an older
// version) is NotFound, whatever its answer's body.
func (c *PodClient) Register(ctx context.Context, pod vdibroker.Pod, req vdibroker.PodDirectoryRequest) error {
	status, err := c.call(ctx, pod, "POST", federation.DirectoryPath, req, nil, oneAnswer)
	if err != nil && (status == nethttp.StatusNotFound || status == nethttp.StatusMethodNotAllowed) {
		return vdibroker.Errorf(vdibroker.ENotFound, "pod %s keeps no session directory (HTTP %d to %s: an older version?)", pod.Name, status, federation.DirectoryPath)
	}
	return err
}

// Lookup asks directory pod pod where the user has open sessions.
func (c *PodClient) Lookup(ctx context.Context, pod vdibroker.Pod, req vdibroker.PodLookupRequest) (*vdibroker.PodLookup, error) {
	var out vdibroker.PodLookup
	_, err := c.call(ctx, pod, "POST", federation.LookupPath, req, &out, lookupAnswer)
	return resultOrNil(&out, err)
}

// SessionCommand asks pod to log off or disconnect one of a user's
// sessions in its member pools.
// A pod whose router does not know the call (an older version: 405, or
// its 404 for a path it has no API at, not the call's own 404 for a
// session it does not hold) is PodUnavailable, saying so: "no such
// session" would tell a helpdesk the session is gone. A pod's refusal
// carries its Retry-After (retryAfter): a pod takes
// PodSessionCommandsPerPod a minute from one pod.
func (c *PodClient) SessionCommand(ctx context.Context, pod vdibroker.Pod, req vdibroker.PodSessionCommandRequest) (*vdibroker.Command, error) {
	var out vdibroker.Command
	status, h, err := c.callHeader(ctx, pod, "POST", federation.SessionCommandPath, req, &out, oneAnswer)
	if err != nil && (status == nethttp.StatusMethodNotAllowed ||
		status == nethttp.StatusNotFound && strings.HasPrefix(vdibroker.ErrorMessage(err), noAPIAt)) {
		return nil, vdibroker.Errorf(vdibroker.EPodUnavailable, "pod %s runs an older vdibroker, which cannot log off or disconnect its sessions for another pod "+
			"(HTTP %d to %s): use that pod's console or portal, or upgrade it", pod.Name, status, federation.SessionCommandPath)
	}
	var e *vdibroker.Error
	if errors.As(err, &e) && e.Code != vdibroker.EInternal { // a vdibroker pod's answer (decodeOpaqueErrorAnswer)
		e.RetryAfter = retryAfter(h.Get("Retry-After"))
	}
	return resultOrNil(&out, err)
}

// PutDocument gives pod the federation document written at this pod
// for principal (the signed call, not a user's token: the document
// names pod's URL, and a Contributor writes it, R-SEC). A pod whose
// router does not know the call (404 or 405: an older version) is
// PodUnavailable, saying so. A pod's refusal carries its Retry-After
// (retryAfter): a pod takes PodDocumentsPerPod writes a minute from
// one pod, and the console says when to send again.
func (c *PodClient) PutDocument(ctx context.Context, pod vdibroker.Pod, req vdibroker.PodDocumentRequest) (*vdibroker.Federation, error) {
	var a documentAnswerWire
	status, h, err := c.callHeader(ctx, pod, "PUT", federation.DocumentPath, req, &a, documentAnswer)
	out := a.document()
	if err != nil && (status == nethttp.StatusMethodNotAllowed ||
		status == nethttp.StatusNotFound && strings.HasPrefix(vdibroker.ErrorMessage(err), noAPIAt)) {
		return nil, vdibroker.Errorf(vdibroker.EPodUnavailable, "pod %s runs an older vdibroker, which takes the federation document from federation apply only "+
			"(HTTP %d to %s)", pod.Name, status, federation.DocumentPath)
	}
	var e *vdibroker.Error
	if errors.As(err, &e) && e.Code != vdibroker.EInternal { // a vdibroker pod's answer (decodeOpaqueErrorAnswer)
		e.RetryAfter = retryAfter(h.Get("Retry-After"))
	}
	return resultOrNil(&out, err)
}

// GlobalConnectResult is a global connect's answer.
type GlobalConnectResult = vdibroker.GlobalAnswer

// PutFederation stores the federation document on the client's broker.
func (c *Client) PutFederation(ctx context.Context, doc *vdibroker.Federation) (*vdibroker.Federation, error) {
	var out vdibroker.Federation
	_, err := c.do(ctx, "PUT", "/api/v1/federation", nil, doc, &out, nil)
	return resultOrNil(&out, err)
}

// GetFederation returns the broker's federation document with its peers'
// health and generations.
func (c *Client) GetFederation(ctx context.Context) (*vdibroker.FederationStatus, error) {
	var out vdibroker.FederationStatus
	_, err := c.do(ctx, "GET", "/api/v1/federation", c.peerWaitQuery(), nil, &out, nil)
	return resultOrNil(&out, err)
}

// peerWaitQuery is the query of c.PeerWait, nil when it is 0.
func (c *Client) peerWaitQuery() url.Values {
	if c.PeerWait <= 0 {
		return nil
	}
	return url.Values{"peerWait": {c.PeerWait.String()}}
}

// ListGlobalEntitlements returns every global entitlement with its
// members' loads.
func (c *Client) ListGlobalEntitlements(ctx context.Context) ([]*vdibroker.EntitlementView, error) {
	return listAll[*vdibroker.EntitlementView](ctx, c, "/api/v1/globalentitlements", c.peerWaitQuery())
}

// GetGlobalEntitlement returns one global entitlement with its members'
// loads.
func (c *Client) GetGlobalEntitlement(ctx context.Context, name string) (*vdibroker.EntitlementView, error) {
	var out vdibroker.EntitlementView
	_, err := c.do(ctx, "GET", "/api/v1/globalentitlements/"+url.PathEscape(name), c.peerWaitQuery(), nil, &out, nil)
	return resultOrNil(&out, err)
}

// GlobalSessions lists user's open sessions in the other pods of the
// federation.
func (c *Client) GlobalSessions(ctx context.Context, user string) (*vdibroker.GlobalSessions, error) {
	var out vdibroker.GlobalSessions
	_, err := c.do(ctx, "GET", "/api/v1/users/"+url.PathEscape(user)+"/globalsessions", nil, nil, &out, nil)
	return resultOrNil(&out, err)
}

// GlobalLogoff logs off user's session id in pod, another pod of the
// federation (R-U3): queued there, as its own API's logoff.
func (c *Client) GlobalLogoff(ctx context.Context, user, pod, id string) (*vdibroker.Command, error) {
	var out vdibroker.Command
	_, err := c.do(ctx, "DELETE", globalSessionPath(user, pod, id), nil, nil, &out, nil)
	return resultOrNil(&out, err)
}

// GlobalDisconnect disconnects user's session id in pod, another pod of
// the federation (R-U3).
func (c *Client) GlobalDisconnect(ctx context.Context, user, pod, id string) (*vdibroker.Command, error) {
	var out vdibroker.Command
	_, err := c.do(ctx, "POST", globalSessionPath(user, pod, id)+"/disconnect", nil, nil, &out, nil)
	return resultOrNil(&out, err)
}

func globalSessionPath(user, pod, id string) string {
	return "/api/v1/users/" + url.PathEscape(user) + "/globalsessions/" + url.PathEscape(pod) + "/" + url.PathEscape(id)
}

// GlobalConnect connects a user through a global entitlement (SPEC §7).
func (c *Client) GlobalConnect(ctx context.Context, name string, req vdibroker.GlobalConnectRequest) (*GlobalConnectResult, error) {
	var out GlobalConnectResult
	status, err := c.do(ctx, "POST", "/api/v1/globalentitlements/"+url.PathEscape(name)+"/connect", nil, req, &out, nil)
	out.Created = status == nethttp.StatusCreated
	return resultOrNil(&out, err)
}
