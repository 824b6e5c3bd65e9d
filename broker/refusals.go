package broker

import (
	"context"
	"fmt"
	"sync"
	"time"

	"github.com/vdibroker/vdibroker"
)

// The bounded refusal audit (R-SEC, vdibroker.AuditService.RecordRefusal):
// a caller without a valid API credential can cause as many refusals as
// it sends requests, so they are not written one row each. Per window
// (vdibroker.RefusalWindow) and key (address, credential kind and id):
// the first refusal is written whole while the window's budget lasts;
// the rest are counted, and each key's count becomes one summary entry
// when the window closes, under a second budget of the same size; what
// that leaves is one entry for every other address together. So a window
// writes at most 2 × RefusalsPerWindow + 1 entries, each of bounded size
// (AuditEntry.Bound), however many addresses send however many requests;
// memory holds at most maxRefusalKeys keys.
//
// A caller with a valid API credential (the admin token, an API token,
// an OpenID Connect identity: AuditPrincipal.HoldsAPICredential) names a
// credential to revoke, so its refusals are kept apart, per principal:
// the first vdibroker.PrincipalRefusalsPerWindow of each window are
// written whole, the rest counted into one summary entry per principal
// when the window closes. An end user signed in through the portal holds
// such a credential and can send as many refused requests as it likes:
// written one by one they filled the store at the rate it sent them. Now
// a window writes at most PrincipalRefusalsPerWindow + 1 entries per
// principal, for at most maxRefusalKeys principals, and one entry for
// every other principal together.

// maxRefusalKeys bounds the keys one window counts; later keys are
// counted together.
const maxRefusalKeys = 4096

// refusals is one replica's count of the current window.
type refusals struct {
	// byPrincipal: the refusals of callers with a valid API credential,
	// counted per principal with a budget of whole entries each and a
	// summary each; otherwise per address and credential, with one budget
	// for the window.
	byPrincipal bool

	mu      sync.Mutex
	start   time.Time // of the current window (zero: none yet)
	keys    map[string]*refusalTally
	written int // whole entries written this window
	// others counts the refusals of keys past maxRefusalKeys.
	others refusalTally
}

// refusalTally is one key's refusals in the window: how many were
// written whole (byPrincipal), how many not, and the latest of those.
type refusalTally struct {
	written int
	counted int
	last    *vdibroker.AuditEntry
	// names says the counted refusals name more than one principal name
	// under one kind and id (a peer pod's calls, each for a user): the
	// summary then names none, not the last one's.
	names bool
}

// RecordRefusal implements vdibroker.AuditService.
func (s *Service) RecordRefusal(ctx context.Context, e *vdibroker.AuditEntry) (bool, error) {
	r := &s.refusals
	if e.Principal.HoldsAPICredential() {
		r = &s.principalRefusals
	}
	return s.recordRefusal(ctx, r, e)
}

// recordRefusal counts e in r, writes it if r says so, and writes the
// summaries of a window that closed.
func (s *Service) recordRefusal(ctx context.Context, r *refusals, e *vdibroker.AuditEntry) (bool, error) {
	e.Bound()
	e.Outcome = vdibroker.AuditRefused
	now := s.now()
	if e.Time.IsZero() {
		e.Time = now.UTC()
	}
	summaries, write := r.add(e, now)
	s.writeSummaries(ctx, summaries)
	if !write {
		return false, nil
	}
	if err := s.store.AppendAudit(context.WithoutCancel(ctx), e); err != nil {
		return false, err
	}
	return true, nil
}

// flushRefusals writes the summaries of a window that closed (the
// maintenance loop calls it, so a window's counts are written though no
// refusal follows).
func (s *Service) flushRefusals(ctx context.Context) {
	now := s.now()
	s.writeSummaries(ctx, s.refusals.roll(now, false))
	s.writeSummaries(ctx, s.principalRefusals.roll(now, false))
}

// writeSummaries writes a closed window's summary entries, each also a
// log line "audit" as the HTTP layer logs the entries it writes.
func (s *Service) writeSummaries(ctx context.Context, list []*vdibroker.AuditEntry) {
	for _, e := range list {
		if err := s.store.AppendAudit(context.WithoutCancel(ctx), e); err != nil {
			s.log.Error("audit: cannot record a summary of refusals", "err", err, "remoteAddress", e.RemoteAddr)
			continue
		}
		s.log.Info("audit", "audit", e)
	}
}

// key is who a refusal is counted for.
func (r *refusals) key(e *vdibroker.AuditEntry) string {
	if r.byPrincipal {
		return e.Principal.Kind + "\x00" + e.Principal.ID
	}
	return e.RemoteAddr + "\x00" + e.Principal.Kind + "\x00" + e.Principal.ID
}

