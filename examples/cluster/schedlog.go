package main

import (
	"encoding/binary"
	"errors"
	"fmt"
	"os"
	"sort"
	"sync"

	"github.com/brokercore/brokercore/internal/crc"
	"github.com/brokercore/brokercore/internal/fsx"
	"github.com/brokercore/brokercore/schedule"
	"github.com/brokercore/brokercore/store"
)

// schedLog is the scheduler's Log on the leader: reads go to the local
// replica, every delivery is one raft entry carrying the delivered
// messages and the scheduler's progress together (kindDeliver), applied
// atomically on every node. A deposed leader cannot commit, so a delivery
// task that outlives its leadership (the field report's zombie) delivers
// nothing, and the next leader continues from the replicated progress.
//
// It implements schedule.ProgressLog (AppendWithProgress, LoadProgress).
// A scheduler that does not use that capability calls Append; schedLog
// then derives the level's progress itself from which messages of its last
// Read of the level's queue are being delivered, and prepare hands the
// replicated progress to the next leader's scheduler through its progress
// file.
type schedLog struct {
	n *Node

	// appendMu serializes deliveries: each one carries the progress it
	// starts from (committed) and the FSM applies it only on top of
	// exactly that, so a delivery whose outcome this scheduler did not
	// learn (a timeout, a lost leadership) can never be applied twice.
	appendMu  sync.Mutex
	committed []byte        // the replicated progress as this term last saw it
	next      map[int]int64 // committed, decoded (derived-progress path)

	mu    sync.Mutex
	reads map[*store.Message]readPos // messages of the last Read per level
	byQ   map[int][]*store.Message
}

type readPos struct {
	queue  int
	offset int64
}

func newSchedLog(n *Node) *schedLog {
	return &schedLog{n: n, reads: map[*store.Message]readPos{}, byQ: map[int][]*store.Message{}, next: map[int]int64{}}
}

// Read implements schedule.Log.
func (l *schedLog) Read(topic string, queueID int, offset int64, max int) ([]*store.Message, error) {
	msgs, err := l.n.st.Read(topic, queueID, offset, max)
	if err != nil || topic != schedule.Topic {
		return msgs, err
	}
	l.mu.Lock()
	for _, m := range l.byQ[queueID] {
		delete(l.reads, m)
	}
	l.byQ[queueID] = msgs
	for _, m := range msgs {
		l.reads[m] = readPos{queueID, m.QueueOffset}
	}
	l.mu.Unlock()
	return msgs, nil
}

// MinOffset implements schedule.Log.
func (l *schedLog) MinOffset(topic string, queueID int) int64 {
	return l.n.st.MinOffset(topic, queueID)
}

// MaxOffset implements schedule.Log.
func (l *schedLog) MaxOffset(topic string, queueID int) int64 {
	return l.n.st.MaxOffset(topic, queueID)
}

// Append implements schedule.Log for a scheduler without ProgressLog: the
// progress is the replicated one advanced past the delivered messages.
func (l *schedLog) Append(msgs ...*store.Message) error {
	l.appendMu.Lock()
	defer l.appendMu.Unlock()
	next := make(map[int]int64, len(l.next))
	for k, v := range l.next {
		next[k] = v
	}
	l.mu.Lock()
	for _, m := range msgs {
		if p, ok := l.reads[m]; ok && p.offset+1 > next[p.queue+1] {
			next[p.queue+1] = p.offset + 1
		}
	}
	l.mu.Unlock()
	if err := l.deliver(encodeLevels(next), msgs); err != nil {
		return err
	}
	l.next = next
	return nil
}

// AppendWithProgress implements schedule.ProgressLog.
func (l *schedLog) AppendWithProgress(progress []byte, msgs ...*store.Message) error {
	l.appendMu.Lock()
	defer l.appendMu.Unlock()
	return l.deliver(progress, msgs)
}

// deliver proposes one delivery entry; the caller holds appendMu.
func (l *schedLog) deliver(progress []byte, msgs []*store.Message) error {
	if h := l.n.cfg.beforePropose; h != nil {
		h()
	}
	if len(msgs) == 0 && progress == nil {
		return fmt.Errorf("deliver: nothing: %w", ErrInvalid)
	}
	e := &entry{Kind: kindDeliver, Msgs: msgs, Progress: progress, Prev: l.committed}
	if len(msgs) == 0 {
		e.Kind = kindProgress
	}
	_, err := l.n.apply(e)
	if err != nil {
		if errors.Is(err, ErrStaleProgress) {
			// Another delivery got there first: this scheduler's view is
			// behind. Rebuild the term from the replicated state.
			l.n.log.Warn("cluster: scheduler delivery refused as stale; restarting the scheduler", "err", err)
			l.n.requestRebuild()
		}
		return err
	}
	l.committed = progress
	return nil
}

// LoadProgress implements schedule.ProgressLog.
func (l *schedLog) LoadProgress() ([]byte, error) {
	l.appendMu.Lock()
	defer l.appendMu.Unlock()
	if len(l.committed) == 0 {
		return nil, nil
	}
	return append([]byte(nil), l.committed...), nil
}

// prepare loads the replicated progress at the start of a term and (for a
// scheduler without ProgressLog) writes the level progress to the
// scheduler's progress file before New reads it.
func (l *schedLog) prepare(path string) error {
	p := l.n.fsm.loadProgress()
	l.appendMu.Lock()
	defer l.appendMu.Unlock()
	l.committed = p
	if len(p) == 0 {
		_ = os.Remove(path)
		return nil
	}
	levels, err := decodeLevels(p)
	if err != nil {
		return nil // a scheduler with ProgressLog owns the format
	}
	l.next = levels
	return fsx.WriteFile(fsx.OS, path, p, 0o644)
}

// encodeLevels writes level -> next offset in the scheduler's progress file
// format ("BCSP", version 1, uvarint count, (level, next) pairs, CRC-32C).
func encodeLevels(p map[int]int64) []byte {
	levels := make([]int, 0, len(p))
	for l := range p {
		levels = append(levels, l)
	}
	sort.Ints(levels)
	b := append([]byte("BCSP"), 1)
	b = binary.AppendUvarint(b, uint64(len(levels)))
	for _, l := range levels {
		b = binary.AppendUvarint(b, uint64(l))
		b = binary.AppendUvarint(b, uint64(p[l]))
	}
	return binary.LittleEndian.AppendUint32(b, crc.Checksum(b))
}

var errBadProgress = errors.New("bad progress")

func decodeLevels(b []byte) (map[int]int64, error) {
	if len(b) < 10 || string(b[:4]) != "BCSP" || b[4] != 1 {
		return nil, errBadProgress
	}
	body := b[:len(b)-4]
	if crc.Checksum(body) != binary.LittleEndian.Uint32(b[len(b)-4:]) {
		return nil, errBadProgress
	}
	d := decoder{b: body[5:]}
	n := d.count()
	p := make(map[int]int64, n)
	for i := 0; i < n && d.err == nil; i++ {
		l := d.uvarint()
		p[int(l)] = int64(d.uvarint())
	}
	if d.err != nil || len(d.b) != 0 {
		return nil, errBadProgress
	}
	return p, nil
}
