package txn

import (
	"errors"
	"fmt"
	"log/slog"
	"strconv"
	"sync"

	"github.com/brokercore/brokercore/store"
)

// Log is the storage a Manager writes and reads; *store.Store satisfies it.
// Append of several messages must be all-or-nothing across a crash: the
// exactly-once commit rests on it. An Append that returned an error may
// still have landed (its answer was lost); once a later Append, begun after
// that error, returns nil, every record of the failed one that will ever be
// in the log must be readable. The Manager settles such an uncertain
// resolution on it without a restart (*store.Store keeps it trivially: a
// failed write or fsync fails every later Append until it is reopened).
type Log interface {
	Append(msgs ...*store.Message) error
	Read(topic string, queueID int, offset int64, max int) ([]*store.Message, error)
	MinOffset(topic string, queueID int) int64
	MaxOffset(topic string, queueID int) int64
}

// Check is one check-back: ask a producer of Group whether transaction ID
// committed. Message is the transaction's message on its real topic and
// queue, with PropCheckTimes set; its QueueOffset, LogOffset and StoredAt
// are the half's (QueueOffset is ID), which protocols hand the producer
// back. The Checker owns it.
type Check struct {
	ID      int64
	Group   string
	Message *store.Message
}

// Checker is implemented by the host: it asks a live producer of c.Group
// about the transaction (RocketMQ's CHECK_TRANSACTION_STATE, gRPC's
// RecoverOrphanedTransactionCommand) and returns without waiting for the
// answer, which comes back as End(c.ID, …, FromCheck). An error (no
// producer of the group is online) is logged and counted; the check counts
// toward CheckMax all the same, as in RocketMQ.
type Checker interface {
	Check(c Check) error
}

// CheckerFunc adapts a function to Checker.
type CheckerFunc func(c Check) error

// Check calls f(c).
func (f CheckerFunc) Check(c Check) error { return f(c) }

// readPage is how many records one read of the half or op queue asks for.
const readPage = 256

// Manager runs the transactions of one log. Create it with New.
type Manager struct {
	log  Log
	opts Options
	lg   *slog.Logger

	mu      sync.Mutex
	cond    *sync.Cond // broadcast whenever an append about a busy entry ends
	c       *core
	checker Checker
	closed  bool
	saved   *progress // the progress file's content, once written

	ingestMu sync.Mutex // one catch-up read at a time
	settleMu sync.Mutex // one settling of uncertain transactions at a time

	async    sync.WaitGroup // EndAsync's appends in flight; Close waits
	asyncSem chan struct{}  // bounds them
	recent   recent         // halves prepared here, not yet resolved

	drv       driver
	closeOnce sync.Once
	closeErr  error
}

// New returns a Manager over log, its open transactions rebuilt from the
// half and op records (from where Options.ProgressPath says reading may
// start, or from the oldest records). It starts nothing: see Start.
func New(log Log, opts Options) (*Manager, error) {
	if log == nil {
		return nil, fmt.Errorf("%w: nil log", ErrInvalid)
	}
	o, err := opts.withDefaults()
	if err != nil {
		return nil, err
	}
	m := &Manager{log: log, opts: o, lg: o.Logger, checker: o.Checker, asyncSem: make(chan struct{}, maxAsyncEnds)}
	m.cond = sync.NewCond(&m.mu)
	half, op := m.startFrom()
	m.c = newCore(o, half, op)
	if err := m.catchUp(); err != nil {
		return nil, fmt.Errorf("txn: rebuild: %w", err)
	}
	s := m.c.snapshot()
	m.lg.Info("transactions rebuilt from the log", "from_half", half, "from_op", op,
		"half_next", m.c.half.next, "op_next", m.c.op.next, "pending", s.Pending)
	return m, nil
}

// SetChecker sets (or replaces) the Checker; nil stops sending checks.
func (m *Manager) SetChecker(c Checker) {
	m.mu.Lock()
	m.checker = c
	m.mu.Unlock()
}

// Prepare stores msg as the half message of a new transaction of producer
// group and returns the stored half: its QueueOffset is the transaction's
// ID. msg is not changed. A delay level or timer property is refused with
// ErrDelayNotSupported.
func (m *Manager) Prepare(msg *store.Message, group string) (*store.Message, error) {
	if err := checkPrepare(msg, group); err != nil {
		return nil, err
	}
	if err := m.usable(); err != nil {
		return nil, err
	}
	h := halfOf(msg, group, m.log.MaxOffset(OpTopic, 0))
	if err := m.log.Append(h); err != nil {
		return nil, fmt.Errorf("txn: prepare: %w", err)
	}
	m.recent.add(h)
	m.ingestOwn([]*store.Message{h})
	m.lg.Debug("prepared", "id", h.QueueOffset, "group", group, "topic", msg.Topic, "queue", msg.QueueID)
	return h, nil
}

