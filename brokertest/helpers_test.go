package brokertest_test

import "github.com/brokercore/brokercore/consumer"

func consumerClient() consumer.Client {
	return consumer.Client{ChannelID: "ch1", ClientID: "c1", Language: "GO", Version: 1}
}
