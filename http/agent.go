package http

import (
	"fmt"
	"io"
	nethttp "net/http"
	"slices"
	"strings"
	"sync"

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
	tokenHash := vdibroker.HashSecret(req.Token)
	if err := s.refuseSpentNewHost(r, req, tokenHash); err != nil {
		return err
	}
	admit, refund := s.newHostAdmission(tokenHash)
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
// spent, and the token, of tokenHash, is then noted in spentTokens. A
// transaction the store runs again spends none again. refund, called
// when the registration failed, gives back what admit spent: a
// registration the store refused or failed after admitting its host made
// no host, and spends none.
func (s *Server) newHostAdmission(tokenHash string) (admit func(tokenID string) error, refund func()) {
	spent := ""
	admit = func(tokenID string) error {
		if spent != "" {
			return nil
		}
		if !s.newHosts.Spend(tokenID, s.now()) {
			s.spentTokens.note(tokenHash, tokenID, func(id string) bool { return s.newHosts.Spent(id, s.now()) })
			return newHostsThrottled(tokenID)
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

// newHostsThrottled is the 429 of a new host of token tokenID past its
// token's new hosts.
func newHostsThrottled(tokenID string) error {
	return throttled(fmt.Sprintf("registration token %s registers new session hosts faster than %d at once, then %d a minute "+
		"(each agent waits and registers again; to bring up more hosts at once, give them more registration tokens)",
		tokenID, NewHostsPerTokenBurst, NewHostsPerTokenPerMinute), NewHostsPerTokenPerMinute/60.0)
}

// refuseSpentNewHost answers 429, as the store's admission would
// (newHostAdmission), a registration that would create a host while its
// token's new hosts are spent, before the store opens a write
// transaction (R-SEC): a fleet of agents waiting on one token, each
// registering again at its Retry-After, cost a write transaction each,
// rolled back, on SQLite's one writer that every connect needs. Only a
// token the store admitted, valid, and refused for its rate is noted
// (spentTokens), by its hash, so a made-up token costs nothing here and
// makes no bucket (the peek makes none). A registration of a noted token
// whose bucket is still empty is read first, a read and no write
// transaction (RegistrationCreatesHost): only one that would create a
// host is refused, so a re-key, the claim of a host an admin created, a
// registration after a reset, and a refusal for another reason (the
// token revoked or at its maxHosts, the name taken) go on to the store
// as before, and answer as before. The store's admission stays the
// authority: a registration this lets through is admitted or refused
// there.
func (s *Server) refuseSpentNewHost(r *nethttp.Request, req *vdibroker.RegisterRequest, tokenHash string) error {
	id, ok := s.spentTokens.get(tokenHash)
	if !ok || !s.newHosts.Spent(id, s.now()) {
		return nil
	}
	tokenID, pool, err := s.svc.Hosts.RegistrationCreatesHost(r.Context(), req)
	if err != nil || tokenID != id || !s.newHosts.Spent(id, s.now()) {
		return nil // the store decides, as without the read
	}
	if ev := vdibroker.AuditFrom(r.Context()); ev != nil {
		// As the store names a registration it refuses (its token, its
		// host), so this refusal's entry reads as the store's would.
		ev.Principal.ID = tokenID
		ev.HostPool, ev.Target = pool, "hostpools/"+pool+"/sessionhosts/"+req.HostName
	}
	return newHostsThrottled(tokenID)
}

// maxSpentTokens bounds spentTokens.
const maxSpentTokens = 4096

// spentTokens are the registration tokens whose new hosts the store's
// admission found spent, by the hash of the token to its id (its bucket
// of newHosts) (refuseSpentNewHost). Only valid tokens are noted, at most
// maxSpentTokens: a full set forgets the tokens whose buckets hold a new
// host again, and notes no more while none does (their registrations go
// to the store, as before).
type spentTokens struct {
	mu sync.Mutex
	m  map[string]string
}

// get is the id of the token of hash, when it is noted.
func (st *spentTokens) get(hash string) (string, bool) {
	st.mu.Lock()
	defer st.mu.Unlock()
	id, ok := st.m[hash]
	return id, ok
}

// note notes the token of hash, id; spent says whether a token's new
// hosts are still spent (the ones that are not are forgotten when the
// set is full).
func (st *spentTokens) note(hash, id string, spent func(id string) bool) {
	st.mu.Lock()
	defer st.mu.Unlock()
	if st.m == nil {
		st.m = map[string]string{}
	}
	if _, ok := st.m[hash]; !ok && len(st.m) >= maxSpentTokens {
		for h, other := range st.m {
			if !spent(other) {
				delete(st.m, h)
			}
		}
		if len(st.m) >= maxSpentTokens {
			return
		}
	}
	st.m[hash] = id
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
