package brokercore_test

import (
	"context"
	"fmt"
	"log"
	"os"
	"sync/atomic"
	"time"

	"github.com/brokercore/brokercore"
	"github.com/brokercore/brokercore/pop"
	"github.com/brokercore/brokercore/store"
)

// Open one directory, produce, pop and ack: the whole wiring is Open's.
func ExampleOpen() {
	dir, err := os.MkdirTemp("", "brokercore-example")
	if err != nil {
		log.Fatal(err)
	}
	defer os.RemoveAll(dir)

	b, err := brokercore.Open(dir, brokercore.Options{})
	if err != nil {
		log.Fatal(err)
	}
	defer b.Close()

	if err := b.Store().Append(&store.Message{Topic: "orders", Body: []byte("order #1")}); err != nil {
		log.Fatal(err)
	}
	res, err := b.Pop().Pop(context.Background(), pop.Request{
		Group: "billing", Topic: "orders", ClientID: "worker-1",
		Max: 1, Invisible: 30 * time.Second, Poll: time.Second,
	})
	if err != nil {
		log.Fatal(err)
	}
	for _, d := range res.Messages {
		fmt.Printf("%s (attempt %d)\n", d.Message.Body, d.Attempts)
		if err := b.Pop().Ack(d.Handle); err != nil {
			log.Fatal(err)
		}
	}
	next, _ := b.Offsets().Committed("billing", "orders", 0)
	fmt.Println("committed:", next)
	// Output:
	// order #1 (attempt 1)
	// committed: 1
}

// A message that is never acked goes to the group's dead-letter topic after
// pop.Options.MaxAttempts deliveries, and can be popped from there.
func ExampleOpen_deadLetters() {
	dir, err := os.MkdirTemp("", "brokercore-example")
	if err != nil {
		log.Fatal(err)
	}
	defer os.RemoveAll(dir)

	var now atomic.Int64 // a clock the example moves by hand
	now.Store(time.Date(2026, 1, 1, 0, 0, 0, 0, time.UTC).UnixNano())
	opts := brokercore.Options{Now: func() time.Time { return time.Unix(0, now.Load()) }}
	opts.Pop.MaxAttempts = 2
	b, err := brokercore.Open(dir, opts)
	if err != nil {
		log.Fatal(err)
	}
	defer b.Close()

	if err := b.Store().Append(&store.Message{Topic: "orders", Body: []byte("poison")}); err != nil {
		log.Fatal(err)
	}
	req := pop.Request{Group: "billing", Topic: "orders", ClientID: "worker-1", Max: 1, Invisible: time.Second}
	for range 3 { // two deliveries, then the dead letter
		res, err := b.Pop().Pop(context.Background(), req)
		if err != nil {
			log.Fatal(err)
		}
		fmt.Println("delivered:", len(res.Messages))
		now.Add(int64(2 * time.Second)) // never acked: the invisible time ends
	}

	dlq := brokercore.DeadLetterTopic("billing")
	res, err := b.Pop().Pop(context.Background(), pop.Request{Group: "ops", Topic: dlq, ClientID: "ops-1", Max: 1})
	if err != nil {
		log.Fatal(err)
	}
	m := res.Messages[0].Message
	fmt.Println(m.Topic, string(m.Body), "from", m.Properties[brokercore.PropDLQOriginTopic])
	// Output:
	// delivered: 1
	// delivered: 1
	// delivered: 0
	// %DLQ%billing poison from orders
}
