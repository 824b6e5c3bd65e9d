package agent

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"math/rand/v2"
	"net/http"
	"net/url"
	"strings"
	"sync"
	"time"
	"unicode"

	"k8s.io/utils/clock"

	"github.com/vdibroker/vdibroker"
)

// Defaults of Config.
const (
	DefaultHeartbeatInterval = 10 * time.Second
	DefaultSampleInterval    = 30 * time.Second // SPEC §6 sampleIntervalSeconds
	defaultBackoffBase       = time.Second
	defaultBackoffMax        = time.Minute
	// minSampleInterval and maxSampleInterval bound the broker's
	// sampleIntervalSeconds.
	minSampleInterval = time.Second
	maxSampleInterval = time.Hour
	commandTimeout    = 30 * time.Second
	shutdownTimeout   = 5 * time.Second
	// rememberedCommands bounds the ids of commands already carried out, so
	// a command delivered twice runs once.
	rememberedCommands = 1000
	// maxAskedWait bounds a wait the broker asked for (429 or 503 with
	// Retry-After) before a registration or a heartbeat: an agent tries
	// again at least this often while it is told to wait.
	maxAskedWait = 5 * time.Minute
	// maxHeartbeatWait bounds a heartbeat's asked wait tighter: the host
	// is alive only while its heartbeats arrive within its pool's
	// heartbeatTimeoutSeconds (90 s by default, R-H1), so a proxy asking
	// for minutes (the broker asks for seconds) must not keep it silent,
	// and its users' connects refused, longer than an unreachable broker
	// would (the backoff's default bound).
	maxHeartbeatWait = defaultBackoffMax
)

// Config is an agent's configuration. Server, HostName and Address are
// required, and RegistrationToken unless StateDir holds a credential.
type Config struct {
	// Server is the broker's base URL, e.g. http://broker:8080.
	Server            string
	RegistrationToken string
	HostName          string
	// Address is host:port clients connect to.
	Address   string
	Protocols []string // default RDP
	// StandardFeatures is sent as is; nil lets the broker default (true).
	StandardFeatures *bool
	// RemoteApps overrides whether the host says it can run RemoteApps
	// (R-E12); nil says what Sessions knows (RemoteAppsReporter), or
	// nothing.
	RemoteApps *bool
	// StateDir keeps the host credential across restarts (0700, file 0600);
	// empty keeps it in memory only (in-process simulated agents).
	StateDir string

	HeartbeatInterval time.Duration // default 10 s
	// CustomScript is the R-IDX3 load script, run every sample with
	// CustomScriptTimeout (default 10 s).
	CustomScript        string
	CustomScriptTimeout time.Duration
	// CustomLoadRegistry is a registry value holding the R-IDX3 custom
	// load value (HKLM\KEY\VALUE, or "horizon" for Horizon's
	// CustomLoadValue), read every sample; Windows only. With CustomScript
	// too, the script runs first and its output is not used: it writes the
	// value, as Horizon's scripts do.
	CustomLoadRegistry string
	// ReadRegistry reads the registry; the system's when nil.
	ReadRegistry RegistryReader
	// PolicyFile holds the host's own thresholds (R-LI5), re-read every
	// heartbeat; Policy is a fixed policy used when PolicyFile is empty.
	PolicyFile string
	Policy     *vdibroker.HostPolicy

	Metrics  MetricsSource   // default SystemMetrics
	Sessions SessionProvider // default NoSessions

	HTTPClient *http.Client // default: 30 s timeout
	Logger     *slog.Logger // default slog.Default()
	// Rand draws the backoff jitter; seeded from the clock when nil.
	Rand *rand.Rand
	// BackoffBase and BackoffMax bound retry delays (1 s, 1 min).
	BackoffBase, BackoffMax time.Duration
	// Clock times the waits between registrations and between
	// heartbeats (nil: the real clock).
	Clock clock.Clock
}

