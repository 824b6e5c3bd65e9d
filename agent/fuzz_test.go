package agent

import (
	"bytes"
	"encoding/binary"
	"os"
	"testing"
)

// The agent parses what the host gives it: kernel counters, loginctl output,
// utmp records and a script's stdout. None of it may crash the agent, and
// what comes out must stay inside the ranges the broker accepts.

func FuzzParseCustomLoad(f *testing.F) {
	for _, seed := range []string{
		"42",                           // plain value
		" 100\n",                       // white space around
		"250",                          // capped to 100
		"-1",                           // negative: no value
		"4.5",                          // fraction: no value
		"",                             // nothing printed
		"1e3",                          // exponent: no value
		"+7",                           // explicit sign
		"0000000099999999999999999999", // overflow
	} {
		f.Add([]byte(seed))
	}
	f.Fuzz(func(t *testing.T, out []byte) {
		v, err := ParseCustomLoad(out)
		if (v == nil) == (err == nil) {
			t.Fatalf("ParseCustomLoad(%q) = %v, %v: want a value or an error", out, v, err)
		}
		if v != nil && (*v < 0 || *v > 100) {
			t.Fatalf("ParseCustomLoad(%q) = %d, outside 0..100", out, *v)
		}
	})
}

func FuzzParseProcAndDiskstats(f *testing.F) {
	for _, name := range []string{"procstat.1", "diskstats.1", "diskstats-busy.2"} {
		data, err := os.ReadFile("testdata/" + name)
		if err != nil {
			f.Fatal(err)
		}
		f.Add(data, data)
	}
	f.Add([]byte("cpu 1 2 3 4 5 6 7 8 9 10 11 12\n"), []byte("8 0 sda 18446744073709551615 0 0 1 0 0 0 0 0 0 0\n")) // max counters
	f.Fuzz(func(t *testing.T, a, b []byte) {
		pa, errA := ParseProcStat(bytes.NewReader(a))
		pb, errB := ParseProcStat(bytes.NewReader(b))
		if errA == nil && errB == nil {
			if p := CPUPercent(pa, pb); p < 0 || p > 100 {
				t.Fatalf("CPUPercent = %v, outside 0..100", p)
			}
		}
		da, errA := ParseDiskstats(bytes.NewReader(a), nil)
		db, errB := ParseDiskstats(bytes.NewReader(b), nil)
		if errA == nil && errB == nil {
			d := DiskMetrics(da, db)
			if d.QueueLength < 0 || d.ReadLatencyMs < 0 || d.WriteLatencyMs < 0 {
				t.Fatalf("DiskMetrics = %+v, negative", d)
			}
		}
	})
}

func FuzzParseUtmp(f *testing.F) {
	data, err := os.ReadFile("testdata/utmp.bin")
	if err != nil {
		f.Fatal(err)
	}
	f.Add(data)                         // the recorded console, ssh and xrdp logons
	f.Add(data[:utmpRecordSize])        // one record
	f.Add(make([]byte, utmpRecordSize)) // all zero
	f.Fuzz(func(t *testing.T, data []byte) {
		entries, err := ParseUtmp(data, binary.LittleEndian)
		if err != nil {
			return
		}
		for _, s := range UtmpSessions(entries, nil) {
			if s.ID == "" || s.User == "" {
				t.Fatalf("session %+v without id or user", s)
			}
		}
	})
}

func FuzzParseLoginctl(f *testing.F) {
	for _, name := range []string{"loginctl-show.txt", "loginctl-list-v252.txt", "loginctl-list-v255.txt"} {
		data, err := os.ReadFile("testdata/" + name)
		if err != nil {
			f.Fatal(err)
		}
		f.Add(data)
	}
	f.Add([]byte("No sessions.\n"))
	f.Add([]byte("Id=\nName=x\nClass=user\n\n\n=\n")) // empty id
	f.Fuzz(func(t *testing.T, out []byte) {
		for _, id := range ParseLoginctlList(out) {
			if !sessionIDPattern.MatchString(id) {
				t.Fatalf("id %q is not a session id", id)
			}
		}
		for _, s := range ParseLoginctlSessions(out) {
			if s.ID == "" || s.User == "" || s.State != "Active" {
				t.Fatalf("session %+v", s)
			}
		}
	})
}
