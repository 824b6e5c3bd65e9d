package http

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"io"
	nethttp "net/http"
	"net/url"
	"regexp"
	"strconv"
	"strings"
	"time"
	"unicode"

	"github.com/vdibroker/vdibroker"
	"github.com/vdibroker/vdibroker/placement"
)

// Client is a typed client of the whole API of SPEC §9. Errors the server
// answers are returned as *vdibroker.Error decoded from the body, so callers
// use vdibroker.ErrorCode / ErrorMessage / ErrorField; transport failures
// are returned wrapped as they come. List methods follow nextLink and
// return every item (up to MaxPages pages). A Client is safe for concurrent use.
type Client struct {
	// BaseURL is the broker's root, e.g. "http://127.0.0.1:8080".
	BaseURL string
	// Token is sent as "Authorization: Bearer <Token>" (may be empty).
	Token string
	// HTTPClient does the requests (nethttp.DefaultClient when nil).
	HTTPClient *nethttp.Client
	// PageSize is the ?limit= of list requests (0 = the server default 100).
	PageSize int
	// MaxPages, when above 0, ends a list after that many pages, its
	// items the first MaxPages*PageSize only: a caller that wants some
	// names (the CLI's "did you mean"), not every item of a long list.
	MaxPages int
	// PeerWait, when above 0, is the ?peerWait= of the federation reads
	// that ask the peers (GetFederation, ListGlobalEntitlements,
	// GetGlobalEntitlement): the pod waits for them at most that long
	// and names a peer that has not answered as not answering (R-G5);
	// 0 sends none, and the pod waits up to its --pod-timeout.
	PeerWait time.Duration
	// opaque: an error answer that is not the broker's JSON error is
	// reported by its status alone, never its body (a pod's peer may be
	// any server, R-SEC).
	opaque bool
	// answer, when its bytes are set, bounds every answer (a peer pod's,
	// podAnswer): one over it is an error, never decoded.
	answer answerBound
}

// NewClient returns a client of the broker at baseURL using token.
func NewClient(baseURL, token string) *Client {
	return &Client{BaseURL: strings.TrimRight(baseURL, "/"), Token: token}
}

// HostPoolFields are the §2 fields of a host pool for PutHostPool and
// PatchHostPool: nil means absent (PUT: the default; PATCH: unchanged). A
// map[string]any with the JSON field names works as a body too.
type HostPoolFields struct {
	HostPoolType                      *string              `json:"hostPoolType,omitempty"`
	LoadBalancerType                  *string              `json:"loadBalancerType,omitempty"`
	MaxSessionLimit                   *int                 `json:"maxSessionLimit,omitempty"`
	PersonalDesktopAssignmentType     *string              `json:"personalDesktopAssignmentType,omitempty"`
	LoadBalancing                     *LoadBalancingFields `json:"loadBalancing,omitempty"`
	HeartbeatTimeoutSeconds           *int                 `json:"heartbeatTimeoutSeconds,omitempty"`
	PendingTimeoutSeconds             *int                 `json:"pendingTimeoutSeconds,omitempty"`
	DisconnectedSessionTimeoutMinutes *int                 `json:"disconnectedSessionTimeoutMinutes,omitempty"`
	Description                       *string              `json:"description,omitempty"`
	FriendlyName                      *string              `json:"friendlyName,omitempty"`
}

