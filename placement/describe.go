package placement

import (
	"fmt"
	"io"
	"sort"
	"strings"
	"time"

	"github.com/vdibroker/vdibroker"
)

// This file is the one wording of a decision record (R-C7). The CLI
// (`vdibroker placement show`) prints WriteText; the console's placement
// page shows Describe's sentences and ExclusionText beside each excluded
// host. Change the words here and both change; describe_test.go holds
// them in testdata/describe/*.golden.

// reasonWords names each exclusion reason and the rule behind it.
var reasonWords = map[string]struct{ words, rule string }{
	ReasonDrained:          {"drain mode", "R-C2"},
	ReasonAutoscaleDrained: {"autoscale drain", "R-A3"},
	ReasonUnavailable:      {"unavailable", "R-H1, R-C3"},
	ReasonShutdown:         {"shut down", "R-H1, R-C3"},
	ReasonAtLimit:          {"at maxSessionLimit", "R-C4"},
	ReasonHostThreshold:    {"over the host's own threshold", "R-LI2"},
	ReasonNotAssigned:      {"not assigned to this user", "R-PE4"},
	ReasonAssignedToOthers: {"assigned to another user", "R-PE1"},
	ReasonNoRemoteApps:     {"cannot run RemoteApps", "R-E12"},
}

// ReasonText says an exclusion reason in words with its rule, for example
// "drain mode (R-C2)". An unknown reason is returned as it is.
func ReasonText(reason string) string {
	w, ok := reasonWords[reason]
	if !ok {
		return reason
	}
	return w.words + " (" + w.rule + ")"
}

// ExclusionText says why a host was excluded: the reason and the record's
// detail, for example "drain mode (R-C2): allowNewSession is false".
func ExclusionText(x Exclusion) string {
	s := ReasonText(x.Reason)
	if w, ok := reasonWords[x.Reason]; x.Detail != "" && (!ok || x.Detail != w.words) {
		s += ": " + x.Detail
	}
	return s
}

// CandidateText says a candidate's figures, for example "2 sessions, 1
// connecting, load index 10, bucket 1".
func CandidateText(c Candidate) string {
	s := fmt.Sprintf("%s, %d connecting, load index %d", plural(c.Sessions, "session"), c.Connecting, c.LoadIndex)
	if c.Bucket > 0 {
		s += fmt.Sprintf(", bucket %d", c.Bucket)
	}
	return s
}

// ExcludedSummary counts every excluded host (the record lists only the
// first ExplainLimit) and says the counts per reason, most first, for
// example (12, "7 at maxSessionLimit, 5 drain mode").
func ExcludedSummary(e *Explain) (total int, counts string) {
	if len(e.ExcludedCounts) == 0 {
		return len(e.Excluded), ""
	}
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
		words := r
		if w, ok := reasonWords[r]; ok {
			words = w.words
		}
		parts[i] = fmt.Sprintf("%d %s", e.ExcludedCounts[r], words)
	}
	return total, strings.Join(parts, ", ")
}

