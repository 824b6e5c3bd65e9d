package vdibroker_test

import (
	"fmt"
	"regexp"
	"testing"
	"time"

	"github.com/vdibroker/vdibroker"
)

// idShape is the one shape of a stored row's ID: 32 lowercase hex digits.
var idShape = regexp.MustCompile(`^[0-9a-f]{32}$`)

// TestNewIDShapeAndOrder: IDs have one fixed shape, and IDs made in
// sequence sort, as strings (the ?after= cursor compares them so), in the
// order they were made, even within one millisecond.
func TestNewIDShapeAndOrder(t *testing.T) {
	ids := make([]string, 10000) // thousands per millisecond on any machine
	for i := range ids {
		ids[i] = vdibroker.NewID()
		if !idShape.MatchString(ids[i]) {
			t.Fatalf("NewID() = %q, want 32 lowercase hex digits", ids[i])
		}
	}
	for i := 1; i < len(ids); i++ {
		if ids[i] <= ids[i-1] {
			t.Fatalf("ID %d %q does not sort after ID %d %q", i, ids[i], i-1, ids[i-1])
		}
	}
}

// TestNewIDStartsWithItsMillisecond: an ID's first 12 hex digits are the
// Unix millisecond it was made in, so IDs of different replicas (and the
// 28-digit session IDs of older releases, which began the same way) sort
// by time too.
func TestNewIDStartsWithItsMillisecond(t *testing.T) {
	before := time.Now().UnixMilli()
	id := vdibroker.NewID()
	after := time.Now().UnixMilli()
	lo, hi := fmt.Sprintf("%012x", before), fmt.Sprintf("%012x", after)
	if p := id[:12]; p < lo || p > hi {
		t.Errorf("NewID() = %q: prefix %s outside the milliseconds %s..%s it was made in", id, p, lo, hi)
	}
}

// TestIDTime: IDTime reads back the millisecond an ID was made in, and
// refuses what NewID does not make.
func TestIDTime(t *testing.T) {
	before := time.Now().Truncate(time.Millisecond)
	id := vdibroker.NewID()
	after := time.Now()
	got, ok := vdibroker.IDTime(id)
	if !ok || got.Before(before) || got.After(after) {
		t.Errorf("IDTime(%q) = %v, %v; want a time in %v..%v", id, got, ok, before, after)
	}
	for _, bad := range []string{"", "s1", id[:31], "zz" + id[2:], id + "0"} {
		if got, ok := vdibroker.IDTime(bad); ok {
			t.Errorf("IDTime(%q) = %v, true; want false", bad, got)
		}
	}
}
