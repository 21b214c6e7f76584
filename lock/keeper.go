package lock

import (
	"cmp"
	"fmt"
	"log/slog"
	"slices"
	"sync"
	"time"
)

// Locker is what a Keeper needs from a lock table. *Table satisfies it; so
// can a host's client for a remote table.
type Locker interface {
	// TryLockBatch locks or renews qs for clientID and returns those now
	// held by clientID.
	TryLockBatch(group string, qs []Queue, clientID string) []Queue
	// UnlockBatch releases those of qs that clientID holds.
	UnlockBatch(group string, qs []Queue, clientID string)
	// MaxLiveTime is the table's lease length.
	MaxLiveTime() time.Duration
}

// Keeper holds a set of queues for one client in one group: it renews them
// every period from one goroutine it owns, reports queues lost to another
// client, and releases everything on Close so a graceful shutdown hands the
// queues over at once. Its methods are safe for concurrent use.
type Keeper struct {
	l             Locker
	group, client string
	every         time.Duration
	onLost        func(lost []Queue) // set before the goroutine starts; never changed
	log           *slog.Logger

	// op serialises every Locker call with the change of held it implies,
	// so a renewal can never re-lock a queue that Release or Close has
	// just unlocked.
	op sync.Mutex

	mu     sync.Mutex // guards the fields below; never held across a Locker call
	held   map[Queue]struct{}
	closed bool

	stop      chan struct{}
	done      chan struct{}
	closeOnce sync.Once
}

// NewKeeper returns a Keeper for clientID in group on l, renewing every
// opts.Every (zero: l.MaxLiveTime()/RenewRatio) and already running; its
// OnLost is in place before its goroutine starts. It returns ErrInvalid for
// a nil l, an empty group or client ID or a negative period, and
// ErrRenewTooSlow if the period exceeds l.MaxLiveTime()/RenewRatio.
func NewKeeper(l Locker, group, clientID string, opts KeeperOptions) (*Keeper, error) {
	if t, ok := l.(*Table); l == nil || (ok && t == nil) {
		return nil, fmt.Errorf("lock: NewKeeper: nil Locker: %w", ErrInvalid)
	}
	if group == "" || clientID == "" {
		return nil, fmt.Errorf("lock: NewKeeper: group %q, client %q: %w", group, clientID, ErrInvalid)
	}
	if opts.Every < 0 {
		return nil, fmt.Errorf("lock: NewKeeper: renewal period %v: %w", opts.Every, ErrInvalid)
	}
	opts = opts.withDefaults(l.MaxLiveTime())
	if opts.Every <= 0 {
		return nil, fmt.Errorf("lock: NewKeeper: max live time %v gives no renewal period: %w",
			l.MaxLiveTime(), ErrInvalid)
	}
	if limit := l.MaxLiveTime() / RenewRatio; opts.Every > limit {
		return nil, fmt.Errorf("lock: NewKeeper: period %v > max live time %v / %d = %v: %w",
			opts.Every, l.MaxLiveTime(), RenewRatio, limit, ErrRenewTooSlow)
	}
	k := &Keeper{
		l: l, group: group, client: clientID, every: opts.Every,
		onLost: opts.OnLost, log: opts.Logger,
		held: make(map[Queue]struct{}),
		stop: make(chan struct{}),
		done: make(chan struct{}),
	}
	go k.loop()
	return k, nil
}

func (k *Keeper) loop() {
	defer close(k.done)
	tick := time.NewTicker(k.every)
	defer tick.Stop()
	for {
		select {
		case <-k.stop:
			return
		case <-tick.C:
			k.Renew()
		}
	}
}

// Hold locks qs at once and keeps them renewed; it returns the queues of qs
// now held (a new slice). It returns nil if the Keeper is closed or any
// queue is invalid; TryHold says why.
func (k *Keeper) Hold(qs ...Queue) []Queue {
	got, _ := k.TryHold(qs...)
	return got
}

