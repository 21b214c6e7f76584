package replica

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"io/fs"
	"log/slog"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"sync"
	"time"

	"github.com/brokercore/brokercore/examples/cluster/internal/fsx"
	"github.com/brokercore/brokercore/pop"
	"github.com/brokercore/brokercore/store"
	"github.com/hashicorp/raft"
)

// MaxGroups is the most raft groups OpenGroups runs in one process.
const MaxGroups = 256

// GroupOf is the routing rule of Groups: queue q of every topic belongs to
// raft group q mod groups (a negative q, which every produce refuses, to
// group 0). It depends on nothing but the two numbers, so every member and
// every restart route alike; a data directory keeps the number of groups it
// was created with (OpenGroups refuses another).
func GroupOf(queueID, groups int) int {
	if groups <= 1 || queueID < 0 {
		return 0
	}
	return queueID % groups
}

// Groups is several raft groups in one process (multi-raft): queues are
// sharded over them by GroupOf, and each group is a whole Node — its own
// leader, raft log, store and directory, membership, offsets, and a
// scheduler that runs on that group's leader over that group's store,
// fenced by that group's raft. A delayed message waits and is delivered in
// the group of its queue. Groups only route: a call for queue q is the
// call of Group(GroupOf(q)), and a *NotLeaderError it answers names that
// group (Group) and that group's leader.
//
// With one group it is exactly Open(cfg): same directory, same transport.
// With more, group g lives in Dir/group-<g> and all of them share one TCP
// listener on RaftAddr (the connection names its group, groupmux.go); the
// members' raft addresses are the same in every group.
type Groups struct {
	nodes []*Node
	trans []*raft.NetworkTransport // nil with one group
	mux   *groupMux                // nil with one group

	closeOnce sync.Once
	closeErr  error
}

// OpenGroups opens groups raft groups (1..MaxGroups) of one member. cfg is
// every group's: its ID, RaftAddr (one listener for all of them), Addr,
// Bootstrap and BootstrapAddrs, Probe and timeouts apply to each group.
// With more than one group, Dir is the parent of the groups' directories,
// cfg.Transport must be nil, and each group's dead letters go to its own
// queue of the dead-letter topic (Config.DeadLetterQueue = g).
func OpenGroups(cfg Config, groups int) (*Groups, error) {
	if groups < 1 || groups > MaxGroups {
		return nil, fmt.Errorf("groups: %d raft groups, want 1..%d: %w", groups, MaxGroups, ErrInvalid)
	}
	if groups == 1 {
		if err := checkGroupsFile(cfg.Dir, 1); err != nil {
			return nil, err
		}
		n, err := Open(cfg)
		if err != nil {
			return nil, err
		}
		return &Groups{nodes: []*Node{n}}, nil
	}
	if cfg.Transport != nil {
		return nil, fmt.Errorf("groups: one Transport cannot carry %d raft groups (set RaftAddr): %w", groups, ErrInvalid)
	}
	if cfg.Transactions != nil {
		// A commit appends its real message (queue q, group q mod N) and
		// its op record (queue 0) as one batch: one group only.
		return nil, fmt.Errorf("groups: transactions need one raft group, not %d: %w", groups, ErrInvalid)
	}
	if cfg.Dir == "" || cfg.RaftAddr == "" {
		return nil, fmt.Errorf("groups: Dir and RaftAddr are required: %w", ErrInvalid)
	}
	if err := checkGroupsFile(cfg.Dir, groups); err != nil {
		return nil, err
	}
	log := cfg.Logger
	if log == nil {
		log = slog.New(slog.DiscardHandler)
	}
	if err := checkRaftAddr(cfg); err != nil {
		return nil, err
	}
	mux, err := listenGroups(cfg.RaftAddr, groups, cfg.ClusterSecret, cfg.raftAuthTimeout, log.With("node", cfg.ID))
	if err != nil {
		return nil, fmt.Errorf("raft transport on %s: %w", cfg.RaftAddr, err)
	}
	gs := &Groups{mux: mux}
	for g := range groups {
		gc := cfg
		gc.Dir = GroupDir(cfg.Dir, g, groups)
		gc.Logger = log.With("group", g)
		gc.DeadLetterQueue = g
		tr := raft.NewNetworkTransport(mux.streams[g], 4, 10*time.Second, io.Discard)
		gc.Transport = tr
		gs.trans = append(gs.trans, tr)
		n, err := Open(gc)
		if err != nil {
			return nil, errors.Join(fmt.Errorf("raft group %d: %w", g, err), gs.Close())
		}
		gs.nodes = append(gs.nodes, n)
	}
	return gs, nil
}

