//go:build !unix

package transport

import "net"

// nonblockingReader is not available here: connections read into a big
// buffer throughout.
type nonblockingReader struct{}

func rawOf(net.Conn) *nonblockingReader { return nil }

func (*nonblockingReader) read([]byte) int { return 0 }
