package store

import (
	"fmt"
	"slices"
	"time"
)

// Group commit (SyncGroup). An appender places and encodes its records
// under mu, queues them for the log and registers a waiter. The first
// appender to find nobody fsyncing becomes the leader (see lead): it writes
// the queued records in one write (to the page cache), verifies and fsyncs
// everything written so far, outside mu, then marks it durable, makes it
// visible and answers exactly the waiters it covered; the appenders that
// arrive meanwhile write the next group while that fsync runs. One fsync
// per group, however many appenders wait; no goroutine hand-off in a lone
// appender's path. The committer goroutine only writes checkpoints, fsyncs
// under SyncInterval, and at Close makes everything appended durable.

func (s *Store) kickCommitter() {
	select {
	case s.kick <- struct{}{}:
	default:
	}
}

func (s *Store) commitLoop() {
	defer s.wg.Done()
	var tick <-chan time.Time
	if s.opts.Sync == SyncInterval {
		t := time.NewTicker(s.opts.SyncEvery)
		defer t.Stop()
		tick = t.C
	}
	ck := time.NewTicker(s.opts.CheckpointEvery)
	defer ck.Stop()
	for {
		stopping := false
		select {
		case <-s.kick:
		case <-tick:
		case <-ck.C:
			s.mu.Lock()
			if s.appended != s.ckptAt {
				s.ckptDue = true
			}
			s.mu.Unlock()
		case <-s.stop:
			stopping = true
		}
		if stopping || s.opts.Sync != SyncGroup {
			// At Close: everything appended so far; under SyncInterval, its
			// period. Under SyncGroup the appenders' leader fsyncs every
			// record, and an fsync here would only cut one of its rounds
			// short.
			_ = s.fsyncLog()
		}
		s.mu.RLock()
		due := s.ckptDue && s.failErr == nil
		s.mu.RUnlock()
		if due && !stopping {
			if err := s.checkpoint(false); err != nil {
				s.log.Error("store: checkpoint failed", "dir", s.dir, "err", err)
			}
		}
		if stopping {
			return
		}
	}
}

// fsyncLog verifies and fsyncs what is in the wal outside mu, then marks it
// durable, makes it visible and answers the waiters it covered.
func (s *Store) fsyncLog() error {
	s.ioMu.Lock()
	defer s.ioMu.Unlock()
	s.mu.Lock()
	if s.failErr != nil || s.filesClosed {
		err := s.failErr
		if err == nil {
			err = ErrClosed
		}
		s.mu.Unlock()
		return err
	}
	if p, ok := s.takePending(); ok {
		// The round's records go to the log in one write, outside mu:
		// the appenders place the next round meanwhile.
		s.mu.Unlock()
		werr := s.writePending(p)
		s.mu.Lock()
		if err := s.applyPending(p, werr); err != nil {
			s.mu.Unlock()
			return err
		}
	}
	if err := s.verifyTail(); err != nil {
		s.mu.Unlock()
		return err
	}
	target := s.walWritten
	dir := s.dirDirty
	if target == s.durable && !dir {
		s.mu.Unlock()
		return nil
	}
	s.dirDirty = false
	// Segments before the tail were fsynced when the log writer rolled.
	f := s.segs[len(s.segs)-1].f
	s.mu.Unlock()

	var err error
	t0 := time.Now()
	if dir {
		err = syncDir(s.walDir)
	}
	if err == nil {
		err = s.syncFile(f)
	}
	took := time.Since(t0)

	s.mu.Lock()
	if err != nil {
		err = s.fail(fmt.Errorf("fsync log: %w", err))
		s.mu.Unlock()
		return err
	}
	s.stats.syncs.Add(1)
	s.stats.synced.Add(uint64(target - s.durable))
	if target > s.durable {
		s.durable = target
	}
	k := 0
	for _, p := range s.pending {
		if p.end > target {
			break
		}
		if p.next > p.q.visible {
			p.q.visible = p.next
		}
		k++
	}
	s.pending = append(s.pending[:0], s.pending[k:]...)
	k = 0
	answer := s.answer[:0]
	msgs := 0
	for _, w := range s.waiters {
		if w.end > target {
			break
		}
		answer = append(answer, w.done)
		msgs += w.n
		k++
	}
	s.waiters = append(s.waiters[:0], s.waiters[k:]...)
	// Everyone answered will likely append again, as many messages: the
	// next fsync waits a little for them (lead).
	s.waitRecs -= msgs
	s.lastGroup, s.lastFsync = msgs+s.waitRecs, took
	s.walCond.Broadcast() // durable moved
	s.mu.Unlock()
	// Answered outside mu: a woken appender does not find it held by the
	// goroutine that woke it. Each channel has room (waiterPool).
	for i, c := range answer {
		c <- nil
		answer[i] = nil
	}
	s.answer = answer[:0]
	return nil
}

