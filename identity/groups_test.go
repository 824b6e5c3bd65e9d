package identity

import (
	"fmt"
	"strings"
	"testing"
	"time"

	clocktesting "k8s.io/utils/clock/testing"

	"github.com/vdibroker/vdibroker"
	"github.com/vdibroker/vdibroker/internal/testop"
)

// TestGroupsClaimBounds (R-E6, R-SEC): a token's groups claim is taken
// within the bounds of a User token's groups, at the edges: 500 groups
// and a name of 256 characters are taken whole, as console (Verify) and
// portal (VerifyUser) identities; 501 entries (entries that are no
// string count: they are the provider's to send) and a name of 257, an
// empty one or one with a control character are refused
// (PermissionDenied) for both. A refusal for unmapped groups quotes the
// first 10 and counts the others, one line whatever the claim.
func TestGroupsClaimBounds(t *testing.T) {
	op := testop.Start(t, "cid", "sec")
	p := newTestProvider(t, op, clocktesting.NewFakeClock(time.Now()))
	names := func(n int) []any {
		out := []any{"g"} // mapped: Reader of pool-a
		for i := 1; i < n; i++ {
			out = append(out, fmt.Sprintf("team-%04d", i))
		}
		return out
	}
	for _, tc := range []struct {
		name   string
		groups any
		want   string // "" taken, else a part of the refusal
	}{
		{"500 groups", names(vdibroker.MaxGroups), ""},
		{"a name of 256", []any{"g", strings.Repeat("n", vdibroker.MaxUserLen)}, ""},
		{"one group as a string", "g", ""},
		{"501 groups", names(vdibroker.MaxGroups + 1), `sent 501 groups in the "groups" claim; at most 500 are taken`},
		{"501 entries, one a number", append(names(vdibroker.MaxGroups), 7), "sent 501 groups"},
		{"a name of 257", []any{"g", strings.Repeat("n", vdibroker.MaxUserLen+1)}, "(group 2, "},
		{"an empty name", []any{"g", ""}, "a group name is 1..256 characters"},
		{"a control character", []any{"g", "ops\x1b[2J"}, `"ops\x1b[2J"`},
	} {
		raw := op.Mint(map[string]any{"sub": "dave", "groups": tc.groups})
		for _, verify := range []func() (*Identity, error){
			func() (*Identity, error) { return p.Verify(t.Context(), raw) },
			func() (*Identity, error) { return p.VerifyUser(t.Context(), raw) },
		} {
			id, err := verify()
			switch {
			case tc.want == "" && err != nil:
				t.Errorf("%s: %v, want taken", tc.name, err)
			case tc.want == "" && len(id.Groups) != max(1, len(asList(tc.groups))):
				t.Errorf("%s: %d groups taken, want all", tc.name, len(id.Groups))
			case tc.want != "" && (vdibroker.ErrorCode(err) != vdibroker.EPermission || !strings.Contains(err.Error(), tc.want) || len(err.Error()) > 600):
				t.Errorf("%s: %v, want a short PermissionDenied saying %q", tc.name, err, tc.want)
			}
		}
	}
	_, err := p.Verify(t.Context(), op.Mint(map[string]any{"sub": "dave", "groups": names(50)[1:]}))
	if vdibroker.ErrorCode(err) != vdibroker.EPermission || !strings.Contains(err.Error(), `"team-0010"] and 39 more)`) || strings.Contains(err.Error(), "team-0011") {
		t.Errorf("49 unmapped groups: %v, want the first 10 quoted and 39 more counted", err)
	}
}

func asList(v any) []any {
	l, _ := v.([]any)
	return l
}