// add counts e at now and says whether to write it whole; it returns the
// summaries of a window that closed.
func (r *refusals) add(e *vdibroker.AuditEntry, now time.Time) (summaries []*vdibroker.AuditEntry, write bool) {
	r.mu.Lock()
	defer r.mu.Unlock()
	summaries = r.rollLocked(now, false)
	if r.start.IsZero() {
		r.start = now
	}
	k := r.key(e)
	t := r.keys[k]
	switch {
	case t == nil && len(r.keys) >= maxRefusalKeys:
		r.others.counted++
		r.others.last = e
		return summaries, false
	case t == nil:
		t = &refusalTally{}
		r.keys[k] = t
		if !r.byPrincipal && r.written < vdibroker.RefusalsPerWindow {
			r.written++
			return summaries, true
		}
	}
	if r.byPrincipal && t.written < vdibroker.PrincipalRefusalsPerWindow {
		t.written++
		return summaries, true
	}
	if t.last != nil && t.last.Principal.Name != e.Principal.Name {
		t.names = true
	}
	t.counted++
	t.last = e
	return summaries, false
}

// roll closes the window when it is over (or at once with force) and
// returns its summary entries.
func (r *refusals) roll(now time.Time, force bool) []*vdibroker.AuditEntry {
	r.mu.Lock()
	defer r.mu.Unlock()
	return r.rollLocked(now, force)
}

func (r *refusals) rollLocked(now time.Time, force bool) []*vdibroker.AuditEntry {
	if r.keys == nil {
		r.keys = map[string]*refusalTally{}
	}
	if r.start.IsZero() || (!force && now.Sub(r.start) < vdibroker.RefusalWindow) {
		return nil
	}
	start := r.start
	var out []*vdibroker.AuditEntry
	rest := r.others
	for _, t := range r.keys {
		if t.counted == 0 {
			continue
		}
		// Every principal's count is its own entry (at most
		// maxRefusalKeys): it names a credential to revoke.
		if r.byPrincipal || len(out) < vdibroker.RefusalsPerWindow {
			out = append(out, summary(t, start, now, r.byPrincipal, false))
			continue
		}
		rest.counted += t.counted
		rest.last = t.last
	}
	if rest.counted > 0 {
		out = append(out, summary(&rest, start, now, r.byPrincipal, true))
	}
	r.keys, r.others, r.written, r.start = map[string]*refusalTally{}, refusalTally{}, 0, time.Time{}
	return out
}

// summary is the entry of t's counted refusals in the window from start
// to end, of a principal's (byPrincipal) or an address's; others: of
// every principal or address left over.
func summary(t *refusalTally, start, end time.Time, byPrincipal, others bool) *vdibroker.AuditEntry {
	last := t.last
	e := &vdibroker.AuditEntry{Time: end.UTC(), Principal: last.Principal, RemoteAddr: last.RemoteAddr,
		Action: vdibroker.RefusalSummaryAction, Target: last.Target, HostPool: last.HostPool,
		Outcome: vdibroker.AuditRefused}
	who := "from " + last.RemoteAddr
	switch {
	case others && byPrincipal:
		e.Principal, e.RemoteAddr, e.Target, e.HostPool = vdibroker.AuditPrincipal{Kind: vdibroker.PrincipalAnonymous}, "", "", ""
		who = "of other credentials"
	case others:
		e.Principal, e.RemoteAddr, e.Target, e.HostPool = vdibroker.AuditPrincipal{Kind: vdibroker.PrincipalAnonymous}, "", "", ""
		who = "from other addresses"
	case t.names:
		// A pod's calls for several users (R-G5): the summary is the
		// pod's, and names none of them. A pod holds no API credential
		// (AuditPrincipal.HoldsAPICredential): its refusals are counted
		// by address, so this is not of byPrincipal alone.
		e.Principal.Name = ""
		who = fmt.Sprintf("of %s %s for several users (the last from %s, for %s)", last.Principal.Kind, last.Principal.ID, last.RemoteAddr, last.Principal.Name)
	case byPrincipal:
		who = fmt.Sprintf("of %s %s (the last from %s)", last.Principal.Kind, last.Principal.ID, last.RemoteAddr)
	}
	e.Error = fmt.Sprintf("%d more refused requests %s between %s and %s, not recorded one by one; the last: %s %s: %s",
		t.counted, who, start.UTC().Format(time.RFC3339), end.UTC().Format(time.RFC3339), last.Action, last.Target, last.Error)
	e.Bound()
	return e
}
