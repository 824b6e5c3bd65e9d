package console

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"net/url"
	"strconv"
	"strings"

	"github.com/vdibroker/vdibroker"
	"github.com/vdibroker/vdibroker/internal/inproc"
	"github.com/vdibroker/vdibroker/placement"
)

// apiPrefix is where the broker's API lives (SPEC §9).
const apiPrefix = "/api/v1"

// api calls the broker's HTTP API in-process with one user's token. It
// speaks the documented REST API (SPEC §9), not the server's internals, so
// the server authorises and validates every call.
type api struct {
	h          http.Handler
	token      string
	remoteAddr string
	// requestID is the console request's X-Request-Id: its API calls
	// carry it, so their audit entries and log lines name the console's
	// request.
	requestID string
}

// apiFor is the API of the console request r answered by w, as the user
// of token.
func (c *Console) apiFor(w http.ResponseWriter, r *http.Request, token string) *api {
	return &api{h: c.api, token: token, remoteAddr: r.RemoteAddr, requestID: w.Header().Get("X-Request-Id")}
}

// poolAnswer is a host pool as the API answers it, with R-P3 warnings.
type poolAnswer struct {
	vdibroker.HostPool
	Warnings []string               `json:"warnings"`
	Summary  *vdibroker.PoolSummary `json:"summary"`
}

type listAnswer[T any] struct {
	Value    []T    `json:"value"`
	NextLink string `json:"nextLink"`
}

// do sends one request and decodes a JSON answer into out (when non-nil).
// API errors come back as *vdibroker.Error with the server's code, message
// and field.
func (a *api) do(ctx context.Context, method, path string, body, out any) error {
	return a.doHeader(ctx, method, path, nil, body, out)
}

// doHeader is do with request headers h (If-None-Match).
func (a *api) doHeader(ctx context.Context, method, path string, h http.Header, body, out any) error {
	var rd io.Reader
	if body != nil {
		b, err := json.Marshal(body)
		if err != nil {
			return err
		}
		rd = bytes.NewReader(b)
	}
	req, err := http.NewRequestWithContext(ctx, method, path, rd)
	if err != nil {
		return err
	}
	for k, vs := range h {
		req.Header[k] = vs
	}
	req.RemoteAddr = a.remoteAddr
	req.RequestURI = path
	req.Header.Set("Authorization", "Bearer "+a.token)
	req.Header.Set("Accept", "application/json")
	if a.requestID != "" {
		req.Header.Set("X-Request-Id", a.requestID)
	}
	if body != nil {
		req.Header.Set("Content-Type", "application/json")
	}
	return inproc.Do(a.h, req, out)
}

// list follows nextLink until the list is complete.
func list[T any](ctx context.Context, a *api, path string) ([]T, error) {
	var all []T
	sep := "?"
	if strings.Contains(path, "?") {
		sep = "&"
	}
	next := path + sep + "limit=1000"
	for next != "" {
		var page listAnswer[T]
		if err := a.do(ctx, http.MethodGet, next, nil, &page); err != nil {
			return nil, err
		}
		all = append(all, page.Value...)
		next = ""
		if page.NextLink != "" {
			u, err := url.Parse(page.NextLink)
			if err != nil {
				return nil, fmt.Errorf("bad nextLink %q: %w", page.NextLink, err)
			}
			next = u.RequestURI()
		}
	}
	return all, nil
}

func poolPath(pool string) string { return apiPrefix + "/hostpools/" + url.PathEscape(pool) }

// whoAmI is who a token is, as GET /api/v1/whoami answers.
type whoAmI struct {
	Role    string `json:"role"` // Admin, Contributor, Helpdesk, Reader or User
	Subject string `json:"subject"`
	TokenID string `json:"tokenId"`
	Kind    string `json:"kind"` // admin, token or oidc
	// HostPools is the token's scope; empty is every pool.
	HostPools []string `json:"hostPools"`
}

// whoami returns who the token is.
func (a *api) whoami(ctx context.Context) (*whoAmI, error) {
	var me whoAmI
	err := a.do(ctx, http.MethodGet, apiPrefix+"/whoami", nil, &me)
	return &me, err
}

func (a *api) listPools(ctx context.Context) ([]poolAnswer, error) {
	return list[poolAnswer](ctx, a, apiPrefix+"/hostpools")
}

