package remoting

import (
	"fmt"
	"strconv"
	"strings"
	"time"

	"github.com/brokercore/brokercore/store"
)

// maxBatch bounds the messages of one SEND_BATCH_MESSAGE.
const maxBatch = 4096

// send serves SEND_MESSAGE, SEND_MESSAGE_V2 (one-letter names) and
// SEND_BATCH_MESSAGE.
func (b *Broker) send(c *Conn, req *Command) *Command {
	f := fields{ext: req.ExtFields}
	topic := f.topic("topic", "b")
	queueID := int(f.int64In(0, maxInt32, "queueId", "e"))
	sysFlag := int32(f.optInt64(0, 0, maxInt32, "sysFlag", "f"))
	born := f.optInt64(0, 0, maxInt64, "bornTimestamp", "g")
	flag := int32(f.optInt64(0, -1<<31, maxInt32, "flag", "h"))
	propText := f.opt("properties", "i")
	reconsume := int(f.optInt64(0, 0, maxInt32, "reconsumeTimes", "j"))
	defQueues := int(f.optInt64(4, 1, 1024, "defaultTopicQueueNums", "d"))
	batch := req.Code == CodeSendBatchMessage || f.opt("batch", "m") == "true"
	if g := f.opt("producerGroup", "a"); g != "" && f.err == nil {
		if err := ValidGroup(g); err != nil {
			f.fail("%v", err)
		}
	}
	if f.err != nil {
		b.stats.sendRejected.Add(1)
		return NewResponse(req, SystemError, f.err.Error())
	}
	n, err := b.ensureSendTopic(topic, f.opt("defaultTopic", "c"), defQueues)
	if err != nil {
		b.stats.sendRejected.Add(1)
		return NewResponse(req, SystemError, err.Error())
	}
	if queueID >= n {
		b.stats.sendRejected.Add(1)
		return NewResponse(req, SystemError, fmt.Sprintf("request queueId[%d] is illegal, topic %s has %d queues", queueID, topic, n))
	}
	var msgs []*store.Message
	if batch {
		items, err := DecodeBatch(req.Body, maxBatch)
		if err != nil {
			b.stats.sendRejected.Add(1)
			return NewResponse(req, MessageIllegal, err.Error())
		}
		for _, it := range items {
			m, err := b.newMessage(topic, queueID, it.Flag, 0, born, reconsume, it.Body, it.Props)
			if err != nil {
				b.stats.sendRejected.Add(1)
				return NewResponse(req, MessageIllegal, err.Error())
			}
			msgs = append(msgs, m)
		}
	} else {
		if len(propText) > MaxPropertiesLen {
			b.stats.sendRejected.Add(1)
			return NewResponse(req, MessageIllegal, fmt.Sprintf("message properties of %d bytes, at most %d", len(propText), MaxPropertiesLen))
		}
		m, err := b.newMessage(topic, queueID, flag, sysFlag&sysFlagKept, born, reconsume, req.Body, ParseProperties(propText))
		if err != nil {
			b.stats.sendRejected.Add(1)
			return NewResponse(req, MessageIllegal, err.Error())
		}
		msgs = append(msgs, m)
	}
	// Delayed messages wait in the scheduler's topic.
	real := make([]int, len(msgs))
	for i, m := range msgs {
		real[i] = m.QueueID
		lv, err := delayLevel(m.Properties)
		if err != nil {
			b.stats.sendRejected.Add(1)
			return NewResponse(req, MessageIllegal, err.Error())
		}
		at, err := deliverAt(m.Properties)
		if err != nil {
			b.stats.sendRejected.Add(1)
			return NewResponse(req, MessageIllegal, err.Error())
		}
		var d *store.Message
		switch {
		case lv > 0:
			d, err = b.core.Scheduler().Delay(m, lv)
		case !at.IsZero():
			d, err = b.core.Scheduler().At(m, at)
		default:
			continue
		}
		if err != nil {
			b.stats.sendRejected.Add(1)
			return NewResponse(req, MessageIllegal, err.Error())
		}
		msgs[i] = d
		b.stats.delayed.Add(1)
	}
	if err := b.st.Append(msgs...); err != nil {
		b.stats.sendRejected.Add(1)
		return NewResponse(req, storeCode(err), "append: "+err.Error())
	}
	b.stats.sent.Add(uint64(len(msgs)))
	ids := make([]string, len(msgs))
	for i, m := range msgs {
		ids[i] = OffsetMsgID(b.storeHost, m.LogOffset)
	}
	resp := NewResponse(req, Success, "")
	resp.ExtFields["msgId"] = strings.Join(ids, ",")
	resp.ExtFields["queueId"] = itoa(real[0])
	resp.ExtFields["queueOffset"] = i64(msgs[0].QueueOffset)
	return resp
}

