package replicated

import (
	"context"
	"crypto/hmac"
	"crypto/sha256"
	"encoding/hex"
	"errors"
	"log/slog"
	"maps"
	"net"
	"net/netip"
	"strconv"
	"strings"
	"sync/atomic"

	"google.golang.org/grpc"
	"google.golang.org/grpc/metadata"
	"google.golang.org/grpc/peer"

	"github.com/brokercore/brokercore/acl"
	"github.com/brokercore/brokercore/examples/cluster/replica"
	"github.com/brokercore/brokercore/examples/rocketmq/remoting/authadmin"
	"github.com/brokercore/brokercore/examples/rocketmq/remoting/remoteacl"
	"github.com/brokercore/brokercore/examples/rocketmq/remoting/transport"
	"github.com/brokercore/brokercore/examples/rocketmq/remoting/wire"
	"github.com/brokercore/brokercore/store"
)

// Access control of a replicated node (Config.ACL; see the package doc).
//
// Every node loads the same ACL file and checks the requests it serves
// itself with remoteacl, as a single broker does. The writes a follower
// forwards (sends, send-backs, table and ACL changes) are checked by the
// leader, which holds the newest rules: the follower refuses one without
// credentials itself and passes the others on with the client's own
// fields and signature, marked with forwardedField = "v1 <client address>
// <MAC>", an HMAC-SHA256 under a key derived from Config.ClusterSecret
// over the client's address, the request code, its AccessKey and its
// Signature. The leader removes the mark (what the client signed is then
// exactly what it sent), verifies the client's signature and rules with
// the address the member vouched for, and serves it. A mark that does not
// verify — a client that sets the field itself, signed or not — is
// refused with NO_PERMISSION before anything else, so "forwarded" status
// cannot be forged, and without the mark a request is the connection's
// own.

// forwardPurpose derives the forwarding key from the cluster secret.
const forwardPurpose = "brokercore rocketmq forward v1"

// fwdKey is the context key of a verified forward's client address.
type fwdKey struct{}

// forwardedClient is the client address a verified mark named (false when
// the request is not a forwarded one).
func forwardedClient(ctx context.Context) (net.Addr, bool) {
	a, ok := ctx.Value(fwdKey{}).(net.Addr)
	return a, ok
}

func forwardMAC(key []byte, client string, req *wire.Command) []byte {
	m := hmac.New(sha256.New, key)
	for _, s := range [...]string{client, strconv.Itoa(int(req.Code)), req.ExtFields[acl.FieldAccessKey], req.ExtFields[acl.FieldSignature]} {
		m.Write([]byte(s))
		m.Write([]byte{0})
	}
	return m.Sum(nil)
}

// markForward is req to forward for client: a copy carrying the mark.
func markForward(key []byte, client string, req *wire.Command) *wire.Command {
	cmd := *req
	cmd.ExtFields = maps.Clone(req.ExtFields)
	if cmd.ExtFields == nil {
		cmd.ExtFields = map[string]string{}
	}
	cmd.ExtFields[forwardedField] = "v1 " + client + " " + hex.EncodeToString(forwardMAC(key, client, req))
	return &cmd
}

// verifyMark checks a forwarded mark against req (without the mark) and
// returns the client address it vouches for.
func verifyMark(key []byte, mark string, req *wire.Command) (net.Addr, bool) {
	f := strings.Fields(mark)
	if len(f) != 3 || f[0] != "v1" {
		return nil, false
	}
	got, err := hex.DecodeString(f[2])
	if err != nil || !hmac.Equal(got, forwardMAC(key, f[1], req)) {
		return nil, false
	}
	ap, err := netip.ParseAddrPort(f[1])
	if err != nil {
		return nil, false
	}
	return net.TCPAddrFromAddrPort(ap), true
}

// gate is the broker listener's first handler with ACL on: it verifies
// and removes forwarded marks (above) before the node's handler.
type gate struct {
	h      *handler
	key    []byte
	log    *slog.Logger
	forged atomic.Uint64
}

