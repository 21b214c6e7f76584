package broker

import (
	"context"
	"errors"
	"strconv"
	"time"

	"github.com/brokercore/brokercore/examples/rocketmq/remoting/transport"
	"github.com/brokercore/brokercore/examples/rocketmq/remoting/wire"
	"github.com/brokercore/brokercore/pop"
	"github.com/brokercore/brokercore/store"
)

// Pull sysFlag bits.
const (
	pullCommitOffset = 1 << 0
	pullSuspend      = 1 << 1
	pullSubscription = 1 << 2
)

// maxScan bounds the messages one pull reads past the tag filter before it
// answers PULL_RETRY_IMMEDIATELY with the offset it got to.
const maxScan = 8192

// defaultPullBatch is the batch of a pull that asks for 0 messages.
const defaultPullBatch = 32

type pullReq struct {
	group, topic string
	queue        int
	offset       int64
	max          int
	sysFlag      int64
	commit       int64
	suspend      time.Duration
	expr         string
}

func parsePull(req *wire.Command) (pullReq, error) {
	f := fields{ext: req.ExtFields}
	p := pullReq{
		group:   f.group("consumerGroup"),
		topic:   f.topic("topic"),
		queue:   int(f.int64In(0, maxInt32, "queueId")),
		offset:  f.int64In(0, maxInt64, "queueOffset"),
		max:     int(f.int64In(0, maxInt32, "maxMsgNums")),
		sysFlag: f.optInt64(0, 0, maxInt32, "sysFlag"),
		commit:  f.optInt64(0, -1, maxInt64, "commitOffset"), // -1: none
		suspend: time.Duration(f.optInt64(0, 0, maxInt64/int64(time.Millisecond), "suspendTimeoutMillis")) * time.Millisecond,
		expr:    f.opt("subscription"),
	}
	if p.max == 0 {
		p.max = defaultPullBatch // the official pull consumer sends 0
	}
	if p.max > store.MaxReadBatch {
		p.max = store.MaxReadBatch
	}
	if p.sysFlag&pullSuspend == 0 {
		p.suspend = 0
	}
	return p, f.err
}

// pull serves PULL_MESSAGE: the commit riding in it, then the messages
// from the offset that pass the group's tag filter, long-polling for them.
func (b *Broker) pull(ctx context.Context, c *transport.Conn, req *wire.Command) *wire.Command {
	p, err := parsePull(req)
	if err != nil {
		return wire.NewResponse(req, wire.SystemError, err.Error())
	}
	n, ok := b.topics.Queues(p.topic)
	if !ok {
		return wire.NewResponse(req, wire.TopicNotExist, "topic "+p.topic+" does not exist")
	}
	if p.queue >= n {
		return wire.NewResponse(req, wire.SystemError, "queueId "+itoa(p.queue)+" out of range: topic "+p.topic+" has "+itoa(n)+" queues")
	}
	b.stats.pulls.Add(1)
	if p.sysFlag&pullCommitOffset != 0 && p.commit > 0 {
		b.commit(c, p.group, p.topic, p.queue, p.commit, "pull")
	}
	if p.sysFlag&pullSubscription == 0 || p.expr == "" {
		p.expr = b.subscriptionOf(p.group, p.topic)
	}
	filter, err := pop.ParseFilter(p.expr)
	if err != nil {
		return wire.NewResponse(req, wire.SubscriptionParseFailed, "parse the subscription "+strconv.Quote(p.expr)+": "+err.Error())
	}
	arrivals := b.core.Arrivals()
	deadline := time.Now().Add(min(p.suspend, b.opts.MaxPullWait))
	suspended := false
	for {
		woken := arrivals.Watch(p.topic, p.queue) // before the look: no arrival is missed
		if resp, done := b.pullOnce(c, req, &p, filter); done {
			return resp
		}
		left := time.Until(deadline)
		if left <= 0 {
			return b.pullAnswer(req, wire.PullNotFound, p.offset, p, nil)
		}
		if !suspended {
			suspended = true
			b.stats.suspended.Add(1)
		}
		t := time.NewTimer(left)
		select {
		case <-woken:
		case <-t.C:
		case <-ctx.Done():
			t.Stop()
			return nil
		case <-b.ctx.Done():
			t.Stop()
			return wire.NewResponse(req, wire.ServiceNotAvailable, "broker shutting down")
		case <-arrivals.Done():
			t.Stop()
			return wire.NewResponse(req, wire.ServiceNotAvailable, "broker shutting down")
		}
		t.Stop()
	}
}

