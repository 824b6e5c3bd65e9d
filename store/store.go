package store

import (
	"cmp"
	"context"
	"database/sql"
	"database/sql/driver"
	"embed"
	"errors"
	"fmt"
	"io/fs"
	"log/slog"
	"net/url"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
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
	// wstmts and rstmts cache prepared statements (SQLite only).
	wstmts, rstmts *stmtCache
	// hosts caches hosts by credential hash (SQLite only; see hostCache).
	hosts *hostCache
	// ckpt checkpoints the WAL beside the writer (SQLite only).
	ckpt *checkpointer
	// committed counts the writer's committed transactions.
	committed atomic.Int64
	// syncFull says SQLite syncs every commit (synchronous=FULL); a
	// batch may then commit unsynced (DB.unsynced, writeSynced).
	syncFull bool

	// commits are the group committers' queues: one on SQLite, whose
	// writer is alone anyway; postgresCommitters on PostgreSQL, each
	// taking the same hosts always (see shard). beatCommits, on PostgreSQL
	// only, are as many committers for the heartbeats (s.queue).
	commits     []*committer
	beatCommits []*committer
	closing     chan struct{}
	stopped     chan struct{} // closed when every group committer has exited
	closeOnce   sync.Once
	markOnce    sync.Once // Close's cleanClose row, once
	batcherWG   sync.WaitGroup
	opts        Options

	batches, batched atomic.Int64 // CommitStats
	// beatsPerBatch and firstPerBatch cap the heartbeats and the other
	// writes of one batch (batchCaps).
	beatsPerBatch, firstPerBatch int

	// numbers numbers the committed batches and runs their OnCommitted
	// hooks in turn (see numbering).
	numbers *numbering
	// lateOwed counts countLateAfterCommit's failures; latePaid is the
	// most of them a committed batch made up for (countLateWrites).
	lateOwed, latePaid atomic.Int64

	// dir is SQLite's data directory, where Ping's write probe writes a
	// file ("" on PostgreSQL).
	dir string
	// probeMu serialises Ping's write probes; probed is when the last
	// one passed (probe.go).
	probeMu sync.Mutex
	probed  time.Time
}

var _ vdibroker.Store = (*DB)(nil)

