package main

import (
	"bytes"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"sync"
	"sync/atomic"
	"time"

	"github.com/brokercore/brokercore/store"
	"github.com/hashicorp/raft"
)

// fsm is the replicated state machine of one node. Apply runs on raft's one
// FSM goroutine, in log order, on every node:
//
//   - messages (produce and scheduler delivery) go to the node's local
//     store.Store, whose StoredAt is the leader's clock reading carried in
//     the entry, so every node assigns the same QueueOffset, LogOffset and
//     StoredAt to the same message;
//   - the small state (consumer offsets and epochs, scheduler progress,
//     cluster id, members' HTTP addresses) lives in memory and in snapshots.
//
// The store is durable on its own, so after a restart raft replays entries
// the store already holds. applied counts the messages applied so far (it
// is part of the snapshot and of the replay), and an entry whose messages
// lie below the store's end is skipped instead of appended again.
type fsm struct {
	st  *store.Store
	log *slog.Logger
	at  atomic.Int64 // the entry being applied: its leader timestamp (store.Options.Now)

	mu       sync.RWMutex
	applied  int64 // messages applied = the store's LogNext once caught up
	offsets  map[offsetKey]offsetState
	progress []byte
	cluster  string
	members  map[string]string // node id -> HTTP address
	index    uint64            // last raft index applied
	failed   error             // a store append failed: this node's copy is no longer trustworthy

	// durable, when set, waits until the local raft log holds an entry on
	// disk (raftlog_defer.go); set before raft starts.
	durable  func(index uint64) error
	restores int // snapshots restored (status, tests)
}

type offsetKey struct {
	group, topic string
	queue        int
}

type offsetState struct {
	offset    int64
	committed bool
	epoch     uint64
}

// applyResult is what Apply returns through the ApplyFuture.
type applyResult struct {
	msgs []*store.Message // assigned fields filled in (produce/deliver)
	err  error
}

func newFSM(st *store.Store, log *slog.Logger) *fsm {
	return &fsm{st: st, log: log, offsets: map[offsetKey]offsetState{}, members: map[string]string{}}
}

// now is the store's clock: the timestamp of the entry being applied.
func (f *fsm) now() time.Time { return time.Unix(0, f.at.Load()).UTC() }

// Apply implements raft.FSM.
func (f *fsm) Apply(l *raft.Log) any {
	if l.Type != raft.LogCommand {
		return nil
	}
	if f.durable != nil {
		if err := f.durable(l.Index); err != nil {
			f.mu.Lock()
			defer f.mu.Unlock()
			if f.failed == nil {
				f.failed = fmt.Errorf("entry %d not on this node's disk: %w", l.Index, err)
				f.log.Error("cluster: raft log failed; this node stops applying", "err", f.failed)
			}
			return applyResult{err: f.failed}
		}
	}
	e, err := decodeEntry(l.Data)
	if err != nil {
		// Only this program writes entries; one it cannot read is a bug or
		// a foreign log, and skipping it deterministically on every node
		// keeps the replicas equal.
		f.log.Error("cluster: entry not applied", "index", l.Index, "err", err)
		return applyResult{err: err}
	}
	f.mu.Lock()
	defer f.mu.Unlock()
	f.index = l.Index
	switch e.Kind {
	case kindProduce, kindDeliver:
		return f.applyMessages(l.Index, e)
	case kindProgress:
		if !bytes.Equal(f.progress, e.Prev) {
			return applyResult{err: fmt.Errorf("progress at index %d: %w", l.Index, ErrStaleProgress)}
		}
		f.progress = e.Progress
		return applyResult{}
	case kindCommit:
		return applyResult{err: f.applyCommits(e.Commits)}
	case kindReset:
		for _, c := range e.Commits {
			k := offsetKey{c.Group, c.Topic, c.Queue}
			s := f.offsets[k]
			f.offsets[k] = offsetState{offset: c.Offset, committed: true, epoch: s.epoch + 1}
		}
		return applyResult{}
	case kindInit:
		if f.cluster == "" {
			f.cluster = e.Text
		}
		return applyResult{}
	case kindMember:
		if e.Text2 == "" {
			delete(f.members, e.Text)
		} else {
			f.members[e.Text] = e.Text2
		}
		return applyResult{}
	}
	return applyResult{err: fmt.Errorf("kind %d: %w", e.Kind, errBadEntry)}
}

