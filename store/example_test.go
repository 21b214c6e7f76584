package store_test

import (
	"fmt"
	"os"

	"github.com/brokercore/brokercore/store"
)

func Example() {
	dir, err := os.MkdirTemp("", "store-example-")
	if err != nil {
		panic(err)
	}
	defer os.RemoveAll(dir)

	s, err := store.Open(dir, store.Options{}) // SyncGroup: Append returns once durable
	if err != nil {
		panic(err)
	}
	// One atomic batch over two queues of a topic.
	err = s.Append(
		&store.Message{Topic: "orders", QueueID: 0, Body: []byte("created")},
		&store.Message{Topic: "orders", QueueID: 1, Body: []byte("created too")},
		&store.Message{Topic: "orders", QueueID: 0, Body: []byte("paid")},
	)
	if err != nil {
		panic(err)
	}
	msgs, err := s.Read("orders", 0, 0, 32)
	if err != nil {
		panic(err)
	}
	for _, m := range msgs {
		fmt.Printf("queue offset %d, log offset %d: %s\n", m.QueueOffset, m.LogOffset, m.Body)
	}
	fmt.Println("queues:", s.Queues("orders"), "next offset of queue 0:", s.MaxOffset("orders", 0))
	if err := s.Close(); err != nil {
		panic(err)
	}
	// Output:
	// queue offset 0, log offset 0: created
	// queue offset 1, log offset 2: paid
	// queues: [0 1] next offset of queue 0: 2
}
