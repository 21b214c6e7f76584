// Package testkit holds the small helpers brokercore's tests share: a clock
// to inject as Options.Now and a log sink that is safe for concurrent use.
// It is internal and imported only by tests; no library package depends on it.
//
// This is a copy of the brokercore library's internal/testkit, kept in the
// cluster module because examples never import the library's internal
// packages; the cluster's raft log (raftlog*.go) is its user.
package testkit

import (
	"bytes"
	"sync"
	"time"
)

// Clock is a clock a test moves by hand: pass its Now as Options.Now, then
// Advance it instead of sleeping. It is safe for concurrent use.
type Clock struct {
	mu sync.Mutex
	t  time.Time
}

// NewClock returns a Clock that reads start until it is moved.
func NewClock(start time.Time) *Clock { return &Clock{t: start} }

// Now returns the clock's current time.
func (c *Clock) Now() time.Time {
	c.mu.Lock()
	defer c.mu.Unlock()
	return c.t
}

// Advance moves the clock by d (backwards for a negative d).
func (c *Clock) Advance(d time.Duration) {
	c.mu.Lock()
	c.t = c.t.Add(d)
	c.mu.Unlock()
}

// Set moves the clock to t.
func (c *Clock) Set(t time.Time) {
	c.mu.Lock()
	c.t = t
	c.mu.Unlock()
}

// LogBuffer is an io.Writer for a slog handler that tests read back while
// the code under test is still logging from other goroutines.
type LogBuffer struct {
	mu  sync.Mutex
	buf bytes.Buffer
}

// Write appends p.
func (b *LogBuffer) Write(p []byte) (int, error) {
	b.mu.Lock()
	defer b.mu.Unlock()
	return b.buf.Write(p)
}

// String returns everything written so far.
func (b *LogBuffer) String() string {
	b.mu.Lock()
	defer b.mu.Unlock()
	return b.buf.String()
}
