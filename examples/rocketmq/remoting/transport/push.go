package transport

import "github.com/brokercore/brokercore/examples/rocketmq/remoting/wire"

// Push is Notify with a body: a oneway request to the client (the reply of
// a request/reply exchange, PUSH_REPLY_MESSAGE_TO_CLIENT), dropped and
// counted when the connection's queue is full.
func (c *Conn) Push(code int16, ext map[string]string, body []byte) bool {
	cmd := &wire.Command{Code: code, Language: "GO", Version: wire.ProtocolVersion, Flag: wire.FlagOneway,
		ExtFields: ext, Body: body, Opaque: notifyOpaque.Add(1)}
	if c.ctx.Err() != nil {
		return false
	}
	select {
	case c.out <- cmd:
		c.srv.notified.Add(1)
		return true
	default:
		c.srv.notifyDrops.Add(1)
		return false
	}
}
