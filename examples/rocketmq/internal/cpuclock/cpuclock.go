// Package cpuclock reads CPU time, for this example's benchmarks: on a
// shared, loaded machine the CPU a benchmark's processes used tells its
// cost better than the wall clock does. It is the example's own copy of
// the library's internal/cpuclock (an example never imports the library's
// internal packages), imported only by benchmarks and tests.
package cpuclock

import "time"

// Self is this process's user+system CPU time (0 where it cannot be read).
func Self() time.Duration { return self() }

// Process is the CPU time of process pid, read from /proc (Linux): the
// scheduler's runtime of its threads in nanoseconds where the kernel shows
// it (/proc/<pid>/task/*/sched), else user+system time in clock ticks of
// 10 ms (then read it over seconds of work); false where it cannot be read.
func Process(pid int) (time.Duration, bool) { return process(pid) }
