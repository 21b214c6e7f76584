package brokercore

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"os"
	"path/filepath"
	"sync"
	"time"

	"github.com/brokercore/brokercore/consumer"
	"github.com/brokercore/brokercore/lock"
	"github.com/brokercore/brokercore/offset"
	"github.com/brokercore/brokercore/pop"
	"github.com/brokercore/brokercore/schedule"
	"github.com/brokercore/brokercore/store"
	"github.com/brokercore/brokercore/txn"
)

// Broker is the composed broker core that Open returns: a store, a pop
// service, an offset manager, a scheduler, a lock table and a consumer
// registry, wired to each other. Each piece is reachable through its
// accessor and used directly; Close stops them all.
type Broker struct {
	log       *slog.Logger
	store     *store.Store
	offsets   *offset.Manager
	pop       *pop.Service
	sched     *schedule.Scheduler
	locks     *lock.Table
	consumers *consumer.Registry
	txns      *txn.Manager
	arrivals  *Arrivals

	// Subscribers added after Open (OnConsumerEvent, OnLockEvent,
	// OnOffsetReset), called after the host's Options hooks.
	consumerHooks hookList[consumer.Event]
	lockHooks     hookList[lock.Event]
	resetHooks    hookList[OffsetReset]

	// closers run in reverse order on Close (and on a failed Open).
	closers []closer

	stop      chan struct{} // closed by Close: housekeeping ends
	wg        sync.WaitGroup
	closeOnce sync.Once
	closeErr  error
}

type closer struct {
	name string
	fn   func() error
}

// Open opens (creating it if needed) the broker core kept in dir:
//
//   - the store in dir/StoreDir, whose arrivals — the scheduler's deliveries
//     included — wake the pop service's long polls;
//   - the offset manager persisted at dir/OffsetsFile, which the pop service
//     commits to, bounded by the store (an offset past a queue's end is
//     offset.ErrBeyondEnd for Commit and Reset alike), whose resets wake the
//     long polls of the queue's topic too (offset.Options.OnReset: the
//     host's own hook is called after that);
//   - the pop service, whose dead letters are appended to queue 0 of
//     DeadLetterPrefix+group (none with Options.NoDeadLetters), and whose
//     receipt handles are signed with the key in dir/HandleKeyFile (so
//     handles from before a restart answer pop.ErrStaleHandle, not
//     pop.ErrBadHandle);
//   - the scheduler, with its progress in dir/ScheduleDir/ProgressFile,
//     started, so delayed messages are delivered exactly once across
//     reopens;
//   - the transaction manager (package txn) over the store, its progress
//     in dir/TxnProgressFile, started: open transactions are rebuilt from
//     the half and op records and checked back through Options.Txn.Checker
//     (or one set later with Broker.Transactions().SetChecker);
//   - the lock table and the consumer registry, swept and scanned every
//     Options.LockSweepEvery and Options.ConsumerScanEvery.
//
// Options.Now and Options.Logger go to every package whose own is nil.
// If any piece fails to open, the ones already opened are closed again and
// the error says which piece failed.
func Open(dir string, opts Options) (*Broker, error) {
	if dir == "" {
		return nil, fmt.Errorf("%w: empty directory", ErrInvalid)
	}
	if opts.NoDeadLetters && opts.Pop.DeadLetter != nil {
		return nil, fmt.Errorf("%w: NoDeadLetters with a Pop.DeadLetter set", ErrInvalid)
	}
	opts = opts.withDefaults(dir)
	b := &Broker{log: opts.Logger.With("pkg", "brokercore"), stop: make(chan struct{})}
	if err := b.open(dir, opts); err != nil {
		b.closeAll()
		opts.Logger.Debug("open failed", "dir", dir, "err", err)
		return nil, err
	}
	b.startHousekeeping(opts.LockSweepEvery, opts.ConsumerScanEvery)
	return b, nil
}

