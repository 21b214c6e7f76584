//go:build linux

package cpuclock

import (
	"os"
	"testing"
	"time"

	"github.com/stretchr/testify/require"
)

// Both clocks move with work done, and agree about this process within
// /proc's 10 ms ticks.
func TestSelfAndProcessCountThisProcessWork(t *testing.T) {
	s0 := Self()
	p0, ok := Process(os.Getpid())
	require.True(t, ok)
	x := 0
	for Self()-s0 < 50*time.Millisecond {
		x++
	}
	p1, ok := Process(os.Getpid())
	require.True(t, ok)
	require.Greater(t, Self()-s0, 49*time.Millisecond)
	require.InDelta(t, float64(Self()-s0), float64(p1-p0), float64(40*time.Millisecond))
	_, ok = Process(-1)
	require.False(t, ok, "no such process")
	_ = x
}

// Where the kernel shows the scheduler's runtime, Process reads it in
// nanoseconds: it agrees with this process's rusage over a few
// milliseconds of work far closer than a 10 ms tick.
func TestProcessIsPreciseWhereTheSchedulerShowsRuntime(t *testing.T) {
	if _, ok := schedRuntime(os.Getpid()); !ok { // a kernel without CONFIG_SCHED_DEBUG
		_, ticks := statTicks(os.Getpid())
		_, got := Process(os.Getpid())
		require.Equal(t, ticks, got, "Process falls back to /proc/<pid>/stat")
		return
	}
	for range 3 {
		s0 := Self()
		p0, ok := Process(os.Getpid())
		require.True(t, ok)
		x := 0
		for Self()-s0 < 5*time.Millisecond {
			x++
		}
		p1, _ := Process(os.Getpid())
		s1 := Self()
		require.InDelta(t, float64(s1-s0), float64(p1-p0), float64(2*time.Millisecond))
		_ = x
	}
}

func TestSumExecRuntimeReadsTheSchedLine(t *testing.T) {
	for _, c := range []struct {
		in   string
		want time.Duration
		ok   bool
	}{
		{"se.exec_start : 1.0\nse.sum_exec_runtime                          :             0.875091\nnr_switches : 2\n", 875091 * time.Nanosecond, true},
		{"se.sum_exec_runtime : 12345.5\n", 12345*time.Millisecond + 500*time.Microsecond, true},
		{"se.sum_exec_runtime : 7\n", 7 * time.Millisecond, true},
		{"se.sum_exec_runtime : x.1\n", 0, false},
		{"se.sum_exec_runtime : 1.1234567\n", 0, false},
		{"nr_switches : 2\n", 0, false},
	} {
		got, ok := sumExecRuntime([]byte(c.in))
		require.Equal(t, c.ok, ok, c.in)
		require.Equal(t, c.want, got, c.in)
	}
}
