package brokercore_test

import (
	"context"
	"fmt"
	"os"

	"github.com/ThreeDotsLabs/watermill"
	"github.com/ThreeDotsLabs/watermill/message"

	wmbc "github.com/brokercore/brokercore/examples/watermill"
)

// A Publisher and a Subscriber over one data directory: publish, consume,
// ack.
func Example() {
	dir, _ := os.MkdirTemp("", "brokercore-watermill")
	defer os.RemoveAll(dir)

	pub, sub, err := wmbc.NewPubSub(wmbc.Config{Dir: dir, ConsumerGroup: "billing"})
	if err != nil {
		panic(err)
	}
	defer pub.Close()
	defer sub.Close()

	msg := message.NewMessage(watermill.NewUUID(), []byte(`{"order":42}`))
	msg.Metadata.Set("type", "OrderPlaced")
	if err := pub.Publish("orders", msg); err != nil {
		panic(err)
	}

	messages, err := sub.Subscribe(context.Background(), "orders")
	if err != nil {
		panic(err)
	}
	got := <-messages
	d, _ := wmbc.DeliveryFromContext(got.Context())
	fmt.Println(got.Metadata.Get("type"), string(got.Payload), "attempt", d.Attempts, got.UUID == msg.UUID)
	got.Ack()
	// Output: OrderPlaced {"order":42} attempt 1 true
}

// A Watermill Router handler consuming with brokercore: nacks (returned
// errors) come back after NackDelay; the router acks what the handler
// returns nil for.
func Example_router() {
	dir, _ := os.MkdirTemp("", "brokercore-watermill")
	defer os.RemoveAll(dir)
	pub, sub, err := wmbc.NewPubSub(wmbc.Config{Dir: dir, ConsumerGroup: "mailer"})
	if err != nil {
		panic(err)
	}
	defer pub.Close()

	router, err := message.NewRouter(message.RouterConfig{}, watermill.NopLogger{})
	if err != nil {
		panic(err)
	}
	done := make(chan struct{})
	failedOnce := false
	router.AddConsumerHandler("send-mail", "signups", sub, func(m *message.Message) error {
		d, _ := wmbc.DeliveryFromContext(m.Context())
		if !failedOnce {
			failedOnce = true
			fmt.Println("attempt", d.Attempts, "fails")
			return fmt.Errorf("smtp down")
		}
		fmt.Println("attempt", d.Attempts, "mails", string(m.Payload))
		close(done)
		return nil
	})
	go func() { _ = router.Run(context.Background()) }()
	<-router.Running()

	_ = pub.Publish("signups", message.NewMessage(watermill.NewUUID(), []byte("ada@example.com")))
	<-done
	_ = router.Close() // closes sub too
	// Output:
	// attempt 1 fails
	// attempt 2 mails ada@example.com
}
