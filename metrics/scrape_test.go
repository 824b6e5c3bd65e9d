package metrics

import (
	"fmt"
	"net/http"
	"net/http/httptest"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/prometheus/client_golang/prometheus"

	"github.com/vdibroker/vdibroker/internal/stacks"
)

// blockingCollector counts its collections and holds each until release
// is closed, as a store read of a full pod holds a scrape.
type blockingCollector struct {
	started chan struct{} // one send per collection
	release chan struct{}
	calls   atomic.Int32
}

var descBlocking = prometheus.NewDesc("test_blocking", "A gauge whose collection waits.", nil, nil)

func (c *blockingCollector) Describe(ch chan<- *prometheus.Desc) { ch <- descBlocking }

func (c *blockingCollector) Collect(ch chan<- prometheus.Metric) {
	n := c.calls.Add(1)
	c.started <- struct{}{}
	<-c.release
	ch <- prometheus.MustNewConstMetric(descBlocking, prometheus.GaugeValue, float64(n))
}

// answer is a scrape's: from which address, its status and body.
type answer struct {
	addr string
	code int
	body string
}

// scrapes serves a Handler of a blockingCollector's registry to scrapes
// from given addresses, each in a goroutine; their answers come on
// answers. stop lets the collector go, if the test has not.
type scrapes struct {
	t       *testing.T
	c       *blockingCollector
	h       http.Handler
	answers chan answer
	stopped bool
}

func newScrapes(t *testing.T) *scrapes {
	c := &blockingCollector{started: make(chan struct{}, 200), release: make(chan struct{})}
	reg := prometheus.NewRegistry()
	reg.MustRegister(c)
	s := &scrapes{t: t, c: c, h: Handler(reg), answers: make(chan answer, 200)}
	t.Cleanup(s.stop)
	return s
}

// from starts a scrape from addr ("host:port").
func (s *scrapes) from(addr string) {
	go func() {
		r := httptest.NewRequest("GET", "/metrics", nil)
		r.RemoteAddr = addr
		w := httptest.NewRecorder()
		s.h.ServeHTTP(w, r)
		s.answers <- answer{addr, w.Code, w.Body.String()}
	}()
}

func (s *scrapes) stop() {
	if !s.stopped {
		s.stopped = true
		close(s.c.release)
	}
}

// next is the next answer, within a guard against a hang.
func (s *scrapes) next(what string) answer {
	s.t.Helper()
	select {
	case a := <-s.answers:
		return a
	case <-time.After(10 * time.Second): // a guard against a hang, not a measure
		s.stop()
		s.t.Fatalf("no answer: %s", what)
		return answer{}
	}
}

// TestScrapesShareOneGathering_RSEC: /metrics needs no token by default
// and a scrape of a full pod reads the store, so the scrapes that overlap
// share one gathering, each answered its result; a scrape after them
// gathers anew.
func TestScrapesShareOneGathering_RSEC(t *testing.T) {
	s := newScrapes(t)
	s.from("192.0.2.1:1000") // its gathering holds
	<-s.c.started
	for i := range MaxScrapesInFlight - 1 {
		s.from(fmt.Sprintf("192.0.2.%d:1000", i+2))
	}
	// Let the gathering go only once the others wait for it, or one that
	// had not yet asked would gather anew, and the test would measure the
	// scheduler.
	if !stacks.Wait(MaxScrapesInFlight-1, "sync.(*WaitGroup).Wait(", "singleflight.(*Group).Do(") {
		s.stop()
		t.Fatalf("%d scrapes at once: the others did not wait for the first's gathering", MaxScrapesInFlight)
	}
	s.stop()
	for range MaxScrapesInFlight {
		if a := s.next("an overlapping scrape"); a.code != http.StatusOK || !strings.Contains(a.body, "test_blocking 1\n") {
			t.Errorf("an overlapping scrape: %d\n%s\nwant 200 with the first gathering's value", a.code, a.body)
		}
	}
	if n := s.c.calls.Load(); n != 1 {
		t.Errorf("%d scrapes at once gathered %d times, want once", MaxScrapesInFlight, n)
	}
	s.from("192.0.2.1:1001")
	if a := s.next("a later scrape"); a.code != http.StatusOK || !strings.Contains(a.body, "test_blocking 2\n") {
		t.Errorf("a later scrape: %d\n%s\nwant a new gathering (2)", a.code, a.body)
	}
}

