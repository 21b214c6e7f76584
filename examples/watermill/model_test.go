package brokercore_test

import (
	"context"
	"fmt"
	"slices"
	"testing"
	"time"

	"github.com/ThreeDotsLabs/watermill"
	"github.com/ThreeDotsLabs/watermill/message"
	"pgregory.net/rapid"

	wmbc "github.com/brokercore/brokercore/examples/watermill"
	"github.com/brokercore/brokercore/pop"
	"github.com/brokercore/brokercore/store"
)

// groupMachine drives one consumer group through publishes, acks, nacks and
// subscriber restarts. The model is the set of messages published and not
// yet acked by the group. Properties: every delivery is of a message in
// that set (an acked message never comes back, nothing unknown arrives),
// and at the end every message in it is still delivered (nothing is lost,
// whatever the interleaving of nacks and restarts). (Checked by turning
// the subscriber's pop.Ack into a no-op — an acked message then comes back
// and is reported as not pending — and by dropping the hand-back on Close —
// the drain then finds nothing delivered.)
type groupMachine struct {
	t       *rapid.T
	clk     *clock
	backend *wmbc.Backend
	cfg     wmbc.Config
	pub     *wmbc.Publisher
	sub     *wmbc.Subscriber
	ch      <-chan *message.Message
	pending []string // model: published, not acked, in publish order
	n       int
}

func (m *groupMachine) subscribe() {
	s, err := wmbc.NewSubscriber(m.cfg)
	if err != nil {
		m.t.Fatal(err)
	}
	ch, err := s.Subscribe(context.Background(), "t")
	if err != nil {
		m.t.Fatal(err)
	}
	m.sub, m.ch = s, ch
}

func (m *groupMachine) receive() *message.Message {
	select {
	case msg, ok := <-m.ch:
		if !ok {
			m.t.Fatal("output channel closed")
		}
		if !slices.Contains(m.pending, msg.UUID) {
			m.t.Fatalf("delivered %s (%q), which is not pending for the group: %v", msg.UUID, msg.Payload, m.pending)
		}
		return msg
	case <-time.After(waitTime):
		m.t.Fatalf("nothing delivered within %v while %d messages are pending", waitTime, len(m.pending))
		return nil
	}
}

func (m *groupMachine) Publish(t *rapid.T) {
	k := rapid.IntRange(1, 3).Draw(t, "k")
	msgs := make([]*message.Message, k)
	for i := range msgs {
		m.n++
		msgs[i] = message.NewMessage(watermill.NewUUID(), fmt.Appendf(nil, "m%d", m.n))
		m.pending = append(m.pending, msgs[i].UUID)
	}
	if err := m.pub.Publish("t", msgs...); err != nil {
		t.Fatal(err)
	}
}

func (m *groupMachine) Ack(t *rapid.T) {
	if len(m.pending) == 0 {
		t.Skip("nothing pending")
	}
	msg := m.receive()
	msg.Ack()
	<-msg.Context().Done()
	m.pending = slices.DeleteFunc(m.pending, func(id string) bool { return id == msg.UUID })
}

func (m *groupMachine) Nack(t *rapid.T) {
	if len(m.pending) == 0 {
		t.Skip("nothing pending")
	}
	msg := m.receive()
	msg.Nack()
	<-msg.Context().Done()
	m.clk.Add(time.Second) // past the nack delay
}

func (m *groupMachine) RestartSubscriber(t *rapid.T) {
	if err := m.sub.Close(); err != nil {
		t.Fatal(err)
	}
	m.clk.Add(time.Second) // past the hand-back's 1 ms
	m.subscribe()
}

func (m *groupMachine) Check(*rapid.T) {}

// drain receives until every pending message was seen, acking each.
func (m *groupMachine) drain() {
	seen := map[string]bool{}
	for len(seen) < len(m.pending) {
		msg := m.receive()
		seen[msg.UUID] = true
		msg.Ack()
		<-msg.Context().Done()
	}
}

func (m *groupMachine) close() {
	_ = m.pub.Close()
	_ = m.sub.Close()
	_ = m.backend.Close()
}

// TestGroupNeverRedeliversAckedNorLosesUnacked checks the group model under
// any sequence of publishes, acks, nacks and subscriber restarts, in the
// default mode and in FIFO mode.
func TestGroupNeverRedeliversAckedNorLosesUnacked(t *testing.T) {
	for _, fifo := range []bool{false, true} {
		t.Run(fmt.Sprintf("fifo=%v", fifo), func(t *testing.T) {
			rapid.Check(t, func(rt *rapid.T) {
				clk := newClock()
				b, err := wmbc.OpenBackend(t.TempDir(), store.Options{Sync: store.SyncNone},
					pop.Options{Now: clk.Now, MinInvisible: time.Millisecond})
				if err != nil {
					rt.Fatal(err)
				}
				cfg := wmbc.Config{Store: b.Store, Pop: b.Pop, ConsumerGroup: "g", FIFO: fifo,
					BatchSize: rapid.IntRange(1, 4).Draw(rt, "batch")}
				pub, err := wmbc.NewPublisher(cfg)
				if err != nil {
					rt.Fatal(err)
				}
				m := &groupMachine{t: rt, clk: clk, backend: b, cfg: cfg, pub: pub}
				m.subscribe()
				defer m.close()
				rt.Repeat(rapid.StateMachineActions(m))
				m.drain()
			})
		})
	}
}
