//go:build unix

package store

import "syscall"

// flushDirtyPages writes back the page cache so benchmarks compared with
// each other start from the same disk state.
func flushDirtyPages() { syscall.Sync() }
