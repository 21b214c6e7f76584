package meta

import (
	"encoding/json"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"sort"
	"sync"
	"time"

	"github.com/brokercore/brokercore"
)

// ErrInvalid reports a bad group configuration; nothing was changed.
var ErrInvalid = errors.New("meta: invalid subscription group")

// Group is Apache RocketMQ's SubscriptionGroupConfig, in its JSON
// spelling.
type Group struct {
	GroupName                      string            `json:"groupName"`
	ConsumeEnable                  bool              `json:"consumeEnable"`
	ConsumeFromMinEnable           bool              `json:"consumeFromMinEnable"`
	ConsumeBroadcastEnable         bool              `json:"consumeBroadcastEnable"`
	ConsumeMessageOrderly          bool              `json:"consumeMessageOrderly"`
	RetryQueueNums                 int               `json:"retryQueueNums"`
	RetryMaxTimes                  int               `json:"retryMaxTimes"`
	GroupRetryPolicy               json.RawMessage   `json:"groupRetryPolicy,omitempty"`
	BrokerID                       int64             `json:"brokerId"`
	WhichBrokerWhenConsumeSlowly   int64             `json:"whichBrokerWhenConsumeSlowly"`
	NotifyConsumerIdsChangedEnable bool              `json:"notifyConsumerIdsChangedEnable"`
	GroupSysFlag                   int               `json:"groupSysFlag"`
	ConsumeTimeoutMinute           int               `json:"consumeTimeoutMinute"`
	Attributes                     map[string]string `json:"attributes"`
}

// DefaultGroup is a group with Apache's defaults (SubscriptionGroupConfig's
// field initialisers): what a body that omits a field means.
func DefaultGroup(name string) Group {
	return Group{GroupName: name, ConsumeEnable: true, ConsumeFromMinEnable: true, ConsumeBroadcastEnable: true,
		RetryQueueNums: 1, RetryMaxTimes: 16, WhichBrokerWhenConsumeSlowly: 1, NotifyConsumerIdsChangedEnable: true,
		ConsumeTimeoutMinute: 15, Attributes: map[string]string{}}
}

// ParseGroup decodes an UPDATE_AND_CREATE_SUBSCRIPTIONGROUP body: missing
// fields take Apache's defaults; the name is checked with the library's
// rules (brokercore.CheckGroupName).
func ParseGroup(body []byte) (Group, error) {
	var probe struct {
		GroupName string `json:"groupName"`
	}
	if err := json.Unmarshal(body, &probe); err != nil {
		return Group{}, fmt.Errorf("%w: body is not a SubscriptionGroupConfig: %v", ErrInvalid, err)
	}
	g := DefaultGroup(probe.GroupName)
	if err := json.Unmarshal(body, &g); err != nil {
		return Group{}, fmt.Errorf("%w: %v", ErrInvalid, err)
	}
	if err := g.check(); err != nil {
		return Group{}, err
	}
	if g.Attributes == nil {
		g.Attributes = map[string]string{}
	}
	return g, nil
}

func (g Group) check() error {
	if err := brokercore.CheckGroupName(g.GroupName); err != nil {
		return fmt.Errorf("%w: %v", ErrInvalid, err)
	}
	switch {
	case g.RetryMaxTimes < -1:
		return fmt.Errorf("%w: retryMaxTimes %d below -1", ErrInvalid, g.RetryMaxTimes)
	case g.RetryQueueNums < 0:
		return fmt.Errorf("%w: retryQueueNums %d below 0", ErrInvalid, g.RetryQueueNums)
	case len(g.GroupRetryPolicy) > 0 && !json.Valid(g.GroupRetryPolicy):
		return fmt.Errorf("%w: groupRetryPolicy is not JSON", ErrInvalid)
	}
	return nil
}

// DataVersion is Apache's DataVersion of a table: bumped on every change.
type DataVersion struct {
	Timestamp int64 `json:"timestamp"`
	Counter   int64 `json:"counter"`
}

// Groups is the subscription group table, safe for concurrent use.
type Groups struct {
	path string
	now  func() time.Time

	mu      sync.RWMutex
	m       map[string]Group
	version DataVersion
}

type groupsFile struct {
	SubscriptionGroupTable map[string]Group `json:"subscriptionGroupTable"`
	DataVersion            DataVersion      `json:"dataVersion"`
}

