package store

import (
	"context"
	"crypto/rand"
	"database/sql"
	"embed"
	"encoding/hex"
	"errors"
	"fmt"
	"io/fs"
	"log/slog"
	"net/url"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"time"

	_ "github.com/jackc/pgx/v5/stdlib" // database/sql driver "pgx"
	"github.com/pressly/goose/v3"
	"github.com/pressly/goose/v3/lock"
	_ "modernc.org/sqlite" // database/sql driver "sqlite"

	"github.com/vdibroker/vdibroker"
)

//go:embed migrations
var migrations embed.FS

// DB is a vdibroker.Store on SQLite or PostgreSQL.
type DB struct {
	d   *dialect
	w   *sql.DB // writes (SQLite: one connection, BEGIN IMMEDIATE)
	r   *sql.DB // reads (SQLite: a pool of WAL readers; PostgreSQL: same as w)
	log *slog.Logger

	commits   chan *commitReq
	closing   chan struct{}
	closeOnce sync.Once
	batcherWG sync.WaitGroup
	opts      Options
}

var _ vdibroker.Store = (*DB)(nil)

// Options tune a store; the zero value gives the defaults.
type Options struct {
	// MaxBatch caps how many placements one group-commit transaction
	// carries (default 256).
	MaxBatch int
	// Linger is how long the group committer waits for more placements
	// once the queue is empty (default 0: a batch is whatever queued up
	// while the previous transaction ran, which already amortises the
	// fsync under load without delaying a lone connect).
	Linger time.Duration
	// Now is the clock for the few writes that take no time argument
	// (default time.Now).
	Now func() time.Time
}

// Open opens the store named by dsn and applies pending migrations. An
// empty dsn is the SQLite file <dataDir>/vdibroker.db (R-D1); a dsn starting
// with postgres:// or postgresql:// is PostgreSQL.
func Open(ctx context.Context, dsn, dataDir string, logger *slog.Logger) (vdibroker.Store, error) {
	return OpenWith(ctx, dsn, dataDir, logger, Options{})
}

// OpenWith is Open with options.
func OpenWith(ctx context.Context, dsn, dataDir string, logger *slog.Logger, opts Options) (*DB, error) {
	if logger == nil {
		logger = slog.New(slog.DiscardHandler)
	}
	if opts.Now == nil {
		opts.Now = time.Now
	}
	if opts.MaxBatch <= 0 {
		opts.MaxBatch = 256
	}
	s := &DB{log: logger, opts: opts, commits: make(chan *commitReq, 4096), closing: make(chan struct{})}
	var err error
	switch {
	case dsn == "":
		err = s.openSQLite(ctx, dataDir)
	case strings.HasPrefix(dsn, "postgres://"), strings.HasPrefix(dsn, "postgresql://"):
		err = s.openPostgres(ctx, dsn)
	default:
		return nil, vdibroker.FieldError("database", "want empty (SQLite in the data dir) or a postgres:// URL")
	}
	if err != nil {
		return nil, err
	}
	s.batcherWG.Add(1)
	go s.batcher()
	return s, nil
}

// openSQLite opens <dataDir>/vdibroker.db.
//
// Durability (R-D2): WAL with synchronous=FULL. With WAL, NORMAL already
// survives a SIGKILL of the process (a commit is in the WAL in the OS page
// cache before it returns), but not an OS crash or power loss; FULL fsyncs
// the WAL on every commit, so an answered connect also survives those. The
// cost is one fsync per transaction, which group commit spreads over every
// placement of a batch.
func (s *DB) openSQLite(ctx context.Context, dataDir string) error {
	s.d = sqliteDialect
	if dataDir == "" {
		dataDir = "."
	}
	if err := os.MkdirAll(dataDir, 0o700); err != nil {
		return fmt.Errorf("open sqlite: %w", err)
	}
	path := filepath.Join(dataDir, "vdibroker.db")
	base := "file:" + (&url.URL{Path: path}).EscapedPath() +
		"?_pragma=busy_timeout(10000)&_pragma=journal_mode(WAL)&_pragma=synchronous(FULL)&_pragma=foreign_keys(0)"
	w, err := sql.Open("sqlite", base+"&_txlock=immediate")
	if err != nil {
		return fmt.Errorf("open sqlite %s: %w", path, err)
	}
	// One writer connection: SQLite has one writer anyway, and queueing
	// in database/sql is cheaper than SQLITE_BUSY retries.
	w.SetMaxOpenConns(1)
	w.SetConnMaxLifetime(0)
	w.SetConnMaxIdleTime(0)
	r, err := sql.Open("sqlite", base+"&_pragma=query_only(1)")
	if err != nil {
		w.Close()
		return fmt.Errorf("open sqlite %s: %w", path, err)
	}
	r.SetMaxOpenConns(8)
	r.SetMaxIdleConns(8)
	r.SetConnMaxIdleTime(0)
	s.w, s.r = w, r
	if err := s.migrate(ctx, goose.DialectSQLite3, "migrations/sqlite"); err != nil {
		s.closeDBs()
		return err
	}
	return nil
}

func (s *DB) openPostgres(ctx context.Context, dsn string) error {
	s.d = postgresDialect
	db, err := sql.Open("pgx", dsn)
	if err != nil {
		return fmt.Errorf("open postgres: %w", err)
	}
	db.SetMaxOpenConns(32)
	db.SetMaxIdleConns(32)
	s.w, s.r = db, db
	if err := db.PingContext(ctx); err != nil {
		db.Close()
		return fmt.Errorf("open postgres: %w", err)
	}
	if err := s.migrate(ctx, goose.DialectPostgres, "migrations/postgres"); err != nil {
		db.Close()
		return err
	}
	return nil
}

