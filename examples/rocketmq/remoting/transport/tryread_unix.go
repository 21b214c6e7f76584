//go:build unix

package transport

import (
	"net"
	"syscall"
)

// rawOf returns a non-blocking reader of the connection's socket, nil when
// it has none.
func rawOf(nc net.Conn) *nonblockingReader {
	sc, ok := nc.(syscall.Conn)
	if !ok {
		return nil
	}
	rc, err := sc.SyscallConn()
	if err != nil {
		return nil
	}
	return newNonblockingReader(rc)
}

// nonblockingReader reads what a socket has ready without waiting. Its
// callback is made once, so a read allocates nothing.
type nonblockingReader struct {
	rc syscall.RawConn
	p  []byte
	n  int
	fn func(fd uintptr) bool
}

func newNonblockingReader(rc syscall.RawConn) *nonblockingReader {
	r := &nonblockingReader{rc: rc}
	r.fn = func(fd uintptr) bool {
		m, err := syscall.Read(int(fd), r.p)
		if err == nil && m > 0 {
			r.n = m
		}
		return true // never wait
	}
	return r
}

// read reads into p what is ready: 0 when nothing is (or at the end of
// the stream, which the next blocking read reports).
func (r *nonblockingReader) read(p []byte) int {
	r.p, r.n = p, 0
	_ = r.rc.Read(r.fn)
	r.p = nil
	return r.n
}
