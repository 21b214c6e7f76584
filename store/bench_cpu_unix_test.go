//go:build unix

package store

import (
	"syscall"
	"testing"
	"time"
)

// reportCPU runs f (the timed part of a benchmark of msgs messages) and
// reports the process's CPU per message and how many cores it kept busy:
// a run near runtime.NumCPU() cores is bound by the processor, one far below
// by waiting (fsync).
func reportCPU(b *testing.B, msgs int, f func()) {
	var r0, r1 syscall.Rusage
	_ = syscall.Getrusage(syscall.RUSAGE_SELF, &r0)
	start := time.Now()
	f()
	el := time.Since(start)
	_ = syscall.Getrusage(syscall.RUSAGE_SELF, &r1)
	cpu := time.Duration(r1.Utime.Nano() + r1.Stime.Nano() - r0.Utime.Nano() - r0.Stime.Nano())
	b.ReportMetric(float64(cpu.Nanoseconds())/1e3/float64(max(msgs, 1)), "cpu-µs/msg")
	b.ReportMetric(cpu.Seconds()/el.Seconds(), "cores")
}