// Agent is one host's agent. Run it with Run.
type Agent struct {
	cfg      Config
	registry *RegistryValuePath // the custom load value's, if any
	client   *Client
	log      *slog.Logger
	backoff  backoff

	// The heartbeat loop's own state (one goroutine).
	cred         *savedCredential
	results      []vdibroker.CommandResult
	done         map[string]vdibroker.CommandResult
	doneOrder    []string
	lastSessions []vdibroker.AgentSession
	listed       bool // a list of the host's sessions was had since start
	policy       *vdibroker.HostPolicy
	link         string // last logged connection state
	slowWarned   bool   // warned that heartbeats come slower than the timeout

	// Shared with the sampler goroutine.
	mu              sync.Mutex
	metrics         *vdibroker.Metrics
	metricsErr      string
	customValue     *int
	customErr       string
	sampleInterval  time.Duration
	useCustomScript bool
	intervalChanged chan struct{}
}

// New checks cfg and returns an agent.
func New(cfg Config) (*Agent, error) {
	u, err := url.Parse(cfg.Server)
	if err != nil || (u.Scheme != "http" && u.Scheme != "https") || u.Host == "" {
		return nil, vdibroker.FieldError("server", "%q is not an http(s) URL of the broker", cfg.Server)
	}
	if cfg.HostName == "" {
		return nil, vdibroker.FieldError("hostName", "is required")
	}
	if cfg.Address == "" {
		return nil, vdibroker.FieldError("address", "is required (host:port clients connect to)")
	}
	if cfg.RegistrationToken == "" && cfg.StateDir == "" {
		return nil, vdibroker.FieldError("registrationToken", "is required when no state directory holds a credential")
	}
	// Before any registration: an agent that could not read its saved
	// credential back would use the registration token at every start.
	if err := CheckStateDirAccess(cfg.StateDir); err != nil {
		return nil, err
	}
	if cfg.HeartbeatInterval <= 0 {
		cfg.HeartbeatInterval = DefaultHeartbeatInterval
	}
	if cfg.CustomScriptTimeout <= 0 {
		cfg.CustomScriptTimeout = DefaultScriptTimeout
	}
	var registry *RegistryValuePath
	if cfg.CustomLoadRegistry != "" {
		p, err := ParseRegistryValuePath(cfg.CustomLoadRegistry)
		if err != nil {
			return nil, vdibroker.FieldError("customLoadRegistry", "%v", err)
		}
		if cfg.ReadRegistry == nil {
			cfg.ReadRegistry = systemRegistry
		}
		if cfg.ReadRegistry == nil {
			return nil, vdibroker.FieldError("customLoadRegistry", "the registry is Windows only; use a custom load script (--custom-script)")
		}
		registry = &p
	}
	if len(cfg.Protocols) == 0 {
		cfg.Protocols = []string{"RDP"}
	}
	if cfg.Sessions == nil {
		cfg.Sessions = NoSessions{}
	}
	if cfg.HTTPClient == nil {
		cfg.HTTPClient = &http.Client{Timeout: 30 * time.Second}
	}
	if cfg.Logger == nil {
		cfg.Logger = slog.Default()
	}
	if cfg.Metrics == nil {
		cfg.Metrics = &SystemMetrics{Logger: cfg.Logger}
	}
	if x, ok := cfg.Sessions.(*XrdpProvider); ok && x.Logger == nil {
		x.Logger = cfg.Logger
	}
	if u, ok := cfg.Sessions.(*UtmpProvider); ok && u.Logger == nil {
		u.Logger = cfg.Logger
	}
	if cfg.Rand == nil {
		seed := uint64(time.Now().UnixNano())
		cfg.Rand = rand.New(rand.NewPCG(seed, seed>>1))
	}
	if cfg.BackoffBase <= 0 {
		cfg.BackoffBase = defaultBackoffBase
	}
	if cfg.BackoffMax < cfg.BackoffBase {
		cfg.BackoffMax = max(defaultBackoffMax, cfg.BackoffBase)
	}
	if cfg.Clock == nil {
		cfg.Clock = clock.RealClock{}
	}
	return &Agent{
		cfg:             cfg,
		registry:        registry,
		client:          &Client{Server: cfg.Server, HTTP: cfg.HTTPClient},
		log:             cfg.Logger.With("host", cfg.HostName),
		backoff:         backoff{base: cfg.BackoffBase, max: cfg.BackoffMax, rand: cfg.Rand},
		done:            map[string]vdibroker.CommandResult{},
		policy:          cfg.Policy,
		sampleInterval:  DefaultSampleInterval,
		intervalChanged: make(chan struct{}, 1),
	}, nil
}

