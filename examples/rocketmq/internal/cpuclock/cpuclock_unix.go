//go:build unix

package cpuclock

import (
	"bytes"
	"fmt"
	"os"
	"strconv"
	"strings"
	"syscall"
	"time"
)

func self() time.Duration {
	var ru syscall.Rusage
	if err := syscall.Getrusage(syscall.RUSAGE_SELF, &ru); err != nil {
		return 0
	}
	return time.Duration(ru.Utime.Nano() + ru.Stime.Nano())
}

func process(pid int) (time.Duration, bool) {
	if d, ok := schedRuntime(pid); ok {
		return d, true
	}
	return statTicks(pid)
}

// schedRuntime is the sum of se.sum_exec_runtime (milliseconds with six
// decimals) over the threads of pid, from /proc/<pid>/task/<tid>/sched
// (kernels with CONFIG_SCHED_DEBUG): nanoseconds where /proc/<pid>/stat
// counts 10 ms ticks. A thread that exited is no longer counted (a Go
// program keeps its threads). false where it cannot be read.
func schedRuntime(pid int) (time.Duration, bool) {
	dir := fmt.Sprintf("/proc/%d/task", pid)
	tids, err := os.ReadDir(dir)
	if err != nil || len(tids) == 0 {
		return 0, false
	}
	var sum time.Duration
	for _, tid := range tids {
		raw, err := os.ReadFile(dir + "/" + tid.Name() + "/sched")
		if err != nil {
			if os.IsNotExist(err) {
				continue // the thread exited after ReadDir
			}
			return 0, false
		}
		d, ok := sumExecRuntime(raw)
		if !ok {
			return 0, false
		}
		sum += d
	}
	return sum, true
}

// sumExecRuntime reads the se.sum_exec_runtime line of a sched file.
func sumExecRuntime(raw []byte) (time.Duration, bool) {
	const key = "se.sum_exec_runtime"
	i := bytes.Index(raw, []byte(key))
	if i < 0 {
		return 0, false
	}
	line := raw[i+len(key):]
	if j := bytes.IndexByte(line, '\n'); j >= 0 {
		line = line[:j]
	}
	v := strings.TrimSpace(strings.TrimPrefix(strings.TrimSpace(string(line)), ":"))
	ms, frac, _ := strings.Cut(v, ".")
	whole, err := strconv.ParseInt(ms, 10, 64)
	if err != nil || len(frac) > 6 {
		return 0, false
	}
	ns := int64(0)
	if frac != "" {
		f, err := strconv.ParseInt(frac+strings.Repeat("0", 6-len(frac)), 10, 64)
		if err != nil {
			return 0, false
		}
		ns = f
	}
	return time.Duration(whole)*time.Millisecond + time.Duration(ns), true
}

// statTicks is the user+system time of pid in /proc/<pid>/stat's ticks.
func statTicks(pid int) (time.Duration, bool) {
	raw, err := os.ReadFile(fmt.Sprintf("/proc/%d/stat", pid))
	if err != nil {
		return 0, false
	}
	// The fields after the command name, which may hold spaces, in parentheses.
	f := strings.Fields(string(raw[bytes.LastIndexByte(raw, ')')+1:]))
	if len(f) < 13 {
		return 0, false
	}
	ut, err1 := strconv.ParseInt(f[11], 10, 64)
	st, err2 := strconv.ParseInt(f[12], 10, 64)
	if err1 != nil || err2 != nil {
		return 0, false
	}
	const tick = 10 * time.Millisecond // USER_HZ is 100 on Linux
	return time.Duration(ut+st) * tick, true
}
