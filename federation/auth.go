package federation

import (
	"cmp"
	"context"
	"crypto/hmac"
	"crypto/rand"
	"crypto/sha256"
	"encoding/hex"
	"fmt"
	"strconv"
	"sync"
	"time"

	"github.com/vdibroker/vdibroker"
)

// Headers of a signed pod-to-pod request (R-G5).
const (
	HeaderPod       = "X-Vdibroker-Pod"
	HeaderTimestamp = "X-Vdibroker-Timestamp"
	HeaderNonce     = "X-Vdibroker-Nonce"
	HeaderSignature = "X-Vdibroker-Signature"
	// HeaderTo names the pod a call is for, inside its signature
	// (SignTo): a call captured on its way to one pod is refused by
	// every other, whose nonces are their own.
	HeaderTo = "X-Vdibroker-To"
)

// MaxSkew is how far a request's timestamp may be from the receiver's
// clock. A nonce is remembered at least until its timestamp is more than
// MaxSkew behind the clock (Call.windowEnd), so a request replayed within
// the window is refused by its nonce and after it by its time.
const MaxSkew = 60 * time.Second

// MinSecretLen is the shortest federation secret accepted (bytes).
const MinSecretLen = 16

// Signature is the HMAC-SHA256, with the federation secret, of a request's
// method, path, sending pod, timestamp (Unix seconds), nonce and the
// SHA-256 of its body, one per line, as hex.
func Signature(secret []byte, method, path, pod, timestamp, nonce string, body []byte) string {
	return SignatureTo(secret, method, path, pod, "", timestamp, nonce, body)
}

// SignatureTo is Signature with the receiving pod to as a last line; ""
// is Signature (a call of an older pod, which names none).
func SignatureTo(secret []byte, method, path, pod, to, timestamp, nonce string, body []byte) string {
	return signature(secret, signedLines(method, path, pod, to, timestamp, nonce, body))
}

// signedLines are the lines a signature covers (SignatureTo).
func signedLines(method, path, pod, to, timestamp, nonce string, body []byte) []string {
	bh := sha256.Sum256(body)
	lines := []string{method, path, pod, timestamp, nonce, hex.EncodeToString(bh[:])}
	if to != "" {
		lines = append(lines, to)
	}
	return lines
}

// signature is the HMAC-SHA256 of lines with secret, as hex.
func signature(secret []byte, lines []string) string {
	m := hmac.New(sha256.New, secret)
	for _, s := range lines {
		m.Write([]byte(s))
		m.Write([]byte{'\n'})
	}
	return hex.EncodeToString(m.Sum(nil))
}

// Sign returns the headers of a request from pod at now, for any pod.
func Sign(secret []byte, method, path, pod string, body []byte, now time.Time) map[string]string {
	return SignTo(secret, method, path, pod, "", body, now)
}

// SignTo returns the headers of a request from pod to pod to at now: no
// other pod takes it (Verifier.Pod).
func SignTo(secret []byte, method, path, pod, to string, body []byte, now time.Time) map[string]string {
	b := make([]byte, 16)
	rand.Read(b)
	nonce := hex.EncodeToString(b)
	ts := strconv.FormatInt(now.Unix(), 10)
	h := map[string]string{
		HeaderPod: pod, HeaderTimestamp: ts, HeaderNonce: nonce,
		HeaderSignature: SignatureTo(secret, method, path, pod, to, ts, nonce, body),
	}
	if to != "" {
		h[HeaderTo] = to
	}
	return h
}