// LoadBalancingFields are the §6 settings; nil means absent.
type LoadBalancingFields struct {
	UseCustomScript                *bool    `json:"useCustomScript,omitempty"`
	IncludeSessionCount            *bool    `json:"includeSessionCount,omitempty"`
	CPUThreshold                   *float64 `json:"cpuThreshold,omitempty"`
	MemoryThreshold                *float64 `json:"memoryThreshold,omitempty"`
	DiskQueueLengthThreshold       *float64 `json:"diskQueueLengthThreshold,omitempty"`
	DiskReadLatencyThreshold       *float64 `json:"diskReadLatencyThreshold,omitempty"`
	DiskWriteLatencyThreshold      *float64 `json:"diskWriteLatencyThreshold,omitempty"`
	LoadIndexThreshold             *int     `json:"loadIndexThreshold,omitempty"`
	ConnectingSessionThreshold     *int     `json:"connectingSessionThreshold,omitempty"`
	MinServersInQueue              *int     `json:"minServersInQueue,omitempty"`
	HostLoadIndexThreshold         *int     `json:"hostLoadIndexThreshold,omitempty"`
	HostConnectingSessionThreshold *int     `json:"hostConnectingSessionThreshold,omitempty"`
	SampleIntervalSeconds          *int     `json:"sampleIntervalSeconds,omitempty"`
}

// SessionQuery filters ListUserSessions; empty fields match all, an empty
// State matches the open states (not LoggedOff).
type SessionQuery struct {
	User string
	// UserPrefix searches the users whose name starts with it, any case.
	UserPrefix  string
	State       string
	SessionHost string
}

// Ptr returns a pointer to v, for the optional fields of request structs.
func Ptr[T any](v T) *T { return &v }

// HostPoolResult is a host pool answer: the pool, its R-P3 warnings, and
// whether a PUT created it.
type HostPoolResult struct {
	HostPoolResponse
	Created bool `json:"-"`
}

// PutHostPool creates (Created) or replaces the pool name. body is the §2
// fields: HostPoolFields, map[string]any or *vdibroker.HostPool; absent
// fields take their defaults.
func (c *Client) PutHostPool(ctx context.Context, name string, body any) (*HostPoolResult, error) {
	var out HostPoolResult
	status, err := c.do(ctx, "PUT", poolPath(name), nil, body, &out, nil)
	out.Created = status == nethttp.StatusCreated
	return resultOrNil(&out, err)
}

// PatchHostPool changes the fields body names (HostPoolFields or
// map[string]any) and returns the whole pool. A refused change changes
// nothing (R-P4); changing hostPoolType is refused (R-P1).
func (c *Client) PatchHostPool(ctx context.Context, name string, body any) (*HostPoolResult, error) {
	var out HostPoolResult
	_, err := c.do(ctx, "PATCH", poolPath(name), nil, body, &out, nil)
	return resultOrNil(&out, err)
}

// CreateHostPool creates a pool and never replaces one (PUT with
// If-None-Match: *): PreconditionFailed when the name is taken, even by a
// create that raced this one (R-E13).
func (c *Client) CreateHostPool(ctx context.Context, name string, body any) (*HostPoolResult, error) {
	var out HostPoolResult
	status, err := c.do(ctx, "PUT", poolPath(name), nil, body, &out, nethttp.Header{"If-None-Match": {"*"}})
	out.Created = status == nethttp.StatusCreated
	return resultOrNil(&out, err)
}

// UpdateHostPool is PatchHostPool (the CLI's name for it).
func (c *Client) UpdateHostPool(ctx context.Context, name string, body any) (*HostPoolResult, error) {
	return c.PatchHostPool(ctx, name, body)
}

// WhoAmI returns the client's token's role and subject.
func (c *Client) WhoAmI(ctx context.Context) (*WhoAmI, error) {
	var out WhoAmI
	_, err := c.do(ctx, "GET", "/api/v1/whoami", nil, nil, &out, nil)
	return resultOrNil(&out, err)
}

// GetHostPool returns one pool with its warnings.
func (c *Client) GetHostPool(ctx context.Context, name string) (*HostPoolResult, error) {
	var out HostPoolResult
	_, err := c.do(ctx, "GET", poolPath(name), nil, nil, &out, nil)
	return resultOrNil(&out, err)
}

// ListHostPools returns every pool, by name.
func (c *Client) ListHostPools(ctx context.Context) ([]*HostPoolResult, error) {
	return listAll[*HostPoolResult](ctx, c, "/api/v1/hostpools", nil)
}

