package replicated

import (
	"context"
	"crypto/hmac"
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"
	"log/slog"
	"slices"
	"strconv"
	"sync"
	"sync/atomic"
	"time"

	"github.com/brokercore/brokercore/examples/cluster/replica"
	"github.com/brokercore/brokercore/examples/rocketmq/grpcapi"
	"github.com/brokercore/brokercore/examples/rocketmq/remoting/wire"
	"github.com/brokercore/brokercore/txn"
)

// The relay of v5 transaction checks (Apache's proxy model): a v5
// producer's Telemetry stream is to whichever node the client dialed, and
// only the leader checks transactions. A node that does not lead reports
// to the leader, every relayReportEvery, the groups (topics) its gRPC
// producers publish (codeRelayProducers, over the forwarding path); the
// leader's txnChecker, when no producer of a check's group is connected to
// the leader itself, sends the check to the follower that reported the
// group last (codeRelayCheck, to the broker address in its report), which
// pushes the RecoverOrphanedTransactionCommand on one of its streams. The
// producer's EndTransaction reaches the leader as every one does
// (forwarded). A report expires relayExpiry after it was received, so a
// follower that stops reporting (it died, its producers left, it leads)
// is asked nothing after that.
//
// Both requests carry relayField, an HMAC-SHA256 over the code and the
// body under a key derived from Config.ClusterSecret: a node acts on none
// whose MAC does not verify, so only a member registers an address for
// checks (message bodies go to it) or has a check pushed to a producer.
// The leader registers a report only for a server of the raft
// configuration, at the address the cluster knows for it (when it knows
// one). A replayed report only registers its own follower again, until its
// expiry; a replayed check asks the producer again, which answers what it
// knows. Without a ClusterSecret the key is public, as the raft port is
// then unauthenticated too.

// Codes of the relay's requests, beyond Apache's.
const (
	codeRelayProducers int16 = 30601 // follower → leader: relayReport
	codeRelayCheck     int16 = 30602 // leader → follower: a txn.Check
	codeRelayPeers     int16 = 30603 // follower → leader: the followers it is in contact with (peers.go)
)

// relayField carries a relay request's MAC.
const relayField = "brokercoreRelay"

const relayPurpose = "brokercore rocketmq txn relay v1"

// Timing of the relay: a follower reports every relayReportEvery, the
// leader forgets a report relayExpiry after it came, and a check waits at
// most relayCallTimeout for a follower's answer.
const (
	relayReportEvery = time.Second
	relayExpiry      = 3 * relayReportEvery
	relayCallTimeout = time.Second
	relayMaxGroups   = 4096 // groups in one report
)

// relayReport is the body of codeRelayProducers.
type relayReport struct {
	ID     string   `json:"id"`     // the follower's raft id
	Addr   string   `json:"addr"`   // its broker address, where checks go
	Groups []string `json:"groups"` // the groups (topics) its producers publish
}

// errRelayRefused is a relay request whose MAC does not verify or that
// does not parse.
var errRelayRefused = errors.New("replicated: relay request refused")

// relay is a node's part of the relay: the follower's reports and pushes,
// the leader's registry of reports and its checks through them.
type relay struct {
	key  []byte
	id   string // this node's raft id
	addr string // its broker address
	n    *replica.Node
	fwd  *forwarder
	grpc atomic.Pointer[grpcapi.Server] // bound once it exists
	log  *slog.Logger
	reg  relayRegistry

	relayed atomic.Uint64 // checks a follower pushed for this leader
}

func newRelay(secret []byte, id, addr string, n *replica.Node, fwd *forwarder, log *slog.Logger) *relay {
	return &relay{key: replica.DeriveKey(secret, relayPurpose), id: id, addr: addr, n: n, fwd: fwd, log: log,
		reg: relayRegistry{now: time.Now, ttl: relayExpiry}}
}

func (r *relay) mac(code int16, body []byte) string {
	m := hmac.New(sha256.New, r.key)
	m.Write([]byte(strconv.Itoa(int(code))))
	m.Write([]byte{0})
	m.Write(body)
	return hex.EncodeToString(m.Sum(nil))
}

// request is a relay request of code with v as its body, MAC'd.
func (r *relay) request(code int16, v any) (*wire.Command, error) {
	body, err := json.Marshal(v)
	if err != nil {
		return nil, err
	}
	return &wire.Command{Code: code, Language: "GO", Version: 317, Body: body,
		ExtFields: map[string]string{relayField: r.mac(code, body)}}, nil
}

// isRelay reports the relay's requests (served ahead of everything else).
func isRelay(code int16) bool {
	return code == codeRelayProducers || code == codeRelayCheck || code == codeRelayPeers
}

// serve answers a relay request: a report on the leader, a check on a
// follower.
func (r *relay) serve(req *wire.Command) *wire.Command {
	got, want := req.ExtFields[relayField], r.mac(req.Code, req.Body)
	if !hmac.Equal([]byte(got), []byte(want)) {
		r.log.Warn("relay request refused: its MAC does not verify", "code", req.Code)
		return wire.NewResponse(req, wire.NoPermission, errRelayRefused.Error()+": not a member's")
	}
	var err error
	switch req.Code {
	case codeRelayPeers:
		var body []byte
		if body, err = r.contacts(); err == nil {
			resp := wire.NewResponse(req, wire.Success, "")
			resp.Body = body
			return resp
		}
	case codeRelayProducers:
		err = r.registerReport(req.Body)
	case codeRelayCheck:
		err = r.push(req.Body)
	}
	if err != nil {
		code := wire.SystemError
		if errors.Is(err, replica.ErrNotLeader) {
			code = wire.ServiceNotAvailable
		}
		return wire.NewResponse(req, code, err.Error())
	}
	return wire.NewResponse(req, wire.Success, "")
}

