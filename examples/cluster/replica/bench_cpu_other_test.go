//go:build !unix

package replica

import "testing"

// withCPU runs f (the CPU metrics need getrusage).
func withCPU(_ *testing.B, f func()) { f() }
