package schedule

import (
	"errors"
	"strconv"

	"github.com/brokercore/brokercore/store"
)

// DeadLetterTopic is where the scheduler moves a due message (of a level or
// a timer) that the log refuses for good (store.ErrInvalid: a real topic
// over the store's limit restored from a record someone wrote to Topic by
// hand, metadata over the limits, a body over a lowered MaxMessageSize), so
// that one such record never stops its level. The name is RocketMQ's
// dead-letter topic ("%DLQ%" + group) of the scheduler's own consumer
// group (MixAll.SCHEDULE_CONSUMER_GROUP, "SCHEDULE_CONSUMER"): tools that
// list dead-letter topics find it, and the "%DLQ%" prefix is reserved, so
// no client can send to it. It is not an "rmq_sys_" topic because it holds
// ordinary messages for an operator to read, fix and send again.
const DeadLetterTopic = "%DLQ%SCHEDULE_CONSUMER"

// Properties of a dead letter, beside the record's own (which keep
// PropRealTopic, PropRealQueue and the level or timer properties, so the
// message can be fixed and sent again). The DLQ_ORIGIN names are
// RocketMQ's and brokercore's.
const (
	// PropDLQReason is why the log refused the message (the error text).
	PropDLQReason = "DLQ_REASON"
	// PropDLQOriginTopic is Topic or TimerTopic.
	PropDLQOriginTopic = "DLQ_ORIGIN_TOPIC"
	// PropDLQOriginQueue is the record's queue there (decimal).
	PropDLQOriginQueue = "DLQ_ORIGIN_QID"
	// PropDLQOriginOffset is the record's queue offset there (decimal).
	PropDLQOriginOffset = "DLQ_ORIGIN_OFFSET"
)

// maxReason bounds PropDLQReason, so the reason itself cannot push a dead
// letter over the metadata limit.
const maxReason = 512

// permanent reports whether the log refused an append for good: retrying
// the same batch can never succeed.
func permanent(err error) bool { return errors.Is(err, store.ErrInvalid) }

// origin is where a restored message waited: its schedule or timer record.
type origin struct {
	topic  string
	queue  int
	offset int64
	props  map[string]string // the scheduling properties restore removed
}

// deadLetter returns the dead letter of m, a restored message the log
// refused with reason: queue 0 of DeadLetterTopic, m's tags, keys, body,
// born time, reconsume count and properties, the scheduling properties of
// its record put back and the PropDLQ… ones added.
func deadLetter(m *store.Message, o origin, reason error) *store.Message {
	props := make(map[string]string, len(m.Properties)+len(o.props)+6)
	for k, v := range m.Properties {
		props[k] = v
	}
	props[PropRealTopic] = m.Topic
	props[PropRealQueue] = strconv.Itoa(m.QueueID)
	for k, v := range o.props {
		props[k] = v
	}
	why := reason.Error()
	if len(why) > maxReason {
		why = why[:maxReason]
	}
	props[PropDLQReason] = why
	props[PropDLQOriginTopic] = o.topic
	props[PropDLQOriginQueue] = strconv.Itoa(o.queue)
	props[PropDLQOriginOffset] = strconv.FormatInt(o.offset, 10)
	return &store.Message{
		Topic:          DeadLetterTopic,
		Tags:           m.Tags,
		Keys:           m.Keys,
		Body:           m.Body,
		Properties:     props,
		BornAt:         m.BornAt,
		ReconsumeTimes: m.ReconsumeTimes,
	}
}