// notify calls OnAppend and the Subscribe hooks; callers hold no lock.
func (s *Store) notify(notes []notice) {
	for _, n := range notes {
		if s.opts.OnAppend != nil {
			s.opts.OnAppend(n.topic, n.id, n.next)
		}
		s.hooks.call(n.topic, n.id, n.next)
	}
}

// Sync fsyncs everything appended so far (useful under SyncNone and
// SyncInterval; under SyncGroup an Append is already durable when it
// returns).
func (s *Store) Sync() error {
	s.mu.Lock()
	if err := s.usable(); err != nil {
		s.mu.Unlock()
		return err
	}
	s.mu.Unlock()
	return s.fsyncLog()
}

// snapshotQueues brings the checkpoint's copy of every queue's offsets up
// to date and returns it, in s.order's order (kept sorted, re-sorted only
// after new queues). Under mu it copies only the queues whose index took
// an entry since the last one, so a checkpoint at 100,000 queues neither
// sorts nor allocates nor reads every queue; the encoding happens after mu.
// Measured at 100,000 queues: encoding every queue under mu held it 3.7 ms
// a checkpoint, a quarter of the appends' time. Callers hold ckptMu and mu,
// after persistIndex (which moves the queues' flushed).
func (s *Store) snapshotQueues() []ckptQueue {
	if !s.orderSorted {
		slices.SortFunc(s.order, compareQueues)
		s.orderSorted = true
		s.snapStale = true
	}
	if s.snapStale || len(s.ckptSnap) != len(s.order) {
		snap := s.ckptSnap[:0]
		for i, q := range s.order {
			q.ord = i
			snap = append(snap, snapOf(q))
		}
		s.ckptSnap, s.snapStale = snap, false
	} else {
		for _, q := range s.snapDirty {
			s.ckptSnap[q.ord] = snapOf(q)
		}
	}
	for i, q := range s.snapDirty {
		q.snapQueued = false
		s.snapDirty[i] = nil
	}
	s.snapDirty = s.snapDirty[:0]
	return s.ckptSnap
}

func snapOf(q *queue) ckptQueue {
	return ckptQueue{topic: q.topic, id: q.id, next: q.next, min: q.min, lastLog: q.lastLog, flushed: q.idx.flushed}
}

// checkpoint writes the buffered index entries of the queues that changed
// and records how far the index goes, so the next Open replays only what
// comes after. The index files are not fsynced (they are checked and
// repaired from the log, see index.go), so its cost follows what changed
// since the last one, not the number of queues. With syncLog it fsyncs the
// log first (Close, retention, Open); a background checkpoint does not
// (under SyncNone that would turn every CheckpointBytes into an fsync): it
// records as durable only what an fsync already covered.
func (s *Store) checkpoint(syncLog ...bool) error {
	s.ckptMu.Lock()
	defer s.ckptMu.Unlock()
	s.ioMu.Lock() // the wal holds every record placed before the checkpoint records it
	s.mu.Lock()
	if s.failErr != nil {
		s.mu.Unlock()
		s.ioMu.Unlock()
		return s.failErr
	}
	if err := s.flushPendingLocked(); err != nil {
		s.mu.Unlock()
		s.ioMu.Unlock()
		return err
	}
	if err := s.verifyTail(); err != nil {
		s.mu.Unlock()
		s.ioMu.Unlock()
		return err
	}
	s.ckptDue = false
	s.ckptAt = s.appended
	ck := &checkpoint{
		indexValid: true,
		next:       s.written,
		segment:    s.tailStart,
		pos:        s.tailSize,
		durable:    s.durable,
		retained:   s.retained,
		lastStored: s.lastStored,
	}
	if err := s.persistIndex(); err != nil {
		err = s.fail(err)
		s.mu.Unlock()
		s.ioMu.Unlock()
		return err
	}
	ck.journalGen, ck.journalSize, ck.logFlushed = s.jr.gen, s.jr.size, s.lidx.flushed
	snap := s.snapshotQueues()
	s.mu.Unlock()
	s.ioMu.Unlock()
	qs := s.ckptQueues[:0]
	for _, q := range snap {
		qs = appendCkptQueue(qs, q)
	}
	nq := len(snap)
	s.ckptQueues = qs

	if len(syncLog) == 0 || syncLog[0] {
		if err := s.fsyncLog(); err != nil {
			return err
		}
		ck.durable = ck.next // the fsync covered it
	}
	s.ckptOut = ck.encodeWith(s.ckptOut, nq, qs)
	if err := writeCheckpointBytes(s.fs, s.dir, s.ckptOut); err != nil {
		s.mu.Lock()
		err = s.fail(err)
		s.mu.Unlock()
		return err
	}
	s.stats.ckpts.Add(1)
	s.journalWritten(ck.journalGen)
	return s.persistKeys()
}
