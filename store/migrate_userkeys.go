package store

import (
	"context"
	"database/sql"
	"fmt"

	"github.com/vdibroker/vdibroker"
)

// foldUserKeys finishes migration 00030 in Go, once (both engines): the
// user_key of every session whose user name has a letter outside ASCII,
// folded as vdibroker.FoldUser folds it (R-E5). 00030 folded ASCII in SQL,
// which is exact for ASCII only: SQLite's lower() leaves other letters
// alone, PostgreSQL's follows the database's locale. The row 00030's table
// user_keys_folded gets says it was done; it is written in the same
// transaction as the keys, so a broker stopped halfway does it again at
// its next start. Two replicas starting together may both do it: they
// write the same keys. Sessions are read a page at a time, by id. As in
// 00030, an open pooled session whose folded user has another open
// pooled session in the pool (Éric and éric, before R-E5) stops being
// pooled, so R-C6's unique index holds.
func (s *DB) foldUserKeys(ctx context.Context) error {
	var done int
	if err := s.w.QueryRowContext(ctx, `SELECT count(*) FROM user_keys_folded`).Scan(&done); err != nil {
		return fmt.Errorf("fold user names: %w", err)
	}
	if done > 0 {
		return nil
	}
	nonASCII := `user_name GLOB '*[^ -~]*'` // GLOB's classes are of characters, not bytes
	if s.d == postgresDialect {
		nonASCII = `user_name ~ '[^ -~]'`
	}
	read := s.d.q(`SELECT id, host_pool, user_name, pooled, state FROM user_sessions
		WHERE ` + nonASCII + ` AND id > ? ORDER BY id LIMIT ?`)
	twin := s.d.q(`SELECT EXISTS (SELECT 1 FROM user_sessions WHERE host_pool = ? AND user_key = ? AND id <> ?
		AND pooled AND ` + openSQL + `)`)
	write := s.d.q(`UPDATE user_sessions SET user_key = ?, pooled = ? WHERE id = ?`)
	tx, err := s.w.BeginTx(ctx, nil)
	if err != nil {
		return fmt.Errorf("fold user names: %w", err)
	}
	defer tx.Rollback()
	for after := ""; ; {
		rows, last, err := userKeysFrom(ctx, tx, read, after)
		if err != nil {
			return fmt.Errorf("fold user names: %w", err)
		}
		for _, r := range rows {
			if r.pooled && r.state != vdibroker.StateLoggedOff {
				var taken bool
				if err := tx.QueryRowContext(ctx, twin, r.pool, r.key, r.id).Scan(&taken); err != nil {
					return fmt.Errorf("fold user names: %w", err)
				}
				r.pooled = !taken
			}
			if _, err := tx.ExecContext(ctx, write, r.key, r.pooled, r.id); err != nil {
				return fmt.Errorf("fold user name of session %s: %w", r.id, err)
			}
		}
		if len(rows) < userKeysPage {
			break
		}
		after = last
	}
	if _, err := tx.ExecContext(ctx, s.d.q(`INSERT INTO user_keys_folded (folded) VALUES (?)`), true); err != nil {
		return fmt.Errorf("fold user names: %w", err)
	}
	if err := tx.Commit(); err != nil {
		return fmt.Errorf("fold user names: %w", err)
	}
	return nil
}

// userKeysPage is how many sessions one read of foldUserKeys takes.
const userKeysPage = 10000

// userKeyRow is a session foldUserKeys folds the user name of.
type userKeyRow struct {
	id, pool, key, state string
	pooled               bool
}

// userKeysFrom reads one page of sessions after id after, with their
// folded user names, and returns them and the last id read.
func userKeysFrom(ctx context.Context, tx *sql.Tx, read, after string) ([]userKeyRow, string, error) {
	rows, err := tx.QueryContext(ctx, read, after, userKeysPage)
	if err != nil {
		return nil, "", err
	}
	defer rows.Close()
	var out []userKeyRow
	last := after
	for rows.Next() {
		var r userKeyRow
		var user string
		if err := rows.Scan(&r.id, &r.pool, &user, &r.pooled, &r.state); err != nil {
			return nil, "", err
		}
		r.key = vdibroker.FoldUser(user)
		out, last = append(out, r), r.id
	}
	return out, last, rows.Err()
}