// open opens the pieces in dependency order, registering each one's closer
// as soon as it is open.
func (b *Broker) open(dir string, opts Options) error {
	if err := os.MkdirAll(dir, 0o755); err != nil {
		return fmt.Errorf("brokercore: %w", err)
	}
	st, err := store.Open(filepath.Join(dir, StoreDir), opts.Store)
	if err != nil {
		return fmt.Errorf("brokercore: store: %w", err)
	}
	b.store = st
	b.add("store", st.Close)
	b.arrivals = NewArrivals(st)
	unsub := st.Subscribe(b.arrivals.Notify)
	b.add("arrivals", func() error { unsub(); b.arrivals.Close(); return nil })

	oo := opts.Offset
	if oo.Bounds == nil {
		oo.Bounds = st
	}
	oo.OnReset = b.wakeOnReset(oo.OnReset)
	offs, err := offset.Open(oo)
	if err != nil {
		return fmt.Errorf("brokercore: offsets: %w", err)
	}
	b.offsets = offs
	b.add("offsets", offs.Close)

	po := opts.Pop
	if po.Offsets == nil {
		po.Offsets = offs
	}
	if po.DeadLetter == nil && !opts.NoDeadLetters {
		po.DeadLetter = b.deadLetter
	}
	if po.HandleKey == nil {
		if po.HandleKey, err = loadHandleKey(filepath.Join(dir, HandleKeyFile)); err != nil {
			return err
		}
	}
	svc := pop.New(st, po)
	b.pop = svc
	b.add("pop", svc.Close) // pop.New subscribed itself to the store's arrivals; Close cancels it

	if err := os.MkdirAll(filepath.Dir(opts.Schedule.ProgressPath), 0o755); err != nil {
		return fmt.Errorf("brokercore: scheduler: %w", err)
	}
	sch, err := schedule.New(st, opts.Schedule)
	if err != nil {
		return fmt.Errorf("brokercore: scheduler: %w", err)
	}
	if err := sch.Start(); err != nil {
		return fmt.Errorf("brokercore: scheduler: %w", err)
	}
	b.sched = sch
	b.add("scheduler", sch.Close)

	tm, err := txn.New(st, opts.Txn)
	if err != nil {
		return fmt.Errorf("brokercore: transactions: %w", err)
	}
	b.add("transactions", tm.Close)
	if err := tm.Start(); err != nil {
		return fmt.Errorf("brokercore: transactions: %w", err)
	}
	b.txns = tm

	lo := opts.Lock
	lo.OnEvent = then(lo.OnEvent, b.lockHooks.call)
	b.locks = lock.New(lo)
	b.add("locks", b.locks.Close)
	co := opts.Consumer
	co.OnEvent = then(co.OnEvent, b.consumerHooks.call)
	b.consumers = consumer.New(co)
	b.add("consumers", b.consumers.Close)
	return nil
}

// wakeOnReset is offset.Options.OnReset: a reset makes messages of the
// queue deliverable again, so the long-polling pops of the topic and the
// queue's Arrivals waiters look again at once instead of when their wait
// ends. Then the host's own hook, then OnOffsetReset's subscribers.
// Resets come through Broker.Offsets, after Open set b.pop (nothing Open
// runs resets an offset), so b.pop is read without a lock.
func (b *Broker) wakeOnReset(host func(group, topic string, queueID int, offset int64, epoch uint64)) func(string, string, int, int64, uint64) {
	return func(group, topic string, queueID int, offset int64, epoch uint64) {
		if b.pop != nil {
			b.pop.Arrived(topic, queueID)
		}
		b.arrivals.Wake(topic, queueID)
		if host != nil {
			host(group, topic, queueID, offset, epoch)
		}
		b.resetHooks.call(OffsetReset{Group: group, Topic: topic, QueueID: queueID, Offset: offset, Epoch: epoch})
	}
}

// then is a hook calling first (when set), then second.
func then[E any](first, second func(E)) func(E) {
	if first == nil {
		return second
	}
	return func(e E) {
		first(e)
		second(e)
	}
}

func (b *Broker) add(name string, fn func() error) {
	b.closers = append(b.closers, closer{name, fn})
}

