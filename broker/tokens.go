package broker

import (
	"context"
	"crypto/subtle"
	"fmt"
	"slices"
	"strconv"
	"strings"
	"time"

	"github.com/vdibroker/vdibroker"
	"github.com/vdibroker/vdibroker/broker/outage"
)

// The token service (vdibroker.TokenService): API tokens and registration
// tokens (R-SEC). A secret is answered once, when it is made, and stored
// as its hash (vdibroker.HashSecret).

var _ vdibroker.TokenService = (*Service)(nil)

// Bounds of what a token request may ask.
const (
	// maxTokenPools bounds a token's host-pool scope.
	maxTokenPools = 100
)

// Authenticate returns the principal of the API token whose secret hashes
// to hash.
func (s *Service) Authenticate(ctx context.Context, hash string) (*vdibroker.Principal, error) {
	t, err := s.store.TokenByHash(ctx, hash)
	if outage.IsStoreDown(err) {
		// A gateway's reports go on during an outage (R-GW4).
		if p := s.gw.knownGateway(hash, s.now()); p != nil {
			return p, nil
		}
	}
	switch vdibroker.ErrorCode(err) {
	case "":
	case vdibroker.ENotFound, vdibroker.EUnauthenticated:
		return nil, vdibroker.Errorf(vdibroker.EUnauthenticated, "invalid token")
	default:
		return nil, err
	}
	// The store found the row by hash; compare again in constant time so
	// the answer does not depend on how the lookup compared.
	if subtle.ConstantTimeCompare([]byte(t.Hash), []byte(hash)) != 1 {
		return nil, vdibroker.Errorf(vdibroker.EUnauthenticated, "invalid token")
	}
	// The whole secret matched (the lookup is by its hash; there is no id
	// to match apart from it): saying why it is refused tells the caller
	// nothing it did not hold, and nobody else which tokens exist (R-SEC).
	if t.RevokeTime != nil {
		return nil, vdibroker.Errorf(vdibroker.EUnauthenticated, "token revoked at %s", t.RevokeTime.UTC().Format("2006-01-02T15:04:05Z"))
	}
	if t.ExpireTime != nil && !s.now().Before(*t.ExpireTime) {
		return nil, vdibroker.Errorf(vdibroker.EUnauthenticated, "token expired at %s", t.ExpireTime.UTC().Format("2006-01-02T15:04:05Z"))
	}
	p := &vdibroker.Principal{Role: t.Role, Subject: t.Subject, TokenID: t.ID, Kind: vdibroker.PrincipalToken, HostPools: t.HostPools,
		Groups: t.Groups, Gateway: t.Gateway}
	if p.Role == vdibroker.RoleGateway {
		s.gw.rememberGateway(hash, p, t.ExpireTime, s.now())
	}
	return p, nil
}

