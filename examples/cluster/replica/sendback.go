package replica

import (
	"fmt"

	"github.com/brokercore/brokercore"
	"github.com/brokercore/brokercore/store"
)

// SendBack gives back m, a message a consumer of group could not consume
// (RocketMQ's CONSUMER_SEND_MSG_BACK), with the library's rules for the
// broker's own retry and dead-letter writes (brokercore.PlanSendBack, as
// brokercore.Broker.SendBack applies them): a copy goes through raft to
// brokercore.RetryTopic(group) by way of the leader's replicated scheduler,
// after delayLevel (0 = one level more per reconsume), or at once to
// brokercore.DeadLetterTopic(group) once m was reconsumed maxReconsume times
// or delayLevel < 0. It returns the message stored (the scheduler's rewrite
// of the retry, or the dead letter) once a majority has it.
//
// Produce refuses these topics (a client may not write them); SendBack is
// the only way to them besides pop's own dead letters. Only the leader
// accepts it. Bad input (a nil message, an invalid group, a message the
// store would refuse) is ErrInvalid, before anything is proposed.
func (n *Node) SendBack(m *store.Message, group string, delayLevel, maxReconsume int) (*store.Message, error) {
	t, err := n.services()
	if err != nil {
		return nil, err
	}
	p, err := brokercore.PlanSendBack(m, group, delayLevel, maxReconsume)
	if err != nil {
		return nil, fmt.Errorf("send back: %w: %w", ErrInvalid, err)
	}
	// The retry and dead-letter topics are reserved, so CheckProduce would
	// refuse them; their names are valid whenever the group's is
	// (brokercore.MaxGroupLen), and the message's limits are the store's.
	if err := brokercore.CheckTopicName(p.Message.Topic); err != nil {
		return nil, fmt.Errorf("send back: %w: %w", ErrInvalid, err)
	}
	if err := store.CheckMessage(p.Message, store.DefaultMaxMessageSize); err != nil {
		return nil, fmt.Errorf("send back: %w: %w", ErrInvalid, err)
	}
	out := p.Message
	if !p.DeadLetter {
		if out, err = t.sched.Delay(p.Message, p.Level); err != nil {
			return nil, fmt.Errorf("send back: %v: %w", err, ErrInvalid)
		}
	}
	stored, err := n.produce([]*store.Message{out})
	if err != nil {
		return nil, fmt.Errorf("send back: %w", err)
	}
	if p.DeadLetter {
		n.log.Info("cluster: dead lettered", "group", group, "topic", m.Topic, "reconsume_times", m.ReconsumeTimes)
	}
	return stored[0], nil
}
