package main

import (
	"strings"
	"testing"

	vhttp "github.com/vdibroker/vdibroker/http"
	"github.com/vdibroker/vdibroker/placement"
)

// TestPlacementShowSharesTheWords_RC7: placement show prints the decision
// record in the words of placement.WriteText (whose wording is held once,
// in placement/testdata/describe), the record the API returns, nothing of
// its own.
func TestPlacementShowSharesTheWords_RC7(t *testing.T) {
	b := startCLIBroker(t)
	b.ok("hostpool", "create", "--name", "hp-df", "--load-balancer-type", "DepthFirst", "--max-session-limit", "10")
	b.addHost("hp-df", "sh-01")
	b.addHost("hp-df", "sh-02")
	b.ok("sessionhost", "update", "--host-pool", "hp-df", "--name", "sh-02", "--allow-new-session", "false")
	id := strings.TrimSpace(b.ok("connect", "--host-pool", "hp-df", "--user", "alice", "--query", "sessionId", "-o", "tsv"))
	got := b.ok("placement", "show", "--host-pool", "hp-df", "--session", id)

	c := vhttp.NewClient(b.m.URL(), b.m.AdminToken)
	rec, err := c.Placement(t.Context(), "hp-df", id)
	if err != nil {
		t.Fatal(err)
	}
	var want strings.Builder
	if err := placement.WriteText(&want, rec); err != nil {
		t.Fatal(err)
	}
	if got != want.String() {
		t.Errorf("placement show:\n%s\nwant placement.WriteText:\n%s", got, want.String())
	}
	for _, w := range []string{"sh-02  drain mode (R-C2)", "Depth-first (R-DF2)"} {
		if !strings.Contains(got, w) {
			t.Errorf("placement show lacks %q:\n%s", w, got)
		}
	}
}
