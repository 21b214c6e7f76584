//go:build !unix

package transport

import "net"

// socketReader is not available here: connections read through their
// net.Conn into a borrowed buffer throughout.
type socketReader struct{}

func socketOf(net.Conn, *connReader) *socketReader { return nil }

func (*socketReader) read([]byte) (int, error) { return 0, nil }
