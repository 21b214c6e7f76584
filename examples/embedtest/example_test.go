package embedtest_test

import (
	"context"
	"fmt"
	"os"
	"time"

	"github.com/brokercore/brokercore/pop"
	"github.com/brokercore/brokercore/store"
)

// Example composes only the pieces it needs, the store and a pop service
// over it, in a temporary directory the way a test would with t.TempDir().
// pop.New subscribes to the store's arrivals itself, so its long polls wake
// on every append with nothing to wire.
func Example() {
	dir, err := os.MkdirTemp("", "embedtest-*")
	if err != nil {
		panic(err)
	}
	defer os.RemoveAll(dir)

	st, err := store.Open(dir, store.Options{Sync: store.SyncNone})
	if err != nil {
		panic(err)
	}
	defer st.Close()
	svc := pop.New(st, pop.Options{})
	defer svc.Close() // before the store: deferred calls run last-first

	for _, body := range []string{"created", "paid", "shipped"} {
		if err := st.Append(&store.Message{Topic: "orders", Keys: []string{"order-1"}, Body: []byte(body)}); err != nil {
			panic(err)
		}
	}
	res, err := svc.Pop(context.Background(), pop.Request{
		Group: "billing", Topic: "orders", ClientID: "example", QueueID: 0,
		Max: 32, Invisible: 30 * time.Second, FIFO: true, AttemptID: "attempt-1",
	})
	if err != nil {
		panic(err)
	}
	for _, d := range res.Messages {
		fmt.Printf("offset %d: %s (attempt %d)\n", d.Message.QueueOffset, d.Message.Body, d.Attempts)
		if err := svc.Ack(d.Handle); err != nil {
			panic(err)
		}
	}
	// Output:
	// offset 0: created (attempt 1)
	// offset 1: paid (attempt 1)
	// offset 2: shipped (attempt 1)
}
