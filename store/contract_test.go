package store

import (
	"errors"
	"fmt"
	"os"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/brokercore/brokercore/internal/testkit"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

func TestBadInputIsErrInvalidAndWritesNothingOfTheBatch(t *testing.T) {
	s := openT(t, t.TempDir(), Options{MaxMessageSize: 16})
	defer s.Close()
	good := msg("t", 0, "ok")
	cases := map[string][]*Message{
		"nil message":    {good, nil},
		"empty topic":    {good, msg("", 0, "x")},
		"negative queue": {good, msg("t", -1, "x")},
		"oversize body":  {good, msg("t", 0, strings.Repeat("x", 17))},
		"long topic":     {good, msg(strings.Repeat("t", 256), 0, "x")},
	}
	for name, batch := range cases {
		err := s.Append(batch...)
		require.ErrorIs(t, err, ErrInvalid, name)
		assert.Equal(t, int64(0), good.QueueOffset, name)
	}
	assert.Equal(t, int64(0), s.MaxOffset("t", 0))
	assert.Equal(t, int64(0), s.Stats().LogNext)
	assert.Empty(t, s.Topics())

	for _, bad := range []func() error{
		func() error { _, err := s.Read("", 0, 0, 1); return err },
		func() error { _, err := s.Read("t", -1, 0, 1); return err },
		func() error { _, err := s.Read("t", 0, 0, 0); return err },
	} {
		require.ErrorIs(t, bad(), ErrInvalid)
	}
	// A body of exactly MaxMessageSize is fine.
	require.NoError(t, s.Append(msg("t", 0, strings.Repeat("x", 16))))
	assert.Equal(t, uint64(len(cases)), s.Stats().Rejected-3)
}

func TestReadAtMaxOffsetOrOfUnwrittenQueueIsEmptyNotError(t *testing.T) {
	s := openT(t, t.TempDir(), Options{})
	defer s.Close()
	got, err := s.Read("never", 3, 0, 10)
	require.NoError(t, err)
	assert.Empty(t, got)
	require.NoError(t, s.Append(msg("t", 0, "a")))
	got, err = s.Read("t", 0, 1, 10)
	require.NoError(t, err)
	assert.Empty(t, got)
	got, err = s.Read("t", 0, 100, 10)
	require.NoError(t, err)
	assert.Empty(t, got)
	assert.Equal(t, int64(0), s.MinOffset("never", 3))
	assert.Equal(t, int64(0), s.MaxOffset("never", 3))
	assert.Empty(t, s.Queues("never"))
}

func TestReadClampsAHugeMaxInsteadOfFailing(t *testing.T) {
	s := openT(t, t.TempDir(), Options{Sync: SyncNone})
	defer s.Close()
	batch := make([]*Message, MaxReadBatch+10)
	for i := range batch {
		batch[i] = msg("t", 0, "x")
	}
	require.NoError(t, s.Append(batch...))
	got, err := s.Read("t", 0, 0, 1<<30)
	require.NoError(t, err)
	assert.Len(t, got, MaxReadBatch)
	got, err = s.Read("t", 0, MaxReadBatch, 1<<30)
	require.NoError(t, err)
	assert.Len(t, got, 10)
}

func TestOnAppendRunsAfterRecordsAreReadableAndOutsideTheLock(t *testing.T) {
	for _, pol := range []SyncPolicy{SyncGroup, SyncNone} {
		t.Run(pol.String(), func(t *testing.T) {
			var s *Store
			var calls atomic.Int32
			var bad atomic.Value
			o := Options{Sync: pol, OnAppend: func(topic string, q int, next int64) {
				calls.Add(1)
				// Would deadlock if called under a store lock.
				got, err := s.Read(topic, q, next-1, 1)
				if err != nil || len(got) != 1 || s.MaxOffset(topic, q) < next {
					bad.Store("record not readable in OnAppend")
				}
				if topic == "t" && next == 1 {
					// Appending from the hook must not deadlock either.
					if err := s.Append(msg("hook", 0, "x")); err != nil {
						bad.Store(err.Error())
					}
				}
			}}
			s = openT(t, t.TempDir(), o)
			defer s.Close()
			done := make(chan error, 1)
			go func() { done <- s.Append(msg("t", 0, "a"), msg("t", 1, "b"), msg("t", 0, "c")) }()
			select {
			case err := <-done:
				require.NoError(t, err)
			case <-time.After(10 * time.Second):
				t.Fatal("Append deadlocked with OnAppend")
			}
			assert.Nil(t, bad.Load())
			// Once per queue of the batch (t/0 and t/1), plus the hook's own.
			assert.Equal(t, int32(3), calls.Load())
		})
	}
}

// blockingSync makes the store's fsyncs wait until released.
type blockingSync struct {
	entered chan struct{}
	release chan struct{}
	count   atomic.Int32
}

func newBlockingSync() *blockingSync {
	return &blockingSync{entered: make(chan struct{}, 100), release: make(chan struct{})}
}

func (b *blockingSync) hook(s *Store) {
	real := s.syncFile
	s.syncFile = func(f *os.File) error {
		b.count.Add(1)
		b.entered <- struct{}{}
		<-b.release
		return real(f)
	}
}

func waitFor(t *testing.T, cond func() bool) {
	t.Helper()
	deadline := time.Now().Add(10 * time.Second)
	for !cond() {
		if time.Now().After(deadline) {
			t.Fatal("condition not reached")
		}
		time.Sleep(time.Millisecond)
	}
}

func TestGroupCommitSharesOneFsyncAmongWaitingAppenders(t *testing.T) {
	s := openT(t, t.TempDir(), Options{})
	defer s.Close()
	b := newBlockingSync()
	s.mu.Lock()
	b.hook(s)
	s.mu.Unlock()
	const n = 64
	var wg sync.WaitGroup
	errs := make(chan error, n)
	for i := 0; i < n; i++ {
		wg.Add(1)
		go func() {
			defer wg.Done()
			errs <- s.Append(msg("t", i%4, "x"))
		}()
	}
	<-b.entered // the first fsync is in progress …
	waitFor(t, func() bool { s.mu.RLock(); defer s.mu.RUnlock(); return s.written == n })
	assert.Equal(t, int64(0), s.MaxOffset("t", 0)+s.MaxOffset("t", 1), "nothing is readable before its fsync")
	close(b.release) // … and every other appender wrote meanwhile
	wg.Wait()
	close(errs)
	for err := range errs {
		require.NoError(t, err)
	}
	assert.LessOrEqual(t, b.count.Load(), int32(2), "64 appends must share fsyncs")
	assert.Equal(t, int64(n/4), s.MaxOffset("t", 3))
}

func TestFailedFsyncPutsTheStoreInAFailedState(t *testing.T) {
	dir := t.TempDir()
	s := openT(t, dir, Options{})
	require.NoError(t, s.Append(msg("t", 0, "kept")))
	s.mu.Lock()
	s.syncFile = func(*os.File) error { return errors.New("EIO") }
	s.mu.Unlock()
	err := s.Append(msg("t", 0, "lost"))
	require.ErrorIs(t, err, ErrFailed)
	assert.Equal(t, int64(1), s.MaxOffset("t", 0), "an unsynced record never becomes visible")
	require.ErrorIs(t, s.Append(msg("t", 0, "later")), ErrFailed)
	_, err = s.Read("t", 0, 0, 1)
	require.ErrorIs(t, err, ErrFailed)
	require.ErrorIs(t, s.Sync(), ErrFailed)
	_, err = s.Retain()
	require.ErrorIs(t, err, ErrFailed)
	assert.True(t, s.Stats().Failed)
	require.ErrorIs(t, s.Close(), ErrFailed)

	s = openT(t, dir, Options{})
	defer s.Close()
	got, err := s.Read("t", 0, 0, 10)
	require.NoError(t, err)
	require.NotEmpty(t, got)
	assert.Equal(t, "kept", string(got[0].Body))
}

func TestCloseLetsAnAppendWaitingOnItsFsyncFinish(t *testing.T) {
	dir := t.TempDir()
	s := openT(t, dir, Options{})
	b := newBlockingSync()
	s.mu.Lock()
	b.hook(s)
	s.mu.Unlock()
	appended := make(chan error, 1)
	go func() { appended <- s.Append(msg("t", 0, "a")) }()
	<-b.entered
	closed := make(chan error, 1)
	go func() { closed <- s.Close() }()
	waitFor(t, func() bool { s.mu.RLock(); defer s.mu.RUnlock(); return s.closed })
	require.ErrorIs(t, s.Append(msg("t", 0, "b")), ErrClosed)
	close(b.release)
	require.NoError(t, <-appended)
	require.NoError(t, <-closed)
	require.NoError(t, s.Close(), "Close is idempotent")
	_, err := s.Read("t", 0, 0, 1)
	require.ErrorIs(t, err, ErrClosed)
	_, err = s.ReadAt(0)
	require.ErrorIs(t, err, ErrClosed)
	require.ErrorIs(t, s.Sync(), ErrClosed)
	_, err = s.Retain()
	require.ErrorIs(t, err, ErrClosed)

	s = openT(t, dir, Options{})
	defer s.Close()
	got, err := s.Read("t", 0, 0, 10)
	require.NoError(t, err)
	assert.Equal(t, []string{"a"}, bodies(got))
}

func TestOffsetAtReturnsFirstOffsetStoredAtOrAfter(t *testing.T) {
	clk := newClock()
	t0 := clk.Now()
	s := openT(t, t.TempDir(), Options{Now: clk.Now})
	defer s.Close()
	for i := 0; i < 10; i++ {
		require.NoError(t, s.Append(msg("t", 0, "x")))
		clk.Advance(time.Minute)
	}
	assert.Equal(t, int64(0), s.OffsetAt("t", 0, t0.Add(-time.Hour)))
	assert.Equal(t, int64(0), s.OffsetAt("t", 0, t0))
	assert.Equal(t, int64(3), s.OffsetAt("t", 0, t0.Add(3*time.Minute)))
	assert.Equal(t, int64(4), s.OffsetAt("t", 0, t0.Add(3*time.Minute+time.Second)))
	assert.Equal(t, int64(10), s.OffsetAt("t", 0, t0.Add(time.Hour)))
	assert.Equal(t, int64(0), s.OffsetAt("none", 0, t0))
}

func TestStoredAtNeverDecreasesWhenTheClockGoesBack(t *testing.T) {
	dir := t.TempDir()
	clk := newClock()
	s := openT(t, dir, Options{Now: clk.Now})
	a := msg("t", 0, "a")
	require.NoError(t, s.Append(a))
	clk.Advance(-time.Hour)
	b := msg("t", 1, "b")
	require.NoError(t, s.Append(b))
	assert.False(t, b.StoredAt.Before(a.StoredAt))
	require.NoError(t, s.Close())
	s = openT(t, dir, Options{Now: clk.Now})
	defer s.Close()
	c := msg("t", 1, "c")
	require.NoError(t, s.Append(c))
	assert.False(t, c.StoredAt.Before(a.StoredAt), "across a reopen too")
}

func TestSecondOpenOfTheSameDirectoryIsRefused(t *testing.T) {
	dir := t.TempDir()
	s := openT(t, dir, Options{})
	_, err := Open(dir, Options{})
	require.Error(t, err)
	require.NoError(t, s.Close())
	s = openT(t, dir, Options{})
	require.NoError(t, s.Close())
}

func TestConcurrentAppendsAndReadsStayDenseAndIntact(t *testing.T) {
	s := openT(t, t.TempDir(), Options{SegmentSize: 4096})
	defer s.Close()
	const writers, per = 8, 40
	var wg sync.WaitGroup
	for w := 0; w < writers; w++ {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for i := 0; i < per; i++ {
				assert.NoError(t, s.Append(msg("t", w%2, "x"), msg("u", w, "y")))
			}
		}()
	}
	stopReads := testkit.Repeat(func() {
		max := s.MaxOffset("t", 0)
		got, err := s.Read("t", 0, 0, int(max)+1)
		if assert.NoError(t, err) {
			assert.GreaterOrEqual(t, len(got), int(min(max, MaxReadBatch)))
			for i, m := range got {
				assert.Equal(t, int64(i), m.QueueOffset)
			}
		}
	})
	wg.Wait()
	stopReads()
	assert.Equal(t, int64(writers/2*per), s.MaxOffset("t", 0))
	assert.Equal(t, int64(writers*per*2), s.Stats().LogNext)
}

