package grpcapi_test

import (
	"testing"

	"github.com/apache/rocketmq-clients/golang/v5/credentials"

	"github.com/brokercore/brokercore/acl"
	"github.com/brokercore/brokercore/examples/rocketmq/rmqtest"
	"github.com/brokercore/brokercore/examples/rocketmq/server"
)

// clientCreds are the credentials of the clients the helpers make: none,
// except while a benchmark with ACL on runs.
var clientCreds credentials.SessionCredentials

// benchACLDoc is a realistic configuration: the benchmark's user has a few
// rules, one of them a Deny that does not match.
const benchACLDoc = `{
  "users": [{"accessKey": "bench", "secretKey": "bench-secret"}, {"accessKey": "other", "secretKey": "x"}],
  "rules": [
    {"user": "bench", "resources": ["Topic:bench-*", "Group:bench-*"], "actions": ["Pub", "Sub"], "decision": "Allow"},
    {"user": "bench", "resources": ["Topic:bench-audit"], "actions": ["All"], "decision": "Deny"},
    {"user": "other", "resources": ["*"], "actions": ["Sub"], "decision": "Allow"}
  ]
}`

// aclBenchBroker is a program with ACL off or on; with it on, or signs,
// the helpers' clients sign as the benchmark's user until the benchmark
// ends (signs with ACL off: the client's signing without the broker's
// check).
func aclBenchBroker(b *testing.B, on, signs bool) *rmqtest.Broker {
	var cfg server.Config
	if on {
		c, err := acl.Parse([]byte(benchACLDoc))
		if err != nil {
			b.Fatal(err)
		}
		if cfg.ACL, err = acl.New(c, acl.Options{}); err != nil {
			b.Fatal(err)
		}
	}
	if on || signs {
		clientCreds = credentials.SessionCredentials{AccessKey: "bench", AccessSecret: "bench-secret"}
		b.Cleanup(func() { clientCreds = credentials.SessionCredentials{} })
	}
	return rmqtest.StartConfig(b, cfg)
}

// BenchmarkGRPCACL is BenchmarkGRPCSend16/flush=sync and
// BenchmarkGRPCReceiveAck32/inproc with ACL off and on, for the cost of
// authentication and authorization per message (cpu-µs/msg: the whole
// process, client included). acl=off,client=signs has the client sign
// against a broker that checks nothing: against acl=on only the broker's
// check differs. Alternate runs and compare medians:
//
//	go test -run '^$' -bench 'GRPCACL' -benchtime 20000x -count 6 ./grpcapi/
func BenchmarkGRPCACL(b *testing.B) {
	for _, v := range []struct {
		name      string
		on, signs bool
	}{{"acl=off", false, false}, {"acl=off,client=signs", false, true}, {"acl=on", true, true}} {
		b.Run("send/"+v.name, func(b *testing.B) {
			br := aclBenchBroker(b, v.on, v.signs)
			benchSendTo(b, target{endpoint: br.GRPC, stats: br.Server.Core().Store().Stats, flush: "sync"})
		})
		b.Run("receive-ack/"+v.name, func(b *testing.B) {
			br := aclBenchBroker(b, v.on, v.signs)
			prefill(b, br, "bench-recv", b.N)
			benchReceiveAck(b, target{endpoint: br.GRPC}, "bench-recv")
		})
	}
}
