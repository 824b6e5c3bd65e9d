package store_test

import (
	"testing"

	"github.com/vdibroker/vdibroker"
	"github.com/vdibroker/vdibroker/store"
)

// A batch of heartbeats alone commits unsynced (their hosts write it all
// again with their next heartbeats); any batch with a connect in it, or
// with a command result (which a host reports once), is synced (R-D2);
// and the writer is synced again after each. SQLite configured NORMAL
// syncs nothing.
func TestHeartbeatBatchesCommitUnsynced(t *testing.T) {
	beat := func(host string) store.Write {
		return store.Write{Pool: "p", Host: host, Beat: &vdibroker.HeartbeatRequest{}}
	}
	connect := func(i int) store.Write {
		return store.Write{Placement: placement("p", "h2", "user-"+string(rune('a'+i)), 10)}
	}
	cases := []struct {
		name   string
		opts   store.Options
		writes func(i int) []store.Write
		want   bool // synced
	}{
		{"heartbeats alone", store.Options{}, func(int) []store.Write { return []store.Write{beat("h1"), beat("h2")} }, false},
		{"a heartbeat with a command result", store.Options{}, func(int) []store.Write {
			w := beat("h2")
			w.Beat.Results = []vdibroker.CommandResult{{ID: "no-such-command", Success: true}}
			return []store.Write{beat("h1"), w}
		}, true},
		{"heartbeats and a connect", store.Options{}, func(i int) []store.Write { return []store.Write{beat("h1"), connect(i)} }, true},
		{"SQLite configured NORMAL: a connect", store.Options{Synchronous: "NORMAL"}, func(i int) []store.Write { return []store.Write{connect(i)} }, false},
	}
	run(t, func(t *testing.T, tg target) {
		for _, tc := range cases {
			t.Run(tc.name, func(t *testing.T) {
				if tc.opts.Synchronous != "" && tg.name != "sqlite" {
					t.Skip("SQLite's option")
				}
				open := sqliteOpener // a database of its own
				if tg.name == "postgres" {
					open = postgresOpener
				}
				s := open(t)(t, tc.opts)
				mustPool(t, s, pool("p", vdibroker.Pooled))
				mustHost(t, s, "p", "h1")
				mustHost(t, s, "p", "h2")
				// Twice: the second batch finds the writer as the first left it.
				for i := range 2 {
					got, errs := s.BatchSynced(tc.writes(i), t0)
					for _, err := range errs {
						if err != nil {
							t.Fatalf("batch %d: %v", i, err)
						}
					}
					if got != tc.want {
						t.Errorf("batch %d: synced %v inside the batch, want %v", i, got, tc.want)
					}
					after, err := s.WriterSynced(t.Context())
					if err != nil {
						t.Fatal(err)
					}
					if want := tc.opts.Synchronous != "NORMAL"; after != want {
						t.Errorf("batch %d: the writer commits synced %v after it, want %v", i, after, want)
					}
				}
			})
		}
	})
}
