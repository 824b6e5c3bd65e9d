package main

import (
	"fmt"
	"io"
	"sort"
	"strings"
	"time"

	"github.com/spf13/cobra"

	"github.com/vdibroker/vdibroker"
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
	return cmd
}

func newPlacementShowCmd(a *admin) *cobra.Command {
	var pool, session string
	cmd := &cobra.Command{
		Use:   "show --host-pool POOL --session ID",
		Short: "Explain why a session went where it went",
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
				return writeExplain(cmd.OutOrStdout(), rec)
			}
			return o.print(cmd.OutOrStdout(), rec, explainColumns)
		},
	}
	cmd.Flags().StringVar(&pool, "host-pool", "", "host pool name")
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

// reasonWords says each exclusion reason of R-C7 as a person would.
var reasonWords = map[string]string{
	placement.ReasonDrained:          "drain mode",
	placement.ReasonUnavailable:      "unavailable",
	placement.ReasonShutdown:         "shut down",
	placement.ReasonAtLimit:          "at maxSessionLimit",
	placement.ReasonHostThreshold:    "over the host's own threshold",
	placement.ReasonNotAssigned:      "not assigned to this user",
	placement.ReasonAssignedToOthers: "assigned to another user",
}

// writeExplain writes a decision record in words, for example:
//
//	Placement of alice in host pool contosohp01 (LoadIndex), 2026-11-29T13:40:00Z
//	Candidates:
//	  sh-02  2 sessions, 0 connecting, load index 10, bucket 1
//	  sh-03  1 session, 0 connecting, load index 5, bucket 1
//	Excluded:
//	  sh-07 excluded: drain mode
//	Decision:
//	  chosen sh-03: bucket 1, round robin after sh-02
func writeExplain(w io.Writer, e *placement.Explain) error {
	var b strings.Builder
	fmt.Fprintf(&b, "Placement of %s in host pool %s (%s)", e.User, e.Pool, e.Algorithm)
	if !e.Time.IsZero() {
		fmt.Fprintf(&b, ", %s", e.Time.UTC().Format(time.RFC3339))
	}
	b.WriteString("\n")
	if len(e.Candidates) > 0 {
		if e.CandidateCount > len(e.Candidates) {
			fmt.Fprintf(&b, "Candidates (first %d of %d):\n", len(e.Candidates), e.CandidateCount)
		} else {
			b.WriteString("Candidates:\n")
		}
		width := 0
		for _, c := range e.Candidates {
			width = max(width, len(c.Host))
		}
		for _, c := range e.Candidates {
			fmt.Fprintf(&b, "  %-*s  %s, %d connecting, load index %d", width, c.Host, plural(c.Sessions, "session"), c.Connecting, c.LoadIndex)
			if c.Bucket > 0 {
				fmt.Fprintf(&b, ", bucket %d", c.Bucket)
			}
			b.WriteString("\n")
		}
	}
	if len(e.Excluded) > 0 {
		if total, counts := excludedTotal(e); total > len(e.Excluded) {
			fmt.Fprintf(&b, "Excluded (first %d of %d: %s):\n", len(e.Excluded), total, counts)
		} else {
			b.WriteString("Excluded:\n")
		}
		for _, x := range e.Excluded {
			fmt.Fprintf(&b, "  %s excluded: %s\n", x.Host, exclusionWords(x))
		}
	}
	b.WriteString("Decision:\n")
	b.WriteString("  " + decisionWords(e) + "\n")
	if e.RaisedThreshold > 0 {
		fmt.Fprintf(&b, "  load index threshold raised to %d for this decision (too few hosts in bucket 1)\n", e.RaisedThreshold)
	}
	if e.Note != "" {
		fmt.Fprintf(&b, "  note: %s\n", e.Note)
	}
	_, err := io.WriteString(w, b.String())
	return err
}

// excludedTotal counts every excluded host (the record lists only the
// first few) and says the counts per reason, most first.
func excludedTotal(e *placement.Explain) (int, string) {
	total := 0
	reasons := make([]string, 0, len(e.ExcludedCounts))
	for r, n := range e.ExcludedCounts {
		total += n
		reasons = append(reasons, r)
	}
	sort.Slice(reasons, func(i, j int) bool {
		ni, nj := e.ExcludedCounts[reasons[i]], e.ExcludedCounts[reasons[j]]
		if ni != nj {
			return ni > nj
		}
		return reasons[i] < reasons[j]
	})
	parts := make([]string, len(reasons))
	for i, r := range reasons {
		words, ok := reasonWords[r]
		if !ok {
			words = r
		}
		parts[i] = fmt.Sprintf("%d %s", e.ExcludedCounts[r], words)
	}
	return total, strings.Join(parts, ", ")
}

func exclusionWords(x placement.Exclusion) string {
	words, ok := reasonWords[x.Reason]
	if !ok {
		words = x.Reason
	}
	if x.Detail != "" && x.Detail != words {
		words += " (" + x.Detail + ")"
	}
	return words
}

// decisionWords says how the chosen host was picked, or why none was.
func decisionWords(e *placement.Explain) string {
	if e.Chosen == "" {
		if e.NoCapacityReason != "" {
			return "no host can take the session: " + e.NoCapacityReason
		}
		return "no host chosen"
	}
	if e.Reconnect {
		return fmt.Sprintf("reconnect to the user's existing session on %s", e.Chosen)
	}
	var parts []string
	switch {
	case e.Bucket == 1 && e.RoundRobinAfter != "":
		parts = append(parts, "bucket 1, round robin after "+e.RoundRobinAfter)
	case e.Bucket == 1:
		parts = append(parts, "bucket 1, round robin from the first host")
	case e.Bucket > 1:
		parts = append(parts, fmt.Sprintf("bucket %d, lowest load index", e.Bucket))
	case e.Draw != nil:
		parts = append(parts, fmt.Sprintf("random draw %d of %d (0-based) among the least loaded half", e.Draw.Value, e.Draw.Of))
	case e.Algorithm == vdibroker.DepthFirst:
		parts = append(parts, "most sessions, first in query order on a tie")
	}
	if e.Rank > 0 && len(e.Candidates) > 1 {
		parts = append(parts, fmt.Sprintf("rank %d", e.Rank))
	}
	if len(parts) == 0 {
		return "chosen " + e.Chosen
	}
	return "chosen " + e.Chosen + ": " + strings.Join(parts, ", ")
}

// plural says "1 session", "2 sessions".
func plural(n int, noun string) string {
	switch {
	case n == 1:
		return fmt.Sprintf("1 %s", noun)
	default:
		return fmt.Sprintf("%d %ss", n, noun)
	}
}
