package hostile_test

import (
	"bytes"
	"context"
	"encoding/binary"
	"fmt"
	"io"
	"net"
	"net/http"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	v2 "github.com/apache/rocketmq-clients/golang/v5/protocol/v2"
	"github.com/stretchr/testify/require"
	"google.golang.org/protobuf/types/known/durationpb"
	"google.golang.org/protobuf/types/known/timestamppb"

	"github.com/brokercore/brokercore/examples/rocketmq/remoting/wire"
	"github.com/brokercore/brokercore/examples/rocketmq/rmqtest"
)

// An input is one hostile thing done to a listener; the health check runs
// after it. It returns an error only when the listener misbehaved in a way
// the input itself shows (a wrong answer code); dropped connections are the
// expected outcome of many.
type input struct {
	name string
	do   func(e endpoints) error
}

// rawBytes writes b on a new connection to addr, reads until the server
// closes or a short deadline passes, and closes.
func rawBytes(addr string, b []byte) error {
	c, err := net.DialTimeout("tcp", addr, 5*time.Second)
	if err != nil {
		return err
	}
	defer c.Close()
	_ = c.SetDeadline(time.Now().Add(250 * time.Millisecond))
	_, _ = c.Write(b)
	_, _ = io.Copy(io.Discard, c)
	return nil
}

func lenPrefix(n uint32, rest ...byte) []byte {
	return append(binary.BigEndian.AppendUint32(nil, n), rest...)
}

func jsonFrame(header string) []byte {
	b := binary.BigEndian.AppendUint32(nil, uint32(4+len(header)))
	b = binary.BigEndian.AppendUint32(b, uint32(len(header)))
	return append(b, header...)
}

// frameInputs are bad framings, for both remoting listeners.
func frameInputs(port string, addr func(endpoints) string) []input {
	raw := func(name string, b []byte) input {
		return input{port + ": " + name, func(e endpoints) error { return rawBytes(addr(e), b) }}
	}
	return []input{
		raw("negative frame length", lenPrefix(0x80000000)),
		raw("frame length 0", lenPrefix(0)),
		raw("frame length 3", lenPrefix(3, 1, 2, 3)),
		raw("oversized frame length", lenPrefix(0x7fffffff)),
		raw("announced 16 MiB, sent 6 bytes", lenPrefix(16<<20, 0, 0, 0, 2, '{', '}')),
		raw("truncated frame", lenPrefix(100, 0, 0, 0, 50, '{')),
		raw("header longer than frame", lenPrefix(8, 0, 0xff, 0xff, 0xff, 1, 2, 3, 4)),
		raw("garbage JSON header", jsonFrame(`{"code":`)),
		raw("JSON header of the wrong types", jsonFrame(`{"code":"x","opaque":[],"extFields":7}`)),
		raw("binary header garbage", lenPrefix(12, 1, 0, 0, 8, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff)),
		raw("unknown serialize type", lenPrefix(8, 9, 0, 0, 0, 0, 0, 0, 0)),
		raw("random bytes", bytes.Repeat([]byte{0xde, 0xad, 0xbe, 0xef}, 1024)),
		raw("HTTP request", []byte("GET / HTTP/1.1\r\nHost: x\r\n\r\n")),
		raw("TLS client hello", []byte{0x16, 0x03, 0x01, 0x00, 0x05, 1, 0, 0, 1, 0}),
		{port + ": connection flood (300 open and close)", func(e endpoints) error {
			for range 300 {
				c, err := net.DialTimeout("tcp", addr(e), 5*time.Second)
				if err != nil {
					return err
				}
				c.Close()
			}
			return nil
		}},
		{port + ": request flood (5,000 pipelined unknown codes)", func(e endpoints) error {
			var b []byte
			for i := range 5000 {
				f, _ := wire.Encode(&wire.Command{Code: 999, Language: "GO", Version: 317, Opaque: int32(i)})
				b = append(b, f...)
			}
			return rawBytes(addr(e), b)
		}},
	}
}

// answerIs sends cmd on a new connection and checks the answer's code.
func answerIs(addr string, cmd *wire.Command, want ...int16) error {
	rc, err := dialRemoting(addr)
	if err != nil {
		return err
	}
	defer rc.Close()
	resp, err := rc.call(cmd)
	if err != nil {
		return err
	}
	for _, w := range want {
		if resp.Code == w {
			return nil
		}
	}
	return fmt.Errorf("answer %d (%s), want one of %v", resp.Code, resp.Remark, want)
}