// Serve implements transport.Handler.
func (g *gate) Serve(ctx context.Context, c *transport.Conn, req *wire.Command) *wire.Command {
	mark, ok := req.ExtFields[forwardedField]
	if !ok {
		return g.h.Serve(ctx, c, req)
	}
	cmd := *req
	cmd.ExtFields = maps.Clone(req.ExtFields)
	delete(cmd.ExtFields, forwardedField)
	client, ok := verifyMark(g.key, mark, &cmd)
	if !ok {
		g.forged.Add(1)
		g.log.Warn("forwarded mark refused: not a member's", "code", req.Code, "user", req.ExtFields[acl.FieldAccessKey],
			"client", c.RemoteAddr().String())
		return wire.NewResponse(req, wire.NoPermission, "acl: the request's forwarded mark does not verify (only a member of the cluster forwards)")
	}
	return g.h.Serve(context.WithValue(ctx, fwdKey{}, client), c, &cmd)
}

// Inline implements transport.InlineHandler: a marked request goes
// through Serve.
func (g *gate) Inline(req *wire.Command) bool {
	_, marked := req.ExtFields[forwardedField]
	return !marked && g.h.Inline(req)
}

// Batch and ServeBatch implement transport.BatchHandler.
func (g *gate) Batch(req *wire.Command) bool {
	_, marked := req.ExtFields[forwardedField]
	return !marked && g.h.Batch(req)
}

func (g *gate) ServeBatch(ctx context.Context, c *transport.Conn, reqs []*wire.Command) []*wire.Command {
	return g.h.ServeBatch(ctx, c, reqs)
}

// ConnOpened and ConnClosed implement transport.ConnObserver.
func (g *gate) ConnOpened(c *transport.Conn) { g.h.ConnOpened(c) }
func (g *gate) ConnClosed(c *transport.Conn) { g.h.ConnClosed(c) }

// localHandler is what a node serves itself, behind remoteacl.
type localHandler struct{ h *handler }

func (l localHandler) Serve(ctx context.Context, c *transport.Conn, req *wire.Command) *wire.Command {
	return l.h.serveLocal(ctx, c, req)
}

func (l localHandler) Batch(req *wire.Command) bool { return l.h.Batch(req) }

func (l localHandler) ServeBatch(ctx context.Context, c *transport.Conn, reqs []*wire.Command) []*wire.Command {
	return l.h.b.ServeBatch(ctx, c, reqs)
}

// An AUTH_* edit is decided when it is applied, not only when it is
// received: the node that logs it checks it first (it refuses at once
// what its rules refuse), and logs the client's address with it
// (propEditor); every node then authenticates and authorizes the edit
// again with remoteacl when applying it, against its rules at that point
// of the admin log. Every node started from the same file and applied the
// same edits before it, so every node decides the same — an edit whose
// editor lost the right in an edit logged before it (a revoke that landed
// between the edit's check and its log entry) is refused NO_PERMISSION on
// every node, and the proposer is answered that. An entry logged without
// an address (before this) is decided with none: a rule with sourceIps
// does not allow it.

// propEditor, a property of an AUTH_* edit's admin log entry, is its
// client's address.
const propEditor = "BROKERCORE_CLIENT"

// editorAddr is the client address an admin log entry names (an empty
// address when it names none).
func editorAddr(m *store.Message) net.Addr {
	ap, err := netip.ParseAddrPort(m.Properties[propEditor])
	if err != nil {
		return &net.TCPAddr{}
	}
	return net.TCPAddrFromAddrPort(ap)
}

// isAuthChange: an ACL change (AUTH_CREATE_USER …) to replicate.
func isAuthChange(code int16) bool { return authadmin.IsAuthAdmin(code) && !authadmin.IsRead(code) }

// authService answers the AUTH_* requests on Config.ACL (nil with ACL
// off): its edits are applied from the admin log (tables.go).
func (s *Server) authService() *authadmin.Service {
	if s.cfg.ACL == nil {
		return nil
	}
	return authadmin.New(s.cfg.ACL, authadmin.Options{File: s.cfg.ACLFile, Logger: s.log.With("listener", "broker")})
}

