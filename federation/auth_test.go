package federation

import (
	"context"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/vdibroker/vdibroker"
)

func TestVerify(t *testing.T) {
	secret := []byte("0123456789abcdef-federation")
	now := time.Date(2026, 12, 1, 12, 0, 0, 0, time.UTC)
	v := &Verifier{Secrets: NewSecrets(secret), Now: func() time.Time { return now }}
	body := []byte(`{"user":"alice"}`)
	h := Sign(secret, "POST", ConnectPath, "fra1", body, now)
	get := func(m map[string]string) func(string) string { return func(k string) string { return m[k] } }
	if pod, err := v.Verify(t.Context(), get(h), "POST", ConnectPath, body); err != nil || pod != "fra1" {
		t.Fatalf("signed request refused: %q %v", pod, err)
	}
	for _, tc := range []struct {
		name   string
		h      map[string]string
		method string
		body   string
	}{
		{"replayed", h, "POST", string(body)},
		{"unsigned", map[string]string{}, "POST", string(body)},
		{"wrong secret", Sign([]byte("another-secret-of-16+"), "POST", ConnectPath, "fra1", body, now), "POST", string(body)},
		{"body changed", Sign(secret, "POST", ConnectPath, "fra1", body, now), "POST", `{"user":"mallory"}`},
		{"method changed", Sign(secret, "POST", ConnectPath, "fra1", body, now), "GET", string(body)},
		{"too old", Sign(secret, "POST", ConnectPath, "fra1", body, now.Add(-2*MaxSkew)), "POST", string(body)},
	} {
		t.Run(tc.name, func(t *testing.T) {
			if _, err := v.Verify(t.Context(), get(tc.h), tc.method, ConnectPath, []byte(tc.body)); vdibroker.ErrorCode(err) != vdibroker.EUnauthenticated {
				t.Fatalf("got %v, want Unauthenticated", err)
			}
		})
	}
}

// FuzzVerify: any headers and body are verified without panicking, and
// nothing but a request signed with the secret is accepted, once.
func FuzzVerify(f *testing.F) {
	secret := []byte("0123456789abcdef-federation")
	now := time.Date(2026, 12, 1, 12, 0, 0, 0, time.UTC)
	// A signed request, the same with a long nonce, and garbage.
	h := Sign(secret, "POST", ConnectPath, "fra1", []byte(`{}`), now)
	f.Add(h[HeaderPod], h[HeaderTimestamp], h[HeaderNonce], h[HeaderSignature], []byte(`{}`))
	f.Add("fra1", h[HeaderTimestamp], string(make([]byte, 100)), h[HeaderSignature], []byte(`{}`))
	f.Add("", "-9999999999999999999", "n", "zz", []byte(nil))
	f.Fuzz(func(t *testing.T, pod, ts, nonce, sig string, body []byte) {
		v := &Verifier{Secrets: NewSecrets(secret), Now: func() time.Time { return now }}
		m := map[string]string{HeaderPod: pod, HeaderTimestamp: ts, HeaderNonce: nonce, HeaderSignature: sig}
		get := func(k string) string { return m[k] }
		got, err := v.Verify(t.Context(), get, "POST", ConnectPath, body)
		if err != nil {
			return
		}
		if want := Signature(secret, "POST", ConnectPath, pod, ts, nonce, body); sig != want || got != pod || len(nonce) > maxNonceLen {
			t.Fatalf("accepted pod %q nonce %q signature %q (want %q)", got, nonce, sig, want)
		}
		if _, err := v.Verify(t.Context(), get, "POST", ConnectPath, body); err == nil {
			t.Fatal("accepted the same nonce twice")
		}
	})
}

// memNonces is a Nonces in memory, for the verifier's own logic.
type memNonces map[string]bool

func (m memNonces) UseNonce(_ context.Context, _, nonce string, _ time.Time) (bool, error) {
	if m[nonce] {
		return false, nil
	}
	m[nonce] = true
	return true, nil
}

