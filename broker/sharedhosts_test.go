package broker

import (
	"context"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/vdibroker/vdibroker"
	"github.com/vdibroker/vdibroker/intercept"
	"github.com/vdibroker/vdibroker/store"
)

// TestPersistentChangeReadsSharedHostsOnly_RP1: the warning of a change
// from MultiplePersistent to Persistent counts the hosts that keep more
// than one user from the store's read of those hosts alone
// (ListSharedHosts), not from a read of every host of the pool in full,
// and still counts as before: one user in two spellings is one user, a
// comma inside a name is no second user.
func TestPersistentChangeReadsSharedHostsOnly_RP1(t *testing.T) {
	ctx := t.Context()
	st, err := store.OpenWith(ctx, "", t.TempDir(), nil, store.Options{})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { st.Close() })
	var mu sync.Mutex
	var ops []string
	wrapped := intercept.NewStore(st, func(ctx context.Context, op string, call func(context.Context) error) error {
		mu.Lock()
		ops = append(ops, op)
		mu.Unlock()
		return call(ctx)
	})
	svc := New(Config{Store: wrapped, MaintenanceInterval: 10000 * time.Hour})
	t.Cleanup(func() { svc.Close() })

	p := vdibroker.NewHostPool("shared")
	p.HostPoolType, p.LoadBalancerType, p.PersonalDesktopAssignmentType = vdibroker.Personal, vdibroker.MultiplePersistent, vdibroker.Direct
	if _, _, err := svc.PutPool(ctx, p.Name, p, vdibroker.Precondition{}); err != nil {
		t.Fatal(err)
	}
	// sh1: none. sh2: one user whose name has a comma, and sh3: one user
	// in two spellings, as an older release stored them (both straight
	// into the store: the API takes sh2's name but refuses sh3's
	// repeat). sh4, sh5: two and three users, the 2 shared hosts.
	for name, users := range map[string][]string{
		"sh1": {}, "sh2": {"ann"}, "sh3": {"dora"}, "sh4": {"u1", "u2"}, "sh5": {"v1", "v2", "v3"},
	} {
		if _, _, err := svc.PutSessionHost(ctx, p.Name, name, &vdibroker.SessionHostRequest{AssignedUsers: &users}); err != nil {
			t.Fatalf("put %s: %v", name, err)
		}
	}
	for name, users := range map[string][]string{"sh2": {`ann, "the second"`}, "sh3": {"dora", "DORA"}} {
		if _, err := st.UpdateSessionHost(ctx, p.Name, name, func(h *vdibroker.SessionHost) error {
			h.AssignedUsers = users
			return nil
		}); err != nil {
			t.Fatal(err)
		}
	}

	mu.Lock()
	ops = nil
	mu.Unlock()
	got, err := svc.UpdatePool(ctx, p.Name, func(p *vdibroker.HostPool) error {
		p.LoadBalancerType = vdibroker.Persistent
		return nil
	}, vdibroker.Precondition{})
	if err != nil {
		t.Fatal(err)
	}
	const want = "2 session hosts keep more than one assigned user (sh4, sh5)"
	if !strings.Contains(got.WriteWarning, want) {
		t.Errorf("warning %q, want it to say %q", got.WriteWarning, want)
	}
	mu.Lock()
	defer mu.Unlock()
	for _, full := range []string{intercept.OpListSessionHosts, intercept.OpListSessionHostsPage, intercept.OpGetSessionHost} {
		if slices.Contains(ops, full) {
			t.Errorf("the change read hosts in full (%s); store calls %q, want the shared hosts alone", full, ops)
		}
	}
	if !slices.Contains(ops, intercept.OpListSharedHosts) {
		t.Errorf("store calls %q, want %s", ops, intercept.OpListSharedHosts)
	}
}
