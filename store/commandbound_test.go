package store_test

import (
	"context"
	"fmt"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"

	"github.com/vdibroker/vdibroker"
	"github.com/vdibroker/vdibroker/store"
)

// activeOnH1 places alice and bob on pool1's h1 and reports them Active
// (agent sessions 1 and 2); it returns their session ids.
func activeOnH1(t *testing.T, s *store.DB) (alice, bob string) {
	t.Helper()
	mustPool(t, s, pool("pool1", vdibroker.Pooled))
	mustHost(t, s, "pool1", "h1", "h2")
	alice = mustCommit(t, s, placement("pool1", "h1", "alice", 10))
	bob = mustCommit(t, s, placement("pool1", "h1", "bob", 10))
	if _, err := s.ApplyHeartbeat(t.Context(), "pool1", "h1", &vdibroker.HeartbeatRequest{Sessions: []vdibroker.AgentSession{
		{ID: "1", User: "alice", State: vdibroker.StateActive}, {ID: "2", User: "bob", State: vdibroker.StateActive}}}, t0.Add(time.Second)); err != nil {
		t.Fatal(err)
	}
	return alice, bob
}

// delivered is what h1's next heartbeat is handed, as "user message".
func delivered(t *testing.T, s *store.DB, at time.Duration) []string {
	t.Helper()
	res, err := s.ApplyHeartbeat(t.Context(), "pool1", "h1", &vdibroker.HeartbeatRequest{Sessions: []vdibroker.AgentSession{
		{ID: "1", User: "alice", State: vdibroker.StateActive}, {ID: "2", User: "bob", State: vdibroker.StateActive}}}, t0.Add(at))
	if err != nil {
		t.Fatal(err)
	}
	var got []string
	for _, c := range res.Commands {
		got = append(got, c.User+" "+c.Message)
	}
	slices.Sort(got)
	return got
}

// TestMessageQueuedOnce_RS4: a message to a session with the same text
// still queued for it is answered with that command, not queued again (a
// second click, a script run again); another text is queued. A host's
// message counts a session that has it queued already and queues it only
// for the others. Once delivered, the same text may be sent again.
func TestMessageQueuedOnce_RS4(t *testing.T) {
	each(t, func(t *testing.T, s *store.DB) {
		ctx := t.Context()
		alice, _ := activeOnH1(t, s)
		msg := func(text string) string {
			c := &vdibroker.Command{HostPool: "pool1", SessionHost: "h1", Type: vdibroker.CommandSendMessage, SessionID: alice, Message: text}
			if err := s.QueueCommand(ctx, c); err != nil {
				t.Fatal(err)
			}
			return c.ID
		}
		first := msg("restart at 18:00")
		if again := msg("restart at 18:00"); again != first {
			t.Errorf("the same message again queued %s, want the queued %s", again, first)
		}
		if other := msg("save your work"); other == first {
			t.Error("another text was answered with the first message")
		}
		n, already, err := s.QueueHostMessage(ctx, "pool1", "h1", "restart at 18:00", t0.Add(2*time.Second))
		if err != nil || n != 2 || already != 1 {
			t.Fatalf("host message: %d (%d already), %v; want 2 sessions, 1 already (alice's queued already, bob's new)", n, already, err)
		}
		want := []string{"alice restart at 18:00", "alice save your work", "bob restart at 18:00"}
		if diff := cmp.Diff(want, delivered(t, s, 3*time.Second)); diff != "" {
			t.Errorf("delivered (-want +got):\n%s", diff)
		}
		if again := msg("restart at 18:00"); again == first {
			t.Error("after delivery the same message was answered with the delivered one")
		}
	})
}

