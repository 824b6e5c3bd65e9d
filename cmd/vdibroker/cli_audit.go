package main

import (
	"fmt"
	"time"

	"github.com/spf13/cobra"

	vhttp "github.com/vdibroker/vdibroker/http"
)

// auditColumns is the table of audit entries; --output json
// shows every field, before and after included. Name is who the
// principal is (a token's subject: the user of a User token), which its
// Id (a token id) does not say; RequestId is what a portal user reads
// out as her reference and what the log lines carry.
var auditColumns = []column{
	{"Seq", "seq"},
	{"Time", "time"},
	{"Principal", "principal.kind"},
	{"Id", "principal.id"},
	{"Name", "principal.name"},
	{"Role", "principal.role"},
	{"Action", "action"},
	{"Target", "target"},
	{"Outcome", "outcome"},
	{"RemoteAddress", "remoteAddress"},
	{"RequestId", "requestId"},
	{"Error", "error"},
}

// The audit command is registered here, not in newAdminCommands, so that
// this file alone adds it.
func init() { rootCmd.AddCommand(newAuditCmd()) }

func newAuditCmd() *cobra.Command {
	cmd := &cobra.Command{
		Use:   "audit",
		Short: "Read the audit trail: who changed what, from where (admin, Contributor and Helpdesk tokens)",
	}
	a := addAdminFlags(cmd)
	cmd.AddCommand(newAuditListCmd(a))
	return cmd
}

func newAuditListCmd(a *admin) *cobra.Command {
	var (
		q     vhttp.AuditQuery
		since string
	)
	cmd := &cobra.Command{
		Use:   "list [--target T] [--principal P] [--action A] [--request-id ID] [--since 24h|2026-01-02T03:04:05Z] [--newest]",
		Short: "List audit entries, oldest first (newest first with --newest)",
		Args:  cobra.NoArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			// A filter given as "" is refused, not taken for no filter.
			if err := emptyFlag(cmd, "target", "principal", "action", "request-id", "since"); err != nil {
				return err
			}
			if since != "" {
				t, err := parseSince(since, time.Now())
				if err != nil {
					return err
				}
				q.Since = t
			}
			c, err := a.client()
			if err != nil {
				return err
			}
			list, err := c.ListAudit(cmd.Context(), q)
			if err != nil {
				return fail(err)
			}
			return a.show(cmd, list, auditColumns)
		},
	}
	f := cmd.Flags()
	f.StringVar(&q.Target, "target", "", "an API path below /api/v1, e.g. hostpools/p1/sessionhosts/h1; ending in / selects everything below it")
	f.StringVar(&q.Principal, "principal", "", "token id or OIDC subject, or a token's subject (a user's name, in any case)")
	f.StringVar(&q.Action, "action", "", "e.g. sessionhost.update, token.create, signin")
	f.StringVar(&q.RequestID, "request-id", "", "a request's id: the reference the user portal shows a user beside a refusal (\"Reference for your helpdesk\")")
	f.StringVar(&since, "since", "", "entries from this time on: an RFC 3339 time, or a duration back from now (24h)")
	f.BoolVar(&q.Newest, "newest", false, "newest first")
	return cmd
}

// parseSince reads --since: a duration back from now, or an RFC 3339 time.
func parseSince(s string, now time.Time) (time.Time, error) {
	if d, err := time.ParseDuration(s); err == nil {
		if d < 0 {
			return time.Time{}, usageError{fmt.Errorf("--since %s: must not be negative", s)}
		}
		return now.Add(-d), nil
	}
	t, err := time.Parse(time.RFC3339Nano, s)
	if err != nil {
		return time.Time{}, usageError{fmt.Errorf("--since %q: want a duration (24h) or an RFC 3339 time (2026-01-02T03:04:05Z)", s)}
	}
	return t, nil
}