func (r *relay) registerReport(body []byte) error {
	if !r.n.IsLeader() {
		return fmt.Errorf("relay report: %w", replica.ErrNotLeader)
	}
	var rep relayReport
	if err := json.Unmarshal(body, &rep); err != nil || rep.ID == "" || rep.Addr == "" || len(rep.Groups) > relayMaxGroups {
		return fmt.Errorf("%w: bad report", errRelayRefused)
	}
	// Checks (and the messages in them) go only to a member, at the address
	// the cluster knows for it when it knows one: the registry holds at
	// most one report per server of the raft configuration.
	addr, member := r.n.MemberAddr(rep.ID)
	if !member {
		return fmt.Errorf("%w: %q is no member of the cluster", errRelayRefused, rep.ID)
	}
	if addr != "" && addr != rep.Addr {
		return fmt.Errorf("%w: member %s is at %s, not %s", errRelayRefused, rep.ID, addr, rep.Addr)
	}
	r.reg.report(rep)
	return nil
}

// push gives a check the leader relayed to this node's gRPC producers.
func (r *relay) push(body []byte) error {
	var c txn.Check
	if err := json.Unmarshal(body, &c); err != nil || c.Message == nil {
		return fmt.Errorf("%w: bad check", errRelayRefused)
	}
	g := r.grpc.Load()
	if g == nil {
		return errNoProducer
	}
	return g.CheckTransaction(c)
}

// Check is the leader's last resort of txnChecker: the check goes to a
// follower that reported producers of its group, the freshest report
// first, until one pushed it.
func (r *relay) Check(c txn.Check) error {
	errs := []error{errNoProducer}
	for _, f := range r.reg.pick(c.Group) {
		if f.ID == r.id {
			continue
		}
		err := r.call(f.Addr, codeRelayCheck, c)
		if err == nil {
			r.relayed.Add(1)
			r.log.Debug("transaction check relayed", "peer", f.ID, "group", c.Group, "id", c.ID)
			return nil
		}
		errs = append(errs, fmt.Errorf("relayed to %s: %w", f.ID, err))
	}
	return errors.Join(errs...)
}

// call sends a relay request to addr and maps its answer to an error.
func (r *relay) call(addr string, code int16, v any) error {
	req, err := r.request(code, v)
	if err != nil {
		return err
	}
	ctx, cancel := context.WithTimeout(context.Background(), relayCallTimeout)
	defer cancel()
	_, err = r.callFor(ctx, addr, req)
	return err
}

// callFor sends req to addr and answers the body of a SUCCESS, or the
// error.
func (r *relay) callFor(ctx context.Context, addr string, req *wire.Command) ([]byte, error) {
	resp, err := r.fwd.send(ctx, addr, req)
	switch {
	case err != nil:
		return nil, err
	case resp.Code != wire.Success:
		return nil, fmt.Errorf("answered %d: %s", resp.Code, resp.Remark)
	}
	return resp.Body, nil
}

// loop reports this node's producer groups to the leader while it does
// not lead, until stop.
func (r *relay) loop(stop <-chan struct{}) {
	t := time.NewTicker(relayReportEvery)
	defer t.Stop()
	reported := false // the last report named groups: an empty one clears them
	for {
		select {
		case <-stop:
			return
		case <-t.C:
		}
		g := r.grpc.Load()
		if g == nil || r.n.IsLeader() {
			reported = false
			continue
		}
		_, leader := r.n.Leader()
		groups := g.ProducerTopics()
		if leader == "" || leader == r.addr || (len(groups) == 0 && !reported) {
			continue
		}
		if err := r.call(leader, codeRelayProducers, relayReport{ID: r.id, Addr: r.addr, Groups: groups}); err != nil {
			r.log.Info("producer groups not reported to the leader", "leader", leader, "err", err)
			continue
		}
		reported = len(groups) > 0
	}
}

// relayRegistry is the leader's table of the followers' reports.
type relayRegistry struct {
	now func() time.Time
	ttl time.Duration

	mu   sync.Mutex
	seen map[string]relayEntry // by follower id
}

type relayEntry struct {
	relayReport
	at time.Time
}

// report records rep, in place of its follower's previous one.
func (g *relayRegistry) report(rep relayReport) {
	g.mu.Lock()
	defer g.mu.Unlock()
	if g.seen == nil {
		g.seen = map[string]relayEntry{}
	}
	g.seen[rep.ID] = relayEntry{relayReport: rep, at: g.now()}
}

// pick returns the unexpired reports naming group, the freshest first,
// and forgets the expired ones.
func (g *relayRegistry) pick(group string) []relayReport {
	g.mu.Lock()
	defer g.mu.Unlock()
	now := g.now()
	var es []relayEntry
	for id, e := range g.seen {
		if now.Sub(e.at) >= g.ttl {
			delete(g.seen, id)
			continue
		}
		if slices.Contains(e.Groups, group) {
			es = append(es, e)
		}
	}
	slices.SortFunc(es, func(a, b relayEntry) int { return b.at.Compare(a.at) })
	out := make([]relayReport, len(es))
	for i, e := range es {
		out[i] = e.relayReport
	}
	return out
}
