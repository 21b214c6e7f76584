//go:build unix

package transport

import (
	"io"
	"net"
	"os"
	"syscall"
)

// socketOf returns the reader of the connection's socket descriptor, nil
// when it has none, or when nc is not a plain TCP or Unix connection: a
// wrapper's Read (a sniffing listener's buffered prefix) is read through
// it, even when the wrapper exposes the descriptor.
func socketOf(nc net.Conn, cr *connReader) *socketReader {
	var sc syscall.Conn
	switch c := nc.(type) {
	case *net.TCPConn:
		sc = c
	case *net.UnixConn:
		sc = c
	default:
		return nil
	}
	rc, err := sc.SyscallConn()
	if err != nil {
		return nil
	}
	r := &socketReader{rc: rc}
	r.fn = func(fd uintptr) bool {
		p := r.p
		if p == nil {
			p = cr.borrow()
		}
		for {
			n, err := syscall.Read(int(fd), p)
			switch err {
			case syscall.EINTR:
				continue
			case syscall.EAGAIN:
				if r.p == nil {
					cr.giveBack() // nothing is ready: wait without a buffer
				}
				return false // wait for the poller, then read again
			case nil:
				r.n = n
			default:
				r.err = os.NewSyscallError("read", err)
			}
			return true
		}
	}
	return r
}

// socketReader reads a socket through its descriptor: one read system call
// takes what is ready; when nothing is, it waits for the runtime's poller
// (RawConn.Read), as net.Conn.Read does. Its callback is made once, so a
// read allocates nothing.
type socketReader struct {
	rc  syscall.RawConn
	p   []byte // where to read; nil: the connReader's borrowed buffer
	n   int
	err error
	fn  func(fd uintptr) bool
}

// read reads into p (nil: the borrowed buffer) what is ready, waiting for
// some; io.EOF at the end of the stream.
func (r *socketReader) read(p []byte) (int, error) {
	r.p, r.n, r.err = p, 0, nil
	err := r.rc.Read(r.fn)
	r.p = nil
	switch {
	case err != nil:
		return 0, err
	case r.err != nil:
		return 0, r.err
	case r.n == 0:
		return 0, io.EOF
	}
	return r.n, nil
}
