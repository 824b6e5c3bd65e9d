package vdibroker_test

import (
	"bytes"
	"encoding/json"
	"log/slog"
	"strings"
	"testing"

	"github.com/vdibroker/vdibroker"
)

// An audit entry logged through a text handler reads as its JSON, its
// before and after documents included, not as Go's dump of a struct with
// byte slices.
func TestAuditEntryTextLog(t *testing.T) {
	e := &vdibroker.AuditEntry{Seq: 7, Action: "hostpool.put", Target: "hostpools/p1", Outcome: "ok",
		Before: json.RawMessage(`null`), After: json.RawMessage(`{"name":"p1"}`)}
	var buf bytes.Buffer
	slog.New(slog.NewTextHandler(&buf, nil)).Info("audit", "audit", e)
	line := buf.String()
	for _, want := range []string{`\"action\":\"hostpool.put\"`, `\"after\":{\"name\":\"p1\"}`, `\"seq\":7`} {
		if !strings.Contains(line, want) {
			t.Errorf("text log line %q lacks %s", line, want)
		}
	}
	if strings.Contains(line, "[123 34") {
		t.Errorf("text log line shows the document as bytes: %q", line)
	}
}

// TestCut_RSEC: long texts keep a prefix and a hash of the whole, within
// the bound; short ones are untouched.
func TestCut_RSEC(t *testing.T) {
	long := strings.Repeat("é", 1000) // 2,000 bytes
	got := vdibroker.Cut(long, vdibroker.MaxAuditField)
	if len(got) > vdibroker.MaxAuditField || !strings.HasPrefix(got, "éé") || !strings.Contains(got, "…sha256:") {
		t.Errorf("Cut = %d bytes %q", len(got), got)
	}
	if other := vdibroker.Cut(long+"x", vdibroker.MaxAuditField); other == got {
		t.Error("two texts differing after the cut read the same")
	}
	if got := vdibroker.Cut("short", vdibroker.MaxAuditField); got != "short" {
		t.Errorf("Cut(short) = %q", got)
	}
}
