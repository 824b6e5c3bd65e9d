package gateway

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"strings"
)

// HTTPBroker reports tunnels to the broker over HTTP: each event is a JSON
// TunnelEvent POSTed to URL + "/open", "/channel" or "/close" with
// "Authorization: Bearer Token". The broker answers 2xx to admit or
// acknowledge, 409 Conflict when a token id was admitted before
// (ErrTokenUsed), 429 when the user holds its most tunnels (ErrUserLimit),
// 404 for a token it did not issue or whose session ended
// (ErrNotAdmitted); any other answer refuses an open too.
type HTTPBroker struct {
	URL    string // e.g. https://broker.example.com/api/v1/gateway/tunnels
	Token  string
	Client *http.Client
}

var _ Broker = (*HTTPBroker)(nil)

func (b *HTTPBroker) TunnelOpen(ctx context.Context, ev TunnelEvent) error {
	return b.post(ctx, "open", ev)
}
func (b *HTTPBroker) ChannelOpen(ctx context.Context, ev TunnelEvent) error {
	return b.post(ctx, "channel", ev)
}
func (b *HTTPBroker) TunnelClose(ctx context.Context, ev TunnelEvent) error {
	return b.post(ctx, "close", ev)
}

func (b *HTTPBroker) post(ctx context.Context, what string, ev TunnelEvent) error {
	body, err := json.Marshal(ev)
	if err != nil {
		return err
	}
	req, err := http.NewRequestWithContext(ctx, "POST", strings.TrimSuffix(b.URL, "/")+"/"+what, bytes.NewReader(body))
	if err != nil {
		return err
	}
	req.Header.Set("Content-Type", "application/json")
	if b.Token != "" {
		req.Header.Set("Authorization", "Bearer "+b.Token)
	}
	c := b.Client
	if c == nil {
		c = http.DefaultClient
	}
	resp, err := c.Do(req)
	if err != nil {
		return fmt.Errorf("broker tunnel %s: %w", what, err)
	}
	defer resp.Body.Close()
	msg, _ := io.ReadAll(io.LimitReader(resp.Body, 512))
	switch {
	case resp.StatusCode == http.StatusConflict:
		return ErrTokenUsed
	case resp.StatusCode == http.StatusTooManyRequests:
		return ErrUserLimit
	case resp.StatusCode == http.StatusNotFound:
		return fmt.Errorf("%w: %s", ErrNotAdmitted, bytes.TrimSpace(msg))
	case resp.StatusCode/100 != 2:
		return fmt.Errorf("broker tunnel %s: HTTP %d: %s", what, resp.StatusCode, bytes.TrimSpace(msg))
	}
	return nil
}
