package broker

import (
	"encoding/json"
	"errors"
	"fmt"
	"maps"
	"slices"
	"strconv"
	"time"

	"github.com/brokercore/brokercore"
	"github.com/brokercore/brokercore/examples/rocketmq/meta"
	"github.com/brokercore/brokercore/examples/rocketmq/remoting/transport"
	"github.com/brokercore/brokercore/examples/rocketmq/remoting/wire"
)

// Admin request codes (Apache RocketMQ's RequestCode) the broker serves.
const (
	CodeQueryMessage                     int16 = 12
	CodeUpdateAndCreateTopic             int16 = 17
	CodeGetAllTopicConfig                int16 = 21
	CodeGetBrokerRuntimeInfo             int16 = 28
	CodeViewMessageByID                  int16 = 33
	CodeUpdateAndCreateSubscriptionGroup int16 = 200
	CodeGetAllSubscriptionGroupConfig    int16 = 201
	CodeGetTopicStatsInfo                int16 = 202
	CodeGetConsumerConnectionList        int16 = 203
	CodeDeleteSubscriptionGroup          int16 = 207
	CodeGetConsumeStats                  int16 = 208
	CodeDeleteTopicInBroker              int16 = 215
	CodeInvokeBrokerToResetOffset        int16 = 222
)

// Apache response codes of admin answers (beyond wire's).
const (
	codeSubscriptionGroupNotExist int16 = 26
	codeInvalidParameter          int16 = 29
	codeConsumerNotOnline         int16 = 206
)

// admin serves the admin requests (mqadmin's, the v2 admin package's);
// nil means req is not one. Bad input gets Apache's code and a remark and
// changes nothing.
func (b *Broker) admin(c *transport.Conn, req *wire.Command) *wire.Command {
	switch req.Code {
	case CodeSendReplyMessage, CodeSendReplyMessageV2:
		return b.sendReply(c, req) // reply.go
	case CodeUpdateAndCreateTopic:
		return b.updateTopic(req)
	case CodeDeleteTopicInBroker:
		return b.deleteTopic(req)
	case CodeGetAllTopicConfig:
		return b.ok(req, b.opts.TopicConfigs.WrapperJSON(b.topics.List(), func(string) int { return b.topics.DefaultQueues() }))
	case CodeUpdateAndCreateSubscriptionGroup:
		return b.updateGroup(req)
	case CodeGetAllSubscriptionGroupConfig:
		return b.ok(req, b.opts.Groups.WrapperJSON())
	case CodeDeleteSubscriptionGroup:
		return b.deleteGroup(req)
	case CodeGetTopicStatsInfo:
		return b.topicStats(req)
	case CodeGetConsumeStats:
		return b.consumeStats(req)
	case CodeGetConsumerConnectionList:
		return b.consumerConnections(req)
	case CodeInvokeBrokerToResetOffset:
		return b.resetOffset(req)
	case CodeViewMessageByID:
		return b.viewMessage(req)
	case CodeQueryMessage:
		return b.queryMessage(req)
	case CodeGetBrokerRuntimeInfo:
		return b.runtimeInfo(req)
	}
	return nil
}

func mustJSON(v any) []byte {
	b, err := json.Marshal(v)
	if err != nil {
		panic(err) // only plain structs are marshalled here
	}
	return b
}

func (b *Broker) ok(req *wire.Command, body []byte) *wire.Command {
	resp := wire.NewResponse(req, wire.Success, "")
	resp.Body = body
	return resp
}

// refusal answers a meta error: its Apache code and remark, or
// SYSTEM_ERROR.
func refusal(req *wire.Command, err error) *wire.Command {
	var r *meta.Refusal
	if errors.As(err, &r) {
		return wire.NewResponse(req, r.Code, r.Remark)
	}
	if errors.Is(err, meta.ErrInvalid) || errors.Is(err, brokercore.ErrInvalid) {
		return wire.NewResponse(req, codeInvalidParameter, err.Error())
	}
	return wire.NewResponse(req, wire.SystemError, err.Error())
}

