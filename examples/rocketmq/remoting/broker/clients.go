package broker

import (
	"encoding/json"
	"errors"
	"sort"
	"sync"
	"time"

	"github.com/brokercore/brokercore"
	"github.com/brokercore/brokercore/consumer"
	"github.com/brokercore/brokercore/examples/rocketmq/remoting/transport"
	"github.com/brokercore/brokercore/examples/rocketmq/remoting/wire"
	"github.com/brokercore/brokercore/lock"
	"github.com/brokercore/brokercore/offset"
)

type subscriptionData struct {
	Topic      string `json:"topic"`
	SubString  string `json:"subString"`
	SubVersion int64  `json:"subVersion"`
	ExpType    string `json:"expressionType"`
}

type consumerData struct {
	GroupName    string             `json:"groupName"`
	ConsumeType  string             `json:"consumeType"`
	MessageModel string             `json:"messageModel"`
	Subs         []subscriptionData `json:"subscriptionDataSet"`
}

type heartbeatData struct {
	ClientID  string         `json:"clientID"`
	Producers []producerData `json:"producerDataSet"` // txn.go: checks go to them
	Consumers []consumerData `json:"consumerDataSet"`
}

func (b *Broker) heartbeat(c *transport.Conn, req *wire.Command) *wire.Command {
	var hb heartbeatData
	if err := json.Unmarshal(req.Body, &hb); err != nil {
		return wire.NewResponse(req, wire.SystemError, "heartbeat body is not heartbeat JSON: "+err.Error())
	}
	if hb.ClientID == "" {
		return wire.NewResponse(req, wire.SystemError, "heartbeat without clientID")
	}
	for _, cd := range hb.Consumers {
		if err := brokercore.CheckGroupName(cd.GroupName); err != nil {
			return wire.NewResponse(req, wire.SystemError, "heartbeat: "+err.Error())
		}
		for _, s := range cd.Subs {
			if err := brokercore.CheckTopicName(s.Topic); err != nil {
				return wire.NewResponse(req, wire.SubscriptionParseFailed, "heartbeat: subscription: "+err.Error())
			}
			if s.ExpType != "" && s.ExpType != "TAG" {
				return wire.NewResponse(req, wire.SubscriptionParseFailed, "heartbeat: subscription of "+s.Topic+": expression type "+s.ExpType+" not supported (TAG only)")
			}
		}
	}
	b.stats.heartbeats.Add(1)
	c.Value("clientID", func() any { return hb.ClientID })
	b.heardProducers(c, hb.Producers) // txn.go
	reg := b.core.Consumers()
	for _, cd := range hb.Consumers {
		// %RETRY%<group> routes from the group's first heartbeat, or
		// retries stall.
		if cd.MessageModel != "BROADCASTING" {
			if _, err := b.topics.Ensure(brokercore.RetryPrefix+cd.GroupName, 1); err != nil {
				return wire.NewResponse(req, wire.SystemError, err.Error())
			}
		}
		subs := make([]consumer.Subscription, 0, len(cd.Subs))
		for _, s := range cd.Subs {
			subs = append(subs, consumer.Subscription{Topic: s.Topic, Expression: s.SubString, Version: s.SubVersion})
		}
		cl := consumer.Client{ChannelID: c.ID(), ClientID: hb.ClientID, Language: req.Language, Version: int(req.Version)}
		if _, err := reg.Register(cd.GroupName, cl, subs); err != nil {
			return wire.NewResponse(req, wire.SystemError, "heartbeat: "+err.Error())
		}
	}
	return wire.NewResponse(req, wire.Success, "")
}

func (b *Broker) unregister(c *transport.Conn, req *wire.Command) *wire.Command {
	f := fields{ext: req.ExtFields}
	id := f.str("clientID")
	g := f.opt("consumerGroup")
	if f.err != nil {
		return wire.NewResponse(req, wire.SystemError, f.err.Error())
	}
	if g != "" {
		if err := b.core.Consumers().Unregister(g, consumer.Client{ChannelID: c.ID(), ClientID: id}); err != nil {
			return wire.NewResponse(req, wire.SystemError, err.Error())
		}
	}
	return wire.NewResponse(req, wire.Success, "")
}

