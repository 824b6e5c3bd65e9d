package store_test

import (
	"testing"

	"github.com/vdibroker/vdibroker"
	"github.com/vdibroker/vdibroker/store"
)

// A batch of heartbeats alone commits unsynced on SQLite (their hosts
// write it all again with their next heartbeats); any batch with a connect
// in it, or with a command result (which a host reports once), is synced
// (R-D2); and the writer connection is synchronous=FULL again after each.
func TestHeartbeatBatchesCommitUnsynced(t *testing.T) {
	const normal, full = 1, 2
	beat := func(host string) store.Write {
		return store.Write{Pool: "p", Host: host, Beat: &vdibroker.HeartbeatRequest{}}
	}
	for _, tc := range []struct {
		name   string
		opts   store.Options
		writes func(i int) []store.Write
		want   int
	}{
		{"heartbeats alone", store.Options{}, func(int) []store.Write { return []store.Write{beat("h1"), beat("h2")} }, normal},
		{"a heartbeat with a command result", store.Options{}, func(int) []store.Write {
			w := beat("h2")
			w.Beat.Results = []vdibroker.CommandResult{{ID: "no-such-command", Success: true}}
			return []store.Write{beat("h1"), w}
		}, full},
		{"heartbeats and a connect", store.Options{}, func(i int) []store.Write {
			return []store.Write{beat("h1"), {Placement: placement("p", "h2", "user-"+string(rune('a'+i)), 10)}}
		}, full},
		{"configured NORMAL: a connect", store.Options{Synchronous: "NORMAL"}, func(i int) []store.Write {
			return []store.Write{{Placement: placement("p", "h2", "user-"+string(rune('a'+i)), 10)}}
		}, normal},
	} {
		t.Run(tc.name, func(t *testing.T) {
			s := sqliteOpener(t)(t, tc.opts)
			mustPool(t, s, pool("p", vdibroker.Pooled))
			mustHost(t, s, "p", "h1")
			mustHost(t, s, "p", "h2")
			configured := full
			if tc.opts.Synchronous == "NORMAL" {
				configured = normal
			}
			// Twice: the second batch finds the writer as the first left it.
			for i := range 2 {
				got, errs := s.BatchSynchronous(tc.writes(i), t0)
				for _, err := range errs {
					if err != nil {
						t.Fatalf("batch %d: %v", i, err)
					}
				}
				if got != tc.want {
					t.Errorf("batch %d: synchronous %d inside the batch, want %d", i, got, tc.want)
				}
				after, err := s.WriterSynchronous(t.Context())
				if err != nil {
					t.Fatal(err)
				}
				if after != configured {
					t.Errorf("batch %d: the writer connection is synchronous %d after it, want %d", i, after, configured)
				}
			}
		})
	}
}
