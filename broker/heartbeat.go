package broker

import (
	"context"
	"sync"
	"time"

	"github.com/vdibroker/vdibroker"
	"github.com/vdibroker/vdibroker/broker/outage"
)

// The agents' side of the host service: a heartbeat is authenticated by
// its host credential (HostByCredential, from memory when it can), then
// written with the store's reconciliation (R-S2, R-S3, R-S5), and its
// result applied to the pool's view.

// Heartbeat applies host's heartbeat (R-S2 reconciliation, R-S3, R-S5)
// synchronously, so the counts reflect it when the answer arrives, and
// updates the pool's view with the result. While the store is down it is
// held and written when the store is back (R-OUT1); the result then has
// the pool's settings and no commands.
//
// A heartbeat whose hb.CredentialHash is no longer the host's is refused
// with Unauthenticated, and this service forgets the credential and the
// host's report and held heartbeat.
func (s *Service) Heartbeat(ctx context.Context, host *vdibroker.SessionHost, hb *vdibroker.HeartbeatRequest) (*vdibroker.HeartbeatResult, error) {
	now := s.now().UTC()
	if s.health.Down() {
		s.outage.Report(host.HostPool, host.Name, hb.Sessions, now)
		return s.outage.HoldHeartbeat(host, hb, now, nil)
	}
	res, err := s.applyHeartbeat(ctx, host.HostPool, host.Name, hb, now)
	switch {
	case outage.IsStoreDown(err):
		s.outage.Report(host.HostPool, host.Name, hb.Sessions, now)
		return s.outage.HoldHeartbeat(host, hb, now, err)
	case vdibroker.ErrorCode(err) == vdibroker.EUnauthenticated:
		// The credential was revoked through another replica (the host
		// deleted, its registration reset, re-keyed): what this one
		// holds of the host for an outage was that machine's word
		// (R-SEC).
		s.creds.forget(host.HostPool, host.Name)
		s.outage.Forget(host.HostPool, host.Name)
		return nil, err
	case err != nil:
		return nil, err
	}
	s.outage.Report(host.HostPool, host.Name, hb.Sessions, now)
	return res, nil
}

// applyHeartbeat writes host's heartbeat hb, received at at, and updates
// the pool's view with the result. A heartbeat held during an outage is
// written first, or, when hb is newer, only its command results go with
// hb: its sessions are old news. hb nil writes the held one alone.
// Heartbeats of one host are written one at a time, so a held one is never
// written over a newer one. On failure the held heartbeat is kept.
func (s *Service) applyHeartbeat(ctx context.Context, pool, host string, hb *vdibroker.HeartbeatRequest, at time.Time) (res *vdibroker.HeartbeatResult, err error) {
	unlock := s.hostLocks.Lock(pool + "\x00" + host)
	defer unlock()
	if held, heldAt := s.outage.TakeHeld(pool, host); held != nil {
		defer func() {
			// Kept for the next try, unless its credential was revoked
			// meanwhile: that one is never applied.
			if err != nil && vdibroker.ErrorCode(err) != vdibroker.EUnauthenticated {
				s.outage.Hold(pool, host, held, heldAt)
			}
		}()
		if hb == nil {
			hb, at = held, heldAt
		} else if len(held.Results) > 0 {
			c := *hb
			c.Results = append(append([]vdibroker.CommandResult(nil), held.Results...), hb.Results...)
			hb = &c
		}
	}
	if hb == nil {
		return nil, nil
	}
	res, err = s.store.ApplyHeartbeat(ctx, pool, host, hb, at)
	if err != nil {
		return nil, err
	}
	s.logResults(ctx, pool, host, res.Results)
	if res.Pool != nil {
		s.views.SetPool(res.Pool)
	}
	if res.Host != nil {
		s.views.UpsertHeartbeat(res)
	}
	return res, nil
}

// logResults logs what the agent reported of the commands it ran (logoff,
// disconnect, message; R-S4): the store keeps the result, but no call
// reads it back, so the log is where an administrator learns that her
// message reached the user or why a logoff failed, by the command's id
// (usersession logoff -o json prints it). Only the results the store
// recorded, of commands of this host: a host's credential cannot write
// 200 made-up lines a heartbeat.
func (s *Service) logResults(ctx context.Context, pool, host string, results []vdibroker.CommandResult) {
	for _, r := range results {
		if r.Success {
			s.log.InfoContext(ctx, "command done on the host", "pool", pool, "host", host, "command", r.ID, "result", r.Message)
		} else {
			s.log.WarnContext(ctx, "command failed on the host", "pool", pool, "host", host, "command", r.ID, "reason", r.Message)
		}
	}
}

