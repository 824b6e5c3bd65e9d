package identity_test

import (
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/google/go-cmp/cmp"

	"github.com/vdibroker/vdibroker/identity"
)

func TestResolve(t *testing.T) {
	m := identity.RoleMap{Groups: map[string]identity.Grant{
		"all-ops": {Role: "Contributor"},
		"a-ops":   {Role: "Contributor", HostPools: []string{"pool-a"}},
		"b-ops":   {Role: "Contributor", HostPools: []string{"pool-b", "pool-a"}},
		"readers": {Role: "Reader"},
		"a-users": {Role: "User", HostPools: []string{"pool-a"}},
		"a-desk":  {Role: "Helpdesk", HostPools: []string{"pool-a"}},
	}}
	tests := []struct {
		name   string
		groups []string
		role   string
		pools  []string
		ok     bool
	}{
		{"none mapped", []string{"x"}, "", nil, false},
		{"one scoped", []string{"a-ops"}, "Contributor", []string{"pool-a"}, true},
		// Both grant Contributor: the union of their pools, sorted, once.
		{"two scoped", []string{"b-ops", "a-ops"}, "Contributor", []string{"pool-a", "pool-b"}, true},
		// An unscoped grant of the same role makes it global.
		{"scoped and global", []string{"a-ops", "all-ops"}, "Contributor", nil, true},
		// The stronger role wins, with its own scope only: the Reader's
		// global read does not widen the Contributor's pools.
		{"stronger wins", []string{"readers", "a-ops"}, "Contributor", []string{"pool-a"}, true},
		{"reader over user", []string{"a-users", "readers"}, "Reader", nil, true},
		{"user", []string{"a-users"}, "User", []string{"pool-a"}, true},
		// Helpdesk ranks over Reader, under Contributor.
		{"helpdesk over reader", []string{"readers", "a-desk"}, "Helpdesk", []string{"pool-a"}, true},
		{"contributor over helpdesk", []string{"a-desk", "b-ops"}, "Contributor", []string{"pool-a", "pool-b"}, true},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			role, pools, ok := m.Resolve(tc.groups)
			if role != tc.role || ok != tc.ok || !cmp.Equal(pools, tc.pools) {
				t.Errorf("Resolve(%v) = %q %v %v, want %q %v %v", tc.groups, role, pools, ok, tc.role, tc.pools, tc.ok)
			}
		})
	}
}

func TestLoadRoleMap(t *testing.T) {
	dir := t.TempDir()
	for _, tc := range []struct {
		name, text, err string
	}{
		{"good", "groups:\n  g1: {role: Reader}\n  g2: {role: User, hostPools: [pool-a]}\n", ""},
		{"admin is not mappable", "groups:\n  g1: {role: Admin}\n", "role must be"},
		{"unknown field", "groups:\n  g1: {role: Reader, pools: [x]}\n", "unknown"},
		{"bad pool name", "groups:\n  g1: {role: Reader, hostPools: ['a b!']}\n", "hostPools"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			p := filepath.Join(dir, strings.ReplaceAll(tc.name, " ", "_")+".yaml")
			if err := os.WriteFile(p, []byte(tc.text), 0o600); err != nil {
				t.Fatal(err)
			}
			m, err := identity.LoadRoleMap(p)
			switch {
			case tc.err == "" && err != nil:
				t.Fatalf("load: %v", err)
			case tc.err == "" && len(m.Groups) != 2:
				t.Errorf("groups %v", m.Groups)
			case tc.err != "" && (err == nil || !strings.Contains(err.Error(), tc.err)):
				t.Errorf("err %v, want one containing %q", err, tc.err)
			}
		})
	}
}
