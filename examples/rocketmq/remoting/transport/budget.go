package transport

import (
	"encoding/binary"
	"errors"
	"fmt"
	"io"
	"sync"
	"sync/atomic"
	"time"

	"github.com/brokercore/brokercore/examples/rocketmq/remoting/wire"
)

// Memory of the read side. A frame's buffer starts at frameChunk bytes (or
// its size, when smaller) and doubles as its bytes arrive, each growth
// reserved from the connection's and the server's read budgets first: what
// a frame costs follows what the client sent, not what it announced. A
// connection reads into a bigReadBuf buffer borrowed from a pool while it
// has input buffered; one waiting for input over a socket holds none.
const (
	frameChunk = 64 << 10
	bigReadBuf = 64 << 10
)

// ErrReadBudget ends a connection that waited longer than its idle
// timeout for read budget.
var ErrReadBudget = errors.New("remoting: read budget exhausted")

// budget is a count of bytes reserved against a maximum. take never
// blocks; wait blocks until the bytes can be taken.
type budget struct {
	max     int64
	used    atomic.Int64
	waiters atomic.Int32
	mu      sync.Mutex
	wake    chan struct{}
}

func newBudget(max int64) *budget { return &budget{max: max, wake: make(chan struct{})} }

func (b *budget) take(n int64) bool {
	if b.used.Add(n) <= b.max {
		return true
	}
	b.used.Add(-n)
	return false
}

func (b *budget) give(n int64) {
	if n == 0 {
		return
	}
	b.used.Add(-n)
	if b.waiters.Load() > 0 {
		b.mu.Lock()
		close(b.wake)
		b.wake = make(chan struct{})
		b.mu.Unlock()
	}
}

// wait takes n, waiting for give; false when done closes or timeout fires.
func (b *budget) wait(n int64, done <-chan struct{}, timeout <-chan time.Time) bool {
	for {
		if b.take(n) {
			return true
		}
		b.mu.Lock()
		w := b.wake
		b.waiters.Add(1)
		b.mu.Unlock()
		// A give between the take above and the registration is seen here.
		if b.take(n) {
			b.waiters.Add(-1)
			return true
		}
		select {
		case <-w:
			b.waiters.Add(-1)
		case <-done:
			b.waiters.Add(-1)
			return false
		case <-timeout:
			b.waiters.Add(-1)
			return false
		}
	}
}

var bigBufs = sync.Pool{New: func() any { b := make([]byte, bigReadBuf); return &b }}

// connReader is the read loop's buffered reader. Over a socket (sock not
// nil) every read takes whatever is ready, up to bigReadBuf bytes, in one
// system call, into a buffer borrowed from a pool; when nothing is ready
// the buffer goes back before the wait, so an idle connection holds none.
// Before each read it serves the gathered batch and writes out the
// answers so far (as flushReader does). Over anything else (a pipe) it
// reads from src, a flushReader, into a borrowed buffer throughout.
type connReader struct {
	c    *Conn
	src  io.Reader
	sock *socketReader
	big  *[]byte // the borrowed buffer, nil when none is
	buf  []byte
	r, w int
}

func newConnReader(c *Conn, src io.Reader) *connReader {
	cr := &connReader{c: c, src: src}
	if cr.sock = socketOf(c.nc, cr); cr.sock == nil {
		cr.borrow()
	}
	return cr
}

// borrow returns the big buffer, borrowing it first if needed.
func (cr *connReader) borrow() []byte {
	if cr.big == nil {
		cr.big = bigBufs.Get().(*[]byte)
		cr.buf = *cr.big
	}
	return cr.buf
}

// giveBack returns the big buffer to the pool; nothing may be buffered.
func (cr *connReader) giveBack() {
	if cr.big != nil {
		bigBufs.Put(cr.big)
		cr.big, cr.buf = nil, nil
	}
}

// fill reads more input into the buffer; callers consumed what was in it.
func (cr *connReader) fill() error {
	cr.r, cr.w = 0, 0
	var n int
	var err error
	if cr.sock == nil {
		n, err = cr.src.Read(cr.buf)
	} else {
		n, err = cr.readSock(nil)
	}
	cr.w = n
	if n > 0 {
		return nil
	}
	if err == nil {
		err = io.ErrNoProgress
	}
	return err
}

