// Package e2e holds the end-to-end tests of the RocketMQ-compatible broker
// with the unchanged official client, github.com/apache/rocketmq-client-go/v2,
// on loopback. Long runs (kill -9 loops, big volumes) need BROKERCORE_LONG=1.
//
// Most tests are built without the race detector (//go:build !race): the
// official client has data races of its own (its orderly consumer's process
// queue, its pull consumer's rebalance), which -race reports whatever the
// broker does. The 10k-message push test, whose client paths are race-free,
// runs under -race too, and so do the remoting and server packages' tests
// of the broker's own code; CI runs this package both ways.
package e2e
