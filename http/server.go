package http

import (
	"context"
	"crypto/sha256"
	"errors"
	"log/slog"
	"math/rand/v2"
	nethttp "net/http"
	"regexp"
	"runtime/debug"
	"sync"
	"time"

	"github.com/vdibroker/vdibroker"
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
	// MaintenanceInterval is how often the background loop ends expired
	// Pending sessions (R-S3) and marks the placement views for a refresh
	// from the store (so changes made by other replicas are seen). 0 = 5s.
	MaintenanceInterval time.Duration
	// ObservePlacement, when set, is called with the pool's load balancer
	// type and the engine's decision time of every connect (for example
	// metrics.ObservePlacement).
	ObservePlacement func(algorithm string, d time.Duration)
}

// Server serves the API of SPEC §9 on a vdibroker.Store.
type Server struct {
	store     vdibroker.Store
	log       *slog.Logger
	now       func() time.Time
	rand      func(n int) int
	observe   func(algorithm string, d time.Duration)
	adminHash [sha256.Size]byte
	hasAdmin  bool

	mux     *nethttp.ServeMux
	handler nethttp.Handler

	views     *views
	userLocks keyedMutex
	idem      *idempotency

	stop      chan struct{}
	done      chan struct{}
	closeOnce sync.Once
}

// NewServer returns a Server and starts its maintenance loop; Close stops it.
func NewServer(cfg Config) *Server {
	s := &Server{
		store:   cfg.Store,
		log:     cfg.Logger,
		now:     cfg.Now,
		rand:    cfg.Rand,
		observe: cfg.ObservePlacement,
		stop:    make(chan struct{}),
		done:    make(chan struct{}),
	}
	if s.log == nil {
		s.log = slog.New(slog.DiscardHandler)
	}
	if s.now == nil {
		s.now = time.Now
	}
	if s.rand == nil {
		s.rand = rand.IntN
	}
	if cfg.AdminToken != "" {
		s.adminHash = sha256.Sum256([]byte(cfg.AdminToken))
		s.hasAdmin = true
	}
	s.views = newViews(s)
	s.idem = newIdempotency(s.now)
	s.mux = nethttp.NewServeMux()
	s.routes()
	s.handler = s.middleware(s.mux)

	interval := cfg.MaintenanceInterval
	if interval <= 0 {
		interval = 5 * time.Second
	}
	go s.maintain(interval)
	return s
}

// Handler returns the whole server: the API under /api/v1 and /healthz,
// plus whatever was registered on Mux, wrapped in request ids, logging and
// panic recovery.
func (s *Server) Handler() nethttp.Handler { return s.handler }

// Mux is the ServeMux Handler serves, for other adapters to mount more
// routes (the console at "/", Prometheus at "/metrics"). Register before
// serving; patterns must not overlap /api/v1/ or /healthz.
func (s *Server) Mux() *nethttp.ServeMux { return s.mux }

// Close stops the maintenance loop. It does not close the store.
func (s *Server) Close() error {
	s.closeOnce.Do(func() {
		close(s.stop)
		<-s.done
	})
	return nil
}

// maintain runs the background work: pending timeout (R-S3) and refreshing
// the placement views.
func (s *Server) maintain(interval time.Duration) {
	defer close(s.done)
	t := time.NewTicker(interval)
	defer t.Stop()
	// Close cancels work in progress, so it never waits for a slow store.
	base, stop := context.WithCancel(context.Background())
	defer stop()
	go func() {
		select {
		case <-s.stop:
			stop()
		case <-base.Done():
		}
	}()
	for {
		select {
		case <-s.stop:
			return
		case <-t.C:
		}
		ctx, cancel := context.WithTimeout(base, max(interval, 30*time.Second))
		n, err := s.store.ExpirePending(ctx, s.now())
		cancel()
		if err != nil && base.Err() == nil {
			s.log.Error("expire pending sessions", "err", err)
		} else if n > 0 {
			s.log.Info("ended pending sessions never seen by their agent", "count", n, "reason", "PendingTimeout")
		}
		// Another replica may have placed, or heartbeats may have arrived
		// there: the next connect re-reads each pool from the store.
		s.views.markAllStale()
	}
}

type ctxKey int

const (
	ctxLogger ctxKey = iota
	ctxPrincipal
)

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
		r = r.WithContext(context.WithValue(r.Context(), ctxLogger, log))
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
