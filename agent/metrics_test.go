package agent

import (
	"math"
	"os"
	"path/filepath"
	"testing"
)

func readCPU(t *testing.T, name string) CPUSample {
	t.Helper()
	f, err := os.Open(filepath.Join("testdata", name))
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	s, err := ParseProcStat(f)
	if err != nil {
		t.Fatal(err)
	}
	return s
}

func readDisks(t *testing.T, name string, include func(string) bool) []DiskStat {
	t.Helper()
	f, err := os.Open(filepath.Join("testdata", name))
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	d, err := ParseDiskstats(f, include)
	if err != nil {
		t.Fatal(err)
	}
	return d
}

func near(a, b float64) bool { return math.Abs(a-b) < 1e-9 }

func only(names ...string) func(string) bool {
	return func(n string) bool {
		for _, x := range names {
			if n == x {
				return true
			}
		}
		return false
	}
}

// TestCPUPercentRecorded uses two /proc/stat samples recorded 3 s apart on a
// busy 2-core build machine.
func TestCPUPercentRecorded(t *testing.T) {
	prev, cur := readCPU(t, "procstat.1"), readCPU(t, "procstat.2")
	// procstat.1: cpu 11006 0 7766 58667 496 0 280 0 → total 78215, idle 58667+496 = 59163
	// procstat.2: cpu 11412 0 8001 58668 497 0 281 0 → total 78859, idle 59165
	// Δtotal 644, Δidle 2: 100 × 642 / 644 = 99.6894…
	want := 100 * 642.0 / 644.0
	if got := CPUPercent(prev, cur); !near(got, want) {
		t.Errorf("CPUPercent = %v, want %v", got, want)
	}
}

func TestCPUPercentEdges(t *testing.T) {
	s := CPUSample{User: 100, Idle: 300}
	tests := []struct {
		name      string
		prev, cur CPUSample
		want      float64
	}{
		{"no tick passed", s, s, 0},
		{"counter reset", s, CPUSample{User: 1, Idle: 1}, 0},
		// Δuser 50, Δidle 150: 100 × 50 / 200 = 25.
		{"quarter busy", s, CPUSample{User: 150, Idle: 450}, 25},
		// guest time is inside user, not added: Δsystem 10, Δiowait 10 (idle), Δsteal 20
		// → busy 30 of 40 = 75.
		{"iowait idle, steal busy", s, CPUSample{User: 100, System: 10, IOWait: 10, Steal: 20, Idle: 300}, 75},
		{"since boot", CPUSample{}, s, 25},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			if got := CPUPercent(tt.prev, tt.cur); !near(got, tt.want) {
				t.Errorf("CPUPercent = %v, want %v", got, tt.want)
			}
		})
	}
}

func TestParseProcStatErrors(t *testing.T) {
	for _, in := range []string{"", "cpu0 1 2 3 4\n", "cpu 1 2 x 4 5\n", "cpu 1 2\n"} {
		if _, err := ParseProcStat(stringsReader(in)); err == nil {
			t.Errorf("ParseProcStat(%q) = nil error, want one", in)
		}
	}
}

// TestDiskMetricsRecorded uses two /proc/diskstats samples recorded 3 s apart
// around a 50 MiB direct write on a virtio disk.
func TestDiskMetricsRecorded(t *testing.T) {
	prev := readDisks(t, "diskstats.1", only("vda"))
	cur := readDisks(t, "diskstats.2", only("vda"))
	// vda: reads 41957→42053 (Δ96), ms reading 12968→12995 (Δ27): 27/96 = 0.28125
	//      writes 15942→16962 (Δ1020), ms writing 8492→12496 (Δ4004): 4004/1020 = 3.92549…
	//      in flight 0.
	got := DiskMetrics(prev, cur)
	want := DiskFigures{QueueLength: 0, ReadLatencyMs: 27.0 / 96, WriteLatencyMs: 4004.0 / 1020}
	if !near(got.QueueLength, want.QueueLength) || !near(got.ReadLatencyMs, want.ReadLatencyMs) || !near(got.WriteLatencyMs, want.WriteLatencyMs) {
		t.Errorf("DiskMetrics = %+v, want %+v", got, want)
	}
}

