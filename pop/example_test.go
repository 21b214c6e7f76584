package pop_test

import (
	"context"
	"errors"
	"fmt"
	"os"
	"time"

	"github.com/brokercore/brokercore/pop"
	"github.com/brokercore/brokercore/store"
)

// Example wires a store and a pop Service together: pop.New subscribes to
// the store's arrivals by itself (no OnAppend wiring), a pop hides
// messages until they are acked, and a FIFO retry with the same attempt id
// gets the same batch back.
func Example() {
	dir, _ := os.MkdirTemp("", "pop-example")
	defer os.RemoveAll(dir)

	st, err := store.Open(dir, store.Options{Sync: store.SyncNone})
	if err != nil {
		panic(err)
	}
	defer st.Close()
	svc := pop.New(st, pop.Options{})
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

// Example_filter subscribes with a tag expression: messages whose Tags is
// not listed are settled for the group without being delivered, and the
// committed offset moves past them.
func Example_filter() {
	dir, _ := os.MkdirTemp("", "pop-example-filter")
	defer os.RemoveAll(dir)
	st, err := store.Open(dir, store.Options{Sync: store.SyncNone})
	if err != nil {
		panic(err)
	}
	defer st.Close()
	svc := pop.New(st, pop.Options{})
	defer svc.Close()

	_ = st.Append(
		&store.Message{Topic: "orders", Tags: "created", Body: []byte("o-1 created")},
		&store.Message{Topic: "orders", Tags: "audit", Body: []byte("o-1 audited")},
		&store.Message{Topic: "orders", Tags: "paid", Body: []byte("o-1 paid")},
	)
	// Max 0 means 1 and Invisible 0 means pop.DefaultInvisible; here 32.
	res, err := svc.Pop(context.Background(), pop.Request{Group: "billing", Topic: "orders", ClientID: "w1",
		Max: 32, Filter: "created || paid"})
	if err != nil {
		panic(err)
	}
	for _, d := range res.Messages {
		fmt.Printf("%s (invisible %v)\n", d.Message.Body, res.Invisible)
		_ = svc.Ack(d.Handle)
	}
	fmt.Println("filtered out:", svc.Stats().Filtered)

	_, err = svc.Pop(context.Background(), pop.Request{Group: "billing", Topic: "orders", ClientID: "w1", Filter: "created ||"})
	fmt.Println(errors.Is(err, pop.ErrInvalid))
	// Output:
	// o-1 created (invisible 1m0s)
	// o-1 paid (invisible 1m0s)
	// filtered out: 1
	// true
}
