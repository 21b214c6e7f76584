package replica

import (
	"cmp"
	"fmt"
	"slices"

	"github.com/brokercore/brokercore"
	"github.com/brokercore/brokercore/store"
)

// A deleted topic (the host's admin DELETE_TOPIC) and a deleted group's
// offsets (DELETE_SUBSCRIPTIONGROUP with cleanOffset) are raft entries, so
// every node drops the same state at the same point of the log:
//
//   - kindRelease releases the topic in the node's store
//     (store.DeleteTopic: its messages appended so far are gone for
//     readers, its queue offsets are never handed out again) and drops
//     every group's offsets of it. The store's floor is the log offset the
//     next message gets, which is fsm.applied on every node when the entry
//     applies, so every node hides the same messages. The point is kept
//     (fsm.released) and carried in snapshots: a node restored from one
//     releases the topic when its store reaches that offset, between the
//     same two messages. After a restart raft replays the entry; a store
//     already past the point released the topic then (DeleteTopic is
//     durable before it returns, before anything after it was appended),
//     so only the replicated state is set again.
//   - kindForget drops every offset of the group.
//
// Either may carry the host's record of the delete (its admin log's
// message): stored first, as a produce, then the drop, in one step.
//
// A dropped offset keeps its key, uncommitted, with its epoch bumped: a
// commit fenced by the old epoch (pop's ack of a message received before,
// the leader's pending commits) is refused as stale rather than bringing
// the offset back, as a reset fences it.

// DeleteTopic releases topic through raft on every node: its messages
// stored so far are gone for readers (Read answers nothing below the
// queues' new MinOffset, which is their MaxOffset), every group's
// committed offsets of it are dropped, and a topic written again goes on
// from its old queue offsets. record, if given, are the host's own
// messages (reserved topics, checked as ProduceSystem's) stored in the
// same entry, before the release: the host's record of the delete, which
// is then never logged without the release nor the release without it.
// It returns them as stored. Only the leader accepts it; a release
// repeated hides what was written in between.
func (n *Node) DeleteTopic(topic string, record ...*store.Message) ([]*store.Message, error) {
	if err := brokercore.CheckTopicName(topic); err != nil {
		return nil, fmt.Errorf("delete topic: %w: %w", ErrInvalid, err)
	}
	return n.drop(&entry{Kind: kindRelease, Text: topic}, record)
}

// ForgetGroup drops every committed offset of group through raft on every
// node: a consumer of the group started afterwards starts from its
// consume-from rule. record is as DeleteTopic's. Only the leader accepts
// it.
func (n *Node) ForgetGroup(group string, record ...*store.Message) ([]*store.Message, error) {
	if err := brokercore.CheckGroupName(group); err != nil {
		return nil, fmt.Errorf("forget group: %w: %w", ErrInvalid, err)
	}
	return n.drop(&entry{Kind: kindForget, Text: group}, record)
}

func (n *Node) drop(e *entry, record []*store.Message) ([]*store.Message, error) {
	if len(record) > 0 {
		if err := checkSystem(record); err != nil {
			return nil, fmt.Errorf("%s: %w", e.Kind, err)
		}
		if err := checkBatch(record); err != nil {
			return nil, fmt.Errorf("%s: %w", e.Kind, err)
		}
	}
	e.Msgs = record
	res, err := n.apply(e)
	if err != nil {
		return nil, err
	}
	n.dropPending()
	return res.msgs, nil
}

// dropPending drops the leader's commits not proposed yet that the drop
// fenced (their epoch is not the replicated one any more): Committed on
// the leader answers the pending commit first.
func (n *Node) dropPending() {
	t, err := n.services()
	if err != nil {
		return
	}
	t.offsets.mu.Lock()
	defer t.offsets.mu.Unlock()
	for k, c := range t.offsets.pending {
		if n.fsm.committed(k).epoch != c.Epoch {
			delete(t.offsets.pending, k)
		}
	}
}

