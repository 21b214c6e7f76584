package grpcapi

import (
	"context"
	"errors"
	"strconv"
	"time"

	v2 "github.com/apache/rocketmq-clients/golang/v5/protocol/v2"
	"google.golang.org/grpc"
	"google.golang.org/protobuf/types/known/durationpb"

	"github.com/brokercore/brokercore/pop"
)

// ReceiveMessage pops a batch for the request's group across all the
// topic's queues on this broker (the requested queue selects the broker,
// as the Apache proxy does in pop mode) and answers it as message frames
// followed by a status frame.
//
// The v5 client buffers every frame until the stream ends and drops them
// all if its deadline (long-polling time + 3 s) passes first, so the long
// poll is cut to end DeadlineMargin before that deadline, whatever the
// client asked.
func (s *Server) ReceiveMessage(req *v2.ReceiveMessageRequest, stream grpc.ServerStreamingServer[v2.ReceiveMessageResponse]) error {
	ctx := stream.Context()
	id := clientID(ctx)
	s.seen(ctx)
	preq, st := s.popRequest(ctx, id, req)
	if st != nil {
		return sendStatus(stream, s.reject(ctx, "ReceiveMessage", st, "group", req.GetGroup().GetName(), "topic", req.GetMessageQueue().GetTopic().GetName()))
	}
	popCtx := ctx
	if dl, ok := ctx.Deadline(); ok {
		var cancel context.CancelFunc
		popCtx, cancel = context.WithDeadline(ctx, dl.Add(-s.opts.DeadlineMargin/2))
		defer cancel()
	}
	res, err := s.pops().Pop(popCtx, preq)
	if err != nil {
		if ctx.Err() != nil {
			return nil // the client is gone; nothing was handed out
		}
		if errors.Is(err, ErrNotWritable) {
			return unavailable(err)
		}
		return sendStatus(stream, s.reject(ctx, "ReceiveMessage", popStatus(err), "group", preq.Group, "topic", preq.Topic))
	}
	if len(res.Messages) == 0 {
		return sendStatus(stream, status(v2.Code_MESSAGE_NOT_FOUND, "no new message"))
	}
	invisible := durationpb.New(res.Invisible)
	frames := newFrames(len(res.Messages))
	var scratch [256]byte
	b := scratch[:0]
	for i, d := range res.Messages {
		var resp *v2.ReceiveMessageResponse
		resp, b = frames[i].fill(d.Message, receipt{queue: d.Message.QueueID, offset: d.Message.QueueOffset, pop: d.Handle}, d.Attempts, invisible, b)
		if err := stream.Send(resp); err != nil {
			s.release(preq, res.Messages[i:])
			return err
		}
	}
	if err := sendStatus(stream, ok()); err != nil {
		s.release(preq, res.Messages)
		return err
	}
	return nil
}

// popRequest turns a receive into a pop, or says why it cannot.
func (s *Server) popRequest(ctx context.Context, id string, req *v2.ReceiveMessageRequest) (pop.Request, *v2.Status) {
	group, topic := req.GetGroup().GetName(), req.GetMessageQueue().GetTopic().GetName()
	if !validGroup(group) {
		return pop.Request{}, status(v2.Code_ILLEGAL_CONSUMER_GROUP, "illegal consumer group %q", group)
	}
	if !validReadTopic(topic) {
		return pop.Request{}, status(v2.Code_ILLEGAL_TOPIC, "illegal topic name %q", topic)
	}
	preq := pop.Request{Group: group, Topic: topic, ClientID: id, QueueID: pop.AllQueues}
	fe := req.GetFilterExpression()
	switch fe.GetType() {
	case v2.FilterType_FILTER_TYPE_UNSPECIFIED, v2.FilterType_TAG:
		if st := setFilter(&preq, fe.GetExpression()); st != nil {
			return pop.Request{}, st
		}
	default:
		return pop.Request{}, status(v2.Code_UNSUPPORTED, "filter type %v is not supported (only TAG)", fe.GetType())
	}
	preq.Max = min(max(int(req.GetBatchSize()), 1), pop.MaxBatch)
	preq.Invisible = s.opts.PushInvisible
	if d := req.GetInvisibleDuration(); d != nil {
		if !d.IsValid() || d.AsDuration() <= 0 {
			return pop.Request{}, status(v2.Code_ILLEGAL_INVISIBLE_TIME, "illegal invisible duration %v", d.AsDuration())
		}
		preq.Invisible = d.AsDuration()
	}
	poll := s.opts.LongPolling
	if d := req.GetLongPollingTimeout(); d != nil {
		if !d.IsValid() || d.AsDuration() < 0 {
			return pop.Request{}, status(v2.Code_ILLEGAL_POLLING_TIME, "illegal long polling timeout %v", d.AsDuration())
		}
		poll = d.AsDuration()
	} else if lp := s.clients.longPolling(id); lp > 0 {
		poll = lp
	}
	if dl, ok := ctx.Deadline(); ok {
		poll = min(poll, time.Until(dl)-s.opts.DeadlineMargin)
	}
	preq.Poll = max(poll, 0)
	if s.opts.isFIFO(group) {
		preq.FIFO = true
		preq.AttemptID = req.GetAttemptId()
		if preq.AttemptID == "" {
			// A receive without an attempt id (the simple consumer's) is a
			// new attempt: an empty id must not re-enter another empty-id
			// receive's batch.
			preq.AttemptID = s.attemptPrefix + strconv.FormatUint(s.attempts.Add(1), 36)
		}
	}
	return preq, nil
}

// release makes messages that could not be handed out visible again soon
// (pop's minimum invisible time) instead of after their whole invisible
// time. A FIFO batch is kept: its attempt id may come back for it.
func (s *Server) release(req pop.Request, ds []pop.Delivery) {
	if req.FIFO {
		return
	}
	for _, d := range ds {
		_, _ = s.pops().ChangeInvisible(d.Handle, 0)
	}
}

func sendStatus(stream grpc.ServerStreamingServer[v2.ReceiveMessageResponse], st *v2.Status) error {
	return stream.Send(&v2.ReceiveMessageResponse{Content: &v2.ReceiveMessageResponse_Status{Status: st}})
}

// popStatus is the answer for a pop error.
func popStatus(err error) *v2.Status {
	switch {
	case errors.Is(err, pop.ErrInvalid):
		return status(v2.Code_BAD_REQUEST, "%v", err)
	case errors.Is(err, pop.ErrLockTimeout):
		return status(v2.Code_REQUEST_TIMEOUT, "the group@topic lock stayed busy; retry with the same attempt id: %v", err)
	case errors.Is(err, pop.ErrTooManyWaiters):
		return status(v2.Code_TOO_MANY_REQUESTS, "%v", err)
	case errors.Is(err, pop.ErrClosed):
		return status(v2.Code_INTERNAL_SERVER_ERROR, "broker is shutting down")
	}
	return status(v2.Code_INTERNAL_SERVER_ERROR, "%v", err)
}