// OpenGroups loads the table from path ("" = in memory only); a missing
// file is an empty table.
func OpenGroups(path string) (*Groups, error) {
	g := &Groups{path: path, now: time.Now, m: map[string]Group{}}
	if path == "" {
		return g, nil
	}
	raw, err := os.ReadFile(path)
	if errors.Is(err, os.ErrNotExist) {
		return g, nil
	}
	if err != nil {
		return nil, fmt.Errorf("meta: %w", err)
	}
	var f groupsFile
	if err := json.Unmarshal(raw, &f); err != nil {
		return nil, fmt.Errorf("meta: %s: %w", path, err)
	}
	for name, c := range f.SubscriptionGroupTable {
		if c.GroupName == "" {
			c.GroupName = name
		}
		g.m[name] = c
	}
	g.version = f.DataVersion
	return g, nil
}

// Put creates or replaces a group, durably.
func (g *Groups) Put(c Group) error {
	if err := c.check(); err != nil {
		return err
	}
	g.mu.Lock()
	defer g.mu.Unlock()
	old, had := g.m[c.GroupName]
	g.m[c.GroupName] = c
	if err := g.saveLocked(); err != nil {
		if had {
			g.m[c.GroupName] = old
		} else {
			delete(g.m, c.GroupName)
		}
		return err
	}
	return nil
}

// Delete removes a group, durably; it reports whether it existed.
func (g *Groups) Delete(name string) (bool, error) {
	g.mu.Lock()
	defer g.mu.Unlock()
	old, had := g.m[name]
	if !had {
		return false, nil
	}
	delete(g.m, name)
	if err := g.saveLocked(); err != nil {
		g.m[name] = old
		return false, err
	}
	return true, nil
}

// Get returns a group's configuration.
func (g *Groups) Get(name string) (Group, bool) {
	g.mu.RLock()
	defer g.mu.RUnlock()
	c, ok := g.m[name]
	return c, ok
}

// Orderly reports whether a group consumes in order (consumeMessageOrderly).
func (g *Groups) Orderly(name string) bool {
	g.mu.RLock()
	defer g.mu.RUnlock()
	return g.m[name].ConsumeMessageOrderly
}

// All returns every group, sorted by name.
func (g *Groups) All() []Group {
	g.mu.RLock()
	defer g.mu.RUnlock()
	out := make([]Group, 0, len(g.m))
	for _, c := range g.m {
		out = append(out, c)
	}
	sort.Slice(out, func(i, j int) bool { return out[i].GroupName < out[j].GroupName })
	return out
}

// WrapperJSON is the GET_ALL_SUBSCRIPTIONGROUP_CONFIG body: Apache's
// SubscriptionGroupWrapper.
func (g *Groups) WrapperJSON() []byte {
	g.mu.RLock()
	defer g.mu.RUnlock()
	b, _ := json.Marshal(groupsFile{SubscriptionGroupTable: g.m, DataVersion: g.version})
	return b
}

func (g *Groups) saveLocked() error {
	g.version = DataVersion{Timestamp: g.now().UnixMilli(), Counter: g.version.Counter + 1}
	if g.path == "" {
		return nil
	}
	b, err := json.MarshalIndent(groupsFile{SubscriptionGroupTable: g.m, DataVersion: g.version}, "", "  ")
	if err != nil {
		return fmt.Errorf("meta: %w", err)
	}
	return writeAtomic(g.path, b)
}

// writeAtomic replaces path with b: a crash leaves the old file or the new
// one, never a mix.
func writeAtomic(path string, b []byte) error {
	dir := filepath.Dir(path)
	f, err := os.CreateTemp(dir, filepath.Base(path)+".tmp*")
	if err != nil {
		return fmt.Errorf("meta: %w", err)
	}
	tmp := f.Name()
	_, err = f.Write(b)
	if err == nil {
		err = f.Sync()
	}
	if cerr := f.Close(); err == nil {
		err = cerr
	}
	if err == nil {
		err = os.Rename(tmp, path)
	}
	if err != nil {
		_ = os.Remove(tmp)
		return fmt.Errorf("meta: %w", err)
	}
	if d, err := os.Open(dir); err == nil {
		_ = d.Sync()
		_ = d.Close()
	}
	return nil
}