// applyDrop applies kindRelease and kindForget: the record's messages
// first, as a produce (a record the store refuses refuses the entry
// whole, the drop with it), then the drop under f.mu. Callers hold no
// lock.
func (f *fsm) applyDrop(index uint64, e *entry) applyResult {
	var res applyResult
	if len(e.Msgs) > 0 {
		if res = f.applyMessages(index, e); res.err != nil {
			return res
		}
	}
	f.mu.Lock()
	defer f.mu.Unlock()
	var err error
	if e.Kind == kindRelease {
		err = f.release(index, e.Text)
	} else {
		err = f.forget(index, e.Text)
	}
	return applyResult{msgs: res.msgs, err: err}
}

// release releases topic at f.applied. Callers hold f.mu.
func (f *fsm) release(index uint64, topic string) error {
	if f.failed != nil {
		return f.failed
	}
	if err := brokercore.CheckTopicName(topic); err != nil {
		return fmt.Errorf("release at index %d: %w: %w", index, ErrRejected, err)
	}
	switch next := f.st.Stats().LogNext; {
	case f.applied == next:
		if err := f.st.DeleteTopic(topic); err != nil {
			f.failed = fmt.Errorf("release %q at index %d: %w", topic, index, err)
			f.log.Error("cluster: topic release failed; this node stops applying", "err", f.failed)
			return f.failed
		}
	case f.applied > next:
		f.failed = fmt.Errorf("store holds %d messages, the log expects %d at index %d: %w", next, f.applied, index, ErrDiverged)
		f.log.Error("cluster: local store out of step with the log", "err", f.failed)
		return f.failed
	}
	// f.applied < next: a replay; the store released the topic back then.
	f.released[topic] = f.applied
	f.dropOffsets(func(k offsetKey) bool { return k.topic == topic })
	f.log.Info("cluster: topic released", "topic", topic, "log_offset", f.applied, "index", index)
	return nil
}

// forget drops group's offsets. Callers hold f.mu.
func (f *fsm) forget(index uint64, group string) error {
	if err := brokercore.CheckGroupName(group); err != nil {
		return fmt.Errorf("forget at index %d: %w: %w", index, ErrRejected, err)
	}
	f.dropOffsets(func(k offsetKey) bool { return k.group == group })
	f.log.Info("cluster: group offsets dropped", "group", group, "index", index)
	return nil
}

// dropOffsets uncommits the offsets that match and bumps their epochs.
func (f *fsm) dropOffsets(match func(offsetKey) bool) {
	for k, s := range f.offsets {
		if match(k) {
			f.offsets[k] = offsetState{epoch: s.epoch + 1}
		}
	}
}

// releases are a snapshot's release points a restore still has to apply,
// in log order.
type releases struct {
	at []releasePoint
}

type releasePoint struct {
	topic string
	at    int64
}

// newReleases keeps the points at or past from (the store's end before the
// restore): a store that holds messages past a point applied it already.
func newReleases(m map[string]int64, from int64) *releases {
	r := &releases{}
	for t, at := range m {
		if at >= from {
			r.at = append(r.at, releasePoint{t, at})
		}
	}
	slices.SortFunc(r.at, func(a, b releasePoint) int {
		return cmp.Or(cmp.Compare(a.at, b.at), cmp.Compare(a.topic, b.topic))
	})
	return r
}

// due reports whether a point lies at or before the log offset next.
func (r *releases) due(next int64) bool { return len(r.at) > 0 && r.at[0].at <= next }

// apply releases the topics whose points lie at or before next, the
// store's end.
func (r *releases) apply(st *store.Store, next int64) error {
	for r.due(next) {
		p := r.at[0]
		r.at = r.at[1:]
		if err := st.DeleteTopic(p.topic); err != nil {
			return fmt.Errorf("snapshot: release %q at log offset %d: %w", p.topic, p.at, err)
		}
	}
	return nil
}
