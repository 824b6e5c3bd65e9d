package main

import (
	"context"
	"fmt"
	"os"

	"github.com/vdibroker/vdibroker"
	"github.com/vdibroker/vdibroker/autoscale"
	"github.com/vdibroker/vdibroker/metrics"
)

// startAutoscale starts the autoscaler (issue 17) on the service's guarded
// store, if the broker service has the power actions it needs (they come
// with the power work: until then serve says so and runs without it).
func (m *Main) startAutoscale(st vdibroker.Store) {
	if m.AutoscaleInterval <= 0 {
		return
	}
	acts, ok := any(m.broker).(autoscale.Actions)
	if !ok {
		m.Logger.Warn("autoscaler off: this build's broker service has no power actions (StartHost, StopHost, SetAutoscaleDrain)")
		return
	}
	host, _ := os.Hostname()
	a := autoscale.New(autoscale.Config{Store: st, Actions: acts, Interval: m.AutoscaleInterval, Logger: m.Logger,
		Observe: metrics.ObserveAutoscale, Holder: fmt.Sprintf("%s:%d", host, os.Getpid())})
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan struct{})
	go func() {
		defer close(done)
		_ = a.Run(ctx)
	}()
	m.stopAutoscale = func() {
		cancel()
		<-done
	}
}
