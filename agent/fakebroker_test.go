package agent

import (
	"context"
	"encoding/json"
	"fmt"
	"io"
	"log/slog"
	"math/rand/v2"
	"net/http"
	"net/http/httptest"
	"sync"
	"testing"
	"time"

	"github.com/vdibroker/vdibroker"
)

// fakeBroker answers the two agent calls of SPEC §9 like the broker does,
// and lets a test make it fail, revoke credentials and queue commands.
type fakeBroker struct {
	srv *httptest.Server

	mu            sync.Mutex
	tokenValid    bool
	credentials   map[string]bool // valid credentials
	registrations []vdibroker.RegisterRequest
	heartbeats    []vdibroker.HeartbeatRequest
	heartbeatCred []string
	failNext      int // answer this many calls (of any kind) with 503
	// throttle, when set, answers every registration 429 TooManyRequests
	// with this Retry-After, as the broker past a token's new hosts.
	throttle      string
	registerCalls int // registrations received, answered or not
	// heartbeatStatus, when set (429 or 503), answers every heartbeat
	// so, with Retry-After heartbeatRetryAfter: 429 TooManyRequests as
	// the broker past a host's heartbeat bound, 503 as a proxy before a
	// broker without its database.
	heartbeatStatus     int
	heartbeatRetryAfter string
	heartbeatCalls      int // heartbeats received, answered or not
	commands            []vdibroker.Command
	settings            vdibroker.AgentSettings
	nextCred            int
}

func newFakeBroker(tb testing.TB) *fakeBroker {
	tb.Helper()
	b := &fakeBroker{tokenValid: true, credentials: map[string]bool{}, settings: vdibroker.AgentSettings{SampleIntervalSeconds: 30, HeartbeatTimeoutSeconds: 90}}
	mux := http.NewServeMux()
	mux.HandleFunc("POST /api/v1/agent/register", b.register)
	mux.HandleFunc("POST /api/v1/agent/heartbeat", b.heartbeat)
	b.srv = httptest.NewServer(mux)
	tb.Cleanup(b.srv.Close)
	return b
}

func writeError(w http.ResponseWriter, code, msg string) {
	w.Header().Set("Content-Type", "application/json")
	w.WriteHeader(vdibroker.HTTPStatus(code))
	json.NewEncoder(w).Encode(map[string]any{"error": vdibroker.Error{Code: code, Message: msg}})
}

func (b *fakeBroker) failing(w http.ResponseWriter) bool {
	if b.failNext > 0 {
		b.failNext--
		http.Error(w, "upstream down", http.StatusServiceUnavailable)
		return true
	}
	return false
}

func (b *fakeBroker) register(w http.ResponseWriter, r *http.Request) {
	b.mu.Lock()
	defer b.mu.Unlock()
	b.registerCalls++
	if b.failing(w) {
		return
	}
	if b.throttle != "" {
		w.Header().Set("Retry-After", b.throttle)
		writeError(w, vdibroker.ETooManyRequests, "registration token registers new session hosts faster than the broker takes them")
		return
	}
	var req vdibroker.RegisterRequest
	if err := json.NewDecoder(r.Body).Decode(&req); err != nil {
		writeError(w, vdibroker.EInvalid, err.Error())
		return
	}
	if !b.tokenValid || req.Token != "good-token" {
		writeError(w, vdibroker.EUnauthenticated, "registration token is invalid or expired")
		return
	}
	b.registrations = append(b.registrations, req)
	b.nextCred++
	cred := fmt.Sprintf("cred-%d", b.nextCred)
	b.credentials[cred] = true
	w.Header().Set("Content-Type", "application/json")
	w.WriteHeader(http.StatusCreated)
	json.NewEncoder(w).Encode(vdibroker.RegisterResponse{HostPool: "pool1", HostName: req.HostName, Credential: cred})
}

