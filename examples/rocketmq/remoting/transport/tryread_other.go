//go:build !unix

package transport

import (
	"net"
	"syscall"
)

func rawOf(net.Conn) syscall.RawConn { return nil }

func tryRead(syscall.RawConn, []byte) int { return 0 }
