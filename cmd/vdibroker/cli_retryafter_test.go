package main

import (
	"io"
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"
	"time"

	"github.com/vdibroker/vdibroker"
	vhttp "github.com/vdibroker/vdibroker/http"
	"github.com/vdibroker/vdibroker/power"
)

// TestCLIRetryAfter_RSEC: a broker on loopback whose rate limits (R-SEC)
// are used up answers 429 with Retry-After, and the CLI's error line
// says when to try again, in whole seconds: an end user's writes (30 at
// once, then one every 2 s: Retry-After 2) and an address's failed
// tokens (5 a second: Retry-After 1). The CLI sends the refused request
// once and does not retry on its own; with -o json the line is on stderr
// as every error is, and stdout stays empty. The broker's clock is
// frozen: its buckets refill by the test's clock alone.
func TestCLIRetryAfter_RSEC(t *testing.T) {
	frozen := time.Now()
	m := &Main{Listen: "127.0.0.1:0", DataDir: t.TempDir(), ServerNow: func() time.Time { return frozen }}
	if err := m.Open(t.Context()); err != nil {
		t.Fatalf("start broker: %v", err)
	}
	t.Cleanup(func() { m.Close() })
	b := &cliBroker{tb: t, m: m}
	b.ok("hostpool", "create", "--name", "office")
	b.addHost("office", "office-01")
	b.ok("applicationgroup", "create", "--name", "office-dag", "--host-pool", "office", "--application-group-type", "Desktop", "--users", "carol@contoso.com")
	carol := strings.TrimSpace(b.ok("token", "create", "--role", "User", "--subject", "carol@contoso.com", "--query", "token", "-o", "tsv"))

	// Her budget spent by dry runs (they decide, so they count).
	c := vhttp.NewClient(m.URL(), carol)
	for i := range vhttp.UserWriteBurst {
		if _, err := c.Connect(t.Context(), "office", vhttp.ConnectRequest{User: "carol@contoso.com", DryRun: true}); err != nil {
			t.Fatalf("dry run %d of %d: %v", i+1, vhttp.UserWriteBurst, err)
		}
	}
	// The address's failed authentications spent.
	forged := vhttp.NewClient(m.URL(), "vdbt_forged")
	var err error
	for range vhttp.AuthFailureBurst + 10 {
		if _, err = forged.ListHostPools(t.Context()); vdibroker.ErrorCode(err) != vdibroker.EUnauthenticated {
			break
		}
	}
	if vdibroker.ErrorCode(err) != vdibroker.ETooManyRequests {
		t.Fatalf("forged tokens past the bound: %v, want TooManyRequests", err)
	}

	connect := []string{"connect", "--host-pool", "office", "--dry-run", "--server", m.URL(), "--token", carol}
	list := []string{"hostpool", "list", "--server", m.URL(), "--token", "vdbt_forged"}
	const writes = "error: this end user makes changes faster than a person does (30 at once, then one every 2 s); slow down (try again in 2 s)\n"
	const tokens = "error: too many failed authentications from this address; slow down (try again in 1 s)\n"
	for _, tc := range []struct {
		name string
		args []string
		want string
	}{
		{"her connect past her writes", connect, writes},
		{"as json", append(connect, "-o", "json"), writes},
		{"a forged token past the address's failures", list, tokens},
		{"as json", append(list, "-o", "json"), tokens},
	} {
		t.Run(tc.name, func(t *testing.T) {
			r := runCLI(t, tc.args...)
			if r.code != 1 || r.stdout != "" || r.stderr != tc.want {
				t.Errorf("exit %d, stdout %q, stderr %q; want exit 1, nothing on stdout, stderr %q", r.code, r.stdout, r.stderr, tc.want)
			}
		})
	}
}