// Run registers the host (or reuses its saved credential) and heartbeats
// until ctx ends; then it sends a last heartbeat saying it is shutting down
// (R-H1 Shutdown) and returns nil. An unreachable or failing broker is
// retried forever with backoff, a registration or a heartbeat answered 429
// or 503 after its Retry-After (askedWait); Run returns an error only when retrying
// cannot help: the broker refused both the credential and the registration
// token, or refused the registration as invalid.
func (a *Agent) Run(ctx context.Context) error {
	if err := a.register(ctx, false); err != nil {
		if ctx.Err() != nil {
			return nil
		}
		return err
	}

	var wg sync.WaitGroup
	sampled := make(chan struct{})
	sctx, stopSampler := context.WithCancel(ctx)
	wg.Add(1)
	go func() {
		defer wg.Done()
		a.sampleLoop(sctx, sampled)
	}()
	defer wg.Wait()
	defer stopSampler() // before the Wait: the sampler ends with Run
	select {
	case <-sampled:
	case <-ctx.Done():
		return nil
	}

	for {
		delay := a.cfg.HeartbeatInterval
		err := a.heartbeat(ctx, false)
		switch {
		case ctx.Err() != nil:
			a.shutdown(ctx)
			return nil
		case errors.Is(err, errFatal):
			return err
		case askedToWait(err):
			// Told to wait (heartbeats of this host faster than the
			// broker takes them, R-SEC; a broker without its database):
			// its Retry-After, not the backoff's first second, which
			// would come back while the broker still says no; at most
			// maxHeartbeatWait, not a registration's maxAskedWait.
			delay, _ = askedWait(err, &a.backoff)
			delay = min(delay, maxHeartbeatWait)
			if a.link != "waiting" {
				a.link = "waiting"
				a.log.Warn(fmt.Sprintf("broker answered %d to the heartbeat; waiting to heartbeat again", askedStatus(err)),
					"server", a.cfg.Server, "wait", delay.Round(time.Millisecond).String(), "err", err)
			}
		case refused(err):
			// The credential is no longer valid: register again.
			if err := a.register(ctx, true); err != nil {
				if ctx.Err() != nil {
					return nil
				}
				return err
			}
			// Not at once: a broker that keeps refusing fresh credentials
			// must not get a tight register/heartbeat loop.
			delay = a.backoff.next()
		case apiError(err):
			// The broker answered but refused this heartbeat (a bug on one
			// side or the other); keep trying, the results stay queued.
			a.setLink("rejected", "broker rejected the heartbeat; retrying with backoff", err)
			delay = a.backoff.next()
		case err != nil:
			a.setLink("unreachable", "broker unreachable; retrying with backoff", err)
			delay = a.backoff.next()
		default:
			a.setLink("connected", "heartbeating", nil)
			a.backoff.reset()
			if len(a.results) > 0 {
				delay = 0 // report command results at once
			}
		}
		t := a.cfg.Clock.NewTimer(delay)
		select {
		case <-ctx.Done():
			t.Stop()
			a.shutdown(ctx)
			return nil
		case <-t.C():
		}
	}
}

// errFatal marks errors retrying cannot fix.
var errFatal = errors.New("agent stopped")

// setLink logs a change of the connection state once, not every retry.
func (a *Agent) setLink(state, msg string, err error) {
	if a.link == state {
		return
	}
	a.link = state
	if err != nil {
		a.log.Warn(msg, "server", a.cfg.Server, "err", err)
		return
	}
	a.log.Info(msg, "server", a.cfg.Server)
}

