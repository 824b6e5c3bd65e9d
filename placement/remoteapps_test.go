package placement

import (
	"fmt"
	"testing"

	"github.com/google/go-cmp/cmp"
	"github.com/google/go-cmp/cmp/cmpopts"

	"github.com/vdibroker/vdibroker"
)

func noApps(h *Host) { h.NoRemoteApps = true }

// TestApplicationOnlyOnHostsThatRunIt_RE12: an application connect lands
// only on a host that can run RemoteApps, under every algorithm; a
// desktop connect and a host that said nothing (unknown) are unaffected;
// a pool with none refuses with RemoteAppUnsupported.
func TestApplicationOnlyOnHostsThatRunIt_RE12(t *testing.T) {
	algos := []Pool{
		pooled(vdibroker.BreadthFirst, 10), pooled(vdibroker.DepthFirst, 10), pooled(vdibroker.LoadIndex, 10),
		{Name: "pool1", HostPoolType: vdibroker.Personal, LoadBalancerType: vdibroker.Persistent, AssignmentType: vdibroker.Automatic, HeartbeatTimeoutSeconds: 90},
	}
	implementations(t, func(t *testing.T, newPlacer func(Pool, []Host, Options) Placer) {
		for _, pool := range algos {
			t.Run(pool.LoadBalancerType, func(t *testing.T) {
				// "linux" sorts first and has fewer sessions, so every
				// algorithm but DepthFirst would prefer it for a desktop;
				// DepthFirst prefers it by its 3 sessions against 2.
				linux := with(liveHost("a-linux", 0), noApps)
				win := liveHost("b-windows", 2)
				if pool.LoadBalancerType == vdibroker.DepthFirst {
					linux.Sessions = 3
				}
				for seed := range uint64(20) {
					p := newPlacer(pool, []Host{linux, win}, testOptions(seed))
					d := mustPlace(t, p, Request{User: "u", RemoteApp: true})
					if d.Host != "b-windows" {
						t.Fatalf("seed %d: application placed on %s, want b-windows", seed, d.Host)
					}
					if got := d.Explain.ExcludedCounts[ReasonNoRemoteApps]; got != 1 || len(d.Explain.Excluded) != 1 ||
						d.Explain.Excluded[0].Host != "a-linux" || d.Explain.Excluded[0].Reason != ReasonNoRemoteApps {
						t.Fatalf("seed %d: record excludes %+v (counts %v), want a-linux for %s", seed, d.Explain.Excluded, d.Explain.ExcludedCounts, ReasonNoRemoteApps)
					}
					// The same engine places a desktop on the Linux host
					// again: the exclusion was for that decision only.
					if d := mustPlace(t, p, Request{User: "v"}); d.Host != "a-linux" {
						t.Fatalf("seed %d: desktop placed on %s, want a-linux", seed, d.Host)
					}
				}
			})
		}
	})
}

func TestUnknownHostStillRunsApplications_RE12(t *testing.T) {
	implementations(t, func(t *testing.T, newPlacer func(Pool, []Host, Options) Placer) {
		// An older agent says nothing: NoRemoteApps false, placed as before.
		p := newPlacer(pooled(vdibroker.BreadthFirst, 10), []Host{liveHost("old", 0)}, testOptions(1))
		if d := mustPlace(t, p, Request{User: "u", RemoteApp: true}); d.Host != "old" {
			t.Fatalf("placed on %q, want old", d.Host)
		}
	})
}

func TestNoHostRunsApplications_RE12(t *testing.T) {
	implementations(t, func(t *testing.T, newPlacer func(Pool, []Host, Options) Placer) {
		for _, tc := range []struct {
			name  string
			hosts []Host
			code  string
		}{
			// Both Linux: refused as unsupported, not as no capacity.
			{"all cannot", []Host{with(liveHost("a", 0), noApps), with(with(liveHost("b", 0), noApps), drained)}, vdibroker.ERemoteAppUnsupported},
			// One host could but is silent: a wait helps, NoCapacity.
			{"the one that can is unavailable", []Host{with(liveHost("a", 0), noApps), with(liveHost("b", 0), silent)}, vdibroker.ENoCapacity},
		} {
			t.Run(tc.name, func(t *testing.T) {
				p := newPlacer(pooled(vdibroker.LoadIndex, 10), tc.hosts, testOptions(1))
				d, err := p.Place(Request{User: "u", RemoteApp: true})
				if got := vdibroker.ErrorCode(err); got != tc.code {
					t.Fatalf("code %q (%v), want %s", got, err, tc.code)
				}
				if d.Explain.ExcludedCounts[ReasonNoRemoteApps] != 1+btoi(tc.code == vdibroker.ERemoteAppUnsupported) {
					t.Errorf("record counts %v", d.Explain.ExcludedCounts)
				}
				// A desktop connect is unaffected.
				if _, err := p.Place(Request{User: "u"}); err != nil && tc.code == vdibroker.ERemoteAppUnsupported {
					t.Errorf("desktop connect refused: %v", err)
				}
			})
		}
	})
}

