package http

import (
	nethttp "net/http"

	"github.com/vdibroker/vdibroker"
)

// createRegistrationToken issues a token agents use to register hosts into
// the pool, valid 1 hour..27 days (R-SEC); absent expiresInSeconds is 3600.
func (s *Server) createRegistrationToken(w nethttp.ResponseWriter, r *nethttp.Request) error {
	req := RegistrationTokenRequest{ExpiresInSeconds: vdibroker.MinRegistrationTokenSeconds}
	if r.ContentLength != 0 {
		if err := decodeJSON(w, r, &req); err != nil {
			return err
		}
	}
	t, err := s.svc.Tokens.CreateRegistrationToken(r.Context(), r.PathValue("pool"), req)
	if err != nil {
		return err
	}
	writeJSON(w, nethttp.StatusCreated, t)
	return nil
}

// listRegistrationTokens is GET /hostpools/{pool}/registrationtokens: the
// pool's registration tokens, expired ones included, without secrets.
func (s *Server) listRegistrationTokens(w nethttp.ResponseWriter, r *nethttp.Request) error {
	list, err := s.svc.Tokens.ListRegistrationTokens(r.Context(), r.PathValue("pool"))
	if err != nil {
		return err
	}
	writeJSON(w, nethttp.StatusOK, page[*vdibroker.RegistrationToken]{Value: list})
	return nil
}

// deleteRegistrationToken is DELETE /hostpools/{pool}/registrationtokens/{id}:
// the token registers no more hosts; hosts it registered keep their
// credentials.
func (s *Server) deleteRegistrationToken(w nethttp.ResponseWriter, r *nethttp.Request) error {
	if err := s.svc.Tokens.DeleteRegistrationToken(r.Context(), r.PathValue("pool"), r.PathValue("id")); err != nil {
		return err
	}
	w.WriteHeader(nethttp.StatusNoContent)
	return nil
}

// resetRegistration is POST /hostpools/{pool}/sessionhosts/{host}/resetregistration:
// the host's credential is revoked and the next registration of its name
// takes it (a new machine behind the name). 204.
func (s *Server) resetRegistration(w nethttp.ResponseWriter, r *nethttp.Request) error {
	if err := s.svc.Hosts.ResetRegistration(r.Context(), r.PathValue("pool"), r.PathValue("host")); err != nil {
		return err
	}
	w.WriteHeader(nethttp.StatusNoContent)
	return nil
}

// createToken issues an API token (admin only). The secret is answered once
// and stored as its SHA-256 hash.
func (s *Server) createToken(w nethttp.ResponseWriter, r *nethttp.Request) error {
	var req TokenRequest
	if err := decodeJSON(w, r, &req); err != nil {
		return err
	}
	t, err := s.svc.Tokens.CreateToken(r.Context(), req)
	if err != nil {
		return err
	}
	warningHeaders(w, t.Warnings)
	writeJSON(w, nethttp.StatusCreated, t)
	return nil
}

// listTokens lists API tokens without their secrets (Token.Hash is not
// marshalled).
func (s *Server) listTokens(w nethttp.ResponseWriter, r *nethttp.Request) error {
	limit, after, err := pageParams(r)
	if err != nil {
		return err
	}
	list, err := s.svc.Tokens.ListTokens(r.Context())
	if err != nil {
		return err
	}
	writeJSON(w, nethttp.StatusOK, pageOf(r, list, func(t *vdibroker.Token) string { return t.ID }, limit, after))
	return nil
}

func (s *Server) deleteToken(w nethttp.ResponseWriter, r *nethttp.Request) error {
	if err := s.svc.Tokens.DeleteToken(r.Context(), r.PathValue("id")); err != nil {
		return err
	}
	w.WriteHeader(nethttp.StatusNoContent)
	return nil
}
