package broker

import (
	"maps"
	"strconv"

	"github.com/brokercore/brokercore"
	"github.com/brokercore/brokercore/examples/rocketmq/remoting/wire"
	"github.com/brokercore/brokercore/store"
)

// sendBack serves CONSUMER_SEND_MSG_BACK: the message at log offset
// `offset` is given back with the library's rules (brokercore.SendBack:
// %RETRY%<group> after a delay one level longer per reconsume, or
// %DLQ%<group> past maxReconsumeTimes). This handler only translates the
// request and appends the result.
func (b *Broker) sendBack(req *wire.Command) *wire.Command {
	f := fields{ext: req.ExtFields}
	group := f.group("group")
	logOff := f.int64In(0, maxInt64, "offset")
	level := int(f.optInt64(0, -1, 1<<16, "delayLevel"))
	originID := f.opt("originMsgId")
	maxTimes := int(f.optInt64(int64(b.opts.MaxReconsumeTimes), 0, 1<<16, "maxReconsumeTimes"))
	if f.err != nil {
		return wire.NewResponse(req, wire.SystemError, f.err.Error())
	}
	var sbw SendBackWriter
	if w := b.opts.Writer; w != nil {
		var ok bool
		if sbw, ok = w.(SendBackWriter); !ok {
			// The client then consumes the message again itself, later.
			return wire.NewResponse(req, wire.SystemError, "send back is not supported by a replicated broker")
		}
	}
	m, err := b.st.ReadAt(logOff)
	if err != nil {
		return wire.NewResponse(req, wire.SystemError, "look up message at log offset "+i64(logOff)+": "+err.Error())
	}
	// What the request says that the stored message does not: the id the
	// client knows the message by (Apache prefers it to the message's own)
	// and the limit the retries carry.
	given := *m
	given.Properties = maps.Clone(m.Properties)
	if given.Properties == nil {
		given.Properties = map[string]string{}
	}
	if originID != "" && given.Properties[wire.PropOriginMessageID] == "" {
		given.Properties[wire.PropOriginMessageID] = originID
	}
	given.Properties[wire.PropMaxReconsume] = strconv.Itoa(maxTimes)
	if sbw != nil {
		return b.writeSendBack(req, sbw, &given, group, level, maxTimes, logOff)
	}
	out, err := b.core.SendBack(&given, group, level, maxTimes)
	if err != nil {
		return wire.NewResponse(req, storeCode(err), "send back: "+err.Error())
	}
	dead := out.Topic == brokercore.DeadLetterTopic(group)
	topic := brokercore.RetryTopic(group)
	if dead {
		topic = out.Topic
	}
	if _, err := b.topics.Ensure(topic, 1); err != nil {
		return wire.NewResponse(req, wire.SystemError, err.Error())
	}
	if err := b.st.Append(out); err != nil {
		return wire.NewResponse(req, storeCode(err), "append to "+topic+": "+err.Error())
	}
	return b.sentBack(req, group, logOff, m, dead)
}

// writeSendBack stores a send-back through the Writer (which plans it).
func (b *Broker) writeSendBack(req *wire.Command, w SendBackWriter, given *store.Message, group string, level, maxTimes int, logOff int64) *wire.Command {
	// Both topics exist before the message does, so that they route.
	for _, topic := range []string{brokercore.RetryTopic(group), brokercore.DeadLetterTopic(group)} {
		if _, err := b.topics.Ensure(topic, 1); err != nil {
			return wire.NewResponse(req, wire.SystemError, err.Error())
		}
	}
	out, err := w.SendBack(given, group, level, maxTimes)
	if err != nil {
		return wire.NewResponse(req, writerCode(err), "send back: "+err.Error())
	}
	return b.sentBack(req, group, logOff, given, out.Topic == brokercore.DeadLetterTopic(group))
}

// sentBack counts and answers a stored send-back.
func (b *Broker) sentBack(req *wire.Command, group string, logOff int64, m *store.Message, dead bool) *wire.Command {
	if dead {
		topic := m.Properties[wire.PropRetryTopic]
		if topic == "" {
			topic = m.Topic
		}
		b.stats.dlq.Add(1)
		b.log.Info("dead lettered", "group", group, "topic", topic, "offset", logOff,
			"reconsume_times", m.ReconsumeTimes)
		return wire.NewResponse(req, wire.Success, "")
	}
	b.stats.sentBack.Add(1)
	return wire.NewResponse(req, wire.Success, "")
}
