package grpcapi_test

import (
	"context"
	"errors"
	"sync"
	"testing"
	"time"

	v2 "github.com/apache/rocketmq-clients/golang/v5/protocol/v2"
	"github.com/stretchr/testify/require"
	"google.golang.org/grpc/codes"
	grpcstatus "google.golang.org/grpc/status"

	"github.com/brokercore/brokercore"
	"github.com/brokercore/brokercore/examples/rocketmq/grpcapi"
	"github.com/brokercore/brokercore/store"
	"github.com/brokercore/brokercore/txn"
)

// nowBroker is a Broker whose transaction manager comes and goes, as a
// replicated node's does with its leadership: TransactionsNow answers err
// while it is set.
type nowBroker struct {
	*brokercore.Broker
	mu  sync.Mutex
	err error
}

func (b *nowBroker) TransactionsNow() (*txn.Manager, error) {
	b.mu.Lock()
	defer b.mu.Unlock()
	if b.err != nil {
		return nil, b.err
	}
	return b.Broker.Transactions(), nil
}

func (b *nowBroker) set(err error) {
	b.mu.Lock()
	b.err = err
	b.mu.Unlock()
}

// While the Broker has no transaction manager now (ErrNotWritable), a
// TRANSACTION send and EndTransaction fail with UNAVAILABLE (the v5 client
// reconnects and resends) and nothing is stored; once it has one they are
// served.
func TestTransactionsNowNotWritableIsUnavailable(t *testing.T) {
	dir := t.TempDir()
	c, err := brokercore.Open(dir, brokercore.Options{Store: store.Options{Sync: store.SyncNone}})
	require.NoError(t, err)
	t.Cleanup(func() { _ = c.Close() })
	nb := &nowBroker{Broker: c}
	srv, err := grpcapi.New(nb, grpcapi.Options{CertDir: dir, MaxAttempts: grpcapi.DefaultMaxAttempts})
	require.NoError(t, err)
	addr, err := srv.Listen("127.0.0.1:0")
	require.NoError(t, err)
	t.Cleanup(func() { _ = srv.Close() })
	cl := rawClient(t, addr.String())
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	send := func(id string) (*v2.SendMessageResponse, error) {
		return cl.SendMessage(ctx, &v2.SendMessageRequest{Messages: []*v2.Message{{
			Topic: &v2.Resource{Name: "orders"}, Body: []byte("paid"),
			SystemProperties: &v2.SystemProperties{MessageId: id, MessageType: v2.MessageType_TRANSACTION, BodyEncoding: v2.Encoding_IDENTITY},
		}}})
	}
	end := func(id, txID string) (*v2.EndTransactionResponse, error) {
		return cl.EndTransaction(ctx, &v2.EndTransactionRequest{Topic: &v2.Resource{Name: "orders"}, MessageId: id,
			TransactionId: txID, Resolution: v2.TransactionResolution_COMMIT})
	}

	nb.set(errors.Join(grpcapi.ErrNotWritable, errors.New("leader is n2")))
	_, err = send("m1")
	require.Equal(t, codes.Unavailable, grpcstatus.Code(err), "%v", err)
	_, err = end("m1", "BCTX0")
	require.Equal(t, codes.Unavailable, grpcstatus.Code(err), "%v", err)
	require.Zero(t, c.Store().Stats().Messages)

	nb.set(nil)
	resp, err := send("m1")
	require.NoError(t, err)
	require.Equal(t, v2.Code_OK, resp.GetStatus().GetCode(), resp.GetStatus().GetMessage())
	er, err := end("m1", resp.GetEntries()[0].GetTransactionId())
	require.NoError(t, err)
	require.Equal(t, v2.Code_OK, er.GetStatus().GetCode(), er.GetStatus().GetMessage())
	require.Eventually(t, func() bool { return c.Transactions().Stats().Committed == 1 },
		10*time.Second, 5*time.Millisecond, "the commit (EndAsync) lands")

	// A manager closed under the send (its leader term ended) is retried
	// elsewhere too.
	require.NoError(t, c.Transactions().Close())
	_, err = send("m2")
	require.Equal(t, codes.Unavailable, grpcstatus.Code(err), "%v", err)
}