// Options tune a store; the zero value gives the defaults.
type Options struct {
	// MaxBatch caps how many placements one group-commit transaction
	// carries (default 256, at most 65535).
	MaxBatch int
	// Linger is how long the group committer waits for more writes once
	// the queue is empty, while it is under load (its previous batch
	// carried more than one write); an idle broker commits a lone connect
	// at once. Default 300µs; negative: never wait. Under a logon storm
	// on the 2-core development machine, 300µs gave about twice the
	// batch and 10-15% more durable connects per second (fewer pages and
	// fsyncs per connect); 1ms was slower again.
	Linger time.Duration
	// Synchronous is SQLite's synchronous pragma: "FULL" (default) or
	// "NORMAL"; see openSQLite.
	Synchronous string
	// Now is the clock for the few writes that take no time argument
	// (default time.Now).
	Now func() time.Time
	// CheckpointInterval is how often SQLite's WAL is copied into the
	// database file from a connection of its own, when there were writes
	// (default 100ms; negative: only SQLite's automatic checkpoint in the
	// writer). See checkpointer.
	CheckpointInterval time.Duration
	// BatchTimeout bounds one PostgreSQL group-commit transaction (default
	// 30s; serve sets its --store-timeout, 5s by default): a connect
	// waiting for a batch that a paused database holds is answered within
	// it.
	BatchTimeout time.Duration
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
	opts.MaxBatch = min(opts.MaxBatch, 1<<seqIndexBits-1)
	if opts.Linger == 0 {
		opts.Linger = 300 * time.Microsecond
	}
	s := &DB{log: logger, opts: opts, closing: make(chan struct{}), stopped: make(chan struct{})}
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
	s.numbers = newNumbering()
	committers := 1
	if s.d == postgresDialect {
		committers = postgresCommitters
	}
	s.beatsPerBatch, s.firstPerBatch = s.batchCaps()
	// This open's rows of late_session_writes, one per committer: the
	// ones of earlier opens not bumped for lateFoldAfter go into row 1
	// first, so the rows stay as many as the committers of the opens of
	// the last lateFoldAfter (foldLateWrites).
	if _, err := s.foldLateWrites(ctx, s.now().Add(-lateFoldAfter)); err != nil {
		s.log.Warn("folding the late session writes of earlier opens failed; the next open folds them", "err", err)
	}
	open := lateKey()
	lateRow := func() string { return fmt.Sprintf("%s-%d", open, len(s.commits)+len(s.beatCommits)) }
	for range committers {
		c := newCommitter(lateRow())
		s.commits = append(s.commits, c)
		s.batcherWG.Add(1)
		go s.batcher(c)
	}
	if s.d == postgresDialect {
		for range committers {
			c := newCommitter(lateRow())
			s.beatCommits = append(s.beatCommits, c)
			s.batcherWG.Add(1)
			go s.batcher(c)
		}
	}
	go func() {
		s.batcherWG.Wait()
		close(s.stopped)
	}()
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
//
// temp_store=MEMORY keeps the statement journal of each placement's
// savepoint in memory: on disk it cost a write syscall per page changed.
func (s *DB) openSQLite(ctx context.Context, dataDir string) error {
	s.d = sqliteDialect
	if dataDir == "" {
		dataDir = "."
	}
	if err := mkdirDataDir(dataDir); err != nil {
		return fmt.Errorf("open sqlite: %w", err)
	}
	path := filepath.Join(dataDir, "vdibroker.db")
	s.dir = dataDir
	// The store holds the hashes of tokens and host credentials and the RD
	// gateway's signing seeds: its owner's alone, as backup's copy is, even
	// in a data dir others may enter (datadir_other.go, datadir_windows.go).
	_, statErr := os.Stat(path)
	if err := checkStoreAccess(dataDir, path, statErr == nil, s.log); err != nil {
		return fmt.Errorf("open sqlite: %w", err)
	}
	createStoreFile(path)
	syncMode := cmp.Or(s.opts.Synchronous, "FULL")
	if syncMode != "FULL" && syncMode != "NORMAL" {
		return vdibroker.FieldError("synchronous", "want FULL or NORMAL, got %q", syncMode)
	}
	s.syncFull = syncMode == "FULL"
	base := "file:" + (&url.URL{Path: path}).EscapedPath() +
		"?_pragma=busy_timeout(10000)&_pragma=journal_mode(WAL)&_pragma=synchronous(" + syncMode + ")&_pragma=foreign_keys(0)&_pragma=wal_autocheckpoint(10000)&_pragma=temp_store(MEMORY)"
	// Page caches: 64 MiB for the writer, whose batches touch the hot
	// index pages of every connect; 8 MiB for each of the 8 readers, which
	// the OS page cache backs. Each cache is per connection and costs about
	// twice its size in modernc's allocator: 64 MiB on all ten connections
	// made a full pod's broker 1.3 GiB (the pod bench wants RSS under 1 GiB).
	w, err := sql.Open("sqlite", base+"&_pragma=cache_size(-65536)&_txlock=immediate")
	if err != nil {
		return fmt.Errorf("open sqlite %s: %w", path, err)
	}
	// One writer connection: SQLite has one writer anyway, and queueing
	// in database/sql is cheaper than SQLITE_BUSY retries.
	w.SetMaxOpenConns(1)
	w.SetConnMaxLifetime(0)
	w.SetConnMaxIdleTime(0)
	r, err := sql.Open("sqlite", base+"&_pragma=cache_size(-8192)&_pragma=query_only(1)")
	if err != nil {
		w.Close()
		return fmt.Errorf("open sqlite %s: %w", path, err)
	}
	r.SetMaxOpenConns(8)
	r.SetMaxIdleConns(8)
	r.SetConnMaxIdleTime(0)
	s.w, s.r = w, r
	s.wstmts, s.rstmts = newStmtCache(w), newStmtCache(r)
	s.hosts = newHostCache()
	if err := s.migrate(ctx, goose.DialectSQLite3, "migrations/sqlite"); err != nil {
		s.closeDBs()
		return err
	}
	if err := s.dropCompletenessAfterCrash(ctx); err != nil {
		s.closeDBs()
		return fmt.Errorf("open sqlite %s: %w", path, err)
	}
	if s.opts.CheckpointInterval >= 0 {
		c, err := sql.Open("sqlite", base+"&_pragma=cache_size(-2048)")
		if err != nil {
			s.closeDBs()
			return fmt.Errorf("open sqlite %s: %w", path, err)
		}
		c.SetMaxOpenConns(1)
		s.ckpt = startCheckpointer(c, cmp.Or(s.opts.CheckpointInterval, 100*time.Millisecond), s.committed.Load)
	}
	return nil
}

// postgresDefaults adds connect_timeout=5 to a URL DSN that sets none, so
// a database host that does not answer makes a new connection fail rather
// than hang. A statement needs no server-side timeout: every
// call carries the broker's store deadline, and pgx cancels the statement
// on the server when it passes.
func postgresDefaults(dsn string) string {
	u, err := url.Parse(dsn)
	if err != nil || (u.Scheme != "postgres" && u.Scheme != "postgresql") {
		return dsn // keyword=value form: as given
	}
	q := u.Query()
	if q.Get("connect_timeout") == "" {
		q.Set("connect_timeout", "5")
		u.RawQuery = q.Encode()
	}
	return u.String()
}

// statementTimeout is the server-side bound of every statement of the
// broker's own connections: a backstop behind the store
// deadline each call carries, for a statement whose client went away. The
// migrations run on connections of their own without it (an index build
// on a week of history may take longer).
const statementTimeout = "30s"

// withStatementTimeout adds statement_timeout to a URL DSN that sets none.
func withStatementTimeout(dsn string) string {
	u, err := url.Parse(dsn)
	if err != nil || (u.Scheme != "postgres" && u.Scheme != "postgresql") {
		return dsn
	}
	q := u.Query()
	if q.Get("statement_timeout") == "" {
		q.Set("statement_timeout", statementTimeout)
		u.RawQuery = q.Encode()
	}
	return u.String()
}

func (s *DB) openPostgres(ctx context.Context, dsn string) error {
	s.d = postgresDialect
	dsn = postgresDefaults(dsn)
	mdb, err := sql.Open("pgx", dsn)
	if err != nil {
		return fmt.Errorf("open postgres: %w", err)
	}
	defer mdb.Close()
	mdb.SetMaxOpenConns(2)
	if err := mdb.PingContext(ctx); err != nil {
		return fmt.Errorf("open postgres: %w", err)
	}
	s.w, s.r = mdb, mdb
	if err := s.migrate(ctx, goose.DialectPostgres, "migrations/postgres"); err != nil {
		return err
	}
	db, err := sql.Open("pgx", withStatementTimeout(dsn))
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
	return nil
}

// migrate applies the dialect's embedded migrations. On PostgreSQL an
// advisory lock keeps replicas starting together from racing.
func (s *DB) migrate(ctx context.Context, d goose.Dialect, dir string) error {
	var opts []goose.ProviderOption
	if d == goose.DialectPostgres {
		locker, err := lock.NewPostgresSessionLocker()
		if err != nil {
			return err
		}
		opts = append(opts, goose.WithSessionLocker(locker))
	}
	p, err := s.provider(d, dir, opts...)
	if err != nil {
		return err
	}
	// SQLite has no advisory lock: two processes opening one new file at
	// once race to make goose's version table (the loser's read cannot
	// become a write: SQLITE_BUSY, at once, whatever the busy timeout)
	// and to migrate (the loser's transaction fails, "table already
	// exists", and rolls back). Running it again finds the winner's
	// table and version and has nothing left to do.
	again := func(attempt int, err error) bool {
		if err == nil || d == goose.DialectPostgres || errors.Is(err, ErrSchemaTooNew) || attempt == 5 {
			return false
		}
		s.log.Debug("migration raced another process; retrying", "attempt", attempt, "err", err)
		select {
		case <-ctx.Done():
			return false
		case <-time.After(time.Duration(attempt*50) * time.Millisecond):
			return true
		}
	}
	for attempt := 1; ; attempt++ {
		err = checkSchemaVersion(ctx, p, s.d.name)
		if !again(attempt, err) {
			break
		}
	}
	if err != nil {
		return err
	}
	var res []*goose.MigrationResult
	for attempt := 1; ; attempt++ {
		res, err = p.Up(ctx)
		if !again(attempt, err) {
			break
		}
	}
	if err != nil {
		return migrationFailed(ctx, p, s.d.name, err)
	}
	// One line for a start that migrated (a new store applies them all):
	// the first and last versions applied; each migration at debug.
	for _, r := range res {
		s.log.Debug("applied migration", "dialect", s.d.name, "version", r.Source.Version, "path", r.Source.Path)
	}
	if len(res) > 0 {
		s.log.Info("applied migrations", "dialect", s.d.name, "count", len(res),
			"first", res[0].Source.Version, "last", res[len(res)-1].Source.Version)
	}
	if err := s.foldUserKeys(ctx); err != nil { // 00030's step in Go
		return err
	}
	return s.warnSameNameHosts(ctx) // what 00077 kept apart
}

// migrationFailed is the error of a migration that failed: which one, and
// the version the database stays at. Each runs in a transaction (on
// PostgreSQL all but the CONCURRENTLY index builds, whose failure leaves
// an INVALID index the next run drops), so the failed one left nothing;
// those before it in this start stay applied, and the release started
// before may not know them.
func migrationFailed(ctx context.Context, p *goose.Provider, dialect string, err error) error {
	var pe *goose.PartialError
	if !errors.As(err, &pe) || pe.Failed == nil || pe.Failed.Source == nil {
		return fmt.Errorf("migrate %s: %w", dialect, err)
	}
	at := "unknown"
	// Asked of a database that just failed: bounded, so that a start
	// whose connection hangs ends with this error instead of hanging.
	vctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), 5*time.Second)
	defer cancel()
	if v, verr := p.GetDBVersion(vctx); verr == nil {
		at = strconv.FormatInt(v, 10)
	}
	return fmt.Errorf("migrate %s: migration %d (%s) failed: %w; the database stays at schema version %s: fix the cause and start this release again (the migration runs again), or restore the backup taken before the upgrade",
		dialect, pe.Failed.Source.Version, filepath.Base(pe.Failed.Source.Path), pe.Err, at)
}

