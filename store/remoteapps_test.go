package store_test

import (
	"fmt"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/vdibroker/vdibroker"
	"github.com/vdibroker/vdibroker/store"
)

// TestHostRemoteAppsSurvives_RE12: whether a host can run RemoteApps, as
// its agent reports at registration and in heartbeats, is stored and read
// back by every read of hosts; an agent that says nothing (older) leaves
// it as it was, Unknown for a host that never said.
func TestHostRemoteAppsSurvives_RE12(t *testing.T) {
	each(t, func(t *testing.T, s *store.DB) {
		ctx := t.Context()
		mustPool(t, s, pool("pool1", vdibroker.Pooled))
		registerHosts(t, s, "pool1", "old") // says nothing
		no, yes := false, true
		if _, err := s.RegisterHost(ctx, "rt-pool1", &vdibroker.RegisterRequest{HostName: "xrdp", RemoteApps: &no}, "cred-xrdp", t0); err != nil {
			t.Fatal(err)
		}
		want := func(step, host, v string) {
			t.Helper()
			h, err := s.GetSessionHost(ctx, "pool1", host)
			if err != nil {
				t.Fatal(err)
			}
			byCred, err := s.HostByCredential(ctx, "cred-"+host)
			if err != nil {
				t.Fatal(err)
			}
			states, err := s.ListHostStates(ctx, "pool1")
			if err != nil {
				t.Fatal(err)
			}
			list, err := s.ListSessionHosts(ctx, "pool1")
			if err != nil {
				t.Fatal(err)
			}
			got := []string{h.RemoteApps, byCred.RemoteApps}
			for i := range list {
				if list[i].Name == host {
					got = append(got, list[i].RemoteApps, states[i].RemoteApps)
				}
			}
			for _, g := range got {
				if g != v {
					t.Fatalf("%s: %s remoteApps %q (get, by credential, list, states), want %s", step, host, got, v)
				}
			}
		}
		want("registered", "old", vdibroker.RemoteAppsUnknown)
		want("registered", "xrdp", vdibroker.RemoteAppsNo)

		beat := func(host string, said *bool, at time.Duration) string {
			t.Helper()
			res, err := s.ApplyHeartbeat(ctx, "pool1", host, &vdibroker.HeartbeatRequest{RemoteApps: said, CredentialHash: "cred-" + host}, t0.Add(at))
			if err != nil {
				t.Fatal(err)
			}
			return res.Host.RemoteApps
		}
		// The first heartbeat turns the power state Running (its own
		// UPDATE), the later ones go with the batch's (flushBeats): both
		// write the field.
		if got := beat("old", nil, time.Second); got != vdibroker.RemoteAppsUnknown {
			t.Errorf("old agent's heartbeat answered %q", got)
		}
		want("old agent's heartbeat", "old", vdibroker.RemoteAppsUnknown)
		if got := beat("old", &no, 2*time.Second); got != vdibroker.RemoteAppsNo {
			t.Errorf("updated agent's heartbeat answered %q", got)
		}
		want("updated agent's heartbeat (batched)", "old", vdibroker.RemoteAppsNo)
		beat("xrdp", &yes, time.Second)
		want("override to yes (own UPDATE)", "xrdp", vdibroker.RemoteAppsYes)
		beat("xrdp", nil, 2*time.Second)
		want("silent heartbeat keeps", "xrdp", vdibroker.RemoteAppsYes)

		// Re-keying with an agent that says nothing keeps it; one that says
		// changes it.
		if _, err := s.RegisterHost(ctx, "rt-pool1", &vdibroker.RegisterRequest{HostName: "xrdp", CurrentCredentialHash: "cred-xrdp"}, "cred-xrdp", t0.Add(time.Minute)); err != nil {
			t.Fatal(err)
		}
		want("re-keyed silently", "xrdp", vdibroker.RemoteAppsYes)
		if _, err := s.RegisterHost(ctx, "rt-pool1", &vdibroker.RegisterRequest{HostName: "xrdp", CurrentCredentialHash: "cred-xrdp", RemoteApps: &no}, "cred-xrdp", t0.Add(time.Minute)); err != nil {
			t.Fatal(err)
		}
		want("re-keyed saying no", "xrdp", vdibroker.RemoteAppsNo)
	})
}