// TestVerifyHeld_RG5: a connect's nonce is handed to the caller to record
// (vdibroker.CallNonce), not recorded by the verifier, so one commit can
// carry it with the placement; a pod whose store is its own
// (ReadsInMemory) also refuses a replay to this process at once. Without
// a nonce store the verifier records it in memory, as Verify does.
func TestVerifyHeld_RG5(t *testing.T) {
	secret := []byte("0123456789abcdef-federation")
	now := time.Date(2026, 12, 1, 12, 0, 0, 0, time.UTC)
	body := []byte(`{"user":"alice"}`)
	h := Sign(secret, "POST", ConnectPath, "fra1", body, now)
	get := func(k string) string { return h[k] }
	clock := func() time.Time { return now }

	store := memNonces{}
	replicas := &Verifier{Secrets: NewSecrets(secret), Now: clock, Nonces: store}
	for i := range 2 {
		pod, n, err := replicas.VerifyHeld(t.Context(), get, "POST", ConnectPath, body)
		if err != nil || pod != "fra1" || n == nil || n.Nonce != h[HeaderNonce] || !n.Expires.Equal(now.Add(2*MaxSkew+heldMargin)) || !n.At.Equal(now) ||
			!n.RecordBy.Equal(now.Add(MaxSkew+heldMargin)) {
			t.Fatalf("call %d: %q %+v %v; want fra1 with its nonce held for the caller", i, pod, n, err)
		}
	}
	if len(store) != 0 {
		t.Errorf("the verifier recorded a held nonce itself: %v", store)
	}

	oneProcess := &Verifier{Secrets: NewSecrets(secret), Now: clock, Nonces: store, ReadsInMemory: true, Started: now.Add(time.Hour)}
	if _, n, err := oneProcess.VerifyHeld(t.Context(), get, "POST", ConnectPath, body); err != nil || n == nil {
		t.Fatalf("first call to a one-process pod: %+v %v; want it held (a connect is not refused by Started)", n, err)
	}
	if _, _, err := oneProcess.VerifyHeld(t.Context(), get, "POST", ConnectPath, body); vdibroker.ErrorCode(err) != vdibroker.EUnauthenticated {
		t.Errorf("replayed to the same process: %v, want Unauthenticated", err)
	}

	alone := &Verifier{Secrets: NewSecrets(secret), Now: clock}
	if _, n, err := alone.VerifyHeld(t.Context(), get, "POST", ConnectPath, body); err != nil || n != nil {
		t.Fatalf("without a nonce store: %+v %v; want it verified and kept in memory", n, err)
	}
	if _, _, err := alone.VerifyHeld(t.Context(), get, "POST", ConnectPath, body); vdibroker.ErrorCode(err) != vdibroker.EUnauthenticated {
		t.Errorf("replayed without a nonce store: %v, want Unauthenticated", err)
	}
}

// TestVerifyTo_RG5: a call signed for one pod is refused by another pod,
// whose nonces are its own (a captured call replayed there), with or
// without its X-Vdibroker-To; a call naming no pod (an older pod's) is
// still taken.
func TestVerifyTo_RG5(t *testing.T) {
	secret := []byte("0123456789abcdef-federation")
	now := time.Date(2026, 12, 1, 12, 0, 0, 0, time.UTC)
	body := []byte(`{"user":"alice"}`)
	get := func(m map[string]string) func(string) string { return func(k string) string { return m[k] } }
	fra1 := func() *Verifier {
		return &Verifier{Secrets: NewSecrets(secret), Pod: "fra1", Now: func() time.Time { return now }}
	}
	if _, err := fra1().Verify(t.Context(), get(SignTo(secret, "POST", ConnectPath, "ams1", "fra1", body, now)), "POST", ConnectPath, body); err != nil {
		t.Fatalf("a call signed for this pod refused: %v", err)
	}
	if _, err := fra1().Verify(t.Context(), get(Sign(secret, "POST", ConnectPath, "ams1", body, now)), "POST", ConnectPath, body); err != nil {
		t.Fatalf("a call naming no pod (an older pod's) refused: %v", err)
	}
	toOther := SignTo(secret, "POST", ConnectPath, "ams1", "fra2", body, now)
	stripped := map[string]string{}
	for k, v := range toOther {
		if k != HeaderTo {
			stripped[k] = v
		}
	}
	renamed := map[string]string{}
	for k, v := range toOther {
		renamed[k] = v
	}
	renamed[HeaderTo] = "fra1"
	for name, h := range map[string]map[string]string{"for another pod": toOther, "its pod removed": stripped, "its pod renamed": renamed} {
		t.Run(name, func(t *testing.T) {
			if _, err := fra1().Verify(t.Context(), get(h), "POST", ConnectPath, body); vdibroker.ErrorCode(err) != vdibroker.EUnauthenticated {
				t.Fatalf("got %v, want Unauthenticated", err)
			}
		})
	}
}

