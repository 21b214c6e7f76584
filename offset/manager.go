package offset

import (
	"context"
	"encoding/json"
	"fmt"
	"hash/maphash"
	"log/slog"
	"path/filepath"
	"slices"
	"sync"
	"sync/atomic"
	"time"

	"github.com/puzpuzpuz/xsync/v3"

	"github.com/brokercore/brokercore/internal/fsx"
)

// key identifies one committed offset.
type key struct {
	group, topic string
	queue        int
}

// entry is the state of one key. Readers use the atomics without a lock;
// writers that must check-and-set (fenced commits, resets, removal) hold mu.
// A plain Commit is a single atomic swap.
type entry struct {
	offset atomic.Int64
	epoch  atomic.Uint64
	// Commit counters live in the entry, whose cache line the commit writes
	// anyway: a shared counter would bounce between cores on every commit.
	commits, fenced, backwards atomic.Uint64
	mu                         sync.Mutex
	dead                       atomic.Bool // removed from the map; writers retry on a fresh entry
	// claimed: a fenced committer has learnt this key's epoch (Epoch,
	// Position, CommitFenced), so a plain Commit must fence it out.
	claimed atomic.Bool
	_       [8]byte // 64 bytes: one entry, one cache line
}

var keySeed = maphash.MakeSeed()

// hashKey is the map's hash: two runtime string hashes and a multiply are
// cheaper than the generic reflection-driven struct hash xsync uses by default.
func hashKey(k key, seed uint64) uint64 {
	h := maphash.String(keySeed, k.group)
	h = (h ^ seed) * 0x9E3779B97F4A7C15
	h ^= maphash.String(keySeed, k.topic)
	h = (h ^ uint64(k.queue)) * 0xBF58476D1CE4E5B9
	return h ^ h>>31
}

// newClaimedEntry is the entry a fenced commit creates: at epoch 0 and
// claimed from the start.
func newClaimedEntry(offset int64) *entry {
	e := newEntry(offset, 0)
	e.claimed.Store(true)
	return e
}

func newEntry(offset int64, epoch uint64) *entry {
	e := &entry{}
	e.offset.Store(offset)
	e.epoch.Store(epoch)
	return e
}

// Manager is the broker-side table of committed consumer offsets, keyed by
// (group, topic, queue), with an epoch per key that every reset bumps. It is
// safe for concurrent use; commits on different keys never share a lock.
type Manager struct {
	path      string
	syncEvery bool
	now       func() time.Time
	log       *slog.Logger

	entries *xsync.MapOf[key, *entry]
	// claims holds the keys without an entry whose epoch (0) a fenced
	// committer has read: a pop serving a queue nobody committed yet.
	claims  *xsync.MapOf[key, struct{}]
	bounds  Bounds
	onReset func(group, topic string, queueID int, offset int64, epoch uint64)
	fs      fsx.FS
	floor   atomic.Uint64 // highest epoch of any removed entry: epochs of a re-created key start above it
	dirty   atomic.Bool
	closed  atomic.Bool

	// persistMu serializes writing the file and every epoch change (Reset,
	// Clone), so a reset's new epoch is on disk before anyone can see it.
	persistMu  sync.Mutex
	pathIsGood bool // path holds a file we loaded or wrote: safe to keep as backup

	stop      chan struct{}
	done      chan struct{}
	closeOnce sync.Once
	closeErr  error

	st managerCounters
}

type managerCounters struct {
	stale, invalid                             *xsync.Counter
	retiredCommits, retiredFenced, retiredBack atomic.Uint64 // counts of removed entries
	resets, removes, flushes, flushErrors      atomic.Uint64
	fencing, beyondEnd                         atomic.Uint64
	lastFlush                                  atomic.Int64 // Unix nanoseconds
	lastFlushDur, lastFlushBytes               atomic.Int64
}

