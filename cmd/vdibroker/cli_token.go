package main

import (
	"fmt"
	"slices"
	"time"

	"github.com/spf13/cobra"

	"github.com/vdibroker/vdibroker"
	vhttp "github.com/vdibroker/vdibroker/http"
)

// registrationTokenColumns is the table of a new registration token: its
// id, which registration-token delete --id takes, comes last, so that the
// secret keeps its place in tsv (a script's cut -f3).
var registrationTokenColumns = []column{
	{"HostPool", "hostPool"},
	{"ExpirationTime", "expirationTime"},
	{"Token", "token"},
	{"Id", "id"},
}

// registrationTokenListColumns is the table of registration-token list.
var registrationTokenListColumns = []column{
	{"Id", "id"},
	{"HostPool", "hostPool"},
	{"ExpirationTime", "expirationTime"},
	{"MaxHosts", "maxHosts"},
	{"Hosts", "hosts"},
	{"SessionHost", "sessionHost"},
}

// tokenColumns is the table of an API token; the secret column is empty in
// lists (the server never shows a secret twice).
var tokenColumns = []column{
	{"Id", "id"},
	{"Role", "role"},
	{"Subject", "subject"},
	{"CreateTime", "createTime"},
	{"ExpirationTime", "expirationTime"},
	tokenPoolsColumn,
	tokenGatewayColumn,
}

// tokenPoolsColumn names the pools a token is scoped to, or says it
// covers every pool, rather than a blank read as none. It comes last, so
// that the columns of earlier releases keep their places in tsv (a
// script's cut -f).
var tokenPoolsColumn = column{"HostPools", "hostPools || '(all)'"}

// tokenGatewayColumn names the gateway a Gateway token is for (R-GW4),
// or says that one issued before tokens named theirs reports as any
// gateway; empty for the other roles. It comes after the pools, for the
// same reason as they.
var tokenGatewayColumn = column{"Gateway", "role == 'Gateway' && (gateway || '(any name)') || ''"}

// newTokenColumns is the table of a token just made: the secret where it
// was before the pools were shown (a script's cut -f6), then the pools.
var newTokenColumns = append(slices.Clone(tokenColumns[:len(tokenColumns)-2]), column{"Token", "token"}, tokenPoolsColumn, tokenGatewayColumn)

func newRegistrationTokenCmd() *cobra.Command {
	cmd := &cobra.Command{
		Use:     "registration-token",
		Aliases: []string{"registrationtoken"},
		Short:   "Issue tokens that let agents register session hosts into a pool",
	}
	a := addAdminFlags(cmd)
	var (
		pool        string
		expires     time.Duration
		maxHosts    int
		sessionHost string
	)
	create := &cobra.Command{
		Use:   "create --host-pool POOL [--expires 24h] [--max-hosts N] [--session-host HOST]",
		Short: "Issue a registration token (valid 1h..648h, i.e. 27 days)",
		Args:  cobra.NoArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			secs, err := expiresSeconds(expires, registrationTokenMin, registrationTokenMax, false)
			if err != nil {
				return err
			}
			c, err := a.client()
			if err != nil {
				return err
			}
			t, err := c.CreateRegistrationToken(cmd.Context(), pool, vhttp.RegistrationTokenRequest{ExpiresInSeconds: secs, MaxHosts: maxHosts, SessionHost: sessionHost})
			if err != nil {
				return fail(err)
			}
			return a.show(cmd, t, registrationTokenColumns)
		},
	}
	poolNameVar(create.Flags(), &pool, "host-pool", "", "host pool name")
	create.Flags().DurationVar(&expires, "expires", time.Hour, "how long the token is valid, 1h..648h")
	intRangeVar(create.Flags(), &maxHosts, "max-hosts", 0, 0, vdibroker.MaxRegistrationTokenHosts, " (0: no limit)", fmt.Sprintf("how many new hosts the token may register, 0..%d (1: a one-use token; 0: no limit)", vdibroker.MaxRegistrationTokenHosts))
	hostNameVar(create.Flags(), &sessionHost, "session-host", "", "issue the token for this one session host: it registers no other name, and only such a token claims a host an admin created (PUT /api/v1/hostpools/POOL/sessionhosts/HOST) that never registered")
	requireFlags(create, "host-pool")
	var listPool string
	list := &cobra.Command{
		Use:   "list --host-pool POOL",
		Short: "List a pool's registration tokens (never their secrets)",
		Args:  cobra.NoArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			c, err := a.client()
			if err != nil {
				return err
			}
			l, err := c.ListRegistrationTokens(cmd.Context(), listPool)
			if err != nil {
				return fail(err)
			}
			return a.show(cmd, l, registrationTokenListColumns)
		},
	}
	poolNameVar(list.Flags(), &listPool, "host-pool", "", "host pool name")
	requireFlags(list, "host-pool")
	var delPool, delID string
	del := &cobra.Command{
		Use:   "delete --host-pool POOL --id ID",
		Short: "Revoke a registration token: it registers no more hosts (those it registered keep their credentials)",
		Args:  cobra.NoArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			c, err := a.client()
			if err != nil {
				return err
			}
			if err := c.DeleteRegistrationToken(cmd.Context(), delPool, delID); err != nil {
				return fail(err)
			}
			return a.deleted(cmd, deletion{Deleted: "registration-token", HostPool: delPool, ID: delID})
		},
	}
	poolNameVar(del.Flags(), &delPool, "host-pool", "", "host pool name")
	del.Flags().StringVar(&delID, "id", "", "the token's id (from list)")
	requireFlags(del, "host-pool", "id")
	cmd.AddCommand(create, list, del)
	a.completeNames(cmd, "")
	a.suggestNames(cmd, kindNone)
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
		role, subject, gw string
		pools, groups     []string
		expires           time.Duration
	)
	cmd := &cobra.Command{
		Use:   "create --role Reader|Helpdesk|Contributor|User|Gateway --subject S [--gateway NAME] [--expires 720h]",
		Short: "Issue an API token; its secret is shown only now",
		Args:  cobra.NoArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			secs, err := expiresSeconds(expires, apiTokenMin, apiTokenMax, true)
			if err != nil {
				return err
			}
			c, err := a.client()
			if err != nil {
				return err
			}
			t, err := c.CreateToken(cmd.Context(), vhttp.TokenRequest{Role: role, Subject: subject, ExpiresInSeconds: secs, HostPools: pools, Groups: groups, Gateway: gw})
			if err != nil {
				return fail(err)
			}
			printWarnings(cmd, t.Warnings)
			return a.show(cmd, t, newTokenColumns)
		},
	}
	f := cmd.Flags()
	f.Var(newEnum(&role, "", vdibroker.RoleReader, vdibroker.RoleHelpdesk, vdibroker.RoleContributor, vdibroker.RoleUser, vdibroker.RoleGateway), "role", "Reader (read only), Helpdesk (read, the audit trail, and log off, disconnect and message sessions), Contributor (all admin calls), User (connect as the subject only) or Gateway (an RD gateway's tunnel reports only)")
	f.StringVar(&subject, "subject", "", "who the token is for; for the User role, the user name it may connect as; for the Gateway role, the gateway's name unless --gateway says it")
	f.StringVar(&gw, "gateway", "", "for the Gateway role: the name of the one gateway it is for, that gateway's --name (default: the subject); the broker refuses its reports under another name")
	f.StringSliceVar(&pools, "host-pools", nil, "scope the token to these host pools (repeat or comma-separate); without it the token covers every pool")
	f.StringSliceVar(&groups, "groups", nil, "for the User role: the user's groups, which entitle it through application groups and global entitlements assigned to them (R-E6)")
	f.DurationVar(&expires, "expires", 0, "how long the token is valid, 1m..87600h (10 years), e.g. 720h (default: never expires; 0 alike)")
	_ = cmd.RegisterFlagCompletionFunc("role", fixedCompletion(vdibroker.RoleReader, vdibroker.RoleHelpdesk, vdibroker.RoleContributor, vdibroker.RoleUser, vdibroker.RoleGateway))
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
			printWarnings(cmd, anyNameGatewayTokens(tokens))
			return a.show(cmd, tokens, tokenColumns)
		},
	}
}

