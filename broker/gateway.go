package broker

import (
	"context"
	"crypto/ed25519"
	"crypto/hmac"
	"crypto/rand"
	"crypto/sha256"
	"encoding/hex"
	"fmt"
	"slices"
	"strings"
	"sync"
	"time"

	"github.com/vdibroker/vdibroker"
	"github.com/vdibroker/vdibroker/broker/outage"
	"github.com/vdibroker/vdibroker/broker/poolview"
	"github.com/vdibroker/vdibroker/gatewaytoken"
	"github.com/vdibroker/vdibroker/placement"
	"github.com/vdibroker/vdibroker/power"
	"github.com/vdibroker/vdibroker/rdp"
)

// The broker's side of its RD gateways (docs/gateway.md): it signs an
// access token into each connect answer of a pool that goes through a
// gateway (R-GW1), keeps the signing keys in the store for every replica
// and rotates them (R-GW6), and takes the gateways' tunnel reports:
// admitting each token id once (R-GW4), turning the session Active when
// its tunnel reaches the host (R-GW2) and Disconnected when it closes
// (R-GW3).

// GatewayConfig is the broker's gateway settings (serve --gateway-*).
type GatewayConfig struct {
	// HostName is the server's RD gateway as clients reach it (host or
	// host:port): the gateway of every pool whose gatewayUsage is
	// Gateway and that names none of its own. Empty: the server has none.
	HostName string
	// TokenTTL is how long an access token may open its tunnel after the
	// connect (0 = 5 minutes; at most gatewaytoken.MaxValidity).
	TokenTTL time.Duration
	// KeyRotation is how often a new signing key is made (0 = 30 days).
	KeyRotation time.Duration
	// PublishDelay is how long a new key is published before it signs,
	// so every gateway has read it (0 = 5 minutes; gateways read the
	// keys every minute by default).
	PublishDelay time.Duration
	// MaxTunnelsPerUser bounds the tunnels one user holds open through
	// all gateways together (0 = 10; negative: no bound).
	MaxTunnelsPerUser int
}

// Defaults and bounds of the gateway side.
const (
	DefaultGatewayKeyRotation       = 30 * 24 * time.Hour
	DefaultGatewayPublishDelay      = 5 * time.Minute
	DefaultGatewayMaxTunnelsPerUser = 10
	// MaxGatewayKeysRefresh is the longest a gateway reading the keys
	// from the broker may wait between reads (4 minutes): a new key signs
	// DefaultGatewayPublishDelay after it was made, and a replica
	// publishes it up to gatewayKeysTTL later (its copy of the keys); the
	// rest is room for the read itself.
	MaxGatewayKeysRefresh = DefaultGatewayPublishDelay - gatewayKeysTTL - 30*time.Second
	// gatewayKeysKept is how many signing keys the store keeps: the one
	// waiting to sign, the signing one and the one before, whose tokens
	// may still be in the hands of clients.
	gatewayKeysKept = 3
	// gatewayKeysTTL is how long a replica uses the keys it read before
	// reading them again (another replica may have rotated).
	gatewayKeysTTL = 30 * time.Second
	// lateTunnelClose is how long after a tunnel's close (its report's
	// At, the gateway's clock) a report of it is late: three of an
	// agent's heartbeats, and more than a gateway's first try and its
	// first try again (15 s) with clocks a few seconds apart.
	lateTunnelClose = 30 * time.Second
	// tunnelLifetime is how long an admitted tunnel counts for its user
	// when its close never comes (a gateway that died): the gateway's
	// default --max-lifetime.
	tunnelLifetime = 24 * time.Hour
	// tunnelPruneBatch bounds one maintenance tick's prune of tunnel
	// records.
	tunnelPruneBatch = 5000
	// maxOutageAdmits bounds the token ids a replica admits in memory
	// while its store is down.
	maxOutageAdmits = 100_000
)

// gatewaySide is the Service's gateway state.
type gatewaySide struct {
	cfg GatewayConfig

	loading sync.Mutex // held while the keys are read from the store
	mu      sync.Mutex
	keys    []vdibroker.GatewayKey // newest first; nil until first read
	readAt  time.Time
	// outageAdmits are the token ids admitted in memory during a store
	// outage, with their expiry (R-GW4's exception, R-OUT1).
	outageAdmits map[string]time.Time
	// gateways are the Gateway tokens this replica authenticated lately,
	// by hash: while the store is down they still authenticate, so the
	// gateways' reports go on (R-GW4, R-OUT1).
	gateways map[string]knownToken
	// warned is when the broker last warned of a credential a gateway
	// reports with (gatewayName), by token id.
	warned map[string]time.Time
}