func withExt(cmd *wire.Command, kv ...string) *wire.Command {
	for i := 0; i+1 < len(kv); i += 2 {
		cmd.ExtFields[kv[i]] = kv[i+1]
	}
	return cmd
}

// brokerInputs are bad requests to the remoting broker.
func brokerInputs() []input {
	refused := func(name string, cmd func() *wire.Command, want ...int16) input {
		if len(want) == 0 {
			want = []int16{wire.SystemError, wire.MessageIllegal, wire.NoPermission, wire.TopicNotExist}
		}
		return input{"broker: " + name, func(e endpoints) error { return answerIs(e.Broker, cmd(), want...) }}
	}
	send := func(topic string) func() *wire.Command {
		return func() *wire.Command { return sendRequest(topic, 0, "t", []byte("x")) }
	}
	pull := func(kv ...string) func() *wire.Command {
		return func() *wire.Command { return withExt(pullRequest("g", "health", 0, 0), kv...) }
	}
	max64 := strconv.FormatInt(1<<63-1, 10)
	return []input{
		refused("send to SCHEDULE_TOPIC_XXXX with a 300-byte REAL_TOPIC", func() *wire.Command {
			c := sendRequest("SCHEDULE_TOPIC_XXXX", 0, "t", []byte("x"))
			c.ExtFields["properties"] = "REAL_TOPIC\x01" + strings.Repeat("A", 300) + "\x02REAL_QID\x010\x02DELAY\x011\x02"
			return c
		}),
		// A consumer whose send-back failed sends the message to %RETRY%g
		// itself (Apache accepts it); every other reserved topic is refused.
		refused("send to %RETRY%g", send("%RETRY%g"), wire.Success),
		refused("send to %DLQ%g", send("%DLQ%g")),
		refused("send to TBW102", send("TBW102")),
		refused("send to RMQ_SYS_TRANS_HALF_TOPIC", send("RMQ_SYS_TRANS_HALF_TOPIC")),
		refused("send to a 300-byte topic", send(strings.Repeat("t", 300))),
		refused("send with queueId 2^31", func() *wire.Command {
			return withExt(sendRequest("health", 0, "t", []byte("x")), "queueId", "2147483648")
		}),
		refused("send with queueId -1", func() *wire.Command { return withExt(sendRequest("health", 0, "t", []byte("x")), "queueId", "-1") }),
		refused("send with a huge queueId", func() *wire.Command {
			return withExt(sendRequest("health", 0, "t", []byte("x")), "queueId", "99999999999999999999")
		}),
		refused("send with bad properties", func() *wire.Command {
			return withExt(sendRequest("health", 0, "t", []byte("x")), "properties", strings.Repeat("\x01\x02", 1000))
		}, wire.Success, wire.SystemError, wire.MessageIllegal),
		refused("send with a 5 MiB body", func() *wire.Command { return sendRequest("health", 0, "t", make([]byte, 5<<20)) }),
		refused("batch send with a garbage body", func() *wire.Command {
			c := sendRequest("health", 0, "t", bytes.Repeat([]byte{0xff}, 64))
			c.Code = wire.CodeSendBatchMessage
			return c
		}),
		refused("pull at offset 2^63-1", pull("queueOffset", max64), wire.PullOffsetMoved),
		refused("pull at offset -1", pull("queueOffset", "-1")),
		refused("pull queueId 2^31-1", pull("queueId", "2147483647")),
		refused("pull maxMsgNums 2^31-1", pull("maxMsgNums", "2147483647"), wire.Success, wire.PullNotFound, wire.PullOffsetMoved),
		refused("pull suspend 2^63-1 ms", pull("suspendTimeoutMillis", max64)),
		refused("pull with an expression naming no tag", pull("sysFlag", "4", "subscription", "||"), wire.SubscriptionParseFailed),
		refused("commit offset 2^63-1", func() *wire.Command {
			return request(wire.CodeUpdateConsumerOffset, map[string]string{"consumerGroup": "g", "topic": "health", "queueId": "0", "commitOffset": max64}, nil)
		}),
		refused("search offset by timestamp 2^63-1", func() *wire.Command {
			return request(wire.CodeSearchOffsetByTimestamp, map[string]string{"topic": "health", "queueId": "0", "timestamp": max64}, nil)
		}),
		refused("send back at log offset 2^63-1", func() *wire.Command {
			return request(wire.CodeConsumerSendMsgBack, map[string]string{"group": "g", "offset": max64}, nil)
		}),
		refused("send back with a bad group", func() *wire.Command {
			return request(wire.CodeConsumerSendMsgBack, map[string]string{"group": "../x", "offset": "0"}, nil)
		}),
		refused("heartbeat garbage", func() *wire.Command { return request(wire.CodeHeartbeat, nil, []byte("{[")) }),
		refused("heartbeat with SQL92", func() *wire.Command {
			return request(wire.CodeHeartbeat, nil, []byte(`{"clientID":"c","consumerDataSet":[{"groupName":"g","subscriptionDataSet":[{"topic":"t","subString":"a>1","expressionType":"SQL92"}]}]}`))
		}, wire.SubscriptionParseFailed),
		refused("lock with queueId -1", func() *wire.Command {
			return request(wire.CodeLockBatchMQ, nil, []byte(`{"consumerGroup":"g","clientId":"c","mqSet":[{"topic":"t","queueId":-1}]}`))
		}),
		// Apache does not check lock queue ids against the topic either: the
		// lease is kept (and expires) like any other.
		refused("lock with queueId 2^40", func() *wire.Command {
			return request(wire.CodeLockBatchMQ, nil, []byte(`{"consumerGroup":"g","clientId":"c","mqSet":[{"topic":"t","queueId":1099511627776}]}`))
		}, wire.Success),
		{"broker: unlock with another connection's client id", func(e endpoints) error {
			owner, err := dialRemoting(e.Broker)
			if err != nil {
				return err
			}
			defer owner.Close()
			if _, err := owner.call(request(wire.CodeHeartbeat, nil, []byte(`{"clientID":"owner","consumerDataSet":[{"groupName":"lg","subscriptionDataSet":[{"topic":"t","subString":"*"}]}]}`))); err != nil {
				return err
			}
			return answerIs(e.Broker, request(wire.CodeUnlockBatchMQ, nil,
				[]byte(`{"consumerGroup":"lg","clientId":"owner","mqSet":[{"topic":"t","brokerName":"broker-a","queueId":0}]}`)), wire.NoPermission)
		}},
		{"broker: 200 connections announcing 16 MiB frames", func(e endpoints) error {
			var cs []net.Conn
			defer func() {
				for _, c := range cs {
					c.Close()
				}
			}()
			for range 200 {
				c, err := net.DialTimeout("tcp", e.Broker, 5*time.Second)
				if err != nil {
					return err
				}
				cs = append(cs, c)
				_, _ = c.Write(lenPrefix(16<<20, 0, 0, 0, 2, '{', '}'))
			}
			// The broker serves meanwhile.
			return remotingHealth(e)
		}},
	}
}

