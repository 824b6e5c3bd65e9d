package store_test

import (
	"io"
	"maps"
	"os"
	"path/filepath"
	"testing"
	"time"

	"github.com/vdibroker/vdibroker/store"
)

// R-G1: a directory pod's SQLite store opened after a crash, or restored
// from a copy of the running store, vouches for no pod (it may lack
// registrations it took) until each pod's next whole list; after a clean
// close it keeps them. The crash is a copy of the running store's files,
// as a backup or the disk holds them.
func TestDirectoryCompletenessAfterCrash_RG1(t *testing.T) {
	ctx := t.Context()
	dir, crashed := t.TempDir(), t.TempDir()
	open := func(dir string) *store.DB {
		t.Helper()
		s, err := store.OpenWith(ctx, "", dir, nil, store.Options{})
		if err != nil {
			t.Fatal(err)
		}
		t.Cleanup(func() { s.Close() })
		return s
	}
	complete := func(s *store.DB) map[string]int64 {
		t.Helper()
		_, c, err := s.LookupDirectory(ctx, "alice", time.Time{})
		if err != nil {
			t.Fatal(err)
		}
		return c
	}
	s := open(dir)
	for _, p := range []string{"ams1", "fra1"} {
		if err := s.RegisterDirectory(ctx, p, 3, []string{"alice"}, true, true, t0); err != nil {
			t.Fatal(err)
		}
	}
	if err := s.RegisterDirectory(ctx, "ams1", 3, []string{"bob"}, false, false, t0.Add(time.Second)); err != nil {
		t.Fatal(err)
	}
	want := map[string]int64{"ams1": 3, "fra1": 3}
	if c := complete(s); !maps.Equal(c, want) {
		t.Fatalf("complete %v, want %v", c, want)
	}
	for _, f := range []string{store.SQLiteFile, store.SQLiteFile + "-wal"} {
		copyStoreFile(t, filepath.Join(dir, f), filepath.Join(crashed, f))
	}
	if err := s.Close(); err != nil {
		t.Fatal(err)
	}

	if c := complete(open(dir)); !maps.Equal(c, want) {
		t.Errorf("after a clean close: complete %v, want %v", c, want)
	}
	c := open(crashed)
	if got := complete(c); len(got) != 0 {
		t.Errorf("after a crash: complete %v, want none until whole lists", got)
	}
	if pods, _, err := c.LookupDirectory(ctx, "bob", time.Time{}); err != nil || len(pods) != 1 {
		t.Errorf("after a crash: bob's entry %v (%v), want kept (only completeness is dropped)", pods, err)
	}
	if err := c.RegisterDirectory(ctx, "fra1", 4, []string{"alice"}, true, true, t0.Add(time.Minute)); err != nil {
		t.Fatal(err)
	}
	if got := complete(c); !maps.Equal(got, map[string]int64{"fra1": 4}) {
		t.Errorf("after fra1's next whole list: complete %v, want fra1 at 4", got)
	}
}

func copyStoreFile(t *testing.T, from, to string) {
	t.Helper()
	in, err := os.Open(from)
	if err != nil {
		t.Fatal(err)
	}
	defer in.Close()
	out, err := os.Create(to)
	if err != nil {
		t.Fatal(err)
	}
	if _, err := io.Copy(out, in); err != nil {
		t.Fatal(err)
	}
	if err := out.Close(); err != nil {
		t.Fatal(err)
	}
}
