//go:build unix

package main

import (
	"bytes"
	"database/sql"
	"fmt"
	"net/http"
	"net/url"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"

	"github.com/spf13/cobra"

	"github.com/vdibroker/vdibroker"
	vhttp "github.com/vdibroker/vdibroker/http"
	"github.com/vdibroker/vdibroker/store"
)

// runBackupCLI runs backup or restore as the command line does.
func runBackupCLI(tb testing.TB, args ...string) cliResult {
	tb.Helper()
	root := &cobra.Command{Use: "vdibroker", SilenceUsage: true, SilenceErrors: true}
	root.AddCommand(newBackupCmd(), newRestoreCmd())
	var out, errOut bytes.Buffer
	root.SetOut(&out)
	root.SetErr(&errOut)
	root.SetContext(tb.Context())
	code := execute(root, args, &errOut)
	return cliResult{stdout: out.String(), stderr: errOut.String(), code: code}
}

// TestBackupRestoreE2E: a real serve process with pools, hosts (registered
// and heartbeating), sessions and tokens; `vdibroker backup` copies its
// store while it serves and takes connects; restore into its own data dir
// is refused while it runs (the data dir's lock); it is stopped, the
// backup restored into a fresh data dir, and serve started again there:
// the pools, hosts, sessions and tokens are there, the host's credential
// and the Reader token still work, and the sessions are exactly those the
// backup counted.
func TestBackupRestoreE2E(t *testing.T) {
	bin := selfBin(t)
	dir := t.TempDir()
	dataA, dataB := filepath.Join(dir, "a"), filepath.Join(dir, "b")
	const admin = "vdb_admin_backup_restore_test_0123456789"
	procA, base := e2eServeAt(t, bin, dataA, admin, "127.0.0.1:0")
	ctx := t.Context()
	c := vhttp.NewClient(base, admin)
	for _, p := range []string{"bk-office", "bk-busy"} {
		if _, err := c.PutHostPool(ctx, p, map[string]any{"maxSessionLimit": 50}); err != nil {
			t.Fatal(err)
		}
	}
	creds := map[string]string{}
	for _, h := range []struct{ pool, name string }{{"bk-office", "bk-h1"}, {"bk-office", "bk-h2"}, {"bk-busy", "bk-h3"}} {
		rt, err := c.CreateRegistrationToken(ctx, h.pool, vhttp.RegistrationTokenRequest{})
		if err != nil {
			t.Fatal(err)
		}
		reg, err := c.Register(ctx, &vdibroker.RegisterRequest{Token: rt.Token, HostName: h.name, Address: h.name + ":3389", Protocols: []string{"RDP"}})
		if err != nil {
			t.Fatal(err)
		}
		if _, err := c.Heartbeat(ctx, reg.Credential, &vdibroker.HeartbeatRequest{}); err != nil {
			t.Fatal(err)
		}
		creds[h.name] = reg.Credential
	}
	for _, u := range []string{"alice", "bob", "carol"} {
		if _, err := c.Connect(ctx, "bk-office", vhttp.ConnectRequest{User: u}); err != nil {
			t.Fatal(err)
		}
	}
	reader, err := c.CreateToken(ctx, vhttp.TokenRequest{Role: "Reader", Subject: "auditor"})
	if err != nil {
		t.Fatal(err)
	}

	// The backup, while serve takes connects to another pool.
	var wg sync.WaitGroup
	wg.Add(1)
	go func() {
		defer wg.Done()
		for i := range 30 {
			if _, err := c.Connect(ctx, "bk-busy", vhttp.ConnectRequest{User: fmt.Sprintf("busy-%02d", i)}); err != nil {
				t.Errorf("connect during the backup: %v", err)
				return
			}
		}
	}()
	backup := filepath.Join(dir, "vdibroker-backup.db")
	r := runBackupCLI(t, "backup", "--data-dir", dataA, "--output", backup)
	wg.Wait()
	if r.code != 0 || !strings.Contains(r.stdout, "3 session hosts") {
		t.Fatalf("backup: exit %d\n%s%s", r.code, r.stdout, r.stderr)
	}
	fi, err := os.Stat(backup)
	if err != nil || fi.Mode().Perm() != 0o600 {
		t.Fatalf("backup file: %v, mode %v; want 0600 (it holds credential hashes)", err, fi.Mode())
	}
	var backedUp int // open sessions in the backup: the snapshot's
	if _, err := fmt.Sscanf(r.stdout[strings.Index(r.stdout, "session hosts, ")+len("session hosts, "):], "%d open sessions", &backedUp); err != nil || backedUp < 3 || backedUp > 33 {
		t.Fatalf("backup holds %d open sessions (%v), want 3..33:\n%s", backedUp, err, r.stdout)
	}
	if r := runBackupCLI(t, "backup", "--data-dir", dataA, "--output", backup); r.code != 1 || !strings.Contains(r.stderr, "exists") {
		t.Errorf("backup over an existing file: exit %d %q", r.code, r.stderr)
	}
	if r := runBackupCLI(t, "restore", "--data-dir", dataA, "--input", backup); r.code != 1 || !strings.Contains(r.stderr, "a broker is running") {
		t.Errorf("restore under a running serve: exit %d %q, want refused", r.code, r.stderr)
	}

	procA.cmd.Process.Signal(syscall.SIGTERM)
	if code := procA.wait(t); code != 0 {
		t.Fatalf("serve exited %d", code)
	}
	if r := runBackupCLI(t, "restore", "--data-dir", dataB, "--input", backup); r.code != 0 {
		t.Fatalf("restore: exit %d\n%s%s", r.code, r.stdout, r.stderr)
	}
	_, base = e2eServeAt(t, bin, dataB, admin, "127.0.0.1:0")
	c = vhttp.NewClient(base, admin)
	pools, err := c.ListHostPools(ctx)
	if err != nil || len(pools) != 2 {
		t.Fatalf("pools after restore: %d, %v", len(pools), err)
	}
	var hosts []string
	open := 0
	for _, p := range []string{"bk-office", "bk-busy"} {
		hs, err := c.ListSessionHosts(ctx, p)
		if err != nil {
			t.Fatal(err)
		}
		for _, h := range hs {
			hosts = append(hosts, h.Name)
		}
		ss, err := c.ListUserSessions(ctx, p, vhttp.SessionQuery{})
		if err != nil {
			t.Fatal(err)
		}
		open += len(ss)
	}
	slices.Sort(hosts)
	if strings.Join(hosts, ",") != "bk-h1,bk-h2,bk-h3" {
		t.Errorf("hosts after restore: %v", hosts)
	}
	if open != backedUp {
		t.Errorf("%d open sessions after restore, the backup said %d", open, backedUp)
	}
	if ss, _ := c.ListUserSessions(ctx, "bk-office", vhttp.SessionQuery{User: "carol"}); len(ss) != 1 {
		t.Errorf("carol's session after restore: %v", ss)
	}
	if _, err := c.Heartbeat(ctx, creds["bk-h1"], &vdibroker.HeartbeatRequest{}); err != nil {
		t.Errorf("bk-h1's credential after restore: %v", err)
	}
	if _, err := vhttp.NewClient(base, reader.Secret).ListHostPools(ctx); err != nil {
		t.Errorf("the Reader token after restore: %v", err)
	}
	if toks, err := c.ListTokens(ctx); err != nil || len(toks) != 1 || toks[0].Subject != "auditor" {
		t.Errorf("tokens after restore: %v, %v", toks, err)
	}
}