// Describe tells the decision as sentences: how many hosts could take the
// session, the rule that picked the winner and how (bucket, round robin,
// rank, random draw), a raised threshold, the record's note; or why no
// host could take it.
func Describe(e *Explain) []string {
	var s []string
	if e.Reconnect {
		s = append(s, fmt.Sprintf("Reconnect first (R-C1): the user already had a session in this pool, on %s, so the broker answered with it; no host was chosen anew.", e.Chosen))
		if e.Note != "" {
			s = append(s, "Note: "+e.Note+".")
		}
		return append(s, reached(e)...)
	}
	n := max(e.CandidateCount, len(e.Candidates))
	excluded, _ := ExcludedSummary(e)
	s = append(s, fmt.Sprintf("Algorithm %s: %s could take the session, %d excluded.", e.Algorithm, plural(n, "host"), excluded))
	if e.Note != "" {
		s = append(s, "Note: "+e.Note+".")
	}
	if e.StartedOnConnect {
		s = append(s, fmt.Sprintf("No running host could take the session: %s (R-C5); start VM on connect started %s for the user, who waits for it at the gateway (R-A4, R-GW5).",
			e.NoCapacityReason, e.Chosen))
		return append(s, reached(e)...)
	}
	if e.Chosen == "" {
		if e.NoCapacityReason != "" {
			return append(s, "No host can take the session: "+e.NoCapacityReason+" (R-C5).")
		}
		return append(s, "No host was chosen.")
	}
	switch e.Algorithm {
	case vdibroker.BreadthFirst:
		msg := "Breadth-first (R-BF2): candidates are sorted by session count, fewest first, then by name; "
		if e.Draw != nil {
			msg += fmt.Sprintf("the first %d (ceil(n/2)) were equally likely, and the random draw %d of 0..%d picked rank %d, %s.",
				e.Draw.Of, e.Draw.Value, e.Draw.Of-1, e.Rank, e.Chosen)
		} else {
			msg += fmt.Sprintf("%s was chosen.", e.Chosen)
		}
		s = append(s, msg)
	case vdibroker.DepthFirst:
		s = append(s, fmt.Sprintf("Depth-first (R-DF2): the candidate with the most sessions wins, ties by name, so one host fills to maxSessionLimit before the next gets any; %s ranked first.", e.Chosen))
	case vdibroker.LoadIndex:
		switch e.Bucket {
		case 1:
			from := "starting from the first host"
			if e.RoundRobinAfter != "" {
				from = "after " + e.RoundRobinAfter + ", the host chosen last"
			}
			s = append(s, fmt.Sprintf("Load index (R-LI3, R-LI4): bucket 1 (standard hosts under the load index and connecting session thresholds) takes turns in name order; %s, %s was next.", from, e.Chosen))
		case 2, 3:
			s = append(s, fmt.Sprintf("Load index (R-LI3, R-LI4): bucket 1 was empty, so bucket %d decided: lowest load index, then fewest connecting sessions, then name; %s ranked first.", e.Bucket, e.Chosen))
		default:
			s = append(s, fmt.Sprintf("Load index: %s was chosen (rank %d).", e.Chosen, e.Rank))
		}
		if e.RaisedThreshold > 0 {
			s = append(s, fmt.Sprintf("Fewer than minServersInQueue hosts were under the load index threshold, so it was raised to %d for this decision only (R-LI3).", e.RaisedThreshold))
		}
	default:
		s = append(s, fmt.Sprintf("%s: %s was chosen.", e.Algorithm, e.Chosen))
	}
	return append(s, reached(e)...)
}

// reached says through which RD gateway the user reached the host, if one
// did (R-GW2).
func reached(e *Explain) []string {
	if e.Gateway == nil {
		return nil
	}
	return []string{fmt.Sprintf("The user reached %s through gateway %s at %s (R-GW2).", e.Chosen, e.Gateway.Name, e.Gateway.Time.UTC().Format(time.RFC3339))}
}

// WriteText writes a decision record as the CLI shows it, for example:
//
//	Placement of alice in host pool contosohp01 (LoadIndex), 2026-11-29T13:40:00Z
//	Candidates:
//	  sh-03  1 session, 0 connecting, load index 5, bucket 1
//	Excluded:
//	  sh-07  drain mode (R-C2): allowNewSession is false
//	Decision:
//	  Algorithm LoadIndex: 1 host could take the session, 1 excluded.
//	  Load index (R-LI3, R-LI4): bucket 1 (...) takes turns in name order; ...
func WriteText(w io.Writer, e *Explain) error {
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
			fmt.Fprintf(&b, "  %-*s  %s\n", width, c.Host, CandidateText(c))
		}
	}
	if len(e.Excluded) > 0 {
		if total, counts := ExcludedSummary(e); total > len(e.Excluded) {
			fmt.Fprintf(&b, "Excluded (first %d of %d: %s):\n", len(e.Excluded), total, counts)
		} else {
			b.WriteString("Excluded:\n")
		}
		width := 0
		for _, x := range e.Excluded {
			width = max(width, len(x.Host))
		}
		for _, x := range e.Excluded {
			fmt.Fprintf(&b, "  %-*s  %s\n", width, x.Host, ExclusionText(x))
		}
	}
	b.WriteString("Decision:\n")
	for _, line := range Describe(e) {
		b.WriteString("  " + line + "\n")
	}
	_, err := io.WriteString(w, b.String())
	return err
}

// plural says "1 session", "2 sessions".
func plural(n int, noun string) string {
	if n == 1 {
		return "1 " + noun
	}
	return fmt.Sprintf("%d %ss", n, noun)
}
