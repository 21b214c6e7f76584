package replicated

import (
	"errors"
	"fmt"
	"path/filepath"
	"sync/atomic"

	"github.com/brokercore/brokercore/examples/rocketmq/grpcapi"
	"github.com/brokercore/brokercore/examples/rocketmq/remoting/broker"
	"github.com/brokercore/brokercore/txn"
)

// Transactions (half messages, END_TRANSACTION / EndTransaction, check-back)
// run on the leader, through the replica's transaction manager
// (replica.Config.Transactions): each leader term rebuilds a txn.Manager
// from the replicated half and op records and closes it when the term
// ends, and its records are raft entries of that term. The remoting broker
// and the gRPC service serve transactions as on a single broker; they take
// the manager from the node (TransactionsNow) and, on a node that does not
// lead, answer SERVICE_NOT_AVAILABLE / UNAVAILABLE, but a follower forwards
// transactional sends and END_TRANSACTION (EndTransaction over gRPC) to the
// leader like every write. Check-backs go to a producer of the group
// connected to the leader: remoting first, then gRPC (a producer's
// Telemetry stream to the leader), then a follower that holds a producer's
// Telemetry stream (relay.go).

// codeEndTransaction is END_TRANSACTION (37), forwarded by a follower.
const codeEndTransaction int16 = 37

// txnProgressFile, in Config.Dir, says where a new leader term's manager
// may start reading the half and op records (a hint: every replica holds
// the same records, and an outdated file costs a longer read).
const txnProgressFile = "txn-progress"

// txnOptions are the replica's transaction options: Config.Txn's, the
// progress file in Dir, and the node's protocols as the Checker unless
// Config.Txn names one.
func (s *Server) txnOptions() *txn.Options {
	var o txn.Options
	if s.cfg.Txn != nil {
		o = *s.cfg.Txn
	}
	if o.ProgressPath == "" {
		o.ProgressPath = filepath.Join(s.cfg.Dir, txnProgressFile)
	}
	if o.Logger == nil {
		o.Logger = s.log
	}
	if o.Checker == nil {
		o.Checker = &s.checker
	}
	return &o
}

// txnChecker is the leader's txn.Checker: the remoting broker's producers
// of the group first, then the gRPC service's (as on a single broker). The
// protocol handlers are bound once they exist (a term may begin before).
type txnChecker struct {
	remoting atomic.Pointer[broker.Broker]
	grpc     atomic.Pointer[grpcapi.Server]
	relay    atomic.Pointer[relay] // the followers' gRPC producers (relay.go)
}

// errNoProducer is the check's answer when no protocol has a live producer
// of the group on this node.
var errNoProducer = errors.New("replicated: no live producer of the group on this node")

// Check implements txn.Checker.
func (c *txnChecker) Check(ch txn.Check) error {
	errs := []error{errNoProducer}
	if b := c.remoting.Load(); b != nil {
		err := b.CheckTransaction(ch)
		if err == nil {
			return nil
		}
		errs = append(errs, err)
	}
	if g := c.grpc.Load(); g != nil {
		err := g.CheckTransaction(ch)
		if err == nil {
			return nil
		}
		errs = append(errs, err)
	}
	if r := c.relay.Load(); r != nil {
		err := r.Check(ch)
		if err == nil {
			return nil
		}
		errs = append(errs, err)
	}
	return errors.Join(errs...)
}

// TransactionsNow is the remoting broker's transaction manager: the
// current leader term's, or broker.ErrNotWritable on a node that does not
// lead.
func (c *core) TransactionsNow() (*txn.Manager, error) {
	tm, err := c.n.Transactions()
	if err != nil {
		return nil, fmt.Errorf("%w: %w", broker.ErrNotWritable, err)
	}
	return tm, nil
}

// TransactionsNow is the gRPC service's, with grpcapi.ErrNotWritable.
func (c gcore) TransactionsNow() (*txn.Manager, error) {
	tm, err := c.n.Transactions()
	if err != nil {
		return nil, fmt.Errorf("%w: %w", grpcapi.ErrNotWritable, err)
	}
	return tm, nil
}