// Stats is a snapshot of a Manager's counters. Encoded as JSON, durations
// are strings ("1.5ms").
type Stats struct {
	Keys               uint64        `json:"keys"`                 // (group, topic, queue) entries held
	Commits            uint64        `json:"commits"`              // accepted Commit and CommitFenced calls
	FencedCommits      uint64        `json:"fenced_commits"`       // accepted CommitFenced calls
	FencingCommits     uint64        `json:"fencing_commits"`      // Commit calls applied as a reset because a fenced committer served the key
	StaleEpochRejected uint64        `json:"stale_epoch_rejected"` // CommitFenced calls refused with ErrStaleEpoch
	InvalidRejected    uint64        `json:"invalid_rejected"`     // calls refused with ErrInvalid
	BeyondEndRejected  uint64        `json:"beyond_end_rejected"`  // calls refused with ErrBeyondEnd
	BackwardCommits    uint64        `json:"backward_commits"`     // accepted commits that moved an offset backwards without a reset
	Resets             uint64        `json:"resets"`               // keys reset (Reset, ResetToTime, each key of a Clone, fencing commits)
	Removes            uint64        `json:"removes"`              // keys removed
	Flushes            uint64        `json:"flushes"`              // files written
	FlushErrors        uint64        `json:"flush_errors"`         // failed file writes
	LastFlush          time.Time     `json:"last_flush"`           // Options.Now at the last successful write
	LastFlushDuration  time.Duration `json:"-"`                    // how long that write took
	LastFlushBytes     uint64        `json:"last_flush_bytes"`     // its size
}

// MarshalJSON encodes s with snake_case keys and LastFlushDuration as a
// duration string under "last_flush_duration".
func (s Stats) MarshalJSON() ([]byte, error) {
	type plain Stats
	return json.Marshal(struct {
		plain
		LastFlushDuration string `json:"last_flush_duration"`
	}{plain(s), s.LastFlushDuration.String()})
}

// Open creates a Manager. With a Path it loads the file there (a missing file
// is a first run; a torn or corrupt one fails with ErrCorrupt, see
// Options.FallbackToBackup) and starts the background flush, which Close
// stops. Leftover temporary files of an interrupted write are removed.
func Open(opts Options) (*Manager, error) {
	opts = opts.withDefaults()
	m := &Manager{
		path:    opts.Path,
		now:     opts.Now,
		log:     opts.Logger,
		entries: xsync.NewMapOfWithHasher[key, *entry](hashKey),
		claims:  xsync.NewMapOfWithHasher[key, struct{}](hashKey),
		bounds:  opts.Bounds,
		onReset: opts.OnReset,
		fs:      opts.fs,
		stop:    make(chan struct{}),
		done:    make(chan struct{}),
		st: managerCounters{
			stale: xsync.NewCounter(), invalid: xsync.NewCounter(),
		},
	}
	every := opts.FlushEvery
	m.syncEvery = every < 0
	if m.path == "" {
		close(m.done)
		return m, nil
	}
	if err := m.fs.MkdirAll(filepath.Dir(m.path), 0o755); err != nil {
		err = fmt.Errorf("offset: open %s: %w", m.path, err)
		m.log.Debug("offset: open failed", "file", m.path, "err", err)
		return nil, err
	}
	if err := m.load(opts.FallbackToBackup); err != nil {
		m.log.Debug("offset: open failed", "file", m.path, "err", err)
		return nil, err
	}
	if m.syncEvery {
		close(m.done)
	} else {
		go m.flushLoop(every)
	}
	return m, nil
}

// check validates a key (and an offset) and counts the rejection.
func (m *Manager) check(op, group, topic string, queueID int, offset int64) error {
	if group != "" && topic != "" && queueID >= 0 && offset >= 0 {
		return nil
	}
	m.st.invalid.Inc()
	m.log.Debug("offset: rejected invalid request", "op", op, "group", group, "topic", topic,
		"queue", queueID, "offset", offset)
	return fmt.Errorf("offset: %s %q/%q/%d at %d: %w", op, group, topic, queueID, offset, ErrInvalid)
}

