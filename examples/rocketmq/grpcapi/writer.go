package grpcapi

import (
	"context"
	"errors"
	"strconv"
	"time"

	v2 "github.com/apache/rocketmq-clients/golang/v5/protocol/v2"
	"google.golang.org/grpc/codes"
	grpcstatus "google.golang.org/grpc/status"

	"github.com/brokercore/brokercore/pop"
	"github.com/brokercore/brokercore/store"
)

// Writer takes the server's writes over (Options.Writer): a replicated
// core, whose messages reach the Broker's store (which the server keeps
// reading) only once they are committed. With a Writer the server never
// appends to the store itself; DELAY messages go to AppendAt unrewritten
// (the Writer's scheduler rewrites them), transactional ones are refused
// (unless the Broker has transactions) and RecallMessage is UNSUPPORTED
// unless Options.Timers cancels the Writer's timers.
type Writer interface {
	// Append stores msgs as one atomic batch and sets their LogOffset and
	// QueueOffset.
	Append(msgs []*store.Message) error
	// AppendAt stores m (as the client sent it) to be delivered at at and
	// returns the stored message.
	AppendAt(m *store.Message, at time.Time) (*store.Message, error)
	// DeadLetter stores m, which group's consumer gave up on, in group's
	// dead-letter topic.
	DeadLetter(group string, m *store.Message) error
}

// Timers cancels the timers of a host that schedules them itself
// (Options.Timers): a replicated core's leader scheduler. CancelAt is
// schedule.Scheduler.CancelAt's contract (its errors included); an error
// wrapping ErrNotWritable is UNAVAILABLE.
type Timers interface {
	CancelAt(uniqKey string, at time.Time) error
}

// Popper is the pop service of a host that runs its own (Options.Pop): a
// replicated core's leader. pop.Service satisfies it.
type Popper interface {
	Pop(ctx context.Context, req pop.Request) (pop.Result, error)
	Ack(handle string) error
	ChangeInvisible(handle string, d time.Duration) (string, error)
}

// ErrNotWritable is wrapped by a Writer's or Popper's error when this
// server cannot take the call now (a replica that does not lead): the call
// fails with gRPC's UNAVAILABLE, on which the v5 client drops its
// connection and dials the endpoints again (and a producer resends).
var ErrNotWritable = errors.New("grpcapi: not writable here")

// unavailable is the answer to a call an ErrNotWritable refused.
func unavailable(err error) error {
	return grpcstatus.Error(codes.Unavailable, err.Error())
}

// pops is the pop service the server uses: Options.Pop, else the Broker's.
func (s *Server) pops() Popper {
	if s.opts.Pop != nil {
		return s.opts.Pop
	}
	return s.b.Pop()
}

// write stores a validated send through the Writer: a DELAY message (one
// per request) to AppendAt, everything else in one Append.
func (s *Server) write(ctx context.Context, req *v2.SendMessageRequest, msgs []*store.Message) (*v2.SendMessageResponse, error) {
	w := s.opts.Writer
	var err error
	due, delayed := s.dueAt(msgs[0])
	switch {
	case delayed && len(msgs) > 1:
		return &v2.SendMessageResponse{Status: s.reject(ctx, "SendMessage",
			status(v2.Code_BAD_REQUEST, "a DELAY message is sent on its own, not in a batch"), "topic", msgs[0].Topic)}, nil
	case delayed:
		var d *store.Message
		if d, err = w.AppendAt(msgs[0], due); err == nil {
			msgs[0] = d
		}
	default:
		for _, m := range msgs[1:] {
			if _, ok := s.dueAt(m); ok {
				return &v2.SendMessageResponse{Status: s.reject(ctx, "SendMessage",
					status(v2.Code_BAD_REQUEST, "a DELAY message is sent on its own, not in a batch"), "topic", m.Topic)}, nil
			}
		}
		err = w.Append(msgs)
	}
	if errors.Is(err, ErrNotWritable) {
		return nil, unavailable(err)
	}
	if err != nil {
		code := v2.Code_INTERNAL_ERROR
		if errors.Is(err, store.ErrInvalid) {
			code = v2.Code_BAD_REQUEST
		}
		s.log.Warn("grpcapi: append failed", "client", clientID(ctx), "topic", msgs[0].Topic, "err", err)
		return &v2.SendMessageResponse{Status: status(code, "storing failed: %v", err)}, nil
	}
	entries := make([]*v2.SendResultEntry, len(msgs))
	for i, m := range msgs {
		id := req.GetMessages()[i].GetSystemProperties().GetMessageId()
		entries[i] = &v2.SendResultEntry{Status: ok(), MessageId: id, Offset: m.QueueOffset}
		if s.opts.Timers != nil { // a handle only where RecallMessage can use it
			entries[i].RecallHandle = s.recallHandleFor(req.GetMessages()[i].GetTopic().GetName(), id, m)
		}
	}
	return &v2.SendMessageResponse{Status: ok(), Entries: entries}, nil
}

// dueAt is the delivery time of a DELAY message still to come (fromProto
// leaves it unrewritten for a Writer).
func (s *Server) dueAt(m *store.Message) (time.Time, bool) {
	v, ok := m.Properties[PropDeliveryTime]
	if !ok {
		return time.Time{}, false
	}
	ms, err := strconv.ParseInt(v, 10, 64)
	if err != nil {
		return time.Time{}, false
	}
	at := time.UnixMilli(ms)
	return at, at.After(s.opts.Now())
}

// ClientLongPolling is the long-polling time a client's settings told
// this server (a SimpleConsumer's subscription.long_polling_timeout, the
// only place it sends it; 0 = none known). A host that forwards the
// client's receives to another server passes it on in the request
// (ReceiveMessageRequest.long_polling_timeout): that server never saw the
// client's settings.
func (s *Server) ClientLongPolling(clientID string) time.Duration {
	return s.clients.longPolling(clientID)
}