// knownToken is a Gateway token as last authenticated from the store.
type knownToken struct {
	p      *vdibroker.Principal
	seen   time.Time
	expire *time.Time
}

// Bounds of the Gateway tokens kept for an outage: how long after their
// last check against the store, and how many.
const (
	knownGatewayTTL = 15 * time.Minute
	maxKnownGateway = 1000
)

func (g *gatewaySide) rememberGateway(hash string, p *vdibroker.Principal, expire *time.Time, now time.Time) {
	g.mu.Lock()
	defer g.mu.Unlock()
	if g.gateways == nil || len(g.gateways) >= maxKnownGateway {
		g.gateways = map[string]knownToken{}
	}
	g.gateways[hash] = knownToken{p: p, seen: now, expire: expire}
}

// knownGateway returns the Gateway token of hash if this replica checked
// it against the store within knownGatewayTTL and it has not expired.
func (g *gatewaySide) knownGateway(hash string, now time.Time) *vdibroker.Principal {
	g.mu.Lock()
	defer g.mu.Unlock()
	k, ok := g.gateways[hash]
	if !ok || now.Sub(k.seen) > knownGatewayTTL || (k.expire != nil && !now.Before(*k.expire)) {
		return nil
	}
	return k.p
}

// forgetGateway drops a revoked token.
func (g *gatewaySide) forgetGateway(id string) {
	g.mu.Lock()
	defer g.mu.Unlock()
	for h, k := range g.gateways {
		if k.p.TokenID == id {
			delete(g.gateways, h)
		}
	}
}

func newGatewaySide(cfg GatewayConfig) *gatewaySide {
	if cfg.TokenTTL <= 0 {
		cfg.TokenTTL = vdibroker.DefaultGatewayTokenTTL
	}
	cfg.TokenTTL = min(cfg.TokenTTL, gatewaytoken.MaxValidity)
	if cfg.KeyRotation <= 0 {
		cfg.KeyRotation = DefaultGatewayKeyRotation
	}
	if cfg.PublishDelay <= 0 {
		cfg.PublishDelay = DefaultGatewayPublishDelay
	}
	if cfg.MaxTunnelsPerUser == 0 {
		cfg.MaxTunnelsPerUser = DefaultGatewayMaxTunnelsPerUser
	}
	return &gatewaySide{cfg: cfg}
}

var _ vdibroker.GatewayService = (*Service)(nil)

// gatewayKeys returns the signing keys, newest first, read again when the
// copy is older than gatewayKeysTTL (or fresh is set and it is older than
// a second); with none in the store, it makes the first.
func (s *Service) gatewayKeys(ctx context.Context, fresh bool) ([]vdibroker.GatewayKey, error) {
	g := s.gw
	now := s.now()
	g.mu.Lock()
	keys, age := g.keys, now.Sub(g.readAt)
	g.mu.Unlock()
	if len(keys) > 0 && age < gatewayKeysTTL && (!fresh || age < time.Second) {
		return keys, nil
	}
	// One read at a time: the keys are public (GET /gateway/keys), and a
	// burst of anonymous requests must not become a burst of reads.
	if !g.loading.TryLock() {
		if len(keys) > 0 {
			return keys, nil
		}
		g.loading.Lock()
	}
	defer g.loading.Unlock()
	stored, err := s.store.GatewayKeys(ctx)
	if err != nil {
		if len(keys) > 0 && outage.IsStoreDown(err) {
			return keys, nil // the keys in hand sign and check during an outage
		}
		return nil, err
	}
	keys = stored
	if len(keys) == 0 {
		// The first key: signs at once, as no gateway can hold an older one.
		if _, err := s.addGatewayKey(ctx, time.Unix(0, 0)); err != nil {
			return nil, err
		}
		if keys, err = s.store.GatewayKeys(ctx); err != nil {
			return nil, err
		}
	}
	g.mu.Lock()
	g.keys, g.readAt = keys, now
	g.mu.Unlock()
	return keys, nil
}

// addGatewayKey makes a new signing key and stores it unless one newer
// than notBefore exists (another replica rotated first).
func (s *Service) addGatewayKey(ctx context.Context, notBefore time.Time) (bool, error) {
	return s.addGatewayKeyKeeping(ctx, notBefore, gatewayKeysKept)
}

// addGatewayKeyKeeping is addGatewayKey keeping the newest kept keys.
func (s *Service) addGatewayKeyKeeping(ctx context.Context, notBefore time.Time, kept int) (bool, error) {
	_, priv, err := ed25519.GenerateKey(rand.Reader)
	if err != nil {
		return false, err
	}
	now := s.now().UTC()
	k := vdibroker.GatewayKey{ID: "k" + now.Format("20060102T150405") + "-" + vdibroker.RandomHex(3), Seed: priv.Seed(), CreateTime: now}
	added, err := s.store.AddGatewayKey(ctx, k, notBefore, kept)
	if added {
		s.log.Info("new gateway token signing key", "kid", k.ID)
	}
	return added, err
}

