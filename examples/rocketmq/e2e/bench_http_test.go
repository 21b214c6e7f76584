//go:build !race

package e2e

import (
	"bytes"
	"encoding/json"
	"net"
	"net/http"
	"os/exec"
	"path/filepath"
	"sort"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"
)

// BenchmarkHTTPBrokerSyncSend16 is BenchmarkSyncSend16's workload against
// examples/broker over HTTP+JSON (built and run as a child process): 16
// goroutines, one 1 KiB message per POST /v1/messages, a 4-queue topic.
// sync=group is flush=sync's durability, sync=interval flush=async's.
func BenchmarkHTTPBrokerSyncSend16(b *testing.B) {
	bin := filepath.Join(b.TempDir(), "broker")
	build := exec.Command("go", "build", "-o", bin, "./examples/broker")
	build.Dir = "../../.."
	if out, err := build.CombinedOutput(); err != nil {
		b.Fatalf("build examples/broker: %v\n%s", err, out)
	}
	for _, sync := range []string{"group", "interval"} {
		b.Run("sync="+sync, func(b *testing.B) { benchHTTPSend(b, bin, sync) })
	}
}

func benchHTTPSend(b *testing.B, bin, syncPolicy string) {
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		b.Fatal(err)
	}
	addr := l.Addr().String()
	l.Close()
	cmd := exec.Command(bin, "-addr", addr, "-data", b.TempDir(), "-sync", syncPolicy)
	if err := cmd.Start(); err != nil {
		b.Fatal(err)
	}
	b.Cleanup(func() { _ = cmd.Process.Kill(); _ = cmd.Wait() })
	client := &http.Client{Transport: &http.Transport{MaxIdleConnsPerHost: 64}}
	for i := 0; ; i++ {
		if r, err := client.Get("http://" + addr + "/healthz"); err == nil {
			r.Body.Close()
			break
		}
		if i > 200 {
			b.Fatal("examples/broker did not start")
		}
		time.Sleep(50 * time.Millisecond)
	}
	body := strings.Repeat("x", 1024)
	const workers = 16
	lat := make([][]time.Duration, workers)
	var next atomic.Int64
	b.ResetTimer()
	start := time.Now()
	var wg sync.WaitGroup
	for w := 0; w < workers; w++ {
		wg.Add(1)
		go func(w int) {
			defer wg.Done()
			for {
				i := next.Add(1)
				if i > int64(b.N) {
					return
				}
				in, _ := json.Marshal(map[string]any{"topic": "bench", "queueId": i % 4, "body": body})
				t0 := time.Now()
				r, err := client.Post("http://"+addr+"/v1/messages", "application/json", bytes.NewReader(in))
				if err != nil {
					b.Error(err)
					return
				}
				var sink bytes.Buffer
				sink.ReadFrom(r.Body)
				r.Body.Close()
				if r.StatusCode/100 != 2 {
					b.Errorf("status %d: %s", r.StatusCode, sink.String())
					return
				}
				lat[w] = append(lat[w], time.Since(t0))
			}
		}(w)
	}
	wg.Wait()
	el := time.Since(start)
	b.StopTimer()
	var all []time.Duration
	for _, l := range lat {
		all = append(all, l...)
	}
	sort.Slice(all, func(i, j int) bool { return all[i] < all[j] })
	if len(all) == 0 {
		return
	}
	b.ReportMetric(float64(len(all))/el.Seconds(), "msgs/s")
	b.ReportMetric(float64(all[len(all)/2].Microseconds()), "p50-µs")
	b.ReportMetric(float64(all[len(all)*99/100].Microseconds()), "p99-µs")
}
