package replica

import (
	"errors"
	"fmt"

	"github.com/brokercore/brokercore"
	"github.com/brokercore/brokercore/store"
	"github.com/brokercore/brokercore/txn"
)

// Transactions (RocketMQ's half messages, commit, rollback and check-back)
// run on the leader: with Config.Transactions set, every leader term
// builds a txn.Manager of its own after the barrier that applied every
// earlier leader's entries (txn.New rebuilds the open transactions from
// the half and op records the replica holds), starts it, and closes it
// when the term ends. Followers run none: they append nothing and send no
// check-back.
//
// The Manager's log (termLog) appends through raft, each Append one
// kindFenced entry: its messages (a commit's real message on a client's
// topic and its op record) are one batch on every replica, and the entry
// applies only in the raft term of the Manager that proposed it. So a
// Manager never outlives its view of the log: within its term it is the
// only writer of transaction records, and should this node lose and
// regain leadership before the leader loop rebuilds it, every append of
// the old term's Manager is refused on every node (ErrStaleTerm) and
// nothing of it lands. An append raft did not confirm (ErrNotCommitted)
// may still be committed — in its term only — which is the txn.Log
// contract: once a later append of the same term succeeds, whatever the
// failed one left is applied here and readable, and the Manager settles
// its uncertain transactions on it (txn.ErrUncertain).

// Transactions returns the transaction manager of the current leader
// term: ErrNotLeader (a *NotLeaderError) while this node does not lead,
// ErrInvalid when Config.Transactions is nil. The Manager is closed when
// the term ends; a call on it then answers txn.ErrClosed.
func (n *Node) Transactions() (*txn.Manager, error) {
	if n.cfg.Transactions == nil {
		return nil, fmt.Errorf("transactions: not configured: %w", ErrInvalid)
	}
	t, err := n.services()
	if err != nil {
		return nil, err
	}
	return t.txns, nil
}

// newTransactions builds and starts the Manager of leader term raftTerm
// (nil when transactions are not configured).
func (n *Node) newTransactions(raftTerm uint64) (*txn.Manager, error) {
	if n.cfg.Transactions == nil {
		return nil, nil
	}
	o := *n.cfg.Transactions
	// The records' StoredAt are Config.Now's readings (the proposing
	// leader's), and due times count from them: one clock.
	o.Now = n.cfg.Now
	if o.Logger == nil {
		o.Logger = n.log
	}
	m, err := txn.New(newTermLog(n, raftTerm), o)
	if err != nil {
		return nil, err
	}
	if err := m.Start(); err != nil {
		_ = m.Close()
		return nil, err
	}
	return m, nil
}

// termLog is the txn.Log of one leader term's Manager: appends are fenced
// raft entries of that term (concurrent ones joined into one entry, each
// still one batch, by a batcher of its own), reads are the local
// replica's.
type termLog struct {
	n     *Node
	term  uint64
	batch batcher
}

func newTermLog(n *Node, term uint64) *termLog {
	l := &termLog{n: n, term: term}
	l.batch = batcher{n: n, fenced: true, term: term}
	return l
}

var _ txn.Log = (*termLog)(nil)

// Append proposes msgs as one batch of a kindFenced entry of the log's term and
// fills in their QueueOffset, LogOffset and StoredAt. Its errors say what
// txn needs to know: store.ErrInvalid (refused, nothing proposed) and
// store.ErrClosed (this term's log is over: nothing proposed, or refused
// as stale on every node) cannot have landed; anything else
// (ErrNotCommitted) may have.
func (l *termLog) Append(msgs ...*store.Message) error {
	for i, m := range msgs {
		if m == nil {
			return fmt.Errorf("transaction append: message %d: nil: %w: %w", i, store.ErrInvalid, ErrInvalid)
		}
		if err := brokercore.CheckTopicName(m.Topic); err != nil {
			return fmt.Errorf("transaction append: message %d: %w: %w: %w", i, store.ErrInvalid, ErrInvalid, err)
		}
	}
	if err := checkBatch(msgs); err != nil {
		return fmt.Errorf("transaction append: %w: %w", store.ErrInvalid, err)
	}
	if t := l.n.raft.CurrentTerm(); t != l.term {
		return fmt.Errorf("transaction append: term %d is over (now %d): %w: %w", l.term, t, store.ErrClosed, ErrNotLeader)
	}
	out, err := l.batch.produce(msgs)
	switch {
	case errors.Is(err, ErrNotLeader), errors.Is(err, ErrClosed), errors.Is(err, ErrStaleTerm):
		return fmt.Errorf("transaction append: %w: %w", store.ErrClosed, err)
	case errors.Is(err, ErrRejected):
		return fmt.Errorf("transaction append: %w: %w", store.ErrInvalid, err)
	case err != nil:
		return fmt.Errorf("transaction append: %w", err)
	}
	for i, m := range out {
		msgs[i].QueueOffset, msgs[i].LogOffset, msgs[i].StoredAt = m.QueueOffset, m.LogOffset, m.StoredAt
	}
	return nil
}

func (l *termLog) Read(topic string, queueID int, offset int64, max int) ([]*store.Message, error) {
	return l.n.st.Read(topic, queueID, offset, max)
}

func (l *termLog) MinOffset(topic string, queueID int) int64 { return l.n.st.MinOffset(topic, queueID) }
func (l *termLog) MaxOffset(topic string, queueID int) int64 { return l.n.st.MaxOffset(topic, queueID) }
