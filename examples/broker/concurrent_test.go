package main

import (
	"fmt"
	"sync"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

// TestConcurrentProducersAndConsumersGetEveryMessageOnce runs producers
// and long-polling consumers of one group at the same time over HTTP. With
// an invisible time that never ends (the clock stands still) every message
// must be delivered exactly once, and the committed offsets must end at
// the top of every queue.
func TestConcurrentProducersAndConsumersGetEveryMessageOnce(t *testing.T) {
	const producers, batches, perBatch, queues, consumers = 4, 5, 10, 4, 4
	const total = producers * batches * perBatch
	tb := startBroker(t, t.TempDir(), newFakeClock())

	var wg sync.WaitGroup
	for p := range producers {
		c, _ := tb.client(t)
		wg.Go(func() {
			for b := range batches {
				var in batchIn
				for i := range perBatch {
					n := (p*batches+b)*perBatch + i
					in.Messages = append(in.Messages, messageIn{Topic: "load", QueueID: n % queues, Body: ptr(fmt.Sprint(n))})
				}
				if !assert.NoError(t, c.call(t.Context(), "POST", "/v1/messages/batch", in, nil)) {
					return
				}
			}
		})
	}

	var mu sync.Mutex
	seen := map[string]int{}
	done := make(chan struct{})
	deadline := time.Now().Add(30 * time.Second) // a lost message must fail, not hang
	for i := range consumers {
		c, _ := tb.client(t)
		wg.Go(func() {
			for {
				select {
				case <-done:
					return
				default:
				}
				if time.Now().After(deadline) {
					t.Error("gave up waiting for every message")
					return
				}
				var res popOut
				err := c.call(t.Context(), "POST", "/v1/pop", popIn{Group: "g", Topic: "load", ClientID: fmt.Sprint("c", i), Max: 16, Invisible: "1h", Poll: "200ms"}, &res)
				if !assert.NoError(t, err) {
					return
				}
				for _, d := range res.Messages {
					if !assert.NoError(t, c.call(t.Context(), "POST", "/v1/ack", ackIn{Handle: d.Handle}, nil)) {
						return
					}
					mu.Lock()
					seen[*d.Body]++
					if len(seen) == total {
						select {
						case <-done:
						default:
							close(done)
						}
					}
					mu.Unlock()
				}
			}
		})
	}
	wg.Wait()

	require.Len(t, seen, total)
	for body, n := range seen {
		assert.Equal(t, 1, n, "message %s delivered %d times", body, n)
	}
	c, _ := tb.client(t)
	for q := range queues {
		off := c.offset(t, "g", "load", q)
		require.NotNil(t, off.Committed)
		assert.Equal(t, off.MaxOffset, *off.Committed, "queue %d", q)
		assert.Equal(t, int64(0), off.Lag)
	}
}
