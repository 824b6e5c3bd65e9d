package main

import (
	"cmp"
	"context"
	"crypto/rand"
	"crypto/sha256"
	"crypto/subtle"
	"crypto/tls"
	"encoding/hex"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"net"
	"net/http"
	"net/url"
	"os"
	"os/signal"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"syscall"
	"time"

	"github.com/spf13/cobra"
	"k8s.io/utils/clock"

	"github.com/vdibroker/vdibroker"
	"github.com/vdibroker/vdibroker/broker"
	"github.com/vdibroker/vdibroker/broker/outage"
	"github.com/vdibroker/vdibroker/console"
	"github.com/vdibroker/vdibroker/entitlement"
	"github.com/vdibroker/vdibroker/federation"
	vhttp "github.com/vdibroker/vdibroker/http"
	"github.com/vdibroker/vdibroker/metrics"
	"github.com/vdibroker/vdibroker/portal"
	"github.com/vdibroker/vdibroker/power"
	"github.com/vdibroker/vdibroker/rdp"
	"github.com/vdibroker/vdibroker/store"
)

// Main is the broker program: store, HTTP server and listener, wired
// together. Tests start it on 127.0.0.1:0 with a temp data dir.
type Main struct {
	Listen   string // address to listen on, e.g. 127.0.0.1:8080
	DataDir  string // SQLite file, admin.token
	Database string // "" for SQLite in DataDir, postgres://... for PostgreSQL
	Logger   *slog.Logger
	// RDPProperties are the admins' extra .rdp properties (--rdp-defaults).
	RDPProperties []rdp.Property
	// PowerDrivers are the drivers of --power-config (R-A4): the only
	// way a pool's hosts are started and stopped.
	PowerDrivers power.Set

	// TLSCert and TLSKey make the broker serve HTTPS (reloaded when the
	// files change or on SIGHUP). TLSClientCA, when set, makes the agent
	// endpoints require a client certificate signed by it (mTLS).
	TLSCert, TLSKey, TLSClientCA string
	// TLSClientAnyHost accepts an agent's client certificate for any host
	// name (by default its common name or a DNS name must be the host's).
	TLSClientAnyHost bool
	// TLSClock is the clock the certificate's reload reads, to look at
	// the files at most once a second (nil: the real one; tests step a
	// fake one).
	TLSClock clock.PassiveClock
	// ServerNow is the API server's clock (vhttp.Config.Now): its rate
	// limits' buckets and its audit entries' times (nil: the real one;
	// tests freeze it, so a bucket they empty refills by their clock
	// alone, not a slow machine's).
	ServerNow func() time.Time
	// HSTSMaxAge is the max-age of the Strict-Transport-Security header
	// of every answer over the broker's own TLS (0 = no header; serve's
	// --hsts-max-age defaults to a year).
	HSTSMaxAge time.Duration
	// Server timeouts (0 = the defaults of newServeCmd): a request's whole
	// read, its answer's write, and an idle keep-alive connection.
	ReadTimeout, WriteTimeout, IdleTimeout time.Duration
	// MaxHeaderBytes bounds a request's line and headers (0 = 64 KiB).
	MaxHeaderBytes int
	// StoreTimeout bounds every store call (0 = 5s).
	StoreTimeout time.Duration
	// OutagePlacement places new users during a store outage within an
	// escrow held while the store is up (--outage-placement, R-OUT2).
	OutagePlacement outage.Placement
	// MaxConnectWait bounds a connect's ?wait= for a starting host
	// (--max-connect-wait, R-U4; 0 = 5m).
	MaxConnectWait time.Duration
	// MaintenanceInterval is the broker's maintenance tick (0 = 5s; a
	// hidden flag, for tests).
	MaintenanceInterval time.Duration
	// Retention is how long ended sessions, delivered commands and expired
	// tokens are kept (0 = forever; serve's default is 30 days).
	Retention time.Duration
	// AutoscaleInterval is how often the autoscaler evaluates the scaling
	// plans; 0 turns it off.
	AutoscaleInterval time.Duration
	// AutoscaleMinute is how long a minute of a scaling plan's waits lasts
	// (hidden --autoscale-minute: end-to-end tests shorten it).
	AutoscaleMinute time.Duration
	// PortalMaxSignins bounds the portal's sign-ins in the database
	// (--portal-max-signins; 0 = portal.DefaultSessionLimits').
	PortalMaxSignins int
	// MetricsToken, when set, is the bearer token /metrics requires;
	// MetricsTokenFile, when set, holds it (at least 16 characters),
	// read at Open and again on SIGHUP (reload).
	MetricsToken     string
	MetricsTokenFile string
	// Federation makes the broker a pod (federation_serve.go).
	Federation FederationFlags
	// OIDC is single sign-on (oidc_serve.go).
	OIDC OIDCFlags
	// Gateway is the RD gateway side (gateway_serve.go): the server's
	// gateway, its tokens, and the gateway in-process.
	Gateway GatewayFlags

	// Set by Open.
	Store      vdibroker.Store
	Server     *vhttp.Server
	AdminToken string
	listener   net.Listener
	broker     *broker.Service
	console    *console.Console
	portal     *portal.Portal
	httpServer *http.Server
	certs      *certReloader
	metrics    *tokenFile // MetricsToken or MetricsTokenFile's
	unlockDir  func()
	// stopAutoscale stops the autoscaler and waits for it (nil: none).
	stopAutoscale func()
	stopDirectory func() // the federation's session directory passes (R-G1)
	stopReadMark  func() // the pod-to-pod read mark's moves (R-G5; nil: none)
	// waitReads waits until a pod on SQLite may take reads (nil:
	// sleepUntilReads); tests record it instead.
	waitReads func(until time.Time, log *slog.Logger)
}

