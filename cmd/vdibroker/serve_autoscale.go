package main

import (
	"context"
	"fmt"
	"os"

	"github.com/vdibroker/vdibroker"
	"github.com/vdibroker/vdibroker/autoscale"
	"github.com/vdibroker/vdibroker/broker"
	"github.com/vdibroker/vdibroker/metrics"
	"github.com/vdibroker/vdibroker/power"
)

// autoscaleActions are what the autoscaler acts through: the broker
// service's pools and hosts, and its power service's starts, stops and
// drains.
type autoscaleActions struct {
	*broker.Service
	power *power.Service
}

func (a autoscaleActions) StartHost(ctx context.Context, pool, host, by string) error {
	return a.power.StartHost(ctx, pool, host, by)
}

func (a autoscaleActions) StopHost(ctx context.Context, pool, host string, force bool, by string) error {
	return a.power.StopHost(ctx, pool, host, force, by)
}

func (a autoscaleActions) SetAutoscaleDrain(ctx context.Context, pool, host string, on bool) error {
	return a.power.SetAutoscaleDrain(ctx, pool, host, on)
}

// startAutoscale starts the autoscaler on the service's guarded
// store, acting through the broker service's power actions.
func (m *Main) startAutoscale(st vdibroker.Store) {
	if m.AutoscaleInterval <= 0 {
		return
	}
	host, _ := os.Hostname()
	a := autoscale.New(autoscale.Config{Store: st, Actions: autoscaleActions{m.broker, m.broker.Power()}, Interval: m.AutoscaleInterval, Minute: m.AutoscaleMinute, Logger: m.Logger,
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
