package schedule

import (
	"fmt"
	"log/slog"
	"sync"
	"sync/atomic"
	"time"

	"github.com/brokercore/brokercore/store"
)

// Log is what the scheduler needs from storage; *store.Store satisfies it.
//
// Read must return messages the caller owns (fresh copies): the scheduler
// moves their Keys, Body and Properties into the messages it appends.
// Append must be all-or-nothing for a batch.
type Log interface {
	Append(msgs ...*store.Message) error
	Read(topic string, queueID int, offset int64, max int) ([]*store.Message, error)
	// MinOffset may move forward under retention: the scheduler skips to it
	// and logs what was lost.
	MinOffset(topic string, queueID int) int64
	MaxOffset(topic string, queueID int) int64
}

// Topic is where delayed messages wait: level L lives in queue L-1.
const Topic = "SCHEDULE_TOPIC_XXXX"

// DefaultLevels are RocketMQ's 18 delay levels, used when Options.Levels is "".
const DefaultLevels = "1s 5s 10s 30s 1m 2m 3m 4m 5m 6m 7m 8m 9m 10m 20m 30m 1h 2h"

// DefaultTick is how often, at the latest, a started level re-checks due
// times when Options.Tick is 0.
const DefaultTick = 100 * time.Millisecond

// DefaultMaxBatch is how many due messages one append carries at most when
// Options.MaxBatch is 0 (the store's MaxReadBatch). Progress is persisted once
// per batch, so a crash delivers at most this many messages of a level again.
const DefaultMaxBatch = 1024

// MaxRetryBackoff caps the wait between retries of a failed append. The wait
// starts at one Tick and doubles; it is counted in ticks, so Stop ends it at
// once and tests with a short Tick never sleep long.
const MaxRetryBackoff = 5 * time.Second

// Options configure a Scheduler. The zero value is a working default.
type Options struct {
	// Levels is the string form of the delay levels ("1s 5s 1m 2h 1d");
	// "" means DefaultLevels. See ParseLevels.
	Levels string
	// ProgressPath is the progress file (level -> next offset). "" keeps
	// progress in memory only: a new Scheduler then starts each level at the
	// queue's MinOffset and delivers everything still in the log again.
	ProgressPath string
	// Now is the clock every due decision reads; nil means time.Now.
	Now func() time.Time
	// Logger receives lifecycle, recovery, retry and loss lines; nil
	// discards them.
	Logger *slog.Logger
	// Tick is how often a started level re-checks due times; 0 means
	// DefaultTick.
	Tick time.Duration
	// MaxBatch caps the messages per append; 0 means DefaultMaxBatch.
	MaxBatch int
}

// Scheduler moves delayed messages from Topic back to their real topic when
// they are due. Its methods are safe for concurrent use; Start and Stop may be
// called from any goroutine in any order.
type Scheduler struct {
	src      Log
	levels   []time.Duration
	lv       []*level
	path     string
	now      func() time.Time
	log      *slog.Logger
	tick     time.Duration
	maxBatch int

	// lifeMu serializes Start and Stop; each holds it for its whole call.
	lifeMu sync.Mutex
	gen    uint64 // last generation number; under lifeMu
	// cur is the current generation, nil while stopped. It changes only
	// under lifeMu and every level's mu, so a delivery that holds its
	// level's mu sees a stable answer to "is my generation current".
	cur atomic.Pointer[epoch]

	saveMu   sync.Mutex     // serializes progress file writes
	saveReq  atomic.Uint64  // persist calls so far (tickets)
	saveDone uint64         // every ticket up to this one is on disk; under saveMu
	saveErr  error          // result of the last write; under saveMu
	saveFail atomic.Int64   // failed progress writes
	all      sync.WaitGroup // every loop goroutine ever started

	// guardOff is a test-only switch that removes the generation guard and
	// turns the lifecycle into the one of the field report (a shared
	// "started" flag, a Stop that neither waits nor fences, a task that
	// reschedules itself into whatever generation is current). It exists
	// only so a test can show that the guard is what prevents the double
	// delivery. Never set outside tests.
	guardOff bool
}

// epoch is one generation: the loops started by one Start.
type epoch struct {
	n    uint64
	stop chan struct{}
	wg   sync.WaitGroup
}

// level is one delay level's shared state.
type level struct {
	n     int // 1-based level
	queue int // n-1
	delay time.Duration

	// mu is held across "is my generation current" + read + append +
	// progress update, and Stop takes it to end the generation: a delivery
	// either completes before Stop proceeds or never starts.
	mu sync.Mutex

	next      atomic.Int64 // next offset to deliver; written under mu
	unsaved   bool         // the progress file lacks next (a write failed); under mu
	placed    bool         // next was set by a reload (so 0 is a real position); under mu
	oldestDue atomic.Int64 // unix nanos: due time of the oldest undelivered message; 0 none seen
	delivered atomic.Int64
	retried   atomic.Int64
	skipped   atomic.Int64 // lost to retention before delivery
	malformed atomic.Int64 // records in Topic without scheduling properties
}

