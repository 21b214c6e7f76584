package grpcapi

import (
	"context"
	"crypto/rand"
	"crypto/tls"
	"encoding/hex"
	"errors"
	"fmt"
	"log/slog"
	"net"
	"sync"
	"sync/atomic"
	"time"

	v2 "github.com/apache/rocketmq-clients/golang/v5/protocol/v2"
	"google.golang.org/grpc"
	"google.golang.org/grpc/keepalive"

	"github.com/brokercore/brokercore/consumer"
	"github.com/brokercore/brokercore/examples/rocketmq/internal/retrylisten"
	"github.com/brokercore/brokercore/pop"
	"github.com/brokercore/brokercore/schedule"
	"github.com/brokercore/brokercore/store"
)

// Broker is what the server needs of the broker core: the accessors of
// *brokercore.Broker (brokercore.Open) satisfies it. Scheduler may return
// nil: DELAY messages are then answered UNSUPPORTED.
type Broker interface {
	Store() *store.Store
	Pop() *pop.Service
	Scheduler() *schedule.Scheduler
	Consumers() *consumer.Registry
}

// Bounds of one gRPC connection.
const (
	idleTimeout = 120 * time.Second
	maxStreams  = 1024
)

// ErrClosed is returned by Serve and Listen after Close.
var ErrClosed = errors.New("grpcapi: server closed")

// Server serves apache.rocketmq.v2.MessagingService over a Broker.
type Server struct {
	v2.UnimplementedMessagingServiceServer

	b    Broker
	opts Options
	log  *slog.Logger
	tls  *tls.Config
	gs   *grpc.Server

	clients   *clientTable
	producers producerStreams // Telemetry streams of producers, for transaction checks
	metrics   metrics
	rr        atomic.Uint64 // round robin of normal sends

	attemptPrefix string        // server-made FIFO attempt ids: prefix + counter
	attempts      atomic.Uint64 // of receives that carry none

	mu     sync.Mutex
	lns    []*sniffListener
	closed bool
	done   chan struct{}
	wg     sync.WaitGroup
}

// New returns a Server over b. It loads (or creates, under
// Options.CertDir) the TLS certificate.
func New(b Broker, opts Options) (*Server, error) {
	if b == nil || b.Store() == nil || (b.Pop() == nil && opts.Pop == nil) {
		return nil, errors.New("grpcapi: a Broker with a Store and a Pop service (or Options.Pop) is required")
	}
	opts = opts.withDefaults()
	cert, err := loadOrCreateCert(opts.CertDir)
	if err != nil {
		return nil, err
	}
	s := &Server{
		b:    b,
		opts: opts,
		log:  opts.Logger,
		tls: &tls.Config{
			Certificates: []tls.Certificate{cert},
			NextProtos:   []string{"h2"},
			MinVersion:   tls.VersionTLS12,
		},
		clients:       newClientTable(),
		done:          make(chan struct{}),
		attemptPrefix: "srv-" + randomHex(8) + "-",
	}
	s.gs = s.grpcServer(s)
	s.wg.Add(1)
	go s.sweepLoop()
	return s, nil
}

// grpcServer is the gRPC server that serves impl (s itself) with the
// server's options.
func (s *Server) grpcServer(impl v2.MessagingServiceServer) *grpc.Server {
	gs := grpc.NewServer(append([]grpc.ServerOption{
		grpc.MaxRecvMsgSize(s.opts.MaxBodySize + (1 << 20)),
		// Bounds the HTTP/2 preface of a connection: Stop waits for
		// connections still in it.
		grpc.ConnectionTimeout(s.opts.HandshakeTimeout),
		grpc.KeepaliveEnforcementPolicy(keepalive.EnforcementPolicy{MinTime: 5 * time.Second, PermitWithoutStream: true}),
		// The budgets grpc-go has: a connection with no stream for
		// idleTimeout is closed (Apache's 120 s; a v5 client keeps its
		// Telemetry stream open, so only dead ones go), a connection has at
		// most maxStreams calls at once, its write buffer is pooled
		// while it has nothing to write, and its read buffer is
		// Options.ReadBufferSize. A
		// message is taken in as its bytes arrive, within HTTP/2 flow
		// control, not at its announced size (TestAnnouncedMessagesCostWhatArrived).
		grpc.KeepaliveParams(keepalive.ServerParameters{MaxConnectionIdle: idleTimeout}),
		grpc.MaxConcurrentStreams(maxStreams),
		grpc.SharedWriteBuffer(true),
		grpc.ReadBufferSize(s.opts.ReadBufferSize),
		grpc.ChainUnaryInterceptor(s.metrics.unary),
		grpc.ChainStreamInterceptor(s.metrics.streaming),
	}, append(s.aclServerOptions(),
		grpc.ChainUnaryInterceptor(s.opts.UnaryInterceptors...),
		grpc.ChainStreamInterceptor(s.opts.StreamInterceptors...))...)...)
	v2.RegisterMessagingServiceServer(gs, impl)
	return gs
}