// applyHeld writes the heartbeats held during an outage, once the store is
// back: reconciliation (R-S2) runs on each as it would have then.
func (s *Service) applyHeld() {
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	n := 0
	for _, k := range s.outage.HeldHosts() {
		_, err := s.applyHeartbeat(ctx, k[0], k[1], nil, time.Time{})
		switch {
		case err == nil:
			n++
		case outage.IsStoreDown(err):
			return // down again: the rest waits for the next recovery
		case vdibroker.ErrorCode(err) == vdibroker.EUnauthenticated:
			// Revoked during the outage through another replica (as
			// Heartbeat): the held heartbeat went, its report goes too.
			s.creds.forget(k[0], k[1])
			s.outage.Forget(k[0], k[1])
			s.log.Info("a heartbeat held during the outage was not applied: its host's credential was revoked meanwhile", "pool", k[0], "host", k[1])
		default:
			s.log.Error("apply a heartbeat held during the outage", "pool", k[0], "host", k[1], "err", err)
		}
	}
	if n > 0 {
		s.log.Info("applied the heartbeats held during the outage", "hosts", n)
	}
}

// credentials remembers which host a credential hash belongs to, so a
// heartbeat is authenticated without a read of its own (and during an
// outage at all). A revoked credential still stops working at once: the
// heartbeat carries its credential, and the store applies it only while
// that is the host's (HeartbeatRequest.CredentialHash).
type credentials struct {
	mu sync.Mutex
	m  map[string]*vdibroker.SessionHost
}

const maxCredentials = 1 << 17

func (c *credentials) put(hash string, h *vdibroker.SessionHost) {
	c.mu.Lock()
	defer c.mu.Unlock()
	if c.m == nil || len(c.m) >= maxCredentials {
		c.m = map[string]*vdibroker.SessionHost{}
	}
	c.m[hash] = &vdibroker.SessionHost{HostPool: h.HostPool, Name: h.Name}
}

func (c *credentials) get(hash string) (*vdibroker.SessionHost, bool) {
	c.mu.Lock()
	defer c.mu.Unlock()
	h, ok := c.m[hash]
	return h, ok
}

// forgetHosts is forget for each of pool's hosts, in one walk (a deleted
// pool's thousands of hosts).
func (c *credentials) forgetHosts(pool string, hosts []string) {
	if len(hosts) == 0 {
		return
	}
	gone := make(map[string]bool, len(hosts))
	for _, h := range hosts {
		gone[h] = true
	}
	c.mu.Lock()
	defer c.mu.Unlock()
	for k, h := range c.m {
		if h.HostPool == pool && gone[h.Name] {
			delete(c.m, k)
		}
	}
}

func (c *credentials) forget(pool, host string) {
	c.mu.Lock()
	defer c.mu.Unlock()
	for k, h := range c.m {
		if h.HostPool == pool && h.Name == host {
			delete(c.m, k)
		}
	}
}

// HostByCredential returns the host a credential hash belongs to
// (Unauthenticated when none), for a heartbeat that carries the hash
// (HeartbeatRequest.CredentialHash): a credential this service saw before
// is taken from memory, and the store checks it again when it applies the
// heartbeat. So a full pod's 1,000 heartbeats a second cost no read each
// (on PostgreSQL a round trip and a host decoded), and during an outage
// heartbeats go on being accepted.
func (s *Service) HostByCredential(ctx context.Context, credentialHash string) (*vdibroker.SessionHost, error) {
	if h, ok := s.creds.get(credentialHash); ok {
		return h, nil
	}
	h, err := s.store.HostByCredential(ctx, credentialHash)
	if err == nil {
		s.creds.put(credentialHash, h)
		return h, nil
	}
	if outage.IsStoreDown(err) {
		if h, ok := s.creds.get(credentialHash); ok {
			return h, nil
		}
	}
	return nil, err
}