func TestFailedWritePutsTheStoreInAFailedStateWithNothingVisible(t *testing.T) {
	for _, pol := range []SyncPolicy{SyncGroup, SyncNone} {
		t.Run(pol.String(), func(t *testing.T) {
			dir := t.TempDir()
			s := openT(t, dir, Options{Sync: pol})
			require.NoError(t, s.Append(msg("t", 0, "kept")))
			s.mu.Lock()
			s.logWrite = func(*frames) error { return errors.New("ENOSPC") }
			s.mu.Unlock()
			m := msg("t", 0, "lost")
			require.ErrorIs(t, s.Append(m), ErrFailed)
			assert.Zero(t, m.LogOffset, "a failed append assigns nothing")
			assert.Equal(t, int64(1), s.MaxOffset("t", 0))
			assert.Equal(t, int64(1), s.Stats().LogNext, "memory did not move past the disk")
			require.ErrorIs(t, s.Append(msg("t", 0, "later")), ErrFailed)
			_, err := s.ReadAt(0)
			require.ErrorIs(t, err, ErrFailed)
			require.Error(t, s.Close())

			s = openT(t, dir, Options{})
			defer s.Close()
			assert.Equal(t, []string{"kept"}, readAll(t, s, "t", 0))
		})
	}
}

func TestSyncIntervalMakesRecordsReadableAtOnceAndFsyncsInTheBackground(t *testing.T) {
	s := openT(t, t.TempDir(), Options{Sync: SyncInterval, SyncEvery: 5 * time.Millisecond})
	defer s.Close()
	require.NoError(t, s.Append(msg("t", 0, "a")))
	assert.Equal(t, int64(1), s.MaxOffset("t", 0), "readable before any fsync")
	waitFor(t, func() bool { return s.Stats().Syncs > 0 })
}