// checkEnd refuses an offset past the queue's end (with Options.Bounds).
func (m *Manager) checkEnd(op, group, topic string, queueID int, offset int64) error {
	if m.bounds == nil {
		return nil
	}
	end := m.bounds.MaxOffset(topic, queueID)
	if offset <= end {
		return nil
	}
	m.st.beyondEnd.Add(1)
	m.log.Debug("offset: rejected offset beyond the queue's end", "op", op, "group", group,
		"topic", topic, "queue", queueID, "offset", offset, "max", end)
	return &EndError{Op: op, Group: group, Topic: topic, QueueID: queueID, Offset: offset, Max: end}
}

func (m *Manager) checkOpen(op string) error {
	if m.closed.Load() {
		m.log.Debug("offset: rejected request on closed manager", "op", op)
		return fmt.Errorf("offset: %s: %w", op, ErrClosed)
	}
	return nil
}

func (m *Manager) markDirty() {
	if !m.dirty.Load() {
		m.dirty.Store(true)
	}
}

// afterCommit accounts an accepted commit and, in FlushEveryCommit mode,
// writes it out before the commit returns. The slow paths live in their own
// functions so that k does not escape (and allocate) on the fast path.
func (m *Manager) afterCommit(k *key, e *entry, old, offset int64, had, fenced bool) error {
	e.commits.Add(1)
	if fenced {
		e.fenced.Add(1)
	}
	if had && offset < old {
		e.backwards.Add(1)
		m.backwardCommit(*k, old, offset)
	}
	m.markDirty()
	if m.syncEvery && m.path != "" {
		return m.flushCommit(*k)
	}
	return nil
}

//go:noinline
func (m *Manager) backwardCommit(k key, old, offset int64) {
	if !m.log.Enabled(context.Background(), slog.LevelWarn) {
		return // building the attributes allocates; skip it for a discarding logger
	}
	// RocketMQ's "[NOTIFYME]update consumer offset less than store" line.
	m.log.Warn("offset: commit moves offset backwards without a reset", "group", k.group,
		"topic", k.topic, "queue", k.queue, "offset", offset, "old_offset", old)
}

//go:noinline
func (m *Manager) flushCommit(k key) error {
	if err := m.Flush(); err != nil {
		return fmt.Errorf("offset: commit %s/%s/%d applied in memory but not written: %w", k.group, k.topic, k.queue, err)
	}
	return nil
}

// Commit records offset (the next offset to consume) for the key, whatever
// its epoch: it is for hosts that do not fence. Moving an offset backwards is
// accepted and logged.
//
// A key that a fenced committer serves — one whose epoch was read through
// Epoch or Position or used by CommitFenced, as a pop service does on every
// pop — is never overwritten behind that committer's back: there Commit is
// applied as a Reset (the epoch is bumped and the file written before Commit
// returns), so the committer's older progress is refused with ErrStaleEpoch
// and it restarts at this offset instead of writing its own over it.
//
// With Options.Bounds, an offset past the queue's end is ErrBeyondEnd, as
// for Reset.
func (m *Manager) Commit(group, topic string, queueID int, offset int64) error {
	if err := m.check("commit", group, topic, queueID, offset); err != nil {
		return err
	}
	if err := m.checkOpen("commit"); err != nil {
		return err
	}
	if err := m.checkEnd("commit", group, topic, queueID, offset); err != nil {
		return err
	}
	k := key{group, topic, queueID}
	for {
		e, ok := m.entries.Load(k)
		if !ok {
			if e, ok = m.entries.LoadOrCompute(k, func() *entry { return newEntry(offset, 0) }); !ok {
				// Created. A claim made before it (a fenced committer
				// read epoch 0 of the missing key) must be fenced out.
				if _, claimed := m.claims.Load(k); claimed {
					return m.fencingCommit(k, e, offset)
				}
				return m.afterCommit(&k, e, 0, offset, false, false)
			}
		}
		if e.dead.Load() {
			continue // removed under us: the commit goes to the key's next life
		}
		if e.claimed.Load() {
			return m.fencingCommit(k, e, offset)
		}
		old := e.offset.Swap(offset)
		// A fenced committer that claimed the key after the check above
		// read its epoch after our swap, and so reads our offset with it;
		// one that claimed it before is seen here and fenced out.
		if e.claimed.Load() {
			return m.fencingCommit(k, e, offset)
		}
		return m.afterCommit(&k, e, old, offset, true, false)
	}
}

