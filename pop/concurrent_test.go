package pop

import (
	"context"
	"fmt"
	"math/rand/v2"
	"os"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/stretchr/testify/require"
)

// TestConcurrentConsumersLoseNothingAndAckEachOnce runs non-FIFO and FIFO
// consumers of two groups concurrently (under -race) while the clock moves
// and some deliveries are dropped unacked: every message of every group
// must end up acked exactly once, and the committed offsets at the end.
// BROKERCORE_LONG=1 makes it a soak run.
func TestConcurrentConsumersLoseNothingAndAckEachOnce(t *testing.T) {
	queues, perQueue := 4, 150
	if os.Getenv("BROKERCORE_LONG") == "1" { // opt-in soak
		queues, perQueue = 8, 5000
	}
	src, clock := newMemSource(), newFakeClock()
	offs := NewMemoryOffsets()
	s := New(src, Options{Now: clock.Now, Offsets: offs, Tick: time.Millisecond})
	src.onAppend = s.Arrived
	defer s.Close()
	for q := range queues {
		src.append("T", q, perQueue)
	}
	total := int64(queues * perQueue)
	timeout := 30 * time.Second
	if os.Getenv("BROKERCORE_LONG") == "1" {
		timeout = 5 * time.Minute
	}
	type key struct {
		group string
		queue int
		off   int64
	}
	var mu sync.Mutex
	acked := map[key]int{}
	var done [2]atomic.Int64
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	var wg sync.WaitGroup
	consumer := func(gi int, group string, fifo bool, seed uint64) {
		defer wg.Done()
		rng := rand.New(rand.NewPCG(seed, 1))
		attempt := 0
		for done[gi].Load() < total && ctx.Err() == nil {
			req := Request{Group: group, Topic: "T", ClientID: "c", QueueID: AllQueues, Max: 1 + rng.IntN(8),
				Invisible: 2 * time.Second, Poll: 20 * time.Millisecond, FIFO: fifo, AttemptID: fmt.Sprint(seed, "-", attempt)}
			r, err := s.Pop(ctx, req)
			if err != nil {
				continue // lock timeouts are fine: keep the attempt id
			}
			if len(r.Messages) == 0 {
				continue
			}
			if rng.IntN(5) == 0 { // lose the response: retry with the same attempt
				continue
			}
			attempt++
			for _, d := range r.Messages {
				if err := s.Ack(d.Handle); err != nil {
					require.ErrorIs(t, err, ErrStaleHandle) // redelivered meanwhile
					continue
				}
				mu.Lock()
				acked[key{group, d.Message.QueueID, d.Message.QueueOffset}]++
				mu.Unlock()
				done[gi].Add(1)
			}
		}
	}
	for i := range 4 {
		wg.Add(2)
		go consumer(0, "plain", false, uint64(i))
		go consumer(1, "fifo", true, uint64(100+i))
	}
	tick := make(chan struct{})
	go func() {
		defer close(tick)
		for ctx.Err() == nil && (done[0].Load() < total || done[1].Load() < total) {
			clock.Advance(500 * time.Millisecond)
			time.Sleep(time.Millisecond) // pacing only; no expiry is waited for in real time
		}
	}()
	finished := make(chan struct{})
	go func() { wg.Wait(); close(finished) }()
	select {
	case <-finished:
	case <-time.After(timeout):
		cancel()
		<-finished
		t.Fatalf("stuck: acked %d and %d of %d", done[0].Load(), done[1].Load(), total)
	}
	cancel()
	<-tick
	for _, g := range []string{"plain", "fifo"} {
		for q := range queues {
			for off := range int64(perQueue) {
				require.Equal(t, 1, acked[key{g, q, off}], "%s %d/%d", g, q, off)
			}
			c, ok := offs.Committed(g, "T", q)
			require.True(t, ok)
			require.EqualValues(t, perQueue, c)
		}
	}
}