// applyMessages appends one entry's messages as one store batch; a delivery
// entry records the scheduler's progress in the same step.
func (f *fsm) applyMessages(index uint64, e *entry) applyResult {
	if f.failed != nil {
		return applyResult{err: f.failed}
	}
	if err := validBatch(e.Msgs); err != nil {
		// The leader validates before proposing; this keeps a bad entry
		// from ever reaching the store, identically on every node.
		return applyResult{err: err}
	}
	if e.Kind == kindDeliver {
		// The fence against a delivery task that outlived what it knew
		// (the field report's zombie, or a scheduler whose append timed
		// out and that retries a batch a new leader already delivered):
		// a delivery applies only on top of the progress it started from.
		if !bytes.Equal(f.progress, e.Prev) {
			return applyResult{err: fmt.Errorf("delivery at index %d: %w", index, ErrStaleProgress)}
		}
		f.progress = e.Progress
	}
	n := int64(len(e.Msgs))
	if next := f.st.Stats().LogNext; f.applied+n <= next {
		f.applied += n // a replay after a restart: the store has it already
		return applyResult{}
	} else if f.applied != next {
		f.failed = fmt.Errorf("store holds %d messages, the log expects %d at index %d: %w", next, f.applied, index, ErrDiverged)
		f.log.Error("cluster: local store out of step with the log", "err", f.failed)
		return applyResult{err: f.failed}
	}
	f.at.Store(e.At.UnixNano())
	if err := f.st.Append(e.Msgs...); err != nil {
		f.failed = fmt.Errorf("append at index %d: %w", index, err)
		f.log.Error("cluster: store append failed; this node stops applying", "err", err)
		return applyResult{err: f.failed}
	}
	f.applied += n
	return applyResult{msgs: e.Msgs}
}

func (f *fsm) applyCommits(cs []commitItem) error {
	var errs []error
	for _, c := range cs {
		k := offsetKey{c.Group, c.Topic, c.Queue}
		s := f.offsets[k]
		if s.epoch != c.Epoch {
			errs = append(errs, fmt.Errorf("commit %s@%s/%d offset %d epoch %d (current %d): %w", c.Group, c.Topic, c.Queue, c.Offset, c.Epoch, s.epoch, ErrStaleEpoch))
			continue
		}
		if s.committed && c.Offset < s.offset {
			continue // an older batch: the position never moves back
		}
		f.offsets[k] = offsetState{offset: c.Offset, committed: true, epoch: s.epoch}
	}
	return errors.Join(errs...)
}

// validBatch is the FSM's and the leader's one check of a batch.
func validBatch(msgs []*store.Message) error {
	if len(msgs) == 0 {
		return fmt.Errorf("empty batch: %w", ErrInvalid)
	}
	for i, m := range msgs {
		if m == nil || m.Topic == "" || m.QueueID < 0 {
			return fmt.Errorf("message %d: topic and a queue >= 0 are required: %w", i, ErrInvalid)
		}
		if len(m.Body) > store.DefaultMaxMessageSize {
			return fmt.Errorf("message %d: body of %d bytes, at most %d: %w", i, len(m.Body), store.DefaultMaxMessageSize, ErrInvalid)
		}
	}
	return nil
}

func (f *fsm) committed(k offsetKey) offsetState {
	f.mu.RLock()
	defer f.mu.RUnlock()
	return f.offsets[k]
}

func (f *fsm) loadProgress() []byte {
	f.mu.RLock()
	defer f.mu.RUnlock()
	return append([]byte(nil), f.progress...)
}

func (f *fsm) clusterID() string {
	f.mu.RLock()
	defer f.mu.RUnlock()
	return f.cluster
}

func (f *fsm) member(id string) string {
	f.mu.RLock()
	defer f.mu.RUnlock()
	return f.members[id]
}

// lastIndex is the raft index of the last command applied to this FSM
// (raft's own AppliedIndex counts entries handed to the FSM goroutine, not
// yet applied).
func (f *fsm) lastIndex() uint64 {
	f.mu.RLock()
	defer f.mu.RUnlock()
	return f.index
}

func (f *fsm) restored() int {
	f.mu.RLock()
	defer f.mu.RUnlock()
	return f.restores
}

func (f *fsm) err() error {
	f.mu.RLock()
	defer f.mu.RUnlock()
	return f.failed
}

// Snapshot implements raft.FSM: it captures the small state and how far
// the store goes; Persist streams the messages up to there.
func (f *fsm) Snapshot() (raft.FSMSnapshot, error) {
	f.mu.RLock()
	defer f.mu.RUnlock()
	if f.failed != nil {
		return nil, f.failed
	}
	s := &snapshot{st: f.st, state: snapState{
		Cluster:  f.cluster,
		Applied:  f.applied,
		Progress: append([]byte(nil), f.progress...),
		Members:  map[string]string{},
	}}
	for k, v := range f.offsets {
		s.state.Offsets = append(s.state.Offsets, snapOffset{k.group, k.topic, k.queue, v.offset, v.committed, v.epoch})
	}
	for k, v := range f.members {
		s.state.Members[k] = v
	}
	return s, nil
}

// Restore implements raft.FSM.
func (f *fsm) Restore(rc io.ReadCloser) error {
	defer rc.Close()
	f.mu.Lock()
	defer f.mu.Unlock()
	state, err := restoreSnapshot(rc, f.st, func(at time.Time) { f.at.Store(at.UnixNano()) })
	if err != nil {
		f.log.Error("cluster: snapshot not restored", "err", err)
		return err
	}
	f.applied = state.Applied
	f.cluster = state.Cluster
	f.progress = state.Progress
	f.members = state.Members
	if f.members == nil {
		f.members = map[string]string{}
	}
	f.offsets = map[offsetKey]offsetState{}
	for _, o := range state.Offsets {
		f.offsets[offsetKey{o.Group, o.Topic, o.Queue}] = offsetState{o.Offset, o.Committed, o.Epoch}
	}
	f.restores++
	f.log.Info("cluster: snapshot restored", "messages", state.Applied, "offsets", len(state.Offsets))
	return nil
}
