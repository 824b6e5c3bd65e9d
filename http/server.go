package http

import (
	"context"
	"crypto/sha256"
	"encoding/hex"
	"errors"
	"log/slog"
	nethttp "net/http"
	"path"
	"regexp"
	"runtime/debug"
	"slices"
	"strings"
	"time"

	"github.com/vdibroker/vdibroker"
	"github.com/vdibroker/vdibroker/federation"
	"github.com/vdibroker/vdibroker/identity"
	"github.com/vdibroker/vdibroker/internal/ratelimit"
)

// Config is what a Server needs. Services are required (Federation
// only on a pod); the rest has defaults.
type Config struct {
	// Services are the broker's services the API calls; cmd/vdibroker
	// wires them.
	Services vdibroker.Services
	// FederationSecrets check the pod-to-pod calls of a pod
	// (Services.Federation set); its peers client signs with them.
	FederationSecrets *federation.Secrets
	Logger            *slog.Logger // nil discards logs
	// OneProcessStore says the store belongs to this process alone
	// (SQLite): the pod-to-pod calls that only read keep their nonces in
	// memory (R-G5, federation.Verifier.ReadsInMemory).
	OneProcessStore bool
	// ReadsFrom, on a one-process store, is when its reads may start
	// (federation.ReadsFrom): the pod-to-pod reads signed before the
	// later of it and the server's start are refused. The caller waits
	// for it before serving, or peers' first reads are refused.
	ReadsFrom time.Time
	// ReadMarks, on a one-process store, keeps the read mark
	// (federation.Verifier.Marks; the store's shared values), moved
	// ahead by KeepReadMark every ReadMarkInterval (0:
	// federation.DefaultMarkInterval).
	ReadMarks        federation.Marks
	ReadMarkInterval time.Duration
	// Now returns the current time (nil = time.Now): audit entries and
	// the pod-to-pod signatures' freshness.
	Now func() time.Time
	// AdminToken is the plaintext admin token (R-SEC). Only its SHA-256 hash
	// is kept; requests are compared in constant time. Empty disables it.
	AdminToken string
	// AdminTokenHash is the admin token's vdibroker.HashSecret, for a
	// replica that knows only the hash the replicas share (serve). It is
	// used when AdminToken is empty.
	AdminTokenHash string
	// AgentClientCert makes the agent endpoints (register, heartbeat)
	// require a verified TLS client certificate (mTLS; the listener
	// verifies certificates that are given against its client CA).
	AgentClientCert bool
	// AgentCertAnyHost accepts an agent's client certificate for any
	// host name; without it the certificate's common name or a DNS name
	// must be the host it registers and heartbeats as (R-SEC).
	AgentCertAnyHost bool
	// OIDC, when set, accepts the identity provider's ID tokens (and JWT
	// access tokens for this client) as bearer tokens besides vdibroker's
	// own.
	OIDC *identity.Provider
}

