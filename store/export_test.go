package store

import (
	"context"

	"github.com/vdibroker/vdibroker"
)

// CommitBatch commits cs as one group-commit batch (one transaction, one
// savepoint each), so tests can check a batch with mixed outcomes without
// depending on timing.
func (s *DB) CommitBatch(cs []*vdibroker.PlacementCommit) []error {
	reqs := make([]*commitReq, len(cs))
	for i, c := range cs {
		reqs[i] = &commitReq{c: c, done: make(chan error, 1)}
	}
	s.runBatch(reqs)
	errs := make([]error, len(cs))
	for i, r := range reqs {
		errs[i] = <-r.done
	}
	return errs
}

// Command reads a command's state and result.
func (s *DB) Command(ctx context.Context, id string) (state, result string, err error) {
	err = s.read(ctx, func(t *tx) error {
		return t.row(ctx, `SELECT state, result FROM commands WHERE id = ?`, id).Scan(&state, &result)
	})
	return state, result, err
}