func nameServerInputs() []input {
	refused := func(name string, cmd *wire.Command, want ...int16) input {
		return input{"namesrv: " + name, func(e endpoints) error { return answerIs(e.NameSrv, cmd, want...) }}
	}
	return []input{
		refused("route of a bad topic", request(wire.CodeGetRouteInfoByTopic, map[string]string{"topic": "a b"}, nil), wire.SystemError, wire.TopicNotExist),
		refused("route of a 300-byte topic", request(wire.CodeGetRouteInfoByTopic, map[string]string{"topic": strings.Repeat("t", 300)}, nil), wire.SystemError, wire.TopicNotExist),
		refused("route without a topic", request(wire.CodeGetRouteInfoByTopic, nil, nil), wire.SystemError, wire.TopicNotExist),
		refused("unknown code", request(999, nil, nil), wire.RequestCodeNotSupported),
	}
}

// grpcInputs are bad calls and bytes to the gRPC port.
func grpcInputs() []input {
	raw := func(name string, b []byte) input {
		return input{"grpc: " + name, func(e endpoints) error { return rawBytes(e.GRPC, b) }}
	}
	call := func(name string, f func(ctx context.Context, c v2.MessagingServiceClient) error) input {
		return input{"grpc: " + name, func(e endpoints) error {
			c, done, err := grpcClient(e.GRPC)
			if err != nil {
				return err
			}
			defer done()
			ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
			defer cancel()
			return f(ctx, c)
		}}
	}
	receive := func(name string, req *v2.ReceiveMessageRequest) input {
		return call(name, func(ctx context.Context, c v2.MessagingServiceClient) error {
			s, err := c.ReceiveMessage(ctx, req)
			if err != nil {
				return nil // refused at the gRPC level: fine
			}
			for {
				f, err := s.Recv()
				if err != nil {
					return nil
				}
				if st := f.GetStatus(); st != nil && st.GetCode() == v2.Code_OK && len(req.GetGroup().GetName()) > 255 {
					return fmt.Errorf("a receive for an illegal group answered OK")
				}
			}
		})
	}
	sendCode := func(name string, m *v2.Message, want v2.Code) input {
		return call(name, func(ctx context.Context, c v2.MessagingServiceClient) error {
			r, err := c.SendMessage(ctx, &v2.SendMessageRequest{Messages: []*v2.Message{m}})
			if err != nil {
				return err
			}
			if r.GetStatus().GetCode() != want {
				return fmt.Errorf("send answered %v, want %v", r.GetStatus(), want)
			}
			return nil
		})
	}
	msg := func(topic string) *v2.Message {
		return &v2.Message{Topic: &v2.Resource{Name: topic}, Body: []byte("x"),
			SystemProperties: &v2.SystemProperties{MessageId: "01BAD", MessageType: v2.MessageType_NORMAL,
				BodyEncoding: v2.Encoding_IDENTITY, BornTimestamp: timestamppb.Now()}}
	}
	q := func(topic string) *v2.MessageQueue { return &v2.MessageQueue{Topic: &v2.Resource{Name: topic}, Id: -1} }
	tag := func(expr string) *v2.FilterExpression {
		return &v2.FilterExpression{Type: v2.FilterType_TAG, Expression: expr}
	}
	return []input{
		raw("random bytes", bytes.Repeat([]byte{0xde, 0xad, 0xbe, 0xef}, 1024)),
		raw("HTTP/1 request", []byte("GET / HTTP/1.1\r\nHost: x\r\n\r\n")),
		raw("broken TLS hello", []byte{0x16, 0x03, 0x01, 0xff, 0xff, 1, 2, 3}),
		raw("HTTP/2 preface then garbage", append([]byte("PRI * HTTP/2.0\r\n\r\nSM\r\n\r\n"), bytes.Repeat([]byte{0xff}, 512)...)),
		sendCode("send to SCHEDULE_TOPIC_XXXX", msg("SCHEDULE_TOPIC_XXXX"), v2.Code_ILLEGAL_TOPIC),
		sendCode("send to %DLQ%g", msg("%DLQ%g"), v2.Code_ILLEGAL_TOPIC),
		sendCode("send to a 300-byte topic", msg(strings.Repeat("t", 300)), v2.Code_ILLEGAL_TOPIC),
		receive("receive with BatchSize 2^31-1", &v2.ReceiveMessageRequest{Group: &v2.Resource{Name: "g"}, MessageQueue: q("health"),
			FilterExpression: tag("*"), BatchSize: 1<<31 - 1, LongPollingTimeout: durationpb.New(0)}),
		receive("receive with a negative invisible time", &v2.ReceiveMessageRequest{Group: &v2.Resource{Name: "g"}, MessageQueue: q("health"),
			FilterExpression: tag("*"), BatchSize: 1, InvisibleDuration: durationpb.New(-time.Hour)}),
		receive("receive with a 10^9 s long poll", &v2.ReceiveMessageRequest{Group: &v2.Resource{Name: "g"}, MessageQueue: q("health"),
			FilterExpression: tag("*"), BatchSize: 1, LongPollingTimeout: &durationpb.Duration{Seconds: 1e9}}),
		receive("receive with an expression naming no tag", &v2.ReceiveMessageRequest{Group: &v2.Resource{Name: "g"}, MessageQueue: q("health"),
			FilterExpression: tag("||"), BatchSize: 1}),
		receive("receive for a 300-byte group", &v2.ReceiveMessageRequest{Group: &v2.Resource{Name: strings.Repeat("g", 300)}, MessageQueue: q("health"),
			FilterExpression: tag("*"), BatchSize: 1}),
		call("ack of forged handles", func(ctx context.Context, c v2.MessagingServiceClient) error {
			r, err := c.AckMessage(ctx, &v2.AckMessageRequest{Group: &v2.Resource{Name: "g"}, Topic: &v2.Resource{Name: "health"},
				Entries: []*v2.AckMessageEntry{{MessageId: "01", ReceiptHandle: strings.Repeat("x.", 5000)}}})
			if err != nil {
				return err
			}
			if r.GetStatus().GetCode() == v2.Code_OK {
				return fmt.Errorf("forged handle acked")
			}
			return nil
		}),
		call("stream flood (200 concurrent long polls)", func(ctx context.Context, c v2.MessagingServiceClient) error {
			var wg sync.WaitGroup
			for range 200 {
				wg.Add(1)
				go func() {
					defer wg.Done()
					s, err := c.ReceiveMessage(ctx, &v2.ReceiveMessageRequest{Group: &v2.Resource{Name: "flood"}, MessageQueue: q("flood"),
						FilterExpression: tag("*"), BatchSize: 1, LongPollingTimeout: durationpb.New(200 * time.Millisecond)})
					if err == nil {
						for {
							if _, err := s.Recv(); err != nil {
								return
							}
						}
					}
				}()
			}
			wg.Wait()
			return nil
		}),
	}
}

