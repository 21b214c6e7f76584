package store

import (
	"errors"
	"fmt"
	"os"
	"time"
)

// Retain applies MaxAge and MaxBytes now: it drops the oldest whole
// segments that are too old or over the size budget, never the segment
// being written, and moves every queue's MinOffset up past what was
// dropped. It returns the number of segments dropped. It also runs every
// Options.RetainEvery in the background.
//
// Dropped segments' files are removed, oldest first, after a checkpoint
// recorded where the log now starts: an Open after a crash in between
// finishes the removal (through tidwall/wal's TruncateFront). No kept
// segment is rewritten.
func (s *Store) Retain() (segments int, err error) {
	s.retainMu.Lock()
	defer s.retainMu.Unlock()
	s.mu.Lock()
	if err := s.usable(); err != nil {
		s.mu.Unlock()
		return 0, err
	}
	n, err := s.retainable()
	if err != nil || n == 0 {
		s.mu.Unlock()
		return 0, err
	}
	// Record what retention removes before removing it, so an Open after
	// a crash tells retention from a lost segment (and finishes it).
	s.retained = s.segs[n].start
	s.mu.Unlock()
	if err := s.checkpoint(); err != nil {
		return 0, err
	}
	n, trims, err := s.dropSegments(n)
	if err != nil || n == 0 {
		return n, err
	}
	// Persist the raised minimums before freeing index space below them, so
	// a reopen never looks up an entry that is gone.
	if err := s.checkpoint(); err != nil {
		return n, err
	}
	for _, tr := range trims {
		s.trimIndex(tr.x, tr.below)
	}
	return n, nil
}

type trim struct {
	x     *indexFile
	below int64
}

// dropSegments removes the n oldest segments' files and raises every
// queue's minimum past them; it returns the index space that
// may be freed.
func (s *Store) dropSegments(n int) (int, []trim, error) {
	s.ioMu.Lock()
	defer s.ioMu.Unlock()
	s.mu.Lock()
	defer s.mu.Unlock()
	if err := s.usable(); err != nil {
		return 0, nil, err
	}
	if n >= len(s.segs) {
		n = len(s.segs) - 1
	}
	keep := s.segs[n]
	// The segments before keep go whole: removing their files leaves the
	// log starting at keep's first record, as wal names it (what
	// wal.TruncateFront does at a segment's start, less its copy of keep).
	// The checkpoint recorded the new start before (Retain): a crash
	// in between is finished at Open.
	for _, sg := range s.segs[:n] {
		sg.close() // after the reads already using it
		if err := os.Remove(sg.path); err != nil && !errors.Is(err, os.ErrNotExist) {
			return 0, nil, s.fail(fmt.Errorf("retention: remove %s before %d: %w", sg.path, keep.start, err))
		}
	}
	s.segs = append([]*segment(nil), s.segs[n:]...)
	s.logMin = int64(s.segs[0].start) - 1
	if err := syncDir(s.walDir); err != nil {
		return 0, nil, s.fail(fmt.Errorf("retention: %w", err))
	}
	trims := []trim{{s.lidx, min(s.logMin, s.lidx.flushed)}}
	for _, qs := range s.queues {
		for _, q := range qs {
			if err := s.raiseMin(q); err != nil {
				return 0, nil, s.fail(err)
			}
			trims = append(trims, trim{q.idx, min(q.min, q.idx.flushed)})
		}
	}
	s.stats.retained.Add(uint64(n))
	s.log.Info("store: retention dropped segments", "dir", s.dir, "segments", n,
		"log_min", s.logMin, "max_age", s.opts.MaxAge, "max_bytes", s.opts.MaxBytes)
	return n, trims, nil
}

// trimIndex frees the disk space of index entries below n (best effort: a
// failure only costs disk space, so it is logged, not fatal).
func (s *Store) trimIndex(x *indexFile, n int64) {
	if err := x.punch(n * entrySize); err != nil {
		s.log.Warn("store: could not free retained index space", "file", x.Name(), "err", err)
	}
}

// retainable counts the leading segments retention may drop. Callers hold mu
// exclusively.
func (s *Store) retainable() (int, error) {
	if s.opts.MaxAge <= 0 && s.opts.MaxBytes <= 0 {
		return 0, nil
	}
	total := s.tailSize
	for _, sg := range s.segs[:len(s.segs)-1] {
		total += sg.size
	}
	cutoff := s.now().Add(-s.opts.MaxAge).UnixNano()
	n := 0
	for i := 0; i < len(s.segs)-1; i++ {
		sg, next := s.segs[i], s.segs[i+1]
		drop := s.opts.MaxBytes > 0 && total > s.opts.MaxBytes
		if !drop && s.opts.MaxAge > 0 {
			if next.start == sg.start {
				drop = true // empty
			} else {
				// The newest record of the segment decides its age.
				e, err := s.lidx.get(int64(next.start) - 2)
				if err != nil && s.healLog(int64(next.start)-2) == nil {
					e, err = s.lidx.get(int64(next.start) - 2)
				}
				if err != nil {
					return 0, err
				}
				drop = e.storedAt < cutoff
			}
		}
		if !drop {
			break
		}
		total -= sg.size
		n++
	}
	return n, nil
}

func (s *Store) retainLoop() {
	defer s.wg.Done()
	t := time.NewTicker(s.opts.RetainEvery)
	defer t.Stop()
	for {
		select {
		case <-s.stop:
			return
		case <-t.C:
			if _, err := s.Retain(); err != nil && !errors.Is(err, ErrClosed) {
				s.log.Error("store: retention failed", "dir", s.dir, "err", err)
			}
		}
	}
}
