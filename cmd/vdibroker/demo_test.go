package main

import (
	"bytes"
	"context"
	"fmt"
	"io"
	"math/rand/v2"
	"net/http"
	"strings"
	"testing"
	"time"

	"github.com/vdibroker/vdibroker"
	"github.com/vdibroker/vdibroker/demo"
	vhttp "github.com/vdibroker/vdibroker/http"
)

// startDemo runs the demo in-process on 127.0.0.1:0 with a temp data dir,
// fast agents and fast hosts, the autoscaler evaluating every autoscale
// (0: off), and closes it when the test ends.
func startDemo(t *testing.T, autoscale ...time.Duration) *Demo {
	t.Helper()
	d := &Demo{
		Main: &Main{Listen: "127.0.0.1:0", DataDir: t.TempDir()},
		Fleet: &demo.Fleet{
			Rand:            rand.New(rand.NewPCG(1, 2)),
			Heartbeat:       100 * time.Millisecond,
			UserTick:        50 * time.Millisecond,
			PowerStartDelay: 200 * time.Millisecond,
		},
	}
	if len(autoscale) > 0 {
		d.Main.AutoscaleInterval = autoscale[0]
	}
	if err := d.Start(t.Context()); err != nil {
		t.Fatalf("start demo: %v", err)
	}
	t.Cleanup(func() {
		if err := d.Close(); err != nil {
			t.Errorf("close demo: %v", err)
		}
	})
	return d
}

// TestDemoSmoke: right after Start every pool has Available hosts and the
// first wave of users has sessions; soon the agents report them Active
// (R-S2); the console and /metrics answer.
func TestDemoSmoke(t *testing.T) {
	t.Setenv("VDIBROKER_ADMIN_TOKEN", "demo-test-admin")
	d := startDemo(t)
	if d.Main.AdminToken != "demo-test-admin" {
		t.Fatalf("admin token %q, want VDIBROKER_ADMIN_TOKEN", d.Main.AdminToken)
	}
	ctx := context.Background()
	c := vhttp.NewClient(d.Main.URL(), "demo-test-admin")

	pools, err := c.ListHostPools(ctx)
	if err != nil {
		t.Fatal(err)
	}
	types := map[string]bool{}
	totalHosts, totalSessions := 0, 0
	for _, p := range pools {
		types[p.LoadBalancerType] = true
		hosts, err := c.ListSessionHosts(ctx, p.Name)
		if err != nil {
			t.Fatal(err)
		}
		available := 0
		for _, h := range hosts {
			if vdibroker.Placeable(h.Status) {
				available++
			}
			totalSessions += h.Sessions
		}
		totalHosts += len(hosts)
		if available == 0 {
			t.Errorf("pool %s: no Available host of %d", p.Name, len(hosts))
		}
	}
	if len(pools) != 3 || !types[vdibroker.BreadthFirst] || !types[vdibroker.DepthFirst] || !types[vdibroker.LoadIndex] {
		t.Errorf("pools %d with types %v, want BreadthFirst, DepthFirst and LoadIndex", len(pools), types)
	}
	if totalHosts < 18 || totalSessions == 0 {
		t.Errorf("%d hosts and %d sessions, want about twenty hosts and some sessions", totalHosts, totalSessions)
	}

	// The simulated agents turn the first wave Active on their next
	// heartbeat (R-S2). Wait for it (the test fails only if it never comes).
	deadline := time.Now().Add(30 * time.Second)
	for {
		active := 0
		for _, p := range pools {
			ss, err := c.ListUserSessions(ctx, p.Name, vhttp.SessionQuery{State: vdibroker.StateActive})
			if err != nil {
				t.Fatal(err)
			}
			active += len(ss)
		}
		if active > 0 {
			break
		}
		if time.Now().After(deadline) {
			t.Fatal("no session became Active: the simulated agents do not report their users")
		}
		time.Sleep(100 * time.Millisecond)
	}

	// The demo user's token shows them every pool's desktop in the user
	// portal's feed (R-U5), and nothing else.
	feed, err := vhttp.NewClient(d.Main.URL(), d.UserToken).Feed(ctx)
	if err != nil {
		t.Fatal(err)
	}
	var desktops []string
	for _, r := range feed.Resources {
		if r.Kind == vdibroker.FeedDesktop {
			desktops = append(desktops, r.HostPool)
		}
	}
	if feed.User != DemoUser || len(desktops) != 3 || len(feed.Resources) != 3 {
		t.Errorf("the demo user's feed: %+v; want %s with the three pools' desktops", feed, DemoUser)
	}

	// The console is mounted at "/" (sign-in first) and /metrics serves the
	// store gauges.
	noRedirect := &http.Client{CheckRedirect: func(*http.Request, []*http.Request) error { return http.ErrUseLastResponse }}
	resp, err := noRedirect.Get(d.Main.URL() + "/")
	if err != nil {
		t.Fatal(err)
	}
	resp.Body.Close()
	if resp.StatusCode != http.StatusSeeOther || !strings.HasPrefix(resp.Header.Get("Location"), "/signin") {
		t.Errorf("GET /: HTTP %d to %q, want the sign-in page", resp.StatusCode, resp.Header.Get("Location"))
	}
	resp, err = http.Get(d.Main.URL() + "/metrics")
	if err != nil {
		t.Fatal(err)
	}
	body, _ := io.ReadAll(resp.Body)
	resp.Body.Close()
	for _, want := range []string{`vdibroker_hosts{pool="dev-depth",status="Available"}`, `vdibroker_sessions{pool="office-breadth",state="Active"}`, "go_goroutines"} {
		if !bytes.Contains(body, []byte(want)) {
			t.Errorf("/metrics lacks %s", want)
		}
	}
}

