package store

import (
	"bytes"
	"encoding/binary"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/brokercore/brokercore/internal/testkit"
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

// TestDecoderVarintsAgreeWithEncodingBinary: the decoder's one-byte fast
// path reads every value as encoding/binary writes it, one byte or more,
// and leaves exactly the rest.
func TestDecoderVarintsAgreeWithEncodingBinary(t *testing.T) {
	for _, v := range []int64{0, 1, -1, 63, -64, 64, -65, 127, 128, -1 << 40, 1<<62 + 5} {
		d := decoder{buf: append(binary.AppendVarint(nil, v), 0xAA)}
		require.Equal(t, v, d.varint(), "varint %d", v)
		require.NoError(t, d.err)
		require.Equal(t, []byte{0xAA}, d.buf)
	}
	for _, v := range []uint64{0, 1, 127, 128, 255, 300, 1 << 63} {
		d := decoder{buf: append(binary.AppendUvarint(nil, v), 0xAA)}
		require.Equal(t, v, d.uvarint(), "uvarint %d", v)
		require.NoError(t, d.err)
		require.Equal(t, []byte{0xAA}, d.buf)
	}
	d := decoder{buf: []byte{0x80}} // a continuation byte and nothing after it
	d.uvarint()
	require.Error(t, d.err)
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

// multiFixture is a clean store over several segments, kept as a template
// directory, with the body of every log offset.
type multiFixture struct {
	dir    string
	bodies []string
	files  []string // relative paths: segments, then derived files
	nsegs  int
}

var multiOnce = sync.OnceValues(func() (*multiFixture, error) {
	dir, err := os.MkdirTemp("", "store-fuzz-multi-")
	if err != nil {
		return nil, err
	}
	s, err := Open(dir, Options{SegmentSize: 512})
	if err != nil {
		return nil, err
	}
	fx := &multiFixture{dir: dir}
	for i := 0; i < 30; i++ {
		body := fmt.Sprintf("b%02d-%s", i, strings.Repeat("x", i))
		var batch []*Message
		batch = append(batch, msg("t", i%2, body))
		fx.bodies = append(fx.bodies, body)
		if i%5 == 0 {
			body2 := body + "+"
			batch = append(batch, msg("t", 1-i%2, body2))
			fx.bodies = append(fx.bodies, body2)
		}
		if err := s.Append(batch...); err != nil {
			return nil, err
		}
	}
	if err := s.Close(); err != nil {
		return nil, err
	}
	segs, err := listSegments(filepath.Join(dir, "log"))
	if err != nil {
		return nil, err
	}
	for _, sg := range segs {
		fx.files = append(fx.files, filepath.Join("log", filepath.Base(sg.path)))
	}
	fx.nsegs = len(segs)
	fx.files = append(fx.files, ckptFile)
	ents, err := os.ReadDir(filepath.Join(dir, "index"))
	if err != nil {
		return nil, err
	}
	for _, e := range ents {
		fx.files = append(fx.files, filepath.Join("index", e.Name()))
	}
	return fx, nil
})

// copyFixture copies the template and damages one of its files: xor at
// off, then cut to keep bytes (keep < 0: no cut).
func copyFixture(t *testing.T, fx *multiFixture, file int, off uint16, xor byte, keep int32) string {
	dir := t.TempDir()
	require.NoError(t, testkit.CopyCrashImage(fx.dir, dir))
	path := filepath.Join(dir, fx.files[file])
	b, err := os.ReadFile(path)
	require.NoError(t, err)
	if len(b) > 0 {
		b[int(off)%len(b)] ^= xor
	}
	if keep >= 0 && int(keep) < len(b) {
		b = b[:keep]
	}
	require.NoError(t, os.WriteFile(path, b, 0o640))
	return dir
}

// readsTrueOrFails checks that every log offset reads back its original
// body or an error: never different data.
func readsTrueOrFails(t *testing.T, s *Store, fx *multiFixture) {
	next := s.Stats().LogNext
	for i := s.Stats().LogMin; i < next; i++ {
		m, err := s.ReadAt(i)
		if err != nil {
			require.ErrorIs(t, err, ErrCorrupt)
			continue
		}
		require.Equal(t, fx.bodies[i], string(m.Body), "log offset %d", i)
	}
}

// FuzzOpenOverCorruptedSegment damages any byte of any segment (and may cut
// it): Open never panics and either opens (a torn tail, or damage in an
// older segment that reads find) or refuses with ErrCorrupt, after which
// Repair makes it open; reads never return different data.
func FuzzOpenOverCorruptedSegment(f *testing.F) {
	f.Add(uint8(0), uint16(30), byte(1), int32(-1))
	f.Add(uint8(1), uint16(0), byte(0x80), int32(-1))
	f.Add(uint8(2), uint16(7), byte(0), int32(100))
	f.Add(uint8(9), uint16(300), byte(0xff), int32(0))
	f.Fuzz(func(t *testing.T, file uint8, off uint16, xor byte, keep int32) {
		fx, err := multiOnce()
		require.NoError(t, err)
		dir := copyFixture(t, fx, int(file)%fx.nsegs, off, xor, keep)
		s, err := Open(dir, Options{})
		if err != nil {
			require.ErrorIs(t, err, ErrCorrupt)
			_, err := Repair(dir, RepairOptions{})
			require.NoError(t, err)
			s, err = Open(dir, Options{})
			require.NoError(t, err, "Repair made it open")
		}
		defer s.Close()
		readsTrueOrFails(t, s, fx)
		require.NoError(t, s.Append(msg("t", 0, "after")))
	})
}

// FuzzOpenOverCorruptedDerivedFiles damages any byte of the checkpoint or
// an index file (and may cut it): Open rebuilds or repairs, and every
// message reads back exactly.
func FuzzOpenOverCorruptedDerivedFiles(f *testing.F) {
	f.Add(uint8(0), uint16(3), byte(1), int32(-1))
	f.Add(uint8(1), uint16(40), byte(0xff), int32(-1))
	f.Add(uint8(2), uint16(64), byte(0), int32(33))
	f.Add(uint8(3), uint16(0), byte(0), int32(0))
	f.Fuzz(func(t *testing.T, file uint8, off uint16, xor byte, keep int32) {
		fx, err := multiOnce()
		require.NoError(t, err)
		derived := len(fx.files) - fx.nsegs
		dir := copyFixture(t, fx, fx.nsegs+int(file)%derived, off, xor, keep)
		s, err := Open(dir, Options{})
		require.NoError(t, err)
		defer s.Close()
		next := s.Stats().LogNext
		require.Equal(t, int64(len(fx.bodies)), next)
		for i := int64(0); i < next; i++ {
			m, err := s.ReadAt(i)
			require.NoError(t, err)
			require.Equal(t, fx.bodies[i], string(m.Body))
		}
		for q := 0; q < 2; q++ {
			got, err := s.Read("t", q, 0, MaxReadBatch)
			require.NoError(t, err)
			require.Equal(t, s.MaxOffset("t", q), int64(len(got)))
			for i, m := range got {
				require.Equal(t, int64(i), m.QueueOffset)
			}
		}
	})
}
