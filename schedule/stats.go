package schedule

import "time"

// Stats are the scheduler's counters. Durations are strings
// (time.Duration.String), so the JSON form reads like the Go one.
type Stats struct {
	Running    bool   `json:"running"`
	Generation uint64 `json:"generation"`  // of the running generation; 0 while stopped
	Delivered  uint64 `json:"delivered"`   // messages appended to their real topic (levels and timers)
	Retried    uint64 `json:"retried"`     // failed appends (each retried from the same position)
	Skipped    uint64 `json:"skipped"`     // messages lost to retention before their delivery
	SaveFailed uint64 `json:"save_failed"` // failed progress writes (delivery waits for the next good one)
	// DeadLettered counts due messages the log refused for good, moved to
	// DeadLetterTopic (levels and timers).
	DeadLettered uint64 `json:"dead_lettered"`
	// Dropped counts due messages the log refused for good whose dead
	// letter it refused too: skipped, each logged at ERROR with its keys.
	Dropped uint64       `json:"dropped"`
	Levels  []LevelStats `json:"levels"`
	Timers  TimerStats   `json:"timers"`
}

// LevelStats are one level's counters.
type LevelStats struct {
	Level        int    `json:"level"`
	Delay        string `json:"delay"`
	Next         int64  `json:"next"` // next queue offset to deliver
	Delivered    uint64 `json:"delivered"`
	Retried      uint64 `json:"retried"`
	Skipped      uint64 `json:"skipped"`
	Malformed    uint64 `json:"malformed"`     // records in Topic without scheduling properties, skipped
	DeadLettered uint64 `json:"dead_lettered"` // refused for good by the log: moved to DeadLetterTopic
	Dropped      uint64 `json:"dropped"`       // refused for good, and their dead letter too
	// Lag is now minus the due time of the oldest undelivered message the
	// level has seen, "0s" if that message is not due yet or none is known.
	Lag string `json:"lag"`
}

// TimerStats are the timers' counters.
type TimerStats struct {
	Delivered    uint64 `json:"delivered"`
	Retried      uint64 `json:"retried"`
	Skipped      uint64 `json:"skipped"`       // lost to retention before indexing or delivery
	Malformed    uint64 `json:"malformed"`     // TimerTopic records without a valid time or real topic
	DeadLettered uint64 `json:"dead_lettered"` // refused for good by the log: moved to DeadLetterTopic
	Dropped      uint64 `json:"dropped"`       // refused for good, and their dead letter too
	Cancelled    uint64 `json:"cancelled"`     // timers cancelled by this process
	Rebuilds     uint64 `json:"rebuilds"`      // times the index was rebuilt from the log
	InWindow     int64  `json:"in_window"`     // pending timers held in memory
	Slots        int64  `json:"slots"`         // slot files (and buffers) of the index
	Lag          string `json:"lag"`           // now minus the due time of the oldest due timer in the window
}

// Stats returns a snapshot of the counters. It takes no lock a delivery
// holds.
func (s *Scheduler) Stats() Stats {
	now := s.now()
	st := Stats{SaveFailed: s.saveFail.Load()}
	if g := s.cur.Load(); g != nil {
		st.Running, st.Generation = true, g.n
	}
	for _, lv := range s.lv {
		ls := LevelStats{
			Level: lv.n, Delay: lv.delay.String(), Next: lv.next.Load(),
			Delivered: lv.delivered.Load(), Retried: lv.retried.Load(),
			Skipped: lv.skipped.Load(), Malformed: lv.malformed.Load(),
			DeadLettered: lv.deadLettered.Load(), Dropped: lv.dropped.Load(),
			Lag: lagSince(now, lv.oldestDue.Load()).String(),
		}
		st.Delivered += ls.Delivered
		st.Retried += ls.Retried
		st.Skipped += ls.Skipped
		st.DeadLettered += ls.DeadLettered
		st.Dropped += ls.Dropped
		st.Levels = append(st.Levels, ls)
	}
	t := s.timers
	st.Timers = TimerStats{
		Delivered: t.delivered.Load(), Retried: t.retried.Load(), Skipped: t.skipped.Load(),
		Malformed: t.malformed.Load(), DeadLettered: t.deadLettered.Load(), Dropped: t.dropped.Load(), Cancelled: t.cancels.Load(), Rebuilds: t.rebuilds.Load(),
		InWindow: t.inWindow.Load(), Slots: t.slots.Load(), Lag: lagSince(now, t.oldestDue.Load()).String(),
	}
	st.Delivered += st.Timers.Delivered
	st.Retried += st.Timers.Retried
	st.Skipped += st.Timers.Skipped
	st.DeadLettered += st.Timers.DeadLettered
	st.Dropped += st.Timers.Dropped
	return st
}

func lagSince(now time.Time, dueNanos int64) time.Duration {
	if dueNanos == 0 {
		return 0
	}
	return max(now.Sub(time.Unix(0, dueNanos)), 0)
}
