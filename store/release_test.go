package store

import (
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/brokercore/brokercore/internal/fsx/fsxtest"
)

func indexFileExists(t *testing.T, dir, topic string, id int) bool {
	t.Helper()
	_, err := os.Stat(filepath.Join(dir, "index", encodeQueueName(topic, id)))
	if errors.Is(err, os.ErrNotExist) {
		return false
	}
	require.NoError(t, err)
	return true
}

// relN is how many messages each queue of the release tests holds: enough
// for a checkpoint to write them to the queue's index file.
const relN = 150

// checkReleased checks that topic "t" (queues 0 and 1, relN messages each)
// reads nothing and "u" is whole.
func checkReleased(t *testing.T, s *Store, dir string) {
	t.Helper()
	for q := range 2 {
		assert.Equal(t, int64(relN), s.MinOffset("t", q), "queue %d", q)
		assert.Equal(t, int64(relN), s.MaxOffset("t", q), "queue %d: offsets are not reused", q)
		got, err := s.Read("t", q, relN, 32)
		require.NoError(t, err)
		assert.Empty(t, got)
		_, err = s.Read("t", q, 0, 32)
		require.ErrorIs(t, err, ErrOffsetTooSmall)
		assert.False(t, indexFileExists(t, dir, "t", q), "queue %d's index file is removed", q)
	}
	ms, err := s.LookupKey("t", "k", time.Time{}, time.Time{}, 64)
	require.NoError(t, err)
	assert.Empty(t, ms)
	got, err := s.Read("u", 0, 0, 1000)
	require.NoError(t, err)
	assert.Len(t, got, relN, "another topic is untouched")
	ms, err = s.LookupKey("u", "k", time.Time{}, time.Time{}, 1000)
	require.NoError(t, err)
	assert.Len(t, ms, relN)
}

func TestDeleteTopicReleasesItsQueuesDurably(t *testing.T) {
	dir := t.TempDir()
	o := Options{SegmentSize: 1024}
	s := openT(t, dir, o)
	for i := range relN {
		require.NoError(t, s.Append(keyed("t", 0, fmt.Sprint("a", i), "k"), keyed("t", 1, fmt.Sprint("b", i), "k"), keyed("u", 0, fmt.Sprint("u", i), "k")))
	}
	require.NoError(t, s.checkpoint())
	require.True(t, indexFileExists(t, dir, "t", 0), "written by the checkpoint")
	require.Equal(t, []string{"t", "u"}, s.Topics())
	require.NoError(t, s.DeleteTopic("t"))
	checkReleased(t, s, dir)
	assert.Equal(t, []string{"u"}, s.Topics(), "a released topic is not listed")
	assert.Empty(t, s.Queues("t"))
	require.NoError(t, s.DeleteTopic("t"), "twice is fine")
	require.NoError(t, s.DeleteTopic("never"), "an unknown topic is no error")
	require.ErrorIs(t, s.DeleteTopic(""), ErrInvalid)
	require.NoError(t, s.Close())

	s = openT(t, dir, o)
	checkReleased(t, s, dir)
	require.NoError(t, s.Close())

	// Every derived file lost: the log brings the records back into the
	// index, the release hides them again.
	for _, d := range []string{"index", keyDir} {
		require.NoError(t, os.RemoveAll(filepath.Join(dir, d)))
	}
	require.NoError(t, os.Remove(filepath.Join(dir, ckptFile)))
	s = openT(t, dir, o)
	checkReleased(t, s, dir)

	// Written again, the topic goes on above its old offsets.
	assert.Equal(t, []string{"u"}, s.Topics(), "after a rebuild too")
	m := keyed("t", 0, "again", "k")
	require.NoError(t, s.Append(m))
	assert.Equal(t, int64(relN), m.QueueOffset)
	assert.Equal(t, []string{"t", "u"}, s.Topics(), "written again, it is listed")
	assert.Equal(t, []int{0}, s.Queues("t"))
	got, err := s.Read("t", 0, relN, 32)
	require.NoError(t, err)
	assert.Equal(t, []string{"again"}, bodies(got))
	ms, err := s.LookupKey("t", "k", time.Time{}, time.Time{}, 64)
	require.NoError(t, err)
	assert.Equal(t, []string{"again"}, bodies(ms))
	require.NoError(t, s.Close())
	require.NoError(t, os.RemoveAll(filepath.Join(dir, "index")))
	s = openT(t, dir, o)
	defer s.Close()
	got, err = s.Read("t", 0, relN, 32)
	require.NoError(t, err)
	assert.Equal(t, []string{"again"}, bodies(got), "after a rebuild too")
	assert.Equal(t, int64(relN), s.MinOffset("t", 0))
}

