package agent

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"os/exec"
	"strconv"
	"time"
)

// DefaultScriptTimeout is how long the custom load script may run (R-IDX3).
const DefaultScriptTimeout = 10 * time.Second

// ErrScriptTimeout is returned when the custom load script ran past its
// timeout and was killed; the agent then keeps the previous value (R-IDX3).
var ErrScriptTimeout = errors.New("custom load script timed out")

// RunCustomScript runs the custom load script at path and returns its value
// (R-IDX3): an integer 0..100 on stdout, values over 100 capped at 100. A
// script that fails, prints anything else, or cannot be run gives no value
// (nil) and an error saying why. On timeout the script and its children are
// killed and the error wraps ErrScriptTimeout.
func RunCustomScript(ctx context.Context, path string, timeout time.Duration) (*int, error) {
	if timeout <= 0 {
		timeout = DefaultScriptTimeout
	}
	ctx, cancel := context.WithTimeout(ctx, timeout)
	defer cancel()
	cmd := exec.CommandContext(ctx, path)
	var stdout, stderr bytes.Buffer
	cmd.Stdout, cmd.Stderr = &stdout, &stderr
	// A child that inherited stdout must not keep Wait from returning.
	cmd.WaitDelay = time.Second
	killGroup(cmd)
	err := cmd.Run()
	if ctx.Err() == context.DeadlineExceeded {
		return nil, fmt.Errorf("custom load script %s: %w after %s", path, ErrScriptTimeout, timeout)
	}
	if err != nil {
		msg := bytes.TrimSpace(stderr.Bytes())
		if len(msg) > 200 {
			msg = msg[:200]
		}
		if len(msg) > 0 {
			return nil, fmt.Errorf("custom load script %s: %w: %s", path, err, msg)
		}
		return nil, fmt.Errorf("custom load script %s: %w", path, err)
	}
	v, err := ParseCustomLoad(stdout.Bytes())
	if err != nil {
		return nil, fmt.Errorf("custom load script %s: %w", path, err)
	}
	return v, nil
}

// ParseCustomLoad reads a custom load script's output (R-IDX3): one integer,
// surrounding white space allowed; 0..100 as is, over 100 capped at 100;
// negative numbers, fractions, words or several values are "no value".
func ParseCustomLoad(out []byte) (*int, error) {
	s := string(bytes.TrimSpace(out))
	n, err := strconv.Atoi(s)
	if err != nil {
		if len(s) > 40 {
			s = s[:40] + "…"
		}
		return nil, fmt.Errorf("printed %q, want an integer 0..100", s)
	}
	if n < 0 {
		return nil, fmt.Errorf("printed %d, want an integer 0..100", n)
	}
	n = min(n, 100)
	return &n, nil
}
