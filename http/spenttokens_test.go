package http

import (
	"strconv"
	"testing"
	"time"

	"github.com/vdibroker/vdibroker/internal/ratelimit"
)

// TestSpentTokensBounded_RSEC (R-SEC): the tokens noted as spent
// (refuseSpentNewHost) are at most maxSpentTokens however many valid
// tokens are refused at once (an attacker holding many): a full set
// notes no more while every noted token is still spent, keeping those
// (their registrations stay a read), and forgets the ones whose buckets
// hold a new host again once it must make room.
func TestSpentTokensBounded_RSEC(t *testing.T) {
	now := time.Unix(1_700_000_000, 0)
	buckets := ratelimit.New(1, 1) // a new host a second, one at once
	spent := func(id string) bool { return buckets.Spent(id, now) }
	var st spentTokens
	refused := func(i int) {
		id := "token-" + strconv.Itoa(i)
		if buckets.Spend(id, now) {
			t.Fatalf("token %d had its new host at %s", i, now)
		}
		st.note("hash-"+strconv.Itoa(i), id, spent)
	}
	for i := range maxSpentTokens + 1 {
		buckets.Spend("token-"+strconv.Itoa(i), now) // its one new host
		refused(i)
	}
	if len(st.m) != maxSpentTokens {
		t.Fatalf("%d tokens noted, want %d", len(st.m), maxSpentTokens)
	}
	if _, ok := st.get("hash-0"); !ok {
		t.Error("a full set forgot a token whose new hosts are still spent")
	}
	if _, ok := st.get("hash-" + strconv.Itoa(maxSpentTokens)); ok {
		t.Error("a full set of spent tokens noted one more")
	}

	// A second later every bucket holds a new host again; the first
	// half spend theirs and are refused again, then one more token.
	now = now.Add(time.Second)
	half := maxSpentTokens / 2
	for i := range half {
		buckets.Spend("token-"+strconv.Itoa(i), now)
	}
	buckets.Spend("token-new", now)
	if buckets.Spend("token-new", now) {
		t.Fatal("token-new's second new host at once")
	}
	st.note("hash-new", "token-new", spent)
	if len(st.m) != half+1 {
		t.Errorf("%d tokens noted, want %d: the spent half and the new one", len(st.m), half+1)
	}
	if id, ok := st.get("hash-new"); !ok || id != "token-new" {
		t.Errorf("the new token: %q, %v; want noted once the set made room", id, ok)
	}
	if _, ok := st.get("hash-0"); !ok {
		t.Error("making room forgot a token whose new hosts are still spent")
	}
	if _, ok := st.get("hash-" + strconv.Itoa(half)); ok {
		t.Error("making room kept a token whose bucket holds a new host again")
	}
}