// signingKey is the key tokens are signed with at now: the newest key
// published for PublishDelay, else the oldest (at first start the only
// one).
func (g *gatewaySide) signingKey(keys []vdibroker.GatewayKey, now time.Time) vdibroker.GatewayKey {
	for _, k := range keys {
		if !k.CreateTime.Add(g.cfg.PublishDelay).After(now) {
			return k
		}
	}
	return keys[len(keys)-1]
}

// tokenIDKey is the key that binds a token id to its claims: derived from
// the signing key, so every replica holds it and it rotates with it.
func tokenIDKey(k vdibroker.GatewayKey) []byte {
	m := hmac.New(sha256.New, k.Seed)
	m.Write([]byte("vdibroker gateway token id"))
	return m.Sum(nil)
}

// tokenIDMAC is the half of a token id that proves the broker issued it
// for these claims: the gateway's reports carry the id and the claims, so
// a report names a token the broker issued for that user, session, pool,
// host and expiry, or it is refused.
func tokenIDMAC(key []byte, nonce, user, session, pool, host string, expiry int64) string {
	m := hmac.New(sha256.New, key)
	for _, f := range []string{nonce, user, session, pool, host, fmt.Sprint(expiry)} {
		m.Write([]byte(f))
		m.Write([]byte{0})
	}
	return hex.EncodeToString(m.Sum(nil)[:16])
}

// issued reports whether r names a token this broker issued: its id's MAC
// checks with one of the keys for the report's claims.
func (s *Service) issued(ctx context.Context, r *vdibroker.TunnelReport) (bool, error) {
	if len(r.TokenID) != 64 {
		return false, nil
	}
	nonce, mac := r.TokenID[:32], r.TokenID[32:]
	for _, fresh := range []bool{false, true} {
		keys, err := s.gatewayKeys(ctx, fresh)
		if err != nil {
			return false, err
		}
		for _, k := range keys {
			want := tokenIDMAC(tokenIDKey(k), nonce, r.User, r.Session, r.Pool, r.Host, r.Expiry.Unix())
			if hmac.Equal([]byte(want), []byte(mac)) {
				return true, nil
			}
		}
	}
	return false, nil
}

// gatewayAnswer sends a connect's answer through the pool's gateway, if
// it has one (R-GW1): the gateway's .rdp lines and, for a session, an
// access token for its host signed now, with the pool's tunnel limits and,
// while the host starts, how long the gateway should wait for it (R-GW5).
func (s *Service) gatewayAnswer(ctx context.Context, pool *vdibroker.HostPool, a *vdibroker.ConnectAnswer, wait time.Duration) error {
	gw := vdibroker.GatewayHostFor(pool, s.gw.cfg.HostName)
	if gw == "" || a == nil {
		return nil
	}
	token := ""
	if a.SessionID != "" {
		keys, err := s.gatewayKeys(ctx, false)
		if err != nil {
			return fmt.Errorf("gateway access token: %w", err)
		}
		now := s.now()
		k := s.gw.signingKey(keys, now)
		signer, err := gatewaytoken.NewSigner(k.ID, ed25519.NewKeyFromSeed(k.Seed))
		if err != nil {
			return fmt.Errorf("gateway key %s: %w", k.ID, err)
		}
		c := gatewaytoken.Claims{User: a.User, Session: a.SessionID, Pool: a.HostPool, Host: a.Address,
			NotBefore: now.Unix(), Expiry: now.Add(s.gw.cfg.TokenTTL).Unix(),
			IdleSeconds:      int64(pool.IdleSessionLimitMinutes) * 60,
			LifetimeSeconds:  int64(pool.ActiveSessionLimitMinutes) * 60,
			StartWaitSeconds: int64(wait / time.Second)}
		nonce := vdibroker.RandomHex(16)
		c.ID = nonce + tokenIDMAC(tokenIDKey(k), nonce, c.User, c.Session, c.Pool, c.Host, c.Expiry)
		if token, err = signer.Sign(c); err != nil {
			return fmt.Errorf("sign gateway access token: %w", err)
		}
	}
	a.RDPFile = rdp.WithGateway(a.RDPFile, gw, token)
	a.Gateway = gw
	return nil
}