// Open opens the store, loads or creates the admin token and starts serving.
func (m *Main) Open(ctx context.Context) (err error) {
	if m.Logger == nil {
		m.Logger = slog.New(slog.NewTextHandler(io.Discard, nil))
	}
	if err := m.Gateway.check(m.TLSCert != "" && m.TLSKey != ""); err != nil {
		return err
	}
	if m.metrics, err = newTokenFile("--metrics-token-file", m.MetricsTokenFile, m.MetricsToken, tokenChecked, minMetricsToken); err != nil {
		return err
	}
	// Mode 0700 on Unix; on Windows a DACL of this account, SYSTEM and
	// Administrators that the store's files inherit (R-SEC).
	if err := store.MkdirDataDir(m.DataDir); err != nil {
		return fmt.Errorf("create data dir: %w", err)
	}
	// What Open has started, undone in reverse order when a later step
	// fails, so a failed Open leaves nothing running or locked.
	var undo []func()
	defer func() {
		if err != nil {
			for i := len(undo) - 1; i >= 0; i-- {
				undo[i]()
			}
		}
	}()
	var locked time.Time // when this process took its data dir (SQLite)
	if m.Database == "" {
		unlock, err := lockDataDir(m.DataDir)
		if err != nil {
			return err
		}
		locked = time.Now()
		m.unlockDir = unlock
		undo = append(undo, m.unlock)
	}
	// The listener's certificate before the store: a flag or a file
	// missing is said before the store is created or migrated.
	tlsConfig, err := m.serverTLS()
	if err != nil {
		return err
	}
	if m.certs != nil {
		undo = append(undo, func() { m.certs.Close() })
	}
	if err := m.Federation.load(); err != nil {
		return err
	}
	m.Federation.logSecrets(m.Logger)
	if err := m.OIDC.load(ctx); err != nil {
		return err
	}
	db, err := store.OpenWith(ctx, m.Database, m.DataDir, m.Logger, store.Options{BatchTimeout: m.StoreTimeout})
	if err != nil {
		return oneLineError{fmt.Errorf("open store: %w", err)}
	}
	undo = append(undo, func() { db.Close() })
	// One admin token for every replica: its hash is in the database
	// (admintoken_shared.go).
	token, adminHash, err := adminCredential(ctx, db, m.DataDir, m.Database != "", m.Logger)
	if err != nil {
		return fmt.Errorf("admin token: %w", err)
	}
	m.AdminToken = token
	// Every store call is timed for /metrics (store transaction latency).
	st := metrics.InstrumentStore(db)
	m.Store = st
	if err := m.Gateway.listen(m.certs); err != nil {
		return err
	}
	undo = append(undo, func() { m.Gateway.close() })
	m.broker = broker.New(broker.Config{Store: st, Logger: m.Logger, ObservePlacement: metrics.ObservePlacement,
		RDPProperties: m.RDPProperties, StoreTimeout: m.StoreTimeout, Retention: m.Retention, PowerDrivers: m.PowerDrivers,
		OutagePlacement: m.OutagePlacement, MaintenanceInterval: m.MaintenanceInterval, Gateway: m.Gateway.brokerConfig(),
		MaxConnectWait: m.MaxConnectWait})
	undo = append(undo, func() { m.broker.Close() })
	services := m.broker.Services()
	// End users' connects pass the entitlement service (R-E3); the
	// federation's keep the broker's own, a global grant being enough.
	ents := entitlement.New(entitlement.Config{Store: m.broker.Store(), Connect: m.broker, Logger: m.Logger, Pod: m.Federation.PodName})
	services.Connect, services.Entitlements = ents, ents
	services.Federation = m.Federation.federation(m.broker, ents, m.Logger)
	m.stopDirectory = startDirectory(services.Federation)
	undo = append(undo, m.stopDirectory)
	var reads time.Time // when a pod on SQLite takes reads from
	if services.Federation != nil && !locked.IsZero() {
		// The server starts (vhttp.Config.OneProcessStore) in a second
		// after the one it took the data dir in (readsFrom), and after
		// the read mark the process before left (federation.ReadsFrom).
		if reads, err = federation.ReadsFrom(ctx, m.broker.Store(), readsFrom(locked)); err != nil {
			return fmt.Errorf("open store: %w", err)
		}
		wait := m.waitReads
		if wait == nil {
			wait = sleepUntilReads
		}
		wait(reads, m.Logger)
	}
	m.Server = vhttp.NewServer(vhttp.Config{Services: services, FederationSecrets: m.Federation.secrets, Logger: m.Logger,
		OneProcessStore: storeKind(m.Database) == "sqlite", // its data dir's lock keeps it to this process
		ReadsFrom:       reads, ReadMarks: m.broker.Store(),
		AdminTokenHash: adminHash, AgentClientCert: m.TLSClientCA != "", AgentCertAnyHost: m.TLSClientAnyHost, OIDC: m.OIDC.provider,
		Now: m.ServerNow})
	m.stopReadMark = startReadMark(m.Server)
	// Its ticks' mark, 2 × 5 s ahead, lowered to the reads' start: the
	// next start after a failed one (a port in use) does not wait for it.
	undo = append(undo, func() { m.stopPodCalls() })
	// Listening before the console is made: single sign-on's callback of
	// a broker on loopback is its own URL (siteURL).
	ln, err := net.Listen("tcp", m.Listen)
	if err != nil {
		return fmt.Errorf("listen on %s: %w", m.Listen, err)
	}
	undo = append(undo, func() { ln.Close() })
	if tlsConfig != nil {
		ln = tls.NewListener(ln, tlsConfig)
	}
	m.listener = ln
	// The console calls the API in-process with the signed-in user's token,
	// so the API enforces roles for the console too.
	// Console and metrics read through the service's store: bounded by the
	// store timeout, and failing at once during an outage.
	guarded := m.broker.Store()
	health := m.broker.StoreHealth()
	m.console = console.New(console.Config{API: m.Server.Handler(), Store: guarded, Sessions: guarded, Logger: m.Logger,
		Refusals:      &console.AuditRefusals{Audit: m.broker, Logger: m.Logger},
		SecureCookies: strings.HasPrefix(m.Federation.ExternalURL, "https://"),
		Outage: func() *console.Outage {
			st := health.Status()
			if st.Up {
				return nil
			}
			return &console.Outage{Since: st.Since, Reason: st.Reason, Placement: m.OutagePlacement.Enabled}
		},
		ClockOff: func() *console.ClockOff {
			if offset, off := m.broker.ClockOff(); off {
				return &console.ClockOff{Offset: offset}
			}
			return nil
		}})
	undo = append(undo, func() { m.console.Close() })
	m.Federation.addConsole(m.console)
	if err := m.addOIDCConsole(ctx, m.console, guarded); err != nil {
		return err
	}
	m.Server.Mount("/", m.console)
	// The user portal (R-U1), beside the console, over the same API.
	if m.portal, err = m.newPortal(ctx, guarded); err != nil {
		return err
	}
	undo = append(undo, func() { m.portal.Close() })
	m.Server.Mount(portal.Prefix, m.portal)
	reg := m.Federation.registry(metrics.NewRegistry(metrics.Config{Store: guarded,
		Outage:      func() (bool, float64) { st := health.Status(); return !st.Up, st.OutageSeconds },
		ClockOffset: m.broker.ClockOffset}))
	m.Server.Mount("GET /metrics", requireBearer(m.metrics.get, metrics.Handler(reg)))
	// The in-process gateway's metrics are the broker's (vdibroker_gateway_*).
	if err := m.Gateway.start(ctx, services.Gateway, reg, m.Logger); err != nil {
		return fmt.Errorf("in-process gateway: %w", err)
	}
	m.startAutoscale(guarded)
	m.httpServer = &http.Server{
		Handler:           metrics.InstrumentAPI(strictTransport(m.Server.Handler(), m.HSTSMaxAge)),
		ReadHeaderTimeout: 10 * time.Second,
		ReadTimeout:       orDefault(m.ReadTimeout, defaultReadTimeout),
		WriteTimeout:      orDefault(m.WriteTimeout, defaultWriteTimeout),
		IdleTimeout:       orDefault(m.IdleTimeout, defaultIdleTimeout),
		// A request's line and headers: net/http's 1 MB default let an
		// anonymous caller send a 900 KB path to every handler (R-SEC).
		MaxHeaderBytes: cmp.Or(m.MaxHeaderBytes, defaultMaxHeaderBytes),
		ErrorLog:       serverErrorLog(m.Logger),
	}
	go func() {
		if err := m.httpServer.Serve(ln); err != nil && !errors.Is(err, http.ErrServerClosed) {
			m.Logger.Error("http server stopped", "err", err)
		}
	}()
	return nil
}