// Commit is End(id, Commit, FromClient).
func (m *Manager) Commit(id int64) error { return m.End(id, Commit, FromClient) }

// Rollback is End(id, Rollback, FromClient).
func (m *Manager) Rollback(id int64) error { return m.End(id, Rollback, FromClient) }

// End resolves transaction id. Commit appends the real message and the op
// record in one batch; Rollback appends the op record; Unknown changes
// nothing (the transaction will be checked). A resolution the transaction
// already has answers nil and appends nothing; the opposite one answers
// ErrAlreadyResolved. An unknown id answers ErrNotFound.
func (m *Manager) End(id int64, r Resolution, src Source) error {
	return m.EndVerified(id, r, src, nil)
}

// EndVerified is End with a check of the transaction's message before
// anything is appended: verify gets the message on its real topic (as Half
// returns it) and an error from it refuses the resolution, changing
// nothing (the error is returned wrapped). A protocol checks with it that
// the producer names the half it means (its message id, its group) without
// a second read of the log. verify is not called for a resolution that is
// repeated or refused, nor for Unknown.
//
// A transaction whose last append failed uncertainly (it may have landed)
// is settled first, by a probe of the log (see ErrUncertain); only a log
// that still fails answers ErrUncertain.
func (m *Manager) EndVerified(id int64, r Resolution, src Source, verify func(*store.Message) error) error {
	batch, h, err := m.begin(id, r, src, verify)
	if err != nil || batch == nil {
		return err
	}
	return m.finish(id, r, src, h, batch)
}

// EndAsync is EndVerified that does not wait for the records to be in the
// log: it returns once the resolution is decided and verified (an error
// refuses it, as EndVerified's would) and the append runs on a goroutine of
// the Manager, whose outcome goes to done (when not nil; nil for a
// resolution that needed no append). It is what Apache RocketMQ's proxy
// does with EndTransaction (it forwards it oneway), and what a v2
// producer's oneway END_TRANSACTION gets: the producer learns only that the
// broker took its resolution. Exactly once holds all the same: the records
// are one batch, the transaction stays busy (a repeated or opposite
// resolution waits for it) until the append ends, and should the process
// die before the batch is durable the transaction is open after the
// restart and its check-back asks the producer again. At most 256 such
// appends run at once; past that EndAsync appends before it returns. Close
// waits for them.
func (m *Manager) EndAsync(id int64, r Resolution, src Source, verify func(*store.Message) error, done func(error)) error {
	batch, h, err := m.begin(id, r, src, verify)
	if err != nil || batch == nil {
		if err == nil && done != nil {
			done(nil)
		}
		return err
	}
	if !m.startAsync() { // all slots busy, or closing: the caller waits, as End's would
		err := m.finish(id, r, src, h, batch)
		if done != nil {
			done(err)
		}
		return nil
	}
	go func() {
		defer m.async.Done()
		err := m.finish(id, r, src, h, batch)
		<-m.asyncSem
		if done != nil {
			done(err)
		}
	}()
	return nil
}

// startAsync takes a slot for an EndAsync goroutine and counts it for
// Close, unless every slot is taken or Close has begun (its Wait must not
// race an Add).
func (m *Manager) startAsync() bool {
	select {
	case m.asyncSem <- struct{}{}:
	default:
		return false
	}
	m.mu.Lock()
	defer m.mu.Unlock()
	if m.closed {
		<-m.asyncSem
		return false
	}
	m.async.Add(1)
	return true
}

// maxAsyncEnds bounds EndAsync's appends in flight.
const maxAsyncEnds = 256

// begin decides resolution r of id. It answers the batch to append, the
// half, and the transaction busy; or no batch and nil (nothing to append:
// repeated, or Unknown) or an error (refused; nothing changed).
func (m *Manager) begin(id int64, r Resolution, src Source, verify func(*store.Message) error) ([]*store.Message, *store.Message, error) {
	if r != Commit && r != Rollback && r != Unknown {
		return nil, nil, fmt.Errorf("%w: resolution %d", ErrInvalid, int(r))
	}
	settled := false
	m.mu.Lock()
	for {
		if m.closed {
			m.mu.Unlock()
			return nil, nil, ErrClosed
		}
		if r == Unknown {
			_, open := m.c.pending[id]
			m.mu.Unlock()
			if !open {
				return nil, nil, fmt.Errorf("txn: %d: %w", id, ErrNotFound)
			}
			m.lg.Debug("transaction left open", "id", id, "source", src)
			return nil, nil, nil
		}
		act, err := m.c.begin(id, r)
		switch {
		case errors.Is(err, ErrUncertain) && !settled:
			settled = true
			m.mu.Unlock()
			if _, serr := m.settleUncertain(); serr != nil {
				m.lg.Warn("uncertain transaction not settled: the log still fails", "id", id, "err", serr)
			}
			m.mu.Lock()
			continue
		case err != nil:
			m.mu.Unlock()
			if errors.Is(err, ErrAlreadyResolved) {
				m.lg.Warn("resolution refused", "id", id, "resolution", r, "source", src, "err", err)
			}
			return nil, nil, fmt.Errorf("txn: %s %d: %w", r, id, err)
		case act == actDone:
			m.mu.Unlock()
			m.lg.Debug("resolution repeated", "id", id, "resolution", r, "source", src)
			return nil, nil, nil
		case act == actWait:
			m.cond.Wait()
			continue
		}
		m.mu.Unlock()
		return m.records(id, r, src, verify)
	}
}

