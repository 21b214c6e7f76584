package replica

import (
	"bytes"
	"crypto/hmac"
	"crypto/rand"
	"crypto/sha256"
	"crypto/subtle"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"net"
	"net/netip"
	"os"
	"sync"
	"sync/atomic"
	"time"

	"github.com/hashicorp/raft"
)

// Raft port authentication (Config.ClusterSecret).
//
// Every connection to a raft port starts with a mutual challenge–response
// keyed by the cluster's shared secret, before the group header
// (groupmux.go) and before any raft RPC is read:
//
//	dialer → acceptor  "BCA1" nonceD (32 random bytes)
//	acceptor → dialer  "BCA1" nonceA (32) HMAC-SHA256(K, "acceptor" nonceD nonceA)
//	dialer → acceptor  HMAC-SHA256(K, "dialer" nonceD nonceA)
//
// where K is HMAC-SHA256(secret, "brokercore raft v1"). Each side checks
// the other's MAC in constant time; the messages have fixed sizes and the
// whole handshake must finish within a bound (10 s), so a peer can make
// the acceptor read at most 68 bytes and hold one goroutine that long. A
// dialer learns the acceptor knows the secret before it says anything that
// proves it knows it too, and fresh nonces on both sides make a recorded
// handshake useless. A refused connection is closed, logged (its remote
// address) and counted (AuthStream.Refused). The handshake authenticates;
// it does not encrypt: raft's traffic after it is plain TCP, so keep the
// raft port on a network that only the members reach.

// MinSecretLen is the shortest cluster secret accepted.
const MinSecretLen = 16

// ErrRaftAuth: a raft connection did not prove knowledge of the cluster
// secret (or the secret itself is unusable).
var ErrRaftAuth = errors.New("raft authentication failed")

// ErrInsecureRaft: a raft address beyond loopback without a cluster secret
// (Config.InsecureRaft allows it).
var ErrInsecureRaft = errors.New("refusing a non-loopback raft address without a cluster secret (set a cluster secret, or allow it explicitly)")

var authMagic = [4]byte{'B', 'C', 'A', '1'}

const (
	authNonceLen = 32
	authHelloLen = 4 + authNonceLen               // dialer's first message
	authReplyLen = 4 + authNonceLen + sha256.Size // acceptor's answer
	authProofLen = sha256.Size                    // dialer's proof
	authMaxRead  = authHelloLen + authProofLen    // what an acceptor reads
	authLabel    = "brokercore raft v1"           // derives K from the secret
	authAcceptor = "acceptor"                     // MAC labels
	authDialer   = "dialer"                       //
	authPending  = 64                             // handshakes under way per listener
	authPerPeer  = 8                              // of them from one source address
	authTimeout  = 10 * time.Second               // whole handshake
	authRefusals = 16                             // refusal log lines per minute
)

// LoadSecret reads a cluster secret file: its content less surrounding
// white space, at least MinSecretLen bytes. The file should be readable by
// the broker's user only; a secret never belongs on a command line.
func LoadSecret(path string) ([]byte, error) {
	b, err := os.ReadFile(path)
	if err != nil {
		return nil, fmt.Errorf("cluster secret: %w", err)
	}
	s := bytes.TrimSpace(b)
	if len(s) < MinSecretLen {
		return nil, fmt.Errorf("cluster secret %s: %d bytes, want at least %d: %w", path, len(s), MinSecretLen, ErrRaftAuth)
	}
	return s, nil
}

// DeriveKey is a key for purpose derived from the cluster secret
// (HMAC-SHA256(secret, purpose)): a host that authenticates its own
// traffic between members with the secret uses a key of its own purpose,
// never the raft handshake's.
func DeriveKey(secret []byte, purpose string) []byte {
	m := hmac.New(sha256.New, secret)
	m.Write([]byte(purpose))
	return m.Sum(nil)
}

func authMAC(key []byte, label string, nonceD, nonceA []byte) []byte {
	m := hmac.New(sha256.New, key)
	m.Write([]byte(label))
	m.Write(nonceD)
	m.Write(nonceA)
	return m.Sum(nil)
}

// parseHello reads a dialer's first message: the magic and its nonce.
func parseHello(b []byte) ([]byte, error) {
	if len(b) != authHelloLen || [4]byte(b[:4]) != authMagic {
		return nil, fmt.Errorf("%w: not a raft handshake", ErrRaftAuth)
	}
	return b[4:], nil
}

