package replica

import (
	"time"

	"github.com/hashicorp/raft"
)

// watchPeers logs what raft observes of the other members: on the leader, a
// peer it cannot reach (WARN, once per loss, not per failed heartbeat) and
// its return (INFO); on every node, a change of leader and members added
// to or removed from replication (INFO). Every record names the peer with
// the key "peer".
func (n *Node) watchPeers(ch <-chan raft.Observation) {
	defer n.wg.Done()
	for {
		select {
		case <-n.stop:
			return
		case o := <-ch:
			n.observe(o)
		}
	}
}

func (n *Node) observe(o raft.Observation) {
	n.lostMu.Lock()
	defer n.lostMu.Unlock()
	switch d := o.Data.(type) {
	case raft.FailedHeartbeatObservation:
		if _, ok := n.lost[d.PeerID]; !ok {
			n.lost[d.PeerID] = time.Now()
			n.log.Warn("cluster: peer unreachable", "peer", string(d.PeerID), "last_contact", d.LastContact.UTC().Format(time.RFC3339Nano))
		}
	case raft.ResumedHeartbeatObservation:
		if at, ok := n.lost[d.PeerID]; ok {
			delete(n.lost, d.PeerID)
			n.log.Info("cluster: peer reachable again", "peer", string(d.PeerID), "unreachable_for", time.Since(at).Round(time.Millisecond).String())
		}
	case raft.PeerObservation:
		if d.Removed {
			delete(n.lost, d.Peer.ID)
			n.log.Info("cluster: peer removed from replication", "peer", string(d.Peer.ID), "raft_addr", string(d.Peer.Address))
		} else {
			n.log.Info("cluster: peer added to replication", "peer", string(d.Peer.ID), "raft_addr", string(d.Peer.Address))
		}
	case raft.LeaderObservation:
		if d.LeaderID == "" {
			n.log.Info("cluster: no leader", "term", n.raft.CurrentTerm())
		} else {
			n.log.Info("cluster: leader known", "peer", string(d.LeaderID), "raft_addr", string(d.LeaderAddr), "addr", n.memberAddr(string(d.LeaderID)), "term", n.raft.CurrentTerm())
		}
		if string(d.LeaderID) != n.cfg.ID {
			clear(n.lost) // only a leader sends heartbeats
		}
	}
}

// Reachable reports whether this node vouches that member id is up:
// itself, always; on the leader, a member whose heartbeats have not failed
// since they last succeeded. A follower hears from the leader only, so it
// vouches for nobody else. Routes that list more brokers than the leader
// use it (through the leader) to leave out a node that died: a client
// picks among them for calls such as the consumer list.
func (n *Node) Reachable(id string) bool {
	if id == n.cfg.ID {
		return true
	}
	if !n.IsLeader() {
		return false
	}
	n.lostMu.Lock()
	defer n.lostMu.Unlock()
	_, lost := n.lost[raft.ServerID(id)]
	return !lost
}

// observePeers registers the observer of watchPeers (before raft runs long
// enough to miss anything that matters) and starts it.
func (n *Node) observePeers() {
	n.lost = map[raft.ServerID]time.Time{}
	ch := make(chan raft.Observation, 64)
	n.observer = raft.NewObserver(ch, false, func(o *raft.Observation) bool {
		switch o.Data.(type) {
		case raft.FailedHeartbeatObservation, raft.ResumedHeartbeatObservation, raft.PeerObservation, raft.LeaderObservation:
			return true
		}
		return false
	})
	n.raft.RegisterObserver(n.observer)
	n.wg.Add(1)
	go n.watchPeers(ch)
}
