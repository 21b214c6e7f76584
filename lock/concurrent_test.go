package lock

import (
	"fmt"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

// TestConcurrentContentionNeverTwoHoldersAtOnce has many goroutines fight
// over a few keys. Each winner marks the key as occupied with a CAS that
// fails if anyone else believes they hold it, and checks that its token is
// above the last holder's. Run with -race.
func TestConcurrentContentionNeverTwoHoldersAtOnce(t *testing.T) {
	const (
		workers = 16
		keys    = 3
		rounds  = 3000
	)
	tb := New(Options{}) // real clock, 60 s leases: no expiry during the test
	var (
		occupied  [keys]atomic.Int64 // worker id + 1 of the believed holder
		lastToken [keys]uint64       // guarded by occupied[k]
		wins      atomic.Int64
		wg        sync.WaitGroup
	)
	errs := make(chan error, workers)
	for w := range workers {
		wg.Add(1)
		go func() {
			defer wg.Done()
			client := fmt.Sprintf("c%d", w)
			for i := range rounds {
				k := (w + i) % keys
				var l Lease
				var ok bool
				if i%2 == 0 {
					l, ok = tb.TryLock("g", q(k), client)
				} else if got := tb.TryLockBatch("g", []Queue{q(k)}, client); len(got) == 1 {
					l, ok = tb.Holder("g", q(k))
					ok = ok && l.ClientID == client
				}
				if !ok {
					continue
				}
				if !occupied[k].CompareAndSwap(0, int64(w+1)) {
					errs <- fmt.Errorf("key %d: %s got the lock while %d held it", k, client, occupied[k].Load()-1)
					return
				}
				if l.Token <= lastToken[k] {
					errs <- fmt.Errorf("key %d: token %d not above %d", k, l.Token, lastToken[k])
					return
				}
				lastToken[k] = l.Token
				// Renewal while holding must keep the token.
				if again, ok := tb.TryLock("g", q(k), client); !ok || again.Token != l.Token {
					errs <- fmt.Errorf("key %d: renewal by holder failed or changed token", k)
					return
				}
				wins.Add(1)
				occupied[k].Store(0)
				if i%3 == 0 {
					tb.UnlockAll(client)
				} else if !tb.Unlock("g", q(k), client) {
					errs <- fmt.Errorf("key %d: holder %s could not unlock", k, client)
					return
				}
			}
		}()
	}
	wg.Wait()
	close(errs)
	for err := range errs {
		require.NoError(t, err)
	}
	assert.Positive(t, wins.Load())
	st := tb.Stats()
	assert.Equal(t, uint64(wins.Load()), st.Locked, "every win was a fresh lock")
	assert.Equal(t, st.Locked, st.Unlocked)
	assert.Zero(t, st.Entries)
}

// TestConcurrentExpiryAndSweepNeverHandBackAnOlderToken races lockers
// against a clock that keeps expiring leases and a sweeper that keeps
// removing them. Whatever a lock returns must carry a token at least as
// new as the holder seen just before it (equal only for the holder's own
// renewal), and Holder must never report a lease that is already expired.
func TestConcurrentExpiryAndSweepNeverHandBackAnOlderToken(t *testing.T) {
	c := newFakeClock()
	tb := New(Options{Now: c.Now, MaxLiveTime: 10 * time.Millisecond})
	stop := make(chan struct{})
	var bg sync.WaitGroup
	bg.Add(1)
	go func() { // time and sweeping
		defer bg.Done()
		for {
			select {
			case <-stop:
				return
			default:
				c.Advance(time.Millisecond)
				tb.Sweep()
			}
		}
	}()
	var wg sync.WaitGroup
	errs := make(chan error, 8)
	for w := range 8 {
		wg.Add(1)
		go func() {
			defer wg.Done()
			client := fmt.Sprintf("c%d", w)
			for i := range 2000 {
				k := q(i % 2)
				before, had := tb.Holder("g", k)
				l, ok := tb.TryLock("g", k, client)
				if !ok {
					continue
				}
				switch {
				case had && l.Token < before.Token:
					errs <- fmt.Errorf("%v: token %d older than holder's %d", k, l.Token, before.Token)
					return
				case had && l.Token == before.Token && before.ClientID != client:
					errs <- fmt.Errorf("%v: %s got %s's token %d", k, client, before.ClientID, l.Token)
					return
				}
				// Holder reads the clock after t0, and the clock only moves
				// forward, so a live lease must expire after t0.
				t0 := c.Now()
				if h, ok := tb.Holder("g", k); ok && !t0.Before(h.Expires) {
					errs <- fmt.Errorf("%v: Holder reports expired lease %+v", k, h)
					return
				}
			}
		}()
	}
	wg.Wait()
	close(stop)
	bg.Wait()
	close(errs)
	for err := range errs {
		require.NoError(t, err)
	}
	st := tb.Stats()
	assert.Positive(t, st.Locked+st.TakenOver)
}
