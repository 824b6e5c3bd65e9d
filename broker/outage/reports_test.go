package outage

import (
	"fmt"
	"runtime"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/vdibroker/vdibroker"
)

// sessionsOf returns n reported sessions of users named prefix and a
// number, each padded to size bytes.
func sessionsOf(prefix string, n, size int) []vdibroker.AgentSession {
	ss := make([]vdibroker.AgentSession, n)
	for i := range ss {
		u := fmt.Sprintf("%s%d-", prefix, i)
		ss[i] = vdibroker.AgentSession{ID: fmt.Sprint(i), User: u + strings.Repeat("x", max(0, size-len(u))), State: vdibroker.StateActive}
	}
	return ss
}

// TestReportsBound (R-SEC, R-OUT1): every host's credential writes its
// users here at every heartbeat, and a registration token with maxHosts 0
// registers any number of hosts. All hosts' reports hold at most the
// bound: a report past it drops its host's gone users first, and is not
// kept at all when its users alone do not fit (its host is then one with
// no report, which a reconnect answered from memory takes as before any
// report came). Hosts not heard from for a day are swept, and a host
// forgotten (deleted, its registration reset) gives its bytes back.
func TestReportsBound(t *testing.T) {
	t0 := time.Date(2026, 12, 1, 9, 0, 0, 0, time.UTC)
	// One report of 100 users of 100 bytes: 512 + len("p") + len("hN")
	// + 100 × (100 + 128) = 23,315 bytes.
	const one = reportHostOverhead + 1 + 2 + 100*(100+reportUserOverhead)
	r := reports{max: 3*one + one/4} // room for three reports and a quarter
	for i := range 3 {
		if kept, _ := r.set(hostKey{"p", fmt.Sprint("h", i)}, sessionsOf("u", 100, 100), t0); !kept {
			t.Fatalf("report %d not kept within the bound", i)
		}
	}
	if hosts, bytes := r.size(); hosts != 3 || bytes != 3*one {
		t.Fatalf("three reports: %d hosts, %d bytes; want 3, %d", hosts, bytes, 3*one)
	}
	// A fourth host's report does not fit: not kept, said once.
	kept, warn := r.set(hostKey{"p", "h3"}, sessionsOf("v", 100, 100), t0)
	if kept || !warn {
		t.Fatalf("a report past the bound: kept %v, warn %v; want not kept, warned", kept, warn)
	}
	if _, warn := r.set(hostKey{"p", "h3"}, sessionsOf("v", 100, 100), t0.Add(time.Second)); warn {
		t.Error("a second report past the bound within sweepEvery is warned again")
	}
	if _, warn := r.set(hostKey{"p", "h4"}, sessionsOf("v", 100, 100), t0.Add(sweepEvery)); !warn {
		t.Error("a report past the bound sweepEvery after the last warned is not warned")
	}
	if _, known, _ := r.has(hostKey{"p", "h3"}, "v0-"+strings.Repeat("x", 97)); known {
		t.Error("a report not kept is known")
	}
	// h0's users all log off and 50 others log on: with its 100 gone
	// users it would hold 515 + 150 × 228 = 34,715 bytes, past the
	// bound beside the other two (46,630 + 34,715 > 75,773), so they
	// go first; its 50 users (11,915 bytes) fit in its own room.
	if kept, _ := r.set(hostKey{"p", "h0"}, sessionsOf("w", 50, 100), t0.Add(time.Second)); !kept {
		t.Fatal("h0's smaller report is not kept")
	}
	if _, known, goneAt := r.has(hostKey{"p", "h0"}, sessionsOf("u", 1, 100)[0].User); !known || !goneAt.IsZero() {
		t.Errorf("h0 past the bound: known %v, gone at %v; want known, its gone users dropped", known, goneAt)
	}
	if _, bytes := r.size(); bytes > r.bound() {
		t.Errorf("%d bytes held, past the bound %d", bytes, r.bound())
	}
	// Forgetting a host (deleted, reset) gives its bytes back: h3 fits.
	r.forget(hostKey{"p", "h1"})
	if kept, _ := r.set(hostKey{"p", "h3"}, sessionsOf("v", 100, 100), t0.Add(2*time.Second)); !kept {
		t.Error("h3 not kept after h1 was forgotten")
	}
	if _, known, _ := r.has(hostKey{"p", "h1"}, sessionsOf("u", 1, 100)[0].User); known {
		t.Error("h1 forgotten is still known")
	}
	// A day later only the host that still reports is kept; the sweep
	// gives the others' bytes back.
	later := t0.Add(goneFor + sweepEvery + time.Minute)
	r.set(hostKey{"p", "h2"}, sessionsOf("u", 100, 100), later)
	if hosts, bytes := r.size(); hosts != 1 || bytes != one {
		t.Errorf("a day later: %d hosts, %d bytes; want h2 alone, %d", hosts, bytes, one)
	}
}

