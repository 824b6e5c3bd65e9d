package intercept_test

import (
	"context"
	"errors"
	"reflect"
	"slices"
	"testing"
	"time"

	"github.com/vdibroker/vdibroker"
	"github.com/vdibroker/vdibroker/intercept"
)

type ctxKey struct{}

// TestEveryMethodRunsThroughTheHook: each method of vdibroker.Store, called
// on the wrapper, calls the hook once, with its own name as the operation
// and the caller's context; a hook that refuses (does not run call) makes
// the method return its error without reaching the wrapped store (here
// nil: reaching it would panic).
func TestEveryMethodRunsThroughTheHook(t *testing.T) {
	refused := errors.New("refused")
	var ops []string
	var ctxs []any
	st := intercept.NewStore(nil, func(ctx context.Context, op string, call func(context.Context) error) error {
		ops = append(ops, op)
		ctxs = append(ctxs, ctx.Value(ctxKey{}))
		return refused
	})
	caller := context.WithValue(t.Context(), ctxKey{}, "caller")
	iface := reflect.TypeFor[vdibroker.Store]()
	ctxType := reflect.TypeFor[context.Context]()
	v := reflect.ValueOf(st)
	for i := range iface.NumMethod() {
		m := iface.Method(i)
		ops, ctxs = nil, nil
		var args []reflect.Value
		for j := range m.Type.NumIn() {
			in := m.Type.In(j)
			if m.Type.IsVariadic() && j == m.Type.NumIn()-1 {
				break // none
			}
			if in == ctxType {
				args = append(args, reflect.ValueOf(caller))
			} else {
				args = append(args, reflect.Zero(in))
			}
		}
		out := v.MethodByName(m.Name).Call(args)
		if !slices.Equal(ops, []string{m.Name}) {
			t.Errorf("%s: the hook saw operations %v, want [%s]", m.Name, ops, m.Name)
			continue
		}
		wantCtx := any("caller")
		if m.Type.NumIn() == 0 || m.Type.In(0) != ctxType {
			wantCtx = nil // Close: the background
		}
		if ctxs[0] != wantCtx {
			t.Errorf("%s: the hook got context value %v, want %v", m.Name, ctxs[0], wantCtx)
		}
		if err, _ := out[len(out)-1].Interface().(error); err != refused {
			t.Errorf("%s returned %v, want the hook's error", m.Name, err)
		}
		for k, r := range out[:len(out)-1] {
			if !r.IsZero() {
				t.Errorf("%s: result %d is %v without a call, want zero", m.Name, k, r)
			}
		}
	}
}

// inner is a wrapped store with the methods whose passing-through the
// tests check; the others panic through the nil interface.
type inner struct {
	vdibroker.Store
	gotCtx  any
	gotFrom []string
}

func (s *inner) UpdateSessionHost(ctx context.Context, pool, name string, fn func(*vdibroker.SessionHost) error) (*vdibroker.SessionHost, error) {
	s.gotCtx = ctx.Value(ctxKey{})
	h := &vdibroker.SessionHost{HostPool: pool, Name: name}
	return h, fn(h)
}

func (s *inner) SetPowerState(ctx context.Context, pool, host, state string, now time.Time, from ...string) (*vdibroker.SessionHost, bool, error) {
	s.gotCtx, s.gotFrom = ctx.Value(ctxKey{}), from
	return &vdibroker.SessionHost{HostPool: pool, Name: host, PowerState: state}, true, nil
}

func (s *inner) Close() error { return errors.New("closed twice") }

// TestCallsPassThrough: the hook's context (not the caller's) reaches the
// wrapped method; arguments, a callback and a variadic list arrive as
// given, results and errors come back, and a hook may replace the error
// and keep the results.
func TestCallsPassThrough(t *testing.T) {
	in := &inner{}
	hookErr := errors.New("checked")
	st := intercept.NewStore(in, func(ctx context.Context, op string, call func(context.Context) error) error {
		err := call(context.WithValue(ctx, ctxKey{}, "hook"))
		if op == intercept.OpSetPowerState {
			return hookErr
		}
		return err
	})
	called := false
	h, err := st.UpdateSessionHost(t.Context(), "p", "h1", func(h *vdibroker.SessionHost) error {
		called = true
		return errors.New("fn says no")
	})
	if !called || h == nil || h.Name != "h1" || err == nil || err.Error() != "fn says no" {
		t.Errorf("UpdateSessionHost: fn called %v, host %+v, error %v; want the callback run, the host and its error", called, h, err)
	}
	if in.gotCtx != "hook" {
		t.Errorf("UpdateSessionHost ran with context value %v, want the hook's", in.gotCtx)
	}
	h, changed, err := st.SetPowerState(t.Context(), "p", "h1", vdibroker.PowerStopping, time.Now(), vdibroker.PowerRunning, vdibroker.PowerStarting)
	if !slices.Equal(in.gotFrom, []string{vdibroker.PowerRunning, vdibroker.PowerStarting}) {
		t.Errorf("SetPowerState got from %v, want [Running Starting]", in.gotFrom)
	}
	if h == nil || h.PowerState != vdibroker.PowerStopping || !changed || err != hookErr {
		t.Errorf("SetPowerState = %+v, %v, %v; want the host, true and the hook's error", h, changed, err)
	}
	if err := st.Close(); err == nil || err.Error() != "closed twice" {
		t.Errorf("Close = %v, want the wrapped store's error", err)
	}
}
