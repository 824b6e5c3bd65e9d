package store

import (
	"context"
	"crypto/rand"
	"encoding/hex"
	"encoding/json"
	"fmt"
	"slices"
	"time"

	"github.com/vdibroker/vdibroker"
)

// The session directory (R-G1, vdibroker.FederationStore): which pods hold
// the open sessions of the users this pod is the directory pod of.

// maxDirectoryEntries is vdibroker.MaxDirectoryEntriesPerPod (a test lowers
// it).
var maxDirectoryEntries int64 = vdibroker.MaxDirectoryEntriesPerPod

// RegisterDirectory implements vdibroker.FederationStore, in one
// transaction that holds pod's row of session_directory_pods, so the
// entries it counts are those of pod's calls one after another on every
// replica.
//
// A verified pod-to-pod call's nonce in ctx (vdibroker.WithCallNonce) is
// recorded in the same transaction, counted last: its budget's count of
// the minute, which every signed call of that pod takes (lockCallNonces), is not held
// while the registration waits for pod's row or writes its entries, and
// nothing takes pod's row after it. A replay is Unauthenticated with
// nothing written.
//
// On SQLite a registration that is not part of a whole list commits
// without a sync of its own (synchronous=NORMAL for it): a global
// connect waits for it (R-G1), and the only way to lose it, the machine
// failing before the next synced commit, leaves the store not closed
// cleanly, which makes it vouch for no pod until their next whole lists
// (dropCompletenessAfterCrash). A process killed loses nothing committed.
// A whole list's parts are synced: they record the pod complete.
func (s *DB) RegisterDirectory(ctx context.Context, pod string, gen int64, users []string, full, last bool, now time.Time) error {
	nonce := vdibroker.CallNonceFrom(ctx)
	err := s.writeSynced(ctx, full || s.d != sqliteDialect, func(t *tx) error {
		if _, err := t.exec(ctx, `INSERT INTO session_directory_pods (pod) VALUES (?) ON CONFLICT DO NOTHING`, pod); err != nil {
			return err
		}
		var entries int64
		if err := t.row(ctx, `SELECT entries FROM session_directory_pods WHERE pod = ?`+t.d.forUpdate, pod).Scan(&entries); err != nil {
			return err
		}
		if len(users) > 0 {
			// Two statements for the whole list, not two per user: a
			// whole list of 250,000 users took seconds of CPU one user
			// at a time. The users are distinct (the caller's).
			list, err := json.Marshal(users)
			if err != nil {
				return err
			}
			if _, err := t.exec(ctx, `UPDATE session_directory SET seen_time = ? WHERE pod = ? AND user_key IN (`+t.d.jsonStrings+`)`, ns(now), pod, string(list)); err != nil {
				return err
			}
			added, err := t.exec(ctx, t.d.insertDirectory, pod, ns(now), string(list))
			if err != nil {
				return err
			}
			if entries += added; entries > maxDirectoryEntries {
				return &vdibroker.Error{Code: vdibroker.ETooManyRequests, RetryAfter: time.Minute,
					Message: fmt.Sprintf("pod %s has %d session directory entries on this pod, its bound; nothing of this call was recorded", pod, maxDirectoryEntries)}
			}
		}
		if full && last {
			n, err := t.exec(ctx, `DELETE FROM session_directory WHERE pod = ? AND seen_time < ?`, pod, ns(now.Add(-vdibroker.DirectoryFullMargin)))
			if err != nil {
				return err
			}
			entries -= n
			if _, err := t.exec(ctx, `UPDATE session_directory_pods SET generation = ?, complete_time = ? WHERE pod = ?`, gen, ns(now), pod); err != nil {
				return err
			}
		}
		if _, err := t.exec(ctx, `UPDATE session_directory_pods SET entries = ? WHERE pod = ?`, entries, pod); err != nil {
			return err
		}
		if nonce == nil {
			return nil
		}
		if err := t.sweepNonces(ctx, nonce.At); err != nil {
			return err
		}
		if err := t.countNonces(ctx, nonce.Pod, 1, nonce.At); err != nil {
			return err
		}
		return t.useCallNonce(ctx, nonce, s.now())
	})
	if err != nil {
		return wrap(err, "register session directory entries")
	}
	if nonce != nil {
		nonce.MarkRecorded()
	}
	return nil
}

// LookupDirectory implements vdibroker.FederationStore.
func (s *DB) LookupDirectory(ctx context.Context, user string, since time.Time) (pods []string, complete map[string]int64, err error) {
	err = s.read(ctx, func(t *tx) error {
		pods, complete = nil, map[string]int64{}
		var err error
		pods, err = queryAll(ctx, t, func(r scanner) (string, error) {
			var p string
			return p, r.Scan(&p)
		}, `SELECT pod FROM session_directory WHERE user_key = ? ORDER BY pod`, user)
		if err != nil {
			return err
		}
		rows, err := t.query(ctx, `SELECT pod, generation FROM session_directory_pods WHERE complete_time > 0 AND complete_time >= ?`, ns(since))
		if err != nil {
			return err
		}
		defer rows.Close()
		for rows.Next() {
			var p string
			var gen int64
			if err := rows.Scan(&p, &gen); err != nil {
				return err
			}
			complete[p] = gen
		}
		return rows.Err()
	})
	if err != nil {
		return nil, nil, fmt.Errorf("look up session directory: %w", err)
	}
	return pods, complete, nil
}

