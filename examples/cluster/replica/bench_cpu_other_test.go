//go:build !unix

package replica

import (
	"testing"
	"time"
)

// withCPU runs f (the CPU metrics need getrusage: 0).
func withCPU(_ *testing.B, f func()) time.Duration {
	f()
	return 0
}
