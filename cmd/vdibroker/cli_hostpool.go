package main

import (
	"fmt"
	"strings"
	"unicode"

	"github.com/spf13/cobra"

	"github.com/vdibroker/vdibroker"
)

// hostPoolColumns is the table of a host pool, as in SPEC §11.
var hostPoolColumns = []column{
	{"Name", "name"},
	{"LoadBalancerType", "loadBalancerType"},
	{"MaxSessionLimit", "maxSessionLimit"},
}

// poolDeletionColumns are hostpool delete's table: what went with the pool.
var poolDeletionColumns = []column{
	{"Deleted", "hostPool"},
	{"SessionHosts", "sessionHosts"},
	{"OpenSessions", "openSessions"},
	{"RegistrationTokens", "registrationTokens"},
	{"ScalingPlan", "scalingPlan"},
}

// poolFlagFields are the host pool settings settable from flags: every
// field of the schema (vdibroker.PoolFields) but name, which each command
// takes as its own --name.
func poolFlagFields(schema []vdibroker.Field) []vdibroker.Field {
	out := make([]vdibroker.Field, 0, len(schema))
	for _, f := range schema {
		if f.Path != "name" {
			out = append(out, f)
		}
	}
	return out
}

// flagName is the field's flag: the last element of its JSON path in kebab
// case (loadBalancing.cpuThreshold: --cpu-threshold), an acronym one word
// (startVMOnConnect: --start-vm-on-connect).
func flagName(f vdibroker.Field) string {
	var b strings.Builder
	rs := []rune(f.Key())
	for i, r := range rs {
		if unicode.IsUpper(r) {
			// A word starts at an upper-case letter after a lower-case
			// one, or at the last capital of an acronym before a word.
			if i > 0 && (unicode.IsLower(rs[i-1]) || i+1 < len(rs) && unicode.IsLower(rs[i+1]) && unicode.IsUpper(rs[i-1])) {
				b.WriteByte('-')
			}
			r = unicode.ToLower(r)
		}
		b.WriteRune(r)
	}
	return b.String()
}

// flagUsage is the field's help from the schema: what it does, the allowed
// values, what 0 means, and for enums whose default depends on the pool
// type, those defaults (pflag adds "(default N)" for the others when the
// command registers defaults).
func flagUsage(f vdibroker.Field, defaults bool) string {
	u := f.Help
	switch f.Kind {
	case vdibroker.KindEnum:
		var types []string
		for _, pt := range []string{vdibroker.Pooled, vdibroker.Personal} {
			if vs := f.Values(pt); f.PoolTypes == nil && len(vs) < len(f.Values("")) {
				types = append(types, pt+": "+strings.Join(vs, ", "))
			}
		}
		if types == nil {
			types = []string{f.Range()}
		}
		u += "; " + strings.Join(types, "; ")
		if defaults && f.DefaultFor(vdibroker.Pooled) != f.DefaultFor(vdibroker.Personal) {
			u += fmt.Sprintf(" (default %s for Pooled, %s for Personal)", f.DefaultText(vdibroker.Pooled), f.DefaultText(vdibroker.Personal))
		}
	case vdibroker.KindBool:
	default:
		u += ", " + f.Range()
	}
	if f.Zero != "" {
		u += fmt.Sprintf(" (0: %s)", f.Zero)
	}
	if f.PoolTypes != nil {
		u += " (" + strings.Join(f.PoolTypes, ", ") + " pools only)"
	}
	if f.LoadBalancerTypes != nil {
		u += " (" + strings.Join(f.LoadBalancerTypes, ", ") + " only)"
	}
	return u
}

