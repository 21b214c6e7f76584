package pop_test

import (
	"context"
	"fmt"
	"os"
	"time"

	"github.com/brokercore/brokercore/pop"
	"github.com/brokercore/brokercore/store"
)

// Example wires a store and a pop Service together: the store's OnAppend
// wakes long-polling pops, a pop hides messages until they are acked, and
// a FIFO retry with the same attempt id gets the same batch back.
func Example() {
	dir, _ := os.MkdirTemp("", "pop-example")
	defer os.RemoveAll(dir)

	var svc *pop.Service
	st, err := store.Open(dir, store.Options{
		Sync:     store.SyncNone,
		OnAppend: func(topic string, q int, _ int64) { svc.Arrived(topic, q) },
	})
	if err != nil {
		panic(err)
	}
	defer st.Close()
	svc = pop.New(st, pop.Options{})
	defer svc.Close()

	_ = st.Append(
		&store.Message{Topic: "orders", QueueID: 0, Body: []byte("a")},
		&store.Message{Topic: "orders", QueueID: 0, Body: []byte("b")},
		&store.Message{Topic: "orders", QueueID: 0, Body: []byte("c")},
	)

	ctx := context.Background()
	req := pop.Request{Group: "billing", Topic: "orders", ClientID: "worker-1", QueueID: pop.AllQueues,
		Max: 2, Invisible: 30 * time.Second, FIFO: true, AttemptID: "attempt-1"}
	res, _ := svc.Pop(ctx, req)
	for _, d := range res.Messages {
		fmt.Printf("%s attempt %d\n", d.Message.Body, d.Attempts)
	}

	// The response was lost; the client retries with the same attempt id.
	res, _ = svc.Pop(ctx, req)
	fmt.Println("retry got", len(res.Messages), "messages, attempt", res.Messages[0].Attempts)
	for _, d := range res.Messages {
		if err := svc.Ack(d.Handle); err != nil {
			panic(err)
		}
	}

	req.AttemptID = "attempt-2"
	res, _ = svc.Pop(ctx, req)
	fmt.Printf("next: %s\n", res.Messages[0].Message.Body)
	// Output:
	// a attempt 1
	// b attempt 1
	// retry got 2 messages, attempt 1
	// next: c
}
