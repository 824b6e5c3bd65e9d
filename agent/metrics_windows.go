//go:build windows

package agent

import (
	"context"
	"fmt"
	"strings"
	"unsafe"

	"golang.org/x/sys/windows"
)

// PDH's calls (x/sys/windows wraps none of them). Each returns a PDH_STATUS.
var (
	modpdh                          = windows.NewLazySystemDLL("pdh.dll")
	procPdhOpenQueryW               = modpdh.NewProc("PdhOpenQueryW")
	procPdhAddEnglishCounterW       = modpdh.NewProc("PdhAddEnglishCounterW")
	procPdhCollectQueryData         = modpdh.NewProc("PdhCollectQueryData")
	procPdhGetFormattedCounterValue = modpdh.NewProc("PdhGetFormattedCounterValue")
)

const (
	pdhFmtDouble   = 0x00000200
	pdhFmtNoCap100 = 0x00008000
)

// platformMetrics holds the PDH query of the disk counters, opened at the
// first sample and kept: its counters average over the time between two
// collections.
type platformMetrics struct {
	opened   bool
	query    uintptr
	counters [3]uintptr
	added    [3]uint32 // PdhAddEnglishCounterW's status per counter
	noted    string    // the reasons last logged
}

// readCPU asks gopsutil for the CPU times (GetSystemTimes' figures per
// processor), counting interrupt time once (cpuSampleFromTimes).
func (m *SystemMetrics) readCPU(ctx context.Context) (CPUSample, error) {
	return gopsutilCPU(ctx, true)
}

// sampleDisks collects the PDH counters of pdhDiskCounters and answers the
// figures since the previous collection (diskFiguresFromPDH). PDH errors
// are no value (0), not a failed sample: a host whose performance counters
// are missing or disabled still reports CPU and memory; the reasons are
// logged when they change. The first call has only one collection: no
// figures yet, and nothing logged.
func (m *SystemMetrics) sampleDisks(ctx context.Context) (DiskFigures, error) {
	p := &m.plat
	first := !p.opened
	if first {
		p.open()
	}
	var r [3]pdhReading
	collect := uint32(0)
	if p.query != 0 {
		s, _, _ := procPdhCollectQueryData.Call(p.query)
		collect = uint32(s)
	}
	for i := range r {
		switch {
		case p.added[i] != 0:
			r[i].Status = p.added[i]
		case collect != 0:
			r[i].Status = collect
		default:
			var v pdhFmtCounterValue
			s, _, _ := procPdhGetFormattedCounterValue.Call(p.counters[i], pdhFmtDouble|pdhFmtNoCap100, 0, uintptr(unsafe.Pointer(&v)))
			r[i] = pdhReading{Status: uint32(s), CStatus: v.CStatus, Value: v.Double}
		}
	}
	d, reasons := diskFiguresFromPDH(r)
	if !first {
		m.note(reasons)
	}
	return d, nil
}

// open opens the query and adds the counters; what fails is kept as the
// counters' status.
func (p *platformMetrics) open() {
	p.opened = true
	if s, _, _ := procPdhOpenQueryW.Call(0, 0, uintptr(unsafe.Pointer(&p.query))); s != 0 {
		p.query = 0
		for i := range p.added {
			p.added[i] = uint32(s)
		}
		return
	}
	for i, path := range pdhDiskCounters {
		p16, err := windows.UTF16PtrFromString(path)
		if err != nil {
			p.added[i] = pdhInvalidArgument
			continue
		}
		s, _, _ := procPdhAddEnglishCounterW.Call(p.query, uintptr(unsafe.Pointer(p16)), 0, uintptr(unsafe.Pointer(&p.counters[i])))
		p.added[i] = uint32(s)
	}
}

// note logs the disk counters without a value when that changes.
func (m *SystemMetrics) note(reasons []string) {
	text := strings.Join(reasons, "; ")
	if text == m.plat.noted || m.Logger == nil {
		m.plat.noted = text
		return
	}
	m.plat.noted = text
	if text == "" {
		m.Logger.Info("disk counters have values again")
		return
	}
	m.Logger.Warn(fmt.Sprintf("disk counters without a value count 0: %s", text))
}