// TestFinishChecksTheTimeAgain_RG5: a call whose headers passed Check
// but whose body arrived after its signature's window (a body sent
// slowly) is refused by Finish: by then a nonce recorded for the call it
// replays may be forgotten (kept 2 × MaxSkew from when that was taken).
// One that arrives within the window is taken, once.
func TestFinishChecksTheTimeAgain_RG5(t *testing.T) {
	secret := []byte("0123456789abcdef-federation")
	t0 := time.Date(2026, 12, 1, 12, 0, 0, 0, time.UTC)
	now := t0
	v := &Verifier{Secrets: NewSecrets(secret), Pod: "fra1", Now: func() time.Time { return now }}
	body := []byte(`{"user":"alice"}`)
	h := SignTo(secret, "POST", ConnectPath, "ams1", "fra1", body, t0)
	get := func(k string) string { return h[k] }

	c, err := v.Check(get, KindRecord)
	if err != nil {
		t.Fatalf("Check at the time of signing: %v", err)
	}
	now = t0.Add(MaxSkew + time.Second) // the body took 61 s
	if _, err := v.Finish(t.Context(), c, "POST", ConnectPath, body); vdibroker.ErrorCode(err) != vdibroker.EUnauthenticated {
		t.Fatalf("Finish past the window: %v, want Unauthenticated", err)
	}

	now = t0
	if c, err = v.Check(get, KindRecord); err != nil {
		t.Fatal(err)
	}
	now = t0.Add(MaxSkew) // at the window's end
	if _, err := v.Finish(t.Context(), c, "POST", ConnectPath, body); err != nil {
		t.Fatalf("Finish within the window: %v", err)
	}
	if c, err = v.Check(get, KindRecord); err != nil {
		t.Fatal(err)
	}
	if _, err := v.Finish(t.Context(), c, "POST", ConnectPath, body); vdibroker.ErrorCode(err) != vdibroker.EUnauthenticated {
		t.Fatalf("the call again: %v, want Unauthenticated (a replay)", err)
	}
}

// slowNonces is a Nonces whose commit takes took on the injected clock
// *now, as a store under load does.
type slowNonces struct {
	memNonces
	now  *time.Time
	took time.Duration
}

func (s slowNonces) UseNonce(ctx context.Context, pod, nonce string, expires time.Time) (bool, error) {
	*s.now = s.now.Add(s.took)
	return s.memNonces.UseNonce(ctx, pod, nonce, expires)
}

