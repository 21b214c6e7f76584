package retrylisten

import (
	"bytes"
	"errors"
	"fmt"
	"log/slog"
	"net"
	"os"
	"sync"
	"syscall"
	"testing"
	"time"

	"github.com/stretchr/testify/require"
	"go.uber.org/goleak"
)

func TestMain(m *testing.M) { goleak.VerifyTestMain(m) }

// fakeListener fails its first accepts with errs, then hands out conns.
type fakeListener struct {
	mu     sync.Mutex
	errs   []error
	calls  int
	closed chan struct{}
	once   sync.Once
}

func newFake(errs ...error) *fakeListener {
	return &fakeListener{errs: errs, closed: make(chan struct{})}
}

func (f *fakeListener) Accept() (net.Conn, error) {
	f.mu.Lock()
	f.calls++
	if len(f.errs) > 0 {
		err := f.errs[0]
		f.errs = f.errs[1:]
		f.mu.Unlock()
		return nil, err
	}
	f.mu.Unlock()
	select {
	case <-f.closed:
		return nil, net.ErrClosed
	default:
	}
	a, b := net.Pipe()
	b.Close()
	return a, nil
}

func (f *fakeListener) Close() error   { f.once.Do(func() { close(f.closed) }); return nil }
func (f *fakeListener) Addr() net.Addr { return &net.TCPAddr{IP: net.IPv4(127, 0, 0, 1), Port: 1} }

func opErr(errno syscall.Errno) error {
	return &net.OpError{Op: "accept", Net: "tcp", Err: os.NewSyscallError("accept4", errno)}
}

type syncBuf struct {
	mu sync.Mutex
	b  bytes.Buffer
}

func (s *syncBuf) Write(p []byte) (int, error) { s.mu.Lock(); defer s.mu.Unlock(); return s.b.Write(p) }
func (s *syncBuf) String() string              { s.mu.Lock(); defer s.mu.Unlock(); return s.b.String() }

// TestAcceptRetriesTemporaryErrors: EMFILE, ENFILE, ECONNABORTED (and
// the other temporary errors) are retried after a backoff and logged at
// WARN; the accept that then works is returned.
func TestAcceptRetriesTemporaryErrors(t *testing.T) {
	var sleeps []time.Duration
	var logs syncBuf
	f := newFake(opErr(syscall.EMFILE), opErr(syscall.EMFILE), opErr(syscall.ENFILE), opErr(syscall.ECONNABORTED),
		opErr(syscall.EMFILE), opErr(syscall.ENOBUFS))
	l := New(f, Options{Name: "test", Logger: slog.New(slog.NewTextHandler(&logs, nil)),
		sleep: func(d time.Duration, _ <-chan struct{}) bool { sleeps = append(sleeps, d); return true }})
	c, err := l.Accept()
	require.NoError(t, err)
	c.Close()
	require.Equal(t, 7, f.calls)
	require.Equal(t, []time.Duration{5 * time.Millisecond, 10 * time.Millisecond, 20 * time.Millisecond,
		40 * time.Millisecond, 80 * time.Millisecond, 160 * time.Millisecond}, sleeps)
	require.Equal(t, uint64(6), l.Stats().Retries)
	require.Contains(t, logs.String(), "level=WARN")
	require.Contains(t, logs.String(), "too many open files")
	// The backoff starts again after an accept that worked.
	f.mu.Lock()
	f.errs = []error{opErr(syscall.EMFILE)}
	f.mu.Unlock()
	sleeps = nil
	c, err = l.Accept()
	require.NoError(t, err)
	c.Close()
	require.Equal(t, []time.Duration{5 * time.Millisecond}, sleeps)
	require.NoError(t, l.Close())
	_, err = l.Accept()
	require.ErrorIs(t, err, net.ErrClosed)
}

func TestBackoffIsCapped(t *testing.T) {
	errs := make([]error, 20)
	for i := range errs {
		errs[i] = opErr(syscall.EMFILE)
	}
	var last time.Duration
	l := New(newFake(errs...), Options{sleep: func(d time.Duration, _ <-chan struct{}) bool { last = d; return true }})
	c, err := l.Accept()
	require.NoError(t, err)
	c.Close()
	require.Equal(t, MaxBackoff, last)
	require.NoError(t, l.Close())
}

// TestPermanentErrorAndCloseEndAccept: a closed listener and a
// non-temporary error end Accept at once; Close during a backoff ends it
// too.
func TestPermanentErrorAndCloseEndAccept(t *testing.T) {
	perm := errors.New("boom")
	l := New(newFake(perm), Options{})
	_, err := l.Accept()
	require.ErrorIs(t, err, perm)
	require.NoError(t, l.Close())

	f := newFake(opErr(syscall.EMFILE))
	started := make(chan struct{})
	l = New(f, Options{sleep: func(_ time.Duration, done <-chan struct{}) bool { close(started); <-done; return false }})
	res := make(chan error, 1)
	go func() { _, err := l.Accept(); res <- err }()
	<-started
	require.NoError(t, l.Close())
	require.ErrorIs(t, <-res, net.ErrClosed)
}

func TestTemporary(t *testing.T) {
	for _, e := range []syscall.Errno{syscall.EMFILE, syscall.ENFILE, syscall.ECONNABORTED, syscall.ENOBUFS, syscall.ENOMEM,
		syscall.EINTR, syscall.ECONNRESET, syscall.EPROTO, syscall.EPERM} {
		require.True(t, Temporary(opErr(e)), e.Error())
	}
	require.False(t, Temporary(net.ErrClosed))
	require.False(t, Temporary(fmt.Errorf("x: %w", net.ErrClosed)))
	require.False(t, Temporary(errors.New("other")))
}