// TestQueuedCommandsBounded_RS4 (R-S4, R-SEC): a host holds at most
// store.MaxQueuedCommands commands its agent has not fetched; one more
// message (a session's, a host's) is Conflict naming the host, and
// nothing is written. A logoff or a disconnect of a session is still
// queued (one per session: asked again it is the one queued), so that
// messages cannot keep a session from being logged off (R-U3, the
// autoscaler's forced logoffs, R-A3). Another host is not affected, and
// the host has room again once its heartbeat fetched them.
func TestQueuedCommandsBounded_RS4(t *testing.T) {
	each(t, func(t *testing.T, s *store.DB) {
		ctx := t.Context()
		alice, _ := activeOnH1(t, s)
		for i := range store.MaxQueuedCommands {
			c := &vdibroker.Command{HostPool: "pool1", SessionHost: "h1", Type: vdibroker.CommandSendMessage, Message: fmt.Sprint("notice ", i)}
			if err := s.QueueCommand(ctx, c); err != nil {
				t.Fatalf("command %d of %d: %v", i+1, store.MaxQueuedCommands, err)
			}
		}
		for _, c := range []*vdibroker.Command{
			{HostPool: "pool1", SessionHost: "h1", Type: vdibroker.CommandSendMessage, Message: "one more"},
			{HostPool: "pool1", SessionHost: "h1", Type: vdibroker.CommandSendMessage, SessionID: alice, Message: "one more"},
		} {
			err := s.QueueCommand(ctx, c)
			wantCode(t, err, vdibroker.EConflict)
			if !strings.Contains(err.Error(), "h1") || !strings.Contains(err.Error(), "1000") {
				t.Errorf("refusal %q does not name the host and the bound", err)
			}
		}
		// Past the bound, a logoff and a disconnect are queued all the
		// same, once each.
		var firstIDs []string
		for round := range 2 {
			for _, typ := range []string{vdibroker.CommandLogoff, vdibroker.CommandDisconnect} {
				c := &vdibroker.Command{HostPool: "pool1", SessionHost: "h1", Type: typ, SessionID: alice}
				if err := s.QueueCommand(ctx, c); err != nil {
					t.Fatalf("%s of alice's session at the bound (round %d): %v; want it queued", typ, round, err)
				}
				if round == 0 {
					firstIDs = append(firstIDs, c.ID)
				} else if !slices.Contains(firstIDs, c.ID) {
					t.Errorf("%s asked again queued %s, want one of the queued %v", typ, c.ID, firstIDs)
				}
			}
		}
		if n, _, err := s.QueueHostMessage(ctx, "pool1", "h1", "to all", t0.Add(2*time.Second)); vdibroker.ErrorCode(err) != vdibroker.EConflict || n != 0 {
			t.Errorf("host message at the bound: %d, %v; want Conflict", n, err)
		}
		if err := s.QueueCommand(ctx, &vdibroker.Command{HostPool: "pool1", SessionHost: "h2", Type: vdibroker.CommandSendMessage, Message: "x"}); err != nil {
			t.Errorf("another host: %v", err)
		}
		got := delivered(t, s, 3*time.Second)
		if len(got) != store.MaxQueuedCommands+2 {
			t.Fatalf("the heartbeat fetched %d commands, want %d and the logoff and the disconnect (nothing of the refused ones)", len(got), store.MaxQueuedCommands)
		}
		if err := s.QueueCommand(ctx, &vdibroker.Command{HostPool: "pool1", SessionHost: "h1", Type: vdibroker.CommandSendMessage, SessionID: alice, Message: "one more"}); err != nil {
			t.Errorf("after the fetch: %v", err)
		}
	})
}

// TestHostMessagesAtOnceQueueOnce_RS4 (PostgreSQL): two host messages of
// the same text sent at once queue it once per session. Each reads what
// is queued under the host's lock, as a session's command does; without
// it both read nothing queued and both queued it (and together they could
// pass store.MaxQueuedCommands).
func TestHostMessagesAtOnceQueueOnce_RS4(t *testing.T) {
	s := postgresOpener(t)(t, store.Options{})
	ctx := t.Context()
	activeOnH1(t, s)

	locked, release := make(chan struct{}), make(chan struct{})
	var lockedOnce sync.Once
	held := make(chan error, 1)
	go func() {
		_, err := s.UpdateSessionHost(context.WithoutCancel(ctx), "pool1", "h1", func(h *vdibroker.SessionHost) error {
			lockedOnce.Do(func() { close(locked) }) // the host's lock is held to the commit
			<-release
			return nil
		})
		held <- err
	}()
	<-locked
	type answer struct {
		n   int
		err error
	}
	answers := make(chan answer, 2)
	for range 2 {
		go func() {
			n, _, err := s.QueueHostMessage(context.WithoutCancel(ctx), "pool1", "h1", "restart at 18:00", t0.Add(2*time.Second))
			answers <- answer{n, err}
		}()
	}
	// Until both wait for the host's lock, or (without it) both are done.
	for deadline := time.Now().Add(10 * time.Second); len(answers) < 2; {
		n, err := s.QueryInt(ctx, `SELECT count(*) FROM pg_stat_activity
			WHERE application_name = current_setting('application_name') AND wait_event_type = 'Lock'`)
		if err != nil {
			t.Fatal(err)
		}
		if n >= 2 {
			break
		}
		if time.Now().After(deadline) {
			close(release)
			t.Fatal("the host messages neither waited for the host's lock nor were done")
		}
		time.Sleep(5 * time.Millisecond)
	}
	close(release)
	if err := <-held; err != nil {
		t.Fatal(err)
	}
	for range 2 {
		if a := <-answers; a.err != nil || a.n != 2 {
			t.Errorf("host message: %d, %v; want 2 sessions", a.n, a.err)
		}
	}
	want := []string{"alice restart at 18:00", "bob restart at 18:00"}
	if diff := cmp.Diff(want, delivered(t, s, 3*time.Second)); diff != "" {
		t.Errorf("delivered (-want +got):\n%s", diff)
	}
}

