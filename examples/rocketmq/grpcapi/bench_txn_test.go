package grpcapi_test

import (
	"context"
	"os"
	"sync"
	"testing"
	"time"

	rmq "github.com/apache/rocketmq-clients/golang/v5"
	v2 "github.com/apache/rocketmq-clients/golang/v5/protocol/v2"

	"github.com/brokercore/brokercore/examples/rocketmq/rmqtest"
	"github.com/brokercore/brokercore/examples/rocketmq/server"
)

// BenchmarkGRPCTransaction16 compares, with the stock v5 producer and 16
// goroutines on the program (rmqtest, flush=sync), a normal Send of a 1 KiB
// message with a transaction (SendWithTransaction + Commit: a half message
// appended, then the real message and its op record in one append), and
// with the floor of a transaction's two round trips: a normal Send followed
// by a unary RPC the broker answers without touching the store (an
// EndTransaction of an id it never issued, on a second connection). All
// report msgs/s (and the store's fsyncs per operation); run them
// alternated:
//
//	go test -run '^$' -bench GRPCTransaction16 -benchtime 4000x -count 5 ./grpcapi/
//
// BENCH_FLUSH=async runs them on an interval-fsynced store (what is left
// without the fsync waits).
func BenchmarkGRPCTransaction16(b *testing.B) {
	for _, mode := range []string{"send", "transaction", "send+noop-rpc"} {
		b.Run(mode, func(b *testing.B) {
			br := rmqtest.StartConfig(b, server.Config{Flush: os.Getenv("BENCH_FLUSH")})
			topic := "bench-txn"
			p, err := rmq.NewProducer(config(br.GRPC, ""), rmq.WithTopics(topic),
				rmq.WithTransactionChecker(&rmq.TransactionChecker{Check: func(*rmq.MessageView) rmq.TransactionResolution { return rmq.UNKNOWN }}))
			if err != nil {
				b.Fatal(err)
			}
			if err := startWithin(b, p.Start); err != nil {
				b.Fatal(err)
			}
			defer p.GracefulStop()
			raw := rawClient(b, br.GRPC)
			noop := &v2.EndTransactionRequest{Topic: &v2.Resource{Name: topic}, MessageId: "none", TransactionId: "not-issued",
				Resolution: v2.TransactionResolution_COMMIT}
			body := make([]byte, 1024)
			one := func() error {
				m := &rmq.Message{Topic: topic, Body: body}
				switch mode {
				case "send":
					_, err := p.Send(context.Background(), m)
					return err
				case "send+noop-rpc":
					if _, err := p.Send(context.Background(), m); err != nil {
						return err
					}
					_, err := raw.EndTransaction(context.Background(), noop)
					return err
				}
				tx := p.BeginTransaction()
				if _, err := p.SendWithTransaction(context.Background(), m, tx); err != nil {
					return err
				}
				return tx.Commit()
			}
			if err := one(); err != nil {
				b.Fatal(err)
			}
			const workers = 16
			work := make(chan struct{}, b.N)
			for range b.N {
				work <- struct{}{}
			}
			close(work)
			st := br.Server.Core().Store()
			syncs := st.Stats().Syncs
			b.ResetTimer()
			start := time.Now()
			var wg sync.WaitGroup
			for range workers {
				wg.Add(1)
				go func() {
					defer wg.Done()
					for range work {
						if err := one(); err != nil {
							b.Error(err)
							return
						}
					}
				}()
			}
			wg.Wait()
			b.ReportMetric(float64(b.N)/time.Since(start).Seconds(), "msgs/s")
			b.ReportMetric(float64(st.Stats().Syncs-syncs)/float64(b.N), "fsyncs/op")
		})
	}
}
