// Package identity signs people in with OpenID Connect: the
// authorization code flow with PKCE, state and nonce for the console, and
// the verification of an identity provider's ID tokens (and JWT access
// tokens) presented to the API as bearer tokens. A role map turns the
// groups claim into a vdibroker role and host-pool scope.
//
// Tokens are verified with github.com/coreos/go-oidc (signature against the
// issuer's published keys, issuer, audience = the client id, expiry)
// with a key set of our own that fetches the keys at most once per
// KeyRefresh (keyset.go); the code exchange is golang.org/x/oauth2's. The
// browser's side of a sign-in, for any area of the site, is Flow
// (flow.go).
package identity

import (
	"cmp"
	"context"
	"crypto/rand"
	"encoding/base64"
	"errors"
	"fmt"
	"net"
	"net/http"
	"net/url"
	"os"
	"slices"
	"strings"
	"sync/atomic"
	"time"
	"unicode/utf8"

	"github.com/coreos/go-oidc/v3/oidc"
	jose "github.com/go-jose/go-jose/v4"
	"github.com/goccy/go-yaml"
	"golang.org/x/oauth2"

	"github.com/vdibroker/vdibroker"
)

// Config configures a Provider.
type Config struct {
	// Issuer is the provider's issuer URL (its discovery document is at
	// Issuer + "/.well-known/openid-configuration").
	Issuer       string
	ClientID     string
	ClientSecret string
	// GroupsClaim is the claim holding the user's groups (default "groups").
	GroupsClaim string
	Roles       RoleMap
	// Now is the clock tokens' expiry is checked against (nil: time.Now).
	Now func() time.Time
	// HTTPClient reaches the provider (nil: a client whose calls end
	// after Timeout); New bounds what it reads of each answer
	// (MaxProviderAnswerBytes).
	HTTPClient *http.Client
	// Timeout bounds each call to the provider when HTTPClient is nil
	// (0: DefaultProviderTimeout).
	Timeout time.Duration
}

// DefaultProviderTimeout bounds each call to the identity provider (its
// discovery document, its keys, a sign-in's token exchange): a provider
// that accepts and never answers would otherwise hold serve's start, and
// each sign-in's callback, for good (R-SEC).
const DefaultProviderTimeout = 30 * time.Second

// unanswered says, of a call to the provider that timed out, that the
// provider did not answer within the client's timeout. net/http words
// such an error either way ("Client.Timeout exceeded ..." or only
// "context deadline exceeded"), so the admin reading serve's refusal to
// start is told in one form what happened and which bound it was.
func unanswered(err error, timeout time.Duration) error {
	var ne net.Error // context.DeadlineExceeded is one too
	if !errors.As(err, &ne) || !ne.Timeout() {
		return err
	}
	if timeout <= 0 {
		return fmt.Errorf("no answer in time: %w", err)
	}
	return fmt.Errorf("no answer within %s: %w", timeout, err)
}

// RoleMap maps groups to roles: the file of serve --oidc-role-map.
//
//	groups:
//	  vdi-admins:   {role: Contributor}
//	  pool-a-ops:   {role: Contributor, hostPools: [pool-a]}
//	  helpdesk:     {role: Reader}
//	  pool-a-users: {role: User, hostPools: [pool-a]}
type RoleMap struct {
	Groups map[string]Grant `yaml:"groups" json:"groups"`
}

// Grant is a role, scoped to host pools (none: every pool).
type Grant struct {
	Role      string   `yaml:"role" json:"role"`
	HostPools []string `yaml:"hostPools" json:"hostPools"`
}

// LoadRoleMap reads and checks a role map file.
func LoadRoleMap(path string) (RoleMap, error) {
	var m RoleMap
	b, err := os.ReadFile(path)
	if err != nil {
		return m, err
	}
	if err := yaml.UnmarshalWithOptions(b, &m, yaml.Strict()); err != nil {
		return m, fmt.Errorf("%s: %w", path, err)
	}
	for g, gr := range m.Groups {
		switch gr.Role {
		case vdibroker.RoleReader, vdibroker.RoleHelpdesk, vdibroker.RoleContributor, vdibroker.RoleUser:
		default:
			return m, fmt.Errorf("%s: group %q: role must be Reader, Helpdesk, Contributor or User, got %q", path, g, gr.Role)
		}
		for _, p := range gr.HostPools {
			if err := vdibroker.ValidateName("hostPools", p, vdibroker.MinPoolNameLen, vdibroker.MaxPoolNameLen); err != nil {
				return m, fmt.Errorf("%s: group %q: %v", path, g, err)
			}
		}
	}
	return m, nil
}

