package portal

import (
	"bytes"
	"context"
	"encoding/json"
	"net/http"

	"github.com/vdibroker/vdibroker"
	"github.com/vdibroker/vdibroker/internal/inproc"
)

// caller calls the broker's API in-process as one user: a User token
// (token), or the identity single sign-on verified (who, which the API
// takes from the request's context, vdibroker.WithVerified).
type caller struct {
	h          http.Handler
	token      string
	who        *vdibroker.Principal
	remoteAddr string
	// requestID is the portal request's X-Request-Id: its API calls carry
	// it, so their audit entries and log lines name the portal's request.
	requestID string
}

// callerFor is the caller of the portal request r answered by w, as the
// user of token or who.
func (p *Portal) callerFor(w http.ResponseWriter, r *http.Request, token string, who *vdibroker.Principal) *caller {
	return &caller{h: p.cfg.API, token: token, who: who, remoteAddr: r.RemoteAddr, requestID: w.Header().Get("X-Request-Id")}
}

// do sends one request and decodes a JSON answer into out (when
// non-nil); an API error comes back as the *vdibroker.Error it answered.
func (c *caller) do(ctx context.Context, method, path string, body, out any) error {
	var b []byte
	if body != nil {
		var err error
		if b, err = json.Marshal(body); err != nil {
			return err
		}
	}
	if c.who != nil {
		ctx = vdibroker.WithVerified(ctx, c.who)
	}
	req, err := http.NewRequestWithContext(ctx, method, path, bytes.NewReader(b))
	if err != nil {
		return err
	}
	req.RequestURI = path
	req.RemoteAddr = c.remoteAddr
	req.Header.Set("Accept", "application/json")
	if c.requestID != "" {
		req.Header.Set("X-Request-Id", c.requestID)
	}
	if body != nil {
		req.Header.Set("Content-Type", "application/json")
	}
	if c.who == nil {
		req.Header.Set("Authorization", "Bearer "+c.token)
	}
	return inproc.Do(c.h, req, out)
}
