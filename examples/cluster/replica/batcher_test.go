package replica

import (
	"fmt"
	"sync"
	"testing"

	"github.com/brokercore/brokercore/store"
	"github.com/stretchr/testify/require"
)

// Concurrent produces share entries (fewer entries than produces), each
// producer is answered with exactly its own batch, whole and in its
// order, and every replica holds every batch contiguously.
func TestConcurrentProducesShareEntriesAndEachGetsItsOwnBatch(t *testing.T) {
	c := newCluster(t, 3, nil)
	l := c.leader()
	const producers, rounds = 16, 20
	var wg sync.WaitGroup
	errs := make(chan error, producers)
	for p := range producers {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for r := range rounds {
				batch := []*store.Message{msg("b", p%4, fmt.Sprintf("%d/%d/0", p, r)), msg("b", p%4, fmt.Sprintf("%d/%d/1", p, r))}
				out, err := l.Produce(batch...)
				if err != nil {
					errs <- err
					return
				}
				if len(out) != 2 || string(out[0].Body) != string(batch[0].Body) || string(out[1].Body) != string(batch[1].Body) ||
					out[1].QueueOffset != out[0].QueueOffset+1 {
					errs <- fmt.Errorf("producer %d round %d: answered with another batch or split: %v", p, r, out)
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
	bs := &l.batch.stats
	require.Equal(t, uint64(producers*rounds), bs.Produces.Load())
	require.Less(t, bs.Entries.Load(), bs.Produces.Load(), "produces shared entries")
	c.waitConverged()
	c.requireIdentical()
	for q := range 4 {
		msgs, err := l.Read("b", q, 0, producers*rounds*2)
		require.NoError(t, err)
		require.Len(t, msgs, producers/4*rounds*2)
		for i := 0; i < len(msgs); i += 2 {
			require.Equal(t, string(msgs[i].Body[:len(msgs[i].Body)-1]), string(msgs[i+1].Body[:len(msgs[i+1].Body)-1]), "a batch stays contiguous")
		}
	}
}
