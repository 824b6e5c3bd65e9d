package http

import (
	nethttp "net/http"
	"slices"
	"strconv"
	"strings"
	"time"

	"github.com/vdibroker/vdibroker"
)

// createRegistrationToken issues a token agents use to register hosts into
// the pool, valid 1 hour..27 days (R-SEC). Only its hash is stored.
func (s *Server) createRegistrationToken(w nethttp.ResponseWriter, r *nethttp.Request) error {
	req := RegistrationTokenRequest{ExpiresInSeconds: vdibroker.MinRegistrationTokenSeconds}
	if r.ContentLength != 0 {
		if err := decodeJSON(w, r, &req); err != nil {
			return err
		}
	}
	if err := vdibroker.IntRange("expiresInSeconds", req.ExpiresInSeconds,
		vdibroker.MinRegistrationTokenSeconds, vdibroker.MaxRegistrationTokenSeconds); err != nil {
		return err
	}
	if err := vdibroker.IntRange("maxHosts", req.MaxHosts, 0, maxRegistrationHosts); err != nil {
		return err
	}
	pool, err := s.store.GetHostPool(r.Context(), r.PathValue("pool"))
	if err != nil {
		return err
	}
	now := s.now().UTC()
	secret := newSecret("vdbr_")
	t := &vdibroker.RegistrationToken{
		ID:         newID(8),
		HostPool:   pool.Name,
		Hash:       hashSecret(secret),
		CreateTime: now,
		ExpireTime: now.Add(time.Duration(req.ExpiresInSeconds) * time.Second),
		MaxHosts:   req.MaxHosts,
	}
	if err := s.store.CreateRegistrationToken(r.Context(), t); err != nil {
		return err
	}
	writeJSON(w, nethttp.StatusCreated, RegistrationTokenResponse{
		ID: t.ID, HostPool: t.HostPool, Token: secret, ExpirationTime: t.ExpireTime, MaxHosts: t.MaxHosts,
	})
	return nil
}

// maxRegistrationHosts bounds a registration token's maxHosts.
const maxRegistrationHosts = 100000

// listRegistrationTokens is GET /hostpools/{pool}/registrationtokens: the
// pool's registration tokens, expired ones included, without secrets.
func (s *Server) listRegistrationTokens(w nethttp.ResponseWriter, r *nethttp.Request) error {
	list, err := s.store.ListRegistrationTokens(r.Context(), r.PathValue("pool"))
	if err != nil {
		return err
	}
	if list == nil {
		list = []*vdibroker.RegistrationToken{}
	}
	writeJSON(w, nethttp.StatusOK, page[*vdibroker.RegistrationToken]{Value: list})
	return nil
}

// deleteRegistrationToken is DELETE /hostpools/{pool}/registrationtokens/{id}:
// the token registers no more hosts; hosts it registered keep their
// credentials.
func (s *Server) deleteRegistrationToken(w nethttp.ResponseWriter, r *nethttp.Request) error {
	if err := s.store.DeleteRegistrationToken(r.Context(), r.PathValue("pool"), r.PathValue("id")); err != nil {
		return err
	}
	w.WriteHeader(nethttp.StatusNoContent)
	return nil
}

// resetRegistration is POST /hostpools/{pool}/sessionhosts/{host}/resetregistration:
// the host's credential is revoked and the next registration of its name
// takes it (a new machine behind the name). 204.
func (s *Server) resetRegistration(w nethttp.ResponseWriter, r *nethttp.Request) error {
	if err := s.svc.ResetRegistration(r.Context(), r.PathValue("pool"), r.PathValue("host")); err != nil {
		return err
	}
	s.loggerFrom(r.Context()).Info("session host registration reset", "pool", r.PathValue("pool"), "host", r.PathValue("host"),
		"by", vdibroker.PrincipalFrom(r.Context()).Subject)
	w.WriteHeader(nethttp.StatusNoContent)
	return nil
}

// maxTokenPools bounds a token's host-pool scope.
const maxTokenPools = 100

// createToken issues an API token (admin only). The secret is answered once
// and stored as its SHA-256 hash.
func (s *Server) createToken(w nethttp.ResponseWriter, r *nethttp.Request) error {
	var req TokenRequest
	if err := decodeJSON(w, r, &req); err != nil {
		return err
	}
	switch req.Role {
	case vdibroker.RoleReader, vdibroker.RoleContributor:
		if err := vdibroker.ValidateText("subject", req.Subject, vdibroker.MaxUserLen); err != nil {
			return err
		}
	case vdibroker.RoleUser:
		if err := vdibroker.ValidateUser("subject", req.Subject); err != nil {
			return vdibroker.FieldError("subject", "is required for role User: the user the token may connect (1..%d characters, no control characters)", vdibroker.MaxUserLen)
		}
	default:
		return vdibroker.FieldError("role", "must be one of Reader, Contributor, User, got %q", req.Role)
	}
	if req.ExpiresInSeconds != 0 {
		if err := vdibroker.IntRange("expiresInSeconds", req.ExpiresInSeconds,
			vdibroker.MinTokenSeconds, vdibroker.MaxTokenSeconds); err != nil {
			return vdibroker.FieldError("expiresInSeconds", "must be %d..%d, or 0 for no expiry, got %d",
				vdibroker.MinTokenSeconds, vdibroker.MaxTokenSeconds, req.ExpiresInSeconds)
		}
	}
	if len(req.HostPools) > maxTokenPools {
		return vdibroker.FieldError("hostPools", "at most %d host pools, got %d", maxTokenPools, len(req.HostPools))
	}
	for i, p := range req.HostPools {
		if err := vdibroker.ValidateName("hostPools["+strconv.Itoa(i)+"]", p, vdibroker.MinPoolNameLen, vdibroker.MaxPoolNameLen); err != nil {
			return err
		}
	}
	now := s.now().UTC()
	secret := newSecret("vdbt_")
	t := vdibroker.Token{
		ID:         newID(8),
		Role:       req.Role,
		Subject:    req.Subject,
		Hash:       hashSecret(secret),
		CreateTime: now,
		HostPools:  slices.Compact(slices.Sorted(slices.Values(req.HostPools))),
	}
	if req.ExpiresInSeconds != 0 {
		exp := now.Add(time.Duration(req.ExpiresInSeconds) * time.Second)
		t.ExpireTime = &exp
	}
	if err := s.store.CreateToken(r.Context(), &t); err != nil {
		return err
	}
	writeJSON(w, nethttp.StatusCreated, TokenResponse{Token: t, Secret: secret})
	return nil
}

// listTokens lists API tokens without their secrets (Token.Hash is not
// marshalled).
func (s *Server) listTokens(w nethttp.ResponseWriter, r *nethttp.Request) error {
	limit, after, err := pageParams(r)
	if err != nil {
		return err
	}
	list, err := s.store.ListTokens(r.Context())
	if err != nil {
		return err
	}
	slices.SortFunc(list, func(a, b *vdibroker.Token) int { return strings.Compare(a.ID, b.ID) })
	writeJSON(w, nethttp.StatusOK, pageOf(r, list, func(t *vdibroker.Token) string { return t.ID }, limit, after))
	return nil
}

func (s *Server) deleteToken(w nethttp.ResponseWriter, r *nethttp.Request) error {
	if err := s.store.DeleteToken(r.Context(), r.PathValue("id")); err != nil {
		return err
	}
	w.WriteHeader(nethttp.StatusNoContent)
	return nil
}
