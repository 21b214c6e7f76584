package replica

import (
	"encoding/binary"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"net"
	"sync"
	"time"

	"github.com/hashicorp/raft"
)

// groupMux is the one TCP listener the raft groups of a process share.
// Every connection starts with a 6-byte header — the magic "BCG1" and the
// group number (big-endian uint16) — written by the dialling side; the
// accepting side reads it and hands the connection to that group's raft
// transport (a raft.NetworkTransport over a groupStream). One port, one
// connection pool per group and peer, and raft's own wire protocol after
// the header.
//
// The mux owns every connection it accepted: Close closes them all (a
// process going away drops its peers' connections at once, as a killed
// one would), and waits for its goroutines.
type groupMux struct {
	ln      net.Listener
	auth    *AuthStream // ln, when a cluster secret authenticates the connections (before the header)
	log     *slog.Logger
	streams []*groupStream

	stop chan struct{}
	wg   sync.WaitGroup

	mu    sync.Mutex
	conns map[*muxConn]struct{} // accepted, not closed yet
}

var muxMagic = [4]byte{'B', 'C', 'G', '1'}

const (
	muxHeaderLen = 6
	// muxHandshake bounds the wait for a new connection's header.
	muxHandshake = 10 * time.Second
)

// listenGroups listens on addr for groups raft groups; with a secret,
// every connection is authenticated before its header (auth.go).
func listenGroups(addr string, groups int, secret []byte, authTimeout time.Duration, log *slog.Logger) (*groupMux, error) {
	m := &groupMux{log: log, stop: make(chan struct{}), conns: map[*muxConn]struct{}{}}
	var err error
	if len(secret) > 0 {
		m.auth, err = listenAuth(addr, secret, authTimeout, log)
		m.ln = m.auth
	} else {
		m.ln, err = net.Listen("tcp", addr)
	}
	if err != nil {
		return nil, err
	}
	for g := range groups {
		m.streams = append(m.streams, &groupStream{mux: m, group: uint16(g), conns: make(chan net.Conn), closed: make(chan struct{})})
	}
	m.wg.Add(1)
	go m.acceptLoop()
	return m, nil
}

func (m *groupMux) acceptLoop() {
	defer m.wg.Done()
	var delay time.Duration
	for {
		c, err := m.ln.Accept()
		if err != nil {
			select {
			case <-m.stop:
				return
			default:
			}
			delay = min(max(2*delay, 5*time.Millisecond), time.Second)
			m.log.Warn("cluster: raft accept failed", "err", err)
			select {
			case <-m.stop:
				return
			case <-time.After(delay):
			}
			continue
		}
		delay = 0
		mc := &muxConn{Conn: c, mux: m}
		if !m.track(mc) {
			_ = c.Close()
			return
		}
		m.wg.Add(1)
		go m.handshake(mc)
	}
}

// track registers c; false once the mux is closing.
func (m *groupMux) track(c *muxConn) bool {
	m.mu.Lock()
	defer m.mu.Unlock()
	if m.conns == nil {
		return false
	}
	m.conns[c] = struct{}{}
	return true
}

func (m *groupMux) untrack(c *muxConn) {
	m.mu.Lock()
	defer m.mu.Unlock()
	delete(m.conns, c)
}

// handshake reads c's header and hands c to its group's transport.
func (m *groupMux) handshake(c *muxConn) {
	defer m.wg.Done()
	var h [muxHeaderLen]byte
	_ = c.SetReadDeadline(time.Now().Add(muxHandshake))
	if _, err := io.ReadFull(c, h[:]); err != nil {
		_ = c.Close()
		return
	}
	_ = c.SetReadDeadline(time.Time{})
	g := int(binary.BigEndian.Uint16(h[4:]))
	if [4]byte(h[:4]) != muxMagic || g >= len(m.streams) {
		m.log.Warn("cluster: raft connection refused", "remote", c.RemoteAddr().String(), "err", fmt.Errorf("header %q: not one of this process's %d raft groups", h[:], len(m.streams)))
		_ = c.Close()
		return
	}
	s := m.streams[g]
	select {
	case s.conns <- c:
	case <-s.closed:
		_ = c.Close()
	case <-m.stop:
		_ = c.Close()
	}
}

// close stops accepting, closes every accepted connection and waits for
// the mux's goroutines. The groups' transports are closed before it.
func (m *groupMux) close() error {
	close(m.stop)
	err := m.ln.Close()
	m.mu.Lock()
	conns := m.conns
	m.conns = nil
	m.mu.Unlock()
	for c := range conns {
		_ = c.Conn.Close()
	}
	m.wg.Wait()
	return err
}

// muxConn is an accepted connection; closing it forgets it.
type muxConn struct {
	net.Conn
	mux  *groupMux
	once sync.Once
}

func (c *muxConn) Close() error {
	err := c.Conn.Close()
	c.once.Do(func() { c.mux.untrack(c) })
	return err
}

// groupStream is one group's raft.StreamLayer over the mux.
type groupStream struct {
	mux    *groupMux
	group  uint16
	conns  chan net.Conn
	closed chan struct{}
	once   sync.Once
}

var _ raft.StreamLayer = (*groupStream)(nil)

func (s *groupStream) Accept() (net.Conn, error) {
	select {
	case c := <-s.conns:
		return c, nil
	case <-s.closed:
		return nil, net.ErrClosed
	case <-s.mux.stop:
		return nil, net.ErrClosed
	}
}

// Close ends this group's accepts (raft's transport calls it on Close);
// the listener is the mux's.
func (s *groupStream) Close() error {
	s.once.Do(func() { close(s.closed) })
	return nil
}

func (s *groupStream) Addr() net.Addr { return s.mux.ln.Addr() }

// Dial connects to address's mux and names this group.
func (s *groupStream) Dial(address raft.ServerAddress, timeout time.Duration) (net.Conn, error) {
	d := net.Dialer{Timeout: timeout}
	c, err := d.Dial("tcp", string(address))
	if err != nil {
		return nil, err
	}
	if s.mux.auth != nil {
		if err := s.mux.auth.dialOn(c, timeout); err != nil {
			_ = c.Close()
			return nil, fmt.Errorf("raft group %d connection to %s: %w", s.group, address, err)
		}
	}
	var h [muxHeaderLen]byte
	copy(h[:], muxMagic[:])
	binary.BigEndian.PutUint16(h[4:], s.group)
	if timeout > 0 {
		_ = c.SetWriteDeadline(time.Now().Add(timeout))
	}
	if _, err := c.Write(h[:]); err != nil {
		_ = c.Close()
		return nil, errors.Join(fmt.Errorf("raft group %d header to %s", s.group, address), err)
	}
	_ = c.SetWriteDeadline(time.Time{})
	return c, nil
}