// CreateToken issues an API token of a role, for a subject (the user a
// User token connects), optionally expiring and scoped to host pools.
func (s *Service) CreateToken(ctx context.Context, req vdibroker.TokenRequest) (*vdibroker.TokenResponse, error) {
	switch req.Role {
	case vdibroker.RoleReader, vdibroker.RoleHelpdesk, vdibroker.RoleContributor, vdibroker.RoleGateway:
		// R-SEC: the subject is who the audit trail names for every call
		// the token makes; an empty one would make them nobody's.
		if req.Subject == "" {
			return nil, vdibroker.FieldError("subject", "is required: who the token is for, which the audit trail names (1..%d characters, no control characters)", vdibroker.MaxUserLen)
		}
		if err := vdibroker.ValidateText("subject", req.Subject, vdibroker.MaxUserLen); err != nil {
			return nil, err
		}
	case vdibroker.RoleUser:
		if err := vdibroker.ValidateUser("subject", req.Subject); err != nil {
			return nil, vdibroker.FieldError("subject", "is required for role User: the user the token may connect (1..%d characters, no control characters)", vdibroker.MaxUserLen)
		}
	default:
		return nil, vdibroker.FieldError("role", "must be one of Reader, Helpdesk, Contributor, User, Gateway, got %q", req.Role)
	}
	if req.ExpiresInSeconds != 0 {
		if err := vdibroker.IntRange("expiresInSeconds", req.ExpiresInSeconds,
			vdibroker.MinTokenSeconds, vdibroker.MaxTokenSeconds); err != nil {
			return nil, vdibroker.FieldError("expiresInSeconds", "must be %d..%d, or 0 for no expiry, got %d",
				vdibroker.MinTokenSeconds, vdibroker.MaxTokenSeconds, req.ExpiresInSeconds)
		}
	}
	if len(req.HostPools) > maxTokenPools {
		return nil, vdibroker.FieldError("hostPools", "at most %d host pools, got %d", maxTokenPools, len(req.HostPools))
	}
	for i, p := range req.HostPools {
		if err := vdibroker.ValidateName("hostPools["+strconv.Itoa(i)+"]", p, vdibroker.MinPoolNameLen, vdibroker.MaxPoolNameLen); err != nil {
			return nil, err
		}
	}
	// R-E6: an end user's groups, which its assignments through groups
	// entitle; the other roles connect no user of their own.
	if len(req.Groups) > 0 && req.Role != vdibroker.RoleUser {
		return nil, vdibroker.FieldError("groups", "only a User token has groups (the groups of its user), not a %s token", req.Role)
	}
	if err := vdibroker.ValidateGroups("groups", req.Groups); err != nil {
		return nil, err
	}
	// R-GW4: a Gateway token is one gateway's, by name: the broker
	// records its reports under that name and refuses them under another,
	// so one gateway's credential cannot report as another.
	gw := ""
	if req.Role == vdibroker.RoleGateway {
		gw = req.Gateway
		if gw == "" {
			gw = req.Subject
		}
		if err := vdibroker.ValidateText("gateway", gw, vdibroker.MaxTunnelReportText); err != nil {
			return nil, err
		}
	} else if req.Gateway != "" {
		return nil, vdibroker.FieldError("gateway", "only a Gateway token is for a gateway, not a %s token", req.Role)
	}
	now := s.now().UTC()
	secret := vdibroker.NewSecret("vdbt_")
	t := vdibroker.Token{
		ID:         vdibroker.NewID(),
		Role:       req.Role,
		Subject:    req.Subject,
		Hash:       vdibroker.HashSecret(secret),
		CreateTime: now,
		HostPools:  slices.Compact(slices.Sorted(slices.Values(req.HostPools))),
		Groups:     req.Groups,
		Gateway:    gw,
	}
	if req.ExpiresInSeconds != 0 {
		exp := now.Add(time.Duration(req.ExpiresInSeconds) * time.Second)
		t.ExpireTime = &exp
	}
	if err := s.store.CreateToken(ctx, &t); err != nil {
		return nil, err
	}
	// A scope may name a pool made later, but a typo would give a token
	// that sees nothing: say so (a failed lookup warns of nothing).
	var warnings []string
	for _, p := range t.HostPools {
		if _, err := s.store.GetHostPool(ctx, p); vdibroker.ErrorCode(err) == vdibroker.ENotFound {
			warnings = append(warnings, fmt.Sprintf("host pool %q does not exist: this token sees no pool of that name until one is made; check the name (token delete --id %s, then create it again)", p, t.ID))
		}
	}
	warnings = append(warnings, s.sameGatewayWarnings(ctx, &t)...)
	return &vdibroker.TokenResponse{Token: t, Secret: secret, Warnings: warnings}, nil
}

// sameGatewayWarnings warns of the Gateway tokens whose gateway t's is by
// vdibroker.SameGateway but spelled otherwise (R-GW4): the broker takes
// both tokens' reports as one gateway's, and each reaches, checks and
// closes the tunnels the other admitted. A token rotated to its gateway's
// name in other case means that; two machines whose names differ only so
// would share their tunnels, which the admin must hear of. A name spelled
// alike warns of nothing (a rotation, as before names folded); a failed
// listing warns of nothing (the token is issued).
func (s *Service) sameGatewayWarnings(ctx context.Context, t *vdibroker.Token) []string {
	if t.Role != vdibroker.RoleGateway || t.Gateway == "" {
		return nil
	}
	list, err := s.store.ListTokens(ctx)
	if err != nil {
		return nil
	}
	slices.SortFunc(list, func(a, b *vdibroker.Token) int { return strings.Compare(a.ID, b.ID) })
	var out []string
	for _, o := range list {
		if o.ID == t.ID || o.Role != vdibroker.RoleGateway || o.Gateway == "" || o.Gateway == t.Gateway || !vdibroker.SameGateway(o.Gateway, t.Gateway) {
			continue
		}
		if len(out) == maxSameGatewayWarnings {
			out = append(out, "and more tokens for that gateway (token list, column Gateway)")
			break
		}
		out = append(out, fmt.Sprintf("gateway %q is the gateway of token %s (%q, subject %q): gateway names compare as host names do (ASCII case and a trailing dot aside), so the broker takes both tokens' reports as one gateway's, and either reaches, checks and closes the tunnels the other admitted; if they are two machines, give this one a name of its own (token delete --id %s, then create it again with --gateway)",
			t.Gateway, o.ID, o.Gateway, o.Subject, t.ID))
	}
	return out
}

