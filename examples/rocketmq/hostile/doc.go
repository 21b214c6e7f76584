// Package hostile is the hostile-input suite of the RocketMQ-compatible
// broker (tests only): for every listener — the remoting broker, the name
// server, gRPC and the HTTP admin/metrics port — a table of bad inputs
// (truncated and oversized frames, garbage headers, absurd numbers, floods,
// spoofed client ids, descriptor exhaustion), each followed by a health
// check: a send and a receive on every protocol that must succeed.
package hostile