// serverTLS returns the listener's TLS configuration from the --tls-*
// flags (nil without TLS), with m.certs reloading the certificate.
func (m *Main) serverTLS() (*tls.Config, error) {
	if m.TLSCert == "" && m.TLSKey == "" {
		if m.TLSClientCA != "" {
			return nil, usageError{errors.New("--tls-client-ca needs --tls-cert and --tls-key")}
		}
		return nil, nil
	}
	if m.TLSCert == "" || m.TLSKey == "" {
		return nil, usageError{errors.New("--tls-cert and --tls-key go together")}
	}
	certs, err := newCertReloader(m.TLSCert, m.TLSKey, m.Logger, m.TLSClock)
	if err != nil {
		return nil, err
	}
	cfg := &tls.Config{MinVersion: tls.VersionTLS12, GetCertificate: certs.GetCertificate}
	if m.TLSClientCA != "" {
		pool, err := loadCertPool(m.TLSClientCA)
		if err != nil {
			certs.Close()
			return nil, fmt.Errorf("--tls-client-ca: %w", err)
		}
		// Verified when given; the agent endpoints require one.
		cfg.ClientCAs, cfg.ClientAuth = pool, tls.VerifyClientCertIfGiven
	}
	m.certs = certs
	return cfg, nil
}

// unlock releases the data dir lock, if held.
func (m *Main) unlock() {
	if m.unlockDir != nil {
		m.unlockDir()
		m.unlockDir = nil
	}
}

