//go:build !unix

package lock

import "time"

// processCPU is unavailable here; the benchmarks then omit CPU figures.
func processCPU() time.Duration { return 0 }