// Server serves the API of SPEC §9: it decodes a request, calls one of
// the broker's services and encodes the answer.
type Server struct {
	svc       vdibroker.Services
	log       *slog.Logger
	now       func() time.Time
	adminHash [sha256.Size]byte
	hasAdmin  bool

	mux     *nethttp.ServeMux
	handler nethttp.Handler
	// patterns are the routes registered (handle, Mount), in order;
	// apiRoutes those of handle alone, whose refusals are audited under
	// their pattern (R-SEC), but for those that refuse no one
	// (unaudited, registered refusesNoOne): they and the mounted ones
	// (the console, Prometheus, the API's 404) write no audit entry.
	patterns, apiRoutes []string
	unaudited           map[string]bool

	// agentCert: the agent endpoints require a client certificate;
	// agentCertAnyHost: of any host name.
	agentCert, agentCertAnyHost bool
	// authFailures and heartbeats are the rate limits of ratelimit.go.
	authFailures *ratelimit.Keyed
	heartbeats   *ratelimit.Keyed
	signins      *ratelimit.Keyed
	// userWrites is the write budget of end users, by principal; its
	// buckets are made only for a principal whose credential and role
	// were checked, so a caller without one makes none.
	userWrites *ratelimit.Keyed
	// globalCommands bounds the logoffs and disconnects of sessions in
	// other pods per principal (GlobalSessionCommandsPerPrincipal).
	globalCommands *ratelimit.Keyed
	// globalLists bounds the listings of users' sessions in other pods
	// per principal (GlobalSessionListsPerPrincipal).
	globalLists *ratelimit.Keyed
	// podDocuments bounds the peers' writes of the federation document
	// per calling pod (PodDocumentsPerPod).
	podDocuments *ratelimit.Keyed
	// podCommands bounds the peers' logoffs and disconnects of this
	// pod's sessions per calling pod (PodSessionCommandsPerPod).
	podCommands *ratelimit.Keyed
	// reKeys bounds the re-keys of a host (ReKeysPerHost), by pool and
	// host name.
	reKeys *ratelimit.Keyed
	// newHosts bounds the hosts a registration token creates
	// (NewHostsPerTokenBurst, NewHostsPerTokenPerMinute), by token id.
	newHosts *ratelimit.Keyed
	// spentTokens are the tokens whose new hosts were found spent, by
	// hash, whose registrations are refused before a write transaction
	// while they still are (refuseSpentNewHost).
	spentTokens spentTokens
	// refusedLines bounds the access log lines of the requests of
	// callers that proved no credential (R-SEC).
	refusedLines *lineBudget

	fed *federationState // federation.go; nil unless a pod

	oidc *identity.Provider // nil unless serve --oidc-issuer
}

// NewServer returns a Server on cfg's services.
func NewServer(cfg Config) *Server {
	s := &Server{
		svc: cfg.Services,
		log: cfg.Logger,
		now: cfg.Now,

		agentCert:        cfg.AgentClientCert,
		agentCertAnyHost: cfg.AgentCertAnyHost,
		oidc:             cfg.OIDC,

		authFailures:   ratelimit.New(AuthFailuresPerSecond, AuthFailureBurst),
		heartbeats:     ratelimit.New(HeartbeatsPerSecond, HeartbeatBurst),
		signins:        ratelimit.New(SigninsPerPrincipal/60.0, SigninsPerPrincipal),
		userWrites:     ratelimit.New(UserWritesPerSecond, UserWriteBurst),
		globalCommands: ratelimit.New(GlobalSessionCommandsPerPrincipal/60.0, GlobalSessionCommandsPerPrincipal),
		globalLists:    ratelimit.New(GlobalSessionListsPerPrincipal/60.0, GlobalSessionListsPerPrincipal),
		podDocuments:   ratelimit.New(PodDocumentsPerPod/60.0, PodDocumentsPerPod),
		podCommands:    ratelimit.New(PodSessionCommandsPerPod/60.0, PodSessionCommandsPerPod),
		reKeys:         ratelimit.New(ReKeysPerHost/60.0, ReKeysPerHost),
		newHosts:       ratelimit.New(NewHostsPerTokenPerMinute/60.0, NewHostsPerTokenBurst),
		refusedLines:   newLineBudget(RefusedLogLinesPerSecond, RefusedLogLineBurst),
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
	} else if h, err := hex.DecodeString(cfg.AdminTokenHash); err == nil && len(h) == sha256.Size {
		copy(s.adminHash[:], h)
		s.hasAdmin = true
	}
	if cfg.Services.Federation != nil {
		// Nonces in the pod's store: a replay is refused on every
		// replica (R-G5); a one-process store's replica is this one.
		v := &federation.Verifier{Secrets: cfg.FederationSecrets, Now: s.now, Pod: cfg.Services.Federation.Pod(),
			Nonces: cfg.Services.Federation, ReadsInMemory: cfg.OneProcessStore, Started: s.now()}
		if cfg.OneProcessStore {
			v.Started, v.Marks, v.MarkInterval = later(v.Started, cfg.ReadsFrom), cfg.ReadMarks, cfg.ReadMarkInterval
		}
		s.fed = &federationState{g: cfg.Services.Federation, verifier: v}
	}
	s.mux = nethttp.NewServeMux()
	s.routes()
	s.handler = s.middleware(s.mux)
	return s
}

// later is the later of a and b.
func later(a, b time.Time) time.Time {
	if b.After(a) {
		return b
	}
	return a
}