// TestServeRefusesNewerSchema: serve on a database a newer vdibroker
// migrated (one more goose version than this binary carries) exits 1
// naming both versions and saying to upgrade, on SQLite and PostgreSQL.
func TestServeRefusesNewerSchema(t *testing.T) {
	for _, engine := range []string{"sqlite", "postgres"} {
		t.Run(engine, func(t *testing.T) {
			dir, dsn := t.TempDir(), ""
			if engine == "postgres" {
				dsn = e2ePostgresDSN(t)
			}
			st, err := store.Open(t.Context(), dsn, dir, nil) // migrated by this binary
			if err != nil {
				t.Fatal(err)
			}
			st.Close()
			driver, source := "sqlite", filepath.Join(dir, store.SQLiteFile)
			if dsn != "" {
				driver, source = "pgx", dsn
			}
			db, err := sql.Open(driver, source)
			if err != nil {
				t.Fatal(err)
			}
			defer db.Close()
			var known int
			if err := db.QueryRow(`SELECT MAX(version_id) FROM goose_db_version`).Scan(&known); err != nil {
				t.Fatal(err)
			}
			// What a release with one more migration leaves behind.
			if _, err := db.Exec(fmt.Sprintf(`INSERT INTO goose_db_version (version_id, is_applied) VALUES (%d, true)`, known+1)); err != nil {
				t.Fatal(err)
			}
			args := []string{"serve", "--listen", "127.0.0.1:0", "--data-dir", dir}
			if dsn != "" {
				args = append(args, "--database", dsn)
			}
			r := runCLI(t, args...)
			want := fmt.Sprintf("schema version %d, this vdibroker knows versions up to %d: upgrade vdibroker", known+1, known)
			if r.code != 1 || !strings.Contains(r.stderr, want) {
				t.Errorf("serve on a newer schema: exit %d, %q; want 1 and %q", r.code, r.stderr, want)
			}
		})
	}
}

