package e2e

import (
	"os"

	"github.com/brokercore/brokercore/acl"
	"github.com/brokercore/brokercore/examples/rocketmq/rmqtest"
)

// childACL is the access control of a child broker: the file E2E_ACL
// names, none when unset.
func childACL() (*acl.Authorizer, error) {
	path := os.Getenv("E2E_ACL")
	if path == "" {
		return nil, nil
	}
	return acl.Open(path, acl.Options{})
}

// stored is the number of messages in topic's queues.
func stored(b *rmqtest.Broker, topic string) int64 {
	st := b.Server.Core().Store()
	var n int64
	for _, q := range st.Queues(topic) {
		n += st.MaxOffset(topic, q) - st.MinOffset(topic, q)
	}
	return n
}
