package main

import (
	"fmt"
	"time"

	"github.com/spf13/cobra"

	"github.com/vdibroker/vdibroker"
	"github.com/vdibroker/vdibroker/console"
	vhttp "github.com/vdibroker/vdibroker/http"
)

// sessionHostColumns is the table of a session host (SPEC §3).
var sessionHostColumns = []column{
	{"Name", "name"},
	{"Status", "status"},
	{"PowerState", "powerState"},
	{"AllowNewSession", "allowNewSession"},
	{"Sessions", "sessions"},
	{"ConnectingSessions", "connectingSessions"},
	{"LoadIndex", "loadIndex"},
	{"RemoteApps", "remoteApps"}, // R-E12: Yes, No or Unknown
	{"Address", "address"},
}

func newSessionHostCmd() *cobra.Command {
	cmd := &cobra.Command{
		Use:     "sessionhost",
		Aliases: []string{"session-host"},
		Short:   "Manage session hosts: drain, assign users, start, stop, remove",
		Long: `Manage session hosts. Drain a host, as Update-AzWvdSessionHost -AllowNewSession:$false does:

  vdibroker sessionhost update --host-pool contosohp01 --name sh-07 --allow-new-session false

Start or stop it through the pool's power driver (serve --power-config):

  vdibroker sessionhost stop --host-pool contosohp01 --name sh-07`,
	}
	a := addAdminFlags(cmd)
	cmd.AddCommand(
		newSessionHostListCmd(a),
		newSessionHostShowCmd(a),
		newSessionHostUpdateCmd(a),
		newSessionHostDeleteCmd(a),
		newSessionHostResetRegistrationCmd(a),
		newSessionHostStartCmd(a),
		newSessionHostStopCmd(a),
		newSessionHostSendMessageCmd(a),
	)
	a.completeNames(cmd, "host")
	a.suggestNames(cmd, kindHost)
	return cmd
}

func newSessionHostListCmd(a *admin) *cobra.Command {
	var pool string
	cmd := &cobra.Command{
		Use:   "list --host-pool POOL",
		Short: "List the session hosts of a host pool",
		Args:  cobra.NoArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			c, err := a.client()
			if err != nil {
				return err
			}
			hosts, err := c.ListSessionHosts(cmd.Context(), pool)
			if err != nil {
				return fail(err)
			}
			return a.show(cmd, hosts, sessionHostColumns)
		},
	}
	poolNameVar(cmd.Flags(), &pool, "host-pool", "", "host pool name")
	requireFlags(cmd, "host-pool")
	return cmd
}

func newSessionHostShowCmd(a *admin) *cobra.Command {
	var pool, name string
	cmd := &cobra.Command{
		Use:   "show --host-pool POOL --name HOST",
		Short: "Show a session host",
		Args:  cobra.NoArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			c, err := a.client()
			if err != nil {
				return err
			}
			h, err := c.GetSessionHost(cmd.Context(), pool, name)
			if err != nil {
				return fail(err)
			}
			if err := a.show(cmd, h, sessionHostColumns); err != nil {
				return err
			}
			if o := a.outputFor(formatTable); o.Format != formatTable || o.Query != "" {
				return nil
			}
			return a.writeHostReport(cmd, c, pool, name)
		},
	}
	poolNameVar(cmd.Flags(), &pool, "host-pool", "", "host pool name")
	hostNameVar(cmd.Flags(), &name, "name", "n", "session host name")
	requireFlags(cmd, "host-pool", "name")
	return cmd
}

