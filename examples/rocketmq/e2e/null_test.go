package e2e

import (
	"context"
	"errors"
	"fmt"
	"net"
	"os"
	"strconv"
	"sync"
	"sync/atomic"
	"testing"

	"github.com/brokercore/brokercore/examples/rocketmq/remoting/broker"
	"github.com/brokercore/brokercore/examples/rocketmq/remoting/namesrv"
	"github.com/brokercore/brokercore/examples/rocketmq/remoting/transport"
	"github.com/brokercore/brokercore/examples/rocketmq/remoting/wire"
	"github.com/brokercore/brokercore/store"
	"github.com/tidwall/wal"
)

// nullBroker is the floor of the send benchmarks: the broker side of a
// broker that does no broker work. Every send is answered SUCCESS at once,
// on its connection's read loop (InlineHandler, as the real broker serves
// sends under -flush async), with the fields the client reads (msgId,
// queueId, queueOffset); nothing is parsed beyond the queue id, nothing is
// stored. Heartbeats are answered SUCCESS; anything else is not supported.
// The frame reading, decoding and answer writing are the real remoting
// server's, and routes come from the real name server: the client starts
// and sends exactly as against the real broker.
type nullBroker struct {
	sent atomic.Int64
	log  *nullLog // nil: nothing is written
}

// nullLog is the one piece of broker work the "wal" floor rows add to the
// null broker: each send is written to a tidwall/wal log, as the store
// opens it under SyncInterval (no fsync per write, 16 MiB segments), with
// a record of the size the store writes for it. It is the least any broker
// built on tidwall/wal does per send, so a broker cannot beat its rate.
type nullLog struct {
	mu   sync.Mutex
	wl   *wal.Log
	next uint64
	rec  []byte
}

// nullRecordMeta is what the store's record of a benchmark send carries
// beyond the body: its Stats().AppendedBytes per message was 1113.7 for a
// 1 KiB body (BenchmarkSyncSend16's message).
const nullRecordMeta = 90

func openNullLog(dir string) (*nullLog, error) {
	wl, err := wal.Open(dir, &wal.Options{NoSync: true, SegmentSize: store.DefaultSegmentSize, SegmentCacheSize: 1, AllowEmpty: true})
	if err != nil {
		return nil, err
	}
	return &nullLog{wl: wl}, nil
}

// write logs one send's body; the answer waits for it, as the real
// broker's does for its append.
func (l *nullLog) write(body []byte) error {
	l.mu.Lock()
	defer l.mu.Unlock()
	l.rec = append(append(l.rec[:0], body...), make([]byte, nullRecordMeta)...)
	l.next++
	return l.wl.Write(l.next, l.rec)
}

// nullMsgID stands for the offset message id the real broker answers (32
// hex digits: store host and log offset).
const nullMsgID = "7F00000100002A9F0000000000000000"

func (h *nullBroker) Serve(_ context.Context, _ *transport.Conn, req *wire.Command) *wire.Command {
	switch req.Code {
	case wire.CodeSendMessage, wire.CodeSendMessageV2, wire.CodeSendBatchMessage:
		if h.log != nil {
			if err := h.log.write(req.Body); err != nil {
				return wire.NewResponse(req, wire.SystemError, "null broker: "+err.Error())
			}
		}
		q := req.ExtFields["queueId"]
		if q == "" {
			q = req.ExtFields["e"] // SEND_MESSAGE_V2's one-letter name
		}
		resp := wire.NewResponse(req, wire.Success, "")
		resp.ExtFields["msgId"] = nullMsgID
		resp.ExtFields["queueId"] = q
		resp.ExtFields["queueOffset"] = strconv.FormatInt(h.sent.Add(1), 10)
		return resp
	case wire.CodeHeartbeat, wire.CodeUnregisterClient:
		return wire.NewResponse(req, wire.Success, "")
	}
	return wire.NewResponse(req, wire.RequestCodeNotSupported, "null broker: request code not supported")
}

// Inline implements transport.InlineHandler: everything answers at once.
func (h *nullBroker) Inline(*wire.Command) bool { return true }

// nullServer is the real name server (a memory-only topic table with the
// default 4 queues, auto-create on) and the null broker on loopback.
type nullServer struct {
	NameSrv, Broker string
	h               *nullBroker
	ns, br          *transport.Server
	wg              sync.WaitGroup
}

// startNull listens on nsAddr and brAddr ("127.0.0.1:0" for free ports);
// with logDir != "" every send is written to a wal log there (nullLog).
func startNull(nsAddr, brAddr, logDir string) (*nullServer, error) {
	h := &nullBroker{}
	if logDir != "" {
		l, err := openNullLog(logDir)
		if err != nil {
			return nil, err
		}
		h.log = l
	}
	s, err := listenNull(nsAddr, brAddr, h)
	if err != nil && h.log != nil {
		_ = h.log.wl.Close()
	}
	return s, err
}

func listenNull(nsAddr, brAddr string, h *nullBroker) (*nullServer, error) {
	bl, err := net.Listen("tcp", brAddr)
	if err != nil {
		return nil, err
	}
	nl, err := net.Listen("tcp", nsAddr)
	if err != nil {
		bl.Close()
		return nil, err
	}
	topics, err := broker.OpenTopics("", 4)
	if err != nil {
		bl.Close()
		nl.Close()
		return nil, err
	}
	s := &nullServer{NameSrv: nl.Addr().String(), Broker: bl.Addr().String(), h: h}
	s.ns = transport.NewServer(namesrv.NewNameServer(topics, namesrv.NameServerOptions{BrokerAddr: s.Broker}),
		transport.ServerOptions{Name: "namesrv"})
	s.br = transport.NewServer(s.h, transport.ServerOptions{Name: "broker"})
	for _, p := range []struct {
		rs *transport.Server
		l  net.Listener
	}{{s.ns, nl}, {s.br, bl}} {
		s.wg.Add(1)
		go func() {
			defer s.wg.Done()
			if err := p.rs.Serve(p.l); err != nil && !errors.Is(err, transport.ErrServerClosed) {
				fmt.Fprintln(os.Stderr, "null broker: serve:", err)
			}
		}()
	}
	return s, nil
}

// Close stops both servers, waits for them and closes the log.
func (s *nullServer) Close() error {
	s.ns.Close()
	s.br.Close()
	s.wg.Wait()
	if s.h.log != nil {
		return s.h.log.wl.Close()
	}
	return nil
}

func startNullT(t testing.TB) *nullServer { return startNullLogT(t, "") }

// startNullLogT is startNullT with every send written to a wal log in
// logDir ("": none).
func startNullLogT(t testing.TB, logDir string) *nullServer {
	t.Helper()
	s, err := startNull("127.0.0.1:0", "127.0.0.1:0", logDir)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() {
		if err := s.Close(); err != nil {
			t.Errorf("null broker: close log: %v", err)
		}
	})
	return s
}

// childNullBroker runs the null broker on E2E_NS / E2E_BR until SIGTERM
// (E2E_CPUPROFILE as childBroker).
func childNullBroker() int {
	return serveChild(func() (func() error, error) {
		s, err := startNull(os.Getenv("E2E_NS"), os.Getenv("E2E_BR"), "")
		if err != nil {
			return nil, err
		}
		return s.Close, nil
	})
}
