package grpcapi

import (
	"context"
	"net"
	"sync/atomic"
	"time"

	v2 "github.com/apache/rocketmq-clients/golang/v5/protocol/v2"
	"google.golang.org/grpc/peer"
)

// A client id belongs to the connection that registered it (its Heartbeat
// or Telemetry settings) and, with ACL, to the access key that signed
// that: another connection may neither unregister it
// (NotifyClientTermination) nor register as it (FORBIDDEN) until the
// owning connection is closed or its owner went silent for ClientExpiry.
// peer.Addr's ip:port alone would do while a connection lives, but an
// address is reused; the tag sniffListener gives each connection is not.

// conn is one accepted connection (of one HTTP/2 client connection).
type conn struct {
	peer string
	gone atomic.Bool // the connection was closed
}

// taggedConn is an accepted connection that carries its tag: gRPC puts its
// RemoteAddr (a *connAddr) in every call's peer.Addr, and closes it when
// the HTTP/2 connection ends, whichever side ended it.
type taggedConn struct {
	net.Conn
	addr *connAddr
}

// connAddr is the remote address of a taggedConn, with its tag.
type connAddr struct {
	net.Addr
	c *conn
}

func newTaggedConn(c net.Conn) *taggedConn {
	ra := c.RemoteAddr()
	tag := &conn{}
	if ra != nil {
		tag.peer = ra.String()
	}
	return &taggedConn{Conn: c, addr: &connAddr{Addr: ra, c: tag}}
}

func (c *taggedConn) RemoteAddr() net.Addr { return c.addr }

func (c *taggedConn) Close() error {
	c.addr.c.gone.Store(true)
	return c.Conn.Close()
}

// remoteAddr is a call's peer address without its tag.
func remoteAddr(a net.Addr) net.Addr {
	if ca, ok := a.(*connAddr); ok {
		return ca.Addr
	}
	return a
}

// connOf is the connection a call came on (nil when it came on a listener
// other than the server's).
func connOf(ctx context.Context) *conn {
	if p, ok := peer.FromContext(ctx); ok {
		if ca, ok := p.Addr.(*connAddr); ok {
			return ca.c
		}
	}
	return nil
}

type userKey struct{}

// userCtx is a call's context carrying the access key that signed it: one
// allocation per call, where context.WithValue takes two (the context and
// the string boxed).
type userCtx struct {
	context.Context
	user string
}

func withUser(ctx context.Context, user string) context.Context { return &userCtx{ctx, user} }

func (c *userCtx) Value(key any) any {
	if _, ok := key.(userKey); ok {
		return c
	}
	return c.Context.Value(key)
}

// userOf is the access key that signed the call ("" without ACL).
func userOf(ctx context.Context) string {
	if u, ok := ctx.Value(userKey{}).(*userCtx); ok {
		return u.user
	}
	return ""
}

// owner is who registered a client id, and when it last claimed it.
type owner struct {
	conn *conn
	user string
	at   time.Time
}

// refuses reports whether o keeps the id from the caller (cn, user): an
// access key other than o's, or a connection other than o's still open —
// unless o has been silent since cutoff (its heartbeats stopped: a client
// whose old connection is half-open reconnects and is let in once it
// expired, as its calls on the new connection keep the entry itself alive).
func (o owner) refuses(cn *conn, user string, cutoff time.Time) bool {
	if o.conn == nil || cn == nil || o.at.Before(cutoff) {
		return false
	}
	if o.user != user {
		return true
	}
	return o.conn != cn && !o.conn.gone.Load()
}

func (o owner) peer() string {
	if o.conn == nil {
		return ""
	}
	return o.conn.peer
}

// claim binds id to the caller's connection, or refuses with FORBIDDEN
// (logged at WARN) while another connection or access key holds it.
func (s *Server) claim(ctx context.Context, call, id string) *v2.Status {
	cn, user := connOf(ctx), userOf(ctx)
	now := s.opts.Now()
	held, ok := s.clients.claim(id, cn, user, now, now.Add(-s.opts.ClientExpiry))
	if ok {
		return nil
	}
	return s.refuseSpoof(ctx, call, id, held)
}

func (s *Server) refuseSpoof(ctx context.Context, call, id string, held owner) *v2.Status {
	peer := ""
	if cn := connOf(ctx); cn != nil {
		peer = cn.peer
	}
	s.log.Warn("grpcapi: client id held by another connection", "call", call, "client", id,
		"owner_peer", held.peer(), "owner_user", held.user, "peer", peer, "user", userOf(ctx))
	return status(v2.Code_FORBIDDEN, "client id %q is registered by another connection", id)
}
