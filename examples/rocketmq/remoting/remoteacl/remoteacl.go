// Package remoteacl puts access control in front of a remoting handler
// (the broker's or the name server's): every request is authenticated by
// the AccessKey and Signature ext fields the official clients add
// (primitive.Credentials in rocketmq-client-go/v2, AclClientRPCHook in
// Java) and authorized per resource it touches before the handler sees
// it, so a refused request changes nothing. A refusal answers
// NO_PERMISSION (16) with the reason as remark, as Apache's broker does;
// a refused oneway request (UPDATE_CONSUMER_OFFSET) is dropped.
//
// What each request needs, after Apache's DefaultAuthorizationContextBuilder
// (a retry topic %RETRY%G always counts as the group G, so a consumer can
// never reach another group's retries through it):
//
//	GET_ROUTEINFO_BY_TOPIC          Pub, Sub or Get on the topic
//	SEND_MESSAGE(_V2), SEND_BATCH   Pub on the topic (Sub on the group for %RETRY%G)
//	PULL_MESSAGE                    Sub on the group and the topic
//	QUERY_CONSUMER_OFFSET           Sub or Get on the group and the topic
//	UPDATE_CONSUMER_OFFSET          Sub or Update on the group and the topic
//	GET_MAX/MIN_OFFSET, SEARCH_OFFSET  Sub or Get on the topic
//	HEART_BEAT                      Sub on each consumer group and its topics
//	UNREGISTER_CLIENT               Sub on the consumer group, if any
//	GET_CONSUMER_LIST_BY_GROUP      Sub or Get on the group
//	LOCK_BATCH_MQ, UNLOCK_BATCH_MQ  Sub on the group and each queue's topic
//	CONSUMER_SEND_MSG_BACK          Sub on the group, and on the topic of the
//	                                message it names (Options.TopicAt)
//	END_TRANSACTION                 Pub on the topic when the request names one
//	AUTH_GET/LIST_USER, _ACL        Get on "*" (Apache: Get on the cluster)
//	any other code                  Update on "*" (a super user, or a rule on "*")
package remoteacl

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"log/slog"
	"net"
	"net/netip"
	"strconv"
	"strings"
	"sync/atomic"

	"github.com/brokercore/brokercore/acl"
	"github.com/brokercore/brokercore/examples/rocketmq/remoting/authadmin"
	"github.com/brokercore/brokercore/examples/rocketmq/remoting/transport"
	"github.com/brokercore/brokercore/examples/rocketmq/remoting/wire"
)

// Request codes this file maps that the wire package does not name.
const codeEndTransaction int16 = 37

// codeInvokeBrokerToResetOffset is mqadmin's resetOffsetByTime: Apache's
// ResetOffsetRequestHeader asks Update on its group and its topic.
const codeInvokeBrokerToResetOffset int16 = 222

// codeSendReplyMessage(V2) is a replier's send of its reply (request/reply,
// remoting/broker/reply.go): a send to the reply topic.
const (
	codeSendReplyMessage   int16 = 324
	codeSendReplyMessageV2 int16 = 325
)

// Options configure a Handler.
type Options struct {
	// TopicAt returns the topic of the message at a log offset:
	// CONSUMER_SEND_MSG_BACK names its message only by that, and the
	// consumer must be allowed Sub on the message's topic too. Nil: only
	// the group is checked (as Apache does).
	TopicAt func(logOffset int64) (string, error)
	// Logger receives every refusal with user, resource, action, request
	// code and client (nil = discard).
	Logger *slog.Logger
	// ClientAddr, if set, names a request's client when it is not the
	// connection's peer (a replicated leader serving what a member
	// forwarded, whose client address the member vouched for); nil, or a
	// nil answer, is the connection's remote address.
	ClientAddr func(ctx context.Context) net.Addr
}

// Handler is a transport.Handler with access control in front of another.
// It keeps the wrapped handler's optional capabilities (inline, batch,
// connection observer), and is a transport.Guard: a transport.Server over
// it checks requests on the read loop and serves the admitted ones with the
// wrapped handler; anything else calling Serve or ServeBatch has them
// checked there.
type Handler struct {
	h    transport.Handler
	az   *acl.Authorizer
	opts Options
	log  *slog.Logger

	unauthenticated, denied atomic.Uint64
}

// Stats are a Handler's refusals.
type Stats struct {
	Unauthenticated uint64 // requests whose credentials did not verify
	Denied          uint64 // requests a rule refused
}

