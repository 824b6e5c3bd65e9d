package main

import (
	"fmt"
	"strings"

	"github.com/spf13/cobra"

	"github.com/vdibroker/vdibroker"
)

// hostPoolColumns is the table of a host pool, as in SPEC §11.
var hostPoolColumns = []column{
	{"Name", "name"},
	{"LoadBalancerType", "loadBalancerType"},
	{"MaxSessionLimit", "maxSessionLimit"},
}

// poolField is one host pool field settable from a flag: SPEC §2 and, under
// loadBalancing, §6.
type poolField struct {
	flag  string
	path  []string // JSON path in the request body
	kind  string   // "string", "int", "float", "bool"
	usage string
	enum  []string // completion values
}

var poolFields = []poolField{
	{"host-pool-type", []string{"hostPoolType"}, "string", "Pooled or Personal (only at creation; default Pooled)", []string{vdibroker.Pooled, vdibroker.Personal}},
	{"load-balancer-type", []string{"loadBalancerType"}, "string", "Pooled: BreadthFirst, DepthFirst or LoadIndex; Personal: Persistent or MultiplePersistent",
		[]string{vdibroker.BreadthFirst, vdibroker.DepthFirst, vdibroker.LoadIndex, vdibroker.Persistent, vdibroker.MultiplePersistent}},
	{"max-session-limit", []string{"maxSessionLimit"}, "int", "most sessions per host, 1..999999 (default 999999: no limit)", nil},
	{"personal-desktop-assignment-type", []string{"personalDesktopAssignmentType"}, "string", "Automatic or Direct (Personal pools)", []string{vdibroker.Automatic, vdibroker.Direct}},
	{"heartbeat-timeout-seconds", []string{"heartbeatTimeoutSeconds"}, "int", "a host without heartbeat for longer is Unavailable, 10..3600 (default 90)", nil},
	{"pending-timeout-seconds", []string{"pendingTimeoutSeconds"}, "int", "a Pending session never seen by the agent ends after this, 10..3600 (default 300)", nil},
	{"disconnected-session-timeout-minutes", []string{"disconnectedSessionTimeoutMinutes"}, "int", "log off sessions disconnected longer, 0..10080 (0: never)", nil},
	{"description", []string{"description"}, "string", "description, up to 512 characters", nil},
	{"friendly-name", []string{"friendlyName"}, "string", "display name, up to 512 characters", nil},
	{"use-custom-script", []string{"loadBalancing", "useCustomScript"}, "bool", "load index from the agent's custom script", nil},
	{"include-session-count", []string{"loadBalancing", "includeSessionCount"}, "bool", "session count is a load index factor", nil},
	{"cpu-threshold", []string{"loadBalancing", "cpuThreshold"}, "float", "CPU % at load index 100, 0..100 (0: not used)", nil},
	{"memory-threshold", []string{"loadBalancing", "memoryThreshold"}, "float", "memory % at load index 100, 0..100 (0: not used)", nil},
	{"disk-queue-length-threshold", []string{"loadBalancing", "diskQueueLengthThreshold"}, "float", "disk queue length at load index 100, >= 0 (0: not used)", nil},
	{"disk-read-latency-threshold", []string{"loadBalancing", "diskReadLatencyThreshold"}, "float", "disk read latency ms at load index 100, >= 0 (0: not used)", nil},
	{"disk-write-latency-threshold", []string{"loadBalancing", "diskWriteLatencyThreshold"}, "float", "disk write latency ms at load index 100, >= 0 (0: not used)", nil},
	{"load-index-threshold", []string{"loadBalancing", "loadIndexThreshold"}, "int", "bucket 1 takes hosts below this load index, 0..100 (default 20)", nil},
	{"connecting-session-threshold", []string{"loadBalancing", "connectingSessionThreshold"}, "int", "bucket 1 takes hosts with fewer connecting sessions, 0..150 (default 20)", nil},
	{"min-servers-in-queue", []string{"loadBalancing", "minServersInQueue"}, "int", "raise the load index threshold until bucket 1 has this many hosts, 1..1000 (default 4)", nil},
	{"host-load-index-threshold", []string{"loadBalancing", "hostLoadIndexThreshold"}, "int", "a host at or above this load index takes no new session, 0..100 (0: off)", nil},
	{"host-connecting-session-threshold", []string{"loadBalancing", "hostConnectingSessionThreshold"}, "int", "a host with this many connecting sessions takes no new one, 0..150 (0: off)", nil},
	{"sample-interval-seconds", []string{"loadBalancing", "sampleIntervalSeconds"}, "int", "agent metrics sample interval, 5..3600 (default 30)", nil},
}

// addPoolFieldFlags registers a flag per pool field. Values are read back
// only for flags the user set, so create leaves the rest to the server's
// defaults and update sends only what changes.
func addPoolFieldFlags(cmd *cobra.Command) {
	f := cmd.Flags()
	for _, pf := range poolFields {
		switch pf.kind {
		case "string":
			f.String(pf.flag, "", pf.usage)
		case "int":
			f.Int(pf.flag, 0, pf.usage)
		case "float":
			f.Float64(pf.flag, 0, pf.usage)
		case "bool":
			f.Var(boolValue{new(bool)}, pf.flag, pf.usage)
		}
		if pf.enum != nil {
			_ = cmd.RegisterFlagCompletionFunc(pf.flag, fixedCompletion(pf.enum...))
		}
	}
}