func (b *Broker) updateTopic(req *wire.Command) *wire.Command {
	name := req.ExtFields["topic"]
	var cur *meta.Topic
	if c, ok := b.opts.TopicConfigs.Get(name); ok {
		cur = &c
	}
	cfg, err := meta.ParseCreateTopic(req.ExtFields, cur)
	if err != nil {
		return refusal(req, err)
	}
	// The store has one queue count per topic: the write queues (what
	// producers spread over); the route answers both numbers.
	if err := b.topics.Set(name, max(cfg.WriteQueueNums, cfg.ReadQueueNums)); err != nil {
		return refusal(req, err)
	}
	if err := b.opts.TopicConfigs.Put(cfg); err != nil {
		return refusal(req, err)
	}
	b.log.Info("topic updated", "topic", name, "read", cfg.ReadQueueNums, "write", cfg.WriteQueueNums, "perm", cfg.Perm, "message_type", cfg.MessageType())
	return b.ok(req, nil)
}

// errSystemTopic refuses the delete of a reserved topic.
var errSystemTopic = errors.New("is conflict with system topic")

// CheckDeleteTopic is DELETE_TOPIC_IN_BROKER's rule for the name: a valid
// topic name, not a reserved topic (but a group's retry or dead-letter
// topic). A replicated host checks it before it releases the topic's data
// in the same log entry as the delete.
func CheckDeleteTopic(name string) error {
	if err := brokercore.CheckTopicName(name); err != nil {
		return err
	}
	if brokercore.ReservedTopic(name) && !isRetryOrDLQ(name) {
		return fmt.Errorf("the topic[%s] %w", name, errSystemTopic)
	}
	return nil
}

func (b *Broker) deleteTopic(req *wire.Command) *wire.Command {
	name := req.ExtFields["topic"]
	if err := CheckDeleteTopic(name); errors.Is(err, errSystemTopic) {
		return wire.NewResponse(req, codeInvalidParameter, "The topic["+name+"] is conflict with system topic.")
	} else if err != nil {
		return refusal(req, err)
	}
	if err := b.topics.Remove(name); err != nil {
		return refusal(req, err)
	}
	if err := b.opts.TopicConfigs.Delete(name); err != nil {
		return refusal(req, err)
	}
	// As Apache's deleteTopicInBroker: the consumer offsets of every group
	// go, then the topic's queues in the store (its messages are gone for
	// readers; the log space goes with retention). The groups' retry and
	// dead-letter topics are per group, shared by every topic it consumes,
	// and stay. Each step is durable and idempotent: after a kill between
	// two, the delete repeated finishes the rest.
	//
	if err := b.core.Offsets().PurgeTopic(name); err != nil {
		b.log.Error("delete topic: offsets", "topic", name, "err", err)
		return wire.NewResponse(req, wire.SystemError, err.Error())
	}
	// Not the store with a Writer (a replicated core): its store and
	// committed offsets change only through the writer's log, and a
	// release applied by each node at its own moment would hide different
	// messages on each. The host releases the topic in its log, in the
	// entry that logs this delete (examples/rocketmq/replicated's
	// release.go); here only the node's own offset table (the broker's
	// views) goes.
	if b.opts.Writer != nil {
		b.log.Info("topic deleted", "topic", name, "data", "released by the writer's log")
		return b.ok(req, nil)
	}
	if err := b.st.DeleteTopic(name); err != nil {
		b.log.Error("delete topic: store", "topic", name, "err", err)
		return wire.NewResponse(req, wire.SystemError, err.Error())
	}
	b.log.Info("topic deleted", "topic", name)
	return b.ok(req, nil)
}

func isRetryOrDLQ(t string) bool {
	return len(t) > len(brokercore.RetryPrefix) && t[:len(brokercore.RetryPrefix)] == brokercore.RetryPrefix ||
		len(t) > len(brokercore.DeadLetterPrefix) && t[:len(brokercore.DeadLetterPrefix)] == brokercore.DeadLetterPrefix
}

func (b *Broker) updateGroup(req *wire.Command) *wire.Command {
	g, err := meta.ParseGroup(req.Body)
	if err != nil {
		return refusal(req, err)
	}
	if err := b.opts.Groups.Put(g); err != nil {
		return refusal(req, err)
	}
	b.log.Info("subscription group updated", "group", g.GroupName, "orderly", g.ConsumeMessageOrderly, "retry_max_times", g.RetryMaxTimes)
	return b.ok(req, nil)
}

func (b *Broker) deleteGroup(req *wire.Command) *wire.Command {
	name := req.ExtFields["groupName"]
	if err := brokercore.CheckGroupName(name); err != nil {
		return refusal(req, err)
	}
	if _, err := b.opts.Groups.Delete(name); err != nil {
		return refusal(req, err)
	}
	if req.ExtFields["cleanOffset"] == "true" {
		b.core.Offsets().Remove(name)
	}
	b.log.Info("subscription group deleted", "group", name, "clean_offset", req.ExtFields["cleanOffset"])
	return b.ok(req, nil)
}

