package broker

import (
	"errors"
	"fmt"
	"strconv"
	"strings"
	"sync"
	"time"

	"github.com/brokercore/brokercore"
	"github.com/brokercore/brokercore/examples/rocketmq/remoting/transport"
	"github.com/brokercore/brokercore/examples/rocketmq/remoting/wire"
	"github.com/brokercore/brokercore/store"
	"github.com/brokercore/brokercore/txn"
)

// Transactions over the remoting protocol, through the library's
// txn.Manager (brokercore.Broker.Transactions):
//
//   - a SEND whose sysFlag has TRANSACTION_PREPARED_TYPE (or whose
//     properties say TRAN_MSG=true) stores a half message
//     (txn.Manager.Prepare); its answer's queueOffset is the transaction's
//     id, which the client sends back as tranStateTableOffset;
//   - END_TRANSACTION (oneway from the v2 client) commits, rolls back or
//     leaves open (commitOrRollback 8, 12, 0), from the producer or in
//     answer to a check (fromTransactionCheck);
//   - CHECK_TRANSACTION_STATE is sent by the broker (CheckTransaction, the
//     host's txn.Checker) over the connection of a producer of the group
//     that heartbeated most recently.

// Request codes and sysFlag values of transactions.
const (
	codeEndTransaction        int16 = 37
	codeCheckTransactionState int16 = 39

	sysFlagTransactionPrepared = 1 << 2 // TRANSACTION_PREPARED_TYPE
	transactionNotType         = 0      // commitOrRollback: unknown
	transactionCommitType      = 1 << 3 // 8
	transactionRollbackType    = 3 << 2 // 12
)

// producerLive is how long after its last heartbeat a producer connection
// is asked about its group's transactions (Apache expires a channel after
// 120 s of silence).
const producerLive = 120 * time.Second

// transactions is the optional capability of a Core that has a transaction
// manager (*brokercore.Broker has); without it transactional sends are
// refused.
type transactions interface {
	Transactions() *txn.Manager
}

// transactionsNow is the optional capability of a Core whose transaction
// manager runs only at times (a replicated node's, while it leads): an
// error wrapping ErrNotWritable says there is none here now, and a
// transactional send or END_TRANSACTION is answered SERVICE_NOT_AVAILABLE
// (the clients retry a send).
type transactionsNow interface {
	TransactionsNow() (*txn.Manager, error)
}

// errNoTransactions: the Core has no transaction manager at all.
var errNoTransactions = errors.New("transactional messages need a broker with a transaction manager")

func (b *Broker) txns() (*txn.Manager, error) {
	if t, ok := b.core.(transactionsNow); ok {
		return t.TransactionsNow()
	}
	if t, ok := b.core.(transactions); ok && t.Transactions() != nil {
		return t.Transactions(), nil
	}
	return nil, errNoTransactions
}

// txnsCode is the answer code when there is no transaction manager.
func txnsCode(err error) int16 {
	if errors.Is(err, ErrNotWritable) {
		return wire.ServiceNotAvailable
	}
	return wire.NoPermission
}

// isHalfSend reports whether a send carries a transaction's half message.
func isHalfSend(h sendHeader, props map[string]string) bool {
	return h.sysFlag&sysFlagTransactionPrepared != 0 || props[txn.PropTransaction] == "true"
}

