package broker

import (
	"context"
	"errors"
	"go/ast"
	"go/parser"
	"go/token"
	"reflect"
	"testing"
	"time"

	"github.com/vdibroker/vdibroker"
	"github.com/vdibroker/vdibroker/store"
)

// TestGuardCoversEveryStoreMethod: every Store method that takes a context
// is declared in guard.go on guardedStore itself, so none reaches the store
// without the store timeout (a method only promoted from the embedded
// Store would).
func TestGuardCoversEveryStoreMethod(t *testing.T) {
	f, err := parser.ParseFile(token.NewFileSet(), "guard.go", nil, 0)
	if err != nil {
		t.Fatal(err)
	}
	own := map[string]bool{}
	for _, d := range f.Decls {
		fd, ok := d.(*ast.FuncDecl)
		if !ok || fd.Recv == nil {
			continue
		}
		if star, ok := fd.Recv.List[0].Type.(*ast.StarExpr); ok {
			if id, ok := star.X.(*ast.Ident); ok && id.Name == "guardedStore" {
				own[fd.Name.Name] = true
			}
		}
	}
	iface := reflect.TypeFor[vdibroker.Store]()
	ctxType := reflect.TypeFor[context.Context]()
	for i := range iface.NumMethod() {
		m := iface.Method(i)
		if m.Type.NumIn() > 0 && m.Type.In(0) == ctxType && !own[m.Name] {
			t.Errorf("guardedStore does not declare %s: it would run without the store timeout", m.Name)
		}
	}
}

// TestGuardBoundsAHungStore: a store call that would hang returns
// StoreUnavailable within the store timeout, and the failed ping that
// follows starts an outage (issue 19).
func TestGuardBoundsAHungStore(t *testing.T) {
	st, err := store.Open(t.Context(), "", t.TempDir(), nil)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { st.Close() })
	hung := &hungStore{Store: st, release: make(chan struct{})}
	t.Cleanup(func() { close(hung.release) })
	s := New(Config{Store: hung, StoreTimeout: 200 * time.Millisecond, MaintenanceInterval: time.Hour})
	t.Cleanup(func() { s.Close() })
	t0 := time.Now()
	_, err = s.Store().GetHostPool(t.Context(), "p")
	if took := time.Since(t0); took > 2*time.Second {
		t.Errorf("a hung store call took %v; the store timeout is 200ms (and a 200ms ping)", took)
	}
	if vdibroker.ErrorCode(err) != vdibroker.EStoreUnavailable || !errors.Is(err, context.DeadlineExceeded) {
		t.Errorf("hung call: %v, want StoreUnavailable caused by the deadline", err)
	}
	if vdibroker.ErrorRetryAfter(err) <= 0 {
		t.Errorf("StoreUnavailable without RetryAfter: %v", err)
	}
	if st := s.Health().Status(); st.Up || st.Reason == "" {
		t.Errorf("health after a hung store: %+v, want down with a reason", st)
	}
}

// hungStore is a store whose reads and pings wait for release or the
// caller's deadline, as a paused database does.
type hungStore struct {
	vdibroker.Store
	release chan struct{}
}

func (h *hungStore) wait(ctx context.Context) error {
	select {
	case <-ctx.Done():
		return ctx.Err()
	case <-h.release:
		return nil
	}
}

func (h *hungStore) Ping(ctx context.Context) error { return h.wait(ctx) }

func (h *hungStore) GetHostPool(ctx context.Context, name string) (*vdibroker.HostPool, error) {
	if err := h.wait(ctx); err != nil {
		return nil, err
	}
	return h.Store.GetHostPool(ctx, name)
}
