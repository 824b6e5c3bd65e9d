package identity

import (
	"context"
	"fmt"
	"slices"
	"strings"
	"testing"
	"time"

	clocktesting "k8s.io/utils/clock/testing"

	"github.com/vdibroker/vdibroker"
	"github.com/vdibroker/vdibroker/internal/testop"
)

// TestGroupsClaimBounds (R-E6, R-E3, R-SEC): an end user's groups
// claim is taken within the bounds of a User token's groups, at the
// edges: 500 groups and a name of 256 characters are taken whole, as a
// portal identity (VerifyUser) and as the role map's User (u); 501
// entries (entries that are no string count: they are the provider's
// to send) and a name of 257, an empty one or one with a control
// character are refused (PermissionDenied) for both. An administrator
// (g: the role map's Reader of pool-a) is asked for no assignment: its
// role is read from all its groups and it signs in whatever they are,
// carrying at most 500 valid names; before, it was refused as an end
// user. A refusal for unmapped groups quotes the first 10, each cut to
// 64 bytes, and counts the others, one line whatever the claim.
func TestGroupsClaimBounds(t *testing.T) {
	op := testop.Start(t, "cid", "sec")
	p := newTestProvider(t, op, clocktesting.NewFakeClock(time.Now()))
	p.SetRoles(RoleMap{Groups: map[string]Grant{"g": {Role: "Reader", HostPools: []string{"pool-a"}}, "u": {Role: "User"}}})
	const first = "FIRST" // the mapped group of who verifies
	names := func(n int) []any {
		out := []any{first}
		for i := 1; i < n; i++ {
			out = append(out, fmt.Sprintf("team-%04d", i))
		}
		return out
	}
	withFirst := func(v any, g string) any {
		if l, ok := v.([]any); ok {
			return append([]any{g}, l[1:]...)
		}
		return g
	}
	for _, tc := range []struct {
		name   string
		groups any
		want   string // "" taken, else a part of an end user's refusal
	}{
		{"500 groups", names(vdibroker.MaxGroups), ""},
		{"a name of 256", []any{first, strings.Repeat("n", vdibroker.MaxUserLen)}, ""},
		{"one group as a string", first, ""},
		{"501 groups", names(vdibroker.MaxGroups + 1), `sent 501 groups in the "groups" claim; at most 500 are taken`},
		{"501 entries, one a number", append(names(vdibroker.MaxGroups), 7), "sent 501 groups"},
		{"a name of 257", []any{first, strings.Repeat("n", vdibroker.MaxUserLen+1)}, "(group 2, "},
		{"an empty name", []any{first, ""}, "a group name is 1..256 characters"},
		{"a control character", []any{first, "ops\x1b[2J"}, `"ops\x1b[2J"`},
	} {
		for _, who := range []struct {
			name, group string
			verify      func(context.Context, string) (*Identity, error)
			endUser     bool
		}{
			{"portal", "g", p.VerifyUser, true},
			{"role map User", "u", p.Verify, true},
			{"role map Reader", "g", p.Verify, false},
		} {
			groups := withFirst(tc.groups, who.group)
			id, err := who.verify(t.Context(), op.Mint(map[string]any{"sub": "dave", "groups": groups}))
			switch {
			case (tc.want == "" || !who.endUser) && err != nil:
				t.Errorf("%s, %s: %v, want taken", tc.name, who.name, err)
			case tc.want == "" && len(id.Groups) != max(1, len(asList(groups))):
				t.Errorf("%s, %s: %d groups taken, want all", tc.name, who.name, len(id.Groups))
			case tc.want != "" && !who.endUser && (id.Role != "Reader" || len(id.Groups) > vdibroker.MaxGroups || slices.ContainsFunc(id.Groups, func(g string) bool { return vdibroker.ValidateUser("g", g) != nil })):
				t.Errorf("%s, %s: role %s, %d groups %.200q; want Reader, at most 500 valid names", tc.name, who.name, id.Role, len(id.Groups), id.Groups)
			case tc.want != "" && who.endUser && (vdibroker.ErrorCode(err) != vdibroker.EPermission || !strings.Contains(err.Error(), tc.want) || len(err.Error()) > 600):
				t.Errorf("%s, %s: %v, want a short PermissionDenied saying %q", tc.name, who.name, err, tc.want)
			}
		}
	}
	// The Reader group last of 600: its role all the same.
	late := append(names(600)[1:], "g")
	if id, err := p.Verify(t.Context(), op.Mint(map[string]any{"sub": "dave", "groups": late})); err != nil || id.Role != "Reader" || len(id.Groups) != vdibroker.MaxGroups {
		t.Errorf("600 groups, the mapped one last: %+v %v; want Reader carrying 500", id, err)
	}
	_, err := p.Verify(t.Context(), op.Mint(map[string]any{"sub": "dave", "groups": names(50)[1:]}))
	if vdibroker.ErrorCode(err) != vdibroker.EPermission || !strings.Contains(err.Error(), `"team-0010"] and 39 more)`) || strings.Contains(err.Error(), "team-0011") {
		t.Errorf("49 unmapped groups: %v, want the first 10 quoted and 39 more counted", err)
	}
	huge := strings.Repeat("h", 100_000)
	_, err = p.Verify(t.Context(), op.Mint(map[string]any{"sub": "dave", "groups": []any{huge, huge}}))
	if vdibroker.ErrorCode(err) != vdibroker.EPermission || len(err.Error()) > 600 {
		t.Errorf("unmapped huge names: %d bytes %.300v, want a short PermissionDenied", len(err.Error()), err)
	}
}

func asList(v any) []any {
	l, _ := v.([]any)
	return l
}