// setupACL wires Config.ACL into the node's handler h and tables, and
// returns the broker listener's handler and the name server's guard.
func (s *Server) setupACL(h *handler) (broker transport.Handler, guard func(transport.Handler) transport.Handler) {
	cfg := s.cfg
	if cfg.ACL == nil {
		return h, func(x transport.Handler) transport.Handler { return x }
	}
	h.auth = s.tables.auth
	h.fkey = replica.DeriveKey(cfg.ClusterSecret, forwardPurpose)
	topicAt := func(off int64) (string, error) {
		m, err := s.node.Store().ReadAt(off)
		if err != nil {
			return "", err
		}
		return m.Topic, nil
	}
	h.acl = remoteacl.Wrap(localHandler{h}, cfg.ACL, remoteacl.Options{TopicAt: topicAt, Logger: s.log.With("listener", "broker"),
		ClientAddr: func(ctx context.Context) net.Addr {
			if a, ok := forwardedClient(ctx); ok {
				return a
			}
			return nil
		}})
	s.tables.decide = h.acl.Decide
	s.gate = &gate{h: h, key: h.fkey, log: s.log.With("listener", "broker")}
	guard = func(x transport.Handler) transport.Handler {
		return remoteacl.Wrap(x, cfg.ACL, remoteacl.Options{Logger: s.log.With("listener", "namesrv")})
	}
	return s.gate, guard
}

// The gRPC endpoint's forwarded calls are marked the same way, in the
// forwardedMD metadata: "v1 <client address> <MAC>", the MAC over the
// client's address, the method and the client's authorization and
// x-mq-date-time (its signature). Every node's ACL interceptor verifies a
// mark before anything else (grpcapi.Options.ClientAddr): the leader then
// checks the client's rules from the client's address, and a call with a
// mark that does not verify is refused UNAUTHORIZED on any node.
const grpcForwardPurpose = "brokercore rocketmq grpc forward v1"

func grpcForwardMAC(key []byte, client, method, authz, date string) []byte {
	m := hmac.New(sha256.New, key)
	for _, s := range [...]string{client, method, authz, date} {
		m.Write([]byte(s))
		m.Write([]byte{0})
	}
	return m.Sum(nil)
}

// outgoing is outgoing(ctx) with the mark in place of "1".
func (f *gforward) outgoing(ctx context.Context) context.Context {
	out := outgoing(ctx)
	if f.key == nil {
		return out
	}
	client := ""
	if p, ok := peer.FromContext(ctx); ok && p.Addr != nil {
		client = p.Addr.String()
	}
	method, _ := grpc.Method(ctx)
	mac := grpcForwardMAC(f.key, client, method, first(ctx, acl.V5AuthorizationHeader), first(ctx, acl.V5DateTimeHeader))
	md, _ := metadata.FromOutgoingContext(out)
	md = md.Copy()
	md.Set(forwardedMD, "v1 "+client+" "+hex.EncodeToString(mac))
	return metadata.NewOutgoingContext(ctx, md)
}

// clientAddr is grpcapi.Options.ClientAddr: the client address of a call
// with a verified mark, an error for a mark that does not verify.
func (f *gforward) clientAddr(ctx context.Context) (netip.Addr, bool, error) {
	v := metadata.ValueFromIncomingContext(ctx, forwardedMD)
	if len(v) == 0 {
		return netip.Addr{}, false, nil
	}
	method, _ := grpc.Method(ctx)
	fs := strings.Fields(v[0])
	if len(v) == 1 && len(fs) == 3 && fs[0] == "v1" {
		got, err := hex.DecodeString(fs[2])
		want := grpcForwardMAC(f.key, fs[1], method, first(ctx, acl.V5AuthorizationHeader), first(ctx, acl.V5DateTimeHeader))
		if err == nil && hmac.Equal(got, want) {
			ap, err := netip.ParseAddrPort(fs[1])
			return ap.Addr().Unmap(), err == nil, nil
		}
	}
	return netip.Addr{}, false, errForgedForward
}

var errForgedForward = errors.New("acl: the call's forwarded mark does not verify (only a member of the cluster forwards)")

func first(ctx context.Context, key string) string {
	if v := metadata.ValueFromIncomingContext(ctx, key); len(v) > 0 {
		return v[0]
	}
	return ""
}
