package grpcapi_test

import (
	"context"
	"crypto/tls"
	"fmt"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	v2 "github.com/apache/rocketmq-clients/golang/v5/protocol/v2"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	"google.golang.org/grpc"
	"google.golang.org/grpc/credentials"
	"google.golang.org/grpc/credentials/insecure"

	"github.com/brokercore/brokercore/examples/rocketmq/grpcapi"
)

// TestTLSAndPlaintextServedOnOnePort: the stock client dials TLS and its
// grpc-go refuses a server without ALPN h2; plaintext must work on the
// same port.
func TestTLSAndPlaintextServedOnOnePort(t *testing.T) {
	t.Parallel()
	b := startBroker(t, grpcapi.Options{})
	tlsCfg := &tls.Config{InsecureSkipVerify: true, NextProtos: []string{"h2"}}
	for name, cred := range map[string]grpc.DialOption{
		"tls":       grpc.WithTransportCredentials(credentials.NewTLS(tlsCfg)),
		"plaintext": grpc.WithTransportCredentials(insecure.NewCredentials()),
	} {
		t.Run(name, func(t *testing.T) {
			cc, err := grpc.NewClient(b.endpoint, cred)
			require.NoError(t, err)
			defer cc.Close()
			ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
			defer cancel()
			resp, err := v2.NewMessagingServiceClient(cc).QueryRoute(ctx, &v2.QueryRouteRequest{Topic: &v2.Resource{Name: "t"}})
			require.NoError(t, err)
			require.Equal(t, v2.Code_OK, resp.GetStatus().GetCode())
			require.Len(t, resp.GetMessageQueues(), grpcapi.DefaultQueues)
			for i, q := range resp.GetMessageQueues() {
				assert.EqualValues(t, i, q.GetId())
				assert.Equal(t, v2.Permission_READ_WRITE, q.GetPermission())
				assert.ElementsMatch(t, []v2.MessageType{v2.MessageType_NORMAL, v2.MessageType_FIFO, v2.MessageType_DELAY, v2.MessageType_TRANSACTION}, q.GetAcceptMessageTypes())
				assert.Equal(t, b.endpoint, fmt.Sprintf("%s:%d", q.GetBroker().GetEndpoints().GetAddresses()[0].GetHost(), q.GetBroker().GetEndpoints().GetAddresses()[0].GetPort()))
			}
		})
	}
}

// TestCertificateIsKeptAcrossRestarts: the self-signed certificate lives
// under the data directory.
func TestCertificateIsKeptAcrossRestarts(t *testing.T) {
	t.Parallel()
	certs := t.TempDir()
	fingerprint := func() []byte {
		b := startBroker(t, grpcapi.Options{CertDir: certs})
		conn, err := tls.Dial("tcp", b.endpoint, &tls.Config{InsecureSkipVerify: true, NextProtos: []string{"h2"}})
		require.NoError(t, err)
		state := conn.ConnectionState()
		require.NoError(t, conn.Close())
		require.Equal(t, "h2", state.NegotiatedProtocol)
		require.NoError(t, b.srv.Close())
		return state.PeerCertificates[0].Raw
	}
	first := fingerprint()
	require.Equal(t, first, fingerprint())
}

// TestSendReceiveAck2000ExactlyOnce: 2,000 messages from the stock producer
// reach a stock simple consumer exactly once with acks, and nothing acked
// comes back within its invisible time.
func TestSendReceiveAck2000ExactlyOnce(t *testing.T) {
	t.Parallel()
	const n = 2000
	b := startBroker(t, grpcapi.Options{})
	topic := "t2000"
	p := newProducer(t, b.endpoint, topic)
	c := newSimpleConsumer(t, b.endpoint, "g2000", topic, 2*time.Second, nil)

	ctx, cancel := context.WithTimeout(context.Background(), 90*time.Second)
	defer cancel()
	sent := make(map[string]bool, n)
	var mu sync.Mutex
	var wg sync.WaitGroup
	var sendErrs atomic.Int64
	for w := range 8 {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for i := w; i < n; i += 8 {
				m := textMessage(topic, fmt.Sprintf("m-%d", i))
				m.SetTag("tagA")
				m.SetKeys(fmt.Sprintf("k-%d", i))
				m.AddProperty("seq", fmt.Sprint(i))
				r, err := p.Send(ctx, m)
				if err != nil || len(r) != 1 {
					sendErrs.Add(1)
					continue
				}
				mu.Lock()
				sent[r[0].MessageID] = true
				mu.Unlock()
			}
		}()
	}
	wg.Wait()
	require.Zero(t, sendErrs.Load())
	require.Len(t, sent, n)

	seen := newSeenSet()
	for seen.len() < n && ctx.Err() == nil {
		mvs, err := receive(ctx, c, 32, 30*time.Second)
		require.NoError(t, err)
		for _, mv := range mvs {
			require.True(t, sent[mv.GetMessageId()], "unknown message id %s", mv.GetMessageId())
			seen.add(mv.GetMessageId())
			require.EqualValues(t, 1, mv.GetDeliveryAttempt())
			require.Equal(t, "tagA", *mv.GetTag())
			require.Len(t, mv.GetKeys(), 1)
			require.Equal(t, "k-"+mv.GetProperties()["seq"], mv.GetKeys()[0])
			require.Equal(t, "m-"+mv.GetProperties()["seq"], string(mv.GetBody()))
			require.Equal(t, topic, mv.GetTopic())
			require.NotNil(t, mv.GetBornTimestamp())
			require.NoError(t, c.Ack(ctx, mv))
		}
	}
	require.Equal(t, n, seen.len())
	require.Empty(t, seen.dups())
	// Nothing acked comes back: one more receive finds nothing.
	mvs, err := receive(ctx, c, 32, 30*time.Second)
	require.NoError(t, err)
	require.Empty(t, mvs)
}
