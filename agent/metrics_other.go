//go:build !linux && !windows

package agent

import (
	"context"

	"github.com/shirou/gopsutil/v4/disk"
)

// platformMetrics keeps the previous disk counters.
type platformMetrics struct {
	prevDisk []DiskStat
}

// readCPU asks gopsutil for the CPU times; the arithmetic is the same as on
// Linux.
func (m *SystemMetrics) readCPU(ctx context.Context) (CPUSample, error) {
	return gopsutilCPU(ctx, false)
}

// sampleDisks asks gopsutil for the disk counters and answers the figures
// since the previous call.
func (m *SystemMetrics) sampleDisks(ctx context.Context) (DiskFigures, error) {
	io, err := disk.IOCountersWithContext(ctx)
	if err != nil {
		// Some systems have no disk counters; CPU and memory still count.
		return DiskFigures{}, nil
	}
	var disks []DiskStat
	for name, d := range io {
		disks = append(disks, DiskStat{Name: name, Reads: d.ReadCount, ReadMs: d.ReadTime,
			Writes: d.WriteCount, WriteMs: d.WriteTime, InFlight: d.IopsInProgress})
	}
	d := DiskMetrics(m.plat.prevDisk, disks)
	m.plat.prevDisk = disks
	return d, nil
}