// lastStored is when the message before offset was stored (Unix ms).
func (b *Broker) lastStored(topic string, q int, offset int64) int64 {
	msgs, err := b.st.Read(topic, q, offset-1, 1)
	if err != nil || len(msgs) == 0 {
		return 0
	}
	return msgs[0].StoredAt.UnixMilli()
}

func (b *Broker) topicStats(req *wire.Command) *wire.Command {
	topic := req.ExtFields["topic"]
	n, ok := b.topics.Queues(topic)
	if !ok {
		return wire.NewResponse(req, wire.TopicNotExist, "topic["+topic+"] not exist")
	}
	return b.ok(req, meta.TopicStatsBody(b.st, b.lastStored, b.opts.BrokerName, topic, n))
}

func (b *Broker) consumeStats(req *wire.Command) *wire.Command {
	group, topic := req.ExtFields["consumerGroup"], req.ExtFields["topic"]
	if err := brokercore.CheckGroupName(group); err != nil {
		return refusal(req, err)
	}
	queues := func(t string) int { n, _ := b.topics.Queues(t); return n }
	body, ok := meta.ConsumeStatsBody(b.st, b.core.Offsets(), b.lastStored, b.opts.BrokerName, group, topic, queues)
	if !ok {
		return wire.NewResponse(req, codeConsumerNotOnline, "Not found the consumer group consume stats, because return offset table is empty, maybe the consumer not consume any message")
	}
	return b.ok(req, body)
}

func (b *Broker) consumerConnections(req *wire.Command) *wire.Command {
	group := req.ExtFields["consumerGroup"]
	reg := b.core.Consumers()
	clients := reg.Clients(group)
	if len(clients) == 0 {
		return wire.NewResponse(req, codeConsumerNotOnline, "the consumer group["+group+"] not online")
	}
	type conn struct {
		ClientID   string `json:"clientId"`
		ClientAddr string `json:"clientAddr"`
		Language   string `json:"language"`
		Version    int    `json:"version"`
	}
	type sub struct {
		Topic          string   `json:"topic"`
		SubString      string   `json:"subString"`
		SubVersion     int64    `json:"subVersion"`
		ExpressionType string   `json:"expressionType"`
		TagsSet        []string `json:"tagsSet"`
		CodeSet        []int    `json:"codeSet"`
	}
	out := struct {
		ConnectionSet     []conn         `json:"connectionSet"`
		SubscriptionTable map[string]sub `json:"subscriptionTable"`
		ConsumeType       string         `json:"consumeType"`
		MessageModel      string         `json:"messageModel"`
		ConsumeFromWhere  string         `json:"consumeFromWhere"`
	}{SubscriptionTable: map[string]sub{}, ConsumeType: "CONSUME_PASSIVELY", MessageModel: "CLUSTERING", ConsumeFromWhere: "CONSUME_FROM_LAST_OFFSET"}
	for _, c := range clients {
		addr := ""
		b.connMu.RLock()
		if tc := b.conns[c.ChannelID]; tc != nil {
			addr = tc.RemoteAddr().String()
		}
		b.connMu.RUnlock()
		out.ConnectionSet = append(out.ConnectionSet, conn{ClientID: c.ClientID, ClientAddr: addr, Language: c.Language, Version: c.Version})
	}
	for _, s := range reg.Subscriptions(group) {
		out.SubscriptionTable[s.Topic] = sub{Topic: s.Topic, SubString: s.Expression, SubVersion: s.Version, ExpressionType: "TAG", TagsSet: []string{}, CodeSet: []int{}}
	}
	return b.ok(req, mustJSON(out))
}