// TestMaxReportBytesBoundsTheLargestReports (R-SEC): the largest report
// one host's credential can make this broker keep, 2,000 users of 512
// bytes (a megabyte of heartbeat) with 2,000 of 1,024 bytes gone, holds
// some 3.4 MB; the bound holds about 60 of them, where the map's old
// bound (131,072 hosts) held 450 GB.
func TestMaxReportBytesBoundsTheLargestReports(t *testing.T) {
	t0 := time.Date(2026, 12, 1, 9, 0, 0, 0, time.UTC)
	var r reports
	k := hostKey{"p", "h"}
	r.set(k, sessionsOf("a", 2000, 1024), t0)
	r.set(k, sessionsOf("b", 2000, 512), t0.Add(time.Second))
	_, one := r.size()
	// 2,000 × (1,024 + 128) + 2,000 × (512 + 128) + 515 = 3,584,515.
	if want := 2000*(1024+reportUserOverhead) + 2000*(512+reportUserOverhead) + reportHostOverhead + 2; one != want {
		t.Fatalf("the largest report counts %d bytes, want %d", one, want)
	}
	if n := maxReportBytes / one; n < 50 || n > 100 {
		t.Errorf("the bound holds %d of the largest reports, want 50..100", n)
	}
}

// TestReportBytesMeasured: reportBytes counts at least what a report
// holds in memory (heap measured after a collection), for short and long
// names, so the bound in bytes is one of memory.
func TestReportBytesMeasured(t *testing.T) {
	if testing.Short() {
		t.Skip("measures the heap")
	}
	t0 := time.Date(2026, 12, 1, 9, 0, 0, 0, time.UTC)
	for _, size := range []int{8, 64, 512} {
		t.Run(fmt.Sprint(size), func(t *testing.T) {
			checkReportsCountTheirHeap(t, func(r *reports, k hostKey, h int) {
				r.set(k, sessionsOf(fmt.Sprint(h, "a"), 2000, size), t0)
				r.set(k, sessionsOf(fmt.Sprint(h, "b"), 2000, size), t0.Add(time.Second))
			})
		})
	}
}

// TestHeldForgotten (R-SEC): a host deleted, or whose registration an
// admin reset, takes its held heartbeat with it; another host's stays.
func TestHeldForgotten(t *testing.T) {
	m := &Mode{}
	t0 := time.Date(2026, 12, 1, 9, 0, 0, 0, time.UTC)
	for _, k := range []hostKey{{"p", "h1"}, {"p", "h2"}, {"q", "h1"}} {
		m.Hold(k.pool, k.host, &vdibroker.HeartbeatRequest{}, t0)
		m.Report(k.pool, k.host, sessionsOf("u", 1, 8), t0)
	}
	m.Forget("p", "h1")
	if st := m.State(); st.HeldHosts != 2 || st.ReportedHosts != 2 {
		t.Fatalf("after p/h1 forgotten: %+v, want 2 held, 2 reported", st)
	}
	if hb, _ := m.TakeHeld("p", "h1"); hb != nil {
		t.Error("p/h1's held heartbeat stays")
	}
	m.ForgetPool("q")
	if st := m.State(); st.HeldHosts != 1 || st.ReportedHosts != 1 {
		t.Fatalf("after pool q forgotten: %+v, want p/h2 alone", st)
	}
}