// TestCLIRetryAfter_HostStarting_RA4: a connect that starts a stopped
// host (start VM on connect, R-A4) is answered 503 HostStarting with
// Retry-After 30, and the CLI's line says the wait once, in the form
// every other answer with a Retry-After ends with: the broker's message
// says what happens (the pool, the host starting), its Retry-After when
// to try again. A script matches " (try again in N s)" at the end of
// any such line, a host starting or a rate limit.
func TestCLIRetryAfter_HostStarting_RA4(t *testing.T) {
	m := &Main{Listen: "127.0.0.1:0", DataDir: t.TempDir(), PowerDrivers: power.Set{"sim": &power.Simulated{}}}
	if err := m.Open(t.Context()); err != nil {
		t.Fatalf("start broker: %v", err)
	}
	t.Cleanup(func() { m.Close() })
	b := &cliBroker{tb: t, m: m}
	b.ok("hostpool", "create", "--name", "cold", "--power-driver", "sim", "--start-vm-on-connect", "true", "--max-session-limit", "1")
	// Registered, its agent not heard from yet: stopped, it is started
	// on connect and takes sessions once its agent heartbeats.
	token := strings.TrimSpace(b.ok("registration-token", "create", "--host-pool", "cold", "--expires", "1h", "--query", "token", "-o", "tsv"))
	if _, err := vhttp.NewClient(m.URL(), "").Register(t.Context(), &vdibroker.RegisterRequest{Token: token, HostName: "cold-01", Address: "127.0.0.1:3389"}); err != nil {
		t.Fatal(err)
	}
	b.ok("sessionhost", "stop", "--host-pool", "cold", "--name", "cold-01")

	const want = `error: host pool "cold" has no capacity now; session host "cold-01" is starting (try again in 30 s)` + "\n"
	for _, tc := range []struct {
		name string
		args []string
	}{
		// The first starts cold-01; the second, by then, is told to
		// wait for it (room for one user per host: maxSessionLimit 1).
		{"the connect that starts it", []string{"connect", "--host-pool", "cold", "--user", "alice@contoso.com"}},
		{"as json, while it starts", []string{"connect", "--host-pool", "cold", "--user", "alice@contoso.com", "-o", "json"}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			r := b.cli(tc.args...)
			if r.code != 1 || r.stdout != "" || r.stderr != want {
				t.Errorf("exit %d, stdout %q, stderr %q; want exit 1, nothing on stdout, stderr %q", r.code, r.stdout, r.stderr, want)
			}
		})
	}
}

// TestCLIRetryAfter_OtherAnswers_RSEC: the suffix is the CLI's, from the
// Retry-After alone, for any 429 or 503 that has one, whatever the
// message says (a server on loopback answering as a broker would, or as
// a proxy): a 503 StoreUnavailable (R-OUT) and a proxy's bare 503 get
// it; a 503 without Retry-After, or with a date, does not.
func TestCLIRetryAfter_OtherAnswers_RSEC(t *testing.T) {
	for _, tc := range []struct {
		name, retryAfter, body, want string
	}{
		{"a broker's database away", "5",
			`{"error":{"code":"StoreUnavailable","message":"the broker cannot reach its database right now"}}`,
			"error: the broker cannot reach its database right now (try again in 5 s)\n"},
		{"a proxy's 503", "120", "upstream busy",
			"error: HTTP 503: upstream busy (try again in 120 s)\n"},
		{"no Retry-After", "",
			`{"error":{"code":"NoCapacity","message":"host pool \"office\" has no capacity"}}`,
			"error: host pool \"office\" has no capacity\n"},
		{"a date, not repeated", "Wed, 21 Oct 2015 07:28:00 GMT",
			`{"error":{"code":"StoreUnavailable","message":"the broker cannot reach its database right now"}}`,
			"error: the broker cannot reach its database right now\n"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
				if tc.retryAfter != "" {
					w.Header().Set("Retry-After", tc.retryAfter)
				}
				w.WriteHeader(http.StatusServiceUnavailable)
				io.WriteString(w, tc.body)
			}))
			t.Cleanup(srv.Close)
			r := runCLI(t, "hostpool", "list", "--server", srv.URL, "--token", "vdb_any")
			if r.code != 1 || r.stdout != "" || r.stderr != tc.want {
				t.Errorf("exit %d, stdout %q, stderr %q; want exit 1, nothing on stdout, stderr %q", r.code, r.stdout, r.stderr, tc.want)
			}
		})
	}
}

