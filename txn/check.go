package txn

import (
	"errors"
	"fmt"

	"github.com/brokercore/brokercore/store"
)

// CheckNow makes the check round that the driver makes every Options.Tick:
// it sends every check due at Options.Now (at most MaxChecksPerTick), each
// after its check record is in the log, and rolls back the transactions
// past CheckMax, keeping their halves in CheckMaxTimeTopic. It returns how
// many transactions it checked or rolled back.
func (m *Manager) CheckNow() (int, error) {
	m.mu.Lock()
	if m.closed {
		m.mu.Unlock()
		return 0, ErrClosed
	}
	due := m.c.dueChecks(m.opts.Now(), m.opts.MaxChecksPerTick)
	checker := m.checker
	m.mu.Unlock()
	if len(due) == 0 {
		return 0, nil
	}
	var (
		batch []*store.Message
		ids   []int64
		sends []Check
	)
	for _, d := range due {
		h, err := m.readHalf(d.id)
		if err != nil {
			continue // logged; the entry is gone or no longer busy
		}
		ids = append(ids, d.id)
		if d.discard {
			batch = append(batch, discarded(h), opRecord(d.id, opDiscard))
			m.lg.Warn("transaction rolled back: check limit reached", "id", d.id, "group", d.group,
				"checks", d.checks, "topic", h.Properties[PropRealTopic])
			continue
		}
		batch = append(batch, opRecord(d.id, opCheck))
		sends = append(sends, Check{ID: d.id, Group: d.group, Message: checkView(h, d.checks+1)})
	}
	if len(batch) == 0 {
		return 0, nil
	}
	if err := m.append(batch, ids...); err != nil {
		return 0, fmt.Errorf("txn: check: %w", err)
	}
	m.send(checker, sends)
	return len(ids), nil
}

// send hands the checks to the Checker, outside every lock.
func (m *Manager) send(checker Checker, sends []Check) {
	failed := 0
	for _, c := range sends {
		err := errors.New("no checker set")
		if checker != nil {
			err = checker.Check(c)
		}
		if err != nil {
			failed++
			m.lg.Warn("check not delivered", "id", c.ID, "group", c.Group, "err", err)
			continue
		}
		m.lg.Info("check sent", "id", c.ID, "group", c.Group, "times", c.Message.Properties[PropCheckTimes])
	}
	if failed > 0 {
		m.mu.Lock()
		m.c.stats.ChecksFailed += uint64(failed)
		m.mu.Unlock()
	}
}