// anyNameGatewayTokens warns of each Gateway token issued before tokens
// named their gateway (R-GW4): the broker takes the name its reports give,
// so whoever holds it may report as any gateway.
func anyNameGatewayTokens(tokens []*vdibroker.Token) []string {
	var w []string
	for _, t := range tokens {
		if t.Role == vdibroker.RoleGateway && t.Gateway == "" {
			w = append(w, fmt.Sprintf("Gateway token %s (subject %q) is for no gateway in particular: whoever holds it may report as any gateway; give each gateway a token of its own (token create --role Gateway --subject NAME, NAME its --name), then delete this one (token delete --id %s)", t.ID, t.Subject, t.ID))
		}
	}
	return w
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
			if err := c.DeleteToken(cmd.Context(), id); err != nil {
				return fail(err)
			}
			return a.deleted(cmd, deletion{Deleted: "token", ID: id})
		},
	}
	cmd.Flags().StringVar(&id, "id", "", "token id (see token list)")
	requireFlags(cmd, "id")
	return cmd
}

// The --expires ranges of SPEC §9, in the flag's unit: registration
// tokens live 1h..648h (27 days), API tokens 1m..87600h (10 years) or
// forever (0).
const (
	registrationTokenMin = time.Hour
	registrationTokenMax = 648 * time.Hour
	apiTokenMin          = time.Minute
	apiTokenMax          = 87600 * time.Hour
)

// expiresSeconds checks an --expires duration against lo..hi (and 0 when
// zeroOK) and converts it to whole seconds, so the flag's mistakes are
// said as durations, not in the API's expiresInSeconds.
func expiresSeconds(d, lo, hi time.Duration, zeroOK bool) (int, error) {
	allowed := fmt.Sprintf("%s..%s", vdibroker.DurationFlag(lo), vdibroker.DurationFlag(hi))
	if zeroOK {
		allowed += ", or 0 for never"
	}
	switch {
	case d == 0 && zeroOK:
		return 0, nil
	case d < lo || d > hi:
		return 0, usageError{fmt.Errorf("--expires %s: must be %s", vdibroker.DurationFlag(d), allowed)}
	case d%time.Second != 0:
		return 0, usageError{fmt.Errorf("--expires %s: must be whole seconds", vdibroker.DurationFlag(d))}
	}
	return int(d / time.Second), nil
}