// TestPoolsWithoutRemoteApps_RE12_RU5: of the pools asked about, those
// with hosts that all say they cannot run RemoteApps, and no other: a
// pool without hosts, one with a host that can or did not say (Unknown),
// and one that does not exist are not named (what a feed marks
// unavailable, R-U5).
func TestPoolsWithoutRemoteApps_RE12_RU5(t *testing.T) {
	each(t, func(t *testing.T, s *store.DB) {
		ctx := t.Context()
		no, yes := false, true
		for name, hosts := range map[string][]*bool{
			"empty":   nil,
			"xrdp":    {&no, &no},
			"xrdp1":   {&no},
			"unknown": {&no, nil},
			"mixed":   {&yes, &no},
			"windows": {&yes},
		} {
			mustPool(t, s, pool(name, vdibroker.Pooled))
			registerHosts(t, s, name)
			for i, said := range hosts {
				if _, err := s.RegisterHost(ctx, "rt-"+name, &vdibroker.RegisterRequest{HostName: fmt.Sprintf("%s-%d", name, i), RemoteApps: said},
					fmt.Sprintf("cred-%s-%d", name, i), t0); err != nil {
					t.Fatal(err)
				}
			}
		}
		got, err := s.PoolsWithoutRemoteApps(ctx, []string{"windows", "xrdp1", "empty", "unknown", "mixed", "xrdp", "missing", "xrdp%"})
		if err != nil || !slices.Equal(got, []string{"xrdp", "xrdp1"}) {
			t.Fatalf("pools without RemoteApps: %q %v, want xrdp and xrdp1", got, err)
		}
		if got, err := s.PoolsWithoutRemoteApps(ctx, []string{"windows", "empty"}); err != nil || len(got) != 0 {
			t.Fatalf("of pools that can or have no hosts: %q %v, want none", got, err)
		}
		if got, err := s.PoolsWithoutRemoteApps(ctx, nil); err != nil || len(got) != 0 {
			t.Fatalf("of no pools: %q %v", got, err)
		}
		// A host that comes to say it can takes its pool off the list.
		if _, err := s.ApplyHeartbeat(ctx, "xrdp1", "xrdp1-0", &vdibroker.HeartbeatRequest{RemoteApps: &yes, CredentialHash: "cred-xrdp1-0"}, t0.Add(time.Second)); err != nil {
			t.Fatal(err)
		}
		if got, err := s.PoolsWithoutRemoteApps(ctx, []string{"xrdp", "xrdp1"}); err != nil || !slices.Equal(got, []string{"xrdp"}) {
			t.Fatalf("after xrdp1-0 said yes: %q %v, want xrdp", got, err)
		}
	})
}

// TestPoolsWithoutRemoteAppsReadsOneHost_RE12_RU5: every portal page
// reads the feed, and with it PoolsWithoutRemoteApps of its pools. In a
// realistic store (twenty pools of 1,000 hosts) a pool whose hosts can
// run RemoteApps costs two probes of session_hosts' primary key, not a
// walk of its hosts: SQLite searches that key for both subqueries,
// PostgreSQL reads one host of it for each (EXPLAIN ANALYZE: no host
// passed over by the filter, no scan of the table; SQLite's plan cannot
// tell a count of them from an EXISTS, PostgreSQL's can). Only a pool
// whose hosts all say No is read to its end.
func TestPoolsWithoutRemoteAppsReadsOneHost_RE12_RU5(t *testing.T) {
	each(t, func(t *testing.T, s *store.DB) {
		ctx := t.Context()
		var names []string
		for i := range 20 {
			name := fmt.Sprintf("p%02d", i)
			mustPool(t, s, pool(name, vdibroker.Pooled))
			said := vdibroker.RemoteAppsYes
			if i == 1 {
				said = vdibroker.RemoteAppsNo
			}
			if err := s.FillHosts(ctx, name, 1000, said); err != nil {
				t.Fatal(err)
			}
			names = append(names, name)
		}
		if got, err := s.PoolsWithoutRemoteApps(ctx, names); err != nil || !slices.Equal(got, []string{"p01"}) {
			t.Fatalf("pools without RemoteApps: %q %v, want p01", got, err)
		}
		yes := slices.Delete(slices.Clone(names), 1, 2)
		p, err := s.PoolsWithoutRemoteAppsPlan(ctx, yes)
		if err != nil {
			t.Fatal(err)
		}
		// PostgreSQL: the hosts a read of session_hosts passed over are
		// under its node, before the next one.
		passed := false
		lines := strings.Split(p, "\n")
		for i, l := range lines {
			for j := i + 1; strings.Contains(l, "on session_hosts") && j < len(lines) && !strings.Contains(lines[j], "->") && !strings.Contains(lines[j], "SubPlan"); j++ {
				passed = passed || strings.Contains(lines[j], "Rows Removed by Filter")
			}
		}
		if passed || strings.Contains(p, "SCAN h") || strings.Contains(p, "Seq Scan on session_hosts") ||
			strings.Count(p, "sqlite_autoindex_session_hosts_2 (host_pool=?)")+strings.Count(p, "using session_hosts_pkey on session_hosts") != 2 {
			t.Errorf("the pools whose hosts can are not two probes of session_hosts' key each:\n%s", p)
		}
		t.Logf("plan:\n%s", p)
	})
}
