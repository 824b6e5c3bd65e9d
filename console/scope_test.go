package console_test

import (
	"context"
	"strings"
	"testing"
	"time"

	"github.com/vdibroker/vdibroker/console"
	vhttp "github.com/vdibroker/vdibroker/http"
)

// TestOverviewScoped: a token scoped to host pools sees only them on the
// overview, its sessions chart included, although the console's sampler
// counts every pool's sessions.
func TestOverviewScoped(t *testing.T) {
	e := newEnvWith(t, func(c *console.Config) { c.SampleInterval = 10 * time.Millisecond })
	e.seed("alice") // pool-a, with a session
	ctx := context.Background()
	if _, err := e.admin.PutHostPool(ctx, "pool-b", map[string]any{}); err != nil {
		t.Fatal(err)
	}
	tr, err := e.admin.CreateToken(ctx, vhttp.TokenRequest{Role: "Reader", Subject: "b-reader", HostPools: []string{"pool-b"}})
	if err != nil {
		t.Fatal(err)
	}
	time.Sleep(50 * time.Millisecond) // the sampler has recorded pool-a's session
	b := e.browser()
	b.signin(tr.Secret)
	a := b.get("/")
	wantStatus(t, a, 200)
	wantContains(t, a, "pool-b")
	if strings.Contains(a.body, "pool-a") {
		t.Errorf("the overview of a token scoped to pool-b shows pool-a")
	}
	admin := e.browser()
	admin.signin(adminToken)
	wantContains(t, admin.get("/"), "pool-a", "pool-b")
}
