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
		Action    string          `json:"action"`
		RequestID string          `json:"requestId"`
		Before    json.RawMessage `json:"before"`
		After     struct {
			Description string `json:"description"`
		} `json:"after"`
	}
	if err := json.Unmarshal([]byte(out), &list); err != nil || len(list) != 1 || list[0].After.Description != "changed" {
		t.Errorf("json %v: %s", err, out)
	}
	// By the request id alone (the reference a portal user reads out),
	// which the table shows beside who it was (the principal's name).
	out, err = runAuditCLI(t, b, "list", "--request-id", list[0].RequestID)
	lines := strings.Split(strings.TrimSpace(out), "\n")
	if err != nil || len(lines) != 3 || !strings.Contains(lines[0], "RequestId") || !strings.Contains(lines[0], "Name") ||
		!strings.Contains(lines[2], "hostpool.update") || !strings.Contains(lines[2], list[0].RequestID) {
		t.Errorf("audit list --request-id %s: %v, want the update's entry alone with its request id:\n%s", list[0].RequestID, err, out)
	}
	if _, err := runAuditCLI(t, b, "list", "--since", "yesterday"); err == nil || !isUsageError(err) {
		t.Errorf("--since yesterday: %v, want a usage error", err)
	}
}
