package broker_test

import (
	"errors"
	"net"
	"sync"
	"testing"
	"time"

	"github.com/brokercore/brokercore"
	"github.com/brokercore/brokercore/examples/rocketmq/remoting/broker"
	"github.com/brokercore/brokercore/examples/rocketmq/remoting/transport"
	"github.com/brokercore/brokercore/examples/rocketmq/remoting/wire"
	"github.com/brokercore/brokercore/store"
	"github.com/stretchr/testify/require"
)

// fakeWriter records what the broker hands a Writer.
type fakeWriter struct {
	mu        sync.Mutex
	appended  []*store.Message
	delayed   map[int]*store.Message
	at        []time.Time
	commits   []int64
	committed int64
	has       bool
	err       error
}

func (w *fakeWriter) Append(msgs []*store.Message) error {
	w.mu.Lock()
	defer w.mu.Unlock()
	if w.err != nil {
		return w.err
	}
	for _, m := range msgs {
		m.QueueOffset, m.LogOffset = int64(len(w.appended)), 1000+int64(len(w.appended))
		w.appended = append(w.appended, m)
	}
	return nil
}

func (w *fakeWriter) AppendDelayed(m *store.Message, level int) (*store.Message, error) {
	w.mu.Lock()
	defer w.mu.Unlock()
	if w.delayed == nil {
		w.delayed = map[int]*store.Message{}
	}
	w.delayed[level] = m
	return &store.Message{Topic: "SCHEDULE_TOPIC_XXXX", QueueID: level - 1, QueueOffset: 7, LogOffset: 77}, nil
}

func (w *fakeWriter) AppendAt(m *store.Message, at time.Time) (*store.Message, error) {
	w.mu.Lock()
	defer w.mu.Unlock()
	w.at = append(w.at, at)
	return &store.Message{Topic: "rmq_sys_wheel_timer", QueueOffset: 3, LogOffset: 33}, nil
}

func (w *fakeWriter) CommitOffset(_, _ string, _ int, off int64) error {
	w.mu.Lock()
	defer w.mu.Unlock()
	w.commits = append(w.commits, off)
	return w.err
}

func (w *fakeWriter) Committed(string, string, int) (int64, bool) {
	w.mu.Lock()
	defer w.mu.Unlock()
	return w.committed, w.has
}

// startWriterBroker serves a broker whose writes go to w, over a core it
// must never append to itself.
func startWriterBroker(t *testing.T, w broker.Writer) (*rawConn, *store.Store) {
	t.Helper()
	core, err := brokercore.Open(t.TempDir(), brokercore.Options{})
	require.NoError(t, err)
	rc := serveBroker(t, core, broker.BrokerOptions{Addr: "127.0.0.1:10911", Writer: w, AsyncFlush: true}, core.Close)
	return rc, core.Store()
}

// serveBroker serves a broker on core (4-queue topics) on 127.0.0.1 and
// dials it; when the test ends the server, the broker and then closeCore
// are closed.
func serveBroker(t *testing.T, core broker.Core, opts broker.BrokerOptions, closeCore func() error) *rawConn {
	t.Helper()
	topics, err := broker.OpenTopics("", 4)
	require.NoError(t, err)
	b := broker.NewBroker(core, topics, opts)
	srv := transport.NewServer(b, transport.ServerOptions{Name: "broker"})
	l, err := net.Listen("tcp", "127.0.0.1:0")
	require.NoError(t, err)
	served := make(chan error, 1)
	go func() { served <- srv.Serve(l) }()
	t.Cleanup(func() {
		require.NoError(t, srv.Close())
		<-served
		require.NoError(t, b.Close())
		require.NoError(t, closeCore())
	})
	return dial(t, l.Addr().String())
}

func withProps(c *wire.Command, props string) *wire.Command {
	c.ExtFields["properties"] = props
	return c
}

// With a Writer every write goes to it: plain sends as they are, delayed
// and timed ones unrewritten with their level or time, consumer offsets;
// the core's store gets nothing from the broker itself.
func TestWriterTakesEveryWrite(t *testing.T) {
	w := &fakeWriter{}
	rc, st := startWriterBroker(t, w)

	resp := rc.call(sendReq("orders", 1, "plain"))
	require.Equal(t, wire.Success, resp.Code, resp.Remark)
	require.Equal(t, "0", resp.ExtFields["queueOffset"])
	require.Len(t, w.appended, 1)
	require.Equal(t, "orders", w.appended[0].Topic)
	require.Equal(t, 1, w.appended[0].QueueID)

	resp = rc.call(withProps(sendReq("orders", 0, "later"), "DELAY\x013\x02"))
	require.Equal(t, wire.Success, resp.Code, resp.Remark)
	require.Equal(t, "7", resp.ExtFields["queueOffset"])
	require.Equal(t, "orders", w.delayed[3].Topic, "the Writer gets the message as sent")

	resp = rc.call(withProps(sendReq("orders", 0, "timed"), "__STARTDELIVERTIME\x0199999999999\x02"))
	require.Equal(t, wire.Success, resp.Code, resp.Remark)
	require.Equal(t, []time.Time{time.UnixMilli(99999999999)}, w.at)

	resp = rc.call(req(wire.CodeUpdateConsumerOffset, map[string]string{"consumerGroup": "g", "topic": "orders",
		"queueId": "0", "commitOffset": "0"}, nil))
	require.Equal(t, wire.Success, resp.Code, resp.Remark)
	require.Equal(t, []int64{0}, w.commits)

	resp = rc.call(req(wire.CodeQueryConsumerOffset, map[string]string{"consumerGroup": "g2", "topic": "orders", "queueId": "0"}, nil))
	require.Equal(t, wire.QueryNotFound, resp.Code)
	w.mu.Lock()
	w.committed, w.has = 42, true
	w.mu.Unlock()
	resp = rc.call(req(wire.CodeQueryConsumerOffset, map[string]string{"consumerGroup": "g2", "topic": "orders", "queueId": "0"}, nil))
	require.Equal(t, wire.Success, resp.Code, resp.Remark)
	require.Equal(t, "42", resp.ExtFields["offset"], "the Writer's committed offset")

	resp = rc.call(req(wire.CodeConsumerSendMsgBack, map[string]string{"group": "g", "offset": "0"}, nil))
	require.Equal(t, wire.SystemError, resp.Code)
	require.Contains(t, resp.Remark, "not supported")
	require.Zero(t, st.Stats().Messages, "the broker appended nothing itself")
}

