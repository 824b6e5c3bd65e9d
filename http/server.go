package http

import (
	"context"
	"crypto/sha256"
	"errors"
	"log/slog"
	nethttp "net/http"
	"regexp"
	"runtime/debug"
	"time"

	"github.com/vdibroker/vdibroker"
	"github.com/vdibroker/vdibroker/broker"
	"github.com/vdibroker/vdibroker/identity"
	"github.com/vdibroker/vdibroker/power"
)

// Config is what a Server needs. Store is required; the rest has defaults.
type Config struct {
	Store  vdibroker.Store
	Logger *slog.Logger // nil discards logs
	// Now returns the current time (nil = time.Now). Status (R-H1), expiry
	// and placement decisions use it.
	Now func() time.Time
	// Rand returns a uniform integer in [0, n) for placement draws (nil =
	// math/rand/v2).
	Rand func(n int) int
	// AdminToken is the plaintext admin token (R-SEC). Only its SHA-256 hash
	// is kept; requests are compared in constant time. Empty disables it.
	AdminToken string
	// MaintenanceInterval is how often the broker service's background
	// loop runs (see broker.Config). Used only when Broker is nil.
	MaintenanceInterval time.Duration
	// ObservePlacement, when set, is called with the pool's load balancer
	// type and the engine's decision time of every connect (for example
	// metrics.ObservePlacement). Used only when Broker is nil.
	ObservePlacement func(algorithm string, d time.Duration)
	// StoreTimeout bounds every store call (see broker.Config). Used only
	// when Broker is nil.
	StoreTimeout time.Duration
	// Retention is how long history is kept (see broker.Config). Used
	// only when Broker is nil.
	Retention time.Duration
	// AgentClientCert makes the agent endpoints (register, heartbeat)
	// require a verified TLS client certificate (mTLS; the listener
	// verifies certificates that are given against its client CA).
	AgentClientCert bool
	// PowerDrivers are serve --power-config's drivers (see broker.Config).
	// Used only when Broker is nil.
	PowerDrivers power.Set
	// Broker is the broker service the API calls. Nil makes one on Store
	// (with Logger, Now, Rand, MaintenanceInterval and ObservePlacement),
	// which Close then stops; a Broker given here is the caller's to close.
	Broker *broker.Service
	// OIDC, when set, accepts the identity provider's ID tokens (and JWT
	// access tokens for this client) as bearer tokens besides vdibroker's
	// own (issue 15).
	OIDC *identity.Provider
}

// Server serves the API of SPEC §9 on a vdibroker.Store.
type Server struct {
	store     vdibroker.Store
	log       *slog.Logger
	now       func() time.Time
	adminHash [sha256.Size]byte
	hasAdmin  bool

	mux     *nethttp.ServeMux
	handler nethttp.Handler

	svc    *broker.Service
	ownSvc bool // made by NewServer: Close stops it
	// agentCert: the agent endpoints require a client certificate.
	agentCert bool
	// authFailures and heartbeats are the rate limits of ratelimit.go.
	authFailures *limiters
	heartbeats   *limiters

	fed *federationState // federation.go; nil unless a pod

	oidc *identity.Provider // nil unless serve --oidc-issuer
}

// NewServer returns a Server on cfg.Broker, or on a broker service of its
// own (started here, stopped by Close).
func NewServer(cfg Config) *Server {
	s := &Server{
		store: cfg.Store,
		log:   cfg.Logger,
		now:   cfg.Now,
		svc:   cfg.Broker,

		agentCert: cfg.AgentClientCert,
		oidc:      cfg.OIDC,

		authFailures: newLimiters(AuthFailuresPerSecond, AuthFailureBurst),
		heartbeats:   newLimiters(HeartbeatsPerSecond, HeartbeatBurst),
	}
	if s.log == nil {
		s.log = slog.New(slog.DiscardHandler)
	}
	if s.now == nil {
		s.now = time.Now
	}
	if cfg.AdminToken != "" {
		s.adminHash = sha256.Sum256([]byte(cfg.AdminToken))
		s.hasAdmin = true
	}
	if s.svc == nil {
		s.svc = broker.New(broker.Config{Store: cfg.Store, Logger: cfg.Logger, Now: cfg.Now, Rand: cfg.Rand,
			MaintenanceInterval: cfg.MaintenanceInterval, ObservePlacement: cfg.ObservePlacement,
			StoreTimeout: cfg.StoreTimeout, Retention: cfg.Retention, PowerDrivers: cfg.PowerDrivers})
		s.ownSvc = true
	}
	s.store = s.svc.Store() // bounded by the store timeout, outage-aware
	s.mux = nethttp.NewServeMux()
	s.routes()
	s.handler = s.middleware(s.mux)
	return s
}

