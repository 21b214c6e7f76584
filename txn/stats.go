package txn

// Stats are a Manager's counters, for a host to export as metrics. Counts
// since New (a restart counts what it rebuilt from the log again).
type Stats struct {
	Pending            int    // open transactions (half messages not closed)
	Uncertain          int    // open ones whose last resolution failed uncertainly
	Prepared           uint64 // half messages ingested
	Committed          uint64
	RolledBack         uint64 // by the producer or past the check limit
	ChecksSent         uint64 // check records written (each one a check asked)
	ChecksFailed       uint64 // checks the Checker could not deliver (still counted)
	CheckLimitExceeded uint64 // rolled back and kept in CheckMaxTimeTopic
	Refused            uint64 // resolutions refused with ErrAlreadyResolved
	Lost               uint64 // open halves removed by retention
}