func newSessionHostUpdateCmd(a *admin) *cobra.Command {
	var (
		pool, name, address string
		allowNew, standard  bool
		assigned            []string
	)
	cmd := &cobra.Command{
		Use:   "update --host-pool POOL --name HOST [flags]",
		Short: "Drain or undrain a session host, assign users, change its address",
		Args:  cobra.NoArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			c, err := a.client()
			if err != nil {
				return err
			}
			f := cmd.Flags()
			patch := map[string]any{}
			if f.Changed("allow-new-session") {
				patch["allowNewSession"] = allowNew
			}
			if f.Changed("standard-features") {
				patch["standardFeatures"] = standard
			}
			if f.Changed("address") {
				patch["address"] = address
			}
			if f.Changed("assigned-user") {
				// --assigned-user "" clears the assignments.
				users := []string{}
				for _, u := range assigned {
					if u != "" {
						users = append(users, u)
					}
				}
				patch["assignedUsers"] = users
			}
			if len(patch) == 0 {
				return usageError{fmt.Errorf("nothing to update: give --allow-new-session, --assigned-user, --standard-features or --address")}
			}
			h, err := c.UpdateSessionHost(cmd.Context(), pool, name, patch)
			if err != nil {
				return fail(err)
			}
			return a.result(cmd, h, sessionHostColumns)
		},
	}
	f := cmd.Flags()
	poolNameVar(f, &pool, "host-pool", "", "host pool name")
	hostNameVar(f, &name, "name", "n", "session host name")
	f.Var(boolValue{&allowNew}, "allow-new-session", "false drains the host: it takes no new session")
	f.Var(boolValue{&standard}, "standard-features", "the host supports multi-session, unauthenticated access and all protocols")
	f.StringArrayVar(&assigned, "assigned-user", nil, "user assigned to this personal host; repeat for several, \"\" for none (replaces the list)")
	f.Var(addressValue{&address}, "address", "host:port clients connect to")
	_ = cmd.RegisterFlagCompletionFunc("allow-new-session", fixedCompletion("true", "false"))
	_ = cmd.RegisterFlagCompletionFunc("standard-features", fixedCompletion("true", "false"))
	requireFlags(cmd, "host-pool", "name")
	return cmd
}

func newSessionHostDeleteCmd(a *admin) *cobra.Command {
	var (
		pool, name string
		force      bool
	)
	cmd := &cobra.Command{
		Use:   "delete --host-pool POOL --name HOST [--force]",
		Short: "Remove a session host and revoke its credential (refused while it has sessions unless --force)",
		Args:  cobra.NoArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			c, err := a.client()
			if err != nil {
				return err
			}
			if err := c.DeleteSessionHost(cmd.Context(), pool, name, force); err != nil {
				return fail(err)
			}
			return a.deleted(cmd, deletion{Deleted: "sessionhost", HostPool: pool, Name: name})
		},
	}
	poolNameVar(cmd.Flags(), &pool, "host-pool", "", "host pool name")
	hostNameVar(cmd.Flags(), &name, "name", "n", "session host name")
	cmd.Flags().BoolVar(&force, "force", false, "delete even while sessions exist")
	requireFlags(cmd, "host-pool", "name")
	return cmd
}

func newSessionHostResetRegistrationCmd(a *admin) *cobra.Command {
	var pool, name string
	cmd := &cobra.Command{
		Use:   "reset-registration --host-pool POOL --name HOST",
		Short: "Revoke a host's credential and let the next agent that registers its name take it (a new machine behind the name)",
		Args:  cobra.NoArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			c, err := a.client()
			if err != nil {
				return err
			}
			if err := c.ResetRegistration(cmd.Context(), pool, name); err != nil {
				return fail(err)
			}
			// No body from the API, as a delete's: what was reset, when
			// asked with --output or --query (SPEC §11).
			return a.result(cmd, struct {
				Reset    string `json:"reset"`
				HostPool string `json:"hostPool"`
				Name     string `json:"name"`
			}{"registration", pool, name}, nil)
		},
	}
	poolNameVar(cmd.Flags(), &pool, "host-pool", "", "host pool name")
	hostNameVar(cmd.Flags(), &name, "name", "n", "session host name")
	requireFlags(cmd, "host-pool", "name")
	return cmd
}

func newSessionHostStartCmd(a *admin) *cobra.Command {
	var pool, name string
	cmd := &cobra.Command{
		Use:   "start --host-pool POOL --name HOST",
		Short: "Start a Stopped or Unknown session host, or one whose start timed out (Starting for 10 minutes), through the pool's power driver (R-A4); it takes sessions once its agent heartbeats",
		Args:  cobra.NoArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			c, err := a.client()
			if err != nil {
				return err
			}
			h, err := c.StartSessionHost(cmd.Context(), pool, name)
			if err != nil {
				return fail(err)
			}
			return a.show(cmd, h, sessionHostColumns)
		},
	}
	poolNameVar(cmd.Flags(), &pool, "host-pool", "", "host pool name")
	hostNameVar(cmd.Flags(), &name, "name", "n", "session host name")
	requireFlags(cmd, "host-pool", "name")
	return cmd
}

