package broker

import (
	"maps"
	"strconv"

	"github.com/brokercore/brokercore"
	"github.com/brokercore/brokercore/examples/rocketmq/remoting/wire"
	"github.com/brokercore/brokercore/store"
)

// retryBaseLevel is the delay level of a first retry (10 s by default
// levels); each further retry waits one level more.
const retryBaseLevel = 3

// sendBack serves CONSUMER_SEND_MSG_BACK: the message at log offset
// `offset` goes to %RETRY%<group> with one more reconsume time, or to
// %DLQ%<group> past maxReconsumeTimes.
func (b *Broker) sendBack(req *wire.Command) *wire.Command {
	f := fields{ext: req.ExtFields}
	group := f.group("group")
	logOff := f.int64In(0, maxInt64, "offset")
	level := int(f.optInt64(0, -1, 1<<16, "delayLevel"))
	originID := f.opt("originMsgId")
	originTopic := f.opt("originTopic")
	maxTimes := int(f.optInt64(int64(b.opts.MaxReconsumeTimes), 0, 1<<16, "maxReconsumeTimes"))
	if f.err != nil {
		return wire.NewResponse(req, wire.SystemError, f.err.Error())
	}
	if b.opts.Writer != nil {
		// The client then consumes the message again itself, later.
		return wire.NewResponse(req, wire.SystemError, "send back is not supported by a replicated broker")
	}
	m, err := b.st.ReadAt(logOff)
	if err != nil {
		return wire.NewResponse(req, wire.SystemError, "look up message at log offset "+i64(logOff)+": "+err.Error())
	}
	props := maps.Clone(m.Properties)
	if props == nil {
		props = map[string]string{}
	}
	if _, ok := props[wire.PropRetryTopic]; !ok {
		t := originTopic
		if t == "" {
			t = m.Topic
		}
		props[wire.PropRetryTopic] = t
	}
	if _, ok := props[wire.PropOriginMessageID]; !ok && originID != "" {
		props[wire.PropOriginMessageID] = originID
	}
	delete(props, wire.PropDelay)
	times := m.ReconsumeTimes
	out := &store.Message{Tags: m.Tags, Keys: m.Keys, Body: m.Body, Properties: props, BornAt: m.BornAt,
		ReconsumeTimes: times + 1}
	if times >= maxTimes || level < 0 {
		out.Topic = brokercore.DeadLetterPrefix + group
		if _, err := b.topics.Ensure(out.Topic, 1); err != nil {
			return wire.NewResponse(req, wire.SystemError, err.Error())
		}
		out.ReconsumeTimes = times
		if err := b.st.Append(out); err != nil {
			return wire.NewResponse(req, storeCode(err), "append to dead letter topic: "+err.Error())
		}
		b.stats.dlq.Add(1)
		b.log.Info("dead lettered", "group", group, "topic", props[wire.PropRetryTopic], "offset", logOff,
			"reconsume_times", times)
		return wire.NewResponse(req, wire.Success, "")
	}
	out.Topic = brokercore.RetryPrefix + group
	if _, err := b.topics.Ensure(out.Topic, 1); err != nil {
		return wire.NewResponse(req, wire.SystemError, err.Error())
	}
	if level == 0 {
		level = retryBaseLevel + times
	}
	props[wire.PropMaxReconsume] = strconv.Itoa(maxTimes)
	d, err := b.core.Scheduler().Delay(out, level)
	if err != nil {
		return wire.NewResponse(req, wire.SystemError, "delay: "+err.Error())
	}
	if err := b.st.Append(d); err != nil {
		return wire.NewResponse(req, storeCode(err), "append to retry topic: "+err.Error())
	}
	b.stats.sentBack.Add(1)
	return wire.NewResponse(req, wire.Success, "")
}
