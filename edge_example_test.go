package brokercore_test

import (
	"context"
	"fmt"
	"log"
	"os"
	"time"

	"github.com/brokercore/brokercore"
	"github.com/brokercore/brokercore/consumer"
	"github.com/brokercore/brokercore/store"
)

// A protocol server's long poll: look at the queue, and if nothing is
// there wait for an arrival (or an offset reset, or the poll's end).
func ExampleBroker_WaitArrival() {
	dir, _ := os.MkdirTemp("", "brokercore-example")
	defer os.RemoveAll(dir)
	b, err := brokercore.Open(dir, brokercore.Options{})
	if err != nil {
		log.Fatal(err)
	}
	defer b.Close()

	go func() { _ = b.Store().Append(&store.Message{Topic: "orders", Body: []byte("paid")}) }()
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	next := int64(0) // the offset the client asks for
	if b.WaitArrival(ctx, "orders", 0, next) {
		msgs, _ := b.Store().Read("orders", 0, next, 32)
		fmt.Println(string(msgs[0].Body))
	}
	// Output: paid
}

// A server that keeps its own long polls in a select watches the queue's
// channel before it looks, so an arrival in between is not missed.
func ExampleArrivals_Watch() {
	dir, _ := os.MkdirTemp("", "brokercore-example")
	defer os.RemoveAll(dir)
	st, err := store.Open(dir, store.Options{})
	if err != nil {
		log.Fatal(err)
	}
	defer st.Close()
	arr := brokercore.NewArrivals(st)
	defer arr.Close()
	defer st.Subscribe(arr.Notify)()

	woken := arr.Watch("orders", 0) // first watch, then look
	if st.MaxOffset("orders", 0) == 0 {
		go func() { _ = st.Append(&store.Message{Topic: "orders", Body: []byte("paid")}) }()
		select {
		case <-woken:
		case <-time.After(time.Minute):
		case <-arr.Done():
		}
	}
	fmt.Println(st.MaxOffset("orders", 0))
	// Output: 1
}

// Subscribe to consumer events after Open: no Options callback bound late.
func ExampleBroker_OnConsumerEvent() {
	dir, _ := os.MkdirTemp("", "brokercore-example")
	defer os.RemoveAll(dir)
	b, err := brokercore.Open(dir, brokercore.Options{})
	if err != nil {
		log.Fatal(err)
	}
	defer b.Close()
	remove := b.OnConsumerEvent(func(ev consumer.Event) {
		if ev.Kind == consumer.EventChange {
			fmt.Println(ev.Group, "has", len(ev.Clients), "client(s)")
		}
	})
	defer remove()
	_, _ = b.Consumers().RegisterWithoutSub("billing", consumer.Client{ChannelID: "conn1", ClientID: "c1"})
	// Output: billing has 1 client(s)
}

// A consumer gives a message back (CONSUMER_SEND_MSG_BACK): SendBack
// returns what to append — a retry through the scheduler, or the dead
// letter once the reconsume times ran out.
func ExampleBroker_SendBack() {
	dir, _ := os.MkdirTemp("", "brokercore-example")
	defer os.RemoveAll(dir)
	b, err := brokercore.Open(dir, brokercore.Options{})
	if err != nil {
		log.Fatal(err)
	}
	defer b.Close()
	m := &store.Message{Topic: "orders", Body: []byte("paid")}
	retry, _ := b.SendBack(m, "billing", 0, brokercore.DefaultMaxReconsumeTimes)
	fmt.Println(retry.Topic, retry.Properties["REAL_TOPIC"], retry.Properties["DELAY"])
	m.ReconsumeTimes = 16
	dead, _ := b.SendBack(m, "billing", 0, brokercore.DefaultMaxReconsumeTimes)
	fmt.Println(dead.Topic)
	_ = b.Store().Append(retry, dead)
	// Output:
	// SCHEDULE_TOPIC_XXXX %RETRY%billing 3
	// %DLQ%billing
}
