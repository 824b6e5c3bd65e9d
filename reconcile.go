package vdibroker

import (
	"slices"
	"time"
)

// OpenSession is what reconciliation (R-S2) knows of one of a host's open
// sessions: its row as the store read it under the host's lock.
type OpenSession struct {
	ID   string
	User string
	// State is Pending, Active or Disconnected.
	State string
	// AgentSessionID is the host's own id for the session, once the host
	// has reported it.
	AgentSessionID string
	CreateTime     time.Time
	StateTime      time.Time
	// LogoffQueued: an R-S5 logoff was asked since the session last
	// changed state.
	LogoffQueued bool
}

// HostReport is one heartbeat's sessions set against the broker's own for
// the host: what Reconcile decides from.
type HostReport struct {
	// Pool is the host's pool: its PendingTimeout (R-S3) and
	// DisconnectedSessionTimeoutMinutes (R-S5).
	Pool *HostPool
	// Open are the host's open sessions, oldest first (by create time,
	// then ID).
	Open []OpenSession
	// Reported are the sessions the host reports, in its order.
	Reported []AgentSession
	Now      time.Time

	// Two facts about rows of other hosts and of the commands, which the
	// store looks up only for the sessions whose step depends on them
	// (see Reconcile).

	// PlacedElsewhere holds the users looked up for adoption: true for
	// those the broker placed (not adopted) on another host of the pool.
	// With FactsKnown, a user it does not hold is not adopted by this
	// call: nobody looked at where the broker placed them.
	PlacedElsewhere map[string]bool
	// LastLogoff holds, by session ID, when a logoff of the session was
	// last asked of the host's agent (R-S4, R-S5).
	LastLogoff map[string]time.Time
	// LoggedOff holds the sessions whose logoff the host's agent was given
	// (delivered, and not reported failed): one the host stops reporting
	// ended by that logoff, an admin's (R-S4) or the broker's (R-S5), not
	// unseen (NotReported).
	LoggedOff map[string]bool
	// RecentAdoptions is how many sessions the host adopted in the
	// AdoptionWindow before Now, ended ones included (the adoption
	// budget, MaxAdoptions).
	RecentAdoptions int
	// FactsKnown says that PlacedElsewhere (for the users of the Adopt
	// steps of a call without facts), LastLogoff and RecentAdoptions were
	// looked up.
	FactsKnown bool

	// NewID names adopted sessions; nil is NewID.
	NewID func() string
	// Unknown says the host could not list its sessions
	// (HeartbeatRequest.SessionsUnknown): Reported is not its word, and
	// nothing is matched, adopted or ended.
	Unknown bool
}

// SessionStepKind names what a SessionStep does to a session.
type SessionStepKind string

// The steps of reconciliation.
const (
	// StepMove moves session SessionID from state From to state To (with
	// Reason when To is LoggedOff), if it is still in From.
	StepMove SessionStepKind = "Move"
	// StepLogon records the host's first report of a session the broker
	// placed: its AgentSessionID, and its state From (Pending, or what a
	// gateway's report made it, R-GW2) to To, if it is still in From and
	// unreported. The session no longer counts as connecting.
	StepLogon SessionStepKind = "Logon"
	// StepAdopt records a session the broker did not place: SessionID,
	// User, AgentSessionID, in state To, created and changed at Now,
	// marked adopted.
	StepAdopt SessionStepKind = "Adopt"
	// StepAskLogoff queues a logoff of session SessionID (User,
	// AgentSessionID) for the host's agent and marks it asked (R-S5).
	StepAskLogoff SessionStepKind = "AskLogoff"
)

// SessionStep is one change reconciliation makes; the store applies the
// steps in their order, each in SQL alone.
type SessionStep struct {
	Kind           SessionStepKind
	SessionID      string
	User           string
	AgentSessionID string
	From, To       string
	Reason         string
	// CreateTime is an adopted session's (StepAdopt): AdoptedCreateTime.
	CreateTime time.Time
}

// Reconciliation is what Reconcile decided.
type Reconciliation struct {
	// Steps are the changes, in the order they are to be applied.
	Steps []SessionStep
	// NotAdopted counts the reported sessions the adoption budget left
	// out (MaxAdoptions): the host reports them, the broker does not
	// record them (this heartbeat).
	NotAdopted int
	// After are the host's open sessions once the steps are applied: the
	// open ones given that stay open, in their order, then the adopted
	// ones. It is what R-LI6's base is counted from (Resample).
	After []OpenSession
}