// deadLetter is pop.Options.DeadLetter: it appends a copy of m to the
// group's dead-letter topic.
func (b *Broker) deadLetter(group string, m *store.Message) error {
	dl := DeadLetterMessage(group, m)
	if err := b.store.Append(dl); err != nil {
		return fmt.Errorf("brokercore: dead letter: %w", err)
	}
	b.log.Debug("dead letter appended", "group", group, "topic", m.Topic, "queue", m.QueueID,
		"offset", m.QueueOffset, "dlq_offset", dl.QueueOffset)
	return nil
}

// startHousekeeping starts the one goroutine that sweeps the lock table and
// scans the consumer registry; Close stops it and waits for it.
func (b *Broker) startHousekeeping(sweepEvery, scanEvery time.Duration) {
	b.wg.Add(1)
	go func() {
		defer b.wg.Done()
		sweep, stopSweep := ticker(sweepEvery)
		defer stopSweep()
		scan, stopScan := ticker(scanEvery)
		defer stopScan()
		for {
			select {
			case <-b.stop:
				return
			case <-sweep:
				b.locks.Sweep()
			case <-scan:
				b.consumers.Scan()
			}
		}
	}()
}

// ticker returns the channel of a ticker of period d and its stop, or a nil
// channel (never ready) for a negative d.
func ticker(d time.Duration) (<-chan time.Time, func()) {
	if d < 0 {
		return nil, func() {}
	}
	t := time.NewTicker(d)
	return t.C, t.Stop
}

// Store returns the broker's store.
func (b *Broker) Store() *store.Store { return b.store }

// Pop returns the broker's pop service.
func (b *Broker) Pop() *pop.Service { return b.pop }

// Offsets returns the broker's offset manager.
func (b *Broker) Offsets() *offset.Manager { return b.offsets }

// Scheduler returns the broker's scheduler (started by Open).
func (b *Broker) Scheduler() *schedule.Scheduler { return b.sched }

// Locks returns the broker's lock table.
func (b *Broker) Locks() *lock.Table { return b.locks }

// Transactions returns the broker's transaction manager (started by Open).
func (b *Broker) Transactions() *txn.Manager { return b.txns }

// Consumers returns the broker's consumer registry.
func (b *Broker) Consumers() *consumer.Registry { return b.consumers }

// Arrivals returns the broker's long-poll waiter: woken by every append to
// the store (the scheduler's deliveries included) and by every offset
// reset; closed by Close.
func (b *Broker) Arrivals() *Arrivals { return b.arrivals }

// WaitArrival is Arrivals().Wait: it returns true once (topic, queueID)
// holds a message at offset or past it, or its offsets were reset (look
// again), and false when ctx ends or the broker closes.
func (b *Broker) WaitArrival(ctx context.Context, topic string, queueID int, offset int64) bool {
	return b.arrivals.Wait(ctx, topic, queueID, offset)
}

// Close stops everything in the reverse order of Open and returns after
// every goroutine has exited: housekeeping, the consumer registry and the
// lock table, then the transaction manager (its driver stops, its progress
// is written), the scheduler (its in-flight deliveries finish and their
// progress is recorded), the pop service (it cancels its arrival
// subscription; long polls answer pop.ErrClosed), the offset manager
// (written a last time) and the store. Afterwards the store, the pop
// service, the offset manager and the consumer registry answer their
// ErrClosed, the lock table refuses every lock and unlock (its calls answer
// booleans), and the scheduler stays stopped (do not Start it again). Reads
// of in-memory state keep answering. Close is idempotent; later calls
// return the first call's result, which joins the errors of every piece
// that failed to close.
func (b *Broker) Close() error {
	b.closeOnce.Do(func() {
		close(b.stop)
		b.wg.Wait()
		b.closeErr = b.closeAll()
	})
	return b.closeErr
}

func (b *Broker) closeAll() error {
	var errs []error
	for i := len(b.closers) - 1; i >= 0; i-- {
		c := b.closers[i]
		if err := c.fn(); err != nil {
			errs = append(errs, fmt.Errorf("brokercore: close %s: %w", c.name, err))
		}
	}
	b.closers = nil
	return errors.Join(errs...)
}
