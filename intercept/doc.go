// Package intercept wraps a vdibroker.Store so that every one of its
// operations runs through one hook: the broker's guard (store timeout and
// outage health, package broker) and the metrics' timing (package metrics)
// are each a hook, not a hand-written wrapper.
//
// Store is generated from the vdibroker.Store interface by
// internal/storegen: it implements every method explicitly, without
// embedding the interface, so a method added to vdibroker.Store leaves the
// wrapper uncompilable until `go generate ./intercept` has run, and no
// operation passes through unhooked.
package intercept

import "context"

//go:generate go run ../internal/storegen -root .. -o store_gen.go

// Func is a hook: it runs call, which calls the wrapped store's method op
// (a Store method name, Op...) with the context it is given and keeps the
// method's results for its caller, and returns call's error or one of its
// own. A hook that does not run call returns an error: the method then
// returns zero values with it. call writes the method's results, so it
// runs on the hook's goroutine, at most once, and has returned when the
// hook returns. Methods without a context (Close) give the hook
// context.Background().
type Func func(ctx context.Context, op string, call func(ctx context.Context) error) error
