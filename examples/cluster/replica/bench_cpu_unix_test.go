//go:build unix

package replica

import (
	"syscall"
	"testing"
	"time"
)

// withCPU runs f and reports the process's CPU time per message (user +
// system, every goroutine of the run: all three members, or the store) and
// the cores it kept busy on average; it returns the CPU time.
func withCPU(b *testing.B, f func()) time.Duration {
	cpu, el := processCPU(f)
	b.ReportMetric(float64(cpu.Microseconds())/float64(b.N), "cpu-µs/msg")
	b.ReportMetric(cpu.Seconds()/el.Seconds(), "cores")
	return cpu
}

// processCPU runs f and returns the process's CPU time (user + system)
// over it and the time it took.
func processCPU(f func()) (cpu, elapsed time.Duration) {
	var r0, r1 syscall.Rusage
	_ = syscall.Getrusage(syscall.RUSAGE_SELF, &r0)
	start := time.Now()
	f()
	elapsed = time.Since(start)
	_ = syscall.Getrusage(syscall.RUSAGE_SELF, &r1)
	return time.Duration(r1.Utime.Nano() + r1.Stime.Nano() - r0.Utime.Nano() - r0.Stime.Nano()), elapsed
}