// DeleteHostPool deletes a pool with its hosts and returns what went;
// refused with Conflict, naming what would go, while it has hosts or open
// sessions, unless force.
func (c *Client) DeleteHostPool(ctx context.Context, name string, force bool) (*vdibroker.PoolDeletion, error) {
	var out vdibroker.PoolDeletion
	_, err := c.do(ctx, "DELETE", poolPath(name), forceQuery(force), nil, &out, nil)
	return resultOrNil(&out, err)
}

// PutSessionHost creates or replaces a host's admin fields (absent ones take
// their defaults; an absent address keeps the registered one). A new host is
// Unavailable until its agent registers and sends a heartbeat.
func (c *Client) PutSessionHost(ctx context.Context, pool, name string, req SessionHostRequest) (*vdibroker.SessionHost, error) {
	var out vdibroker.SessionHost
	_, err := c.do(ctx, "PUT", hostPath(pool, name), nil, req, &out, nil)
	return resultOrNil(&out, err)
}

// PatchSessionHost changes allowNewSession, assignedUsers, standardFeatures
// and address. body is a SessionHostRequest or a map[string]any.
func (c *Client) PatchSessionHost(ctx context.Context, pool, name string, body any) (*vdibroker.SessionHost, error) {
	var out vdibroker.SessionHost
	_, err := c.do(ctx, "PATCH", hostPath(pool, name), nil, body, &out, nil)
	return resultOrNil(&out, err)
}

// UpdateSessionHost is PatchSessionHost (the CLI's name for it).
func (c *Client) UpdateSessionHost(ctx context.Context, pool, name string, body any) (*vdibroker.SessionHost, error) {
	return c.PatchSessionHost(ctx, pool, name, body)
}

// GetSessionHost returns one host with its status and load index as of now.
func (c *Client) GetSessionHost(ctx context.Context, pool, name string) (*vdibroker.SessionHost, error) {
	var out vdibroker.SessionHost
	_, err := c.do(ctx, "GET", hostPath(pool, name), nil, nil, &out, nil)
	return resultOrNil(&out, err)
}

// ListSessionHosts returns every host of the pool in query order.
func (c *Client) ListSessionHosts(ctx context.Context, pool string) ([]*vdibroker.SessionHost, error) {
	return listAll[*vdibroker.SessionHost](ctx, c, poolPath(pool)+"/sessionhosts", nil)
}

// DeleteSessionHost deletes a host and revokes its credential; refused with
// Conflict while it has sessions unless force.
func (c *Client) DeleteSessionHost(ctx context.Context, pool, name string, force bool) error {
	_, err := c.do(ctx, "DELETE", hostPath(pool, name), forceQuery(force), nil, nil, nil)
	return err
}

// ListUserSessions returns the pool's sessions matching q, by id.
func (c *Client) ListUserSessions(ctx context.Context, pool string, q SessionQuery) ([]*vdibroker.UserSession, error) {
	v := url.Values{}
	for k, s := range map[string]string{"user": q.User, "userPrefix": q.UserPrefix, "state": q.State, "sessionHost": q.SessionHost} {
		if s != "" {
			v.Set(k, s)
		}
	}
	return listAll[*vdibroker.UserSession](ctx, c, poolPath(pool)+"/usersessions", v)
}

// GetUserSession returns one session.
func (c *Client) GetUserSession(ctx context.Context, pool, id string) (*vdibroker.UserSession, error) {
	var out vdibroker.UserSession
	_, err := c.do(ctx, "GET", sessionPath(pool, id), nil, nil, &out, nil)
	return resultOrNil(&out, err)
}

// Logoff queues a logoff of the session for its host's agent (R-S4).
func (c *Client) Logoff(ctx context.Context, pool, id string) (*vdibroker.Command, error) {
	var out vdibroker.Command
	_, err := c.do(ctx, "DELETE", sessionPath(pool, id), nil, nil, &out, nil)
	return resultOrNil(&out, err)
}