// provider returns the goose provider of the dialect's migrations, the
// embedded SQL files of dir.
func (s *DB) provider(d goose.Dialect, dir string, opts ...goose.ProviderOption) (*goose.Provider, error) {
	fsys, err := fs.Sub(migrations, dir)
	if err != nil {
		return nil, err
	}
	opts = append(opts, goose.WithDisableGlobalRegistry(true))
	p, err := goose.NewProvider(d, s.w, fsys, opts...)
	if err != nil {
		return nil, fmt.Errorf("migrations: %w", err)
	}
	return p, nil
}

// ErrSchemaTooNew is the error of Open on a database whose schema a newer
// vdibroker migrated: this binary does not know its tables, and running on
// them could lose or corrupt data.
var ErrSchemaTooNew = errors.New("database schema newer than this vdibroker")

// checkSchemaVersion refuses a database migrated past the newest embedded
// migration, naming both versions: an older binary started on a newer
// database (a rollback, a restored backup, a replica left behind) would
// otherwise run its queries against tables it does not know.
func checkSchemaVersion(ctx context.Context, p *goose.Provider, dialect string) error {
	current, known, err := p.GetVersions(ctx)
	if err != nil {
		return fmt.Errorf("migrations: read the schema version: %w", err)
	}
	if current > known {
		return fmt.Errorf("%w: the %s database is at schema version %d, this vdibroker knows versions up to %d: upgrade vdibroker to the release that migrated it (or restore a backup taken with this release)",
			ErrSchemaTooNew, dialect, current, known)
	}
	return nil
}