func TestDiskMetricsBusy(t *testing.T) {
	whole := only("sda", "nvme0n1")
	prev := readDisks(t, "diskstats-busy.1", whole)
	cur := readDisks(t, "diskstats-busy.2", whole)
	if len(cur) != 2 {
		t.Fatalf("kept %d disks, want sda and nvme0n1 only", len(cur))
	}
	// sda:     Δreads 100 Δms 2000, Δwrites 200 Δms 3000, in flight 3
	// nvme0n1: Δreads 300 Δms  300, Δwrites 600 Δms 1200, in flight 2
	// read 2300/400 = 5.75 ms, write 4200/800 = 5.25 ms (weighted by I/Os,
	// not the mean of 20 and 1), queue 3+2 = 5.
	got := DiskMetrics(prev, cur)
	want := DiskFigures{QueueLength: 5, ReadLatencyMs: 5.75, WriteLatencyMs: 5.25}
	if got != want {
		t.Errorf("DiskMetrics = %+v, want %+v", got, want)
	}

	t.Run("all devices would double count", func(t *testing.T) {
		all := DiskMetrics(readDisks(t, "diskstats-busy.1", nil), readDisks(t, "diskstats-busy.2", nil))
		if all.QueueLength == want.QueueLength {
			t.Errorf("with partitions and dm devices queue = %v; the include filter is what keeps it at %v", all.QueueLength, want.QueueLength)
		}
	})
	t.Run("counter reset contributes nothing", func(t *testing.T) {
		reset := []DiskStat{{Name: "sda", Reads: 5, ReadMs: 1, Writes: 5, WriteMs: 1}, cur[1]}
		got := DiskMetrics(prev, reset)
		// only nvme0n1 counts: 300/300 = 1, 1200/600 = 2, queue 0+2.
		want := DiskFigures{QueueLength: 2, ReadLatencyMs: 1, WriteLatencyMs: 2}
		if got != want {
			t.Errorf("DiskMetrics = %+v, want %+v", got, want)
		}
	})
	t.Run("no I/O is zero latency", func(t *testing.T) {
		if got := DiskMetrics(cur, cur); got != (DiskFigures{QueueLength: 5}) {
			t.Errorf("DiskMetrics(same, same) = %+v, want queue 5 and no latency", got)
		}
	})
}

func TestParseDiskstatsErrors(t *testing.T) {
	for _, in := range []string{"8 0 sda 1 2 3\n", "8 0 sda 1 2 3 x 5 6 7 8 9 10 11\n"} {
		if _, err := ParseDiskstats(stringsReader(in), nil); err == nil {
			t.Errorf("ParseDiskstats(%q) = nil error, want one", in)
		}
	}
}

// TestSystemMetricsFromProc runs the live source over a fake /proc and
// /sys/block: the first sample counts from boot, the second is the delta.
func TestSystemMetricsFromProc(t *testing.T) {
	proc, sys := t.TempDir(), t.TempDir()
	if err := os.MkdirAll(filepath.Join(sys, "vda", "device"), 0o755); err != nil {
		t.Fatal(err)
	}
	if err := os.MkdirAll(filepath.Join(sys, "loop0"), 0o755); err != nil {
		t.Fatal(err)
	}
	put := func(src, dst string) {
		data, err := os.ReadFile(filepath.Join("testdata", src))
		if err != nil {
			t.Fatal(err)
		}
		if err := os.WriteFile(filepath.Join(proc, dst), data, 0o644); err != nil {
			t.Fatal(err)
		}
	}
	put("procstat.1", "stat")
	put("diskstats.1", "diskstats")
	m := &SystemMetrics{ProcDir: proc, SysBlockDir: sys}
	first, err := m.Sample(t.Context())
	if err != nil {
		t.Fatal(err)
	}
	// Since boot: busy 11006+7766+280 = 19052 of 78215.
	if want := 100 * 19052.0 / 78215; !near(first.CPUPercent, want) {
		t.Errorf("first CPUPercent = %v, want %v (since boot)", first.CPUPercent, want)
	}
	if first.MemoryPercent <= 0 || first.MemoryPercent > 100 {
		t.Errorf("MemoryPercent = %v, want 0 < x <= 100", first.MemoryPercent)
	}
	put("procstat.2", "stat")
	put("diskstats.2", "diskstats")
	second, err := m.Sample(t.Context())
	if err != nil {
		t.Fatal(err)
	}
	if !near(second.CPUPercent, 100*642.0/644) || !near(second.DiskReadLatencyMs, 27.0/96) || !near(second.DiskWriteLatencyMs, 4004.0/1020) {
		t.Errorf("second sample = %+v, want the recorded deltas of vda only", second)
	}
	if second.SampledAt.IsZero() {
		t.Error("SampledAt is zero")
	}
}
