package transport

import (
	"bufio"
	"context"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"net"
	"regexp"
	"strconv"
	"sync"
	"sync/atomic"
	"time"

	"github.com/brokercore/brokercore/examples/rocketmq/internal/retrylisten"
	"github.com/brokercore/brokercore/examples/rocketmq/remoting/wire"
)

// Handler serves the requests of a Server. Serve is called on its own
// goroutine for every request, concurrently for the requests of one
// connection (a long poll must not hold up anything else), unless the
// Handler is an InlineHandler that says otherwise; it returns the
// response, or nil for none. The Server sets the opaque and the response
// bit, and drops the response of a oneway request.
type Handler interface {
	Serve(ctx context.Context, c *Conn, req *wire.Command) *wire.Command
}

// InlineHandler is an optional capability of a Handler: Inline reports
// whether Serve answers req at once, without blocking (no long poll, no
// wait for an fsync). Such a request is served on the connection's read
// loop, in order, with no goroutine of its own, and its answer is written
// with those of the other requests that arrived in the same burst: one
// write when the connection has no more input ready.
type InlineHandler interface {
	Inline(req *wire.Command) bool
}

// BatchHandler is an optional capability of an InlineHandler: the inline
// requests it accepts (Batch reports true) are gathered while the
// connection has more input already read, and served together by
// ServeBatch when the read loop has no whole frame left (before it waits
// for more input), before any other request of the connection, and after
// at most MaxBatchRequests of them — so the sends of one burst can go to
// the store in one append. ServeBatch returns one answer per request, in
// order (nil for none). A batch of one is served by Serve.
type BatchHandler interface {
	InlineHandler
	Batch(req *wire.Command) bool
	ServeBatch(ctx context.Context, c *Conn, reqs []*wire.Command) []*wire.Command
}

// DeferredBatchHandler is an optional capability of a BatchHandler for
// requests that must not be served on the read loop but are best served
// together: sends that wait for an fsync. The requests DeferBatch accepts
// are gathered as Batch's are (a gathered batch holds one kind or the
// other), and served together by ServeBatch (Serve for a batch of one) on
// a goroutine of their own, which counts as one of the connection's
// requests in flight; their answers go out together. So the sends of one
// read burst cost one store append and one goroutine, not one each.
type DeferredBatchHandler interface {
	BatchHandler
	DeferBatch(req *wire.Command) bool
}

// Guard is an optional capability of a Handler that checks requests (access
// control): Admit decides each request on the connection's read loop as
// soon as it is decoded — while its fields and body are still in the
// core's cache, and before any goroutine is started for it. A refusal
// (non-nil) is the request's answer, written as an inline one (none for a
// oneway request), and no handler sees the request. An admitted request
// (nil, true) is served by Guarded(), with Guarded()'s capabilities
// (inline, batch, connection observer) in place of the Guard's, whose
// Serve would check it again. An undecided one (nil, false: a check that
// may block, which the read loop must not do) is served by the Guard's
// own Serve on a goroutine of its own.
type Guard interface {
	Handler
	Admit(ctx context.Context, c *Conn, req *wire.Command) (refusal *wire.Command, decided bool)
	Guarded() Handler
}

// Bounds of one ServeBatch: requests and body bytes.
const (
	MaxBatchRequests  = 64
	maxBatchBodyBytes = 4 << 20
)

// ConnObserver is an optional capability of a Handler: it is told when a
// connection opens and after it closed (after every Serve of it returned).
type ConnObserver interface {
	ConnOpened(c *Conn)
	ConnClosed(c *Conn)
}

// ServerStats are a Server's counters.
type ServerStats struct {
	Connections  int    `json:"connections"`
	Accepted     uint64 `json:"accepted"`
	Requests     uint64 `json:"requests"`
	BadFrames    uint64 `json:"bad_frames"`
	BadHeaders   uint64 `json:"bad_headers"`
	Responses    uint64 `json:"responses"`
	Notified     uint64 `json:"notified"`
	NotifyDrops  uint64 `json:"notify_drops"`
	WriteErrors  uint64 `json:"write_errors"`
	ReadTimeouts uint64 `json:"read_timeouts"`
	// IdleClosed counts connections closed for being idle IdleTimeout.
	IdleClosed uint64 `json:"idle_closed"`
	// ReadBytes is the memory reserved now for requests read and not yet
	// served (the server's read budget in use); BudgetWaits counts the times
	// a connection stopped reading for want of read budget.
	ReadBytes   int64  `json:"read_bytes"`
	BudgetWaits uint64 `json:"budget_waits"`
}

