package replica

import (
	"fmt"

	"github.com/hashicorp/raft"
)

// AddMember adds a voter: its raft server id and address, and the address
// clients reach it at (Config.Addr on that node; "" = none), replicated
// before it becomes a voter so that every node can redirect to it once it
// leads. It is refused, with the configuration unchanged,
// when the id or the raft address is already a member (ErrDuplicateMember)
// or the node does not answer (ErrUnreachable): raft would otherwise commit
// a configuration with a voter that never votes, and a 3-node cluster with
// one dead extra voter needs 3 of 4 for every write.
func (n *Node) AddMember(id, raftAddr, addr string) error {
	if id == "" || raftAddr == "" {
		return fmt.Errorf("add member: id and raft address are required: %w", ErrInvalid)
	}
	if err := checkMember(id, addr); err != nil {
		return fmt.Errorf("add member: %w", err)
	}
	if len(raftAddr) > maxMemberField {
		return fmt.Errorf("add member: raft address of %d bytes, at most %d: %w", len(raftAddr), maxMemberField, ErrInvalid)
	}
	if n.raft.State() != raft.Leader {
		return n.notLeader()
	}
	cf := n.raft.GetConfiguration()
	if err := cf.Error(); err != nil {
		return fmt.Errorf("add member: %w", err)
	}
	for _, s := range cf.Configuration().Servers {
		if string(s.ID) == id || string(s.Address) == raftAddr {
			err := fmt.Errorf("add member %s at %s: %s at %s is a member already: %w", id, raftAddr, s.ID, s.Address, ErrDuplicateMember)
			n.log.Debug("cluster: membership change refused", "err", err)
			return err
		}
	}
	if probe := n.cfg.Probe; probe == nil {
		n.log.Debug("cluster: member added without a probe", "member", id)
	} else if err := probe(id, raftAddr, addr); err != nil {
		err = fmt.Errorf("add member %s at %s: %v: %w", id, raftAddr, err, ErrUnreachable)
		n.log.Debug("cluster: membership change refused", "err", err)
		return err
	}
	// The client address goes into the replicated state before the node
	// becomes a voter: whoever learns that it leads can redirect to it.
	if addr != "" {
		if _, err := n.apply(&entry{Kind: kindMember, Text: id, Text2: addr}); err != nil {
			return fmt.Errorf("add member %s: record its address: %w", id, err)
		}
	}
	if !n.enter() {
		return ErrClosed
	}
	err := n.logDurable(n.raft.AddVoter(raft.ServerID(id), raft.ServerAddress(raftAddr), cf.Index(), n.cfg.ApplyTimeout))
	n.leave()
	if err != nil {
		return fmt.Errorf("add member %s: %v: %w", id, err, ErrNotCommitted)
	}
	n.log.Info("cluster: member added", "member", id, "raft_addr", raftAddr, "addr", addr)
	return nil
}

// RemoveMember removes a server. Removing the only voter is refused
// (ErrLastVoter): nothing could ever commit again.
func (n *Node) RemoveMember(id string) error {
	if n.raft.State() != raft.Leader {
		return n.notLeader()
	}
	cf := n.raft.GetConfiguration()
	if err := cf.Error(); err != nil {
		return fmt.Errorf("remove member: %w", err)
	}
	found, voter, voters := false, false, 0
	for _, s := range cf.Configuration().Servers {
		if s.Suffrage == raft.Voter {
			voters++
		}
		if string(s.ID) == id {
			found, voter = true, s.Suffrage == raft.Voter
		}
	}
	if !found {
		return fmt.Errorf("remove member %q: %w", id, ErrUnknownMember)
	}
	if voter && voters == 1 {
		return fmt.Errorf("remove member %q: it is the only voter: %w", id, ErrLastVoter)
	}
	if !n.enter() {
		return ErrClosed
	}
	err := n.logDurable(n.raft.RemoveServer(raft.ServerID(id), cf.Index(), n.cfg.ApplyTimeout))
	n.leave()
	if err != nil {
		return fmt.Errorf("remove member %s: %v: %w", id, err, ErrNotCommitted)
	}
	if id != n.cfg.ID && n.raft.State() == raft.Leader {
		if _, err := n.apply(&entry{Kind: kindMember, Text: id}); err != nil {
			n.log.Warn("cluster: removed member's address not dropped", "member", id, "err", err)
		}
	}
	n.log.Info("cluster: member removed", "member", id)
	return nil
}

// logDurable waits for a configuration change's future and then for the
// local log to hold it on disk: raft answers when a majority counting this
// leader has it, and the leader's copy may still be unsynced
// (raftlog_defer.go).
func (n *Node) logDurable(f raft.IndexFuture) error {
	if err := f.Error(); err != nil {
		return err
	}
	if ls, ok := n.logs.(*logStore); ok {
		return ls.waitDurable(f.Index())
	}
	return nil
}