func TestRejectedAppendIsLoggedWithItsKeys(t *testing.T) {
	var logs logBuffer
	s := openT(t, t.TempDir(), Options{Logger: logs.logger()})
	defer s.Close()
	require.ErrorIs(t, s.Append(msg("orders", -2, "x")), ErrInvalid)
	assert.Contains(t, logs.String(), "append rejected")
	assert.Contains(t, logs.String(), "topic=orders")
	assert.Contains(t, logs.String(), "queue=-2")
}

func TestCloseRacingAppendsLosesNoAcknowledgedAppend(t *testing.T) {
	dir := t.TempDir()
	s := openT(t, dir, Options{})
	var wg sync.WaitGroup
	var mu sync.Mutex
	acked := map[int64]string{}
	for w := 0; w < 16; w++ {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for i := 0; ; i++ {
				m := msg("t", 0, fmt.Sprintf("w%d-%d", w, i))
				err := s.Append(m)
				if err != nil {
					assert.ErrorIs(t, err, ErrClosed)
					return
				}
				mu.Lock()
				acked[m.QueueOffset] = string(m.Body)
				mu.Unlock()
			}
		}()
	}
	waitFor(t, func() bool { return s.MaxOffset("t", 0) > 50 })
	require.NoError(t, s.Close())
	wg.Wait()

	s = openT(t, dir, Options{})
	defer s.Close()
	for off, body := range acked {
		got, err := s.Read("t", 0, off, 1)
		require.NoError(t, err)
		require.Len(t, got, 1)
		assert.Equal(t, body, string(got[0].Body))
	}
}
