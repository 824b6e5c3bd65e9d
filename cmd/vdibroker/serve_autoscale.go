package main

import (
	"context"
	"fmt"
	"os"

	"github.com/vdibroker/vdibroker"
	"github.com/vdibroker/vdibroker/autoscale"
	"github.com/vdibroker/vdibroker/broker"
	"github.com/vdibroker/vdibroker/metrics"
)

// startAutoscale starts the autoscaler on the service's guarded
// store, acting through the broker service's power actions.
func (m *Main) startAutoscale(st vdibroker.Store) {
	if m.AutoscaleInterval <= 0 {
		return
	}
	host, _ := os.Hostname()
	a := autoscale.New(autoscale.Config{Store: st, Actions: broker.AutoscaleActions{Service: m.broker}, Interval: m.AutoscaleInterval, Minute: m.AutoscaleMinute, Logger: m.Logger,
		Observe: metrics.ObserveAutoscale, Holder: fmt.Sprintf("%s:%d", host, os.Getpid()),
		HeardSince: m.broker.StoreHealth().HeardSince})
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