// OpenSessionUsers implements vdibroker.FederationStore: per pool, its
// open sessions by id (user_sessions_open_by_pool).
func (s *DB) OpenSessionUsers(ctx context.Context, pools []string, after string) (users []string, last string, err error) {
	seen := map[string]bool{}
	err = s.read(ctx, func(t *tx) error {
		users, last = nil, after
		clear(seen)
		for _, p := range pools {
			rows, err := t.query(ctx, `SELECT user_key, id FROM user_sessions WHERE host_pool = ? AND `+openSQL+` AND id > ? ORDER BY id`, p, after)
			if err != nil {
				return err
			}
			for rows.Next() {
				var key, id string
				if err := rows.Scan(&key, &id); err != nil {
					rows.Close()
					return err
				}
				if !seen[key] {
					seen[key] = true
					users = append(users, key)
				}
				last = max(last, id)
			}
			rows.Close()
			if err := rows.Err(); err != nil {
				return err
			}
		}
		return nil
	})
	if err != nil {
		return nil, "", fmt.Errorf("open session users: %w", err)
	}
	slices.Sort(users)
	return users, last, nil
}

// LateSessionWrites implements vdibroker.FederationStore: row 1 of
// outage_placement_writes (its first name), which replicas older than
// migration 00063 still bump and into which foldLateWrites moves the rows
// of earlier opens, plus every committer's row of late_session_writes
// (countLateWrites), read in one statement, so a fold committed meanwhile
// is seen whole or not at all.
func (s *DB) LateSessionWrites(ctx context.Context) (int64, error) {
	var n int64
	err := s.read(ctx, func(t *tx) error {
		return t.row(ctx, `SELECT CAST((SELECT writes FROM outage_placement_writes WHERE id = 1)
			+ (SELECT COALESCE(SUM(writes), 0) FROM late_session_writes) AS BIGINT)`).Scan(&n)
	})
	if err != nil {
		return 0, fmt.Errorf("late session writes: %w", err)
	}
	return n, nil
}

// lateFoldAfter is how long a committer's row of late_session_writes goes
// unbumped before an open folds it into row 1 (foldLateWrites). Each open
// adds a row per committer that writes a late session (up to 8 on
// PostgreSQL, 1 on SQLite); rows of restarts within the last hour stay.
const lateFoldAfter = time.Hour

// lateKey is a random key of one store open, its committers' rows of
// late_session_writes named after it (committer.late): unique among the
// replicas and the opens of one database.
func lateKey() string {
	var b [8]byte
	_, _ = rand.Read(b[:]) // never fails (crypto/rand)
	return hex.EncodeToString(b[:])
}

// foldLateWrites moves the counts of the rows of late_session_writes last
// bumped before before into row 1 of outage_placement_writes, in one
// transaction, and returns how many rows it folded: the store's count
// (LateSessionWrites, their sum) stays as it was, so no directory pass
// reads a count that went down (and back up to a value it had seen,
// missing a late write). A row folded while its committer is still
// running is inserted again at its next bump (an upsert). On PostgreSQL
// it locks row 1 before the rows it deletes: a batch holds its row only
// from its last statement to its commit, and an older replica's batch
// holds row 1 likewise, so neither waits for the fold while the fold
// waits for it.
func (s *DB) foldLateWrites(ctx context.Context, before time.Time) (folded int, err error) {
	var old int
	if err := s.read(ctx, func(t *tx) error {
		return t.row(ctx, `SELECT COUNT(*) FROM late_session_writes WHERE bumped < ?`, ns(before)).Scan(&old)
	}); err != nil || old == 0 {
		return 0, wrap(err, "fold late session writes")
	}
	err = s.write(ctx, func(t *tx) error {
		folded = 0
		var one int64
		if err := t.row(ctx, `SELECT writes FROM outage_placement_writes WHERE id = 1`+t.d.forUpdate).Scan(&one); err != nil {
			return err
		}
		rows, err := t.query(ctx, `DELETE FROM late_session_writes WHERE bumped < ? RETURNING writes`, ns(before))
		if err != nil {
			return err
		}
		var sum int64
		for rows.Next() {
			var n int64
			if err := rows.Scan(&n); err != nil {
				rows.Close()
				return err
			}
			sum += n
			folded++
		}
		rows.Close()
		if err := rows.Err(); err != nil {
			return err
		}
		_, err = t.exec(ctx, `UPDATE outage_placement_writes SET writes = writes + ? WHERE id = 1`, sum)
		return err
	})
	if err != nil {
		return 0, wrap(err, "fold late session writes")
	}
	return folded, nil
}

