package broker

import (
	"errors"
	"fmt"
	"strconv"
	"strings"
	"time"

	"github.com/brokercore/brokercore"
	"github.com/brokercore/brokercore/examples/rocketmq/remoting/transport"
	"github.com/brokercore/brokercore/examples/rocketmq/remoting/wire"
	"github.com/brokercore/brokercore/store"
)

// maxBatch bounds the messages of one SEND_BATCH_MESSAGE.
const maxBatch = 4096

// sendHeader is a send's extFields, long or V2 one-letter names.
type sendHeader struct {
	topic, defTopic, props      string
	queue, reconsume, defQueues int
	sysFlag, flag               int32
	born                        int64
	batch                       bool
}

func parseSend(req *wire.Command) (sendHeader, error) {
	f := fields{ext: req.ExtFields}
	h := sendHeader{
		topic:     f.topic("topic", "b"),
		queue:     int(f.int64In(0, maxInt32, "queueId", "e")),
		sysFlag:   int32(f.optInt64(0, 0, maxInt32, "sysFlag", "f")),
		born:      f.optInt64(0, 0, maxInt64, "bornTimestamp", "g"),
		flag:      int32(f.optInt64(0, -1<<31, maxInt32, "flag", "h")),
		props:     f.opt("properties", "i"),
		reconsume: int(f.optInt64(0, 0, maxInt32, "reconsumeTimes", "j")),
		defQueues: int(f.optInt64(4, 1, 1024, "defaultTopicQueueNums", "d")),
		defTopic:  f.opt("defaultTopic", "c"),
		batch:     req.Code == wire.CodeSendBatchMessage || f.opt("batch", "m") == "true",
	}
	if g := f.opt("producerGroup", "a"); g != "" && f.err == nil {
		if err := brokercore.CheckGroupName(g); err != nil {
			f.fail("%v", err)
		}
	}
	return h, f.err
}

// send serves SEND_MESSAGE, SEND_MESSAGE_V2 (one-letter names) and
// SEND_BATCH_MESSAGE: one atomic append, delayed and timed messages through
// the scheduler.
func (b *Broker) send(c *transport.Conn, req *wire.Command) *wire.Command {
	p := b.prepareSend(req)
	if p.resp != nil {
		return p.resp
	}
	if p.half {
		b.heardProducers(c, []producerData{{GroupName: p.group}}) // the sender is a producer of the group
		return b.sendHalf(&p, p.group)                            // txn.go
	}
	return b.appendSend(&p)
}

// preparedSend is a send checked and turned into store messages, ready to
// append: or resp, its error answer.
type preparedSend struct {
	req   *wire.Command
	queue int
	msgs  []*store.Message
	resp  *wire.Command
	half  bool   // a transaction's half message (txn.go): not scheduled, prepared
	group string // the producer group of a half
}

// prepareSend checks a send and builds its messages (delayed and timed ones
// rewritten for the scheduler); nothing is stored.
func (b *Broker) prepareSend(req *wire.Command) preparedSend {
	reject := func(code int16, err error) preparedSend {
		b.stats.sendRejected.Add(1)
		return preparedSend{req: req, resp: wire.NewResponse(req, code, err.Error())}
	}
	h, err := parseSend(req)
	if err != nil {
		return reject(wire.SystemError, err)
	}
	if err := checkSendTopic(h.topic); err != nil {
		if errors.Is(err, brokercore.ErrReservedTopic) {
			return reject(wire.NoPermission, err)
		}
		return reject(wire.SystemError, err)
	}
	n, err := b.ensureSendTopic(h.topic, h.defTopic, h.defQueues)
	if err != nil {
		return reject(wire.SystemError, err)
	}
	if h.queue >= n {
		return reject(wire.SystemError, fmt.Errorf("request queueId[%d] is illegal, topic %s has %d queues", h.queue, h.topic, n))
	}
	msgs, err := b.messagesOf(h, req.Body)
	if err != nil {
		return reject(wire.MessageIllegal, err)
	}
	b.stampCluster(msgs) // reply.go
	if isHalfSend(h, msgs[0].Properties) {
		return preparedSend{req: req, queue: h.queue, msgs: msgs, half: true, group: (&fields{ext: req.ExtFields}).opt("producerGroup", "a")}
	}
	if b.opts.Writer != nil {
		err = checkScheduled(msgs) // the Writer schedules
	} else {
		err = b.schedule(msgs)
	}
	if err != nil {
		return reject(wire.MessageIllegal, err)
	}
	return preparedSend{req: req, queue: h.queue, msgs: msgs}
}

// checkSendTopic is brokercore.CheckProduce's topic half for a send, made
// before the topic is created: a topic the core reserves (the scheduler's,
// transactions', system and dead-letter topics, TBW102) is refused, as
// Apache's msgCheck refuses its not-allowed topics with NO_PERMISSION. A
// retry topic of a valid group stays sendable: the v2 client sends there
// through its producer when CONSUMER_SEND_MSG_BACK fails. The message half,
// store.CheckMessage, is the check store.Append makes itself with the
// store's own limit: the scheduler's copy of a delayed message carries more
// metadata than the message it appends when due, so a message the store
// took once, to a topic that passed here, is never refused for its shape
// later.
func checkSendTopic(topic string) error {
	if g, ok := strings.CutPrefix(topic, brokercore.RetryPrefix); ok {
		return brokercore.CheckGroupName(g)
	}
	return brokercore.CheckClientTopic(topic)
}

