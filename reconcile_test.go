package vdibroker_test

import (
	"fmt"
	"slices"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"
	"github.com/google/go-cmp/cmp/cmpopts"
	"pgregory.net/rapid"

	"github.com/vdibroker/vdibroker"
)

// now is the heartbeat's time in the Reconcile tests.
var now = time.Date(2026, 12, 2, 9, 0, 0, 0, time.UTC)

// ago is now minus d.
func ago(d time.Duration) time.Time { return now.Add(-d) }

// Shorthands of the tests' sessions, states and steps.
const (
	pending      = vdibroker.StatePending
	active       = vdibroker.StateActive
	disconnected = vdibroker.StateDisconnected
	loggedOff    = vdibroker.StateLoggedOff
)

// placed is a Pending session the broker placed, created and changed at
// at, not reported yet.
func placed(id, user string, at time.Time) vdibroker.OpenSession {
	return vdibroker.OpenSession{ID: id, User: user, State: pending, CreateTime: at, StateTime: at}
}

// known is a session the host reported as agentID, in state since at
// (created an hour before).
func known(id, user, agentID, state string, at time.Time) vdibroker.OpenSession {
	return vdibroker.OpenSession{ID: id, User: user, State: state, AgentSessionID: agentID, CreateTime: at.Add(-time.Hour), StateTime: at}
}

func report(id, user, state string) vdibroker.AgentSession {
	return vdibroker.AgentSession{ID: id, User: user, State: state}
}

func move(id, from, to, reason string) vdibroker.SessionStep {
	return vdibroker.SessionStep{Kind: vdibroker.StepMove, SessionID: id, From: from, To: to, Reason: reason}
}

func logon(id, agentID, to string) vdibroker.SessionStep {
	return vdibroker.SessionStep{Kind: vdibroker.StepLogon, SessionID: id, AgentSessionID: agentID, From: pending, To: to}
}

func adopt(id, user, agentID, to string) vdibroker.SessionStep {
	return vdibroker.SessionStep{Kind: vdibroker.StepAdopt, SessionID: id, User: user, AgentSessionID: agentID, To: to, CreateTime: now}
}

func askLogoff(id, user, agentID string) vdibroker.SessionStep {
	return vdibroker.SessionStep{Kind: vdibroker.StepAskLogoff, SessionID: id, User: user, AgentSessionID: agentID}
}

// after is o as a step to state to at now left it.
func after(o vdibroker.OpenSession, to string) vdibroker.OpenSession {
	o.State, o.StateTime, o.LogoffQueued = to, now, false
	return o
}

// adopted is the session an Adopt step at now makes.
func adopted(id, user, agentID, state string) vdibroker.OpenSession {
	return vdibroker.OpenSession{ID: id, User: user, State: state, AgentSessionID: agentID, CreateTime: now, StateTime: now}
}

func withLogon(r vdibroker.AgentSession, at time.Time) vdibroker.AgentSession {
	r.LogonTime = &at
	return r
}

// createdAt is a session or an Adopt step with createTime at.
func createdAt[T vdibroker.OpenSession | vdibroker.SessionStep](v T, at time.Time) T {
	switch x := any(&v).(type) {
	case *vdibroker.OpenSession:
		x.CreateTime = at
	case *vdibroker.SessionStep:
		x.CreateTime = at
	}
	return v
}

// newIDs names adopted sessions "new1", "new2"... in the order adopted.
func newIDs() func() string {
	n := 0
	return func() string { n++; return fmt.Sprintf("new%d", n) }
}

