//go:build unix

package main

import (
	"context"
	"slices"
	"sync/atomic"
	"testing"

	vhttp "github.com/vdibroker/vdibroker/http"
)

// TestCLIUpdateAfterAppAdded_RE13: another administrator adds an
// application to a RemoteApp group between `applicationgroup update`'s
// read of the group and its write. The group's ETag covers its set of
// applications, so the CLI's PUT is refused 412; it reads again and
// re-applies its flag on the second attempt: dave is assigned, the
// application stays. On SQLite and PostgreSQL.
func TestCLIUpdateAfterAppAdded_RE13(t *testing.T) {
	for _, engine := range []string{"sqlite", "postgres"} {
		t.Run(engine, func(t *testing.T) {
			b := startCLIBrokerOn(t, engine)
			b.ok("hostpool", "create", "--name", "teampool")
			b.ok("applicationgroup", "create", "--name", "team-apps", "--host-pool", "teampool", "--application-group-type", "RemoteApp",
				"--users", "alice")
			ctx := context.Background()
			admin := vhttp.NewClient(b.m.URL(), b.m.AdminToken)
			var reads atomic.Int32
			server := hookProxy(t, b, "/api/v1/applicationgroups/team-apps", func(n int) {
				reads.Store(int32(n))
				if n != 1 {
					return
				}
				if _, err := admin.PutApplication(ctx, "team-apps", "excel", map[string]any{"filePath": `C:\excel.exe`}); err != nil {
					t.Error(err)
				}
			})
			r := runCLI(t, "applicationgroup", "update", "--name", "team-apps", "--add-users", "dave", "--server", server, "--token", b.m.AdminToken)
			if r.code != 0 {
				t.Fatalf("update: exit %d: %s", r.code, r.stderr)
			}
			// Read twice: the first write, with the ETag of the group
			// before excel, was refused.
			if n := reads.Load(); n != 2 {
				t.Errorf("the update read the group %d times, want 2: its write with the ETag read before excel was added was not refused", n)
			}
			g, err := admin.GetApplicationGroup(ctx, "team-apps")
			if err != nil {
				t.Fatal(err)
			}
			if !slices.Equal(g.Assignments.Users, []string{"alice", "dave"}) {
				t.Errorf("users %v, want alice and dave", g.Assignments.Users)
			}
			if _, err := admin.GetApplication(ctx, "team-apps", "excel"); err != nil {
				t.Errorf("excel after the update: %v", err)
			}
		})
	}
}
