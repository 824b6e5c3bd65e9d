package gateway

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"strings"

	"github.com/vdibroker/vdibroker"
)

// HTTPBroker reports tunnels to the broker over HTTP: each event is a JSON
// TunnelEvent POSTed to URL + "/open", "/channel" or "/close" with
// "Authorization: Bearer Token". The broker answers 2xx to admit or
// acknowledge, 409 Conflict when a token id was admitted before
// (ErrTokenUsed), 429 when the user holds its most tunnels (ErrUserLimit),
// 404 for a token it did not issue or whose session ended
// (ErrNotAdmitted), 401 or 403 for the gateway's credential
// (ErrCredentialRefused: a deleted token, another gateway's), another 4xx
// for a report it refuses (ErrRefused, which both wrap); any
// other answer refuses an open too, and a close is sent again. A check of the
// open tunnels is POSTed to URL + "/check" and answered 200 with the
// token ids that may go on; any other answer is no answer.
type HTTPBroker struct {
	URL   string // e.g. https://broker.example.com/api/v1/gateway/tunnels
	Token string
	// TokenFunc, when set, gives each request's token instead of Token:
	// a token file read again on SIGHUP, so the gateway's credential is
	// replaced without a restart, which would drop every tunnel.
	TokenFunc func() string
	Client    *http.Client
}

func (b *HTTPBroker) token() string {
	if b.TokenFunc != nil {
		return b.TokenFunc()
	}
	return b.Token
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
	resp, err := b.send(ctx, what, ev)
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
	case resp.StatusCode == http.StatusUnauthorized || resp.StatusCode == http.StatusForbidden:
		return fmt.Errorf("%w: broker tunnel %s: HTTP %d: %s", ErrCredentialRefused, what, resp.StatusCode, bytes.TrimSpace(msg))
	case resp.StatusCode/100 == 4 && resp.StatusCode != http.StatusRequestTimeout:
		return fmt.Errorf("%w: broker tunnel %s: HTTP %d: %s", ErrRefused, what, resp.StatusCode, bytes.TrimSpace(msg))
	case resp.StatusCode/100 != 2:
		return fmt.Errorf("broker tunnel %s: HTTP %d: %s", what, resp.StatusCode, bytes.TrimSpace(msg))
	}
	return nil
}

// send POSTs v as JSON to URL + "/" + what with the gateway's token.
func (b *HTTPBroker) send(ctx context.Context, what string, v any) (*http.Response, error) {
	body, err := json.Marshal(v)
	if err != nil {
		return nil, err
	}
	req, err := http.NewRequestWithContext(ctx, "POST", strings.TrimSuffix(b.URL, "/")+"/"+what, bytes.NewReader(body))
	if err != nil {
		return nil, err
	}
	req.Header.Set("Content-Type", "application/json")
	if tok := b.token(); tok != "" {
		req.Header.Set("Authorization", "Bearer "+tok)
	}
	c := b.Client
	if c == nil {
		c = http.DefaultClient
	}
	return c.Do(req)
}

// maxCheckAnswer bounds the broker's answer to a check: MaxTunnelCheck
// token ids of 64 characters, quoted, with room to spare.
const maxCheckAnswer = vdibroker.MaxTunnelCheck*80 + 4096

func (b *HTTPBroker) CheckTunnels(ctx context.Context, gateway string, tunnels []TunnelEvent) ([]string, error) {
	resp, err := b.send(ctx, "check", struct {
		Gateway string        `json:"gateway"`
		Tunnels []TunnelEvent `json:"tunnels"`
	}{gateway, tunnels})
	if err != nil {
		return nil, fmt.Errorf("broker tunnel check: %w", err)
	}
	defer resp.Body.Close()
	msg, err := io.ReadAll(io.LimitReader(resp.Body, maxCheckAnswer))
	if err != nil {
		return nil, fmt.Errorf("broker tunnel check: %w", err)
	}
	if resp.StatusCode != http.StatusOK {
		return nil, fmt.Errorf("broker tunnel check: HTTP %d: %s", resp.StatusCode, bytes.TrimSpace(msg[:min(len(msg), 512)]))
	}
	var a struct {
		Open *[]string `json:"open"`
	}
	if err := json.Unmarshal(msg, &a); err != nil || a.Open == nil {
		return nil, fmt.Errorf("broker tunnel check: not an answer (%v): %.100q", err, msg)
	}
	return *a.Open, nil
}

// ProbeAnswer is what a Probe learnt of the broker.
type ProbeAnswer struct {
	// Status is the HTTP status (0: the broker did not answer).
	Status int
	// Field is the field the broker's error named, when it refused the
	// check: "gateway" when the token is another gateway's (R-GW4).
	Field string
	// Gateway is the name the broker takes this gateway's reports under
	// (an older broker's answer has none); Warnings what it says is
	// amiss with the credential (the admin token, a Gateway token for no
	// gateway in particular).
	Gateway  string
	Warnings []string
}

// Probe asks the broker to check no tunnel, as a gateway does at start:
// a 200 with the list says the URL is the broker's tunnel API and it
// takes the token. Unless 200 with the list, it answers an error with the
// broker's words too.
func (b *HTTPBroker) Probe(ctx context.Context, gateway string) (ProbeAnswer, error) {
	resp, err := b.send(ctx, "check", struct {
		Gateway string        `json:"gateway"`
		Tunnels []TunnelEvent `json:"tunnels"`
	}{gateway, []TunnelEvent{}})
	if err != nil {
		return ProbeAnswer{}, err
	}
	defer resp.Body.Close()
	msg, _ := io.ReadAll(io.LimitReader(resp.Body, 16<<10))
	p := ProbeAnswer{Status: resp.StatusCode}
	if resp.StatusCode != http.StatusOK {
		var e struct {
			Error struct {
				Field string `json:"field"`
			} `json:"error"`
		}
		if json.Unmarshal(msg, &e) == nil {
			p.Field = e.Error.Field
		}
		return p, fmt.Errorf("HTTP %d: %.320s", resp.StatusCode, brokerWords(msg))
	}
	var a struct {
		Open     *[]string `json:"open"`
		Gateway  string    `json:"gateway"`
		Warnings []string  `json:"warnings"`
	}
	if err := json.Unmarshal(msg, &a); err != nil || a.Open == nil {
		return p, fmt.Errorf("HTTP 200 but not the broker's answer: %.100q", msg)
	}
	p.Gateway, p.Warnings = a.Gateway, a.Warnings
	return p, nil
}

// brokerWords is the message of the broker's JSON error body, or the
// body itself (a web page's first bytes, say) when it is none.
func brokerWords(body []byte) string {
	var e struct {
		Error struct {
			Message string `json:"message"`
		} `json:"error"`
	}
	if json.Unmarshal(body, &e) == nil && e.Error.Message != "" {
		return e.Error.Message
	}
	return string(bytes.TrimSpace(body))
}
