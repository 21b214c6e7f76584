package store

import (
	"bytes"
	"encoding/binary"
	"errors"
	"fmt"
)

// The store keeps its own record positions (a read is one pread, not wal's
// whole-segment load) and verifies them against what tidwall/wal wrote
// before any index entry that points at them is used: at every group commit
// (before the fsync that makes records visible), at every segment roll, at
// every checkpoint, and, under SyncNone and SyncInterval, before a read
// uses a record not verified yet. On the first divergence the store fails
// (ErrFailed): a wal whose roll or framing differs from what the store
// placed can never point a reader at the wrong bytes.

// frameCheck is the last record the store wrote to the tail segment: where
// its data starts, its size, and its first bytes (version, flags, CRC).
type frameCheck struct {
	pos  int64
	size uint32
	head [recordHeader]byte
}

// errVerify tells a read to verify the tail first; never returned to a
// caller.
var errVerify = errors.New("store: records not verified yet")

// verifyTail checks that the tail segment is exactly as long as the store
// placed its records and that the last one is framed where the store says.
// Callers hold mu exclusively.
func (s *Store) verifyTail() error {
	if s.verified >= s.walWritten {
		return nil
	}
	tail := s.segs[len(s.segs)-1]
	if err := s.verifySize(tail, s.walTail); err != nil {
		return s.fail(err)
	}
	if lf := s.walFrame; lf.size > 0 {
		hdr := int64(uvarintLen(uint64(lf.size)))
		buf := make([]byte, hdr+recordHeader)
		if _, err := tail.f.ReadAt(buf, lf.pos-hdr); err != nil {
			return s.fail(fmt.Errorf("verify wal segment %s: %w", tail.path, err))
		}
		n, k := binary.Uvarint(buf)
		if k != int(hdr) || n != uint64(lf.size) || !bytes.Equal(buf[hdr:], lf.head[:]) {
			return s.fail(fmt.Errorf("wal diverged from the store: segment %s position %d does not hold the record the store placed there", tail.path, lf.pos))
		}
	}
	s.verified = s.walWritten
	return nil
}

// verifySize checks a segment file's length against the store's placement.
func (s *Store) verifySize(sg *segment, want int64) error {
	fi, err := sg.f.Stat()
	if err != nil {
		return fmt.Errorf("verify wal segment %s: %w", sg.path, err)
	}
	if fi.Size() != want {
		return fmt.Errorf("wal diverged from the store: segment %s is %d bytes, the store placed records up to %d", sg.path, fi.Size(), want)
	}
	return nil
}
