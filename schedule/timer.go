package schedule

import (
	"fmt"
	"hash/fnv"
	"strconv"
	"time"

	"github.com/brokercore/brokercore/store"
)

// Timer property names (RocketMQ's).
const (
	// PropTimerDeliverMS is the delivery time of a timer message, in Unix
	// milliseconds (RocketMQ 5's TIMER_DELIVER_MS).
	PropTimerDeliverMS = "TIMER_DELIVER_MS"
	// PropStartDeliverTime is the same time under the name older clients
	// and protocol layers use (__STARTDELIVERTIME). A timer record needs
	// one of the two; PropTimerDeliverMS wins when both are set.
	PropStartDeliverTime = "__STARTDELIVERTIME"
)

// timerKey orders timers: by due time (Unix ms), then by their offset in
// TimerTopic. It is unique per record.
type timerKey struct {
	due int64
	off int64
}

func (a timerKey) less(b timerKey) bool {
	return a.due < b.due || (a.due == b.due && a.off < b.off)
}

// At returns a copy of m rewritten for TimerTopic, queue 0, with the real
// topic and queue in PropRealTopic and PropRealQueue and the time in
// PropTimerDeliverMS and PropStartDeliverTime (Unix ms, rounded up so that
// delivery is never before t). The host appends the result; once Now has
// reached t the scheduler appends m to its real topic. A time in the past is
// delivered at once; one later than Now + Options.MaxTimerDelay is
// ErrInvalid. If m has no UNIQ_KEY the copy gets one: it is what Cancel
// takes. m is not modified. After Close (or once the Log has closed) At
// answers ErrClosed.
func (s *Scheduler) At(m *store.Message, t time.Time) (*store.Message, error) {
	if m == nil {
		return nil, fmt.Errorf("at: nil message: %w", ErrInvalid)
	}
	if err := s.closedErr(); err != nil {
		return nil, fmt.Errorf("at: %w", err)
	}
	reject := func(reason string) (*store.Message, error) {
		s.log.Debug("schedule: timer rejected", "topic", m.Topic, "queue", m.QueueID, "at", t, "reason", reason)
		return nil, fmt.Errorf("at: topic %q queue %d at %v: %s: %w", m.Topic, m.QueueID, t, reason, ErrInvalid)
	}
	if m.Topic == "" || isSystemTopic(m.Topic) || m.QueueID < 0 {
		return reject("bad topic or queue")
	}
	if t.IsZero() {
		return reject("zero time")
	}
	if limit := s.now().Add(s.opts.MaxTimerDelay); t.After(limit) {
		return reject(fmt.Sprintf("more than MaxTimerDelay %v ahead", s.opts.MaxTimerDelay))
	}
	due := ceilMilli(t)
	props := rewriteProps(m, 5)
	props[PropTimerDeliverMS] = strconv.FormatInt(due, 10)
	props[PropStartDeliverTime] = props[PropTimerDeliverMS]
	return &store.Message{
		Topic: TimerTopic, Tags: m.Tags, Keys: cloneStrings(m.Keys), Body: cloneBytes(m.Body),
		Properties: props, BornAt: m.BornAt, ReconsumeTimes: m.ReconsumeTimes,
	}, nil
}

func isSystemTopic(t string) bool { return t == Topic || t == TimerTopic || t == ProgressTopic }

// ceilMilli is t in Unix milliseconds, rounded up.
func ceilMilli(t time.Time) int64 {
	ns := t.UnixNano()
	ms := ns / 1e6
	if ns%1e6 > 0 {
		ms++
	}
	return ms
}

// timerOf reads a TimerTopic record: its key, its real topic and queue. ok
// is false for a record that cannot be delivered (no or bad time or real
// topic) or whose time is more than maxDelay after its StoredAt; the
// decision depends only on the record, so a rebuild of the index makes the
// same one. The key's due time is never before StoredAt's millisecond: a
// time in the past is due when it was stored (rounded down, so that a past
// timer stored at a sub-millisecond clock is due at once, not at the next
// millisecond).
func timerOf(m *store.Message, maxDelay time.Duration) (k timerKey, ok bool) {
	v := m.Properties[PropTimerDeliverMS]
	if v == "" {
		v = m.Properties[PropStartDeliverTime]
	}
	due, err := strconv.ParseInt(v, 10, 64)
	if err != nil {
		return timerKey{}, false
	}
	topic := m.Properties[PropRealTopic]
	if topic == "" || isSystemTopic(topic) {
		return timerKey{}, false
	}
	if q := m.Properties[PropRealQueue]; q != "" {
		if n, err := strconv.Atoi(q); err != nil || n < 0 {
			return timerKey{}, false
		}
	}
	stored := ceilMilli(m.StoredAt)
	if due > stored && due-stored > maxDelay.Milliseconds() {
		return timerKey{}, false
	}
	return timerKey{due: max(due, m.StoredAt.UnixMilli()), off: m.QueueOffset}, true
}

// restoreTimer turns a TimerTopic record back, in place, into the message
// the producer sent (a missing PropRealQueue means queue 0).
func restoreTimer(m *store.Message) {
	q, _ := strconv.Atoi(m.Properties[PropRealQueue])
	m.Topic, m.QueueID = m.Properties[PropRealTopic], q
	for _, p := range []string{PropRealTopic, PropRealQueue, PropTimerDeliverMS, PropStartDeliverTime} {
		delete(m.Properties, p)
	}
	m.QueueOffset, m.LogOffset, m.StoredAt = 0, 0, time.Time{}
}

// keyHash is the 32-bit FNV-1a of a UNIQ_KEY, kept in the index so that
// Cancel reads from the log only the records whose hash matches.
func keyHash(k string) uint32 {
	h := fnv.New32a()
	_, _ = h.Write([]byte(k))
	return h.Sum32()
}