// Server accepts remoting connections and hands their requests to a
// Handler.
type Server struct {
	h      Handler // what serves requests: the Guard's Guarded() with one
	guard  Guard   // nil: the handler checks nothing on the read loop
	opts   ServerOptions
	log    *slog.Logger
	ctx    context.Context
	cancel context.CancelFunc

	mu     sync.Mutex
	lns    []net.Listener
	conns  map[*Conn]struct{}
	closed bool
	wg     sync.WaitGroup
	seq    atomic.Uint64

	budget  *budget // read memory of every connection
	sweeper sync.Once

	accepted, requests, badFrames, badHeaders, responses atomic.Uint64
	notified, notifyDrops, writeErrors, idleClosed       atomic.Uint64
	budgetWaits                                          atomic.Uint64
}

// NewServer returns a Server over h.
func NewServer(h Handler, opts ServerOptions) *Server {
	opts = opts.withDefaults()
	ctx, cancel := context.WithCancel(context.Background())
	s := &Server{h: h, opts: opts, log: opts.Logger.With("server", opts.Name), ctx: ctx, cancel: cancel,
		conns: map[*Conn]struct{}{}, budget: newBudget(opts.MaxReadBytes)}
	if g, ok := h.(Guard); ok {
		s.guard, s.h = g, g.Guarded()
	}
	return s
}

// ErrServerClosed is returned by Serve after Close.
var ErrServerClosed = errors.New("remoting: server closed")

// Serve accepts connections on l until Close; it returns ErrServerClosed
// then. It may be called for several listeners. A temporary accept error
// (EMFILE, ENFILE, ECONNABORTED, …) does not end it: it is logged at WARN
// and retried after a backoff (retrylisten); only a permanent one is
// returned.
func (s *Server) Serve(l net.Listener) error {
	rl := retrylisten.New(l, retrylisten.Options{Name: s.opts.Name, Logger: s.log})
	s.mu.Lock()
	if s.closed {
		s.mu.Unlock()
		rl.Close()
		return ErrServerClosed
	}
	s.lns = append(s.lns, rl)
	s.wg.Add(1)
	s.mu.Unlock()
	s.sweeper.Do(s.startSweeper)
	defer s.wg.Done()
	for {
		nc, err := rl.Accept()
		if err != nil {
			if s.ctx.Err() != nil {
				return ErrServerClosed
			}
			return err
		}
		s.start(nc)
	}
}

func (s *Server) start(nc net.Conn) {
	s.mu.Lock()
	if s.closed {
		s.mu.Unlock()
		nc.Close()
		return
	}
	ctx, cancel := context.WithCancel(s.ctx)
	c := &Conn{
		id:     fmt.Sprintf("%s#%d", nc.RemoteAddr(), s.seq.Add(1)),
		nc:     nc,
		srv:    s,
		ctx:    ctx,
		cancel: cancel,
		out:    make(chan *wire.Command, outQueue),
		sem:    make(chan struct{}, s.opts.MaxInflight),
		budget: newBudget(s.opts.MaxConnReadBytes),
	}
	c.rd = newConnReader(c, flushReader{c})
	c.touch()
	s.conns[c] = struct{}{}
	s.wg.Add(1)
	s.mu.Unlock()
	s.accepted.Add(1)
	s.log.Info("connection opened", "client", nc.RemoteAddr().String(), "channel", c.id)
	if o, ok := s.h.(ConnObserver); ok {
		o.ConnOpened(c)
	}
	go c.run()
}

// Close stops accepting, closes every connection and waits for every
// goroutine of the server (and every Serve call in flight) to end.
func (s *Server) Close() error {
	s.mu.Lock()
	if s.closed {
		s.mu.Unlock()
		s.wg.Wait()
		return nil
	}
	s.closed = true
	s.cancel()
	for _, l := range s.lns {
		l.Close()
	}
	for c := range s.conns {
		c.nc.Close()
	}
	s.mu.Unlock()
	s.wg.Wait()
	return nil
}