// fencingCommit applies a plain commit on a key a fenced committer serves
// as a reset of that key.
//
//go:noinline
func (m *Manager) fencingCommit(k key, e *entry, offset int64) error {
	e.claimed.Store(true)
	m.claims.Delete(k)
	e.commits.Add(1)
	m.st.fencing.Add(1)
	if _, err := m.reset("fencing commit", []record{{key: k, offset: offset}}); err != nil {
		return err
	}
	return nil
}

// CommitFenced records offset only if epoch is the key's current epoch (0 for
// a key never reset); otherwise it returns ErrStaleEpoch and changes nothing.
func (m *Manager) CommitFenced(group, topic string, queueID int, offset int64, epoch uint64) error {
	if err := m.check("fenced commit", group, topic, queueID, offset); err != nil {
		return err
	}
	if err := m.checkOpen("fenced commit"); err != nil {
		return err
	}
	if err := m.checkEnd("fenced commit", group, topic, queueID, offset); err != nil {
		return err
	}
	k := key{group, topic, queueID}
	for {
		e, ok := m.entries.Load(k)
		if !ok {
			if epoch != 0 {
				return m.stale(k, offset, epoch, 0)
			}
			// Created claimed, before anyone can see it: a plain Commit
			// that finds the entry must already see the fenced committer.
			if e, ok = m.entries.LoadOrCompute(k, func() *entry { return newClaimedEntry(offset) }); !ok {
				m.claims.Delete(k)
				return m.afterCommit(&k, e, 0, offset, false, true)
			}
		}
		e.mu.Lock()
		if e.dead.Load() {
			e.mu.Unlock()
			continue
		}
		if cur := e.epoch.Load(); cur != epoch {
			e.mu.Unlock()
			return m.stale(k, offset, epoch, cur)
		}
		claim(e)
		old := e.offset.Swap(offset)
		e.mu.Unlock()
		return m.afterCommit(&k, e, old, offset, true, true)
	}
}

func (m *Manager) stale(k key, offset int64, epoch, cur uint64) error {
	m.st.stale.Inc()
	if m.log.Enabled(context.Background(), slog.LevelDebug) {
		m.log.Debug("offset: rejected commit with stale epoch", "group", k.group, "topic", k.topic,
			"queue", k.queue, "offset", offset, "epoch", epoch, "current_epoch", cur)
	}
	return fmt.Errorf("offset: commit %s/%s/%d at %d with epoch %d, current %d: %w",
		k.group, k.topic, k.queue, offset, epoch, cur, ErrStaleEpoch)
}

// Committed returns the committed offset of the key and whether there is one.
func (m *Manager) Committed(group, topic string, queueID int) (int64, bool) {
	e, ok := m.entries.Load(key{group, topic, queueID})
	if !ok {
		return 0, false
	}
	return e.offset.Load(), true
}

// Epoch returns the key's current epoch: 0 until its first reset. Reading
// it marks the key as served by a fenced committer (see Commit).
func (m *Manager) Epoch(group, topic string, queueID int) uint64 {
	e, ok := m.claimedEntry(key{group, topic, queueID})
	if !ok {
		return 0
	}
	return e.epoch.Load()
}

// peekEpoch returns the key's epoch without claiming it.
func (m *Manager) peekEpoch(k key) uint64 {
	if e, ok := m.entries.Load(k); ok {
		return e.epoch.Load()
	}
	return 0
}