// register obtains a credential: the saved one (unless renew), else a new one
// from the registration token, retrying while the broker is unreachable.
func (a *Agent) register(ctx context.Context, renew bool) error {
	if !renew {
		saved, err := loadCredential(a.cfg.StateDir)
		if err != nil {
			a.log.Warn("saved credential unusable; registering again", "err", err)
		}
		if saved != nil && saved.Server == a.cfg.Server && saved.HostName == a.cfg.HostName {
			a.cred = saved
			a.log.Info("using saved credential", "hostPool", saved.HostPool, "stateDir", a.cfg.StateDir)
			return nil
		}
		if saved == nil && a.cred != nil {
			return nil // in-memory credential (no state dir)
		}
	}
	if a.cfg.RegistrationToken == "" {
		if renew {
			return fmt.Errorf("%w: the broker refused the host credential and no registration token is configured (--registration-token)", errFatal)
		}
		return fmt.Errorf("%w: no saved credential in %q and no registration token (--registration-token)", errFatal, a.cfg.StateDir)
	}
	if renew {
		a.log.Warn("broker refused the host credential; registering again with the token")
	}
	retry := backoff{base: a.cfg.BackoffBase, max: a.cfg.BackoffMax, rand: a.cfg.Rand}
	for {
		pol, _ := a.readPolicy()
		resp, err := a.client.Register(ctx, vdibroker.RegisterRequest{
			Token:            a.cfg.RegistrationToken,
			HostName:         a.cfg.HostName,
			Address:          a.cfg.Address,
			Protocols:        a.cfg.Protocols,
			StandardFeatures: a.cfg.StandardFeatures,
			Policy:           pol,
			RemoteApps:       a.remoteApps(),
		})
		if err == nil {
			cred := &savedCredential{Server: a.cfg.Server, HostPool: resp.HostPool, HostName: resp.HostName,
				Credential: resp.Credential, RegisteredAt: time.Now().UTC()}
			if err := saveCredential(a.cfg.StateDir, cred); err != nil {
				// Without the file the next restart needs the token again;
				// keep running with the credential in memory.
				a.log.Error("cannot keep the credential in the state directory", "err", err)
			}
			a.cred = cred
			a.link = "registered" // the next heartbeat logs "heartbeating"
			a.log.Info("host registered", "hostPool", resp.HostPool, "hostName", resp.HostName)
			return nil
		}
		wait, waitingFor := registrationWait(err, &retry)
		switch {
		case waitingFor != "":
			// Told to wait (a token's new hosts past the broker's bound,
			// R-SEC; a broker without its database): one line a wait.
			a.log.Warn(waitingFor, "server", a.cfg.Server, "wait", wait.Round(time.Millisecond).String(), "err", err)
		case apiError(err):
			// The broker answered and said no: the token is invalid or
			// expired, or a field is wrong. Retrying the same call cannot help.
			return fmt.Errorf("%w: %w", errFatal, err)
		default:
			a.setLink("unreachable", "broker unreachable; retrying registration with backoff", err)
		}
		t := a.cfg.Clock.NewTimer(wait)
		select {
		case <-ctx.Done():
			t.Stop()
			return ctx.Err()
		case <-t.C():
		}
	}
}

// registrationWait is how long the agent waits after a registration that
// failed with err before it registers again, and, when the broker asked
// it to wait (429, 503), what it waits for (askedWait); anything else
// waits the backoff's next step (an API refusal other than these is
// fatal: the caller stops).
func registrationWait(err error, retry *backoff) (time.Duration, string) {
	wait, asked := askedWait(err, retry)
	switch {
	case !asked:
		return wait, ""
	case apiError(err):
		return wait, "broker takes no more new hosts of this registration token for now; waiting to register again"
	}
	return wait, fmt.Sprintf("broker answered %d to the registration; waiting to register again", askedStatus(err))
}

// askedWait is how long the agent waits after a call that failed with
// err, and whether the broker (or a proxy before it) asked it to wait: a
// 429 or 503 waits for its Retry-After, or longer as the retry's backoff
// grows (a fleet told to wait together does not come back together), but
// never more than maxAskedWait; anything else the backoff's next step.
func askedWait(err error, retry *backoff) (time.Duration, bool) {
	var e *vdibroker.Error
	var te *transportError
	switch {
	case errors.As(err, &e) && e.Code == vdibroker.ETooManyRequests:
		return min(max(e.RetryAfter, retry.next()), maxAskedWait), true
	case errors.As(err, &te) && (te.status == http.StatusTooManyRequests || te.status == http.StatusServiceUnavailable):
		return min(max(te.retryAfter, retry.next()), maxAskedWait), true
	}
	return retry.next(), false
}

// askedToWait reports whether err is an answer asking the agent to wait:
// the broker's 429, or a 429 or 503 of the broker or a proxy before it.
func askedToWait(err error) bool { return askedStatus(err) != 0 }

