package grpcapi

import (
	"crypto/tls"
	"errors"
	"io"
	"log/slog"
	"net"
	"sync"
	"time"
)

// tlsRecordHandshake is the first byte of every TLS connection (a handshake
// record carrying the ClientHello). An HTTP/2 client without TLS starts
// with the connection preface "PRI * HTTP/2.0", so one byte tells them apart
// — as the Apache RocketMQ proxy does on its one port.
const tlsRecordHandshake = 0x16

// sniffListener accepts TCP connections and hands out either a TLS
// connection whose handshake (ALPN h2) has completed or the plaintext
// connection as it came, depending on the first byte. The sniff and the
// handshake run on a goroutine per connection, bounded by handshakeTimeout,
// so a silent client never blocks Accept.
type sniffListener struct {
	inner   net.Listener
	tls     *tls.Config
	timeout time.Duration
	log     *slog.Logger

	conns chan net.Conn
	done  chan struct{}
	once  sync.Once
	wg    sync.WaitGroup

	mu      sync.Mutex
	pending map[net.Conn]struct{} // connections being sniffed, closed by Close
	err     error                 // the inner Accept's error once it failed
}

func newSniffListener(inner net.Listener, cfg *tls.Config, timeout time.Duration, log *slog.Logger) *sniffListener {
	l := &sniffListener{
		inner: inner, tls: cfg, timeout: timeout, log: log,
		conns:   make(chan net.Conn),
		done:    make(chan struct{}),
		pending: make(map[net.Conn]struct{}),
	}
	l.wg.Add(1)
	go l.acceptLoop()
	return l
}

func (l *sniffListener) acceptLoop() {
	defer l.wg.Done()
	for {
		c, err := l.inner.Accept()
		if err != nil {
			var ne net.Error
			if errors.As(err, &ne) && ne.Timeout() {
				continue
			}
			l.mu.Lock()
			l.err = err
			l.mu.Unlock()
			l.once.Do(func() { close(l.done) })
			return
		}
		l.mu.Lock()
		select {
		case <-l.done:
			l.mu.Unlock()
			_ = c.Close()
			return
		default:
		}
		l.pending[c] = struct{}{}
		l.wg.Add(1)
		l.mu.Unlock()
		go l.sniff(c)
	}
}

func (l *sniffListener) sniff(c net.Conn) {
	defer l.wg.Done()
	out, err := l.classify(c)
	l.mu.Lock()
	delete(l.pending, c)
	l.mu.Unlock()
	if err != nil {
		l.log.Debug("grpcapi: dropped a connection before it spoke gRPC", "client", c.RemoteAddr().String(), "err", err)
		_ = c.Close()
		return
	}
	out = newTaggedConn(out) // conns.go
	select {
	case l.conns <- out:
	case <-l.done:
		_ = out.Close()
	}
}

func (l *sniffListener) classify(c net.Conn) (net.Conn, error) {
	_ = c.SetDeadline(time.Now().Add(l.timeout))
	pc := &prefixConn{Conn: c}
	if _, err := io.ReadFull(c, pc.first[:]); err != nil {
		return nil, err
	}
	if pc.first[0] != tlsRecordHandshake {
		_ = c.SetDeadline(time.Time{})
		return pc, nil
	}
	tc := tls.Server(pc, l.tls)
	if err := tc.Handshake(); err != nil {
		return nil, err
	}
	_ = c.SetDeadline(time.Time{})
	return tc, nil
}

// Accept returns the next classified connection.
func (l *sniffListener) Accept() (net.Conn, error) {
	select {
	case c := <-l.conns:
		return c, nil
	case <-l.done:
		l.mu.Lock()
		err := l.err
		l.mu.Unlock()
		if err == nil {
			err = net.ErrClosed
		}
		return nil, err
	}
}

// Close stops accepting, closes connections still being sniffed and waits
// for its goroutines.
func (l *sniffListener) Close() error {
	l.once.Do(func() { close(l.done) })
	err := l.inner.Close()
	l.mu.Lock()
	for c := range l.pending {
		_ = c.Close()
	}
	l.mu.Unlock()
	l.wg.Wait()
	if errors.Is(err, net.ErrClosed) {
		err = nil
	}
	return err
}

func (l *sniffListener) Addr() net.Addr { return l.inner.Addr() }

// prefixConn gives back the byte the sniff read, then reads the
// connection itself: no buffer is kept for the connection's lifetime.
type prefixConn struct {
	net.Conn
	first [1]byte
	given bool
}

func (p *prefixConn) Read(b []byte) (int, error) {
	if p.given || len(b) == 0 {
		return p.Conn.Read(b)
	}
	p.given = true // once, before any other read of this connection
	b[0] = p.first[0]
	return 1, nil
}
