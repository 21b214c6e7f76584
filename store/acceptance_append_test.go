package store_test

// Acceptance tests of the store: Append, sync policies, message size and
// OnAppend.

import (
	"context"
	"errors"
	"fmt"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/brokercore/brokercore/store"
)

func TestAcceptAppendAssignsDenseQueueOffsetsAndIncreasingLogOffsets(t *testing.T) {
	s := openT(t, t.TempDir(), store.Options{})
	var all []*store.Message
	for i := 0; i < 10; i++ {
		a, b := msg("a", i%3, "x"), msg("b", 0, "y")
		require.NoError(t, s.Append(a, b))
		all = append(all, a, b)
	}
	next := map[string]int64{}
	for i, m := range all {
		assert.Equal(t, int64(i), m.LogOffset, "LogOffset is 0,1,2,… across the log")
		k := fmt.Sprintf("%s/%d", m.Topic, m.QueueID)
		assert.Equal(t, next[k], m.QueueOffset, "QueueOffset is 0,1,2,… within %s", k)
		next[k]++
	}
	for k, n := range next {
		var topic string
		var q int
		_, err := fmt.Sscanf(strings.Replace(k, "/", " ", 1), "%s %d", &topic, &q)
		require.NoError(t, err)
		assert.Equal(t, n, s.MaxOffset(topic, q), k)
		assert.Equal(t, int64(0), s.MinOffset(topic, q), k)
	}
}

func TestAcceptReadReturnsEveryFieldAsAppended(t *testing.T) {
	clk := newFakeClock()
	s := openT(t, t.TempDir(), store.Options{Now: clk.Now})
	born := time.Date(2025, 5, 6, 7, 8, 9, 123456789, time.UTC)
	in := &store.Message{
		Topic: "orders", QueueID: 3, Tags: "tagA", Keys: []string{"k1", "k2"},
		Body:           []byte{0, 1, 2, 255},
		Properties:     map[string]string{"UNIQ_KEY": "u-1", "p": "v"},
		BornAt:         born,
		ReconsumeTimes: 4,
	}
	require.NoError(t, s.Append(in))
	check := func(got *store.Message) {
		t.Helper()
		assert.Equal(t, in.Topic, got.Topic)
		assert.Equal(t, in.QueueID, got.QueueID)
		assert.Equal(t, in.Tags, got.Tags)
		assert.Equal(t, in.Keys, got.Keys)
		assert.Equal(t, in.Body, got.Body)
		assert.Equal(t, in.Properties, got.Properties)
		assert.True(t, in.BornAt.Equal(got.BornAt), "BornAt %v vs %v", in.BornAt, got.BornAt)
		assert.Equal(t, in.ReconsumeTimes, got.ReconsumeTimes)
		assert.Equal(t, in.QueueOffset, got.QueueOffset)
		assert.Equal(t, in.LogOffset, got.LogOffset)
		assert.True(t, in.StoredAt.Equal(got.StoredAt))
	}
	got, err := s.Read("orders", 3, 0, 5)
	require.NoError(t, err)
	require.Len(t, got, 1)
	check(got[0])
	one, err := s.ReadAt(in.LogOffset)
	require.NoError(t, err)
	check(one)

	// Across a reopen too.
	dir := t.TempDir()
	s2 := openT(t, dir, store.Options{Now: clk.Now})
	in.QueueOffset, in.LogOffset, in.StoredAt = 0, 0, time.Time{}
	require.NoError(t, s2.Append(in))
	require.NoError(t, s2.Close())
	s3 := openT(t, dir, store.Options{Now: clk.Now})
	got, err = s3.Read("orders", 3, 0, 5)
	require.NoError(t, err)
	require.Len(t, got, 1)
	check(got[0])
}

func TestAcceptCallerOwnsMessagesGivenAndReturned(t *testing.T) {
	s := openT(t, t.TempDir(), store.Options{})
	in := &store.Message{Topic: "t", Body: []byte("orig"), Keys: []string{"k"}, Properties: map[string]string{"a": "1"}}
	require.NoError(t, s.Append(in))
	in.Body[0] = 'X'
	in.Keys[0] = "changed"
	in.Properties["a"] = "changed"
	got, err := s.Read("t", 0, 0, 1)
	require.NoError(t, err)
	require.Len(t, got, 1)
	assert.Equal(t, "orig", string(got[0].Body))
	assert.Equal(t, []string{"k"}, got[0].Keys)
	assert.Equal(t, "1", got[0].Properties["a"])
	got[0].Body[0] = 'Y'
	got[0].Properties["a"] = "again"
	again, err := s.Read("t", 0, 0, 1)
	require.NoError(t, err)
	assert.Equal(t, "orig", string(again[0].Body))
	assert.Equal(t, "1", again[0].Properties["a"])
}