// requireBearer serves h only to requests with "Authorization: Bearer
// T", T the token in force (read at each request: a reload replaces it);
// an empty token serves everyone. The hashes are compared in constant
// time, so the answer's time tells nothing of the token.
func requireBearer(token func() string, h http.Handler) http.Handler {
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		tok := token()
		if tok == "" {
			h.ServeHTTP(w, r)
			return
		}
		want := sha256.Sum256([]byte("Bearer " + tok))
		got := sha256.Sum256([]byte(r.Header.Get("Authorization")))
		if subtle.ConstantTimeCompare(got[:], want[:]) != 1 {
			w.Header().Set("WWW-Authenticate", `Bearer realm="vdibroker metrics"`)
			http.Error(w, "metrics need the token of --metrics-token-file", http.StatusUnauthorized)
			return
		}
		h.ServeHTTP(w, r)
	})
}

// minMetricsToken is the fewest characters of serve's metrics token.
const minMetricsToken = 16

// minRetention is the shortest --retention but 0 (R-SEC audit): the
// audit trail goes with the history it prunes.
const minRetention = 24 * time.Hour

// maxPortalSignins bounds --portal-max-signins: the database's rows stay
// within what a disk holds (a sign-in's row is under 4 KB).
const maxPortalSignins = 10_000_000

// The server's timeouts when Main leaves them 0. A request has 30 s to
// arrive whole (a body sent at a byte a second is cut off), an answer 60 s
// to be written, a keep-alive connection may idle 2 minutes.
const (
	defaultReadTimeout  = 30 * time.Second
	defaultWriteTimeout = 60 * time.Second
	defaultIdleTimeout  = 2 * time.Minute
	// defaultMaxHeaderBytes: room for an identity provider's JWT with
	// many groups in Authorization, far below net/http's 1 MB.
	defaultMaxHeaderBytes = 64 << 10
)

func orDefault(d, def time.Duration) time.Duration {
	if d > 0 {
		return d
	}
	return def
}

// URL is the base URL the broker answers on.
func (m *Main) URL() string {
	if m.certs != nil {
		return "https://" + m.listener.Addr().String()
	}
	return "http://" + m.listener.Addr().String()
}

