package replica

import (
	"math/rand/v2"
	"time"

	"github.com/hashicorp/raft"
)

// A follower of hashicorp/raft checks its leader's contact on a timer of a
// random period in [HeartbeatTimeout, 2×HeartbeatTimeout) that contact does
// not reset, so it notices a leader that went silent between one and three
// heartbeat timeouts after the last contact. And a follower that has not
// noticed yet refuses the votes of one that has ("we have a leader"), so
// the election waits for the later of the two to notice: measured, a
// leader kill took 534 ms (p50) to a new raft leader at a 250 ms heartbeat
// and election timeout. watchContact applies raft's own criterion (no
// contact for HeartbeatTimeout) as soon as it holds: it looks every
// HeartbeatTimeout/16, and once the leader has been silent for the timeout
// plus a random part of a quarter of it (so the followers seldom stand as
// candidates at once and split the vote), it has raft check now.

// contactCheck decides whether raft should check its leader's contact now:
// a follower that still names a leader it has not heard from for longer
// than timeout + jitter. (A candidate, a leader, or a follower that knows
// no leader is doing or has done the check itself.)
func contactCheck(state raft.RaftState, leader raft.ServerAddress, silent, timeout, jitter time.Duration) bool {
	return state == raft.Follower && leader != "" && silent >= timeout+jitter
}

// watchContact runs while the node is open (Node.wg).
func (n *Node) watchContact() {
	defer n.wg.Done()
	hb := n.cfg.HeartbeatTimeout
	t := time.NewTicker(max(hb/16, time.Millisecond))
	defer t.Stop()
	jitter := rand.N(hb/4 + 1)
	for {
		select {
		case <-n.stop:
			return
		case <-t.C:
		}
		leader, _ := n.raft.LeaderWithID()
		silent := time.Since(n.raft.LastContact())
		if !contactCheck(n.raft.State(), leader, silent, hb, jitter) {
			continue
		}
		n.checkContactNow(leader, silent)
		jitter = rand.N(hb/4 + 1)
	}
}

// checkContactNow has raft's follower loop check its leader's contact at
// once. hashicorp/raft does that when its heartbeat timeout is lowered
// (ReloadConfig); the configured one is put back right after, and the
// check still uses raft's criterion, which the caller found met. The
// lowered timeout is the leader lease, the least raft accepts: with a
// lease equal to the heartbeat timeout nothing can be lowered, and raft's
// own timer decides (Config.LeaderLeaseTimout documents it).
func (n *Node) checkContactNow(leader raft.ServerAddress, silent time.Duration) {
	rc := n.raft.ReloadableConfig()
	lower := rc
	lower.HeartbeatTimeout = n.cfg.LeaderLeaseTimout
	if lower.HeartbeatTimeout >= rc.HeartbeatTimeout {
		return
	}
	n.log.Info("cluster: leader silent for its heartbeat timeout; starting an election now",
		"leader", string(leader), "silent_ms", silent.Milliseconds())
	if err := n.raft.ReloadConfig(lower); err != nil {
		n.log.Warn("cluster: could not have raft check its leader's contact", "err", err)
		return
	}
	if err := n.raft.ReloadConfig(rc); err != nil {
		n.log.Error("cluster: could not restore raft's heartbeat timeout", "heartbeat_timeout", rc.HeartbeatTimeout, "err", err)
	}
}
