package replica

import (
	"bufio"
	"encoding/binary"
	"encoding/json"
	"fmt"
	"io"
	"log/slog"
	"time"

	"github.com/brokercore/brokercore/store"
	"github.com/hashicorp/raft"
)

// A snapshot is: magic "BCCS", version 1, a uvarint length and that many
// bytes of JSON (snapState), a uvarint message count, then each message as
// a uvarint length and appendMsg's encoding, in LogOffset order from the
// store's first message. raft's snapshot store checksums the whole file.
//
// It carries every message, not just the small state, because a node that
// receives it may have an empty store (a new member) or one that lags
// behind where raft compacted its log. A node that already holds a prefix
// skips it and appends the rest, so offsets stay identical. The cost is a
// snapshot the size of the store: this example keeps retention off (see
// README) and snapshots rarely (Config.SnapshotThreshold).

const (
	snapMagic   = "BCCS"
	snapVersion = 1
)

// maxSnapState bounds a snapshot's small state (JSON: the cluster, the
// scheduler's progress, every consumer offset, the members): what a
// restore reads, and so what a snapshot may hold (a variable for tests).
var maxSnapState = DefaultMaxSnapshotState

const (
	// DefaultMaxSnapshotState is maxSnapState: about two million consumer
	// offsets.
	DefaultMaxSnapshotState = 256 << 20
)

type snapState struct {
	Cluster  string            `json:"cluster"`
	Applied  int64             `json:"applied"` // messages in the snapshot's store
	Progress []byte            `json:"progress,omitempty"`
	Offsets  []snapOffset      `json:"offsets,omitempty"`
	Members  map[string]string `json:"members,omitempty"`
	// Released is every deleted topic's release point (fsm.released):
	// a restore releases the topic when its store reaches that log offset.
	Released map[string]int64 `json:"released,omitempty"`
}

type snapOffset struct {
	Group     string `json:"group"`
	Topic     string `json:"topic"`
	Queue     int    `json:"queue"`
	Offset    int64  `json:"offset"`
	Committed bool   `json:"committed"`
	Epoch     uint64 `json:"epoch"`
}

type snapshot struct {
	st    *store.Store
	state snapState
	log   *slog.Logger // nil = none
}

// Persist implements raft.FSMSnapshot. It runs beside Apply: the store is
// append-only, so the messages below state.Applied do not change meanwhile.
func (s *snapshot) Persist(sink raft.SnapshotSink) error {
	if err := s.write(sink); err != nil {
		_ = sink.Cancel()
		return err
	}
	return sink.Close()
}

func (s *snapshot) write(w io.Writer) error {
	// The snapshot lets raft drop the log entries below it, so what it
	// claims must be on disk (the store runs without fsync per append).
	if err := s.st.Sync(); err != nil {
		return fmt.Errorf("snapshot: sync store: %w", err)
	}
	head, err := json.Marshal(s.state)
	if err != nil {
		return fmt.Errorf("snapshot: %w", err)
	}
	if len(head) > maxSnapState {
		err := fmt.Errorf("snapshot: state of %d bytes (%d consumer offsets), at most %d: %w", len(head), len(s.state.Offsets), maxSnapState, ErrSnapshotTooLarge)
		if s.log != nil {
			s.log.Error("cluster: snapshot not taken; raft keeps its log", "err", err)
		}
		return err
	}
	bw := bufio.NewWriterSize(w, 256<<10)
	b := append([]byte(snapMagic), snapVersion)
	b = binary.AppendUvarint(b, uint64(len(head)))
	b = append(b, head...)
	from := s.st.Stats().LogMin
	if from > s.state.Applied {
		from = s.state.Applied
	}
	b = binary.AppendUvarint(b, uint64(s.state.Applied-from))
	if _, err := bw.Write(b); err != nil {
		return err
	}
	var buf []byte
	for off := from; off < s.state.Applied; off++ {
		m, err := s.st.ReadAt(off)
		if err != nil {
			return fmt.Errorf("snapshot: read log offset %d: %w", off, err)
		}
		buf = appendMsg(buf[:0], m)
		var n [binary.MaxVarintLen64]byte
		if _, err := bw.Write(n[:binary.PutUvarint(n[:], uint64(len(buf)))]); err != nil {
			return err
		}
		if _, err := bw.Write(buf); err != nil {
			return err
		}
	}
	return bw.Flush()
}