// Reconcile is R-S2 (with R-S3 and R-S5 on the same heartbeat): it sets a
// host's report of its sessions against the broker's open sessions for the
// host, and returns the steps that bring the broker's to what the host
// says. It reads nothing and writes nothing; the store applies the steps.
//
//  1. Each reported session (the first with a given ID; empty IDs are
//     skipped) wants state Disconnected when reported disconnected, else
//     Active. It is matched, in this order:
//     a. to the open session carrying its agent id and user (agent ids are
//     the host's own and may be reused: bob on alice's old id is not
//     alice);
//     b. else to its user's oldest open session the host has not
//     reported yet (Pending, or moved by an RD gateway's report, R-GW2; a
//     placed session is matched by user name, SPEC §9): a Logon step;
//     c. else the session is a candidate for adoption (step 4).
//     A session matched by (a) while its user also has an older unreported
//     Pending session is the twin of an outage placement (R-OUT3): one
//     replica adopted the logon while another wrote the session it placed
//     for it. The one acknowledged first stays: the twin ends
//     (OutagePlacementWritten) and the report matches the Pending one.
//     A matched session in another state than wanted moves to it.
//  2. An open session not matched ends: one the host never reported
//     (Pending, or moved by a gateway) after pendingTimeoutSeconds since
//     its last change (R-S3, PendingTimeout; before that the user may
//     still be logging on), any other at once: by the logoff its agent
//     was given (LoggedOff), an admin's (R-S4, LoggedOffByAdmin) or the
//     broker's after the disconnected timeout (R-S5, DisconnectedTimeout),
//     else NotReported.
//  3. With disconnectedSessionTimeoutMinutes above 0, a session
//     disconnected (and not changed since) for that long is asked to log
//     off, once per disconnection, and after a failed logoff again only a
//     full timeout after the last request (R-S5).
//  4. The candidates for adoption are adopted in the order reported, as
//     many as the adoption budget allows (adoptionBudget: the host's
//     open sessions, those step 2 ends aside, up to its maxSessionLimit,
//     and MaxAdoptions per AdoptionWindow), each unless mayAdopt refuses
//     it; those the budget leaves out are counted in NotAdopted. The
//     Adopt steps go before those of steps 2 and 3: the store checks an
//     adoption against the user's open sessions as they were before the
//     report ended any (R-C6 holds at every commit).
//
// User names are compared without regard to case (FoldUser, R-E5): a host
// that reports ALICE@contoso.com logs on the session placed for
// Alice@Contoso.com.
//
// A caller that does not know the facts (PlacedElsewhere, LastLogoff,
// LoggedOff, RecentAdoptions) calls Reconcile without them (nobody placed
// elsewhere, no logoff asked before, no recent adoption), looks up the
// users of its Adopt steps, the sessions of its AskLogoff steps and those
// its NotReported steps end, and the host's recent adoptions, and, when
// there are any such steps, calls it again with what it found and
// FactsKnown: the facts only take Adopt and AskLogoff steps away and name
// an end's reason, and no other step depends on those.
func Reconcile(r HostReport) Reconciliation {
	if r.Unknown {
		// No word from the host: its sessions stay as they are; a
		// Pending one still ends by the maintenance loop's R-S3.
		return Reconciliation{After: r.Open}
	}
	rc := newReconciler(r)
	rc.matchReported()
	matched := len(rc.steps)
	rc.endUnreported()
	rc.askLogoffs()
	rc.adoptCandidates(matched)
	// The sessions still open, in place: a heartbeat reconciles every
	// host's sessions, and each copy is one more per heartbeat.
	after := rc.sessions[:0]
	for _, o := range rc.sessions {
		if o.State != StateLoggedOff {
			after = append(after, o)
		}
	}
	return Reconciliation{Steps: rc.steps, After: after, NotAdopted: rc.notAdopted}
}

// AdoptionWindow and MaxAdoptions bound what one host may adopt (R-S2):
// at most MaxAdoptions(maxSessionLimit) sessions per AdoptionWindow,
// ended ones included, so that a host reporting thousands of new users
// heartbeat after heartbeat writes a bounded number of rows.
const AdoptionWindow = time.Hour

// MaxAdoptions is how many sessions a host of a pool with limit
// maxSessionLimit may adopt per AdoptionWindow: its limit, at least 10
// (a desktop's user logging on again and again) and at most 200 (the
// default limit is no limit; a host with more users than that adopts
// them over several windows).
func MaxAdoptions(maxSessionLimit int) int {
	return min(max(maxSessionLimit, 10), 200)
}