// Close stops the group committer (queued placements are still committed)
// and closes the database.
func (s *DB) Close() error {
	s.closeOnce.Do(func() { close(s.closing) })
	s.batcherWG.Wait()
	// A write probe under way (a Ping that began before Close) ends
	// before Close returns, and none begins after: its file in the data
	// directory would otherwise come and go after the store is closed
	// (and the directory, say, removed).
	s.probeMu.Lock()
	defer s.probeMu.Unlock()
	if s.d == sqliteDialect {
		// Last, once nothing else writes (dropCompletenessAfterCrash). A
		// store that cannot write it is taken at its next open for one
		// that crashed, which costs that open's global connects some
		// calls, nothing more.
		s.markOnce.Do(func() {
			ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
			defer cancel()
			if err := s.markClosedCleanly(ctx); err != nil {
				s.log.Warn("store: could not record the clean close; the next open drops the session directory's completeness", "err", err)
			}
		})
	}
	return s.closeDBs()
}

func (s *DB) closeDBs() error {
	var cerr error
	if s.ckpt != nil {
		cerr = s.ckpt.close()
		s.ckpt = nil
	}
	s.wstmts.close()
	s.rstmts.close()
	err := s.w.Close()
	if s.r != s.w {
		err = errors.Join(err, s.r.Close())
	}
	return errors.Join(cerr, err)
}

