package loadgen

import (
	"context"
	"io"
	"net/http"
	"net/url"
	"strings"
	"sync"
	"sync/atomic"
)

// GlobalConnect runs cfg's load as global connects to global entitlement
// name (POST /api/v1/globalentitlements/{name}/connect, SPEC §7) at
// cfg.Server: each for a distinct user, as Connect does for a pool.
func GlobalConnect(ctx context.Context, cfg Config, name string) (*Result, error) {
	cfg.HostPool = name // Validate wants a target; the entitlement is it
	if err := cfg.Validate(); err != nil {
		return nil, err
	}
	endpoint := strings.TrimRight(cfg.Server, "/") + "/api/v1/globalentitlements/" + url.PathEscape(name) + "/connect"
	return load(ctx, cfg, endpoint)
}

// CallCounter counts the HTTP calls that pass through the transports it
// wraps (Wrap) and their bytes: request line, headers and body sent, and
// status line, headers and body received, as HTTP/1.1 writes them (a
// header line is "Name: value\r\n"). bench federation wraps every pod's
// pod-to-pod client with one.
type CallCounter struct {
	mu    sync.Mutex
	calls map[string]int64 // by operation: the last element of the path
	bytes atomic.Int64
}

// NewCallCounter returns a counter at zero.
func NewCallCounter() *CallCounter { return &CallCounter{calls: map[string]int64{}} }

// Wrap returns next with every call counted.
func (c *CallCounter) Wrap(next http.RoundTripper) http.RoundTripper {
	return countingTransport{c: c, next: next}
}

// Take returns the calls by operation and the bytes counted since the last
// Take, and starts again from zero.
func (c *CallCounter) Take() (calls map[string]int64, bytes int64) {
	c.mu.Lock()
	calls, c.calls = c.calls, map[string]int64{}
	c.mu.Unlock()
	return calls, c.bytes.Swap(0)
}

type countingTransport struct {
	c    *CallCounter
	next http.RoundTripper
}

func (t countingTransport) RoundTrip(r *http.Request) (*http.Response, error) {
	op := r.URL.Path[strings.LastIndexByte(r.URL.Path, '/')+1:]
	t.c.mu.Lock()
	t.c.calls[op]++
	t.c.mu.Unlock()
	// Request line and Host header, the headers, the body.
	n := int64(len(r.Method)+len(r.URL.RequestURI())+len(" HTTP/1.1\r\n")) + int64(len("Host: \r\n")+len(r.URL.Host)) +
		headerBytes(r.Header) + int64(len("\r\n")) + max(r.ContentLength, 0)
	t.c.bytes.Add(n)
	resp, err := t.next.RoundTrip(r)
	if err != nil {
		return nil, err
	}
	t.c.bytes.Add(int64(len("HTTP/1.1 ")+len(resp.Status)+len("\r\n")) + headerBytes(resp.Header) + int64(len("\r\n")))
	resp.Body = &countingBody{ReadCloser: resp.Body, n: &t.c.bytes}
	return resp, nil
}

func headerBytes(h http.Header) int64 {
	var n int64
	for k, vs := range h {
		for _, v := range vs {
			n += int64(len(k) + len(": ") + len(v) + len("\r\n"))
		}
	}
	return n
}

// countingBody adds what is read of a response body to n.
type countingBody struct {
	io.ReadCloser
	n *atomic.Int64
}

func (b *countingBody) Read(p []byte) (int, error) {
	k, err := b.ReadCloser.Read(p)
	b.n.Add(int64(k))
	return k, err
}
