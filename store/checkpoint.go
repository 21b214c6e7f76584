package store

import (
	"encoding/binary"
	"errors"
	"fmt"
	"hash/crc32"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"time"
)

// A checkpoint says: every record below Next is in the index files, and they
// are durable; the record Next starts at (Segment, Pos) or in a later
// segment. It also carries every queue's offsets, which is how a queue that
// retention emptied keeps its offsets across a reopen. Open replays only the
// log past the checkpoint.
//
// File layout: magic "BCCK", version byte, then uvarint Next, Segment, Pos,
// varint LastStored seconds, uvarint nanoseconds, uvarint #queues and per
// queue: string topic, uvarint id, next, min, varint last log offset; last a CRC-32C of everything
// before it. It is replaced atomically (temp file, fsync, rename, fsync dir).
type checkpoint struct {
	next       int64
	segment    uint64
	pos        int64
	lastStored time.Time
	queues     []ckptQueue
}

type ckptQueue struct {
	topic     string
	id        int
	next, min int64
	lastLog   int64 // log offset of the queue's newest record, -1 if none
}

const (
	ckptMagic   = "BCCK"
	ckptVersion = 1
	ckptFile    = "checkpoint"
)

func (c *checkpoint) encode() []byte {
	b := append([]byte(ckptMagic), ckptVersion)
	b = binary.AppendUvarint(b, uint64(c.next))
	b = binary.AppendUvarint(b, c.segment)
	b = binary.AppendUvarint(b, uint64(c.pos))
	b = appendTime(b, c.lastStored)
	b = binary.AppendUvarint(b, uint64(len(c.queues)))
	for _, q := range c.queues {
		b = appendString(b, q.topic)
		b = binary.AppendUvarint(b, uint64(q.id))
		b = binary.AppendUvarint(b, uint64(q.next))
		b = binary.AppendUvarint(b, uint64(q.min))
		b = binary.AppendVarint(b, q.lastLog)
	}
	return binary.LittleEndian.AppendUint32(b, crc32.Checksum(b, castagnoli))
}

// decodeCheckpoint never panics; anything malformed is ErrCorrupt.
func decodeCheckpoint(b []byte) (*checkpoint, error) {
	if len(b) < len(ckptMagic)+1+4 || string(b[:len(ckptMagic)]) != ckptMagic {
		return nil, fmt.Errorf("%w: checkpoint: bad magic", ErrCorrupt)
	}
	body, sum := b[:len(b)-4], binary.LittleEndian.Uint32(b[len(b)-4:])
	if crc32.Checksum(body, castagnoli) != sum {
		return nil, fmt.Errorf("%w: checkpoint: checksum mismatch", ErrCorrupt)
	}
	if body[len(ckptMagic)] != ckptVersion {
		return nil, fmt.Errorf("%w: checkpoint: unknown version %d", ErrCorrupt, body[len(ckptMagic)])
	}
	d := decoder{buf: body[len(ckptMagic)+1:]}
	c := &checkpoint{}
	c.next = d.offset()
	c.segment = d.uvarint()
	c.pos = d.offset()
	c.lastStored = d.time()
	n := d.count()
	for range n {
		var q ckptQueue
		q.topic = d.string()
		id := d.offset()
		if id > int64(maxQueueID) {
			d.fail("queue id out of range")
		}
		q.id = int(id)
		q.next = d.offset()
		q.min = d.offset()
		q.lastLog = d.varint()
		if q.lastLog < -1 {
			d.fail("bad last log offset")
		}
		if q.min > q.next {
			d.fail("queue min above next")
		}
		c.queues = append(c.queues, q)
	}
	if d.err == nil && len(d.buf) != 0 {
		d.fail("trailing bytes")
	}
	if d.err != nil {
		return nil, fmt.Errorf("%w: checkpoint: %v", ErrCorrupt, d.err)
	}
	return c, nil
}

// maxQueueID keeps queue ids representable on every platform.
const maxQueueID = 1<<31 - 1

func readCheckpoint(dir string) (*checkpoint, error) {
	b, err := os.ReadFile(filepath.Join(dir, ckptFile))
	if errors.Is(err, os.ErrNotExist) {
		return nil, nil
	}
	if err != nil {
		return nil, err
	}
	return decodeCheckpoint(b)
}

func writeCheckpoint(dir string, c *checkpoint) error {
	path := filepath.Join(dir, ckptFile)
	tmp := path + ".tmp"
	f, err := os.OpenFile(tmp, os.O_CREATE|os.O_WRONLY|os.O_TRUNC, 0o640)
	if err != nil {
		return err
	}
	_, err = f.Write(c.encode())
	if err == nil {
		err = f.Sync()
	}
	if cerr := f.Close(); err == nil {
		err = cerr
	}
	if err == nil {
		err = os.Rename(tmp, path)
	}
	if err == nil {
		err = syncDir(dir)
	}
	if err != nil {
		os.Remove(tmp)
		return fmt.Errorf("write checkpoint: %w", err)
	}
	return nil
}

// sortQueues orders checkpoint queues so the file is deterministic.
func sortQueues(qs []ckptQueue) {
	slices.SortFunc(qs, func(a, b ckptQueue) int {
		if c := strings.Compare(a.topic, b.topic); c != 0 {
			return c
		}
		return a.id - b.id
	})
}