// TestLogoffQueuedOnceWhateverItsText_RS4: a logoff asked while one is
// queued for the session is answered with it whatever the queued one's
// text (the heartbeat's logoff of a session disconnected too long has
// one, an API logoff none): only a message's text tells two apart.
func TestLogoffQueuedOnceWhateverItsText_RS4(t *testing.T) {
	each(t, func(t *testing.T, s *store.DB) {
		ctx := t.Context()
		alice, _ := activeOnH1(t, s)
		first := &vdibroker.Command{HostPool: "pool1", SessionHost: "h1", Type: vdibroker.CommandLogoff, SessionID: alice,
			Message: "disconnected longer than disconnectedSessionTimeoutMinutes"}
		if err := s.QueueCommand(ctx, first); err != nil {
			t.Fatal(err)
		}
		again := &vdibroker.Command{HostPool: "pool1", SessionHost: "h1", Type: vdibroker.CommandLogoff, SessionID: alice}
		if err := s.QueueCommand(ctx, again); err != nil {
			t.Fatal(err)
		}
		if again.ID != first.ID {
			t.Errorf("a logoff asked while one with a text was queued queued %s, want the queued %s", again.ID, first.ID)
		}
	})
}

// TestUnseenLogoffs_RS4 (R-S4, R-GW5, R-SEC): a logoff of a Pending
// session the host's agent never reported (ended at once, queued in case
// its logon is under way) reaches the agent as "the user's session", by
// user. Such a logoff queued again for the same user on the host
// supersedes the one still queued (a user connecting and logging off in
// a loop while her host starts kept a row a round, never pruned while
// queued); and one whose user connected to the host again since is not
// delivered: it would log off the session she came back to.
func TestUnseenLogoffs_RS4(t *testing.T) {
	each(t, func(t *testing.T, s *store.DB) {
		ctx := t.Context()
		mustPool(t, s, pool("pool1", vdibroker.Pooled))
		mustHost(t, s, "pool1", "h1")
		at := func(sec int) time.Time { return t0.Add(time.Duration(sec) * time.Second) }
		pending := func(user string, sec int) string {
			c := placement("pool1", "h1", user, 10)
			c.Session.CreateTime, c.Session.StateTime = at(sec), at(sec)
			return mustCommit(t, s, c)
		}
		loggedOff := func(id string, sec int) string {
			if err := s.EndSession(ctx, "pool1", id, vdibroker.EndLoggedOffByAdmin, at(sec)); err != nil {
				t.Fatal(err)
			}
			c := &vdibroker.Command{HostPool: "pool1", SessionHost: "h1", Type: vdibroker.CommandLogoff, SessionID: id, CreateTime: at(sec)}
			if err := s.QueueCommand(ctx, c); err != nil {
				t.Fatal(err)
			}
			return c.ID
		}
		state := func(id string) (string, string) {
			st, res, err := s.Command(ctx, id)
			if err != nil {
				t.Fatal(err)
			}
			return st, res
		}
		first := loggedOff(pending("alice", 0), 1)
		second := loggedOff(pending("Alice", 2), 3)
		bobs := loggedOff(pending("bob", 2), 3)
		if st, res := state(first); st != vdibroker.CommandFailed || !strings.Contains(res, second) {
			t.Errorf("alice's first logoff after her second: %s %q, want Failed, superseded by %s", st, res, second)
		}
		for _, id := range []string{second, bobs} {
			if st, _ := state(id); st != vdibroker.CommandQueued {
				t.Errorf("logoff %s: %s, want still Queued", id, st)
			}
		}
		// alice connects again; bob does not. The host comes up.
		pending("alice", 4)
		res, err := s.ApplyHeartbeat(ctx, "pool1", "h1", &vdibroker.HeartbeatRequest{}, at(5))
		if err != nil {
			t.Fatal(err)
		}
		got := handed(res)
		if want := []string{"Logoff bob"}; !slices.Equal(got, want) {
			t.Errorf("the host was handed %v, want %v (alice's logoff would end the session she connected to again)", got, want)
		}
		if st, res := state(second); st != vdibroker.CommandFailed || !strings.Contains(res, "connected to this host again") {
			t.Errorf("alice's second logoff after her new connect: %s %q, want Failed, not delivered", st, res)
		}
	})
}

