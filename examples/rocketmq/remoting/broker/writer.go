package broker

import (
	"errors"
	"fmt"
	"time"

	"github.com/brokercore/brokercore/examples/rocketmq/remoting/wire"
	"github.com/brokercore/brokercore/store"
)

// Writer takes the broker's writes over (BrokerOptions.Writer): a
// replicated core, whose messages and consumer offsets go through its log
// and reach the core's store (which the broker keeps reading from) only
// once they are committed. With a Writer the broker never appends to the
// core's store itself.
type Writer interface {
	// Append stores msgs as one atomic batch and sets their LogOffset and
	// QueueOffset.
	Append(msgs []*store.Message) error
	// AppendDelayed and AppendAt store m for the scheduler (m as the
	// client sent it, not rewritten) and return the stored message.
	AppendDelayed(m *store.Message, level int) (*store.Message, error)
	AppendAt(m *store.Message, at time.Time) (*store.Message, error)
	// CommitOffset records a consumer offset the broker accepted
	// (UPDATE_CONSUMER_OFFSET, a pull's commit).
	CommitOffset(group, topic string, queueID int, offset int64) error
	// Committed is the recorded offset of a group's queue; QUERY_CONSUMER_OFFSET
	// answers it when there is one.
	Committed(group, topic string, queueID int) (int64, bool)
}

// SendBackWriter is a Writer that takes send-backs over too
// (CONSUMER_SEND_MSG_BACK): SendBack applies the library's rules
// (brokercore.PlanSendBack) to m, the message given back, and stores the
// retry (delayed by the Writer's scheduler) or the dead letter it makes,
// returning the stored message. A broker whose Writer is not one refuses
// send-backs (the client then consumes the message again itself).
type SendBackWriter interface {
	Writer
	SendBack(m *store.Message, group string, delayLevel, maxReconsume int) (*store.Message, error)
}

// OffsetResetWriter is a Writer that takes the admin's offset resets over
// (INVOKE_BROKER_TO_RESET_OFFSET): ResetOffsets records the new offsets of
// a group's queues of a topic, every one or (an error) none, before the
// broker moves its own offset manager (the epochs its connections are
// fenced by). A reset it refuses is answered SYSTEM_ERROR naming the
// cause, as Apache answers a reset it did not make, and moves nothing
// here. With a Writer that is not one, a reset moves the core's offset
// manager only.
type OffsetResetWriter interface {
	Writer
	ResetOffsets(group, topic string, offsets map[int]int64) error
}

// ErrNotWritable is wrapped by a Writer's error when this broker cannot
// write now (a replica that does not lead): the send is answered
// SERVICE_NOT_AVAILABLE, which the official clients retry (and which
// Apache's slave answers to a send).
var ErrNotWritable = errors.New("broker not writable")

// writerCode is the answer code of a Writer's error.
func writerCode(err error) int16 {
	if errors.Is(err, ErrNotWritable) {
		return wire.ServiceNotAvailable
	}
	return storeCode(err)
}

// checkScheduled checks, for a Writer, the delay and timer properties that
// schedule would rewrite: a send holding a delayed or timed message must be
// that one message (the Writer stores it on its own).
func checkScheduled(msgs []*store.Message) error {
	for _, m := range msgs {
		lv, err := delayLevel(m.Properties)
		if err != nil {
			return err
		}
		at, err := deliverAt(m.Properties)
		if err != nil {
			return err
		}
		if (lv > 0 || !at.IsZero()) && len(msgs) > 1 {
			return errors.New("a delayed or timed message cannot be sent in a batch to a replicated broker")
		}
	}
	return nil
}

// write stores a prepared send through the Writer and answers it.
func (b *Broker) write(p *preparedSend) *wire.Command {
	w := b.opts.Writer
	var err error
	if len(p.msgs) == 1 {
		m := p.msgs[0]
		lv, _ := delayLevel(m.Properties)
		at, _ := deliverAt(m.Properties)
		var d *store.Message
		switch {
		case lv > 0:
			d, err = w.AppendDelayed(m, lv)
		case !at.IsZero():
			d, err = w.AppendAt(m, at)
		default:
			err = w.Append(p.msgs)
		}
		if err == nil && d != nil {
			p.msgs[0] = d
			b.stats.delayed.Add(1)
		}
	} else {
		err = w.Append(p.msgs)
	}
	if err != nil {
		b.stats.sendRejected.Add(1)
		return wire.NewResponse(p.req, writerCode(err), fmt.Errorf("append: %w", err).Error())
	}
	return b.sendAnswer(p)
}
