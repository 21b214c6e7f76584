package hostile_test

import (
	"bufio"
	"context"
	"crypto/tls"
	"fmt"
	"io"
	"net"
	"net/http"
	"strconv"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	v2 "github.com/apache/rocketmq-clients/golang/v5/protocol/v2"
	"github.com/stretchr/testify/require"
	"google.golang.org/grpc"
	"google.golang.org/grpc/credentials"
	"google.golang.org/protobuf/types/known/durationpb"
	"google.golang.org/protobuf/types/known/timestamppb"

	"github.com/brokercore/brokercore/examples/rocketmq/remoting/wire"
)

// endpoints are the listeners of one broker.
type endpoints struct {
	Broker, NameSrv, GRPC, Metrics string
}

// rconn speaks the remoting protocol by hand.
type rconn struct {
	c      net.Conn
	r      *bufio.Reader
	opaque int32
}

func dialRemoting(addr string) (*rconn, error) {
	c, err := net.DialTimeout("tcp", addr, 5*time.Second)
	if err != nil {
		return nil, err
	}
	return &rconn{c: c, r: bufio.NewReader(c)}, nil
}

func (rc *rconn) Close() error { return rc.c.Close() }

func (rc *rconn) write(b []byte) error {
	_ = rc.c.SetWriteDeadline(time.Now().Add(5 * time.Second))
	_, err := rc.c.Write(b)
	return err
}

// call sends cmd and returns its answer (skipping the broker's
// notifications).
func (rc *rconn) call(cmd *wire.Command) (*wire.Command, error) {
	rc.opaque++
	cmd.Opaque = rc.opaque
	b, err := wire.Encode(cmd)
	if err != nil {
		return nil, err
	}
	if err := rc.write(b); err != nil {
		return nil, err
	}
	for {
		_ = rc.c.SetReadDeadline(time.Now().Add(10 * time.Second))
		f, err := wire.ReadFrame(rc.r, wire.DefaultMaxFrame)
		if err != nil {
			return nil, err
		}
		resp, err := wire.Decode(f)
		if err != nil {
			return nil, err
		}
		if resp.IsResponse() && resp.Opaque == cmd.Opaque {
			return resp, nil
		}
	}
}

func request(code int16, ext map[string]string, body []byte) *wire.Command {
	if ext == nil {
		ext = map[string]string{}
	}
	return &wire.Command{Code: code, Language: "GO", Version: 317, ExtFields: ext, Body: body}
}

func sendRequest(topic string, queue int, tags string, body []byte) *wire.Command {
	return request(wire.CodeSendMessage, map[string]string{"producerGroup": "pg", "topic": topic,
		"queueId": strconv.Itoa(queue), "sysFlag": "0", "bornTimestamp": "1", "flag": "0",
		"properties": "UNIQ_KEY\x01" + strconv.Itoa(len(body)) + "\x02TAGS\x01" + tags + "\x02", "reconsumeTimes": "0",
		"defaultTopic": "TBW102", "defaultTopicQueueNums": "4"}, body)
}

func pullRequest(group, topic string, queue int, offset int64) *wire.Command {
	return request(wire.CodePullMessage, map[string]string{"consumerGroup": group, "topic": topic,
		"queueId": strconv.Itoa(queue), "queueOffset": strconv.FormatInt(offset, 10), "maxMsgNums": "32",
		"sysFlag": "0", "commitOffset": "0", "suspendTimeoutMillis": "0", "subscription": "*"}, nil)
}

var healthSeq atomic.Int64

// remotingHealth: a send on the broker port and the pull of it, and a
// route lookup on the name server.
func remotingHealth(e endpoints) error {
	rc, err := dialRemoting(e.Broker)
	if err != nil {
		return fmt.Errorf("dial broker: %w", err)
	}
	defer rc.Close()
	body := fmt.Sprintf("health-%d", healthSeq.Add(1))
	resp, err := rc.call(sendRequest("health", 0, "h", []byte(body)))
	if err != nil {
		return fmt.Errorf("send: %w", err)
	}
	if resp.Code != wire.Success {
		return fmt.Errorf("send: code %d %s", resp.Code, resp.Remark)
	}
	off, err := strconv.ParseInt(resp.ExtFields["queueOffset"], 10, 64)
	if err != nil {
		return fmt.Errorf("send answer without queueOffset: %v", resp.ExtFields)
	}
	resp, err = rc.call(pullRequest("health-g", "health", 0, off))
	if err != nil {
		return fmt.Errorf("pull: %w", err)
	}
	if resp.Code != wire.Success || !strings.Contains(string(resp.Body), body) {
		return fmt.Errorf("pull at %d: code %d %s, body has %q: %v", off, resp.Code, resp.Remark, body,
			strings.Contains(string(resp.Body), body))
	}
	ns, err := dialRemoting(e.NameSrv)
	if err != nil {
		return fmt.Errorf("dial name server: %w", err)
	}
	defer ns.Close()
	resp, err = ns.call(request(wire.CodeGetRouteInfoByTopic, map[string]string{"topic": "health"}, nil))
	if err != nil {
		return fmt.Errorf("route: %w", err)
	}
	if resp.Code != wire.Success {
		return fmt.Errorf("route: code %d %s", resp.Code, resp.Remark)
	}
	return nil
}

