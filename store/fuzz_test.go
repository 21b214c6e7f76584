package store

import (
	"bytes"
	"errors"
	"os"
	"path/filepath"
	"sync"
	"testing"
	"time"

	"github.com/stretchr/testify/require"
)

func sampleRecord(batchEnd bool) []byte {
	m := &Message{
		Topic: "topic", QueueID: 3, Tags: "tag", Keys: []string{"k1", "k2"},
		Body:       []byte("hello"),
		Properties: map[string]string{"a": "1", "b": "2"},
		BornAt:     time.Unix(1700000000, 5), ReconsumeTimes: 2,
		QueueOffset: 7, LogOffset: 9, StoredAt: time.Unix(1700000001, 6),
	}
	return appendRecord(nil, m, batchEnd)
}

// FuzzDecodeRecord: decoding never panics, and whatever decodes re-encodes
// to the same bytes (so a checksum-valid record has exactly one meaning).
func FuzzDecodeRecord(f *testing.F) {
	f.Add(sampleRecord(true))
	f.Add(sampleRecord(false))
	f.Add(appendRecord(nil, &Message{Topic: "t"}, true))
	f.Add([]byte{})
	f.Add([]byte{recordVersion, 0, 0, 0, 0, 0})
	f.Fuzz(func(t *testing.T, data []byte) {
		m, end, err := decodeRecord(data)
		if err != nil {
			require.ErrorIs(t, err, ErrCorrupt)
			return
		}
		again := appendRecord(nil, m, end)
		require.Equal(t, data, again)
	})
}

// FuzzDecodeCheckpoint: a checkpoint file of any content decodes or is
// ErrCorrupt, never a panic; what decodes re-encodes identically.
func FuzzDecodeCheckpoint(f *testing.F) {
	ck := &checkpoint{next: 10, segment: 1, pos: 300, lastStored: time.Unix(5, 6),
		queues: []ckptQueue{{topic: "t", id: 1, next: 4, min: 2, lastLog: 9}, {topic: "u", id: 0, next: 0, min: 0, lastLog: -1}}}
	f.Add(ck.encode())
	f.Add((&checkpoint{}).encode())
	f.Add([]byte("BCCK"))
	f.Fuzz(func(t *testing.T, data []byte) {
		c, err := decodeCheckpoint(data)
		if err != nil {
			require.ErrorIs(t, err, ErrCorrupt)
			return
		}
		require.Equal(t, data, c.encode())
	})
}

// FuzzDecodeEntry: index entries decode or are ErrCorrupt.
func FuzzDecodeEntry(f *testing.F) {
	var b [entrySize]byte
	entry{logOffset: 5, storedAt: 7, pos: 100, size: 30}.put(b[:])
	f.Add(b[:])
	f.Add(make([]byte, entrySize))
	f.Fuzz(func(t *testing.T, data []byte) {
		e, err := decodeEntry(data)
		if err != nil {
			require.ErrorIs(t, err, ErrCorrupt)
			return
		}
		var again [entrySize]byte
		e.put(again[:])
		require.Equal(t, data, again[:])
	})
}

// openFixture is a small clean store: its single segment, its checkpoint, and
// the end position of every record with its batch-end flag.
type openFixture struct {
	segment, ckpt []byte
	ends          []int64 // end of each record in segment
	batchEnd      []bool
	bodies        []string
}

var fixtureOnce = sync.OnceValues(func() (*openFixture, error) {
	dir, err := os.MkdirTemp("", "store-fuzz-")
	if err != nil {
		return nil, err
	}
	defer os.RemoveAll(dir)
	s, err := Open(dir, Options{})
	if err != nil {
		return nil, err
	}
	fx := &openFixture{}
	for i, size := range []int{1, 3, 1, 2} {
		batch := make([]*Message, size)
		for j := range batch {
			body := string(rune('a'+i)) + string(rune('0'+j))
			batch[j] = msg("t", j%2, body)
			fx.bodies = append(fx.bodies, body)
			fx.batchEnd = append(fx.batchEnd, j == size-1)
		}
		if err := s.Append(batch...); err != nil {
			return nil, err
		}
	}
	if err := s.Close(); err != nil {
		return nil, err
	}
	if fx.segment, err = os.ReadFile(filepath.Join(dir, "log", segmentName(1))); err != nil {
		return nil, err
	}
	if fx.ckpt, err = os.ReadFile(filepath.Join(dir, ckptFile)); err != nil {
		return nil, err
	}
	frames, _ := parseFrames(fx.segment, 0)
	for _, fr := range frames {
		fx.ends = append(fx.ends, fr.pos+int64(fr.size))
	}
	return fx, nil
})

// FuzzOpenOverCorruptedTail writes the fixture's log cut at any point and
// followed by any bytes, and opens it: Open never panics; it either opens
// with every whole batch before the damage intact (and accepts appends), or
// reports ErrCorrupt (only when a valid record follows the damage).
func FuzzOpenOverCorruptedTail(f *testing.F) {
	f.Add(uint16(0xffff), []byte{})
	f.Add(uint16(0xffff), []byte{0xff, 0xff, 0xff, 0x7f})
	f.Add(uint16(40), []byte{})
	f.Add(uint16(75), []byte{3, 1, 2, 3})
	f.Add(uint16(0), []byte("garbage"))
	f.Fuzz(func(t *testing.T, cut uint16, tail []byte) {
		fx, err := fixtureOnce()
		require.NoError(t, err)
		keep := min(int(cut), len(fx.segment))
		seg := append(append([]byte(nil), fx.segment[:keep]...), tail...)
		dir := t.TempDir()
		require.NoError(t, os.MkdirAll(filepath.Join(dir, "log"), 0o750))
		require.NoError(t, os.WriteFile(filepath.Join(dir, "log", segmentName(1)), seg, 0o640))
		require.NoError(t, os.WriteFile(filepath.Join(dir, ckptFile), fx.ckpt, 0o640))

		s, err := Open(dir, Options{})
		if err != nil {
			require.ErrorIs(t, err, ErrCorrupt)
			return
		}
		defer s.Close()
		whole := 0 // records of whole batches entirely before the damage
		for i, end := range fx.ends {
			if end > int64(keep) {
				break
			}
			if fx.batchEnd[i] {
				whole = i + 1
			}
		}
		if keep == len(fx.segment) && len(tail) == 0 {
			require.Equal(t, int64(len(fx.ends)), s.Stats().LogNext)
		}
		require.GreaterOrEqual(t, s.Stats().LogNext, int64(whole))
		for i := 0; i < whole; i++ {
			m, err := s.ReadAt(int64(i))
			require.NoError(t, err)
			require.Equal(t, fx.bodies[i], string(m.Body))
		}
		next := s.Stats().LogNext
		m := msg("t", 0, "after")
		require.NoError(t, s.Append(m))
		require.Equal(t, next, m.LogOffset)
		got, err := s.ReadAt(next)
		require.NoError(t, err)
		require.True(t, bytes.Equal([]byte("after"), got.Body))
		require.False(t, errors.Is(err, ErrCorrupt))
	})
}
