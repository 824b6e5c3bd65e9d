package metrics

import (
	"io"
	"net/http"
	"net/http/httptest"
	"runtime"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/prometheus/client_golang/prometheus"
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

// TestScrapesBounded_RSEC: /metrics needs no token by default, and a
// scrape of a full pod is costly, so an anonymous caller's scrapes are
// bounded: at most MaxScrapesInFlight at once (the next is answered 503
// at once), and the scrapes that overlap share one gathering (one store
// read), each answered its result; a scrape after them gathers anew.
func TestScrapesBounded_RSEC(t *testing.T) {
	c := &blockingCollector{started: make(chan struct{}, 100), release: make(chan struct{})}
	reg := prometheus.NewRegistry()
	reg.MustRegister(c)
	srv := httptest.NewServer(Handler(reg))
	defer srv.Close()
	get := func() (int, string) {
		res, err := http.Get(srv.URL)
		if err != nil {
			t.Error(err)
			return 0, ""
		}
		defer res.Body.Close()
		b, _ := io.ReadAll(res.Body)
		return res.StatusCode, string(b)
	}

	type answer struct {
		code int
		body string
	}
	answers := make(chan answer, MaxScrapesInFlight+1)
	scrape := func() {
		code, body := get()
		answers <- answer{code, body}
	}
	go scrape() // the first: its gathering holds
	<-c.started
	// MaxScrapesInFlight more: all but one find a slot and wait for the
	// first's gathering; the one that finds none is answered 503 at once,
	// which shows that the others hold their slots.
	for range MaxScrapesInFlight {
		go scrape()
	}
	select {
	case a := <-answers:
		if a.code != http.StatusServiceUnavailable {
			close(c.release)
			t.Fatalf("a scrape past %d at once: %d, want 503", MaxScrapesInFlight, a.code)
		}
	case <-time.After(10 * time.Second): // a guard against a hang, not a measure
		close(c.release)
		t.Fatalf("%d scrapes at once: none answered 503 while the gathering held", MaxScrapesInFlight+1)
	}
	// The others hold their slots; let the gathering go only once each
	// waits for it, or one that took its slot but had not yet asked
	// would gather anew, and the test would measure the scheduler.
	if !waitForJoined(MaxScrapesInFlight - 1) {
		close(c.release)
		t.Fatalf("%d scrapes at once: the others did not wait for the first's gathering", MaxScrapesInFlight)
	}
	close(c.release)
	for range MaxScrapesInFlight {
		if a := <-answers; a.code != http.StatusOK || !strings.Contains(a.body, "test_blocking 1\n") {
			t.Errorf("an overlapping scrape: %d\n%s\nwant 200 with the first gathering's value", a.code, a.body)
		}
	}
	if n := c.calls.Load(); n != 1 {
		t.Errorf("%d scrapes at once gathered %d times, want once", MaxScrapesInFlight, n)
	}
	if code, body := get(); code != http.StatusOK || !strings.Contains(body, "test_blocking 2\n") {
		t.Errorf("a later scrape: %d\n%s\nwant a new gathering (2)", code, body)
	}
}

// waitForJoined reports whether n goroutines wait for a gathering another
// started (in singleflight's Do, for its WaitGroup) within a guard
// against a hang.
func waitForJoined(n int) bool {
	buf := make([]byte, 1<<20)
	deadline := time.Now().Add(10 * time.Second) // a guard against a hang, not a measure
	for {
		got := 0
		for _, g := range strings.Split(string(buf[:runtime.Stack(buf, true)]), "\n\n") {
			if strings.Contains(g, "sync.(*WaitGroup).Wait(") && strings.Contains(g, "singleflight.(*Group).Do(") {
				got++
			}
		}
		if got >= n {
			return true
		}
		if time.Now().After(deadline) {
			return false
		}
		runtime.Gosched()
	}
}
