package store_test

import (
	"errors"
	"strings"
	"testing"

	"github.com/vdibroker/vdibroker"
	"github.com/vdibroker/vdibroker/internal/faildisk"
	"github.com/vdibroker/vdibroker/store"
)

// TestWriteFaultReadOnlyDisk (R-OUT1): SQLite on a file system
// that fails under it (the kernel turns it read-only, internal/faildisk).
// A commit fails with ErrStoreWrite and its error names the cause, read
// from the data directory: SQLite's own says only "disk I/O error", and
// that error is the outage's reason in /healthz. The next Ping fails too
// though a probe passed a moment before (the failed write voids it);
// reads still work; Close does not hang. After the administrator's
// repair (unmount, e2fsck, mount), what was committed before is there.
func TestWriteFaultReadOnlyDisk(t *testing.T) {
	disk := faildisk.New(t)
	s, err := store.OpenWith(t.Context(), "", disk.Dir, nil, store.Options{})
	if err != nil {
		t.Fatal(err)
	}
	mustPool(t, s, pool("before", vdibroker.Pooled))
	if err := s.Ping(t.Context()); err != nil {
		t.Fatalf("ping on a healthy disk: %v", err)
	}
	disk.Fail()
	_, err = s.PutHostPool(t.Context(), pool("after", vdibroker.Pooled), vdibroker.Precondition{})
	if !errors.Is(err, vdibroker.ErrStoreWrite) || !strings.Contains(err.Error(), "read-only file system") {
		t.Errorf("write on a failed disk: %v, want an ErrStoreWrite naming the read-only file system", err)
	}
	if err := s.Ping(t.Context()); !errors.Is(err, vdibroker.ErrStoreWrite) {
		t.Errorf("ping just after a failed write: %v, want an ErrStoreWrite", err)
	}
	if _, err := s.GetHostPool(t.Context(), "before"); err != nil {
		t.Errorf("read on a failed disk: %v (reads still work)", err)
	}
	if err := s.Close(); err != nil {
		t.Logf("close on a failed disk: %v", err) // may fail; must return
	}
	disk.Repair()
	s, err = store.OpenWith(t.Context(), "", disk.Dir, nil, store.Options{})
	if err != nil {
		t.Fatalf("open after the repair: %v", err)
	}
	defer s.Close()
	if _, err := s.GetHostPool(t.Context(), "before"); err != nil {
		t.Errorf("pool committed before the failure, after the repair: %v", err)
	}
	if _, err := s.GetHostPool(t.Context(), "after"); vdibroker.ErrorCode(err) != vdibroker.ENotFound {
		t.Errorf("pool whose commit failed, after the repair: %v, want NotFound", err)
	}
}