// records reads the half of busy transaction id, verifies it and returns
// the batch resolution r appends.
func (m *Manager) records(id int64, r Resolution, src Source, verify func(*store.Message) error) ([]*store.Message, *store.Message, error) {
	h, err := m.readHalf(id)
	if err != nil {
		return nil, nil, err
	}
	if verify != nil {
		if err := verify(restore(h)); err != nil {
			m.mu.Lock()
			m.c.abort(id, false)
			m.cond.Broadcast()
			m.mu.Unlock()
			m.lg.Warn("resolution refused by its verification", "id", id, "resolution", r, "source", src, "err", err)
			return nil, nil, fmt.Errorf("txn: %s %d: %w", r, id, err)
		}
	}
	var batch []*store.Message
	k := opRollback
	if r == Commit {
		k = opCommit
		batch = append(batch, committed(h))
	}
	return append(batch, opRecord(id, k)), h, nil
}

// finish appends the records of resolution r of busy transaction id.
func (m *Manager) finish(id int64, r Resolution, src Source, h *store.Message, batch []*store.Message) error {
	if err := m.append(batch, id); err != nil {
		return fmt.Errorf("txn: %s %d: %w", r, id, err)
	}
	m.lg.Debug("transaction resolved", "id", id, "resolution", r, "source", src,
		"group", h.Properties[PropProducerGroup], "topic", batch[0].Topic, "queue", batch[0].QueueID)
	return nil
}

// settleUncertain decides the transactions whose last append failed
// uncertainly: it appends a probe record (an Append begun after their
// failures; once it succeeds, whatever those left is readable, as Log
// promises) and reads the log. A transaction whose records were found is
// closed, or checked, as they say; one whose records are absent never gets
// them and is open again, due as it was. It returns how many it settled;
// an error (the probe failed: the log still fails) leaves them uncertain.
func (m *Manager) settleUncertain() (int, error) {
	m.settleMu.Lock()
	defer m.settleMu.Unlock()
	m.mu.Lock()
	refs := m.c.unsureRefs()
	m.mu.Unlock()
	if len(refs) == 0 {
		return 0, nil
	}
	p := probeRecord()
	if err := m.log.Append(p); err != nil {
		return 0, fmt.Errorf("txn: probe: %w", err)
	}
	m.ingestOwn([]*store.Message{p})
	if err := m.catchUp(); err != nil {
		return 0, fmt.Errorf("txn: settle: %w", err)
	}
	m.mu.Lock()
	n, left := 0, 0
	for _, r := range refs {
		if m.c.settle(r) {
			n++
		}
	}
	left = m.c.uncertain
	m.cond.Broadcast()
	m.mu.Unlock()
	m.lg.Info("uncertain transactions settled from the log", "uncertain", len(refs), "open_again", n, "still_uncertain", left)
	return n, nil
}

// readHalf reads the half of busy transaction id; on an error the entry is
// no longer busy (or gone, when the log no longer has it).
func (m *Manager) readHalf(id int64) (*store.Message, error) {
	if h := m.recent.get(id); h != nil {
		return h, nil
	}
	msgs, err := m.log.Read(HalfTopic, 0, id, 1)
	if err == nil && (len(msgs) == 0 || msgs[0].QueueOffset != id) {
		err = store.ErrOffsetTooSmall // a damaged record stepped over, or retention: gone
	}
	if err != nil {
		m.mu.Lock()
		if errors.Is(err, store.ErrOffsetTooSmall) {
			m.c.drop(id)
			m.lg.Error("open transaction lost: its half is no longer in the log", "id", id, "err", err)
			err = ErrNotFound
		} else {
			m.c.abort(id, false)
		}
		m.cond.Broadcast()
		m.mu.Unlock()
		return nil, fmt.Errorf("txn: read half %d: %w", id, err)
	}
	return msgs[0], nil
}