// parseReply reads an acceptor's answer: its nonce and MAC.
func parseReply(b []byte) (nonce, mac []byte, err error) {
	if len(b) != authReplyLen || [4]byte(b[:4]) != authMagic {
		return nil, nil, fmt.Errorf("%w: not a raft handshake answer", ErrRaftAuth)
	}
	return b[4 : 4+authNonceLen], b[4+authNonceLen:], nil
}

// acceptHandshake runs the acceptor's side on rw: nil once the dialer
// proved the key.
func acceptHandshake(rw io.ReadWriter, key []byte) error {
	var hello [authHelloLen]byte
	if _, err := io.ReadFull(rw, hello[:]); err != nil {
		return fmt.Errorf("%w: hello: %w", ErrRaftAuth, err)
	}
	nonceD, err := parseHello(hello[:])
	if err != nil {
		return err
	}
	reply := make([]byte, 0, authReplyLen)
	reply = append(reply, authMagic[:]...)
	nonceA := make([]byte, authNonceLen)
	_, _ = rand.Read(nonceA)
	reply = append(reply, nonceA...)
	reply = append(reply, authMAC(key, authAcceptor, nonceD, nonceA)...)
	if _, err := rw.Write(reply); err != nil {
		return fmt.Errorf("%w: answer: %w", ErrRaftAuth, err)
	}
	var proof [authProofLen]byte
	if _, err := io.ReadFull(rw, proof[:]); err != nil {
		return fmt.Errorf("%w: proof: %w", ErrRaftAuth, err)
	}
	if subtle.ConstantTimeCompare(proof[:], authMAC(key, authDialer, nonceD, nonceA)) != 1 {
		return fmt.Errorf("%w: wrong proof (another cluster secret)", ErrRaftAuth)
	}
	return nil
}

// dialHandshake runs the dialer's side on rw.
func dialHandshake(rw io.ReadWriter, key []byte) error {
	hello := make([]byte, 0, authHelloLen)
	hello = append(hello, authMagic[:]...)
	nonceD := make([]byte, authNonceLen)
	_, _ = rand.Read(nonceD)
	hello = append(hello, nonceD...)
	if _, err := rw.Write(hello); err != nil {
		return fmt.Errorf("%w: hello: %w", ErrRaftAuth, err)
	}
	var reply [authReplyLen]byte
	if _, err := io.ReadFull(rw, reply[:]); err != nil {
		return fmt.Errorf("%w: answer: %w", ErrRaftAuth, err)
	}
	nonceA, mac, err := parseReply(reply[:])
	if err != nil {
		return err
	}
	if subtle.ConstantTimeCompare(mac, authMAC(key, authAcceptor, nonceD, nonceA)) != 1 {
		return fmt.Errorf("%w: the peer does not know the cluster secret", ErrRaftAuth)
	}
	if _, err := rw.Write(authMAC(key, authDialer, nonceD, nonceA)); err != nil {
		return fmt.Errorf("%w: proof: %w", ErrRaftAuth, err)
	}
	return nil
}

// AuthStream is a raft.StreamLayer that authenticates every connection of
// the one it wraps with the cluster secret (see the top of this file):
// Accept hands out only connections whose dialer proved the secret, Dial
// proves it to the acceptor. Handshakes of accepted connections run in
// goroutines of their own (at most 64 at once, more wait in the listen
// backlog; at most 8 from one source address, more are refused at once),
// so a slow peer delays nobody else and one host cannot take every slot.
type AuthStream struct {
	inner   raft.StreamLayer
	key     []byte
	log     *slog.Logger
	timeout time.Duration // tests shorten it

	refused atomic.Uint64
	logged  atomic.Int64 // refusal log lines in the current minute window
	window  atomic.Int64 // that window's unix minute

	ready chan net.Conn
	slots chan struct{}

	pendMu  sync.Mutex
	pending map[netip.Addr]int // handshakes under way by source address

	stop chan struct{}
	once sync.Once
	wg   sync.WaitGroup
	err  error // the accept loop's end (after stop)
}

var _ raft.StreamLayer = (*AuthStream)(nil)

// NewAuthStream authenticates inner's connections with secret (at least
// MinSecretLen bytes). It owns inner: it accepts from it at once (Accept
// hands the authenticated connections out), and Close closes it.
func NewAuthStream(inner raft.StreamLayer, secret []byte, log *slog.Logger) (*AuthStream, error) {
	return newAuthStream(inner, secret, 0, log)
}

