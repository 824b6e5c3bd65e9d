package agent

import (
	"bytes"
	"context"
	"os"
	"path/filepath"
)

// readCounters reads /proc/stat and the whole physical disks of
// /proc/diskstats (those with a device link in /sys/block: not partitions,
// loop, zram, md or device-mapper devices, whose I/O is already counted on
// the disks beneath them).
func (m *SystemMetrics) readCounters(ctx context.Context) (CPUSample, []DiskStat, error) {
	proc, sysBlock := m.ProcDir, m.SysBlockDir
	if proc == "" {
		proc = "/proc"
	}
	if sysBlock == "" {
		sysBlock = "/sys/block"
	}
	stat, err := os.ReadFile(filepath.Join(proc, "stat"))
	if err != nil {
		return CPUSample{}, nil, err
	}
	cpu, err := ParseProcStat(bytes.NewReader(stat))
	if err != nil {
		return CPUSample{}, nil, err
	}
	ds, err := os.ReadFile(filepath.Join(proc, "diskstats"))
	if err != nil {
		return CPUSample{}, nil, err
	}
	disks, err := ParseDiskstats(bytes.NewReader(ds), func(name string) bool {
		_, err := os.Stat(filepath.Join(sysBlock, name, "device"))
		return err == nil
	})
	if err != nil {
		return CPUSample{}, nil, err
	}
	return cpu, disks, nil
}
