package main

import (
	"bytes"
	"encoding/json"
	"strings"
	"testing"

	"github.com/spf13/cobra"
)

// runAuditCLI runs `vdibroker audit ...` against b with the admin token.
func runAuditCLI(t *testing.T, b *cliBroker, args ...string) (string, error) {
	t.Helper()
	root := &cobra.Command{Use: "vdibroker", SilenceUsage: true, SilenceErrors: true}
	root.AddCommand(newAuditCmd())
	var out bytes.Buffer
	root.SetOut(&out)
	root.SetErr(&out)
	root.SetArgs(append(append([]string{"audit"}, args...), "--server", b.m.URL(), "--token", b.m.AdminToken))
	err := root.ExecuteContext(t.Context())
	return out.String(), err
}

// TestCLIAuditList: changes made through the CLI are listed by `audit
// list`, filtered, as a table and as JSON with before and after.
func TestCLIAuditList(t *testing.T) {
	b := startCLIBroker(t)
	b.ok("hostpool", "create", "--name", "audp")
	b.ok("hostpool", "update", "--name", "audp", "--description", "changed")
	out, err := runAuditCLI(t, b, "list", "--target", "hostpools/audp")
	if err != nil {
		t.Fatalf("audit list: %v\n%s", err, out)
	}
	if !strings.Contains(out, "hostpool.put") || !strings.Contains(out, "hostpool.update") || !strings.Contains(out, "Action") {
		t.Errorf("table:\n%s", out)
	}
	out, err = runAuditCLI(t, b, "list", "--action", "hostpool.update", "--since", "1h", "--output", "json")
	if err != nil {
		t.Fatalf("audit list json: %v\n%s", err, out)
	}
	var list []struct {
		Action string          `json:"action"`
		Before json.RawMessage `json:"before"`
		After  struct {
			Description string `json:"description"`
		} `json:"after"`
	}
	if err := json.Unmarshal([]byte(out), &list); err != nil || len(list) != 1 || list[0].After.Description != "changed" {
		t.Errorf("json %v: %s", err, out)
	}
	if _, err := runAuditCLI(t, b, "list", "--since", "yesterday"); err == nil || !isUsageError(err) {
		t.Errorf("--since yesterday: %v, want a usage error", err)
	}
}
