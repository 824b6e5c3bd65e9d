//go:build unix

package main

import (
	"encoding/json"
	"fmt"
	"os"
	"path/filepath"
	"slices"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/vdibroker/vdibroker"
	vhttp "github.com/vdibroker/vdibroker/http"
)

// BenchmarkFederationConnect compares, in one run on the same three real
// pods (serve processes on loopback, SQLite each), global connects (to
// office, SessionCount, AllSites; callers spread over the three pods)
// with pool connects to one pod's pool. Every connect is a new user, so
// each makes a session. It reports connects/s and the p99 latency.
//
//	go test -run '^$' -bench BenchmarkFederationConnect -benchtime 3000x ./cmd/vdibroker/
func BenchmarkFederationConnect(b *testing.B) {
	dir := b.TempDir()
	bin := e2eBuild(b, dir)
	secretFile := filepath.Join(dir, "federation.secret")
	if err := os.WriteFile(secretFile, []byte(fedSecret), 0o600); err != nil {
		b.Fatal(err)
	}
	pods := []*fedPod{
		startPod(b, bin, dir, secretFile, "fra1", "emea"),
		startPod(b, bin, dir, secretFile, "ams1", "emea"),
		startPod(b, bin, dir, secretFile, "nyc1", "amer"),
	}
	for _, p := range pods {
		addPool(b, p, "office-"+p.name, 999999)
		addPool(b, p, "small-"+p.name, 1)
		addPool(b, p, "single-"+p.name, 999999)
	}
	data, _ := json.Marshal(fedDocument(pods, 1))
	for _, p := range pods {
		p.api.call("PUT", "/federation", json.RawMessage(data), 201, nil)
	}
	var seq atomic.Int64
	run := func(b *testing.B, connect func(i int64) error) {
		var mu sync.Mutex
		lat := make([]time.Duration, 0, b.N)
		b.SetParallelism(8)
		b.ResetTimer()
		start := time.Now()
		b.RunParallel(func(pb *testing.PB) {
			for pb.Next() {
				i := seq.Add(1)
				t0 := time.Now()
				if err := connect(i); err != nil {
					b.Error(err)
					return
				}
				d := time.Since(t0)
				mu.Lock()
				lat = append(lat, d)
				mu.Unlock()
			}
		})
		elapsed := time.Since(start)
		b.StopTimer()
		slices.Sort(lat)
		if len(lat) > 0 {
			b.ReportMetric(float64(len(lat))/elapsed.Seconds(), "connects/s")
			b.ReportMetric(float64(lat[len(lat)*99/100].Microseconds())/1000, "p99-ms")
		}
	}
	clients := make([]*vhttp.Client, len(pods))
	for i, p := range pods {
		clients[i] = vhttp.NewClient(p.url, fedAdmin)
	}
	b.Run("pool-connect-one-pod", func(b *testing.B) {
		run(b, func(i int64) error {
			_, err := clients[0].Connect(b.Context(), "single-fra1", vhttp.ConnectRequest{User: fmt.Sprintf("p%07d", i)})
			return err
		})
	})
	b.Run("global-connect-three-pods", func(b *testing.B) {
		run(b, func(i int64) error {
			_, err := clients[i%3].GlobalConnect(b.Context(), "office", vdibroker.GlobalConnectRequest{User: fmt.Sprintf("g%07d", i)})
			return err
		})
	})
}
