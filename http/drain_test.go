package http_test

import (
	"context"
	"testing"
	"time"

	"github.com/vdibroker/vdibroker"
	vhttp "github.com/vdibroker/vdibroker/http"
)

// TestDrainRecordsWhoAndWhen: a PATCH that drains a host records the
// caller's subject and the time; reads of the host and of the pool's hosts
// show them; an address change keeps them; undraining clears them; and a
// host deleted and made again under the same name does not inherit them.
func TestDrainRecordsWhoAndWhen(t *testing.T) { testDrainRecords(t, envOptions{}) }

// TestDrainRecordsWhoAndWhen_Postgres is the same on PostgreSQL (its own
// schema, migration 00010 of the postgres dialect).
func TestDrainRecordsWhoAndWhen_Postgres(t *testing.T) {
	testDrainRecords(t, envOptions{dsn: postgresDSN(t)})
}

func testDrainRecords(t *testing.T, o envOptions) {
	e := newEnvWith(t, o)
	ctx := context.Background()
	pool := uniq("drain")
	e.pool(pool, nil)
	hosts := e.addHosts(pool, "dr", 2)
	ops, err := e.admin.CreateToken(ctx, vhttp.TokenRequest{Role: vdibroker.RoleContributor, Subject: "ops-bob"})
	if err != nil {
		t.Fatal(err)
	}
	bob := e.client(0, ops.Secret)

	before := e.clock.Now().Add(-time.Second)
	h, err := bob.UpdateSessionHost(ctx, pool, hosts[0], map[string]any{"allowNewSession": false})
	if err != nil {
		t.Fatal(err)
	}
	if h.DrainedBy != "ops-bob" || h.DrainTime == nil || h.DrainTime.Before(before) {
		t.Fatalf("after drain: drainedBy %q drainTime %v, want ops-bob after %v", h.DrainedBy, h.DrainTime, before)
	}
	drainedAt := *h.DrainTime

	// The admin changes the address: still drained by bob, at the same time.
	if _, err := e.admin.UpdateSessionHost(ctx, pool, hosts[0], map[string]any{"address": "new.example.test:3389"}); err != nil {
		t.Fatal(err)
	}
	list, err := e.admin.ListSessionHosts(ctx, pool)
	if err != nil {
		t.Fatal(err)
	}
	if got := list[0]; got.DrainedBy != "ops-bob" || got.DrainTime == nil || !got.DrainTime.Equal(drainedAt) {
		t.Errorf("list after address change: drainedBy %q drainTime %v, want ops-bob at %v", got.DrainedBy, got.DrainTime, drainedAt)
	}
	if got := list[1]; got.DrainedBy != "" || got.DrainTime != nil {
		t.Errorf("undrained host shows drainedBy %q drainTime %v", got.DrainedBy, got.DrainTime)
	}

	// Draining again while drained is no new drain: bob stays the author.
	if _, err := e.admin.UpdateSessionHost(ctx, pool, hosts[0], map[string]any{"allowNewSession": false}); err != nil {
		t.Fatal(err)
	}
	if h, _ := e.admin.GetSessionHost(ctx, pool, hosts[0]); h.DrainedBy != "ops-bob" {
		t.Errorf("a second drain by admin changed drainedBy to %q", h.DrainedBy)
	}

	// Undrain clears it; a new drain by the admin token records "admin".
	if _, err := e.admin.UpdateSessionHost(ctx, pool, hosts[0], map[string]any{"allowNewSession": true}); err != nil {
		t.Fatal(err)
	}
	if h, _ := e.admin.GetSessionHost(ctx, pool, hosts[0]); h.DrainedBy != "" || h.DrainTime != nil {
		t.Errorf("after undrain: drainedBy %q drainTime %v", h.DrainedBy, h.DrainTime)
	}
	if h, err := e.admin.UpdateSessionHost(ctx, pool, hosts[1], map[string]any{"allowNewSession": false}); err != nil || h.DrainedBy != "admin" {
		t.Fatalf("admin drain: %v, drainedBy %q", err, h.DrainedBy)
	}

	// Delete the drained host and make it again, drained by PUT: no author.
	if err := e.admin.DeleteSessionHost(ctx, pool, hosts[1], true); err != nil {
		t.Fatal(err)
	}
	e.clock.Advance(time.Millisecond)
	allow := false
	h, err = e.admin.PutSessionHost(ctx, pool, hosts[1], vhttp.SessionHostRequest{AllowNewSession: &allow})
	if err != nil {
		t.Fatal(err)
	}
	if h.DrainedBy != "" || h.DrainTime != nil {
		t.Errorf("re-created host inherited drainedBy %q drainTime %v", h.DrainedBy, h.DrainTime)
	}
}
