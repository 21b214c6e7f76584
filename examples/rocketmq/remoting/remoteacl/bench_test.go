package remoteacl

import (
	"context"
	"net"
	"strconv"
	"testing"

	"github.com/brokercore/brokercore/acl"
	"github.com/brokercore/brokercore/examples/rocketmq/internal/cpuclock"
	"github.com/brokercore/brokercore/examples/rocketmq/remoting/transport"
	"github.com/brokercore/brokercore/examples/rocketmq/remoting/wire"
)

const benchDoc = `{
  "users": [{"accessKey": "bench", "secretKey": "bench-secret"}, {"accessKey": "other", "secretKey": "x"}],
  "rules": [
    {"user": "bench", "resources": ["Topic:bench-*", "Group:g-bench*"], "actions": ["Pub", "Sub"], "decision": "Allow"},
    {"user": "bench", "resources": ["Topic:bench-audit"], "actions": ["All"], "decision": "Deny"},
    {"user": "other", "resources": ["*"], "actions": ["Sub"], "decision": "Allow"}
  ]
}`

// benchRequest is a request signed as the v2 client signs it.
func benchRequest(code int16, ext map[string]string, body []byte) *wire.Command {
	ext[acl.FieldAccessKey] = "bench"
	ext[acl.FieldSignature] = acl.SignRemoting("bench-secret", ext, body)
	return &wire.Command{Code: code, ExtFields: ext, Body: body}
}

// BenchmarkVerdict is the broker's whole ACL cost of one request
// (signature, resources, rules), for the v2 client's send (1 KiB) and pull.
// cpu-ns/op is the process's CPU time, which a loaded machine does not
// inflate as it does ns/op.
func BenchmarkVerdict(b *testing.B) {
	c, err := acl.Parse([]byte(benchDoc))
	if err != nil {
		b.Fatal(err)
	}
	az, err := acl.New(c, acl.Options{})
	if err != nil {
		b.Fatal(err)
	}
	h := Wrap(nil, az, Options{})
	addr := &net.TCPAddr{IP: net.IPv4(127, 0, 0, 1), Port: 40000}
	reqs := map[string]*wire.Command{
		"send": benchRequest(wire.CodeSendMessageV2, map[string]string{"a": "pg", "b": "bench-send", "c": "TBW102", "d": "4", "e": "1",
			"f": "0", "g": "1700000000000", "h": "0", "i": "UNIQ_KEY\x017F0000010000000000000000000001\x02WAIT\x01true\x02", "j": "0",
			"k": "false", "l": "16", "m": "false", "n": "broker-a"}, make([]byte, 1024)),
		"pull": benchRequest(wire.CodePullMessage, map[string]string{"consumerGroup": "g-bench", "topic": "bench-consume", "queueId": "0",
			"queueOffset": "100", "maxMsgNums": "32", "sysFlag": "3", "commitOffset": "90", "suspendTimeoutMillis": "20000",
			"subscription": "*", "subVersion": "1700000000000", "expressionType": "TAG"}, nil),
	}
	for name, req := range reqs {
		b.Run(name, func(b *testing.B) {
			b.ReportAllocs()
			cpu0 := cpuclock.Self()
			for b.Loop() {
				if resp := h.verdict(addr, req); resp != nil {
					b.Fatal(resp.Remark)
				}
			}
			b.ReportMetric(float64((cpuclock.Self()-cpu0).Nanoseconds())/float64(b.N), "cpu-ns/op")
		})
	}
}

// BenchmarkServeBatch is a burst of 16 signed 1 KiB sends through
// ServeBatch (the read loop's path under flush=async) to a handler that
// answers at once: the check of each, and what the batch itself costs.
func BenchmarkServeBatch(b *testing.B) {
	c, err := acl.Parse([]byte(benchDoc))
	if err != nil {
		b.Fatal(err)
	}
	az, err := acl.New(c, acl.Options{})
	if err != nil {
		b.Fatal(err)
	}
	addr := &net.TCPAddr{IP: net.IPv4(127, 0, 0, 1), Port: 40000}
	h := Wrap(nullBatch{}, az, Options{ClientAddr: func(context.Context) net.Addr { return addr }})
	reqs := make([]*wire.Command, 16)
	for i := range reqs {
		reqs[i] = benchRequest(wire.CodeSendMessage, map[string]string{"producerGroup": "pg", "topic": "bench-send",
			"queueId": strconv.Itoa(i % 4), "sysFlag": "0", "bornTimestamp": "1700000000000", "flag": "0",
			"properties": "WAIT\x01true\x02", "reconsumeTimes": "0", "unitMode": "false", "maxReconsumeTimes": "16",
			"batch": "false", "defaultTopic": "TBW102", "defaultTopicQueueNums": "4", "bname": "broker-a"}, make([]byte, 1024))
	}
	ctx := context.Background()
	b.ReportAllocs()
	cpu0 := cpuclock.Self()
	for b.Loop() {
		if resps := h.ServeBatch(ctx, nil, reqs); len(resps) != len(reqs) || resps[0].Code != wire.Success {
			b.Fatal(resps)
		}
	}
	b.ReportMetric(float64((cpuclock.Self()-cpu0).Nanoseconds())/float64(b.N)/float64(len(reqs)), "cpu-ns/req")
}

// nullBatch answers every request of a batch with one shared answer.
type nullBatch struct{}

var okAnswer = &wire.Command{Code: wire.Success}

func (nullBatch) Serve(context.Context, *transport.Conn, *wire.Command) *wire.Command {
	return okAnswer
}
func (nullBatch) Inline(*wire.Command) bool { return true }
func (nullBatch) Batch(*wire.Command) bool  { return true }
func (nullBatch) ServeBatch(_ context.Context, _ *transport.Conn, reqs []*wire.Command) []*wire.Command {
	out := make([]*wire.Command, len(reqs))
	for i := range out {
		out[i] = okAnswer
	}
	return out
}
