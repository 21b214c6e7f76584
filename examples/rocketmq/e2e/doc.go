// Package e2e holds the end-to-end tests of the RocketMQ-compatible broker
// with the unchanged official client, github.com/apache/rocketmq-client-go/v2,
// on loopback. Long runs (kill -9 loops, big volumes) need BROKERCORE_LONG=1.
//
// The tests are built without the race detector (//go:build !race): the
// official client has data races of its own (its orderly consumer's process
// queue, its pull consumer's rebalance, its Shutdown against its own
// in-flight requests), which -race reports whatever the broker does. The
// broker's own code runs under -race in the remoting and server packages'
// tests (raw concurrent connections); CI runs this package without -race.
package e2e
