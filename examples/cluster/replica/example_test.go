package replica

import (
	"errors"
	"fmt"
	"os"
	"time"

	"github.com/brokercore/brokercore/store"
	"github.com/hashicorp/raft"
)

// A one-voter cluster in a directory: produce is acknowledged once raft
// committed it, every node reads the same offsets.
func ExampleOpen() {
	dir, _ := os.MkdirTemp("", "cluster-example")
	defer os.RemoveAll(dir)
	_, tr := raft.NewInmemTransport("n1")
	n, err := Open(Config{
		ID: "n1", Dir: dir, Transport: tr,
		Bootstrap:        []raft.Server{{ID: "n1", Address: "n1"}},
		HeartbeatTimeout: 50 * time.Millisecond, ElectionTimeout: 50 * time.Millisecond,
	})
	if err != nil {
		fmt.Println(err)
		return
	}
	defer n.Close()
	for !n.IsLeader() {
		time.Sleep(5 * time.Millisecond)
	}
	out, err := n.Produce(&store.Message{Topic: "orders", Body: []byte("a")}, &store.Message{Topic: "orders", Body: []byte("b")})
	if err != nil {
		fmt.Println(err)
		return
	}
	fmt.Println("acknowledged at offsets", out[0].QueueOffset, out[1].QueueOffset)
	msgs, _ := n.Read("orders", 0, 0, 10)
	fmt.Println(len(msgs), "messages,", n.Status().Role)
	// Output:
	// acknowledged at offsets 0 1
	// 2 messages, Leader
}

// A follower refuses writes with a *NotLeaderError naming the leader's
// client address, which a host turns into its protocol's redirect.
func ExampleNotLeaderError() {
	err := error(&NotLeaderError{Node: "n2", LeaderID: "n1", LeaderRaftAddr: "10.0.0.1:7001", LeaderAddr: "10.0.0.1:8001"})
	var nl *NotLeaderError
	if errors.As(err, &nl) && errors.Is(err, ErrNotLeader) {
		fmt.Println("redirect to", nl.LeaderAddr)
	}
	// Output:
	// redirect to 10.0.0.1:8001
}