// roleRank orders roles: the strongest of a user's groups wins.
var roleRank = map[string]int{vdibroker.RoleUser: 1, vdibroker.RoleReader: 2, vdibroker.RoleHelpdesk: 3, vdibroker.RoleContributor: 4}

// Resolve returns the role and scope of a user in groups: the strongest
// role any group grants, scoped to the union of the host pools of the
// groups granting it (every pool if one of them is unscoped). ok is false
// when no group is mapped.
func (m RoleMap) Resolve(groups []string) (role string, pools []string, ok bool) {
	unscoped := false
	for _, g := range groups {
		gr, found := m.Groups[g]
		if !found {
			continue
		}
		switch {
		case roleRank[gr.Role] > roleRank[role]:
			role, pools, unscoped = gr.Role, nil, false
		case gr.Role != role:
			continue
		}
		if len(gr.HostPools) == 0 {
			unscoped = true
		}
		pools = append(pools, gr.HostPools...)
	}
	if role == "" {
		return "", nil, false
	}
	if unscoped {
		return role, nil, true
	}
	slices.Sort(pools)
	return role, slices.Compact(pools), true
}

// Identity is a verified user.
type Identity struct {
	Subject   string
	Name      string // preferred_username, email or name, for display
	Role      string
	HostPools []string
	Expiry    time.Time
	Groups    []string
}

// Provider is a configured OpenID provider.
type Provider struct {
	cfg      Config
	keys     *keySet
	verifier *oidc.IDTokenVerifier
	oauth    oauth2.Config
	// roles is the role map in force: SetRoles replaces it (serve reads
	// the file again on SIGHUP).
	roles atomic.Pointer[RoleMap]
	// endSession is the provider's end_session_endpoint ("" when it
	// offers none): signing out ends the provider's session too.
	endSession string
}

// discovery is what the provider's discovery document says beyond what
// go-oidc reads.
type discovery struct {
	JWKSURL    string   `json:"jwks_uri"`
	Algs       []string `json:"id_token_signing_alg_values_supported"`
	EndSession string   `json:"end_session_endpoint"`
}

// New discovers the provider and returns it.
func New(ctx context.Context, cfg Config) (*Provider, error) {
	if cfg.Issuer == "" || cfg.ClientID == "" {
		return nil, errors.New("oidc: the issuer and the client id are required")
	}
	if cfg.GroupsClaim == "" {
		cfg.GroupsClaim = "groups"
	}
	if cfg.Now == nil {
		cfg.Now = time.Now
	}
	if cfg.HTTPClient == nil {
		cfg.HTTPClient = &http.Client{Timeout: cmp.Or(cfg.Timeout, DefaultProviderTimeout)}
	}
	// go-oidc reads the discovery document whole, however large.
	cfg.HTTPClient = bounded(cfg.HTTPClient, MaxProviderAnswerBytes)
	ctx = oidc.ClientContext(ctx, cfg.HTTPClient)
	p, err := oidc.NewProvider(ctx, cfg.Issuer)
	if err != nil {
		return nil, fmt.Errorf("oidc: discover %s: %w", cfg.Issuer, unanswered(err, cfg.HTTPClient.Timeout))
	}
	var d discovery
	if err := p.Claims(&d); err != nil || d.JWKSURL == "" {
		return nil, fmt.Errorf("oidc: discover %s: no jwks_uri (%v)", cfg.Issuer, err)
	}
	if d.EndSession != "" {
		if u, err := url.Parse(d.EndSession); err != nil || (u.Scheme != "https" && u.Scheme != "http") || u.Host == "" {
			return nil, fmt.Errorf("oidc: discover %s: end_session_endpoint %q is not an http(s) URL", cfg.Issuer, d.EndSession)
		}
	}
	keys := &keySet{url: d.JWKSURL, client: cfg.HTTPClient, now: cfg.Now}
	if _, err := keys.refresh(ctx); err != nil {
		return nil, fmt.Errorf("oidc: %s: %w", cfg.Issuer, unanswered(err, cfg.HTTPClient.Timeout))
	}
	var algs []string
	for _, a := range d.Algs {
		if slices.Contains(signingAlgs, jose.SignatureAlgorithm(a)) {
			algs = append(algs, a)
		}
	}
	pr := &Provider{
		cfg:        cfg,
		keys:       keys,
		verifier:   oidc.NewVerifier(cfg.Issuer, keys, &oidc.Config{ClientID: cfg.ClientID, Now: cfg.Now, SupportedSigningAlgs: algs}),
		endSession: d.EndSession,
		oauth: oauth2.Config{ClientID: cfg.ClientID, ClientSecret: cfg.ClientSecret, Endpoint: p.Endpoint(),
			Scopes: []string{oidc.ScopeOpenID, "profile", "email"}},
	}
	pr.roles.Store(&cfg.Roles)
	return pr, nil
}