// adoptionBudget is how many sessions this report may adopt, open being
// the host's open sessions once the other steps are applied: up to the
// pool's maxSessionLimit, and what is left of MaxAdoptions in the window.
func (r *HostReport) adoptionBudget(open int) int {
	limit := r.Pool.MaxSessionLimit
	if limit <= 0 {
		limit = NoSessionLimit
	}
	return max(min(limit-open, MaxAdoptions(limit)-r.RecentAdoptions), 0)
}

// mayAdopt is the adoption rule (R-S2): a session the broker did not place
// (a user who logged on to the host directly) is adopted, unless the broker
// placed that user on another host of the pool: a host's word does not move
// a user off the session the broker gave them (a rogue host cannot capture
// users by reporting their names). An adopted session is a fact, counted
// against the host's limit and load; whether a connect may answer it is
// placement's question (placement.AnswersAdopted, R-C1).
func (r *HostReport) mayAdopt(user string) bool {
	return !r.PlacedElsewhere[user]
}

// reconciler is one Reconcile. Sessions are named by their index in
// sessions.
type reconciler struct {
	HostReport
	// sessions are the open sessions given, then the adopted ones, as
	// the steps so far left them.
	sessions []OpenSession
	// seen[i]: a report matched sessions[i] (or it is the twin a report
	// ended).
	seen          []bool
	byAgent       map[string]int
	pendingByUser map[string][]int
	steps         []SessionStep
	// candidates are the reports matched to no session (step 1c), in
	// the order reported; notAdopted counts those the budget left out.
	candidates []candidate
	notAdopted int
}

// candidate is a report to adopt in state want.
type candidate struct {
	rep  AgentSession
	want string
}

func newReconciler(r HostReport) *reconciler {
	rc := &reconciler{HostReport: r, sessions: slices.Clone(r.Open), seen: make([]bool, len(r.Open)),
		byAgent: make(map[string]int, len(r.Open)), pendingByUser: map[string][]int{}}
	for i, o := range r.Open {
		if o.AgentSessionID != "" {
			rc.byAgent[agentKey(o.AgentSessionID, o.User)] = i
		} else {
			// Pending, or turned Active or Disconnected by a gateway's
			// report before the host reported it (R-GW2): both wait
			// for the host's word.
			k := FoldUser(o.User)
			rc.pendingByUser[k] = append(rc.pendingByUser[k], i)
		}
	}
	return rc
}

// agentKey is how a report finds a session the host reported before: by
// the host's id and the user together (in any case, R-E5).
func agentKey(id, user string) string { return id + "\x00" + FoldUser(user) }

// matchReported is step 1 of Reconcile.
func (rc *reconciler) matchReported() {
	reported := make(map[string]bool, len(rc.Reported))
	for _, rep := range rc.Reported {
		if rep.ID == "" || reported[rep.ID] {
			continue
		}
		reported[rep.ID] = true
		want := StateActive
		if rep.State == StateDisconnected {
			want = StateDisconnected
		}
		i, ok := rc.byAgent[agentKey(rep.ID, rep.User)]
		if l := rc.pendingByUser[FoldUser(rep.User)]; ok && len(l) > 0 && rc.sessions[l[0]].CreateTime.Before(rc.sessions[i].CreateTime) {
			rc.move(i, StateLoggedOff, EndOutagePlacementWritten)
			rc.seen[i] = true
			ok = false
		}
		if !ok {
			i, ok = rc.logon(rep, want)
		}
		if !ok {
			rc.candidates = append(rc.candidates, candidate{rep, want})
			continue
		}
		rc.seen[i] = true
		if rc.sessions[i].State != want {
			rc.move(i, want, "")
		}
	}
}

// logon matches rep to its user's oldest open session the host has not
// reported yet (step 1b), if there is one, and records the logon.
func (rc *reconciler) logon(rep AgentSession, want string) (int, bool) {
	k := FoldUser(rep.User)
	l := rc.pendingByUser[k]
	if len(l) == 0 {
		return 0, false
	}
	i := l[0]
	rc.pendingByUser[k] = l[1:]
	o := &rc.sessions[i]
	rc.steps = append(rc.steps, SessionStep{Kind: StepLogon, SessionID: o.ID, AgentSessionID: rep.ID, From: o.State, To: want})
	o.AgentSessionID = rep.ID
	o.State, o.StateTime, o.LogoffQueued = want, rc.Now, false
	return i, true
}

