package main

import (
	"context"
	"crypto/tls"
	"path/filepath"
	"testing"
	"time"

	v2 "github.com/apache/rocketmq-clients/golang/v5/protocol/v2"
	"github.com/stretchr/testify/require"
	"google.golang.org/grpc"
	"google.golang.org/grpc/credentials"

	"github.com/brokercore/brokercore/examples/rocketmq/grpcapi"
)

// TestGRPCFlagServesRocketMQ5Clients: -grpc-addr starts the gRPC listener
// (TLS, ALPN h2) on the program's core, its certificate under -data/grpc.
func TestGRPCFlagServesRocketMQ5Clients(t *testing.T) {
	dir, ga := t.TempDir(), freeAddr(t)
	ctx, cancel := context.WithCancel(context.Background())
	var out syncBuf
	done := make(chan int)
	go func() {
		done <- run(ctx, []string{"-data", dir, "-namesrv-addr", freeAddr(t), "-broker-addr", freeAddr(t),
			"-metrics-addr", "-", "-grpc-addr", ga}, &out)
	}()
	defer func() {
		cancel()
		require.Equal(t, 0, <-done)
	}()
	cc, err := grpc.NewClient(ga, grpc.WithTransportCredentials(credentials.NewTLS(&tls.Config{InsecureSkipVerify: true, NextProtos: []string{"h2"}})))
	require.NoError(t, err)
	defer cc.Close()
	require.Eventually(t, func() bool {
		qctx, qcancel := context.WithTimeout(context.Background(), time.Second)
		defer qcancel()
		r, err := v2.NewMessagingServiceClient(cc).QueryRoute(qctx, &v2.QueryRouteRequest{Topic: &v2.Resource{Name: "flag-topic"}})
		return err == nil && r.GetStatus().GetCode() == v2.Code_OK && len(r.GetMessageQueues()) > 0
	}, 10*time.Second, 50*time.Millisecond)
	require.FileExists(t, filepath.Join(dir, "grpc", grpcapi.CertFile))
}
