package console_test

import (
	"encoding/json"
	"io"
	"net/http"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/vdibroker/vdibroker"
	"github.com/vdibroker/vdibroker/federation"
	vhttp "github.com/vdibroker/vdibroker/http"
)

// TestShortPeerWaitReadsShareOnePeerCall_RG5 (R-G5, R-SEC): reads of
// the federation with the shortest peerWait return while a peer that
// accepts the connection never answers, and its call goes on up to the
// pod timeout; a Reader (the weakest credential these routes take)
// sending many of them, at once and one after another, starts no call
// of its own: the one call to that peer under way is shared, so the
// broker holds one call a peer, not one a read.
func TestShortPeerWaitReadsShareOnePeerCall_RG5(t *testing.T) {
	e := newPodEnvConfig(t, podEnvConfig{pod: "fra1", podTimeout: 20 * time.Second})
	e.seed()
	nyc1 := e.putSilentPeer(federation.LoadsPath)
	reader, err := e.admin.CreateToken(t.Context(), vhttp.TokenRequest{Role: vdibroker.RoleReader, Subject: "desk"})
	if err != nil {
		t.Fatal(err)
	}
	get := func(path string) (int, []byte) {
		req, err := http.NewRequestWithContext(t.Context(), http.MethodGet, e.url+path, nil)
		if err != nil {
			t.Error(err)
			return 0, nil
		}
		req.Header.Set("Authorization", "Bearer "+reader.Secret)
		resp, err := http.DefaultClient.Do(req)
		if err != nil {
			t.Error(err)
			return 0, nil
		}
		defer resp.Body.Close()
		body, _ := io.ReadAll(resp.Body)
		return resp.StatusCode, body
	}
	// The first read starts the one call, and is answered while it runs.
	status, body := get("/api/v1/federation?peerWait=1ms")
	var st struct {
		Peers []struct {
			Pod     string     `json:"pod"`
			AskedAt *time.Time `json:"askedAt"`
		} `json:"peers"`
	}
	if err := json.Unmarshal(body, &st); status != http.StatusOK || err != nil || len(st.Peers) != 1 || st.Peers[0].AskedAt == nil {
		t.Fatalf("GET /federation?peerWait=1ms: HTTP %d %s; want 200 with nyc1 asked, unanswered", status, body)
	}
	var wg sync.WaitGroup
	var answered atomic.Int64
	for i := range 40 {
		path := "/api/v1/federation?peerWait=1ms"
		switch i % 3 {
		case 1:
			path = "/api/v1/globalentitlements?peerWait=1ms"
		case 2:
			path = "/api/v1/globalentitlements/office?peerWait=1ms"
		}
		wg.Go(func() {
			if status, _ := get(path); status == http.StatusOK {
				answered.Add(1)
			}
		})
	}
	wg.Wait()
	if answered.Load() == 0 {
		t.Fatal("no read of the 40 was answered 200")
	}
	// The reads above were answered, so their waits ended; the peer's
	// one call is still blocked (its pod timeout is 20 s). It may reach
	// the peer only now on a loaded machine: wait for it, and read once
	// more that the call under way is still the first read's (a call of
	// its own per read would have asked it anew).
	nyc1.waitCalled(t)
	status, body = get("/api/v1/federation?peerWait=1ms")
	first := *st.Peers[0].AskedAt
	if err := json.Unmarshal(body, &st); status != http.StatusOK || err != nil || len(st.Peers) != 1 || st.Peers[0].AskedAt == nil || !st.Peers[0].AskedAt.Equal(first) {
		t.Errorf("GET /federation?peerWait=1ms after the reads: HTTP %d %s; want nyc1 still asked at %s, the first read's call", status, body, first)
	}
	if n, b := nyc1.calls.Load(), nyc1.blocked.Load(); n != 1 || b != 1 {
		t.Errorf("the peer's loads were asked %d times, %d of them still under way, after %d reads answered; want 1 call, shared", n, b, answered.Load()+1)
	}
}