// waitForStart is start VM on connect through a gateway (R-GW5): when the
// connect that found no capacity (d's record) started host for the user,
// or the user's own host is starting, and the pool goes through a
// gateway, the user gets a Pending session on that host now and a token
// that asks the gateway to hold the client until the host's RDP port
// answers, instead of 503 HostStarting and a connect again later. Nil
// when that cannot be: no gateway, no such host or address, a personal
// host not yet the user's (its first assignment waits for a connect to a
// running host), an open session of the user elsewhere, or a commit the
// store refused; the caller answers HostStarting then.
func (s *Service) waitForStart(ctx context.Context, v *poolview.View, pool *vdibroker.HostPool, req vdibroker.ConnectRequest,
	d placement.Decision, existing *vdibroker.UserSession, host string) *vdibroker.ConnectAnswer {
	if host == "" || existing != nil || vdibroker.GatewayHostFor(pool, s.gw.cfg.HostName) == "" {
		return nil
	}
	h, addr, ok := v.Host(host)
	personal := pool.HostPoolType == vdibroker.Personal
	if !ok || addr == "" || (personal && !slices.Contains(h.AssignedUsers, req.User)) {
		return nil
	}
	now := s.now().UTC()
	rec := d.Explain
	rec.Chosen, rec.StartedOnConnect, rec.Time = host, true, now
	record := placement.AppendRecord(nil, &rec)
	sess := &vdibroker.UserSession{ID: vdibroker.NewID(), User: req.User, HostPool: pool.Name, SessionHost: host,
		State: vdibroker.StatePending, CreateTime: now, StateTime: now}
	c := &vdibroker.PlacementCommit{Session: sess, MaxSessionLimit: v.LimitFor(pool, host), Pooled: !personal,
		Record: record, PoolUpdateTime: pool.UpdateTime}
	if err := s.store.CommitPlacement(ctx, c); err != nil {
		s.log.InfoContext(ctx, "start VM on connect: no session on the starting host; answering HostStarting", "pool", pool.Name, "host", host, "err", err)
		return nil
	}
	// The view did not reserve this host (it takes no sessions until its
	// agent heartbeats): its counts come from the store.
	s.views.RefreshHost(ctx, pool.Name, host)
	v.RememberUser(req.User, sess)
	s.power.Unwait(pool.Name, req.User)
	s.log.InfoContext(ctx, "start VM on connect: the user waits at the gateway", "pool", pool.Name, "host", host, "user", req.User)
	a := &vdibroker.ConnectAnswer{ConnectResponse: s.answer(pool, req, host, addr), Created: true,
		StartWait: min(pool.PendingTimeout(), power.StartTimeout)}
	a.SessionID, a.State = sess.ID, sess.State
	return a
}

// GatewayKeys returns the JWKS document of the signing keys (R-GW6).
func (s *Service) GatewayKeys(ctx context.Context) ([]byte, error) {
	keys, err := s.gatewayKeys(ctx, false)
	if err != nil {
		return nil, err
	}
	pub := make(map[string]ed25519.PublicKey, len(keys))
	for _, k := range keys {
		pub[k.ID] = ed25519.NewKeyFromSeed(k.Seed).Public().(ed25519.PublicKey)
	}
	return gatewaytoken.MarshalJWKS(pub)
}

// RotateGatewayKey adds a signing key now (the admin token only); it
// signs after the publish delay (R-GW6). With revoke it is the only key
// kept: the store drops the others, so it is the one this replica signs
// with at once, and every replica and gateway from its next read of the
// keys (30 s and --keys-refresh at most).
func (s *Service) RotateGatewayKey(ctx context.Context, revoke bool) error {
	if err := vdibroker.Authorize(vdibroker.PrincipalFrom(ctx), vdibroker.ActionManageTokens, vdibroker.Target{Global: "rotate the gateway signing key"}); err != nil {
		return err
	}
	kept := gatewayKeysKept
	if revoke {
		kept = 1
	}
	if _, err := s.addGatewayKeyKeeping(ctx, time.Time{}, kept); err != nil {
		return err
	}
	if revoke {
		s.log.Warn("gateway signing keys revoked: one new key signs at once; tunnels opened with the others are closed at their gateway's next check")
	}
	// Read them again after any read under way, which may predate the
	// new key: it is published here at once, and revoked keys never sign
	// one more token here.
	g := s.gw
	g.loading.Lock()
	defer g.loading.Unlock()
	keys, err := s.store.GatewayKeys(ctx)
	if err != nil {
		return err
	}
	g.mu.Lock()
	g.keys, g.readAt = keys, s.now()
	g.mu.Unlock()
	return nil
}