// Verifier checks signed requests and refuses replays. It is safe for
// concurrent use.
type Verifier struct {
	// Secrets are the federation secrets a call may be signed with.
	Secrets *Secrets
	Now     func() time.Time // nil: time.Now
	// Pod is this pod's name: a call signed for another (HeaderTo) is
	// refused, as its nonce is kept by that pod only. A call naming none
	// (an older pod's) is taken.
	Pod string
	// Nonces keeps the nonces of verified calls where every replica of
	// the pod sees them (the pod's store), so a call replayed on another
	// replica is refused too; nil keeps them in this process's memory
	// (at most maxMemoryNonces).
	Nonces Nonces
	// ReadsInMemory keeps the nonces of read-only calls (VerifyRead) in
	// this process's memory, and refuses such a call signed before
	// Started (whole seconds). For a pod whose store belongs to this one
	// process (SQLite, whose data dir one process holds): its memory is
	// every replica's, and a call taken before a restart is refused by
	// its time or by Nonces (readKeptInStore, with Marks), so a replay is
	// refused as by Nonces, without a synced commit for every call that
	// only reads.
	ReadsInMemory bool
	// Started is when this process started to take calls: in a later
	// second than any call a process before it on the same store took
	// (serve waits for it, and for the second after the mark that
	// process left, ReadsFrom).
	Started time.Time
	// Marks, with ReadsInMemory, is where this process keeps its mark of
	// how far it verified reads (readMarkName): no read is verified at or
	// after the mark last committed (Mark moves it ahead, a read past it
	// commits one first), Close sets it to when the last was, and the
	// next process on the store starts its reads after it (ReadsFrom),
	// whatever its clock says (readKeptInStore). nil: no mark, which
	// holds only while the clock never steps back across a restart.
	Marks Marks
	// MarkInterval is how often the mark is moved ahead (KeepMark; 0:
	// DefaultMarkInterval); each move sets it 2 × MarkInterval ahead of
	// the clock, so a move late by up to an interval leaves it standing.
	MarkInterval time.Duration

	mu     sync.Mutex
	nonces map[string]memNonce // by nonce
	counts map[string]int      // the nonces kept of each budget
	// swept is the latest sweep (it only moves forward), soonest the
	// earliest until of the nonces kept (zero: none kept), soonestOf
	// each budget's (nonces are forgotten only by a sweep, which sets
	// them anew, so a nonce kept only lowers them).
	swept, soonest time.Time
	soonestOf      map[string]time.Time
	// maxPerBudget and maxTotal bound the nonces kept in memory (0:
	// maxMemoryNonces and maxMemoryNoncesTotal); a test sets them small.
	maxPerBudget, maxTotal int
	// marked is the mark last committed (Marks): reads are verified
	// before it only; verified is the latest clock reading a read was
	// verified at; closed: Close was called, every call is refused.
	marked, verified time.Time
	closed           bool
	// markFailed is when Mark last failed to commit (zero: its last
	// commit went through): until a MarkInterval later, reads past the
	// mark are taken without a commit being tried for each (admit).
	markFailed time.Time
	// markMu orders the mark's commits (Mark, Close).
	markMu sync.Mutex
}

// Marks keeps a one-process pod's read mark (Verifier.Marks) in its
// store; vdibroker.SharedStore does.
type Marks interface {
	SharedValue(ctx context.Context, name string) (string, error)
	SetSharedValue(ctx context.Context, name, value string, now time.Time) error
}

// readMarkName is the shared value (vdibroker.SharedStore) holding the
// read mark, as Unix nanoseconds.
const readMarkName = "pod-reads-verified-before"

// DefaultMarkInterval is how often a one-process pod moves its read mark
// ahead (Verifier.MarkInterval): a synced commit every 5 s, whatever the
// reads, and a process started after a crash waits at most 2 × 5 s and a
// second for the mark its predecessor left.
const DefaultMarkInterval = 5 * time.Second

// memNonce is a nonce kept in memory: its budget, and when it may be
// forgotten.
type memNonce struct {
	budget string
	until  time.Time
}

// Nonces records the nonces of verified calls (vdibroker.FederationService
// does, in its store).
type Nonces interface {
	// UseNonce records nonce until expires, spending pod's budget
	// (vdibroker.NonceUse): false when it was recorded before (a
	// replay).
	UseNonce(ctx context.Context, pod, nonce string, expires time.Time) (fresh bool, err error)
}

// maxNonceLen bounds a nonce (Sign makes 32 hex digits).
const maxNonceLen = 64

// maxMemoryNonces bounds the nonces a Verifier keeps in memory of each
// budget (Call.Budget): without Nonces, and the reads' with
// ReadsInMemory.
const maxMemoryNonces = 1 << 17

// maxMemoryNoncesTotal bounds the nonces a Verifier keeps in memory of
// every budget together (R-SEC). Each budget is a pod of the document,
// which lists up to MaxPods: a holder of the federation secret signing
// as each of them would otherwise make a pod keep 200 × 131,072, some 26
// million nonces (about 4 GB), where this is about 160 MB (some 160
// bytes a nonce, measured: its 32 hex digits, the map's slot, its
// growth).
//
// A nonce is kept until its timestamp leaves the window, at most
// 2 × MaxSkew (2 minutes, for a call signed MaxSkew ahead of this pod's
// clock), and swept up to a minute later, so this bound is met by some 5,800 calls a second (8,700 within
// the 2 minutes) from all pods together, kept up for minutes. A
// federation's own calls kept in memory (the reads and, on such a pod,
// the connects' and directory registrations') are far fewer: each of
// 199 peers asks for this pod's loads at most about once a LoadTTL (3 s),
// some 70 calls a second; a global connect asks a pod a few calls (its
// sessions, the directory's look-up, the connect), so a logon storm of
// 250,000 users in half an hour (some 140 connects a second), each of
// whose connects asked this one pod all three, is some 420 more: under
// 500 a second, a tenth of the bound.
const maxMemoryNoncesTotal = 1 << 20