// NewGroups routes over nodes opened elsewhere (with Open, on transports
// of the host's choosing): node g is group g, and should have been opened
// with Config.DeadLetterQueue = g. Close closes them. One node makes a
// Groups of one group, which routes everything to it unchanged.
func NewGroups(nodes ...*Node) (*Groups, error) {
	if len(nodes) < 1 || len(nodes) > MaxGroups {
		return nil, fmt.Errorf("groups: %d nodes, want 1..%d: %w", len(nodes), MaxGroups, ErrInvalid)
	}
	for g, n := range nodes {
		if n == nil {
			return nil, fmt.Errorf("groups: node %d is nil: %w", g, ErrInvalid)
		}
	}
	return &Groups{nodes: nodes}, nil
}

// GroupDir is the directory of group g of a member whose Config.Dir is
// dir: dir itself with one group, dir/group-<g> with more.
func GroupDir(dir string, g, groups int) string {
	if groups <= 1 {
		return dir
	}
	return filepath.Join(dir, "group-"+strconv.Itoa(g))
}

// groupsFile records in a member's directory how many groups it holds.
type groupsFile struct {
	Groups int `json:"groups"`
}

func groupsPath(dir string) string { return filepath.Join(dir, "groups.json") }

// checkGroupsFile refuses a directory made with another number of groups
// (routing would change under the data) and records the number in a new
// one. A directory of one group is a Node's and has no groups.json.
func checkGroupsFile(dir string, groups int) error {
	if dir == "" {
		return nil // Open refuses it
	}
	have := 0
	b, err := os.ReadFile(groupsPath(dir))
	switch {
	case errors.Is(err, fs.ErrNotExist):
		state, err := HasState(dir)
		if err != nil {
			return err
		}
		if state {
			have = 1
		}
	case err != nil:
		return err
	default:
		var f groupsFile
		if err := json.Unmarshal(b, &f); err != nil || f.Groups < 2 {
			return fmt.Errorf("%s: unreadable (%v): %w", groupsPath(dir), err, ErrForeignDataDir)
		}
		have = f.Groups
	}
	if have != 0 && have != groups {
		return fmt.Errorf("%s holds %d raft groups, not %d (queues would route elsewhere): %w", dir, have, groups, ErrForeignDataDir)
	}
	if have != 0 || groups == 1 {
		return nil
	}
	if err := os.MkdirAll(dir, 0o755); err != nil {
		return err
	}
	b, _ = json.Marshal(groupsFile{Groups: groups})
	return fsx.WriteFile(fsx.OS, groupsPath(dir), b, 0o644)
}

// Close closes every group's node (in parallel), then the transport, and
// waits for all of it. Idempotent.
func (gs *Groups) Close() error {
	gs.closeOnce.Do(func() {
		errs := make([]error, len(gs.nodes))
		var wg sync.WaitGroup
		for i, n := range gs.nodes {
			wg.Go(func() { errs[i] = n.Close() })
		}
		wg.Wait()
		for _, tr := range gs.trans {
			tr.CloseStreams()
			_ = tr.Close()
		}
		if gs.mux != nil {
			errs = append(errs, gs.mux.close())
		}
		gs.closeErr = errors.Join(errs...)
	})
	return gs.closeErr
}

// N is the number of groups.
func (gs *Groups) N() int { return len(gs.nodes) }

// GroupOf is the group of queueID (the package's GroupOf with N groups).
func (gs *Groups) GroupOf(queueID int) int { return GroupOf(queueID, len(gs.nodes)) }