// plainHTTPWarning is what serve says when it listens without TLS on an
// address other than loopback: tokens and cookies would cross the
// network in clear, and the agent, the CLI and the gateway refuse
// http:// to a host other than loopback (tls.go) unless given
// --insecure-http. "" with TLS or on loopback.
func plainHTTPWarning(addr net.Addr, tls bool) string {
	tcp, ok := addr.(*net.TCPAddr)
	if tls || !ok || tcp.IP.IsLoopback() {
		return ""
	}
	return "plain HTTP on an address other than loopback: tokens and sign-in cookies would cross the network in clear, and agents, the CLI and gateways refuse http:// to it without --insecure-http; give --tls-cert and --tls-key, or listen on loopback behind a proxy that terminates TLS"
}

// Close stops accepting requests, lets in-flight ones finish (graceful
// shutdown), then closes the server and the store.
func (m *Main) Close() error {
	var errs []error
	if m.httpServer != nil {
		ctx, cancel := context.WithTimeout(context.Background(), 15*time.Second)
		defer cancel()
		errs = append(errs, m.httpServer.Shutdown(ctx))
	}
	if m.Server != nil {
		// No pod-to-pod call is verified from here on, even one still in
		// a handler after the shutdown gave up waiting: the store and
		// the data dir's lock are let go of next (R-G5).
		errs = append(errs, m.stopPodCalls())
	}
	if m.portal != nil {
		errs = append(errs, m.portal.Close())
	}
	if m.console != nil {
		errs = append(errs, m.console.Close())
	}
	// Before the broker: the gateway reports its tunnels' closes to it.
	errs = append(errs, m.Gateway.close())
	if m.stopAutoscale != nil {
		m.stopAutoscale()
	}
	if m.stopDirectory != nil {
		m.stopDirectory()
	}
	if m.broker != nil {
		errs = append(errs, m.broker.Close())
	}
	if m.Store != nil {
		errs = append(errs, m.Store.Close())
	}
	m.unlock() // after the store: its last writes are done
	if m.certs != nil {
		m.certs.Close()
	}
	return errors.Join(errs...)
}

// stopPodCalls stops the read mark's moves, then refuses every pod-to-pod
// call and commits the mark at the latest read verified
// (vhttp.Server.StopPodCalls), before the store is let go of.
func (m *Main) stopPodCalls() error {
	m.stopReadMark()
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
	defer cancel()
	return m.Server.StopPodCalls(ctx)
}

// adminToken returns VDIBROKER_ADMIN_TOKEN, or the token in
// <dataDir>/admin.token, creating that file (mode 0600; on Windows the
// account's, SYSTEM's and Administrators' alone) on first start.
func adminToken(dataDir string) (string, error) {
	if t := strings.TrimSpace(os.Getenv("VDIBROKER_ADMIN_TOKEN")); t != "" {
		return t, nil
	}
	path := filepath.Join(dataDir, "admin.token")
	if b, err := os.ReadFile(path); err == nil {
		return checkAdminTokenFile(path, strings.TrimSpace(string(b)))
	} else if !errors.Is(err, os.ErrNotExist) {
		return "", fmt.Errorf("read admin token: %w", err)
	}
	buf := make([]byte, 24)
	if _, err := rand.Read(buf); err != nil {
		return "", err
	}
	t := "vdb_admin_" + hex.EncodeToString(buf)
	f, err := createSecretFile(path)
	if err != nil {
		return "", fmt.Errorf("create admin token: %w", err)
	}
	if _, err := f.WriteString(t + "\n"); err != nil {
		f.Close()
		return "", err
	}
	return t, f.Close()
}

// minAdminTokenLen is the shortest admin token a file may hold (the
// generated ones have 58 characters).
const minAdminTokenLen = 32

// checkAdminTokenFile refuses an admin.token that anyone but its owner may
// read (its mode on Unix, its DACL on Windows: checkSecretFile), an empty
// one and a short one, saying how to fix it (R-SEC).
func checkAdminTokenFile(path, token string) (string, error) {
	if err := checkSecretFile(path); err != nil {
		return "", err // serve says "admin token: "
	}
	if token == "" {
		return "", fmt.Errorf("%s is empty: delete it to have a new one made at start, or write a token of at least %d characters", path, minAdminTokenLen)
	}
	if len(token) < minAdminTokenLen {
		return "", fmt.Errorf("%s is %d characters long, want at least %d: delete it to have a new one made at start", path, len(token), minAdminTokenLen)
	}
	return token, nil
}

