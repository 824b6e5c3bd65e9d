package agent

import (
	"math"
	"strings"
	"testing"

	"github.com/shirou/gopsutil/v4/cpu"
)

// TestDiskFiguresFromPDH: the readings of the three counters as PDH gives
// them. Wine 8 has no PhysicalDisk object (its answer is the "Wine" case,
// seen under Wine by TestWindowsMetricsLive); the other answers are what
// PdhGetFormattedCounterValue gives on Windows (pdh.h, pdhmsg.h).
func TestDiskFiguresFromPDH(t *testing.T) {
	ok := func(v float64) pdhReading { return pdhReading{CStatus: pdhCStatusValidData, Value: v} }
	tests := []struct {
		name    string
		r       [3]pdhReading
		want    DiskFigures
		reasons []string // parts of each reason, in counter order
	}{
		// Seconds to milliseconds: 0.00045 s a read is 0.45 ms, 0.0012 s
		// a write 1.2 ms; the queue length is as PDH averaged it.
		{"busy disk", [3]pdhReading{ok(1.75), ok(0.00045), ok(0.0012)}, DiskFigures{1.75, 0.45, 1.2}, nil},
		{"new data counts", [3]pdhReading{{CStatus: pdhCStatusNewData, Value: 0.5}, ok(0), ok(0)}, DiskFigures{0.5, 0, 0}, nil},
		{"idle disk", [3]pdhReading{ok(0), ok(0), ok(0)}, DiskFigures{}, nil},
		// After one collection a rate counter has no value yet.
		{"first collection", [3]pdhReading{{Status: pdhInvalidData, CStatus: pdhCStatusInvalidData}, {Status: pdhInvalidData}, {Status: pdhInvalidData}},
			DiskFigures{}, []string{"Avg. Disk Queue Length: PDH_INVALID_DATA", "sec/Read: PDH_INVALID_DATA", "sec/Write: PDH_INVALID_DATA"}},
		{"Wine: no PhysicalDisk", [3]pdhReading{{Status: pdhCStatusNoCounter}, {Status: pdhCStatusNoCounter}, {Status: pdhCStatusNoCounter}},
			DiskFigures{}, []string{"PDH_CSTATUS_NO_COUNTER", "PDH_CSTATUS_NO_COUNTER", "PDH_CSTATUS_NO_COUNTER"}},
		{"one counter's status", [3]pdhReading{ok(2), {CStatus: pdhCalcNegativeDenominator, Value: 7}, ok(0.002)},
			DiskFigures{2, 0, 2}, []string{"sec/Read: counter status PDH_CALC_NEGATIVE_DENOMINATOR"}},
		{"values that are no figures", [3]pdhReading{ok(math.NaN()), ok(math.Inf(1)), ok(-0.001)},
			DiskFigures{}, []string{"value NaN", "value +Inf", "value -0.001"}},
		{"an unnamed status", [3]pdhReading{{Status: 0xC0000BFF}, ok(0), ok(0)}, DiskFigures{}, []string{"PDH status 0xC0000BFF"}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			got, reasons := diskFiguresFromPDH(tt.r)
			if !near(got.QueueLength, tt.want.QueueLength) || !near(got.ReadLatencyMs, tt.want.ReadLatencyMs) || !near(got.WriteLatencyMs, tt.want.WriteLatencyMs) {
				t.Errorf("figures = %+v, want %+v", got, tt.want)
			}
			if len(reasons) != len(tt.reasons) {
				t.Fatalf("reasons = %q, want %d", reasons, len(tt.reasons))
			}
			for i, part := range tt.reasons {
				if !strings.Contains(reasons[i], part) || !strings.HasPrefix(reasons[i], `\PhysicalDisk(_Total)\`) {
					t.Errorf("reason %d = %q, want the counter and %q", i, reasons[i], part)
				}
			}
		})
	}
}

// TestCPUSampleFromTimes: gopsutil's Windows times hold the interrupt time
// twice (in System, which is kernel less idle, and in Irq); it counts once.
func TestCPUSampleFromTimes(t *testing.T) {
	// Two samples 10 s apart on 2 CPUs (20 s of CPU): user 4 s, kernel
	// less idle 3 s of which 1 s interrupts, idle 13 s. Busy: 7 of 20 s,
	// 35 %; counting Irq again would say 8 of 21 s, 38.1 %.
	prev := cpu.TimesStat{User: 100, System: 50, Idle: 850, Irq: 10}
	cur := cpu.TimesStat{User: 104, System: 53, Idle: 863, Irq: 11}
	if got := CPUPercent(cpuSampleFromTimes(prev, true), cpuSampleFromTimes(cur, true)); !near(got, 35) {
		t.Errorf("Windows CPU = %v %%, want 35", got)
	}
	if got := CPUPercent(cpuSampleFromTimes(prev, false), cpuSampleFromTimes(cur, false)); !near(got, 100*8.0/21) {
		t.Errorf("other systems' CPU = %v %%, want 8/21 (Irq apart from System)", got)
	}
	if c := cpuSampleFromTimes(cpu.TimesStat{User: math.NaN(), System: -1, Idle: math.Inf(1)}, true); c != (CPUSample{}) {
		t.Errorf("times that are no figures = %+v, want zero", c)
	}
}