// TestReportBytesMeasuredAfterShrink (R-SEC): reportBytes counts at least
// what a report holds when its maps once held more than they hold now. A
// Go map keeps the room it was made with or grew to, so a report of one
// user in 2,000 sessions, or a host whose 2,000 gone users (4,000 before
// the newest were kept) all expired, would hold that room uncounted: some
// 100 KB and 390 KB a host, counted as under 3 KB, which the bound in
// bytes would then multiply.
func TestReportBytesMeasuredAfterShrink(t *testing.T) {
	if testing.Short() {
		t.Skip("measures the heap")
	}
	t0 := time.Date(2026, 12, 1, 9, 0, 0, 0, time.UTC)
	for _, tc := range []struct {
		name string
		feed func(r *reports, k hostKey, h int)
	}{
		{"one user in 2,000 sessions", func(r *reports, k hostKey, h int) {
			ss := sessionsOf(fmt.Sprint(h, "a"), 2000, 64)
			for i := range ss {
				ss[i].User = ss[0].User
			}
			r.set(k, ss, t0)
		}},
		{"gone users expired", func(r *reports, k hostKey, h int) {
			r.set(k, sessionsOf(fmt.Sprint(h, "a"), 2000, 64), t0)
			r.set(k, sessionsOf(fmt.Sprint(h, "b"), 2000, 64), t0.Add(time.Second))
			r.set(k, nil, t0.Add(2*time.Second)) // 4,000 gone, the newest 2,000 kept
			c := sessionsOf(fmt.Sprint(h, "c"), 10, 64)
			r.set(k, c, t0.Add(goneFor/2))
			r.set(k, c, t0.Add(goneFor+3*time.Second)) // b's gone a day: none left
		}},
	} {
		t.Run(tc.name, func(t *testing.T) { checkReportsCountTheirHeap(t, tc.feed) })
	}
}

// TestReportBytesMeasuredPoolPerHost (R-SEC): reportBytes counts at least
// what a report holds when each host is the only one of its pool, whose
// link from reports.pools it then holds alone (reportHostOverhead).
func TestReportBytesMeasuredPoolPerHost(t *testing.T) {
	if testing.Short() {
		t.Skip("measures the heap")
	}
	t0 := time.Date(2026, 12, 1, 9, 0, 0, 0, time.UTC)
	const hosts = 5000
	var r reports
	var a, b runtime.MemStats
	// Names made before the first measure: the keys' bytes are counted
	// (len(k.pool), len(k.host)) but these are held by the test too.
	keys := make([]hostKey, hosts)
	users := make([][]vdibroker.AgentSession, hosts)
	for h := range keys {
		keys[h] = hostKey{fmt.Sprint("pool", h), fmt.Sprint("h", h)}
		users[h] = sessionsOf(fmt.Sprint(h, "a"), 1, 8)
	}
	runtime.GC()
	runtime.ReadMemStats(&a)
	for h, k := range keys {
		r.set(k, users[h], t0)
	}
	runtime.GC()
	runtime.ReadMemStats(&b)
	_, counted := r.size()
	held := int64(b.HeapAlloc) - int64(a.HeapAlloc)
	t.Logf("%d hosts, a pool each: %d bytes held, %d counted", hosts, held, counted)
	if held > int64(counted) {
		t.Errorf("the reports hold %d bytes, reportBytes counts %d", held, counted)
	}
	runtime.KeepAlive(&r)
	runtime.KeepAlive(keys)
	runtime.KeepAlive(users)
}

// checkReportsCountTheirHeap feeds 20 hosts' reports to new reports
// (feed, for host h under key k) and fails t when they hold more of the
// heap, measured after a collection, than reportBytes counts.
func checkReportsCountTheirHeap(t *testing.T, feed func(r *reports, k hostKey, h int)) {
	t.Helper()
	const hosts = 20
	var r reports
	var a, b runtime.MemStats
	runtime.GC()
	runtime.ReadMemStats(&a)
	for h := range hosts {
		feed(&r, hostKey{"p", fmt.Sprint("h", h)}, h)
	}
	runtime.GC()
	runtime.ReadMemStats(&b)
	_, counted := r.size()
	held := int64(b.HeapAlloc) - int64(a.HeapAlloc)
	t.Logf("%d hosts: %d bytes held, %d counted", hosts, held, counted)
	if held > int64(counted) {
		t.Errorf("the reports hold %d bytes, reportBytes counts %d", held, counted)
	}
	runtime.KeepAlive(&r)
}

