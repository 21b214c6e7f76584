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
// a frame costs follows what the client sent, not what it announced. An
// idle connection holds smallReadBuf bytes of read buffer; a burst of
// input borrows a bigReadBuf buffer from a pool and gives it back once the
// burst is consumed.
const (
	frameChunk   = 64 << 10
	smallReadBuf = 1 << 10
	bigReadBuf   = 64 << 10
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

// connReader is the read loop's buffered reader over src (flushReader).
// Over a socket (raw not nil) it keeps a small buffer of its own while
// idle and borrows a big pooled one during a burst: a read that filled its
// buffer is followed by a read that does not wait (nonblockingReader), so a burst is
// read whole before src flushes the answers, as one big read would. Over
// anything else (a pipe) it reads into a big buffer throughout.
type connReader struct {
	c     *Conn
	src   io.Reader
	raw   *nonblockingReader
	small []byte
	big   *[]byte
	buf   []byte
	r, w  int
	full  bool // the last read filled what it was given: more may be ready
}

func newConnReader(c *Conn, src io.Reader) *connReader {
	cr := &connReader{c: c, src: src, raw: rawOf(c.nc)}
	if cr.raw != nil {
		cr.small = make([]byte, smallReadBuf)
		cr.buf = cr.small
	} else {
		cr.big = bigBufs.Get().(*[]byte)
		cr.buf = *cr.big
	}
	return cr
}

// fill reads more input: into the small buffer when nothing is buffered
// (the pooled one goes back), into a big one when the small one is full.
func (cr *connReader) fill() error {
	if cr.r > 0 {
		copy(cr.buf, cr.buf[cr.r:cr.w])
		cr.w -= cr.r
		cr.r = 0
	}
	if cr.raw != nil {
		if cr.w == 0 && cr.big != nil {
			// Between two reads of a busy connection: what is ready goes
			// into the big buffer (the answers so far written first, as
			// before any read); when nothing is, the buffer goes back and
			// the wait is on the small one.
			cr.c.serveBatch()
			cr.c.flushInline()
			if n := cr.raw.read(cr.buf); n > 0 {
				cr.full = n == len(cr.buf)
				cr.w = n
				cr.c.touch()
				return nil
			}
			bigBufs.Put(cr.big)
			cr.big, cr.buf = nil, cr.small
		} else {
			if cr.w == len(cr.buf) && cr.big == nil {
				cr.big = bigBufs.Get().(*[]byte)
				copy(*cr.big, cr.buf[:cr.w])
				cr.buf = *cr.big
			}
			if cr.full {
				if n := cr.raw.read(cr.buf[cr.w:]); n > 0 {
					cr.full = n == len(cr.buf)-cr.w
					cr.w += n
					cr.c.touch()
					return nil
				}
			}
		}
	}
	n, err := cr.src.Read(cr.buf[cr.w:])
	cr.full = n == len(cr.buf)-cr.w
	cr.w += n
	if n > 0 {
		return nil
	}
	if err == nil {
		err = io.ErrNoProgress
	}
	return err
}

// read reads into p: what is buffered, else (for a large p) straight from
// src, else through the buffer.
func (cr *connReader) read(p []byte) (int, error) {
	if cr.r == cr.w {
		if len(p) >= bigReadBuf {
			cr.r, cr.w = 0, 0
			n, err := cr.src.Read(p)
			cr.full = false
			return n, err
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

// release gives the pooled buffer back (the connection ended).
func (cr *connReader) release() {
	if cr.big != nil {
		bigBufs.Put(cr.big)
		cr.big = nil
	}
	cr.buf, cr.small = nil, nil
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