// resetOffset serves INVOKE_BROKER_TO_RESET_OFFSET: every queue asked
// (queueId, or -1 for all) goes to offset, or to the first message stored
// at or after timestamp (ResetOffsets).
func (b *Broker) resetOffset(req *wire.Command) *wire.Command {
	group, topic := req.ExtFields["group"], req.ExtFields["topic"]
	queues, offset, at, refused := b.resetRequest(req)
	if refused != nil {
		return refused
	}
	targets, err := b.ResetOffsets(group, topic, queues, offset, at)
	if errors.Is(err, ErrResetNotRecorded) {
		b.log.Warn("offset reset by admin not recorded", "group", group, "topic", topic, "queues", len(queues), "err", err)
		return wire.NewResponse(req, wire.SystemError, fmt.Sprintf("reset offset of group %s topic %s failed: %v", group, topic, err))
	}
	if err != nil {
		return refusal(req, err)
	}
	b.log.Info("offset reset by admin", "group", group, "topic", topic, "timestamp", req.ExtFields["timestamp"], "queues", len(targets))
	return b.ok(req, meta.ResetOffsetBody(b.opts.BrokerName, topic, targets))
}

// ErrResetNotRecorded is wrapped by ResetOffsets's error when its Writer
// (an OffsetResetWriter) did not record the reset: nothing moved.
var ErrResetNotRecorded = errors.New("broker: offset reset not recorded")

// ResetOffsets moves group's committed offsets of topic's queues to
// offset (≥ 0; capped at each queue's max offset) or, with offset < 0, to
// the first message stored at or after at, and answers where each queue
// went. An OffsetResetWriter records the whole reset first (its refusal
// wraps ErrResetNotRecorded, and nothing moves); then the broker's offset
// manager, whose epochs fence the connections, moves. Queues are not
// checked here: callers pass queues of the topic.
func (b *Broker) ResetOffsets(group, topic string, queues []int, offset int64, at time.Time) (map[int]int64, error) {
	targets := make(map[int]int64, len(queues))
	for _, q := range queues {
		if offset >= 0 {
			targets[q] = min(offset, b.st.MaxOffset(topic, q))
		} else {
			targets[q] = b.st.OffsetAt(topic, q, at)
		}
	}
	if w, ok := b.opts.Writer.(OffsetResetWriter); ok {
		if err := w.ResetOffsets(group, topic, targets); err != nil {
			return nil, fmt.Errorf("%w: %w", ErrResetNotRecorded, err)
		}
	}
	offs := b.core.Offsets()
	for _, q := range slices.Sorted(maps.Keys(targets)) {
		if _, err := offs.Reset(group, topic, q, targets[q]); err != nil {
			return nil, err
		}
	}
	return targets, nil
}

// resetRequest checks a reset and answers its queues, its offset (-1:
// none) and its time, or the refusal of bad input.
func (b *Broker) resetRequest(req *wire.Command) (queues []int, offset int64, at time.Time, refused *wire.Command) {
	group, topic := req.ExtFields["group"], req.ExtFields["topic"]
	if err := brokercore.CheckGroupName(group); err != nil {
		return nil, 0, at, refusal(req, err)
	}
	n, ok := b.topics.Queues(topic)
	if !ok {
		return nil, 0, at, wire.NewResponse(req, wire.TopicNotExist, "topic["+topic+"] not exist")
	}
	ms, err := strconv.ParseInt(req.ExtFields["timestamp"], 10, 64)
	if err != nil || ms < 0 {
		return nil, 0, at, wire.NewResponse(req, codeInvalidParameter, "timestamp "+strconv.Quote(req.ExtFields["timestamp"])+" is not Unix milliseconds")
	}
	explicit := int64(-1)
	if o, ok := req.ExtFields["offset"]; ok && o != "" && o != "-1" {
		if explicit, err = strconv.ParseInt(o, 10, 64); err != nil || explicit < 0 {
			return nil, 0, at, wire.NewResponse(req, codeInvalidParameter, "offset "+strconv.Quote(o)+" is not an offset")
		}
	}
	queues = make([]int, 0, n)
	if qs := req.ExtFields["queueId"]; qs != "" && qs != "-1" {
		q, err := strconv.Atoi(qs)
		if err != nil || q < 0 || q >= n {
			return nil, 0, at, wire.NewResponse(req, codeInvalidParameter, "queueId "+strconv.Quote(qs)+" is not a queue of "+topic)
		}
		queues = append(queues, q)
	} else {
		for q := range n {
			queues = append(queues, q)
		}
	}
	return queues, explicit, time.UnixMilli(ms), nil
}

