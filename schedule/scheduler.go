package schedule

import (
	"bytes"
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

// Scheduler moves delayed messages from Topic, and timer messages from
// TimerTopic, back to their real topic when they are due. Its methods are
// safe for concurrent use; Start and Stop may be called from any goroutine
// in any order.
type Scheduler struct {
	src    Log
	opts   Options
	levels []time.Duration
	lv     []*level
	timers *timerLane
	now    func() time.Time
	log    *slog.Logger
	pl     ProgressLog // nil: progress in the file at opts.ProgressPath
	// journal is the progress file (nil with a ProgressLog or no
	// ProgressPath); used under saveMu.
	journal *progressJournal
	// done is the Log's Done channel when it has one (as *store.Store):
	// once it is closed, Start and Cancel answer ErrClosed.
	done <-chan struct{}

	// lifeMu serializes Start and Stop; each holds it for its whole call.
	lifeMu sync.Mutex
	gen    uint64      // last generation number; under lifeMu
	closed atomic.Bool // Close was called; written under lifeMu
	// cur is the current generation, nil while stopped. It changes only
	// under lifeMu and every lane's mu, so a delivery that holds its lane's
	// mu sees a stable answer to "is my generation current".
	cur atomic.Pointer[generation]

	saveMu   sync.Mutex    // serializes progress writes
	saveReq  atomic.Uint64 // file mode: persist calls so far (tickets)
	saveDone uint64        // file mode: every ticket up to this one is on disk; under saveMu
	saveErr  error         // file mode: result of the last write; under saveMu
	stored   []byte        // the last progress record written; under saveMu
	// migrating: the progress file New loaded is of the old format or has
	// a torn tail; under saveMu.
	migrating bool
	saveFail  atomic.Uint64 // failed progress writes
}

// generation is one Start's lifetime: the loops it started and the channel
// that ends them.
type generation struct {
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

	next                  atomic.Int64 // next offset to deliver; written under mu (and saveMu with a ProgressLog)
	unsaved               bool         // the progress file lacks next (a write failed); under mu
	placed                bool         // next was set by a reload (so 0 is a real position); under mu
	oldestDue             atomic.Int64 // unix nanos: due time of the oldest undelivered message; 0 none seen
	delivered             atomic.Uint64
	retried               atomic.Uint64
	skipped               atomic.Uint64 // lost to retention before delivery
	malformed             atomic.Uint64 // records in Topic without scheduling properties
	deadLettered, dropped atomic.Uint64 // refused for good: moved to DeadLetterTopic, or not even that
	// single is how many more steps deliver one record at a time: a batch
	// the log refused for good is retried message by message, so only the
	// refused one is dead-lettered. Under mu.
	single int
}

// New returns a stopped Scheduler over log. It loads the progress (and
// clamps each level into its queue's [MinOffset, MaxOffset] range) and opens
// the timer index, rebuilding it from the log when it is missing, damaged
// or not the one the progress names. Corrupt progress is ErrCorrupt.
func New(log Log, opts Options) (*Scheduler, error) {
	if log == nil {
		return nil, fmt.Errorf("new: nil log: %w", ErrInvalid)
	}
	o, levels, err := opts.withDefaults()
	if err != nil {
		return nil, fmt.Errorf("new: %w", err)
	}
	s := &Scheduler{src: log, opts: o, levels: levels, now: o.Now, log: o.Logger}
	if d, ok := log.(interface{ Done() <-chan struct{} }); ok {
		s.done = d.Done()
	}
	switch pl, ok := log.(ProgressLog); {
	case ok:
		s.pl = pl
	case o.ProgressPath == "":
		s.pl = logProgress{log}
	}
	for i, d := range levels {
		s.lv = append(s.lv, &level{n: i + 1, queue: i, delay: d})
	}
	var files slotFiles = &memSlots{}
	if o.ProgressPath != "" {
		files = newDirSlots(o.fs, o.ProgressPath+".timers")
		if s.pl == nil {
			s.journal = &progressJournal{fs: o.fs, path: o.ProgressPath}
		}
	}
	s.timers = newTimerLane(s, files)
	if err := s.reload(true); err != nil {
		s.log.Debug("schedule: progress not loaded", "path", o.ProgressPath, "err", err)
		return nil, fmt.Errorf("new: %w", err)
	}
	s.migrate()
	return s, nil
}

// migrate rewrites a progress file of the format before the journal, or
// one with a torn tail, as a journal of its newest record. A failure is
// logged: the next progress write replaces the file anyway.
func (s *Scheduler) migrate() {
	if s.journal == nil || !s.migrating {
		return
	}
	s.saveMu.Lock()
	defer s.saveMu.Unlock()
	s.migrating = false
	if err := s.journal.replace(s.journal.last); err != nil {
		s.log.Warn("schedule: progress file not migrated, the next write replaces it", "path", s.opts.ProgressPath, "err", err)
		return
	}
	s.log.Info("schedule: progress file rewritten as a journal", "path", s.opts.ProgressPath)
}

// logClosed reports whether the Log's Done channel (if it has one) is closed.
func (s *Scheduler) logClosed() bool {
	select {
	case <-s.done: // a nil channel never is
		return true
	default:
		return false
	}
}

// Levels returns the delay of each level; index 0 is level 1.
func (s *Scheduler) Levels() []time.Duration {
	return append([]time.Duration(nil), s.levels...)
}

// Start starts one delivery loop per level, and one for the timers, under a
// new generation. It reloads the progress first (another node may have
// advanced it) and fails with ErrCorrupt, staying stopped, if it is
// corrupt. Starting a started Scheduler does nothing. After Close, or once
// the Log is closed (a Log with a Done channel, as *store.Store), Start
// answers ErrClosed and starts nothing.
func (s *Scheduler) Start() error {
	s.lifeMu.Lock()
	defer s.lifeMu.Unlock()
	if err := s.closedErr(); err != nil {
		s.log.Debug("schedule: start refused", "err", err)
		return fmt.Errorf("start: %w", err)
	}
	if s.cur.Load() != nil {
		return nil
	}
	if err := s.reload(false); err != nil {
		s.log.Debug("schedule: start refused", "err", err)
		return fmt.Errorf("start: %w", err)
	}
	s.gen++
	g := &generation{n: s.gen, stop: make(chan struct{})}
	s.lockLanes()
	s.cur.Store(g)
	s.unlockLanes()
	for _, lv := range s.lv {
		c := &cursor{next: lv.next.Load()}
		g.wg.Add(1)
		go s.loop(g, func(now time.Time) stepResult { return s.step(g, lv, c, now) })
	}
	g.wg.Add(1)
	go s.loop(g, func(now time.Time) stepResult { return s.timers.step(g, now) })
	s.log.Info("schedule: started", "generation", g.n, "levels", len(s.lv))
	return nil
}

// Stop ends the current generation and returns after its in-flight
// deliveries have finished, its loops have exited and progress is recorded.
// A loop or delivery of an ended generation can neither append, nor go on,
// nor write progress. Stopping a stopped Scheduler does nothing.
func (s *Scheduler) Stop() error {
	s.lifeMu.Lock()
	defer s.lifeMu.Unlock()
	g := s.cur.Load()
	if g == nil {
		return nil
	}
	// Every delivery holds its lane's mu from the generation check to the
	// progress update, so once all are held nothing of g is mid-append.
	s.lockLanes()
	s.cur.Store(nil)
	s.unlockLanes()
	close(g.stop)
	g.wg.Wait()
	err := s.timers.flush()
	if err == nil {
		err = s.persist()
	}
	if err != nil {
		s.log.Debug("schedule: progress not saved on stop", "generation", g.n, "err", err)
	}
	s.log.Info("schedule: stopped", "generation", g.n)
	return err
}

// Close stops the scheduler for good: it is Stop, after which Start and
// Cancel answer ErrClosed. Close is idempotent. It does not close the Log,
// which belongs to the host.
func (s *Scheduler) Close() error {
	s.lifeMu.Lock()
	s.closed.Store(true) // no Start gets past this (it checks under lifeMu)
	s.lifeMu.Unlock()
	err := s.Stop()
	if s.journal != nil {
		s.saveMu.Lock()
		if cerr := s.journal.close(); err == nil {
			err = cerr
		}
		s.saveMu.Unlock()
	}
	return err
}

// closedErr is ErrClosed after Close, or once the Log says it closed.
func (s *Scheduler) closedErr() error {
	if s.closed.Load() {
		return ErrClosed
	}
	if s.logClosed() {
		return fmt.Errorf("%w: the log is closed", ErrClosed)
	}
	return nil
}

// Progress returns level -> next queue offset to deliver.
func (s *Scheduler) Progress() map[int]int64 {
	p := make(map[int]int64, len(s.lv))
	for _, lv := range s.lv {
		p[lv.n] = lv.next.Load()
	}
	return p
}

// lockLanes takes every lane's mu in a fixed order (levels, then the
// timers): the fence between generations.
func (s *Scheduler) lockLanes() {
	for _, lv := range s.lv {
		lv.mu.Lock()
	}
	s.timers.mu.Lock()
}

func (s *Scheduler) unlockLanes() {
	s.timers.mu.Unlock()
	for _, lv := range s.lv {
		lv.mu.Unlock()
	}
}

// isCurrent answers "may a task of generation g act"; the caller holds the
// task's lane mu.
func (s *Scheduler) isCurrent(g *generation) bool { return s.cur.Load() == g }

// loadProgress reads the stored progress: nil and no error when there is
// none yet.
func (s *Scheduler) loadProgress() (*progress, error) {
	var b []byte
	var err error
	switch {
	case s.pl != nil:
		b, err = s.pl.LoadProgress()
	case s.journal != nil:
		s.saveMu.Lock()
		b, s.migrating, err = s.journal.load()
		s.saveMu.Unlock()
	}
	if err != nil || b == nil {
		return nil, err
	}
	p, err := decodeProgress(b)
	if err != nil {
		return nil, fmt.Errorf("%s: %w", s.opts.ProgressPath, err)
	}
	return &p, nil
}

// reload merges the stored progress into memory (for levels the larger
// offset wins, so progress never moves back because of an older record)
// and clamps every level into its queue's range; the timers adopt stored
// progress written against another index (see timerLane.adopt). Called with
// no generation running.
func (s *Scheduler) reload(first bool) error {
	p, err := s.loadProgress()
	if err != nil {
		return err
	}
	var levels map[int]int64
	if p != nil {
		levels = p.levels
	}
	for l, off := range levels {
		if l > len(s.lv) {
			s.log.Warn("schedule: progress for an unknown level ignored", "level", l, "offset", off, "levels", len(s.lv))
		}
	}
	s.lockLanes()
	defer s.unlockLanes()
	for _, lv := range s.lv {
		s.placeLevel(lv, levels)
	}
	if err := s.timers.adopt(p, first); err != nil {
		return err
	}
	if s.pl != nil {
		// What is stored now means the same as the state just placed (a
		// restart would place it the same way), so a Stop with nothing
		// new appends no record.
		s.saveMu.Lock()
		s.stored = encodeProgress(s.snapshot(nil, 0, nil))
		s.saveMu.Unlock()
	}
	return nil
}

func (s *Scheduler) placeLevel(lv *level, stored map[int]int64) {
	want := lv.next.Load()
	off, known := stored[lv.n]
	if known && off > want {
		want = off
	}
	lo, hi := s.src.MinOffset(Topic, lv.queue), s.src.MaxOffset(Topic, lv.queue)
	if want < lo {
		// Only a first placement may start at MinOffset silently; a known
		// position (stored, or from an earlier New/Start, even 0) that
		// retention overtook is a loss to count and log.
		if known || want > 0 || lv.placed {
			s.log.Warn("schedule: retention removed undelivered messages", "topic", Topic, "queue", lv.queue, "level", lv.n, "offset", want, "to", lo, "lost", lo-want)
			lv.skipped.Add(uint64(lo - want))
		}
		want = lo
	}
	if want > hi {
		s.log.Warn("schedule: progress beyond the end of the log, clamped", "topic", Topic, "queue", lv.queue, "level", lv.n, "offset", want, "max", hi)
		want = hi
	}
	lv.next.Store(want)
	lv.placed = true
}

// snapshot is the progress to store now, with one level's next offset or
// the timers' state replaced by the values a commit is about to make true.
func (s *Scheduler) snapshot(lv *level, next int64, ts *timerState) progress {
	p := progress{levels: make(map[int]int64, len(s.lv)), timer: *s.timers.saved.Load()}
	for _, l := range s.lv {
		p.levels[l.n] = l.next.Load()
	}
	if lv != nil {
		p.levels[lv.n] = next
	}
	if ts != nil {
		p.timer = *ts
	}
	return p
}

// commit appends msgs and records the progress that apply makes true
// (lv's next offset or the timers' state ts): with a ProgressLog in one
// atomic step; otherwise the append, then apply, then the progress file.
// appended reports whether msgs reached the log (and apply ran); err is
// then a failed progress write, which the caller must retry before going
// on.
func (s *Scheduler) commit(msgs []*store.Message, lv *level, next int64, ts *timerState, apply func()) (appended bool, err error) {
	if s.pl != nil {
		s.saveMu.Lock()
		defer s.saveMu.Unlock()
		b := encodeProgress(s.snapshot(lv, next, ts))
		if err := s.pl.AppendWithProgress(b, msgs...); err != nil {
			return false, err
		}
		s.stored = b
		apply()
		return true, nil
	}
	if len(msgs) > 0 {
		if err := s.src.Append(msgs...); err != nil {
			return false, err
		}
	}
	apply()
	return true, s.persist()
}

// persist records the current progress. In file mode it returns once a
// write that started after the call (so includes every change made before
// it) is on disk; concurrent calls share writes like a group commit. With a
// ProgressLog it appends a record only if anything changed since the last
// one stored or loaded.
func (s *Scheduler) persist() error {
	if s.pl != nil {
		s.saveMu.Lock()
		defer s.saveMu.Unlock()
		b := encodeProgress(s.snapshot(nil, 0, nil))
		if bytes.Equal(b, s.stored) {
			return nil
		}
		if err := s.pl.AppendWithProgress(b); err != nil {
			s.saveFail.Add(1)
			return err
		}
		s.stored = b
		return nil
	}
	if s.journal == nil {
		return nil
	}
	ticket := s.saveReq.Add(1)
	s.saveMu.Lock()
	defer s.saveMu.Unlock()
	if s.saveDone >= ticket {
		return s.saveErr
	}
	covers := s.saveReq.Load()
	b := encodeProgress(s.snapshot(nil, 0, nil))
	s.saveErr = s.journal.write(b)
	s.saveDone = covers
	if s.saveErr != nil {
		s.saveFail.Add(1)
	}
	return s.saveErr
}