// KeepReadMark moves the pod-to-pod read mark ahead every
// ReadMarkInterval until ctx is done or StopPodCalls
// (federation.Verifier.KeepMark); it returns at once unless the server
// is a pod on a one-process store with ReadMarks. Moves that fail (a
// store outage) are logged as one failure (failureLog): once when they
// start, reminders at most at doubling intervals, once when a move goes
// through again (R-OUT1).
func (s *Server) KeepReadMark(ctx context.Context) {
	if s.fed == nil {
		return
	}
	t := time.NewTicker(s.fed.verifier.MarkEvery())
	defer t.Stop()
	s.keepReadMark(ctx, t.C, nil)
}

// keepReadMark is KeepReadMark on ticks; moved, when not nil, is called
// after each move was logged (a test's step).
func (s *Server) keepReadMark(ctx context.Context, ticks <-chan time.Time, moved func()) {
	if s.fed == nil {
		return
	}
	l := &failureLog{log: s.log, what: "pod-to-pod read mark",
		failed: "not moved (the store takes no writes?): reads past it are taken all the same; the move is tried at every tick, and this said again at most at doubling intervals until it goes through"}
	s.fed.verifier.KeepMark(ctx, ticks, func(err error) {
		l.note(s.now(), err)
		if moved != nil {
			moved()
		}
	})
}

// StopPodCalls refuses every pod-to-pod call from now on and commits the
// read mark at the last read verified (federation.Verifier.Close). The
// program calls it once its HTTP server has shut down (or given up
// waiting for its calls), before it lets go of its store.
func (s *Server) StopPodCalls(ctx context.Context) error {
	if s.fed == nil {
		return nil
	}
	return s.fed.verifier.Close(ctx)
}

// Handler returns the whole server: the API under /api/v1 and /healthz,
// plus whatever was registered on Mux, wrapped in request ids, logging and
// panic recovery.
func (s *Server) Handler() nethttp.Handler { return s.handler }

// Mux is the ServeMux Handler serves. Other adapters mount their routes
// with Mount, which lists them in Routes.
func (s *Server) Mux() *nethttp.ServeMux { return s.mux }

// Mount registers h at pattern for another adapter (the console at "/",
// Prometheus at "GET /metrics"), before serving; patterns must not
// overlap /api/v1/ or /healthz.
func (s *Server) Mount(pattern string, h nethttp.Handler) {
	s.patterns = append(s.patterns, pattern)
	s.mux.Handle(pattern, h)
}

// Routes lists every pattern the server serves (the API's routes and
// those mounted), in the order registered: a test of every route derives
// its list from here, so a route without an expectation fails it.
func (s *Server) Routes() []string { return slices.Clone(s.patterns) }

// AuditedRoutes lists the API's routes, those of Routes whose requests
// are audited: a refusal of one that names no action of AuditActions is
// recorded under its pattern, an action GET /auditlog?action= filters by
// (R-SEC). A mounted route (Mount) is not among them, nor is one that
// refuses no one (GET /healthz).
func (s *Server) AuditedRoutes() []string { return slices.Clone(s.apiRoutes) }

type ctxKey int

const (
	ctxLogger ctxKey = iota
	ctxState
)

// requestState is what handlers tell the middleware about a request.
type requestState struct {
	// authenticated: the caller proved a credential (an API token, a
	// host's credential, a pod's signature).
	authenticated bool
}

// authenticated notes that r's caller proved a credential: its access
// log line is then never dropped.
func authenticated(r *nethttp.Request) {
	if st, ok := r.Context().Value(ctxState).(*requestState); ok {
		st.authenticated = true
	}
}

// loggerFrom returns the request's logger (with its request id).
func (s *Server) loggerFrom(ctx context.Context) *slog.Logger {
	if l, ok := ctx.Value(ctxLogger).(*slog.Logger); ok {
		return l
	}
	return s.log
}

