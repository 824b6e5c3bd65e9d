package global

import (
	"fmt"
	nethttp "net/http"
	"net/http/httptest"
	"testing"
	"time"

	clocktesting "k8s.io/utils/clock/testing"

	"github.com/vdibroker/vdibroker"
	vhttp "github.com/vdibroker/vdibroker/http"
	"github.com/vdibroker/vdibroker/store"
)

// TestRemovedPodsForgotten_RG5 (R-SEC): what a pod keeps of its peers by
// name (their load summaries, their health, when they last took a
// registration) holds the pods of its document only. Kept for every name
// a document ever listed, it grew at each new generation: a holder of
// the federation secret writes a document of 200 new names a
// generation, each answering at a URL of its own. Two replicas on one
// SQLite store, the peers real servers on loopback: the replica that
// wrote the document and the one that read it alike.
func TestRemovedPodsForgotten_RG5(t *testing.T) {
	peer := httptest.NewServer(nethttp.HandlerFunc(func(w nethttp.ResponseWriter, r *nethttp.Request) {
		w.Header().Set("Content-Type", "application/json")
		if r.Method == "POST" {
			w.WriteHeader(nethttp.StatusNoContent) // a directory registration taken
			return
		}
		w.Write([]byte(`{"pod":"p","site":"s","generation":1,"pools":[]}`))
	}))
	t.Cleanup(peer.Close)
	st, err := store.Open(t.Context(), "", t.TempDir(), nil)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { st.Close() })
	clk := clocktesting.NewFakeClock(time.Now())
	replica := func() *Service {
		return New(Config{Pod: "pod0", Site: "s", Store: st, Clock: clk,
			Peers: vhttp.NewPodClient("pod0", []byte("forget-test-federation-secret"))})
	}
	writer, reader := replica(), replica()
	const peers = 5 // federation.DirectoryMinPods: the pods register
	for gen := int64(1); gen <= 3; gen++ {
		doc := &vdibroker.Federation{Generation: gen, Sites: []vdibroker.Site{{Name: "s"}}, Pods: []vdibroker.Pod{{Name: "pod0", Site: "s", URL: "https://pod0.example.test"}}}
		for i := range peers {
			doc.Pods = append(doc.Pods, vdibroker.Pod{Name: fmt.Sprintf("g%d-pod%d", gen, i), Site: "s", URL: peer.URL})
		}
		if _, err := writer.PutDocument(t.Context(), doc); err != nil {
			t.Fatal(err)
		}
		clk.Step(2 * docTTL) // the reader's cached document is stale
		for _, g := range []*Service{writer, reader} {
			if _, err := g.Status(t.Context(), true, 0); err != nil {
				t.Fatal(err)
			}
			if err := g.DirectoryPass(t.Context()); err != nil {
				t.Fatal(err)
			}
		}
	}
	for name, g := range map[string]*Service{"the writer": writer, "the reader": reader} {
		g.mu.Lock()
		loads, health := len(g.loads), len(g.peers)
		g.mu.Unlock()
		g.dir.mu.Lock()
		took := len(g.dir.took)
		g.dir.mu.Unlock()
		if loads != peers || health != peers || took != peers {
			t.Errorf("%s keeps %d load summaries, %d peers' health, %d registrations taken; want %d each, the document's peers", name, loads, health, took, peers)
		}
	}
}
