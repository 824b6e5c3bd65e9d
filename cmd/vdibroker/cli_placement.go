package main

import (
	"io"
	"strings"

	"github.com/spf13/cobra"

	"github.com/vdibroker/vdibroker/placement"
)

func newPlacementCmd() *cobra.Command {
	cmd := &cobra.Command{
		Use:   "placement",
		Short: "Explain placement decisions",
	}
	a := addAdminFlags(cmd)
	cmd.AddCommand(newPlacementShowCmd(a))
	a.completeNames(cmd, "")
	a.suggestNames(cmd, kindNone)
	return cmd
}

func newPlacementShowCmd(a *admin) *cobra.Command {
	var pool, session string
	cmd := &cobra.Command{
		Use:        "show --host-pool POOL --session ID",
		Short:      "Explain why a session went where it went",
		SuggestFor: []string{"explain", "why", "describe"},
		Long: `Show the decision record of a placement in words: the candidates, why
each excluded host was excluded, and how the chosen host was picked (bucket,
rank, round robin, random draw). --output json or yaml gives the raw record.`,
		Args: cobra.NoArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			c, err := a.client()
			if err != nil {
				return err
			}
			rec, err := c.Placement(cmd.Context(), pool, session)
			if err != nil {
				return fail(err)
			}
			o := a.outputFor(formatTable)
			if o.Format == formatTable && o.Query == "" {
				// The console's words too; they name the user and quote
				// the hosts' reports: escaped as a table's cells (R-SEC).
				var words strings.Builder
				if err := placement.WriteText(&words, rec); err != nil {
					return err
				}
				_, err := io.WriteString(cmd.OutOrStdout(), escapeTerminal(words.String(), "\n"))
				return err
			}
			return o.print(cmd.OutOrStdout(), rec, explainColumns)
		},
	}
	poolNameVar(cmd.Flags(), &pool, "host-pool", "", "host pool name")
	cmd.Flags().StringVar(&session, "session", "", "user session id")
	requireFlags(cmd, "host-pool", "session")
	return cmd
}

// explainColumns is the tsv (and queried table) form of a decision record:
// one line, the outcome.
var explainColumns = []column{
	{"User", "user"},
	{"Algorithm", "algorithm"},
	{"Chosen", "chosen"},
	{"Bucket", "bucket"},
	{"Rank", "rank"},
	{"Reconnect", "reconnect"},
}