// TestFinishAfterASlowCommit_RG5: a write whose nonce is committed only
// after its signature's window ended (here the caller's clock is 59 s
// behind this pod's and the commit takes 2 s) is refused, as a sweep may
// have forgotten the nonce of a call it replays; the caller is told that
// the commit ended past the window and that nothing was done, not only
// that the clocks differ (a document push, a logoff for another pod show
// it to an administrator, its code and message cut at 200 characters,
// so all of it fits). With a commit of 1 s it is still within the window,
// and taken.
func TestFinishAfterASlowCommit_RG5(t *testing.T) {
	secret := []byte("0123456789abcdef-federation")
	t0 := time.Date(2026, 12, 1, 12, 0, 0, 0, time.UTC)
	body := []byte(`{"user":"alice"}`)
	for _, tc := range []struct {
		name string
		took time.Duration
		says string // "" taken
	}{
		{"commit 1 s, at the window's end", time.Second, ""},
		{"commit 2 s, a second past it", 2 * time.Second,
			"pod-to-pod call signed at 2026-12-01T11:59:01Z: nonce committed at 2026-12-01T12:00:02Z, over 1m0s later (a slow commit here, or the caller's clock behind): nothing done, send again"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			now := t0
			v := &Verifier{Secrets: NewSecrets(secret), Pod: "fra1", Now: func() time.Time { return now },
				Nonces: slowNonces{memNonces: memNonces{}, now: &now, took: tc.took}}
			h := SignTo(secret, "PUT", DocumentPath, "ams1", "fra1", body, t0.Add(-59*time.Second))
			_, err := v.Verify(t.Context(), func(k string) string { return h[k] }, "PUT", DocumentPath, body)
			switch {
			case tc.says == "" && err != nil:
				t.Fatalf("committed within the window: %v, want it taken", err)
			case tc.says != "" && (vdibroker.ErrorCode(err) != vdibroker.EUnauthenticated || vdibroker.ErrorMessage(err) != tc.says):
				t.Fatalf("committed past the window: %v; want Unauthenticated %q", err, tc.says)
			}
			if n := len(vdibroker.EUnauthenticated + ": " + tc.says); n > 200 {
				t.Errorf("the refusal as a console shows it is %d characters, cut at 200", n)
			}
		})
	}
}

// TestMemoryNonceAtTheWindowsEnd_RG5: a nonce kept in memory is kept
// until the very instant its signature's window ends, and a call is
// taken up to it. t0's call sweeps; ams1's call signed and taken at t0+1
// is kept until t0+61. At t0+61 a call signed MaxSkew behind (at t0+1)
// is taken, though its own call swept the nonces at that instant, its
// window's end; ams1's replay then is refused by its nonce, which that
// sweep kept. A sweep at t0+122 forgets it (the replay is refused by its
// time by then).
func TestMemoryNonceAtTheWindowsEnd_RG5(t *testing.T) {
	secret := []byte("0123456789abcdef-federation")
	t0 := time.Date(2026, 12, 1, 12, 0, 0, 0, time.UTC)
	now := t0
	v := &Verifier{Secrets: NewSecrets(secret), Now: func() time.Time { return now }}
	call := func(h map[string]string) error {
		_, err := v.VerifyRead(t.Context(), func(k string) string { return h[k] }, "GET", LoadsPath, nil)
		return err
	}
	if err := call(Sign(secret, "GET", LoadsPath, "lon1", nil, t0)); err != nil {
		t.Fatalf("the first call at t0 (it sweeps): %v", err)
	}
	now = t0.Add(time.Second)
	ams1 := Sign(secret, "GET", LoadsPath, "ams1", nil, now)
	if err := call(ams1); err != nil {
		t.Fatalf("ams1's call at t0+1: %v", err)
	}
	now = t0.Add(MaxSkew + time.Second) // more than MaxSkew since t0: this call sweeps
	if err := call(Sign(secret, "GET", LoadsPath, "lon1", nil, now.Add(-MaxSkew))); err != nil {
		t.Fatalf("a call signed MaxSkew behind, sweeping at its window's end: %v, want it taken", err)
	}
	if err := call(ams1); vdibroker.ErrorCode(err) != vdibroker.EUnauthenticated || !strings.Contains(vdibroker.ErrorMessage(err), "nonce seen before") {
		t.Fatalf("ams1's call replayed at its window's end, just swept: %v, want Unauthenticated as a replay", err)
	}
	now = now.Add(MaxSkew + time.Second)
	if err := call(Sign(secret, "GET", LoadsPath, "lon1", nil, now)); err != nil {
		t.Fatal(err)
	}
	if _, kept := v.nonces[ams1[HeaderNonce]]; kept {
		t.Errorf("ams1's nonce kept past its window's end and a sweep")
	}
}

