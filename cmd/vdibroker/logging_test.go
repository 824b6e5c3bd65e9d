//go:build unix

package main

import (
	"bytes"
	"log/slog"
	"net/url"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/vdibroker/vdibroker"
	vhttp "github.com/vdibroker/vdibroker/http"
)

// selfBin is this test binary standing in for vdibroker (TestMain runs
// the command line when VDIBROKER_TEST_AS_CLI is 1): the end-to-end tests
// of this file run `serve` as a process of its own without a go build.
func selfBin(t *testing.T) string {
	t.Helper()
	t.Setenv("VDIBROKER_TEST_AS_CLI", "1")
	bin, err := os.Executable()
	if err != nil {
		t.Fatal(err)
	}
	return bin
}

// heartbeatLines counts the access log lines of heartbeats in a log.
func heartbeatLines(log string) int {
	return strings.Count(log, "path=/api/v1/agent/heartbeat")
}

// TestServeLogLevelSIGHUP: a real serve process at info writes no line
// for a heartbeat (the access line of a heartbeat is debug) but writes
// other requests'; written "debug" into --log-level-file and sent SIGHUP,
// it logs heartbeats; with the file gone and another SIGHUP it is back at
// --log-level; a file holding no level keeps the level running.
func TestServeLogLevelSIGHUP(t *testing.T) {
	bin := selfBin(t)
	dir := t.TempDir()
	levelFile := filepath.Join(dir, "log-level")
	const admin = "vdb_admin_log_level_test_0123456789"
	p, base := e2eServeAt(t, bin, filepath.Join(dir, "data"), admin, "127.0.0.1:0", "--log-level", "info", "--log-level-file", levelFile)
	ctx := t.Context()
	c := vhttp.NewClient(base, admin)
	if _, err := c.PutHostPool(ctx, "log-pool", map[string]any{}); err != nil {
		t.Fatal(err)
	}
	rt, err := c.CreateRegistrationToken(ctx, "log-pool", vhttp.RegistrationTokenRequest{})
	if err != nil {
		t.Fatal(err)
	}
	reg, err := c.Register(ctx, &vdibroker.RegisterRequest{Token: rt.Token, HostName: "log-host", Address: "log-host:3389", Protocols: []string{"RDP"}})
	if err != nil {
		t.Fatal(err)
	}
	marker := 0
	beat := func() {
		t.Helper()
		if _, err := c.Heartbeat(ctx, reg.Credential, &vdibroker.HeartbeatRequest{}); err != nil {
			t.Fatal(err)
		}
		// A request logged at every level (a 404 of a pool of its own
		// name) marks the place of the heartbeat's line, if it wrote one.
		marker++
		name := "marker-" + strconv.Itoa(marker)
		if _, err := c.GetHostPool(ctx, name); vdibroker.ErrorCode(err) != vdibroker.ENotFound {
			t.Fatalf("marker: %v", err)
		}
		e2eEventually(t, "the marker's line", 10*time.Second, func() bool {
			return strings.Contains(p.stderr.String(), "path=/api/v1/hostpools/"+name+" ")
		})
	}
	hup := func(want string) {
		t.Helper()
		n := strings.Count(p.stderr.String(), "SIGHUP: log")
		if err := p.cmd.Process.Signal(syscall.SIGHUP); err != nil {
			t.Fatal(err)
		}
		e2eEventually(t, "the SIGHUP line", 10*time.Second, func() bool {
			return strings.Count(p.stderr.String(), "SIGHUP: log") > n
		})
		if !strings.Contains(p.stderr.String()[strings.LastIndex(p.stderr.String(), "SIGHUP: log"):], want) {
			t.Fatalf("after SIGHUP, want %q in:\n%s", want, p.stderr.String())
		}
	}

	for range 3 {
		beat()
	}
	if n := heartbeatLines(p.stderr.String()); n != 0 {
		t.Fatalf("at info, 3 heartbeats wrote %d lines:\n%s", n, p.stderr.String())
	}
	if !strings.Contains(p.stderr.String(), "path=/api/v1/hostpools/log-pool") {
		t.Fatalf("at info, other requests are logged:\n%s", p.stderr.String())
	}

	if err := os.WriteFile(levelFile, []byte("debug\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	hup("level=DEBUG")
	beat()
	beat()
	if n := heartbeatLines(p.stderr.String()); n != 2 {
		t.Fatalf("at debug, 2 heartbeats wrote %d lines, want 2:\n%s", n, p.stderr.String())
	}

	// A file that holds no level keeps debug.
	if err := os.WriteFile(levelFile, []byte("loud\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	hup(`log level kept`)
	beat()
	if n := heartbeatLines(p.stderr.String()); n != 3 {
		t.Fatalf("after a bad level file, want debug kept (3 heartbeat lines), got %d", n)
	}

	// No file: --log-level again.
	if err := os.Remove(levelFile); err != nil {
		t.Fatal(err)
	}
	hup("level=INFO")
	beat()
	if n := heartbeatLines(p.stderr.String()); n != 3 {
		t.Fatalf("back at info, a heartbeat wrote a line (%d lines)", n)
	}
	if p.cmd.ProcessState != nil {
		t.Fatal("serve exited on SIGHUP")
	}
}

// TestLogFlags: the level comes from the file while it exists, else from
// --log-level; a bad level is a usage error at start, naming the flag.
func TestLogFlags(t *testing.T) {
	file := filepath.Join(t.TempDir(), "level")
	l := &logFlags{level: "warn", levelFile: file}
	var buf bytes.Buffer
	log, err := l.logger(&buf)
	if err != nil {
		t.Fatal(err)
	}
	if l.lv.Level() != slog.LevelWarn {
		t.Errorf("without the file: %s, want WARN", l.lv.Level())
	}
	os.WriteFile(file, []byte(" error \n"), 0o600)
	l.reload(log)
	if l.lv.Level() != slog.LevelError {
		t.Errorf("file says error: %s", l.lv.Level())
	}
	log.Warn("hidden")
	if strings.Contains(buf.String(), "hidden") {
		t.Error("a warning was written at error level")
	}
	for _, bad := range []*logFlags{{level: "verbose"}, {level: "info", levelFile: filepath.Join(t.TempDir())}} {
		if _, err := bad.logger(&buf); err == nil || !isUsageError(err) || !strings.Contains(err.Error(), "--log-level") {
			t.Errorf("%+v: %v, want a usage error naming the flag", bad, err)
		}
	}
}

// TestFlagsFromEnv: serve's flags come from VDIBROKER_<FLAG> unless given
// on the command line; a bad value names the variable.
func TestFlagsFromEnv(t *testing.T) {
	t.Setenv("VDIBROKER_LISTEN", "127.0.0.1:9999")
	t.Setenv("VDIBROKER_LOG_LEVEL", "debug")
	t.Setenv("VDIBROKER_RETENTION", "")
	cmd := newServeCmd()
	if err := cmd.ParseFlags([]string{"--log-level", "warn"}); err != nil {
		t.Fatal(err)
	}
	set, err := flagsFromEnv(cmd)
	if err != nil {
		t.Fatal(err)
	}
	listen, _ := cmd.Flags().GetString("listen")
	level, _ := cmd.Flags().GetString("log-level")
	retention, _ := cmd.Flags().GetDuration("retention")
	if listen != "127.0.0.1:9999" || level != "warn" || retention != 30*24*time.Hour || strings.Join(set, ",") != "listen" {
		t.Errorf("listen %q, log-level %q, retention %s, from env %v", listen, level, retention, set)
	}
	// The command line's --log-level wins over VDIBROKER_LOG_LEVEL, and
	// that is said (by name only); an environment value equal to the
	// command line's is no conflict.
	t.Setenv("VDIBROKER_DATA_DIR", "/srv/vdibroker")
	cmd = newServeCmd()
	if err := cmd.ParseFlags([]string{"--log-level", "warn", "--data-dir", "/srv/vdibroker", "--listen", "127.0.0.1:9998"}); err != nil {
		t.Fatal(err)
	}
	if got := strings.Join(envOverridden(cmd, nil), ","); got != "VDIBROKER_LISTEN,VDIBROKER_LOG_LEVEL" {
		t.Errorf("variables the command line overrides: %q, want VDIBROKER_LISTEN,VDIBROKER_LOG_LEVEL", got)
	}
	var logged bytes.Buffer
	warnEnvOverridden(cmd, nil, slog.New(slog.NewTextHandler(&logged, nil)))
	if !strings.Contains(logged.String(), "level=WARN") || !strings.Contains(logged.String(), "VDIBROKER_LOG_LEVEL") || strings.Contains(logged.String(), "debug") {
		t.Errorf("warning: %q, want a WARN naming VDIBROKER_LOG_LEVEL and not its value", logged.String())
	}
	t.Setenv("VDIBROKER_STORE_TIMEOUT", "soon")
	if _, err := flagsFromEnv(newServeCmd()); err == nil || !strings.Contains(err.Error(), "VDIBROKER_STORE_TIMEOUT") {
		t.Errorf("bad duration: %v", err)
	}
}

// TestDatabaseFrom: --database-file gives the DSN; with --database too it
// is a usage error; a password on the command line is warned about, one
// from the environment or a file is not.
func TestDatabaseFrom(t *testing.T) {
	file := filepath.Join(t.TempDir(), "dsn")
	os.WriteFile(file, []byte("postgres://u:secret@db/x\n"), 0o600)
	var buf bytes.Buffer
	log := slog.New(slog.NewTextHandler(&buf, nil))
	m := &Main{}
	if err := databaseFrom(m, file, false, log); err != nil || m.Database != "postgres://u:secret@db/x" {
		t.Fatalf("%q, %v", m.Database, err)
	}
	if err := databaseFrom(&Main{Database: "postgres://db/x"}, file, false, log); err == nil || !isUsageError(err) {
		t.Errorf("both: %v", err)
	}
	for _, tc := range []struct {
		dsn     string
		fromEnv bool
		warn    bool
	}{
		{"postgres://u:secret@db/x", false, true},
		{"postgres://u:secret@db/x", true, false},
		{"postgres://u@db/x", false, false},
		{"", false, false},
	} {
		buf.Reset()
		if err := databaseFrom(&Main{Database: tc.dsn}, "", tc.fromEnv, log); err != nil {
			t.Fatal(err)
		}
		if got := strings.Contains(buf.String(), "ps shows"); got != tc.warn {
			t.Errorf("%q (env %v): warned %v, want %v", tc.dsn, tc.fromEnv, got, tc.warn)
		}
	}
	// A key=value DSN, which the store does not take, is refused before
	// anything is opened, and the refusal does not show it.
	if err := databaseFrom(&Main{Database: "host=db user=u password=secret"}, "", false, log); !isUsageError(err) || strings.Contains(err.Error(), "secret") {
		t.Errorf("key=value DSN: %v", err)
	}
}

// TestServeDatabaseSecretOutOfArgv: serve on PostgreSQL with the DSN from
// --database-file, from VDIBROKER_DATABASE, and with its password from
// PGPASSWORD (pgx reads libpq's variables): each serves the one database
// (a pool one creates the others see), and no process's command line
// holds the DSN or its password, which `ps` would show to every user.
func TestServeDatabaseSecretOutOfArgv(t *testing.T) {
	dsn := e2ePostgresDSN(t)
	u, err := url.Parse(dsn)
	if err != nil {
		t.Fatal(err)
	}
	password, ok := u.User.Password()
	if !ok {
		t.Skip("VDIBROKER_TEST_POSTGRES_DSN holds no password: nothing to keep out of argv")
	}
	bin := selfBin(t)
	dir := t.TempDir()
	dsnFile := filepath.Join(dir, "database")
	if err := os.WriteFile(dsnFile, []byte(dsn+"\n"), 0o600); err != nil {
		t.Fatal(err)
	}
	noPassword := *u
	noPassword.User = url.User(u.User.Username())
	const admin = "vdb_admin_database_file_test_0123456789"
	ctx := t.Context()

	for i, tc := range []struct {
		name string
		env  map[string]string
		args []string
	}{
		{"--database-file", nil, []string{"--database-file", dsnFile}},
		{"VDIBROKER_DATABASE", map[string]string{"VDIBROKER_DATABASE": dsn}, nil},
		{"PGPASSWORD", map[string]string{"VDIBROKER_DATABASE": noPassword.String(), "PGPASSWORD": password}, nil},
		// The control: on the command line, the DSN is in argv, and serve
		// says so.
		{"--database", nil, []string{"--database", dsn}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			for k, v := range tc.env {
				t.Setenv(k, v)
			}
			p, base := e2eServeAt(t, bin, filepath.Join(dir, tc.name), admin, "127.0.0.1:0", tc.args...)
			c := vhttp.NewClient(base, admin)
			pool := "argv-pool-" + strconv.Itoa(i)
			if _, err := c.PutHostPool(ctx, pool, map[string]any{}); err != nil {
				t.Fatal(err)
			}
			// Every earlier case's pool is there: one PostgreSQL database.
			for j := range i {
				if _, err := c.GetHostPool(ctx, "argv-pool-"+strconv.Itoa(j)); err != nil {
					t.Errorf("pool of case %d: %v", j, err)
				}
			}
			if !strings.Contains(p.stderr.String(), "store=postgres") {
				t.Errorf("not on PostgreSQL:\n%s", p.stderr.String())
			}
			cmdline, err := os.ReadFile("/proc/" + strconv.Itoa(p.cmd.Process.Pid) + "/cmdline")
			if err != nil {
				t.Skipf("no /proc to read the command line from: %v", err)
			}
			leaks := 0
			for _, a := range strings.Split(string(cmdline), "\x00") {
				if strings.Contains(a, "postgres") || strings.Contains(a, ":"+password+"@") {
					leaks++
				}
			}
			warned := strings.Contains(p.stderr.String(), "ps shows")
			if control := tc.name == "--database"; (leaks > 0) != control || warned != control {
				t.Errorf("argv %q: %d arguments hold the DSN, warned %v", cmdline, leaks, warned)
			}
		})
	}
}