func newServeCmd() *cobra.Command {
	m := &Main{}
	var cpuProfile, rdpDefaults, metricsTokenFile, powerConfig, databaseFile string
	var logs logFlags
	cmd := &cobra.Command{
		Use:   "serve",
		Short: "Run the broker: HTTP API, web console and metrics",
		Long:  "Run the broker: HTTP API, web console and metrics.\n" + envFlagsHelp,
		Args:  cobra.NoArgs,
		RunE: runWithEnvFlags(func(cmd *cobra.Command, fromEnv []string) error {
			var err error
			if m.Logger, err = logs.logger(os.Stderr); err != nil {
				return err
			}
			if len(fromEnv) > 0 {
				m.Logger.Info("flags from the environment", "flags", fromEnv)
			}
			warnEnvOverridden(cmd, fromEnv, m.Logger)
			if w := defaultedDataDir(cmd, &m.DataDir); w != "" {
				m.Logger.Warn(w)
			}
			if err := databaseFrom(m, databaseFile, slices.Contains(fromEnv, "database"), m.Logger); err != nil {
				return err
			}
			if err := checkOutageFlags(&m.OutagePlacement, m.MaintenanceInterval); err != nil {
				return err
			}
			if m.MaxConnectWait < time.Second || m.MaxConnectWait > vdibroker.MaxConnectWait {
				return usageError{fmt.Errorf("--max-connect-wait: must be 1s..%s, got %s", vdibroker.DurationFlag(vdibroker.MaxConnectWait), vdibroker.DurationFlag(m.MaxConnectWait))}
			}
			if m.PortalMaxSignins < 1 || m.PortalMaxSignins > maxPortalSignins {
				return usageError{fmt.Errorf("--portal-max-signins: must be 1..%d, got %d", maxPortalSignins, m.PortalMaxSignins)}
			}
			if m.HSTSMaxAge < 0 || m.HSTSMaxAge > maxHSTSMaxAge {
				return usageError{fmt.Errorf("--hsts-max-age: must be 0 (no header) ..%s, got %s", vdibroker.DurationFlag(maxHSTSMaxAge), vdibroker.DurationFlag(m.HSTSMaxAge))}
			}
			// max-age counts whole seconds: 500ms would be sent as
			// max-age=0, which tells browsers to forget the policy
			// (RFC 6797, 6.1.1), not to keep it for half a second.
			if m.HSTSMaxAge%time.Second != 0 {
				return usageError{fmt.Errorf("--hsts-max-age: must be whole seconds (max-age counts seconds), got %s", vdibroker.DurationFlag(m.HSTSMaxAge))}
			}
			// The audit trail is pruned by it too: "5m" for "5 months"
			// would delete every entry older than five minutes, hourly.
			if m.Retention != 0 && m.Retention < minRetention {
				return usageError{fmt.Errorf("--retention: must be 0 (keep for ever) or %s or more, got %s", vdibroker.DurationFlag(minRetention), vdibroker.DurationFlag(m.Retention))}
			}
			if m.MaxHeaderBytes < 4096 || m.MaxHeaderBytes > 1<<20 {
				return usageError{fmt.Errorf("--max-header-bytes: must be 4096..1048576, got %d", m.MaxHeaderBytes)}
			}
			if err := checkListen("--listen", m.Listen); err != nil {
				return err
			}
			if rdpDefaults != "" {
				data, err := os.ReadFile(rdpDefaults)
				if err == nil {
					m.RDPProperties, err = rdp.ParseProperties(data)
				}
				if err != nil {
					return usageError{fmt.Errorf("--rdp-defaults %s: %w", rdpDefaults, err)}
				}
			}
			if powerConfig != "" {
				// A missing or bad file is fatal: a broker that silently ran
				// without its drivers would answer connects NoCapacity.
				set, err := power.LoadFile(powerConfig, m.Logger)
				if err != nil {
					return usageError{fmt.Errorf("--power-config: %w", err)}
				}
				m.PowerDrivers = set
				m.Logger.Info("power drivers loaded", "file", powerConfig, "drivers", set.Names())
			}
			m.MetricsTokenFile = metricsTokenFile
			ctx, stop := signal.NotifyContext(cmd.Context(), os.Interrupt, syscall.SIGTERM)
			defer stop()
			// SIGHUP (systemctl reload) reads the log level, the OIDC
			// role map, the federation secrets and the metrics token
			// again, once Open has set them; the TLS certificate, when
			// served, is read again by its reloader.
			opened := make(chan struct{})
			onHUP(ctx, opened, func() {
				logs.reload(m.Logger)
				m.OIDC.reload(m.Logger)
				m.Federation.reload(m.Logger)
				m.metrics.hup(m.Logger)
			})
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
			close(opened)
			m.Logger.Info("vdibroker serving", "url", m.URL(), "dataDir", m.DataDir, "store", storeKind(m.Database))
			if w := plainHTTPWarning(m.listener.Addr(), m.certs != nil); w != "" {
				m.Logger.Warn(w, "listen", m.listener.Addr().String())
			}
			// The line below is read by tests and scripts that start on port 0.
			fmt.Fprintf(cmd.OutOrStdout(), "vdibroker listening on %s\n", m.URL())
			tokenNote(cmd.OutOrStdout(), m.AdminToken)
			<-ctx.Done()
			m.Logger.Info("shutting down")
			return m.Close()
		}),
	}
	cmd.Flags().StringVar(&m.Listen, "listen", "127.0.0.1:8080", "address to listen on")
	addDataDirFlag(cmd, &m.DataDir, "directory for the embedded store and admin.token")
	cmd.Flags().StringVar(&m.Database, "database", "", "database: empty for SQLite in --data-dir, or postgres://user@host/db; keep a password out of the command line (ps shows it): VDIBROKER_DATABASE, --database-file, or PGPASSWORD / PGPASSFILE")
	cmd.Flags().StringVar(&databaseFile, "database-file", "", "file holding the --database URL (read once at start), so its password is in neither the command line nor the environment")
	logs.addFlags(cmd.Flags(), true)
	cmd.Flags().StringVar(&m.TLSCert, "tls-cert", "", "serve HTTPS with this PEM certificate (chain); reloaded when it changes or on SIGHUP")
	cmd.Flags().StringVar(&m.TLSKey, "tls-key", "", "the PEM private key of --tls-cert")
	cmd.Flags().StringVar(&m.TLSClientCA, "tls-client-ca", "", "require agents to present a client certificate signed by this PEM CA (mTLS on the agent endpoints), whose common name or a DNS name is the host name the agent registers as")
	cmd.Flags().BoolVar(&m.TLSClientAnyHost, "tls-client-any-host", false, "accept an agent's client certificate for any session host name (by default one host's certificate cannot register or heartbeat another)")
	cmd.Flags().DurationVar(&m.HSTSMaxAge, "hsts-max-age", defaultHSTSMaxAge,
		"with --tls-cert, how long browsers keep to HTTPS for this host name (Strict-Transport-Security; 0 = no header)")
	cmd.Flags().DurationVar(&m.ReadTimeout, "read-timeout", defaultReadTimeout, "longest time to read a whole request, body included")
	cmd.Flags().DurationVar(&m.WriteTimeout, "write-timeout", defaultWriteTimeout, "longest time to write an answer")
	cmd.Flags().DurationVar(&m.IdleTimeout, "idle-timeout", defaultIdleTimeout, "longest time a keep-alive connection may idle")
	cmd.Flags().DurationVar(&m.MaxConnectWait, "max-connect-wait", broker.DefaultMaxConnectWait,
		"longest a connect with ?wait= is held for a starting host (1s..10m; R-U4)")
	cmd.Flags().IntVar(&m.PortalMaxSignins, "portal-max-signins", portal.DefaultSessionLimits.PerArea,
		fmt.Sprintf("most users signed in to the portal at once, every replica together (1..%d); a sign-in beyond it is refused until one ends", maxPortalSignins))
	cmd.Flags().IntVar(&m.MaxHeaderBytes, "max-header-bytes", defaultMaxHeaderBytes, "largest request line and headers accepted (4096..1048576); larger ones are answered 431")
	cmd.Flags().StringVar(&metricsTokenFile, "metrics-token-file", "", "file holding a token (at least 16 characters) /metrics then requires as Authorization: Bearer (default: /metrics is open); read again on SIGHUP")
	cmd.Flags().DurationVar(&m.Retention, "retention", 30*24*time.Hour, "keep ended sessions, delivered commands, expired tokens and the audit trail this long (0 = forever, else 24h or more); pruned hourly")
	cmd.Flags().DurationVar(&m.AutoscaleInterval, "autoscale-interval", time.Minute, "how often the autoscaler evaluates the scaling plans; with several replicas one evaluates, under a lease of two intervals (0 = off)")
	cmd.Flags().DurationVar(&m.StoreTimeout, "store-timeout", 5*time.Second, "longest time any database call may take; past it the database counts as down (503 StoreUnavailable)")
	cmd.Flags().StringVar(&rdpDefaults, "rdp-defaults", "", "file of extra .rdp properties for every connect's rdpFile, one name:type:value a line (like AVD's customRdpProperty)")
	cmd.Flags().StringVar(&powerConfig, "power-config", "", "YAML file of the power drivers (exec, webhook, simulated) pools may name in powerDriver to start and stop their hosts (R-A4)")
	addOutageFlags(cmd, m) // outage_serve.go
	m.Federation.addFlags(cmd.Flags())
	m.OIDC.addFlags(cmd.Flags())
	m.Gateway.addFlags(cmd.Flags())
	// For measuring the broker as its own process (BENCHMARKS.md).
	cmd.Flags().StringVar(&cpuProfile, "cpu-profile", "", "write a Go CPU profile of the whole run to this file")
	cmd.Flags().MarkHidden("cpu-profile")
	// For end-to-end tests of ramp-down's waits (autoscale_e2e_test.go).
	cmd.Flags().DurationVar(&m.AutoscaleMinute, "autoscale-minute", time.Minute, "how long a minute of a scaling plan's waits (rampDownWaitTimeMinutes) lasts")
	cmd.Flags().MarkHidden("autoscale-minute")
	return cmd
}

