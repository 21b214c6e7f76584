// Command rocketmq is a RocketMQ-compatible name server and broker in one
// process, built from brokercore. The official Go client
// (github.com/apache/rocketmq-client-go/v2) works against it unchanged.
package main
