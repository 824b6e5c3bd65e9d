//go:build !linux

package agent

import (
	"context"
	"fmt"

	"github.com/shirou/gopsutil/v4/cpu"
)

// gopsutilCPU reads the CPU times of all CPUs through gopsutil.
func gopsutilCPU(ctx context.Context, irqInSystem bool) (CPUSample, error) {
	times, err := cpu.TimesWithContext(ctx, false)
	if err != nil || len(times) == 0 {
		return CPUSample{}, fmt.Errorf("sample cpu: %v", err)
	}
	return cpuSampleFromTimes(times[0], irqInSystem), nil
}
