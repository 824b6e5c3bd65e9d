package store

import (
	"context"
	"encoding/json"
	"fmt"
	"math/rand/v2"
	"time"

	"github.com/vdibroker/vdibroker"
)

// The autoscaler's part of the store (migration 00017): the
// lease, the evaluation records and the per-pool state, the last two as
// JSON documents (nothing queries inside them).

// leaseName is the one row of autoscale_lease.
const leaseName = "autoscale"

// AcquireAutoscaleLease implements vdibroker.AutoscaleStore: one upsert
// whose update is conditional on the lease being the holder's or expired,
// so two replicas racing both run it and exactly one gets a row changed.
func (s *DB) AcquireAutoscaleLease(ctx context.Context, holder string, now time.Time, ttl time.Duration) (bool, error) {
	var n int64
	err := s.write(ctx, func(t *tx) (err error) {
		n, err = t.exec(ctx, `INSERT INTO autoscale_lease (name, holder, expire_time) VALUES (?, ?, ?)
			ON CONFLICT (name) DO UPDATE SET holder = excluded.holder, expire_time = excluded.expire_time
			WHERE autoscale_lease.holder = excluded.holder OR autoscale_lease.expire_time <= ?`,
			leaseName, holder, ns(now.Add(ttl)), ns(now))
		return err
	})
	if err != nil {
		return false, wrap(err, "acquire autoscale lease")
	}
	return n == 1, nil
}

// ReleaseAutoscaleLease implements vdibroker.AutoscaleStore.
func (s *DB) ReleaseAutoscaleLease(ctx context.Context, holder string) error {
	err := s.write(ctx, func(t *tx) error {
		_, err := t.exec(ctx, `DELETE FROM autoscale_lease WHERE name = ? AND holder = ?`, leaseName, holder)
		return err
	})
	return wrap(err, "release autoscale lease")
}

// trimEvery: the cap of MaxAutoscaleEvaluations per pool is enforced on
// one append in trimEvery, drawn at random (so that pools evaluated in a
// fixed order are all trimmed, whatever their number), so an append does
// not walk the pool's index each time.
// keepEvaluations is vdibroker.MaxAutoscaleEvaluations; tests lower both.
var (
	trimEvery       = 64
	keepEvaluations = vdibroker.MaxAutoscaleEvaluations
)

// AppendAutoscaleEvaluation implements vdibroker.AutoscaleStore.
func (s *DB) AppendAutoscaleEvaluation(ctx context.Context, e *vdibroker.AutoscaleEvaluation) error {
	if e.Actions == nil {
		e.Actions = []vdibroker.AutoscaleAction{}
	}
	rec, err := json.Marshal(e)
	if err != nil {
		return fmt.Errorf("append autoscale evaluation: %w", err)
	}
	var seq int64
	err = s.write(ctx, func(t *tx) error {
		if err := t.row(ctx, `INSERT INTO autoscale_evaluations (host_pool, time, record) VALUES (?, ?, ?) RETURNING seq`,
			e.HostPool, ns(e.Time), string(rec)).Scan(&seq); err != nil {
			return err
		}
		if rand.IntN(trimEvery) != 0 {
			return nil
		}
		_, err := t.exec(ctx, `DELETE FROM autoscale_evaluations WHERE host_pool = ? AND seq <
			(SELECT seq FROM autoscale_evaluations WHERE host_pool = ? ORDER BY seq DESC LIMIT 1 OFFSET ?)`,
			e.HostPool, e.HostPool, keepEvaluations-1)
		return err
	})
	if err != nil {
		return wrap(err, "append autoscale evaluation: pool=%q", e.HostPool)
	}
	e.Seq = seq
	return nil
}

// ListAutoscaleEvaluations implements vdibroker.AutoscaleStore.
func (s *DB) ListAutoscaleEvaluations(ctx context.Context, pool string, before int64, limit int) ([]*vdibroker.AutoscaleEvaluation, error) {
	if limit <= 0 {
		limit = 100
	}
	if before <= 0 {
		before = 1<<63 - 1
	}
	var out []*vdibroker.AutoscaleEvaluation
	err := s.read(ctx, func(t *tx) error {
		rows, err := t.query(ctx, `SELECT seq, record FROM autoscale_evaluations
			WHERE host_pool = ? AND seq < ? ORDER BY seq DESC LIMIT ?`, pool, before, limit)
		if err != nil {
			return err
		}
		defer rows.Close()
		for rows.Next() {
			var seq int64
			var rec string
			if err := rows.Scan(&seq, &rec); err != nil {
				return err
			}
			e := &vdibroker.AutoscaleEvaluation{}
			if err := json.Unmarshal([]byte(rec), e); err != nil {
				return fmt.Errorf("evaluation %d: %w", seq, err)
			}
			e.Seq = seq
			out = append(out, e)
		}
		return rows.Err()
	})
	if err != nil {
		return nil, wrap(err, "list autoscale evaluations: pool=%q", pool)
	}
	return out, nil
}

// ListAutoscaleStates implements vdibroker.AutoscaleStore.
func (s *DB) ListAutoscaleStates(ctx context.Context) ([]*vdibroker.AutoscaleState, error) {
	var out []*vdibroker.AutoscaleState
	err := s.read(ctx, func(t *tx) error {
		rows, err := t.query(ctx, `SELECT host_pool, state FROM autoscale_state ORDER BY host_pool`)
		if err != nil {
			return err
		}
		defer rows.Close()
		for rows.Next() {
			var pool, doc string
			if err := rows.Scan(&pool, &doc); err != nil {
				return err
			}
			st := &vdibroker.AutoscaleState{}
			if err := json.Unmarshal([]byte(doc), st); err != nil {
				return fmt.Errorf("autoscale state of %q: %w", pool, err)
			}
			st.HostPool = pool
			out = append(out, st)
		}
		return rows.Err()
	})
	if err != nil {
		return nil, wrap(err, "list autoscale states")
	}
	return out, nil
}

// PutAutoscaleState implements vdibroker.AutoscaleStore.
func (s *DB) PutAutoscaleState(ctx context.Context, st *vdibroker.AutoscaleState) error {
	if st.UpdateTime.IsZero() {
		st.UpdateTime = s.now()
	}
	doc, err := json.Marshal(st)
	if err != nil {
		return fmt.Errorf("put autoscale state: %w", err)
	}
	err = s.write(ctx, func(t *tx) error {
		_, err := t.exec(ctx, `INSERT INTO autoscale_state (host_pool, state, update_time) VALUES (?, ?, ?)
			ON CONFLICT (host_pool) DO UPDATE SET state = excluded.state, update_time = excluded.update_time`,
			st.HostPool, string(doc), ns(st.UpdateTime))
		return err
	})
	return wrap(err, "put autoscale state: pool=%q", st.HostPool)
}

// DeleteAutoscaleState implements vdibroker.AutoscaleStore.
func (s *DB) DeleteAutoscaleState(ctx context.Context, pool string) error {
	err := s.write(ctx, func(t *tx) error {
		_, err := t.exec(ctx, `DELETE FROM autoscale_state WHERE host_pool = ?`, pool)
		return err
	})
	return wrap(err, "delete autoscale state: pool=%q", pool)
}
