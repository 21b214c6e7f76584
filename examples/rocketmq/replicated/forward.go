package replicated

import (
	"bufio"
	"context"
	"errors"
	"fmt"
	"maps"
	"net"
	"sync"
	"sync/atomic"
	"time"

	"github.com/brokercore/brokercore/acl"
	"github.com/brokercore/brokercore/examples/cluster/replica"
	"github.com/brokercore/brokercore/examples/rocketmq/remoting/authadmin"
	"github.com/brokercore/brokercore/examples/rocketmq/remoting/broker"
	"github.com/brokercore/brokercore/examples/rocketmq/remoting/remoteacl"
	"github.com/brokercore/brokercore/examples/rocketmq/remoting/transport"
	"github.com/brokercore/brokercore/examples/rocketmq/remoting/wire"
)

// forwardedField marks a forwarded send (an extField the broker ignores).
const forwardedField = "brokercoreForwarded"

// Bounds of forwarding a send to the leader.
const (
	DefaultForwardTimeout = 5 * time.Second
	maxIdleForward        = 8 // idle connections kept to the leader
)

// handler is the node's broker handler: a send (or send-back) reaching a node that does
// not lead is forwarded to the leader's broker and the leader's answer
// returned (routes list the followers as write-only brokers, so that a
// producer whose leader died retries on a live node); everything else is
// the broker's.
type handler struct {
	b      *broker.Broker
	n      *replica.Node
	self   string
	fwd    *forwarder
	tables *tables
	relay  *relay // v5 transaction checks through followers (relay.go)
	stop   <-chan struct{}

	// With ACL on (acl.go): acl checks what this node serves itself (in
	// front of serveLocal), auth answers the AUTH_* requests, fkey marks
	// the requests forwarded to the leader.
	acl  *remoteacl.Handler
	auth *authadmin.Service
	fkey []byte
}

// isSend reports the writes a follower forwards: sends (transactional ones
// too), send-backs (CONSUMER_SEND_MSG_BACK, which the leader's scheduler
// delays), END_TRANSACTION (the leader's transaction manager) and the
// admin's offset reset (INVOKE_BROKER_TO_RESET_OFFSET: served on a
// follower, it would move that node's offset manager only, and raft would
// refuse the replicated offset).
func isSend(code int16) bool {
	switch code {
	case wire.CodeSendMessage, wire.CodeSendMessageV2, wire.CodeSendBatchMessage, wire.CodeConsumerSendMsgBack,
		codeEndTransaction, // txn.go
		broker.CodeInvokeBrokerToResetOffset:
		return true
	}
	return false
}

// Serve implements transport.Handler.
//
// The admin's table changes (broker.TableChange) go through raft
// (tables.go): the leader logs them, a follower forwards them.
func (h *handler) Serve(ctx context.Context, c *transport.Conn, req *wire.Command) *wire.Command {
	if isRelay(req.Code) {
		return h.relay.serve(req) // between members, with their own MAC (relay.go)
	}
	change := h.isChange(req.Code)
	if _, marked := forwardedClient(ctx); marked || req.ExtFields[forwardedField] != "" {
		h.b.RelayConn(c) // a follower's: never asked about a transaction (txn.go)
	}
	local := func() *wire.Command {
		if h.acl != nil {
			return h.acl.Serve(ctx, c, req) // checked, then serveLocal
		}
		return h.serveLocal(ctx, c, req)
	}
	if (!isSend(req.Code) && !change) || h.n.IsLeader() {
		return local()
	}
	_, addr := h.n.Leader()
	_, forwarded := forwardedClient(ctx)
	if addr == "" || addr == h.self || req.ExtFields[forwardedField] != "" || forwarded {
		// No leader to forward to, or a send forwarded here already (two
		// nodes that each think the other leads must not pass it on forever).
		return local() // the Writer answers SERVICE_NOT_AVAILABLE, or raft leads already
	}
	fwd := req
	if h.acl != nil {
		if req.ExtFields[acl.FieldAccessKey] == "" {
			return local() // refused here: no credentials
		}
		fwd = markForward(h.fkey, c.RemoteAddr().String(), req) // the leader checks it (acl.go)
	}
	h.b.HeardSender(c, req) // a transaction's producer, should this node lead (txn.go)
	resp, err := h.fwd.call(ctx, addr, fwd)
	if err != nil {
		h.fwd.log.Info("send not forwarded to the leader", "leader", addr, "err", err)
		return wire.NewResponse(req, wire.ServiceNotAvailable, "forward to leader "+addr+": "+err.Error())
	}
	if resp != nil {
		resp.Opaque = req.Opaque
	}
	return resp
}

// serveLocal is what this node answers itself: a change is logged
// through raft (SERVICE_NOT_AVAILABLE on a follower), an AUTH_* read is
// the node's rules', the rest the broker's.
func (h *handler) serveLocal(ctx context.Context, c *transport.Conn, req *wire.Command) *wire.Command {
	if req.Code == wire.CodeLockBatchMQ && !h.n.IsLeader() {
		return h.grantNone(req) // locks.go: queue locks are the leader's (after the ACL check)
	}
	switch {
	case h.isChange(req.Code):
		client := c.RemoteAddr().String()
		if a, ok := forwardedClient(ctx); ok {
			client = a.String()
		}
		return h.tables.propose(ctx, h.stop, req, client)
	case h.auth != nil && authadmin.IsAuthAdmin(req.Code):
		return h.auth.Serve(req)
	}
	return h.b.Serve(ctx, c, req)
}

