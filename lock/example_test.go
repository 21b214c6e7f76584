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
	a, err := lock.NewKeeper(table, "cg", "10.238.18.6@29", lock.KeeperOptions{Every: 20 * time.Second})
	if err != nil {
		panic(err)
	}
	fmt.Println("A holds:", a.Hold(qs...))
	fmt.Println("B gets:", table.TryLockBatch("cg", qs, "10.238.18.122@29"))

	_, err = lock.NewKeeper(table, "cg", "x", lock.KeeperOptions{Every: 30 * time.Second})
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

// A Keeper's options, OnLost included, are in place before it starts
// renewing; Renew steps a renewal by hand (its goroutine does it every
// Every).
func ExampleNewKeeper() {
	now := time.Date(2021, 7, 1, 0, 0, 0, 0, time.UTC)
	table := lock.New(lock.Options{Now: func() time.Time { return now }})
	q := lock.Queue{Topic: "orders", Broker: "broker-2", QueueID: 5}

	a, err := lock.NewKeeper(table, "cg", "A", lock.KeeperOptions{ // Every: 60s/RenewRatio = 20s
		OnLost: func(lost []lock.Queue) { fmt.Println("A must stop:", lost) },
	})
	if err != nil {
		panic(err)
	}
	defer a.Close()
	a.Hold(q)
	now = now.Add(time.Minute) // A stalled past its lease; B takes the queue
	table.TryLock("cg", q, "B")
	a.Renew()
	fmt.Println("A holds:", a.Held())
	// Output:
	// A must stop: [orders@broker-2#5]
	// A holds: []
}