// appendSend appends a prepared send on its own and answers it.
func (b *Broker) appendSend(p *preparedSend) *wire.Command {
	if b.opts.Writer != nil {
		return b.write(p)
	}
	if err := b.st.Append(p.msgs...); err != nil {
		b.stats.sendRejected.Add(1)
		return wire.NewResponse(p.req, storeCode(err), fmt.Errorf("append: %w", err).Error())
	}
	return b.sendAnswer(p)
}

// sendAnswer is the answer to a prepared send once its messages are
// stored.
func (b *Broker) sendAnswer(p *preparedSend) *wire.Command {
	msgs := p.msgs
	b.stats.sent.Add(uint64(len(msgs)))
	var one [64]byte // a single send's id needs no buffer of its own
	ids := one[:0]
	if len(msgs) > 1 {
		ids = make([]byte, 0, 33*len(msgs))
	}
	for i, m := range msgs {
		if i > 0 {
			ids = append(ids, ',')
		}
		ids = wire.AppendOffsetMsgID(ids, b.storeHost, m.LogOffset)
	}
	resp := wire.NewResponse(p.req, wire.Success, "")
	resp.ExtFields["msgId"] = string(ids)
	resp.ExtFields["queueId"] = itoa(p.queue)
	resp.ExtFields["queueOffset"] = i64(msgs[0].QueueOffset)
	return resp
}

// sendBatch serves the sends of one read burst (see BatchHandler): each is
// checked on its own, the valid ones are appended together in one store
// append (one log write), and each gets the answer it would have got
// alone. When that append fails (a store failure, or one message the store
// refuses) the sends are appended one by one, so one bad send decides
// nothing for the others.
func (b *Broker) sendBatch(reqs []*wire.Command) []*wire.Command {
	ps := make([]preparedSend, len(reqs))
	n := 0
	for i, req := range reqs {
		ps[i] = b.prepareSend(req)
		if ps[i].half { // Batch keeps halves out; should one come, it is prepared alone
			ps[i].resp = b.sendHalf(&ps[i], ps[i].group)
			ps[i].msgs = nil
		}
		n += len(ps[i].msgs)
	}
	all := make([]*store.Message, 0, n)
	for i := range ps {
		all = append(all, ps[i].msgs...)
	}
	together := b.opts.Writer == nil && len(all) > 0 && b.st.Append(all...) == nil
	resps := make([]*wire.Command, len(reqs))
	for i := range ps {
		switch p := &ps[i]; {
		case p.resp != nil:
			resps[i] = p.resp
		case together:
			resps[i] = b.sendAnswer(p)
		default:
			resps[i] = b.appendSend(p)
		}
	}
	return resps
}

// messagesOf builds the store messages of a send.
func (b *Broker) messagesOf(h sendHeader, body []byte) ([]*store.Message, error) {
	if !h.batch {
		if len(h.props) > wire.MaxPropertiesLen {
			return nil, fmt.Errorf("message properties of %d bytes, at most %d", len(h.props), wire.MaxPropertiesLen)
		}
		m, err := b.newMessage(h.topic, h.queue, h.flag, h.sysFlag&wire.SysFlagKept, h.born, h.reconsume, body, wire.ParseProperties(h.props))
		if err != nil {
			return nil, err
		}
		return []*store.Message{m}, nil
	}
	items, err := wire.DecodeBatch(body, maxBatch)
	if err != nil {
		return nil, err
	}
	msgs := make([]*store.Message, 0, len(items))
	for _, it := range items {
		m, err := b.newMessage(h.topic, h.queue, it.Flag, 0, h.born, h.reconsume, it.Body, it.Props)
		if err != nil {
			return nil, err
		}
		msgs = append(msgs, m)
	}
	return msgs, nil
}

// schedule rewrites, in place, the messages with a delay level or a
// delivery time for the scheduler: they wait in its topics.
func (b *Broker) schedule(msgs []*store.Message) error {
	for i, m := range msgs {
		lv, err := delayLevel(m.Properties)
		if err != nil {
			return err
		}
		at, err := deliverAt(m.Properties)
		if err != nil {
			return err
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
			return err
		}
		msgs[i] = d
		b.stats.delayed.Add(1)
	}
	return nil
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
	if strings.HasPrefix(topic, brokercore.RetryPrefix) || strings.HasPrefix(topic, brokercore.DeadLetterPrefix) {
		n = 1
	}
	return b.topics.Ensure(topic, n)
}

func (b *Broker) newMessage(topic string, queueID int, flag, sysFlag int32, born int64, reconsume int,
	body []byte, props map[string]string) (*store.Message, error) {
	if props == nil {
		props = map[string]string{}
	}
	if wire.PropertiesLen(props) > wire.MaxPropertiesLen {
		return nil, fmt.Errorf("message properties longer than %d bytes", wire.MaxPropertiesLen)
	}
	if flag != 0 {
		props[wire.PropFlag] = strconv.FormatInt(int64(flag), 10)
	}
	if sysFlag != 0 {
		props[wire.PropSysFlag] = strconv.FormatInt(int64(sysFlag), 10)
	}
	return &store.Message{Topic: topic, QueueID: queueID, Tags: props[wire.PropTags], Keys: wire.KeysOf(props),
		Body: body, Properties: props, BornAt: wire.BornAt(born), ReconsumeTimes: reconsume}, nil
}

// delayLevel reads the DELAY property: 0 for none.
func delayLevel(props map[string]string) (int, error) {
	v, ok := props[wire.PropDelay]
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
