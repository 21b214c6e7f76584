//go:build !linux

package store

// punchHole is a no-op where hole punching is not available: retained index
// entries keep their disk blocks.
func punchHole(any, int64) error { return nil }