// Broker returns the broker service the server calls.
func (s *Server) Broker() *broker.Service { return s.svc }

// Handler returns the whole server: the API under /api/v1 and /healthz,
// plus whatever was registered on Mux, wrapped in request ids, logging and
// panic recovery.
func (s *Server) Handler() nethttp.Handler { return s.handler }

// Mux is the ServeMux Handler serves, for other adapters to mount more
// routes (the console at "/", Prometheus at "/metrics"). Register before
// serving; patterns must not overlap /api/v1/ or /healthz.
func (s *Server) Mux() *nethttp.ServeMux { return s.mux }

// Close stops the broker service if NewServer made it. It does not close
// the store.
func (s *Server) Close() error {
	if s.ownSvc {
		return s.svc.Close()
	}
	return nil
}

type ctxKey int

const ctxLogger ctxKey = 0

// loggerFrom returns the request's logger (with its request id).
func (s *Server) loggerFrom(ctx context.Context) *slog.Logger {
	if l, ok := ctx.Value(ctxLogger).(*slog.Logger); ok {
		return l
	}
	return s.log
}

var validRequestID = regexp.MustCompile(`^[A-Za-z0-9._:-]{1,64}$`)

// statusWriter remembers the status for the access log.
type statusWriter struct {
	nethttp.ResponseWriter
	status int
}

func (w *statusWriter) WriteHeader(code int) {
	if w.status == 0 {
		w.status = code
	}
	w.ResponseWriter.WriteHeader(code)
}

func (w *statusWriter) Write(b []byte) (int, error) {
	if w.status == 0 {
		w.status = nethttp.StatusOK
	}
	return w.ResponseWriter.Write(b)
}

func (w *statusWriter) Unwrap() nethttp.ResponseWriter { return w.ResponseWriter }

// middleware gives every request an id (X-Request-Id, taken from the
// request when well formed), a logger carrying it, an access log line and
// panic recovery.
func (s *Server) middleware(next nethttp.Handler) nethttp.Handler {
	return nethttp.HandlerFunc(func(w nethttp.ResponseWriter, r *nethttp.Request) {
		id := r.Header.Get("X-Request-Id")
		if !validRequestID.MatchString(id) {
			id = newID(8)
		}
		w.Header().Set("X-Request-Id", id)
		log := s.log.With("request_id", id)
		orig := r
		r = r.WithContext(context.WithValue(r.Context(), ctxLogger, log))
		// Every route's body is bounded (issue 14: the console's forms had
		// no limit), and a multipart form parsed on this copy of the
		// request is removed here: net/http removes only the original's.
		r.Body = nethttp.MaxBytesReader(w, r.Body, maxBodyBytes)
		defer func() {
			if r.MultipartForm != nil && r.MultipartForm != orig.MultipartForm {
				r.MultipartForm.RemoveAll()
			}
		}()
		sw := &statusWriter{ResponseWriter: w}
		start := time.Now()
		defer func() {
			if p := recover(); p != nil {
				if p == nethttp.ErrAbortHandler {
					panic(p)
				}
				log.Error("panic in handler", "panic", p, "method", r.Method, "path", r.URL.Path, "stack", string(debug.Stack()))
				if sw.status == 0 {
					writeError(sw, r, s, errors.New("panic"))
				}
			}
			log.Info("request", "method", r.Method, "path", r.URL.Path, "status", sw.status,
				"duration", time.Since(start))
		}()
		next.ServeHTTP(sw, r)
	})
}