func (s *DB) now() time.Time { return s.opts.Now() }

// Ping checks the database answers. It uses the read pool: on SQLite the
// single writer may be busy with a group commit, which says nothing about
// the database being there (the broker pings every second, R-OUT1).
func (s *DB) Ping(ctx context.Context) error {
	if err := s.r.PingContext(ctx); err != nil {
		return err
	}
	return s.probeWrite(ctx) // probe.go
}

// DatabaseTime reads the database server's clock: PostgreSQL's
// clock_timestamp() (the time of the call, not of a transaction's
// start), SQLite's 'now' (this machine's clock, to the millisecond).
func (s *DB) DatabaseTime(ctx context.Context) (time.Time, error) {
	var t time.Time
	err := s.read(ctx, func(tx *tx) error {
		if tx.d == sqliteDialect {
			var text string
			if err := tx.row(ctx, `SELECT strftime('%Y-%m-%dT%H:%M:%fZ', 'now')`).Scan(&text); err != nil {
				return err
			}
			var err error
			t, err = time.Parse(time.RFC3339Nano, text)
			return err
		}
		return tx.row(ctx, `SELECT clock_timestamp()`).Scan(&t)
	})
	if err != nil {
		return time.Time{}, wrap(err, "the database's clock")
	}
	return t.UTC(), nil
}

// tx runs the store's SQL: in a write transaction, or, for reads, straight
// on the read pool (one statement each, so no BEGIN and ROLLBACK round
// trips on PostgreSQL for the lookups every request makes).
type tx struct {
	c     sqlConn
	tx    *sql.Tx // nil for reads
	d     *dialect
	stmts *stmtCache // nil: the driver caches statements itself (pgx)
	// cw collects the hosts a write transaction changes, for the host
	// cache (nil for reads and on PostgreSQL).
	cw *cacheWrites
	// pools memoizes getBatchPool within one group-commit transaction.
	pools map[string]*vdibroker.HostPool
	// beat, while a heartbeat of a group commit runs, is what the batch
	// read for it (readAhead); nil: it reads for itself.
	beat *beatRead
	// beats are the batch's heartbeats' writes of their hosts' rows not
	// yet made (flushBeats).
	beats []hostBeat
	// audit is the entry of the request this write serves (nil when
	// none): the write's methods set its Before and After (audited), and
	// writeOnce inserts it in the same transaction (audit.go).
	audit *vdibroker.AuditEntry
}

// sqlConn is what *sql.Tx and *sql.DB share.
type sqlConn interface {
	ExecContext(ctx context.Context, query string, args ...any) (sql.Result, error)
	QueryContext(ctx context.Context, query string, args ...any) (*sql.Rows, error)
	QueryRowContext(ctx context.Context, query string, args ...any) *sql.Row
}

// stmtCache keeps prepared statements per query on one *sql.DB. Parsing
// dominates small statements on SQLite; database/sql prepares a cached
// statement once per connection and reuses it in every transaction. A query
// missing from the cache runs unprepared and is prepared after its
// transaction ends: preparing inside would wait for a connection the
// transaction holds (the SQLite writer has one).
type stmtCache struct {
	db   *sql.DB
	mu   sync.Mutex
	m    map[string]*sql.Stmt
	want map[string]bool
}

func newStmtCache(db *sql.DB) *stmtCache {
	return &stmtCache{db: db, m: map[string]*sql.Stmt{}, want: map[string]bool{}}
}

func (c *stmtCache) get(query string) *sql.Stmt {
	c.mu.Lock()
	defer c.mu.Unlock()
	st, ok := c.m[query]
	if !ok && c.m != nil && len(c.m)+len(c.want) < maxCachedStmts {
		c.want[query] = true
	}
	return st
}

// maxCachedStmts bounds the cache (ListUserSessions builds its query from
// the filter, which gives a few dozen variants).
const maxCachedStmts = 256

// prepareWanted prepares the queries that missed; call it with no
// transaction open on the cache's pool by this goroutine.
func (c *stmtCache) prepareWanted(ctx context.Context) {
	if c == nil {
		return
	}
	c.mu.Lock()
	var qs []string
	for q := range c.want {
		qs = append(qs, q)
	}
	clear(c.want)
	c.mu.Unlock()
	for _, q := range qs {
		st, err := c.db.PrepareContext(ctx, q)
		if err != nil {
			continue // it runs unprepared
		}
		c.mu.Lock()
		if _, ok := c.m[q]; ok || c.m == nil {
			st.Close()
		} else {
			c.m[q] = st
		}
		c.mu.Unlock()
	}
}

