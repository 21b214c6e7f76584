package pop

import (
	"context"
	"fmt"
	"math/rand/v2"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/stretchr/testify/require"
)

// The history checker of TestNoMessageHeldByTwoConsumersWhileInvisible.
//
// The clock only moves forward, and every operation records the injected
// clock before (t0) and after (t1) its call, so the Service decided with a
// now in [t0, t1]. Non-FIFO deliveries of a message are totally ordered by
// their Attempts. Delivery k's invisible time ends no earlier than
// t0 + Invisible of its pop, or of its chain's last ChangeInvisible
// (t0 + d); delivery k+1 was decided no later than its pop's t1. So a
// correct Service always has t1(k+1) ≥ that bound: a history where it does
// not shows the message handed to a second consumer while it was still
// invisible to the first. An ack that succeeded on delivery k's chain
// forbids any delivery k+1.

type propKey struct {
	queue int
	off   int64
}

type propDelivery struct {
	consumer  int
	t1        time.Time // clock after the pop returned
	hiddenTil time.Time // lower bound of the end of its invisible time
	acked     bool
}

type propHistory struct {
	mu    sync.Mutex
	del   map[propKey]map[int]*propDelivery // by Attempts
	acks  map[propKey]int
	fails []string
}

func (h *propHistory) delivered(k propKey, att, consumer int, t0, t1 time.Time, inv time.Duration) *propDelivery {
	h.mu.Lock()
	defer h.mu.Unlock()
	if h.del[k] == nil {
		h.del[k] = map[int]*propDelivery{}
	}
	if prev := h.del[k][att]; prev != nil {
		h.fails = append(h.fails, "two deliveries with the same attempt count")
	}
	d := &propDelivery{consumer: consumer, t1: t1, hiddenTil: t0.Add(inv)}
	h.del[k][att] = d
	return d
}

func (h *propHistory) changed(d *propDelivery, t0 time.Time, dur time.Duration) {
	h.mu.Lock()
	d.hiddenTil = t0.Add(dur)
	h.mu.Unlock()
}

func (h *propHistory) acked(k propKey, d *propDelivery) {
	h.mu.Lock()
	d.acked = true
	h.acks[k]++
	h.mu.Unlock()
}

// check counts the violations of the history by kind, with one example.
func (h *propHistory) check() map[string]string {
	out := map[string]string{}
	n := map[string]int{}
	bad := func(kind string, k propKey, att int) {
		n[kind]++
		out[kind] = fmt.Sprintf("%d times, e.g. queue %d offset %d attempt %d", n[kind], k.queue, k.off, att)
	}
	for _, f := range h.fails {
		bad(f, propKey{}, 0)
	}
	for k, byAtt := range h.del {
		for att, d := range byAtt {
			next := byAtt[att+1]
			if next == nil {
				continue
			}
			if d.acked {
				bad("delivered again after a successful ack", k, att+1)
			}
			if next.t1.Before(d.hiddenTil) {
				bad("held by two consumers while invisible", k, att+1)
			}
		}
		if h.acks[k] != 1 {
			bad("not acked exactly once", k, 0)
		}
	}
	return out
}

// TestNoMessageHeldByTwoConsumersWhileInvisible runs many consumers with
// random acks, change-invisible calls and dropped deliveries while the
// clock moves, then checks the whole history: no message is handed to a
// second consumer while it is invisible to the first, and every message is
// eventually acked exactly once.
func TestNoMessageHeldByTwoConsumersWhileInvisible(t *testing.T) {
	const queues, perQueue, consumers = 4, 200, 8
	src, clock := newMemSource(), newFakeClock()
	s := New(src, Options{Now: clock.Now, Tick: time.Millisecond})
	src.onAppend = s.Arrived
	defer s.Close()
	for q := range queues {
		src.append("T", q, perQueue)
	}
	h := &propHistory{del: map[propKey]map[int]*propDelivery{}, acks: map[propKey]int{}}
	var ackedN atomic.Int64
	ctx, cancel := context.WithTimeout(context.Background(), 60*time.Second)
	defer cancel()
	var wg sync.WaitGroup
	for c := range consumers {
		wg.Add(1)
		go func() {
			defer wg.Done()
			propConsumer(ctx, s, clock, h, &ackedN, c, queues*perQueue)
		}()
	}
	wg.Add(1)
	go func() { // the clock: forward by random steps
		defer wg.Done()
		rng := rand.New(rand.NewPCG(7, 7))
		for ctx.Err() == nil && ackedN.Load() < queues*perQueue {
			clock.Advance(time.Duration(rng.IntN(100)) * time.Millisecond)
			time.Sleep(500 * time.Microsecond) // pacing only: slower than the consumers, so the bounds are tight
		}
	}()
	wg.Wait()
	require.NoError(t, ctx.Err(), "stuck: acked %d of %d", ackedN.Load(), queues*perQueue)
	require.Len(t, h.acks, queues*perQueue)
	require.Empty(t, h.check())
}

func propConsumer(ctx context.Context, s *Service, clock *fakeClock, h *propHistory, ackedN *atomic.Int64, c, total int) {
	rng := rand.New(rand.NewPCG(uint64(c), 42))
	for ctx.Err() == nil && ackedN.Load() < int64(total) {
		inv := time.Duration(2+rng.IntN(4)) * time.Second
		t0 := clock.Now()
		r, err := s.Pop(ctx, Request{Group: "g", Topic: "T", ClientID: "c", QueueID: AllQueues,
			Max: 1 + rng.IntN(6), Invisible: inv, Poll: 5 * time.Millisecond})
		t1 := clock.Now()
		if err != nil {
			continue
		}
		for _, d := range r.Messages {
			k := propKey{d.Message.QueueID, d.Message.QueueOffset}
			rec := h.delivered(k, d.Attempts, c, t0, t1, inv)
			handle := d.Handle
			if rng.IntN(4) == 0 { // change the invisible time, maybe shorter
				dur := time.Duration(1+rng.IntN(3)) * time.Second
				c0 := clock.Now()
				nh, err := s.ChangeInvisible(handle, dur)
				if err != nil {
					continue // expired and redelivered meanwhile: stale
				}
				h.changed(rec, c0, dur)
				handle = nh
			}
			if rng.IntN(5) == 0 {
				continue // dropped: it comes back after its invisible time
			}
			if s.Ack(handle) == nil {
				h.acked(k, rec)
				ackedN.Add(1)
			}
		}
	}
}