// Disconnect queues a disconnect of an Active session (R-S4).
func (c *Client) Disconnect(ctx context.Context, pool, id string) (*vdibroker.Command, error) {
	var out vdibroker.Command
	_, err := c.do(ctx, "POST", sessionPath(pool, id)+"/disconnect", nil, nil, &out, nil)
	return resultOrNil(&out, err)
}

// SendMessage queues a message to the session's user (R-S4).
func (c *Client) SendMessage(ctx context.Context, pool, id, message string) (*vdibroker.Command, error) {
	var out vdibroker.Command
	_, err := c.do(ctx, "POST", sessionPath(pool, id)+"/sendmessage", nil, SendMessageRequest{Message: message}, &out, nil)
	return resultOrNil(&out, err)
}

// SendHostMessage queues a message to every Active and Disconnected
// session of a host (R-S4) and returns how many were queued.
func (c *Client) SendHostMessage(ctx context.Context, pool, host, message string) (*vdibroker.HostMessage, error) {
	var out vdibroker.HostMessage
	_, err := c.do(ctx, "POST", hostPath(pool, host)+"/sendmessage", nil, SendMessageRequest{Message: message}, &out, nil)
	return resultOrNil(&out, err)
}

// GetPlacement returns the decision record of a session (R-C7).
func (c *Client) GetPlacement(ctx context.Context, pool, id string) (*placement.Explain, error) {
	var out placement.Explain
	_, err := c.do(ctx, "GET", sessionPath(pool, id)+"/placement", nil, nil, &out, nil)
	return resultOrNil(&out, err)
}

// Placement is GetPlacement (the CLI's name for it).
func (c *Client) Placement(ctx context.Context, pool, id string) (*placement.Explain, error) {
	return c.GetPlacement(ctx, pool, id)
}

// ConnectResult is a connect answer and whether it made a new session (201).
type ConnectResult struct {
	ConnectResponse
	Created bool `json:"-"`
}

// Connect places req.User in the pool (SPEC §4): a new Pending session
// (Created), the existing one (Reconnect), or a dry run. A NoCapacity
// error's message says why and what to do (R-C5).
func (c *Client) Connect(ctx context.Context, pool string, req ConnectRequest) (*ConnectResult, error) {
	return c.ConnectIdempotent(ctx, pool, req, "")
}

// ConnectIdempotent is Connect with an Idempotency-Key: the same key gets
// the same answer (R-C6).
func (c *Client) ConnectIdempotent(ctx context.Context, pool string, req ConnectRequest, key string) (*ConnectResult, error) {
	var out ConnectResult
	var h nethttp.Header
	if key != "" {
		h = nethttp.Header{"Idempotency-Key": {key}}
	}
	status, err := c.do(ctx, "POST", poolPath(pool)+"/connect", waitQuery(req.Wait), req, &out, h)
	out.Created = status == nethttp.StatusCreated
	return resultOrNil(&out, err)
}

// waitQuery is a connect's ?wait= (R-U4), nil for none.
func waitQuery(d time.Duration) url.Values {
	if d <= 0 {
		return nil
	}
	return url.Values{"wait": {d.String()}}
}

// UserSessions lists user's open sessions in every pool the token sees
// (R-U3; an end user's own).
func (c *Client) UserSessions(ctx context.Context, user string) ([]*vdibroker.UserSession, error) {
	return listAll[*vdibroker.UserSession](ctx, c, "/api/v1/users/"+url.PathEscape(user)+"/sessions", nil)
}

// Feed returns what the token's user may open (R-U5).
func (c *Client) Feed(ctx context.Context) (*vdibroker.Feed, error) {
	var out vdibroker.Feed
	_, err := c.do(ctx, "GET", "/api/v1/feed", nil, nil, &out, nil)
	return resultOrNil(&out, err)
}

