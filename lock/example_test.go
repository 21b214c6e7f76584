package lock_test

import (
	"fmt"
	"time"

	"github.com/brokercore/brokercore/lock"
)

// Two consumer instances share a group's queues. A holds them through a
// Keeper; when A shuts down gracefully, B gets them at once, with new
// fencing tokens.
func Example() {
	now := time.Date(2021, 7, 1, 7, 11, 47, 0, time.UTC)
	table := lock.New(lock.Options{Now: func() time.Time { return now }})

	qs := []lock.Queue{
		{Topic: "orders", Broker: "broker-2", QueueID: 4},
		{Topic: "orders", Broker: "broker-2", QueueID: 5},
	}
	a, err := lock.NewKeeper(table, "cg", "10.238.18.6@29", 20*time.Second)
	if err != nil {
		panic(err)
	}
	fmt.Println("A holds:", a.Hold(qs...))
	fmt.Println("B gets:", table.TryLockBatch("cg", qs, "10.238.18.122@29"))

	_, err = lock.NewKeeper(table, "cg", "x", 30*time.Second)
	fmt.Println("30s renewal on 60s leases:", err != nil)

	_ = a.Close() // graceful shutdown unlocks everything
	fmt.Println("B gets:", table.TryLockBatch("cg", qs, "10.238.18.122@29"))
	l, _ := table.Holder("cg", qs[1])
	fmt.Println("holder:", l.ClientID, "token:", l.Token)
	// Output:
	// A holds: [orders@broker-2#4 orders@broker-2#5]
	// B gets: []
	// 30s renewal on 60s leases: true
	// B gets: [orders@broker-2#4 orders@broker-2#5]
	// holder: 10.238.18.122@29 token: 4
}

// A killed holder's lease runs out after MaxLiveTime; then the next client
// takes over with a new token.
func ExampleTable_TryLock() {
	now := time.Date(2021, 7, 1, 0, 0, 0, 0, time.UTC)
	table := lock.New(lock.Options{MaxLiveTime: 15 * time.Second, Now: func() time.Time { return now }})
	q := lock.Queue{Topic: "orders", Broker: "broker-2", QueueID: 5}

	a, _ := table.TryLock("cg", q, "A")
	_, ok := table.TryLock("cg", q, "B")
	fmt.Println("B before expiry:", ok)
	now = now.Add(15 * time.Second)
	b, ok := table.TryLock("cg", q, "B")
	fmt.Println("B after expiry:", ok, "token", a.Token, "->", b.Token)
	// Output:
	// B before expiry: false
	// B after expiry: true token 1 -> 2
}
