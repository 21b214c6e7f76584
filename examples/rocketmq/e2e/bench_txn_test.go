//go:build !race

package e2e

import (
	"context"
	"sync"
	"testing"
	"time"

	"github.com/apache/rocketmq-client-go/v2"
	"github.com/apache/rocketmq-client-go/v2/primitive"
	"github.com/apache/rocketmq-client-go/v2/producer"

	"github.com/brokercore/brokercore/examples/rocketmq/rmqtest"
	"github.com/brokercore/brokercore/examples/rocketmq/server"
)

// BenchmarkTransaction16 compares, with the official v2 client and 16
// goroutines on the program (flush=sync), SendSync of a 1 KiB message with
// a transaction (SendMessageInTransaction: the half's send, then Execute's
// commit as a oneway END_TRANSACTION). A transaction counts when its
// message is stored on its topic, so the commit's append is inside the
// measured time. Both report msgs/s; run them alternated:
//
//	go test -run '^$' -bench Transaction16 -benchtime 4000x -count 5 ./e2e/
func BenchmarkTransaction16(b *testing.B) {
	for _, mode := range []string{"send", "transaction"} {
		b.Run(mode, func(b *testing.B) { benchTransaction(b, mode) })
	}
}

func benchTransaction(b *testing.B, mode string) {
	br := rmqtest.StartConfig(b, server.Config{})
	const topic = "bench-txn"
	body := make([]byte, 1024)
	commit := listenerFunc{
		exec:  func(*primitive.Message) primitive.LocalTransactionState { return primitive.CommitMessageState },
		check: func(*primitive.MessageExt) primitive.LocalTransactionState { return primitive.CommitMessageState },
	}
	var send func() error
	if mode == "send" {
		p := newProducer(b, br.NameSrv)
		send = func() error {
			_, err := p.SendSync(context.Background(), primitive.NewMessage(topic, body))
			return err
		}
	} else {
		p, err := rocketmq.NewTransactionProducer(commit, producer.WithNameServer([]string{br.NameSrv}),
			producer.WithGroupName("pg-bench"), producer.WithInstanceName(instance(b, "txn")))
		if err != nil {
			b.Fatal(err)
		}
		if err := p.Start(); err != nil {
			b.Fatal(err)
		}
		defer p.Shutdown()
		send = func() error {
			_, err := p.SendMessageInTransaction(context.Background(), primitive.NewMessage(topic, body))
			return err
		}
	}
	if err := send(); err != nil {
		b.Fatal(err)
	}
	st := br.Server.Core().Store()
	stored := func() int64 {
		var n int64
		for _, q := range st.Queues(topic) {
			n += st.MaxOffset(topic, q)
		}
		return n
	}
	base := stored()
	work := make(chan struct{}, b.N)
	for range b.N {
		work <- struct{}{}
	}
	close(work)
	b.ResetTimer()
	start := time.Now()
	var wg sync.WaitGroup
	for range 16 {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for range work {
				if err := send(); err != nil {
					b.Error(err)
					return
				}
			}
		}()
	}
	wg.Wait()
	for stored()-base < int64(b.N) { // the last oneway commits
		time.Sleep(time.Millisecond)
	}
	b.ReportMetric(float64(b.N)/time.Since(start).Seconds(), "msgs/s")
}