func (c *stmtCache) close() {
	if c == nil {
		return
	}
	c.mu.Lock()
	defer c.mu.Unlock()
	for _, st := range c.m {
		st.Close()
	}
	c.m = nil
}

// stmt returns query prepared in the transaction, or nil without a cache.
func (t *tx) stmt(ctx context.Context, query string) (*sql.Stmt, error) {
	if t.stmts == nil {
		return nil, nil
	}
	st := t.stmts.get(query)
	if st == nil || t.tx == nil {
		return st, nil
	}
	return t.tx.StmtContext(ctx, st), nil
}

func (t *tx) exec(ctx context.Context, query string, args ...any) (int64, error) {
	if t.cw != nil && !t.cw.hostsWritten && !strings.HasPrefix(query, "SELECT") &&
		(strings.Contains(query, "session_hosts") || strings.Contains(query, "host_counts")) {
		t.cw.hostsWritten = true
	}
	query = t.d.q(query)
	st, err := t.stmt(ctx, query)
	if err != nil {
		return 0, err
	}
	var res sql.Result
	if st != nil {
		res, err = st.ExecContext(ctx, args...)
	} else {
		res, err = t.c.ExecContext(ctx, query, args...)
	}
	if err != nil {
		if t.d.isUnique(err) {
			err = fmt.Errorf("%w: %w", errUnique, err)
		}
		return 0, err
	}
	return res.RowsAffected()
}

func (t *tx) query(ctx context.Context, query string, args ...any) (*sql.Rows, error) {
	query = t.d.q(query)
	st, err := t.stmt(ctx, query)
	if err != nil {
		return nil, err
	}
	if st != nil {
		return st.QueryContext(ctx, args...)
	}
	return t.c.QueryContext(ctx, query, args...)
}

// row is QueryRow; a prepare error surfaces from Scan.
func (t *tx) row(ctx context.Context, query string, args ...any) *sql.Row {
	query = t.d.q(query)
	if st, err := t.stmt(ctx, query); err == nil && st != nil {
		return st.QueryRowContext(ctx, args...)
	}
	return t.c.QueryRowContext(ctx, query, args...)
}

// errUnique is every dialect's unique-constraint violation, translated in
// tx.exec, so the shared code checks one sentinel.
var errUnique = errors.New("unique constraint violated")

// errRaced says a concurrent transaction inserted the row this one was
// about to create (a unique violation on a create-or-replace): run again,
// and the replace path applies.
var errRaced = errors.New("concurrent insert of the same key")

// maxAttempts bounds how often a transaction that hit a serialization
// failure or deadlock is run again.
const maxAttempts = 8

// write runs fn in a write transaction, running it again on retryable
// errors. fn must be safe to run again (it sees a fresh transaction).
func (s *DB) write(ctx context.Context, fn func(t *tx) error) error {
	return s.writeSynced(ctx, true, fn)
}

// writeSynced is write; unless synced, its commit is not synced (SQLite:
// synchronous=NORMAL for the one transaction; PostgreSQL:
// synchronous_commit=off for it; see DB.unsynced).
func (s *DB) writeSynced(ctx context.Context, synced bool, fn func(t *tx) error) error {
	var err error
	for attempt := 1; ; attempt++ {
		err = s.writeOnce(ctx, synced, fn)
		if errors.Is(err, errRunApart) && attempt < maxAttempts {
			continue // at once: nothing to wait for
		}
		if err == nil || !(errors.Is(err, errRaced) || s.d.isRetryable(err)) || attempt == maxAttempts {
			return s.markWriteFault(err) // probe.go
		}
		s.log.Debug("retrying transaction", "attempt", attempt, "err", err)
		select {
		case <-ctx.Done():
			return err
		case <-time.After(time.Duration(attempt*attempt) * time.Millisecond):
		}
	}
}

