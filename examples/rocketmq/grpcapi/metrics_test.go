package grpcapi

import (
	"context"
	"testing"

	v2 "github.com/apache/rocketmq-clients/golang/v5/protocol/v2"
	"github.com/stretchr/testify/require"
	"google.golang.org/grpc"
	"google.golang.org/grpc/codes"
	grpcstatus "google.golang.org/grpc/status"
)

// TestMetricsCountByMethodAndAnswerCode: the unary interceptor counts the
// answer's protocol code, or the gRPC code of a call that failed.
func TestMetricsCountByMethodAndAnswerCode(t *testing.T) {
	s := &Server{}
	m := &s.metrics
	info := &grpc.UnaryServerInfo{FullMethod: "/apache.rocketmq.v2.MessagingService/SendMessage"}
	okH := func(context.Context, any) (any, error) { return &v2.SendMessageResponse{Status: ok()}, nil }
	badH := func(context.Context, any) (any, error) {
		return &v2.SendMessageResponse{Status: status(v2.Code_ILLEGAL_TOPIC, "x")}, nil
	}
	errH := func(context.Context, any) (any, error) { return nil, grpcstatus.Error(codes.Unimplemented, "x") }
	for _, h := range []grpc.UnaryHandler{okH, okH, badH, errH} {
		_, _ = m.unary(context.Background(), nil, info, h)
	}
	got := map[string]uint64{}
	for _, r := range s.Stats().Requests {
		got[r.Method+" "+r.Code] = r.Count
	}
	require.Equal(t, map[string]uint64{"SendMessage OK": 2, "SendMessage ILLEGAL_TOPIC": 1, "SendMessage Unimplemented": 1}, got)
}

// BenchmarkMetricsUnary is the interceptor's cost per call.
func BenchmarkMetricsUnary(b *testing.B) {
	var m metrics
	info := &grpc.UnaryServerInfo{FullMethod: "/apache.rocketmq.v2.MessagingService/SendMessage"}
	resp := &v2.SendMessageResponse{Status: ok()}
	h := func(context.Context, any) (any, error) { return resp, nil }
	ctx := context.Background()
	b.ReportAllocs()
	for b.Loop() {
		_, _ = m.unary(ctx, nil, info, h)
	}
}
