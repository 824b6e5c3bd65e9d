package main

import (
	"strings"
	"testing"

	"github.com/google/go-cmp/cmp"
	"github.com/spf13/cobra"

	"github.com/vdibroker/vdibroker"
)

// TestPoolFlagsFollowTheSchema: every host pool setting of the schema has a
// flag on create and update, named after its JSON path, whose help says the
// schema's range, and create's default is the schema's.
func TestPoolFlagsFollowTheSchema(t *testing.T) {
	root := newHostPoolCmd()
	for _, sub := range []string{"create", "update"} {
		cmd, _, err := root.Find([]string{sub})
		if err != nil {
			t.Fatal(err)
		}
		for _, f := range vdibroker.PoolFields() {
			if f.Path == "name" {
				if cmd.Flags().Lookup("name") == nil {
					t.Errorf("%s has no --name", sub)
				}
				continue
			}
			fl := cmd.Flags().Lookup(flagName(f))
			if fl == nil {
				t.Errorf("%s: no flag for %s (want --%s)", sub, f.Path, flagName(f))
				continue
			}
			want := []string{f.Help}
			switch f.Kind {
			case vdibroker.KindEnum:
				want = append(want, f.Values("")...) // per pool type where they differ
			case vdibroker.KindBool:
			default:
				want = append(want, f.Range())
			}
			for _, w := range want {
				if !strings.Contains(fl.Usage, w) {
					t.Errorf("%s --%s usage %q lacks %q from the schema", sub, fl.Name, fl.Usage, w)
				}
			}
			if sub == "create" && f.Kind != vdibroker.KindEnum && fl.DefValue != f.DefaultText(vdibroker.Pooled) {
				t.Errorf("create --%s default %q, want %q", fl.Name, fl.DefValue, f.DefaultText(vdibroker.Pooled))
			}
		}
	}
	for path, want := range map[string]string{
		"maxSessionLimit":                   "max-session-limit",
		"loadBalancing.cpuThreshold":        "cpu-threshold",
		"personalDesktopAssignmentType":     "personal-desktop-assignment-type",
		"disconnectedSessionTimeoutMinutes": "disconnected-session-timeout-minutes",
	} {
		f, _ := vdibroker.PoolField(path)
		if got := flagName(f); got != want {
			t.Errorf("flagName(%s) = %q, want %q", path, got, want)
		}
	}
}

// TestPoolFlagsFromAChangedSchema: a range, default and help changed in a
// copy of the schema show up in the flags built from it; nothing is
// written out in the CLI.
func TestPoolFlagsFromAChangedSchema(t *testing.T) {
	schema := vdibroker.PoolFields()
	for i := range schema {
		if schema[i].Path == "maxSessionLimit" {
			schema[i].Max, schema[i].Default, schema[i].Help = 500, 250, "sessions per host in this test"
		}
	}
	cmd := &cobra.Command{Use: "x"}
	addPoolFieldFlags(cmd, schema, true)
	fl := cmd.Flags().Lookup("max-session-limit")
	if fl == nil {
		t.Fatal("no --max-session-limit")
	}
	if want := "sessions per host in this test, 1..500"; fl.Usage != want || fl.DefValue != "250" {
		t.Errorf("usage %q default %q, want %q and 250", fl.Usage, fl.DefValue, want)
	}
}

// TestPoolFieldsSet: only the flags given are sent, nested by JSON path.
func TestPoolFieldsSet(t *testing.T) {
	schema := vdibroker.PoolFields()
	cmd := &cobra.Command{Use: "x", RunE: func(*cobra.Command, []string) error { return nil }}
	addPoolFieldFlags(cmd, schema, true)
	if err := cmd.ParseFlags([]string{"--max-session-limit", "10", "--cpu-threshold", "80", "--include-session-count", "false", "--load-balancer-type", "DepthFirst"}); err != nil {
		t.Fatal(err)
	}
	got, err := poolFieldsSet(cmd, schema)
	if err != nil {
		t.Fatal(err)
	}
	want := map[string]any{
		"maxSessionLimit": 10, "loadBalancerType": "DepthFirst",
		"loadBalancing": map[string]any{"cpuThreshold": 80.0, "includeSessionCount": false},
	}
	if diff := cmp.Diff(want, got); diff != "" {
		t.Errorf("body (-want +got):\n%s", diff)
	}
}
