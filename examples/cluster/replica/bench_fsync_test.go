//go:build linux

package replica

import (
	"fmt"
	"os"
	"path/filepath"
	"sync"
	"testing"
)

// BenchmarkFsyncFloor is what this machine's disk alone lets
// BenchmarkProduceGroups' 4-group case reach: twelve files (4 groups × 3
// members' raft logs) in the directory the other cases use, each appended
// and fdatasynced (datasync, the log's own call) concurrently, one goroutine
// per file, nothing else running. Each append is one entry of produces
// 1 KiB bodies (the bodies alone: a real entry is larger, so this floor is
// generous): 10 is what the 4-group case joins per entry, 16 the most it
// could (64 producers over 4 groups, one entry in flight per group). Every
// entry is fsynced once by each of its three members, so msgs/s =
// syncs/s × produces / 3 and cpu-µs/msg = cpu-µs/sync × 3 / produces: no
// replicated case with that batching can be faster than this on this disk.
func BenchmarkFsyncFloor(b *testing.B) {
	for _, produces := range []int{10, 16} {
		b.Run(fmt.Sprintf("files=12/produces=%d", produces), func(b *testing.B) {
			benchFsyncFloor(b, 12, produces<<10, float64(produces)/3)
			b.ReportMetric(float64(produces), "produces/entry")
		})
	}
}

// benchFsyncFloor runs b.N append+fdatasync rounds of size bytes over files
// files; msgsPerSync converts syncs to messages.
func benchFsyncFloor(b *testing.B, files, size int, msgsPerSync float64) {
	dir := b.TempDir()
	fs := make([]*os.File, files)
	for i := range fs {
		f, err := os.OpenFile(filepath.Join(dir, fmt.Sprintf("log-%d", i)), os.O_CREATE|os.O_WRONLY|os.O_APPEND, 0o644)
		if err != nil {
			b.Fatal(err)
		}
		b.Cleanup(func() { _ = f.Close() })
		fs[i] = f
	}
	buf := make([]byte, size)
	b.ResetTimer()
	cpu, el := processCPU(func() {
		var wg sync.WaitGroup
		for i, f := range fs {
			n := b.N / files
			if i < b.N%files {
				n++
			}
			wg.Go(func() {
				for range n {
					if _, err := f.Write(buf); err != nil {
						b.Error(err)
						return
					}
					if err := datasync(f); err != nil {
						b.Error(err)
						return
					}
				}
			})
		}
		wg.Wait()
	})
	b.StopTimer()
	syncs := float64(b.N)
	b.ReportMetric(syncs/el.Seconds(), "syncs/s")
	b.ReportMetric(float64(cpu.Microseconds())/syncs, "cpu-µs/sync")
	b.ReportMetric(syncs*msgsPerSync/el.Seconds(), "msgs/s")
	b.ReportMetric(float64(cpu.Microseconds())/(syncs*msgsPerSync), "cpu-µs/msg")
	b.ReportMetric(cpu.Seconds()/el.Seconds(), "cores")
}
