// Package inproc calls the broker's API in-process, as the web pages (the
// admin console, the user portal) do: a request served by the API's
// handler into memory, its JSON answer decoded, and an API error read
// back as the *vdibroker.Error it answered, so a page shows the API's
// code, message and status.
package inproc

import (
	"bytes"
	"encoding/json"
	"fmt"
	"net/http"
	"strconv"
	"time"

	"github.com/vdibroker/vdibroker"
)

// Do serves req with h and decodes a JSON answer into out (when non-nil
// and the answer has a body). An answer of 400 or more is the API's
// *vdibroker.Error, or an internal error naming the status when its body
// is none. A redirect is NotFound: the API never redirects, the mux does
// for a path that names no API call until it is cleaned (a dot segment
// a page put in a path from a value of its own request, "%2E%2E"), so
// nothing was done.
func Do(h http.Handler, req *http.Request, out any) error {
	rec := &recorder{header: http.Header{}}
	h.ServeHTTP(rec, req)
	if rec.code >= 300 && rec.code < 400 {
		return vdibroker.Errorf(vdibroker.ENotFound, "%s %s: no such API call", req.Method, vdibroker.Cut(req.URL.Path, vdibroker.MaxAuditField))
	}
	if rec.code >= 400 {
		var eb struct {
			Error *vdibroker.Error `json:"error"`
		}
		if err := json.Unmarshal(rec.body.Bytes(), &eb); err != nil || eb.Error == nil || eb.Error.Code == "" {
			return vdibroker.Errorf(vdibroker.EInternal, "%s %s: HTTP %d", req.Method, req.URL.Path, rec.code)
		}
		if s, err := strconv.Atoi(rec.header.Get("Retry-After")); err == nil && s > 0 {
			eb.Error.RetryAfter = time.Duration(s) * time.Second // not in the body (json:"-")
		}
		return eb.Error
	}
	if out == nil || rec.body.Len() == 0 {
		return nil
	}
	if err := json.Unmarshal(rec.body.Bytes(), out); err != nil {
		return fmt.Errorf("%s %s: decode answer: %w", req.Method, req.URL.Path, err)
	}
	return nil
}

// recorder is the in-memory ResponseWriter the API answers into.
type recorder struct {
	header http.Header
	code   int
	body   bytes.Buffer
}

func (r *recorder) Header() http.Header { return r.header }

func (r *recorder) WriteHeader(code int) {
	if r.code == 0 {
		r.code = code
	}
}

func (r *recorder) Write(b []byte) (int, error) {
	if r.code == 0 {
		r.code = http.StatusOK
	}
	return r.body.Write(b)
}