// Kind is what a pod-to-pod call does, for how its nonce is recorded.
type Kind int

const (
	// KindRecord: its nonce is recorded in Nonces before it is answered
	// (in memory without them).
	KindRecord Kind = iota
	// KindRead: it only reads (its answer is all it does); with
	// ReadsInMemory its nonce is kept in memory (and in Nonces too when
	// readKeptInStore), and a call signed before Started is refused.
	KindRead
	// KindHeld: a connect's or a registration's, whose nonce the caller
	// records (vdibroker.CallNonce); without Nonces it is KindRecord.
	// With ReadsInMemory a replay to this process is refused already
	// at Finish, before anything is decided.
	KindHeld
)

// Call is a pod-to-pod call's signature headers, checked by Check before
// the call's body is read; Finish checks the signature over the body.
type Call struct {
	// Pod is the pod the call says signed it: proven only by Finish.
	Pod string
	// Budget is whose budget of calls the call's nonce spends
	// (vdibroker.MaxNoncesPerMinute in Nonces, maxMemoryNonces in
	// memory): Check sets Pod. A receiver that holds no document, and
	// so cannot tell a pod from any name a holder of the secret makes
	// up, sets vdibroker.NoDocumentBudget: one budget for every caller.
	Budget string

	mode               int // how Finish records the nonce
	to, ts, nonce, sig string
	sec                int64
}

// windowEnd is when c's timestamp leaves the window Check and Finish take
// it in: the same signed request replayed later is refused by its time,
// so its nonce may be forgotten then, not before.
func (c *Call) windowEnd() time.Time { return time.Unix(c.sec, 0).Add(MaxSkew) }

// Verify checks a request's headers (get returns one by name) against its
// method, path and body. A missing, wrong, stale or replayed signature is
// Unauthenticated; it returns the sending pod. A nonce store that fails
// answers its error (StoreUnavailable, TooManyRequests). The call spends
// the budget of the pod it names: a receiver that takes any name uses
// Check and Finish, and sets the budget (Call.Budget).
func (v *Verifier) Verify(ctx context.Context, get func(string) string, method, path string, body []byte) (string, error) {
	pod, _, err := v.verify(ctx, get, method, path, body, KindRecord)
	return pod, err
}

// VerifyRead is Verify for a call that only reads (KindRead).
func (v *Verifier) VerifyRead(ctx context.Context, get func(string) string, method, path string, body []byte) (string, error) {
	pod, _, err := v.verify(ctx, get, method, path, body, KindRead)
	return pod, err
}

// VerifyHeld is Verify for a connect, whose nonce the caller records
// (KindHeld): in its placement's commit, or on its own before it answers
// (vdibroker.CallNonce). Without Nonces it is Verify.
func (v *Verifier) VerifyHeld(ctx context.Context, get func(string) string, method, path string, body []byte) (string, *vdibroker.CallNonce, error) {
	return v.verify(ctx, get, method, path, body, KindHeld)
}

// verify is Check then Finish.
func (v *Verifier) verify(ctx context.Context, get func(string) string, method, path string, body []byte, kind Kind) (string, *vdibroker.CallNonce, error) {
	c, err := v.Check(get, kind)
	if err != nil {
		return "", nil, err
	}
	held, err := v.Finish(ctx, c, method, path, body)
	if err != nil {
		return "", nil, err
	}
	return c.Pod, held, nil
}

// storeMargin is how much longer than its signature's window a nonce is
// kept in Nonces: the store forgets the expired nonces at the time of a
// commit (vdibroker.FederationStore.UseNonces), which comes after the
// verification of the calls it records and may be another replica's,
// whose clock may differ from this one's.
const storeMargin = MaxSkew

// heldMargin is how much longer than storeMargin a held nonce is kept:
// more than any connect takes (a pod-to-pod call is bounded by the
// caller's pod timeout, 2 s by default), as it is recorded when the
// connect ends.
const heldMargin = time.Minute

