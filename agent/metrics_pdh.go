package agent

import (
	"fmt"
	"math"

	"github.com/shirou/gopsutil/v4/cpu"
)

// The arithmetic of the Windows metrics, without a build tag so that it is
// tested on every system; metrics_windows.go makes the calls.

// cpuSampleFromTimes turns gopsutil's CPU times (seconds) into a CPUSample
// in ticks of 10 ms. On Windows, gopsutil's System is the kernel time less
// the idle time, and the kernel time already holds the time spent in
// interrupts and DPCs, which gopsutil also reports as Irq: with irqInSystem
// it is counted once, as Task Manager counts (busy = user + kernel − idle
// of user + kernel).
func cpuSampleFromTimes(t cpu.TimesStat, irqInSystem bool) CPUSample {
	ticks := func(sec float64) uint64 {
		if !(sec > 0) || math.IsInf(sec, 0) {
			return 0
		}
		return uint64(sec * 100)
	}
	c := CPUSample{User: ticks(t.User), Nice: ticks(t.Nice), System: ticks(t.System), Idle: ticks(t.Idle),
		IOWait: ticks(t.Iowait), IRQ: ticks(t.Irq), SoftIRQ: ticks(t.Softirq), Steal: ticks(t.Steal)}
	if irqInSystem {
		c.IRQ = 0
	}
	return c
}

// pdhDiskCounters are the Windows counters of Horizon's disk metrics (seed
// 003, SPEC §3), by their English names: PdhAddEnglishCounterW finds them
// whatever the system's display language.
var pdhDiskCounters = [3]string{
	`\PhysicalDisk(_Total)\Avg. Disk Queue Length`,
	`\PhysicalDisk(_Total)\Avg. Disk sec/Read`,
	`\PhysicalDisk(_Total)\Avg. Disk sec/Write`,
}

// PDH status codes (pdhmsg.h) the agent names; others are shown in hex.
const (
	pdhCStatusValidData        = 0x00000000
	pdhCStatusNewData          = 0x00000001
	pdhCStatusNoInstance       = 0x800007D1
	pdhNoData                  = 0x800007D5
	pdhCalcNegativeDenominator = 0x800007D6
	pdhCalcNegativeTimebase    = 0x800007D7
	pdhCalcNegativeValue       = 0x800007D8
	pdhCStatusNoObject         = 0xC0000BB8
	pdhCStatusNoCounter        = 0xC0000BB9
	pdhCStatusInvalidData      = 0xC0000BBA
	pdhInvalidHandle           = 0xC0000BBC
	pdhInvalidArgument         = 0xC0000BBD
	pdhCStatusBadCounterName   = 0xC0000BC0
	pdhInvalidData             = 0xC0000BC6
)

var pdhStatusNames = map[uint32]string{
	pdhCStatusNoInstance:       "PDH_CSTATUS_NO_INSTANCE (no such instance)",
	pdhNoData:                  "PDH_NO_DATA",
	pdhCalcNegativeDenominator: "PDH_CALC_NEGATIVE_DENOMINATOR",
	pdhCalcNegativeTimebase:    "PDH_CALC_NEGATIVE_TIMEBASE",
	pdhCalcNegativeValue:       "PDH_CALC_NEGATIVE_VALUE",
	pdhCStatusNoObject:         "PDH_CSTATUS_NO_OBJECT (no such performance object)",
	pdhCStatusNoCounter:        "PDH_CSTATUS_NO_COUNTER (no such counter)",
	pdhCStatusInvalidData:      "PDH_CSTATUS_INVALID_DATA",
	pdhInvalidHandle:           "PDH_INVALID_HANDLE",
	pdhInvalidArgument:         "PDH_INVALID_ARGUMENT",
	pdhCStatusBadCounterName:   "PDH_CSTATUS_BAD_COUNTERNAME",
	pdhInvalidData:             "PDH_INVALID_DATA",
}

func pdhStatusText(s uint32) string {
	if n, ok := pdhStatusNames[s]; ok {
		return n
	}
	return fmt.Sprintf("PDH status 0x%08X", s)
}

// pdhReading is what PDH answered for one counter at one collection:
// Status is the PDH_STATUS of the first call that failed (adding the
// counter, collecting, formatting; 0 if none did), CStatus and Value the
// PDH_FMT_COUNTERVALUE (PDH_FMT_DOUBLE) PdhGetFormattedCounterValue filled.
type pdhReading struct {
	Status  uint32  `json:"status"`
	CStatus uint32  `json:"cStatus"`
	Value   float64 `json:"value"`
}

// value is the reading's value, or "" and the reason there is none: a call
// that failed, a counter status other than valid or new data (after a
// single collection a rate counter has no value yet), or a value that is
// not a finite number ≥ 0 (PDH computes averages from raw counters that
// can wrap).
func (r pdhReading) value() (float64, string) {
	switch {
	case r.Status != 0:
		return 0, pdhStatusText(r.Status)
	case r.CStatus != pdhCStatusValidData && r.CStatus != pdhCStatusNewData:
		return 0, "counter status " + pdhStatusText(r.CStatus)
	case math.IsNaN(r.Value) || math.IsInf(r.Value, 0) || r.Value < 0:
		return 0, fmt.Sprintf("value %v", r.Value)
	}
	return r.Value, ""
}

// diskFiguresFromPDH is the disk figures of SPEC §3 from the readings of
// pdhDiskCounters: the queue length as PDH averages it over the time
// between the last two collections, the latencies from seconds (PDH's
// unit for Avg. Disk sec/Read and sec/Write) to milliseconds. A counter
// without a value counts 0, and the reason is returned.
func diskFiguresFromPDH(r [3]pdhReading) (DiskFigures, []string) {
	var v [3]float64
	var reasons []string
	for i := range r {
		var why string
		if v[i], why = r[i].value(); why != "" {
			reasons = append(reasons, pdhDiskCounters[i]+": "+why)
		}
	}
	return DiskFigures{QueueLength: v[0], ReadLatencyMs: 1000 * v[1], WriteLatencyMs: 1000 * v[2]}, reasons
}

// pdhFmtCounterValue is PDH_FMT_COUNTERVALUE read as PDH_FMT_DOUBLE.
type pdhFmtCounterValue struct {
	CStatus uint32
	_       uint32
	Double  float64
}
