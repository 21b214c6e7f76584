package lock

import (
	"context"
	"fmt"
	"hash/maphash"
	"log/slog"
	"sync/atomic"
	"time"

	"github.com/puzpuzpuz/xsync/v3"
)

// DefaultMaxLiveTime is the lease length used when Options.MaxLiveTime is
// zero or negative.
const DefaultMaxLiveTime = 60 * time.Second

// Queue names one message queue: a topic's queue QueueID on a broker.
type Queue struct {
	Topic   string
	Broker  string
	QueueID int
}

// String returns "topic@broker#id", the form used in messages.
func (q Queue) String() string {
	return fmt.Sprintf("%s@%s#%d", q.Topic, q.Broker, q.QueueID)
}

// Lease is a client's ownership of one (group, queue) until Expires.
// Token is a fencing token: it is the same across renewals and strictly
// greater every time the key changes hands.
type Lease struct {
	ClientID string
	Token    uint64
	Expires  time.Time
}

// Options configures a Table. The zero value is a working default.
type Options struct {
	// MaxLiveTime is how long a lease lives after it was last locked or
	// renewed. Zero or negative means DefaultMaxLiveTime.
	MaxLiveTime time.Duration
	// Now is the clock read by every expiry decision. Nil means time.Now.
	Now func() time.Time
	// Logger receives contention, takeover, expiry and rejected requests
	// with group, queue, old and new client. Nil discards.
	Logger *slog.Logger
	// OnEvent, if set, is called synchronously after every lease change
	// or refusal, outside the table's locks. It must be fast. Events of
	// concurrent calls may arrive out of order; Token orders handovers.
	OnEvent func(Event)
	// TokenBase makes every token issued greater than it. A host that
	// restarts a table sets it to (at least) the last token the previous
	// table issued, so tokens stay unique across restarts. Zero is fine
	// for a table that lives as long as the process it fences.
	TokenBase uint64
}

// Stats is a snapshot of a Table's counters since New.
type Stats struct {
	Entries   int    // leases in the table, live or expired awaiting Sweep
	Locked    uint64 // free keys locked
	Renewed   uint64 // renewals by the holder
	TakenOver uint64 // expired leases replaced on lock
	Refused   uint64 // lock requests refused by a live lease of another client
	Unlocked  uint64 // live leases released by their holder
	Expired   uint64 // expired leases dropped by Sweep
	Invalid   uint64 // requests rejected for bad input
}

// key identifies a lease. Groups are independent namespaces.
type key struct {
	group string
	q     Queue
}

// keySeed keys hashKey; xsync's per-table seed is mixed in on top.
var keySeed = maphash.MakeSeed()

// hashKey hashes a key field by field: cheaper than the runtime's generic
// struct hash, which walks the type description on every call.
func hashKey(k key, seed uint64) uint64 {
	h := seed ^ maphash.String(keySeed, k.group)
	h = (h ^ maphash.String(keySeed, k.q.Topic)) * 0x9E3779B97F4A7C15
	h = (h ^ maphash.String(keySeed, k.q.Broker)) * 0xBF58476D1CE4E5B9
	h ^= uint64(k.q.QueueID) * 0x94D049BB133111EB
	return h ^ h>>31
}

type counters struct {
	locked, renewed, takenOver, refused, unlocked, expired, invalid *xsync.Counter
}

// Table is a lease lock table keyed by (group, queue). It is safe for
// concurrent use; operations on different keys never wait for each other
// beyond a hash bucket, and no operation takes a table-wide mutex.
type Table struct {
	leases  *xsync.MapOf[key, Lease]
	maxLive time.Duration
	now     func() time.Time
	log     *slog.Logger
	onEvent func(Event)
	// seq issues fencing tokens. It is table-wide and only grows, so a
	// token is never reused for a key even after Unlock or Sweep removed
	// the key's entry.
	seq atomic.Uint64
	st  counters
}

// New returns an empty Table configured by opts.
func New(opts Options) *Table {
	t := &Table{
		leases:  xsync.NewMapOfWithHasher[key, Lease](hashKey),
		maxLive: opts.MaxLiveTime,
		now:     opts.Now,
		log:     opts.Logger,
		onEvent: opts.OnEvent,
		st: counters{
			locked: xsync.NewCounter(), renewed: xsync.NewCounter(),
			takenOver: xsync.NewCounter(), refused: xsync.NewCounter(),
			unlocked: xsync.NewCounter(), expired: xsync.NewCounter(),
			invalid: xsync.NewCounter(),
		},
	}
	t.seq.Store(opts.TokenBase)
	if t.maxLive <= 0 {
		t.maxLive = DefaultMaxLiveTime
	}
	if t.now == nil {
		t.now = time.Now
	}
	return t
}

