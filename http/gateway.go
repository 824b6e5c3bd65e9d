package http

import (
	nethttp "net/http"

	"github.com/vdibroker/vdibroker"
)

// The RD gateways' routes (docs/gateway.md). A gateway (vdibroker gateway
// --broker-url .../api/v1/gateway/tunnels) POSTs a report of each tunnel
// with a Gateway token, a role that may do nothing else (R-GW4); it reads
// the public keys it verifies access tokens with (--keys-url
// .../api/v1/gateway/keys) without a credential: they are public.

// gatewayRoutes registers the gateway routes.
func (s *Server) gatewayRoutes() {
	s.handle("GET /api/v1/gateway/keys", refusesNoOne, s.gatewayKeys)
	s.handle("POST /api/v1/gateway/keys/rotate", vdibroker.ActionManageTokens, s.rotateGatewayKey)
	s.handle("POST /api/v1/gateway/tunnels/open", vdibroker.ActionGatewayReport, s.tunnelReport(vdibroker.TunnelOpen))
	s.handle("POST /api/v1/gateway/tunnels/channel", vdibroker.ActionGatewayReport, s.tunnelReport(vdibroker.TunnelChannel))
	s.handle("POST /api/v1/gateway/tunnels/close", vdibroker.ActionGatewayReport, s.tunnelReport(vdibroker.TunnelClose))
	s.handle("POST /api/v1/gateway/tunnels/check", vdibroker.ActionGatewayReport, s.checkTunnels)
}

// checkTunnels is POST /gateway/tunnels/check: a gateway's periodic
// question about its open tunnels, answered 200 with the token ids of
// those that may go on (R-GW4); 503 while the store is down, which the
// gateway answers by keeping them all.
func (s *Server) checkTunnels(w nethttp.ResponseWriter, r *nethttp.Request) error {
	var c vdibroker.TunnelCheck
	if err := decodeJSON(w, r, &c); err != nil {
		return err
	}
	a, err := s.svc.Gateway.CheckTunnels(r.Context(), &c)
	if err != nil {
		return err
	}
	writeJSON(w, nethttp.StatusOK, a)
	return nil
}

// gatewayKeys is GET /gateway/keys: the JWKS document of the token keys
// (R-GW6). The service answers from its copy of the keys, read from the
// store at most every 30 seconds, so an anonymous caller cannot make it
// read more often.
func (s *Server) gatewayKeys(w nethttp.ResponseWriter, r *nethttp.Request) error {
	doc, err := s.svc.Gateway.GatewayKeys(r.Context())
	if err != nil {
		return err
	}
	w.Header().Set("Content-Type", "application/json")
	w.Header().Set("Cache-Control", "max-age=30")
	w.WriteHeader(nethttp.StatusOK)
	_, err = w.Write(doc)
	return err
}

// rotateGatewayKey is POST /gateway/keys/rotate (the admin token): a new
// signing key, published now, signing after the publish delay (R-GW6);
// with ?revoke=true signing at once, every other key dropped. revoke is
// true or false, nothing else: a revoke closes every user's tunnel, and a
// plain rotation leaves a leaked key signing, so a value read either way
// ("1", "t", "yes") is refused. The audit entry of a revoke, and of a
// refused one, is gatewaykey.revoke, with the keys it dropped.
func (s *Server) rotateGatewayKey(w nethttp.ResponseWriter, r *nethttp.Request) error {
	revoke := false
	if q := r.URL.Query(); q.Has("revoke") {
		v := q.Get("revoke")
		if ev := vdibroker.AuditFrom(r.Context()); ev != nil && v != "false" {
			ev.Action = "gatewaykey.revoke"
		}
		switch v {
		case "true":
			revoke = true
		case "false":
		default:
			return vdibroker.FieldError("revoke", "must be true or false, got %q", v)
		}
	}
	if err := s.svc.Gateway.RotateGatewayKey(r.Context(), revoke); err != nil {
		return err
	}
	w.WriteHeader(nethttp.StatusNoContent)
	return nil
}

// tunnelReport is POST /gateway/tunnels/{open,channel,close}: 204 once
// the report is taken; 409 for a token id admitted before, 429 for a user
// at the tunnel limit, 404 for a token the broker did not issue or a
// session that ended (R-GW4).
func (s *Server) tunnelReport(kind string) func(nethttp.ResponseWriter, *nethttp.Request) error {
	return func(w nethttp.ResponseWriter, r *nethttp.Request) error {
		var rep vdibroker.TunnelReport
		if err := decodeJSON(w, r, &rep); err != nil {
			return err
		}
		var err error
		switch kind {
		case vdibroker.TunnelOpen:
			err = s.svc.Gateway.TunnelOpen(r.Context(), &rep)
		case vdibroker.TunnelChannel:
			err = s.svc.Gateway.TunnelChannel(r.Context(), &rep)
		default:
			err = s.svc.Gateway.TunnelClose(r.Context(), &rep)
		}
		if err != nil {
			return err
		}
		w.WriteHeader(nethttp.StatusNoContent)
		return nil
	}
}