// gatewayMaintain is the gateway side's share of a maintenance tick: a
// new signing key when the newest is KeyRotation old (replicas that see it
// due at once add one key between them), and the prune of tunnel records
// no longer needed. Nothing happens before the keys were first used.
func (s *Service) gatewayMaintain(ctx context.Context) {
	g := s.gw
	g.mu.Lock()
	keys := g.keys
	g.mu.Unlock()
	if len(keys) == 0 {
		return
	}
	now := s.now()
	if due := keys[0].CreateTime.Add(g.cfg.KeyRotation); !now.Before(due) {
		if _, err := s.addGatewayKey(ctx, now.Add(-g.cfg.KeyRotation)); err != nil {
			s.log.Error("rotate the gateway signing key", "err", err)
		} else if _, err := s.gatewayKeys(ctx, true); err != nil {
			s.log.Error("read the gateway signing keys", "err", err)
		}
	}
	if _, err := s.store.PruneGatewayTunnels(ctx, now, tunnelPruneBatch); err != nil && !outage.IsStoreDown(err) {
		s.log.Error("prune gateway tunnel records", "err", err)
	}
	g.mu.Lock()
	for id, exp := range g.outageAdmits {
		if now.After(exp) {
			delete(g.outageAdmits, id)
		}
	}
	g.mu.Unlock()
}

// checkReport is what every report passes first: well formed, from a
// principal that may report for its pool (R-GW4), under the name of the
// gateway its credential is for, naming a token this broker issued.
func (s *Service) checkReport(ctx context.Context, r *vdibroker.TunnelReport) error {
	if err := vdibroker.ValidateTunnelReport(r); err != nil {
		return err
	}
	if err := vdibroker.Authorize(vdibroker.PrincipalFrom(ctx), vdibroker.ActionGatewayReport, vdibroker.Target{HostPool: r.Pool}); err != nil {
		return err
	}
	name, _, err := s.gatewayName(ctx, r.Gateway)
	if err != nil {
		return err
	}
	r.Gateway = name
	ok, err := s.issued(ctx, r)
	if err != nil {
		return err
	}
	if !ok {
		return vdibroker.Errorf(vdibroker.ENotFound, "token %s is not an access token this broker issued for user %q, session %q of host pool %q and host %s",
			cutID(r.TokenID), r.User, r.Session, r.Pool, r.Host)
	}
	return nil
}

// gatewayName is the name a gateway's report or check is taken under
// (R-GW4): a Gateway token's own gateway, whose name is the credential's,
// not the report's, so that one gateway's token cannot report as another
// (admitted through it, reached a session through it, checking its
// tunnels). A report naming another gateway is refused, 403 on the field
// gateway, and changes nothing; one naming it in other case, or with a
// trailing dot or without one (vdibroker.SameGateway, as host names
// compare), is taken under the token's spelling, and one naming none (a gateway given no
// --name) under the token's name too. Three callers still name
// themselves (a report naming none: the subject): a
// Gateway token issued before tokens had a gateway (an upgrade must not
// cut its gateways off), the admin token (it may do anything anyway),
// and the gateway serve runs in-process (no principal). For the first
// two it answers a warning too, which the broker logs once an hour per
// token and a check's answer carries to the gateway.
func (s *Service) gatewayName(ctx context.Context, reported string) (name, warning string, err error) {
	p := vdibroker.PrincipalFrom(ctx)
	switch {
	case p == nil:
		return reported, "", nil
	case p.Role == vdibroker.RoleGateway && p.Gateway != "":
		if reported != "" && !vdibroker.SameGateway(reported, p.Gateway) {
			return "", "", &vdibroker.Error{Code: vdibroker.EPermission, Field: "gateway",
				Message: fmt.Sprintf("gateway: this Gateway token is for gateway %q, not %q: start that gateway with --name %q, or give this one a token of its own (vdibroker token create --role Gateway --subject %q)",
					p.Gateway, cutText(reported), p.Gateway, cutText(reported))}
		}
		return p.Gateway, "", nil
	case p.Role == vdibroker.RoleGateway:
		warning = fmt.Sprintf("Gateway token %s is for no gateway in particular (issued before tokens named theirs): the broker takes the name each report gives, so whoever holds it may report as any gateway; give each gateway a token of its own (vdibroker token create --role Gateway --subject NAME, NAME its --name), then delete this one (vdibroker token delete --id %s)", p.TokenID, p.TokenID)
	case p.Role == vdibroker.RoleAdmin:
		warning = "the admin token, which may do anything, is this gateway's credential: give it a Gateway token, which may only report tunnels (vdibroker token create --role Gateway --subject NAME, NAME its --name), in --broker-token-file and send it SIGHUP"
	default:
		return reported, "", nil
	}
	if reported == "" {
		// A gateway that leaves naming itself to its credential, with
		// one that names none: its subject.
		reported = p.Subject
	}
	if s.gw.warnOnce(p.Actor(), s.now()) {
		s.log.Warn("gateway credential: "+warning, "gateway", cutText(reported))
	}
	return reported, warning, nil
}