// Group is group g's node, for everything Groups does not route itself
// (its store, raft, status). It panics for g outside 0..N-1.
func (gs *Groups) Group(g int) *Node { return gs.nodes[g] }

// ForQueue is the node of queueID's group.
func (gs *Groups) ForQueue(queueID int) *Node { return gs.nodes[gs.GroupOf(queueID)] }

// Leader is the raft id and client address of group g's leader as this
// member knows it (Node.Leader).
func (gs *Groups) Leader(g int) (id, addr string) { return gs.nodes[g].Leader() }

// IsLeader reports whether this member leads group g and its leader
// services run.
func (gs *Groups) IsLeader(g int) bool { return gs.nodes[g].IsLeader() }

// Status is every group's Status, in group order (Status.Group).
func (gs *Groups) Status() []Status {
	out := make([]Status, len(gs.nodes))
	for g, n := range gs.nodes {
		out[g] = n.Status()
		out[g].Group = g
	}
	return out
}

// inGroup names the group in err and in its *NotLeaderError (with more
// than one group).
func (gs *Groups) inGroup(g int, err error) error {
	if err == nil || len(gs.nodes) == 1 {
		return err
	}
	var nl *NotLeaderError
	if errors.As(err, &nl) {
		nl.Group = g
	}
	return fmt.Errorf("raft group %d: %w", g, err)
}

// Produce appends msgs, one atomic batch, through the raft group of their
// queue (Node.Produce). A batch over queues of several groups is refused
// with ErrInvalid: one batch is one raft entry of one group.
func (gs *Groups) Produce(msgs ...*store.Message) ([]*store.Message, error) {
	g := 0
	for i, m := range msgs {
		if m == nil {
			continue // Node.Produce refuses it
		}
		mg := gs.GroupOf(m.QueueID)
		if i > 0 && mg != g {
			return nil, fmt.Errorf("produce: message %d is in raft group %d, message 0 in %d (one batch is one group's): %w", i, mg, g, ErrInvalid)
		}
		g = mg
	}
	out, err := gs.nodes[g].Produce(msgs...)
	return out, gs.inGroup(g, err)
}

// ProduceDelayed is Node.ProduceDelayed in m's queue's group: the message
// waits in that group and its leader's scheduler delivers it.
func (gs *Groups) ProduceDelayed(m *store.Message, level int) (*store.Message, error) {
	g := gs.groupOfMsg(m)
	out, err := gs.nodes[g].ProduceDelayed(m, level)
	return out, gs.inGroup(g, err)
}

// ProduceAt is Node.ProduceAt in m's queue's group.
func (gs *Groups) ProduceAt(m *store.Message, at time.Time) (*store.Message, error) {
	g := gs.groupOfMsg(m)
	out, err := gs.nodes[g].ProduceAt(m, at)
	return out, gs.inGroup(g, err)
}

func (gs *Groups) groupOfMsg(m *store.Message) int {
	if m == nil {
		return 0
	}
	return gs.GroupOf(m.QueueID)
}

// CancelTimer cancels a pending timer of queueID (the queue it was
// produced to) by its UNIQ_KEY, in that queue's group.
func (gs *Groups) CancelTimer(queueID int, uniqKey string) error {
	g := gs.GroupOf(queueID)
	return gs.inGroup(g, gs.nodes[g].CancelTimer(uniqKey))
}

// Pop pops one queue on its group's leader (Node.Pop). With more than one
// group a pop must name its queue (pop.AllQueues is refused with
// ErrInvalid: the queues of a topic have different leaders), and the
// handles answered name their group (HandleGroup) for Ack and
// ChangeInvisible.
func (gs *Groups) Pop(ctx context.Context, req pop.Request) (pop.Result, error) {
	if len(gs.nodes) == 1 {
		return gs.nodes[0].Pop(ctx, req)
	}
	if req.QueueID == pop.AllQueues {
		return pop.Result{}, fmt.Errorf("pop: with %d raft groups a pop names its queue: %w", len(gs.nodes), ErrInvalid)
	}
	g := gs.GroupOf(req.QueueID)
	res, err := gs.nodes[g].Pop(ctx, req)
	for i := range res.Messages {
		res.Messages[i].Handle = groupHandle(g, res.Messages[i].Handle)
	}
	return res, gs.inGroup(g, err)
}

