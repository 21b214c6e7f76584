package store

import (
	"encoding/binary"
	"fmt"
	"os"
	"path/filepath"
)

// The store appends to its log segments itself, in tidwall/wal's binary
// format (each record framed by a uvarint of its length, segments named by
// the wal index of their first record), and starts each segment exactly
// where write placed a roll. wal opens and checks the log at Open; after
// that it is closed. wal's own write path keeps the whole tail segment in
// memory and grows that buffer by copying it: measured on a 2-core VM, a
// WriteBatch of 64 records of 1 KiB took 184–217 µs where one write(2) of
// the same bytes took 28–30 µs, and the growth was 24% of the CPU of 64
// SyncGroup appenders, on the group commit's serial path. The store never
// reads through wal (it preads its segments at the positions its index
// keeps), so nothing needs that buffer.

// frames is a run of framed records waiting for the log, with the segment
// rolls inside it: rolls[i].at is the position in buf where the segment
// starting at wal index rolls[i].start begins.
type frames struct {
	buf   []byte
	rolls []roll
}

func (fr *frames) reset() {
	fr.buf, fr.rolls = fr.buf[:0], fr.rolls[:0]
}

// appendFrame frames rec as wal's binary format does.
func appendFrame(dst, rec []byte) []byte {
	dst = binary.AppendUvarint(dst, uint64(len(rec)))
	return append(dst, rec...)
}

// logWriter appends to the tail segment; it is used under ioMu (SyncGroup)
// or mu (the other policies), never by two goroutines at once.
type logWriter struct {
	dir string
	f   *os.File // the tail segment, opened for appending
}

// openLogWriter opens the tail segment for appending.
func openLogWriter(dir string, tail *segment) (*logWriter, error) {
	f, err := os.OpenFile(tail.path, os.O_WRONLY|os.O_APPEND, 0o640)
	if err != nil {
		return nil, fmt.Errorf("open log tail for writing: %w", err)
	}
	return &logWriter{dir: dir, f: f}, nil
}

// write appends fr to the log: one write per segment it touches. At each
// roll the finished segment is fsynced and closed (so only the tail ever
// needs an fsync) and the next one is created; the caller fsyncs the
// directory before the new segment is relied on.
func (w *logWriter) write(fr *frames) error {
	at := 0
	for _, r := range fr.rolls {
		if err := w.append(fr.buf[at:r.at]); err != nil {
			return err
		}
		if err := w.roll(r.start); err != nil {
			return err
		}
		at = r.at
	}
	return w.append(fr.buf[at:])
}

func (w *logWriter) append(b []byte) error {
	if len(b) == 0 {
		return nil
	}
	if w.f == nil {
		return fmt.Errorf("log writer: no tail segment open")
	}
	_, err := w.f.Write(b)
	return err
}

// roll finishes the tail segment and creates the one starting at wal index
// start.
func (w *logWriter) roll(start uint64) error {
	if w.f == nil {
		return fmt.Errorf("log writer: no tail segment open")
	}
	if err := w.f.Sync(); err != nil {
		return fmt.Errorf("fsync finished segment %s: %w", w.f.Name(), err)
	}
	err := w.f.Close()
	w.f = nil
	if err != nil {
		return fmt.Errorf("close finished segment: %w", err)
	}
	f, err := os.OpenFile(filepath.Join(w.dir, segmentName(start)), os.O_CREATE|os.O_WRONLY|os.O_TRUNC|os.O_APPEND, 0o640)
	if err != nil {
		return fmt.Errorf("create segment: %w", err)
	}
	w.f = f
	return nil
}

// close fsyncs and closes the tail segment.
func (w *logWriter) close() error {
	if w == nil || w.f == nil {
		return nil
	}
	err := w.f.Sync()
	if cerr := w.f.Close(); err == nil {
		err = cerr
	}
	w.f = nil
	return err
}