// CreateRegistrationToken issues a token agents use to register hosts into
// the pool (expiresInSeconds 3600..2332800; 0 = 3600).
func (c *Client) CreateRegistrationToken(ctx context.Context, pool string, req RegistrationTokenRequest) (*RegistrationTokenResponse, error) {
	var out RegistrationTokenResponse
	var body any = req
	if req.ExpiresInSeconds == 0 && req.MaxHosts == 0 {
		body = struct{}{}
	} else if req.ExpiresInSeconds == 0 {
		req.ExpiresInSeconds = vdibroker.MinRegistrationTokenSeconds
		body = req
	}
	_, err := c.do(ctx, "POST", poolPath(pool)+"/registrationtoken", nil, body, &out, nil)
	return resultOrNil(&out, err)
}

// CreateToken issues an API token (admin token only); the secret is in
// TokenResponse.Secret and is shown only once.
func (c *Client) CreateToken(ctx context.Context, req TokenRequest) (*TokenResponse, error) {
	var out TokenResponse
	_, err := c.do(ctx, "POST", "/api/v1/tokens", nil, req, &out, nil)
	return resultOrNil(&out, err)
}

// ListTokens lists API tokens without secrets (admin token only).
func (c *Client) ListTokens(ctx context.Context) ([]*vdibroker.Token, error) {
	return listAll[*vdibroker.Token](ctx, c, "/api/v1/tokens", nil)
}

// DeleteToken revokes an API token (admin token only).
func (c *Client) DeleteToken(ctx context.Context, id string) error {
	_, err := c.do(ctx, "DELETE", "/api/v1/tokens/"+url.PathEscape(id), nil, nil, nil, nil)
	return err
}

// Register registers a session host with a registration token (no API
// token needed) and returns its credential.
func (c *Client) Register(ctx context.Context, req *vdibroker.RegisterRequest) (*vdibroker.RegisterResponse, error) {
	var out vdibroker.RegisterResponse
	_, err := c.do(ctx, "POST", "/api/v1/agent/register", nil, req, &out, nil)
	return resultOrNil(&out, err)
}

// ReKey registers req's host again with its current credential (the
// agent's own re-key; R-SEC) and returns the new credential.
func (c *Client) ReKey(ctx context.Context, credential string, req *vdibroker.RegisterRequest) (*vdibroker.RegisterResponse, error) {
	var out vdibroker.RegisterResponse
	h := nethttp.Header{"Authorization": {"Bearer " + credential}}
	_, err := c.do(ctx, "POST", "/api/v1/agent/register", nil, req, &out, h)
	return resultOrNil(&out, err)
}

// ListRegistrationTokens lists a pool's registration tokens (no secrets).
func (c *Client) ListRegistrationTokens(ctx context.Context, pool string) ([]*vdibroker.RegistrationToken, error) {
	var out page[*vdibroker.RegistrationToken]
	_, err := c.do(ctx, "GET", poolPath(pool)+"/registrationtokens", nil, nil, &out, nil)
	return out.Value, err
}

// DeleteRegistrationToken revokes a registration token.
func (c *Client) DeleteRegistrationToken(ctx context.Context, pool, id string) error {
	_, err := c.do(ctx, "DELETE", poolPath(pool)+"/registrationtokens/"+url.PathEscape(id), nil, nil, nil, nil)
	return err
}

// ResetRegistration lets the next registration of host take it (its
// credential is revoked).
func (c *Client) ResetRegistration(ctx context.Context, pool, host string) error {
	_, err := c.do(ctx, "POST", poolPath(pool)+"/sessionhosts/"+url.PathEscape(host)+"/resetregistration", nil, struct{}{}, nil, nil)
	return err
}

// Heartbeat sends an agent heartbeat with the host credential (instead of
// the client's token) and returns the commands to run and the settings.
func (c *Client) Heartbeat(ctx context.Context, credential string, hb *vdibroker.HeartbeatRequest) (*vdibroker.HeartbeatResponse, error) {
	var out vdibroker.HeartbeatResponse
	h := nethttp.Header{"Authorization": {"Bearer " + credential}}
	_, err := c.do(ctx, "POST", "/api/v1/agent/heartbeat", nil, hb, &out, h)
	return resultOrNil(&out, err)
}

