package global

import (
	"context"
	"encoding/json"
	"fmt"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/vdibroker/vdibroker"
)

// registerPeer is a PodClient that keeps the directory registrations it
// is sent, JSON-encoded as on the wire.
type registerPeer struct {
	vdibroker.PodClient
	bodies [][]byte
}

func (p *registerPeer) Register(ctx context.Context, pod vdibroker.Pod, req vdibroker.PodDirectoryRequest) error {
	b, err := json.Marshal(req)
	p.bodies = append(p.bodies, b)
	return err
}

// TestWholeListPartsFitACall_RG1: a whole list of long user names is
// sent in parts that each fit the body of a pod-to-pod call (1 MiB, the
// http package's bound), every user once, the last part alone Last.
func TestWholeListPartsFitACall_RG1(t *testing.T) {
	peer := &registerPeer{}
	g := New(Config{Pod: "pod0", Peers: peer})
	doc := &vdibroker.Federation{Generation: 3, Pods: []vdibroker.Pod{{Name: "pod0"}, {Name: "pod1", URL: "http://127.0.0.1:1"}}}
	var users []string
	for i := range vdibroker.MaxDirectoryUsers {
		users = append(users, fmt.Sprintf("%05d%s", i, strings.Repeat("é", vdibroker.MaxUserLen-5)))
	}
	if err := g.sendFull(t.Context(), doc, "pod1", users, time.Now()); err != nil {
		t.Fatal(err)
	}
	var got []string
	for i, b := range peer.bodies {
		if len(b) > 1<<20 {
			t.Errorf("part %d is %d bytes, more than a pod-to-pod call's 1 MiB", i, len(b))
		}
		var req vdibroker.PodDirectoryRequest
		if err := json.Unmarshal(b, &req); err != nil {
			t.Fatal(err)
		}
		if !req.Full || req.Last != (i == len(peer.bodies)-1) || req.Generation != 3 {
			t.Errorf("part %d of %d: full %v last %v generation %d", i, len(peer.bodies), req.Full, req.Last, req.Generation)
		}
		got = append(got, req.Users...)
	}
	if !slices.Equal(got, users) {
		t.Errorf("the parts carry %d users, want the %d of the list in order", len(got), len(users))
	}
}
