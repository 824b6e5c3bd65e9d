package portal

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"net/http"
	"net/http/httptest"

	"github.com/vdibroker/vdibroker"
)

// caller calls the broker's API in-process as one user: a User token
// (token), or the identity single sign-on verified (who, which the API
// takes from the request's context, vdibroker.WithVerified).
type caller struct {
	h          http.Handler
	token      string
	who        *vdibroker.Principal
	remoteAddr string
}

// do sends one request and decodes a JSON answer into out (when
// non-nil); an API error comes back as the *vdibroker.Error it answered.
func (c *caller) do(ctx context.Context, method, path string, body, out any) error {
	var rd bytes.Reader
	if body != nil {
		b, err := json.Marshal(body)
		if err != nil {
			return err
		}
		rd.Reset(b)
	}
	if c.who != nil {
		ctx = vdibroker.WithVerified(ctx, c.who)
	}
	req := httptest.NewRequestWithContext(ctx, method, path, &rd)
	req.RemoteAddr = c.remoteAddr
	req.Header.Set("Accept", "application/json")
	if body != nil {
		req.Header.Set("Content-Type", "application/json")
	}
	if c.who == nil {
		req.Header.Set("Authorization", "Bearer "+c.token)
	}
	rec := httptest.NewRecorder()
	c.h.ServeHTTP(rec, req)
	if rec.Code >= 400 {
		var eb struct {
			Error *vdibroker.Error `json:"error"`
		}
		if err := json.Unmarshal(rec.Body.Bytes(), &eb); err != nil || eb.Error == nil || eb.Error.Code == "" {
			return vdibroker.Errorf(vdibroker.EInternal, "%s %s: HTTP %d", method, path, rec.Code)
		}
		return eb.Error
	}
	if out == nil || rec.Body.Len() == 0 {
		return nil
	}
	if err := json.Unmarshal(rec.Body.Bytes(), out); err != nil {
		return fmt.Errorf("%s %s: decode answer: %w", method, path, err)
	}
	return nil
}
