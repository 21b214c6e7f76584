package consumer_test

import (
	"fmt"
	"time"

	"github.com/brokercore/brokercore/consumer"
)

// Example shows a consumer registering, heartbeating, and its connection
// closing, with the events a host would use to trigger a rebalance.
func Example() {
	now := time.Date(2026, 1, 1, 12, 0, 0, 0, time.UTC)
	reg := consumer.New(consumer.Options{
		Now: func() time.Time { return now },
		OnEvent: func(e consumer.Event) {
			switch e.Kind {
			case consumer.EventChange:
				fmt.Printf("event %s %s: %d client(s)\n", e.Kind, e.Group, len(e.Clients))
			case consumer.EventClientRegister, consumer.EventClientUnregister:
				fmt.Printf("event %s %s: %s on %s\n", e.Kind, e.Group, e.Client.ClientID, e.Client.ChannelID)
			default:
				fmt.Printf("event %s %s\n", e.Kind, e.Group)
			}
		},
	})

	c := consumer.Client{ChannelID: "10.0.0.7:51234", ClientID: "worker-1", Language: "GO", Version: 1}
	changed, _ := reg.Register("billing", c, []consumer.Subscription{{Topic: "orders", Expression: "*", Version: 1}})
	fmt.Println("changed:", changed)

	now = now.Add(30 * time.Second)
	changed, _ = reg.RegisterWithoutSub("billing", c) // a plain heartbeat
	fmt.Println("changed:", changed)
	found, _ := reg.FindClient("billing", "worker-1")
	fmt.Println("last seen:", found.LastSeen.Format(time.TimeOnly))
	fmt.Println("consuming orders:", reg.GroupsConsuming("orders"))

	fmt.Println("closed:", reg.ChannelClosed("10.0.0.7:51234"))
	fmt.Println("groups left:", len(reg.Groups()))
	// Output:
	// event Register billing
	// event ClientRegister billing: worker-1 on 10.0.0.7:51234
	// event Change billing: 1 client(s)
	// changed: true
	// changed: false
	// last seen: 12:00:30
	// consuming orders: [billing]
	// event ClientUnregister billing: worker-1 on 10.0.0.7:51234
	// event Change billing: 0 client(s)
	// event Unregister billing
	// closed: [billing]
	// groups left: 0
}