// migrate applies the dialect's embedded migrations. On PostgreSQL an
// advisory lock keeps replicas starting together from racing.
func (s *DB) migrate(ctx context.Context, d goose.Dialect, dir string) error {
	fsys, err := fs.Sub(migrations, dir)
	if err != nil {
		return err
	}
	opts := []goose.ProviderOption{goose.WithDisableGlobalRegistry(true)}
	if d == goose.DialectPostgres {
		locker, err := lock.NewPostgresSessionLocker()
		if err != nil {
			return err
		}
		opts = append(opts, goose.WithSessionLocker(locker))
	}
	p, err := goose.NewProvider(d, s.w, fsys, opts...)
	if err != nil {
		return fmt.Errorf("migrations: %w", err)
	}
	res, err := p.Up(ctx)
	if err != nil {
		return fmt.Errorf("migrate %s: %w", s.d.name, err)
	}
	for _, r := range res {
		s.log.Info("applied migration", "dialect", s.d.name, "version", r.Source.Version, "path", r.Source.Path)
	}
	return nil
}

// Close stops the group committer (queued placements are still committed)
// and closes the database.
func (s *DB) Close() error {
	s.closeOnce.Do(func() { close(s.closing) })
	s.batcherWG.Wait()
	return s.closeDBs()
}

func (s *DB) closeDBs() error {
	err := s.w.Close()
	if s.r != s.w {
		err = errors.Join(err, s.r.Close())
	}
	return err
}

func (s *DB) now() time.Time { return s.opts.Now() }

// Ping checks the database answers.
func (s *DB) Ping(ctx context.Context) error {
	return s.w.PingContext(ctx)
}

// tx is a transaction with dialect-aware helpers.
type tx struct {
	*sql.Tx
	d *dialect
}

func (t *tx) exec(ctx context.Context, query string, args ...any) (int64, error) {
	res, err := t.ExecContext(ctx, t.d.q(query), args...)
	if err != nil {
		return 0, err
	}
	return res.RowsAffected()
}

func (t *tx) query(ctx context.Context, query string, args ...any) (*sql.Rows, error) {
	return t.QueryContext(ctx, t.d.q(query), args...)
}

func (t *tx) row(ctx context.Context, query string, args ...any) *sql.Row {
	return t.QueryRowContext(ctx, t.d.q(query), args...)
}

// maxAttempts bounds how often a transaction that hit a serialization
// failure or deadlock is run again.
const maxAttempts = 8

// write runs fn in a write transaction, running it again on retryable
// errors. fn must be safe to run again (it sees a fresh transaction).
func (s *DB) write(ctx context.Context, fn func(t *tx) error) error {
	var err error
	for attempt := 1; ; attempt++ {
		err = s.writeOnce(ctx, fn)
		if err == nil || !s.d.isRetryable(err) || attempt == maxAttempts {
			return err
		}
		s.log.Debug("retrying transaction", "attempt", attempt, "err", err)
		select {
		case <-ctx.Done():
			return err
		case <-time.After(time.Duration(attempt*attempt) * time.Millisecond):
		}
	}
}

func (s *DB) writeOnce(ctx context.Context, fn func(t *tx) error) error {
	sqlTx, err := s.w.BeginTx(ctx, nil)
	if err != nil {
		return fmt.Errorf("begin: %w", err)
	}
	t := &tx{Tx: sqlTx, d: s.d}
	if err := fn(t); err != nil {
		_ = sqlTx.Rollback()
		return err
	}
	if err := sqlTx.Commit(); err != nil {
		return fmt.Errorf("commit: %w", err)
	}
	return nil
}

// read runs fn in a read-only transaction (one consistent snapshot).
func (s *DB) read(ctx context.Context, fn func(t *tx) error) error {
	sqlTx, err := s.r.BeginTx(ctx, &sql.TxOptions{ReadOnly: s.d.dollar})
	if err != nil {
		return fmt.Errorf("begin: %w", err)
	}
	defer sqlTx.Rollback()
	return fn(&tx{Tx: sqlTx, d: s.d})
}

// ns is t as Unix nanoseconds; the zero time is 0.
func ns(t time.Time) int64 {
	if t.IsZero() {
		return 0
	}
	return t.UnixNano()
}

// fromNS is the inverse of ns, in UTC.
func fromNS(n int64) time.Time {
	if n == 0 {
		return time.Time{}
	}
	return time.Unix(0, n).UTC()
}

func nsPtr(t *time.Time) *int64 {
	if t == nil {
		return nil
	}
	n := ns(*t)
	return &n
}

func fromNSPtr(n sql.NullInt64) *time.Time {
	if !n.Valid {
		return nil
	}
	t := fromNS(n.Int64)
	return &t
}

// NewID returns a random 128-bit identifier as 32 hex digits.
func NewID() string {
	var b [16]byte
	if _, err := rand.Read(b[:]); err != nil {
		panic(err) // crypto/rand does not fail on supported systems
	}
	return hex.EncodeToString(b[:])
}

func notFound(format string, args ...any) error {
	return vdibroker.Errorf(vdibroker.ENotFound, format, args...)
}
