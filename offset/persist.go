package offset

import (
	"errors"
	"fmt"
	"io/fs"
	"time"
)

// load fills the map from the file (or its backup).
func (m *Manager) load(fallback bool) error {
	for _, leftover := range []string{m.path + ".tmp", m.path + ".bak.tmp"} {
		if err := m.fs.Remove(leftover); err == nil {
			m.log.Warn("offset: removed leftover of an interrupted write", "file", leftover)
		}
	}
	s, err := readSnapshot(m.fs, m.path)
	switch {
	case err == nil:
		m.pathIsGood = true
	case errors.Is(err, fs.ErrNotExist):
		bs, berr := readSnapshot(m.fs, m.path+".bak")
		if errors.Is(berr, fs.ErrNotExist) {
			m.log.Info("offset: no offset file yet, starting empty", "file", m.path)
			return nil
		}
		if !fallback {
			return fmt.Errorf("offset: %s is missing but its backup exists (set FallbackToBackup to load it): %w", m.path, ErrCorrupt)
		}
		if berr != nil {
			return fmt.Errorf("offset: %s is missing and the backup is unusable: %w", m.path, berr)
		}
		m.log.Warn("offset: file missing, recovered from backup", "file", m.path, "keys", len(bs.records))
		s = fenceBackup(bs)
	case !fallback:
		return fmt.Errorf("offset: open: %w", err)
	default:
		bs, berr := readSnapshot(m.fs, m.path+".bak")
		if berr != nil {
			return fmt.Errorf("offset: open: %w (backup: %v)", err, berr)
		}
		m.log.Warn("offset: file corrupt, recovered from backup; commits after the backup are lost",
			"file", m.path, "error", err, "keys", len(bs.records))
		s = fenceBackup(bs)
	}
	m.floor.Store(s.floor)
	for _, r := range s.records {
		m.entries.Store(r.key, newEntry(r.offset, r.epoch))
	}
	m.log.Info("offset: loaded", "file", m.path, "keys", len(s.records), "floor", s.floor,
		"written_at", time.Unix(0, s.writtenAt))
	return nil
}

// fenceBackup moves every epoch of a snapshot loaded from the backup above
// any epoch that can have existed. The backup is one write behind the lost
// file, and one write raises an epoch by at most one above the highest epoch
// (or floor) before it, so G = max+1 bounds everything ever handed out;
// every key gets G+1 and fresh keys start above it. A consumer holding an
// epoch from before the fallback is fenced and must re-read its position.
func fenceBackup(s snapshot) snapshot {
	g := s.floor
	for _, r := range s.records {
		g = max(g, r.epoch)
	}
	g += 2
	s.floor = g
	for i := range s.records {
		s.records[i].epoch = g
	}
	return s
}

func (m *Manager) flushLoop(every time.Duration) {
	defer close(m.done)
	t := time.NewTicker(every)
	defer t.Stop()
	for {
		select {
		case <-m.stop:
			return
		case <-t.C:
			if m.dirty.Load() {
				m.Flush() // failures are counted and logged by persist; the next tick retries
			}
		}
	}
}

// Flush writes the file now (a no-op without Path).
func (m *Manager) Flush() error {
	if err := m.checkOpen("flush"); err != nil {
		return err
	}
	m.persistMu.Lock()
	defer m.persistMu.Unlock()
	return m.persist(nil)
}

// persist writes a snapshot of every entry, with override replacing the
// values of some keys (a reset being made durable before it is applied).
// The caller holds persistMu.
func (m *Manager) persist(override map[key]record) error {
	if m.path == "" {
		return nil
	}
	start := time.Now()
	m.dirty.Store(false) // commits racing with the snapshot set it again
	s := snapshot{writtenAt: m.now().UnixNano(), floor: m.floor.Load()}
	s.records = make([]record, 0, m.entries.Size()+len(override))
	m.entries.Range(func(k key, e *entry) bool {
		if _, ok := override[k]; !ok {
			s.records = append(s.records, record{key: k, offset: e.offset.Load(), epoch: e.epoch.Load()})
		}
		return true
	})
	for _, r := range override {
		s.records = append(s.records, r)
	}
	data := encodeFile(make([]byte, 0, 64+len(s.records)*32), s)
	if err := writeFileAtomic(m.fs, m.path, data, m.pathIsGood); err != nil {
		m.markDirty()
		m.st.flushErrors.Add(1)
		m.log.Error("offset: writing offset file failed", "file", m.path, "keys", len(s.records), "error", err)
		return fmt.Errorf("offset: write %s: %w", m.path, err)
	}
	m.pathIsGood = true
	m.st.flushes.Add(1)
	m.st.lastFlush.Store(s.writtenAt)
	m.st.lastFlushDur.Store(int64(time.Since(start)))
	m.st.lastFlushBytes.Store(int64(len(data)))
	return nil
}