func (b *fakeBroker) heartbeat(w http.ResponseWriter, r *http.Request) {
	b.mu.Lock()
	defer b.mu.Unlock()
	b.heartbeatCalls++
	if b.failing(w) {
		return
	}
	switch b.heartbeatStatus {
	case http.StatusTooManyRequests:
		w.Header().Set("Retry-After", b.heartbeatRetryAfter)
		writeError(w, vdibroker.ETooManyRequests, "heartbeats of this session host come faster than the broker takes them")
		return
	case http.StatusServiceUnavailable:
		w.Header().Set("Retry-After", b.heartbeatRetryAfter)
		http.Error(w, "store unavailable", http.StatusServiceUnavailable)
		return
	}
	cred := r.Header.Get("Authorization")
	if len(cred) < 7 || !b.credentials[cred[7:]] {
		writeError(w, vdibroker.EUnauthenticated, "host credential is not valid")
		return
	}
	var req vdibroker.HeartbeatRequest
	dec := json.NewDecoder(r.Body)
	dec.DisallowUnknownFields()
	if err := dec.Decode(&req); err != nil {
		writeError(w, vdibroker.EInvalid, err.Error())
		return
	}
	b.heartbeats = append(b.heartbeats, req)
	b.heartbeatCred = append(b.heartbeatCred, cred[7:])
	cmds := b.commands
	b.commands = nil
	json.NewEncoder(w).Encode(vdibroker.HeartbeatResponse{Commands: append([]vdibroker.Command{}, cmds...), Settings: b.settings})
}

// locked runs f under the broker's lock.
func (b *fakeBroker) locked(f func()) {
	b.mu.Lock()
	defer b.mu.Unlock()
	f()
}

func (b *fakeBroker) heartbeatCount() int {
	b.mu.Lock()
	defer b.mu.Unlock()
	return len(b.heartbeats)
}

// results is every command result the heartbeats carried, in order.
func (b *fakeBroker) results() []vdibroker.CommandResult {
	b.mu.Lock()
	defer b.mu.Unlock()
	var out []vdibroker.CommandResult
	for _, h := range b.heartbeats {
		out = append(out, h.Results...)
	}
	return out
}

func (b *fakeBroker) lastHeartbeat() vdibroker.HeartbeatRequest {
	b.mu.Lock()
	defer b.mu.Unlock()
	return b.heartbeats[len(b.heartbeats)-1]
}

// staticMetrics is a MetricsSource with a fixed answer that counts calls.
type staticMetrics struct {
	mu    sync.Mutex
	calls int
	m     vdibroker.Metrics
}

func (s *staticMetrics) Sample(ctx context.Context) (vdibroker.Metrics, error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.calls++
	m := s.m
	m.SampledAt = time.Now()
	return m, nil
}

func (s *staticMetrics) count() int {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.calls
}

// newTestAgent fills what a test leaves out: fast heartbeats and backoff, a
// quiet logger, fixed metrics, a seeded random source.
func newTestAgent(tb testing.TB, cfg Config) *Agent {
	tb.Helper()
	if cfg.HostName == "" {
		cfg.HostName = "host-01"
	}
	if cfg.Address == "" {
		cfg.Address = "10.0.0.1:3389"
	}
	if cfg.RegistrationToken == "" {
		cfg.RegistrationToken = "good-token"
	}
	if cfg.HeartbeatInterval == 0 {
		cfg.HeartbeatInterval = 10 * time.Millisecond
	}
	if cfg.BackoffBase == 0 {
		cfg.BackoffBase, cfg.BackoffMax = time.Millisecond, 5*time.Millisecond
	}
	if cfg.Metrics == nil {
		cfg.Metrics = &staticMetrics{m: vdibroker.Metrics{CPUPercent: 12.5, MemoryPercent: 40}}
	}
	if cfg.Logger == nil {
		cfg.Logger = slog.New(slog.NewTextHandler(io.Discard, nil))
	}
	cfg.Rand = rand.New(rand.NewPCG(1, 2))
	a, err := New(cfg)
	if err != nil {
		tb.Fatal(err)
	}
	return a
}

// start runs the agent until the test ends or stop is called; stop returns
// Run's result.
func start(tb testing.TB, a *Agent) (stop func() error) {
	tb.Helper()
	ctx, cancel := context.WithCancel(context.Background())
	ch := make(chan error, 1)
	go func() { ch <- a.Run(ctx) }()
	var once sync.Once
	var err error
	stop = func() error {
		once.Do(func() {
			cancel()
			err = <-ch
		})
		return err
	}
	tb.Cleanup(func() { stop() })
	return stop
}