// listPoolSummaries lists the pools with their summaries (one read of
// each pool's hosts on the server, not a page of hosts each).
func (a *api) listPoolSummaries(ctx context.Context) ([]poolAnswer, error) {
	return list[poolAnswer](ctx, a, apiPrefix+"/hostpools?summary=true")
}

func (a *api) getPool(ctx context.Context, pool string) (*poolAnswer, error) {
	var p poolAnswer
	return &p, a.do(ctx, http.MethodGet, poolPath(pool), nil, &p)
}

func (a *api) patchPool(ctx context.Context, pool string, patch map[string]any) (*poolAnswer, error) {
	var p poolAnswer
	return &p, a.do(ctx, http.MethodPatch, poolPath(pool), patch, &p)
}

// getPoolSummary is getPool with the pool's summary (hosts by status,
// sessions) from one read on the server.
func (a *api) getPoolSummary(ctx context.Context, pool string) (*poolAnswer, error) {
	var p poolAnswer
	return &p, a.do(ctx, http.MethodGet, poolPath(pool)+"?summary=true", nil, &p)
}

// hostsPage is one page of a pool's hosts after after (by name) and the
// name to ask the next page after ("" on the last page).
func (a *api) hostsPage(ctx context.Context, pool, after string, limit int) ([]vdibroker.SessionHost, string, error) {
	q := url.Values{"limit": {strconv.Itoa(limit)}}
	if after != "" {
		q.Set("after", after)
	}
	var page listAnswer[vdibroker.SessionHost]
	if err := a.do(ctx, http.MethodGet, poolPath(pool)+"/sessionhosts?"+q.Encode(), nil, &page); err != nil {
		return nil, "", err
	}
	next := ""
	if page.NextLink != "" && len(page.Value) > 0 {
		next = page.Value[len(page.Value)-1].Name
	}
	return page.Value, next, nil
}

func (a *api) listHosts(ctx context.Context, pool string) ([]vdibroker.SessionHost, error) {
	return list[vdibroker.SessionHost](ctx, a, poolPath(pool)+"/sessionhosts")
}

func (a *api) patchHost(ctx context.Context, pool, host string, patch map[string]any) error {
	return a.do(ctx, http.MethodPatch, poolPath(pool)+"/sessionhosts/"+url.PathEscape(host), patch, nil)
}

// powerHost asks the API to start or stop a host (R-A4).
func (a *api) powerHost(ctx context.Context, pool, host, action string, force bool) error {
	path := poolPath(pool) + "/sessionhosts/" + url.PathEscape(host) + "/" + action
	if force {
		path += "?force=true"
	}
	return a.do(ctx, http.MethodPost, path, struct{}{}, nil)
}

func (a *api) listSessions(ctx context.Context, pool string) ([]vdibroker.UserSession, error) {
	return list[vdibroker.UserSession](ctx, a, poolPath(pool)+"/usersessions")
}

func (a *api) getHost(ctx context.Context, pool, host string) (*vdibroker.SessionHost, error) {
	var h vdibroker.SessionHost
	return &h, a.do(ctx, http.MethodGet, poolPath(pool)+"/sessionhosts/"+url.PathEscape(host), nil, &h)
}

// sessionQuery is one page of GET .../usersessions: the API's filters
// (SPEC §9), its page size and cursor.
type sessionQuery struct {
	User, State, SessionHost string
	// UserPrefix searches by the start of the name, any case (the API's
	// ?userPrefix=), instead of one exact User.
	UserPrefix string
	Limit      int
	After      string // the cursor of the API's nextLink
}

// sessionsPage reads one page of a pool's sessions; next is the cursor of
// the page after it ("" when this is the last).
func (a *api) sessionsPage(ctx context.Context, pool string, q sessionQuery) (sessions []vdibroker.UserSession, next string, err error) {
	v := url.Values{}
	for k, val := range map[string]string{"user": q.User, "userPrefix": q.UserPrefix, "state": q.State, "sessionHost": q.SessionHost, "after": q.After} {
		if val != "" {
			v.Set(k, val)
		}
	}
	if q.Limit > 0 {
		v.Set("limit", strconv.Itoa(q.Limit))
	}
	var page listAnswer[vdibroker.UserSession]
	if err := a.do(ctx, http.MethodGet, poolPath(pool)+"/usersessions?"+v.Encode(), nil, &page); err != nil {
		return nil, "", err
	}
	if page.NextLink != "" {
		u, err := url.Parse(page.NextLink)
		if err != nil {
			return nil, "", fmt.Errorf("bad nextLink %q: %w", page.NextLink, err)
		}
		next = u.Query().Get("after")
	}
	return page.Value, next, nil
}

