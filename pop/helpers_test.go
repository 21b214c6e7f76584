package pop

import (
	"fmt"
	"sort"
	"sync"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/brokercore/brokercore/internal/testkit"
	"github.com/brokercore/brokercore/store"
)

// fakeClock is the test clock injected as Options.Now.
type fakeClock = testkit.Clock

func newFakeClock() *fakeClock { return testkit.NewClock(time.Unix(1_700_000_000, 0)) }

// memSource is a small in-memory Source. A read of a gated queue signals
// entered and blocks until the gate is closed: a slow read (cold data,
// tiered storage) held under the group@topic lock.
type memSource struct {
	mu       sync.Mutex
	q        map[string]map[int][]*store.Message
	onAppend func(topic string, queue int)
	gates    map[int]chan struct{}
	entered  chan int
}

func newMemSource() *memSource {
	return &memSource{q: make(map[string]map[int][]*store.Message), gates: map[int]chan struct{}{}, entered: make(chan int, 64)}
}

func (m *memSource) append(topic string, queue, n int) {
	m.mu.Lock()
	if m.q[topic] == nil {
		m.q[topic] = make(map[int][]*store.Message)
	}
	for range n {
		off := int64(len(m.q[topic][queue]))
		m.q[topic][queue] = append(m.q[topic][queue], &store.Message{
			Topic: topic, QueueID: queue, QueueOffset: off, Body: fmt.Appendf(nil, "%s/%d/%d", topic, queue, off),
		})
	}
	cb := m.onAppend
	m.mu.Unlock()
	if cb != nil {
		cb(topic, queue)
	}
}

// gate makes the next reads of queue block until the returned func runs.
func (m *memSource) gate(queue int) (release func()) {
	ch := make(chan struct{})
	m.mu.Lock()
	m.gates[queue] = ch
	m.mu.Unlock()
	var once sync.Once
	return func() {
		once.Do(func() {
			m.mu.Lock()
			delete(m.gates, queue)
			m.mu.Unlock()
			close(ch)
		})
	}
}

func (m *memSource) Read(topic string, queue int, offset int64, max int) ([]*store.Message, error) {
	m.mu.Lock()
	g := m.gates[queue]
	m.mu.Unlock()
	if g != nil {
		m.entered <- queue
		<-g
	}
	m.mu.Lock()
	defer m.mu.Unlock()
	msgs := m.q[topic][queue]
	if offset < 0 || offset >= int64(len(msgs)) {
		return nil, nil
	}
	end := min(offset+int64(max), int64(len(msgs)))
	out := make([]*store.Message, 0, end-offset)
	for _, x := range msgs[offset:end] {
		c := *x
		out = append(out, &c)
	}
	return out, nil
}

func (m *memSource) MinOffset(string, int) int64 { return 0 }

func (m *memSource) MaxOffset(topic string, queue int) int64 {
	m.mu.Lock()
	defer m.mu.Unlock()
	return int64(len(m.q[topic][queue]))
}

func (m *memSource) Queues(topic string) []int {
	m.mu.Lock()
	defer m.mu.Unlock()
	var out []int
	for q := range m.q[topic] {
		out = append(out, q)
	}
	sort.Ints(out)
	return out
}

func offsetsOf(r Result) []int64 {
	out := make([]int64, len(r.Messages))
	for i, d := range r.Messages {
		out[i] = d.Message.QueueOffset
	}
	return out
}

func attemptsOf(r Result) []int {
	out := make([]int, len(r.Messages))
	for i, d := range r.Messages {
		out[i] = d.Attempts
	}
	return out
}

func ackAll(t *testing.T, s *Service, r Result) {
	t.Helper()
	for _, d := range r.Messages {
		require.NoError(t, s.Ack(d.Handle))
	}
}

// waitFor polls cond (a state reached by other goroutines, never an expiry).
func waitFor(t *testing.T, what string, cond func() bool) {
	t.Helper()
	require.Eventually(t, cond, 5*time.Second, time.Millisecond, what)
}