// TestUnseenLogoffOfAnAdoptedLogon_RS4 (R-S4, R-S2): a logoff of a
// Pending session the agent never reported is queued because its logon
// may be under way; when that logon completes and the host's next
// heartbeat reports it, the broker adopts it (the Pending session ended
// at the logoff, so nothing matches it), after the logoff was asked. The
// logoff is still delivered in that heartbeat's answer: the adopted
// session is the very logon the admin logged off, not one its user
// connected to again.
func TestUnseenLogoffOfAnAdoptedLogon_RS4(t *testing.T) {
	each(t, func(t *testing.T, s *store.DB) {
		ctx := t.Context()
		mustPool(t, s, pool("pool1", vdibroker.Pooled))
		mustHost(t, s, "pool1", "h1")
		c := placement("pool1", "h1", "alice", 10)
		c.Session.CreateTime, c.Session.StateTime = t0, t0
		id := mustCommit(t, s, c)
		if err := s.EndSession(ctx, "pool1", id, vdibroker.EndLoggedOffByAdmin, t0.Add(time.Second)); err != nil {
			t.Fatal(err)
		}
		logoff := &vdibroker.Command{HostPool: "pool1", SessionHost: "h1", Type: vdibroker.CommandLogoff, SessionID: id, CreateTime: t0.Add(time.Second)}
		if err := s.QueueCommand(ctx, logoff); err != nil {
			t.Fatal(err)
		}
		// Her logon completed after the logoff was asked (the host's
		// logon time, and the broker's first word of it, are both later).
		logon := t0.Add(2 * time.Second)
		res, err := s.ApplyHeartbeat(ctx, "pool1", "h1", &vdibroker.HeartbeatRequest{Sessions: []vdibroker.AgentSession{
			{ID: "7", User: "alice", State: vdibroker.StateActive, LogonTime: &logon}}}, t0.Add(3*time.Second))
		if err != nil {
			t.Fatal(err)
		}
		got := handed(res)
		if want := []string{"Logoff alice"}; !slices.Equal(got, want) {
			t.Errorf("the host was handed %v, want %v: the admin's logoff of her logon was dropped", got, want)
		}
		wantCommandState(t, s, logoff.ID, vdibroker.CommandDelivered)
	})
}