func newSessionHostStopCmd(a *admin) *cobra.Command {
	var (
		pool, name string
		force      bool
	)
	cmd := &cobra.Command{
		Use:   "stop --host-pool POOL --name HOST [--force]",
		Short: "Stop a session host through the pool's power driver (refused while it has sessions unless --force)",
		Args:  cobra.NoArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			c, err := a.client()
			if err != nil {
				return err
			}
			h, err := c.StopSessionHost(cmd.Context(), pool, name, force)
			if err != nil {
				return fail(err)
			}
			return a.show(cmd, h, sessionHostColumns)
		},
	}
	poolNameVar(cmd.Flags(), &pool, "host-pool", "", "host pool name")
	hostNameVar(cmd.Flags(), &name, "name", "n", "session host name")
	cmd.Flags().BoolVar(&force, "force", false, "stop even while sessions exist (their users lose them)")
	requireFlags(cmd, "host-pool", "name")
	return cmd
}

// hostMessageColumns is the table of a message to a host's sessions.
var hostMessageColumns = []column{
	{"HostPool", "hostPool"},
	{"SessionHost", "sessionHost"},
	{"Queued", "queued"},
	{"AlreadyQueued", "alreadyQueued"},
}

// newSessionHostSendMessageCmd is send-message to every user of a host,
// which AVD leaves to scripts over its sessions: one message queued for
// each Active and Disconnected session (R-S4).
func newSessionHostSendMessageCmd(a *admin) *cobra.Command {
	var pool, name, message string
	cmd := &cobra.Command{
		Use:   "send-message --host-pool POOL --name HOST --message TEXT",
		Short: "Send a message to every user of a session host (its Active and Disconnected sessions), e.g. before maintenance",
		Args:  cobra.NoArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			c, err := a.client()
			if err != nil {
				return err
			}
			m, err := c.SendHostMessage(cmd.Context(), pool, name, message)
			if err != nil {
				return fail(err)
			}
			printWarnings(cmd, m.Warnings) // R-S4: a host that cannot show it now, or no session
			return a.show(cmd, m, hostMessageColumns)
		},
	}
	poolNameVar(cmd.Flags(), &pool, "host-pool", "", "host pool name")
	hostNameVar(cmd.Flags(), &name, "name", "n", "session host name")
	textVar(cmd.Flags(), &message, "message", vdibroker.MaxMessageLen, fmt.Sprintf("the message text, as usersession send-message's, at most %d characters", vdibroker.MaxMessageLen))
	requireFlags(cmd, "host-pool", "name", "message")
	return cmd
}

// writeHostReport prints under the table whether the host could take a new
// session now and why: the console host page's list, in the same words.
func (a *admin) writeHostReport(cmd *cobra.Command, c *vhttp.Client, pool, name string) error {
	p, err := c.GetHostPool(cmd.Context(), pool)
	if err != nil {
		return fail(err)
	}
	list, err := c.ListSessionHosts(cmd.Context(), pool)
	if err != nil {
		return fail(err)
	}
	hosts := make([]vdibroker.SessionHost, len(list))
	for i, h := range list {
		hosts[i] = *h
	}
	verdict, checks := console.HostReport(p.HostPool, hosts, name, time.Now())
	w := cmd.OutOrStdout()
	// The texts quote the host's report and who drained it: escaped as
	// the table's cells are (R-SEC).
	fmt.Fprintf(w, "\nCan it take a new session now? %s. %s\n", escapeTerminal(verdict.Title, ""), escapeTerminal(verdict.Text, ""))
	marks := map[string]string{"ok": "ok  ", "warn": "warn", "bad": "no  ", "info": "info"}
	for _, ck := range checks {
		fmt.Fprintf(w, "  %s  %s: %s\n", marks[ck.State], escapeTerminal(ck.Title, ""), escapeTerminal(ck.Text, ""))
	}
	return nil
}
