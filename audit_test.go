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