func grpcClient(addr string) (v2.MessagingServiceClient, func(), error) {
	cc, err := grpc.NewClient(addr, grpc.WithTransportCredentials(credentials.NewTLS(&tls.Config{
		InsecureSkipVerify: true, NextProtos: []string{"h2"}})))
	if err != nil {
		return nil, nil, err
	}
	return v2.NewMessagingServiceClient(cc), func() { _ = cc.Close() }, nil
}

// grpcHealth: a send and the receive of it over gRPC.
func grpcHealth(e endpoints) error {
	if e.GRPC == "" {
		return nil
	}
	c, done, err := grpcClient(e.GRPC)
	if err != nil {
		return err
	}
	defer done()
	ctx, cancel := context.WithTimeout(context.Background(), 15*time.Second)
	defer cancel()
	n := healthSeq.Add(1)
	body := fmt.Sprintf("ghealth-%d", n)
	sr, err := c.SendMessage(ctx, &v2.SendMessageRequest{Messages: []*v2.Message{{
		Topic: &v2.Resource{Name: "ghealth"}, Body: []byte(body),
		SystemProperties: &v2.SystemProperties{MessageId: fmt.Sprintf("01HEALTH%06d", n), MessageType: v2.MessageType_NORMAL,
			BodyEncoding: v2.Encoding_IDENTITY, BornTimestamp: timestamppb.Now()},
	}}})
	if err != nil {
		return fmt.Errorf("grpc send: %w", err)
	}
	if sr.GetStatus().GetCode() != v2.Code_OK {
		return fmt.Errorf("grpc send: %v", sr.GetStatus())
	}
	for attempt := 0; attempt < 5; attempt++ {
		s, err := c.ReceiveMessage(ctx, &v2.ReceiveMessageRequest{Group: &v2.Resource{Name: "ghealth-g"},
			MessageQueue:       &v2.MessageQueue{Topic: &v2.Resource{Name: "ghealth"}, Id: -1},
			FilterExpression:   &v2.FilterExpression{Type: v2.FilterType_TAG, Expression: "*"},
			BatchSize:          32,
			InvisibleDuration:  durationpb.New(time.Hour),
			LongPollingTimeout: durationpb.New(2 * time.Second)})
		if err != nil {
			return fmt.Errorf("grpc receive: %w", err)
		}
		for {
			f, err := s.Recv()
			if err == io.EOF {
				break
			}
			if err != nil {
				return fmt.Errorf("grpc receive: %w", err)
			}
			if string(f.GetMessage().GetBody()) == body {
				return nil
			}
		}
	}
	return fmt.Errorf("grpc receive: %q not received", body)
}

// httpHealth: the metrics port answers.
func httpHealth(e endpoints) error {
	if e.Metrics == "" {
		return nil
	}
	cl := &http.Client{Timeout: 10 * time.Second}
	resp, err := cl.Get("http://" + e.Metrics + "/metrics")
	if err != nil {
		return err
	}
	defer resp.Body.Close()
	_, _ = io.Copy(io.Discard, resp.Body)
	if resp.StatusCode != http.StatusOK {
		return fmt.Errorf("metrics: %s", resp.Status)
	}
	return nil
}

// health runs every health check.
func health(e endpoints) error {
	for _, f := range []func(endpoints) error{remotingHealth, grpcHealth, httpHealth} {
		if err := f(e); err != nil {
			return err
		}
	}
	return nil
}

func requireHealthy(t *testing.T, e endpoints, after string) {
	t.Helper()
	require.NoError(t, health(e), "health check after %s", after)
}