// TryHold is Hold with an error: ErrInvalid (nothing changed) for a
// negative queue ID, ErrClosed after Close.
func (k *Keeper) TryHold(qs ...Queue) ([]Queue, error) {
	for _, q := range qs {
		if q.QueueID < 0 {
			return nil, fmt.Errorf("lock: Hold %v: negative queue ID: %w", q, ErrInvalid)
		}
	}
	k.op.Lock()
	if k.isClosed() {
		k.op.Unlock()
		return nil, fmt.Errorf("lock: Hold: %w", ErrClosed)
	}
	var got []Queue
	if len(qs) > 0 {
		got = k.l.TryLockBatch(k.group, qs, k.client)
	}
	lost := k.settle(qs, got)
	k.op.Unlock()
	k.lost(lost)
	return slices.Clone(got), nil
}

// lost logs and reports queues found taken by another client.
func (k *Keeper) lost(qs []Queue) {
	if len(qs) == 0 {
		return
	}
	for _, q := range qs {
		k.log.Warn("lock: keeper lost queue to another client", "group", k.group, "topic", q.Topic,
			"broker", q.Broker, "queue", q.QueueID, "client", k.client)
	}
	if k.onLost != nil {
		k.onLost(qs)
	}
}

// settle records that of asked, exactly got are held: queues that were held
// but were not granted are lost, and returned.
func (k *Keeper) settle(asked, got []Queue) []Queue {
	k.mu.Lock()
	defer k.mu.Unlock()
	granted := make(map[Queue]struct{}, len(got))
	for _, q := range got {
		granted[q] = struct{}{}
		k.held[q] = struct{}{}
	}
	var lost []Queue
	for _, q := range asked {
		if _, ok := granted[q]; ok {
			continue
		}
		if _, ok := k.held[q]; ok {
			delete(k.held, q)
			lost = append(lost, q)
		}
	}
	return lost
}

// Renew renews every held queue now, as the Keeper's goroutine does every
// period, and returns the queues found taken by another client (also passed
// to OnLost). Hosts may call it after a pause; tests call it to step time.
func (k *Keeper) Renew() []Queue {
	k.op.Lock()
	if k.isClosed() {
		k.op.Unlock()
		return nil
	}
	qs := k.Held()
	if len(qs) == 0 {
		k.op.Unlock()
		return nil
	}
	got := k.l.TryLockBatch(k.group, qs, k.client)
	lost := k.settle(qs, got)
	k.op.Unlock()
	k.lost(lost)
	return lost
}

// Release unlocks qs and stops renewing them. Queues not held are ignored.
func (k *Keeper) Release(qs ...Queue) {
	k.op.Lock()
	defer k.op.Unlock()
	if k.isClosed() {
		return
	}
	var mine []Queue
	k.mu.Lock()
	for _, q := range qs {
		if _, ok := k.held[q]; ok {
			delete(k.held, q)
			mine = append(mine, q)
		}
	}
	k.mu.Unlock()
	if len(mine) > 0 {
		k.l.UnlockBatch(k.group, mine, k.client)
	}
}

// Held returns the queues the Keeper holds, sorted by topic, broker and
// queue ID, in a new slice.
func (k *Keeper) Held() []Queue {
	k.mu.Lock()
	qs := make([]Queue, 0, len(k.held))
	for q := range k.held {
		qs = append(qs, q)
	}
	k.mu.Unlock()
	slices.SortFunc(qs, compareQueues)
	return qs
}

func compareQueues(a, b Queue) int {
	if c := cmp.Compare(a.Topic, b.Topic); c != 0 {
		return c
	}
	if c := cmp.Compare(a.Broker, b.Broker); c != 0 {
		return c
	}
	return cmp.Compare(a.QueueID, b.QueueID)
}

func (k *Keeper) isClosed() bool {
	k.mu.Lock()
	defer k.mu.Unlock()
	return k.closed
}

// Close stops renewing, waits for the Keeper's goroutine to exit and
// unlocks every queue it holds, so other clients can lock them at once.
// It is idempotent and always returns nil.
func (k *Keeper) Close() error {
	k.closeOnce.Do(func() {
		close(k.stop)
		<-k.done
		k.op.Lock()
		defer k.op.Unlock()
		qs := k.Held()
		k.mu.Lock()
		k.closed = true
		clear(k.held)
		k.mu.Unlock()
		if len(qs) > 0 {
			k.l.UnlockBatch(k.group, qs, k.client)
		}
	})
	return nil
}
