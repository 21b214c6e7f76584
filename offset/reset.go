package offset

import (
	"fmt"
	"time"
)

// TimeIndex finds the first offset of a queue stored at or after t.
// *store.Store satisfies it.
type TimeIndex interface {
	OffsetAt(topic string, queueID int, t time.Time) int64
}

// Reset sets the key's offset and bumps its epoch, so every CommitFenced
// made under an older epoch is refused from now on. The new state is written
// to the file before Reset returns (and before anyone can observe the new
// epoch); if that write fails, Reset returns the error and changes nothing.
// Epochs of a key strictly increase, across restarts and Remove too.
// With Options.Bounds, an offset past the queue's end is ErrBeyondEnd, as
// for Commit.
func (m *Manager) Reset(group, topic string, queueID int, offset int64) (epoch uint64, err error) {
	if err := m.check("reset", group, topic, queueID, offset); err != nil {
		return 0, err
	}
	if err := m.checkOpen("reset"); err != nil {
		return 0, err
	}
	if err := m.checkEnd("reset", group, topic, queueID, offset); err != nil {
		return 0, err
	}
	epochs, err := m.reset("reset", []record{{key: key{group, topic, queueID}, offset: offset}})
	if err != nil {
		return 0, err
	}
	return epochs[0], nil
}

// ResetToTime resets the key to the first offset idx holds at or after t
// (typically a *store.Store), like Reset.
func (m *Manager) ResetToTime(group, topic string, queueID int, t time.Time, idx TimeIndex) (uint64, error) {
	if idx == nil {
		m.check("reset to time", "", topic, queueID, 0)
		return 0, fmt.Errorf("offset: reset %q/%q/%d to time: nil TimeIndex: %w", group, topic, queueID, ErrInvalid)
	}
	if err := m.check("reset to time", group, topic, queueID, 0); err != nil {
		return 0, err
	}
	off := idx.OffsetAt(topic, queueID, t)
	if off < 0 {
		return 0, m.check("reset to time", group, topic, queueID, off)
	}
	m.log.Info("offset: reset to time", "group", group, "topic", topic, "queue", queueID, "time", t, "offset", off)
	return m.Reset(group, topic, queueID, off)
}

// Clone copies every offset of group from onto group to (RocketMQ's
// cloneGroupOffset). For the destination this is a reset of each copied key:
// its epoch is bumped and the result written at once, so a consumer of to
// that has not seen the clone cannot commit its old progress over it.
// Offsets of to for keys from lacks are left alone.
func (m *Manager) Clone(from, to string) error {
	if from == "" || to == "" || from == to {
		m.check("clone", "", from+"->"+to, 0, 0)
		return fmt.Errorf("offset: clone %q to %q: %w", from, to, ErrInvalid)
	}
	if err := m.checkOpen("clone"); err != nil {
		return err
	}
	var rs []record
	m.entries.Range(func(k key, e *entry) bool {
		if k.group == from {
			rs = append(rs, record{key: key{to, k.topic, k.queue}, offset: e.offset.Load()})
		}
		return true
	})
	if len(rs) == 0 {
		return nil
	}
	_, err := m.reset("clone", rs)
	return err
}

// reset applies rs (resetKeys) and then tells Options.OnReset of each
// key, outside persistMu.
func (m *Manager) reset(op string, rs []record) ([]uint64, error) {
	epochs, err := m.resetKeys(op, rs)
	if err != nil || m.onReset == nil {
		return epochs, err
	}
	for i, r := range rs {
		m.onReset(r.group, r.topic, r.queue, r.offset, epochs[i])
	}
	return epochs, nil
}

// resetKeys gives each record a new epoch, writes the file with them, then
// applies them. Holding persistMu makes epoch changes sequential, so the
// epoch read here is still current when the record is applied.
func (m *Manager) resetKeys(op string, rs []record) ([]uint64, error) {
	m.persistMu.Lock()
	defer m.persistMu.Unlock()
	override := make(map[key]record, len(rs))
	epochs := make([]uint64, len(rs))
	for i := range rs {
		r := &rs[i]
		r.epoch = max(m.peekEpoch(r.key), m.floor.Load()) + 1
		epochs[i] = r.epoch
		override[r.key] = *r
	}
	if err := m.persist(override); err != nil {
		return nil, fmt.Errorf("offset: %s not applied: %w", op, err)
	}
	for _, r := range rs {
		m.entries.Compute(r.key, func(e *entry, loaded bool) (*entry, bool) {
			if !loaded {
				return newEntry(r.offset, r.epoch), false
			}
			// Offset before epoch: a reader that sees the new epoch (and
			// reads Epoch before Committed) sees the new offset too.
			e.mu.Lock()
			e.offset.Store(r.offset)
			e.epoch.Store(r.epoch)
			e.mu.Unlock()
			return e, false
		})
		m.st.resets.Add(1)
		m.log.Info("offset: "+op, "group", r.group, "topic", r.topic, "queue", r.queue,
			"offset", r.offset, "epoch", r.epoch)
	}
	if m.path == "" {
		m.markDirty()
	}
	return epochs, nil
}
