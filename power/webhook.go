package power

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"slices"
	"strings"
	"time"

	"github.com/vdibroker/vdibroker"
)

// Webhook POSTs {"action", "pool", "host", "address"} to URL for each
// action, with "Authorization: Bearer <secret>" when a secret is set. Any
// 2xx answer is success. For "status" the answer is
// {"powerState": "Running"|"Stopped"|...}.
type Webhook struct {
	Name    string
	URL     string
	Secret  string // read from secretFile when the config is loaded
	Client  *http.Client
	Timeout time.Duration
}

// WebhookRequest is the body of every webhook call.
type WebhookRequest struct {
	Action  string `json:"action"` // start, stop, status
	Pool    string `json:"pool"`
	Host    string `json:"host"`
	Address string `json:"address"`
}

// WebhookStatus is the answer to a status call.
type WebhookStatus struct {
	PowerState string `json:"powerState"`
}

// Start implements Driver.
func (w *Webhook) Start(ctx context.Context, t Target) error {
	_, err := w.call(ctx, "start", t)
	return err
}

// Stop implements Driver.
func (w *Webhook) Stop(ctx context.Context, t Target) error {
	_, err := w.call(ctx, "stop", t)
	return err
}

// Status implements Driver.
func (w *Webhook) Status(ctx context.Context, t Target) (string, error) {
	body, err := w.call(ctx, "status", t)
	if err != nil {
		return vdibroker.PowerUnknown, err
	}
	var st WebhookStatus
	if err := json.Unmarshal(body, &st); err != nil {
		return vdibroker.PowerUnknown, fmt.Errorf("power driver %q: status %s/%s: answer: %w", w.Name, t.Pool, t.Host, err)
	}
	if !slices.Contains(powerStates, st.PowerState) {
		return vdibroker.PowerUnknown, fmt.Errorf("power driver %q: status %s/%s: powerState %q is not one of %s",
			w.Name, t.Pool, t.Host, st.PowerState, strings.Join(powerStates, ", "))
	}
	return st.PowerState, nil
}

var powerStates = []string{vdibroker.PowerRunning, vdibroker.PowerStarting, vdibroker.PowerStopping, vdibroker.PowerStopped, vdibroker.PowerUnknown}

func (w *Webhook) call(ctx context.Context, action string, t Target) ([]byte, error) {
	timeout := w.Timeout
	if timeout <= 0 {
		timeout = DefaultTimeout
	}
	ctx, cancel := context.WithTimeout(ctx, timeout)
	defer cancel()
	b, _ := json.Marshal(WebhookRequest{Action: action, Pool: t.Pool, Host: t.Host, Address: t.Address})
	req, err := http.NewRequestWithContext(ctx, http.MethodPost, w.URL, bytes.NewReader(b))
	if err != nil {
		return nil, err
	}
	req.Header.Set("Content-Type", "application/json")
	if w.Secret != "" {
		req.Header.Set("Authorization", "Bearer "+w.Secret)
	}
	c := w.Client
	if c == nil {
		c = http.DefaultClient
	}
	resp, err := c.Do(req)
	if err != nil {
		return nil, fmt.Errorf("power driver %q: %s %s/%s: %w", w.Name, action, t.Pool, t.Host, err)
	}
	defer resp.Body.Close()
	body, err := io.ReadAll(io.LimitReader(resp.Body, 64<<10))
	if err != nil {
		return nil, fmt.Errorf("power driver %q: %s %s/%s: read answer: %w", w.Name, action, t.Pool, t.Host, err)
	}
	if resp.StatusCode/100 != 2 {
		msg := bytes.TrimSpace(body)
		if len(msg) > 512 {
			msg = append(msg[:512:512], "..."...)
		}
		return nil, fmt.Errorf("power driver %q: %s %s/%s: HTTP %d: %s", w.Name, action, t.Pool, t.Host, resp.StatusCode, msg)
	}
	return body, nil
}