// Stats returns the server's counters.
func (s *Server) Stats() ServerStats {
	s.mu.Lock()
	n := len(s.conns)
	s.mu.Unlock()
	return ServerStats{Connections: n, Accepted: s.accepted.Load(), Requests: s.requests.Load(),
		BadFrames: s.badFrames.Load(), BadHeaders: s.badHeaders.Load(), Responses: s.responses.Load(),
		Notified: s.notified.Load(), NotifyDrops: s.notifyDrops.Load(), WriteErrors: s.writeErrors.Load(),
		IdleClosed: s.idleClosed.Load(), ReadBytes: s.budget.used.Load(), BudgetWaits: s.budgetWaits.Load()}
}

// Conn is one client connection: the channel of RocketMQ's broker.
type Conn struct {
	id     string
	nc     net.Conn
	srv    *Server
	ctx    context.Context
	cancel context.CancelFunc
	out    chan *wire.Command
	sem    chan struct{}
	wg     sync.WaitGroup // Serve calls in flight
	once   sync.Once

	// batch (read loop only): requests of a BatchHandler read but not yet
	// served, their body bytes and the read budget they hold; deferred:
	// they are a DeferredBatchHandler's, served off the read loop.
	batch         []*wire.Command
	batchBytes    int
	batchCost     int64
	batchDeferred bool

	rd         *connReader  // read loop only
	budget     *budget      // read memory of this connection
	lastActive atomic.Int64 // unix nanos (Options.Now) of the last read or write

	// The answers go out through out, under wmu: the write loop's and
	// those the read loop serves inline; out is borrowed from a pool while
	// answers are being written (an idle connection holds none). broken: a
	// write failed, later answers are dropped. unflushed (read loop only):
	// inline answers wait in out.
	wmu       sync.Mutex
	ob        *outBuf
	broken    bool
	unflushed bool

	mu    sync.Mutex
	attrs map[string]any
}

// ID names the connection: remote address and a sequence number, unique
// within the process.
func (c *Conn) ID() string { return c.id }

// RemoteAddr is the client's address.
func (c *Conn) RemoteAddr() net.Addr { return c.nc.RemoteAddr() }

// LocalAddr is the server's address of the connection.
func (c *Conn) LocalAddr() net.Addr { return c.nc.LocalAddr() }

// Context is cancelled when the connection closes.
func (c *Conn) Context() context.Context { return c.ctx }

// Value returns the connection's attribute key, creating it with mk the
// first time (under the connection's lock).
func (c *Conn) Value(key string, mk func() any) any {
	c.mu.Lock()
	defer c.mu.Unlock()
	if c.attrs == nil {
		c.attrs = map[string]any{}
	}
	v, ok := c.attrs[key]
	if !ok && mk != nil {
		v = mk()
		c.attrs[key] = v
	}
	return v
}

// Close closes the connection.
func (c *Conn) Close() { c.nc.Close() }

// Notify sends a oneway request to the client without waiting: when the
// connection's queue is full the request is dropped (and counted), so a
// slow client cannot stall the broker.
func (c *Conn) Notify(code int16, ext map[string]string) bool {
	return c.NotifyBody(code, ext, nil)
}

// NotifyBody is Notify with a body (CHECK_TRANSACTION_STATE carries the
// message).
func (c *Conn) NotifyBody(code int16, ext map[string]string, body []byte) bool {
	cmd := &wire.Command{Code: code, Language: "GO", Version: wire.ProtocolVersion, Flag: wire.FlagOneway,
		ExtFields: ext, Body: body, Opaque: notifyOpaque.Add(1)}
	if c.ctx.Err() != nil {
		return false
	}
	select {
	case c.out <- cmd:
		c.srv.notified.Add(1)
		return true
	default:
		c.srv.notifyDrops.Add(1)
		return false
	}
}

var notifyOpaque atomic.Int32

// outQueue is the capacity of a connection's queue of answers and
// notifications waiting for the write loop.
const outQueue = 128

// finalFlushTimeout bounds writing a closing connection's last answers.
const finalFlushTimeout = time.Second