// newAuthStream is NewAuthStream with a handshake bound (0 = 10 s).
func newAuthStream(inner raft.StreamLayer, secret []byte, timeout time.Duration, log *slog.Logger) (*AuthStream, error) {
	if len(secret) < MinSecretLen {
		return nil, fmt.Errorf("cluster secret of %d bytes, want at least %d: %w", len(secret), MinSecretLen, ErrRaftAuth)
	}
	if log == nil {
		log = slog.New(slog.DiscardHandler)
	}
	if timeout <= 0 {
		timeout = authTimeout
	}
	s := &AuthStream{inner: inner, key: DeriveKey(secret, authLabel), log: log, timeout: timeout,
		ready: make(chan net.Conn), slots: make(chan struct{}, authPending), stop: make(chan struct{}),
		pending: map[netip.Addr]int{}}
	s.wg.Add(1)
	go s.acceptLoop()
	return s, nil
}

// ListenAuth listens on addr (TCP) and authenticates its connections with
// secret: raft.NewNetworkTransport over it is a TCP transport that talks
// only to members.
func ListenAuth(addr string, secret []byte, log *slog.Logger) (*AuthStream, error) {
	return listenAuth(addr, secret, 0, log)
}

// listenAuth is ListenAuth with a handshake bound (0 = 10 s).
func listenAuth(addr string, secret []byte, timeout time.Duration, log *slog.Logger) (*AuthStream, error) {
	tcp, err := listenTCP(addr)
	if err != nil {
		return nil, err
	}
	s, err := newAuthStream(tcp, secret, timeout, log)
	if err != nil {
		_ = tcp.Close()
		return nil, err
	}
	return s, nil
}

// Refused counts the connections refused so far.
func (s *AuthStream) Refused() uint64 { return s.refused.Load() }

// Accept returns the next authenticated connection.
func (s *AuthStream) Accept() (net.Conn, error) {
	select {
	case c := <-s.ready:
		return c, nil
	case <-s.stop:
		return nil, net.ErrClosed
	}
}

func (s *AuthStream) acceptLoop() {
	defer s.wg.Done()
	var delay time.Duration
	for {
		select {
		case s.slots <- struct{}{}:
		case <-s.stop:
			return
		}
		c, err := s.inner.Accept()
		if err != nil {
			<-s.slots
			select {
			case <-s.stop:
				return
			default:
			}
			if errors.Is(err, net.ErrClosed) {
				return
			}
			delay = min(max(2*delay, 5*time.Millisecond), time.Second)
			s.log.Warn("cluster: raft accept failed", "err", err)
			select {
			case <-s.stop:
				return
			case <-time.After(delay):
			}
			continue
		}
		delay = 0
		src := sourceAddr(c)
		if !s.admit(src) {
			s.refuse(c, fmt.Errorf("%w: %d handshakes from %s under way already", ErrRaftAuth, authPerPeer, src))
			_ = c.Close()
			<-s.slots
			continue
		}
		s.wg.Add(1)
		go s.handshake(c, src)
	}
}

// admit counts a handshake from src; false when src has authPerPeer under
// way (one host cannot take every slot).
func (s *AuthStream) admit(src netip.Addr) bool {
	s.pendMu.Lock()
	defer s.pendMu.Unlock()
	if s.pending[src] >= authPerPeer {
		return false
	}
	s.pending[src]++
	return true
}

func (s *AuthStream) release(src netip.Addr) {
	s.pendMu.Lock()
	defer s.pendMu.Unlock()
	if s.pending[src]--; s.pending[src] <= 0 {
		delete(s.pending, src)
	}
}

func sourceAddr(c net.Conn) netip.Addr {
	if ta, ok := c.RemoteAddr().(*net.TCPAddr); ok {
		return ta.AddrPort().Addr().Unmap()
	}
	return netip.Addr{}
}

// handshake authenticates c (from src) and hands it to Accept, or
// refuses it.
func (s *AuthStream) handshake(c net.Conn, src netip.Addr) {
	defer s.wg.Done()
	defer func() { <-s.slots }()
	defer s.release(src)
	done := make(chan struct{})
	defer close(done)
	go func() { // Close ends a handshake under way
		select {
		case <-s.stop:
			_ = c.Close()
		case <-done:
		}
	}()
	_ = c.SetDeadline(time.Now().Add(s.timeout))
	err := acceptHandshake(c, s.key)
	if err != nil {
		select {
		case <-s.stop:
		default:
			s.refuse(c, err)
		}
		_ = c.Close()
		return
	}
	_ = c.SetDeadline(time.Time{})
	select {
	case s.ready <- c:
	case <-s.stop:
		_ = c.Close()
	}
}