// Ack acks a handle of Pop on its group's leader.
func (gs *Groups) Ack(handle string) error {
	g, h, err := gs.HandleGroup(handle)
	if err != nil {
		return err
	}
	return gs.inGroup(g, gs.nodes[g].Ack(h))
}

// ChangeInvisible changes a handle of Pop on its group's leader; the new
// handle names the group as well.
func (gs *Groups) ChangeInvisible(handle string, d time.Duration) (string, error) {
	g, h, err := gs.HandleGroup(handle)
	if err != nil {
		return "", err
	}
	nh, err := gs.nodes[g].ChangeInvisible(h, d)
	if err != nil {
		return "", gs.inGroup(g, err)
	}
	if len(gs.nodes) == 1 {
		return nh, nil
	}
	return groupHandle(g, nh), nil
}

// groupHandle is a pop handle of group g: "g<g>." and pop's handle (which
// is unpadded base64url: no dot).
func groupHandle(g int, h string) string { return "g" + strconv.Itoa(g) + "." + h }

// HandleGroup splits a handle answered by Pop into its group and pop's
// own handle. With one group handles are pop's, unchanged (group 0). A
// handle naming no group of these is refused with pop.ErrBadHandle.
func (gs *Groups) HandleGroup(handle string) (group int, popHandle string, err error) {
	if len(gs.nodes) == 1 {
		return 0, handle, nil
	}
	head, rest, ok := strings.Cut(handle, ".")
	if !ok || len(head) < 2 || head[0] != 'g' {
		return 0, "", fmt.Errorf("handle names no raft group: %w", pop.ErrBadHandle)
	}
	g, err := strconv.Atoi(head[1:])
	if err != nil || g < 0 || g >= len(gs.nodes) || strconv.Itoa(g) != head[1:] {
		return 0, "", fmt.Errorf("handle names raft group %q of %d: %w", head[1:], len(gs.nodes), pop.ErrBadHandle)
	}
	return g, rest, nil
}

// ResetOffset is Node.ResetOffset in queueID's group.
func (gs *Groups) ResetOffset(group, topic string, queueID int, offset int64) error {
	g := gs.GroupOf(queueID)
	return gs.inGroup(g, gs.nodes[g].ResetOffset(group, topic, queueID, offset))
}

// Committed is the replicated committed offset of a consumer group's queue
// (any member), from the queue's raft group.
func (gs *Groups) Committed(group, topic string, queueID int) (int64, bool) {
	return gs.ForQueue(queueID).Committed(group, topic, queueID)
}

// Read reads the local replica of queueID's group (a follower may lag).
func (gs *Groups) Read(topic string, queueID int, offset int64, max int) ([]*store.Message, error) {
	return gs.ForQueue(queueID).Read(topic, queueID, offset, max)
}

// AddMember adds a voter to group g (Node.AddMember on that group's
// leader). A member of several groups is added to each: its raft address
// is the same in all of them.
func (gs *Groups) AddMember(g int, id, raftAddr, addr string) error {
	if err := gs.checkGroup(g); err != nil {
		return fmt.Errorf("add member: %w", err)
	}
	return gs.inGroup(g, gs.nodes[g].AddMember(id, raftAddr, addr))
}

// RemoveMember removes a server from group g (Node.RemoveMember).
func (gs *Groups) RemoveMember(g int, id string) error {
	if err := gs.checkGroup(g); err != nil {
		return fmt.Errorf("remove member: %w", err)
	}
	return gs.inGroup(g, gs.nodes[g].RemoveMember(id))
}

func (gs *Groups) checkGroup(g int) error {
	if g < 0 || g >= len(gs.nodes) {
		return fmt.Errorf("raft group %d of %d: %w", g, len(gs.nodes), ErrInvalid)
	}
	return nil
}