// adoptCandidates is step 4 of Reconcile: the reports that matched none
// of the broker's sessions are adopted, within the budget, unless mayAdopt
// refuses them; their steps go at index at of the steps.
func (rc *reconciler) adoptCandidates(at int) {
	if len(rc.candidates) == 0 {
		return
	}
	open := 0
	for _, o := range rc.sessions {
		if o.State != StateLoggedOff {
			open++
		}
	}
	budget := rc.adoptionBudget(open)
	// With the facts, only the candidates a call without them adopted
	// (the first ones, as many as the budget without recent adoptions)
	// were looked up; the others wait for a later heartbeat.
	considered := len(rc.candidates)
	if rc.FactsKnown {
		without := rc.HostReport
		without.RecentAdoptions = 0
		considered = min(considered, without.adoptionBudget(open))
	}
	newID := rc.NewID
	if newID == nil {
		newID = NewID
	}
	var adopts []SessionStep
	for i, c := range rc.candidates {
		_, looked := rc.PlacedElsewhere[c.rep.User]
		switch {
		case budget == 0 || i >= considered || (rc.FactsKnown && !looked):
			rc.notAdopted++
			continue
		case !rc.mayAdopt(c.rep.User):
			continue
		}
		budget--
		o := OpenSession{ID: newID(), User: c.rep.User, State: c.want, AgentSessionID: c.rep.ID,
			CreateTime: AdoptedCreateTime(c.rep.LogonTime, rc.Now), StateTime: rc.Now}
		adopts = append(adopts, SessionStep{Kind: StepAdopt, SessionID: o.ID, User: o.User, AgentSessionID: c.rep.ID, To: c.want, CreateTime: o.CreateTime})
		rc.sessions = append(rc.sessions, o)
		rc.seen = append(rc.seen, true)
	}
	rc.steps = slices.Insert(rc.steps, at, adopts...)
}

// endUnreported is step 2 of Reconcile.
func (rc *reconciler) endUnreported() {
	for i, o := range rc.sessions {
		switch {
		case rc.seen[i]:
		case o.AgentSessionID == "":
			// Never reported (Pending, or moved by a gateway, R-GW2):
			// the user may still be logging on.
			if rc.Now.Sub(o.StateTime) > rc.Pool.PendingTimeout() {
				rc.move(i, StateLoggedOff, EndPendingTimeout)
			}
		case rc.LoggedOff[o.ID] && o.LogoffQueued:
			// The broker's own ask (R-S5) is the one since the
			// session last changed state.
			rc.move(i, StateLoggedOff, EndDisconnectedTimeout)
		case rc.LoggedOff[o.ID]:
			rc.move(i, StateLoggedOff, EndLoggedOffByAdmin)
		default:
			rc.move(i, StateLoggedOff, EndNotReported)
		}
	}
}

// askLogoffs is step 3 of Reconcile.
func (rc *reconciler) askLogoffs() {
	if rc.Pool.DisconnectedSessionTimeoutMinutes <= 0 {
		return
	}
	limit := time.Duration(rc.Pool.DisconnectedSessionTimeoutMinutes) * time.Minute
	for i := range rc.sessions {
		o := &rc.sessions[i]
		if o.State != StateDisconnected || o.LogoffQueued || rc.Now.Sub(o.StateTime) < limit {
			continue
		}
		if last, ok := rc.LastLogoff[o.ID]; ok && rc.Now.Sub(last) < limit {
			continue
		}
		rc.steps = append(rc.steps, SessionStep{Kind: StepAskLogoff, SessionID: o.ID, User: o.User, AgentSessionID: o.AgentSessionID})
		o.LogoffQueued = true
	}
}

// move records a state change of sessions[i].
func (rc *reconciler) move(i int, to, reason string) {
	o := &rc.sessions[i]
	rc.steps = append(rc.steps, SessionStep{Kind: StepMove, SessionID: o.ID, From: o.State, To: to, Reason: reason})
	o.State, o.StateTime, o.LogoffQueued = to, rc.Now, false
}

// MaxReportedLogonAge bounds how long ago a host may say a session it
// reports began (AgentSession.LogonTime).
const MaxReportedLogonAge = 366 * 24 * time.Hour

// AdoptedCreateTime is when a session the broker did not place began, for
// its record (R-S2): the logon time its host reported, if it reported one
// no later than now and no longer than MaxReportedLogonAge ago; else now,
// when the broker first heard of it. Only its record shows it: the
// state's time, which the disconnected-session timeout (R-S5) and the
// Pending expiry (R-S3) count from, is always the broker's own.
func AdoptedCreateTime(logon *time.Time, now time.Time) time.Time {
	if logon == nil || logon.After(now) || now.Sub(*logon) > MaxReportedLogonAge {
		return now
	}
	return logon.UTC()
}
