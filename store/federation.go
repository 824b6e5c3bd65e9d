package store

import (
	"bytes"
	"context"
	"database/sql"
	"encoding/json"
	"errors"
	"fmt"

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
			return err
		case err != nil:
			return err
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
		return err
	})
	return created, wrap(err, "put federation")
}
