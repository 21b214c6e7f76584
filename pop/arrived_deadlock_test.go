package pop

import (
	"context"
	"sync"
	"testing"
	"time"

	"github.com/brokercore/brokercore/store"
	"github.com/stretchr/testify/require"
)

// epochGate blocks its Epoch reads, once armed, until released: an
// Offsets whose reads wait on something else (a replicated state machine's
// lock, say).
type epochGate struct {
	*MemoryOffsets
	mu      sync.Mutex
	gate    chan struct{} // closed by release; nil = not armed
	entered chan struct{} // closed by the first Epoch read that blocks
}

func (g *epochGate) arm() (entered <-chan struct{}, release func()) {
	g.mu.Lock()
	defer g.mu.Unlock()
	g.gate, g.entered = make(chan struct{}), make(chan struct{})
	gate := g.gate
	var once sync.Once
	return g.entered, func() { once.Do(func() { close(gate) }) }
}

func (g *epochGate) Epoch(group, topic string, queueID int) uint64 {
	g.mu.Lock()
	gate, entered := g.gate, g.entered
	g.gate = nil
	g.mu.Unlock()
	if gate != nil {
		close(entered)
		<-gate
	}
	return g.MemoryOffsets.Epoch(group, topic, queueID)
}

// The deadlock of a replicated leader (examples/rocketmq/replicated,
// TestV5LeaderKill9 under load): its raft state machine appended to the
// store holding its state lock; the store's hook called Arrived, which
// waited for the group@topic's mutex; a pop held that mutex in its plan,
// reading Epoch from Offsets backed by the same state lock. Arrived must
// return while a pop's Offsets read is blocked, and the long poll it
// wakes must be served once the read goes on.
func TestArrivedDoesNotWaitForAPopsOffsetsRead(t *testing.T) {
	src, clock := newMemSource(), newFakeClock()
	offs := &epochGate{MemoryOffsets: NewMemoryOffsets()}
	s := New(src, Options{Now: clock.Now, Tick: time.Hour, Offsets: offs})
	src.onAppend = s.Arrived
	defer s.Close()
	src.append("T", 0, 1)
	req := Request{Group: "g", Topic: "T", ClientID: "a", QueueID: 0, Max: 4, Invisible: time.Hour}
	first, err := s.Pop(context.Background(), req)
	require.NoError(t, err)
	require.Len(t, first.Messages, 1) // the queue exists, nothing is visible now

	req.Poll = time.Minute
	waiting := longPoll(s, req)
	waitFor(t, "pop waiting", func() bool { return s.Stats().Waiters == 1 })
	entered, release := offs.arm()
	defer release()
	req.ClientID = "b"
	blocked := longPoll(s, req)
	select {
	case <-entered:
	case <-time.After(10 * time.Second):
		t.Fatal("the second pop never read Epoch")
	}

	src.mu.Lock()
	src.q["T"][0] = append(src.q["T"][0], &store.Message{Topic: "T", QueueID: 0, QueueOffset: 1, Body: []byte("T/0/1")})
	src.mu.Unlock()
	arrived := make(chan struct{})
	go func() { s.Arrived("T", 0); close(arrived) }()
	select {
	case <-arrived:
	case <-time.After(10 * time.Second):
		release() // let the test end
		<-arrived
		t.Fatal("Arrived waited for a pop's Offsets read")
	}
	release()
	// One of the two long polls gets the message; the other waits out its
	// Poll (Close ends it).
	select {
	case o := <-waiting:
		require.NoError(t, o.err)
		require.Len(t, o.r.Messages, 1)
	case o := <-blocked:
		require.NoError(t, o.err)
		require.Len(t, o.r.Messages, 1)
	case <-time.After(10 * time.Second):
		t.Fatal("no long poll was served after the arrival")
	}
}
