package grpcapi

import (
	"context"
	"log/slog"
	"net"
	"testing"
	"time"

	v2 "github.com/apache/rocketmq-clients/golang/v5/protocol/v2"
	"google.golang.org/grpc"
	"google.golang.org/grpc/metadata"
	"google.golang.org/grpc/peer"

	"github.com/brokercore/brokercore/acl"
	"github.com/brokercore/brokercore/examples/rocketmq/internal/cpuclock"
)

// BenchmarkACLUnary is the broker's whole access control of one v5
// SendMessage call (metadata, signature, resources, rules) as the unary
// interceptor runs it, with the signature already seen this second (the
// common case: a client's calls within one second share it).
func BenchmarkACLUnary(b *testing.B) {
	c, err := acl.Parse([]byte(benchACLDocInternal))
	if err != nil {
		b.Fatal(err)
	}
	now := time.Date(2026, 3, 1, 12, 0, 0, 0, time.UTC)
	az, err := acl.New(c, acl.Options{Now: func() time.Time { return now }})
	if err != nil {
		b.Fatal(err)
	}
	s := &Server{opts: Options{ACL: az}, log: slog.New(slog.DiscardHandler)}
	dt := now.Format(acl.V5DateTimeLayout)
	md := metadata.Pairs(acl.V5AuthorizationHeader, acl.V5Authorization("bench", "bench-secret", dt),
		acl.V5DateTimeHeader, dt, "x-mq-client-id", "bench-client", "x-mq-language", "GOLANG")
	ctx := peer.NewContext(metadata.NewIncomingContext(context.Background(), md),
		&peer.Peer{Addr: &net.TCPAddr{IP: net.IPv4(127, 0, 0, 1), Port: 40000}})
	req := &v2.SendMessageRequest{Messages: []*v2.Message{{Topic: &v2.Resource{Name: "bench-send"}, Body: make([]byte, 1024)}}}
	resp := &v2.SendMessageResponse{}
	info := &grpc.UnaryServerInfo{FullMethod: v2.MessagingService_SendMessage_FullMethodName}
	h := func(ctx context.Context, _ any) (any, error) {
		if userOf(ctx) != "bench" {
			b.Fatal("no user in the handler's context")
		}
		return resp, nil
	}
	b.ReportAllocs()
	cpu0 := cpuclock.Self()
	for b.Loop() {
		if got, err := s.aclUnary(ctx, req, info, h); err != nil || got != resp {
			b.Fatal(got, err)
		}
	}
	b.ReportMetric(float64((cpuclock.Self()-cpu0).Nanoseconds())/float64(b.N), "cpu-ns/op")
}

const benchACLDocInternal = `{
  "users": [{"accessKey": "bench", "secretKey": "bench-secret"}],
  "rules": [
    {"user": "bench", "resources": ["Topic:bench-*", "Group:bench-*"], "actions": ["Pub", "Sub"], "decision": "Allow"},
    {"user": "bench", "resources": ["Topic:bench-audit"], "actions": ["All"], "decision": "Deny"}
  ]
}`
