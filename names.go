package brokercore

import (
	"fmt"
	"strings"

	"github.com/brokercore/brokercore/schedule"
	"github.com/brokercore/brokercore/store"
	"github.com/brokercore/brokercore/txn"
)

// Name rules and reserved names every front-end shares. A host checks what a
// client sends with these functions before it accepts it, so nothing is
// stored that a later step (the scheduler, a retry, a replica) cannot
// deliver. They follow Apache RocketMQ's TopicValidator.
const (
	// MaxTopicLen is the longest topic name a client may use (RocketMQ's
	// 127 characters).
	MaxTopicLen = 127
	// MaxGroupLen is the longest group name: RetryTopic of every valid group
	// is a valid topic name.
	MaxGroupLen = MaxTopicLen - len(RetryPrefix)

	// RetryPrefix names the retry topics: messages group G asked to consume
	// again later are re-delivered through topic RetryPrefix+G.
	RetryPrefix = "%RETRY%"
	// DefaultTopic is RocketMQ's template topic for routes of topics that do
	// not exist yet (TBW102).
	DefaultTopic = "TBW102"
	// SystemTopicPrefix starts the names of RocketMQ's system topics
	// (rmq_sys_…); the scheduler's timer and progress topics are among them.
	SystemTopicPrefix = "rmq_sys_"
	// BrokerTopicPrefix starts the per-broker topics RocketMQ reserves.
	BrokerTopicPrefix = "rocketmq-broker-"
	// TransHalfTopic holds the half (prepared) messages of transactions
	// (txn.HalfTopic).
	TransHalfTopic = txn.HalfTopic
	// TransOpTopic holds the commit and rollback records of transactions
	// (txn.OpTopic).
	TransOpTopic = txn.OpTopic
	// TransCheckMaxTimeTopic keeps the half messages whose check-back limit
	// ran out (txn.CheckMaxTimeTopic).
	TransCheckMaxTimeTopic = txn.CheckMaxTimeTopic
)

// reservedTopics are the names RocketMQ keeps for itself (TopicValidator's
// SYSTEM_TOPIC_SET and NOT_ALLOWED_SEND_TOPIC_SET).
var reservedTopics = map[string]bool{
	DefaultTopic:                   true,
	schedule.Topic:                 true,
	schedule.TimerTopic:            true,
	schedule.ProgressTopic:         true,
	TransHalfTopic:                 true,
	TransOpTopic:                   true,
	TransCheckMaxTimeTopic:         true,
	"RMQ_SYS_TRACE_TOPIC":          true,
	"BenchmarkTest":                true,
	"SELF_TEST_TOPIC":              true,
	"OFFSET_MOVED_EVENT":           true,
	"RMQ_SYS_ROCKSDB_OFFSET_TOPIC": true,
}

// reservedPrefixes start reserved topic names.
var reservedPrefixes = []string{RetryPrefix, DeadLetterPrefix, SystemTopicPrefix, "RMQ_SYS_", BrokerTopicPrefix}

var (
	// ErrTopicName reports a topic name outside [%|a-zA-Z0-9_-]{1,127}.
	// It wraps ErrInvalid.
	ErrTopicName = fmt.Errorf("%w: topic name", ErrInvalid)
	// ErrGroupName reports a group name outside [%|a-zA-Z0-9_-]{1,120}.
	// It wraps ErrInvalid.
	ErrGroupName = fmt.Errorf("%w: group name", ErrInvalid)
	// ErrReservedTopic reports a topic a client may not use directly: a
	// system topic of the scheduler, of transactions, a retry or dead-letter
	// topic. It wraps ErrInvalid.
	ErrReservedTopic = fmt.Errorf("%w: reserved topic", ErrInvalid)
)

// validChars reports whether s is made of [%|a-zA-Z0-9_-] only.
func validChars(s string) bool {
	for i := 0; i < len(s); i++ {
		c := s[i]
		switch {
		case c >= 'a' && c <= 'z', c >= 'A' && c <= 'Z', c >= '0' && c <= '9', c == '%', c == '|', c == '_', c == '-':
		default:
			return false
		}
	}
	return true
}

// CheckTopicName checks a topic name's characters and length only
// (reserved names pass: see CheckClientTopic).
func CheckTopicName(t string) error {
	switch {
	case t == "":
		return fmt.Errorf("%w: empty", ErrTopicName)
	case len(t) > MaxTopicLen:
		return fmt.Errorf("%w: %d characters, at most %d", ErrTopicName, len(t), MaxTopicLen)
	case !validChars(t):
		return fmt.Errorf("%w: %q has characters outside [%%|a-zA-Z0-9_-]", ErrTopicName, t)
	}
	return nil
}

// CheckGroupName checks a consumer or producer group name.
func CheckGroupName(g string) error {
	switch {
	case g == "":
		return fmt.Errorf("%w: empty", ErrGroupName)
	case len(g) > MaxGroupLen:
		return fmt.Errorf("%w: %d characters, at most %d", ErrGroupName, len(g), MaxGroupLen)
	case !validChars(g):
		return fmt.Errorf("%w: %q has characters outside [%%|a-zA-Z0-9_-]", ErrGroupName, g)
	}
	return nil
}

// ReservedTopic reports whether t is a name RocketMQ keeps for itself: the
// template topic, the scheduler's, transactions' and other system topics,
// and every retry (RetryPrefix), dead-letter (DeadLetterPrefix), system
// (SystemTopicPrefix, "RMQ_SYS_") and per-broker (BrokerTopicPrefix) topic.
func ReservedTopic(t string) bool {
	if reservedTopics[t] {
		return true
	}
	for _, p := range reservedPrefixes {
		if strings.HasPrefix(t, p) {
			return true
		}
	}
	return false
}

// CheckClientTopic checks a topic a client names to send to, to route or to
// subscribe to: a valid name that is not reserved.
func CheckClientTopic(t string) error {
	if err := CheckTopicName(t); err != nil {
		return err
	}
	if ReservedTopic(t) {
		return fmt.Errorf("%w: %q", ErrReservedTopic, t)
	}
	return nil
}

// CheckProduce checks a message a client sends before it is accepted: its
// topic with CheckClientTopic and the whole message with store.CheckMessage
// (maxBody as there; 0 = store.DefaultMaxMessageSize). A message that passes
// is never refused by the store or by the scheduler for its shape. The error
// wraps ErrInvalid (and store.ErrInvalid for a limit).
func CheckProduce(m *store.Message, maxBody int) error {
	if m == nil {
		return fmt.Errorf("%w: nil message", ErrInvalid)
	}
	if err := CheckClientTopic(m.Topic); err != nil {
		return err
	}
	if err := store.CheckMessage(m, maxBody); err != nil {
		return fmt.Errorf("%w: %w", ErrInvalid, err)
	}
	return nil
}

// RetryTopic returns the retry topic of group.
func RetryTopic(group string) string { return RetryPrefix + group }
