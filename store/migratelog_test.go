package store_test

import (
	"bytes"
	"encoding/json"
	"log/slog"
	"path/filepath"
	"testing"

	"github.com/vdibroker/vdibroker/store"
)

// A new store's first start says in one line at info that it migrated,
// and how far (R-D1); each migration is a debug line, and a start with
// nothing to apply says nothing at info.
func TestMigrationsLogOneLine(t *testing.T) {
	dir := t.TempDir()
	newest, err := store.NewestSchemaVersion("sqlite")
	if err != nil {
		t.Fatal(err)
	}
	files, err := filepath.Glob("migrations/sqlite/*.sql")
	if err != nil || len(files) == 0 {
		t.Fatalf("migrations: %v %v", files, err)
	}
	open := func() []map[string]any {
		var buf bytes.Buffer
		log := slog.New(slog.NewJSONHandler(&buf, &slog.HandlerOptions{Level: slog.LevelInfo}))
		s, err := store.OpenWith(t.Context(), "", dir, log, store.Options{})
		if err != nil {
			t.Fatal(err)
		}
		s.Close()
		var lines []map[string]any
		for _, l := range bytes.Split(bytes.TrimSpace(buf.Bytes()), []byte("\n")) {
			if len(l) == 0 {
				continue
			}
			var m map[string]any
			if err := json.Unmarshal(l, &m); err != nil {
				t.Fatalf("log line %q: %v", l, err)
			}
			if m["msg"] == "applied migration" || m["msg"] == "applied migrations" {
				lines = append(lines, m)
			}
		}
		return lines
	}
	first := open()
	if len(first) != 1 || first[0]["msg"] != "applied migrations" {
		t.Fatalf("first start logged %d migration lines at info, want the one summary: %v", len(first), first)
	}
	if got := first[0]["count"]; got != float64(len(files)) {
		t.Errorf("count %v, want %d", got, len(files))
	}
	if first[0]["first"] != float64(1) || first[0]["last"] != float64(newest) {
		t.Errorf("first %v last %v, want 1 and %d", first[0]["first"], first[0]["last"], newest)
	}
	if again := open(); len(again) != 0 {
		t.Errorf("a start with nothing to apply logged %v", again)
	}
}
