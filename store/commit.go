package store

import (
	"fmt"
	"os"
	"path/filepath"
	"time"
)

// Group commit (SyncGroup). An appender places and encodes its records
// under mu, adds them to the pending wal batch and registers a waiter. The
// first appender to find nobody writing becomes the leader (see lead): it
// takes the whole pending group, writes it to the wal (opened NoSync) and
// fsyncs it itself, both outside mu, then marks it durable, makes it
// visible and answers exactly the waiters it covered; the appenders that
// arrive meanwhile gather the next group. One write and one fsync per
// group, however many appenders wait; no goroutine hand-off in a lone
// appender's path; no thundering herd on the lock. The committer goroutine
// only writes checkpoints, fsyncs under SyncInterval, and at Close makes
// everything appended durable.

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
	for {
		stopping := false
		select {
		case <-s.kick:
		case <-tick:
		case <-s.stop:
			stopping = true
		}
		s.syncOnce(stopping) // at Close: everything appended so far
		s.mu.RLock()
		due := s.ckptDue && s.failErr == nil
		s.mu.RUnlock()
		if due && !stopping {
			if err := s.checkpoint(); err != nil {
				s.log.Error("store: checkpoint failed", "dir", s.dir, "err", err)
			}
		}
		if stopping {
			return
		}
	}
}

// syncOnce makes the log durable: with all set, every record appended so
// far (under SyncGroup waiting for the leader to cover them, or leading
// itself when nobody is writing); otherwise what is in the wal.
func (s *Store) syncOnce(all bool) error {
	if all {
		s.mu.Lock()
		target := s.written
		// Wait until the records are in the wal; fsyncLog below then
		// covers them (at once, if a leader's fsync already did).
		for s.walNext < target && s.failErr == nil && !s.filesClosed {
			if !s.writing {
				s.writing = true
				s.mu.Unlock()
				s.lead(1) // covers target: a group is all that is pending
				s.mu.Lock()
				continue
			}
			s.walCond.Wait()
		}
		s.mu.Unlock()
	}
	return s.fsyncLog()
}

// fsyncLog fsyncs what is in the wal outside mu, then marks it durable,
// makes it visible and answers the waiters it covered.
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
	target := s.walNext
	dir := s.dirDirty
	if target == s.durable && !dir {
		s.mu.Unlock()
		return nil
	}
	s.dirDirty = false
	// Segments before the tail were fsynced by wal when it closed them.
	f := s.segs[len(s.segs)-1].f
	s.mu.Unlock()

	var err error
	if dir {
		err = syncDir(s.walDir)
	}
	if err == nil {
		err = s.syncFile(f)
	}

	s.mu.Lock()
	if err != nil {
		err = s.fail(fmt.Errorf("fsync log: %w", err))
		s.mu.Unlock()
		return err
	}
	s.stats.syncs.Add(1)
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
	for _, w := range s.waiters {
		if w.end > target {
			break
		}
		w.done <- nil
		k++
	}
	s.waiters = append(s.waiters[:0], s.waiters[k:]...)
	s.walCond.Broadcast() // durable moved (syncOnce waits on it)
	s.mu.Unlock()
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
	return s.syncOnce(true)
}

// checkpoint flushes the index files, fsyncs them and the log, and records
// how far they go, so the next Open replays only what comes after.
func (s *Store) checkpoint() error {
	s.ckptMu.Lock()
	defer s.ckptMu.Unlock()
	s.mu.Lock()
	if s.failErr != nil {
		s.mu.Unlock()
		return s.failErr
	}
	s.ckptDue = false
	ck := &checkpoint{
		next:       s.written,
		segment:    s.tailStart,
		pos:        s.tailSize,
		lastStored: s.lastStored,
	}
	var files []*os.File
	flush := func(x *indexFile) error {
		if err := x.flush(); err != nil {
			return err
		}
		if x.dirty {
			files = append(files, x.f)
			x.dirty = false
		}
		return nil
	}
	err := flush(s.lidx)
	for _, qs := range s.queues {
		for _, q := range qs {
			if err == nil {
				err = flush(q.idx)
			}
			ck.queues = append(ck.queues, ckptQueue{topic: q.topic, id: q.id, next: q.next, min: q.min, lastLog: q.lastLog})
		}
	}
	if err != nil {
		err = s.fail(err)
		s.mu.Unlock()
		return err
	}
	s.mu.Unlock()
	sortQueues(ck.queues)

	// The log must be durable up to ck.next before the checkpoint claims it.
	if err := s.syncOnce(true); err != nil {
		return err
	}
	idxDir, err := os.Open(filepath.Join(s.dir, "index")) // new index files
	if err == nil {
		files = append(files, idxDir)
		defer idxDir.Close()
	}
	for _, f := range files {
		if err := s.syncFile(f); err != nil {
			s.mu.Lock()
			err = s.fail(fmt.Errorf("fsync index: %w", err))
			s.mu.Unlock()
			return err
		}
	}
	if err := writeCheckpoint(s.dir, ck); err != nil {
		s.mu.Lock()
		err = s.fail(err)
		s.mu.Unlock()
		return err
	}
	s.stats.ckpts.Add(1)
	return nil
}
