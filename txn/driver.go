package txn

import (
	"errors"
	"sync"
	"time"
)

// progressEvery is how many ticks pass between two progress writes.
const progressEvery = 10

// driver is the one goroutine of a started Manager.
type driver struct {
	started bool
	stop    chan struct{}
	wake    chan struct{}
	cancel  func()
	wg      sync.WaitGroup
}

// subscriber is the optional capability of a Log to report its arrivals
// (as *store.Store does).
type subscriber interface {
	Subscribe(fn func(topic string, queueID int, next int64)) (cancel func())
}

// Start starts the driver: every Options.Tick it makes a check round
// (CheckNow) and now and then writes the progress file; when the log can
// Subscribe, records appended to the half or op queue by other writers are
// ingested as they arrive (else at each tick). Start after Start is a
// no-op; after Close it answers ErrClosed.
func (m *Manager) Start() error {
	m.mu.Lock()
	defer m.mu.Unlock()
	if m.closed {
		return ErrClosed
	}
	if m.drv.started {
		return nil
	}
	m.drv = driver{started: true, stop: make(chan struct{}), wake: make(chan struct{}, 1)}
	if s, ok := m.log.(subscriber); ok {
		m.drv.cancel = s.Subscribe(func(topic string, queueID int, _ int64) { m.Arrived(topic, queueID) })
	}
	m.drv.wg.Add(1)
	go m.run(m.drv.stop, m.drv.wake)
	return nil
}

// Arrived tells a started Manager that topic has new records; it reads them
// when topic is the half or op queue. Hosts whose Log cannot Subscribe call
// it from their arrival hook.
func (m *Manager) Arrived(topic string, _ int) {
	if topic != HalfTopic && topic != OpTopic {
		return
	}
	m.mu.Lock()
	wake := m.drv.wake
	m.mu.Unlock()
	if wake == nil {
		return
	}
	select {
	case wake <- struct{}{}:
	default:
	}
}

func (m *Manager) run(stop, wake chan struct{}) {
	defer m.drv.wg.Done()
	t := time.NewTicker(m.opts.Tick)
	defer t.Stop()
	ticks := 0
	for {
		select {
		case <-stop:
			return
		case <-wake:
			if err := m.catchUp(); err != nil {
				m.lg.Error("catch-up read failed", "err", err)
			}
		case <-t.C:
			if err := m.catchUp(); err != nil {
				m.lg.Error("catch-up read failed", "err", err)
			}
			if m.Stats().Uncertain > 0 {
				if _, err := m.settleUncertain(); err != nil {
					m.lg.Warn("uncertain transactions not settled: the log still fails", "err", err)
				}
			}
			if _, err := m.CheckNow(); err != nil && !errors.Is(err, ErrClosed) {
				m.lg.Error("check round failed", "err", err)
			}
			if ticks++; ticks%progressEvery == 0 {
				_ = m.saveProgress()
			}
		}
	}
}

// Close stops the driver, waits for it and for EndAsync's appends, and
// writes the progress file a last time. Every later call answers ErrClosed. The log is not closed. Close is
// idempotent.
func (m *Manager) Close() error {
	m.closeOnce.Do(func() { m.closeErr = m.close() })
	return m.closeErr
}

func (m *Manager) close() error {
	m.mu.Lock()
	m.closed = true // Start refuses from now on; End and Prepare answer ErrClosed
	m.cond.Broadcast()
	d := &m.drv
	started := d.started
	m.mu.Unlock()
	if started {
		if d.cancel != nil {
			d.cancel()
		}
		close(d.stop)
		d.wg.Wait()
	}
	m.async.Wait()
	err := m.saveProgress()
	m.mu.Lock()
	m.drv.wake = nil
	m.mu.Unlock()
	return err
}