func (b *Broker) consumerList(req *wire.Command) *wire.Command {
	f := fields{ext: req.ExtFields}
	g := f.group("consumerGroup")
	if f.err != nil {
		return wire.NewResponse(req, wire.SystemError, f.err.Error())
	}
	seen := map[string]bool{}
	ids := []string{}
	for _, cl := range b.core.Consumers().Clients(g) {
		if !seen[cl.ClientID] {
			seen[cl.ClientID] = true
			ids = append(ids, cl.ClientID)
		}
	}
	sort.Strings(ids)
	if len(ids) == 0 {
		return wire.NewResponse(req, wire.SystemError, "no consumer of group "+g+" is online")
	}
	resp := wire.NewResponse(req, wire.Success, "")
	resp.Body, _ = json.Marshal(map[string][]string{"consumerIdList": ids})
	return resp
}

// Offsets and fencing.
//
// The RocketMQ client carries no epoch, so the broker keeps one per
// connection and queue: the epoch of the offset manager at the
// connection's first touch of the queue, refreshed whenever the client reads
// the committed offset (QUERY_CONSUMER_OFFSET). An admin reset bumps the
// epoch; from then on the commits of a connection that has not read the
// offset again are refused by offset.Manager.CommitFenced, and its pulls are
// answered PULL_OFFSET_MOVED with the reset offset, which makes the client
// drop the queue and take it back from the committed offset.
//
// The view lives with the connection: a client that reconnects after a
// broker restart starts with the current epoch (as in Apache, whose resets
// do not survive either).

type okey struct {
	group, topic string
	queue        int
}

type views struct {
	mu sync.Mutex
	m  map[okey]uint64
}

func (b *Broker) viewsOf(c *transport.Conn) *views {
	return c.Value("views", func() any { return &views{m: map[okey]uint64{}} }).(*views)
}

// viewEpoch returns the connection's epoch of the key, taking the current
// one at its first touch.
func (b *Broker) viewEpoch(c *transport.Conn, k okey) uint64 {
	v := b.viewsOf(c)
	v.mu.Lock()
	defer v.mu.Unlock()
	e, ok := v.m[k]
	if !ok {
		e = b.core.Offsets().Epoch(k.group, k.topic, k.queue)
		v.m[k] = e
	}
	return e
}

func (b *Broker) setView(c *transport.Conn, k okey, e uint64) {
	v := b.viewsOf(c)
	v.mu.Lock()
	v.m[k] = e
	v.mu.Unlock()
}

// staleView reports whether the connection has not seen the latest reset
// of the key, and the committed offset to move it to.
func (b *Broker) staleView(c *transport.Conn, group, topic string, queue int) (bool, int64) {
	k := okey{group, topic, queue}
	e := b.viewEpoch(c, k)
	off, cur, ok := b.core.Offsets().Position(group, topic, queue)
	if !ok || cur == e {
		return false, 0
	}
	return true, off
}

// commit records a commit of the connection, fenced by its view.
func (b *Broker) commit(c *transport.Conn, group, topic string, queue int, off int64, via string) error {
	if max := b.st.MaxOffset(topic, queue); off > max {
		b.log.Debug("commit beyond max offset refused", "group", group, "topic", topic, "queue", queue,
			"offset", off, "max", max, "channel", c.ID())
		return errors.New("commit offset " + i64(off) + " beyond the queue's max offset " + i64(max))
	}
	e := b.viewEpoch(c, okey{group, topic, queue})
	offs := b.core.Offsets()
	var err error
	if w := b.opts.Writer; w != nil && offs.Epoch(group, topic, queue) == e {
		// Recorded by the Writer first: a commit it refuses moves nothing
		// here either (a stale one is refused below, by the fence).
		err = w.CommitOffset(group, topic, queue, off)
	}
	if err == nil {
		err = offs.CommitFenced(group, topic, queue, off, e)
	}
	switch {
	case err == nil:
		b.stats.commits.Add(1)
	case errors.Is(err, offset.ErrStaleEpoch):
		b.stats.stale.Add(1)
		b.log.Info("stale commit refused", "group", group, "topic", topic, "queue", queue, "offset", off,
			"channel", c.ID(), "via", via)
	default:
		b.log.Debug("commit failed", "group", group, "topic", topic, "queue", queue, "offset", off, "err", err)
	}
	return err
}