// How Finish records a nonce.
const (
	recordNow  = iota // in Nonces (in memory without them)
	recordRead        // in this process's memory (and Nonces, readKeptInStore); calls signed before Started are refused
	recordHeld        // returned to the caller to record; with ReadsInMemory, in memory too
)

func (v *Verifier) now() time.Time {
	if v.Now != nil {
		return v.Now()
	}
	return time.Now()
}

// Check checks what a call's headers (get returns one by name) tell
// before its body is read, so that a caller without the secret does not
// have a body of up to a MiB read and hashed by a call that names no pod,
// a stale time or another pod: the four signature headers are there, the
// nonce is no longer than maxNonceLen, the timestamp is within MaxSkew
// of this pod's clock (for a read with ReadsInMemory, not before
// Started), and the call is signed for this pod or for none. Any of
// these is Unauthenticated.
func (v *Verifier) Check(get func(string) string, kind Kind) (*Call, error) {
	if v.isClosed() {
		return nil, errClosed()
	}
	c := &Call{Pod: get(HeaderPod), ts: get(HeaderTimestamp), nonce: get(HeaderNonce), sig: get(HeaderSignature), to: get(HeaderTo)}
	c.Budget = c.Pod
	if c.sig == "" || c.ts == "" || c.nonce == "" || c.Pod == "" {
		return nil, vdibroker.Errorf(vdibroker.EUnauthenticated, "pod-to-pod call without a federation signature")
	}
	if len(c.nonce) > maxNonceLen {
		return nil, vdibroker.Errorf(vdibroker.EUnauthenticated, "pod-to-pod call with a nonce longer than %d characters", maxNonceLen)
	}
	var err error
	if c.sec, err = strconv.ParseInt(c.ts, 10, 64); err != nil {
		return nil, vdibroker.Errorf(vdibroker.EUnauthenticated, "pod-to-pod call with a malformed timestamp")
	}
	switch {
	case kind == KindRead && v.ReadsInMemory:
		c.mode = recordRead
	case kind == KindHeld && v.Nonces != nil:
		c.mode = recordHeld
	default:
		c.mode = recordNow
	}
	if err := v.checkTime(c, v.now()); err != nil {
		return nil, err
	}
	if c.to != "" && v.Pod != "" && c.to != v.Pod {
		return nil, vdibroker.Errorf(vdibroker.EUnauthenticated, "pod-to-pod call signed for pod %q, not this pod %q (a call replayed to another pod, or a document naming this pod otherwise)", c.to, v.Pod)
	}
	return c, nil
}

// checkTime refuses c unless its timestamp is within MaxSkew of now (and
// for a read kept in memory, not before Started's second).
func (v *Verifier) checkTime(c *Call, now time.Time) error {
	at := time.Unix(c.sec, 0)
	if d := now.Sub(at); d > MaxSkew || d < -MaxSkew {
		return vdibroker.Errorf(vdibroker.EUnauthenticated, "pod-to-pod call signed at %s, more than %s from this pod's clock", at.UTC().Format(time.RFC3339), MaxSkew)
	}
	if c.mode == recordRead && c.sec < v.Started.Unix() {
		return vdibroker.Errorf(vdibroker.EUnauthenticated, "pod-to-pod call signed at %s, before this pod started (%s): a replay, or a clock behind this pod's",
			at.UTC().Format(time.RFC3339), v.Started.UTC().Format(time.RFC3339))
	}
	return nil
}