// isChange reports the changes replicated through the admin log: the
// broker's table changes, and with ACL on the AUTH_* edits.
func (h *handler) isChange(code int16) bool {
	return broker.TableChange(code) || (h.auth != nil && isAuthChange(code))
}

// Inline implements transport.InlineHandler: a forwarded send waits for
// the leader, so sends are never inline here.
func (h *handler) Inline(req *wire.Command) bool {
	return !isSend(req.Code) && !h.isChange(req.Code) && !authadmin.IsAuthAdmin(req.Code) && !isRelay(req.Code) && h.b.Inline(req)
}

// Batch and ServeBatch implement transport.BatchHandler (the broker's: a
// broker with a Writer batches nothing).
func (h *handler) Batch(req *wire.Command) bool {
	return !isSend(req.Code) && !h.isChange(req.Code) && !authadmin.IsAuthAdmin(req.Code) && !isRelay(req.Code) && h.b.Batch(req)
}

func (h *handler) ServeBatch(ctx context.Context, c *transport.Conn, reqs []*wire.Command) []*wire.Command {
	if h.acl != nil {
		return h.acl.ServeBatch(ctx, c, reqs)
	}
	return h.b.ServeBatch(ctx, c, reqs)
}

// ConnOpened and ConnClosed implement transport.ConnObserver.
func (h *handler) ConnOpened(c *transport.Conn) { h.b.ConnOpened(c) }
func (h *handler) ConnClosed(c *transport.Conn) { h.b.ConnClosed(c) }

// forwarder is a small remoting client to the leader: one request at a
// time per connection, idle connections kept per address.
type forwarder struct {
	log interface {
		Info(msg string, args ...any)
	}
	timeout time.Duration
	opaque  atomic.Int32

	mu     sync.Mutex
	idle   map[string][]*fconn
	closed bool
}

type fconn struct {
	c net.Conn
	r *bufio.Reader
}

var errForwarderClosed = errors.New("forwarder closed")

// call forwards req to addr, marked forwarded, and returns its answer
// (nil for a oneway req).
func (f *forwarder) call(ctx context.Context, addr string, req *wire.Command) (*wire.Command, error) {
	cmd := *req
	cmd.ExtFields = maps.Clone(req.ExtFields)
	if cmd.ExtFields == nil {
		cmd.ExtFields = map[string]string{}
	}
	if cmd.ExtFields[forwardedField] == "" {
		cmd.ExtFields[forwardedField] = "1" // with ACL on, the handler's mark (acl.go)
	}
	return f.send(ctx, addr, &cmd)
}

// send sends req to addr as it is (the relay's requests, relay.go) and
// returns its answer (nil for a oneway req).
func (f *forwarder) send(ctx context.Context, addr string, req *wire.Command) (*wire.Command, error) {
	fc, err := f.get(ctx, addr)
	if err != nil {
		return nil, err
	}
	cmd := *req
	cmd.Opaque = f.opaque.Add(1)
	frame, err := wire.Encode(&cmd)
	if err != nil {
		fc.c.Close()
		return nil, err
	}
	deadline := time.Now().Add(f.timeout)
	if d, ok := ctx.Deadline(); ok && d.Before(deadline) {
		deadline = d
	}
	_ = fc.c.SetDeadline(deadline)
	stop := context.AfterFunc(ctx, func() { _ = fc.c.SetDeadline(time.Unix(1, 0)) }) // the server closes
	defer stop()
	if _, err := fc.c.Write(frame); err != nil {
		fc.c.Close()
		return nil, err
	}
	if req.IsOneway() {
		f.put(addr, fc)
		return nil, nil
	}
	for {
		b, err := wire.ReadFrame(fc.r, wire.DefaultMaxFrame)
		if err != nil {
			fc.c.Close()
			return nil, err
		}
		resp, err := wire.Decode(b)
		if err != nil {
			fc.c.Close()
			return nil, err
		}
		if resp.IsResponse() && resp.Opaque == cmd.Opaque {
			f.put(addr, fc)
			return resp, nil
		}
		// A notification from the leader, or an answer to nothing of ours.
	}
}

func (f *forwarder) get(ctx context.Context, addr string) (*fconn, error) {
	f.mu.Lock()
	if f.closed {
		f.mu.Unlock()
		return nil, errForwarderClosed
	}
	if cs := f.idle[addr]; len(cs) > 0 {
		fc := cs[len(cs)-1]
		f.idle[addr] = cs[:len(cs)-1]
		f.mu.Unlock()
		return fc, nil
	}
	f.mu.Unlock()
	d := net.Dialer{Timeout: f.timeout}
	c, err := d.DialContext(ctx, "tcp", addr)
	if err != nil {
		return nil, fmt.Errorf("dial: %w", err)
	}
	return &fconn{c: c, r: bufio.NewReader(c)}, nil
}

func (f *forwarder) put(addr string, fc *fconn) {
	_ = fc.c.SetDeadline(time.Time{})
	f.mu.Lock()
	defer f.mu.Unlock()
	if f.closed || len(f.idle[addr]) >= maxIdleForward {
		fc.c.Close()
		return
	}
	f.idle[addr] = append(f.idle[addr], fc)
}

// close closes the idle connections; a call in flight closes its own.
func (f *forwarder) close() {
	f.mu.Lock()
	defer f.mu.Unlock()
	f.closed = true
	for _, cs := range f.idle {
		for _, fc := range cs {
			fc.c.Close()
		}
	}
	f.idle = nil
}
