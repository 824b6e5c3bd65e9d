//go:build !linux

package agent

import (
	"context"
	"fmt"

	"github.com/shirou/gopsutil/v4/cpu"
	"github.com/shirou/gopsutil/v4/disk"
)

// readCounters asks gopsutil for the CPU times and disk counters; the
// arithmetic is the same as on Linux.
func (m *SystemMetrics) readCounters(ctx context.Context) (CPUSample, []DiskStat, error) {
	times, err := cpu.TimesWithContext(ctx, false)
	if err != nil || len(times) == 0 {
		return CPUSample{}, nil, fmt.Errorf("sample cpu: %v", err)
	}
	t := times[0]
	ticks := func(sec float64) uint64 { return uint64(sec * 100) }
	c := CPUSample{User: ticks(t.User), Nice: ticks(t.Nice), System: ticks(t.System), Idle: ticks(t.Idle),
		IOWait: ticks(t.Iowait), IRQ: ticks(t.Irq), SoftIRQ: ticks(t.Softirq), Steal: ticks(t.Steal)}
	io, err := disk.IOCountersWithContext(ctx)
	if err != nil {
		// Some systems have no disk counters; CPU and memory still count.
		return c, nil, nil
	}
	var disks []DiskStat
	for name, d := range io {
		disks = append(disks, DiskStat{Name: name, Reads: d.ReadCount, ReadMs: d.ReadTime,
			Writes: d.WriteCount, WriteMs: d.WriteTime, InFlight: d.IopsInProgress})
	}
	return c, disks, nil
}
