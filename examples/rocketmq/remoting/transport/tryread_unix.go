//go:build unix

package transport

import (
	"net"
	"syscall"
)

// rawOf returns the connection's raw descriptor when it has one.
func rawOf(nc net.Conn) syscall.RawConn {
	sc, ok := nc.(syscall.Conn)
	if !ok {
		return nil
	}
	rc, err := sc.SyscallConn()
	if err != nil {
		return nil
	}
	return rc
}

// tryRead reads what the socket has ready into p without waiting: 0 when
// nothing is (or at the end of the stream, which the next blocking read
// reports).
func tryRead(rc syscall.RawConn, p []byte) int {
	n := 0
	_ = rc.Read(func(fd uintptr) bool {
		m, err := syscall.Read(int(fd), p)
		if err == nil && m > 0 {
			n = m
		}
		return true // never wait
	})
	return n
}
