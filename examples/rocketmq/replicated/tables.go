package replicated

import (
	"bufio"
	"bytes"
	"context"
	"errors"
	"log/slog"
	"maps"
	"net"
	"os"
	"strconv"
	"strings"
	"sync"

	"github.com/brokercore/brokercore/examples/cluster/replica"
	"github.com/brokercore/brokercore/examples/rocketmq/internal/atomicfile"
	"github.com/brokercore/brokercore/examples/rocketmq/remoting/authadmin"
	"github.com/brokercore/brokercore/examples/rocketmq/remoting/broker"
	"github.com/brokercore/brokercore/examples/rocketmq/remoting/wire"
	"github.com/brokercore/brokercore/store"
)

// The admin's table changes (broker.TableChange: create, update and delete
// topics and subscription groups) are replicated as a log: the leader
// appends each request, as its remoting frame, to AdminTopic through raft
// (replica.Node.ProduceSystem), and every node applies that topic's
// messages to its own tables in log order (broker.ApplyTableChange), so
// every node decides the same about each (a refused change is refused
// everywhere) and ends with the same tables. The leader answers the
// request with its own node's outcome. A follower forwards the request to
// the leader like a send. How far a node applied is kept in
// Dir/admin.applied, so a restart applies only what is new.

// AdminTopic holds the replicated table changes (a reserved topic, which
// no client can write or read).
const AdminTopic = "RMQ_SYS_BROKERCORE_ADMIN"

const appliedFile = "admin.applied"

// maxKeptResults bounds the outcomes kept for proposers not back yet.
const maxKeptResults = 256

// tables applies the replicated table changes to one node's broker.
type tables struct {
	n    *replica.Node
	b    *broker.Broker
	path string
	log  *slog.Logger
	wake chan struct{}
	auth *authadmin.Service // applies the AUTH_* edits (ACL on; acl.go), nil = none
	// decide authorizes an AUTH_* edit again when it is applied, with the
	// rules as this node's log has them there (acl.go), nil = ACL off.
	decide func(client net.Addr, req *wire.Command) *wire.Command

	mu      sync.Mutex
	next    int64                   // the next offset of AdminTopic/0 to apply
	results map[int64]*wire.Command // outcomes by offset, for the proposers
	changed chan struct{}           // closed and replaced after each apply
}

func newTables(n *replica.Node, b *broker.Broker, path string, log *slog.Logger) (*tables, error) {
	t := &tables{n: n, b: b, path: path, log: log, wake: make(chan struct{}, 1),
		results: map[int64]*wire.Command{}, changed: make(chan struct{})}
	raw, err := os.ReadFile(path)
	switch {
	case errors.Is(err, os.ErrNotExist):
	case err != nil:
		return nil, err
	default:
		if t.next, err = strconv.ParseInt(strings.TrimSpace(string(raw)), 10, 64); err != nil || t.next < 0 {
			return nil, errors.New("replicated: " + path + ": not an offset")
		}
	}
	return t, nil
}

// notify is the store's append hook: it wakes the loop for AdminTopic.
func (t *tables) notify(topic string, _ int, _ int64) {
	if topic != AdminTopic {
		return
	}
	select {
	case t.wake <- struct{}{}:
	default:
	}
}

// loop applies what arrives until stop is closed.
func (t *tables) loop(stop <-chan struct{}) {
	for {
		t.applyAvailable()
		select {
		case <-stop:
			return
		case <-t.wake:
		}
	}
}

// applyAvailable applies every change the local replica holds beyond next.
func (t *tables) applyAvailable() {
	for {
		t.mu.Lock()
		from := t.next
		t.mu.Unlock()
		msgs, err := t.n.Read(AdminTopic, 0, from, 64)
		if err != nil {
			t.log.Warn("admin log read failed", "offset", from, "err", err)
			return
		}
		if len(msgs) == 0 {
			return
		}
		for _, m := range msgs {
			resp := t.apply(m)
			t.mu.Lock()
			t.results[m.QueueOffset] = resp
			delete(t.results, m.QueueOffset-maxKeptResults)
			t.next = m.QueueOffset + 1
			close(t.changed)
			t.changed = make(chan struct{})
			t.mu.Unlock()
		}
		t.mu.Lock()
		next := t.next
		t.mu.Unlock()
		if err := atomicfile.WriteFile(t.path, []byte(strconv.FormatInt(next, 10)+"\n"), 0o644); err != nil {
			t.log.Warn("admin log position not saved (a restart applies the last changes again)", "err", err)
		}
	}
}

// apply applies one logged change; an entry that does not decode is
// skipped the same way on every node.
func (t *tables) apply(m *store.Message) *wire.Command {
	frame, err := wire.ReadFrame(bufio.NewReader(bytes.NewReader(m.Body)), wire.DefaultMaxFrame)
	var cmd *wire.Command
	if err == nil {
		cmd, err = wire.Decode(frame)
	}
	if err != nil {
		t.log.Warn("admin log entry skipped", "offset", m.QueueOffset, "err", err)
		return &wire.Command{Code: wire.SystemError, Remark: "admin log entry does not decode: " + err.Error()}
	}
	var resp *wire.Command
	if t.auth != nil && authadmin.IsAuthAdmin(cmd.Code) {
		if t.decide != nil {
			resp = t.decide(editorAddr(m), cmd) // the rules at this point of the log (acl.go)
		}
		if resp == nil {
			resp = t.auth.Serve(cmd) // this node's ACL file, written atomically, then in force
		}
	} else {
		resp = t.b.ApplyTableChange(cmd)
	}
	if resp.Code != wire.Success {
		t.log.Info("admin change refused", "offset", m.QueueOffset, "code", cmd.Code, "response", resp.Code, "err", resp.Remark)
	}
	return resp
}

// propose logs a table change of client (its address) through raft and
// answers it with this node's outcome once applied here.
func (t *tables) propose(ctx context.Context, stop <-chan struct{}, req *wire.Command, client string) *wire.Command {
	cmd := *req
	cmd.Opaque, cmd.Flag = 0, 0
	cmd.ExtFields = maps.Clone(req.ExtFields)
	delete(cmd.ExtFields, forwardedField)
	body, err := wire.Encode(&cmd)
	if err != nil {
		return wire.NewResponse(req, wire.SystemError, err.Error())
	}
	m := &store.Message{Topic: AdminTopic, Body: body}
	if t.decide != nil && isAuthChange(req.Code) {
		m.Properties = map[string]string{propEditor: client} // decided again at apply (acl.go)
	}
	out, err := t.logChange(req, m) // release.go
	if err != nil {
		code := wire.SystemError
		if errors.Is(err, replica.ErrNotLeader) || errors.Is(err, replica.ErrNotCommitted) || errors.Is(err, replica.ErrClosed) {
			code = wire.ServiceNotAvailable // may still be committed, as a send
		}
		return wire.NewResponse(req, code, "admin change not logged: "+err.Error())
	}
	off := out[0].QueueOffset
	t.notify(AdminTopic, 0, off)
	for {
		t.mu.Lock()
		r, ok := t.results[off]
		applied := t.next > off
		ch := t.changed
		t.mu.Unlock()
		switch {
		case ok:
			resp := *r
			resp.Opaque, resp.Flag = req.Opaque, r.Flag
			return &resp
		case applied:
			return wire.NewResponse(req, wire.Success, "")
		}
		select {
		case <-ch:
		case <-ctx.Done():
			return wire.NewResponse(req, wire.SystemError, "admin change logged, not applied here yet")
		case <-stop:
			return wire.NewResponse(req, wire.ServiceNotAvailable, "shutting down")
		}
	}
}