// MaxLiveTime returns the lease length of this table.
func (t *Table) MaxLiveTime() time.Duration { return t.maxLive }

func validate(group string, q Queue, clientID string) error {
	if clientID == "" {
		return fmt.Errorf("empty client ID: %w", ErrInvalid)
	}
	return validateKey(group, q)
}

func validateKey(group string, q Queue) error {
	if group == "" {
		return fmt.Errorf("empty group: %w", ErrInvalid)
	}
	if q.QueueID < 0 {
		return fmt.Errorf("negative queue ID %d: %w", q.QueueID, ErrInvalid)
	}
	return nil
}

func live(l Lease, now time.Time) bool { return now.Before(l.Expires) }

// TryLock locks (group, q) for clientID, or renews the lease if clientID
// holds it. It returns the lease now held and true, or false if another
// client holds a live lease or the input is invalid.
func (t *Table) TryLock(group string, q Queue, clientID string) (Lease, bool) {
	if err := validate(group, q, clientID); err != nil {
		t.reject("TryLock", group, q, clientID, err)
		return Lease{}, false
	}
	return t.tryLock(key{group, q}, clientID, t.now())
}

func (t *Table) tryLock(k key, clientID string, now time.Time) (Lease, bool) {
	// Contention is answered from a lock-free read: a live lease of
	// another client cannot turn into ours without its holder or time
	// acting, and refusing on a slightly stale view is always safe.
	if cur, ok := t.leases.Load(k); ok && cur.ClientID != clientID && live(cur, now) {
		t.note(Event{Kind: EventRefused, Group: k.group, Queue: k.q, Client: clientID,
			OldClient: cur.ClientID, Token: cur.Token, At: now})
		return Lease{}, false
	}
	var (
		kind EventKind
		prev Lease
	)
	expires := now.Add(t.maxLive)
	got, _ := t.leases.Compute(k, func(old Lease, loaded bool) (Lease, bool) {
		prev = old
		switch {
		case loaded && live(old, now) && old.ClientID == clientID:
			kind = EventRenewed
			if expires.After(old.Expires) { // a clock step back never shortens a lease
				old.Expires = expires
			}
			return old, false
		case loaded && live(old, now):
			kind = EventRefused
			return old, false
		case loaded:
			kind = EventTakenOver
		default:
			kind = EventLocked
		}
		return Lease{ClientID: clientID, Token: t.seq.Add(1), Expires: expires}, false
	})
	ev := Event{Kind: kind, Group: k.group, Queue: k.q, Client: clientID,
		OldClient: prev.ClientID, Token: got.Token, At: now}
	t.note(ev)
	if kind == EventRefused {
		return Lease{}, false
	}
	return got, true
}

// TryLockBatch tries to lock every queue of qs in group for clientID, as
// TryLock does, all at one instant. It returns exactly the queues clientID
// now holds among qs, in input order, each once, in a new slice the caller
// owns. Invalid queues are logged and left out.
func (t *Table) TryLockBatch(group string, qs []Queue, clientID string) []Queue {
	if group == "" || clientID == "" {
		err := validate(group, Queue{}, clientID)
		if len(qs) == 0 {
			t.reject("TryLockBatch", group, Queue{}, clientID, err)
		}
		for _, q := range qs {
			t.reject("TryLockBatch", group, q, clientID, err)
		}
		return []Queue{}
	}
	now := t.now()
	held := make([]Queue, 0, len(qs))
	var seen map[Queue]struct{}
	if len(qs) > 64 {
		seen = make(map[Queue]struct{}, len(qs))
	}
	for _, q := range qs {
		if q.QueueID < 0 {
			t.reject("TryLockBatch", group, q, clientID, validate(group, q, clientID))
			continue
		}
		if contains(held, seen, q) {
			continue
		}
		if _, ok := t.tryLock(key{group, q}, clientID, now); ok {
			held = append(held, q)
			if seen != nil {
				seen[q] = struct{}{}
			}
		}
	}
	return held
}

func contains(held []Queue, seen map[Queue]struct{}, q Queue) bool {
	if seen != nil {
		_, ok := seen[q]
		return ok
	}
	for _, h := range held {
		if h == q {
			return true
		}
	}
	return false
}