// poolFieldsSet returns the JSON body of the pool fields whose flags were
// set, e.g. {"maxSessionLimit": 10, "loadBalancing": {"cpuThreshold": 80}}.
func poolFieldsSet(cmd *cobra.Command) (map[string]any, error) {
	f := cmd.Flags()
	body := map[string]any{}
	for _, pf := range poolFields {
		if !f.Changed(pf.flag) {
			continue
		}
		var v any
		var err error
		switch pf.kind {
		case "string":
			v, err = f.GetString(pf.flag)
		case "int":
			v, err = f.GetInt(pf.flag)
		case "float":
			v, err = f.GetFloat64(pf.flag)
		case "bool":
			v, err = strconvBool(f.Lookup(pf.flag).Value.String())
		}
		if err != nil {
			return nil, usageError{fmt.Errorf("--%s: %w", pf.flag, err)}
		}
		m := body
		for _, k := range pf.path[:len(pf.path)-1] {
			sub, ok := m[k].(map[string]any)
			if !ok {
				sub = map[string]any{}
				m[k] = sub
			}
			m = sub
		}
		m[pf.path[len(pf.path)-1]] = v
	}
	return body, nil
}

func strconvBool(s string) (bool, error) {
	var b bool
	err := boolValue{&b}.Set(s)
	return b, err
}

func newHostPoolCmd() *cobra.Command {
	cmd := &cobra.Command{
		Use:     "hostpool",
		Aliases: []string{"host-pool"},
		Short:   "Manage host pools",
		Long: strings.TrimSpace(`
Manage host pools, in the spirit of az desktopvirtualization hostpool:

  vdibroker hostpool update --name contosohp01 --load-balancer-type DepthFirst --max-session-limit 10
  vdibroker hostpool show --name contosohp01 --output table`),
	}
	a := addAdminFlags(cmd)
	cmd.AddCommand(
		newHostPoolCreateCmd(a),
		newHostPoolUpdateCmd(a),
		newHostPoolShowCmd(a),
		newHostPoolListCmd(a),
		newHostPoolDeleteCmd(a),
	)
	a.completeNames(cmd, "pool")
	return cmd
}

func newHostPoolCreateCmd(a *admin) *cobra.Command {
	var name string
	cmd := &cobra.Command{
		Use:   "create --name NAME [flags]",
		Short: "Create a host pool (fields not given take their defaults)",
		Args:  cobra.NoArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			c, err := a.client()
			if err != nil {
				return err
			}
			body, err := poolFieldsSet(cmd)
			if err != nil {
				return err
			}
			body["name"] = name
			// Create only (If-None-Match: *): the API's plain PUT replaces,
			// and create must not reset an existing pool's settings to
			// their defaults, not even one created a moment ago elsewhere.
			p, err := c.CreateHostPool(cmd.Context(), name, body)
			if vdibroker.ErrorCode(err) == vdibroker.EConflict {
				return fmt.Errorf("host pool %q already exists; change it with hostpool update", name)
			}
			if err != nil {
				return fail(err)
			}
			printWarnings(cmd, p.Warnings)
			return a.result(cmd, p, hostPoolColumns)
		},
	}
	cmd.Flags().StringVarP(&name, "name", "n", "", "host pool name, 3..64 characters of A-Za-z0-9@._- and space")
	addPoolFieldFlags(cmd)
	requireFlags(cmd, "name")
	return cmd
}

func newHostPoolUpdateCmd(a *admin) *cobra.Command {
	var name string
	cmd := &cobra.Command{
		Use:   "update --name NAME [flags]",
		Short: "Change host pool fields (only the flags given are sent)",
		Args:  cobra.NoArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			c, err := a.client()
			if err != nil {
				return err
			}
			body, err := poolFieldsSet(cmd)
			if err != nil {
				return err
			}
			if len(body) == 0 {
				return usageError{fmt.Errorf("nothing to update: give at least one field flag, e.g. --max-session-limit 10")}
			}
			p, err := c.UpdateHostPool(cmd.Context(), name, body)
			if err != nil {
				return fail(err)
			}
			printWarnings(cmd, p.Warnings)
			return a.result(cmd, p, hostPoolColumns)
		},
	}
	cmd.Flags().StringVarP(&name, "name", "n", "", "host pool name")
	addPoolFieldFlags(cmd)
	requireFlags(cmd, "name")
	return cmd
}

func newHostPoolShowCmd(a *admin) *cobra.Command {
	var name string
	cmd := &cobra.Command{
		Use:   "show --name NAME",
		Short: "Show a host pool",
		Args:  cobra.NoArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			c, err := a.client()
			if err != nil {
				return err
			}
			p, err := c.GetHostPool(cmd.Context(), name)
			if err != nil {
				return fail(err)
			}
			return a.show(cmd, p, hostPoolColumns)
		},
	}
	cmd.Flags().StringVarP(&name, "name", "n", "", "host pool name")
	requireFlags(cmd, "name")
	return cmd
}

func newHostPoolListCmd(a *admin) *cobra.Command {
	cmd := &cobra.Command{
		Use:   "list",
		Short: "List host pools",
		Args:  cobra.NoArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			c, err := a.client()
			if err != nil {
				return err
			}
			pools, err := c.ListHostPools(cmd.Context())
			if err != nil {
				return fail(err)
			}
			return a.show(cmd, pools, hostPoolColumns)
		},
	}
	return cmd
}

func newHostPoolDeleteCmd(a *admin) *cobra.Command {
	var (
		name  string
		force bool
	)
	cmd := &cobra.Command{
		Use:   "delete --name NAME [--force]",
		Short: "Delete a host pool (refused while it has sessions unless --force)",
		Args:  cobra.NoArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			c, err := a.client()
			if err != nil {
				return err
			}
			return fail(c.DeleteHostPool(cmd.Context(), name, force))
		},
	}
	cmd.Flags().StringVarP(&name, "name", "n", "", "host pool name")
	cmd.Flags().BoolVar(&force, "force", false, "delete even while sessions exist")
	requireFlags(cmd, "name")
	return cmd
}