func (b *Broker) queryOffset(c *transport.Conn, req *wire.Command) *wire.Command {
	f := fields{ext: req.ExtFields}
	g := f.group("consumerGroup")
	t := f.topic("topic")
	q := int(f.int64In(0, maxInt32, "queueId"))
	if f.err != nil {
		return wire.NewResponse(req, wire.SystemError, f.err.Error())
	}
	off, e, ok := b.core.Offsets().Position(g, t, q)
	if w := b.opts.Writer; w != nil {
		if woff, wok := w.Committed(g, t, q); wok {
			off, ok = woff, true
		}
	}
	b.setView(c, okey{g, t, q}, e)
	if !ok {
		return wire.NewResponse(req, wire.QueryNotFound, "Not found, V3_0_6_SNAPSHOT maybe this group consumer boot first")
	}
	resp := wire.NewResponse(req, wire.Success, "")
	resp.ExtFields["offset"] = i64(off)
	return resp
}

func (b *Broker) updateOffset(c *transport.Conn, req *wire.Command) *wire.Command {
	f := fields{ext: req.ExtFields}
	g := f.group("consumerGroup")
	t := f.topic("topic")
	q := int(f.int64In(0, maxInt32, "queueId"))
	off := f.int64In(-1, maxInt64, "commitOffset")
	if f.err != nil {
		return wire.NewResponse(req, wire.SystemError, f.err.Error())
	}
	if off < 0 {
		// The client persists -1 for a queue it has no offset for yet.
		return wire.NewResponse(req, wire.Success, "")
	}
	if err := b.commit(c, g, t, q, off, "update"); err != nil {
		return wire.NewResponse(req, wire.SystemError, err.Error())
	}
	return wire.NewResponse(req, wire.Success, "")
}

func (b *Broker) offsetInfo(req *wire.Command) *wire.Command {
	f := fields{ext: req.ExtFields}
	t := f.topic("topic")
	q := int(f.int64In(0, maxInt32, "queueId"))
	var ts int64
	if req.Code == wire.CodeSearchOffsetByTimestamp {
		ts = f.int64In(0, maxInt64/int64(time.Millisecond), "timestamp")
	}
	if f.err != nil {
		return wire.NewResponse(req, wire.SystemError, f.err.Error())
	}
	var off int64
	switch req.Code {
	case wire.CodeGetMaxOffset:
		off = b.st.MaxOffset(t, q)
	case wire.CodeGetMinOffset:
		off = b.st.MinOffset(t, q)
	default:
		off = b.st.OffsetAt(t, q, time.UnixMilli(ts))
	}
	resp := wire.NewResponse(req, wire.Success, "")
	resp.ExtFields["offset"] = i64(off)
	return resp
}

type mqJSON struct {
	Topic      string `json:"topic"`
	BrokerName string `json:"brokerName"`
	QueueID    int    `json:"queueId"`
}

type lockBody struct {
	ConsumerGroup string   `json:"consumerGroup"`
	ClientID      string   `json:"clientId"`
	MQs           []mqJSON `json:"mqSet"`
}

func (b *Broker) decodeLock(req *wire.Command) (lockBody, []lock.Queue, *wire.Command) {
	var lb lockBody
	if err := json.Unmarshal(req.Body, &lb); err != nil {
		return lb, nil, wire.NewResponse(req, wire.SystemError, "lock body is not JSON: "+err.Error())
	}
	if err := brokercore.CheckGroupName(lb.ConsumerGroup); err != nil {
		return lb, nil, wire.NewResponse(req, wire.SystemError, err.Error())
	}
	if lb.ClientID == "" {
		return lb, nil, wire.NewResponse(req, wire.SystemError, "lock body without clientId")
	}
	qs := make([]lock.Queue, 0, len(lb.MQs))
	for _, mq := range lb.MQs {
		if err := brokercore.CheckTopicName(mq.Topic); err != nil {
			return lb, nil, wire.NewResponse(req, wire.SystemError, err.Error())
		}
		if mq.QueueID < 0 {
			return lb, nil, wire.NewResponse(req, wire.SystemError, "negative queueId")
		}
		qs = append(qs, lock.Queue{Topic: mq.Topic, Broker: mq.BrokerName, QueueID: mq.QueueID})
	}
	return lb, qs, nil
}