// TestCLIDesktopNeedsAdministrator_RA4: alice's own desktop in a Personal
// pool (start VM on connect, heartbeat timeout 90 s) was started 9
// minutes ago and its agent now says its machine shuts down: once it is
// down (90 s of silence) its start will have timed out, and no connect
// of hers starts it again (R-A4). A reboot says the same and is back by
// then, so her `vdibroker connect`, on a broker on loopback, says what
// happens if it does not come back and ends with " (try again in 30 s)":
// the Retry-After until it is down (90 or 91 s) is at most 30 s. Bob's own desktop, whose start timed out without its agent
// reporting: his connect says that it needs an administrator, in the
// line itself, and does not tell him to try again.
func TestCLIDesktopNeedsAdministrator_RA4(t *testing.T) {
	m := &Main{Listen: "127.0.0.1:0", DataDir: t.TempDir(), PowerDrivers: power.Set{"sim": &power.Simulated{}}}
	if err := m.Open(t.Context()); err != nil {
		t.Fatalf("start broker: %v", err)
	}
	t.Cleanup(func() { m.Close() })
	b := &cliBroker{tb: t, m: m}
	b.ok("hostpool", "create", "--name", "mine", "--host-pool-type", "Personal", "--personal-desktop-assignment-type", "Automatic",
		"--power-driver", "sim", "--start-vm-on-connect", "true", "--heartbeat-timeout-seconds", "90")
	cred := b.addHost("mine", "mine-01")
	b.ok("sessionhost", "update", "--host-pool", "mine", "--name", "mine-01", "--assigned-user", "alice@contoso.com")
	// Its start, 9 minutes ago (the broker's clock is the real one): as
	// start VM on connect records it, then its agent says it shuts down.
	if _, _, err := m.Store.SetPowerState(t.Context(), "mine", "mine-01", vdibroker.PowerStarting, time.Now().Add(-vdibroker.HostStartTimeout+time.Minute)); err != nil {
		t.Fatal(err)
	}
	if _, err := vhttp.NewClient(m.URL(), "").Heartbeat(t.Context(), cred, &vdibroker.HeartbeatRequest{ShuttingDown: true}); err != nil {
		t.Fatal(err)
	}
	r := b.cli("connect", "--host-pool", "mine", "--user", "alice@contoso.com")
	const unless = "unless it comes back by itself (a reboot), it is down from "
	if r.code != 1 || r.stdout != "" || !strings.HasPrefix(r.stderr, `error: session host "mine-01", assigned to alice@contoso.com, is shutting down: `) ||
		!strings.Contains(r.stderr, unless) || !strings.HasSuffix(r.stderr, " (try again in 30 s)\n") {
		t.Errorf("exit %d, stdout %q, stderr %q; want exit 1 and a line saying %q, ending with the wait, at most 30 s", r.code, r.stdout, r.stderr, unless)
	}
	// Bob's, started 11 minutes ago, whose agent never reported: its
	// start timed out, for an administrator.
	if _, err := m.Store.PutSessionHost(t.Context(), &vdibroker.SessionHost{HostPool: "mine", Name: "mine-02", Address: "mine-02.contoso.test:3389",
		Protocols: []string{"RDP"}, AllowNewSession: true, AssignedUsers: []string{"bob@contoso.com"}, CreateTime: time.Now().UTC()}); err != nil {
		t.Fatal(err)
	}
	if _, _, err := m.Store.SetPowerState(t.Context(), "mine", "mine-02", vdibroker.PowerStarting, time.Now().Add(-vdibroker.HostStartTimeout-time.Minute)); err != nil {
		t.Fatal(err)
	}
	r = b.cli("connect", "--host-pool", "mine", "--user", "bob@contoso.com")
	const want = "its agent has not reported since; an administrator can start it again (vdibroker sessionhost start)"
	if r.code != 1 || r.stdout != "" || !strings.Contains(r.stderr, want) || strings.Contains(r.stderr, "try again") {
		t.Errorf("exit %d, stdout %q, stderr %q; want exit 1 and a line saying %q, not to try again", r.code, r.stdout, r.stderr, want)
	}
}