// ensureSendTopic returns the queue count of topic, creating it on the
// first send as Apache does: min(defaultTopicQueueNums, the default topic's
// queues), one queue for retry and dead-letter topics.
func (b *Broker) ensureSendTopic(topic, defTopic string, defQueues int) (int, error) {
	if n, ok := b.topics.Queues(topic); ok {
		return n, nil
	}
	n := b.topics.DefaultQueues()
	if defTopic != "" {
		if dn, ok := b.topics.Queues(defTopic); ok {
			n = dn
		}
	}
	if defQueues < n {
		n = defQueues
	}
	if strings.HasPrefix(topic, RetryPrefix) || strings.HasPrefix(topic, DLQPrefix) {
		n = 1
	}
	return b.topics.Ensure(topic, n)
}

func (b *Broker) newMessage(topic string, queueID int, flag, sysFlag int32, born int64, reconsume int,
	body []byte, props map[string]string) (*store.Message, error) {
	if props == nil {
		props = map[string]string{}
	}
	if len(AppendProperties(nil, props)) > MaxPropertiesLen {
		return nil, fmt.Errorf("message properties longer than %d bytes", MaxPropertiesLen)
	}
	if flag != 0 {
		props[propFlag] = strconv.FormatInt(int64(flag), 10)
	}
	if sysFlag != 0 {
		props[propSysFlag] = strconv.FormatInt(int64(sysFlag), 10)
	}
	return &store.Message{Topic: topic, QueueID: queueID, Tags: props[PropTags], Keys: keysOf(props),
		Body: body, Properties: props, BornAt: bornAt(born), ReconsumeTimes: reconsume}, nil
}

// delayLevel reads the DELAY property: 0 for none.
func delayLevel(props map[string]string) (int, error) {
	v, ok := props[PropDelay]
	if !ok || v == "" {
		return 0, nil
	}
	n, err := strconv.Atoi(v)
	if err != nil || n < 0 {
		return 0, fmt.Errorf("property DELAY=%q is not a delay level", v)
	}
	return n, nil
}

// Timer properties: an absolute delivery time in Unix ms (RocketMQ 4's
// __STARTDELIVERTIME, 5's TIMER_DELIVER_MS) or a delay (TIMER_DELAY_SEC,
// TIMER_DELAY_MS).
const (
	PropStartDeliverTime = "__STARTDELIVERTIME"
	PropTimerDeliverMS   = "TIMER_DELIVER_MS"
	PropTimerDelaySec    = "TIMER_DELAY_SEC"
	PropTimerDelayMS     = "TIMER_DELAY_MS"
)

// deliverAt reads the timer properties: the zero time for none.
func deliverAt(props map[string]string) (time.Time, error) {
	for _, k := range []string{PropTimerDeliverMS, PropStartDeliverTime, PropTimerDelayMS, PropTimerDelaySec} {
		v, ok := props[k]
		if !ok || v == "" {
			continue
		}
		n, err := strconv.ParseInt(v, 10, 64)
		if err != nil || n < 0 || n > maxInt64/int64(time.Millisecond) {
			return time.Time{}, fmt.Errorf("property %s=%q is not a non-negative integer", k, v)
		}
		switch k {
		case PropTimerDelayMS:
			return time.Now().Add(time.Duration(n) * time.Millisecond), nil
		case PropTimerDelaySec:
			if n > maxInt64/int64(time.Second) {
				return time.Time{}, fmt.Errorf("property %s=%q too large", k, v)
			}
			return time.Now().Add(time.Duration(n) * time.Second), nil
		}
		return time.UnixMilli(n), nil
	}
	return time.Time{}, nil
}