// SetRoles puts m in force for the tokens verified from now on (serve's
// SIGHUP); a session already open keeps its role until it ends.
func (p *Provider) SetRoles(m RoleMap) { p.roles.Store(&m) }

// EndSessionURL returns where to send a browser to end its session at the
// provider too (OpenID Connect RP-Initiated Logout 1.0): the provider's
// end_session_endpoint with id_token_hint, client_id and, when set,
// post_logout_redirect_uri, which must be registered at the provider. It
// is "" when the provider offers no end_session_endpoint.
func (p *Provider) EndSessionURL(idTokenHint, postLogoutRedirect string) string {
	if p.endSession == "" {
		return ""
	}
	u, _ := url.Parse(p.endSession) // checked by New
	q := u.Query()
	q.Set("client_id", p.cfg.ClientID)
	if idTokenHint != "" {
		q.Set("id_token_hint", idTokenHint)
	}
	if postLogoutRedirect != "" {
		q.Set("post_logout_redirect_uri", postLogoutRedirect)
	}
	u.RawQuery = q.Encode()
	return u.String()
}

// Issuer returns the issuer URL.
func (p *Provider) Issuer() string { return p.cfg.Issuer }

// LooksLikeJWT reports whether a bearer token is a compact JWS (three
// base64url parts), which vdibroker's own tokens never are.
func LooksLikeJWT(tok string) bool {
	return strings.Count(tok, ".") == 2 && !strings.HasPrefix(tok, "vdb")
}

// Verify checks a raw ID token (or JWT access token whose audience is the
// client id): signature against the issuer's keys, issuer, audience and
// expiry; then maps its groups to a role. A user none of whose groups is
// mapped is refused (PermissionDenied).
func (p *Provider) Verify(ctx context.Context, raw string) (*Identity, error) {
	id, _, err := p.verify(ctx, raw, false)
	return id, err
}

// VerifyUser checks a raw ID token as Verify does, without the role map:
// any identity the provider vouches for is an end user (RoleUser,
// unscoped), its groups carried for its entitlements (the user portal,
// R-U2).
func (p *Provider) VerifyUser(ctx context.Context, raw string) (*Identity, error) {
	id, _, err := p.verify(ctx, raw, true)
	return id, err
}

