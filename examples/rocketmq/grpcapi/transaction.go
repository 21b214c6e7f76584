package grpcapi

import (
	"context"
	"errors"
	"maps"
	"slices"
	"strconv"
	"strings"
	"sync"
	"time"

	v2 "github.com/apache/rocketmq-clients/golang/v5/protocol/v2"
	"google.golang.org/protobuf/types/known/timestamppb"

	"github.com/brokercore/brokercore/store"
	"github.com/brokercore/brokercore/txn"
)

// Transactions over gRPC, through the library's txn.Manager: a TRANSACTION
// message is stored as a half message (txn.Manager.Prepare), EndTransaction
// commits or rolls it back, and an open transaction is checked back with a
// RecoverOrphanedTransactionCommand pushed over the Telemetry stream of a
// producer that publishes its topic. As in Apache's proxy, a gRPC producer's
// group is the topic it publishes: a half sent over gRPC is checked with
// the producers of its topic.

// transactions is the optional capability of a Broker that has a
// transaction manager (*brokercore.Broker has). Without it TRANSACTION
// sends and EndTransaction answer NOT_IMPLEMENTED.
type transactions interface {
	Transactions() *txn.Manager
}

// transactionsNow is the optional capability of a Broker whose transaction
// manager runs only at times (a replicated node's, while it leads): an
// error wrapping ErrNotWritable says there is none here now, and a
// TRANSACTION send or EndTransaction fails with UNAVAILABLE (the client
// reconnects and resends).
type transactionsNow interface {
	TransactionsNow() (*txn.Manager, error)
}

// errNoTransactions: the Broker has no transaction manager at all.
var errNoTransactions = errors.New("transactions need a broker with a transaction manager")

func (s *Server) txns() (*txn.Manager, error) {
	if t, ok := s.b.(transactionsNow); ok {
		return t.TransactionsNow()
	}
	if t, ok := s.b.(transactions); ok && t.Transactions() != nil {
		return t.Transactions(), nil
	}
	return nil, errNoTransactions
}

// txnIDPrefix starts every transaction id this server hands out; the rest
// is the transaction's id in the manager (its half's queue offset).
const txnIDPrefix = "BCTX"

func formatTxnID(id int64) string { return txnIDPrefix + strconv.FormatInt(id, 10) }

func parseTxnID(s string) (int64, bool) {
	rest, ok := strings.CutPrefix(s, txnIDPrefix)
	if !ok {
		return 0, false
	}
	id, err := strconv.ParseInt(rest, 10, 64)
	return id, err == nil && id >= 0 && strconv.FormatInt(id, 10) == rest
}

// asTransactional makes m a TRANSACTION message: its producer group is its
// topic (Apache's proxy), its orphaned-transaction recovery duration the
// first check's delay. A message group or delivery time conflicts.
func (s *Server) asTransactional(m *store.Message, sp *v2.SystemProperties, queues int) (*store.Message, *v2.Status) {
	if sp.MessageGroup != nil || sp.DeliveryTimestamp != nil {
		return nil, status(v2.Code_MESSAGE_PROPERTY_CONFLICT_WITH_TYPE, "a TRANSACTION message has no message group or delivery time")
	}
	if _, err := s.txns(); errors.Is(err, errNoTransactions) {
		return nil, status(v2.Code_NOT_IMPLEMENTED, "transactional messages need a broker with a transaction manager")
	}
	m.Properties[txn.PropTransaction] = "true"
	if d := sp.GetOrphanedTransactionRecoveryDuration(); d != nil {
		secs := int64(d.AsDuration() / time.Second)
		if secs < 0 || secs > 24*3600 {
			return nil, status(v2.Code_BAD_REQUEST, "orphaned transaction recovery duration %v out of 0..24h", d.AsDuration())
		}
		if secs > 0 {
			m.Properties[txn.PropCheckImmunityTime] = strconv.FormatInt(secs, 10)
		}
	}
	m.QueueID = int(s.rr.Add(1) % uint64(queues))
	return m, nil
}

func isHalf(m *store.Message) bool { return m.Properties[txn.PropTransaction] == "true" }

