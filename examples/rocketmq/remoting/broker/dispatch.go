package broker

import (
	"context"

	"github.com/brokercore/brokercore/examples/rocketmq/remoting/transport"
	"github.com/brokercore/brokercore/examples/rocketmq/remoting/wire"
)

// Serve implements transport.Handler: the one place a request code is
// mapped to its handler. A new request code gets a case here (and in
// Inline when it answers at once without blocking, in Batch when bursts of
// it are served together); a handler is a method
// func (b *Broker) x(c *transport.Conn, req *wire.Command) *wire.Command
// in its own file, answering with wire.NewResponse.
func (b *Broker) Serve(ctx context.Context, c *transport.Conn, req *wire.Command) *wire.Command {
	var resp *wire.Command
	switch req.Code {
	case wire.CodeSendMessage, wire.CodeSendMessageV2, wire.CodeSendBatchMessage:
		b.noteRequester(c, req) // reply.go
		resp = b.send(c, req)
	case wire.CodePullMessage:
		resp = b.pull(ctx, c, req)
	case wire.CodeHeartbeat:
		resp = b.heartbeat(c, req)
	case wire.CodeUnregisterClient:
		resp = b.unregister(c, req)
	case wire.CodeGetConsumerListByGroup:
		resp = b.consumerList(req)
	case wire.CodeQueryConsumerOffset:
		resp = b.queryOffset(c, req)
	case wire.CodeUpdateConsumerOffset:
		resp = b.updateOffset(c, req)
	case wire.CodeGetMaxOffset, wire.CodeGetMinOffset, wire.CodeSearchOffsetByTimestamp:
		resp = b.offsetInfo(req)
	case wire.CodeLockBatchMQ:
		resp = b.lockBatch(c, req)
	case wire.CodeUnlockBatchMQ:
		resp = b.unlockBatch(c, req)
	case wire.CodeConsumerSendMsgBack:
		resp = b.sendBack(req)
	case codeEndTransaction:
		resp = b.endTransaction(c, req) // txn.go
	default:
		if resp = b.admin(c, req); resp != nil { // admin.go, reply.go
			break
		}
		b.stats.unsupported.Add(1)
		b.log.Info("rejected request", "code", req.Code, "client", c.RemoteAddr().String(), "channel", c.ID(),
			"err", "request code not supported")
		return wire.NewResponse(req, wire.RequestCodeNotSupported, "request code "+itoa(int(req.Code))+" not supported")
	}
	b.logRejection(c, req, resp)
	return resp
}

// logRejection logs and counts an error answer.
func (b *Broker) logRejection(c *transport.Conn, req, resp *wire.Command) {
	if resp != nil && resp.Code != wire.Success && isRejection(req.Code, resp.Code) {
		b.stats.rejected.Add(1)
		b.log.Info("rejected request", "code", req.Code, "response", resp.Code, "client", c.RemoteAddr().String(),
			"channel", c.ID(), "group", groupOf(req), "topic", topicOf(req), "err", resp.Remark)
	}
}

// Batch implements transport.BatchHandler: under AsyncFlush the sends of one read
// burst are appended together (ServeBatch).
func (b *Broker) Batch(req *wire.Command) bool {
	switch req.Code {
	case wire.CodeSendMessage, wire.CodeSendMessageV2, wire.CodeSendBatchMessage:
		return b.opts.AsyncFlush && !halfRequest(req) // a half goes through the transaction manager
	}
	return false
}

// DeferBatch implements transport.DeferredBatchHandler: without AsyncFlush
// the sends of one read burst are appended together too (ServeBatch), off
// the read loop, and wait for their fsync together. Not with a Writer,
// which takes each send on its own (ServeBatch would hand them over one
// after another, each waiting for the one before).
func (b *Broker) DeferBatch(req *wire.Command) bool {
	switch req.Code {
	case wire.CodeSendMessage, wire.CodeSendMessageV2, wire.CodeSendBatchMessage:
		return !b.opts.AsyncFlush && b.opts.Writer == nil && !halfRequest(req)
	}
	return false
}

// ServeBatch implements transport.BatchHandler: the sends of one read burst, in one
// store append.
func (b *Broker) ServeBatch(_ context.Context, c *transport.Conn, reqs []*wire.Command) []*wire.Command {
	for _, req := range reqs {
		b.noteRequester(c, req) // reply.go
	}
	resps := b.sendBatch(reqs)
	for i, req := range reqs {
		b.logRejection(c, req, resps[i])
	}
	return resps
}

// Inline implements transport.InlineHandler: sends under AsyncFlush and the offset
// and consumer-list queries answer at once. Pulls (long polls), sends that
// wait for an fsync, and everything that may write a file or wait for a
// lock keep their own goroutine.
func (b *Broker) Inline(req *wire.Command) bool {
	switch req.Code {
	case wire.CodeSendMessage, wire.CodeSendMessageV2, wire.CodeSendBatchMessage:
		return b.opts.AsyncFlush && !halfRequest(req)
	case wire.CodeGetMaxOffset, wire.CodeGetMinOffset, wire.CodeSearchOffsetByTimestamp, wire.CodeQueryConsumerOffset,
		wire.CodeGetConsumerListByGroup:
		return true
	}
	return false
}

// isRejection tells error answers from ordinary ones (no new message, no
// committed offset).
func isRejection(reqCode, code int16) bool {
	switch {
	case reqCode == wire.CodePullMessage && (code == wire.PullNotFound || code == wire.PullRetryImmediately || code == wire.PullOffsetMoved):
		return false
	case reqCode == wire.CodeQueryConsumerOffset && code == wire.QueryNotFound:
		return false
	}
	return true
}

func groupOf(req *wire.Command) string {
	for _, k := range []string{"consumerGroup", "producerGroup", "group", "a"} {
		if v := req.ExtFields[k]; v != "" {
			return v
		}
	}
	return ""
}

func topicOf(req *wire.Command) string {
	if v := req.ExtFields["topic"]; v != "" {
		return v
	}
	return req.ExtFields["b"]
}
