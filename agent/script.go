package agent

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"os/exec"
	"strconv"
	"strings"
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
	out, err := runScript(ctx, path, timeout)
	if err != nil {
		return nil, err
	}
	v, err := ParseCustomLoad(out)
	if err != nil {
		return nil, fmt.Errorf("custom load script %s: %w", path, err)
	}
	return v, nil
}

// RunLoadScript runs a load script that writes its value somewhere else (a
// Horizon script writes the registry) and ignores its output; the error says
// why it failed, wrapping ErrScriptTimeout on timeout.
func RunLoadScript(ctx context.Context, path string, timeout time.Duration) error {
	_, err := runScript(ctx, path, timeout)
	return err
}

// runScript runs the script at path without arguments and returns its
// standard output.
func runScript(ctx context.Context, path string, timeout time.Duration) ([]byte, error) {
	if timeout <= 0 {
		timeout = DefaultScriptTimeout
	}
	checked, err := checkedScript(path)
	if err != nil {
		return nil, fmt.Errorf("custom load script %s: %w", path, err)
	}
	testHookFileChecked()
	ctx, cancel := context.WithTimeout(ctx, timeout)
	defer cancel()
	cmd := exec.CommandContext(ctx, checked)
	var stdout, stderr bytes.Buffer
	cmd.Stdout, cmd.Stderr = &stdout, &stderr
	// A child that inherited stdout must not keep Wait from returning.
	cmd.WaitDelay = time.Second
	killGroup(cmd)
	err = cmd.Run()
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
	return stdout.Bytes(), nil
}

// ParseCustomLoad reads a custom load script's output (R-IDX3): one integer,
// surrounding white space allowed; 0..100 as is, over 100 capped at 100;
// negative numbers, fractions, words or several values are "no value".
func ParseCustomLoad(out []byte) (*int, error) {
	n, err := parseLoadText(string(out))
	if err == nil {
		var v *int
		if v, err = loadValue(n); err == nil {
			return v, nil
		}
	}
	return nil, fmt.Errorf("printed %w", err)
}

// parseLoadText reads one decimal integer with white space around it.
func parseLoadText(s string) (int64, error) {
	s = strings.TrimSpace(s)
	n, err := strconv.ParseInt(s, 10, 64)
	if err != nil {
		return 0, fmt.Errorf("%s, want an integer 0..100", quoteShort(s))
	}
	return n, nil
}

// maxQuoted bounds quoteShort's answer, in bytes.
const maxQuoted = 64

// quoteShort is s quoted as %q does, cut with "…" to at most 40 runes and
// maxQuoted bytes: the reason a health error gives stays short whatever
// the script or the registry wrote, runes quoted as \u1717 or \U0010ffff
// (up to 10 bytes each) too.
func quoteShort(s string) string {
	r := []rune(s)
	cut := len(r) > 40
	if cut {
		r = r[:40]
	}
	for k := len(r); k >= 0; k-- {
		t := string(r[:k])
		if cut || k < len(r) {
			t += "…"
		}
		if q := strconv.Quote(t); len(q) <= maxQuoted {
			return q
		}
	}
	return strconv.Quote("…")
}

// loadValue applies R-IDX3's range to a custom load value, from a script or
// the registry: negative is no value, above 100 is 100.
func loadValue(n int64) (*int, error) {
	if n < 0 {
		return nil, fmt.Errorf("%d, want an integer 0..100", n)
	}
	v := int(min(n, 100))
	return &v, nil
}
