package replica

import (
	"fmt"

	"github.com/brokercore/brokercore"
	"github.com/brokercore/brokercore/store"
)

// ProduceSystem appends msgs, the host's own bookkeeping, as one atomic
// batch through raft, like Produce, to reserved topics only
// (brokercore.ReservedTopic: "RMQ_SYS_…" and the like), which Produce
// refuses to clients. A host keeps state every node must agree on this way
// (the RocketMQ example's admin changes to its topic and group tables):
// every node reads the topic from its own replica, in log order.
//
// Each message is checked with the library's rules for a system write: a
// valid reserved topic name (brokercore.CheckTopicName) and the store's
// limits; anything else is ErrInvalid before anything is proposed. Only
// the leader accepts it.
func (n *Node) ProduceSystem(msgs ...*store.Message) ([]*store.Message, error) {
	if err := checkSystem(msgs); err != nil {
		return nil, err
	}
	return n.produce(msgs)
}

// checkSystem is ProduceSystem's check of the host's messages.
func checkSystem(msgs []*store.Message) error {
	for i, m := range msgs {
		if m == nil {
			return fmt.Errorf("produce system: message %d: nil: %w", i, ErrInvalid)
		}
		if err := brokercore.CheckTopicName(m.Topic); err != nil {
			return fmt.Errorf("produce system: message %d: %w: %w", i, ErrInvalid, err)
		}
		if !brokercore.ReservedTopic(m.Topic) {
			return fmt.Errorf("produce system: message %d: topic %q is not reserved (Produce writes clients' topics): %w", i, m.Topic, ErrInvalid)
		}
	}
	return nil
}