func (b *Broker) viewMessage(req *wire.Command) *wire.Command {
	off, err := strconv.ParseInt(req.ExtFields["offset"], 10, 64)
	if err != nil || off < 0 {
		return wire.NewResponse(req, codeInvalidParameter, "offset "+strconv.Quote(req.ExtFields["offset"])+" is not a commit log offset")
	}
	m, err := b.st.ReadAt(off)
	if err != nil || m == nil {
		return wire.NewResponse(req, wire.SystemError, "can not find message by the offset, "+strconv.FormatInt(off, 10))
	}
	return b.ok(req, wire.EncodeMessage(nil, m, b.storeHost))
}

// Apache's limits of a key query: maxMsgsNumBatch for a key,
// defaultQueryMaxNum for a unique key (the message id).
const (
	queryMaxNum       = 64
	queryUniqueMaxNum = 32
)

// queryMessage answers QUERY_MESSAGE from the store's key index
// (store.LookupKey): the newest maxNum messages of the topic with the key
// stored in [beginTimestamp, endTimestamp] (milliseconds, inclusive), in
// log order. With _UNIQUE_KEY_QUERY the key is a message id (UNIQ_KEY) and
// only a message with that id answers.
func (b *Broker) queryMessage(req *wire.Command) *wire.Command {
	topic, key := req.ExtFields["topic"], req.ExtFields["key"]
	if _, ok := b.topics.Queues(topic); !ok {
		return wire.NewResponse(req, wire.TopicNotExist, "topic["+topic+"] not exist")
	}
	if key == "" {
		return wire.NewResponse(req, codeInvalidParameter, "the key is empty")
	}
	maxNum, _ := strconv.Atoi(req.ExtFields["maxNum"])
	if maxNum <= 0 || maxNum > queryMaxNum {
		maxNum = queryMaxNum
	}
	unique := req.ExtFields["_UNIQUE_KEY_QUERY"] == "true"
	if unique {
		maxNum = queryUniqueMaxNum
	}
	var from, to time.Time
	if ms, err := strconv.ParseInt(req.ExtFields["beginTimestamp"], 10, 64); err == nil && ms > 0 {
		from = time.UnixMilli(ms)
	}
	if ms, err := strconv.ParseInt(req.ExtFields["endTimestamp"], 10, 64); err == nil && ms > 0 && ms < 1<<62 {
		to = time.UnixMilli(ms).Add(time.Millisecond - 1) // the whole last millisecond
	}
	msgs, err := b.st.LookupKey(topic, key, from, to, maxNum)
	if err != nil {
		b.log.Warn("query by key failed", "topic", topic, "key", key, "err", err)
		return wire.NewResponse(req, wire.SystemError, err.Error())
	}
	var body []byte
	found := 0
	for _, m := range msgs {
		if unique && m.Properties[wire.PropUniqKey] != key {
			continue // a business key equal to the id asked for
		}
		body = wire.EncodeMessage(body, m, b.storeHost)
		found++
	}
	if found == 0 {
		return wire.NewResponse(req, wire.QueryNotFound, "can not find message, maybe time range not correct")
	}
	resp := b.ok(req, body)
	last := msgs[len(msgs)-1]
	resp.ExtFields["indexLastUpdateTimestamp"] = strconv.FormatInt(last.StoredAt.UnixMilli(), 10)
	resp.ExtFields["indexLastUpdatePhyoffset"] = strconv.FormatInt(last.LogOffset, 10)
	return resp
}

func (b *Broker) runtimeInfo(req *wire.Command) *wire.Command {
	st := b.st.Stats()
	kv := map[string]string{
		"brokerVersionDesc": "brokercore", "brokerVersion": "0", "brokerActive": "true",
		"putTps": b.rates.line(samplePut), "getTransferredTps": b.rates.line(sampleGet),
		"bootTimestamp":           strconv.FormatInt(b.rates.boot.UnixMilli(), 10),
		"sendThreadPoolQueueSize": "0", "sendThreadPoolQueueHeadWaitTimeMills": "0",
		"pullThreadPoolQueueSize": "0", "pullThreadPoolQueueHeadWaitTimeMills": "0",
		"pageCacheLockTimeMills": "0", "commitLogDiskRatio": "0.0",
		"msgPutTotalTodayNow": strconv.FormatUint(st.Messages, 10),
		"msgGetTotalTodayNow": strconv.FormatUint(b.stats.pulled.Load(), 10),
		"runtime":             b.rates.runtime(time.Now()),
	}
	b.connMu.RLock()
	kv["connections"] = strconv.Itoa(len(b.conns))
	b.connMu.RUnlock()
	return b.ok(req, meta.KVTableBody(kv))
}
