package main

import (
	"fmt"
	"time"

	"github.com/spf13/cobra"

	"github.com/vdibroker/vdibroker"
	vhttp "github.com/vdibroker/vdibroker/http"
)

// registrationTokenColumns is the table of a new registration token.
var registrationTokenColumns = []column{
	{"HostPool", "hostPool"},
	{"ExpirationTime", "expirationTime"},
	{"Token", "token"},
}

// tokenColumns is the table of an API token; the secret column is empty in
// lists (the server never shows a secret twice).
var tokenColumns = []column{
	{"Id", "id"},
	{"Role", "role"},
	{"Subject", "subject"},
	{"CreateTime", "createTime"},
	{"ExpirationTime", "expirationTime"},
}

var newTokenColumns = append(tokenColumns[:len(tokenColumns):len(tokenColumns)], column{"Token", "token"})

func newRegistrationTokenCmd() *cobra.Command {
	cmd := &cobra.Command{
		Use:     "registration-token",
		Aliases: []string{"registrationtoken"},
		Short:   "Issue tokens that let agents register session hosts into a pool",
	}
	a := addAdminFlags(cmd)
	var (
		pool    string
		expires time.Duration
	)
	create := &cobra.Command{
		Use:   "create --host-pool POOL [--expires 24h]",
		Short: "Issue a registration token (valid 1h..648h, i.e. 27 days)",
		Args:  cobra.NoArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			secs, err := durationSeconds(expires)
			if err != nil {
				return err
			}
			c, err := a.client()
			if err != nil {
				return err
			}
			t, err := c.CreateRegistrationToken(cmd.Context(), pool, vhttp.RegistrationTokenRequest{ExpiresInSeconds: secs})
			if err != nil {
				return fail(err)
			}
			return a.show(cmd, t, registrationTokenColumns)
		},
	}
	create.Flags().StringVar(&pool, "host-pool", "", "host pool name")
	create.Flags().DurationVar(&expires, "expires", time.Hour, "how long the token is valid, 1h..648h")
	requireFlags(create, "host-pool")
	cmd.AddCommand(create)
	a.completeNames(cmd, "")
	return cmd
}

func newTokenCmd() *cobra.Command {
	cmd := &cobra.Command{
		Use:   "token",
		Short: "Issue, list and revoke API tokens (admin token only)",
	}
	a := addAdminFlags(cmd)
	cmd.AddCommand(newTokenCreateCmd(a), newTokenListCmd(a), newTokenDeleteCmd(a))
	return cmd
}

func newTokenCreateCmd(a *admin) *cobra.Command {
	var (
		role, subject string
		expires       time.Duration
	)
	cmd := &cobra.Command{
		Use:   "create --role Reader|Contributor|User --subject S [--expires 720h]",
		Short: "Issue an API token; its secret is shown only now",
		Args:  cobra.NoArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			secs, err := durationSeconds(expires)
			if err != nil {
				return err
			}
			c, err := a.client()
			if err != nil {
				return err
			}
			t, err := c.CreateToken(cmd.Context(), vhttp.TokenRequest{Role: role, Subject: subject, ExpiresInSeconds: secs})
			if err != nil {
				return fail(err)
			}
			return a.show(cmd, t, newTokenColumns)
		},
	}
	f := cmd.Flags()
	f.StringVar(&role, "role", "", "Reader (read only), Contributor (all admin calls) or User (connect as the subject only)")
	f.StringVar(&subject, "subject", "", "who the token is for; for the User role, the user name it may connect as")
	f.DurationVar(&expires, "expires", 0, "how long the token is valid, e.g. 720h (0: never expires)")
	_ = cmd.RegisterFlagCompletionFunc("role", fixedCompletion(vdibroker.RoleReader, vdibroker.RoleContributor, vdibroker.RoleUser))
	requireFlags(cmd, "role", "subject")
	return cmd
}

func newTokenListCmd(a *admin) *cobra.Command {
	return &cobra.Command{
		Use:   "list",
		Short: "List API tokens (without their secrets)",
		Args:  cobra.NoArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			c, err := a.client()
			if err != nil {
				return err
			}
			tokens, err := c.ListTokens(cmd.Context())
			if err != nil {
				return fail(err)
			}
			return a.show(cmd, tokens, tokenColumns)
		},
	}
}

func newTokenDeleteCmd(a *admin) *cobra.Command {
	var id string
	cmd := &cobra.Command{
		Use:   "delete --id ID",
		Short: "Revoke an API token",
		Args:  cobra.NoArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			c, err := a.client()
			if err != nil {
				return err
			}
			return fail(c.DeleteToken(cmd.Context(), id))
		},
	}
	cmd.Flags().StringVar(&id, "id", "", "token id (see token list)")
	requireFlags(cmd, "id")
	return cmd
}

// durationSeconds converts an --expires duration to whole seconds; the
// server checks the range.
func durationSeconds(d time.Duration) (int, error) {
	if d < 0 {
		return 0, usageError{fmt.Errorf("--expires %s: must not be negative", d)}
	}
	if d%time.Second != 0 {
		return 0, usageError{fmt.Errorf("--expires %s: must be whole seconds", d)}
	}
	return int(d / time.Second), nil
}
