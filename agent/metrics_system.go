package agent

import (
	"context"
	"fmt"
	"log/slog"
	"sync"
	"time"

	"github.com/shirou/gopsutil/v4/mem"
	"github.com/vdibroker/vdibroker"
)

// SystemMetrics samples the host the agent runs on: memory from gopsutil, CPU
// and disk counters from the kernel (/proc on Linux, gopsutil and PDH on
// Windows, gopsutil elsewhere), as deltas since the previous Sample. The
// first Sample answers CPU averages since boot (and, on Windows, no disk
// figures yet: PDH needs two collections). Safe for concurrent use.
type SystemMetrics struct {
	// ProcDir and SysBlockDir default to /proc and /sys/block (Linux only).
	ProcDir     string
	SysBlockDir string
	// Now stamps SampledAt; time.Now when nil.
	Now func() time.Time
	// Logger hears of disk counters that have no value (Windows); nil
	// logs nothing.
	Logger *slog.Logger

	mu      sync.Mutex
	prevCPU CPUSample
	plat    platformMetrics // the platform's disk sampling state
}

var _ MetricsSource = (*SystemMetrics)(nil)

// Sample implements MetricsSource.
func (m *SystemMetrics) Sample(ctx context.Context) (vdibroker.Metrics, error) {
	m.mu.Lock()
	defer m.mu.Unlock()
	cpuNow, err := m.readCPU(ctx)
	if err != nil {
		return vdibroker.Metrics{}, err
	}
	vm, err := mem.VirtualMemoryWithContext(ctx)
	if err != nil {
		return vdibroker.Metrics{}, fmt.Errorf("sample memory: %w", err)
	}
	d, err := m.sampleDisks(ctx)
	if err != nil {
		return vdibroker.Metrics{}, err
	}
	now := time.Now
	if m.Now != nil {
		now = m.Now
	}
	out := vdibroker.Metrics{
		CPUPercent:         CPUPercent(m.prevCPU, cpuNow),
		MemoryPercent:      vm.UsedPercent,
		DiskQueueLength:    d.QueueLength,
		DiskReadLatencyMs:  d.ReadLatencyMs,
		DiskWriteLatencyMs: d.WriteLatencyMs,
		SampledAt:          now().UTC(),
	}
	m.prevCPU = cpuNow
	return out, nil
}