// TestReportsCountedUnderConcurrency (R-SEC): the bytes counted against
// the bound are those of the reports kept, whatever mix of reports,
// replacements, expiries, sweeps and forgets (of a host, of a pool, of a
// pool's reports taken before a read, as HostsRead) ran at once (run
// with -race), and stay within the bound; each pool's links hold its
// reports kept, each once, and no other.
func TestReportsCountedUnderConcurrency(t *testing.T) {
	t0 := time.Date(2026, 12, 1, 9, 0, 0, 0, time.UTC)
	r := reports{max: 200_000}
	var wg sync.WaitGroup
	for g := range 8 {
		wg.Go(func() {
			for i := range 300 {
				k := hostKey{fmt.Sprint("p", i%3), fmt.Sprint("h", (g+i)%16)}
				// Each goroutine's time moves on by up to a day and a
				// half, a little back now and then (a clock stepped).
				now := t0.Add(time.Duration(i*g) * 5 * time.Minute).Add(-time.Duration(i%7) * time.Hour)
				switch i % 10 {
				case 9:
					r.forget(k)
				case 8:
					r.forgetOfPool(k.pool, func(string, time.Time) bool { return true })
				case 7:
					r.forgetOfPool(k.pool, func(host string, at time.Time) bool { return host == k.host || at.Before(now) })
				default:
					r.set(k, sessionsOf(fmt.Sprint(g, "-", i%5), 1+(i*g)%40, 8+i%64), now)
				}
				if i%50 == 0 {
					r.has(k, "x")
					r.size()
				}
			}
		})
	}
	wg.Wait()
	sum := 0
	for k, hr := range r.m {
		if got := reportBytes(k, hr.users, hr.gone); got != hr.bytes {
			t.Errorf("%v counts %d bytes, holds %d", k, hr.bytes, got)
		}
		sum += hr.bytes
	}
	if r.bytes != sum {
		t.Errorf("the reports count %d bytes, their sum is %d", r.bytes, sum)
	}
	if r.bytes > r.bound() {
		t.Errorf("%d bytes held, past the bound %d", r.bytes, r.bound())
	}
	checkPoolLinks(t, &r)
}

// checkPoolLinks fails t unless r's pool links (reports.pools) hold each
// report of m once, under its pool, and nothing else.
func checkPoolLinks(t *testing.T, r *reports) {
	t.Helper()
	linked := 0
	for pool, hr := range r.pools {
		if hr == nil || hr.prev != nil {
			t.Errorf("pool %q: its first report %p has one before it", pool, hr)
			continue
		}
		for ; hr != nil; hr = hr.next {
			linked++
			if r.m[hostKey{pool, hr.host}] != hr {
				t.Errorf("pool %q links a report of %q that m does not keep", pool, hr.host)
			}
			if hr.next != nil && hr.next.prev != hr {
				t.Errorf("pool %q: %q's next does not link back", pool, hr.host)
			}
			if linked > len(r.m) {
				t.Fatalf("the pools link more reports than m keeps (%d): a cycle", len(r.m))
			}
		}
	}
	if linked != len(r.m) {
		t.Errorf("the pools link %d reports, m keeps %d", linked, len(r.m))
	}
}

// TestHostsReadWalksItsPoolAlone (R-SEC, R-OUT1): a read of a pool's hosts
// (HostsRead, at every read of a pool) looks at that pool's reports only,
// not all hosts': beside 10,000 hosts of other pools, a 100-host pool's
// read visits its 100 reports, and drops those of its hosts gone.
func TestHostsReadWalksItsPoolAlone(t *testing.T) {
	t0 := time.Date(2026, 12, 1, 9, 0, 0, 0, time.UTC)
	var r reports
	for h := range 10_000 {
		r.set(hostKey{fmt.Sprint("big", h%100), fmt.Sprint("h", h)}, sessionsOf("u", 1, 8), t0)
	}
	for h := range 100 {
		r.set(hostKey{"small", fmt.Sprint("h", h)}, sessionsOf("u", 1, 8), t0)
	}
	visited := 0
	r.forgetOfPool("small", func(host string, _ time.Time) bool {
		visited++
		return host == "h7" // deleted through another replica
	})
	if visited != 100 {
		t.Errorf("a read of a 100-host pool visited %d reports, want 100", visited)
	}
	if hosts, _ := r.size(); hosts != 10_099 {
		t.Errorf("%d reports kept, want 10,099 (small/h7 dropped)", hosts)
	}
	if _, known, _ := r.has(hostKey{"small", "h7"}, "x"); known {
		t.Error("small/h7's report is kept")
	}
	checkPoolLinks(t, &r)
}