// Release implements raft.FSMSnapshot.
func (s *snapshot) Release() {}

// restoreSnapshot reads a snapshot into st: messages st already holds are
// skipped, the rest appended with their original StoredAt (setAt sets the
// store's clock). It returns the small state.
func restoreSnapshot(r io.Reader, st *store.Store, setAt func(time.Time)) (snapState, error) {
	var state snapState
	br := bufio.NewReaderSize(r, 256<<10)
	hdr := make([]byte, len(snapMagic)+1)
	if _, err := io.ReadFull(br, hdr); err != nil || string(hdr[:4]) != snapMagic || hdr[4] != snapVersion {
		return state, fmt.Errorf("snapshot: bad header: %w", errBadEntry)
	}
	n, err := binary.ReadUvarint(br)
	if err != nil || n > uint64(maxSnapState) {
		return state, fmt.Errorf("snapshot: bad state length: %w", errBadEntry)
	}
	head := make([]byte, n)
	if _, err := io.ReadFull(br, head); err != nil {
		return state, fmt.Errorf("snapshot: state: %w", err)
	}
	if err := json.Unmarshal(head, &state); err != nil {
		return state, fmt.Errorf("snapshot: state: %v: %w", err, errBadEntry)
	}
	count, err := binary.ReadUvarint(br)
	if err != nil || int64(count) > state.Applied {
		return state, fmt.Errorf("snapshot: bad message count: %w", errBadEntry)
	}
	next := st.Stats().LogNext
	rel := newReleases(state.Released, next)
	var batch []*store.Message
	flush := func() error {
		if len(batch) == 0 {
			return nil
		}
		setAt(batch[0].StoredAt)
		for _, m := range batch {
			m.LogOffset, m.StoredAt = 0, time.Time{}
		}
		err := st.Append(batch...)
		next += int64(len(batch))
		batch = batch[:0]
		return err
	}
	var buf []byte
	for i := uint64(0); i < count; i++ {
		l, err := binary.ReadUvarint(br)
		if err != nil || l > store.MaxBatchBytes {
			return state, fmt.Errorf("snapshot: message %d: bad length: %w", i, errBadEntry)
		}
		if uint64(cap(buf)) < l {
			buf = make([]byte, l)
		}
		buf = buf[:l]
		if _, err := io.ReadFull(br, buf); err != nil {
			return state, fmt.Errorf("snapshot: message %d: %w", i, err)
		}
		d := decoder{b: buf}
		m := d.msg()
		if d.err != nil {
			return state, fmt.Errorf("snapshot: message %d: %w", i, d.err)
		}
		pending := next + int64(len(batch))
		switch {
		case m.LogOffset < pending:
			continue // this node has it already
		case m.LogOffset > pending:
			return state, fmt.Errorf("snapshot: starts at log offset %d, this store ends at %d: %w", m.LogOffset, pending, ErrDiverged)
		}
		if rel.due(pending) {
			// A topic deleted at this point of the log: released before
			// anything after it is appended, as the log applied it.
			if err := flush(); err != nil {
				return state, fmt.Errorf("snapshot: append: %w", err)
			}
			if err := rel.apply(st, next); err != nil {
				return state, err
			}
		}
		if len(batch) > 0 && (!batch[0].StoredAt.Equal(m.StoredAt) || len(batch) == 256) {
			if err := flush(); err != nil {
				return state, fmt.Errorf("snapshot: append: %w", err)
			}
		}
		batch = append(batch, m)
	}
	if err := flush(); err != nil {
		return state, fmt.Errorf("snapshot: append: %w", err)
	}
	if err := rel.apply(st, next); err != nil {
		return state, err
	}
	if next < state.Applied {
		return state, fmt.Errorf("snapshot: store ends at %d, snapshot at %d: %w", next, state.Applied, ErrDiverged)
	}
	return state, nil
}