// askedStatus is the HTTP status of an answer asking the agent to wait
// (askedToWait), 0 for any other error.
func askedStatus(err error) int {
	var e *vdibroker.Error
	var te *transportError
	switch {
	case errors.As(err, &e) && e.Code == vdibroker.ETooManyRequests:
		return http.StatusTooManyRequests
	case errors.As(err, &te) && (te.status == http.StatusTooManyRequests || te.status == http.StatusServiceUnavailable):
		return te.status
	}
	return 0
}

// heartbeat sends one heartbeat and carries out the commands of the answer.
func (a *Agent) heartbeat(ctx context.Context, shuttingDown bool) error {
	var health []string
	var unknown bool
	sessions, err := a.cfg.Sessions.Sessions(ctx)
	var partial *PartialListError
	switch {
	case errors.As(err, &partial):
		// The sessions listed are right; the ones left out are named.
		health = append(health, partial.Reasons...)
		a.lastSessions = sessions
	case err != nil:
		// Report the last known sessions: an empty list would make the
		// broker end every session of the host (R-S2). Before any list
		// there is none to report: the broker is told so, and keeps the
		// host's sessions as they are.
		health = append(health, err.Error())
		sessions = a.lastSessions
		unknown = !a.listed
	default:
		a.lastSessions = sessions
	}
	if err == nil || partial != nil {
		a.listed = true
	}
	sessions, dropped := acceptable(sessions)
	health = append(health, dropped...)
	pol, err := a.readPolicy()
	if err != nil {
		health = append(health, err.Error())
	}

	a.mu.Lock()
	var m *vdibroker.Metrics
	if a.metrics != nil {
		c := *a.metrics
		m = &c
	}
	if a.metricsErr != "" {
		health = append(health, a.metricsErr)
	}
	if a.customErr != "" {
		health = append(health, a.customErr)
	}
	if a.useCustomScript && a.cfg.CustomScript == "" && a.registry == nil && (m == nil || m.CustomLoadValue == nil) {
		health = append(health, "the pool uses a custom load script but this agent has none (--custom-script or --custom-load-registry)")
	}
	a.mu.Unlock()

	results := a.results
	if results == nil {
		results = []vdibroker.CommandResult{}
	}
	if len(results) > vdibroker.MaxHeartbeatResults {
		results = results[:vdibroker.MaxHeartbeatResults] // the rest go next time
	}
	resp, err := a.client.Heartbeat(ctx, a.cred.Credential, vdibroker.HeartbeatRequest{
		Metrics:         m,
		Sessions:        sessions,
		Policy:          pol,
		Results:         results,
		ShuttingDown:    shuttingDown,
		HealthError:     healthText(health),
		SessionsUnknown: unknown,
		RemoteApps:      a.remoteApps(),
	})
	if err != nil {
		return err
	}
	a.results = a.results[len(results):]
	if shuttingDown {
		return nil
	}
	a.applySettings(resp.Settings)
	for _, c := range resp.Commands {
		a.results = append(a.results, a.execute(ctx, c))
	}
	return nil
}

// shutdown sends the last heartbeat (R-H1 Shutdown), even though ctx ended.
func (a *Agent) shutdown(ctx context.Context) {
	ctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), shutdownTimeout)
	defer cancel()
	if err := a.heartbeat(ctx, true); err != nil {
		a.log.Warn("could not tell the broker the host is shutting down", "err", err)
		return
	}
	a.log.Info("told the broker the host is shutting down")
}

// readPolicy returns the host policy: the file's when configured (the last
// good one if it cannot be read now), else the configured one.
func (a *Agent) readPolicy() (*vdibroker.HostPolicy, error) {
	if a.cfg.PolicyFile == "" {
		return a.policy, nil
	}
	p, err := ReadPolicyFile(a.cfg.PolicyFile)
	if err != nil {
		return a.policy, err
	}
	a.policy = p
	return p, nil
}

