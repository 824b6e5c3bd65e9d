package main

import (
	"errors"
	"fmt"

	"github.com/spf13/cobra"

	vhttp "github.com/vdibroker/vdibroker/http"
)

// connectColumns is the table of a connect answer (SPEC §9).
var connectColumns = []column{
	{"SessionId", "sessionId"},
	{"User", "user"},
	{"SessionHost", "sessionHost"},
	{"Address", "address"},
	{"State", "state"},
	{"Reconnect", "reconnect"},
	{"DryRun", "dryRun"},
}

func newConnectCmd() *cobra.Command {
	var (
		pool, user, host, rdpFile string
		dryRun                    bool
		adm                       *admin // set below, before the command runs
	)
	cmd := &cobra.Command{
		Use:   "connect --host-pool POOL --user USER [--session-host H] [--dry-run] [--rdp-file PATH]",
		Short: "Place a user's session in a host pool and get its connection (.rdp) file",
		Long: `Place a user's session: the answer is a new Pending session or the
user's existing one. --dry-run shows the decision and stores nothing.
--rdp-file writes the connection file a Remote Desktop client opens.`,
		Args: cobra.NoArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			c, err := adm.client()
			if err != nil {
				return err
			}
			res, err := c.Connect(cmd.Context(), pool, vhttp.ConnectRequest{User: user, SessionHost: host, DryRun: dryRun})
			if err != nil {
				return fail(err)
			}
			if err := writeRDPFile(rdpFile, res.RDPFile); err != nil {
				return err
			}
			return adm.show(cmd, res, connectColumns)
		},
	}
	adm = addAdminFlags(cmd)
	f := cmd.Flags()
	poolNameVar(f, &pool, "host-pool", "", "host pool name")
	f.StringVar(&user, "user", "", "user to place")
	hostNameVar(f, &host, "session-host", "", "the assigned host to use (MultiplePersistent pools)")
	f.BoolVar(&dryRun, "dry-run", false, "compute the decision only; store nothing")
	f.StringVar(&rdpFile, "rdp-file", "", "write the .rdp connection file to this path")
	_ = cmd.RegisterFlagCompletionFunc("host-pool", adm.completePools)
	_ = cmd.RegisterFlagCompletionFunc("session-host", func(c *cobra.Command, args []string, s string) ([]string, cobra.ShellCompDirective) {
		return adm.completeHosts(c, args, s)
	})
	requireFlags(cmd, "host-pool", "user")
	adm.suggestNames(cmd, kindNone)
	return cmd
}

// writeRDPFile writes a connect's .rdp text to path (--rdp-file), owner
// only: it names the host and the user; nothing when path is empty.
func writeRDPFile(path, text string) error {
	if path == "" {
		return nil
	}
	if text == "" {
		return errors.New("the broker sent no .rdp file for this session")
	}
	if err := writeFileAtomic(path, []byte(text), 0o600); err != nil {
		return fmt.Errorf("write --rdp-file: %w", err)
	}
	return nil
}