// validRequestID is the X-Request-Id a caller (a proxy, a load balancer)
// may choose and have kept, so operators can correlate: the id goes into
// log lines, the answer and audit rows, so anything longer or of other
// characters is replaced by an id of our own (R-SEC).
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
			id = vdibroker.RandomHex(8)
		}
		w.Header().Set("X-Request-Id", id)
		log := s.log.With("request_id", id)
		orig := r
		st := &requestState{}
		ctx := vdibroker.WithRequestID(context.WithValue(context.WithValue(r.Context(), ctxLogger, log), ctxState, st), id)
		r = r.WithContext(ctx)
		// Every route's body is bounded (R-SEC: the console's forms had
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
		// The path as a log line keeps it: an anonymous caller chooses it;
		// a secret in it is left out (logPath).
		path := logPath(r.URL.Path)
		defer func() {
			if p := recover(); p != nil {
				if p == nethttp.ErrAbortHandler {
					panic(p)
				}
				log.Error("panic in handler", "panic", p, "method", r.Method, "path", path, "stack", string(debug.Stack()))
				if sw.status == 0 {
					writeError(sw, r, s, errors.New("panic"))
				}
			}
			// Heartbeats that succeed are logged at debug: at 1,000 hosts
			// they would be 8.6 million info lines a day.
			level := slog.LevelInfo
			if r.URL.Path == "/api/v1/agent/heartbeat" && sw.status < 400 {
				level = slog.LevelDebug
			}
			args := []any{"method", r.Method, "path", path, "status", sw.status, "duration", time.Since(start)}
			if !st.authenticated {
				// Callers that proved no credential (refused ones, and
				// health probes, sign-in pages) get a budget of lines; the
				// next line logged says how many were left out.
				dropped, ok := s.refusedLines.take(s.now())
				if !ok {
					return
				}
				if dropped > 0 {
					args = append(args, "refusedLinesDropped", dropped)
				}
			}
			log.Log(r.Context(), level, "request", args...)
		}()
		if err := apiPathSegments(r.URL.EscapedPath()); err != nil {
			writeError(sw, r, s, err)
			return
		}
		next.ServeHTTP(sw, r)
	})
}

// secretPathPrefixes are the paths whose next segment is a secret: a
// portal launch's id (GET /portal/launches/{id}, its /status and /file)
// is the key its .rdp file is sealed with, asked for at every poll of
// the launch's page (R-SEC, R-U7). No API, console, gateway or pod-to-pod
// route carries one: their ids (a session's, a token's, a registration
// token's) name what they act on and open nothing.
var secretPathPrefixes = []string{"/portal/launches/"}

// logPath is p as a log line writes it (R-SEC): the segment after a
// secretPathPrefixes prefix replaced by "{id}", as the route names it
// (/portal/launches/{id}/status), so the log, which operators read and
// ship elsewhere, opens no user's launch; and at most
// vdibroker.MaxAuditField long. The prefix is looked for in the cleaned
// path, as the mux routes it (a path of "//" or "." segments, which it
// redirects, holds the secret all the same).
func logPath(p string) string {
	clean := path.Clean(p)
	for _, prefix := range secretPathPrefixes {
		rest, ok := strings.CutPrefix(clean, prefix)
		if !ok {
			continue
		}
		if _, tail, found := strings.Cut(rest, "/"); found {
			p = prefix + "{id}/" + tail
		} else {
			p = prefix + "{id}"
		}
		break
	}
	return vdibroker.Cut(p, vdibroker.MaxAuditField)
}

// apiPathSegments refuses an API path with a "." or ".." segment, or an
// empty one before its end (R-SEC). The mux would redirect it to the
// cleaned path with a 307, which keeps the method: a client that put a
// name of dots in a path unescaped and followed the redirect acted on
// another resource (DELETE /api/v1/applicationgroups/../hostpools/P
// deleted the pool P). A name of dots escaped (%2E) is a name.
func apiPathSegments(escaped string) error {
	rest, ok := strings.CutPrefix(escaped, "/api/v1/")
	if !ok {
		return nil
	}
	segs := strings.Split(rest, "/")
	for i, seg := range segs {
		if seg == "." || seg == ".." || (seg == "" && i < len(segs)-1) {
			return vdibroker.FieldError("path", "must not hold an empty, \".\" or \"..\" segment (a name of dots is escaped, %%2E), got %q", vdibroker.Cut(escaped, 200))
		}
	}
	return nil
}
