package grpcapi

import (
	"errors"
	"strconv"
	"strings"
)

var errBadHandle = errors.New("grpcapi: malformed receipt handle")

// receipt is the receipt handle a client holds: the queue and offset of the
// message (so a forward to the dead-letter topic can read it) and the pop
// service's own handle, which is signed and decides every settle. A forged
// queue or offset is caught by comparing the message id the client sends.
type receipt struct {
	queue  int
	offset int64
	pop    string
}

func (r receipt) String() string {
	var buf [128]byte // one allocation (the string) for a usual handle
	return string(r.appendTo(buf[:0]))
}

func (r receipt) appendTo(b []byte) []byte {
	b = strconv.AppendInt(b, int64(r.queue), 10)
	b = append(b, '.')
	b = strconv.AppendInt(b, r.offset, 10)
	b = append(b, '.')
	return append(b, r.pop...)
}

func parseReceipt(h string) (receipt, error) {
	q, rest, ok1 := strings.Cut(h, ".")
	o, p, ok2 := strings.Cut(rest, ".")
	if !ok1 || !ok2 || p == "" {
		return receipt{}, errBadHandle
	}
	queue, err1 := strconv.Atoi(q)
	off, err2 := strconv.ParseInt(o, 10, 64)
	if err1 != nil || err2 != nil || queue < 0 || off < 0 {
		return receipt{}, errBadHandle
	}
	return receipt{queue: queue, offset: off, pop: p}, nil
}