// addPoolFieldFlags registers a flag per schema field. Values are read back
// only for flags the user set, so create leaves the rest to the server's
// defaults and update sends only what changes. With defaults (create), each
// flag's default is the schema's, which the help shows; update has none,
// since a flag not given leaves the pool's value as it is.
func addPoolFieldFlags(cmd *cobra.Command, schema []vdibroker.Field, defaults bool) {
	f := cmd.Flags()
	for _, pf := range poolFlagFields(schema) {
		name, usage := flagName(pf), flagUsage(pf, defaults)
		def := pf.Default
		if !defaults || pf.Kind == vdibroker.KindEnum {
			def = nil
		}
		if pf.Kind == vdibroker.KindEnum && defaults && pf.DefaultFor(vdibroker.Pooled) == pf.DefaultFor(vdibroker.Personal) {
			def = pf.DefaultFor(vdibroker.Pooled)
		}
		switch pf.Kind {
		case vdibroker.KindInt, vdibroker.KindNumber, vdibroker.KindEnum:
			// Checked against the schema as the flag is parsed.
			f.Var(&fieldValue{f: pf, v: def}, name, usage)
		case vdibroker.KindBool:
			b, _ := def.(bool)
			f.Var(boolValue{&b}, name, usage)
		default:
			s, _ := def.(string)
			textVar(f, &s, name, int(pf.Max), usage)
		}
		if pf.Kind == vdibroker.KindEnum {
			_ = cmd.RegisterFlagCompletionFunc(name, fixedCompletion(pf.Values("")...))
		}
		if pf.Kind == vdibroker.KindBool {
			_ = cmd.RegisterFlagCompletionFunc(name, fixedCompletion("true", "false"))
		}
	}
}

// poolFieldsSet returns the JSON body of the pool fields whose flags were
// set, e.g. {"maxSessionLimit": 10, "loadBalancing": {"cpuThreshold": 80}}.
func poolFieldsSet(cmd *cobra.Command, schema []vdibroker.Field) (map[string]any, error) {
	f := cmd.Flags()
	body := map[string]any{}
	for _, pf := range poolFlagFields(schema) {
		name := flagName(pf)
		if !f.Changed(name) {
			continue
		}
		var v any
		var err error
		switch pf.Kind {
		case vdibroker.KindInt, vdibroker.KindNumber, vdibroker.KindEnum:
			v = f.Lookup(name).Value.(*fieldValue).v
		case vdibroker.KindBool:
			v, err = strconvBool(f.Lookup(name).Value.String())
		default:
			v, err = f.GetString(name)
		}
		if err != nil {
			return nil, usageError{fmt.Errorf("--%s: %w", name, err)}
		}
		pf.Put(body, v)
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
	a.suggestNames(cmd, kindPool)
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
			body, err := poolFieldsSet(cmd, vdibroker.PoolFields())
			if err != nil {
				return err
			}
			body["name"] = name
			// Create only (If-None-Match: *): the API's plain PUT replaces,
			// and create must not reset an existing pool's settings to
			// their defaults, not even one created a moment ago elsewhere.
			p, err := c.CreateHostPool(cmd.Context(), name, body)
			if vdibroker.ErrorCode(err) == vdibroker.EPreconditionFailed { // R-E13
				return fmt.Errorf("host pool %q already exists; change it with hostpool update", name)
			}
			if err != nil {
				return fail(err)
			}
			printWarnings(cmd, p.Warnings)
			return a.result(cmd, p, hostPoolColumns)
		},
	}
	nameField, _ := vdibroker.PoolField("name")
	poolNameVar(cmd.Flags(), &name, "name", "n", nameField.Help+", "+nameField.Range()+" of A-Za-z0-9@._- and space")
	addPoolFieldFlags(cmd, vdibroker.PoolFields(), true)
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
			body, err := poolFieldsSet(cmd, vdibroker.PoolFields())
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
	poolNameVar(cmd.Flags(), &name, "name", "n", "host pool name")
	addPoolFieldFlags(cmd, vdibroker.PoolFields(), false)
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
	poolNameVar(cmd.Flags(), &name, "name", "n", "host pool name")
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
		Short: "Delete a host pool (refused while it has hosts or sessions unless --force)",
		Long: `Delete a host pool. While the pool has session hosts or open sessions
the broker refuses and says what would go; with --force it deletes the
hosts (their agents' credentials are revoked), ends the sessions, revokes
the pool's registration tokens and takes the pool out of its scaling plan
(recorded in the audit trail), and prints what went.`,
		Args: cobra.NoArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			c, err := a.client()
			if err != nil {
				return err
			}
			del, err := c.DeleteHostPool(cmd.Context(), name, force)
			if err != nil {
				return fail(err)
			}
			return a.show(cmd, del, poolDeletionColumns)
		},
	}
	poolNameVar(cmd.Flags(), &name, "name", "n", "host pool name")
	cmd.Flags().BoolVar(&force, "force", false, "delete even while it has session hosts or open sessions: they go with it")
	requireFlags(cmd, "name")
	return cmd
}
