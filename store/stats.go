package store

import "sync/atomic"

// Stats is a snapshot of the store's counters, for hosts to export (the
// json names are the ones /v1/stats shows).
type Stats struct {
	Appends       uint64 `json:"appends"`        // Append calls that wrote a batch
	Messages      uint64 `json:"messages"`       // messages appended
	AppendedBytes uint64 `json:"appended_bytes"` // encoded record bytes appended
	Rejected      uint64 `json:"rejected"`       // Append/Read calls refused for bad input
	Syncs         uint64 `json:"syncs"`          // log fsyncs (group commits)
	SyncedRecords uint64 `json:"synced_records"` // records those fsyncs made durable (SyncedRecords/Syncs: records per fsync)
	Reads         uint64 `json:"reads"`          // Read and ReadAt calls
	ReadMessages  uint64 `json:"read_messages"`  // messages returned by Read and ReadAt
	Checkpoints   uint64 `json:"checkpoints"`
	Retained      uint64 `json:"retained"`       // segments dropped by retention
	IndexRepairs  uint64 `json:"index_repairs"`  // damaged index entries rebuilt from the log at Read
	IndexRebuilds uint64 `json:"index_rebuilds"` // whole index rebuilt from the log at Open
	// KeyFileRebuilds counts key index files (LookupKey) rebuilt from their
	// segment because they were missing or damaged, at Open or at a lookup.
	KeyFileRebuilds uint64 `json:"key_file_rebuilds"`
	// CorruptRecords counts damaged records readers met and stepped past
	// (each once): they are never returned as data.
	CorruptRecords uint64 `json:"corrupt_records"`
	// LostRecords counts the offsets Open found lost (records the checkpoint
	// recorded as durable missing from the log) and wrote tombstones for,
	// so that no offset is handed out twice.
	LostRecords uint64 `json:"lost_records"`
	RecoveryCut int64  `json:"recovery_cut"` // bytes cut from the tail by the last Open
	Replayed    int64  `json:"replayed"`     // records the last Open re-indexed from the log
	Segments    int    `json:"segments"`
	Queues      int    `json:"queues"`
	// IndexFilesOpen is how many index files are open now (at most
	// Options.MaxOpenFiles, whatever Queues is); IndexFileOpens how many
	// times one was opened.
	IndexFilesOpen int    `json:"index_files_open"`
	IndexFileOpens uint64 `json:"index_file_opens"`
	LogMin         int64  `json:"log_min"`  // oldest log offset
	LogNext        int64  `json:"log_next"` // next log offset
	Failed         bool   `json:"failed"`
}

type counters struct {
	appends, messages, bytes, rejected, syncs, synced, reads, readMsgs atomic.Uint64
	ckpts, retained, indexRepairs, rebuilds, corrupt, lost             atomic.Uint64
	keyRebuilds                                                        atomic.Uint64
	cutBytes, replayed                                                 atomic.Int64
}

// Stats returns the store's counters.
func (s *Store) Stats() Stats {
	s.mu.RLock()
	defer s.mu.RUnlock()
	open, opens := s.files.stats()
	return Stats{
		IndexFilesOpen:  open,
		IndexFileOpens:  opens,
		Appends:         s.stats.appends.Load(),
		Messages:        s.stats.messages.Load(),
		AppendedBytes:   s.stats.bytes.Load(),
		Rejected:        s.stats.rejected.Load(),
		Syncs:           s.stats.syncs.Load(),
		SyncedRecords:   s.stats.synced.Load(),
		Reads:           s.stats.reads.Load(),
		ReadMessages:    s.stats.readMsgs.Load(),
		Checkpoints:     s.stats.ckpts.Load(),
		Retained:        s.stats.retained.Load(),
		IndexRepairs:    s.stats.indexRepairs.Load(),
		IndexRebuilds:   s.stats.rebuilds.Load(),
		KeyFileRebuilds: s.stats.keyRebuilds.Load(),
		CorruptRecords:  s.stats.corrupt.Load(),
		LostRecords:     s.stats.lost.Load(),
		RecoveryCut:     s.stats.cutBytes.Load(),
		Replayed:        s.stats.replayed.Load(),
		Segments:        len(s.segs),
		Queues:          s.nq,
		LogMin:          s.logMin,
		LogNext:         s.walWritten, // what the wal holds: a failed round never counts
		Failed:          s.failErr != nil,
	}
}