func TestAcceptBatchSpanningQueuesIsOneAtomicAppend(t *testing.T) {
	var mu sync.Mutex
	var calls []string
	s := openT(t, t.TempDir(), store.Options{OnAppend: func(topic string, q int, next int64) {
		mu.Lock()
		calls = append(calls, fmt.Sprintf("%s/%d/%d", topic, q, next))
		mu.Unlock()
	}})
	batch := []*store.Message{msg("a", 0, "1"), msg("b", 2, "2"), msg("a", 0, "3")}
	require.NoError(t, s.Append(batch...))
	assert.Equal(t, []int64{0, 1, 2}, []int64{batch[0].LogOffset, batch[1].LogOffset, batch[2].LogOffset})
	assert.Equal(t, []int64{0, 0, 1}, []int64{batch[0].QueueOffset, batch[1].QueueOffset, batch[2].QueueOffset})
	mu.Lock()
	defer mu.Unlock()
	assert.ElementsMatch(t, []string{"a/0/2", "b/2/1"}, calls, "one OnAppend per (topic, queue) with its new next offset")
}

func TestAcceptConcurrentAppendsUnderGroupCommitAreAllDurableAndDense(t *testing.T) {
	dir := t.TempDir()
	s, err := store.Open(dir, store.Options{}) // SyncGroup by default
	require.NoError(t, err)
	const writers, per = 16, 20
	var wg sync.WaitGroup
	for w := 0; w < writers; w++ {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for i := 0; i < per; i++ {
				if !assert.NoError(t, s.Append(msg("t", w%4, fmt.Sprintf("%d-%d", w, i)))) {
					return
				}
			}
		}()
	}
	// Concurrent readers never see a gap or an error.
	ctx, cancel := context.WithCancel(context.Background())
	var rg sync.WaitGroup
	rg.Add(1)
	go func() {
		defer rg.Done()
		for ctx.Err() == nil {
			for q := 0; q < 4; q++ {
				max := s.MaxOffset("t", q)
				if max == 0 {
					continue
				}
				got, err := s.Read("t", q, 0, int(max))
				if !assert.NoError(t, err) {
					return
				}
				assert.GreaterOrEqual(t, int64(len(got)), min(max, 1))
				for i, m := range got {
					assert.Equal(t, int64(i), m.QueueOffset)
				}
			}
		}
	}()
	wg.Wait()
	cancel()
	rg.Wait()
	st := s.Stats()
	assert.GreaterOrEqual(t, st.Syncs, uint64(1))
	assert.LessOrEqual(t, st.Syncs, st.Appends+1, "group commit never does more fsyncs than appends")
	require.NoError(t, s.Close())

	s2 := openT(t, dir, store.Options{})
	total := 0
	seen := map[int64]bool{}
	for q := 0; q < 4; q++ {
		for i, m := range readAll(t, s2, "t", q) {
			assert.Equal(t, int64(i), m.QueueOffset)
			assert.False(t, seen[m.LogOffset], "duplicate log offset")
			seen[m.LogOffset] = true
			total++
		}
	}
	assert.Equal(t, writers*per, total)
	for i := int64(0); i < writers*per; i++ {
		assert.True(t, seen[i], "log offset %d missing", i)
	}
}

func TestAcceptEverySyncPolicyAppendsReadableRecords(t *testing.T) {
	for _, pol := range []store.SyncPolicy{store.SyncGroup, store.SyncInterval, store.SyncNone} {
		t.Run(pol.String(), func(t *testing.T) {
			dir := t.TempDir()
			s, err := store.Open(dir, store.Options{Sync: pol, SyncEvery: 5 * time.Millisecond})
			require.NoError(t, err)
			for i := 0; i < 5; i++ {
				m := msg("t", 0, strconv.Itoa(i))
				require.NoError(t, s.Append(m))
				got, err := s.Read("t", 0, m.QueueOffset, 1)
				require.NoError(t, err)
				require.Len(t, got, 1, "readable once Append returned")
			}
			require.NoError(t, s.Sync())
			require.NoError(t, s.Close())
			s2 := openT(t, dir, store.Options{Sync: pol})
			assert.Len(t, readAll(t, s2, "t", 0), 5)
		})
	}
}

func TestAcceptMaxMessageSizeDefaultIs4MiB(t *testing.T) {
	s := openT(t, t.TempDir(), store.Options{Sync: store.SyncNone})
	err := s.Append(&store.Message{Topic: "t", Body: make([]byte, 4<<20+1)})
	assert.ErrorIs(t, err, store.ErrInvalid)
	assert.Equal(t, int64(0), s.MaxOffset("t", 0))
	require.NoError(t, s.Append(&store.Message{Topic: "t", Body: make([]byte, 4<<20)}))
	got, err := s.Read("t", 0, 0, 1)
	require.NoError(t, err)
	require.Len(t, got, 1)
	assert.Len(t, got[0].Body, 4<<20)
}