// sendHalf stores a TRANSACTION send as a half message. It answers nil
// and nil when msgs holds no transactional message (an ordinary send), an
// UNAVAILABLE error when no transaction manager runs here now.
func (s *Server) sendHalf(ctx context.Context, req *v2.SendMessageRequest, msgs []*store.Message) (*v2.SendMessageResponse, error) {
	halves := 0
	for _, m := range msgs {
		if isHalf(m) {
			halves++
		}
	}
	switch {
	case halves == 0:
		return nil, nil
	case len(msgs) > 1:
		return &v2.SendMessageResponse{Status: s.reject(ctx, "SendMessage",
			status(v2.Code_BAD_REQUEST, "a TRANSACTION message is sent on its own, not in a batch"), "topic", msgs[0].Topic)}, nil
	}
	m := msgs[0]
	tm, err := s.txns()
	if err != nil {
		return nil, unavailable(err) // ErrNotWritable: asTransactional refused the rest
	}
	h, err := tm.Prepare(m, m.Topic)
	if err != nil {
		code := v2.Code_INTERNAL_ERROR
		switch {
		case errors.Is(err, txn.ErrInvalid), errors.Is(err, store.ErrInvalid):
			code = v2.Code_BAD_REQUEST
		case errors.Is(err, txn.ErrClosed), errors.Is(err, store.ErrClosed):
			// The manager (or, replicated, its leader term) stopped: the
			// client resends elsewhere.
			s.log.Info("grpcapi: prepare refused: no transaction manager here now", "client", clientID(ctx), "topic", m.Topic, "err", err)
			return nil, unavailable(err)
		}
		s.log.Warn("grpcapi: prepare failed", "client", clientID(ctx), "topic", m.Topic, "err", err)
		return &v2.SendMessageResponse{Status: status(code, "storing the half message failed: %v", err)}, nil
	}
	entry := &v2.SendResultEntry{Status: ok(), MessageId: req.GetMessages()[0].GetSystemProperties().GetMessageId(),
		TransactionId: formatTxnID(h.QueueOffset), Offset: h.QueueOffset}
	return &v2.SendMessageResponse{Status: ok(), Entries: []*v2.SendResultEntry{entry}}, nil
}

// EndTransaction commits or rolls back a transaction this server prepared.
// The transaction id names it; the message id and topic must be the half's.
// A repeated resolution answers OK, the opposite one PRECONDITION_FAILED;
// an unresolved one (TRANSACTION_RESOLUTION_UNSPECIFIED) leaves it open for
// the check. OK means the resolution is decided (txn.Manager.EndAsync), not
// yet that its records are durable: a kill before they are leaves the
// transaction open, and its check-back asks the producer again.
func (s *Server) EndTransaction(ctx context.Context, req *v2.EndTransactionRequest) (*v2.EndTransactionResponse, error) {
	s.seen(ctx)
	reject := func(st *v2.Status) (*v2.EndTransactionResponse, error) {
		return &v2.EndTransactionResponse{Status: s.reject(ctx, "EndTransaction", st, "topic", req.GetTopic().GetName(),
			"transaction", req.GetTransactionId(), "message", req.GetMessageId())}, nil
	}
	tm, err := s.txns()
	switch {
	case errors.Is(err, ErrNotWritable):
		return nil, unavailable(err)
	case err != nil:
		return reject(status(v2.Code_NOT_IMPLEMENTED, "%v", err))
	}
	id, okID := parseTxnID(req.GetTransactionId())
	if !okID {
		return reject(status(v2.Code_INVALID_TRANSACTION_ID, "transaction id %q was not issued by this broker", req.GetTransactionId()))
	}
	res := txn.Unknown
	switch req.GetResolution() {
	case v2.TransactionResolution_COMMIT:
		res = txn.Commit
	case v2.TransactionResolution_ROLLBACK:
		res = txn.Rollback
	}
	src := txn.FromClient
	if req.GetSource() == v2.TransactionSource_SOURCE_SERVER_CHECK {
		src = txn.FromCheck
	}
	errMismatch := errors.New("not this transaction's message")
	verify := func(h *store.Message) error {
		if h.Topic != req.GetTopic().GetName() || h.Properties[PropUniqKey] != req.GetMessageId() {
			return errMismatch
		}
		return nil
	}
	if res == txn.Unknown {
		if h, err := tm.Half(id); err == nil && verify(h) != nil {
			return reject(status(v2.Code_INVALID_TRANSACTION_ID, "transaction %q is not message %q of topic %q",
				req.GetTransactionId(), req.GetMessageId(), req.GetTopic().GetName()))
		}
	}
	// Answered once decided: the append runs on (and is logged from) the
	// manager's goroutine, as Apache's proxy forwards the end oneway; a
	// crash before it is durable leaves the transaction to its check.
	done := func(err error) {
		if err != nil {
			s.log.Error("grpcapi: transaction end not stored; its check will ask again", "client", clientID(ctx),
				"topic", req.GetTopic().GetName(), "transaction", req.GetTransactionId(), "err", err)
		}
	}
	if err := tm.EndAsync(id, res, src, verify, done); err != nil {
		switch {
		case errors.Is(err, errMismatch):
			return reject(status(v2.Code_INVALID_TRANSACTION_ID, "transaction %q is not message %q of topic %q",
				req.GetTransactionId(), req.GetMessageId(), req.GetTopic().GetName()))
		case errors.Is(err, txn.ErrNotFound):
			return reject(status(v2.Code_INVALID_TRANSACTION_ID, "%v", err))
		case errors.Is(err, txn.ErrAlreadyResolved):
			return reject(status(v2.Code_PRECONDITION_FAILED, "%v", err))
		case errors.Is(err, txn.ErrUncertain), errors.Is(err, txn.ErrClosed):
			return reject(status(v2.Code_INTERNAL_SERVER_ERROR, "%v", err))
		}
		return reject(status(v2.Code_INTERNAL_ERROR, "%v", err))
	}
	return &v2.EndTransactionResponse{Status: ok()}, nil
}