// Healthz reports whether the broker is up and its store open.
func (c *Client) Healthz(ctx context.Context) error {
	_, err := c.do(ctx, "GET", "/healthz", nil, nil, nil, nil)
	return err
}

func poolPath(pool string) string { return "/api/v1/hostpools/" + url.PathEscape(pool) }

func hostPath(pool, host string) string {
	return poolPath(pool) + "/sessionhosts/" + url.PathEscape(host)
}

func sessionPath(pool, id string) string {
	return poolPath(pool) + "/usersessions/" + url.PathEscape(id)
}

func forceQuery(force bool) url.Values {
	if !force {
		return nil
	}
	return url.Values{"force": {"true"}}
}

func resultOrNil[T any](v *T, err error) (*T, error) {
	if err != nil {
		return nil, err
	}
	return v, nil
}

// listAll follows nextLink from path until the last page, or MaxPages.
func listAll[T any](ctx context.Context, c *Client, path string, q url.Values) ([]T, error) {
	if q == nil {
		q = url.Values{}
	}
	if c.PageSize > 0 {
		q.Set("limit", strconv.Itoa(c.PageSize))
	}
	all := []T{}
	next := path
	if len(q) > 0 {
		next += "?" + q.Encode()
	}
	for pages := 1; next != ""; pages++ {
		var pg page[T]
		if _, err := c.do(ctx, "GET", next, nil, nil, &pg, nil); err != nil {
			return nil, err
		}
		all = append(all, pg.Value...)
		next = pg.NextLink
		if c.MaxPages > 0 && pages == c.MaxPages {
			break
		}
	}
	return all, nil
}

// Condition is what a PUT asks of the object it replaces (R-E13): IfMatch
// the ETag a read answered (the object must still be as read), or "*" (it
// must exist); IfNoneMatch "*" (it must not exist). A PUT whose condition
// does not hold changes nothing and fails with PreconditionFailed; the
// zero Condition asks nothing.
type Condition struct {
	IfMatch, IfNoneMatch string
}

// conditionHeader is the request headers of a call's condition (only
// the first is used).
func conditionHeader(cond []Condition) nethttp.Header {
	if len(cond) == 0 {
		return nil
	}
	h := nethttp.Header{}
	if cond[0].IfMatch != "" {
		h.Set("If-Match", cond[0].IfMatch)
	}
	if cond[0].IfNoneMatch != "" {
		h.Set("If-None-Match", cond[0].IfNoneMatch)
	}
	return h
}

// do sends one request and decodes a 2xx answer into out (when not nil) or
// an error answer into *vdibroker.Error. It returns the status.
func (c *Client) do(ctx context.Context, method, path string, q url.Values, body, out any, h nethttp.Header) (int, error) {
	status, _, err := c.doHeader(ctx, method, path, q, body, out, h)
	return status, err
}