// Wrap puts az in front of h.
func Wrap(h transport.Handler, az *acl.Authorizer, opts Options) *Handler {
	log := opts.Logger
	if log == nil {
		log = slog.New(slog.DiscardHandler)
	}
	return &Handler{h: h, az: az, opts: opts, log: log}
}

// Stats returns the counters.
func (h *Handler) Stats() Stats {
	return Stats{Unauthenticated: h.unauthenticated.Load(), Denied: h.denied.Load()}
}

// Serve implements transport.Handler.
func (h *Handler) Serve(ctx context.Context, c *transport.Conn, req *wire.Command) *wire.Command {
	if resp := h.check(ctx, c, req); resp != nil {
		return resp
	}
	return h.h.Serve(ctx, c, req)
}

// Inline implements transport.InlineHandler: as the wrapped handler.
func (h *Handler) Inline(req *wire.Command) bool {
	ih, ok := h.h.(transport.InlineHandler)
	return ok && ih.Inline(req)
}

// Batch implements transport.BatchHandler: as the wrapped handler.
func (h *Handler) Batch(req *wire.Command) bool {
	bh, ok := h.h.(transport.BatchHandler)
	return ok && bh.Batch(req)
}

// DeferBatch implements transport.DeferredBatchHandler: as the wrapped
// handler.
func (h *Handler) DeferBatch(req *wire.Command) bool {
	dh, ok := h.h.(transport.DeferredBatchHandler)
	return ok && dh.DeferBatch(req)
}

// ServeBatch implements transport.BatchHandler: refused requests are
// answered here, the others served together by the wrapped handler. A
// batch that passes whole (the usual one) goes to the wrapped handler as
// it is, with nothing allocated for it here.
func (h *Handler) ServeBatch(ctx context.Context, c *transport.Conn, reqs []*wire.Command) []*wire.Command {
	for i, req := range reqs {
		if refused := h.check(ctx, c, req); refused != nil {
			return h.serveRefused(ctx, c, reqs, i, refused)
		}
	}
	if len(reqs) == 1 {
		return []*wire.Command{h.h.Serve(ctx, c, reqs[0])}
	}
	return h.h.(transport.BatchHandler).ServeBatch(ctx, c, reqs)
}

// serveRefused is ServeBatch once reqs[first] was refused (with refused):
// the requests before it passed, the ones after it are checked here.
func (h *Handler) serveRefused(ctx context.Context, c *transport.Conn, reqs []*wire.Command, first int,
	refused *wire.Command) []*wire.Command {
	resps := make([]*wire.Command, len(reqs))
	pass := make([]*wire.Command, first, len(reqs))
	copy(pass, reqs[:first])
	resps[first] = refused
	for i := first + 1; i < len(reqs); i++ {
		if resps[i] = h.check(ctx, c, reqs[i]); resps[i] == nil {
			pass = append(pass, reqs[i])
		}
	}
	if len(pass) == 0 {
		return resps
	}
	var got []*wire.Command
	if len(pass) == 1 {
		got = []*wire.Command{h.h.Serve(ctx, c, pass[0])}
	} else {
		got = h.h.(transport.BatchHandler).ServeBatch(ctx, c, pass)
	}
	j := 0
	for i := range resps {
		if resps[i] == nil {
			resps[i] = got[j]
			j++
		}
	}
	return resps
}

// Admit implements transport.Guard: a transport serving h checks each
// request on the connection's read loop as soon as it is decoded (its
// fields and body still in the core's cache, and no goroutine started for
// a request it refuses), and serves the admitted ones with the wrapped
// handler directly. A CONSUMER_SEND_MSG_BACK is left undecided when
// Options.TopicAt is set (finding its message's topic reads the store,
// which the read loop must not wait for): Serve checks it.
func (h *Handler) Admit(ctx context.Context, c *transport.Conn, req *wire.Command) (*wire.Command, bool) {
	if req.Code == wire.CodeConsumerSendMsgBack && h.opts.TopicAt != nil {
		return nil, false
	}
	return h.check(ctx, c, req), true
}

// Guarded implements transport.Guard: the handler Admit's requests go to.
func (h *Handler) Guarded() transport.Handler { return h.h }

// ConnOpened implements transport.ConnObserver: as the wrapped handler.
func (h *Handler) ConnOpened(c *transport.Conn) {
	if o, ok := h.h.(transport.ConnObserver); ok {
		o.ConnOpened(c)
	}
}

// ConnClosed implements transport.ConnObserver: as the wrapped handler.
func (h *Handler) ConnClosed(c *transport.Conn) {
	if o, ok := h.h.(transport.ConnObserver); ok {
		o.ConnClosed(c)
	}
}