func (c *Conn) run() {
	s := c.srv
	defer s.wg.Done()
	wdone := make(chan struct{})
	go func() { defer close(wdone); c.writeLoop() }()
	reason := c.readLoop()
	// The answers to the last requests read go out before the close, unless
	// the peer is not reading them.
	_ = c.nc.SetWriteDeadline(time.Now().Add(finalFlushTimeout))
	c.serveBatch()
	c.flushInline()
	c.cancel()
	c.nc.Close()
	c.wg.Wait()
	<-wdone
	c.rd.release()
	c.wmu.Lock()
	c.releaseOut()
	c.wmu.Unlock()
	s.mu.Lock()
	delete(s.conns, c)
	s.mu.Unlock()
	if o, ok := s.h.(ConnObserver); ok {
		o.ConnClosed(c)
	}
	s.log.Info("connection closed", "client", c.nc.RemoteAddr().String(), "channel", c.id, "reason", reason)
}

// flushReader is the read loop's source: before it waits for more input
// it serves the gathered batch and writes out the inline answers to what
// was read so far.
type flushReader struct{ c *Conn }

func (f flushReader) Read(p []byte) (int, error) {
	f.c.serveBatch()
	f.c.flushInline()
	n, err := f.c.nc.Read(p)
	if n > 0 {
		f.c.touch()
	}
	return n, err
}

func (c *Conn) readLoop() string {
	s := c.srv
	inl, _ := s.h.(InlineHandler)
	bh, _ := s.h.(BatchHandler)
	dh, _ := s.h.(DeferredBatchHandler)
	for {
		frame, cost, err := c.readFrame()
		if err != nil {
			if errors.Is(err, ErrReadBudget) {
				s.log.Warn("closing connection: waited its idle timeout for read budget", "client",
					c.nc.RemoteAddr().String(), "channel", c.id)
				return err.Error()
			}
			if errors.Is(err, wire.ErrFrame) {
				s.badFrames.Add(1)
				s.log.Warn("rejected frame: closing connection", "client", c.nc.RemoteAddr().String(),
					"channel", c.id, "err", err)
				return err.Error()
			}
			if errors.Is(err, io.EOF) || c.ctx.Err() != nil {
				return "closed by peer"
			}
			return err.Error()
		}
		cmd, err := wire.Decode(frame)
		if err != nil {
			c.unreserve(cost)
			if errors.Is(err, wire.ErrFrame) {
				s.badFrames.Add(1)
				s.log.Warn("rejected frame: closing connection", "client", c.nc.RemoteAddr().String(),
					"channel", c.id, "err", err)
				return err.Error()
			}
			s.badHeaders.Add(1)
			s.log.Info("rejected request", "client", c.nc.RemoteAddr().String(), "channel", c.id, "err", err)
			// The frame boundary is intact: answer with what we could
			// salvage of the opaque, and go on.
			resp := &wire.Command{Code: wire.SystemError, Version: wire.ProtocolVersion, Flag: wire.FlagResponse,
				Opaque: salvageOpaque(frame), Remark: err.Error()}
			c.enqueue(resp)
			continue
		}
		if cmd.IsResponse() {
			c.unreserve(cost)
			continue // answers to our oneway notifications: none expected
		}
		s.requests.Add(1)
		if s.guard != nil {
			refusal, decided := s.guard.Admit(c.ctx, c, cmd)
			if refusal != nil {
				c.serveBatch() // what was read before goes first
				c.answerInline(cmd, refusal)
				c.unreserve(cost)
				continue
			}
			if !decided {
				c.serveBatch()
				if !c.acquire() {
					c.unreserve(cost)
					return "closed"
				}
				c.wg.Add(1)
				go c.serve(s.guard, cmd, cost)
				continue
			}
		}
		if deferred := dh != nil && dh.DeferBatch(cmd); deferred || (bh != nil && bh.Batch(cmd)) {
			if len(c.batch) > 0 && c.batchDeferred != deferred {
				c.serveBatch() // one kind per batch: what was read before goes first
			}
			c.batchDeferred = deferred
			c.batch = append(c.batch, cmd)
			c.batchCost += cost
			if c.batchBytes += len(cmd.Body); len(c.batch) >= MaxBatchRequests || c.batchBytes >= maxBatchBodyBytes {
				c.serveBatch()
			}
			continue
		}
		c.serveBatch() // what was read before goes first
		if inl != nil && inl.Inline(cmd) {
			c.serveInline(cmd)
			c.unreserve(cost)
			continue
		}
		if !c.acquire() {
			c.unreserve(cost)
			return "closed"
		}
		c.wg.Add(1)
		go c.serve(s.h, cmd, cost)
	}
}

