package identity

import (
	"strings"
	"testing"
	"time"
	"unicode"

	clocktesting "k8s.io/utils/clock/testing"

	"github.com/vdibroker/vdibroker"
	"github.com/vdibroker/vdibroker/internal/testop"
)

// TestSubjectWithoutControlCharacters: a token's sub becomes the
// principal's subject, which audit entries, the console and the CLI show
// and a drained host records; one with a control character (ESC starts a
// terminal's escape sequence) is refused as API tokens' subjects are
// (R-SEC), and the groups a refusal quotes are escaped.
func TestSubjectWithoutControlCharacters(t *testing.T) {
	op := testop.Start(t, "cid", "sec")
	clk := clocktesting.NewFakeClock(time.Now())
	p := newTestProvider(t, op, clk)
	ctx := t.Context()
	for _, sub := range []string{"dave\x1b[2J", "dave\u009b31m", "dave\nforged", " dave"} {
		raw := op.Mint(map[string]any{"sub": sub, "groups": []string{"g"}})
		if _, err := p.Verify(ctx, raw); vdibroker.ErrorCode(err) != vdibroker.EUnauthenticated || !strings.Contains(err.Error(), "sub") {
			t.Errorf("sub %q: %v, want Unauthenticated naming sub", sub, err)
		}
		if _, err := p.VerifyUser(ctx, raw); vdibroker.ErrorCode(err) != vdibroker.EUnauthenticated {
			t.Errorf("sub %q as an end user: %v, want Unauthenticated", sub, err)
		}
	}
	if id, err := p.Verify(ctx, op.Mint(map[string]any{"sub": "dave", "groups": []string{"g"}})); err != nil || id.Subject != "dave" {
		t.Fatalf("a plain sub: %+v %v", id, err)
	}
	_, err := p.Verify(ctx, op.Mint(map[string]any{"sub": "dave", "groups": []string{"x\x1b[31m"}}))
	if vdibroker.ErrorCode(err) != vdibroker.EPermission || strings.IndexFunc(err.Error(), unicode.IsControl) >= 0 {
		t.Errorf("unmapped groups: %q, want PermissionDenied without control characters", err)
	}
}