// readKeptInStore reports whether a read kept in memory (recordRead),
// verified at now, has its nonce recorded in Nonces too: when it is
// signed ahead of this pod's clock (its second after now's), or within
// MaxSkew and a second of Started. Every other read costs no commit.
//
// Why a replay across a restart is then refused (whole seconds
// throughout). The process before verified the call at V by its clock;
// this one takes reads from W = Started, which is at or after the second
// after the read mark M the process before left in Marks (ReadsFrom,
// which serve waits for):
//   - the process before verified every read before the mark it had
//     committed (admit), and no mark it committed was ever below a read
//     it had verified (Mark lowers its mark in force before it commits
//     a lower one, Close commits the latest read's), so V < M < W;
//   - a read it kept in memory only was signed at ts <= V (not ahead of
//     its clock), so ts < W: refused by its time (checkTime);
//   - a read it recorded in Nonces too was signed within MaxSkew of V,
//     ts <= V + MaxSkew < W + MaxSkew: refused by its time, or this
//     process sends its replay to Nonces as well, which refuse it.
//
// This holds whatever either clock says: W comes from the mark, not from
// this process's clock, so a clock stepped back across the restart (an
// NTP step, the data dir moved to a machine whose clock is behind) does
// not reopen the reads, nor does a crash (the mark is committed, synced,
// before a read past it is verified). A mark committed before the
// crash is at most 2 × MarkInterval ahead of its clock, so a restart
// after a crash waits that long at most. Without a mark (the first
// process on the store, or without Marks) W is the second after this
// process took the store (cmd/vdibroker readsFrom): as the process before
// verified its last read before it let go of it, V < W on a clock that
// did not step back. Refusing the calls signed in W's second instead
// would refuse every peer's read signed in it, a replay or not. Within
// one process memory refuses a replay: a read recorded in both is kept
// in memory too, as its replay, once its time is no longer ahead, is kept
// in memory only.
func (v *Verifier) readKeptInStore(c *Call, now time.Time) bool {
	return c.sec > now.Unix() || c.sec <= v.Started.Unix()+int64(MaxSkew/time.Second)+1
}

// Finish checks c's signature over method, path and body (a wrong one is
// Unauthenticated) and records its nonce as its Kind says: a replay is
// Unauthenticated, a nonce store that fails answers its error
// (StoreUnavailable, TooManyRequests). For KindHeld with Nonces it
// returns the nonce for the caller to record. The time is checked again:
// a body that arrives slowly must not take the call past its window,
// when the nonce of the call it replays may be forgotten.
func (v *Verifier) Finish(ctx context.Context, c *Call, method, path string, body []byte) (*vdibroker.CallNonce, error) {
	lines, signed := signedLines(method, path, c.Pod, c.to, c.ts, c.nonce, body), false
	for _, secret := range v.Secrets.All() {
		// Every secret is tried, so the time taken does not say which
		// one a signature was made with.
		if hmac.Equal([]byte(c.sig), []byte(signature(secret, lines))) {
			signed = true
		}
	}
	if !signed {
		return nil, vdibroker.Errorf(vdibroker.EUnauthenticated, "pod-to-pod call with a wrong federation signature (is the federation secret the same on every pod?)")
	}
	now := v.now()
	if err := v.checkTime(c, now); err != nil {
		return nil, err
	}
	if err := v.admit(ctx, c, now); err != nil {
		return nil, err
	}
	end := c.windowEnd()
	expires := end.Add(storeMargin)
	switch {
	case c.mode == recordNow && v.Nonces != nil:
		return nil, v.record(ctx, c, expires)
	case c.mode == recordRead && v.Nonces != nil && v.readKeptInStore(c, now):
		// In memory first: a replay to this process is refused without
		// a commit.
		if err := v.remember(c.Budget, c.nonce, end, now); err != nil {
			return nil, err
		}
		return nil, v.record(ctx, c, expires)
	case c.mode == recordHeld:
		// Recorded when the connect ends, not now: kept heldMargin longer,
		// so that a replay verified at the end of the signature's window
		// still finds it whenever either connect's commit comes by
		// RecordBy; one later is refused (the store's commit, Recorded).
		held := &vdibroker.CallNonce{Pod: c.Budget, Nonce: c.nonce, Expires: expires.Add(heldMargin), At: now, RecordBy: end.Add(heldMargin)}
		if !v.ReadsInMemory {
			return held, nil
		}
		if err := v.remember(c.Budget, c.nonce, end, now); err != nil {
			return nil, err
		}
		return held, nil
	}
	return nil, v.remember(c.Budget, c.nonce, end, now)
}

// errClosed is the refusal of every call once the verifier is closed.
func errClosed() error {
	return vdibroker.Errorf(vdibroker.EPodUnavailable, "pod-to-pod call to a pod that is stopping: send it again once it is back")
}

func (v *Verifier) isClosed() bool {
	v.mu.Lock()
	defer v.mu.Unlock()
	return v.closed
}

