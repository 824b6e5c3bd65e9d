package main

import (
	"context"
	"crypto/rand"
	"encoding/hex"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"net"
	"net/http"
	"os"
	"os/signal"
	"path/filepath"
	"strings"
	"syscall"
	"time"

	"github.com/spf13/cobra"

	"github.com/vdibroker/vdibroker"
	"github.com/vdibroker/vdibroker/console"
	vhttp "github.com/vdibroker/vdibroker/http"
	"github.com/vdibroker/vdibroker/metrics"
	"github.com/vdibroker/vdibroker/store"
)

// Main is the broker program: store, HTTP server and listener, wired
// together. Tests start it on 127.0.0.1:0 with a temp data dir.
type Main struct {
	Listen   string // address to listen on, e.g. 127.0.0.1:8080
	DataDir  string // SQLite file, admin.token
	Database string // "" for SQLite in DataDir, postgres://... for PostgreSQL
	Logger   *slog.Logger

	// Set by Open.
	Store      vdibroker.Store
	Server     *vhttp.Server
	AdminToken string
	listener   net.Listener
	console    *console.Console
	httpServer *http.Server
	unlockDir  func()
}

// Open opens the store, loads or creates the admin token and starts serving.
func (m *Main) Open(ctx context.Context) error {
	if m.Logger == nil {
		m.Logger = slog.New(slog.NewTextHandler(io.Discard, nil))
	}
	if err := os.MkdirAll(m.DataDir, 0o700); err != nil {
		return fmt.Errorf("create data dir: %w", err)
	}
	if m.Database == "" {
		unlock, err := lockDataDir(m.DataDir)
		if err != nil {
			return err
		}
		m.unlockDir = unlock
	}
	token, err := adminToken(m.DataDir)
	if err != nil {
		m.unlock()
		return err
	}
	m.AdminToken = token
	st, err := store.Open(ctx, m.Database, m.DataDir, m.Logger)
	if err != nil {
		m.unlock()
		return fmt.Errorf("open store: %w", err)
	}
	// Every store call is timed for /metrics (store transaction latency).
	st = metrics.InstrumentStore(st)
	m.Store = st
	m.Server = vhttp.NewServer(vhttp.Config{Store: st, Logger: m.Logger, AdminToken: token, ObservePlacement: metrics.ObservePlacement})
	// The console calls the API in-process with the signed-in user's token,
	// so the API enforces roles for the console too.
	m.console = console.New(console.Config{API: m.Server.Handler(), Store: st, Logger: m.Logger})
	m.Server.Mux().Handle("/", m.console)
	m.Server.Mux().Handle("GET /metrics", metrics.Handler(metrics.NewRegistry(metrics.Config{Store: st})))
	ln, err := net.Listen("tcp", m.Listen)
	if err != nil {
		m.console.Close()
		m.Server.Close()
		st.Close()
		m.unlock()
		return fmt.Errorf("listen on %s: %w", m.Listen, err)
	}
	m.listener = ln
	m.httpServer = &http.Server{
		Handler:           metrics.InstrumentAPI(m.Server.Handler()),
		ReadHeaderTimeout: 10 * time.Second,
		IdleTimeout:       2 * time.Minute,
	}
	go func() {
		if err := m.httpServer.Serve(ln); err != nil && !errors.Is(err, http.ErrServerClosed) {
			m.Logger.Error("http server stopped", "err", err)
		}
	}()
	return nil
}

// unlock releases the data dir lock, if held.
func (m *Main) unlock() {
	if m.unlockDir != nil {
		m.unlockDir()
		m.unlockDir = nil
	}
}

// URL is the base URL the broker answers on.
func (m *Main) URL() string { return "http://" + m.listener.Addr().String() }

