package agent

import (
	"bytes"
	"context"
	"os"
	"path/filepath"
)

// platformMetrics keeps the previous disk counters.
type platformMetrics struct {
	prevDisk []DiskStat
}

func (m *SystemMetrics) procDirs() (proc, sysBlock string) {
	proc, sysBlock = m.ProcDir, m.SysBlockDir
	if proc == "" {
		proc = "/proc"
	}
	if sysBlock == "" {
		sysBlock = "/sys/block"
	}
	return proc, sysBlock
}

// readCPU reads /proc/stat.
func (m *SystemMetrics) readCPU(ctx context.Context) (CPUSample, error) {
	proc, _ := m.procDirs()
	stat, err := os.ReadFile(filepath.Join(proc, "stat"))
	if err != nil {
		return CPUSample{}, err
	}
	return ParseProcStat(bytes.NewReader(stat))
}

// sampleDisks reads the whole physical disks of /proc/diskstats (those with
// a device link in /sys/block: not partitions, loop, zram, md or
// device-mapper devices, whose I/O is already counted on the disks beneath
// them) and answers the figures since the previous call.
func (m *SystemMetrics) sampleDisks(ctx context.Context) (DiskFigures, error) {
	proc, sysBlock := m.procDirs()
	ds, err := os.ReadFile(filepath.Join(proc, "diskstats"))
	if err != nil {
		return DiskFigures{}, err
	}
	disks, err := ParseDiskstats(bytes.NewReader(ds), func(name string) bool {
		_, err := os.Stat(filepath.Join(sysBlock, name, "device"))
		return err == nil
	})
	if err != nil {
		return DiskFigures{}, err
	}
	d := DiskMetrics(m.plat.prevDisk, disks)
	m.plat.prevDisk = disks
	return d, nil
}
