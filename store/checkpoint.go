package store

import (
	"encoding/binary"
	"fmt"
	"path/filepath"
	"slices"
	"strings"
	"time"

	"github.com/brokercore/brokercore/internal/crc"
	"github.com/brokercore/brokercore/internal/fsx"
)

// A checkpoint says what the index files hold and what is known about the
// log: with indexValid, every record below next is in the index files (the
// record next starts at (segment, pos)); log offsets below durable were
// fsynced when it was written; retention removed every wal index below
// retained (1: nothing); and every queue's offsets, which is how a queue
// that retention emptied keeps its offsets across a reopen. Open replays
// only the log past next, and only once the log proves the checkpoint (the
// record at (segment, pos) is log offset next, the index files are as long
// as it says): it is derived state and never trusted beyond that. Before
// index files are deleted for a rebuild, a checkpoint without indexValid
// is written, so a failed rebuild is never followed by an Open that trusts
// index files that are gone.
//
// File layout: magic "BCCK", version byte, flags byte (1: indexValid), then
// uvarint next, segment, pos, durable, retained, varint lastStored seconds,
// uvarint nanoseconds, uvarint #queues and per queue: string topic, uvarint
// id, next, min, varint last log offset; last a CRC-32C of everything before
// it. Version 3 adds, after lastStored, uvarint journal generation, journal
// size and log index flushed, and per queue a last uvarint flushed. It is replaced atomically (fsx.WriteFile).
type checkpoint struct {
	indexValid bool
	next       int64
	segment    uint64
	pos        int64
	durable    int64
	retained   uint64
	lastStored time.Time
	queues     []ckptQueue
	// Version 3: how far the index journal (journal.go) and the log-wide
	// index file were written; entries from there on are in the journal.
	journalGen  uint64
	journalSize int64
	logFlushed  int64
}

type ckptQueue struct {
	topic     string
	id        int
	next, min int64
	lastLog   int64 // log offset of the queue's newest record, -1 if none
	flushed   int64 // entries below it are in the queue's file (version 3)
}

const (
	ckptMagic   = "BCCK"
	ckptVersion = 3
	ckptFile    = "checkpoint"
	ckptValid   = 1 << 0
)

func (c *checkpoint) encode() []byte {
	b := make([]byte, 0, 64+32*len(c.queues))
	b = append(b, ckptMagic...)
	var flags byte
	if c.indexValid {
		flags |= ckptValid
	}
	b = append(b, ckptVersion, flags)
	b = binary.AppendUvarint(b, uint64(c.next))
	b = binary.AppendUvarint(b, c.segment)
	b = binary.AppendUvarint(b, uint64(c.pos))
	b = binary.AppendUvarint(b, uint64(c.durable))
	b = binary.AppendUvarint(b, c.retained)
	b = appendTime(b, c.lastStored)
	b = binary.AppendUvarint(b, c.journalGen)
	b = binary.AppendUvarint(b, uint64(c.journalSize))
	b = binary.AppendUvarint(b, uint64(c.logFlushed))
	b = binary.AppendUvarint(b, uint64(len(c.queues)))
	for _, q := range c.queues {
		b = appendString(b, q.topic)
		b = binary.AppendUvarint(b, uint64(q.id))
		b = binary.AppendUvarint(b, uint64(q.next))
		b = binary.AppendUvarint(b, uint64(q.min))
		b = binary.AppendVarint(b, q.lastLog)
		b = binary.AppendUvarint(b, uint64(q.flushed))
	}
	return binary.LittleEndian.AppendUint32(b, crc.Checksum(b))
}

// decodeCheckpoint never panics; anything malformed is ErrCorrupt.
func decodeCheckpoint(b []byte) (*checkpoint, error) {
	if len(b) < len(ckptMagic)+2+4 || string(b[:len(ckptMagic)]) != ckptMagic {
		return nil, fmt.Errorf("%w: checkpoint: bad magic", ErrCorrupt)
	}
	body, sum := b[:len(b)-4], binary.LittleEndian.Uint32(b[len(b)-4:])
	if crc.Checksum(body) != sum {
		return nil, fmt.Errorf("%w: checkpoint: checksum mismatch", ErrCorrupt)
	}
	version := body[len(ckptMagic)]
	if version != ckptVersion && version != 2 {
		return nil, fmt.Errorf("%w: checkpoint: unknown version %d", ErrCorrupt, body[len(ckptMagic)])
	}
	flags := body[len(ckptMagic)+1]
	if flags&^ckptValid != 0 {
		return nil, fmt.Errorf("%w: checkpoint: unknown flags %#x", ErrCorrupt, flags)
	}
	d := decoder{buf: body[len(ckptMagic)+2:]}
	c := &checkpoint{indexValid: flags&ckptValid != 0}
	c.next = d.offset()
	c.segment = d.uvarint()
	c.pos = d.offset()
	c.durable = d.offset()
	c.retained = d.uvarint()
	c.lastStored = d.time()
	c.logFlushed = c.next // version 2: every entry is in the files
	if version >= 3 {
		c.journalGen = d.uvarint()
		c.journalSize = d.offset()
		c.logFlushed = d.offset()
	}
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
		q.flushed = q.next
		if version >= 3 {
			q.flushed = d.offset()
		}
		if q.min > q.next {
			d.fail("queue min above next")
		}
		if q.flushed > q.next {
			d.fail("queue flushed above next")
		}
		c.queues = append(c.queues, q)
	}
	if c.logFlushed > c.next {
		d.fail("log index flushed above next")
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

func readCheckpoint(fsys fsx.FS, dir string) (*checkpoint, error) {
	b, err := fsx.ReadFile(fsys, filepath.Join(dir, ckptFile))
	if fsx.IsNotExist(err) {
		return nil, nil
	}
	if err != nil {
		return nil, err
	}
	return decodeCheckpoint(b)
}

func writeCheckpoint(fsys fsx.FS, dir string, c *checkpoint) error {
	if err := fsx.WriteFile(fsys, filepath.Join(dir, ckptFile), c.encode(), 0o640); err != nil {
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