// TestApplicationNotAnsweredWithSessionOnLinuxHost_RE12: the user's open
// session (R-C1) on a host that cannot run RemoteApps is not answered to an
// application connect, nor ended.
func TestApplicationNotAnsweredWithSessionOnLinuxHost_RE12(t *testing.T) {
	implementations(t, func(t *testing.T, newPlacer func(Pool, []Host, Options) Placer) {
		hosts := []Host{with(liveHost("a", 1), noApps), liveHost("b", 0)}
		p := newPlacer(pooled(vdibroker.BreadthFirst, 10), hosts, testOptions(1))
		ex := &Existing{SessionID: "s1", Host: "a", State: vdibroker.StateActive}
		d, err := p.Place(Request{User: "u", RemoteApp: true, Existing: ex})
		if vdibroker.ErrorCode(err) != vdibroker.ERemoteAppUnsupported || d.Reconnect || d.EndExisting {
			t.Fatalf("got %+v, %v; want RemoteAppUnsupported, no reconnect, nothing ended", d, err)
		}
		if d := mustPlace(t, p, Request{User: "u", Existing: ex}); !d.Reconnect {
			t.Fatalf("desktop connect not answered with its session: %+v", d)
		}
	})
}

func btoi(b bool) int {
	if b {
		return 1
	}
	return 0
}

// TestNoHostRunsApplicationsRecord_RE12: in a pool of hosts that all
// cannot run RemoteApps (60 of them, more than ExplainLimit), the indexed
// engine's refusal and record are the reference's, for every pooled
// algorithm, and a desktop is still placed there afterwards.
func TestNoHostRunsApplicationsRecord_RE12(t *testing.T) {
	for _, algo := range []string{vdibroker.BreadthFirst, vdibroker.DepthFirst, vdibroker.LoadIndex} {
		t.Run(algo, func(t *testing.T) {
			var hosts []Host
			for i := range 60 {
				h := with(liveHost(fmt.Sprintf("lx-%02d", 59-i), i%3), noApps)
				if i%7 == 0 {
					drained(&h)
				}
				hosts = append(hosts, h)
			}
			fast, ref := New(pooled(algo, 10), hosts, testOptions(1)), NewReference(pooled(algo, 10), hosts, testOptions(1))
			req := Request{User: "u", RemoteApp: true}
			fd, ferr := fast.Place(req)
			rd, rerr := ref.Place(req)
			if diff := cmp.Diff(rd, fd, cmpopts.IgnoreUnexported(Decision{})); diff != "" {
				t.Fatalf("record differs (-reference +indexed):\n%s", diff)
			}
			if vdibroker.ErrorCode(ferr) != vdibroker.ERemoteAppUnsupported || fmt.Sprint(ferr) != fmt.Sprint(rerr) {
				t.Fatalf("errors: indexed %v, reference %v", ferr, rerr)
			}
			if len(fd.Explain.Excluded) != ExplainLimit || fd.Explain.Excluded[0].Host != "lx-00" || fd.Explain.Excluded[0].Detail == "" ||
				fd.Explain.ExcludedCounts[ReasonNoRemoteApps] != 60 {
				t.Errorf("record: %d excluded, first %+v, counts %v", len(fd.Explain.Excluded), fd.Explain.Excluded[0], fd.Explain.ExcludedCounts)
			}
			if _, err := fast.Place(Request{User: "u"}); err != nil {
				t.Errorf("desktop after the refusal: %v", err)
			}
		})
	}
}

// TestHostChangesItsRemoteAppsAnswer_RE12: a host whose agent changes its
// answer (an agent updated, or run with --remote-apps) is placed by its
// new answer at once: the last host of a pool that could run RemoteApps
// saying No makes an application connect refused, and one of a pool that
// could not saying Yes takes it; a host added or removed counts too.
func TestHostChangesItsRemoteAppsAnswer_RE12(t *testing.T) {
	implementations(t, func(t *testing.T, newPlacer func(Pool, []Host, Options) Placer) {
		for _, algo := range []string{vdibroker.BreadthFirst, vdibroker.DepthFirst, vdibroker.LoadIndex} {
			t.Run(algo, func(t *testing.T) {
				app := Request{User: "u", RemoteApp: true}
				p := newPlacer(pooled(algo, 10), []Host{with(liveHost("a", 0), noApps), liveHost("b", 0)}, testOptions(1))
				if d := mustPlace(t, p, app); d.Host != "b" {
					t.Fatalf("placed on %s, want b", d.Host)
				}
				p.Upsert(with(liveHost("b", 0), noApps))
				if _, err := p.Place(app); vdibroker.ErrorCode(err) != vdibroker.ERemoteAppUnsupported {
					t.Fatalf("after b said No: %v, want RemoteAppUnsupported", err)
				}
				p.Upsert(liveHost("a", 0))
				if d := mustPlace(t, p, app); d.Host != "a" {
					t.Fatalf("after a said Yes: placed on %s, want a", d.Host)
				}
				p.Remove("a")
				if _, err := p.Place(app); vdibroker.ErrorCode(err) != vdibroker.ERemoteAppUnsupported {
					t.Fatalf("after a was removed: %v, want RemoteAppUnsupported", err)
				}
				p.Upsert(liveHost("c", 0))
				if d := mustPlace(t, p, app); d.Host != "c" {
					t.Fatalf("after c was added: placed on %s, want c", d.Host)
				}
				// A desktop still goes to either.
				if d := mustPlace(t, p, Request{User: "v"}); d.Host != "b" && d.Host != "c" {
					t.Fatalf("desktop placed on %s", d.Host)
				}
			})
		}
	})
}