func (s *DB) writeOnce(ctx context.Context, synced bool, fn func(t *tx) error) (commitErr error) {
	var opts *sql.TxOptions
	if s.d == postgresDialect {
		// READ COMMITTED whatever the database's default: the statements
		// rely on seeing what committed before each began (tx.assign).
		opts = &sql.TxOptions{Isolation: sql.LevelReadCommitted}
	}
	// Deferred first, so run last: it prepares on the writer connection,
	// which an unsynced transaction holds until its own defer gives it
	// back.
	defer s.wstmts.prepareWanted(ctx)
	var begin interface {
		BeginTx(context.Context, *sql.TxOptions) (*sql.Tx, error)
	} = s.w
	if !synced && s.d == sqliteDialect && s.syncFull {
		// The writer connection held from the pragma to the pragma that
		// restores FULL (after the rollback or the commit), so no other
		// write commits unsynced on it.
		c, err := s.unsyncedConn(ctx)
		if err != nil {
			return err
		}
		defer s.resync(ctx, c)
		begin = c
	}
	sqlTx, err := begin.BeginTx(ctx, opts)
	if err != nil {
		return fmt.Errorf("begin: %w", err)
	}
	t := &tx{c: sqlTx, tx: sqlTx, d: s.d, stmts: s.wstmts}
	if s.hosts != nil {
		t.cw = &cacheWrites{}
	}
	if !synced && s.d == postgresDialect {
		if _, err := sqlTx.ExecContext(ctx, `SET LOCAL synchronous_commit = off`); err != nil {
			_ = sqlTx.Rollback()
			return fmt.Errorf("synchronous_commit=off: %w", err)
		}
	}
	// Deferred so that they also run when fn panics, rollback first: the
	// transaction holds the only writer connection, which an open
	// transaction would keep for as long as ctx lives (forever for a
	// context.Background), hanging every later write; and prepareWanted
	// (deferred above) waits for that connection, so before the rollback
	// it would wait for itself.
	finished := false
	defer func() {
		if !finished {
			_ = sqlTx.Rollback()
		}
	}()
	t.audit = pendingAudit(ctx)
	if err := fn(t); err != nil {
		return err
	}
	auditSeq, err := t.insertAudit(ctx)
	if err != nil {
		return err
	}
	defer func() {
		if finished && t.audit != nil && commitErr == nil {
			t.audit.Seq = auditSeq
		}
	}()
	finished = true // Commit ends the transaction even when it fails
	if t.cw == nil || t.cw.empty() {
		if err := sqlTx.Commit(); err != nil {
			return fmt.Errorf("commit: %w", err)
		}
		s.committed.Add(1)
		return nil
	}
	// The host cache forgets what this transaction changes before it
	// commits, and stores its copies after (see hostCache).
	seq := s.hosts.drop(t.cw)
	if err := sqlTx.Commit(); err != nil {
		s.hosts.drop(t.cw)
		return fmt.Errorf("commit: %w", err)
	}
	s.committed.Add(1)
	s.hosts.committed(t.cw, seq)
	return nil
}

// unsyncedConn takes SQLite's writer connection and sets it to commit
// without syncing (synchronous=NORMAL; a pragma SQLite refuses inside a
// transaction). resync gives it back.
func (s *DB) unsyncedConn(ctx context.Context) (*sql.Conn, error) {
	c, err := s.w.Conn(ctx)
	if err != nil {
		return nil, fmt.Errorf("writer connection: %w", err)
	}
	if _, err := c.ExecContext(ctx, `PRAGMA synchronous = NORMAL`); err != nil {
		s.resync(ctx, c)
		return nil, fmt.Errorf("synchronous=NORMAL: %w", err)
	}
	return c, nil
}

// resync sets the writer connection c back to synchronous=FULL and gives
// it back, or closes it if that failed: a connection left NORMAL would
// commit the next connect unsynced (R-D2); a new one opens with FULL.
func (s *DB) resync(ctx context.Context, c *sql.Conn) {
	if _, err := c.ExecContext(context.WithoutCancel(ctx), `PRAGMA synchronous = FULL`); err != nil {
		s.log.Error("writer connection closed: synchronous=FULL failed", "err", err)
		_ = c.Raw(func(any) error { return driver.ErrBadConn })
	}
	_ = c.Close()
}

// read runs fn's queries on the read pool, outside any transaction: each
// read method is one statement (or, in ListSessionHosts, an existence check
// and a list that need not share a snapshot).
func (s *DB) read(ctx context.Context, fn func(t *tx) error) error {
	defer s.rstmts.prepareWanted(ctx)
	return fn(&tx{c: s.r, d: s.d, stmts: s.rstmts})
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

func notFound(format string, args ...any) error {
	return vdibroker.Errorf(vdibroker.ENotFound, format, args...)
}