func storeKind(dsn string) string {
	if dsn == "" {
		return "sqlite"
	}
	return "postgres"
}

// databaseFrom sets m.Database from --database-file, and warns when a
// password came on the command line, where every user's `ps` shows it
// (fromEnv: --database came from VDIBROKER_DATABASE, which ps does not
// show).
func databaseFrom(m *Main, file string, fromEnv bool, log *slog.Logger) error {
	if file != "" {
		if m.Database != "" {
			return usageError{errors.New("give --database or --database-file, not both")}
		}
		b, err := os.ReadFile(file)
		if err != nil {
			return usageError{fmt.Errorf("--database-file: %w", err)}
		}
		if m.Database = strings.TrimSpace(string(b)); m.Database == "" {
			return usageError{fmt.Errorf("--database-file %s is empty", file)}
		}
		return checkDatabaseURL(m.Database, "--database-file "+file)
	}
	if err := checkDatabaseURL(m.Database, "--database"); err != nil {
		return err
	}
	if !fromEnv && dsnHasPassword(m.Database) {
		log.Warn("--database holds a password, which ps shows to every user of this machine: use VDIBROKER_DATABASE, --database-file, or PGPASSWORD / PGPASSFILE instead")
	}
	return nil
}

// oneLineError is err with its white space runs as one space: PostgreSQL's
// driver lists each address it tried on a line of its own after a tab,
// and the CLI's error is one line (docs/cli.md).
type oneLineError struct{ err error }

