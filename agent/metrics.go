package agent

import (
	"bufio"
	"context"
	"fmt"
	"io"
	"strconv"
	"strings"

	"github.com/vdibroker/vdibroker"
)

// MetricsSource samples a host's load. Each call returns the figures over the
// time since the previous call (the sample interval); the first call may
// answer averages since boot. CustomLoadValue is left to the agent, which runs
// the custom load script, unless the source sets it itself (simulated hosts).
type MetricsSource interface {
	Sample(ctx context.Context) (vdibroker.Metrics, error)
}

// CPUSample is the aggregate "cpu" line of /proc/stat, in clock ticks.
type CPUSample struct {
	User, Nice, System, Idle, IOWait, IRQ, SoftIRQ, Steal uint64
}

// total is every tick the CPUs spent. guest and guest_nice are already
// counted in user and nice, so they are left out.
func (s CPUSample) total() uint64 {
	return s.User + s.Nice + s.System + s.Idle + s.IOWait + s.IRQ + s.SoftIRQ + s.Steal
}

// idle is the ticks the CPUs had nothing to run; time waiting for I/O counts
// as idle, as top and gopsutil count it.
func (s CPUSample) idle() uint64 { return s.Idle + s.IOWait }

// ParseProcStat reads the aggregate "cpu" line of /proc/stat.
func ParseProcStat(r io.Reader) (CPUSample, error) {
	sc := bufio.NewScanner(r)
	for sc.Scan() {
		f := strings.Fields(sc.Text())
		if len(f) == 0 || f[0] != "cpu" {
			continue
		}
		if len(f) < 5 {
			return CPUSample{}, fmt.Errorf("parse /proc/stat: cpu line has %d fields, want at least 5", len(f))
		}
		var v [8]uint64
		for i := 1; i < len(f) && i <= len(v); i++ {
			n, err := strconv.ParseUint(f[i], 10, 64)
			if err != nil {
				return CPUSample{}, fmt.Errorf("parse /proc/stat: cpu field %d: %w", i, err)
			}
			v[i-1] = n
		}
		return CPUSample{User: v[0], Nice: v[1], System: v[2], Idle: v[3], IOWait: v[4], IRQ: v[5], SoftIRQ: v[6], Steal: v[7]}, nil
	}
	if err := sc.Err(); err != nil {
		return CPUSample{}, fmt.Errorf("parse /proc/stat: %w", err)
	}
	return CPUSample{}, fmt.Errorf("parse /proc/stat: no cpu line")
}

// CPUPercent is the share of CPU time spent busy between two samples:
// 100 × (Δtotal − Δidle) / Δtotal, 0 when no tick passed. A counter that went
// backwards (a reset) gives 0 rather than nonsense.
func CPUPercent(prev, cur CPUSample) float64 {
	if cur.total() <= prev.total() || cur.idle() < prev.idle() {
		return 0
	}
	dTotal := cur.total() - prev.total()
	dIdle := cur.idle() - prev.idle()
	if dIdle > dTotal {
		return 0
	}
	return 100 * float64(dTotal-dIdle) / float64(dTotal)
}

// DiskStat is one device's line of /proc/diskstats (fields as in the
// kernel's Documentation/admin-guide/iostats.rst).
type DiskStat struct {
	Name string
	// Reads and Writes are I/Os completed; ReadMs and WriteMs the
	// milliseconds spent on them; InFlight the I/Os in progress right now.
	Reads, ReadMs, Writes, WriteMs, InFlight uint64
}

// ParseDiskstats reads /proc/diskstats, keeping the devices include accepts
// (nil keeps all). Whole disks should be kept and partitions, loop and
// device-mapper devices left out, or the same I/O is counted twice.
func ParseDiskstats(r io.Reader, include func(name string) bool) ([]DiskStat, error) {
	var out []DiskStat
	sc := bufio.NewScanner(r)
	line := 0
	for sc.Scan() {
		line++
		f := strings.Fields(sc.Text())
		if len(f) == 0 {
			continue
		}
		if len(f) < 14 {
			return nil, fmt.Errorf("parse /proc/diskstats: line %d has %d fields, want at least 14", line, len(f))
		}
		name := f[2]
		if include != nil && !include(name) {
			continue
		}
		// f[3] reads completed, f[6] ms reading, f[7] writes completed,
		// f[10] ms writing, f[11] I/Os currently in progress.
		var v [5]uint64
		for i, col := range []int{3, 6, 7, 10, 11} {
			n, err := strconv.ParseUint(f[col], 10, 64)
			if err != nil {
				return nil, fmt.Errorf("parse /proc/diskstats: line %d (%s) field %d: %w", line, name, col+1, err)
			}
			v[i] = n
		}
		out = append(out, DiskStat{Name: name, Reads: v[0], ReadMs: v[1], Writes: v[2], WriteMs: v[3], InFlight: v[4]})
	}
	if err := sc.Err(); err != nil {
		return nil, fmt.Errorf("parse /proc/diskstats: %w", err)
	}
	return out, nil
}

// DiskFigures are the disk metrics of SPEC §3 over one sample interval.
type DiskFigures struct {
	QueueLength    float64
	ReadLatencyMs  float64
	WriteLatencyMs float64
}

// DiskMetrics computes the disk figures between two samples of the same
// disks: the queue length is the I/Os in flight at cur, summed over disks;
// read latency is Σ Δms reading / Σ Δreads completed (0 with no read), write
// latency likewise, so a busy disk weighs more than an idle one. A disk
// missing from prev counts from zero; a counter that went backwards (a disk
// replaced, a counter wrap) contributes nothing.
func DiskMetrics(prev, cur []DiskStat) DiskFigures {
	before := make(map[string]DiskStat, len(prev))
	for _, d := range prev {
		before[d.Name] = d
	}
	var fig DiskFigures
	var reads, readMs, writes, writeMs uint64
	for _, d := range cur {
		fig.QueueLength += float64(d.InFlight)
		p := before[d.Name]
		if d.Reads >= p.Reads && d.ReadMs >= p.ReadMs {
			reads += d.Reads - p.Reads
			readMs += d.ReadMs - p.ReadMs
		}
		if d.Writes >= p.Writes && d.WriteMs >= p.WriteMs {
			writes += d.Writes - p.Writes
			writeMs += d.WriteMs - p.WriteMs
		}
	}
	if reads > 0 {
		fig.ReadLatencyMs = float64(readMs) / float64(reads)
	}
	if writes > 0 {
		fig.WriteLatencyMs = float64(writeMs) / float64(writes)
	}
	return fig
}