func TestDemoBanner(t *testing.T) {
	t.Setenv("VDIBROKER_ADMIN_TOKEN", "banner-token")
	d := startDemo(t)
	var out bytes.Buffer
	printDemoBanner(&out, d)
	for _, want := range []string{d.Main.URL() + "/", "banner-token", d.Main.URL() + "/portal/", d.UserToken, DemoUser, "/metrics", "/pools/office-breadth/autoscale", "Ctrl-C"} {
		if !strings.Contains(out.String(), want) {
			t.Errorf("banner lacks %q:\n%s", want, out.String())
		}
	}
}

// TestDemoAutoscale: the demo's office pool is under a scaling plan at
// work: with the autoscaler on, an evaluation in ramp-up starts one of
// the powered-off hosts through the simulated power driver, saying why,
// and the host comes up (its agent heartbeats: Available, Running).
func TestDemoAutoscale(t *testing.T) {
	t.Setenv("VDIBROKER_ADMIN_TOKEN", "demo-autoscale-admin")
	d := startDemo(t, 200*time.Millisecond)
	ctx := t.Context()
	c := vhttp.NewClient(d.Main.URL(), "demo-autoscale-admin")
	var started string
	deadline := time.Now().Add(60 * time.Second)
	for started == "" {
		evs, err := c.AutoscaleEvaluations(ctx, "office-breadth", 100)
		if err != nil {
			t.Fatal(err)
		}
		for _, e := range evs {
			if e.Phase != vdibroker.PhaseRampUp || e.Plan != demo.AutoscalePlan {
				t.Fatalf("evaluation in %s of plan %q, want ramp-up of %s", e.Phase, e.Plan, demo.AutoscalePlan)
			}
			for _, a := range e.Actions {
				if a.Action == vdibroker.ActionStart && a.Error == "" && a.Reason != "" {
					started = a.Host
				}
			}
		}
		if time.Now().After(deadline) {
			last := "none"
			if len(evs) > 0 {
				last = fmt.Sprintf("%+v", *evs[0])
			}
			t.Fatalf("no host started by the autoscaler within a minute; the last evaluation: %s", last)
		}
		time.Sleep(100 * time.Millisecond)
	}
	for deadline := time.Now().Add(30 * time.Second); ; time.Sleep(100 * time.Millisecond) {
		h, err := c.GetSessionHost(ctx, "office-breadth", started)
		if err != nil {
			t.Fatal(err)
		}
		if h.Status == vdibroker.StatusAvailable && h.PowerState == vdibroker.PowerRunning {
			break
		}
		if time.Now().After(deadline) {
			t.Fatalf("%s, started by the autoscaler, is %s, power %s; want Available, Running", started, h.Status, h.PowerState)
		}
	}
}
