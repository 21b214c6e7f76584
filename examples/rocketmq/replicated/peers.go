package replicated

import (
	"context"
	"encoding/json"
	"fmt"
	"sync"
	"time"

	"github.com/brokercore/brokercore/examples/cluster/replica"
)

// Which followers a route lists (Server.followers).
//
// A v2 client asks a broker picked at random from a route for its group's
// consumer list, and heartbeats every broker in it: a dead node left in the
// routes stops a consumer's rebalance as often as it is picked, and a live
// node left out never learns the producers it must check transactions of
// once it leads. Only the leader knows which followers are up (raft's
// heartbeats: replica.Node.Reachable). So a follower asks the leader every
// relayReportEvery (codeRelayPeers, MAC'd as the relay's requests) and
// lists what it answered, itself included, while that answer is at most
// relayExpiry old. Without a fresh answer (no leader for a while, or just
// started) it lists every peer, as before it knew better.

// contacts is the leader's answer to codeRelayPeers: the ids of the
// servers of the raft configuration it is in contact with, not itself (a
// follower's copy must not name it once it died).
func (r *relay) contacts() ([]byte, error) {
	if !r.n.IsLeader() {
		return nil, fmt.Errorf("peers: %w", replica.ErrNotLeader)
	}
	f := r.n.Raft().GetConfiguration()
	if err := f.Error(); err != nil {
		return nil, err
	}
	var ids []string
	for _, srv := range f.Configuration().Servers {
		if id := string(srv.ID); id != r.id && r.n.Reachable(id) {
			ids = append(ids, id)
		}
	}
	return json.Marshal(ids)
}

// livePeers is a follower's copy of the leader's last contacts answer.
type livePeers struct {
	mu  sync.Mutex
	ids map[string]bool
	at  time.Time
	now func() time.Time
}

func (l *livePeers) set(ids []string) {
	m := make(map[string]bool, len(ids))
	for _, id := range ids {
		m[id] = true
	}
	l.mu.Lock()
	l.ids, l.at = m, l.now()
	l.mu.Unlock()
}

// fresh is the last answer while it is at most relayExpiry old, else nil.
func (l *livePeers) fresh() map[string]bool {
	l.mu.Lock()
	defer l.mu.Unlock()
	if l.ids == nil || l.now().Sub(l.at) > relayExpiry {
		return nil
	}
	return l.ids
}

// pollPeers asks the leader for its contacts every relayReportEvery while
// this node does not lead, until stop.
func (r *relay) pollPeers(live *livePeers, stop <-chan struct{}) {
	t := time.NewTicker(relayReportEvery)
	defer t.Stop()
	for {
		r.askPeers(live)
		select {
		case <-stop:
			return
		case <-t.C:
		}
	}
}

func (r *relay) askPeers(live *livePeers) {
	if r.n.IsLeader() {
		return
	}
	_, leader := r.n.Leader()
	if leader == "" || leader == r.addr {
		return
	}
	req, err := r.request(codeRelayPeers, struct{}{})
	if err != nil {
		return
	}
	ctx, cancel := context.WithTimeout(context.Background(), relayCallTimeout)
	defer cancel()
	body, err := r.callFor(ctx, leader, req)
	var ids []string
	if err == nil {
		err = json.Unmarshal(body, &ids)
	}
	if err != nil {
		r.log.Debug("the leader's contacts not known", "leader", leader, "err", err)
		return
	}
	live.set(ids)
}
