package grpcapi

import (
	"context"
	"errors"

	v2 "github.com/apache/rocketmq-clients/golang/v5/protocol/v2"

	"github.com/brokercore/brokercore"
	"github.com/brokercore/brokercore/pop"
	"github.com/brokercore/brokercore/store"
)

// handleStatus is the answer for a settle error: any refused handle is
// INVALID_RECEIPT_HANDLE, on which the push consumer gives up at once (a
// retry with the same handle cannot succeed; the message comes back).
func handleStatus(err error) *v2.Status {
	switch {
	case errors.Is(err, pop.ErrBadHandle), errors.Is(err, errBadHandle):
		return status(v2.Code_INVALID_RECEIPT_HANDLE, "malformed or forged receipt handle: %v", err)
	case errors.Is(err, pop.ErrStaleHandle):
		return status(v2.Code_INVALID_RECEIPT_HANDLE, "receipt handle expired (acked, redelivered or changed since): %v", err)
	case errors.Is(err, pop.ErrInvalid):
		return status(v2.Code_BAD_REQUEST, "%v", err)
	case errors.Is(err, pop.ErrClosed):
		return status(v2.Code_INTERNAL_SERVER_ERROR, "broker is shutting down")
	}
	return status(v2.Code_INTERNAL_SERVER_ERROR, "%v", err)
}

// AckMessage settles each entry through its receipt handle. The answer has
// one entry per acked message; the top-level status is OK only when every
// entry is (the push consumer reads only that one).
func (s *Server) AckMessage(ctx context.Context, req *v2.AckMessageRequest) (*v2.AckMessageResponse, error) {
	s.seen(ctx)
	if len(req.GetEntries()) == 0 {
		return &v2.AckMessageResponse{Status: s.reject(ctx, "AckMessage", status(v2.Code_BAD_REQUEST, "no entries"))}, nil
	}
	entries := req.GetEntries()
	var resp *v2.AckMessageResponse
	var out []*v2.AckMessageResultEntry
	if len(entries) == 1 { // the clients' ack: one allocation for the answer
		a := new(singleAck)
		a.list[0] = &a.entry
		resp, out = &a.resp, a.list[:]
	} else {
		resp, out = new(v2.AckMessageResponse), make([]*v2.AckMessageResultEntry, len(entries))
		for i := range out {
			out[i] = new(v2.AckMessageResultEntry)
		}
	}
	top := ok()
	for i, e := range entries {
		st := ok()
		r, err := parseReceipt(e.GetReceiptHandle())
		if err == nil {
			err = s.pops().Ack(r.pop)
		}
		if errors.Is(err, ErrNotWritable) {
			return nil, unavailable(err)
		}
		if err != nil {
			st = s.reject(ctx, "AckMessage", handleStatus(err), "group", req.GetGroup().GetName(), "topic", req.GetTopic().GetName(), "message_id", e.GetMessageId())
			if top.Code == v2.Code_OK {
				top = st
			}
		}
		out[i].MessageId, out[i].ReceiptHandle, out[i].Status = e.GetMessageId(), e.GetReceiptHandle(), st
	}
	resp.Status, resp.Entries = top, out
	return resp, nil
}

// singleAck is the answer to a one-entry AckMessage in one piece.
type singleAck struct {
	resp  v2.AckMessageResponse
	entry v2.AckMessageResultEntry
	list  [1]*v2.AckMessageResultEntry
}

// ChangeInvisibleDuration makes a received message visible again after the
// given time, counted from now (a shorter time brings it back sooner, a
// longer one keeps it hidden past its first invisible time). The answer
// always carries a usable receipt handle: the new one, or on error the one
// sent, because the client overwrites its handle with whatever comes back.
func (s *Server) ChangeInvisibleDuration(ctx context.Context, req *v2.ChangeInvisibleDurationRequest) (*v2.ChangeInvisibleDurationResponse, error) {
	s.seen(ctx)
	old := req.GetReceiptHandle()
	d := req.GetInvisibleDuration()
	if d == nil || !d.IsValid() || d.AsDuration() < 0 {
		return &v2.ChangeInvisibleDurationResponse{ReceiptHandle: old,
			Status: s.reject(ctx, "ChangeInvisibleDuration", status(v2.Code_ILLEGAL_INVISIBLE_TIME, "illegal invisible duration"), "group", req.GetGroup().GetName())}, nil
	}
	r, err := parseReceipt(old)
	var nh string
	if err == nil {
		nh, err = s.pops().ChangeInvisible(r.pop, d.AsDuration())
	}
	if errors.Is(err, ErrNotWritable) {
		return nil, unavailable(err)
	}
	if err != nil {
		return &v2.ChangeInvisibleDurationResponse{ReceiptHandle: old,
			Status: s.reject(ctx, "ChangeInvisibleDuration", handleStatus(err), "group", req.GetGroup().GetName(), "topic", req.GetTopic().GetName(), "message_id", req.GetMessageId())}, nil
	}
	r.pop = nh
	return &v2.ChangeInvisibleDurationResponse{Status: ok(), ReceiptHandle: r.String()}, nil
}