// TestMemoryNoncesPerBudget_RG5: the nonces kept in memory (without
// Nonces, and the reads' with ReadsInMemory) are bounded for each budget
// (Call.Budget): one caller at maxMemoryNonces is refused
// (TooManyRequests), another caller's calls are still taken, and the
// first has room again once its nonces expire.
func TestMemoryNoncesPerBudget_RG5(t *testing.T) {
	now := time.Date(2026, 12, 1, 12, 0, 0, 0, time.UTC)
	v := &Verifier{Secrets: NewSecrets([]byte("0123456789abcdef-federation"))}
	for i := range maxMemoryNonces {
		if err := v.remember("ams1", "a"+strconv.Itoa(i), now.Add(MaxSkew), now); err != nil {
			t.Fatalf("ams1's nonce %d: %v", i, err)
		}
	}
	if err := v.remember("ams1", "one-more", now.Add(MaxSkew), now); vdibroker.ErrorCode(err) != vdibroker.ETooManyRequests {
		t.Errorf("ams1 past its bound: %v, want TooManyRequests", err)
	} else if msg := vdibroker.ErrorMessage(err); vdibroker.ErrorRetryAfter(err) <= 0 || strings.Contains(msg, "try again") {
		// The wait is its Retry-After alone, which a global decision
		// and the CLI show as " (try again in N s)" after the message.
		t.Errorf("ams1 past its bound: %q, Retry-After %s; want one, and the wait not in its words", msg, vdibroker.ErrorRetryAfter(err))
	}
	for _, budget := range []string{"fra1", vdibroker.NoDocumentBudget} {
		if err := v.remember(budget, "f-"+budget, now.Add(MaxSkew), now); err != nil {
			t.Errorf("%q's call while ams1's budget is spent: %v", budget, err)
		}
	}
	if err := v.remember("fra1", "a7", now.Add(MaxSkew), now); vdibroker.ErrorCode(err) != vdibroker.EUnauthenticated {
		t.Errorf("ams1's nonce again, from fra1: %v, want Unauthenticated (a replay)", err)
	}
	later := now.Add(2*MaxSkew + time.Second)
	if err := v.remember("ams1", "one-more", later.Add(MaxSkew), later); err != nil {
		t.Errorf("ams1 after its nonces expired: %v", err)
	}
}

// TestMemoryNoncesTotal_RG5 (R-SEC): the nonces kept in memory are
// bounded for every budget together too, not only for each: a document
// lists up to MaxPods pods, and a holder of the federation secret
// signing as each of them kept maxMemoryNonces of every one. With caps
// of 4 a budget and 10 in all (the real ones are too many for a test):
// three pods' 4 and 4 and 2 fill it, each under its own cap; a fourth
// pod's call, and another of the third's, is refused TooManyRequests as
// the per-budget cap refuses, a replay is still told as one, and once
// the nonces expired (swept a MaxSkew after the last sweep) each is
// taken again.
func TestMemoryNoncesTotal_RG5(t *testing.T) {
	now := time.Date(2026, 12, 1, 12, 0, 0, 0, time.UTC)
	v := &Verifier{Secrets: NewSecrets([]byte("0123456789abcdef-federation")), maxPerBudget: 4, maxTotal: 10}
	for _, tc := range []struct {
		budget string
		n      int
	}{{"ams1", 4}, {"fra1", 4}, {"lon1", 2}} {
		for i := range tc.n {
			if err := v.remember(tc.budget, tc.budget+strconv.Itoa(i), now.Add(MaxSkew), now); err != nil {
				t.Fatalf("%s's nonce %d: %v", tc.budget, i, err)
			}
		}
	}
	for _, budget := range []string{"par1", "lon1", vdibroker.NoDocumentBudget} {
		err := v.remember(budget, "more-"+budget, now.Add(MaxSkew), now)
		if vdibroker.ErrorCode(err) != vdibroker.ETooManyRequests || !strings.Contains(vdibroker.ErrorMessage(err), "from all pods together") {
			t.Errorf("%q's call with 10 nonces kept in all: %v, want TooManyRequests for all pods", budget, err)
		}
	}
	if err := v.remember("par1", "fra12", now.Add(MaxSkew), now); vdibroker.ErrorCode(err) != vdibroker.EUnauthenticated {
		t.Errorf("fra1's nonce again, from par1, with 10 kept: %v, want Unauthenticated (a replay)", err)
	}
	later := now.Add(2*MaxSkew + time.Second)
	for _, budget := range []string{"par1", "lon1"} {
		if err := v.remember(budget, "more-"+budget, later.Add(MaxSkew), later); err != nil {
			t.Errorf("%s's call after the nonces expired: %v", budget, err)
		}
	}
}

