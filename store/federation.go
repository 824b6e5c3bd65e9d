package store

import (
	"bytes"
	"cmp"
	"context"
	"database/sql"
	"encoding/json"
	"errors"
	"fmt"
	"maps"
	"slices"
	"strings"
	"time"

	"github.com/vdibroker/vdibroker"
)

// GetFederation returns the federation document this pod holds (NotFound
// when none was stored).
func (s *DB) GetFederation(ctx context.Context) (*vdibroker.Federation, error) {
	var doc string
	err := s.read(ctx, func(t *tx) error {
		return t.row(ctx, `SELECT document FROM federation WHERE id = 1`).Scan(&doc)
	})
	if errors.Is(err, sql.ErrNoRows) {
		return nil, notFound("no federation document is stored on this pod (PUT /api/v1/federation)")
	}
	if err != nil {
		return nil, fmt.Errorf("get federation: %w", err)
	}
	var f vdibroker.Federation
	if err := json.Unmarshal([]byte(doc), &f); err != nil {
		return nil, fmt.Errorf("get federation: decode stored document: %w", err)
	}
	return &f, nil
}

// PutFederation stores f, with the generation check in the same
// transaction (the row is locked on PostgreSQL; SQLite's writer is one), so
// two applies racing each other cannot both win with the older one last.
func (s *DB) PutFederation(ctx context.Context, f *vdibroker.Federation) (created bool, err error) {
	doc, err := json.Marshal(f)
	if err != nil {
		return false, fmt.Errorf("put federation: encode: %w", err)
	}
	err = s.write(ctx, func(t *tx) error {
		created = false
		var gen int64
		var old string
		err := t.row(ctx, `SELECT generation, document FROM federation WHERE id = 1`+t.d.forUpdate).Scan(&gen, &old)
		switch {
		case errors.Is(err, sql.ErrNoRows):
			_, err := t.exec(ctx, `INSERT INTO federation (id, generation, document, update_time) VALUES (1, ?, ?, ?)`,
				f.Generation, string(doc), ns(s.now()))
			if errors.Is(err, errUnique) {
				return errRaced // another apply inserted first: run again
			}
			created = err == nil
			t.audited(nil, json.RawMessage(doc))
			return err
		case err != nil:
			return err
		case gen > vdibroker.MaxGeneration:
			// Stored before generations were bounded: no bounded one is
			// higher, so any document replaces it (R-G5, R-SEC).
		case f.Generation > gen && f.Generation-gen > vdibroker.MaxGenerationStep:
			return vdibroker.FieldError("generation", "must be %d..%d, at most %d above generation %d this pod holds, got %d",
				gen+1, gen+vdibroker.MaxGenerationStep, vdibroker.MaxGenerationStep, gen, f.Generation)
		case f.Generation < gen:
			return &vdibroker.Error{Code: vdibroker.EConflict, Field: "generation",
				Message: fmt.Sprintf("generation: this pod holds generation %d; %d is older", gen, f.Generation)}
		case f.Generation == gen:
			if bytes.Equal([]byte(old), doc) {
				return nil // applied again: nothing changes
			}
			return &vdibroker.Error{Code: vdibroker.EConflict, Field: "generation",
				Message: fmt.Sprintf("generation: this pod holds generation %d with other content; a changed document needs a higher generation", gen)}
		}
		_, err = t.exec(ctx, `UPDATE federation SET generation = ?, document = ?, update_time = ? WHERE id = 1`,
			f.Generation, string(doc), ns(s.now()))
		t.audited(json.RawMessage(old), json.RawMessage(doc))
		return err
	})
	return created, wrap(err, "put federation")
}

// openOfUserQuery reads a user's open sessions in one pool through the two
// partial indexes on (host_pool, user_key): the unique one of pooled
// sessions (00001) and the one of the others (00004). Their conditions are
// spelled as the indexes spell them, so SQLite and PostgreSQL use them; the
// general ListUserSessions filter matches neither and reads every session
// of the pool, which a global connect, asking every pod in scope about
// every user, cannot afford.
const openOfUserQuery = `SELECT ` + sessionCols + ` FROM user_sessions
 WHERE host_pool = ? AND user_key = ? AND pooled AND ` + openSQL + `
 UNION ALL
 SELECT ` + sessionCols + ` FROM user_sessions
 WHERE host_pool = ? AND user_key = ? AND NOT pooled AND ` + openSQL