// Close stops accepting requests, lets in-flight ones finish (graceful
// shutdown), then closes the server and the store.
func (m *Main) Close() error {
	var errs []error
	if m.httpServer != nil {
		ctx, cancel := context.WithTimeout(context.Background(), 15*time.Second)
		defer cancel()
		errs = append(errs, m.httpServer.Shutdown(ctx))
	}
	if m.console != nil {
		errs = append(errs, m.console.Close())
	}
	if m.Server != nil {
		errs = append(errs, m.Server.Close())
	}
	if m.Store != nil {
		errs = append(errs, m.Store.Close())
	}
	m.unlock() // after the store: its last writes are done
	return errors.Join(errs...)
}

// adminToken returns VDIBROKER_ADMIN_TOKEN, or the token in
// <dataDir>/admin.token, creating that file (mode 0600) on first start.
func adminToken(dataDir string) (string, error) {
	if t := strings.TrimSpace(os.Getenv("VDIBROKER_ADMIN_TOKEN")); t != "" {
		return t, nil
	}
	path := filepath.Join(dataDir, "admin.token")
	if b, err := os.ReadFile(path); err == nil {
		if t := strings.TrimSpace(string(b)); t != "" {
			return t, nil
		}
	} else if !errors.Is(err, os.ErrNotExist) {
		return "", fmt.Errorf("read admin token: %w", err)
	}
	buf := make([]byte, 24)
	if _, err := rand.Read(buf); err != nil {
		return "", err
	}
	t := "vdb_admin_" + hex.EncodeToString(buf)
	f, err := os.OpenFile(path, os.O_WRONLY|os.O_CREATE|os.O_EXCL, 0o600)
	if err != nil {
		return "", fmt.Errorf("create admin token: %w", err)
	}
	if _, err := f.WriteString(t + "\n"); err != nil {
		f.Close()
		return "", err
	}
	return t, f.Close()
}

func newServeCmd() *cobra.Command {
	m := &Main{}
	var logFormat, cpuProfile string
	cmd := &cobra.Command{
		Use:   "serve",
		Short: "Run the broker: HTTP API, web console and metrics",
		Args:  cobra.NoArgs,
		RunE: func(cmd *cobra.Command, args []string) error {
			m.Logger = newLogger(logFormat)
			ctx, stop := signal.NotifyContext(cmd.Context(), os.Interrupt, syscall.SIGTERM)
			defer stop()
			if cpuProfile != "" {
				stopProfile, err := startCPUProfile(cpuProfile)
				if err != nil {
					return err
				}
				defer stopProfile()
			}
			tokenNote := firstStart(m.DataDir) // cli_serve.go
			if err := m.Open(ctx); err != nil {
				return err
			}
			m.Logger.Info("vdibroker serving", "url", m.URL(), "dataDir", m.DataDir, "store", storeKind(m.Database))
			// The line below is read by tests and scripts that start on port 0.
			fmt.Fprintf(cmd.OutOrStdout(), "vdibroker listening on %s\n", m.URL())
			tokenNote(cmd.OutOrStdout(), m.AdminToken)
			<-ctx.Done()
			m.Logger.Info("shutting down")
			return m.Close()
		},
	}
	cmd.Flags().StringVar(&m.Listen, "listen", "127.0.0.1:8080", "address to listen on")
	cmd.Flags().StringVar(&m.DataDir, "data-dir", "./vdibroker-data", "directory for the embedded store and admin.token")
	cmd.Flags().StringVar(&m.Database, "database", "", "database: empty for SQLite in --data-dir, or postgres://user:pass@host/db")
	cmd.Flags().Var(newEnum(&logFormat, "text", logFormats...), "log-format", "log format: text or json")
	// For measuring the broker as its own process (BENCHMARKS.md).
	cmd.Flags().StringVar(&cpuProfile, "cpu-profile", "", "write a Go CPU profile of the whole run to this file")
	cmd.Flags().MarkHidden("cpu-profile")
	return cmd
}

func storeKind(dsn string) string {
	if dsn == "" {
		return "sqlite"
	}
	return "postgres"
}

func newLogger(format string) *slog.Logger {
	if format == "json" {
		return slog.New(slog.NewJSONHandler(os.Stderr, nil))
	}
	return slog.New(slog.NewTextHandler(os.Stderr, nil))
}

func init() { rootCmd.AddCommand(newServeCmd()) }