// BenchmarkHostsRead (R-SEC, R-OUT1): the cost of HostsRead for a
// 100-host pool, beside 0 to 100,000 reports of other pools' hosts; it
// should not grow with them (each pool read runs it, under the lock every
// heartbeat takes).
func BenchmarkHostsRead(b *testing.B) {
	t0 := time.Date(2026, 12, 1, 9, 0, 0, 0, time.UTC)
	for _, others := range []int{0, 10_000, 100_000} {
		b.Run(fmt.Sprint("others=", others), func(b *testing.B) {
			m := &Mode{}
			for h := range others {
				m.Report(fmt.Sprint("big", h%200), fmt.Sprint("h", h), nil, t0)
			}
			hosts := make([]*vdibroker.SessionHost, 100)
			for h := range hosts {
				hosts[h] = &vdibroker.SessionHost{HostPool: "small", Name: fmt.Sprint("h", h), CreateTime: t0.Add(-time.Hour)}
				m.Report("small", hosts[h].Name, nil, t0)
			}
			b.ResetTimer()
			for b.Loop() {
				m.HostsRead("small", hosts, t0.Add(time.Minute))
			}
			if st := m.State(); st.ReportedHosts != others+100 {
				b.Fatalf("%d reports kept, want %d", st.ReportedHosts, others+100)
			}
		})
	}
}

// TestHostsReadForgetsWhatTheReadShowsGone (R-SEC, R-OUT1): a read of a
// pool's hosts begun at begun drops the reports taken before begun of
// hosts it does not list (deleted through another replica) or lists as
// made after the report (deleted and registered again: a new machine);
// a report taken at begun or since is kept, as a heartbeat racing the
// read may come from a host registered after the read's snapshot. Other
// pools' reports of the same names stay. A pool gone (no hosts) drops
// its reports taken before begun.
func TestHostsReadForgetsWhatTheReadShowsGone(t *testing.T) {
	t0 := time.Date(2026, 12, 1, 9, 0, 0, 0, time.UTC)
	begun := t0.Add(time.Minute)
	m := &Mode{}
	for _, r := range []struct {
		pool, host string
		at         time.Time
	}{
		{"p", "listed", t0},                          // kept: listed, made before
		{"p", "madeAtReport", t0},                    // kept: made at the report
		{"p", "madeAgain", t0},                       // dropped: made after the report
		{"p", "deleted", t0},                         // dropped: not listed
		{"p", "deletedJustBefore", begun.Add(-1)},    // dropped: not listed, before begun
		{"p", "racingAtBegun", begun},                // kept: taken as the read began
		{"p", "racingSince", begun.Add(time.Second)}, // kept: taken since
		{"q", "deleted", t0},                         // kept: another pool's
		{"gone", "h", t0},                            // dropped with its pool
		{"gone", "racing", begun},                    // kept: taken as the read began
	} {
		m.Report(r.pool, r.host, sessionsOf("u", 1, 8), r.at)
	}
	hosts := []*vdibroker.SessionHost{
		{HostPool: "p", Name: "listed", CreateTime: t0.Add(-time.Hour)},
		{HostPool: "p", Name: "madeAtReport", CreateTime: t0},
		{HostPool: "p", Name: "madeAgain", CreateTime: t0.Add(time.Nanosecond)},
	}
	m.HostsRead("p", hosts, begun)
	m.HostsRead("gone", nil, begun)
	var kept []string
	for k := range m.reports.m {
		kept = append(kept, k.pool+"/"+k.host)
	}
	slices.Sort(kept)
	want := []string{"gone/racing", "p/listed", "p/madeAtReport", "p/racingAtBegun", "p/racingSince", "q/deleted"}
	if !slices.Equal(kept, want) {
		t.Errorf("reports kept after the reads: %q, want %q", kept, want)
	}
	checkPoolLinks(t, &m.reports)
}