// OpenSessionsOfUsers returns the users' open sessions in each of pools,
// user by user, pool by pool, by id within a pool: a peer asked about the
// users of several global connects at once (R-G1) makes one store call
// for them. Like every read method it runs outside a transaction, one
// statement per user and pool.
func (s *DB) OpenSessionsOfUsers(ctx context.Context, users, pools []string) ([]*vdibroker.UserSession, error) {
	var out []*vdibroker.UserSession
	err := s.read(ctx, func(t *tx) error {
		for _, u := range users {
			key := vdibroker.FoldUser(u) // R-E5
			for _, p := range pools {
				list, err := queryAll(ctx, t, scanSession, openOfUserQuery, p, key, p, key)
				if err != nil {
					return err
				}
				slices.SortFunc(list, func(a, b *vdibroker.UserSession) int { return strings.Compare(a.ID, b.ID) })
				out = append(out, list...)
			}
		}
		return nil
	})
	if err != nil {
		return nil, fmt.Errorf("open sessions of users: %w", err)
	}
	return out, nil
}

// noncesPerMinute is vdibroker.MaxNoncesPerMinute (a test lowers it).
var noncesPerMinute = vdibroker.MaxNoncesPerMinute

// UseNonces implements vdibroker.FederationStore: in one transaction, the
// expired nonces and minutes are deleted (sweepNonces), each pod's count
// of now's minute goes up by its uses unless that takes it past
// vdibroker.MaxNoncesPerMinute (countNonces, the pods in one order on
// every replica), and each nonce of a pod within its budget is inserted
// unless it is there (a replay).
func (s *DB) UseNonces(ctx context.Context, uses []vdibroker.NonceUse, expires, now time.Time) (refused []error, err error) {
	if len(uses) == 0 {
		return nil, nil
	}
	err = s.write(ctx, func(t *tx) error {
		var err error
		refused, err = t.useNonces(ctx, uses, expires, now) // the transaction may run again
		return err
	})
	if err != nil {
		return nil, wrap(err, "use pod-to-pod nonces")
	}
	return refused, nil
}

// useNonces is UseNonces in transaction t.
func (t *tx) useNonces(ctx context.Context, uses []vdibroker.NonceUse, expires, now time.Time) ([]error, error) {
	if err := t.sweepNonces(ctx, now); err != nil {
		return nil, err
	}
	byPod := map[string]int{}
	for _, u := range uses {
		byPod[u.Pod]++
	}
	refused := make([]error, len(uses))
	over := map[string]error{}
	for _, pod := range slices.Sorted(maps.Keys(byPod)) {
		err := t.countNonces(ctx, pod, byPod[pod], now)
		var verr *vdibroker.Error
		switch {
		case errors.As(err, &verr):
			over[pod] = err
		case err != nil:
			return nil, err
		}
	}
	for i, u := range uses {
		if refused[i] = over[u.Pod]; refused[i] != nil {
			continue
		}
		fresh, err := t.insertNonce(ctx, u.Nonce, expires)
		if err != nil {
			return nil, err
		}
		if !fresh {
			refused[i] = vdibroker.ErrReplayed()
		}
	}
	return refused, nil
}

// sweepNonces deletes the expired nonces and the counts of minutes five
// or more before now's. Its statements lock rows every transaction that
// records a nonce wants (the expired nonces'): a transaction runs it
// once, before its counts (countNonces), and a group commit before any
// host's row (lockCallNonces).
func (t *tx) sweepNonces(ctx context.Context, now time.Time) error {
	if _, err := t.exec(ctx, `DELETE FROM federation_nonces WHERE expire_time < ?`, ns(now)); err != nil {
		return err
	}
	_, err := t.exec(ctx, `DELETE FROM federation_nonce_budgets WHERE minute < ?`, now.Unix()/60-5)
	return err
}