// warnedEvery bounds the broker's warnings about a gateway's credential
// (gatewayName): once an hour per token, at most maxKnownGateway tokens.
const warnedEvery = time.Hour

// warnOnce reports whether the warning about the credential key should
// be logged now: not if it was within warnedEvery.
func (g *gatewaySide) warnOnce(key string, now time.Time) bool {
	g.mu.Lock()
	defer g.mu.Unlock()
	if at, ok := g.warned[key]; ok && now.Sub(at) < warnedEvery {
		return false
	}
	if g.warned == nil || len(g.warned) >= maxKnownGateway {
		g.warned = map[string]time.Time{}
	}
	g.warned[key] = now
	return true
}

// cutID shortens a token id from outside for a message.
func cutID(id string) string {
	if len(id) > 16 {
		return id[:16] + "..."
	}
	return id
}

// TunnelOpen admits a tunnel (R-GW4).
func (s *Service) TunnelOpen(ctx context.Context, r *vdibroker.TunnelReport) error {
	if err := s.checkReport(ctx, r); err != nil {
		s.gatewayRefused(ctx, vdibroker.TunnelOpen, r, err)
		return err
	}
	now := s.now()
	if now.After(r.Expiry.Add(gatewaytoken.Leeway)) {
		// The gateway checks the window; a report of an old token is
		// refused all the same, as its id may be pruned already.
		err := vdibroker.Errorf(vdibroker.ENotFound, "token %s expired at %s", cutID(r.TokenID), r.Expiry.UTC().Format(time.RFC3339))
		s.gatewayRefused(ctx, vdibroker.TunnelOpen, r, err)
		return err
	}
	t := &vdibroker.GatewayTunnel{TokenID: r.TokenID, User: r.User, HostPool: r.Pool, Session: r.Session, Gateway: r.Gateway,
		Open: now, Expiry: tunnelRecordExpiry(r), LiveUntil: now.Add(tunnelLifetime)}
	err := s.store.AdmitGatewayTunnel(s.gatewayAudit(ctx, "gateway.tunnel.open", r, now), t, max(s.gw.cfg.MaxTunnelsPerUser, 0), now)
	if outage.IsStoreDown(err) {
		err = s.gw.admitInMemory(r.TokenID, t.Expiry, now)
		if err == nil {
			s.log.Warn("store down: gateway tunnel admitted by this replica alone", "tokenId", cutID(r.TokenID), "user", r.User, "session", r.Session)
		}
	}
	if err != nil {
		s.gatewayRefused(ctx, vdibroker.TunnelOpen, r, err)
		return err
	}
	s.log.Info("gateway tunnel admitted", "gateway", r.Gateway, "user", r.User, "pool", r.Pool, "session", r.Session, "host", r.Host, "client", r.Client)
	return nil
}

// tunnelRecordExpiry is when the record of a tunnel of report r's token
// expires: it is pruned after, once its tunnel is closed.
func tunnelRecordExpiry(r *vdibroker.TunnelReport) time.Time {
	return r.Expiry.Add(gatewaytoken.Leeway + time.Minute)
}

// admitInMemory admits a token id once on this replica while the store
// is down (R-OUT1): a user the broker answered may still reach their host.
// Across replicas an id may then open two tunnels, for the same user,
// session and host, within the token's minutes.
func (g *gatewaySide) admitInMemory(id string, expiry, now time.Time) error {
	g.mu.Lock()
	defer g.mu.Unlock()
	if g.outageAdmits == nil {
		g.outageAdmits = map[string]time.Time{}
	}
	if _, ok := g.outageAdmits[id]; ok {
		return vdibroker.ErrTokenUsed
	}
	if len(g.outageAdmits) >= maxOutageAdmits {
		return vdibroker.Errorf(vdibroker.EStoreUnavailable, "the store is down and this replica holds %d admitted tunnels already", len(g.outageAdmits))
	}
	g.outageAdmits[id] = expiry
	return nil
}

// TunnelChannel records that a tunnel reached its host (R-GW2).
func (s *Service) TunnelChannel(ctx context.Context, r *vdibroker.TunnelReport) error {
	if err := s.checkReport(ctx, r); err != nil {
		s.gatewayRefused(ctx, vdibroker.TunnelChannel, r, err)
		return err
	}
	now := s.now()
	u, err := s.store.GatewayReached(s.gatewayAudit(ctx, "gateway.tunnel.reached", r, now), r.Pool, r.Session, r.TokenID, r.Gateway, now)
	if err != nil {
		s.gatewayRefused(ctx, vdibroker.TunnelChannel, r, err)
		return err
	}
	if u.Open() {
		s.views.Get(r.Pool).RememberUser(r.User, u)
	}
	s.log.Info("gateway tunnel reached its host", "gateway", r.Gateway, "user", r.User, "pool", r.Pool, "session", r.Session, "state", u.State)
	return nil
}