// producerStreams are the Telemetry streams of producers, for pushing
// RecoverOrphanedTransactionCommands.
type producerStreams struct {
	mu sync.Mutex
	m  map[*producerStream]struct{}
}

// producerStream is one producer's Telemetry stream: the topics it
// publishes and the queue of commands its Telemetry loop sends.
type producerStream struct {
	client string
	topics map[string]bool
	push   chan *v2.TelemetryCommand
	at     time.Time // when it last told its settings
}

// pushQueue bounds the commands waiting for one stream; a check that does
// not fit is not delivered (and counted as such by the manager).
const pushQueue = 64

func (p *producerStreams) add(ps *producerStream) {
	p.mu.Lock()
	if p.m == nil {
		p.m = make(map[*producerStream]struct{})
	}
	p.m[ps] = struct{}{}
	p.mu.Unlock()
}

func (p *producerStreams) remove(ps *producerStream) {
	p.mu.Lock()
	delete(p.m, ps)
	p.mu.Unlock()
}

// publishing records the topics a producer's settings name.
func (p *producerStreams) publishing(ps *producerStream, in *v2.Settings, now time.Time) {
	if in.GetClientType() != v2.ClientType_PRODUCER {
		return
	}
	topics := map[string]bool{}
	for _, t := range in.GetPublishing().GetTopics() {
		topics[t.GetName()] = true
	}
	p.mu.Lock()
	ps.topics, ps.at = topics, now
	p.mu.Unlock()
	p.add(ps)
}

// pick returns the live stream that told its settings last, of a producer
// publishing topic.
func (p *producerStreams) pick(topic string) *producerStream {
	p.mu.Lock()
	defer p.mu.Unlock()
	var best *producerStream
	for ps := range p.m {
		if ps.topics[topic] && (best == nil || ps.at.After(best.at)) {
			best = ps
		}
	}
	return best
}

// topics are the topics the live streams' producers publish, sorted.
func (p *producerStreams) topics() []string {
	p.mu.Lock()
	defer p.mu.Unlock()
	set := map[string]bool{}
	for ps := range p.m {
		for t := range ps.topics {
			set[t] = true
		}
	}
	return slices.Sorted(maps.Keys(set))
}

// ProducerTopics are the topics that the producers with a Telemetry stream
// open here publish, sorted: the groups CheckTransaction can reach (a gRPC
// producer's group is its topic). A replicated node that does not lead
// tells its leader, which relays those groups' checks to it.
func (s *Server) ProducerTopics() []string { return s.producers.topics() }

// errNoProducer is CheckTransaction's answer when no producer of the group
// has a Telemetry stream open.
var errNoProducer = errors.New("grpcapi: no producer of the group has a telemetry stream")

// CheckTransaction is the server's part of a txn.Checker: it pushes a
// RecoverOrphanedTransactionCommand for c to a producer publishing c.Group
// (a gRPC producer's group is its topic), or answers an error when there is
// none (or its queue is full).
func (s *Server) CheckTransaction(c txn.Check) error {
	ps := s.producers.pick(c.Group)
	if ps == nil {
		return errNoProducer
	}
	m := c.Message
	sp := &v2.SystemProperties{
		MessageId:      messageID(m),
		Keys:           m.Keys,
		BodyEncoding:   v2.Encoding_IDENTITY,
		MessageType:    v2.MessageType_TRANSACTION,
		BornTimestamp:  timestamppb.New(m.BornAt),
		BornHost:       m.Properties[PropBornHost],
		StoreTimestamp: timestamppb.New(s.opts.Now()),
		QueueId:        int32(m.QueueID),
		BodyDigest:     &v2.Digest{Type: v2.DigestType_CRC32, Checksum: string(appendDigest(nil, m.Body))},
	}
	if m.Tags != "" {
		tag := m.Tags
		sp.Tag = &tag
	}
	cmd := &v2.TelemetryCommand{Status: ok(), Command: &v2.TelemetryCommand_RecoverOrphanedTransactionCommand{
		RecoverOrphanedTransactionCommand: &v2.RecoverOrphanedTransactionCommand{
			TransactionId: formatTxnID(c.ID),
			Message: &v2.Message{Topic: &v2.Resource{Name: m.Topic}, UserProperties: userProperties(m),
				SystemProperties: sp, Body: m.Body},
		}}}
	select {
	case ps.push <- cmd:
		s.log.Debug("grpcapi: orphaned transaction check pushed", "client", ps.client, "topic", m.Topic, "transaction", c.ID)
		return nil
	default:
		return errors.New("grpcapi: the producer's telemetry queue is full")
	}
}
