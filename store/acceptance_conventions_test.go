package store_test

// Acceptance tests of the store against the shared conventions: defaults,
// the injected clock, sentinel errors, bad input, logging, Stats and Close.

import (
	"log/slog"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	"go.uber.org/goleak"

	"github.com/brokercore/brokercore/store"
)

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
	// Errors returned to the caller are logged at DEBUG (issue 14).
	s := openT(t, t.TempDir(), store.Options{Logger: slog.New(slog.NewTextHandler(&lb, &slog.HandlerOptions{Level: slog.LevelDebug}))})
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