// verify checks raw; endUser makes the identity a User whatever its
// groups (VerifyUser), else its role comes from the role map.
func (p *Provider) verify(ctx context.Context, raw string, endUser bool) (*Identity, *oidc.IDToken, error) {
	ctx = oidc.ClientContext(ctx, p.cfg.HTTPClient)
	tok, err := p.verifier.Verify(ctx, raw)
	if err != nil {
		return nil, nil, vdibroker.Errorf(vdibroker.EUnauthenticated, "invalid OIDC token: %v", err)
	}
	claims := map[string]any{}
	if err := tok.Claims(&claims); err != nil {
		return nil, nil, vdibroker.Errorf(vdibroker.EUnauthenticated, "invalid OIDC token claims: %v", err)
	}
	id := &Identity{Subject: tok.Subject, Expiry: tok.Expiry}
	for _, k := range []string{"preferred_username", "email", "name"} {
		if s, ok := claims[k].(string); ok && s != "" {
			id.Name = s
			break
		}
	}
	if id.Subject == "" {
		return nil, nil, vdibroker.Errorf(vdibroker.EUnauthenticated, "invalid OIDC token: no subject")
	}
	// The subject is the principal's name in audit entries, the console,
	// the CLI and a drained host's record: no control characters, as an
	// API token's subject (R-SEC).
	if vdibroker.ValidateUser("sub", id.Subject) != nil {
		return nil, nil, vdibroker.Errorf(vdibroker.EUnauthenticated, "invalid OIDC token: its sub claim %q must be 1..%d characters without control characters or white space at its ends", vdibroker.Cut(id.Subject, 64), vdibroker.MaxUserLen)
	}
	claim := claims[p.cfg.GroupsClaim]
	if endUser {
		groups, err := claimGroups(p.cfg.GroupsClaim, claim)
		if err != nil {
			return nil, nil, err
		}
		id.Role, id.Groups = vdibroker.RoleUser, groups
		return id, tok, nil
	}
	// The role comes from all the claim's groups, whatever their number
	// and order; only an end user's groups go on to decide what she may
	// use (R-E6), so only hers are bounded: an administrator in hundreds
	// of directory groups (the role map's Reader, Helpdesk, Contributor)
	// is asked for no assignment (R-E3) and signs in as before.
	all := stringList(claim)
	role, pools, ok := p.roles.Load().Resolve(all)
	if !ok {
		return nil, nil, vdibroker.Errorf(vdibroker.EPermission, "no role is mapped to the groups of %s (claim %q: %s)", id.Subject, p.cfg.GroupsClaim, quoteGroups(all))
	}
	id.Role, id.HostPools = role, pools
	if role == vdibroker.RoleUser {
		groups, err := claimGroups(p.cfg.GroupsClaim, claim)
		if err != nil {
			return nil, nil, err
		}
		id.Groups = groups
		return id, tok, nil
	}
	id.Groups = boundedGroups(all)
	return id, tok, nil
}

// boundedGroups are an administrator's groups as its principal carries
// them: the names a group may have (vdibroker.ValidateUser), at most
// vdibroker.MaxGroups. They decide nothing (its role is resolved from
// all of them, and it is asked for no assignment, R-E3); bounded as an
// end user's, no name or number of them reaches a request at size.
func boundedGroups(all []string) []string {
	var out []string
	for _, g := range all {
		if len(out) == vdibroker.MaxGroups {
			break
		}
		if vdibroker.ValidateUser("group", g) == nil {
			out = append(out, g)
		}
	}
	return out
}

// claimGroups are an end user's groups from a token's groups claim
// (named claim; the portal's identities, and the role map's Users),
// bounded as a User token's are (R-E6): at most vdibroker.MaxGroups
// entries, each a name the API takes for a group (1..vdibroker.MaxUserLen
// characters, no control characters, no white space at its ends). A
// claim beyond either is refused (PermissionDenied), the identity
// signed in nowhere, with what the provider sent and what to change
// there: keeping the first groups would give her entitlements that
// depend on the order the provider lists them in, and thousands of
// groups or huge names would reach every session, log line and
// entitlement check of hers. Entra ID puts at most 200 groups in a
// token (more: an overage claim and none), so a tenant never meets the
// bound.
func claimGroups(claim string, v any) ([]string, error) {
	if list, ok := v.([]any); ok && len(list) > vdibroker.MaxGroups {
		return nil, vdibroker.Errorf(vdibroker.EPermission,
			"the identity provider sent %d groups in the %q claim; at most %d are taken: have it send only the groups the broker's role map and assignments name (a groups filter, or the groups assigned to the application)",
			len(list), claim, vdibroker.MaxGroups)
	}
	groups := stringList(v)
	for i, g := range groups {
		if vdibroker.ValidateUser(claim, g) != nil {
			return nil, vdibroker.Errorf(vdibroker.EPermission,
				"the identity provider sent a group name the broker does not take in the %q claim (group %d, %q, %d characters): a group name is 1..%d characters without control characters or white space at its ends",
				claim, i+1, vdibroker.Cut(g, 64), utf8.RuneCountInString(g), vdibroker.MaxUserLen)
		}
	}
	return groups, nil
}