// TunnelClose records the end of a tunnel (R-GW3).
func (s *Service) TunnelClose(ctx context.Context, r *vdibroker.TunnelReport) error {
	if err := s.checkReport(ctx, r); err != nil {
		s.gatewayRefused(ctx, vdibroker.TunnelClose, r, err)
		return err
	}
	now := s.now()
	// A close reported lateTunnelClose or more after it happened (the
	// gateway's report sent again after the broker did not take it)
	// records the tunnel's end but leaves the session to its agent's
	// reports (R-GW3).
	late := lateClose(r)
	u, err := s.store.GatewayClosed(s.gatewayAudit(ctx, "gateway.tunnel.close", r, now), r.Pool, r.Session, r.TokenID, r.Gateway, now, late)
	if vdibroker.ErrorCode(err) == vdibroker.ENotFound && now.After(tunnelRecordExpiry(r)) {
		// A token this broker issued whose record may be pruned: the
		// tunnel was closed (a gateway sends a close again when it got
		// no answer, R-GW3), or never stored (admitted in a replica's
		// memory while the store was down). Nothing is left to close,
		// and it is no refusal: a 404 would be counted and logged by
		// the gateway, and audited here, as a close refused.
		s.log.Info("gateway tunnel close of a tunnel no longer recorded: nothing to change", "gateway", r.Gateway,
			"pool", r.Pool, "session", r.Session, "tokenId", cutID(r.TokenID))
		return nil
	}
	if err != nil {
		s.gatewayRefused(ctx, vdibroker.TunnelClose, r, err)
		return err
	}
	if u.Open() {
		s.views.Get(r.Pool).RememberUser(r.User, u)
	}
	s.log.Info("gateway tunnel closed", "gateway", r.Gateway, "user", r.User, "pool", r.Pool, "session", r.Session, "state", u.State,
		"reason", r.Reason, "bytesToHost", r.BytesToHost, "bytesToClient", r.BytesToClient)
	return nil
}

// lateClose reports whether the close r reports was sent lateTunnelClose
// or more after it happened (R-GW3). Both times are the gateway's clock
// when it says when it sent it (SentAt): measured against the broker's,
// a gateway whose clock is behind had every close late, and no tunnel's
// close moved a session; one ahead had a close sent again after an
// outage moved it. A report without SentAt is a gateway's of an earlier
// release, which sends each close once, when the tunnel ends, and never
// again: it is not late (measured by the broker's clock, a gateway whose
// clock ran 30 s behind had every close late, and left every session to
// its agent's report).
func lateClose(r *vdibroker.TunnelReport) bool {
	if r.At.IsZero() || r.SentAt.IsZero() {
		return false
	}
	return r.SentAt.Sub(r.At) >= lateTunnelClose
}

// gatewayAudit returns ctx carrying the audit entry of a report, written
// with the change it records: who reported (the gateway's token, or the
// gateway in-process), the client's address, the report.
func (s *Service) gatewayAudit(ctx context.Context, action string, r *vdibroker.TunnelReport, now time.Time) context.Context {
	return vdibroker.WithAudit(ctx, s.gatewayEntry(ctx, action, r, now))
}

func (s *Service) gatewayEntry(ctx context.Context, action string, r *vdibroker.TunnelReport, now time.Time) *vdibroker.AuditEntry {
	who := vdibroker.AuditPrincipal{Kind: vdibroker.PrincipalGateway, ID: r.Gateway}
	if p := vdibroker.PrincipalFrom(ctx); p != nil {
		who = p.Audit()
	}
	return &vdibroker.AuditEntry{Time: now.UTC(), Principal: who, RemoteAddr: r.Client, Action: action,
		Target: "hostpools/" + r.Pool + "/usersessions/" + r.Session, HostPool: r.Pool}
}