// doHeader is do that returns the answer's headers too (an ETag).
func (c *Client) doHeader(ctx context.Context, method, path string, q url.Values, body, out any, h nethttp.Header) (int, nethttp.Header, error) {
	u, err := c.url(path, q)
	if err != nil {
		return 0, nil, err
	}
	var rd io.Reader
	if body != nil {
		b, err := json.Marshal(body)
		if err != nil {
			return 0, nil, fmt.Errorf("%s %s: encode body: %w", method, path, err)
		}
		rd = bytes.NewReader(b)
	}
	req, err := nethttp.NewRequestWithContext(ctx, method, u, rd)
	if err != nil {
		return 0, nil, err
	}
	if body != nil {
		req.Header.Set("Content-Type", "application/json")
	}
	req.Header.Set("Accept", "application/json")
	if c.Token != "" {
		req.Header.Set("Authorization", "Bearer "+c.Token)
	}
	for k, vs := range h {
		req.Header[k] = vs
	}
	hc := c.HTTPClient
	if hc == nil {
		hc = nethttp.DefaultClient
	}
	resp, err := hc.Do(req)
	if err != nil {
		return 0, nil, err
	}
	defer resp.Body.Close()
	var data []byte
	if c.answer.bytes > 0 {
		data, err = c.answer.read(resp)
	} else {
		data, err = io.ReadAll(io.LimitReader(resp.Body, 64<<20))
	}
	if err != nil {
		return resp.StatusCode, resp.Header, fmt.Errorf("%s %s: read answer: %w", method, path, err)
	}
	if resp.StatusCode >= 300 {
		if c.opaque {
			return resp.StatusCode, resp.Header, decodeOpaqueErrorAnswer(resp, data)
		}
		return resp.StatusCode, resp.Header, decodeErrorAnswer(resp, data)
	}
	if out != nil && len(data) > 0 && resp.StatusCode != nethttp.StatusNoContent {
		if err := c.answer.checkObjects(data); err != nil {
			return resp.StatusCode, resp.Header, fmt.Errorf("%s %s: %w", method, path, err)
		}
		if err := json.Unmarshal(data, out); err != nil {
			return resp.StatusCode, resp.Header, fmt.Errorf("%s %s: decode answer: %w", method, path, err)
		}
	}
	return resp.StatusCode, resp.Header, nil
}

// url resolves path (which may carry a query, as nextLink does) against
// BaseURL.
func (c *Client) url(path string, q url.Values) (string, error) {
	base, err := url.Parse(c.BaseURL)
	if err != nil {
		return "", fmt.Errorf("server URL %q: %w", c.BaseURL, err)
	}
	ref, err := url.Parse(path)
	if err != nil {
		return "", err
	}
	// Keep a path prefix of BaseURL (a broker behind a reverse proxy),
	// and the escaped form of the path: a name escaped into one segment
	// ("..%2Fhostpools%2Fp") must stay one, not turn back into dot
	// segments that ResolveReference removes (R-SEC).
	if ref.Host == "" && strings.HasPrefix(ref.Path, "/") {
		p, err := nameSegments(ref.EscapedPath())
		if err != nil {
			return "", err
		}
		escaped := strings.TrimRight(base.EscapedPath(), "/") + p
		ref.Path = strings.TrimRight(base.Path, "/") + ref.Path
		ref.RawPath = escaped
	}
	u := base.ResolveReference(ref)
	if len(q) > 0 {
		qq := u.Query()
		for k, vs := range q {
			qq[k] = vs
		}
		u.RawQuery = qq.Encode()
	}
	return u.String(), nil
}

// nameSegments is an escaped API path with each segment kept as the name
// it is: url.PathEscape leaves "." and ".." as they are, and
// ResolveReference (or any proxy) would take them as dot segments, so
// they are escaped ("%2E"); no path of the client's own has one. An
// empty segment (an empty name or id) is refused: the path would name
// the collection, or another path once a proxy or the server's mux
// cleaned it (R-SEC).
func nameSegments(escaped string) (string, error) {
	segs := strings.Split(escaped, "/")
	for i, s := range segs[1:] {
		switch s {
		case "":
			return "", vdibroker.Errorf(vdibroker.EInvalid, "%s: a name or id in the path is empty", escaped)
		case ".", "..":
			segs[i+1] = strings.Repeat("%2E", len(s))
		}
	}
	return strings.Join(segs, "/"), nil
}

// reasonShape is what an error's reason from another server may look
// like to be kept: one of the Reason* constants' form (PascalCase ASCII),
// at most 64 characters.
var reasonShape = regexp.MustCompile(`^[A-Z][A-Za-z0-9]{0,63}$`)

