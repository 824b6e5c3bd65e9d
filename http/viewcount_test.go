package http_test

import (
	"context"
	"fmt"
	"sync"
	"testing"

	vhttp "github.com/vdibroker/vdibroker/http"
)

// TestViewCountsWithHeartbeatInSameBatch: a connect and its host's
// heartbeat committed in one group-commit transaction leave the server's
// view of the host's session count equal to the store's (R-S1: the counts
// a heartbeat answers with are the database's). The heartbeat's count
// already includes the new session; if the view also still counted the
// connect as in flight when it applied that count, the host would look one
// session fuller than it is until its next heartbeat.
//
// Each round sends a connect and a heartbeat at once, then places a probe
// connect: its decision record (R-C7) shows the count the view decided
// from, which must be the sessions stored before it.
func TestViewCountsWithHeartbeatInSameBatch(t *testing.T) {
	e := newEnv(t)
	pool := uniq("vc")
	e.pool(pool, map[string]any{"loadBalancerType": "DepthFirst", "maxSessionLimit": 999999})
	host := e.addHosts(pool, "vc", 1)[0]
	ctx := context.Background()
	stored := 0
	for round := range 60 {
		var wg sync.WaitGroup
		wg.Add(2)
		go func() {
			defer wg.Done()
			e.heartbeat(host)
		}()
		go func() {
			defer wg.Done()
			e.mustConnect(pool, fmt.Sprintf("user%03d", round))
		}()
		wg.Wait()
		stored++
		probe, err := e.admin.Connect(ctx, pool, vhttp.ConnectRequest{User: fmt.Sprintf("probe%03d", round)})
		if err != nil {
			t.Fatal(err)
		}
		rec, err := e.admin.GetPlacement(ctx, pool, probe.SessionID)
		if err != nil {
			t.Fatal(err)
		}
		if len(rec.Candidates) != 1 || rec.Candidates[0].Sessions != stored {
			t.Fatalf("round %d: the probe was decided from %+v; want host %s with %d sessions, as stored", round, rec.Candidates, host, stored)
		}
		stored++
	}
}