// New returns a stopped Scheduler over log. It loads the progress file, if
// any, and clamps it into each level queue's [MinOffset, MaxOffset] range. A
// torn or corrupt progress file is ErrCorrupt.
func New(log Log, opts Options) (*Scheduler, error) {
	if log == nil {
		return nil, fmt.Errorf("new: nil log: %w", ErrInvalid)
	}
	spec := opts.Levels
	if spec == "" {
		spec = DefaultLevels
	}
	levels, err := ParseLevels(spec)
	if err != nil {
		return nil, fmt.Errorf("new: %w", err)
	}
	if opts.Tick < 0 || opts.MaxBatch < 0 {
		return nil, fmt.Errorf("new: negative Tick %v or MaxBatch %d: %w", opts.Tick, opts.MaxBatch, ErrInvalid)
	}
	s := &Scheduler{
		src:      log,
		levels:   levels,
		path:     opts.ProgressPath,
		now:      opts.Now,
		log:      opts.Logger,
		tick:     opts.Tick,
		maxBatch: opts.MaxBatch,
	}
	if s.now == nil {
		s.now = time.Now
	}
	if s.log == nil {
		s.log = slog.New(slog.DiscardHandler)
	}
	if s.tick == 0 {
		s.tick = DefaultTick
	}
	if s.maxBatch == 0 {
		s.maxBatch = DefaultMaxBatch
	}
	for i, d := range levels {
		s.lv = append(s.lv, &level{n: i + 1, queue: i, delay: d})
	}
	if err := s.reload(); err != nil {
		s.log.Error("schedule: progress not loaded", "path", s.path, "err", err)
		return nil, fmt.Errorf("new: %w", err)
	}
	return s, nil
}

// Levels returns the delay of each level; index 0 is level 1.
func (s *Scheduler) Levels() []time.Duration {
	return append([]time.Duration(nil), s.levels...)
}

// Start starts one delivery loop per level under a new generation. It
// reloads the progress file first (another node may have advanced it) and
// fails with ErrCorrupt, staying stopped, if the file is corrupt. Starting a
// started Scheduler does nothing.
func (s *Scheduler) Start() error {
	s.lifeMu.Lock()
	defer s.lifeMu.Unlock()
	if s.cur.Load() != nil {
		return nil
	}
	if err := s.reload(); err != nil {
		s.log.Error("schedule: start refused", "err", err)
		return fmt.Errorf("start: %w", err)
	}
	s.gen++
	e := &epoch{n: s.gen, stop: make(chan struct{})}
	s.lockLevels()
	s.cur.Store(e)
	s.unlockLevels()
	for _, lv := range s.lv {
		e.wg.Add(1)
		s.all.Add(1)
		go s.loop(e, lv, cursor{next: lv.next.Load()})
	}
	s.log.Info("schedule: started", "generation", e.n, "levels", len(s.lv))
	return nil
}

// Stop ends the current generation and returns after its in-flight
// deliveries have finished, its loops have exited and progress is recorded.
// A loop or delivery of an ended generation can neither append, nor go on,
// nor write progress. Stopping a stopped Scheduler does nothing.
func (s *Scheduler) Stop() error {
	s.lifeMu.Lock()
	defer s.lifeMu.Unlock()
	e := s.cur.Load()
	if e == nil {
		return nil
	}
	if s.guardOff { // the field report's stop(): flip the flag, cancel, return
		s.cur.Store(nil)
		close(e.stop)
		return nil
	}
	// Every delivery holds its level's mu from the generation check to the
	// progress update, so once all are held nothing of e is mid-append.
	s.lockLevels()
	s.cur.Store(nil)
	s.unlockLevels()
	close(e.stop)
	e.wg.Wait()
	err := s.persist()
	if err != nil {
		s.log.Error("schedule: progress not saved on stop", "generation", e.n, "err", err)
	}
	s.log.Info("schedule: stopped", "generation", e.n)
	return err
}

// Progress returns level -> next queue offset to deliver.
func (s *Scheduler) Progress() map[int]int64 {
	p := make(map[int]int64, len(s.lv))
	for _, lv := range s.lv {
		p[lv.n] = lv.next.Load()
	}
	return p
}