// maxSameGatewayWarnings bounds the tokens sameGatewayWarnings names.
const maxSameGatewayWarnings = 5

// ListTokens lists the API tokens by id.
func (s *Service) ListTokens(ctx context.Context) ([]*vdibroker.Token, error) {
	list, err := s.store.ListTokens(ctx)
	if err != nil {
		return nil, err
	}
	slices.SortFunc(list, func(a, b *vdibroker.Token) int { return strings.Compare(a.ID, b.ID) })
	return list, nil
}

// DeleteToken revokes an API token.
func (s *Service) DeleteToken(ctx context.Context, id string) error {
	if err := s.store.DeleteToken(ctx, id); err != nil {
		return err
	}
	s.gw.forgetGateway(id)
	return nil
}

// CreateRegistrationToken issues a token agents use to register hosts
// into pool, valid 1 hour..27 days.
func (s *Service) CreateRegistrationToken(ctx context.Context, poolName string, req vdibroker.RegistrationTokenRequest) (*vdibroker.RegistrationTokenResponse, error) {
	if err := vdibroker.IntRange("expiresInSeconds", req.ExpiresInSeconds,
		vdibroker.MinRegistrationTokenSeconds, vdibroker.MaxRegistrationTokenSeconds); err != nil {
		return nil, err
	}
	if err := vdibroker.IntRange("maxHosts", req.MaxHosts, 0, vdibroker.MaxRegistrationTokenHosts); err != nil {
		return nil, err
	}
	if req.SessionHost != "" {
		if err := vdibroker.ValidateName("sessionHost", req.SessionHost, vdibroker.MinHostNameLen, vdibroker.MaxHostNameLen); err != nil {
			return nil, err
		}
	}
	pool, err := s.store.GetHostPool(ctx, poolName)
	if err != nil {
		return nil, err
	}
	now := s.now().UTC()
	secret := vdibroker.NewSecret("vdbr_")
	t := &vdibroker.RegistrationToken{
		ID:          vdibroker.NewID(),
		HostPool:    pool.Name,
		Hash:        vdibroker.HashSecret(secret),
		CreateTime:  now,
		ExpireTime:  now.Add(time.Duration(req.ExpiresInSeconds) * time.Second),
		MaxHosts:    req.MaxHosts,
		SessionHost: req.SessionHost,
	}
	if err := s.store.CreateRegistrationToken(ctx, t); err != nil {
		return nil, err
	}
	return &vdibroker.RegistrationTokenResponse{
		ID: t.ID, HostPool: t.HostPool, Token: secret, ExpirationTime: t.ExpireTime, MaxHosts: t.MaxHosts,
		SessionHost: t.SessionHost,
	}, nil
}

// ListRegistrationTokens lists a pool's registration tokens.
func (s *Service) ListRegistrationTokens(ctx context.Context, pool string) ([]*vdibroker.RegistrationToken, error) {
	list, err := s.store.ListRegistrationTokens(ctx, pool)
	if list == nil && err == nil {
		list = []*vdibroker.RegistrationToken{}
	}
	return list, err
}

// DeleteRegistrationToken revokes a registration token: it registers no
// more hosts, and hosts it registered keep their credentials.
func (s *Service) DeleteRegistrationToken(ctx context.Context, pool, id string) error {
	return s.store.DeleteRegistrationToken(ctx, pool, id)
}
