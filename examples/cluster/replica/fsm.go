package replica

import (
	"bytes"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"maps"
	"sync"
	"sync/atomic"
	"time"

	"github.com/brokercore/brokercore"
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
//     cluster id, members' client addresses) lives in memory and in snapshots.
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
	members  map[string]string // node id -> client address (Config.Addr)
	released map[string]int64  // deleted topics: the log offset each was released at (release.go)
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
	msgs     []*store.Message // assigned fields filled in (produce/deliver)
	rejected []error          // per producer batch of a joined entry (entry.Split): why it was refused, nil = stored
	err      error
}

func newFSM(st *store.Store, log *slog.Logger) *fsm {
	return &fsm{st: st, log: log, offsets: map[offsetKey]offsetState{}, members: map[string]string{}, released: map[string]int64{}}
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
		return applyResult{err: fmt.Errorf("%w: %w", ErrRejected, err)}
	}
	switch e.Kind {
	case kindProduce, kindDeliver, kindFenced, kindRelease, kindForget:
		// These take f.mu themselves, not across the store append.
		var res applyResult
		switch {
		case e.Kind == kindFenced && l.Term != e.Term:
			res = applyResult{err: fmt.Errorf("entry of term %d at index %d, proposed for term %d: %w: %w", l.Term, l.Index, e.Term, ErrRejected, ErrStaleTerm)}
		case e.Kind == kindRelease || e.Kind == kindForget:
			res = f.applyDrop(l.Index, e) // release.go
		default:
			res = f.applyMessages(l.Index, e)
		}
		f.mu.Lock()
		f.index = l.Index
		f.mu.Unlock()
		return res
	}
	f.mu.Lock()
	defer f.mu.Unlock()
	f.index = l.Index
	switch e.Kind {
	case kindProgress:
		if !bytes.Equal(f.progress, e.Prev) {
			return applyResult{err: fmt.Errorf("progress at index %d: %w", l.Index, ErrStaleProgress)}
		}
		f.progress = e.Progress
		return applyResult{}
	case kindCommit:
		return applyResult{err: f.applyCommits(e.Commits)}
	case kindReset:
		var errs []error
		for _, c := range e.Commits {
			if err := checkOffsetItem(c); err != nil {
				errs = append(errs, err)
				continue
			}
			k := offsetKey{c.Group, c.Topic, c.Queue}
			s := f.offsets[k]
			f.offsets[k] = offsetState{offset: c.Offset, committed: true, epoch: s.epoch + 1}
		}
		return applyResult{err: errors.Join(errs...)}
	case kindInit:
		if f.cluster == "" {
			f.cluster = e.Text
		}
		return applyResult{}
	case kindMember:
		if err := checkMember(e.Text, e.Text2); err != nil {
			return applyResult{err: fmt.Errorf("member entry at index %d: %w: %w", l.Index, ErrRejected, err)}
		}
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
//
// A batch the store would refuse is rejected here, before anything else,
// by the store's own rule applied to the entry's bytes alone (refusals):
// every node decides the same, nothing of the batch is stored nor counted
// as applied (so a replay after a restart decides the same again), and the
// node goes on with the next entry. Of an entry joining several producers'
// batches only the refused batches are dropped; a delivery is refused
// whole, its progress unmoved.
//
// The store append runs without f.mu: the store calls its hooks (pop's
// arrivals, a host's) from the appender, and a hook or a reader it waits
// for may read this state (a pop's plan reads the offsets). Apply is
// raft's one FSM goroutine, the only writer, so what it checked before
// the append still holds after it.
func (f *fsm) applyMessages(index uint64, e *entry) applyResult {
	if err := f.err(); err != nil {
		return applyResult{err: err}
	}
	keep, rejected, err := refusals(e)
	if err != nil {
		f.log.Warn("cluster: entry rejected", "index", index, "kind", e.Kind.String(), "err", err)
		return applyResult{err: fmt.Errorf("%s entry at index %d: %w", e.Kind, index, err)}
	}
	if rejected != nil {
		f.log.Warn("cluster: batches of an entry rejected", "index", index, "kind", e.Kind.String(), "err", errors.Join(rejected...))
	}
	// The fence against a delivery task that outlived what it knew (the
	// field report's zombie, or a scheduler whose append timed out and that
	// retries a batch a new leader already delivered): a delivery applies
	// only on top of the progress it started from.
	if e.Kind == kindDeliver && !bytes.Equal(f.loadProgress(), e.Prev) {
		return applyResult{err: fmt.Errorf("delivery at index %d: %w", index, ErrStaleProgress)}
	}
	res := applyResult{msgs: e.Msgs, rejected: rejected}
	n := int64(len(keep))
	f.mu.RLock()
	applied := f.applied
	f.mu.RUnlock()
	if next := f.st.Stats().LogNext; applied+n <= next {
		f.stored(e, n) // a replay after a restart: the store has it already
		return res
	} else if applied != next {
		return applyResult{err: f.fail(fmt.Errorf("store holds %d messages, the log expects %d at index %d: %w", next, applied, index, ErrDiverged),
			"cluster: local store out of step with the log")}
	}
	f.at.Store(e.At.UnixNano())
	if err := f.st.Append(keep...); err != nil {
		// refusals mirrors Append's checks, so this is the local store
		// failing (disk, closed), not the entry: this copy can no longer
		// be trusted.
		return applyResult{err: f.fail(fmt.Errorf("append at index %d: %w", index, err), "cluster: store append failed; this node stops applying")}
	}
	f.stored(e, n)
	return res
}

// stored records n messages of e as applied, and a delivery's progress.
func (f *fsm) stored(e *entry, n int64) {
	f.mu.Lock()
	defer f.mu.Unlock()
	f.applied += n
	if e.Kind == kindDeliver {
		f.progress = e.Progress
	}
}

// fail marks this node's copy as no longer trustworthy and answers err.
func (f *fsm) fail(err error, msg string) error {
	f.mu.Lock()
	defer f.mu.Unlock()
	f.failed = err
	f.log.Error(msg, "err", err)
	return err
}

// refusals decides which of an entry's producer batches the store refuses,
// with exactly the checks store.Append makes (store.CheckMessage with the
// store's limit, which this program leaves at its default, and the batch
// limit). keep is what to append; rejected, when not nil, has one error
// per batch (nil = kept); err refuses the entry whole: a delivery or an
// entry of one batch with anything refused, or a malformed split. Every
// error wraps ErrRejected.
func refusals(e *entry) (keep []*store.Message, rejected []error, err error) {
	if len(e.Msgs) == 0 {
		return nil, nil, fmt.Errorf("empty batch: %w: %w", ErrRejected, ErrInvalid)
	}
	sizes := e.Split
	if sizes == nil {
		sizes = []int{len(e.Msgs)}
	}
	total := 0
	for _, k := range sizes {
		if k <= 0 || total+k > len(e.Msgs) {
			return nil, nil, fmt.Errorf("split %v of %d messages: %w: %w", e.Split, len(e.Msgs), ErrRejected, errBadEntry)
		}
		total += k
	}
	if total != len(e.Msgs) {
		return nil, nil, fmt.Errorf("split %v of %d messages: %w: %w", e.Split, len(e.Msgs), ErrRejected, errBadEntry)
	}
	errs := make([]error, len(sizes))
	refused, sum, at := 0, 0, 0
	for b, k := range sizes {
		for i, m := range e.Msgs[at : at+k] {
			if err := store.CheckMessage(m, store.DefaultMaxMessageSize); err != nil {
				errs[b] = fmt.Errorf("batch %d message %d: %w: %w", b, i, ErrRejected, err)
				break
			}
		}
		if errs[b] == nil {
			size := 0
			for _, m := range e.Msgs[at : at+k] {
				size += len(m.Body) + metaSize(m)
			}
			if sum+size > store.MaxBatchBytes {
				errs[b] = fmt.Errorf("batch %d: over %d bytes: %w: %w", b, store.MaxBatchBytes, ErrRejected, store.ErrInvalid)
			} else {
				sum += size
			}
		}
		if errs[b] != nil {
			refused++
		}
		at += k
	}
	switch {
	case refused == 0:
		return e.Msgs, nil, nil
	case len(sizes) == 1 || e.Kind == kindDeliver || refused == len(sizes):
		return nil, nil, errors.Join(errs...)
	}
	at = 0
	for b, k := range sizes {
		if errs[b] == nil {
			keep = append(keep, e.Msgs[at:at+k]...)
		}
		at += k
	}
	return keep, errs, nil
}

// metaSize is what the store counts against store.MaxMetadataSize and
// store.MaxBatchBytes besides the body (its record.go's metaSize).
func metaSize(m *store.Message) int {
	n := len(m.Topic) + len(m.Tags)
	for _, k := range m.Keys {
		n += len(k) + 1
	}
	for k, v := range m.Properties {
		n += len(k) + len(v) + 2
	}
	return n
}

// maxMemberField bounds a member's id and client address in the replicated
// state.
const maxMemberField = 255

// offsetRule is the rule for a consumer offset in the replicated state
// (leader and FSM): names as the library accepts them, a queue the store
// can hold, an offset >= 0. The error wraps ErrInvalid.
func offsetRule(c commitItem) error {
	err := brokercore.CheckGroupName(c.Group)
	if err == nil {
		err = brokercore.CheckTopicName(c.Topic)
	}
	if err == nil && (c.Queue < 0 || c.Queue > store.MaxQueueID || c.Offset < 0) {
		err = fmt.Errorf("queue %d offset %d", c.Queue, c.Offset)
	}
	if err != nil {
		return fmt.Errorf("offset of %.64q on %.64q: %w: %w", c.Group, c.Topic, ErrInvalid, err)
	}
	return nil
}

// checkOffsetItem is offsetRule in the FSM: its error wraps ErrRejected.
func checkOffsetItem(c commitItem) error {
	if err := offsetRule(c); err != nil {
		return fmt.Errorf("%w: %w", ErrRejected, err)
	}
	return nil
}

// checkMember is the rule for a member record: an id, an address of at
// most maxMemberField bytes each.
func checkMember(id, httpAddr string) error {
	if id == "" || len(id) > maxMemberField || len(httpAddr) > maxMemberField {
		return fmt.Errorf("member id of %d bytes, address of %d (at most %d each, id required): %w", len(id), len(httpAddr), maxMemberField, ErrInvalid)
	}
	return nil
}

// checkBatch is the leader's check of a batch before it is proposed: the
// store's rule for every message (clients' messages are checked by
// brokercore.CheckProduce first, see Node.Produce).
func checkBatch(msgs []*store.Message) error {
	if len(msgs) == 0 {
		return fmt.Errorf("empty batch: %w", ErrInvalid)
	}
	size := 0
	for i, m := range msgs {
		if err := store.CheckMessage(m, store.DefaultMaxMessageSize); err != nil {
			return fmt.Errorf("message %d: %w: %w", i, ErrInvalid, err)
		}
		size += len(m.Body) + metaSize(m)
	}
	if size > store.MaxBatchBytes {
		return fmt.Errorf("batch of %d bytes, at most %d: %w: %w", size, store.MaxBatchBytes, ErrInvalid, store.ErrInvalid)
	}
	entry := 0
	for _, m := range msgs {
		entry += msgSize(m)
	}
	if entry > maxProposeBytes {
		return fmt.Errorf("batch of %d messages encodes to about %d bytes, at most %d in one entry: %w", len(msgs), entry, maxProposeBytes, ErrInvalid)
	}
	return nil
}

func (f *fsm) applyCommits(cs []commitItem) error {
	var errs []error
	for _, c := range cs {
		if err := checkOffsetItem(c); err != nil {
			errs = append(errs, err)
			continue
		}
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
	s := &snapshot{st: f.st, log: f.log, state: snapState{
		Cluster:  f.cluster,
		Applied:  f.applied,
		Progress: append([]byte(nil), f.progress...),
		Members:  map[string]string{},
		Released: maps.Clone(f.released),
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
	f.released = state.Released
	if f.released == nil {
		f.released = map[string]int64{}
	}
	f.offsets = map[offsetKey]offsetState{}
	for _, o := range state.Offsets {
		f.offsets[offsetKey{o.Group, o.Topic, o.Queue}] = offsetState{o.Offset, o.Committed, o.Epoch}
	}
	f.restores++
	f.log.Info("cluster: snapshot restored", "messages", state.Applied, "offsets", len(state.Offsets))
	return nil
}
