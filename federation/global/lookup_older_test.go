package global

import (
	"encoding/json"
	"fmt"
	nethttp "net/http"
	"net/http/httptest"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/vdibroker/vdibroker"
	"github.com/vdibroker/vdibroker/federation"
	vhttp "github.com/vdibroker/vdibroker/http"
)

// TestLookupOlderPodNotAFailure_RG1_RG5: a directory pod of an older
// version refuses a look-up's register, a field it does not know (400
// naming it), and is asked again without it. That refusal is its answer,
// not a failed call: the pod-call metrics (ObservePodCall) count no
// failure for it, so every global connect during a rolling upgrade does
// not raise vdibroker_pod_call_failures_total{op="lookup"}.
func TestLookupOlderPodNotAFailure_RG1_RG5(t *testing.T) {
	var calls atomic.Int32
	older := httptest.NewServer(nethttp.HandlerFunc(func(w nethttp.ResponseWriter, r *nethttp.Request) {
		calls.Add(1)
		var req struct {
			User string `json:"user"`
		}
		dec := json.NewDecoder(r.Body)
		dec.DisallowUnknownFields()
		w.Header().Set("Content-Type", "application/json")
		if err := dec.Decode(&req); err != nil {
			w.WriteHeader(nethttp.StatusBadRequest)
			field := strings.Trim(strings.TrimPrefix(err.Error(), "json: unknown field "), `"`)
			json.NewEncoder(w).Encode(map[string]any{"error": vdibroker.FieldError(field, "unknown field")})
			return
		}
		json.NewEncoder(w).Encode(vdibroker.PodLookup{Pods: []string{}, Complete: map[string]int64{}})
	}))
	defer older.Close()
	doc := &vdibroker.Federation{Generation: 1}
	for i := range federation.DirectoryMinPods {
		doc.Pods = append(doc.Pods, vdibroker.Pod{Name: fmt.Sprintf("pod%d", i), URL: older.URL})
	}
	user := ""
	for i := 0; user == ""; i++ {
		if u := fmt.Sprintf("u%d", i); federation.DirectoryPod(doc, u) != "pod0" {
			user = u
		}
	}
	var mu sync.Mutex
	var failed []error
	g := New(Config{Pod: "pod0", Peers: vhttp.NewPodClient("pod0", []byte("0123456789abcdef")), PodTimeout: time.Minute,
		ObservePodCall: func(peer, op string, _ time.Duration, err error) {
			mu.Lock()
			defer mu.Unlock()
			if err != nil {
				failed = append(failed, fmt.Errorf("%s %s: %w", peer, op, err))
			}
		}})
	_, ok, at, _ := g.lookup(t.Context(), doc, user, "pod2")
	if n := calls.Load(); !ok || at != "" || n != 2 {
		t.Fatalf("look-up at an older pod: ok %v, registered at %q, %d calls; want an answer, nothing registered, two calls", ok, at, n)
	}
	if len(failed) != 0 {
		t.Errorf("calls observed as failed: %v; want none (the older pod answered)", failed)
	}
}