// check authenticates and authorizes req; a non-nil answer refuses it.
func (h *Handler) check(ctx context.Context, c *transport.Conn, req *wire.Command) *wire.Command {
	if h.opts.ClientAddr != nil {
		if a := h.opts.ClientAddr(ctx); a != nil {
			return h.verdict(a, req)
		}
	}
	return h.verdict(c.RemoteAddr(), req)
}

// Decide authenticates and authorizes req from a client at addr with the
// rules in force now, as Serve does before the wrapped handler: a non-nil
// answer (NO_PERMISSION) refuses it. A replicated node re-decides a logged
// ACL edit with it when applying the edit.
func (h *Handler) Decide(addr net.Addr, req *wire.Command) *wire.Command { return h.verdict(addr, req) }

// verdict is check for a request from addr.
func (h *Handler) verdict(addr net.Addr, req *wire.Command) *wire.Command {
	user, err := h.az.AuthenticateRemoting(req.ExtFields, req.Body)
	if err != nil {
		h.unauthenticated.Add(1)
		h.log.Info("remoting request unauthenticated", "code", req.Code, "user", user,
			"client", addr.String(), "err", err)
		return wire.NewResponse(req, wire.NoPermission, err.Error())
	}
	var buf [4]Need
	needs, err := appendNeeds(buf[:0], req, h.opts.TopicAt)
	if err != nil {
		h.denied.Add(1)
		h.log.Info("remoting request refused", "code", req.Code, "user", user, "client", addr.String(), "err", err)
		return wire.NewResponse(req, wire.NoPermission, "acl: "+err.Error())
	}
	ip := remoteIP(addr)
	for _, n := range needs {
		if _, err := h.az.Authorize(user, n.Resource, n.Action, ip); err != nil {
			h.denied.Add(1)
			h.log.Info("remoting request denied", "code", req.Code, "user", user, "resource", n.Resource.String(),
				"action", n.Action.String(), "client", addr.String())
			return wire.NewResponse(req, wire.NoPermission, err.Error())
		}
	}
	return nil
}

func remoteIP(a net.Addr) netip.Addr {
	if ta, ok := a.(*net.TCPAddr); ok {
		return ta.AddrPort().Addr().Unmap()
	}
	return netip.Addr{}
}

// Need is one authorization a request needs.
type Need struct {
	Resource acl.Resource
	Action   acl.Action
}

// ErrUnreadable: the request's resources cannot be read (a missing field,
// a body that is not the JSON its code carries). It is refused.
var ErrUnreadable = errors.New("cannot tell what the request touches")

// Needs lists what req needs (see the package doc). topicAt may be nil.
// Every field a handler might read a topic or group from is checked, so a
// request cannot name an allowed resource in one field and act on another.
func Needs(req *wire.Command, topicAt func(int64) (string, error)) ([]Need, error) {
	ns, err := appendNeeds(nil, req, topicAt)
	if len(ns) == 0 {
		ns = nil
	}
	return ns, err
}

