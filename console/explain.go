package console

import (
	"fmt"

	"github.com/vdibroker/vdibroker"
	"github.com/vdibroker/vdibroker/placement"
)

// reasonText says in words why a host was excluded (R-C7).
var reasonText = map[string]string{
	placement.ReasonDrained:          "drain mode: allowNewSession is off, so no new session goes there (R-C2)",
	placement.ReasonUnavailable:      "not placeable: no heartbeat within heartbeatTimeoutSeconds (R-H1, R-C3)",
	placement.ReasonShutdown:         "not placeable: the agent said the host is stopping (R-H1, R-C3)",
	placement.ReasonAtLimit:          "at maxSessionLimit: one more session would exceed it (R-C4)",
	placement.ReasonHostThreshold:    "over the host's own threshold: load index or connecting sessions (R-LI2)",
	placement.ReasonNotAssigned:      "personal host not assigned to this user (R-PE4)",
	placement.ReasonAssignedToOthers: "personal host assigned to another user (R-PE1)",
}

// explainStory tells a decision record as sentences, winner last.
func explainStory(e *placement.Explain) []string {
	var s []string
	n := e.CandidateCount
	if n == 0 {
		n = len(e.Candidates)
	}
	excluded := 0
	for _, c := range e.ExcludedCounts {
		excluded += c
	}
	if excluded == 0 {
		excluded = len(e.Excluded)
	}
	if e.Reconnect {
		s = append(s, "The user already had a session in this pool, so the broker answered with it (reconnect first, R-C1); no host was chosen anew.")
		if e.Note != "" {
			s = append(s, "Note: "+e.Note+".")
		}
		return s
	}
	s = append(s, fmt.Sprintf("Algorithm %s. %s could take the session; %s excluded.", e.Algorithm, hostsText(n), hostsText(excluded)))
	if e.Note != "" {
		s = append(s, "Note: "+e.Note+".")
	}
	if e.Chosen == "" {
		if e.NoCapacityReason != "" {
			s = append(s, "No host could take the session: "+e.NoCapacityReason+" (R-C5).")
		}
		return s
	}
	switch e.Algorithm {
	case vdibroker.BreadthFirst:
		s = append(s, "Breadth-first (R-BF2): candidates were sorted by session count, fewest first, then by name.")
		if e.Draw != nil {
			s = append(s, fmt.Sprintf("The first %d of them (ceil(n/2)) were equally likely; the random draw was %d of 0..%d, which picked rank %d: %s.",
				e.Draw.Of, e.Draw.Value, e.Draw.Of-1, e.Rank, e.Chosen))
		}
	case vdibroker.DepthFirst:
		s = append(s, fmt.Sprintf("Depth-first (R-DF2): the candidate with the most sessions wins, ties by name, so one host fills to the limit before the next; %s ranked first.", e.Chosen))
	case vdibroker.LoadIndex:
		switch e.Bucket {
		case 1:
			msg := "Load index (R-LI3, R-LI4): bucket 1 (standard hosts under the load index and connecting thresholds) had hosts; they take turns in name order"
			if e.RoundRobinAfter != "" {
				msg += ", starting after " + e.RoundRobinAfter + ", the host chosen last"
			}
			s = append(s, msg+fmt.Sprintf(", so %s was next.", e.Chosen))
		case 2, 3:
			s = append(s, fmt.Sprintf("Load index (R-LI3, R-LI4): bucket 1 was empty, so bucket %d decided: lowest load index, then fewest connecting sessions, then name. %s ranked first.", e.Bucket, e.Chosen))
		default:
			s = append(s, fmt.Sprintf("Load index: %s was chosen (rank %d).", e.Chosen, e.Rank))
		}
		if e.RaisedThreshold > 0 {
			s = append(s, fmt.Sprintf("Fewer than minServersInQueue hosts were under the load index threshold, so it was raised to %d for this decision only (R-LI3).", e.RaisedThreshold))
		}
	default:
		s = append(s, fmt.Sprintf("%s chose %s.", e.Algorithm, e.Chosen))
	}
	return s
}

// hostsText is "1 host" or "n hosts".
func hostsText(n int) string {
	if n == 1 {
		return "1 host"
	}
	return fmt.Sprintf("%d hosts", n)
}