// sendHalf stores a prepared send's message as a half message and answers
// as Apache does: msgId (the half's offset message id), queueId (the real
// queue) and queueOffset (the transaction's id, the client's
// tranStateTableOffset).
func (b *Broker) sendHalf(p *preparedSend, group string) *wire.Command {
	reject := func(code int16, err error) *wire.Command {
		b.stats.sendRejected.Add(1)
		return wire.NewResponse(p.req, code, err.Error())
	}
	tm, err := b.txns()
	switch {
	case err != nil:
		return reject(txnsCode(err), err)
	case len(p.msgs) != 1:
		return reject(wire.MessageIllegal, errors.New("a transactional message is sent on its own, not in a batch"))
	}
	m := p.msgs[0]
	if g := m.Properties[txn.PropProducerGroup]; g != "" {
		group = g
	}
	delete(m.Properties, wire.PropSysFlag) // the prepared bit is not the real message's
	h, err := tm.Prepare(m, group)
	if err != nil {
		code := storeCode(err)
		switch {
		case errors.Is(err, txn.ErrInvalid):
			code = wire.MessageIllegal
		case errors.Is(err, txn.ErrClosed): // the manager stopped (its leader term ended): retried elsewhere
			code = wire.ServiceNotAvailable
		}
		return reject(code, fmt.Errorf("prepare: %w", err))
	}
	b.stats.sent.Add(1)
	resp := wire.NewResponse(p.req, wire.Success, "")
	resp.ExtFields["msgId"] = wire.OffsetMsgID(b.storeHost, h.LogOffset)
	resp.ExtFields["queueId"] = itoa(m.QueueID)
	resp.ExtFields["queueOffset"] = i64(h.QueueOffset)
	if id := m.Properties[wire.PropUniqKey]; id != "" {
		resp.ExtFields["transactionId"] = id
	}
	return resp
}

// endTransaction serves END_TRANSACTION. The half named by
// tranStateTableOffset must be of the producer group (and of msgId, when
// the client names one). Its answer is only read when the client did not
// send it oneway.
func (b *Broker) endTransaction(c *transport.Conn, req *wire.Command) *wire.Command {
	tm, err := b.txns()
	if err != nil {
		return wire.NewResponse(req, txnsCode(err), err.Error())
	}
	f := fields{ext: req.ExtFields}
	group := f.group("producerGroup")
	id := f.int64In(0, maxInt64, "tranStateTableOffset")
	kind := f.int64In(0, maxInt32, "commitOrRollback")
	fromCheck := f.opt("fromTransactionCheck") == "true"
	msgID := f.opt("msgId")
	if f.err != nil {
		return wire.NewResponse(req, wire.SystemError, f.err.Error())
	}
	res := txn.Unknown
	switch kind {
	case transactionCommitType:
		res = txn.Commit
	case transactionRollbackType:
		res = txn.Rollback
	case transactionNotType:
	default:
		return wire.NewResponse(req, wire.SystemError, "commitOrRollback "+i64(kind)+": want 0, 8 or 12")
	}
	verify := func(h *store.Message) error {
		if h.Properties[txn.PropProducerGroup] != group {
			return errors.New("the producer group " + group + " is not the transaction's")
		}
		if msgID != "" && h.Properties[wire.PropUniqKey] != "" && h.Properties[wire.PropUniqKey] != msgID {
			return errors.New("transaction " + i64(id) + " is not message " + msgID)
		}
		return nil
	}
	if res == txn.Unknown {
		if h, err := tm.Half(id); err == nil {
			if err := verify(h); err != nil {
				return wire.NewResponse(req, wire.SystemError, err.Error())
			}
		}
	}
	src := txn.FromClient
	if fromCheck {
		src = txn.FromCheck
	}
	if err := tm.EndVerified(id, res, src, verify); err != nil {
		b.log.Info("end transaction refused", "client", clientIDOf(c), "group", group, "id", id,
			"resolution", res, "from_check", fromCheck, "err", err)
		return wire.NewResponse(req, wire.SystemError, err.Error())
	}
	return wire.NewResponse(req, wire.Success, "")
}

// producerGroups are the producer groups a connection's heartbeats named,
// with when.
type producerGroups struct {
	mu sync.Mutex
	at map[string]time.Time
}

func producersOf(c *transport.Conn) *producerGroups {
	return c.Value("producerGroups", func() any { return &producerGroups{at: map[string]time.Time{}} }).(*producerGroups)
}

// heardProducers records the producer groups of a heartbeat.
func (b *Broker) heardProducers(c *transport.Conn, groups []producerData) {
	if len(groups) == 0 {
		return
	}
	pg := producersOf(c)
	now := time.Now()
	pg.mu.Lock()
	for _, g := range groups {
		if brokercore.CheckGroupName(g.GroupName) == nil {
			pg.at[g.GroupName] = now
		}
	}
	pg.mu.Unlock()
}