// admit lets c be verified at now: no call once the verifier is closed
// (Close); a read kept in memory (recordRead), with Marks, only before
// the read mark committed, which admit moves ahead first when now is
// past it (Mark; KeepMark's last move failed or is late), and now is
// then the latest read verified, if it is.
//
// When the mark cannot be committed (a store outage: the disk read-only
// or full, R-OUT1), a read past it is taken all the same, kept in memory
// as before the mark existed, and a commit is tried again at most once a
// MarkInterval: our choice. Refusing it would cut the pod off from its
// peers' reads for the whole outage (their session look-ups, which send
// a user back to her session here, and its loads), while what it guards
// against needs all of: a read captured during the outage, this process
// ending before it commits a mark again (a crash, or a stop whose last
// commit fails too; the next commit is at most a MarkInterval after the
// store takes writes again), and the next process's clock behind the
// read's time. Mark never commits below a read verified (floor), so the
// first mark after the outage covers the reads taken during it. Only the
// store's failure opens this: a commit given up because the read's
// caller left (ctx done) refuses that read and lets none past the mark.
func (v *Verifier) admit(ctx context.Context, c *Call, now time.Time) error {
	for moved := false; ; moved = true {
		v.mu.Lock()
		switch {
		case v.closed:
			v.mu.Unlock()
			return errClosed()
		case c.mode != recordRead || v.Marks == nil:
			v.mu.Unlock()
			return nil
		case v.admits(now):
			v.verified = later(v.verified, now)
			v.mu.Unlock()
			return nil
		}
		v.mu.Unlock()
		if moved {
			// Only a clock that stepped back between now and the move.
			return vdibroker.Errorf(vdibroker.EPodUnavailable, "pod-to-pod read verified at %s, past this pod's read mark (its clock stepped back): send it again",
				now.UTC().Format(time.RFC3339))
		}
		if err := v.mark(ctx, now); err != nil {
			switch {
			case v.isClosed():
				return errClosed()
			case ctx.Err() != nil:
				// The caller left, the store did not fail: no
				// markFailed, and the read is not taken.
				return err
			}
			// Not committed (markFailed is set): taken at the next turn.
		}
	}
}

// admits reports whether a read verified at now is taken without a move
// of the mark: it is before the mark in force, or a move failed less
// than a MarkInterval before it (admit). v.mu is held.
func (v *Verifier) admits(now time.Time) bool {
	return now.Before(v.marked) || !v.markFailed.IsZero() && now.Sub(v.markFailed) < v.markInterval()
}

func (v *Verifier) markInterval() time.Duration { return cmp.Or(v.MarkInterval, DefaultMarkInterval) }

// floor is the lowest read mark this process may commit: the latest read
// it verified, and the second before Started's (the process before it
// verified no read after its mark, whose second Started is after). v.mu
// is held.
func (v *Verifier) floor() time.Time {
	return later(v.verified, v.Started.Truncate(time.Second).Add(-time.Nanosecond))
}

// Mark commits the read mark (Marks) 2 × MarkInterval ahead of the clock
// (never below floor), before which reads are then verified (admit). A
// mark lower than the one in force (the clock stepped back) is in force
// before its commit, a higher one after it: the mark committed is never
// below a read verified. Without Marks it does nothing; once closed it
// is refused.
func (v *Verifier) Mark(ctx context.Context) error { return v.mark(ctx, time.Time{}) }

// mark is Mark. For a read verified at read (admit; zero: KeepMark's
// move) it commits nothing when, by the time it holds markMu, the read
// is taken without a move (admits): the reads that found the mark behind
// them together wait for one commit, not one each, and in an outage for
// one failed try a MarkInterval. A commit that fails while ctx is not
// done is the store's failure (markFailed); one whose ctx is done is the
// caller's leaving, which does not let reads past the mark.
func (v *Verifier) mark(ctx context.Context, read time.Time) error {
	if v.Marks == nil {
		return nil
	}
	v.markMu.Lock()
	defer v.markMu.Unlock()
	now := v.now()
	v.mu.Lock()
	if v.closed {
		v.mu.Unlock()
		return errClosed()
	}
	if !read.IsZero() && v.admits(read) {
		v.mu.Unlock()
		return nil
	}
	m := later(now.Add(2*v.markInterval()), v.floor())
	if m.Before(v.marked) {
		v.marked = m
	}
	v.mu.Unlock()
	if err := v.setMark(ctx, m, now); err != nil {
		if ctx.Err() == nil {
			v.mu.Lock()
			v.markFailed = now
			v.mu.Unlock()
		}
		return err
	}
	v.mu.Lock()
	if m.After(v.marked) {
		v.marked = m
	}
	v.markFailed = time.Time{}
	v.mu.Unlock()
	return nil
}

