package brokercore

import (
	"maps"
	"strconv"

	"github.com/brokercore/brokercore/schedule"
	"github.com/brokercore/brokercore/store"
)

// DeadLetterPrefix names the dead-letter topics: the messages that group G
// could not consume within pop.Options.MaxAttempts deliveries are appended
// to queue 0 of topic DeadLetterPrefix+G (RocketMQ's "%DLQ%" + group). It is
// a topic like any other: readable, poppable, retained.
const DeadLetterPrefix = "%DLQ%"

// Properties Open's dead-letter path adds to the copy it appends, so that a
// tool can tell where a dead letter came from. DLQ_ORIGIN_TOPIC and
// DLQ_ORIGIN_MESSAGE_ID are RocketMQ's names.
const (
	// PropDLQOriginTopic is the topic the message was consumed from.
	PropDLQOriginTopic = "DLQ_ORIGIN_TOPIC"
	// PropDLQOriginQueue is its queue ID there (decimal).
	PropDLQOriginQueue = "DLQ_ORIGIN_QID"
	// PropDLQOriginOffset is its queue offset there (decimal).
	PropDLQOriginOffset = "DLQ_ORIGIN_OFFSET"
	// PropDLQOriginMessageID is its unique key (the UNIQ_KEY property),
	// when it has one.
	PropDLQOriginMessageID = "DLQ_ORIGIN_MESSAGE_ID"
	// PropDLQReason is why a dead letter could not be delivered, on the
	// scheduler's dead letters (schedule.DeadLetterTopic): the log's error.
	PropDLQReason = schedule.PropDLQReason
	// PropUniqKey is the property holding a message's unique key
	// (schedule.PropUniqKey, RocketMQ's UNIQ_KEY).
	PropUniqKey = "UNIQ_KEY"
)

// DeadLetterTopic returns the dead-letter topic of group.
func DeadLetterTopic(group string) string { return DeadLetterPrefix + group }

// DeadLetterMessage returns the copy of m that Open's dead-letter path
// appends for group: queue 0 of DeadLetterTopic(group), with m's tags, keys,
// body, born time and reconsume count, m's properties, and the origin
// properties (PropDLQOrigin…) added. m is not modified.
func DeadLetterMessage(group string, m *store.Message) *store.Message {
	props := make(map[string]string, len(m.Properties)+4)
	maps.Copy(props, m.Properties)
	props[PropDLQOriginTopic] = m.Topic
	props[PropDLQOriginQueue] = strconv.Itoa(m.QueueID)
	props[PropDLQOriginOffset] = strconv.FormatInt(m.QueueOffset, 10)
	if id, ok := m.Properties[PropUniqKey]; ok {
		props[PropDLQOriginMessageID] = id
	}
	return &store.Message{
		Topic:          DeadLetterTopic(group),
		QueueID:        0,
		Tags:           m.Tags,
		Keys:           append([]string(nil), m.Keys...),
		Body:           append([]byte(nil), m.Body...),
		Properties:     props,
		BornAt:         m.BornAt,
		ReconsumeTimes: m.ReconsumeTimes,
	}
}