// TestOneAddressCannotStarveScrapes_RSEC: an address has at most
// MaxScrapesPerAddress scrapes under way (the next is answered 503 at
// once), so an anonymous caller's scrapes, however many, leave room for
// Prometheus's: with 4 slots in all, a caller that held them all got
// every other scraper 503, and a Prometheus scrape that fails says the
// broker is down.
func TestOneAddressCannotStarveScrapes_RSEC(t *testing.T) {
	s := newScrapes(t)
	s.from("203.0.113.66:1000") // the caller's first: its gathering holds
	<-s.c.started
	for port := range MaxScrapesInFlight - 1 {
		s.from(fmt.Sprintf("203.0.113.66:%d", 1001+port))
	}
	s.from("192.0.2.10:9090") // Prometheus
	for range MaxScrapesInFlight - MaxScrapesPerAddress {
		if a := s.next("the caller's scrapes past its share"); a.code != http.StatusServiceUnavailable || !strings.HasPrefix(a.addr, "203.0.113.66:") {
			s.stop()
			t.Fatalf("a scrape from %s answered %d while the caller held %d, want only the caller's past %d answered 503",
				a.addr, a.code, MaxScrapesInFlight, MaxScrapesPerAddress)
		}
	}
	// The caller's second and Prometheus's wait for the held gathering.
	if !stacks.Wait(2, "sync.(*WaitGroup).Wait(", "singleflight.(*Group).Do(") {
		s.stop()
		t.Fatal("Prometheus's scrape does not wait for the gathering")
	}
	s.stop()
	for range MaxScrapesPerAddress + 1 {
		if a := s.next("the scrapes let in"); a.code != http.StatusOK {
			t.Errorf("a scrape from %s: %d, want 200", a.addr, a.code)
		}
	}
}

// TestScrapesPastTheSlotsWait_RSEC: past MaxScrapesInFlight scrapes at
// once, the next waits for a slot rather than being answered 503, up to
// MaxScrapesWaiting of them; past those, 503 at once.
func TestScrapesPastTheSlotsWait_RSEC(t *testing.T) {
	s := newScrapes(t)
	s.from("192.0.2.1:1000")
	<-s.c.started
	for i := range MaxScrapesInFlight - 1 + MaxScrapesWaiting {
		s.from(fmt.Sprintf("198.51.%d.%d:1000", i/200, i%200+1))
	}
	// Parked in the limiter's own select: the first scrape is parked in
	// a select too, the gathering's, below ServeHTTP, and counting it let
	// the last scrape start while one before it had not yet been admitted.
	if !stacks.WaitParked(MaxScrapesWaiting, "[select", "metrics.(*scrapeLimiter).ServeHTTP(") {
		s.stop()
		t.Fatalf("%d scrapes past the slots do not wait for one", MaxScrapesWaiting)
	}
	s.from("192.0.2.250:1000")
	if a := s.next("a scrape past the waiting ones"); a.code != http.StatusServiceUnavailable || a.addr != "192.0.2.250:1000" {
		s.stop()
		t.Fatalf("a scrape from %s: %d, want the one past %d waiting answered 503", a.addr, a.code, MaxScrapesWaiting)
	}
	s.stop()
	for range MaxScrapesInFlight + MaxScrapesWaiting {
		if a := s.next("the scrapes let in"); a.code != http.StatusOK {
			t.Errorf("a scrape from %s: %d, want 200", a.addr, a.code)
		}
	}
}
