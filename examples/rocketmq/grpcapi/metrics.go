package grpcapi

import (
	"context"
	"strings"
	"sync"
	"sync/atomic"

	v2 "github.com/apache/rocketmq-clients/golang/v5/protocol/v2"
	"github.com/prometheus/client_golang/prometheus"
	"google.golang.org/grpc"
	grpcstatus "google.golang.org/grpc/status"
)

// Stats are the gRPC listener's counters, for a host to export (Server
// also is a prometheus.Collector of them).
type Stats struct {
	// Requests counts finished calls by method and answer code: the
	// protocol's status code name ("OK", "MESSAGE_NOT_FOUND", …), or the
	// gRPC code ("Unimplemented", "Canceled", …) of a call that ended
	// without an answer.
	Requests []RequestCount
	// Streams is the number of open streams by method (Telemetry,
	// ReceiveMessage).
	Streams map[string]int64
	// ReceivesInFlight is the number of ReceiveMessage calls under way,
	// long polls included.
	ReceivesInFlight int64
}

// RequestCount is one series of Stats.Requests.
type RequestCount struct {
	Method, Code string
	Count        uint64
}

// metrics holds the counters the interceptors keep.
type metrics struct {
	requests sync.Map // reqKey → *atomic.Uint64
	streams  sync.Map // method → *atomic.Int64
	receives atomic.Int64
}

type reqKey struct{ method, code string }

func (m *metrics) count(method, code string) {
	k := reqKey{method, code}
	c, ok := m.requests.Load(k)
	if !ok {
		c, _ = m.requests.LoadOrStore(k, new(atomic.Uint64))
	}
	c.(*atomic.Uint64).Add(1)
}

func (m *metrics) stream(method string) *atomic.Int64 {
	c, ok := m.streams.Load(method)
	if !ok {
		c, _ = m.streams.LoadOrStore(method, new(atomic.Int64))
	}
	return c.(*atomic.Int64)
}

// methodName is the last element of a full method name
// ("/apache.rocketmq.v2.MessagingService/SendMessage" → "SendMessage").
func methodName(full string) string {
	if i := strings.LastIndexByte(full, '/'); i >= 0 {
		return full[i+1:]
	}
	return full
}

// statused is every answer of the protocol: it carries a Status.
type statused interface{ GetStatus() *v2.Status }

func answerCode(resp any, err error) string {
	if err != nil {
		return grpcstatus.Code(err).String()
	}
	if r, ok := resp.(statused); ok && r.GetStatus() != nil {
		return r.GetStatus().GetCode().String()
	}
	return "OK"
}

func (m *metrics) unary(ctx context.Context, req any, info *grpc.UnaryServerInfo, h grpc.UnaryHandler) (any, error) {
	resp, err := h(ctx, req)
	m.count(methodName(info.FullMethod), answerCode(resp, err))
	return resp, err
}

func (m *metrics) streaming(srv any, ss grpc.ServerStream, info *grpc.StreamServerInfo, h grpc.StreamHandler) error {
	method := methodName(info.FullMethod)
	open := m.stream(method)
	open.Add(1)
	defer open.Add(-1)
	ws := &statusStream{ServerStream: ss}
	if method == "ReceiveMessage" {
		m.receives.Add(1)
		defer m.receives.Add(-1)
	}
	err := h(srv, ws)
	code := ws.code
	if err != nil || code == "" {
		code = answerCode(nil, err)
	}
	m.count(method, code)
	return err
}

// statusStream remembers the code of the last status frame a stream sent
// (a ReceiveMessage answer ends with one).
type statusStream struct {
	grpc.ServerStream
	code string
}

func (s *statusStream) SendMsg(msg any) error {
	if r, ok := msg.(*v2.ReceiveMessageResponse); ok {
		if st := r.GetStatus(); st != nil {
			s.code = st.GetCode().String()
		}
	}
	return s.ServerStream.SendMsg(msg)
}

// Stats returns a snapshot of the counters.
func (s *Server) Stats() Stats {
	st := Stats{Streams: map[string]int64{}, ReceivesInFlight: s.metrics.receives.Load()}
	s.metrics.requests.Range(func(k, v any) bool {
		key := k.(reqKey)
		st.Requests = append(st.Requests, RequestCount{Method: key.method, Code: key.code, Count: v.(*atomic.Uint64).Load()})
		return true
	})
	s.metrics.streams.Range(func(k, v any) bool {
		st.Streams[k.(string)] = v.(*atomic.Int64).Load()
		return true
	})
	return st
}

var (
	requestsDesc = prometheus.NewDesc("rocketmq_grpc_requests_total", "gRPC calls finished, by method and answer code.", []string{"method", "code"}, nil)
	streamsDesc  = prometheus.NewDesc("rocketmq_grpc_streams", "Open gRPC streams, by method.", []string{"method"}, nil)
	receivesDesc = prometheus.NewDesc("rocketmq_grpc_receives_in_flight", "ReceiveMessage calls under way, long polls included.", nil, nil)
)

// Describe implements prometheus.Collector.
func (s *Server) Describe(ch chan<- *prometheus.Desc) {
	ch <- requestsDesc
	ch <- streamsDesc
	ch <- receivesDesc
}

// Collect implements prometheus.Collector: Stats as rocketmq_grpc_*.
func (s *Server) Collect(ch chan<- prometheus.Metric) {
	st := s.Stats()
	for _, r := range st.Requests {
		ch <- prometheus.MustNewConstMetric(requestsDesc, prometheus.CounterValue, float64(r.Count), r.Method, r.Code)
	}
	for _, m := range []string{"Telemetry", "ReceiveMessage"} {
		ch <- prometheus.MustNewConstMetric(streamsDesc, prometheus.GaugeValue, float64(st.Streams[m]), m)
	}
	ch <- prometheus.MustNewConstMetric(receivesDesc, prometheus.GaugeValue, float64(st.ReceivesInFlight))
}
