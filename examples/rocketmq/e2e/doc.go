// Package e2e holds the end-to-end tests of the RocketMQ-compatible broker
// with the unchanged official client, github.com/apache/rocketmq-client-go/v2,
// on loopback. Long runs (kill -9 loops, big volumes) need BROKERCORE_LONG=1.
package e2e
