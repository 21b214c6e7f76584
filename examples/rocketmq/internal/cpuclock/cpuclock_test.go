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
