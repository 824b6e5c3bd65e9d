package main

import (
	"strings"
	"testing"
	"time"

	"github.com/vdibroker/vdibroker"
	vhttp "github.com/vdibroker/vdibroker/http"
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
	const writes = "error: this end user makes changes faster than a person does (30 at once, then one every 2 s); slow down and try again (try again in 2 s)\n"
	const tokens = "error: too many failed authentications from this address; slow down and try again (try again in 1 s)\n"
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
