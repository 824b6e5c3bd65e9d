//go:build unix

package main

import (
	"bytes"
	"log/slog"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"testing"

	"github.com/vdibroker/vdibroker"
	"github.com/vdibroker/vdibroker/store"
)

// TestAdminCredentialSQLite (R-SEC): on the embedded store the data dir's
// admin.token is the token as before, its hash stored with it; deleted, a
// new one is made and replaces the hash.
func TestAdminCredentialSQLite(t *testing.T) {
	t.Setenv("VDIBROKER_ADMIN_TOKEN", "")
	dir := t.TempDir()
	st, err := store.Open(t.Context(), "", dir, nil)
	if err != nil {
		t.Fatal(err)
	}
	defer st.Close()
	log := slog.New(slog.DiscardHandler)
	first, hash, err := adminCredential(t.Context(), st, dir, false, log)
	if err != nil || first == "" || hash != vdibroker.HashSecret(first) {
		t.Fatalf("first start: %q %q %v", first, hash, err)
	}
	os.Remove(filepath.Join(dir, "admin.token"))
	second, hash, err := adminCredential(t.Context(), st, dir, false, log)
	if err != nil || second == first || hash != vdibroker.HashSecret(second) {
		t.Errorf("after deleting admin.token: %q (was %q), %v; want a new token", second, first, err)
	}
	if v, _ := st.SharedValue(t.Context(), vdibroker.SharedAdminTokenHash); v != hash {
		t.Errorf("stored hash %q, want the new token's", v)
	}
}

// TestAdminCredentialReplicas (R-SEC): on PostgreSQL, replicas starting at
// once with empty data dirs end with one token: one of them has it in its
// admin.token, the others know its hash only. A replica whose admin.token
// holds another token is told so and accepts the shared one only;
// VDIBROKER_ADMIN_TOKEN replaces the stored hash.
func TestAdminCredentialReplicas(t *testing.T) {
	dsn := e2ePostgresDSN(t)
	t.Setenv("VDIBROKER_ADMIN_TOKEN", "")
	st, err := store.Open(t.Context(), dsn, "", nil)
	if err != nil {
		t.Fatal(err)
	}
	defer st.Close()
	log := slog.New(slog.DiscardHandler)
	root := t.TempDir()
	hashes := make([]string, 6)
	tokens := make([]string, 6)
	var wg sync.WaitGroup
	for i := range hashes {
		wg.Add(1)
		go func() {
			defer wg.Done()
			dir := filepath.Join(root, string(rune('a'+i)))
			os.MkdirAll(dir, 0o700)
			var err error
			if tokens[i], hashes[i], err = adminCredential(t.Context(), st, dir, true, log); err != nil {
				t.Error(err)
			}
		}()
	}
	wg.Wait()
	files, _ := filepath.Glob(filepath.Join(root, "*", "admin.token"))
	known := 0
	for i, h := range hashes {
		if h != hashes[0] {
			t.Fatalf("replicas disagree: %q", hashes)
		}
		if tokens[i] != "" {
			known++
			if vdibroker.HashSecret(tokens[i]) != h {
				t.Errorf("replica %d's token is not the shared one", i)
			}
		}
	}
	if known != 1 || len(files) != 1 {
		t.Errorf("%d replicas know the token, %d admin.token files; want 1 and 1", known, len(files))
	}

	stale := filepath.Join(root, "stale")
	os.MkdirAll(stale, 0o700)
	os.WriteFile(filepath.Join(stale, "admin.token"), []byte("vdb_admin_not_the_shared_one_0123456789\n"), 0o600)
	var logged bytes.Buffer
	tok, h, err := adminCredential(t.Context(), st, stale, true, slog.New(slog.NewTextHandler(&logged, nil)))
	if err != nil || tok != "" || h != hashes[0] || !strings.Contains(logged.String(), "not the admin token the replicas share") {
		t.Errorf("a stale admin.token: %q %q %v, log %q", tok, h, err, logged.String())
	}

	t.Setenv("VDIBROKER_ADMIN_TOKEN", "vdb_admin_from_the_environment_0123456789")
	if tok, h, err := adminCredential(t.Context(), st, stale, true, log); err != nil || tok != "vdb_admin_from_the_environment_0123456789" || h != vdibroker.HashSecret(tok) {
		t.Errorf("VDIBROKER_ADMIN_TOKEN: %q %q %v", tok, h, err)
	}
	if v, _ := st.SharedValue(t.Context(), vdibroker.SharedAdminTokenHash); v != vdibroker.HashSecret("vdb_admin_from_the_environment_0123456789") {
		t.Error("VDIBROKER_ADMIN_TOKEN did not replace the stored hash")
	}
}

// TestShortAdminTokenWarned_RSEC: a VDIBROKER_ADMIN_TOKEN shorter than
// an admin.token may be is taken (a lab's keeps working after an
// upgrade) with a warning saying why and what length to use; a long one
// is taken without a word.
func TestShortAdminTokenWarned_RSEC(t *testing.T) {
	dir := t.TempDir()
	st, err := store.Open(t.Context(), "", dir, nil)
	if err != nil {
		t.Fatal(err)
	}
	defer st.Close()
	for _, c := range []struct {
		token string
		warn  bool
	}{{"short", true}, {"vdb_admin_from_the_environment_0123456789", false}} {
		t.Setenv("VDIBROKER_ADMIN_TOKEN", c.token)
		var logged bytes.Buffer
		tok, _, err := adminCredential(t.Context(), st, dir, false, slog.New(slog.NewTextHandler(&logged, nil)))
		if err != nil || tok != c.token {
			t.Fatalf("%q: %q %v", c.token, tok, err)
		}
		if got := strings.Contains(logged.String(), "VDIBROKER_ADMIN_TOKEN is 5 characters long") && strings.Contains(logged.String(), "at least 32"); got != c.warn {
			t.Errorf("%q: logged %q, want a warning: %v", c.token, logged.String(), c.warn)
		}
	}
}