// TestMemoryNoncesFullSweptWhileRefused_RG5 (R-SEC): a sweep of the
// expired nonces is not left to a call taken: with the overall cap met,
// every call is refused, and it is the refused calls that sweep, so the
// pods' reads are taken again once the nonces that fill it expired,
// without any call taken in between. Through VerifyRead as a SQLite
// pod's reads are, on the injected clock: ten reads signed at t0 fill a
// cap of 10 (t0's call swept the empty map); a pod reading every 5 s is
// refused at t0+5 .. t0+60 (the nonces are kept until their window ends,
// t0+60, and the next sweep is more than MaxSkew after t0's) and taken
// at t0+65, whose call sweeps them first.
func TestMemoryNoncesFullSweptWhileRefused_RG5(t *testing.T) {
	secret := []byte("0123456789abcdef-federation")
	t0 := time.Date(2026, 12, 1, 12, 0, 0, 0, time.UTC)
	now := t0
	v := &Verifier{Secrets: NewSecrets(secret), Now: func() time.Time { return now }, ReadsInMemory: true, Started: t0.Add(-time.Hour),
		maxPerBudget: 4, maxTotal: 10}
	read := func(pod string) error {
		h := Sign(secret, "GET", LoadsPath, pod, nil, now)
		_, err := v.VerifyRead(t.Context(), func(k string) string { return h[k] }, "GET", LoadsPath, nil)
		return err
	}
	for _, pod := range []string{"ams1", "ams1", "ams1", "ams1", "fra1", "fra1", "fra1", "fra1", "lon1", "lon1"} {
		if err := read(pod); err != nil {
			t.Fatalf("%s's read at t0: %v", pod, err)
		}
	}
	var taken time.Time
	for now = t0.Add(5 * time.Second); now.Before(t0.Add(4 * MaxSkew)); now = now.Add(5 * time.Second) {
		err := read("par1")
		if err == nil {
			taken = now
			break
		}
		if vdibroker.ErrorCode(err) != vdibroker.ETooManyRequests {
			t.Fatalf("par1's read at t0+%s: %v, want TooManyRequests", now.Sub(t0), err)
		}
	}
	if taken.IsZero() {
		t.Fatalf("par1's reads refused until t0+%s: a full map is never swept", now.Sub(t0))
	}
	if want := t0.Add(65 * time.Second); !taken.Equal(want) {
		t.Errorf("par1's reads, refused while the cap was met, first taken at t0+%s, want t0+%s", taken.Sub(t0), want.Sub(t0))
	}
}

// TestMemoryReplayAfterAnotherCallsSweep_RG5: a call replayed at the last
// moment its window takes it (ts + MaxSkew on this pod's clock) is
// refused by its nonce kept in memory, on each path that keeps it there
// (a read with ReadsInMemory, a connect's too, any call without
// Nonces), even when another call sweeps the expired nonces, at a later
// time, between the replay's reading of the clock and its look-up. The
// worst original is verified at ts − MaxSkew (its caller's clock a
// MaxSkew ahead): kept 2 × MaxSkew from then, until ts+60, the other
// call's sweep at ts+61 forgot it, and the replay was taken.
func TestMemoryReplayAfterAnotherCallsSweep_RG5(t *testing.T) {
	secret := []byte("0123456789abcdef-federation")
	ts := time.Date(2026, 12, 1, 12, 0, 0, 0, time.UTC)
	for _, tc := range []struct {
		name          string
		kind          Kind
		readsInMemory bool
		nonces        Nonces
	}{
		{"read kept in memory", KindRead, true, nil},
		{"connect, one-process store", KindHeld, true, memNonces{}},
		{"write without a nonce store", KindRecord, false, nil},
	} {
		t.Run(tc.name, func(t *testing.T) {
			now := ts.Add(-MaxSkew)
			var meanwhile func() // run once, as the clock is read
			v := &Verifier{Secrets: NewSecrets(secret), ReadsInMemory: tc.readsInMemory, Started: ts.Add(-time.Hour), Nonces: tc.nonces}
			v.Now = func() time.Time {
				at := now
				if f := meanwhile; f != nil {
					meanwhile = nil
					f()
				}
				return at
			}
			call := func(h map[string]string) error {
				_, _, err := v.verify(t.Context(), func(k string) string { return h[k] }, "GET", LoadsPath, nil, tc.kind)
				return err
			}
			h := Sign(secret, "GET", LoadsPath, "ams1", nil, ts)
			if err := call(h); err != nil {
				t.Fatalf("the original at ts-60: %v", err)
			}
			now = ts.Add(MaxSkew)
			c, err := v.Check(func(k string) string { return h[k] }, tc.kind)
			if err != nil {
				t.Fatalf("the replay's headers at ts+60: %v", err)
			}
			meanwhile = func() {
				now = ts.Add(MaxSkew + time.Second)
				if err := call(Sign(secret, "GET", LoadsPath, "lon1", nil, now)); err != nil {
					t.Errorf("another pod's call at ts+61: %v", err)
				}
			}
			if _, err := v.Finish(t.Context(), c, "GET", LoadsPath, nil); vdibroker.ErrorCode(err) != vdibroker.EUnauthenticated {
				t.Fatalf("replayed at ts+60, another call sweeping meanwhile at ts+61: %v, want Unauthenticated", err)
			}
		})
	}
}

