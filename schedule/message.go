package schedule

import (
	"crypto/rand"
	"encoding/hex"
	"fmt"
	"strconv"
	"sync/atomic"
	"time"

	"github.com/brokercore/brokercore/store"
)

// Property names. The names are RocketMQ's, so tools that know them read
// brokercore's messages too.
const (
	// PropRealTopic holds the message's own topic while it waits in Topic.
	PropRealTopic = "REAL_TOPIC"
	// PropRealQueue holds the message's own queue while it waits in Topic.
	PropRealQueue = "REAL_QID"
	// PropDelayLevel holds the (clamped) delay level the message waits for.
	PropDelayLevel = "DELAY"
	// PropUniqKey is the message's unique key. Delay assigns one when the
	// message has none, so that a redelivery after a crash is recognisable.
	PropUniqKey = "UNIQ_KEY"
)

// Delay returns a copy of m rewritten for the schedule topic: Topic, queue
// level-1, with the real topic, queue and level kept in properties. The host
// appends the result to its log; the scheduler delivers it back to the real
// topic once StoredAt + the level's delay has passed.
//
// A level above the highest is clamped to the highest; a level below 1 is
// ErrInvalid. m is not modified (the copy has its own Keys, Body and
// Properties) and the assigned fields of the copy are zero. If m has no
// UNIQ_KEY property, the copy gets a fresh one. After Close (or once the
// Log has closed) Delay answers ErrClosed.
func (s *Scheduler) Delay(m *store.Message, level int) (*store.Message, error) {
	if m == nil {
		return nil, fmt.Errorf("delay: nil message: %w", ErrInvalid)
	}
	if err := s.closedErr(); err != nil {
		return nil, fmt.Errorf("delay: %w", err)
	}
	if level < 1 {
		s.log.Debug("schedule: delay rejected", "topic", m.Topic, "queue", m.QueueID, "level", level, "reason", "level below 1")
		return nil, fmt.Errorf("delay: level %d below 1: %w", level, ErrInvalid)
	}
	if m.Topic == "" || isSystemTopic(m.Topic) || m.QueueID < 0 {
		s.log.Debug("schedule: delay rejected", "topic", m.Topic, "queue", m.QueueID, "level", level, "reason", "bad topic or queue")
		return nil, fmt.Errorf("delay: topic %q queue %d: %w", m.Topic, m.QueueID, ErrInvalid)
	}
	if level > len(s.levels) {
		level = len(s.levels)
	}
	props := rewriteProps(m, 1)
	props[PropDelayLevel] = strconv.Itoa(level)
	return &store.Message{
		Topic:          Topic,
		QueueID:        level - 1,
		Tags:           m.Tags,
		Keys:           cloneStrings(m.Keys),
		Body:           cloneBytes(m.Body),
		Properties:     props,
		BornAt:         m.BornAt,
		ReconsumeTimes: m.ReconsumeTimes,
	}, nil
}

// rewriteProps copies m's properties (with room for extra more), gives the
// copy a UNIQ_KEY if it has none and records the real topic and queue.
func rewriteProps(m *store.Message, extra int) map[string]string {
	props := make(map[string]string, len(m.Properties)+3+extra)
	for k, v := range m.Properties {
		props[k] = v
	}
	if props[PropUniqKey] == "" {
		props[PropUniqKey] = newUniqKey()
	}
	props[PropRealTopic] = m.Topic
	props[PropRealQueue] = strconv.Itoa(m.QueueID)
	return props
}

// restore turns a message read from the schedule topic back, in place, into
// the message the producer sent: real topic and queue, the scheduling
// properties removed, the assigned fields cleared (the log assigns new ones).
// ok is false, and m unchanged, for a record that lacks the scheduling
// properties (written to Topic by someone else); it can never be delivered.
// m must be owned by the caller, as Log.Read's results are.
func restore(m *store.Message) (ok bool) {
	topic := m.Properties[PropRealTopic]
	q, err := strconv.Atoi(m.Properties[PropRealQueue])
	if topic == "" || isSystemTopic(topic) || err != nil || q < 0 {
		return false
	}
	delete(m.Properties, PropRealTopic)
	delete(m.Properties, PropRealQueue)
	delete(m.Properties, PropDelayLevel)
	m.Topic, m.QueueID = topic, q
	m.QueueOffset, m.LogOffset, m.StoredAt = 0, 0, time.Time{}
	return true
}

var (
	uniqPrefix  = randomPrefix()
	uniqCounter atomic.Uint64
)

func randomPrefix() string {
	var b [10]byte
	_, _ = rand.Read(b[:]) // crypto/rand.Read never fails on supported platforms
	return hex.EncodeToString(b[:])
}

// newUniqKey is a process-random prefix plus a counter: unique without a
// syscall per message.
func newUniqKey() string {
	n := uniqCounter.Add(1)
	var b [16]byte
	return uniqPrefix + string(strconv.AppendUint(b[:0], n, 16))
}

func cloneStrings(s []string) []string {
	if s == nil {
		return nil
	}
	return append([]string(nil), s...)
}

func cloneBytes(b []byte) []byte {
	if b == nil {
		return nil
	}
	return append([]byte(nil), b...)
}
