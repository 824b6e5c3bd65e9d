package http

import (
	"fmt"
	"io"
	nethttp "net/http"
	"slices"
	"strings"

	"github.com/vdibroker/vdibroker"
)

// decodeRegister decodes and validates a registration body (fuzzed).
func decodeRegister(body io.Reader) (*vdibroker.RegisterRequest, error) {
	var req vdibroker.RegisterRequest
	if err := decodeStrict(body, &req); err != nil {
		return nil, err
	}
	if err := vdibroker.ValidateRegister(&req); err != nil {
		return nil, err
	}
	return &req, nil
}

// decodeHeartbeat decodes and validates a heartbeat body (fuzzed).
func decodeHeartbeat(body io.Reader) (*vdibroker.HeartbeatRequest, error) {
	var hb vdibroker.HeartbeatRequest
	if err := decodeStrict(body, &hb); err != nil {
		return nil, err
	}
	if err := vdibroker.ValidateHeartbeat(&hb); err != nil {
		return nil, err
	}
	return &hb, nil
}

// register is POST /agent/register: a registration token of a pool lets an
// agent create its host (or re-key the host of that name) and get the host's
// own credential, shown only in this answer (R-SEC).
func (s *Server) register(w nethttp.ResponseWriter, r *nethttp.Request) error {
	if err := s.checkAgentCert(r); err != nil {
		return err
	}
	req, err := decodeRegister(nethttp.MaxBytesReader(w, r.Body, maxBodyBytes))
	if err != nil {
		return err
	}
	if err := s.checkAgentCertName(r, req.HostName); err != nil {
		return err
	}
	if cur, err := bearer(r); err == nil {
		// An agent re-keying its own host proves it with its current
		// credential; without it a registered host is not re-keyed.
		req.CurrentCredentialHash = vdibroker.HashSecret(cur)
		if err := s.spendReKey(r, req); err != nil {
			return err
		}
	}
	admit, refund := s.newHostAdmission()
	req.AdmitNewHost = admit
	resp, err := s.svc.Hosts.RegisterHost(r.Context(), req)
	if err != nil {
		// Admitted, then not written (the store failed or timed out
		// after it admitted the host): no host was made, so none of the
		// token's new hosts is spent (R-SEC).
		refund()
		return err
	}
	writeJSON(w, nethttp.StatusCreated, resp)
	return nil
}

// spendReKey spends one of the re-keys of the host whose current
// credential req carries, when it names that host (R-SEC,
// ReKeysPerHost): 429 once they are spent. Only a credential that is a
// host's has a bucket, by its pool and name, which every new credential
// of the host shares; any other (made up, revoked, another host's) re-keys
// nothing, and RegisterHost refuses it or registers a new host as without
// it.
func (s *Server) spendReKey(r *nethttp.Request, req *vdibroker.RegisterRequest) error {
	host, err := s.svc.Hosts.HostByCredential(r.Context(), req.CurrentCredentialHash)
	if err != nil || !strings.EqualFold(strings.TrimSuffix(host.Name, "."), strings.TrimSuffix(req.HostName, ".")) {
		return nil
	}
	if !s.reKeys.Spend(host.HostPool+"\x00"+strings.ToLower(host.Name), s.now()) {
		return throttled(fmt.Sprintf("host %q is re-keyed faster than %d a minute (an agent registers again with its registration token alone, never re-keys with its credential)",
			host.Name, ReKeysPerHost), ReKeysPerHost/60.0)
	}
	return nil
}

// newHostAdmission is a registration's RegisterRequest.AdmitNewHost: the
// host it would create spends one of its token's new hosts (R-SEC,
// NewHostsPerTokenBurst, NewHostsPerTokenPerMinute), 429 once they are
// spent. A transaction the store runs again spends none again. refund,
// called when the registration failed, gives back what admit spent: a
// registration the store refused or failed after admitting its host
// made no host, and spends none.
func (s *Server) newHostAdmission() (admit func(tokenID string) error, refund func()) {
	spent := ""
	admit = func(tokenID string) error {
		if spent != "" {
			return nil
		}
		if !s.newHosts.Spend(tokenID, s.now()) {
			return throttled(fmt.Sprintf("registration token %s registers new session hosts faster than %d at once, then %d a minute "+
				"(each agent waits and registers again; to bring up more hosts at once, give them more registration tokens)",
				tokenID, NewHostsPerTokenBurst, NewHostsPerTokenPerMinute), NewHostsPerTokenPerMinute/60.0)
		}
		spent = tokenID
		return nil
	}
	refund = func() {
		if spent != "" {
			s.newHosts.Refund(spent, s.now())
		}
	}
	return admit, refund
}