// TestMemoryNoncesRetryAfter_RG5: a call refused for the nonces kept in
// memory (either cap) is told when to try again, as the store's nonce
// budget does: when the first sweep after the earliest nonce kept
// expires could free room, in whole seconds past it. With caps of 2 a
// budget and 3 in all, t0 sweeping:
//   - ams1's 2 nonces signed at t0+50 (kept until t0+110), its third at
//     t0+10 refused: the next sweep is after t0+60, but nothing expires
//     before t0+110: 100 s, and a second past it, 101;
//   - fra1's nonce signed at t0+10 (kept until t0+70) fills the 3, lon1's
//     call at t0+20 refused: the sweep after t0+70 frees it: 51 s;
//   - lon1 again at t0+71 (t0+20 + 51 s): swept, taken.
func TestMemoryNoncesRetryAfter_RG5(t *testing.T) {
	t0 := time.Date(2026, 12, 1, 12, 0, 0, 0, time.UTC)
	v := &Verifier{Secrets: NewSecrets([]byte("0123456789abcdef-federation")), maxPerBudget: 2, maxTotal: 3}
	ams1PastItsCap(t, v, t0)
	if err := v.remember("fra1", "f1", t0.Add(10*time.Second+MaxSkew), t0.Add(10*time.Second)); err != nil {
		t.Fatal(err)
	}
	err := v.remember("lon1", "l1", t0.Add(20*time.Second+MaxSkew), t0.Add(20*time.Second))
	if vdibroker.ErrorCode(err) != vdibroker.ETooManyRequests || vdibroker.ErrorRetryAfter(err) != 51*time.Second {
		t.Errorf("lon1 with 3 kept in all: %v, Retry-After %s; want TooManyRequests, 51s", err, vdibroker.ErrorRetryAfter(err))
	}
	again := t0.Add(20*time.Second + 51*time.Second)
	if err := v.remember("lon1", "l1", again.Add(MaxSkew), again); err != nil {
		t.Errorf("lon1 again after its Retry-After: %v", err)
	}
}

// ams1PastItsCap has v (a cap of 2 a budget), sweeping at t0, keep
// ams1's 2 nonces signed at t0+50 (kept until t0+110), and wants its
// third at t0+10 refused TooManyRequests after 101 s: nothing of ams1's
// expires before t0+110, and a second past it. It returns the refusal.
func ams1PastItsCap(t *testing.T, v *Verifier, t0 time.Time) error {
	t.Helper()
	ahead := t0.Add(50*time.Second + MaxSkew)
	for _, n := range []string{"a1", "a2"} {
		if err := v.remember("ams1", n, ahead, t0); err != nil {
			t.Fatal(err)
		}
	}
	err := v.remember("ams1", "a3", ahead, t0.Add(10*time.Second))
	if vdibroker.ErrorCode(err) != vdibroker.ETooManyRequests || vdibroker.ErrorRetryAfter(err) != 101*time.Second {
		t.Errorf("ams1 past its cap: %v, Retry-After %s; want TooManyRequests, 1m41s", err, vdibroker.ErrorRetryAfter(err))
	}
	return err
}

