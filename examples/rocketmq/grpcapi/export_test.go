package grpcapi

import (
	"errors"
	"net"
	"sync"
	"time"

	v2 "github.com/apache/rocketmq-clients/golang/v5/protocol/v2"
	"google.golang.org/grpc"
	"google.golang.org/protobuf/types/known/durationpb"

	"github.com/brokercore/brokercore/pop"
)

// ServeOther serves impl — a test's MessagingService, usually a wrapper of
// s that replaces some of its calls (the benchmarks' null server) — on a
// free loopback port with s's gRPC options, TLS certificate and plaintext
// sniffing, exactly as Listen serves s. It returns the endpoint and a stop
// function that ends the listener and every stream and waits for them.
func (s *Server) ServeOther(impl v2.MessagingServiceServer) (string, func(), error) {
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		return "", nil, err
	}
	gs := s.grpcServer(impl)
	sl := newSniffListener(ln, s.tls, s.opts.HandshakeTimeout, s.log)
	var wg sync.WaitGroup
	wg.Add(1)
	go func() {
		defer wg.Done()
		if err := gs.Serve(sl); err != nil && !errors.Is(err, grpc.ErrServerStopped) {
			s.log.Warn("grpcapi: test server ended", "err", err)
		}
	}()
	var once sync.Once
	stop := func() {
		once.Do(func() {
			gs.Stop()
			_ = sl.Close()
			wg.Wait()
		})
	}
	return sl.Addr().String(), stop, nil
}

// Frames renders popped deliveries as the message frames of a
// ReceiveMessage answer, exactly as ReceiveMessage renders them (receipt
// handles, digests, timestamps), for a test server that answers prebuilt
// batches.
func Frames(ds []pop.Delivery, invisible time.Duration) []*v2.ReceiveMessageResponse {
	frames := newFrames(len(ds))
	out := make([]*v2.ReceiveMessageResponse, len(ds))
	inv := durationpb.New(invisible)
	var scratch [256]byte
	b := scratch[:0]
	for i, d := range ds {
		out[i], b = frames[i].fill(d.Message, receipt{queue: d.Message.QueueID, offset: d.Message.QueueOffset, pop: d.Handle}, d.Attempts, inv, b)
	}
	return out
}

// UserProperties is what a receiver sees as m's user properties.
var UserProperties = userProperties
