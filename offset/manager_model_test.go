package offset

import (
	"fmt"
	"maps"
	"path/filepath"
	"slices"
	"testing"
	"time"

	"github.com/stretchr/testify/require"
	"pgregory.net/rapid"
)

// managerModel is the Manager in a few lines: a map, a removed-epoch floor,
// and the state the file holds (what a crash falls back to).
type managerModel struct {
	live, durable       map[key]modelEntry
	floor, durableFloor uint64
	everHanded          map[key]uint64 // highest epoch Reset ever returned per key
	// claimed: keys whose epoch a fenced committer has read (Epoch,
	// Position, a successful CommitFenced) since the manager opened; a
	// plain Commit there is a reset.
	claimed map[key]bool
}

type modelEntry struct {
	off   int64
	epoch uint64
}

func (mm *managerModel) persist() {
	mm.durable, mm.durableFloor = maps.Clone(mm.live), mm.floor
}

func (mm *managerModel) reset(k key, off int64) uint64 {
	e := max(mm.live[k].epoch, mm.floor) + 1
	mm.live[k] = modelEntry{off, e}
	mm.everHanded[k] = max(mm.everHanded[k], e)
	return e
}

var (
	modelGroups = []string{"g1", "g2", "g3"}
	modelTopics = []string{"a", "b"}
)

func drawKey(t *rapid.T) key {
	return key{
		rapid.SampledFrom(modelGroups).Draw(t, "group"),
		rapid.SampledFrom(modelTopics).Draw(t, "topic"),
		rapid.IntRange(0, 2).Draw(t, "queue"),
	}
}