// claimedEntry returns the key's entry, marked claimed, or records a claim
// on the missing key. The claim is stored before the second look, so a
// Commit that creates the entry meanwhile either sees the claim or is seen.
func (m *Manager) claimedEntry(k key) (*entry, bool) {
	if e, ok := m.entries.Load(k); ok {
		claim(e)
		return e, true
	}
	if k.group == "" || k.topic == "" || k.queue < 0 {
		return nil, false
	}
	if _, ok := m.claims.Load(k); !ok {
		m.claims.Store(k, struct{}{})
	}
	if e, ok := m.entries.Load(k); ok {
		claim(e)
		return e, true
	}
	return nil, false
}

func claim(e *entry) {
	if !e.claimed.Load() { // read first: no cache-line write per pop
		e.claimed.Store(true)
	}
}

// Position returns the key's committed offset and epoch as one consistent
// pair (and whether the key has an offset). Callers that read Epoch and
// Committed separately should read Epoch first: a reset stores the offset
// before the epoch, so a new epoch is never seen with the old offset. Like
// Epoch, it marks the key as served by a fenced committer.
func (m *Manager) Position(group, topic string, queueID int) (offset int64, epoch uint64, ok bool) {
	e, ok := m.claimedEntry(key{group, topic, queueID})
	if !ok {
		return 0, 0, false
	}
	e.mu.Lock()
	defer e.mu.Unlock()
	return e.offset.Load(), e.epoch.Load(), true
}

// Lag returns max − committed, never negative (a key with no commit counts
// as committed at 0). Invalid keys have no lag.
func (m *Manager) Lag(group, topic string, queueID int, max int64) int64 {
	if group == "" || topic == "" || queueID < 0 {
		return 0
	}
	committed, _ := m.Committed(group, topic, queueID)
	if lag := max - committed; lag > 0 {
		return lag
	}
	return 0
}

// Groups returns the groups with at least one committed offset, sorted.
func (m *Manager) Groups() []string {
	set := map[string]struct{}{}
	m.entries.Range(func(k key, _ *entry) bool {
		set[k.group] = struct{}{}
		return true
	})
	return sortedKeys(set)
}

// Topics returns the topics the group has committed offsets for, sorted.
func (m *Manager) Topics(group string) []string {
	set := map[string]struct{}{}
	m.entries.Range(func(k key, _ *entry) bool {
		if k.group == group {
			set[k.topic] = struct{}{}
		}
		return true
	})
	return sortedKeys(set)
}

func sortedKeys(set map[string]struct{}) []string {
	out := make([]string, 0, len(set))
	for s := range set {
		out = append(out, s)
	}
	slices.Sort(out)
	return out
}

// Remove deletes every offset of the group. The highest epoch removed is
// remembered (and persisted), so a later reset of a re-created key never
// hands out an epoch that was used before. Removal is persisted by the next
// flush, like a commit.
func (m *Manager) Remove(group string) {
	if group == "" {
		m.check("remove", group, "-", 0, 0)
		return
	}
	m.removeWhere("remove", func(k key) bool { return k.group == group })
}

// RemoveTopic deletes the group's offsets of one topic (every queue), with
// the same epoch guarantee as Remove.
func (m *Manager) RemoveTopic(group, topic string) {
	if group == "" || topic == "" {
		m.check("remove topic", group, topic, 0, 0)
		return
	}
	m.removeWhere("remove topic", func(k key) bool { return k.group == group && k.topic == topic })
}

// PurgeTopic deletes the offsets of topic for every group (a deleted
// topic, RocketMQ's cleanOffsetByTopic), with the same epoch guarantee as
// Remove, and writes the file before it returns (with a Path): the file is
// replaced atomically, so a crash leaves the offsets either all there or
// all gone, and other topics' offsets untouched. It answers the write's
// error; the removal stands in memory either way and the next flush
// retries.
func (m *Manager) PurgeTopic(topic string) error {
	if topic == "" {
		return m.check("purge topic", "-", topic, 0, 0)
	}
	if err := m.checkOpen("purge topic"); err != nil {
		return err
	}
	m.removeWhere("purge topic", func(k key) bool { return k.topic == topic })
	return m.Flush()
}

