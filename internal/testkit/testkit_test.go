package testkit

import (
	"sync"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
)

func TestClockMovesOnlyWhenTold(t *testing.T) {
	start := time.Date(2026, 1, 2, 3, 4, 5, 0, time.UTC)
	c := NewClock(start)
	assert.Equal(t, start, c.Now())
	c.Advance(time.Minute)
	assert.Equal(t, start.Add(time.Minute), c.Now())
	c.Advance(-2 * time.Minute)
	assert.Equal(t, start.Add(-time.Minute), c.Now())
	c.Set(start)
	assert.Equal(t, start, c.Now())
}

func TestLogBufferKeepsConcurrentWrites(t *testing.T) {
	var b LogBuffer
	var wg sync.WaitGroup
	for range 8 {
		wg.Go(func() { _, _ = b.Write([]byte("x")) })
	}
	wg.Wait()
	assert.Equal(t, "xxxxxxxx", b.String())
}