// appendNeeds is Needs appending to ns (a request's check uses a buffer on
// its stack).
func appendNeeds(ns []Need, req *wire.Command, topicAt func(int64) (string, error)) ([]Need, error) {
	ext := req.ExtFields
	var bad error
	topics := func(act acl.Action, names ...string) {
		seen := false
		for _, n := range names {
			if v, ok := ext[n]; ok {
				ns = append(ns, Need{acl.TopicOrGroup(v), act})
				seen = true
			}
		}
		if !seen && bad == nil {
			bad = fmt.Errorf("%w: no %s field", ErrUnreadable, names[0])
		}
	}
	groups := func(act acl.Action, names ...string) {
		seen := false
		for _, n := range names {
			if v, ok := ext[n]; ok {
				ns = append(ns, Need{acl.Group(v), act})
				seen = true
			}
		}
		if !seen && bad == nil {
			bad = fmt.Errorf("%w: no %s field", ErrUnreadable, names[0])
		}
	}
	switch req.Code {
	case wire.CodeGetRouteInfoByTopic:
		topics(acl.Pub|acl.Sub|acl.Get, "topic")
	case wire.CodeSendMessage, wire.CodeSendMessageV2, wire.CodeSendBatchMessage, codeSendReplyMessage, codeSendReplyMessageV2:
		named := false
		for _, n := range [...]string{"topic", "b"} {
			if v, ok := ext[n]; ok {
				act := acl.Pub
				if strings.HasPrefix(v, "%RETRY%") {
					act = acl.Sub // the group's own retries (the v2 client's send-back fallback)
				}
				ns = append(ns, Need{acl.TopicOrGroup(v), act})
				named = true
			}
		}
		if !named {
			bad = fmt.Errorf("%w: no topic field", ErrUnreadable)
		}
	case wire.CodePullMessage:
		groups(acl.Sub, "consumerGroup")
		topics(acl.Sub, "topic")
	case wire.CodeQueryConsumerOffset:
		groups(acl.Sub|acl.Get, "consumerGroup")
		topics(acl.Sub|acl.Get, "topic")
	case wire.CodeUpdateConsumerOffset:
		groups(acl.Sub|acl.Update, "consumerGroup")
		topics(acl.Sub|acl.Update, "topic")
	case wire.CodeGetMaxOffset, wire.CodeGetMinOffset, wire.CodeSearchOffsetByTimestamp:
		topics(acl.Sub|acl.Get, "topic")
	case wire.CodeGetConsumerListByGroup:
		groups(acl.Sub|acl.Get, "consumerGroup")
	case wire.CodeUnregisterClient:
		if ext["consumerGroup"] != "" {
			groups(acl.Sub, "consumerGroup")
		}
	case wire.CodeHeartbeat:
		ns, bad = heartbeatNeeds(ns, req.Body)
	case wire.CodeLockBatchMQ, wire.CodeUnlockBatchMQ:
		ns, bad = lockNeeds(ns, req.Body)
	case wire.CodeConsumerSendMsgBack:
		groups(acl.Sub, "group")
		if topicAt != nil && bad == nil {
			off, err := strconv.ParseInt(ext["offset"], 10, 64)
			if err != nil {
				return nil, fmt.Errorf("%w: offset %q", ErrUnreadable, ext["offset"])
			}
			t, err := topicAt(off)
			if err != nil {
				return nil, fmt.Errorf("%w: message at offset %d: %v", ErrUnreadable, off, err)
			}
			ns = append(ns, Need{acl.TopicOrGroup(t), acl.Sub})
		}
	case codeInvokeBrokerToResetOffset:
		groups(acl.Update, "group")
		topics(acl.Update, "topic")
	case codeEndTransaction:
		if ext["topic"] != "" {
			topics(acl.Pub, "topic")
		}
	case authadmin.CodeGetUser, authadmin.CodeListUser, authadmin.CodeGetACL, authadmin.CodeListACL:
		ns = append(ns, Need{acl.Resource{Kind: acl.AnyKind, Name: "request code " + strconv.Itoa(int(req.Code))}, acl.Get})
	default:
		ns = append(ns, Need{acl.Resource{Kind: acl.AnyKind, Name: "request code " + strconv.Itoa(int(req.Code))}, acl.Update})
	}
	if bad != nil {
		return nil, bad
	}
	return ns, nil
}

// heartbeatNeeds: Sub on every consumer group of a HEART_BEAT body and on
// each topic it subscribes (a producer's heartbeat needs nothing more than
// its signature).
func heartbeatNeeds(ns []Need, body []byte) ([]Need, error) {
	var hb struct {
		ConsumerDataSet []struct {
			GroupName           string `json:"groupName"`
			SubscriptionDataSet []struct {
				Topic string `json:"topic"`
			} `json:"subscriptionDataSet"`
		} `json:"consumerDataSet"`
	}
	if err := json.Unmarshal(body, &hb); err != nil {
		return nil, fmt.Errorf("%w: heartbeat body: %v", ErrUnreadable, err)
	}
	for _, c := range hb.ConsumerDataSet {
		ns = append(ns, Need{acl.Group(c.GroupName), acl.Sub})
		for _, s := range c.SubscriptionDataSet {
			ns = append(ns, Need{acl.TopicOrGroup(s.Topic), acl.Sub})
		}
	}
	return ns, nil
}

// lockNeeds: Sub on the group of a LOCK/UNLOCK_BATCH_MQ body and on each
// queue's topic.
func lockNeeds(ns []Need, body []byte) ([]Need, error) {
	var lb struct {
		ConsumerGroup string `json:"consumerGroup"`
		MQSet         []struct {
			Topic string `json:"topic"`
		} `json:"mqSet"`
	}
	if err := json.Unmarshal(body, &lb); err != nil {
		return nil, fmt.Errorf("%w: lock body: %v", ErrUnreadable, err)
	}
	ns = append(ns, Need{acl.Group(lb.ConsumerGroup), acl.Sub})
	for _, q := range lb.MQSet {
		ns = append(ns, Need{acl.TopicOrGroup(q.Topic), acl.Sub})
	}
	return ns, nil
}
