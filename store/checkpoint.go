package store

import (
	"context"
	"database/sql"
	"sync"
	"time"
)

// checkpointer copies the WAL into the database file from its own
// connection, beside the single writer rather than inside it (SQLite only).
//
// SQLite's automatic checkpoint runs in the connection that committed, after
// the commit: the writer then copies thousands of pages and fsyncs the
// database file while every queued connect waits; under a logon storm that
// was a stall of tens of milliseconds every second or so, the bulk of the
// p99 latency. A PASSIVE checkpoint from another connection runs while the
// writer goes on. The writer's automatic checkpoint stays as a safety net:
// it finds little left to copy, and it is what lets the next transaction
// start the WAL over from its beginning, so the file stays bounded.
type checkpointer struct {
	db       *sql.DB
	interval time.Duration
	// writes counts the writer's commits; a tick with none since the last
	// checkpoint does nothing.
	writes func() int64
	stop   chan struct{}
	wg     sync.WaitGroup
}

func startCheckpointer(db *sql.DB, interval time.Duration, writes func() int64) *checkpointer {
	c := &checkpointer{db: db, interval: interval, writes: writes, stop: make(chan struct{})}
	c.wg.Add(1)
	go c.run()
	return c
}

func (c *checkpointer) run() {
	defer c.wg.Done()
	t := time.NewTicker(c.interval)
	defer t.Stop()
	last := int64(-1)
	for {
		select {
		case <-c.stop:
			return
		case <-t.C:
		}
		if n := c.writes(); n != last {
			last = n
			_, _, _ = c.checkpoint(context.Background()) // a failed one is retried at the next tick
		}
	}
}

// checkpoint runs one PASSIVE checkpoint and returns the WAL's frames and
// how many of them are now in the database file.
func (c *checkpointer) checkpoint(ctx context.Context) (walFrames, copied int, err error) {
	var busy int
	err = c.db.QueryRowContext(ctx, `PRAGMA wal_checkpoint(PASSIVE)`).Scan(&busy, &walFrames, &copied)
	return walFrames, copied, err
}

func (c *checkpointer) close() error {
	close(c.stop)
	c.wg.Wait()
	return c.db.Close()
}
