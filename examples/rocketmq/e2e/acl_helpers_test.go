package e2e

import "github.com/brokercore/brokercore/examples/rocketmq/rmqtest"

// stored is the number of messages in topic's queues.
func stored(b *rmqtest.Broker, topic string) int64 {
	st := b.Server.Core().Store()
	var n int64
	for _, q := range st.Queues(topic) {
		n += st.MaxOffset(topic, q) - st.MinOffset(topic, q)
	}
	return n
}