// A Writer that cannot write now (a follower) makes the send
// SERVICE_NOT_AVAILABLE, which the official clients retry; other errors
// keep the store's codes.
func TestWriterNotWritableIsServiceNotAvailable(t *testing.T) {
	w := &fakeWriter{err: errors.Join(broker.ErrNotWritable, errors.New("leader is n2"))}
	rc, _ := startWriterBroker(t, w)
	resp := rc.call(sendReq("orders", 0, "x"))
	require.Equal(t, wire.ServiceNotAvailable, resp.Code)
	require.Contains(t, resp.Remark, "leader is n2")
	w.mu.Lock()
	w.err = store.ErrInvalid
	w.mu.Unlock()
	require.Equal(t, wire.MessageIllegal, rc.call(sendReq("orders", 0, "x")).Code)
}

// sendBackWriter is a fakeWriter that takes send-backs over.
type sendBackWriter struct {
	fakeWriter
	given []*store.Message
	args  []int
}

func (w *sendBackWriter) SendBack(m *store.Message, group string, level, maxTimes int) (*store.Message, error) {
	w.mu.Lock()
	defer w.mu.Unlock()
	if w.err != nil {
		return nil, w.err
	}
	w.given = append(w.given, m)
	w.args = append(w.args, level, maxTimes)
	if m.ReconsumeTimes >= maxTimes {
		return &store.Message{Topic: brokercore.DeadLetterTopic(group)}, nil
	}
	return &store.Message{Topic: "SCHEDULE_TOPIC_XXXX"}, nil
}

// A SendBackWriter gets CONSUMER_SEND_MSG_BACK: the stored message as the
// consumer gives it back (with the id it knows and the limit it carries),
// and the broker appends nothing itself; its errors keep the Writer's codes.
func TestSendBackWriterTakesSendBacks(t *testing.T) {
	w := &sendBackWriter{}
	rc, st := startWriterBroker(t, w)
	require.NoError(t, st.Append(&store.Message{Topic: "orders", Body: []byte("poison"), ReconsumeTimes: 2,
		Properties: map[string]string{"UNIQ_KEY": "u1"}}))
	before := st.Stats().Messages
	back := func() *wire.Command {
		return rc.call(req(wire.CodeConsumerSendMsgBack, map[string]string{"group": "g", "offset": "0", "delayLevel": "0",
			"originMsgId": "o1", "maxReconsumeTimes": "2"}, nil))
	}
	resp := back()
	require.Equal(t, wire.Success, resp.Code, resp.Remark)
	require.Len(t, w.given, 1)
	require.Equal(t, "poison", string(w.given[0].Body))
	require.Equal(t, "o1", w.given[0].Properties[wire.PropOriginMessageID])
	require.Equal(t, "2", w.given[0].Properties[wire.PropMaxReconsume])
	require.Equal(t, []int{0, 2}, w.args)
	require.Equal(t, before, st.Stats().Messages, "the broker appended nothing itself")

	w.mu.Lock()
	w.err = errors.Join(broker.ErrNotWritable, errors.New("leader is n2"))
	w.mu.Unlock()
	resp = back()
	require.Equal(t, wire.ServiceNotAvailable, resp.Code)
	require.Contains(t, resp.Remark, "leader is n2")
}

// TestDeleteTopicKeepsAReplicatedCoresData: with a Writer the store and the
// offsets change only through the writer's log; a delete takes the topic's
// route and configuration and leaves the data to retention, since each
// node of a replicated host would release a different range.
func TestDeleteTopicKeepsAReplicatedCoresData(t *testing.T) {
	rc, st := startWriterBroker(t, &fakeWriter{})
	require.NoError(t, st.Append(&store.Message{Topic: "dt", Body: []byte("kept")}))
	resp := rc.call(req(broker.CodeDeleteTopicInBroker, map[string]string{"topic": "dt"}, nil))
	require.Equal(t, wire.Success, resp.Code, resp.Remark)
	msgs, err := st.Read("dt", 0, 0, 10)
	require.NoError(t, err)
	require.Len(t, msgs, 1)
}
