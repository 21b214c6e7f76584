package txn

import (
	"os"
	"strconv"
	"sync"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

// deliveredOnce checks the recovered instance: every committed transaction
// has its message exactly once, no open or rolled-back one has it.
func deliveredOnce(t *testing.T, r *rig, ids []int64, want func(int64) Resolution) {
	t.Helper()
	msgs := readAll(t, r, "orders", 1)
	count := map[int64]int{}
	for _, m := range msgs {
		id, err := strconv.ParseInt(m.Properties[PropPreparedQueueOffset], 10, 64)
		require.NoError(t, err)
		count[id]++
	}
	for _, id := range ids {
		r.m.mu.Lock()
		o, closed := r.m.c.outcome[id]
		_, open := r.m.c.pending[id]
		r.m.mu.Unlock()
		switch {
		case open:
			assert.Zero(t, count[id], "open transaction %d delivered", id)
		case closed && o == Commit:
			assert.Equal(t, 1, count[id], "committed transaction %d", id)
			assert.Equal(t, Commit, want(id), "transaction %d committed against the producer's wish", id)
		case closed:
			assert.Zero(t, count[id], "rolled-back transaction %d delivered", id)
		}
	}
	// finish what the producers meant, as retries and check answers would
	discarded := map[int64]bool{}
	for _, id := range ids {
		switch err := r.m.End(id, want(id), FromCheck); {
		case err == nil:
		default:
			require.ErrorIs(t, err, ErrAlreadyResolved, "id %d", id)
			require.Equal(t, uint64(0), uint64(count[id]), "only a check-limit rollback may refuse")
			discarded[id] = true
		}
	}
	msgs = readAll(t, r, "orders", 1)
	count = map[int64]int{}
	for _, m := range msgs {
		id, _ := strconv.ParseInt(m.Properties[PropPreparedQueueOffset], 10, 64)
		count[id]++
	}
	for _, id := range ids {
		if want(id) == Commit && !discarded[id] {
			assert.Equal(t, 1, count[id], "transaction %d after recovery", id)
		} else {
			assert.Zero(t, count[id], "rolled-back %d after recovery", id)
		}
	}
}

// TestCommitIsExactlyOnceWhateverMomentTheBrokerIsKilled takes crash
// images while producers prepare, commit and roll back (End, or EndAsync,
// answered before its records are durable) and the manager checks: each image, opened and finished, has every committed message
// exactly once and no rolled-back one.
func TestCommitIsExactlyOnceWhateverMomentTheBrokerIsKilled(t *testing.T) {
	images := 6
	if os.Getenv("BROKERCORE_LONG") == "1" {
		images = 60
	}
	want := func(id int64) Resolution {
		if id%2 == 0 {
			return Commit
		}
		return Rollback
	}
	for img := 0; img < images; img++ {
		r := newRig(t, Options{CheckMax: 1})
		var (
			mu  sync.Mutex
			ids []int64
			wg  sync.WaitGroup
		)
		stop := make(chan struct{})
		for w := 0; w < 4; w++ {
			wg.Add(1)
			go func() {
				defer wg.Done()
				for i := 0; ; i++ {
					select {
					case <-stop:
						return
					default:
					}
					id := r.prepare("orders", itoa(i))
					mu.Lock()
					ids = append(ids, id)
					mu.Unlock()
					switch i % 3 {
					case 0:
						_ = r.m.End(id, want(id), FromClient)
					case 1: // answered before its records are durable
						_ = r.m.EndAsync(id, want(id), FromClient, nil, nil)
					} // every third one is left to the checks
				}
			}()
		}
		wg.Add(1)
		go func() {
			defer wg.Done()
			for {
				select {
				case <-stop:
					return
				default:
				}
				r.clk.Advance(DefaultTransactionTimeout)
				_, _ = r.m.CheckNow()
				time.Sleep(time.Millisecond)
			}
		}()
		for r.log.MaxOffset(OpTopic, 0) < int64(10+img*5) {
			time.Sleep(time.Millisecond)
		}
		mu.Lock()
		all := append([]int64(nil), ids...) // prepared (acknowledged) before the kill
		mu.Unlock()
		dir := t.TempDir()
		require.NoError(t, copyImage(r.dir, dir))
		close(stop)
		wg.Wait()
		require.NoError(t, r.m.Close())
		require.NoError(t, r.log.Close())
		r.open(dir)
		deliveredOnce(t, r, all, want)
	}
}

// TestConcurrentCommitsOfOneTransactionAppendOnce: the client's commit and
// a check answer arriving together.
func TestConcurrentCommitsOfOneTransactionAppendOnce(t *testing.T) {
	r := newRig(t, Options{})
	var ids []int64
	for i := 0; i < 20; i++ {
		ids = append(ids, r.prepare("orders", itoa(i)))
	}
	var wg sync.WaitGroup
	for w := 0; w < 8; w++ {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for _, id := range ids {
				assert.NoError(t, r.m.End(id, Commit, Source(w%2)))
			}
		}()
	}
	wg.Wait()
	assert.Len(t, r.delivered("orders"), 20)
	assert.Equal(t, uint64(20), r.m.Stats().Committed)
}

func copyImage(from, to string) error {
	return testkitCopy(from, to)
}