// httpInputs are bad requests to the admin/metrics port.
func httpInputs() []input {
	status := func(name, method, path string, want int) input {
		return input{"http: " + name, func(e endpoints) error {
			req, err := http.NewRequest(method, "http://"+e.Metrics+path, nil)
			if err != nil {
				return err
			}
			resp, err := (&http.Client{Timeout: 10 * time.Second}).Do(req)
			if err != nil {
				return err
			}
			defer resp.Body.Close()
			_, _ = io.Copy(io.Discard, resp.Body)
			if resp.StatusCode != want {
				return fmt.Errorf("%s %s: %s, want %d", method, path, resp.Status, want)
			}
			return nil
		}}
	}
	return []input{
		status("reset by GET", http.MethodGet, "/admin/reset", http.StatusMethodNotAllowed),
		status("reset without group", http.MethodPost, "/admin/reset?topic=health", http.StatusBadRequest),
		status("reset of queue 2^63", http.MethodPost, "/admin/reset?group=g&topic=health&queue=9223372036854775808", http.StatusBadRequest),
		status("reset of queue -1", http.MethodPost, "/admin/reset?group=g&topic=health&queue=-1", http.StatusBadRequest),
		status("reset of an unknown topic", http.MethodPost, "/admin/reset?group=g&topic=nope-"+strings.Repeat("x", 200), http.StatusNotFound),
		status("unknown path", http.MethodGet, "/"+strings.Repeat("a", 4000), http.StatusNotFound),
		{"http: garbage request", func(e endpoints) error { return rawBytes(e.Metrics, bytes.Repeat([]byte{0xff, 0, '\r', '\n'}, 256)) }},
		{"http: 1 MiB header", func(e endpoints) error {
			return rawBytes(e.Metrics, []byte("GET /metrics HTTP/1.1\r\nHost: x\r\nX: "+strings.Repeat("a", 1<<20)+"\r\n\r\n"))
		}},
	}
}