// refuse counts and logs a refused connection; the log is limited to a few
// lines a minute (a scan of the port must not flood it), the count is not.
func (s *AuthStream) refuse(c net.Conn, err error) {
	s.refused.Add(1)
	now := time.Now().Unix() / 60
	if s.window.Swap(now) != now {
		s.logged.Store(0)
	}
	if s.logged.Add(1) <= authRefusals {
		s.log.Warn("cluster: raft connection refused", "remote", c.RemoteAddr().String(), "err", err)
	}
}

// Dial connects to address and proves the secret; an acceptor that does
// not know it is refused with ErrRaftAuth.
func (s *AuthStream) Dial(address raft.ServerAddress, timeout time.Duration) (net.Conn, error) {
	c, err := s.inner.Dial(address, timeout)
	if err != nil {
		return nil, err
	}
	if err := s.dialOn(c, timeout); err != nil {
		_ = c.Close()
		return nil, fmt.Errorf("raft connection to %s: %w", address, err)
	}
	return c, nil
}

// dialOn runs the dialer's side on a connection just made.
func (s *AuthStream) dialOn(c net.Conn, timeout time.Duration) error {
	if timeout <= 0 || timeout > s.timeout {
		timeout = s.timeout
	}
	_ = c.SetDeadline(time.Now().Add(timeout))
	if err := dialHandshake(c, s.key); err != nil {
		return err
	}
	return c.SetDeadline(time.Time{})
}

// Close stops accepting, ends the handshakes under way, closes the
// wrapped stream layer and waits. Connections handed out are their
// owners'.
func (s *AuthStream) Close() error {
	s.once.Do(func() {
		close(s.stop)
		s.err = s.inner.Close()
		s.wg.Wait()
	})
	return s.err
}

// Addr is the wrapped stream layer's.
func (s *AuthStream) Addr() net.Addr { return s.inner.Addr() }

// tcpStream is a plain TCP raft.StreamLayer (raft's own is built only
// inside NewTCPTransport).
type tcpStream struct {
	ln net.Listener
}

func listenTCP(addr string) (*tcpStream, error) {
	ln, err := net.Listen("tcp", addr)
	if err != nil {
		return nil, err
	}
	// raft advertises the listener's address: it must be one a peer can dial.
	if ta, ok := ln.Addr().(*net.TCPAddr); !ok || ta.IP.IsUnspecified() {
		_ = ln.Close()
		return nil, fmt.Errorf("raft address %s: %w: listen on the address the peers dial, not an unspecified one", addr, ErrInvalid)
	}
	return &tcpStream{ln: ln}, nil
}

func (t *tcpStream) Accept() (net.Conn, error) { return t.ln.Accept() }
func (t *tcpStream) Close() error              { return t.ln.Close() }
func (t *tcpStream) Addr() net.Addr            { return t.ln.Addr() }

func (t *tcpStream) Dial(address raft.ServerAddress, timeout time.Duration) (net.Conn, error) {
	d := net.Dialer{Timeout: timeout}
	return d.Dial("tcp", string(address))
}

// LoopbackAddr reports whether a listen address binds loopback only
// ("localhost" or a loopback IP; not "" or ":port", which bind every
// interface).
func LoopbackAddr(addr string) bool {
	host, _, err := net.SplitHostPort(addr)
	if err != nil {
		return false
	}
	if host == "localhost" {
		return true
	}
	ip, err := netip.ParseAddr(host)
	return err == nil && ip.Unmap().IsLoopback()
}

// RaftRefused counts the raft connections this node refused for want of
// the cluster secret (0 without one).
func (n *Node) RaftRefused() uint64 {
	if n.auth == nil {
		return 0
	}
	return n.auth.Refused()
}

// RaftRefused counts the raft connections the member refused for want of
// the cluster secret, over its groups' one listener (or its one node's).
func (gs *Groups) RaftRefused() uint64 {
	if gs.mux != nil {
		if gs.mux.auth == nil {
			return 0
		}
		return gs.mux.auth.Refused()
	}
	var sum uint64
	for _, n := range gs.nodes {
		sum += n.RaftRefused()
	}
	return sum
}

// checkRaftAddr refuses a raft address beyond loopback without a cluster
// secret unless cfg.InsecureRaft says so.
func checkRaftAddr(cfg Config) error {
	if len(cfg.ClusterSecret) > 0 || cfg.InsecureRaft || cfg.RaftAddr == "" || LoopbackAddr(cfg.RaftAddr) {
		return nil
	}
	return fmt.Errorf("config: raft address %s: %w", cfg.RaftAddr, ErrInsecureRaft)
}
