package http_test

import (
	"context"
	"fmt"
	"strings"
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

// TestDrainHostWithLegacyAssignedUsers_RPE3: a host lists at most
// MaxAssignedUsers (1,000) assignedUsers, but an older release stored
// longer lists (on SQLite). Such a host can still be written, drained
// above all (an emergency), as long as its list does not grow: a write
// that keeps or shortens it is accepted, by PATCH and by PUT, and one
// that lengthens it past the bound is 400 naming assignedUsers and the
// range, and changes nothing. A shortened list cannot grow back, and a
// new host's list is bounded as ever.
func TestDrainHostWithLegacyAssignedUsers_RPE3(t *testing.T) {
	testLegacyAssignedUsers(t, envOptions{})
}

// TestDrainHostWithLegacyAssignedUsers_RPE3_Postgres is the same on
// PostgreSQL, which stores a list of any length since 00076.
func TestDrainHostWithLegacyAssignedUsers_RPE3_Postgres(t *testing.T) {
	testLegacyAssignedUsers(t, envOptions{dsn: postgresDSN(t)})
}

func testLegacyAssignedUsers(t *testing.T, o envOptions) {
	e := newEnvWith(t, o)
	ctx := context.Background()
	pool := uniq("legacy")
	e.pool(pool, map[string]any{"hostPoolType": "Personal", "loadBalancerType": "MultiplePersistent", "personalDesktopAssignmentType": "Direct"})
	users := func(n int) []string {
		u := make([]string, n)
		for i := range u {
			u[i] = fmt.Sprintf("user%04d", i)
		}
		return u
	}
	// As an older release wrote it: straight into the store, past the
	// bound the API checks.
	const host = "legacy01"
	if _, err := e.store.PutSessionHost(ctx, &vdibroker.SessionHost{HostPool: pool, Name: host, Address: host + ":3389",
		Protocols: []string{"RDP"}, StandardFeatures: true, AllowNewSession: true, AssignedUsers: users(1200), CreateTime: e.clock.Now()}); err != nil {
		t.Fatal(err)
	}
	stored := func(want int, allowNew bool) {
		t.Helper()
		h, err := e.admin.GetSessionHost(ctx, pool, host)
		if err != nil || len(h.AssignedUsers) != want || h.AllowNewSession != allowNew {
			t.Fatalf("stored host: %v; want %d assigned users and allowNewSession %v", err, want, allowNew)
		}
	}
	refused := func(err error, got, has int) {
		t.Helper()
		ve := wantCode(t, err, vdibroker.EInvalid, fmt.Sprintf("0..%d users, got %d", vdibroker.MaxAssignedUsers, got), fmt.Sprintf("the host has %d", has))
		if ve.Field != "assignedUsers" {
			t.Errorf("refused naming %q, want assignedUsers", ve.Field)
		}
	}

	h, err := e.admin.PatchSessionHost(ctx, pool, host, map[string]any{"allowNewSession": false})
	if err != nil {
		t.Fatalf("drain of a host with 1200 assigned users: %v; want it drained", err)
	}
	if h.AllowNewSession || len(h.AssignedUsers) != 1200 || h.DrainedBy == "" {
		t.Errorf("after the drain: allowNewSession %v, %d assigned users, drained by %q", h.AllowNewSession, len(h.AssignedUsers), h.DrainedBy)
	}

	// One more user: the list grows past the bound.
	_, err = e.admin.PatchSessionHost(ctx, pool, host, map[string]any{"assignedUsers": users(1201)})
	refused(err, 1201, 1200)
	more := users(1201)
	_, err = e.admin.PutSessionHost(ctx, pool, host, vhttp.SessionHostRequest{AssignedUsers: &more})
	refused(err, 1201, 1200)
	stored(1200, false)

	h, err = e.admin.PatchSessionHost(ctx, pool, host, map[string]any{"assignedUsers": users(1100)})
	if err != nil || len(h.AssignedUsers) != 1100 {
		t.Fatalf("shrinking the list to 1100: %v", err)
	}
	// A PUT that keeps the list as it is stored (and undrains).
	same := users(1100)
	if h, err = e.admin.PutSessionHost(ctx, pool, host, vhttp.SessionHostRequest{AssignedUsers: &same}); err != nil || len(h.AssignedUsers) != 1100 {
		t.Fatalf("a PUT of the stored 1100: %v", err)
	}
	// Shortened, it does not grow back.
	_, err = e.admin.PatchSessionHost(ctx, pool, host, map[string]any{"assignedUsers": users(1101)})
	refused(err, 1101, 1100)
	stored(1100, true)

	// A new host's list is bounded as ever.
	over := users(vdibroker.MaxAssignedUsers + 1)
	_, err = e.admin.PutSessionHost(ctx, pool, "new01", vhttp.SessionHostRequest{AssignedUsers: &over})
	if ve := wantCode(t, err, vdibroker.EInvalid, fmt.Sprintf("0..%d users, got %d", vdibroker.MaxAssignedUsers, len(over))); ve.Field != "assignedUsers" || strings.Contains(ve.Message, "older release") {
		t.Errorf("a new host with %d users: %v", len(over), ve)
	}
}

// TestDrainHostStoredUnderLooserRules_RPE1: a PATCH is checked on the
// fields it sets. A host an older release stored with two users on a
// Persistent desktop, named twice in two cases, is drained (an
// emergency) and undrained; a PATCH that sets the same list is refused
// as any new list would be, and one that sets a valid list is taken.
func TestDrainHostStoredUnderLooserRules_RPE1(t *testing.T) {
	e := newEnvWith(t, envOptions{})
	ctx := context.Background()
	pool := uniq("looser")
	e.pool(pool, map[string]any{"hostPoolType": "Personal", "loadBalancerType": "Persistent", "personalDesktopAssignmentType": "Direct"})
	const host = "looser01"
	if _, err := e.store.PutSessionHost(ctx, &vdibroker.SessionHost{HostPool: pool, Name: host, Address: host + ":3389",
		Protocols: []string{"RDP"}, StandardFeatures: true, AllowNewSession: true, AssignedUsers: []string{"alice", "ALICE"}, CreateTime: e.clock.Now()}); err != nil {
		t.Fatal(err)
	}
	// What a PATCH sets is still checked: a drain with a bad address,
	// or with a list of two users, is 400 and drains nothing.
	for _, c := range []struct {
		patch map[string]any
		field string
	}{
		{map[string]any{"allowNewSession": false, "address": "nohostport"}, "address"},
		{map[string]any{"allowNewSession": false, "assignedUsers": []string{"alice", "bob"}}, "assignedUsers"},
	} {
		_, err := e.admin.PatchSessionHost(ctx, pool, host, c.patch)
		if ve := wantCode(t, err, vdibroker.EInvalid); ve.Field != c.field {
			t.Errorf("PATCH %v: refused naming %q, want %s", c.patch, ve.Field, c.field)
		}
		if h, err := e.admin.GetSessionHost(ctx, pool, host); err != nil || !h.AllowNewSession || h.Address != host+":3389" || len(h.AssignedUsers) != 2 {
			t.Errorf("after the refused PATCH %v: %v, %+v; want the host as stored", c.patch, err, h)
		}
	}
	h, err := e.admin.PatchSessionHost(ctx, pool, host, map[string]any{"allowNewSession": false})
	if err != nil {
		t.Fatalf("drain of a host stored with two users on a Persistent desktop: %v; want it drained", err)
	}
	if h.AllowNewSession || len(h.AssignedUsers) != 2 {
		t.Errorf("after the drain: allowNewSession %v, assigned %q", h.AllowNewSession, h.AssignedUsers)
	}
	if _, err := e.admin.PatchSessionHost(ctx, pool, host, map[string]any{"standardFeatures": false, "allowNewSession": true}); err != nil {
		t.Fatalf("undrain: %v", err)
	}
	_, err = e.admin.PatchSessionHost(ctx, pool, host, map[string]any{"assignedUsers": []string{"alice", "ALICE"}})
	if ve := wantCode(t, err, vdibroker.EInvalid, "assignedUsers"); ve.Field != "assignedUsers" {
		t.Errorf("setting the stored list again: refused naming %q, want assignedUsers", ve.Field)
	}
	h, err = e.admin.PatchSessionHost(ctx, pool, host, map[string]any{"assignedUsers": []string{"alice"}})
	if err != nil || len(h.AssignedUsers) != 1 || !h.AllowNewSession || h.StandardFeatures {
		t.Fatalf("setting one user: %v, %+v", err, h)
	}
}