// heartbeat is POST /agent/heartbeat with the host credential: applied to
// the store synchronously (R-S2 reconciliation, R-S3, R-S5), so the counts
// reflect it when the answer arrives (the host service's Heartbeat).
func (s *Server) heartbeat(w nethttp.ResponseWriter, r *nethttp.Request) error {
	if err := s.checkAgentCert(r); err != nil {
		return err
	}
	cred, err := bearer(r)
	if err != nil {
		return err
	}
	credHash := vdibroker.HashSecret(cred)
	host, err := s.svc.Hosts.HostByCredential(r.Context(), credHash)
	if err != nil {
		if code := vdibroker.ErrorCode(err); code == vdibroker.ENotFound || code == vdibroker.EUnauthenticated {
			return vdibroker.Errorf(vdibroker.EUnauthenticated, "host credential is invalid or revoked; register the agent again")
		}
		return err
	}
	// A host's credential only has a bucket (R-SEC): made-up ones would
	// fill the bounded map and send the real hosts to its shared overflow
	// bucket, which they drain. A host's is mostly known in memory, so a
	// flood of it still costs no read.
	if !s.heartbeats.Spend(credHash, s.now()) {
		return throttled("this host's heartbeats come faster than the broker accepts (an agent sends one every 10 s)", HeartbeatsPerSecond)
	}
	if err := s.checkAgentCertName(r, host.Name); err != nil {
		return err
	}
	authenticated(r)
	hb, err := decodeHeartbeat(nethttp.MaxBytesReader(w, r.Body, maxBodyBytes))
	if err != nil {
		return err
	}
	// The host may come from the service's memory: the store applies the
	// heartbeat only while this is still its credential.
	hb.CredentialHash = credHash
	res, err := s.svc.Hosts.Heartbeat(r.Context(), host, hb)
	if vdibroker.ErrorCode(err) == vdibroker.EUnauthenticated {
		return vdibroker.Errorf(vdibroker.EUnauthenticated, "host credential is invalid or revoked; register the agent again")
	}
	if err != nil {
		return err
	}
	resp := vdibroker.HeartbeatResponse{Commands: res.Commands}
	if resp.Commands == nil {
		resp.Commands = []vdibroker.Command{}
	}
	if res.Pool != nil {
		resp.Settings = vdibroker.AgentSettings{
			SampleIntervalSeconds:   res.Pool.LoadBalancing.SampleIntervalSeconds,
			HeartbeatTimeoutSeconds: res.Pool.HeartbeatTimeoutSeconds,
			UseCustomScript:         res.Pool.LoadBalancing.UseCustomScript,
		}
	}
	writeJSON(w, nethttp.StatusOK, resp)
	return nil
}

// checkAgentCert refuses an agent call without a verified TLS client
// certificate when the server requires one (serve --tls-client-ca).
func (s *Server) checkAgentCert(r *nethttp.Request) error {
	if !s.agentCert {
		return nil
	}
	if r.TLS == nil || len(r.TLS.VerifiedChains) == 0 {
		return vdibroker.Errorf(vdibroker.EUnauthenticated, "this broker requires agents to present a client certificate signed by its client CA (--client-cert, --client-key)")
	}
	return nil
}

// checkAgentCertName refuses an agent call whose verified client
// certificate is not host's (R-SEC): its subject's common name or one of
// its DNS names must be the host name, compared as DNS names are (case
// aside), unless the server accepts any name (serve
// --tls-client-any-host). One host's certificate then neither registers
// nor heartbeats another host.
func (s *Server) checkAgentCertName(r *nethttp.Request, host string) error {
	if !s.agentCert || s.agentCertAnyHost || r.TLS == nil || len(r.TLS.VerifiedChains) == 0 {
		return nil
	}
	leaf := r.TLS.VerifiedChains[0][0]
	if strings.EqualFold(leaf.Subject.CommonName, host) || slices.ContainsFunc(leaf.DNSNames, func(n string) bool { return strings.EqualFold(n, host) }) {
		return nil
	}
	return vdibroker.Errorf(vdibroker.EPermission, "the client certificate (common name %q) is not session host %q's: "+
		"issue each agent a certificate whose common name or DNS name is its host name, or start serve with --tls-client-any-host",
		vdibroker.Cut(leaf.Subject.CommonName, 128), host)
}