// ownerElsewhere reports whether the group's consumer registry has client
// registered (by its heartbeats) on connections other than c only: then c
// may not lock or unlock in its name. A client id nobody registered is
// taken at its word, as Apache's broker takes every one.
func (b *Broker) ownerElsewhere(c *transport.Conn, group, client string) bool {
	elsewhere := false
	for _, cl := range b.core.Consumers().Clients(group) {
		if cl.ClientID != client {
			continue
		}
		if cl.ChannelID == c.ID() {
			return false
		}
		elsewhere = true
	}
	return elsewhere
}

func (b *Broker) refuseSpoofed(c *transport.Conn, req *wire.Command, lb lockBody) *wire.Command {
	if !b.ownerElsewhere(c, lb.ConsumerGroup, lb.ClientID) {
		return nil
	}
	return wire.NewResponse(req, wire.NoPermission, "client "+lb.ClientID+" of group "+lb.ConsumerGroup+
		" is registered on another connection: its queue locks are that connection's")
}

func (b *Broker) lockBatch(c *transport.Conn, req *wire.Command) *wire.Command {
	lb, qs, bad := b.decodeLock(req)
	if bad != nil {
		return bad
	}
	if bad := b.refuseSpoofed(c, req, lb); bad != nil {
		return bad
	}
	held := b.core.Locks().TryLockBatch(lb.ConsumerGroup, qs, lb.ClientID)
	out := struct {
		MQs []mqJSON `json:"lockOKMQSet"`
	}{MQs: make([]mqJSON, 0, len(held))}
	for _, q := range held {
		out.MQs = append(out.MQs, mqJSON{Topic: q.Topic, BrokerName: q.Broker, QueueID: q.QueueID})
	}
	resp := wire.NewResponse(req, wire.Success, "")
	resp.Body, _ = json.Marshal(out)
	return resp
}

func (b *Broker) unlockBatch(c *transport.Conn, req *wire.Command) *wire.Command {
	lb, qs, bad := b.decodeLock(req)
	if bad != nil {
		return bad
	}
	if bad := b.refuseSpoofed(c, req, lb); bad != nil {
		return bad
	}
	// The freed queues go to another member when this one's connection
	// closes (the client unlocks at Shutdown, then disconnects).
	b.core.Locks().UnlockBatch(lb.ConsumerGroup, qs, lb.ClientID)
	b.markShutdown(c, lb, qs)
	return wire.NewResponse(req, wire.Success, "")
}

// The official client sends UNLOCK_BATCH_MQ only from Shutdown, and only
// for the queues it holds at that moment: queues it gave up at a rebalance
// stay leased to it until they expire. An unlock followed by the close of
// the same connection is therefore a graceful shutdown, and the close
// releases every lease the client still has in that group, so the other
// members take all of its queues at once. A connection that just drops
// (kill -9, a network cut) releases nothing: expiry governs.
type shutdownMark struct {
	mu     sync.Mutex
	groups map[string]shutdownOf // group -> who unlocked, on which broker name
}

type shutdownOf struct{ clientID, broker string }

func (b *Broker) markShutdown(c *transport.Conn, lb lockBody, qs []lock.Queue) {
	m := c.Value("shutdown", func() any { return &shutdownMark{groups: map[string]shutdownOf{}} }).(*shutdownMark)
	broker := b.opts.BrokerName
	if len(qs) > 0 && qs[0].Broker != "" {
		broker = qs[0].Broker
	}
	m.mu.Lock()
	m.groups[lb.ConsumerGroup] = shutdownOf{lb.ClientID, broker}
	m.mu.Unlock()
}

// releaseOnShutdown frees the leases of a connection that unlocked before
// closing. It runs before the member leaves the registry, while its
// group's subscriptions are still there.
func (b *Broker) releaseOnShutdown(c *transport.Conn) {
	m, ok := c.Value("shutdown", nil).(*shutdownMark)
	if !ok {
		return
	}
	m.mu.Lock()
	defer m.mu.Unlock()
	for group, who := range m.groups {
		freed := 0
		for _, sub := range b.core.Consumers().Subscriptions(group) {
			n, _ := b.topics.Queues(sub.Topic)
			for q := 0; q < n; q++ {
				if b.core.Locks().Unlock(group, lock.Queue{Topic: sub.Topic, Broker: who.broker, QueueID: q}, who.clientID) {
					freed++
				}
			}
		}
		if freed > 0 {
			b.log.Info("graceful shutdown released leases", "group", group, "client", who.clientID, "queues", freed)
		}
	}
}