func (a *Agent) applySettings(s vdibroker.AgentSettings) {
	if t := time.Duration(s.HeartbeatTimeoutSeconds) * time.Second; t > 0 && a.cfg.HeartbeatInterval >= t && !a.slowWarned {
		// Every heartbeat would arrive after the host was already declared
		// Unavailable (R-H1).
		a.slowWarned = true
		a.log.Warn("heartbeat interval is not under the pool's heartbeatTimeoutSeconds; the host will flap to Unavailable",
			"heartbeatInterval", a.cfg.HeartbeatInterval, "heartbeatTimeout", t)
	}
	a.mu.Lock()
	defer a.mu.Unlock()
	a.useCustomScript = s.UseCustomScript
	if s.SampleIntervalSeconds <= 0 {
		return
	}
	// Pools allow 5 s to 1 h (R-IDX); bounded before the multiplication,
	// which overflows for large numbers, so that no answer makes the agent
	// sample in a tight loop.
	secs := min(max(s.SampleIntervalSeconds, int(minSampleInterval/time.Second)), int(maxSampleInterval/time.Second))
	if d := time.Duration(secs) * time.Second; d != a.sampleInterval {
		a.sampleInterval = d
		select {
		case a.intervalChanged <- struct{}{}:
		default:
		}
	}
}

// sampleLoop samples metrics every sample interval; the first sample is
// signalled on first so the first heartbeat carries metrics.
func (a *Agent) sampleLoop(ctx context.Context, first chan<- struct{}) {
	a.sample(ctx)
	close(first)
	for {
		a.mu.Lock()
		d := a.sampleInterval
		a.mu.Unlock()
		t := time.NewTimer(d)
		select {
		case <-ctx.Done():
			t.Stop()
			return
		case <-a.intervalChanged:
			t.Stop()
		case <-t.C:
			a.sample(ctx)
		}
	}
}

// sample takes one metrics sample and the custom load value (R-IDX3).
func (a *Agent) sample(ctx context.Context) {
	m, err := a.cfg.Metrics.Sample(ctx)
	custom, keepPrevious, customErr := a.customLoad(ctx)
	if ctx.Err() != nil {
		return
	}
	a.mu.Lock()
	defer a.mu.Unlock()
	if err != nil {
		// Keep the last sample; its age tells the broker it is stale.
		a.metricsErr = "metrics: " + err.Error()
	} else {
		a.metricsErr = ""
		a.metrics = &m
	}
	if a.cfg.CustomScript == "" && a.registry == nil {
		return
	}
	if !keepPrevious {
		a.customValue = custom // nil: no value (R-IDX3)
	}
	a.customErr = ""
	if customErr != nil {
		a.customErr = customErr.Error()
	}
	if a.metrics != nil {
		a.metrics.CustomLoadValue = a.customValue
	}
}

// customLoad finds the custom load value (R-IDX3): the script's output, or
// the registry value (after running the script, which writes it, when there
// is one). The error says why there is no value or what else failed;
// keepPrevious is set when the script timed out and its output is all
// there is, so the previous value stays. With the registry, the value a
// timed-out script left there is read, stale, as Horizon reads it.
func (a *Agent) customLoad(ctx context.Context) (v *int, keepPrevious bool, err error) {
	if a.registry == nil {
		if a.cfg.CustomScript == "" {
			return nil, false, nil
		}
		v, err = RunCustomScript(ctx, a.cfg.CustomScript, a.cfg.CustomScriptTimeout)
		return v, errors.Is(err, ErrScriptTimeout), err
	}
	var scriptErr error
	if a.cfg.CustomScript != "" {
		scriptErr = RunLoadScript(ctx, a.cfg.CustomScript, a.cfg.CustomScriptTimeout)
	}
	v, err = readRegistryLoad(ctx, a.cfg.ReadRegistry, *a.registry)
	switch {
	case scriptErr != nil && err != nil:
		err = fmt.Errorf("%w; %w", scriptErr, err)
	case scriptErr != nil:
		err = scriptErr
	}
	return v, false, err
}

// execute carries out one command; every command gets a result (R-S4).
func (a *Agent) execute(ctx context.Context, c vdibroker.Command) vdibroker.CommandResult {
	if r, ok := a.done[c.ID]; ok {
		return r // delivered again: report, do not run twice
	}
	r := a.run(ctx, c)
	r.Message = healthText([]string{r.Message}) // within what the broker accepts
	a.done[c.ID] = r
	a.doneOrder = append(a.doneOrder, c.ID)
	if len(a.doneOrder) > rememberedCommands {
		delete(a.done, a.doneOrder[0])
		a.doneOrder = a.doneOrder[1:]
	}
	if r.Success {
		a.log.Info("command done", "id", c.ID, "type", c.Type, "session", c.AgentSessionID, "user", c.User)
	} else {
		a.log.Warn("command failed", "id", c.ID, "type", c.Type, "session", c.AgentSessionID, "user", c.User, "reason", r.Message)
	}
	return r
}

