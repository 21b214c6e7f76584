package lock

import (
	"context"
	"log/slog"
	"time"
)

// EventKind says what happened to a lease.
type EventKind uint8

// The kinds of Event a Table reports through Options.OnEvent.
const (
	// EventLocked: a free key was locked; a new token was issued.
	EventLocked EventKind = iota + 1
	// EventRenewed: the holder locked again before expiry; same token,
	// later Expires.
	EventRenewed
	// EventTakenOver: an expired lease was replaced (by another client, or
	// by the same one, which still gets a new token).
	EventTakenOver
	// EventRefused: a lock request met a live lease held by another client.
	EventRefused
	// EventUnlocked: the holder released its live lease.
	EventUnlocked
	// EventExpired: Sweep dropped an expired lease.
	EventExpired
)

var eventNames = [...]string{
	EventLocked:    "locked",
	EventRenewed:   "renewed",
	EventTakenOver: "taken over",
	EventRefused:   "refused",
	EventUnlocked:  "unlocked",
	EventExpired:   "expired",
}

// String returns the lower-case name of the kind.
func (k EventKind) String() string {
	if int(k) < len(eventNames) && eventNames[k] != "" {
		return eventNames[k]
	}
	return "unknown"
}

// Event describes one change (or refused change) of a lease. Client is the
// requesting client (for EventExpired, the former holder); OldClient is the
// previous or current holder where there is one. Token is the lease's token
// after the event (for EventRefused and EventExpired, the holder's token).
type Event struct {
	Kind      EventKind
	Group     string
	Queue     Queue
	Client    string
	OldClient string
	Token     uint64
	At        time.Time
}

// note counts, logs and reports one event. It runs outside any map lock, so
// OnEvent may call back into the Table.
func (t *Table) note(ev Event) {
	switch ev.Kind {
	case EventLocked:
		t.st.locked.Inc()
		t.logEvent(slog.LevelDebug, "lock: locked", ev)
	case EventRenewed:
		t.st.renewed.Inc()
		// Renewal is the hot path and says nothing new; not logged.
	case EventTakenOver:
		t.st.takenOver.Inc()
		t.logEvent(slog.LevelWarn, "lock: lease expired, taken over", ev)
	case EventRefused:
		t.st.refused.Inc()
		// The caller sees false, but contention is what field reports
		// are solved from.
		t.logEvent(slog.LevelInfo, "lock: queue locked by other client", ev)
	case EventUnlocked:
		t.st.unlocked.Inc()
		t.logEvent(slog.LevelDebug, "lock: unlocked", ev)
	case EventExpired:
		t.st.expired.Inc()
		t.logEvent(slog.LevelInfo, "lock: lease expired, swept", ev)
	}
	if t.onEvent != nil {
		t.onEvent(ev)
	}
}

func (t *Table) logEvent(level slog.Level, msg string, ev Event) {
	if !t.log.Enabled(context.Background(), level) {
		return
	}
	t.log.LogAttrs(context.Background(), level, msg,
		slog.String("group", ev.Group),
		slog.String("topic", ev.Queue.Topic),
		slog.String("broker", ev.Queue.Broker),
		slog.Int("queue", ev.Queue.QueueID),
		slog.String("old_client", ev.OldClient),
		slog.String("new_client", ev.Client),
		slog.Uint64("token", ev.Token),
	)
}

// reject counts and logs a request refused for bad input.
func (t *Table) reject(op, group string, q Queue, clientID string, err error) {
	t.st.invalid.Inc()
	// The caller sees false (or ErrInvalid): DEBUG.
	if !t.log.Enabled(context.Background(), slog.LevelDebug) {
		return
	}
	t.log.LogAttrs(context.Background(), slog.LevelDebug, "lock: request rejected",
		slog.String("op", op),
		slog.String("group", group),
		slog.String("topic", q.Topic),
		slog.String("broker", q.Broker),
		slog.Int("queue", q.QueueID),
		slog.String("client", clientID),
		slog.String("err", err.Error()),
	)
}
