//go:build unix

package pgtest

import (
	"context"
	"database/sql"
	"sync"
	"testing"
	"time"
)

// TestPauseStopsEveryProcess: while clients keep opening connections (the
// postmaster forking a backend for each), Pause leaves no process of the
// server running, so no connection answers during the pause, as the
// outage tests assume. Each of the rounds pauses and resumes the server.
func TestPauseStopsEveryProcess(t *testing.T) {
	s := Start(t)
	ctx, cancel := context.WithCancel(t.Context())
	var wg sync.WaitGroup
	for range 4 {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for ctx.Err() == nil {
				db, err := sql.Open("pgx", s.DSN)
				if err != nil {
					return
				}
				c, cancelPing := context.WithTimeout(ctx, 200*time.Millisecond)
				db.PingContext(c) // a new connection: a fork
				cancelPing()
				db.Close()
			}
		}()
	}
	defer func() { cancel(); wg.Wait() }()
	for round := range 30 {
		time.Sleep(20 * time.Millisecond) // forks under way
		s.Pause()
		for _, pid := range append(children(s.postmaster()), s.postmaster()) {
			if st, ok := procState(pid); ok && st != 'T' && st != 'Z' {
				t.Errorf("round %d: process %d of the paused server is in state %c, want T (stopped)", round, pid, st)
			}
		}
		s.Resume()
	}
}