// append appends batch, which settles the busy transactions ids, and
// ingests it. On a failure the entries are no longer busy, or uncertain
// when the batch may have landed.
func (m *Manager) append(batch []*store.Message, ids ...int64) error {
	err := m.log.Append(batch...)
	if err != nil {
		unsure := !errors.Is(err, store.ErrInvalid) && !errors.Is(err, store.ErrClosed)
		m.mu.Lock()
		for _, id := range ids {
			m.c.abort(id, unsure)
		}
		m.cond.Broadcast()
		m.mu.Unlock()
		m.lg.Error("transaction append failed", "ids", ids, "uncertain", unsure, "err", err)
		return err
	}
	m.recent.remove(ids)
	m.ingestOwn(batch)
	return nil
}

// ingestOwn applies records the Manager appended itself, at once, even
// when a concurrent append's records are not ingested yet. Should records
// of another writer hold the frontier back (maxAhead own records past it),
// the log is read from there.
func (m *Manager) ingestOwn(batch []*store.Message) {
	m.mu.Lock()
	for _, r := range batch {
		switch r.Topic {
		case HalfTopic:
			m.c.ingestHalf(r, true)
		case OpTopic:
			m.c.ingestOp(r, true)
		}
	}
	behind := len(m.c.half.ahead) > maxAhead || len(m.c.op.ahead) > maxAhead
	m.cond.Broadcast()
	m.mu.Unlock()
	if behind {
		if err := m.catchUp(); err != nil {
			m.lg.Error("catch-up read failed", "err", err)
		}
	}
}

// maxAhead is how many own records may be ingested past a gap before
// ingestOwn reads the log to fill it.
const maxAhead = 1024

// catchUp reads the half queue, then the op queue, from where ingestion
// stands to their ends.
func (m *Manager) catchUp() error {
	m.ingestMu.Lock()
	defer m.ingestMu.Unlock()
	if err := m.readQueue(HalfTopic, func() int64 { return m.c.half.next }, m.c.ingestHalf); err != nil {
		return err
	}
	if err := m.readQueue(OpTopic, func() int64 { return m.c.op.next }, m.c.ingestOp); err != nil {
		return err
	}
	m.mu.Lock()
	m.cond.Broadcast()
	m.mu.Unlock()
	return nil
}

func (m *Manager) readQueue(topic string, next func() int64, ingest func(*store.Message, bool)) error {
	for {
		m.mu.Lock()
		from := next()
		m.mu.Unlock()
		if min := m.log.MinOffset(topic, 0); from < min {
			from = min
		}
		if from >= m.log.MaxOffset(topic, 0) {
			return nil
		}
		msgs, err := m.log.Read(topic, 0, from, readPage)
		var small *store.OffsetError
		if errors.As(err, &small) {
			continue // retention moved the start while we looked
		}
		if err != nil {
			return fmt.Errorf("read %s at %d: %w", topic, from, err)
		}
		if len(msgs) == 0 {
			return nil
		}
		m.mu.Lock()
		for _, r := range msgs {
			ingest(r, false)
		}
		m.mu.Unlock()
	}
}

// usable answers ErrClosed after Close.
func (m *Manager) usable() error {
	m.mu.Lock()
	defer m.mu.Unlock()
	if m.closed {
		return ErrClosed
	}
	return nil
}

// Pending reports whether transaction id is open.
func (m *Manager) Pending(id int64) bool {
	m.mu.Lock()
	defer m.mu.Unlock()
	_, ok := m.c.pending[id]
	return ok
}

// Half returns the message of open transaction id on its real topic (for a
// protocol that checks what a client names against the stored half).
func (m *Manager) Half(id int64) (*store.Message, error) {
	if !m.Pending(id) {
		return nil, fmt.Errorf("txn: %d: %w", id, ErrNotFound)
	}
	msgs, err := m.log.Read(HalfTopic, 0, id, 1)
	if err != nil || len(msgs) == 0 || msgs[0].QueueOffset != id {
		return nil, fmt.Errorf("txn: read half %d: %w", id, ErrNotFound)
	}
	return restore(msgs[0]), nil
}

// Stats returns the Manager's counters.
func (m *Manager) Stats() Stats {
	m.mu.Lock()
	defer m.mu.Unlock()
	return m.c.snapshot()
}

// checkView is the message a Checker receives for half h.
func checkView(h *store.Message, checks int) *store.Message {
	v := restore(h)
	v.QueueOffset, v.LogOffset, v.StoredAt = h.QueueOffset, h.LogOffset, h.StoredAt
	v.Properties[PropCheckTimes] = strconv.Itoa(checks)
	return v
}