// TestManagerMatchesModelAcrossFlushReopenAndCrash drives a file-backed
// Manager with random commits, fenced commits (current and stale epochs),
// resets, removes, clones, flush + reopen and crash (= reopen without a
// flush) and checks after every step that it answers exactly like the model.
func TestManagerMatchesModelAcrossFlushReopenAndCrash(t *testing.T) {
	dir := t.TempDir()
	run := 0
	rapid.Check(t, func(rt *rapid.T) {
		run++
		path := filepath.Join(dir, fmt.Sprintf("offsets-%d", run))
		opts := Options{Path: path, FlushEvery: time.Hour}
		m, err := Open(opts)
		require.NoError(rt, err)
		defer func() { m.Close() }()
		mm := &managerModel{live: map[key]modelEntry{}, durable: map[key]modelEntry{}, everHanded: map[key]uint64{}, claimed: map[key]bool{}}

		rt.Repeat(map[string]func(*rapid.T){
			"commit": func(t *rapid.T) {
				k, off := drawKey(t), rapid.Int64Range(0, 1000).Draw(t, "off")
				require.NoError(t, m.Commit(k.group, k.topic, k.queue, off))
				if mm.claimed[k] { // a fenced committer serves it: the commit fences it out
					mm.reset(k, off)
					mm.persist()
					return
				}
				mm.live[k] = modelEntry{off, mm.live[k].epoch}
			},
			"fencedCurrent": func(t *rapid.T) {
				k, off := drawKey(t), rapid.Int64Range(0, 1000).Draw(t, "off")
				require.NoError(t, m.CommitFenced(k.group, k.topic, k.queue, off, mm.live[k].epoch))
				mm.live[k] = modelEntry{off, mm.live[k].epoch}
				mm.claimed[k] = true
			},
			"fencedStale": func(t *rapid.T) {
				k, off := drawKey(t), rapid.Int64Range(0, 1000).Draw(t, "off")
				cur := mm.live[k].epoch
				stale := cur + 1 + rapid.Uint64Range(0, 3).Draw(t, "ahead")
				if cur > 0 && rapid.Bool().Draw(t, "older") {
					stale = rapid.Uint64Range(0, cur-1).Draw(t, "old")
				}
				require.ErrorIs(t, m.CommitFenced(k.group, k.topic, k.queue, off, stale), ErrStaleEpoch)
			},
			"reset": func(t *rapid.T) {
				k, off := drawKey(t), rapid.Int64Range(0, 1000).Draw(t, "off")
				e, err := m.Reset(k.group, k.topic, k.queue, off)
				require.NoError(t, err)
				require.Greater(t, e, mm.everHanded[k], "a reset never reuses an epoch of its key")
				require.Equal(t, mm.reset(k, off), e)
				mm.persist()
			},
			"clone": func(t *rapid.T) {
				from, to := rapid.SampledFrom(modelGroups).Draw(t, "from"), rapid.SampledFrom(modelGroups).Draw(t, "to")
				if from == to {
					require.ErrorIs(t, m.Clone(from, to), ErrInvalid)
					return
				}
				require.NoError(t, m.Clone(from, to))
				copied := false
				for k, v := range maps.Clone(mm.live) {
					if k.group == from {
						mm.reset(key{to, k.topic, k.queue}, v.off)
						copied = true
					}
				}
				if copied {
					mm.persist()
				}
			},
			"remove": func(t *rapid.T) {
				g := rapid.SampledFrom(modelGroups).Draw(t, "group")
				m.Remove(g)
				for k, v := range mm.live {
					if k.group == g {
						mm.floor = max(mm.floor, v.epoch)
						delete(mm.live, k)
					}
				}
				for k := range mm.claimed {
					if k.group == g {
						delete(mm.claimed, k)
					}
				}
			},
			"removeTopic": func(t *rapid.T) {
				g, tp := rapid.SampledFrom(modelGroups).Draw(t, "group"), rapid.SampledFrom(modelTopics).Draw(t, "topic")
				m.RemoveTopic(g, tp)
				for k, v := range mm.live {
					if k.group == g && k.topic == tp {
						mm.floor = max(mm.floor, v.epoch)
						delete(mm.live, k)
					}
				}
				for k := range mm.claimed {
					if k.group == g && k.topic == tp {
						delete(mm.claimed, k)
					}
				}
			},
			"flushAndReopen": func(t *rapid.T) {
				require.NoError(t, m.Flush())
				mm.persist()
				require.NoError(t, m.Close())
				m, err = Open(opts)
				require.NoError(t, err)
				clear(mm.claimed)
			},
			"closeAndReopen": func(t *rapid.T) {
				require.NoError(t, m.Close())
				mm.persist()
				m, err = Open(opts)
				require.NoError(t, err)
				clear(mm.claimed)
			},
			"crash": func(t *rapid.T) {
				crash(m)
				mm.live, mm.floor = maps.Clone(mm.durable), mm.durableFloor
				m, err = Open(opts)
				require.NoError(t, err)
				clear(mm.claimed)
			},
			"": func(t *rapid.T) {
				require.Equal(t, uint64(len(mm.live)), m.Stats().Keys)
				for k, v := range mm.live {
					off, ok := m.Committed(k.group, k.topic, k.queue)
					require.True(t, ok, "%v", k)
					require.Equal(t, v.off, off, "offset of %v", k)
				}
				// Read the epochs of some keys only (Epoch claims the key),
				// so plain commits on unclaimed keys stay plain.
				for k, v := range mm.live {
					if rapid.Bool().Draw(t, "readEpoch") {
						require.Equal(t, v.epoch, m.Epoch(k.group, k.topic, k.queue), "epoch of %v", k)
						mm.claimed[k] = true
					}
				}
				groups := map[string]struct{}{}
				for k := range mm.live {
					groups[k.group] = struct{}{}
				}
				got := m.Groups()
				require.True(t, slices.IsSorted(got))
				require.ElementsMatch(t, slices.Collect(maps.Keys(groups)), got)
				// Epochs never go backwards: a key's epoch is the last one a
				// reset handed out for it (or above, after a Remove's floor), or
				// 0 in a new life after a Remove — never an older reset's epoch.
				for k, v := range mm.live {
					if v.epoch != 0 {
						require.GreaterOrEqual(t, v.epoch, mm.everHanded[k], "epoch of %v went backwards", k)
					}
				}
			},
		})
	})
}
