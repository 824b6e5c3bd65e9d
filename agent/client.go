package agent

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net/http"
	"strconv"
	"strings"
	"time"

	"github.com/vdibroker/vdibroker"
)

// Client calls the broker's two agent endpoints (SPEC §9). Errors the broker
// answered come back as *vdibroker.Error; anything else (connection refused,
// timeouts, a proxy's HTML page) is a transport error the agent retries.
type Client struct {
	// Server is the broker's base URL, e.g. http://broker:8080.
	Server string
	HTTP   *http.Client
}

// maxResponse bounds what the agent reads of an answer.
const maxResponse = 8 << 20

// Register calls POST /api/v1/agent/register.
func (c *Client) Register(ctx context.Context, req vdibroker.RegisterRequest) (*vdibroker.RegisterResponse, error) {
	var resp vdibroker.RegisterResponse
	if err := c.post(ctx, "/api/v1/agent/register", "", req, &resp); err != nil {
		return nil, fmt.Errorf("register: %w", err)
	}
	if resp.Credential == "" {
		return nil, fmt.Errorf("register: broker answered without a credential")
	}
	return &resp, nil
}

// Heartbeat calls POST /api/v1/agent/heartbeat with the host credential.
func (c *Client) Heartbeat(ctx context.Context, credential string, req vdibroker.HeartbeatRequest) (*vdibroker.HeartbeatResponse, error) {
	var resp vdibroker.HeartbeatResponse
	if err := c.post(ctx, "/api/v1/agent/heartbeat", credential, req, &resp); err != nil {
		return nil, fmt.Errorf("heartbeat: %w", err)
	}
	return &resp, nil
}

func (c *Client) post(ctx context.Context, path, credential string, in, out any) error {
	body, err := json.Marshal(in)
	if err != nil {
		return err
	}
	req, err := http.NewRequestWithContext(ctx, http.MethodPost, strings.TrimRight(c.Server, "/")+path, bytes.NewReader(body))
	if err != nil {
		return err
	}
	req.Header.Set("Content-Type", "application/json")
	req.Header.Set("Accept", "application/json")
	if credential != "" {
		req.Header.Set("Authorization", "Bearer "+credential)
	}
	hc := http.Client{}
	if c.HTTP != nil {
		hc = *c.HTTP
	}
	// The broker's agent API never redirects: following one would send
	// the token (in the body, 307 and 308) or the credential (in the
	// header, to the same host name on another port or scheme, http://
	// included) where the agent was not configured to send them.
	hc.CheckRedirect = func(*http.Request, []*http.Request) error { return http.ErrUseLastResponse }
	res, err := hc.Do(req)
	if err != nil {
		return err
	}
	defer res.Body.Close()
	if res.StatusCode/100 == 3 {
		loc := strings.ToValidUTF8(res.Header.Get("Location"), "?")
		if len(loc) > 200 {
			loc = loc[:200] + "…"
		}
		return &transportError{status: res.StatusCode, body: "redirect to " + loc + " not followed"}
	}
	data, err := io.ReadAll(io.LimitReader(res.Body, maxResponse))
	if err != nil {
		return fmt.Errorf("read answer: %w", err)
	}
	if res.StatusCode/100 != 2 {
		err := decodeError(res.StatusCode, data)
		if res.StatusCode == http.StatusTooManyRequests || res.StatusCode == http.StatusServiceUnavailable {
			withRetryAfter(err, retryAfter(res.Header.Get("Retry-After")))
		}
		return err
	}
	if err := json.Unmarshal(data, out); err != nil {
		return fmt.Errorf("decode answer (HTTP %d): %w", res.StatusCode, err)
	}
	return nil
}

// decodeError turns an error answer into *vdibroker.Error. A 5xx answer, or
// one that is not the broker's error JSON (a proxy, a load balancer), is a
// transport problem and stays a plain error, so the agent retries it.
func decodeError(status int, data []byte) error {
	var env struct {
		Error *vdibroker.Error `json:"error"`
	}
	if status < 500 && json.Unmarshal(data, &env) == nil && env.Error != nil && env.Error.Code != "" {
		return env.Error
	}
	if status == http.StatusUnauthorized {
		return &vdibroker.Error{Code: vdibroker.EUnauthenticated, Message: "credential refused"}
	}
	snippet := strings.TrimSpace(string(data))
	if len(snippet) > 200 {
		snippet = snippet[:200] + "…"
	}
	return &transportError{status: status, body: snippet}
}

// transportError is an answer that did not come from the broker's API logic.
type transportError struct {
	status int
	body   string
	// retryAfter is a 429's or a 503's Retry-After (0: none).
	retryAfter time.Duration
}

// maxRetryAfter bounds the Retry-After the agent takes from an answer:
// the broker asks for seconds; a longer one, whatever a server or a proxy
// says, is taken as maxRetryAfter (a long wait asked for is a long wait,
// not none), and the wait is cut to maxAskedWait anyway.
const maxRetryAfter = time.Hour

// retryAfter is a Retry-After header's delay-seconds (the form the broker
// sends), at most maxRetryAfter; 0 when absent, malformed (a sign, the
// HTTP-date form, which the broker never sends) or not above 0.
func retryAfter(v string) time.Duration {
	if v == "" || v[0] < '0' || v[0] > '9' {
		return 0
	}
	n, err := strconv.ParseUint(v, 10, 64)
	switch {
	case errors.Is(err, strconv.ErrRange), err == nil && n > uint64(maxRetryAfter/time.Second):
		return maxRetryAfter
	case err != nil || n == 0:
		return 0
	}
	return time.Duration(n) * time.Second
}

// withRetryAfter keeps d as err's Retry-After, err being decodeError's.
func withRetryAfter(err error, d time.Duration) {
	var e *vdibroker.Error
	var te *transportError
	switch {
	case errors.As(err, &e):
		e.RetryAfter = d
	case errors.As(err, &te):
		te.retryAfter = d
	}
}

func (e *transportError) Error() string {
	return fmt.Sprintf("HTTP %d: %s", e.status, e.body)
}

// refused reports whether err is the broker saying the credential or token is
// not (or no longer) valid: retrying the same call cannot help.
func refused(err error) bool {
	var e *vdibroker.Error
	return errors.As(err, &e) && (e.Code == vdibroker.EUnauthenticated || e.Code == vdibroker.EPermission || e.Code == vdibroker.ENotFound)
}

// apiError reports whether err is an answer of the broker's API (as opposed
// to an unreachable or failing broker).
func apiError(err error) bool {
	var e *vdibroker.Error
	return errors.As(err, &e)
}
