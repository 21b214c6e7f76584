// Package retrylisten wraps a net.Listener so that Accept survives
// temporary errors: EMFILE and ENFILE (the process or the system is out of
// descriptors), ECONNABORTED (a connection reset before it was accepted)
// and the like. Accept then sleeps with an exponential backoff (MinBackoff
// doubling up to MaxBackoff, as net/http's Server does), logs at WARN, and
// tries again; it returns only a permanent error or net.ErrClosed. A
// listener that returned the first such error for good would leave its
// port accepting connections nobody serves.
package retrylisten

import (
	"errors"
	"log/slog"
	"net"
	"sync"
	"sync/atomic"
	"syscall"
	"time"
)

// Bounds of the backoff between two failed accepts.
const (
	MinBackoff = 5 * time.Millisecond
	MaxBackoff = time.Second
)

// Options configure a Listener.
type Options struct {
	// Name labels the log lines ("broker", "namesrv", "grpc").
	Name string
	// Logger receives a WARN line per failed accept (nil = discard).
	Logger *slog.Logger

	sleep func(d time.Duration, done <-chan struct{}) bool // tests: the backoff's wait
}

// Stats are a Listener's counters.
type Stats struct {
	// Retries counts the accepts that failed with a temporary error and
	// were retried.
	Retries uint64 `json:"retries"`
}

// Listener is a net.Listener whose Accept retries temporary errors.
type Listener struct {
	net.Listener
	opts    Options
	log     *slog.Logger
	done    chan struct{}
	once    sync.Once
	retries atomic.Uint64
}

// New wraps l. Close closes l and ends an Accept waiting in a backoff.
func New(l net.Listener, opts Options) *Listener {
	if opts.Logger == nil {
		opts.Logger = slog.New(slog.DiscardHandler)
	}
	if opts.sleep == nil {
		opts.sleep = sleep
	}
	return &Listener{Listener: l, opts: opts, log: opts.Logger, done: make(chan struct{})}
}

// Accept returns the next connection, retrying temporary errors.
func (l *Listener) Accept() (net.Conn, error) {
	var delay time.Duration
	for {
		c, err := l.Listener.Accept()
		if err == nil {
			return c, nil
		}
		select {
		case <-l.done:
			return nil, net.ErrClosed
		default:
		}
		if !Temporary(err) {
			return nil, err
		}
		delay = min(max(2*delay, MinBackoff), MaxBackoff)
		l.retries.Add(1)
		l.log.Warn("accept failed: retrying", "server", l.opts.Name, "addr", l.Addr().String(),
			"err", err, "retry_in", delay)
		if !l.opts.sleep(delay, l.done) {
			return nil, net.ErrClosed
		}
	}
}

// Close closes the listener; an Accept in a backoff returns net.ErrClosed.
func (l *Listener) Close() error {
	l.once.Do(func() { close(l.done) })
	return l.Listener.Close()
}

// Stats returns the listener's counters.
func (l *Listener) Stats() Stats { return Stats{Retries: l.retries.Load()} }

// sleep waits d or until done is closed; false when done.
func sleep(d time.Duration, done <-chan struct{}) bool {
	t := time.NewTimer(d)
	defer t.Stop()
	select {
	case <-t.C:
		return true
	case <-done:
		return false
	}
}

// temporaryErrnos are the accept errors that say nothing about the
// listener itself (accept(2)'s ERRORS, and Linux's passing-on of the
// pending connection's network errors).
var temporaryErrnos = []syscall.Errno{
	syscall.EMFILE, syscall.ENFILE, syscall.ENOBUFS, syscall.ENOMEM, // out of resources
	syscall.ECONNABORTED, syscall.ECONNRESET, syscall.EPROTO, syscall.EPERM, // that connection only
	syscall.EINTR, syscall.EAGAIN,
	syscall.ENETDOWN, syscall.ENOPROTOOPT, syscall.EHOSTDOWN,
	syscall.EHOSTUNREACH, syscall.EOPNOTSUPP, syscall.ENETUNREACH,
}

// Temporary reports whether an Accept error is worth retrying: one of the
// errnos above, or a timeout. net.ErrClosed is not.
func Temporary(err error) bool {
	if err == nil || errors.Is(err, net.ErrClosed) {
		return false
	}
	for _, e := range temporaryErrnos {
		if errors.Is(err, e) {
			return true
		}
	}
	var ne net.Error
	return errors.As(err, &ne) && ne.Timeout()
}