// DropDirectoryPods implements vdibroker.FederationStore, pod by pod
// (dropDirectoryPod): in the last transaction its row of
// session_directory_pods first, which a registration of the pod holds
// (RegisterDirectory), then its entries, so one that committed meanwhile
// is dropped too.
func (s *DB) DropDirectoryPods(ctx context.Context, pods []string) (dropped []string, err error) {
	var known []string
	err = s.read(ctx, func(t *tx) error {
		var qerr error
		known, qerr = queryAll(ctx, t, func(r scanner) (string, error) {
			var p string
			return p, r.Scan(&p)
		}, `SELECT pod FROM session_directory_pods ORDER BY pod`)
		return qerr
	})
	if err != nil {
		return nil, fmt.Errorf("drop session directory pods: %w", err)
	}
	for _, p := range known {
		if slices.Contains(pods, p) {
			continue
		}
		if err := s.dropDirectoryPod(ctx, p); err != nil {
			return dropped, wrap(err, "drop the session directory entries of pod %s", p)
		}
		dropped = append(dropped, p)
	}
	return dropped, nil
}

// dropChunk is how many directory entries one transaction of
// dropDirectoryPod deletes on SQLite: a pod's entries (up to
// vdibroker.MaxDirectoryEntriesPerPod) in one transaction held the one
// writer for half a second, and every connect and heartbeat waited
// behind it (BenchmarkDropDirectoryPod, side by side: the slowest commit
// beside the drop 400-460 ms, in parts 39-47 ms, the drop itself 0.4-0.5
// s against 1.1-1.3 s). PostgreSQL's other writes do not wait for it
// (25-54 ms either way, and a drop six times as long in parts): one
// statement.
var dropChunk = 5000

// dropDirectoryPod deletes pod's entries, on SQLite dropChunk at a time,
// then, in one transaction, its row of session_directory_pods and the
// entries left: a drop cut short (the store failed) leaves the row, and
// the next DropDirectoryPods finishes it.
func (s *DB) dropDirectoryPod(ctx context.Context, pod string) error {
	for s.d == sqliteDialect {
		var n int64
		err := s.write(ctx, func(t *tx) error {
			var err error
			n, err = t.exec(ctx, `DELETE FROM session_directory WHERE pod = ? AND user_key IN
				(SELECT user_key FROM session_directory WHERE pod = ? LIMIT ?)`, pod, pod, dropChunk)
			if err != nil || n == 0 {
				return err
			}
			// Counted gone with them: a drop cut short leaves the row,
			// and were the pod back in the document before the next
			// drop, its bound (RegisterDirectory) must not count them.
			_, err = t.exec(ctx, `UPDATE session_directory_pods SET entries = entries - ? WHERE pod = ?`, n, pod)
			return err
		})
		if err != nil {
			return err
		}
		if n < int64(dropChunk) {
			break
		}
	}
	return s.write(ctx, func(t *tx) error {
		// The row first: a registration of the pod holds it (a replica
		// with the older document may still take one), so on PostgreSQL
		// the entries' DELETE below begins after that registration
		// committed and takes its entries too. The entries' DELETE first
		// would miss them, and they would stay with no row, which no
		// later drop finds.
		if _, err := t.exec(ctx, `DELETE FROM session_directory_pods WHERE pod = ?`, pod); err != nil {
			return err
		}
		_, err := t.exec(ctx, `DELETE FROM session_directory WHERE pod = ?`, pod)
		return err
	})
}

// cleanClose names the shared_values row an SQLite store's Close writes
// last, and its open deletes: an open that finds none follows a crash (or
// a copy of a running store, or a release before this row).
const cleanClose = "store.closed_cleanly"

// dropCompletenessAfterCrash runs at an SQLite store's open: unless the
// store was closed cleanly, it may lack registrations it took (R-G1): a
// store configured synchronous=NORMAL loses its last commits with the
// machine, and a store restored from a copy of a running one (backup)
// lacks those made since. Its completeness records would then vouch for
// pods whose users it no longer knows all of, and a global connect would
// make a second session for one of them. So no pod is vouched complete
// until its next whole list: complete_time 0, which LookupDirectory never
// takes (connects ask each pod itself meanwhile). It then clears the row,
// so that a crash of this open is seen by the next.
func (s *DB) dropCompletenessAfterCrash(ctx context.Context) error {
	return s.write(ctx, func(t *tx) error {
		n, err := t.exec(ctx, `DELETE FROM shared_values WHERE name = ?`, cleanClose)
		if err != nil || n > 0 {
			return err
		}
		dropped, err := t.exec(ctx, `UPDATE session_directory_pods SET complete_time = 0 WHERE complete_time > 0`)
		if dropped > 0 {
			s.log.Info("session directory: the store was not closed cleanly; its pods are asked themselves until their next whole lists", "pods", dropped)
		}
		return err
	})
}

// markClosedCleanly is Close's last write on SQLite (cleanClose), synced.
func (s *DB) markClosedCleanly(ctx context.Context) error {
	return s.write(ctx, func(t *tx) error {
		_, err := t.exec(ctx, `INSERT INTO shared_values (name, value, update_time) VALUES (?, '1', ?)
			ON CONFLICT (name) DO UPDATE SET value = excluded.value, update_time = excluded.update_time`, cleanClose, ns(s.now()))
		return err
	})
}