// TestMemoryNoncesRetryAfterOwnBudget_RG5: a call refused for its own
// budget's cap is told when that budget's earliest nonce can be swept,
// not another budget's; its message says what is bounded, and by what.
// With a cap of 2 a budget, t0 sweeping:
//   - fra1's nonce signed at t0 (kept until t0+60);
//   - ams1's 2 nonces signed at t0+50 (kept until t0+110), its third at
//     t0+10 refused: the next sweep is after t0+60, which frees fra1's
//     only; ams1's are swept after t0+110: 100 s, and a second, 101 (the
//     earliest of all, t0+60, said 51 s, when ams1 is refused again);
//   - ams1 again at t0+111 (t0+10 + 101 s): swept, taken.
func TestMemoryNoncesRetryAfterOwnBudget_RG5(t *testing.T) {
	t0 := time.Date(2026, 12, 1, 12, 0, 0, 0, time.UTC)
	v := &Verifier{Secrets: NewSecrets([]byte("0123456789abcdef-federation")), maxPerBudget: 2, maxTotal: 10}
	if err := v.remember("fra1", "f1", t0.Add(MaxSkew), t0); err != nil {
		t.Fatal(err)
	}
	err := ams1PastItsCap(t, v, t0)
	if got, want := vdibroker.ErrorMessage(err), "too many recent pod-to-pod calls from pod ams1: 2 held against replay, this pod's bound"; got != want {
		t.Errorf("ams1 past its cap: %q, want %q", got, want)
	}
	again := t0.Add(10*time.Second + 101*time.Second)
	if err := v.remember("ams1", "a3", again.Add(MaxSkew), again); err != nil {
		t.Errorf("ams1 again after its Retry-After: %v", err)
	}
}

// TestHeldNonceRecordedLate_RG5: a held nonce (a connect's, a
// registration's) committed by its caller on its own is checked once
// its commit ended, as Finish checks the others: past its RecordBy (its
// window's end and heldMargin) a commit that forgot the expired nonces
// at a later time than the call's may have forgotten the nonce of a
// call it replays, so it is refused, nothing done, and the caller told
// so in what a console shows (200 characters). Signed at t0-59 and
// verified at t0: its window ends at t0+1, RecordBy t0+61.
func TestHeldNonceRecordedLate_RG5(t *testing.T) {
	secret := []byte("0123456789abcdef-federation")
	t0 := time.Date(2026, 12, 1, 12, 0, 0, 0, time.UTC)
	now := t0
	v := &Verifier{Secrets: NewSecrets(secret), Now: func() time.Time { return now }, Nonces: memNonces{}}
	body := []byte(`{"user":"alice"}`)
	h := Sign(secret, "POST", ConnectPath, "ams1", body, t0.Add(-59*time.Second))
	_, n, err := v.VerifyHeld(t.Context(), func(k string) string { return h[k] }, "POST", ConnectPath, body)
	if err != nil || n == nil {
		t.Fatalf("the connect: %+v %v", n, err)
	}
	now = t0.Add(61 * time.Second)
	if err := v.Recorded(n); err != nil {
		t.Errorf("committed at its RecordBy, t0+61: %v", err)
	}
	now = t0.Add(62 * time.Second)
	err = v.Recorded(n)
	want := "pod-to-pod call verified at 2026-12-01T12:00:00Z: nonce committed at 2026-12-01T12:01:02Z, too late to tell it from a replay (a slow commit here): nothing done, send again"
	if vdibroker.ErrorCode(err) != vdibroker.EUnauthenticated || vdibroker.ErrorMessage(err) != want {
		t.Fatalf("committed at t0+62: %v; want Unauthenticated %q", err, want)
	}
	if n := len(vdibroker.EUnauthenticated + ": " + want); n > 200 {
		t.Errorf("the refusal as a console shows it is %d characters, cut at 200", n)
	}
}