// readSock serves the gathered batch, writes out the answers so far, then
// reads from the socket into p (nil: the borrowed buffer), waiting for
// input when none is ready.
func (cr *connReader) readSock(p []byte) (int, error) {
	cr.c.serveBatch()
	cr.c.flushInline()
	n, err := cr.sock.read(p)
	if n > 0 {
		cr.c.touch()
	}
	return n, err
}

// read reads into p: what is buffered, else (for a large p) straight from
// the connection, else through the buffer.
func (cr *connReader) read(p []byte) (int, error) {
	if cr.r == cr.w {
		if len(p) >= bigReadBuf {
			cr.r, cr.w = 0, 0
			if cr.sock == nil {
				return cr.src.Read(p)
			}
			cr.giveBack()
			return cr.readSock(p)
		}
		if err := cr.fill(); err != nil {
			return 0, err
		}
	}
	n := copy(p, cr.buf[cr.r:cr.w])
	cr.r += n
	return n, nil
}

func (cr *connReader) readFull(p []byte) error {
	for got := 0; got < len(p); {
		n, err := cr.read(p[got:])
		got += n
		if err != nil {
			if got > 0 && errors.Is(err, io.EOF) {
				return io.ErrUnexpectedEOF
			}
			return err
		}
	}
	return nil
}

// release gives the borrowed buffer back (the connection ended).
func (cr *connReader) release() {
	cr.giveBack()
	cr.r, cr.w = 0, 0
}

// reserve takes n bytes of read budget for c: the connection's, then the
// server's. Past either, the connection stops reading — its gathered batch
// served and its answers written first, so what it holds can free — until
// memory frees, for at most its idle timeout.
func (c *Conn) reserve(n int64) error {
	s := c.srv
	if c.budget.take(n) {
		if s.budget.take(n) {
			return nil
		}
	} else if !c.waitBudget(c.budget, n) {
		return ErrReadBudget
	} else if s.budget.take(n) {
		return nil
	}
	if !c.waitBudget(s.budget, n) {
		c.budget.give(n)
		return ErrReadBudget
	}
	return nil
}

func (c *Conn) waitBudget(b *budget, n int64) bool {
	c.serveBatch()
	c.flushInline()
	c.srv.budgetWaits.Add(1)
	c.srv.log.Warn("read budget exhausted: connection stops reading until memory frees", "channel", c.id,
		"client", c.nc.RemoteAddr().String(), "want", n, "used", b.used.Load(), "max", b.max)
	var timeout <-chan time.Time
	if d := c.srv.opts.IdleTimeout; d > 0 {
		t := time.NewTimer(d)
		defer t.Stop()
		timeout = t.C
	}
	return b.wait(n, c.ctx.Done(), timeout)
}

// unreserve gives n bytes back to both budgets.
func (c *Conn) unreserve(n int64) {
	c.budget.give(n)
	c.srv.budget.give(n)
}

// readFrame reads one frame (everything after its 4-byte length), its
// buffer growing as its bytes arrive, and returns the bytes reserved for
// it (unreserve them once the request is served).
func (c *Conn) readFrame() ([]byte, int64, error) {
	var lb [4]byte
	if err := c.rd.readFull(lb[:]); err != nil {
		return nil, 0, err
	}
	n := int64(int32(binary.BigEndian.Uint32(lb[:])))
	if max := int64(c.srv.opts.MaxFrame); n < 4 || n > max {
		return nil, 0, fmt.Errorf("%w: frame length %d outside [4, %d]", wire.ErrFrame, n, max)
	}
	size := int(n)
	first := int64(min(size, frameChunk))
	if err := c.reserve(first); err != nil {
		return nil, 0, err
	}
	reserved := first
	buf := make([]byte, first)
	for got := 0; got < size; {
		if got == len(buf) {
			grow := int64(min(size, 2*len(buf)) - len(buf))
			if err := c.reserve(grow); err != nil {
				c.unreserve(reserved)
				return nil, 0, err
			}
			reserved += grow
			nb := make([]byte, len(buf)+int(grow))
			copy(nb, buf)
			buf = nb
		}
		m, err := c.rd.read(buf[got:])
		got += m
		if err != nil && got < size {
			c.unreserve(reserved)
			if errors.Is(err, io.EOF) {
				return nil, 0, fmt.Errorf("%w: truncated frame: %d of %d bytes", wire.ErrFrame, got, size)
			}
			return nil, 0, err
		}
	}
	return buf, reserved, nil
}