// acquire takes a slot of MaxInflight for a request's goroutine; when
// they are all taken it stops reading until one ends (answers written
// meanwhile). False: the connection closed meanwhile.
func (c *Conn) acquire() bool {
	select {
	case c.sem <- struct{}{}:
		return true
	default:
	}
	c.flushInline()
	select {
	case c.sem <- struct{}{}:
		return true
	case <-c.ctx.Done():
		return false
	}
}

var opaqueRE = regexp.MustCompile(`"opaque"\s*:\s*(-?\d+)`)

// salvageOpaque finds the opaque of an undecodable header where it can, so
// the client matches the error answer to its request.
func salvageOpaque(frame []byte) int32 {
	if len(frame) < 4 {
		return 0
	}
	word := uint32(frame[0])<<24 | uint32(frame[1])<<16 | uint32(frame[2])<<8 | uint32(frame[3])
	hl := int(word & 0xFFFFFF)
	if hl > len(frame)-4 {
		hl = len(frame) - 4
	}
	h := frame[4 : 4+hl]
	if byte(word>>24) == wire.SerializeRocketMQ && len(h) >= 9 {
		return int32(uint32(h[5])<<24 | uint32(h[6])<<16 | uint32(h[7])<<8 | uint32(h[8]))
	}
	if m := opaqueRE.FindSubmatch(h); m != nil {
		if v, err := strconv.ParseInt(string(m[1]), 10, 32); err == nil {
			return int32(v)
		}
	}
	return 0
}

func (c *Conn) serve(h Handler, req *wire.Command, cost int64) {
	defer func() { c.unreserve(cost); <-c.sem; c.wg.Done() }()
	resp := h.Serve(c.ctx, c, req)
	if resp == nil || req.IsOneway() {
		return
	}
	answer(req, resp)
	c.enqueue(resp)
}

// answer makes resp the response to req.
func answer(req, resp *wire.Command) {
	resp.Opaque = req.Opaque
	resp.Flag |= wire.FlagResponse
	resp.Serialize = req.Serialize
}

// serveInline serves req on the read loop; its answer waits in bw until the
// read loop runs out of input (flushReader) or the write loop flushes.
func (c *Conn) serveInline(req *wire.Command) {
	c.answerInline(req, c.srv.h.Serve(c.ctx, c, req))
}

// answerInline writes resp, req's answer, on the read loop: it waits in bw
// as the answers of serveInline do (nothing for a oneway request).
func (c *Conn) answerInline(req, resp *wire.Command) {
	if resp == nil || req.IsOneway() {
		return
	}
	answer(req, resp)
	c.srv.responses.Add(1)
	c.wmu.Lock()
	c.write(resp)
	c.wmu.Unlock()
	c.unflushed = true
}

// serveBatchCost gives back the read budget of a served batch.
func (c *Conn) serveBatchCost() {
	if c.batchCost != 0 {
		c.unreserve(c.batchCost)
		c.batchCost = 0
	}
}

// serveBatch serves the gathered batch on the read loop; its answers wait
// in bw as inline answers do.
func (c *Conn) serveBatch() {
	reqs := c.batch
	if len(reqs) == 0 {
		return
	}
	if c.batchDeferred {
		c.deferBatch()
		return
	}
	c.batch, c.batchBytes = reqs[:0], 0
	defer c.serveBatchCost()
	if len(reqs) == 1 {
		c.serveInline(reqs[0])
		reqs[0] = nil
		return
	}
	resps := c.srv.h.(BatchHandler).ServeBatch(c.ctx, c, reqs)
	c.wmu.Lock()
	for i, req := range reqs {
		if i < len(resps) && resps[i] != nil && !req.IsOneway() {
			answer(req, resps[i])
			c.srv.responses.Add(1)
			c.write(resps[i])
			c.unflushed = true
		}
		reqs[i] = nil
	}
	c.wmu.Unlock()
}

// deferBatch hands the gathered batch of a DeferredBatchHandler to a
// goroutine of its own (read loop only), waiting for a free slot of the
// connection's requests in flight as a request does. A closing connection
// drops it: its answers could not go out.
func (c *Conn) deferBatch() {
	reqs := append([]*wire.Command(nil), c.batch...)
	clear(c.batch)
	cost := c.batchCost
	c.batch, c.batchBytes, c.batchCost, c.batchDeferred = c.batch[:0], 0, 0, false
	if !c.acquire() {
		c.unreserve(cost)
		return
	}
	c.wg.Add(1)
	go c.serveDeferred(reqs, cost)
}