// TestHostileInputs runs every listener's table of bad inputs, each
// followed by a health check (a send and a receive on every protocol).
func TestHostileInputs(t *testing.T) {
	b := rmqtest.Start(t)
	e := endpoints{Broker: b.Broker, NameSrv: b.NameSrv, GRPC: b.GRPC, Metrics: b.Metrics}
	requireHealthy(t, e, "start")
	var inputs []input
	inputs = append(inputs, frameInputs("broker", func(e endpoints) string { return e.Broker })...)
	inputs = append(inputs, frameInputs("namesrv", func(e endpoints) string { return e.NameSrv })...)
	inputs = append(inputs, brokerInputs()...)
	inputs = append(inputs, nameServerInputs()...)
	inputs = append(inputs, grpcInputs()...)
	inputs = append(inputs, httpInputs()...)
	perPort := map[string]int{}
	passed := 0
	start := time.Now()
	for _, in := range inputs {
		perPort[strings.SplitN(in.name, ":", 2)[0]]++
		t0 := time.Now()
		if err := in.do(e); err != nil {
			t.Errorf("%s: %v", in.name, err)
		}
		if err := health(e); err != nil {
			t.Errorf("health check after %s: %v", in.name, err)
			continue
		}
		passed++
		if d := time.Since(t0); d > time.Second {
			t.Logf("slow input: %s (%v)", in.name, d.Round(time.Millisecond))
		}
	}
	t.Logf("hostile inputs: %d (%v), health checks passed: %d of %d, in %v", len(inputs), perPort, passed, len(inputs),
		time.Since(start).Round(time.Millisecond))
	require.Equal(t, len(inputs), passed)
}