func (e oneLineError) Error() string { return strings.Join(strings.Fields(e.err.Error()), " ") }
func (e oneLineError) Unwrap() error { return e.err }

// checkDatabaseURL refuses, as a mistake in the command, a database that
// is neither empty (SQLite) nor a postgres:// URL (the store takes no
// other), naming where it came from and never the value, which may hold
// a password.
func checkDatabaseURL(dsn, from string) error {
	if dsn == "" || strings.HasPrefix(dsn, "postgres://") || strings.HasPrefix(dsn, "postgresql://") {
		return nil
	}
	return usageError{fmt.Errorf("%s: want empty (SQLite in --data-dir) or a postgres:// URL (postgres://user@host:5432/db)", from)}
}

// dsnHasPassword reports whether a PostgreSQL URL or key=value DSN holds
// a password.
func dsnHasPassword(dsn string) bool {
	if u, err := url.Parse(dsn); err == nil && u.User != nil {
		if _, ok := u.User.Password(); ok {
			return true
		}
	}
	return strings.Contains(dsn, "password=") // key=value, or a URL's query
}

func init() { rootCmd.AddCommand(newServeCmd()) }

// checkListen checks a listen address as net.Listen reads it, so that a
// typo (a port alone, no port, a port past 65535) is a mistake in the
// command (exit 2) found before the store is opened and an admin token
// written, not when the address is bound. A port given by service name
// is left to net.Listen.
func checkListen(flag, addr string) error {
	_, port, err := net.SplitHostPort(addr)
	if err != nil {
		if n, aerr := strconv.Atoi(addr); aerr == nil && n >= 0 {
			return usageError{fmt.Errorf("%s %q: want host:port, e.g. 127.0.0.1:%s, or :%s for every address", flag, addr, addr, addr)}
		}
		example := "127.0.0.1:8080"
		if net.ParseIP(addr) != nil || (addr != "" && !strings.Contains(addr, ":")) {
			example = net.JoinHostPort(addr, "8080")
		}
		return usageError{fmt.Errorf("%s %q: want host:port, e.g. %s", flag, addr, example)}
	}
	if n, err := strconv.Atoi(port); err == nil && (n < 0 || n > 65535) {
		return usageError{fmt.Errorf("%s %q: the port must be 0..65535, got %d", flag, addr, n)}
	}
	return nil
}