// countNonces counts k more nonces of budget pod (vdibroker.NonceUse) in
// now's minute, TooManyRequests (counting none) if that takes it past
// noncesPerMinute. It locks the row of pod's minute until the
// transaction ends: a transaction that counts several takes them in one
// order (by minute, then pod), so two cannot wait for each other.
func (t *tx) countNonces(ctx context.Context, pod string, k int, now time.Time) error {
	minute := now.Unix() / 60
	n := int64(0)
	if k <= noncesPerMinute {
		var err error
		n, err = t.exec(ctx, `INSERT INTO federation_nonce_budgets (pod, minute, n) VALUES (?, ?, ?)
		ON CONFLICT (pod, minute) DO UPDATE SET n = federation_nonce_budgets.n + ? WHERE federation_nonce_budgets.n + ? <= ?`,
			pod, minute, k, k, k, noncesPerMinute)
		if err != nil {
			return err
		}
	}
	if n == 0 {
		return &vdibroker.Error{Code: vdibroker.ETooManyRequests, RetryAfter: time.Minute,
			Message: fmt.Sprintf("%s made %d pod-to-pod calls to this pod this minute, its bound", vdibroker.NonceBudgetName(pod), noncesPerMinute)}
	}
	return nil
}

// insertNonce records nonce until expires; false if it was recorded
// before (a replay).
func (t *tx) insertNonce(ctx context.Context, nonce string, expires time.Time) (bool, error) {
	n, err := t.exec(ctx, `INSERT INTO federation_nonces (nonce, expire_time) VALUES (?, ?) ON CONFLICT DO NOTHING`, nonce, ns(expires))
	return n == 1, err
}

// lockCallNonces counts the call nonces of a group commit's placements
// (vdibroker.WithCallNonce, R-G5) in their budgets' minutes, before the
// batch locks any host's row: counted in each placement, after its
// host's row, a batch held the minute's row while it went on to lock its
// next host, which another replica's batch held while it waited for the
// minute's row (a deadlock PostgreSQL broke only after its
// deadlock_timeout). A budget's minute past its bound refuses its
// placements (nonceErr), not the others'; a placement that fails after
// it was counted leaves its count, which only errs toward the bound. The
// nonces themselves are inserted by the placements, each after its
// session (placementReq).
func lockCallNonces(ctx context.Context, t *tx, live []*commitReq) error {
	if !slices.ContainsFunc(live, func(r *commitReq) bool { return r.nonce != nil }) {
		return nil // the common batch: heartbeats and local connects
	}
	type budgetMinute struct {
		minute int64
		pod    string
	}
	byMinute := map[budgetMinute][]*commitReq{}
	var sweep time.Time
	for _, r := range live {
		if r.nonce != nil {
			r.nonceErr = nil // the batch may run again
			k := budgetMinute{r.nonce.At.Unix() / 60, r.nonce.Pod}
			byMinute[k] = append(byMinute[k], r)
			if r.nonce.At.After(sweep) {
				sweep = r.nonce.At
			}
		}
	}
	if err := t.sweepNonces(ctx, sweep); err != nil {
		return err
	}
	keys := slices.SortedFunc(maps.Keys(byMinute), func(a, b budgetMinute) int { // one order on every replica
		if c := cmp.Compare(a.minute, b.minute); c != 0 {
			return c
		}
		return strings.Compare(a.pod, b.pod)
	})
	for _, k := range keys {
		rs := byMinute[k]
		err := t.countNonces(ctx, k.pod, len(rs), rs[0].nonce.At)
		var verr *vdibroker.Error
		switch {
		case errors.As(err, &verr):
			for _, r := range rs {
				r.nonceErr = err
			}
		case err != nil:
			return err
		}
	}
	return nil
}

// useCallNonce records a placement's call nonce, counted already
// (lockCallNonces), in its transaction at now (the clock read just
// before): a replay is Unauthenticated, and so is a nonce past its
// RecordBy (vdibroker.ErrRecordedLate: a commit that forgot the expired
// nonces at a later time than its call's may have forgotten the nonce
// of a call it replays); the caller undoes the placement.
func (t *tx) useCallNonce(ctx context.Context, n *vdibroker.CallNonce, now time.Time) error {
	if !n.RecordBy.IsZero() && now.After(n.RecordBy) {
		return vdibroker.ErrRecordedLate(n, now)
	}
	fresh, err := t.insertNonce(ctx, n.Nonce, n.Expires)
	if err != nil {
		return err
	}
	if !fresh {
		return vdibroker.ErrReplayed()
	}
	return nil
}
