package lock

import (
	"sync"
	"testing"
	"time"

	"go.uber.org/goleak"
)

func TestMain(m *testing.M) { goleak.VerifyTestMain(m) }

// fakeClock is the injected Options.Now: time moves only when a test says.
type fakeClock struct {
	mu sync.Mutex
	t  time.Time
}

func newFakeClock() *fakeClock {
	return &fakeClock{t: time.Date(2021, 7, 1, 7, 11, 0, 0, time.UTC)}
}

func (c *fakeClock) Now() time.Time {
	c.mu.Lock()
	defer c.mu.Unlock()
	return c.t
}

func (c *fakeClock) Advance(d time.Duration) {
	c.mu.Lock()
	c.t = c.t.Add(d)
	c.mu.Unlock()
}

func q(id int) Queue { return Queue{Topic: "orders", Broker: "broker-2", QueueID: id} }

func queues(n int) []Queue {
	qs := make([]Queue, n)
	for i := range qs {
		qs[i] = q(i)
	}
	return qs
}
