//go:build !race

package rmqtest_test

import (
	"context"
	"fmt"
	"os"
	"time"

	"github.com/apache/rocketmq-client-go/v2"
	"github.com/apache/rocketmq-client-go/v2/consumer"
	"github.com/apache/rocketmq-client-go/v2/primitive"
	"github.com/apache/rocketmq-client-go/v2/producer"
	"github.com/apache/rocketmq-client-go/v2/rlog"
	"github.com/brokercore/brokercore/examples/rocketmq/rmqtest"
	"github.com/brokercore/brokercore/examples/rocketmq/server"
)

// In a test: b := rmqtest.Start(t) and point the official client at
// b.NameSrv. Outside a test (as here) New and Close do the same.
func Example() {
	rlog.SetLogLevel("error")
	dir, _ := os.MkdirTemp("", "rmqtest-example")
	defer os.RemoveAll(dir)
	b, err := rmqtest.New(server.Config{Dir: dir})
	if err != nil {
		panic(err)
	}
	defer b.Close()

	p, _ := rocketmq.NewProducer(producer.WithNameServer([]string{b.NameSrv}), producer.WithInstanceName("example-p"))
	_ = p.Start()
	defer p.Shutdown()
	r, err := p.SendSync(context.Background(), primitive.NewMessage("greetings", []byte("hello")))
	if err != nil {
		panic(err)
	}
	fmt.Println("send:", r.Status == primitive.SendOK)

	got := make(chan string, 1)
	c, _ := rocketmq.NewPushConsumer(consumer.WithNameServer([]string{b.NameSrv}), consumer.WithGroupName("example"),
		consumer.WithInstance("example-c"), consumer.WithConsumeFromWhere(consumer.ConsumeFromFirstOffset))
	_ = c.Subscribe("greetings", consumer.MessageSelector{}, func(_ context.Context, msgs ...*primitive.MessageExt) (consumer.ConsumeResult, error) {
		for _, m := range msgs {
			select {
			case got <- string(m.Body):
			default:
			}
		}
		return consumer.ConsumeSuccess, nil
	})
	_ = c.Start()
	defer c.Shutdown()
	select {
	case body := <-got:
		fmt.Println("received:", body)
	case <-time.After(30 * time.Second):
		fmt.Println("timed out")
	}
	// Output:
	// send: true
	// received: hello
}
