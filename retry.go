package brokercore

import (
	"fmt"
	"maps"

	"github.com/brokercore/brokercore/store"
)

// retry.go is the retry and dead-letter policy of a message a consumer gives
// back (RocketMQ's CONSUMER_SEND_MSG_BACK, AbstractSendMessageProcessor's
// consumerSendMsgBack): it goes to the group's retry topic, delayed by the
// scheduler's levels, one level more for each reconsume, until it has been
// reconsumed MaxReconsumeTimes times; then to the group's dead-letter topic.

// Defaults and properties of the retry policy (RocketMQ's values and names).
const (
	// DefaultMaxReconsumeTimes is the number of retries before a message
	// goes to the dead-letter topic when the consumer names none (the
	// subscription group's retryMaxTimes and the clients' default, 16).
	DefaultMaxReconsumeTimes = 16
	// RetryBaseLevel is the delay level of a first retry asked for with
	// delay level 0: level RetryBaseLevel+reconsumeTimes (10 s, 30 s, 1 m, …
	// with the default levels).
	RetryBaseLevel = 3

	// PropRetryTopic holds the topic a retried message was first consumed
	// from (RocketMQ's RETRY_TOPIC): set once, on its first send-back.
	PropRetryTopic = "RETRY_TOPIC"
	// PropOriginMessageID holds the id of the message a retry is a copy
	// of (RocketMQ's ORIGIN_MESSAGE_ID): set once, from its UNIQ_KEY.
	PropOriginMessageID = "ORIGIN_MESSAGE_ID"
	// PropDelayLevel is the delay level property (schedule.PropDelayLevel,
	// RocketMQ's DELAY); a send-back drops the one the message came with.
	PropDelayLevel = "DELAY"
)

// SendBackPlan is where a message given back goes: Message is the copy to
// append — to RetryTopic(group) queue 0 after a delay of Level (pass it to
// Scheduler().Delay, as Broker.SendBack does), or, when DeadLetter, to
// DeadLetterTopic(group) queue 0 at once (Level is then 0).
type SendBackPlan struct {
	Message    *store.Message
	Level      int
	DeadLetter bool
}

// PlanSendBack applies RocketMQ's send-back rules to m, a message that a
// consumer of group could not consume and gives back with delayLevel:
//
//   - m goes to the dead-letter topic when delayLevel < 0 (the consumer
//     asks for it) or m.ReconsumeTimes >= maxReconsume;
//   - otherwise to the retry topic, at delay level delayLevel, or
//     RetryBaseLevel+m.ReconsumeTimes when delayLevel is 0 (the scheduler
//     clamps a level above its highest);
//   - either way the copy counts one more reconsume (ReconsumeTimes+1),
//     keeps m's tags, keys, body, born time and properties, gets
//     PropRetryTopic (m.Topic) and PropOriginMessageID (m's UNIQ_KEY) unless
//     m has them, and loses m's PropDelayLevel.
//
// maxReconsume < 0 means DefaultMaxReconsumeTimes (the clients' -1); 0
// dead-letters at once. A nil m or an invalid group is ErrInvalid. m is
// not modified.
func PlanSendBack(m *store.Message, group string, delayLevel, maxReconsume int) (SendBackPlan, error) {
	if m == nil {
		return SendBackPlan{}, fmt.Errorf("%w: send back: nil message", ErrInvalid)
	}
	if err := CheckGroupName(group); err != nil {
		return SendBackPlan{}, fmt.Errorf("send back: %w", err)
	}
	if maxReconsume < 0 {
		maxReconsume = DefaultMaxReconsumeTimes
	}
	props := make(map[string]string, len(m.Properties)+2)
	maps.Copy(props, m.Properties)
	if _, ok := props[PropRetryTopic]; !ok {
		props[PropRetryTopic] = m.Topic
	}
	if props[PropOriginMessageID] == "" {
		if id := m.Properties[PropUniqKey]; id != "" {
			props[PropOriginMessageID] = id
		}
	}
	delete(props, PropDelayLevel)
	out := &store.Message{
		Tags:           m.Tags,
		Keys:           append([]string(nil), m.Keys...),
		Body:           append([]byte(nil), m.Body...),
		Properties:     props,
		BornAt:         m.BornAt,
		ReconsumeTimes: m.ReconsumeTimes + 1,
	}
	if m.ReconsumeTimes >= maxReconsume || delayLevel < 0 {
		out.Topic = DeadLetterTopic(group)
		return SendBackPlan{Message: out, DeadLetter: true}, nil
	}
	out.Topic = RetryTopic(group)
	if delayLevel == 0 {
		delayLevel = RetryBaseLevel + m.ReconsumeTimes
	}
	return SendBackPlan{Message: out, Level: delayLevel}, nil
}

// SendBack is PlanSendBack made ready to append: the dead letter as it is,
// or the retry message rewritten by the scheduler for its delay level
// (Scheduler().Delay). The host appends the result (Store().Append).
func (b *Broker) SendBack(m *store.Message, group string, delayLevel, maxReconsume int) (*store.Message, error) {
	p, err := PlanSendBack(m, group, delayLevel, maxReconsume)
	if err != nil {
		return nil, err
	}
	if p.DeadLetter {
		return p.Message, nil
	}
	d, err := b.sched.Delay(p.Message, p.Level)
	if err != nil {
		return nil, fmt.Errorf("brokercore: send back: %w", err)
	}
	return d, nil
}