func TestReconcile(t *testing.T) {
	pool := vdibroker.NewHostPool("p") // pendingTimeoutSeconds 300, disconnectedSessionTimeoutMinutes 0
	r5 := vdibroker.NewHostPool("p")
	r5.DisconnectedSessionTimeoutMinutes = 60

	alicePlaced := placed("s1", "alice", ago(10*time.Second))
	aliceActive := known("s1", "alice", "7", active, ago(time.Minute))
	aliceAway := known("s1", "alice", "7", disconnected, ago(time.Minute))
	aliceAwayLong := known("s1", "alice", "7", disconnected, ago(61*time.Minute))
	limit1 := vdibroker.NewHostPool("p")
	limit1.MaxSessionLimit = 1

	tests := []struct {
		name            string
		pool            *vdibroker.HostPool
		open            []vdibroker.OpenSession
		reported        []vdibroker.AgentSession
		placedElsewhere map[string]bool
		lastLogoff      map[string]time.Time
		loggedOff       map[string]bool
		recent          int // RecentAdoptions; with placedElsewhere, FactsKnown
		unknown         bool
		want            vdibroker.Reconciliation
	}{
		{
			// R-S2: a host that could not list its sessions (its agent's
			// provider failed before any list) changes nothing: alice's
			// session is not ended, bob is not adopted, though neither is
			// in the (empty, or stale) report.
			name:     "R-S2 a host's unknown sessions stay as they are",
			open:     []vdibroker.OpenSession{aliceActive},
			reported: []vdibroker.AgentSession{report("8", "bob", active)},
			unknown:  true,
			want:     vdibroker.Reconciliation{After: []vdibroker.OpenSession{aliceActive}},
		},
		{
			// R-S2's budget: a pool with maxSessionLimit 1 and nobody on
			// the host: the first of five reports is adopted (the host is
			// then at its limit), the other four are counted.
			name:     "R-S2 adoptions stop at the host's limit",
			pool:     limit1,
			reported: []vdibroker.AgentSession{report("1", "u1", active), report("2", "u2", active), report("3", "u3", active), report("4", "u4", active), report("5", "u5", active)},
			want: vdibroker.Reconciliation{
				Steps:      []vdibroker.SessionStep{adopt("new1", "u1", "1", active)},
				NotAdopted: 4,
				After:      []vdibroker.OpenSession{adopted("new1", "u1", "1", active)},
			},
		},
		{
			// The limit counts the sessions that stay open: alice's
			// placed session (limit 1 reached) leaves no room.
			name:     "R-S2 a host at its limit adopts nothing",
			pool:     limit1,
			open:     []vdibroker.OpenSession{aliceActive},
			reported: []vdibroker.AgentSession{report("7", "alice", active), report("8", "bob", active)},
			want: vdibroker.Reconciliation{
				NotAdopted: 1,
				After:      []vdibroker.OpenSession{aliceActive},
			},
		},
		{
			// ...and a session that ends makes room: alice's is not
			// reported any more, bob is adopted.
			name:     "R-S2 an ended session makes room for an adoption",
			pool:     limit1,
			open:     []vdibroker.OpenSession{aliceActive},
			reported: []vdibroker.AgentSession{report("8", "bob", active)},
			want: vdibroker.Reconciliation{
				// The Adopt steps come before the ends (step 4).
				Steps: []vdibroker.SessionStep{adopt("new1", "bob", "8", active), move("s1", active, loggedOff, vdibroker.EndNotReported)},
				After: []vdibroker.OpenSession{adopted("new1", "bob", "8", active)},
			},
		},
		{
			// R-S2: an adopted session was created when its host says its
			// user logged on (logonTime), unless that is in the future or
			// more than MaxReportedLogonAge ago: then when first heard of.
			// Its state's time is the broker's own either way.
			name: "R-S2 an adopted session's createTime is its reported logon",
			reported: []vdibroker.AgentSession{withLogon(report("1", "bob", active), ago(time.Hour)),
				withLogon(report("2", "dave", disconnected), now.Add(time.Minute)),
				withLogon(report("3", "erin", active), ago(vdibroker.MaxReportedLogonAge+time.Second))},
			want: vdibroker.Reconciliation{
				Steps: []vdibroker.SessionStep{createdAt(adopt("new1", "bob", "1", active), ago(time.Hour)),
					adopt("new2", "dave", "2", disconnected), adopt("new3", "erin", "3", active)},
				After: []vdibroker.OpenSession{createdAt(adopted("new1", "bob", "1", active), ago(time.Hour)),
					adopted("new2", "dave", "2", disconnected), adopted("new3", "erin", "3", active)},
			},
		},
		{
			// The window's budget: with no limit, MaxAdoptions is 200; a
			// host that adopted 199 in the last AdoptionWindow adopts one
			// more. carol was not looked up (FactsKnown): not adopted.
			name:            "R-S2 adoptions per window",
			reported:        []vdibroker.AgentSession{report("1", "bob", active), report("2", "dave", active), report("3", "carol", active)},
			placedElsewhere: map[string]bool{"bob": true, "dave": false},
			recent:          199,
			want: vdibroker.Reconciliation{
				Steps:      []vdibroker.SessionStep{adopt("new1", "dave", "2", active)},
				NotAdopted: 1,
				After:      []vdibroker.OpenSession{adopted("new1", "dave", "2", active)},
			},
		},
		{
			// R-S2: the Pending session whose user shows up becomes
			// Active and takes the host's id.
			name:     "R-S2 a placed session is matched by user and becomes Active",
			open:     []vdibroker.OpenSession{alicePlaced},
			reported: []vdibroker.AgentSession{report("7", "alice", active)},
			want: vdibroker.Reconciliation{
				Steps: []vdibroker.SessionStep{logon("s1", "7", active)},
				After: []vdibroker.OpenSession{{ID: "s1", User: "alice", State: active, AgentSessionID: "7", CreateTime: ago(10 * time.Second), StateTime: now}},
			},
		},
		{
			// R-GW2: a session an RD gateway turned Active before the
			// host reported it is matched by user like a Pending one; its
			// state stays, it is reported now (no longer connecting).
			name:     "R-GW2 a session a gateway turned Active is matched by user",
			open:     []vdibroker.OpenSession{{ID: "s1", User: "alice", State: active, CreateTime: ago(20 * time.Second), StateTime: ago(10 * time.Second)}},
			reported: []vdibroker.AgentSession{report("7", "alice", active)},
			want: vdibroker.Reconciliation{
				Steps: []vdibroker.SessionStep{{Kind: vdibroker.StepLogon, SessionID: "s1", AgentSessionID: "7", From: active, To: active}},
				After: []vdibroker.OpenSession{{ID: "s1", User: "alice", State: active, AgentSessionID: "7", CreateTime: ago(20 * time.Second), StateTime: now}},
			},
		},
		{
			// R-GW2, R-S3: unreported, it stays while the user may still
			// be logging on (a report without it), and ends after
			// pendingTimeoutSeconds since the gateway moved it, whatever
			// that moved it to.
			name: "R-GW2 a gateway's unreported sessions end after the pending timeout",
			open: []vdibroker.OpenSession{
				{ID: "s1", User: "alice", State: active, CreateTime: ago(time.Hour), StateTime: ago(299 * time.Second)},
				{ID: "s2", User: "bob", State: disconnected, CreateTime: ago(time.Hour), StateTime: ago(301 * time.Second)},
			},
			want: vdibroker.Reconciliation{
				Steps: []vdibroker.SessionStep{move("s2", disconnected, loggedOff, vdibroker.EndPendingTimeout)},
				After: []vdibroker.OpenSession{{ID: "s1", User: "alice", State: active, CreateTime: ago(time.Hour), StateTime: ago(299 * time.Second)}},
			},
		},
		{
			// R-S2: a logon first reported disconnected is Disconnected.
			name:     "R-S2 a placed session first reported disconnected",
			open:     []vdibroker.OpenSession{alicePlaced},
			reported: []vdibroker.AgentSession{report("7", "alice", disconnected)},
			want: vdibroker.Reconciliation{
				Steps: []vdibroker.SessionStep{logon("s1", "7", disconnected)},
				After: []vdibroker.OpenSession{{ID: "s1", User: "alice", State: disconnected, AgentSessionID: "7", CreateTime: ago(10 * time.Second), StateTime: now}},
			},
		},
		{
			// R-S2: an agent state other than Disconnected is Active.
			name:     "R-S2 a known session reported as it is changes nothing",
			open:     []vdibroker.OpenSession{aliceActive},
			reported: []vdibroker.AgentSession{report("7", "alice", "Locked")},
			want:     vdibroker.Reconciliation{After: []vdibroker.OpenSession{aliceActive}},
		},
		{
			name:     "R-S2 a session reported disconnected becomes Disconnected",
			open:     []vdibroker.OpenSession{aliceActive},
			reported: []vdibroker.AgentSession{report("7", "alice", disconnected)},
			want: vdibroker.Reconciliation{
				Steps: []vdibroker.SessionStep{move("s1", active, disconnected, "")},
				After: []vdibroker.OpenSession{after(aliceActive, disconnected)},
			},
		},
		{
			name:     "R-S2 a session reported active again becomes Active",
			open:     []vdibroker.OpenSession{aliceAway},
			reported: []vdibroker.AgentSession{report("7", "alice", active)},
			want: vdibroker.Reconciliation{
				Steps: []vdibroker.SessionStep{move("s1", disconnected, active, "")},
				After: []vdibroker.OpenSession{after(aliceAway, active)},
			},
		},
		{
			name: "R-S2 a session no longer reported ends NotReported",
			open: []vdibroker.OpenSession{aliceActive},
			want: vdibroker.Reconciliation{Steps: []vdibroker.SessionStep{move("s1", active, loggedOff, vdibroker.EndNotReported)}},
		},
		{
			// R-S4: the agent was given an admin's logoff; the session
			// it no longer reports ended by it, not unseen.
			name:      "R-S4 a session logged off by an admin ends LoggedOffByAdmin",
			open:      []vdibroker.OpenSession{aliceActive},
			loggedOff: map[string]bool{"s1": true},
			want:      vdibroker.Reconciliation{Steps: []vdibroker.SessionStep{move("s1", active, loggedOff, vdibroker.EndLoggedOffByAdmin)}},
		},
		{
			// R-S5: the broker's own ask since the disconnection.
			name: "R-S5 a session the broker logged off ends DisconnectedTimeout",
			pool: r5,
			open: []vdibroker.OpenSession{func() vdibroker.OpenSession {
				o := aliceAwayLong
				o.LogoffQueued = true
				return o
			}()},
			loggedOff: map[string]bool{"s1": true},
			want:      vdibroker.Reconciliation{Steps: []vdibroker.SessionStep{move("s1", disconnected, loggedOff, vdibroker.EndDisconnectedTimeout)}},
		},
		{
			// A logoff of another session says nothing of this one.
			name:      "R-S2 another session's logoff leaves NotReported",
			open:      []vdibroker.OpenSession{aliceActive},
			loggedOff: map[string]bool{"s2": true},
			want:      vdibroker.Reconciliation{Steps: []vdibroker.SessionStep{move("s1", active, loggedOff, vdibroker.EndNotReported)}},
		},
		{
			// Reported once (it has the host's id) and then no longer:
			// not a logon in progress, so no pending timeout.
			name: "R-S2 a Pending session the host reported before ends NotReported at once",
			open: []vdibroker.OpenSession{known("s1", "alice", "7", pending, ago(time.Second))},
			want: vdibroker.Reconciliation{Steps: []vdibroker.SessionStep{move("s1", pending, loggedOff, vdibroker.EndNotReported)}},
		},
		{
			// R-S3: placed 10 s ago, timeout 300 s: the user may still be
			// logging on.
			name: "R-S3 an unreported Pending session within its timeout stays",
			open: []vdibroker.OpenSession{alicePlaced},
			want: vdibroker.Reconciliation{After: []vdibroker.OpenSession{alicePlaced}},
		},
		{
			// R-S3: 300 s exactly is not past 300 s.
			name: "R-S3 at the timeout exactly it stays",
			open: []vdibroker.OpenSession{placed("s1", "alice", ago(300*time.Second))},
			want: vdibroker.Reconciliation{After: []vdibroker.OpenSession{placed("s1", "alice", ago(300*time.Second))}},
		},
		{
			// R-S3: 301 s > 300 s.
			name: "R-S3 an unreported Pending session past its timeout ends PendingTimeout",
			open: []vdibroker.OpenSession{placed("s1", "alice", ago(301*time.Second))},
			want: vdibroker.Reconciliation{Steps: []vdibroker.SessionStep{move("s1", pending, loggedOff, vdibroker.EndPendingTimeout)}},
		},
		{
			// R-S2: a user who logged on to the host directly.
			name:     "R-S2 an unknown session is adopted",
			reported: []vdibroker.AgentSession{report("9", "bob", disconnected)},
			want: vdibroker.Reconciliation{
				Steps: []vdibroker.SessionStep{adopt("new1", "bob", "9", disconnected)},
				After: []vdibroker.OpenSession{adopted("new1", "bob", "9", disconnected)},
			},
		},
		{
			// R-S2, our choice: the broker placed bob on another host of
			// the pool; this host's word does not give it bob.
			name:            "R-S2 a user placed on another host is not adopted",
			reported:        []vdibroker.AgentSession{report("9", "bob", active)},
			placedElsewhere: map[string]bool{"bob": true},
			want:            vdibroker.Reconciliation{},
		},
		{
			// R-S2: agent ids are the host's own and reused: bob on
			// alice's old id 7 is not alice. Alice ends, bob is adopted;
			// the adoption comes first (steps apply in order, and the
			// store's adoption must not land over a session of the user
			// that this heartbeat ends).
			name:     "R-S2 a reused agent id matches by id and user",
			open:     []vdibroker.OpenSession{aliceActive},
			reported: []vdibroker.AgentSession{report("7", "bob", active)},
			want: vdibroker.Reconciliation{
				Steps: []vdibroker.SessionStep{adopt("new1", "bob", "7", active), move("s1", active, loggedOff, vdibroker.EndNotReported)},
				After: []vdibroker.OpenSession{adopted("new1", "bob", "7", active)},
			},
		},
		{
			// R-S2: alice's report matches her oldest unreported Pending
			// session, s1 (10 s old); s2 (5 s old) waits for its logon.
			name:     "R-S2 the oldest Pending session of the user is matched first",
			open:     []vdibroker.OpenSession{alicePlaced, placed("s2", "alice", ago(5*time.Second))},
			reported: []vdibroker.AgentSession{report("7", "alice", active)},
			want: vdibroker.Reconciliation{
				Steps: []vdibroker.SessionStep{logon("s1", "7", active)},
				After: []vdibroker.OpenSession{
					{ID: "s1", User: "alice", State: active, AgentSessionID: "7", CreateTime: ago(10 * time.Second), StateTime: now},
					placed("s2", "alice", ago(5*time.Second)),
				},
			},
		},
		{
			// User names are compared without regard to case: Alice's
			// placed session is alice's logon (R-E5), not an adoption.
			name:     "R-S2 R-E5 user names are compared in any case",
			open:     []vdibroker.OpenSession{placed("s1", "Alice", ago(10*time.Second))},
			reported: []vdibroker.AgentSession{report("7", "alice", active)},
			want: vdibroker.Reconciliation{
				Steps: []vdibroker.SessionStep{logon("s1", "7", active)},
				After: []vdibroker.OpenSession{{ID: "s1", User: "Alice", State: active, AgentSessionID: "7", CreateTime: ago(10 * time.Second), StateTime: now}},
			},
		},
		{
			// A session the host reported before, reported again with its
			// user in another case, is the same session (R-E5).
			name:     "R-S2 R-E5 a known session reported in another case",
			open:     []vdibroker.OpenSession{{ID: "s1", User: "ÉRIC", State: active, AgentSessionID: "7", CreateTime: ago(time.Minute), StateTime: ago(time.Minute)}},
			reported: []vdibroker.AgentSession{report("7", "éric", disconnected)},
			want: vdibroker.Reconciliation{
				Steps: []vdibroker.SessionStep{move("s1", active, disconnected, "")},
				After: []vdibroker.OpenSession{{ID: "s1", User: "ÉRIC", State: disconnected, AgentSessionID: "7", CreateTime: ago(time.Minute), StateTime: now}},
			},
		},
		{
			// R-OUT3: s0 is alice's placement during an outage, written
			// when the store came back (created 60 s ago, before her
			// logon); s1 is another replica's adoption of that logon
			// (created 5 s ago). The older, acknowledged first, stays and
			// takes the host's id; the twin ends.
			name: "R-OUT3 the twin of an outage placement ends OutagePlacementWritten",
			open: []vdibroker.OpenSession{
				placed("s0", "alice", ago(60*time.Second)),
				{ID: "s1", User: "alice", State: active, AgentSessionID: "7", CreateTime: ago(5 * time.Second), StateTime: ago(5 * time.Second)},
			},
			reported: []vdibroker.AgentSession{report("7", "alice", active)},
			want: vdibroker.Reconciliation{
				Steps: []vdibroker.SessionStep{move("s1", active, loggedOff, vdibroker.EndOutagePlacementWritten), logon("s0", "7", active)},
				After: []vdibroker.OpenSession{{ID: "s0", User: "alice", State: active, AgentSessionID: "7", CreateTime: ago(60 * time.Second), StateTime: now}},
			},
		},
		{
			// R-OUT3: a Pending session newer than the reported one is
			// not its twin's placement (alice connects again elsewhere
			// later): the reported one stays, the Pending one waits.
			name:     "R-OUT3 a newer Pending session leaves the reported one alone",
			open:     []vdibroker.OpenSession{aliceActive, placed("s2", "alice", ago(5*time.Second))},
			reported: []vdibroker.AgentSession{report("7", "alice", active)},
			want:     vdibroker.Reconciliation{After: []vdibroker.OpenSession{aliceActive, placed("s2", "alice", ago(5*time.Second))}},
		},
		{
			// The first report of an id counts; empty ids are skipped:
			// bob's duplicate of id 7 and carol's empty id adopt nobody.
			name:     "R-S2 duplicate and empty agent ids are skipped",
			open:     []vdibroker.OpenSession{aliceActive},
			reported: []vdibroker.AgentSession{report("7", "alice", active), report("7", "bob", active), report("", "carol", active)},
			want:     vdibroker.Reconciliation{After: []vdibroker.OpenSession{aliceActive}},
		},
		{
			// R-S5: disconnected 61 min, limit 60 min, never asked.
			name:     "R-S5 a session disconnected too long is asked to log off",
			pool:     r5,
			open:     []vdibroker.OpenSession{aliceAwayLong},
			reported: []vdibroker.AgentSession{report("7", "alice", disconnected)},
			want: vdibroker.Reconciliation{
				Steps: []vdibroker.SessionStep{askLogoff("s1", "alice", "7")},
				After: []vdibroker.OpenSession{{ID: "s1", User: "alice", State: disconnected, AgentSessionID: "7",
					CreateTime: ago(121 * time.Minute), StateTime: ago(61 * time.Minute), LogoffQueued: true}},
			},
		},
		{
			// R-S5: 59 min < 60 min.
			name:     "R-S5 not before the timeout",
			pool:     r5,
			open:     []vdibroker.OpenSession{known("s1", "alice", "7", disconnected, ago(59*time.Minute))},
			reported: []vdibroker.AgentSession{report("7", "alice", disconnected)},
			want:     vdibroker.Reconciliation{After: []vdibroker.OpenSession{known("s1", "alice", "7", disconnected, ago(59*time.Minute))}},
		},
		{
			// R-S5: once per disconnection.
			name:     "R-S5 a session already asked is not asked again",
			pool:     r5,
			open:     []vdibroker.OpenSession{func() vdibroker.OpenSession { o := aliceAwayLong; o.LogoffQueued = true; return o }()},
			reported: []vdibroker.AgentSession{report("7", "alice", disconnected)},
			want: vdibroker.Reconciliation{After: []vdibroker.OpenSession{func() vdibroker.OpenSession {
				o := aliceAwayLong
				o.LogoffQueued = true
				return o
			}()}},
		},
		{
			// R-S5: the logoff asked 30 min ago failed (LogoffQueued was
			// cleared); 30 min < 60 min: not yet again.
			name:       "R-S5 after a failed logoff not again within the timeout",
			pool:       r5,
			open:       []vdibroker.OpenSession{aliceAwayLong},
			reported:   []vdibroker.AgentSession{report("7", "alice", disconnected)},
			lastLogoff: map[string]time.Time{"s1": ago(30 * time.Minute)},
			want:       vdibroker.Reconciliation{After: []vdibroker.OpenSession{aliceAwayLong}},
		},
		{
			// R-S5: asked 60 min ago, 60 min >= 60 min: ask again.
			name:       "R-S5 after a failed logoff again a full timeout later",
			pool:       r5,
			open:       []vdibroker.OpenSession{aliceAwayLong},
			reported:   []vdibroker.AgentSession{report("7", "alice", disconnected)},
			lastLogoff: map[string]time.Time{"s1": ago(60 * time.Minute)},
			want: vdibroker.Reconciliation{
				Steps: []vdibroker.SessionStep{askLogoff("s1", "alice", "7")},
				After: []vdibroker.OpenSession{{ID: "s1", User: "alice", State: disconnected, AgentSessionID: "7",
					CreateTime: ago(121 * time.Minute), StateTime: ago(61 * time.Minute), LogoffQueued: true}},
			},
		},
		{
			// R-S5: disconnectedSessionTimeoutMinutes 0 is never.
			name:     "R-S5 off by default",
			open:     []vdibroker.OpenSession{aliceAwayLong},
			reported: []vdibroker.AgentSession{report("7", "alice", disconnected)},
			want:     vdibroker.Reconciliation{After: []vdibroker.OpenSession{aliceAwayLong}},
		},
		{
			// R-S5: a disconnected session that reconnects is not asked.
			name:     "R-S5 a session active again is not asked",
			pool:     r5,
			open:     []vdibroker.OpenSession{aliceAwayLong},
			reported: []vdibroker.AgentSession{report("7", "alice", active)},
			want: vdibroker.Reconciliation{
				Steps: []vdibroker.SessionStep{move("s1", disconnected, active, "")},
				After: []vdibroker.OpenSession{after(aliceAwayLong, active)},
			},
		},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			in := vdibroker.HostReport{Pool: tt.pool, Open: tt.open, Reported: tt.reported, Now: now,
				PlacedElsewhere: tt.placedElsewhere, LastLogoff: tt.lastLogoff, LoggedOff: tt.loggedOff, NewID: newIDs(),
				RecentAdoptions: tt.recent, FactsKnown: tt.placedElsewhere != nil, Unknown: tt.unknown}
			if in.Pool == nil {
				in.Pool = pool
			}
			got := vdibroker.Reconcile(in)
			if diff := cmp.Diff(tt.want, got, cmpopts.EquateEmpty()); diff != "" {
				t.Errorf("Reconcile (-want +got):\n%s", diff)
			}
		})
	}
}