func TestDeleteTopicRefusesADamagedReleasedFile(t *testing.T) {
	dir := t.TempDir()
	s := openT(t, dir, Options{})
	require.NoError(t, s.Append(msg("t", 0, "a")))
	require.NoError(t, s.DeleteTopic("t"))
	require.NoError(t, s.Close())
	p := filepath.Join(dir, releasedFile)
	b, err := os.ReadFile(p)
	require.NoError(t, err)
	b[len(b)-1] ^= 1
	require.NoError(t, os.WriteFile(p, b, 0o640))
	_, err = Open(dir, Options{})
	require.ErrorIs(t, err, ErrCorrupt, "not derived: never guessed")
}

// TestDeleteTopicCrashAtEveryStepLeavesTheOldOrTheNewState fails, in turn,
// every open, write, fsync, rename and remove a DeleteTopic makes: the call
// fails (and the store with it) and a reopen on a healthy disk finds the
// topic either whole or released, never in between; the other topic is
// whole either way.
func TestDeleteTopicCrashAtEveryStepLeavesTheOldOrTheNewState(t *testing.T) {
	setup := func(dir string) {
		s := openT(t, dir, Options{SegmentSize: 1024})
		for i := range relN {
			require.NoError(t, s.Append(keyed("t", 0, fmt.Sprint("a", i), "k"), keyed("t", 1, fmt.Sprint("b", i), "k"), keyed("u", 0, fmt.Sprint("u", i), "k")))
		}
		require.NoError(t, s.Close())
	}
	count := &fsxtest.Faulty{}
	dir := t.TempDir()
	setup(dir)
	s := openT(t, dir, Options{SegmentSize: 1024, fs: count})
	before := [5]int{}
	ops := []fsxtest.Op{fsxtest.OpOpen, fsxtest.OpWrite, fsxtest.OpSync, fsxtest.OpRename, fsxtest.OpRemove}
	for i, op := range ops {
		before[i] = count.Calls(op)
	}
	require.NoError(t, s.DeleteTopic("t"))
	require.NoError(t, s.Close())
	released, whole := 0, 0
	for i, op := range ops {
		calls := count.Calls(op) - before[i]
		for n := 1; n <= calls; n++ {
			dir := t.TempDir()
			setup(dir)
			f := &fsxtest.Faulty{}
			s := openT(t, dir, Options{SegmentSize: 1024, fs: f})
			f.Fail(op, n, fsxtest.ENOSPC)
			err := s.DeleteTopic("t")
			_ = s.Close()
			f.Heal()
			s = openT(t, dir, Options{SegmentSize: 1024})
			if s.MinOffset("t", 0) == 0 {
				require.Error(t, err, "op %d call %d", op, n)
				got, rerr := s.Read("t", 0, 0, 1000)
				require.NoError(t, rerr)
				require.Len(t, got, relN, "whole")
				assert.Equal(t, int64(0), s.MinOffset("t", 1), "both queues whole")
				whole++
			} else {
				checkReleased(t, s, dir)
				released++
			}
			require.NoError(t, s.Close())
		}
	}
	t.Logf("%d scenarios: %d whole, %d released", released+whole, whole, released)
	require.Positive(t, whole)
	require.Positive(t, released)
}

func FuzzDecodeReleased(f *testing.F) {
	f.Add(encodeReleased(map[string]int64{"t": 4, "u": 9}))
	f.Add(encodeReleased(nil))
	f.Fuzz(func(t *testing.T, b []byte) {
		m, err := decodeReleased(b)
		if err != nil {
			require.ErrorIs(t, err, ErrCorrupt)
			return
		}
		again, err := decodeReleased(encodeReleased(m))
		require.NoError(t, err)
		require.Equal(t, m, again)
	})
}