// Stats are the scheduler's counters.
type Stats struct {
	Running    bool
	Generation uint64 // of the running generation; 0 while stopped
	Delivered  int64  // messages appended to their real topic
	Retried    int64  // failed appends (each retried from the same offset)
	Skipped    int64  // messages lost to retention before their delivery
	SaveFailed int64  // failed progress file writes (delivery waits for the next good one)
	Levels     []LevelStats
}

// LevelStats are one level's counters.
type LevelStats struct {
	Level     int
	Delay     time.Duration
	Next      int64 // next queue offset to deliver
	Delivered int64
	Retried   int64
	Skipped   int64
	Malformed int64 // records in Topic without scheduling properties, skipped
	// Lag is now minus the due time of the oldest undelivered message the
	// level has seen, 0 if that message is not due yet or none is known.
	Lag time.Duration
}

// Stats returns a snapshot of the counters.
func (s *Scheduler) Stats() Stats {
	now := s.now()
	st := Stats{SaveFailed: s.saveFail.Load()}
	if e := s.cur.Load(); e != nil {
		st.Running, st.Generation = true, e.n
	}
	for _, lv := range s.lv {
		ls := LevelStats{
			Level: lv.n, Delay: lv.delay, Next: lv.next.Load(),
			Delivered: lv.delivered.Load(), Retried: lv.retried.Load(),
			Skipped: lv.skipped.Load(), Malformed: lv.malformed.Load(),
		}
		if due := lv.oldestDue.Load(); due != 0 {
			if lag := now.Sub(time.Unix(0, due)); lag > 0 {
				ls.Lag = lag
			}
		}
		st.Delivered += ls.Delivered
		st.Retried += ls.Retried
		st.Skipped += ls.Skipped
		st.Levels = append(st.Levels, ls)
	}
	return st
}

// lockLevels takes every level's mu in level order: the fence between
// generations. (Without the guard, the field report's design, there is none.)
func (s *Scheduler) lockLevels() {
	if s.guardOff {
		return
	}
	for _, lv := range s.lv {
		lv.mu.Lock()
	}
}

func (s *Scheduler) unlockLevels() {
	if s.guardOff {
		return
	}
	for _, lv := range s.lv {
		lv.mu.Unlock()
	}
}

// isCurrent answers "may a task of generation e act"; the caller holds the
// task's level mu.
func (s *Scheduler) isCurrent(e *epoch) bool {
	if s.guardOff {
		return s.cur.Load() != nil // the field report's isStarted()
	}
	return s.cur.Load() == e
}

// reload merges the progress file into memory (the larger offset wins, so
// progress never moves back because of an older file) and clamps every level
// into its queue's range. Called with no generation running.
func (s *Scheduler) reload() error {
	var p map[int]int64
	if s.path != "" {
		var err error
		if p, err = loadProgress(s.path); err != nil {
			return err
		}
	}
	for l, off := range p {
		if l > len(s.lv) {
			s.log.Warn("schedule: progress for an unknown level ignored", "level", l, "next", off, "levels", len(s.lv))
		}
	}
	s.lockLevels()
	defer s.unlockLevels()
	for _, lv := range s.lv {
		want := lv.next.Load()
		off, known := p[lv.n]
		if known && off > want {
			want = off
		}
		lo, hi := s.src.MinOffset(Topic, lv.queue), s.src.MaxOffset(Topic, lv.queue)
		if want < lo {
			// Only a first placement may start at MinOffset silently; a
			// known position (from the file or from an earlier New/Start,
			// even 0) that retention overtook is a loss to count and log.
			if known || want > 0 || lv.placed {
				s.log.Warn("schedule: retention removed undelivered messages", "level", lv.n, "queue", lv.queue, "from", want, "to", lo, "lost", lo-want)
				lv.skipped.Add(lo - want)
			}
			want = lo
		}
		if want > hi {
			s.log.Warn("schedule: progress beyond the end of the log, clamped", "level", lv.n, "queue", lv.queue, "progress", want, "max", hi)
			want = hi
		}
		lv.next.Store(want)
		lv.placed = true
	}
	return nil
}

// persist writes every level's progress; it returns once a write that
// started after the call (so includes every offset stored before it) is on
// disk. Concurrent calls share writes like a group commit: while one write
// is being fsynced the others queue, and the next write covers them all.
func (s *Scheduler) persist() error {
	if s.path == "" {
		return nil
	}
	ticket := s.saveReq.Add(1)
	s.saveMu.Lock()
	defer s.saveMu.Unlock()
	if s.saveDone >= ticket {
		return s.saveErr
	}
	covers := s.saveReq.Load()
	s.saveErr = saveProgress(s.path, s.Progress())
	s.saveDone = covers
	if s.saveErr != nil {
		s.saveFail.Add(1)
	}
	return s.saveErr
}
