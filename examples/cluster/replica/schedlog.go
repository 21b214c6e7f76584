package replica

import (
	"errors"
	"fmt"
	"sync"

	"github.com/brokercore/brokercore/schedule"
	"github.com/brokercore/brokercore/store"
)

// schedLog is the scheduler's Log on the leader, and its
// schedule.ProgressLog: reads go to the local replica; every delivery is
// one raft entry carrying the delivered messages and the scheduler's
// encoded progress together (kindDeliver; kindProgress for a progress
// record alone, such as a cancel), applied atomically on every node.
//
// Each entry also names the progress it starts from, and the FSM applies it
// only on top of exactly that. A deposed leader cannot commit, so a
// delivery task that outlives its leadership (the field report's zombie)
// delivers nothing; and a delivery whose outcome the scheduler did not
// learn (a timeout, leadership lost mid-commit) and that it retries is
// refused if the first attempt committed after all.
type schedLog struct {
	n *Node

	mu        sync.Mutex // serializes deliveries (the scheduler does too)
	committed []byte     // the replicated progress as this term last saw it
}

var _ schedule.ProgressLog = (*schedLog)(nil)

func newSchedLog(n *Node) *schedLog {
	return &schedLog{n: n, committed: n.fsm.loadProgress()}
}

// Read implements schedule.Log.
func (l *schedLog) Read(topic string, queueID int, offset int64, max int) ([]*store.Message, error) {
	return l.n.st.Read(topic, queueID, offset, max)
}

// MinOffset implements schedule.Log.
func (l *schedLog) MinOffset(topic string, queueID int) int64 {
	return l.n.st.MinOffset(topic, queueID)
}

// MaxOffset implements schedule.Log.
func (l *schedLog) MaxOffset(topic string, queueID int) int64 {
	return l.n.st.MaxOffset(topic, queueID)
}

// Append implements schedule.Log. A scheduler over a ProgressLog delivers
// through AppendWithProgress; a plain append is a produce.
func (l *schedLog) Append(msgs ...*store.Message) error {
	_, err := l.n.produce(msgs)
	return err
}

// AppendWithProgress implements schedule.ProgressLog.
func (l *schedLog) AppendWithProgress(progress []byte, msgs ...*store.Message) error {
	l.mu.Lock()
	defer l.mu.Unlock()
	if h := l.n.cfg.beforePropose; h != nil {
		h()
	}
	if progress == nil {
		return fmt.Errorf("deliver: no progress: %w", ErrInvalid)
	}
	e := &entry{Kind: kindDeliver, Msgs: msgs, Progress: progress, Prev: l.committed}
	if len(msgs) == 0 {
		e.Kind = kindProgress
	}
	if _, err := l.n.apply(e); err != nil {
		if errors.Is(err, ErrStaleProgress) {
			// Another delivery got there first: this scheduler's view is
			// behind. Rebuild the leader services from the replicated state.
			l.n.log.Warn("cluster: scheduler delivery refused as stale; restarting the scheduler", "err", err)
			l.n.requestRebuild()
		}
		return err
	}
	l.committed = progress
	return nil
}

// LoadProgress implements schedule.ProgressLog.
func (l *schedLog) LoadProgress() ([]byte, error) {
	l.mu.Lock()
	defer l.mu.Unlock()
	if len(l.committed) == 0 {
		return nil, nil
	}
	return append([]byte(nil), l.committed...), nil
}