// serveDeferred serves a deferred batch and queues its answers for the
// write loop.
func (c *Conn) serveDeferred(reqs []*wire.Command, cost int64) {
	defer func() { c.unreserve(cost); <-c.sem; c.wg.Done() }()
	var resps []*wire.Command
	if len(reqs) == 1 {
		resps = []*wire.Command{c.srv.h.Serve(c.ctx, c, reqs[0])}
	} else {
		resps = c.srv.h.(BatchHandler).ServeBatch(c.ctx, c, reqs)
	}
	for i, req := range reqs {
		if i < len(resps) && resps[i] != nil && !req.IsOneway() {
			answer(req, resps[i])
			c.enqueue(resps[i])
		}
	}
}

// flushInline writes out the inline answers waiting in bw; read loop only.
func (c *Conn) flushInline() {
	if !c.unflushed {
		return
	}
	c.unflushed = false
	c.wmu.Lock()
	c.flush()
	c.wmu.Unlock()
}

func (c *Conn) enqueue(resp *wire.Command) {
	select {
	case c.out <- resp:
		c.srv.responses.Add(1)
	case <-c.ctx.Done():
	}
}

// A failed write does not close the socket: a client that resets the
// connection (it closed with answers unread) may have sent requests the
// read loop has not read yet, oneway commits above all, and those are
// still served. Every later answer is dropped and the read loop ends the
// connection. write and flush are called under wmu.

func (c *Conn) fail(err error) {
	if !c.broken {
		c.broken = true
		c.srv.writeErrors.Add(1)
		c.srv.log.Debug("write failed: dropping answers until the connection ends", "channel", c.id, "err", err)
	}
}

func (c *Conn) write(cmd *wire.Command) {
	if c.broken {
		return
	}
	if c.ob == nil {
		c.ob = outBufs.Get().(*outBuf)
		c.ob.bw.Reset(c.nc)
	}
	ob := c.ob
	// The header goes through a reused buffer; a large body (a pull
	// answer) straight to the writer, a small one with its header.
	body := cmd.Body
	small := len(body) <= 4<<10
	b, err := wire.AppendFrameHead(ob.enc[:0], cmd)
	if err != nil {
		c.srv.log.Error("encode response", "channel", c.id, "err", err)
		body = nil
		b, _ = wire.AppendFrameHead(ob.enc[:0], &wire.Command{Code: wire.SystemError, Flag: cmd.Flag, Opaque: cmd.Opaque,
			Remark: "encode: " + err.Error()})
	} else if small {
		b = append(b, body...)
	}
	if cap(b) <= 64<<10 {
		ob.enc = b[:0]
	}
	if _, err := ob.bw.Write(b); err != nil {
		c.fail(err)
		return
	}
	if !small && body != nil {
		if _, err := ob.bw.Write(body); err != nil {
			c.fail(err)
		}
	}
}

// flush writes out what waits in the connection's buffer and gives the
// buffer back to the pool.
func (c *Conn) flush() {
	if c.broken || c.ob == nil {
		return
	}
	if err := c.ob.bw.Flush(); err != nil {
		c.fail(err)
		return
	}
	c.touch()
	c.releaseOut()
}

func (c *Conn) releaseOut() {
	if c.ob != nil {
		c.ob.bw.Reset(nil)
		outBufs.Put(c.ob)
		c.ob = nil
	}
}

// outBuf is a connection's write buffer, borrowed while it writes.
type outBuf struct {
	bw  *bufio.Writer
	enc []byte
}

var outBufs = sync.Pool{New: func() any { return &outBuf{bw: bufio.NewWriterSize(nil, 64<<10)} }}

// writeLoop writes the answers of the requests served on their own
// goroutines (and the notifications) until the connection ends, flushing
// once per burst.
func (c *Conn) writeLoop() {
	for {
		select {
		case <-c.ctx.Done():
			return
		case cmd := <-c.out:
			c.wmu.Lock()
			c.write(cmd)
		drain:
			for {
				select {
				case cmd := <-c.out:
					c.write(cmd)
				default:
					break drain
				}
			}
			c.flush()
			c.wmu.Unlock()
		}
	}
}
