package broker

import (
	"strconv"
	"strings"
	"time"

	"github.com/brokercore/brokercore/examples/rocketmq/remoting/transport"
	"github.com/brokercore/brokercore/examples/rocketmq/remoting/wire"
	"github.com/brokercore/brokercore/store"
)

// Request/reply (the v2 client's Producer.Request): every stored message
// carries the broker's cluster (CLUSTER), which the replier's
// CreateReplyMessage turns into the reply topic <cluster>_REPLY_TOPIC; the
// reply comes as SEND_REPLY_MESSAGE, is stored like a send and pushed to
// the requester's connection (the client id in REPLY_TO_CLIENT) as
// PUSH_REPLY_MESSAGE_TO_CLIENT — Apache's ReplyMessageProcessor.
const (
	CodeSendReplyMessage         int16 = 324
	CodeSendReplyMessageV2       int16 = 325
	CodePushReplyMessageToClient int16 = 326

	// PropCluster, PropReplyToClient: Apache's CLUSTER and REPLY_TO_CLIENT.
	PropCluster       = "CLUSTER"
	PropReplyToClient = "REPLY_TO_CLIENT"
)

// stampCluster puts the broker's cluster on messages about to be stored.
func (b *Broker) stampCluster(msgs []*store.Message) {
	for _, m := range msgs {
		if m.Properties == nil {
			m.Properties = map[string]string{}
		}
		m.Properties[PropCluster] = b.opts.Cluster
	}
}

// sendReply stores a reply and pushes it to the requester. A requester
// that is not connected (or whose queue is full) makes the answer
// SYSTEM_ERROR, as Apache's "push reply message fail" does; the reply
// stays stored.
func (b *Broker) sendReply(c *transport.Conn, req *wire.Command) *wire.Command {
	resp := b.send(c, req)
	if resp == nil || resp.Code != wire.Success {
		return resp
	}
	h, _ := parseSend(req) // send accepted it
	props := wire.ParseProperties(h.props)
	props[PropCluster] = b.opts.Cluster
	to := props[PropReplyToClient]
	conn := b.connOfClient(to)
	ext := map[string]string{
		"producerGroup": req.ExtFields["producerGroup"], "topic": h.topic, "defaultTopic": h.defTopic,
		"defaultTopicQueueNums": strconv.Itoa(h.defQueues), "queueId": strconv.Itoa(h.queue),
		"sysFlag": strconv.Itoa(int(h.sysFlag)), "bornTimestamp": strconv.FormatInt(h.born, 10),
		"flag": strconv.Itoa(int(h.flag)), "properties": string(wire.AppendProperties(nil, props)),
		"reconsumeTimes": strconv.Itoa(h.reconsume), "bornHost": c.RemoteAddr().String(),
		"storeHost": b.opts.Addr, "storeTimestamp": strconv.FormatInt(time.Now().UnixMilli(), 10),
	}
	if conn == nil || !conn.Push(CodePushReplyMessageToClient, ext, req.Body) {
		b.log.Info("reply not pushed", "requester", to, "topic", h.topic, "connected", conn != nil)
		r := wire.NewResponse(req, wire.SystemError, "push reply message to "+to+" fail, the requester is not connected")
		r.ExtFields = resp.ExtFields
		return r
	}
	return resp
}

// connOfClient is the connection a client (by its heartbeat's clientID)
// is connected on, or nil.
func (b *Broker) connOfClient(id string) *transport.Conn {
	if id == "" {
		return nil
	}
	b.connMu.RLock()
	defer b.connMu.RUnlock()
	for _, c := range b.conns {
		if v, _ := c.Value("clientID", nil).(string); v == id {
			return c
		}
	}
	return nil
}

// noteRequester learns a requester's client id from its request: the v2
// client sends a Request's message on its own connection with its id in
// REPLY_TO_CLIENT, possibly before its first heartbeat (it heartbeats a
// broker every 30 s, and not before a request whose topic route it has
// cached), so the reply can be pushed at once. A connection already known
// by its heartbeat keeps that id.
func (b *Broker) noteRequester(c *transport.Conn, req *wire.Command) {
	raw := req.ExtFields["properties"]
	if raw == "" {
		raw = req.ExtFields["i"]
	}
	if c == nil || !strings.Contains(raw, PropReplyToClient) {
		return
	}
	if id := wire.ParseProperties(raw)[PropReplyToClient]; id != "" {
		c.Value("clientID", func() any { return id })
	}
}