// ForwardMessageToDeadLetterQueue ends a message the push consumer gave up
// on: it is appended to brokercore.DeadLetterTopic(group) (as brokercore.Open's own dead
// letters, brokercore.DeadLetterMessage) and then settled, which unblocks its
// FIFO queue. The client does not ack a forwarded message.
func (s *Server) ForwardMessageToDeadLetterQueue(ctx context.Context, req *v2.ForwardMessageToDeadLetterQueueRequest) (*v2.ForwardMessageToDeadLetterQueueResponse, error) {
	s.seen(ctx)
	group, topic := req.GetGroup().GetName(), req.GetTopic().GetName()
	rej := func(st *v2.Status) (*v2.ForwardMessageToDeadLetterQueueResponse, error) {
		return &v2.ForwardMessageToDeadLetterQueueResponse{Status: s.reject(ctx, "ForwardMessageToDeadLetterQueue", st, "group", group, "topic", topic, "message_id", req.GetMessageId())}, nil
	}
	if !validGroup(group) {
		return rej(status(v2.Code_ILLEGAL_CONSUMER_GROUP, "illegal consumer group %q", group))
	}
	if !validTopicName(topic) {
		return rej(status(v2.Code_ILLEGAL_TOPIC, "illegal topic name %q", topic))
	}
	r, err := parseReceipt(req.GetReceiptHandle())
	if err != nil {
		return rej(handleStatus(err))
	}
	msgs, err := s.b.Store().Read(topic, r.queue, r.offset, 1)
	if err != nil || len(msgs) == 0 || msgs[0].QueueOffset != r.offset {
		return rej(status(v2.Code_INVALID_RECEIPT_HANDLE, "the receipt handle names no stored message (%v)", err))
	}
	m := msgs[0]
	if messageID(m) != req.GetMessageId() {
		return rej(status(v2.Code_INVALID_RECEIPT_HANDLE, "the receipt handle belongs to another message"))
	}
	// Append first, then settle: a crash in between delivers the message
	// again (and may dead-letter it twice) instead of losing it.
	if err := s.deadLetter(group, m); err != nil {
		if errors.Is(err, ErrNotWritable) {
			return nil, unavailable(err)
		}
		s.log.Warn("grpcapi: dead-letter append failed", "group", group, "topic", topic, "queue", r.queue, "offset", r.offset, "err", err)
		return &v2.ForwardMessageToDeadLetterQueueResponse{Status: status(v2.Code_INTERNAL_ERROR, "storing the dead letter failed: %v", err)}, nil
	}
	if err := s.pops().Ack(r.pop); err != nil {
		if errors.Is(err, ErrNotWritable) {
			return nil, unavailable(err)
		}
		return rej(handleStatus(err))
	}
	s.log.Info("grpcapi: message forwarded to the dead-letter topic", "group", group, "topic", topic, "queue", r.queue, "offset", r.offset,
		"client", clientID(ctx), "attempts", req.GetDeliveryAttempt())
	return &v2.ForwardMessageToDeadLetterQueueResponse{Status: ok()}, nil
}

// deadLetter stores m in group's dead-letter topic: through the Writer, or
// appended to the store.
func (s *Server) deadLetter(group string, m *store.Message) error {
	if s.opts.Writer != nil {
		return s.opts.Writer.DeadLetter(group, m)
	}
	return s.b.Store().Append(brokercore.DeadLetterMessage(group, m))
}