// pullOnce looks at the queue once: done with the answer, or not done
// (nothing new at p.offset: wait for an arrival).
func (b *Broker) pullOnce(c *transport.Conn, req *wire.Command, p *pullReq, filter pop.Filter) (*wire.Command, bool) {
	// A connection that has not seen an admin reset of this queue is moved
	// to the reset offset (checked again after every wake-up: a reset wakes
	// the queue's long polls).
	if moved, to := b.staleView(c, p.group, p.topic, p.queue); moved {
		b.stats.moved.Add(1)
		b.log.Info("pull moved to reset offset", "group", p.group, "topic", p.topic, "queue", p.queue,
			"offset", to, "channel", c.ID())
		b.notifyLater(p.group, b.opts.ResetNotifyDelay)
		return b.pullAnswer(req, wire.PullOffsetMoved, to, *p, nil), true
	}
	for {
		lo, hi := b.st.MinOffset(p.topic, p.queue), b.st.MaxOffset(p.topic, p.queue)
		if p.offset < lo || p.offset > hi {
			to := lo
			if p.offset > hi {
				to = hi
			}
			b.stats.moved.Add(1)
			return b.pullAnswer(req, wire.PullOffsetMoved, to, *p, nil), true
		}
		if p.offset == hi {
			return nil, false
		}
		msgs, next, err := b.read(*p, filter)
		if errors.Is(err, store.ErrOffsetTooSmall) {
			continue // retention moved the minimum: answer OFFSET_MOVED
		}
		if err != nil {
			return wire.NewResponse(req, storeCode(err), "read: "+err.Error()), true
		}
		if len(msgs) > 0 {
			b.stats.pulled.Add(uint64(len(msgs)))
			return b.pullAnswer(req, wire.Success, next, *p, msgs), true
		}
		if next < b.st.MaxOffset(p.topic, p.queue) {
			// Filtered out up to maxScan: the client comes back from there
			// at once.
			return b.pullAnswer(req, wire.PullRetryImmediately, next, *p, nil), true
		}
		p.offset = next
		return nil, false
	}
}

// read returns the messages from p.offset that match filter, and the
// offset after the last message looked at.
func (b *Broker) read(p pullReq, filter pop.Filter) ([]*store.Message, int64, error) {
	all := filter.All()
	var out []*store.Message
	next := p.offset
	scanned, bytes := 0, 0
	for len(out) < p.max && scanned < maxScan && bytes < b.opts.MaxPullBytes {
		want := p.max - len(out)
		if !all {
			want = store.MaxReadBatch
		}
		msgs, err := b.st.Read(p.topic, p.queue, next, want)
		if err != nil {
			if len(out) > 0 {
				break
			}
			return nil, next, err
		}
		if len(msgs) == 0 {
			break
		}
		for _, m := range msgs {
			scanned++
			next = m.QueueOffset + 1
			if all || filter.Match(m.Tags) {
				out = append(out, m)
				bytes += len(m.Body)
				if len(out) >= p.max || bytes >= b.opts.MaxPullBytes {
					break
				}
			}
		}
	}
	return out, next, nil
}

func (b *Broker) pullAnswer(req *wire.Command, code int16, next int64, p pullReq, msgs []*store.Message) *wire.Command {
	resp := wire.NewResponse(req, code, "")
	resp.ExtFields["nextBeginOffset"] = i64(next)
	resp.ExtFields["minOffset"] = i64(b.st.MinOffset(p.topic, p.queue))
	resp.ExtFields["maxOffset"] = i64(b.st.MaxOffset(p.topic, p.queue))
	resp.ExtFields["suggestWhichBrokerId"] = "0"
	if len(msgs) > 0 {
		size := 0
		for _, m := range msgs {
			size += 128 + len(m.Body) + len(m.Topic) + 64*len(m.Properties)
		}
		body := make([]byte, 0, size)
		for _, m := range msgs {
			body = wire.EncodeMessage(body, m, b.storeHost)
		}
		resp.Body = body
	}
	return resp
}

// subscriptionOf returns the group's expression for topic from its
// heartbeats ("*" when it sent none).
func (b *Broker) subscriptionOf(group, topic string) string {
	for _, s := range b.core.Consumers().Subscriptions(group) {
		if s.Topic == topic {
			return s.Expression
		}
	}
	return "*"
}