func (m *Manager) removeWhere(op string, match func(key) bool) {
	if m.closed.Load() { // Remove answers nothing: WARN
		m.log.Warn("offset: rejected request on closed manager", "op", op)
		return
	}
	m.claims.Range(func(k key, _ struct{}) bool {
		if match(k) {
			m.claims.Delete(k)
		}
		return true
	})
	var keys []key
	m.entries.Range(func(k key, _ *entry) bool {
		if match(k) {
			keys = append(keys, k)
		}
		return true
	})
	for _, k := range keys {
		m.entries.Compute(k, func(e *entry, loaded bool) (*entry, bool) {
			if loaded {
				e.mu.Lock()
				e.dead.Store(true)
				m.raiseFloor(e.epoch.Load())
				e.mu.Unlock()
				m.st.retiredCommits.Add(e.commits.Load())
				m.st.retiredFenced.Add(e.fenced.Load())
				m.st.retiredBack.Add(e.backwards.Load())
				m.st.removes.Add(1)
				m.log.Info("offset: removed", "group", k.group, "topic", k.topic, "queue", k.queue,
					"offset", e.offset.Load(), "epoch", e.epoch.Load())
			}
			return e, true
		})
	}
	m.markDirty()
	if m.syncEvery && len(keys) > 0 {
		m.Flush() // a failure is logged and counted; the next write retries
	}
}

func (m *Manager) raiseFloor(epoch uint64) {
	for {
		f := m.floor.Load()
		if epoch <= f || m.floor.CompareAndSwap(f, epoch) {
			return
		}
	}
}

// Close stops the background flush, waits for it, writes the file a last
// time and refuses further writes with ErrClosed. Reads keep answering from
// memory. Close is idempotent; later calls return the first call's result.
// A commit that runs concurrently with Close may land after the last write:
// stop committing before closing.
func (m *Manager) Close() error {
	m.closeOnce.Do(func() { m.closeErr = m.shutdown(true) })
	return m.closeErr
}

// shutdown stops the manager; flush=false models a crash (tests only).
func (m *Manager) shutdown(flush bool) error {
	m.closed.Store(true)
	close(m.stop)
	<-m.done
	if !flush {
		return nil
	}
	m.persistMu.Lock()
	defer m.persistMu.Unlock()
	return m.persist(nil)
}

// Stats returns a snapshot of the counters. It walks every key (commit
// counts are kept per key), so call it at metrics-scrape rates, not per commit.
func (m *Manager) Stats() Stats {
	s := Stats{
		Keys:               uint64(m.entries.Size()),
		FencingCommits:     m.st.fencing.Load(),
		BeyondEndRejected:  m.st.beyondEnd.Load(),
		Commits:            m.st.retiredCommits.Load(),
		FencedCommits:      m.st.retiredFenced.Load(),
		StaleEpochRejected: uint64(m.st.stale.Value()),
		InvalidRejected:    uint64(m.st.invalid.Value()),
		BackwardCommits:    m.st.retiredBack.Load(),
		Resets:             m.st.resets.Load(),
		Removes:            m.st.removes.Load(),
		Flushes:            m.st.flushes.Load(),
		FlushErrors:        m.st.flushErrors.Load(),
		LastFlushDuration:  time.Duration(m.st.lastFlushDur.Load()),
		LastFlushBytes:     uint64(m.st.lastFlushBytes.Load()),
	}
	m.entries.Range(func(_ key, e *entry) bool {
		s.Commits += e.commits.Load()
		s.FencedCommits += e.fenced.Load()
		s.BackwardCommits += e.backwards.Load()
		return true
	})
	if ns := m.st.lastFlush.Load(); ns != 0 {
		s.LastFlush = time.Unix(0, ns)
	}
	return s
}
