package store_test

// Black-box acceptance tests of the store contract in shared/ARCHITECTURE.md
// ("Conventions every package follows" and "store"), written from the
// contract and the godoc only, as an outside user would. One test per
// contract sentence or bullet; each test names the failure it rules out.

import (
	"bufio"
	"bytes"
	"context"
	"errors"
	"fmt"
	"io/fs"
	"log/slog"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"sort"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	"go.uber.org/goleak"

	"github.com/brokercore/brokercore/store"
)

// fakeClock is an injectable Options.Now.
type fakeClock struct {
	mu sync.Mutex
	t  time.Time
}

func newFakeClock() *fakeClock {
	return &fakeClock{t: time.Date(2026, 1, 2, 3, 4, 5, 0, time.UTC)}
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

func (c *fakeClock) Set(t time.Time) {
	c.mu.Lock()
	c.t = t
	c.mu.Unlock()
}

// logBuffer is a concurrency-safe slog sink.
type logBuffer struct {
	mu  sync.Mutex
	buf bytes.Buffer
}

func (b *logBuffer) Write(p []byte) (int, error) {
	b.mu.Lock()
	defer b.mu.Unlock()
	return b.buf.Write(p)
}

func (b *logBuffer) String() string {
	b.mu.Lock()
	defer b.mu.Unlock()
	return b.buf.String()
}

func openT(t *testing.T, dir string, opts store.Options) *store.Store {
	t.Helper()
	s, err := store.Open(dir, opts)
	require.NoError(t, err)
	t.Cleanup(func() { _ = s.Close() })
	return s
}

func msg(topic string, q int, body string) *store.Message {
	return &store.Message{Topic: topic, QueueID: q, Body: []byte(body)}
}

func readAll(t *testing.T, s *store.Store, topic string, q int) []*store.Message {
	t.Helper()
	var out []*store.Message
	off := s.MinOffset(topic, q)
	for {
		got, err := s.Read(topic, q, off, 1000)
		require.NoError(t, err)
		if len(got) == 0 {
			return out
		}
		out = append(out, got...)
		off = got[len(got)-1].QueueOffset + 1
	}
}

// --- conventions ---------------------------------------------------------

func TestAcceptZeroOptionsIsAWorkingStore(t *testing.T) {
	s, err := store.Open(t.TempDir(), store.Options{})
	require.NoError(t, err)
	require.NotNil(t, s)
	m := msg("t", 0, "hello")
	require.NoError(t, s.Append(m))
	got, err := s.Read("t", 0, 0, 10)
	require.NoError(t, err)
	require.Len(t, got, 1)
	assert.Equal(t, []byte("hello"), got[0].Body)
	require.NoError(t, s.Close())
}

func TestAcceptOpenCreatesMissingDirectory(t *testing.T) {
	dir := filepath.Join(t.TempDir(), "a", "b")
	s := openT(t, dir, store.Options{})
	require.NoError(t, s.Append(msg("t", 0, "x")))
	assert.DirExists(t, dir)
}

func TestAcceptStoredAtComesFromInjectedClockNotWallClock(t *testing.T) {
	clk := newFakeClock()
	s := openT(t, t.TempDir(), store.Options{Now: clk.Now})
	m := msg("t", 0, "x")
	require.NoError(t, s.Append(m))
	assert.True(t, m.StoredAt.Equal(clk.Now()), "StoredAt %v, injected now %v", m.StoredAt, clk.Now())
	got, err := s.Read("t", 0, 0, 1)
	require.NoError(t, err)
	require.Len(t, got, 1)
	assert.True(t, got[0].StoredAt.Equal(clk.Now()), "read StoredAt %v", got[0].StoredAt)
}

func TestAcceptSentinelErrorsWorkWithErrorsIs(t *testing.T) {
	for _, e := range []error{store.ErrClosed, store.ErrInvalid, store.ErrOffsetTooSmall} {
		require.NotNil(t, e)
	}
	s := openT(t, t.TempDir(), store.Options{})
	_, err := s.Read("", 0, 0, 1)
	assert.ErrorIs(t, err, store.ErrInvalid)
	err = s.Append(msg("", 0, "x"))
	assert.ErrorIs(t, err, store.ErrInvalid)
	require.NoError(t, s.Close())
	assert.ErrorIs(t, s.Append(msg("t", 0, "x")), store.ErrClosed)
}

func TestAcceptRejectedBatchChangesNothing(t *testing.T) {
	clk := newFakeClock()
	s := openT(t, t.TempDir(), store.Options{Now: clk.Now, MaxMessageSize: 16})
	require.NoError(t, s.Append(msg("t", 0, "first")))

	bad := [][]*store.Message{
		{msg("t", 0, "ok"), msg("", 0, "empty topic")},
		{msg("t", 0, "ok"), msg("t", -1, "negative queue")},
		{msg("t", 0, "ok"), nil},
		{msg("t", 0, "ok"), msg("t", 1, strings.Repeat("x", 17))},
	}
	for i, batch := range bad {
		err := s.Append(batch...)
		require.Error(t, err, "batch %d", i)
		assert.ErrorIs(t, err, store.ErrInvalid, "batch %d", i)
		// The good message of a refused batch got no offsets.
		assert.Zero(t, batch[0].QueueOffset, "batch %d filled QueueOffset", i)
		assert.Zero(t, batch[0].LogOffset, "batch %d filled LogOffset", i)
		assert.True(t, batch[0].StoredAt.IsZero(), "batch %d filled StoredAt", i)
	}
	assert.Equal(t, int64(1), s.MaxOffset("t", 0))
	assert.Equal(t, int64(0), s.MaxOffset("t", 1))
	assert.Equal(t, []string{"t"}, s.Topics())
	assert.Equal(t, []int{0}, s.Queues("t"))
	assert.Len(t, readAll(t, s, "t", 0), 1)

	// No log offset was consumed by the refused batches.
	next := msg("t", 0, "second")
	require.NoError(t, s.Append(next))
	assert.Equal(t, int64(1), next.LogOffset)
	assert.Equal(t, int64(1), next.QueueOffset)
}

func TestAcceptBadInputNeverPanics(t *testing.T) {
	s := openT(t, t.TempDir(), store.Options{})
	require.NoError(t, s.Append(msg("t", 0, "x")))
	assert.NotPanics(t, func() {
		_ = s.Append()
		_ = s.Append(nil)
		_ = s.Append(nil, nil)
		_, _ = s.Read("t", 0, -1, 1)
		_, _ = s.Read("t", 0, 1<<62, 1)
		_, _ = s.Read("t", -5, 0, 1)
		_, _ = s.Read("t", 0, 0, -1)
		_, _ = s.ReadAt(-1)
		_, _ = s.ReadAt(1 << 62)
		_ = s.MinOffset("", -1)
		_ = s.MaxOffset("", -1)
		_ = s.OffsetAt("", -1, time.Time{})
		_ = s.Queues("")
	})
	// Still exactly one message.
	assert.Equal(t, int64(1), s.MaxOffset("t", 0))
	assert.Len(t, readAll(t, s, "t", 0), 1)
}

func TestAcceptRejectedRequestIsLoggedWithItsKeys(t *testing.T) {
	var lb logBuffer
	s := openT(t, t.TempDir(), store.Options{Logger: slog.New(slog.NewTextHandler(&lb, nil))})
	require.Error(t, s.Append(msg("rejected-topic", -3, "x")))
	out := lb.String()
	assert.NotEmpty(t, out, "a rejected request must be logged")
	assert.Contains(t, out, "rejected-topic", "the log line names the topic")
}

func TestAcceptStatsIsAPlainStructOfCounters(t *testing.T) {
	s := openT(t, t.TempDir(), store.Options{})
	before := s.Stats()
	require.NoError(t, s.Append(msg("t", 0, "a"), msg("t", 1, "b")))
	_, err := s.Read("t", 0, 0, 10)
	require.NoError(t, err)
	after := s.Stats()
	assert.NotEqual(t, before, after, "counters move after an append and a read")
	assert.Equal(t, before.Messages+2, after.Messages)
	assert.Greater(t, after.Reads, before.Reads)
}

func TestAcceptCloseIsIdempotentAndLaterCallsReturnErrClosed(t *testing.T) {
	defer goleak.VerifyNone(t)
	clk := newFakeClock()
	s, err := store.Open(t.TempDir(), store.Options{
		Now: clk.Now, MaxAge: time.Hour, RetainEvery: time.Millisecond, Sync: store.SyncInterval, SyncEvery: time.Millisecond,
	})
	require.NoError(t, err)
	require.NoError(t, s.Append(msg("t", 0, "x")))
	require.NoError(t, s.Close())
	assert.NoError(t, s.Close(), "second Close")
	assert.NotPanics(t, func() { _ = s.Close() })

	assert.ErrorIs(t, s.Append(msg("t", 0, "y")), store.ErrClosed)
	_, err = s.Read("t", 0, 0, 1)
	assert.ErrorIs(t, err, store.ErrClosed)
	_, err = s.ReadAt(0)
	assert.ErrorIs(t, err, store.ErrClosed)
	assert.ErrorIs(t, s.Sync(), store.ErrClosed)
	_, err = s.Retain()
	assert.ErrorIs(t, err, store.ErrClosed)
	assert.NotPanics(t, func() {
		_ = s.MinOffset("t", 0)
		_ = s.MaxOffset("t", 0)
		_ = s.OffsetAt("t", 0, clk.Now())
		_ = s.Topics()
		_ = s.Queues("t")
		_ = s.Stats()
	})
}

func TestAcceptCloseStopsEveryBackgroundGoroutine(t *testing.T) {
	defer goleak.VerifyNone(t)
	for _, pol := range []store.SyncPolicy{store.SyncGroup, store.SyncInterval, store.SyncNone} {
		s, err := store.Open(t.TempDir(), store.Options{
			Sync: pol, SyncEvery: time.Millisecond, MaxBytes: 1 << 30, RetainEvery: time.Millisecond,
		})
		require.NoError(t, err)
		var wg sync.WaitGroup
		for i := 0; i < 8; i++ {
			wg.Add(1)
			go func() {
				defer wg.Done()
				assert.NoError(t, s.Append(msg("t", i%2, "x")))
			}()
		}
		wg.Wait()
		require.NoError(t, s.Close())
	}
}

// --- Message / Append ------------------------------------------------------

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

func TestAcceptStoredAtNeverDecreasesEvenWhenTheClockGoesBack(t *testing.T) {
	clk := newFakeClock()
	s := openT(t, t.TempDir(), store.Options{Now: clk.Now})
	a := msg("t", 0, "a")
	require.NoError(t, s.Append(a))
	clk.Advance(-time.Hour) // NTP step backwards
	b := msg("t", 1, "b")
	require.NoError(t, s.Append(b))
	assert.False(t, b.StoredAt.Before(a.StoredAt), "StoredAt went back: %v then %v", a.StoredAt, b.StoredAt)
	got, err := s.ReadAt(b.LogOffset)
	require.NoError(t, err)
	assert.False(t, got.StoredAt.Before(a.StoredAt))
	// OffsetAt stays consistent: nothing of queue 1 is before a's time.
	assert.Equal(t, int64(0), s.OffsetAt("t", 1, a.StoredAt))
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

// --- OnAppend --------------------------------------------------------------

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

// --- Read ------------------------------------------------------------------

func TestAcceptReadAtMaxOffsetReturnsEmptyNonNilSliceAndNoError(t *testing.T) {
	s := openT(t, t.TempDir(), store.Options{})
	require.NoError(t, s.Append(msg("t", 0, "a"), msg("t", 0, "b")))
	got, err := s.Read("t", 0, s.MaxOffset("t", 0), 10)
	require.NoError(t, err)
	assert.NotNil(t, got, "an empty slice, not nil")
	assert.Empty(t, got)
}

func TestAcceptReadOfNeverWrittenQueueIsEmptyNotAnError(t *testing.T) {
	s := openT(t, t.TempDir(), store.Options{})
	got, err := s.Read("never", 0, 0, 10)
	require.NoError(t, err)
	assert.NotNil(t, got)
	assert.Empty(t, got)
	require.NoError(t, s.Append(msg("t", 0, "a")))
	got, err = s.Read("t", 7, 0, 10) // topic written, queue never
	require.NoError(t, err)
	assert.NotNil(t, got)
	assert.Empty(t, got)
	assert.Equal(t, int64(0), s.MinOffset("never", 0))
	assert.Equal(t, int64(0), s.MaxOffset("never", 0))
	assert.Empty(t, s.Queues("never"))
}

func TestAcceptReadBadArgumentsAreErrInvalid(t *testing.T) {
	s := openT(t, t.TempDir(), store.Options{})
	require.NoError(t, s.Append(msg("t", 0, "a")))
	for _, tc := range []struct {
		name  string
		topic string
		q     int
		max   int
	}{
		{"empty topic", "", 0, 1},
		{"negative queue", "t", -1, 1},
		{"max zero", "t", 0, 0},
		{"max negative", "t", 0, -3},
	} {
		got, err := s.Read(tc.topic, tc.q, 0, tc.max)
		assert.ErrorIs(t, err, store.ErrInvalid, tc.name)
		assert.Empty(t, got, tc.name)
	}
}

func TestAcceptReadPagesAndClampsALargeMax(t *testing.T) {
	s := openT(t, t.TempDir(), store.Options{Sync: store.SyncNone})
	const n = 3000
	batch := make([]*store.Message, 0, 100)
	for i := 0; i < n; i++ {
		batch = append(batch, msg("t", 0, strconv.Itoa(i)))
		if len(batch) == cap(batch) {
			require.NoError(t, s.Append(batch...))
			batch = batch[:0]
		}
	}
	got, err := s.Read("t", 0, 0, 1<<30)
	require.NoError(t, err)
	require.NotEmpty(t, got)
	assert.LessOrEqual(t, len(got), n)
	got, err = s.Read("t", 0, 10, 3)
	require.NoError(t, err)
	require.Len(t, got, 3, "max is honoured")
	assert.Equal(t, int64(10), got[0].QueueOffset)
	all := readAll(t, s, "t", 0)
	require.Len(t, all, n)
	for i, m := range all {
		assert.Equal(t, strconv.Itoa(i), string(m.Body))
	}
	// Reading past the end of a partial page returns what there is.
	got, err = s.Read("t", 0, n-2, 10)
	require.NoError(t, err)
	assert.Len(t, got, 2)
}

func TestAcceptReadBelowMinOffsetIsErrOffsetTooSmallWithTheMin(t *testing.T) {
	clk := newFakeClock()
	s, dir := retainedStore(t, clk)
	_ = dir
	min := s.MinOffset("t", 0)
	require.Greater(t, min, int64(0), "retention moved MinOffset up")
	_, err := s.Read("t", 0, 0, 10)
	require.Error(t, err)
	assert.ErrorIs(t, err, store.ErrOffsetTooSmall)
	assert.Contains(t, err.Error(), strconv.FormatInt(min, 10), "the error says the min")
	var oe *store.OffsetError
	if assert.ErrorAs(t, err, &oe) {
		assert.Equal(t, min, oe.Min)
	}
	got, err := s.Read("t", 0, min, 10)
	require.NoError(t, err)
	require.NotEmpty(t, got)
	assert.Equal(t, min, got[0].QueueOffset)
}

func TestAcceptReadOfNegativeOffsetIsAnErrorNotAPanic(t *testing.T) {
	s := openT(t, t.TempDir(), store.Options{})
	require.NoError(t, s.Append(msg("t", 0, "a")))
	got, err := s.Read("t", 0, -1, 1)
	require.Error(t, err, "a negative offset is below MinOffset")
	assert.True(t, errors.Is(err, store.ErrOffsetTooSmall) || errors.Is(err, store.ErrInvalid), "%v", err)
	assert.Empty(t, got)
}

// --- ReadAt ----------------------------------------------------------------

func TestAcceptReadAtFetchesByLogOffset(t *testing.T) {
	s := openT(t, t.TempDir(), store.Options{})
	var ms []*store.Message
	for i := 0; i < 5; i++ {
		m := msg(fmt.Sprintf("t%d", i%2), i%3, strconv.Itoa(i))
		ms = append(ms, m)
	}
	require.NoError(t, s.Append(ms...))
	for _, m := range ms {
		got, err := s.ReadAt(m.LogOffset)
		require.NoError(t, err)
		assert.Equal(t, m.Body, got.Body)
		assert.Equal(t, m.Topic, got.Topic)
		assert.Equal(t, m.QueueID, got.QueueID)
		assert.Equal(t, m.QueueOffset, got.QueueOffset)
	}
	_, err := s.ReadAt(5)
	assert.Error(t, err, "never written")
	_, err = s.ReadAt(-1)
	assert.Error(t, err)
}

// --- OffsetAt --------------------------------------------------------------

func TestAcceptOffsetAtIsFirstOffsetStoredAtOrAfterT(t *testing.T) {
	clk := newFakeClock()
	t0 := clk.Now()
	s := openT(t, t.TempDir(), store.Options{Now: clk.Now})
	// Stored at t0, t0, t0+10s, t0+20s, t0+20s, t0+30s (queue offsets 0..5).
	steps := []time.Duration{0, 0, 10 * time.Second, 10 * time.Second, 0, 10 * time.Second}
	for _, d := range steps {
		clk.Advance(d)
		require.NoError(t, s.Append(msg("t", 0, "x")))
		// Noise in another queue must not matter.
		require.NoError(t, s.Append(msg("t", 1, "noise")))
	}
	sec := func(n int) time.Time { return t0.Add(time.Duration(n) * time.Second) }
	cases := []struct {
		at   time.Time
		want int64
	}{
		{t0.Add(-time.Hour), 0},           // before everything: MinOffset
		{time.Time{}, 0},                  // zero time
		{t0, 0},                           // exactly the first: the first of equal ones
		{t0.Add(time.Nanosecond), 2},      // just after t0
		{sec(10), 2},                      // exact
		{sec(15), 3},                      // between
		{sec(20), 3},                      // first of two equal
		{sec(30), 5},                      // exactly the last
		{sec(30).Add(time.Nanosecond), 6}, // after everything: MaxOffset
		{sec(3600), 6},
	}
	for _, c := range cases {
		assert.Equal(t, c.want, s.OffsetAt("t", 0, c.at), "OffsetAt(%v)", c.at.Sub(t0))
	}
	assert.Equal(t, int64(0), s.OffsetAt("never", 0, t0), "never written")
	assert.Equal(t, int64(0), s.OffsetAt("t", 9, t0), "queue never written")
}

func TestAcceptOffsetAtAfterRetentionIsNeverBelowMinOffset(t *testing.T) {
	clk := newFakeClock()
	s, _ := retainedStore(t, clk)
	min := s.MinOffset("t", 0)
	require.Greater(t, min, int64(0))
	assert.Equal(t, min, s.OffsetAt("t", 0, time.Time{}))
	assert.Equal(t, s.MaxOffset("t", 0), s.OffsetAt("t", 0, clk.Now().Add(time.Hour)))
}

// --- Topics / Queues / Sync --------------------------------------------------

func TestAcceptTopicsAndQueuesListWhatWasWritten(t *testing.T) {
	dir := t.TempDir()
	s := openT(t, dir, store.Options{})
	assert.Empty(t, s.Topics())
	require.NoError(t, s.Append(msg("b", 2, "x"), msg("a", 0, "x"), msg("b", 0, "x"), msg("b", 7, "x")))
	topics := s.Topics()
	sort.Strings(topics)
	assert.Equal(t, []string{"a", "b"}, topics)
	qs := s.Queues("b")
	sort.Ints(qs)
	assert.Equal(t, []int{0, 2, 7}, qs)
	assert.Empty(t, s.Queues("zzz"))
	require.NoError(t, s.Sync())
	require.NoError(t, s.Close())
	s2 := openT(t, dir, store.Options{})
	topics = s2.Topics()
	sort.Strings(topics)
	assert.Equal(t, []string{"a", "b"}, topics, "after reopen")
	qs = s2.Queues("b")
	sort.Ints(qs)
	assert.Equal(t, []int{0, 2, 7}, qs, "after reopen")
}

func TestAcceptReopenContinuesOffsetsWhereTheyWere(t *testing.T) {
	dir := t.TempDir()
	s, err := store.Open(dir, store.Options{})
	require.NoError(t, err)
	require.NoError(t, s.Append(msg("t", 0, "a"), msg("t", 1, "b"), msg("t", 0, "c")))
	require.NoError(t, s.Close())
	s2 := openT(t, dir, store.Options{})
	assert.Equal(t, int64(2), s2.MaxOffset("t", 0))
	m := msg("t", 0, "d")
	require.NoError(t, s2.Append(m))
	assert.Equal(t, int64(2), m.QueueOffset)
	assert.Equal(t, int64(3), m.LogOffset)
	assert.Equal(t, int64(0), s2.Stats().Replayed, "a clean reopen re-reads no log records")
}

// --- retention ---------------------------------------------------------------

// retainedStore builds a store with small segments where queue t/0 has lost
// its oldest messages to MaxAge retention (driven by the injected clock).
func retainedStore(t *testing.T, clk *fakeClock) (*store.Store, string) {
	t.Helper()
	dir := t.TempDir()
	s := openT(t, dir, store.Options{Now: clk.Now, SegmentSize: 4096, MaxAge: time.Hour, RetainEvery: -1})
	body := strings.Repeat("o", 500)
	for i := 0; i < 40; i++ {
		require.NoError(t, s.Append(msg("t", 0, body)))
	}
	clk.Advance(2 * time.Hour)
	for i := 0; i < 3; i++ {
		require.NoError(t, s.Append(msg("t", 0, body)))
	}
	n, err := s.Retain()
	require.NoError(t, err)
	require.Greater(t, n, 0, "old whole segments dropped")
	return s, dir
}

func TestAcceptRetainMaxAgeDropsOldWholeSegmentsOnlyOnDemandWithInjectedClock(t *testing.T) {
	clk := newFakeClock()
	dir := t.TempDir()
	s := openT(t, dir, store.Options{Now: clk.Now, SegmentSize: 4096, MaxAge: time.Hour, RetainEvery: -1})
	body := strings.Repeat("o", 500)
	for i := 0; i < 40; i++ {
		require.NoError(t, s.Append(msg("t", 0, body)))
	}
	n, err := s.Retain()
	require.NoError(t, err)
	assert.Equal(t, 0, n, "nothing is older than MaxAge yet")
	assert.Equal(t, int64(0), s.MinOffset("t", 0))

	clk.Advance(2 * time.Hour)
	n, err = s.Retain()
	require.NoError(t, err)
	assert.Greater(t, n, 0)
	min, max := s.MinOffset("t", 0), s.MaxOffset("t", 0)
	assert.Greater(t, min, int64(0))
	assert.LessOrEqual(t, min, max)
	assert.Equal(t, int64(40), max, "MaxOffset does not move")
	// Everything from min on is still readable and dense.
	all := readAll(t, s, "t", 0)
	require.Len(t, all, int(max-min))
	for i, m := range all {
		assert.Equal(t, min+int64(i), m.QueueOffset)
	}
	// Whole segments only: a retained prefix is exact; ReadAt below is too small.
	_, err = s.ReadAt(0)
	assert.ErrorIs(t, err, store.ErrOffsetTooSmall)

	// The segment being written is never dropped, however old.
	require.NoError(t, s.Append(msg("t", 0, body)))
	clk.Advance(10 * time.Hour)
	_, err = s.Retain()
	require.NoError(t, err)
	assert.Equal(t, int64(40), s.MinOffset("t", 0), "the newest record lives in the segment being written")
	got, err := s.Read("t", 0, 40, 1)
	require.NoError(t, err)
	assert.Len(t, got, 1)
}

func TestAcceptRetainMaxBytesKeepsTheLogUnderBudget(t *testing.T) {
	s := openT(t, t.TempDir(), store.Options{SegmentSize: 4096, MaxBytes: 16 << 10, RetainEvery: -1})
	body := strings.Repeat("b", 500)
	for i := 0; i < 200; i++ {
		require.NoError(t, s.Append(msg("t", 0, body)))
	}
	n, err := s.Retain()
	require.NoError(t, err)
	assert.Greater(t, n, 0)
	min, max := s.MinOffset("t", 0), s.MaxOffset("t", 0)
	assert.Greater(t, min, int64(0))
	assert.Equal(t, int64(200), max)
	assert.Less(t, max-min, int64(200))
	assert.Greater(t, max-min, int64(0), "never the segment being written")
}

func TestAcceptRetainEveryRunsRetentionInTheBackground(t *testing.T) {
	clk := newFakeClock()
	s := openT(t, t.TempDir(), store.Options{Now: clk.Now, SegmentSize: 4096, MaxAge: time.Hour, RetainEvery: 5 * time.Millisecond})
	body := strings.Repeat("o", 500)
	for i := 0; i < 40; i++ {
		require.NoError(t, s.Append(msg("t", 0, body)))
	}
	clk.Advance(2 * time.Hour)
	require.NoError(t, s.Append(msg("t", 0, body)))
	require.Eventually(t, func() bool { return s.MinOffset("t", 0) > 0 }, 3*time.Second, 5*time.Millisecond)
}

func TestAcceptOffsetsNeverGoBackForAQueueRetainedToEmptyAcrossReopen(t *testing.T) {
	clk := newFakeClock()
	dir := t.TempDir()
	opts := store.Options{Now: clk.Now, SegmentSize: 4096, MaxAge: time.Hour, RetainEvery: -1}
	s, err := store.Open(dir, opts)
	require.NoError(t, err)
	body := strings.Repeat("e", 500)
	for i := 0; i < 30; i++ {
		require.NoError(t, s.Append(msg("gone", 0, body)))
	}
	// Old filler of another queue, so the segment with gone's tail holds
	// only old records, then fresh records in fresh segments.
	for i := 0; i < 20; i++ {
		require.NoError(t, s.Append(msg("filler", 0, body)))
	}
	clk.Advance(2 * time.Hour)
	for i := 0; i < 30; i++ {
		require.NoError(t, s.Append(msg("live", 0, body)))
	}
	lastLog := int64(79)
	_, err = s.Retain()
	require.NoError(t, err)
	require.Equal(t, int64(30), s.MaxOffset("gone", 0))
	require.Equal(t, int64(30), s.MinOffset("gone", 0), "retained to empty")
	got, err := s.Read("gone", 0, 30, 5)
	require.NoError(t, err)
	assert.Empty(t, got)
	_, err = s.Read("gone", 0, 0, 5)
	assert.ErrorIs(t, err, store.ErrOffsetTooSmall)
	require.NoError(t, s.Close())

	s2 := openT(t, dir, opts)
	assert.Equal(t, int64(30), s2.MaxOffset("gone", 0), "MaxOffset after reopen")
	assert.Equal(t, int64(30), s2.MinOffset("gone", 0), "MinOffset after reopen")
	_, err = s2.Read("gone", 0, 0, 5)
	assert.ErrorIs(t, err, store.ErrOffsetTooSmall, "still too small after reopen")
	m := msg("gone", 0, "again")
	require.NoError(t, s2.Append(m))
	assert.Equal(t, int64(30), m.QueueOffset, "queue offset never reused")
	assert.Greater(t, m.LogOffset, lastLog, "log offset never reused")
	got, err = s2.Read("gone", 0, 30, 5)
	require.NoError(t, err)
	require.Len(t, got, 1)
	assert.Equal(t, "again", string(got[0].Body))
}

func TestAcceptOffsetsNeverGoBackWhenRetentionDropsAllButTheWritingSegment(t *testing.T) {
	clk := newFakeClock()
	dir := t.TempDir()
	opts := store.Options{Now: clk.Now, SegmentSize: 4096, MaxAge: time.Hour, RetainEvery: -1}
	s, err := store.Open(dir, opts)
	require.NoError(t, err)
	body := strings.Repeat("e", 500)
	var last *store.Message
	for i := 0; i < 30; i++ {
		last = msg("t", i%2, body)
		require.NoError(t, s.Append(last))
	}
	clk.Advance(48 * time.Hour)
	_, err = s.Retain()
	require.NoError(t, err)
	max0, max1 := s.MaxOffset("t", 0), s.MaxOffset("t", 1)
	require.NoError(t, s.Close())
	clk.Advance(48 * time.Hour)
	s2 := openT(t, dir, opts)
	_, err = s2.Retain()
	require.NoError(t, err)
	assert.Equal(t, max0, s2.MaxOffset("t", 0))
	assert.Equal(t, max1, s2.MaxOffset("t", 1))
	m := msg("t", 0, "n")
	require.NoError(t, s2.Append(m))
	assert.Equal(t, max0, m.QueueOffset)
	assert.Greater(t, m.LogOffset, last.LogOffset)
}

// --- recovery ----------------------------------------------------------------

var walSegmentName = regexp.MustCompile(`^[0-9]{20}$`)

// lastWALSegment finds the newest tidwall/wal segment file under dir.
func lastWALSegment(t *testing.T, dir string) string {
	t.Helper()
	var segs []string
	require.NoError(t, filepath.WalkDir(dir, func(p string, d fs.DirEntry, err error) error {
		if err != nil {
			return err
		}
		if !d.IsDir() && walSegmentName.MatchString(d.Name()) {
			segs = append(segs, p)
		}
		return nil
	}))
	require.NotEmpty(t, segs, "no wal segment under %s", dir)
	sort.Strings(segs)
	return segs[len(segs)-1]
}

func TestAcceptOpenRepairsAGarbageTailAndLogsIt(t *testing.T) {
	for _, garbage := range [][]byte{
		[]byte("\x00"),
		[]byte("\xff\xff\xff"),
		[]byte(strings.Repeat("torn record", 7)),
		{0x05, 0x01, 0x02}, // a length prefix promising more than follows
	} {
		dir := t.TempDir()
		s, err := store.Open(dir, store.Options{})
		require.NoError(t, err)
		for i := 0; i < 5; i++ {
			require.NoError(t, s.Append(msg("t", 0, strconv.Itoa(i)), msg("t", 1, strconv.Itoa(i))))
		}
		require.NoError(t, s.Close())
		seg := lastWALSegment(t, dir)
		f, err := os.OpenFile(seg, os.O_WRONLY|os.O_APPEND, 0)
		require.NoError(t, err)
		_, err = f.Write(garbage)
		require.NoError(t, err)
		require.NoError(t, f.Close())

		var lb logBuffer
		s2, err := store.Open(dir, store.Options{Logger: slog.New(slog.NewTextHandler(&lb, nil))})
		require.NoError(t, err, "a torn tail is repaired, not an error (garbage %q)", garbage)
		assert.Contains(t, lb.String(), "level=WARN", "the recovery is logged")
		assert.Contains(t, lb.String(), filepath.Base(seg), "the recovery log names what was cut")
		for q := 0; q < 2; q++ {
			all := readAll(t, s2, "t", q)
			require.Len(t, all, 5, "no acknowledged record lost")
			for i, m := range all {
				assert.Equal(t, strconv.Itoa(i), string(m.Body))
			}
		}
		m := msg("t", 0, "after")
		require.NoError(t, s2.Append(m))
		assert.Equal(t, int64(5), m.QueueOffset)
		assert.Equal(t, int64(10), m.LogOffset)
		require.NoError(t, s2.Close())
		s3, err := store.Open(dir, store.Options{})
		require.NoError(t, err)
		assert.Len(t, readAll(t, s3, "t", 0), 6)
		require.NoError(t, s3.Close())
	}
}

func TestAcceptReopenAfterManySegmentsKeepsEverything(t *testing.T) {
	dir := t.TempDir()
	opts := store.Options{SegmentSize: 2048, Sync: store.SyncNone}
	s, err := store.Open(dir, opts)
	require.NoError(t, err)
	for i := 0; i < 300; i++ {
		require.NoError(t, s.Append(msg("t", i%3, strings.Repeat("s", 100)+strconv.Itoa(i))))
	}
	assert.Greater(t, s.Stats().Segments, 1, "SegmentSize rolls segments")
	require.NoError(t, s.Close())
	s2 := openT(t, dir, opts)
	for q := 0; q < 3; q++ {
		all := readAll(t, s2, "t", q)
		require.Len(t, all, 100)
		for i, m := range all {
			assert.Equal(t, int64(i), m.QueueOffset)
			assert.Equal(t, int64(i*3+q), m.LogOffset)
		}
	}
}

func TestAcceptTornTailNeverExposesPartOfABatch(t *testing.T) {
	// Build one log, then for many cut points: copy it, chop the newest
	// segment there (a write torn by a crash), reopen. Every batch is whole
	// or absent, the survivors are a prefix, and appending goes on densely.
	src := t.TempDir()
	s, err := store.Open(src, store.Options{Sync: store.SyncNone})
	require.NoError(t, err)
	const batches, per = 6, 3
	for b := 0; b < batches; b++ {
		var batch []*store.Message
		for i := 0; i < per; i++ {
			batch = append(batch, msg("t", i%2, fmt.Sprintf("b%d-m%d", b, i)))
		}
		require.NoError(t, s.Append(batch...))
	}
	require.NoError(t, s.Close())
	seg, err := filepath.Rel(src, lastWALSegment(t, src))
	require.NoError(t, err)
	fi, err := os.Stat(filepath.Join(src, seg))
	require.NoError(t, err)
	size := fi.Size()
	for cut := int64(1); cut < size && cut < 400; cut += 11 {
		dir := t.TempDir()
		require.NoError(t, os.CopyFS(dir, os.DirFS(src)))
		require.NoError(t, os.Truncate(filepath.Join(dir, seg), size-cut))
		s2, err := store.Open(dir, store.Options{Sync: store.SyncNone})
		require.NoError(t, err, "cut %d: a torn tail is repaired", cut)
		var bodies []string
		for q := 0; q < 2; q++ {
			for _, m := range readAll(t, s2, "t", q) {
				bodies = append(bodies, string(m.Body))
			}
		}
		count := map[int]int{}
		for _, b := range bodies {
			var bn, mn int
			_, err := fmt.Sscanf(b, "b%d-m%d", &bn, &mn)
			require.NoError(t, err)
			count[bn]++
		}
		whole := 0
		for b := 0; b < batches; b++ {
			if count[b] == 0 {
				break
			}
			assert.Equal(t, per, count[b], "cut %d: batch %d is partial", cut, b)
			whole++
		}
		assert.Equal(t, whole*per, len(bodies), "cut %d: survivors are a prefix of whole batches", cut)
		m := msg("t", 0, "next")
		require.NoError(t, s2.Append(m), "cut %d", cut)
		assert.Equal(t, int64(whole*per), m.LogOffset, "cut %d: log offsets stay dense", cut)
		require.NoError(t, s2.Close())
	}
}

func TestAcceptChecksumCatchesAFlippedByteInsteadOfReturningWrongData(t *testing.T) {
	dir := t.TempDir()
	opts := store.Options{SegmentSize: 4096}
	s, err := store.Open(dir, opts)
	require.NoError(t, err)
	want := map[int64]string{}
	for i := 0; i < 40; i++ {
		m := msg("t", 0, fmt.Sprintf("payload-%03d-%s", i, strings.Repeat("z", 200)))
		require.NoError(t, s.Append(m))
		want[m.QueueOffset] = string(m.Body)
	}
	require.NoError(t, s.Close())
	// Flip one byte of message 5's body inside its (older, sealed) segment.
	needle := []byte("payload-005-")
	var hit string
	require.NoError(t, filepath.WalkDir(dir, func(p string, d fs.DirEntry, err error) error {
		if err != nil || d.IsDir() || hit != "" {
			return err
		}
		b, err := os.ReadFile(p)
		if err != nil {
			return err
		}
		if i := bytes.Index(b, needle); i >= 0 {
			b[i+len(needle)+3] ^= 0x01
			hit = p
			return os.WriteFile(p, b, 0o644)
		}
		return nil
	}))
	require.NotEmpty(t, hit, "body bytes found in a log file")

	s2, err := store.Open(dir, opts)
	if err != nil {
		// Refusing to open is acceptable: corruption in the middle is an error.
		assert.Contains(t, err.Error(), filepath.Base(hit), "the error names the segment")
		return
	}
	defer s2.Close()
	for off := int64(0); off < 40; off++ {
		got, err := s2.Read("t", 0, off, 1)
		if err != nil {
			continue // reported, fine
		}
		if assert.Len(t, got, 1, "offset %d silently dropped", off) {
			assert.Equal(t, want[off], string(got[0].Body), "offset %d returned wrong data without an error", off)
		}
	}
}

func TestAcceptCloseLetsWaitingAppendsFinishAndRefusesTheRest(t *testing.T) {
	defer goleak.VerifyNone(t)
	for round := 0; round < 5; round++ {
		dir := t.TempDir()
		s, err := store.Open(dir, store.Options{}) // SyncGroup
		require.NoError(t, err)
		const n = 24
		results := make([]error, n)
		var wg sync.WaitGroup
		start := make(chan struct{})
		for i := 0; i < n; i++ {
			wg.Add(1)
			go func() {
				defer wg.Done()
				<-start
				results[i] = s.Append(msg("t", 0, strconv.Itoa(i)))
			}()
		}
		close(start)
		if round%2 == 1 {
			time.Sleep(time.Duration(round) * 100 * time.Microsecond)
		}
		require.NoError(t, s.Close())
		wg.Wait()
		ok := map[string]bool{}
		for i, err := range results {
			if err == nil {
				ok[strconv.Itoa(i)] = true
			} else {
				assert.ErrorIs(t, err, store.ErrClosed, "round %d append %d", round, i)
			}
		}
		s2, err := store.Open(dir, store.Options{})
		require.NoError(t, err)
		got := map[string]bool{}
		for _, m := range readAll(t, s2, "t", 0) {
			got[string(m.Body)] = true
		}
		assert.Equal(t, ok, got, "round %d: exactly the acknowledged appends are in the log", round)
		require.NoError(t, s2.Close())
	}
}

func TestAcceptStoredAtNeverDecreasesAcrossReopenWithAnEarlierClock(t *testing.T) {
	clk := newFakeClock()
	dir := t.TempDir()
	s, err := store.Open(dir, store.Options{Now: clk.Now})
	require.NoError(t, err)
	a := msg("t", 0, "a")
	require.NoError(t, s.Append(a))
	require.NoError(t, s.Close())
	clk.Advance(-24 * time.Hour)
	s2 := openT(t, dir, store.Options{Now: clk.Now})
	b := msg("t", 0, "b")
	require.NoError(t, s2.Append(b))
	assert.False(t, b.StoredAt.Before(a.StoredAt), "StoredAt went back across a reopen: %v then %v", a.StoredAt, b.StoredAt)
	assert.Equal(t, int64(0), s2.OffsetAt("t", 0, a.StoredAt))
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

func TestAcceptRetainWithoutLimitsDropsNothing(t *testing.T) {
	clk := newFakeClock()
	s := openT(t, t.TempDir(), store.Options{Now: clk.Now, SegmentSize: 4096})
	for i := 0; i < 40; i++ {
		require.NoError(t, s.Append(msg("t", 0, strings.Repeat("k", 500))))
	}
	clk.Advance(1000 * time.Hour)
	n, err := s.Retain()
	require.NoError(t, err)
	assert.Equal(t, 0, n)
	assert.Equal(t, int64(0), s.MinOffset("t", 0))
	assert.Len(t, readAll(t, s, "t", 0), 40)
}

func TestAcceptSyncIntervalFsyncsInTheBackground(t *testing.T) {
	s := openT(t, t.TempDir(), store.Options{Sync: store.SyncInterval, SyncEvery: 2 * time.Millisecond})
	require.NoError(t, s.Append(msg("t", 0, "x")))
	before := s.Stats().Syncs
	require.NoError(t, s.Append(msg("t", 0, "y")))
	require.Eventually(t, func() bool { return s.Stats().Syncs > before }, 3*time.Second, time.Millisecond,
		"an fsync every SyncEvery without an explicit Sync")
}

func TestAcceptRetentionRacingReadersAndWritersNeverReturnsWrongData(t *testing.T) {
	clk := newFakeClock()
	s := openT(t, t.TempDir(), store.Options{Now: clk.Now, SegmentSize: 4096, MaxAge: time.Second, RetainEvery: time.Millisecond})
	ctx, cancel := context.WithTimeout(context.Background(), 400*time.Millisecond)
	defer cancel()
	var wg sync.WaitGroup
	wg.Add(3)
	go func() { // writer: bodies encode their queue offset
		defer wg.Done()
		for i := 0; ctx.Err() == nil; i++ {
			if !assert.NoError(t, s.Append(msg("t", 0, fmt.Sprintf("%06d%s", i, strings.Repeat("w", 300))))) {
				return
			}
			clk.Advance(100 * time.Millisecond)
		}
	}()
	for r := 0; r < 2; r++ {
		go func() {
			defer wg.Done()
			for ctx.Err() == nil {
				min := s.MinOffset("t", 0)
				got, err := s.Read("t", 0, min, 50)
				if err != nil {
					if !assert.ErrorIs(t, err, store.ErrOffsetTooSmall) {
						return
					}
					var oe *store.OffsetError
					if assert.ErrorAs(t, err, &oe) {
						assert.GreaterOrEqual(t, oe.Min, min, "MinOffset only moves up")
					}
					continue
				}
				for i, m := range got {
					assert.Equal(t, min+int64(i), m.QueueOffset)
					assert.Equal(t, fmt.Sprintf("%06d", m.QueueOffset), string(m.Body[:6]), "wrong record for offset")
				}
				if n := s.MaxOffset("t", 0); n > 0 {
					if m, err := s.ReadAt(n - 1); err == nil {
						assert.Equal(t, "t", m.Topic)
					}
				}
			}
		}()
	}
	wg.Wait()
	assert.Greater(t, s.Stats().Retained, uint64(0), "retention ran during the test")
}

func TestAcceptOffsetsNeverGoBackWhenEverySealedSegmentIsRetained(t *testing.T) {
	// Segments so small that nearly every record rolls one: the segment being
	// written is often empty, so retention can drop every record there is.
	clk := newFakeClock()
	dir := t.TempDir()
	opts := store.Options{Now: clk.Now, SegmentSize: 600, MaxAge: time.Minute, RetainEvery: -1}
	s, err := store.Open(dir, opts)
	require.NoError(t, err)
	var last *store.Message
	for i := 0; i < 10; i++ {
		last = msg("t", 0, strings.Repeat("r", 500))
		require.NoError(t, s.Append(last))
	}
	clk.Advance(time.Hour)
	_, err = s.Retain()
	require.NoError(t, err)
	require.NoError(t, s.Close())
	for round := 0; round < 2; round++ {
		s2, err := store.Open(dir, opts)
		require.NoError(t, err)
		assert.Equal(t, last.QueueOffset+1, s2.MaxOffset("t", 0), "round %d", round)
		_, err = s2.Retain()
		require.NoError(t, err)
		require.NoError(t, s2.Close())
	}
	s3 := openT(t, dir, opts)
	m := msg("t", 0, "n")
	require.NoError(t, s3.Append(m))
	assert.Equal(t, last.QueueOffset+1, m.QueueOffset, "queue offset never reused")
	assert.Greater(t, m.LogOffset, last.LogOffset, "log offset never reused")
	got, err := s3.Read("t", 0, m.QueueOffset, 1)
	require.NoError(t, err)
	require.Len(t, got, 1)
	assert.Equal(t, "n", string(got[0].Body))
}

const acceptCrashDirEnv = "BROKERCORE_ACCEPT_CRASH_DIR"

// acceptCrashChild is the child process of
// TestAcceptKilledProcessLosesNoAcknowledgedBatchAndExposesNoPartialOne: it
// appends batches of three from several goroutines and prints each
// acknowledged batch until it is killed.
func acceptCrashChild(dir string) {
	s, err := store.Open(dir, store.Options{}) // SyncGroup
	if err != nil {
		fmt.Println("open failed:", err)
		os.Exit(3)
	}
	var mu sync.Mutex
	var wg sync.WaitGroup
	for w := 0; w < 6; w++ {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for i := 0; ; i++ {
				var batch []*store.Message
				for j := 0; j < 3; j++ {
					batch = append(batch, msg("t", (w+j)%3, fmt.Sprintf("%d.%d.%d-%d-%s", os.Getpid(), w, i, j, strings.Repeat("c", 200))))
				}
				if err := s.Append(batch...); err != nil {
					return
				}
				mu.Lock()
				fmt.Printf("ok %d.%d.%d\n", os.Getpid(), w, i)
				mu.Unlock()
			}
		}()
	}
	wg.Wait()
}

func TestAcceptKilledProcessLosesNoAcknowledgedBatchAndExposesNoPartialOne(t *testing.T) {
	if dir := os.Getenv(acceptCrashDirEnv); dir != "" {
		acceptCrashChild(dir)
		return
	}
	dir := t.TempDir()
	acked := map[string]bool{}
	for round := 0; round < 4; round++ {
		cmd := exec.Command(os.Args[0], "-test.run=^TestAcceptKilledProcessLosesNoAcknowledgedBatchAndExposesNoPartialOne$", "-test.count=1")
		cmd.Env = append(os.Environ(), acceptCrashDirEnv+"="+dir)
		out, err := cmd.StdoutPipe()
		require.NoError(t, err)
		require.NoError(t, cmd.Start())
		sc := bufio.NewScanner(out)
		lines := 0
		for sc.Scan() && lines < 150+round*50 {
			if id, ok := strings.CutPrefix(sc.Text(), "ok "); ok {
				acked[id] = true
				lines++
			}
		}
		require.NoError(t, cmd.Process.Kill())
		// Acks printed before the kill landed are acknowledged too.
		for sc.Scan() {
			if id, ok := strings.CutPrefix(sc.Text(), "ok "); ok {
				acked[id] = true
			}
		}
		_ = cmd.Wait()
		require.Greater(t, lines, 0, "the child appended")

		s, err := store.Open(dir, store.Options{})
		require.NoError(t, err, "round %d: Open recovers by itself", round)
		parts := map[string]int{}
		seenLog := map[int64]bool{}
		for q := 0; q < 3; q++ {
			for i, m := range readAll(t, s, "t", q) {
				assert.Equal(t, int64(i), m.QueueOffset, "round %d: dense queue offsets", round)
				assert.False(t, seenLog[m.LogOffset])
				seenLog[m.LogOffset] = true
				id, _, _ := strings.Cut(string(m.Body), "-")
				parts[id]++
			}
		}
		for b, n := range parts {
			assert.Equal(t, 3, n, "round %d: batch %s is partial", round, b)
		}
		for b := range acked {
			assert.Equal(t, 3, parts[b], "round %d: acknowledged batch %s lost", round, b)
		}
		for i := int64(0); i < int64(len(seenLog)); i++ {
			assert.True(t, seenLog[i], "round %d: log offset %d missing", round, i)
		}
		require.NoError(t, s.Close())
	}
}

func TestAcceptDefaultsAreTheContractValues(t *testing.T) {
	assert.Equal(t, time.Minute, time.Duration(store.DefaultRetainEvery), "RetainEvery default 1 min")
	assert.Equal(t, 4<<20, int(store.DefaultMaxMessageSize), "MaxMessageSize default 4 MiB")
	var zero store.Options
	assert.Equal(t, store.SyncGroup, zero.Sync, "SyncGroup is the zero (default) policy")
}

func TestAcceptTopicNamesAreDataNeverFilePaths(t *testing.T) {
	root := t.TempDir()
	dir := filepath.Join(root, "d")
	s, err := store.Open(dir, store.Options{})
	require.NoError(t, err)
	topics := []string{"../escape", "a/b", "..", ".", "x\x00y", "%2e%2e", "ü🙂", "A", "a", `\..\z`}
	for _, tp := range topics {
		require.NoError(t, s.Append(msg(tp, 3, "v-"+tp)), "%q", tp)
	}
	require.NoError(t, s.Close())
	ents, err := os.ReadDir(root)
	require.NoError(t, err)
	require.Len(t, ents, 1, "nothing written outside the store's directory")
	s2 := openT(t, dir, store.Options{})
	assert.ElementsMatch(t, topics, s2.Topics())
	for _, tp := range topics {
		got, err := s2.Read(tp, 3, 0, 5)
		require.NoError(t, err, "%q", tp)
		require.Len(t, got, 1, "%q", tp)
		assert.Equal(t, "v-"+tp, string(got[0].Body))
	}
}