// TestReconcileFactsOnlyTakeStepsAway is the contract the store relies on
// when it calls Reconcile without the facts, looks up the users of its
// Adopt steps, the sessions of its AskLogoff steps and those it ends
// NotReported, and the host's recent adoptions, and calls it again: with
// any such facts, the steps are those without them, less the adoptions of
// users placed elsewhere or past the window's budget and the logoffs asked
// recently, with the reason of a logged-off session's end named, and the
// sessions after are those without them, less the adoptions.
func TestReconcileFactsOnlyTakeStepsAway(t *testing.T) {
	rapid.Check(t, func(t *rapid.T) {
		users := []string{"alice", "bob", "carol"}
		states := []string{pending, active, disconnected}
		pool := vdibroker.NewHostPool("p")
		pool.DisconnectedSessionTimeoutMinutes = rapid.SampledFrom([]int{0, 1, 60}).Draw(t, "disconnectedMinutes")
		var open []vdibroker.OpenSession
		for i := range rapid.IntRange(0, 5).Draw(t, "open") {
			o := vdibroker.OpenSession{ID: fmt.Sprintf("s%d", i), User: rapid.SampledFrom(users).Draw(t, "user"),
				State: rapid.SampledFrom(states).Draw(t, "state"), LogoffQueued: rapid.Bool().Draw(t, "queued")}
			if rapid.Bool().Draw(t, "reported before") {
				o.AgentSessionID = rapid.SampledFrom([]string{"1", "2", "3"}).Draw(t, "agent id")
			}
			o.StateTime = ago(time.Duration(rapid.IntRange(0, 7200).Draw(t, "state age s")) * time.Second)
			o.CreateTime = o.StateTime.Add(-time.Duration(rapid.IntRange(0, 60).Draw(t, "create before state s")) * time.Second)
			open = append(open, o)
		}
		var reported []vdibroker.AgentSession
		for range rapid.IntRange(0, 4).Draw(t, "reported") {
			reported = append(reported, report(rapid.SampledFrom([]string{"1", "2", "3", "4"}).Draw(t, "report id"),
				rapid.SampledFrom(users).Draw(t, "report user"), rapid.SampledFrom(states[1:]).Draw(t, "report state")))
		}
		pool.MaxSessionLimit = rapid.SampledFrom([]int{1, 2, 3, vdibroker.NoSessionLimit}).Draw(t, "maxSessionLimit")
		lastLogoff := map[string]time.Time{}
		for _, o := range open {
			if rapid.Bool().Draw(t, "asked before "+o.ID) {
				lastLogoff[o.ID] = ago(time.Duration(rapid.IntRange(0, 7200).Draw(t, "asked age s")) * time.Second)
			}
		}
		loggedOffBy := map[string]bool{}
		queued := map[string]bool{}
		for _, o := range open {
			loggedOffBy[o.ID] = rapid.Bool().Draw(t, "logoff given "+o.ID)
			queued[o.ID] = o.LogoffQueued
		}
		in := vdibroker.HostReport{Pool: pool, Open: open, Reported: reported, Now: now}
		without := vdibroker.Reconcile(in)
		// The facts of the users of the Adopt steps, as the store looks
		// them up.
		placedElsewhere := map[string]bool{}
		for _, st := range without.Steps {
			if st.Kind == vdibroker.StepAdopt {
				placedElsewhere[st.User] = rapid.Bool().Draw(t, "placed elsewhere "+st.User)
			}
		}
		maxAdopt := vdibroker.MaxAdoptions(pool.MaxSessionLimit)
		recent := rapid.SampledFrom([]int{0, maxAdopt - 1, maxAdopt}).Draw(t, "recent adoptions")
		in.PlacedElsewhere, in.LastLogoff, in.LoggedOff, in.RecentAdoptions, in.FactsKnown = placedElsewhere, lastLogoff, loggedOffBy, recent, true
		with := vdibroker.Reconcile(in)

		limit := time.Duration(pool.DisconnectedSessionTimeoutMinutes) * time.Minute
		var want []vdibroker.SessionStep
		dropped := map[string]bool{}
		budget := maxAdopt - recent
		for _, st := range without.Steps {
			switch {
			case st.Kind == vdibroker.StepAdopt && (placedElsewhere[st.User] || budget == 0):
				dropped[st.SessionID] = true
			case st.Kind == vdibroker.StepAdopt:
				budget--
				want = append(want, st)
			case st.Kind == vdibroker.StepAskLogoff && !lastLogoff[st.SessionID].IsZero() && now.Sub(lastLogoff[st.SessionID]) < limit:
			case st.Reason == vdibroker.EndNotReported && loggedOffBy[st.SessionID]:
				// The fact names the end's reason, and changes nothing else.
				st.Reason = vdibroker.EndLoggedOffByAdmin
				if queued[st.SessionID] {
					st.Reason = vdibroker.EndDisconnectedTimeout
				}
				want = append(want, st)
			default:
				want = append(want, st)
			}
		}
		if diff := cmp.Diff(stepsByRole(want), stepsByRole(with.Steps)); diff != "" {
			t.Fatalf("steps with facts (-want +got):\n%s", diff)
		}
		var wantAfter []string
		for _, o := range without.After {
			if !dropped[o.ID] {
				wantAfter = append(wantAfter, o.User+"/"+o.AgentSessionID+"/"+o.State)
			}
		}
		var gotAfter []string
		for _, o := range with.After {
			gotAfter = append(gotAfter, o.User+"/"+o.AgentSessionID+"/"+o.State)
		}
		if !slices.Equal(wantAfter, gotAfter) {
			t.Fatalf("sessions after with facts %v, want %v", gotAfter, wantAfter)
		}
	})
}

// stepsByRole is steps with the IDs of adopted sessions (made anew by each
// Reconcile) left out.
func stepsByRole(steps []vdibroker.SessionStep) []vdibroker.SessionStep {
	out := slices.Clone(steps)
	for i := range out {
		if out[i].Kind == vdibroker.StepAdopt {
			out[i].SessionID = ""
		}
	}
	return out
}