// KeepMark moves the read mark ahead (Mark) at once and then at each of
// ticks (every MarkInterval: MarkEvery), until ctx is done or the
// verifier is closed; moved, when not nil, is told of each move's
// outcome, nil when it went through (after a failed one a read past the
// mark is taken all the same, in memory only, admit). Without Marks or
// ReadsInMemory it returns at once.
func (v *Verifier) KeepMark(ctx context.Context, ticks <-chan time.Time, moved func(error)) {
	if v.Marks == nil || !v.ReadsInMemory {
		return
	}
	for {
		err := v.Mark(ctx)
		if err != nil && (v.isClosed() || ctx.Err() != nil) {
			return
		}
		if moved != nil {
			moved(err)
		}
		select {
		case <-ctx.Done():
			return
		case <-ticks:
		}
	}
}

// MarkEvery is how often KeepMark's ticks should come: MarkInterval, or
// DefaultMarkInterval.
func (v *Verifier) MarkEvery() time.Duration { return v.markInterval() }

// Close refuses every call from now on: the server calls it once it has
// shut down (or given up waiting for its calls), so that nothing is
// verified once the process may let go of its store. With Marks it then
// commits the read mark at the latest read verified (floor), so that a
// process started next, on a clock in step, waits for no mark. Calling it
// again does nothing.
func (v *Verifier) Close(ctx context.Context) error {
	v.markMu.Lock()
	defer v.markMu.Unlock()
	v.mu.Lock()
	was := v.closed
	v.closed = true
	m := v.floor()
	v.mu.Unlock()
	if was || v.Marks == nil {
		return nil
	}
	return v.setMark(ctx, m, v.now())
}

// setMark commits m as the read mark.
func (v *Verifier) setMark(ctx context.Context, m, now time.Time) error {
	if err := v.Marks.SetSharedValue(ctx, readMarkName, strconv.FormatInt(m.UnixNano(), 10), now); err != nil {
		return fmt.Errorf("pod-to-pod read mark: %w", err)
	}
	return nil
}

// ReadsFrom is when a one-process pod's process may start to take reads
// (Verifier.Started): the later of from and the second after the read
// mark the process before it left in marks (none: from). See
// readKeptInStore.
func ReadsFrom(ctx context.Context, marks Marks, from time.Time) (time.Time, error) {
	s, err := marks.SharedValue(ctx, readMarkName)
	switch {
	case vdibroker.ErrorCode(err) == vdibroker.ENotFound:
		return from, nil
	case err != nil:
		return time.Time{}, fmt.Errorf("pod-to-pod read mark: %w", err)
	}
	ns, err := strconv.ParseInt(s, 10, 64)
	if err != nil {
		return time.Time{}, fmt.Errorf("pod-to-pod read mark %q: %w", s, err)
	}
	return later(from, time.Unix(0, ns).Truncate(time.Second).Add(time.Second)), nil
}

// later is the later of a and b.
func later(a, b time.Time) time.Time {
	if b.After(a) {
		return b
	}
	return a
}

// record records c's nonce in Nonces until expires: a replay is
// Unauthenticated, and so is a call whose commit ended past its window.
func (v *Verifier) record(ctx context.Context, c *Call, expires time.Time) error {
	fresh, err := v.Nonces.UseNonce(ctx, c.Budget, c.nonce, expires)
	if err != nil {
		return err
	}
	if !fresh {
		return vdibroker.ErrReplayed()
	}
	// The commit forgot the expired nonces at its own time: one that
	// ended past the window may have forgotten the nonce of the call
	// this one replays, so the call is taken only if it is still within
	// it (its nonce stays recorded, which refuses nothing else). The
	// call has done nothing yet (its handler runs after Finish): its
	// caller is told so, and why, not only that the clocks differ, as a
	// slow commit is the likelier cause when they do not.
	end := c.windowEnd()
	after := v.now()
	if err := v.checkTime(c, after); err != nil {
		if !after.After(end) {
			return err
		}
		return vdibroker.Errorf(vdibroker.EUnauthenticated, "pod-to-pod call signed at %s: nonce committed at %s, over %s later (a slow commit here, or the caller's clock behind): nothing done, send again",
			end.Add(-MaxSkew).UTC().Format(time.RFC3339), after.UTC().Format(time.RFC3339), MaxSkew)
	}
	return nil
}

// Recorded checks, once a held nonce's commit (KindHeld) ended, that it
// ended by its RecordBy, as Finish does for the others: a commit ended
// later may have come after a commit that forgot the nonce of the call
// this one replays (vdibroker.ErrRecordedLate). Its caller has done
// nothing yet, only committed the nonce. A placement's commit checks it
// itself, before it writes anything.
func (v *Verifier) Recorded(n *vdibroker.CallNonce) error {
	if now := v.now(); !n.RecordBy.IsZero() && now.After(n.RecordBy) {
		return vdibroker.ErrRecordedLate(n, now)
	}
	return nil
}

