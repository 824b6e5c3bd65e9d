package store

import (
	"strings"
	"testing"
)

// TestExpirePendingUsesPendingIndex: the maintenance loop runs
// ExpirePending (R-S3) every few seconds; it must read the partial index of
// Pending sessions (migration 00002), not every open session.
func TestExpirePendingUsesPendingIndex(t *testing.T) {
	s, err := OpenWith(t.Context(), "", t.TempDir(), nil, Options{})
	if err != nil {
		t.Fatal(err)
	}
	defer s.Close()
	plan, err := s.ExpirePendingPlan(t.Context())
	if err != nil {
		t.Fatal(err)
	}
	t.Logf("plan:\n%s", strings.Join(plan, "\n"))
	if !strings.Contains(strings.Join(plan, "\n"), "user_sessions_pending") {
		t.Errorf("ExpirePending's plan does not use user_sessions_pending:\n%s", strings.Join(plan, "\n"))
	}
}
