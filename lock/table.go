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

// Stats is a snapshot of a Table's counters since New.
type Stats struct {
	Entries   uint64 `json:"entries"`    // leases in the table, live or expired awaiting Sweep
	Locked    uint64 `json:"locked"`     // free keys locked
	Renewed   uint64 `json:"renewed"`    // renewals by the holder
	TakenOver uint64 `json:"taken_over"` // expired leases replaced on lock
	Refused   uint64 `json:"refused"`    // lock requests refused by a live lease of another client
	Unlocked  uint64 `json:"unlocked"`   // live leases released by their holder
	Expired   uint64 `json:"expired"`    // expired leases dropped by Sweep
	Invalid   uint64 `json:"invalid"`    // requests rejected for bad input
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
	seq    atomic.Uint64
	st     counters
	closed atomic.Bool
}

// New returns an empty Table configured by opts.
func New(opts Options) *Table {
	opts = opts.withDefaults()
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
//
// The clock is read inside the key's critical step, so a caller stalled
// anywhere before it cannot decide on a time that other callers have
// already moved past (and return a lease that expired before it was made).
func (t *Table) TryLock(group string, q Queue, clientID string) (Lease, bool) {
	if err := validate(group, q, clientID); err != nil {
		t.reject("TryLock", group, q, clientID, err)
		return Lease{}, false
	}
	return t.tryLock(key{group, q}, clientID)
}

func (t *Table) tryLock(k key, clientID string) (Lease, bool) {
	if t.refuseClosed("TryLock", k, clientID) {
		return Lease{}, false
	}
	// Every decision, a refusal too, is made in the key's critical step
	// with the clock read there. A lock-free refusal (read the lease, then
	// the clock) could answer from the state before a concurrent
	// TryLock or Unlock whose clock reading precedes it — an answer no
	// instant of the history gives.
	var (
		kind EventKind
		prev Lease
		now  time.Time
	)
	got, _ := t.leases.Compute(k, func(old Lease, loaded bool) (Lease, bool) {
		now = t.now() // inside the critical step: see TryLock
		prev = old
		expires := now.Add(t.maxLive)
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

// TryLockBatch tries to lock every queue of qs in group for clientID, one
// after another as TryLock does. It returns exactly the queues clientID
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
		if _, ok := t.tryLock(key{group, q}, clientID); ok {
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
// hold a live lease there (another client's lease is never touched). It
// releases whatever lease clientID holds when it runs: an Unlock meant for
// an older lease, delayed past that lease's expiry and the same client's
// next TryLock, releases the newer one. UnlockLease releases exactly one
// lease.
func (t *Table) Unlock(group string, q Queue, clientID string) bool {
	if err := validate(group, q, clientID); err != nil {
		t.reject("Unlock", group, q, clientID, err)
		return false
	}
	return t.unlock(key{group, q}, clientID, 0)
}

// UnlockLease releases the lease l on (group, q) — the same client and the
// same token — if it is still live, and returns whether it did. A newer
// lease of the same client (after l expired and was taken again) is left
// alone.
func (t *Table) UnlockLease(group string, q Queue, l Lease) bool {
	if err := validate(group, q, l.ClientID); err != nil {
		t.reject("UnlockLease", group, q, l.ClientID, err)
		return false
	}
	if l.Token == 0 {
		t.reject("UnlockLease", group, q, l.ClientID, fmt.Errorf("zero token: %w", ErrInvalid))
		return false
	}
	return t.unlock(key{group, q}, l.ClientID, l.Token)
}

// unlock frees clientID's live lease on k (only the one with token, unless
// token is 0), deciding in the key's critical step with the clock read
// there.
func (t *Table) unlock(k key, clientID string, token uint64) bool {
	if t.refuseClosed("Unlock", k, clientID) {
		return false
	}
	var (
		freed, cur Lease
		found      bool
		done       bool
		now        time.Time
	)
	t.leases.Compute(k, func(old Lease, loaded bool) (Lease, bool) {
		now = t.now()
		cur, found = old, loaded
		if loaded && old.ClientID == clientID && (token == 0 || old.Token == token) && live(old, now) {
			freed, done = old, true
			return old, true
		}
		return old, !loaded // keep what is there; insert nothing
	})
	if !done {
		t.logNotHolder(k, clientID, cur, found)
		return false
	}
	t.note(Event{Kind: EventUnlocked, Group: k.group, Queue: k.q, Client: clientID,
		OldClient: clientID, Token: freed.Token, At: now})
	return true
}

func (t *Table) logNotHolder(k key, clientID string, cur Lease, ok bool) {
	// The caller sees false: DEBUG.
	if !t.log.Enabled(context.Background(), slog.LevelDebug) {
		return
	}
	holder := ""
	if ok {
		holder = cur.ClientID
	}
	t.log.LogAttrs(context.Background(), slog.LevelDebug, "lock: unlock without a live lease ignored",
		slog.String("group", k.group),
		slog.String("topic", k.q.Topic),
		slog.String("broker", k.q.Broker),
		slog.Int("queue", k.q.QueueID),
		slog.String("client", clientID),
		slog.String("holder", holder),
	)
}

// UnlockBatch unlocks every queue of qs that clientID holds in group, as
// Unlock does.
func (t *Table) UnlockBatch(group string, qs []Queue, clientID string) {
	for _, q := range qs {
		if err := validate(group, q, clientID); err != nil {
			t.reject("UnlockBatch", group, q, clientID, err)
			continue
		}
		t.unlock(key{group, q}, clientID, 0)
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
	n := 0
	t.leases.Range(func(k key, l Lease) bool {
		if l.ClientID == clientID && t.unlock(k, clientID, 0) {
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
	// A lock-free answer needs the clock read after the lease for "live"
	// and before it for "expired"; reading it in the key's critical step
	// answers both.
	var (
		l  Lease
		ok bool
	)
	t.leases.Compute(key{group, q}, func(old Lease, loaded bool) (Lease, bool) {
		l, ok = old, loaded && live(old, t.now())
		return old, !loaded
	})
	if !ok {
		return Lease{}, false
	}
	return l, true
}

// Sweep drops every expired lease and returns how many it dropped. Expired
// leases are already free for TryLock; Sweep only reclaims memory and
// reports the expiries. Tokens stay unique across Sweep.
func (t *Table) Sweep() int {
	if t.closed.Load() {
		return 0
	}
	n := 0
	t.leases.Range(func(k key, l Lease) bool {
		if live(l, t.now()) { // read after the lease: it was live when read
			return true
		}
		var (
			gone Lease
			done bool
			now  time.Time
		)
		t.leases.Compute(k, func(old Lease, loaded bool) (Lease, bool) {
			now = t.now()
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

// Close ends the table: every later TryLock, TryLockBatch, Unlock,
// UnlockLease, UnlockBatch and UnlockAll is refused (false, nothing held,
// 0) and Sweep drops nothing, while Holder and Stats keep answering from
// memory. A Keeper on a closed table loses its queues at its next renewal.
// Calls running concurrently with Close may still land. It is idempotent
// and returns nil; the Table owns no goroutine or file.
func (t *Table) Close() error {
	t.closed.Store(true)
	return nil
}

func (t *Table) refuseClosed(op string, k key, clientID string) bool {
	if !t.closed.Load() {
		return false
	}
	t.log.Debug("lock: rejected "+op+" on closed table", "group", k.group, "topic", k.q.Topic,
		"broker", k.q.Broker, "queue", k.q.QueueID, "client", clientID)
	return true
}

// Stats returns a snapshot of the table's counters.
func (t *Table) Stats() Stats {
	return Stats{
		Entries:   uint64(t.leases.Size()),
		Locked:    uint64(t.st.locked.Value()),
		Renewed:   uint64(t.st.renewed.Value()),
		TakenOver: uint64(t.st.takenOver.Value()),
		Refused:   uint64(t.st.refused.Value()),
		Unlocked:  uint64(t.st.unlocked.Value()),
		Expired:   uint64(t.st.expired.Value()),
		Invalid:   uint64(t.st.invalid.Value()),
	}
}
