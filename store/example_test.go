package store_test

import (
	"bytes"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"time"

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

// ExampleRepair shows the way out of a log that Open refuses: corruption
// that is not a torn tail (here a flipped byte in a record with intact
// records after it) is an ErrCorrupt naming where; Repair cuts there,
// quarantines the cut bytes and reports what was lost.
func ExampleRepair() {
	dir, err := os.MkdirTemp("", "store-repair-")
	if err != nil {
		panic(err)
	}
	defer os.RemoveAll(dir)
	s, err := store.Open(dir, store.Options{})
	if err != nil {
		panic(err)
	}
	for _, b := range []string{"one", "two", "three", "four"} {
		if err := s.Append(&store.Message{Topic: "orders", Body: []byte(b)}); err != nil {
			panic(err)
		}
	}
	if err := s.Close(); err != nil {
		panic(err)
	}
	// Damage the body of "two" on disk.
	seg := filepath.Join(dir, "log", "00000000000000000001")
	data, _ := os.ReadFile(seg)
	data[bytes.Index(data, []byte("two"))] ^= 0x20
	_ = os.WriteFile(seg, data, 0o640)

	_, err = store.Open(dir, store.Options{})
	var ce *store.CorruptError
	fmt.Println(errors.Is(err, store.ErrCorrupt), errors.As(err, &ce), ce.From, ce.To)

	rep, err := store.Repair(dir, store.RepairOptions{})
	if err != nil {
		panic(err)
	}
	fmt.Println("lost:", rep.Lost, "record, log offset", rep.Cuts[0].From)
	s, err = store.Open(dir, store.Options{})
	if err != nil {
		panic(err)
	}
	defer s.Close()
	msgs, _ := s.Read("orders", 0, 0, 10)
	for _, m := range msgs {
		fmt.Println("readable:", m.QueueOffset, string(m.Body))
	}
	m := &store.Message{Topic: "orders", Body: []byte("five")}
	_ = s.Append(m)
	fmt.Println("next:", m.QueueOffset) // an offset once handed out is never reused
	// Output:
	// true true 1 4
	// lost: 1 record, log offset 1
	// readable: 0 one
	// readable: 2 three
	// readable: 3 four
	// next: 4
}

// Find messages by key (RocketMQ's QUERY_MESSAGE): the newest max of a
// topic with the key, in a time range (zero times: no bound), in log order.
func ExampleStore_LookupKey() {
	dir, err := os.MkdirTemp("", "store-keys-")
	if err != nil {
		panic(err)
	}
	defer os.RemoveAll(dir)
	// A RocketMQ host also indexes the message id it keeps as UNIQ_KEY.
	s, err := store.Open(dir, store.Options{KeyProperties: []string{"UNIQ_KEY"}})
	if err != nil {
		panic(err)
	}
	defer s.Close()
	for i, body := range []string{"created", "paid", "shipped"} {
		err := s.Append(&store.Message{Topic: "orders", QueueID: i % 2, Keys: []string{"order-42"}, Body: []byte(body),
			Properties: map[string]string{"UNIQ_KEY": fmt.Sprint("ID-", i)}})
		if err != nil {
			panic(err)
		}
	}
	msgs, err := s.LookupKey("orders", "order-42", time.Time{}, time.Time{}, 2)
	if err != nil {
		panic(err)
	}
	for _, m := range msgs {
		fmt.Printf("log offset %d: %s\n", m.LogOffset, m.Body)
	}
	byID, err := s.LookupKey("orders", "ID-0", time.Time{}, time.Time{}, 1)
	if err != nil {
		panic(err)
	}
	fmt.Println("by id:", string(byID[0].Body))

	// Deleting the topic releases its messages: nothing is found any more.
	if err := s.DeleteTopic("orders"); err != nil {
		panic(err)
	}
	msgs, _ = s.LookupKey("orders", "order-42", time.Time{}, time.Time{}, 2)
	fmt.Println("after DeleteTopic:", len(msgs), "MinOffset = MaxOffset:", s.MinOffset("orders", 0) == s.MaxOffset("orders", 0))
	// Output:
	// log offset 1: paid
	// log offset 2: shipped
	// by id: created
	// after DeleteTopic: 0 MinOffset = MaxOffset: true
}