// relayKey marks a connection that relays other clients' requests.
const relayKey = "relay"

// RelayConn marks c as a connection that relays other clients' requests
// (a replicated follower forwarding sends to its leader): the producer
// groups its sends name are not its own, so it is never asked about a
// transaction.
func (b *Broker) RelayConn(c *transport.Conn) { c.Value(relayKey, func() any { return true }) }

// HeardSender records the producer group of req, a transactional send
// another node will store (a follower forwards it to its leader), as a
// producer on c: should this node lead later, it asks that producer about
// the transaction, as if the send had been its own.
func (b *Broker) HeardSender(c *transport.Conn, req *wire.Command) {
	if !halfRequest(req) {
		return
	}
	g := req.ExtFields["producerGroup"]
	if g == "" {
		g = req.ExtFields["a"]
	}
	b.heardProducers(c, []producerData{{GroupName: g}})
}

// producerConn returns the live connection of a producer of group that
// heartbeated last (never a relay's).
func (b *Broker) producerConn(group string) *transport.Conn {
	b.connMu.RLock()
	defer b.connMu.RUnlock()
	var best *transport.Conn
	var bestAt time.Time
	cutoff := time.Now().Add(-producerLive)
	for _, c := range b.conns {
		if c.Value(relayKey, nil) != nil {
			continue
		}
		pg := producersOf(c)
		pg.mu.Lock()
		at, ok := pg.at[group]
		pg.mu.Unlock()
		if ok && at.After(cutoff) && c.Context().Err() == nil && (best == nil || at.After(bestAt)) {
			best, bestAt = c, at
		}
	}
	return best
}

// errNoProducer is CheckTransaction's answer when no producer of the group
// is connected.
var errNoProducer = errors.New("remoting: no producer of the group is connected")

// CheckTransaction is the broker's part of a txn.Checker: it sends
// CHECK_TRANSACTION_STATE for c over the connection of a live producer of
// c.Group, with the message in the body as a pull encodes it.
func (b *Broker) CheckTransaction(c txn.Check) error {
	conn := b.producerConn(c.Group)
	if conn == nil {
		return errNoProducer
	}
	m := c.Message
	ext := map[string]string{
		"tranStateTableOffset": i64(c.ID),
		"commitLogOffset":      i64(m.LogOffset),
		"msgId":                m.Properties[wire.PropUniqKey],
		"transactionId":        transactionIDOf(m),
		"offsetMsgId":          wire.OffsetMsgID(b.storeHost, m.LogOffset),
	}
	if !conn.NotifyBody(codeCheckTransactionState, ext, wire.EncodeMessage(nil, m, b.storeHost)) {
		return errors.New("remoting: the producer's connection is closed or its queue full")
	}
	b.log.Debug("check transaction state sent", "client", clientIDOf(conn), "group", c.Group, "id", c.ID,
		"times", m.Properties[txn.PropCheckTimes])
	return nil
}

// transactionIDOf is the client's transaction id: the one it set, else its
// message id.
func transactionIDOf(m *store.Message) string {
	if id := m.Properties[txn.PropTransactionID]; id != "" {
		return id
	}
	return m.Properties[wire.PropUniqKey]
}

// producerData is one producer group of a heartbeat.
type producerData struct {
	GroupName string `json:"groupName"`
}

// halfRequest tells, from its header alone, whether a send carries a half
// message (Batch and Inline decide before the send is parsed).
func halfRequest(req *wire.Command) bool {
	f := req.ExtFields["sysFlag"]
	if f == "" {
		f = req.ExtFields["f"]
	}
	if n, err := strconv.ParseInt(f, 10, 32); err == nil && n&sysFlagTransactionPrepared != 0 {
		return true
	}
	props := req.ExtFields["properties"] + req.ExtFields["i"]
	return strings.Contains(props, txn.PropTransaction+"\x01true")
}