// TestRestoreWarnsOfRevokedToken: restore over a store in which a token
// was revoked after the backup puts the token back, valid; it says so on
// stderr, with the command that revokes it again, and still exits 0.
// Restoring the same backup once more changes nothing and says nothing.
func TestRestoreWarnsOfRevokedToken(t *testing.T) {
	ctx := t.Context()
	data := t.TempDir()
	s, err := store.OpenWith(ctx, "", data, nil, store.Options{})
	if err != nil {
		t.Fatal(err)
	}
	tok := &vdibroker.Token{ID: "tok-auditor", Role: vdibroker.RoleReader, Subject: "auditor", Hash: "h", CreateTime: time.Now()}
	if err := s.CreateToken(ctx, tok); err != nil {
		t.Fatal(err)
	}
	backup := filepath.Join(t.TempDir(), "b.db")
	if r := runBackupCLI(t, "backup", "--data-dir", data, "--output", backup); r.code != 0 {
		t.Fatalf("backup: exit %d %s", r.code, r.stderr)
	}
	if err := s.DeleteToken(ctx, tok.ID); err != nil {
		t.Fatal(err)
	}
	s.Close()

	r := runBackupCLI(t, "restore", "--data-dir", data, "--input", backup)
	want := "warning: API token tok-auditor (Reader \"auditor\") was revoked after the backup and is valid again: vdibroker token delete --id tok-auditor\n"
	if r.code != 0 || r.stderr != want {
		t.Errorf("restore: exit %d, stderr %q; want 0 and %q", r.code, r.stderr, want)
	}
	if r := runBackupCLI(t, "restore", "--data-dir", data, "--input", backup); r.code != 0 || r.stderr != "" {
		t.Errorf("restore of the store's own backup: exit %d, stderr %q; want 0 and nothing", r.code, r.stderr)
	}
}

// TestRestoreEndsConsoleSignIns (R-SEC, web sessions): an admin signs in
// to the console, the store is backed up, she signs out; the broker is
// stopped and the backup restored into its data dir. The cookie of the
// signed-out sign-in (a copy an attacker kept) is refused: restore ends
// every sign-in the backup held, and says so.
func TestRestoreEndsConsoleSignIns(t *testing.T) {
	const admin = "vdb_admin_restore_signin_test_0123456789"
	t.Setenv("VDIBROKER_ADMIN_TOKEN", admin)
	dir := t.TempDir()
	data := filepath.Join(dir, "data")
	open := func() *Main {
		t.Helper()
		m := &Main{Listen: "127.0.0.1:0", DataDir: data}
		if err := m.Open(t.Context()); err != nil {
			t.Fatal(err)
		}
		return m
	}
	m := open()
	c := jarClient()
	if s := tokenSignIn(t, c, m.URL(), admin); s != http.StatusSeeOther {
		t.Fatalf("sign in: %d", s)
	}
	res, page := getBody(t, c, m.URL()+"/")
	if res.Request.URL.Path != "/" || !strings.Contains(page, "Sign out") {
		t.Fatalf("signed in: %d at %s", res.StatusCode, res.Request.URL)
	}
	u, _ := url.Parse(m.URL())
	stolen := c.Jar.Cookies(u) // the sign-in's cookie, as an attacker copied it
	backup := filepath.Join(dir, "backup.db")
	if r := runBackupCLI(t, "backup", "--data-dir", data, "--output", backup); r.code != 0 {
		t.Fatalf("backup: exit %d\n%s%s", r.code, r.stdout, r.stderr)
	}
	csrf := signinCSRF.FindStringSubmatch(page)
	if csrf == nil {
		t.Fatal("no CSRF field in the signed-in page's sign-out form")
	}
	req, _ := http.NewRequest("POST", m.URL()+"/signout", strings.NewReader(url.Values{"csrf": {csrf[1]}}.Encode()))
	req.Header.Set("Content-Type", "application/x-www-form-urlencoded")
	req.Header.Set("Origin", m.URL())
	if res, err := noRedirects(c).Do(req); err != nil || res.StatusCode != http.StatusSeeOther {
		t.Fatalf("sign out: %v, %v", res, err)
	} else {
		res.Body.Close()
	}
	if err := m.Close(); err != nil {
		t.Fatal(err)
	}

	r := runBackupCLI(t, "restore", "--data-dir", data, "--input", backup)
	if r.code != 0 {
		t.Fatalf("restore: exit %d\n%s%s", r.code, r.stdout, r.stderr)
	}
	m = open()
	defer m.Close()
	attacker := jarClient()
	u, _ = url.Parse(m.URL()) // another port: the cookie is 127.0.0.1's
	attacker.Jar.SetCookies(u, stolen)
	if res, _ := getBody(t, attacker, m.URL()+"/"); res.Request.URL.Path != "/signin" {
		t.Errorf("the signed-out sign-in's cookie after the restore: %d at %s; want sent to /signin", res.StatusCode, res.Request.URL)
	}
	if want := "ended the backup's console and portal sign-ins (1): everyone signs in again"; !strings.Contains(r.stdout, want) {
		t.Errorf("restore said:\n%s\nwant %q", r.stdout, want)
	}
}