// Listen listens on addr ("127.0.0.1:8081") and serves it in the
// background until Close; it returns the bound address.
func (s *Server) Listen(addr string) (net.Addr, error) {
	ln, err := net.Listen("tcp", addr)
	if err != nil {
		return nil, fmt.Errorf("grpcapi: %w", err)
	}
	sl, err := s.add(ln)
	if err != nil {
		return nil, err
	}
	s.wg.Add(1)
	go func() {
		defer s.wg.Done()
		if err := s.gs.Serve(sl); err != nil && !errors.Is(err, grpc.ErrServerStopped) {
			s.log.Warn("grpcapi: serve ended", "addr", sl.Addr().String(), "err", err)
		}
	}()
	return sl.Addr(), nil
}

// Start is New and Listen in one call: what a program does.
func Start(b Broker, addr string, opts Options) (*Server, error) {
	s, err := New(b, opts)
	if err != nil {
		return nil, err
	}
	if _, err := s.Listen(addr); err != nil {
		_ = s.Close()
		return nil, err
	}
	return s, nil
}

// Addr is the address of the first listener ("" before Listen or Serve).
func (s *Server) Addr() string {
	s.mu.Lock()
	defer s.mu.Unlock()
	if len(s.lns) == 0 {
		return ""
	}
	return s.lns[0].Addr().String()
}

// Serve serves TLS and plaintext gRPC on ln until Close (blocking).
func (s *Server) Serve(ln net.Listener) error {
	sl, err := s.add(ln)
	if err != nil {
		return err
	}
	err = s.gs.Serve(sl)
	if errors.Is(err, grpc.ErrServerStopped) {
		return ErrClosed
	}
	return err
}

func (s *Server) add(ln net.Listener) (*sniffListener, error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.closed {
		_ = ln.Close()
		return nil, ErrClosed
	}
	// grpc.Server.Serve returns on the first accept error that is not a
	// timeout (EMFILE included): retrylisten retries the temporary ones.
	rl := retrylisten.New(ln, retrylisten.Options{Name: "grpc", Logger: s.log})
	sl := newSniffListener(rl, s.tls, s.opts.HandshakeTimeout, s.log)
	s.lns = append(s.lns, sl)
	return sl, nil
}

// Close stops the server: listeners close, streams (long polls, Telemetry)
// end, and every goroutine is waited for. It is idempotent and does not
// close the Broker.
func (s *Server) Close() error {
	s.mu.Lock()
	if s.closed {
		s.mu.Unlock()
		s.wg.Wait()
		return nil
	}
	s.closed = true
	close(s.done)
	lns := s.lns
	s.mu.Unlock()
	s.gs.Stop()
	var errs []error
	for _, l := range lns {
		errs = append(errs, l.Close())
	}
	s.wg.Wait()
	return errors.Join(errs...)
}

func (s *Server) sweepLoop() {
	defer s.wg.Done()
	t := time.NewTicker(s.opts.ClientExpiry / 4)
	defer t.Stop()
	for {
		select {
		case <-s.done:
			return
		case <-t.C:
			if n := s.clients.expire(s.opts.Now().Add(-s.opts.ClientExpiry)); n > 0 {
				s.log.Debug("grpcapi: forgot silent clients", "count", n)
			}
			if reg := s.b.Consumers(); reg != nil {
				reg.Scan()
			}
		}
	}
}

func randomHex(n int) string {
	b := make([]byte, n)
	_, _ = rand.Read(b)
	return hex.EncodeToString(b)
}

// okStatus is shared by every successful answer: it is only ever
// marshalled (concurrently, which protobuf allows), never changed.
var okStatus = &v2.Status{Code: v2.Code_OK, Message: "OK"}

// ok is the status every successful answer carries.
func ok() *v2.Status { return okStatus }

func status(code v2.Code, format string, args ...any) *v2.Status {
	return &v2.Status{Code: code, Message: fmt.Sprintf(format, args...)}
}

// reject logs a refused request at DEBUG (the client sees the status).
func (s *Server) reject(ctx context.Context, call string, st *v2.Status, kv ...any) *v2.Status {
	s.log.Debug("grpcapi: rejected "+call, append([]any{"client", clientID(ctx), "code", st.Code.String(), "reason", st.Message}, kv...)...)
	return st
}