// remember keeps nonce in this process's memory until until (its
// signature's window end, Call.windowEnd), at now: a replay is
// Unauthenticated, and so is a call whose window ended before the latest
// sweep (which another call may have made at a later time than this
// call's now, and which may have forgotten the nonce this call
// replays). More than maxMemoryNonces of budget is TooManyRequests (the
// other budgets' calls are still taken), more than maxMemoryNoncesTotal
// of all budgets TooManyRequests for every budget, either with a
// Retry-After of when the next sweep could free room (memoryRetryAfter).
// Either bound is met as is until the next sweep of the expired ones
// (each MaxSkew), not by a sweep of its own: a sweep at every call
// refused would walk every nonce kept for each (R-SEC).
func (v *Verifier) remember(budget, nonce string, until, now time.Time) error {
	v.mu.Lock()
	defer v.mu.Unlock()
	if v.nonces == nil {
		v.nonces, v.counts, v.soonestOf = map[string]memNonce{}, map[string]int{}, map[string]time.Time{}
	}
	if now.Sub(v.swept) > MaxSkew {
		v.soonest, v.soonestOf = time.Time{}, make(map[string]time.Time, len(v.counts))
		for n, m := range v.nonces {
			if now.After(m.until) {
				delete(v.nonces, n)
				if v.counts[m.budget]--; v.counts[m.budget] <= 0 {
					delete(v.counts, m.budget)
				}
				continue
			}
			v.soonest = earliest(v.soonest, m.until)
			v.soonestOf[m.budget] = earliest(v.soonestOf[m.budget], m.until)
		}
		v.swept = now
	}
	if v.swept.After(until) {
		return vdibroker.Errorf(vdibroker.EUnauthenticated, "pod-to-pod call signed at %s, more than %s before this pod's nonces were last swept (a replay, or a call verified as its window ended)",
			until.Add(-MaxSkew).UTC().Format(time.RFC3339), MaxSkew)
	}
	if _, seen := v.nonces[nonce]; seen {
		return vdibroker.ErrReplayed()
	}
	if n := cmp.Or(v.maxPerBudget, maxMemoryNonces); v.counts[budget] >= n {
		return &vdibroker.Error{Code: vdibroker.ETooManyRequests, RetryAfter: v.memoryRetryAfter(now, v.soonestOf[budget]),
			Message: fmt.Sprintf("too many recent pod-to-pod calls from %s: %d held against replay, this pod's bound", vdibroker.NonceBudgetName(budget), n)}
	}
	if n := cmp.Or(v.maxTotal, maxMemoryNoncesTotal); len(v.nonces) >= n {
		return &vdibroker.Error{Code: vdibroker.ETooManyRequests, RetryAfter: v.memoryRetryAfter(now, v.soonest),
			Message: fmt.Sprintf("too many recent pod-to-pod calls from all pods together: %d held against replay, this pod's bound", n)}
	}
	v.nonces[nonce] = memNonce{budget: budget, until: until}
	v.counts[budget]++
	v.soonest = earliest(v.soonest, until)
	v.soonestOf[budget] = earliest(v.soonestOf[budget], until)
	return nil
}

// earliest is the earlier of a and b, a zero one being none.
func earliest(a, b time.Time) time.Time {
	if a.IsZero() || b.Before(a) {
		return b
	}
	return a
}

// memoryRetryAfter is how long a call refused at now for the nonces kept
// in memory should wait: until the first sweep (more than MaxSkew after
// the last) after soonest, when the earliest nonce that frees room (of
// the call's budget for its own cap, of any for the total) expires, in
// whole seconds past it; at least a second and at most 2 × MaxSkew and a
// second (a nonce is kept at most 2 × MaxSkew). As the store's nonce
// budget (a minute), it is when room may be free, not a promise: another
// call may sweep sooner, putting the next sweep off, or take the room.
// v.mu is held.
func (v *Verifier) memoryRetryAfter(now, soonest time.Time) time.Duration {
	at := v.swept.Add(MaxSkew)
	if soonest.After(at) {
		at = soonest
	}
	// A sweep frees a nonce when its time is past both (strictly after).
	d := at.Sub(now).Truncate(time.Second) + time.Second
	return min(max(d, time.Second), 2*MaxSkew+time.Second)
}
