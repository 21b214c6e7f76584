package store

import "sync/atomic"

// Stats is a snapshot of the store's counters, for hosts to export.
type Stats struct {
	Appends       uint64 // Append calls that wrote a batch
	Messages      uint64 // messages appended
	AppendedBytes uint64 // encoded record bytes appended
	Rejected      uint64 // Append/Read calls refused for bad input
	Syncs         uint64 // log fsyncs (group commits)
	Reads         uint64 // Read and ReadAt calls
	ReadMessages  uint64 // messages returned by Read and ReadAt
	Checkpoints   uint64
	Retained      uint64 // segments dropped by retention
	RecoveryCut   int64  // bytes cut from the tail by the last Open
	Replayed      int64  // records the last Open re-indexed from the log
	Segments      int
	Queues        int
	LogMin        int64 // oldest log offset
	LogNext       int64 // next log offset (of what is in the wal)
	Failed        bool
}

type counters struct {
	appends, messages, bytes, rejected, syncs, reads, readMsgs, ckpts, retained atomic.Uint64
	cutBytes, replayed                                                          atomic.Int64
}

// Stats returns the store's counters.
func (s *Store) Stats() Stats {
	s.mu.RLock()
	defer s.mu.RUnlock()
	return Stats{
		Appends:       s.stats.appends.Load(),
		Messages:      s.stats.messages.Load(),
		AppendedBytes: s.stats.bytes.Load(),
		Rejected:      s.stats.rejected.Load(),
		Syncs:         s.stats.syncs.Load(),
		Reads:         s.stats.reads.Load(),
		ReadMessages:  s.stats.readMsgs.Load(),
		Checkpoints:   s.stats.ckpts.Load(),
		Retained:      s.stats.retained.Load(),
		RecoveryCut:   s.stats.cutBytes.Load(),
		Replayed:      s.stats.replayed.Load(),
		Segments:      len(s.segs),
		Queues:        s.nq,
		LogMin:        s.logMin,
		LogNext:       s.walNext,
		Failed:        s.failErr != nil,
	}
}