// TestUnseenLogoffAfterLateOutagePlacement_RS4_ROUT3 (R-S4, R-OUT3,
// R-C6): a session placed during a replica's outage is written when its
// store is back, with the time it was placed. Its user, whom that replica
// placed on h1 before, connected again through another replica (h1
// again) and logged that session off while h1 was starting: the logoff,
// asked after both connects, is the one she wanted, and the host's
// report of her logon, which the written placement now stands for, does
// not hold it back. Only a session placed after the logoff (within the
// replicas' clock tolerance, store.LateCommit) is a connect again.
func TestUnseenLogoffAfterLateOutagePlacement_RS4_ROUT3(t *testing.T) {
	each(t, func(t *testing.T, s *store.DB) {
		ctx := t.Context()
		mustPool(t, s, pool("pool1", vdibroker.Pooled))
		mustHost(t, s, "pool1", "h1")
		at := func(sec int) time.Time { return t0.Add(time.Duration(sec) * time.Second) }
		// Placed at 10 s by a replica cut off from the store (not written yet).
		outage := placement("pool1", "h1", "alice", 10)
		outage.Session.CreateTime, outage.Session.StateTime = at(10), at(10)
		outage.OutagePlacement = true
		// At 20 s she connects through another replica, and at 30 s logs off.
		c := placement("pool1", "h1", "alice", 10)
		c.Session.CreateTime, c.Session.StateTime = at(20), at(20)
		id := mustCommit(t, s, c)
		if err := s.EndSession(ctx, "pool1", id, vdibroker.EndLoggedOffByAdmin, at(30)); err != nil {
			t.Fatal(err)
		}
		logoff := &vdibroker.Command{HostPool: "pool1", SessionHost: "h1", Type: vdibroker.CommandLogoff, SessionID: id, CreateTime: at(30)}
		if err := s.QueueCommand(ctx, logoff); err != nil {
			t.Fatal(err)
		}
		// The cut-off replica's store is back: it writes her placement of 10 s.
		mustCommit(t, s, outage)
		// h1 comes up and reports her one logon.
		res, err := s.ApplyHeartbeat(ctx, "pool1", "h1", &vdibroker.HeartbeatRequest{Sessions: []vdibroker.AgentSession{
			{ID: "7", User: "alice", State: vdibroker.StateActive}}}, at(40))
		if err != nil {
			t.Fatal(err)
		}
		got := handed(res)
		if want := []string{"Logoff alice"}; !slices.Equal(got, want) {
			t.Errorf("the host was handed %v, want %v: a placement older than the logoff, written late, held it back", got, want)
		}
		wantCommandState(t, s, logoff.ID, vdibroker.CommandDelivered)
	})
}

// TestUnseenLogoffReconnectBehindClock_RS4 (R-S4, R-GW5): the user's new
// connect after a logoff of her unreported Pending session is made by a
// replica whose clock is behind the one that queued the logoff (within
// the replicas' tolerance, store.LateCommit): its session looks a little
// older than the logoff, and is still her connect again, which the
// logoff is not delivered over.
func TestUnseenLogoffReconnectBehindClock_RS4(t *testing.T) {
	each(t, func(t *testing.T, s *store.DB) {
		ctx := t.Context()
		mustPool(t, s, pool("pool1", vdibroker.Pooled))
		mustHost(t, s, "pool1", "h1")
		at := func(ms int) time.Time { return t0.Add(time.Duration(ms) * time.Millisecond) }
		c := placement("pool1", "h1", "alice", 10)
		c.Session.CreateTime, c.Session.StateTime = at(0), at(0)
		id := mustCommit(t, s, c)
		if err := s.EndSession(ctx, "pool1", id, vdibroker.EndLoggedOffByAdmin, at(10_000)); err != nil {
			t.Fatal(err)
		}
		logoff := &vdibroker.Command{HostPool: "pool1", SessionHost: "h1", Type: vdibroker.CommandLogoff, SessionID: id, CreateTime: at(10_000)}
		if err := s.QueueCommand(ctx, logoff); err != nil {
			t.Fatal(err)
		}
		again := placement("pool1", "h1", "alice", 10)
		again.Session.CreateTime, again.Session.StateTime = at(9_200), at(9_200) // 0.8 s behind
		mustCommit(t, s, again)
		res, err := s.ApplyHeartbeat(ctx, "pool1", "h1", &vdibroker.HeartbeatRequest{}, at(12_000))
		if err != nil {
			t.Fatal(err)
		}
		if len(res.Commands) != 0 {
			t.Errorf("the host was handed %v, want nothing: the logoff would end the session she connected to again", res.Commands)
		}
		if st, res, err := s.Command(ctx, logoff.ID); err != nil || st != vdibroker.CommandFailed || !strings.Contains(res, "connected to this host again") {
			t.Errorf("the logoff: %s %q (%v), want Failed, not delivered", st, res, err)
		}
	})
}

// handed is what a heartbeat's answer handed its host, as "Type user".
func handed(res *vdibroker.HeartbeatResult) []string {
	var got []string
	for _, c := range res.Commands {
		got = append(got, c.Type+" "+c.User)
	}
	return got
}

// wantCommandState fails t unless command id is in state.
func wantCommandState(t *testing.T, s *store.DB, id, state string) {
	t.Helper()
	if st, res, err := s.Command(t.Context(), id); err != nil || st != state {
		t.Errorf("command %s: %s %q (%v), want %s", id, st, res, err, state)
	}
}
