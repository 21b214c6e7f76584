package txn

// Stats are a Manager's counters, for a host to export as metrics. Counts
// since New (a restart counts what it rebuilt from the log again).
type Stats struct {
	Pending            int    `json:"pending"`              // open transactions (half messages not closed)
	Uncertain          int    `json:"uncertain"`            // open ones whose last resolution failed uncertainly
	Prepared           uint64 `json:"prepared"`             // half messages ingested
	Committed          uint64 `json:"committed"`            // real messages appended by a commit
	RolledBack         uint64 `json:"rolled_back"`          // by the producer or past the check limit
	ChecksSent         uint64 `json:"checks_sent"`          // check records written (each one a check asked)
	ChecksFailed       uint64 `json:"checks_failed"`        // checks the Checker could not deliver (still counted)
	CheckLimitExceeded uint64 `json:"check_limit_exceeded"` // rolled back and kept in CheckMaxTimeTopic
	Refused            uint64 `json:"refused"`              // resolutions refused with ErrAlreadyResolved
	Lost               uint64 `json:"lost"`                 // open halves removed by retention
}
