//go:build unix

package grpcapi_test

import (
	"syscall"
	"time"
)

// processCPU is the CPU time (user + system) the process has used: on a
// shared, loaded machine it tells a benchmark's own cost (client and
// server together, both in this process) better than the wall clock does.
func processCPU() time.Duration {
	var ru syscall.Rusage
	if err := syscall.Getrusage(syscall.RUSAGE_SELF, &ru); err != nil {
		return 0
	}
	return time.Duration(ru.Utime.Nano() + ru.Stime.Nano())
}