// logoff, disconnect and sendMessage queue a command for a session's
// host (R-S4) and answer its warnings: the host cannot carry it out now.
func (a *api) logoff(ctx context.Context, pool, id string) (*vdibroker.Command, error) {
	var c vdibroker.Command
	err := a.do(ctx, http.MethodDelete, poolPath(pool)+"/usersessions/"+url.PathEscape(id), nil, &c)
	return &c, err
}

func (a *api) disconnect(ctx context.Context, pool, id string) (*vdibroker.Command, error) {
	var c vdibroker.Command
	err := a.do(ctx, http.MethodPost, poolPath(pool)+"/usersessions/"+url.PathEscape(id)+"/disconnect", struct{}{}, &c)
	return &c, err
}

func (a *api) getSession(ctx context.Context, pool, id string) (*vdibroker.UserSession, error) {
	var s vdibroker.UserSession
	return &s, a.do(ctx, http.MethodGet, poolPath(pool)+"/usersessions/"+url.PathEscape(id), nil, &s)
}

func (a *api) placement(ctx context.Context, pool, id string) (*placement.Explain, error) {
	var e placement.Explain
	return &e, a.do(ctx, http.MethodGet, poolPath(pool)+"/usersessions/"+url.PathEscape(id)+"/placement", nil, &e)
}

// createPool creates pool name from body (the §2 fields), never replacing
// one of that name (If-None-Match: *).
func (a *api) createPool(ctx context.Context, name string, body map[string]any) (*poolAnswer, error) {
	var p poolAnswer
	return &p, a.doHeader(ctx, http.MethodPut, poolPath(name), http.Header{"If-None-Match": {"*"}}, body, &p)
}

// deletePool deletes a pool and answers what went (SPEC §9): refused
// while it has hosts or open sessions, unless force.
func (a *api) deletePool(ctx context.Context, pool string, force bool) (*vdibroker.PoolDeletion, error) {
	var d vdibroker.PoolDeletion
	return &d, a.do(ctx, http.MethodDelete, poolPath(pool)+"?force="+strconv.FormatBool(force), nil, &d)
}

// createRegistrationToken issues a registration key; its secret is only
// in this answer.
func (a *api) createRegistrationToken(ctx context.Context, pool string, req vdibroker.RegistrationTokenRequest) (*vdibroker.RegistrationTokenResponse, error) {
	var t vdibroker.RegistrationTokenResponse
	return &t, a.do(ctx, http.MethodPost, poolPath(pool)+"/registrationtoken", req, &t)
}

func (a *api) listRegistrationTokens(ctx context.Context, pool string) ([]vdibroker.RegistrationToken, error) {
	return list[vdibroker.RegistrationToken](ctx, a, poolPath(pool)+"/registrationtokens")
}

// listAppGroups lists the application groups of pool.
func (a *api) listAppGroups(ctx context.Context, pool string) ([]vdibroker.ApplicationGroup, error) {
	return list[vdibroker.ApplicationGroup](ctx, a, "/api/v1/applicationgroups?hostPool="+url.QueryEscape(pool))
}

// deleteHost removes a host and revokes its credential; refused while it
// has sessions, unless force.
func (a *api) deleteHost(ctx context.Context, pool, host string, force bool) error {
	return a.do(ctx, http.MethodDelete, poolPath(pool)+"/sessionhosts/"+url.PathEscape(host)+"?force="+strconv.FormatBool(force), nil, nil)
}

// sendMessage queues a message for a session's user (R-S4).
func (a *api) sendMessage(ctx context.Context, pool, id, message string) ([]string, error) {
	var c vdibroker.Command
	err := a.do(ctx, http.MethodPost, poolPath(pool)+"/usersessions/"+url.PathEscape(id)+"/sendmessage", map[string]string{"message": message}, &c)
	return c.Warnings, err
}

// sendHostMessage queues a message for every Active and Disconnected
// session of a host (R-S4): how many, and the API's warnings (the host
// cannot show it now).
func (a *api) sendHostMessage(ctx context.Context, pool, host, message string) (*vdibroker.HostMessage, error) {
	var m vdibroker.HostMessage
	err := a.do(ctx, http.MethodPost, poolPath(pool)+"/sessionhosts/"+url.PathEscape(host)+"/sendmessage", map[string]string{"message": message}, &m)
	return &m, err
}

// itoa is strconv.Itoa, short for templates and paths.
