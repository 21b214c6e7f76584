//go:build !unix

package store

import "testing"

// reportCPU runs f; CPU time is read on unix only.
func reportCPU(_ *testing.B, _ int, f func()) { f() }
