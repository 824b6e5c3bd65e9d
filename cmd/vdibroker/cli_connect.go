package main

import (
	"context"
	"errors"
	"fmt"

	"github.com/spf13/cobra"

	"github.com/vdibroker/vdibroker"
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
		Use:   "connect --host-pool POOL [--user USER] [--session-host H] [--dry-run] [--rdp-file PATH]",
		Short: "Place a user's session in a host pool and get its connection (.rdp) file",
		Long: `Place a user's session: the answer is a new Pending session or the
user's existing one. --dry-run shows the decision and stores nothing.
--rdp-file writes the connection file a Remote Desktop client opens.
` + connectUserHelp,
		Args: cobra.NoArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			c, err := adm.client()
			if err != nil {
				return err
			}
			if user, err = adm.connectUser(cmd, c, user); err != nil {
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
	f.StringVar(&user, "user", "", "user to place (default with a User token: its own user)")
	hostNameVar(f, &host, "session-host", "", "the assigned host to use (MultiplePersistent pools)")
	f.BoolVar(&dryRun, "dry-run", false, "compute the decision only; store nothing")
	f.StringVar(&rdpFile, "rdp-file", "", "write the .rdp connection file to this path")
	_ = cmd.RegisterFlagCompletionFunc("host-pool", adm.completePools)
	_ = cmd.RegisterFlagCompletionFunc("session-host", func(c *cobra.Command, args []string, s string) ([]string, cobra.ShellCompDirective) {
		return adm.completeHosts(c, args, s)
	})
	requireFlags(cmd, "host-pool")
	adm.suggestNames(cmd, kindNone)
	return cmd
}

// connectUserHelp ends the help of the connect commands.
const connectUserHelp = `Without --user, a User token connects its own user, the only one it may
(whoami); any other token names the user with --user.`

// connectUser is the user a connect command places: --user's, or without
// it the token's own user when the token is a User's (tokenUser). A
// token whose role connects no one (Reader, Helpdesk) is told so, as the
// broker would answer a connect with --user (R-SEC), from whoami's role
// and without sending that connect; any other may connect any user, and
// is told to name one. A role this CLI does not know (a newer broker's)
// is the broker's to judge: this build's table would refuse it, so it
// too is told to name one.
func (a *admin) connectUser(cmd *cobra.Command, c *vhttp.Client, user string) (string, error) {
	user, who, err := a.tokenUser(cmd, c, user)
	if err != nil || user != "" {
		return user, err
	}
	if knownRole(who.Role) {
		if err := vdibroker.Authorize(&vdibroker.Principal{Role: who.Role}, vdibroker.ActionConnect, vdibroker.Target{}); err != nil {
			return "", fail(err)
		}
	}
	return "", usageError{fmt.Errorf("--user: required with this token (role %s): only a User token connects its own user without it", who.Role)}
}

// knownRole says whether role is one this build's Authorize decides.
func knownRole(role string) bool {
	switch role {
	case vdibroker.RoleAdmin, vdibroker.RoleContributor, vdibroker.RoleReader,
		vdibroker.RoleHelpdesk, vdibroker.RoleUser, vdibroker.RoleGateway:
		return true
	}
	return false
}

// tokenUser is the user a command that takes --user acts for: --user's,
// or without it the token's own user when the token is a User's, which
// may act for no other (R-E5), so --user would only repeat it; the
// broker says whose the token is (whoami). For any other token it is ""
// with whoami's answer, for the caller to say why --user is needed.
func (a *admin) tokenUser(cmd *cobra.Command, c *vhttp.Client, user string) (string, *vhttp.WhoAmI, error) {
	if err := emptyFlag(cmd, "user"); err != nil {
		return "", nil, err
	}
	if cmd.Flags().Changed("user") {
		return user, nil, nil
	}
	who, err := a.whoAmI(cmd.Context(), c)
	if err != nil {
		return "", nil, err
	}
	if who.Role == vdibroker.RoleUser && who.Subject != "" {
		return who.Subject, who, nil
	}
	return "", who, nil
}

// whoAmI asks the broker whose c's token is (its answer's error as the
// CLI shows it, fail).
func (a *admin) whoAmI(ctx context.Context, c *vhttp.Client) (*vhttp.WhoAmI, error) {
	who, err := a.whoAmIOnce(ctx, c)
	if err != nil {
		return nil, fail(err)
	}
	return who, nil
}

// whoAmIOnce is the broker's answer to whoami for c's server and token,
// asked once for the command and then kept: a later step of the same
// command that needs the token's role (tokenMayRead in nameHint, after
// a logoff's 404 with a User token) reuses what the command learned
// rather than asking again. The key keeps one token's answer from
// being taken for another's; an error is not kept.
func (a *admin) whoAmIOnce(ctx context.Context, c *vhttp.Client) (*vhttp.WhoAmI, error) {
	key := c.BaseURL + "\x00" + c.Token
	if a.who != nil && a.whoKey == key {
		return a.who, nil
	}
	who, err := c.WhoAmI(ctx)
	if err != nil {
		return nil, err
	}
	a.who, a.whoKey = who, key
	return who, nil
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