// Unlock releases clientID's live lease on (group, q) so another client can
// lock it at once. It returns false and changes nothing if clientID does not
// hold a live lease there (another client's lease is never touched).
func (t *Table) Unlock(group string, q Queue, clientID string) bool {
	if err := validate(group, q, clientID); err != nil {
		t.reject("Unlock", group, q, clientID, err)
		return false
	}
	return t.unlock(key{group, q}, clientID, t.now())
}

func (t *Table) unlock(k key, clientID string, now time.Time) bool {
	cur, ok := t.leases.Load(k)
	if !ok || cur.ClientID != clientID || !live(cur, now) {
		t.logNotHolder(k, clientID, cur, ok)
		return false
	}
	var freed Lease
	var done bool
	t.leases.Compute(k, func(old Lease, loaded bool) (Lease, bool) {
		if loaded && old.ClientID == clientID && live(old, now) {
			freed, done = old, true
			return old, true
		}
		return old, !loaded // keep what is there; insert nothing
	})
	if !done {
		t.logNotHolder(k, clientID, Lease{}, false)
		return false
	}
	t.note(Event{Kind: EventUnlocked, Group: k.group, Queue: k.q, Client: clientID,
		OldClient: clientID, Token: freed.Token, At: now})
	return true
}

func (t *Table) logNotHolder(k key, clientID string, cur Lease, ok bool) {
	if t.log == nil || !t.log.Enabled(context.Background(), slog.LevelInfo) {
		return
	}
	holder := ""
	if ok {
		holder = cur.ClientID
	}
	t.log.LogAttrs(context.Background(), slog.LevelInfo, "lock: unlock by non-holder ignored",
		slog.String("group", k.group),
		slog.String("topic", k.q.Topic),
		slog.String("broker", k.q.Broker),
		slog.Int("queueId", k.q.QueueID),
		slog.String("client", clientID),
		slog.String("holder", holder),
	)
}

// UnlockBatch unlocks every queue of qs that clientID holds in group, as
// Unlock does.
func (t *Table) UnlockBatch(group string, qs []Queue, clientID string) {
	now := t.now()
	for _, q := range qs {
		if err := validate(group, q, clientID); err != nil {
			t.reject("UnlockBatch", group, q, clientID, err)
			continue
		}
		t.unlock(key{group, q}, clientID, now)
	}
}

// UnlockAll releases every live lease clientID holds, in every group, and
// returns how many it released. A graceful shutdown calls it so the queues
// go to other clients at once instead of after MaxLiveTime.
func (t *Table) UnlockAll(clientID string) int {
	if clientID == "" {
		t.reject("UnlockAll", "", Queue{}, clientID, fmt.Errorf("empty client ID: %w", ErrInvalid))
		return 0
	}
	now := t.now()
	n := 0
	t.leases.Range(func(k key, l Lease) bool {
		if l.ClientID == clientID && live(l, now) && t.unlock(k, clientID, now) {
			n++
		}
		return true
	})
	return n
}

// Holder returns the live lease on (group, q), if any.
func (t *Table) Holder(group string, q Queue) (Lease, bool) {
	if err := validateKey(group, q); err != nil {
		t.reject("Holder", group, q, "", err)
		return Lease{}, false
	}
	l, ok := t.leases.Load(key{group, q})
	if !ok || !live(l, t.now()) {
		return Lease{}, false
	}
	return l, true
}

// Sweep drops every expired lease and returns how many it dropped. Expired
// leases are already free for TryLock; Sweep only reclaims memory and
// reports the expiries. Tokens stay unique across Sweep.
func (t *Table) Sweep() int {
	now := t.now()
	n := 0
	t.leases.Range(func(k key, l Lease) bool {
		if live(l, now) {
			return true
		}
		var gone Lease
		var done bool
		t.leases.Compute(k, func(old Lease, loaded bool) (Lease, bool) {
			if loaded && !live(old, now) {
				gone, done = old, true
				return old, true
			}
			return old, !loaded
		})
		if done {
			n++
			t.note(Event{Kind: EventExpired, Group: k.group, Queue: k.q, Client: gone.ClientID,
				OldClient: gone.ClientID, Token: gone.Token, At: now})
		}
		return true
	})
	return n
}

// Stats returns a snapshot of the table's counters.
func (t *Table) Stats() Stats {
	return Stats{
		Entries:   t.leases.Size(),
		Locked:    uint64(t.st.locked.Value()),
		Renewed:   uint64(t.st.renewed.Value()),
		TakenOver: uint64(t.st.takenOver.Value()),
		Refused:   uint64(t.st.refused.Value()),
		Unlocked:  uint64(t.st.unlocked.Value()),
		Expired:   uint64(t.st.expired.Value()),
		Invalid:   uint64(t.st.invalid.Value()),
	}
}