func TestAcceptMaxMessageSizeOptionIsEnforced(t *testing.T) {
	s := openT(t, t.TempDir(), store.Options{MaxMessageSize: 100})
	assert.ErrorIs(t, s.Append(&store.Message{Topic: "t", Body: make([]byte, 101)}), store.ErrInvalid)
	assert.NoError(t, s.Append(&store.Message{Topic: "t", Body: make([]byte, 100)}))
}

func TestAcceptOnAppendSeesReadableRecordsAndRunsOutsideStoreLocks(t *testing.T) {
	for _, pol := range []store.SyncPolicy{store.SyncGroup, store.SyncInterval, store.SyncNone} {
		t.Run(pol.String(), func(t *testing.T) {
			var s *store.Store
			type call struct {
				topic string
				q     int
				next  int64
				max   int64
				read  int
				err   error
			}
			calls := make(chan call, 16)
			var syncsAtHook atomic.Uint64
			var hooked atomic.Bool
			opts := store.Options{Sync: pol, OnAppend: func(topic string, q int, next int64) {
				c := call{topic: topic, q: q, next: next}
				if topic == "t" {
					syncsAtHook.Store(s.Stats().Syncs)
				}
				c.max = s.MaxOffset(topic, q)
				got, err := s.Read(topic, q, next-1, 1)
				c.read, c.err = len(got), err
				// Appending from the hook would deadlock if a store lock were held.
				if topic == "t" && hooked.CompareAndSwap(false, true) {
					c.err = errors.Join(c.err, s.Append(msg("other", 0, "from hook")))
				}
				_ = s.Topics()
				_ = s.Stats()
				calls <- c
			}}
			s = openT(t, t.TempDir(), opts)
			syncsBefore := s.Stats().Syncs
			done := make(chan error, 1)
			go func() { done <- s.Append(msg("t", 5, "a"), msg("t", 5, "b")) }()
			select {
			case err := <-done:
				require.NoError(t, err)
			case <-time.After(5 * time.Second):
				t.Fatal("Append deadlocked: OnAppend runs under a store lock")
			}
			var got []call
			for len(calls) > 0 {
				got = append(got, <-calls)
			}
			var main *call
			for i := range got {
				if got[i].topic == "t" {
					main = &got[i]
				}
			}
			require.NotNil(t, main, "OnAppend called for t/5: %+v", got)
			assert.Equal(t, 5, main.q)
			assert.Equal(t, int64(2), main.next)
			assert.NoError(t, main.err)
			assert.Equal(t, 1, main.read, "the last record is readable inside OnAppend")
			assert.GreaterOrEqual(t, main.max, main.next, "MaxOffset already shows the records")
			if pol == store.SyncGroup {
				assert.Greater(t, syncsAtHook.Load(), syncsBefore, "under SyncGroup OnAppend runs after the fsync")
			}
		})
	}
}

func TestAcceptAppendFillsTheSameStoredAtThatReadReturns(t *testing.T) {
	// A user comparing the message Append filled in with the one Read
	// returns (assert.Equal, i.e. reflect.DeepEqual) must not trip over a
	// monotonic clock reading or a different *time.Location in StoredAt.
	for name, now := range map[string]func() time.Time{
		"time.Now":       nil,
		"fake UTC clock": newFakeClock().Now,
	} {
		t.Run(name, func(t *testing.T) {
			s := openT(t, t.TempDir(), store.Options{Now: now})
			m := msg("t", 0, "x")
			require.NoError(t, s.Append(m))
			got, err := s.Read("t", 0, 0, 1)
			require.NoError(t, err)
			require.Len(t, got, 1)
			assert.Equal(t, m.StoredAt, got[0].StoredAt)
			one, err := s.ReadAt(m.LogOffset)
			require.NoError(t, err)
			assert.Equal(t, m.StoredAt, one.StoredAt)
		})
	}
}

func TestAcceptSyncIntervalFsyncsInTheBackground(t *testing.T) {
	s := openT(t, t.TempDir(), store.Options{Sync: store.SyncInterval, SyncEvery: 2 * time.Millisecond})
	require.NoError(t, s.Append(msg("t", 0, "x")))
	before := s.Stats().Syncs
	require.NoError(t, s.Append(msg("t", 0, "y")))
	require.Eventually(t, func() bool { return s.Stats().Syncs > before }, 30*time.Second, time.Millisecond,
		"an fsync every SyncEvery without an explicit Sync")
}