// gatewayRefused audits a refused report, and logs it when its entry is
// written whole. The refusals a gateway can be made to send are caused by
// its clients, whoever they are, and not bounded by the connects the
// broker answered; so they are counted per client address in the bounded
// refusal audit of callers without a credential (R-SEC), whatever the
// gateway's own credential: a window writes at most 2 × RefusalsPerWindow
// + 1 entries for every gateway together, and one client's flood becomes
// one summary entry.
func (s *Service) gatewayRefused(ctx context.Context, kind string, r *vdibroker.TunnelReport, err error) {
	code := vdibroker.ErrorCode(err)
	if code == vdibroker.EStoreUnavailable || code == vdibroker.EInternal {
		return
	}
	e := s.gatewayEntry(ctx, "gateway.tunnel."+kind, r, s.now())
	e.Error = code + ": " + vdibroker.ErrorMessage(err)
	written, aerr := s.recordRefusal(ctx, &s.refusals, e)
	if aerr != nil && !outage.IsStoreDown(aerr) {
		s.log.Error("audit a refused gateway report", "err", aerr)
	}
	if written {
		s.log.Warn("gateway report refused", "kind", kind, "gateway", cutText(r.Gateway), "user", cutText(r.User),
			"session", cutText(r.Session), "client", cutText(r.Client), "err", err)
	}
}

// cutText shortens a string from outside for a log line.
func cutText(s string) string {
	if len(s) > 64 {
		return s[:64] + "..."
	}
	return strings.ToValidUTF8(s, "?")
}

// CheckTunnels answers a gateway's periodic check of its open tunnels
// (R-GW4): the token ids among them that may go on. A tunnel goes on when
// its report names a token this broker issued, in a pool the caller may
// report for, admitted through this gateway, not closed, and its session
// is open and the token's user's; every other one is left out, so a
// gateway learns nothing of sessions it holds no tunnel of. A tunnel this
// replica admitted in memory while the store was down is written to the
// store now, as its admission would have been. The records of the
// tunnels that go on are renewed: one held open past tunnelLifetime is
// not pruned, and still counts for its user.
func (s *Service) CheckTunnels(ctx context.Context, c *vdibroker.TunnelCheck) (*vdibroker.TunnelCheckAnswer, error) {
	if err := vdibroker.ValidateTunnelCheck(c); err != nil {
		return nil, err
	}
	name, warning, err := s.gatewayName(ctx, c.Gateway)
	if err != nil {
		return nil, err
	}
	c.Gateway = name
	p := vdibroker.PrincipalFrom(ctx)
	now := s.now()
	ask := make([]vdibroker.GatewayTunnel, 0, len(c.Tunnels))
	for i := range c.Tunnels {
		r := &c.Tunnels[i]
		if vdibroker.Authorize(p, vdibroker.ActionGatewayReport, vdibroker.Target{HostPool: r.Pool}) != nil {
			continue
		}
		ok, err := s.issued(ctx, r)
		if err != nil {
			return nil, err
		}
		if ok {
			ask = append(ask, vdibroker.GatewayTunnel{TokenID: r.TokenID, User: r.User, HostPool: r.Pool, Session: r.Session,
				Gateway: c.Gateway, Open: now, Expiry: tunnelRecordExpiry(r), LiveUntil: now.Add(tunnelLifetime)})
		}
	}
	live, err := s.store.LiveGatewayTunnels(ctx, c.Gateway, ask, now.Add(tunnelLifetime/2), now.Add(tunnelLifetime))
	if err != nil {
		return nil, err
	}
	if len(live) < len(ask) {
		live = s.gw.adoptOutageAdmits(ctx, s, ask, live, now)
	}
	if live == nil {
		live = []string{} // "open": [], not null, which gateways take for no answer
	}
	if len(live) < len(c.Tunnels) {
		s.log.Info("gateway tunnels checked", "gateway", cutText(c.Gateway), "tunnels", len(c.Tunnels), "goOn", len(live))
	}
	a := &vdibroker.TunnelCheckAnswer{Open: live, Gateway: name}
	if warning != "" {
		a.Warnings = []string{warning}
	}
	return a, nil
}

// adoptOutageAdmits writes to the store the tunnels of ask, not in live,
// that this replica admitted in memory while the store was down, and
// returns live with those the store took (their session still open).
func (g *gatewaySide) adoptOutageAdmits(ctx context.Context, s *Service, ask []vdibroker.GatewayTunnel, live []string, now time.Time) []string {
	for i := range ask {
		t := &ask[i]
		g.mu.Lock()
		_, mine := g.outageAdmits[t.TokenID]
		g.mu.Unlock()
		if !mine || slices.Contains(live, t.TokenID) {
			continue
		}
		if err := s.store.AdmitGatewayTunnel(ctx, t, 0, now); err != nil {
			if !outage.IsStoreDown(err) {
				g.mu.Lock()
				delete(g.outageAdmits, t.TokenID)
				g.mu.Unlock()
			}
			continue
		}
		g.mu.Lock()
		delete(g.outageAdmits, t.TokenID)
		g.mu.Unlock()
		live = append(live, t.TokenID)
	}
	return live
}
