package agent

import (
	"context"
	"fmt"
	"sync"
	"time"

	"github.com/shirou/gopsutil/v4/mem"
	"github.com/vdibroker/vdibroker"
)

// SystemMetrics samples the host the agent runs on: memory from gopsutil, CPU
// and disk counters from the kernel (/proc on Linux, gopsutil elsewhere), as
// deltas since the previous Sample. The first Sample answers averages since
// boot. Safe for concurrent use.
type SystemMetrics struct {
	// ProcDir and SysBlockDir default to /proc and /sys/block (Linux only).
	ProcDir     string
	SysBlockDir string
	// Now stamps SampledAt; time.Now when nil.
	Now func() time.Time

	mu       sync.Mutex
	prevCPU  CPUSample
	prevDisk []DiskStat
}

var _ MetricsSource = (*SystemMetrics)(nil)

// Sample implements MetricsSource.
func (m *SystemMetrics) Sample(ctx context.Context) (vdibroker.Metrics, error) {
	cpuNow, disks, err := m.readCounters(ctx)
	if err != nil {
		return vdibroker.Metrics{}, err
	}
	vm, err := mem.VirtualMemoryWithContext(ctx)
	if err != nil {
		return vdibroker.Metrics{}, fmt.Errorf("sample memory: %w", err)
	}
	now := time.Now
	if m.Now != nil {
		now = m.Now
	}
	m.mu.Lock()
	defer m.mu.Unlock()
	d := DiskMetrics(m.prevDisk, disks)
	out := vdibroker.Metrics{
		CPUPercent:         CPUPercent(m.prevCPU, cpuNow),
		MemoryPercent:      vm.UsedPercent,
		DiskQueueLength:    d.QueueLength,
		DiskReadLatencyMs:  d.ReadLatencyMs,
		DiskWriteLatencyMs: d.WriteLatencyMs,
		SampledAt:          now().UTC(),
	}
	m.prevCPU, m.prevDisk = cpuNow, disks
	return out, nil
}