// maxQuotedGroups bounds the groups a refusal quotes.
const maxQuotedGroups = 10

// quoteGroups quotes groups for a refusal: the first maxQuotedGroups,
// each cut to 64 bytes (vdibroker.Cut), then how many more, so that a
// refusal of a user in hundreds of groups, or of huge names, stays a
// line.
func quoteGroups(groups []string) string {
	more := max(len(groups)-maxQuotedGroups, 0)
	quoted := make([]string, 0, len(groups)-more)
	for _, g := range groups[:len(groups)-more] {
		quoted = append(quoted, vdibroker.Cut(g, 64))
	}
	if more == 0 {
		return fmt.Sprintf("%q", quoted)
	}
	return fmt.Sprintf("%q and %d more", quoted, more)
}

// stringList reads a claim that is a list of strings (or one string).
func stringList(v any) []string {
	switch v := v.(type) {
	case string:
		return []string{v}
	case []any:
		var out []string
		for _, x := range v {
			if s, ok := x.(string); ok {
				out = append(out, s)
			}
		}
		return out
	}
	return nil
}

// MaxIDTokenBytes bounds the ID token a web sign-in takes (R-SEC): the
// console and the portal keep it whole, as their credential for the API
// and the id_token_hint of their sign-out, sealed in the sign-in's
// web_sessions row and in each replica's copy for an outage; without a
// bound its size was the provider's choice (up to the megabyte the token
// endpoint's answer may hold), and an administrator in thousands of
// directory groups (the role map takes them all) stored 100 KB and more
// at every sign-in. 64 KiB is the request head serve takes by default
// (--max-header-bytes), so a token above it could not be the bearer of an
// API call either; an Entra ID token (at most 200 groups) is under
// 16 KiB.
const MaxIDTokenBytes = 64 << 10

// exchange trades an authorization code (with its PKCE verifier) for
// the provider's tokens, verifies the ID token and its nonce, and returns
// the identity and the raw ID token.
func (p *Provider) exchange(ctx context.Context, redirectURL, code, verifier, nonce string, endUser bool) (*Identity, string, error) {
	ctx = oidc.ClientContext(ctx, p.cfg.HTTPClient)
	oc := p.oauth
	oc.RedirectURL = redirectURL
	tok, err := oc.Exchange(ctx, code, oauth2.VerifierOption(verifier))
	if err != nil {
		return nil, "", vdibroker.Errorf(vdibroker.EUnauthenticated, "the identity provider refused the code: %v", err)
	}
	raw, _ := tok.Extra("id_token").(string)
	if raw == "" {
		return nil, "", vdibroker.Errorf(vdibroker.EUnauthenticated, "the identity provider answered no id_token")
	}
	if len(raw) > MaxIDTokenBytes {
		// Refused before it is verified, so a huge token costs no
		// signature check or claims decoding either.
		return nil, "", vdibroker.Errorf(vdibroker.EPermission,
			"the identity provider sent an ID token of %d bytes; at most %d are taken: have it put fewer claims in the ID token (a groups filter, or only the groups assigned to the application)",
			len(raw), MaxIDTokenBytes)
	}
	id, idt, err := p.verify(ctx, raw, endUser)
	if err != nil {
		return nil, "", err
	}
	if idt.Nonce == "" || idt.Nonce != nonce {
		return nil, "", vdibroker.Errorf(vdibroker.EUnauthenticated, "the ID token's nonce is not this sign-in's")
	}
	return id, raw, nil
}

func randomString() string {
	b := make([]byte, 32)
	if _, err := rand.Read(b); err != nil {
		panic(err)
	}
	return base64.RawURLEncoding.EncodeToString(b)
}