func (a *Agent) run(ctx context.Context, c vdibroker.Command) vdibroker.CommandResult {
	fail := func(format string, args ...any) vdibroker.CommandResult {
		return vdibroker.CommandResult{ID: c.ID, Message: fmt.Sprintf(format, args...)}
	}
	switch c.Type {
	case vdibroker.CommandLogoff, vdibroker.CommandDisconnect, vdibroker.CommandSendMessage:
	default:
		return fail("unknown command type %q", c.Type)
	}
	id := c.AgentSessionID
	if id == "" {
		for _, s := range a.lastSessions {
			if sameUser(s.User, c.User) {
				id = s.ID
				break
			}
		}
	}
	if id == "" {
		if c.Type == vdibroker.CommandLogoff {
			return vdibroker.CommandResult{ID: c.ID, Success: true, Message: fmt.Sprintf("user %q has no session on this host; nothing to log off", c.User)}
		}
		return fail("user %q has no session on this host", c.User)
	}
	ctx, cancel := context.WithTimeout(ctx, commandTimeout)
	defer cancel()
	var err error
	switch c.Type {
	case vdibroker.CommandLogoff:
		err = a.cfg.Sessions.Logoff(ctx, id)
		if errors.Is(err, ErrNoSession) {
			return vdibroker.CommandResult{ID: c.ID, Success: true, Message: fmt.Sprintf("session %q already ended", id)}
		}
	case vdibroker.CommandDisconnect:
		err = a.cfg.Sessions.Disconnect(ctx, id)
	case vdibroker.CommandSendMessage:
		err = a.cfg.Sessions.SendMessage(ctx, id, c.Message)
	}
	if err != nil {
		return fail("%s", err)
	}
	return vdibroker.CommandResult{ID: c.ID, Success: true}
}

// acceptable keeps the sessions the broker accepts (SPEC §9: id, user, state
// Active or Disconnected): one bad entry must not get every heartbeat of the
// host refused. Each dropped entry is a health error.
func acceptable(list []vdibroker.AgentSession) (ok []vdibroker.AgentSession, dropped []string) {
	ok = make([]vdibroker.AgentSession, 0, len(list))
	for _, s := range list {
		if err := vdibroker.ValidateHeartbeat(&vdibroker.HeartbeatRequest{Sessions: []vdibroker.AgentSession{s}}); err != nil {
			dropped = append(dropped, fmt.Sprintf("session %q of user %q not reported: %s", s.ID, s.User, vdibroker.ErrorMessage(err)))
			continue
		}
		ok = append(ok, s)
	}
	return ok, dropped
}

// maxHealthText is the broker's limit on healthError (vdibroker.MaxTextLen).
const maxHealthText = vdibroker.MaxTextLen

// healthText joins the failed checks into one line the broker accepts: no
// control characters (script stderr may have newlines), at most
// maxHealthText characters.
func healthText(checks []string) string {
	s := strings.Map(func(r rune) rune {
		if unicode.IsControl(r) {
			return ' '
		}
		return r
	}, strings.Join(checks, "; "))
	if r := []rune(s); len(r) > maxHealthText {
		s = string(r[:maxHealthText-1]) + "…"
	}
	return s
}

// remoteApps is what the host says about running RemoteApps (R-E12):
// the administrator's override, else its sessions provider's word, else
// nothing (the broker keeps Unknown, and places applications there as
// before). Sent in every heartbeat too, so a host whose agent was
// updated or reconfigured tells the broker without registering again.
func (a *Agent) remoteApps() *bool {
	if a.cfg.RemoteApps != nil {
		v := *a.cfg.RemoteApps
		return &v
	}
	if r, ok := a.cfg.Sessions.(RemoteAppsReporter); ok {
		v := r.RemoteApps()
		return &v
	}
	return nil
}