// decodeOpaqueErrorAnswer is decodeErrorAnswer for a server that may not
// be a broker: the broker's own error (its code answered with its status)
// keeps its code and the first 200 printable characters of its message;
// anything else is told by its status alone.
func decodeOpaqueErrorAnswer(resp *nethttp.Response, data []byte) error {
	var eb errorBody
	if err := json.Unmarshal(data, &eb); err == nil && eb.Error != nil && eb.Error.Code != "" && eb.Error.Code != vdibroker.EInternal &&
		vdibroker.HTTPStatus(eb.Error.Code) == resp.StatusCode {
		// No control character (C0, DEL, C1) of another server's text
		// reaches this one's answers, logs or a terminal (R-SEC).
		printable := func(s string) string {
			return strings.Map(func(r rune) rune {
				if unicode.IsControl(r) {
					return ' '
				}
				return r
			}, s)
		}
		e := &vdibroker.Error{Code: eb.Error.Code, Message: vdibroker.Cut(printable(eb.Error.Message), 200), Field: vdibroker.Cut(printable(eb.Error.Field), 64)}
		if reasonShape.MatchString(eb.Error.Reason) {
			// A member pod's reason goes on to the user who connected
			// here (the portal says it in her words, R-A4), as a word
			// of the API's form: one the portal keeps beside the code.
			e.Reason = eb.Error.Reason
		}
		return e
	}
	return &vdibroker.Error{Code: vdibroker.EInternal,
		Message: fmt.Sprintf("HTTP %d, not a vdibroker answer (its body is not shown)", resp.StatusCode)}
}

// maxRetryAfter bounds the Retry-After taken from an answer: the
// broker's own limits ask for seconds (a User's writes, 2 s) up to a
// minute, and a pod's as much (PodDocumentsPerPod's bucket); a longer
// wait, whatever a server or a proxy says, is not repeated to an
// administrator or a script as when to try again.
const maxRetryAfter = time.Hour

// retryAfter is the Retry-After header v of an answer (the broker's, or
// a peer pod's) as a duration, 0 when it is absent, malformed, not above
// 0 or above maxRetryAfter. The broker and a pod send delay-seconds
// (writeError); the HTTP-date form, which neither sends, is taken as
// malformed.
func retryAfter(v string) time.Duration {
	if len(v) > 5 || v == "" {
		return 0 // more digits than an hour's seconds has (3600)
	}
	n, err := strconv.Atoi(v)
	if err != nil || n <= 0 || v[0] == '+' || time.Duration(n)*time.Second > maxRetryAfter {
		return 0
	}
	return time.Duration(n) * time.Second
}

// decodeErrorAnswer turns an error answer into *vdibroker.Error: the body's
// error when it has one, else one made from the status. A 429 or a 503
// keeps its Retry-After (retryAfter) as the error's RetryAfter, which the
// CLI prints as when to try again; the client does not retry on its own.
func decodeErrorAnswer(resp *nethttp.Response, data []byte) error {
	e := errorAnswer(resp, data)
	if resp.StatusCode == nethttp.StatusTooManyRequests || resp.StatusCode == nethttp.StatusServiceUnavailable {
		e.RetryAfter = retryAfter(resp.Header.Get("Retry-After"))
	}
	return e
}

// errorAnswer is decodeErrorAnswer without the Retry-After.
func errorAnswer(resp *nethttp.Response, data []byte) *vdibroker.Error {
	var eb errorBody
	if err := json.Unmarshal(data, &eb); err == nil && eb.Error != nil && eb.Error.Code != "" {
		return eb.Error
	}
	code := vdibroker.EInternal
	// Not the broker's answer (a proxy's, say): map the unambiguous
	// statuses, everything else is Internal with the text in the message.
	for _, c := range []string{vdibroker.EInvalid, vdibroker.EUnauthenticated, vdibroker.EPermission,
		vdibroker.ENotFound, vdibroker.EConflict} {
		if vdibroker.HTTPStatus(c) == resp.StatusCode {
			code = c
			break
		}
	}
	msg := strings.TrimSpace(string(data))
	if len(msg) > 200 {
		msg = msg[:200]
	}
	if msg == "" {
		msg = resp.Status
	}
	return &vdibroker.Error{Code: code, Message: fmt.Sprintf("HTTP %d: %s", resp.StatusCode, msg)}
}
