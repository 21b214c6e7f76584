package store

import (
	"flag"
	"fmt"
	"os"
	"path/filepath"
	"slices"
	"testing"

	"github.com/stretchr/testify/require"
	"pgregory.net/rapid"

	"github.com/brokercore/brokercore/internal/fsx/fsxtest"
)

// damageDerived deletes, truncates, zeroes part of or flips a bit of one
// derived file (checkpoint or index file) of dir.
// The checkpoint is spared while a queue is retained to empty: it is the one
// place (not derived from the log) that remembers such a queue's offsets.
func damageDerived(rt *rapid.T, dir string, spareCheckpoint bool) {
	var files []string
	if _, err := os.Stat(filepath.Join(dir, ckptFile)); err == nil && !spareCheckpoint {
		files = append(files, filepath.Join(dir, ckptFile))
	}
	ents, _ := os.ReadDir(filepath.Join(dir, "index"))
	for _, e := range ents {
		files = append(files, filepath.Join(dir, "index", e.Name()))
	}
	if len(files) == 0 {
		return
	}
	path := rapid.SampledFrom(files).Draw(rt, "derived file")
	b, err := os.ReadFile(path)
	require.NoError(rt, err)
	switch rapid.SampledFrom([]string{"delete", "truncate", "zero", "flip"}).Draw(rt, "damage") {
	case "delete":
		require.NoError(rt, os.Remove(path))
		return
	case "truncate":
		b = b[:rapid.IntRange(0, len(b)).Draw(rt, "length")]
	case "zero":
		if len(b) > 0 {
			from := rapid.IntRange(0, len(b)-1).Draw(rt, "from")
			clear(b[from:rapid.IntRange(from, len(b)).Draw(rt, "to")])
		}
	case "flip":
		if len(b) > 0 {
			b[rapid.IntRange(0, len(b)-1).Draw(rt, "byte")] ^= 1 << rapid.IntRange(0, 7).Draw(rt, "bit")
		}
	}
	require.NoError(rt, os.WriteFile(path, b, 0o640))
}

func flagSet(name string) bool {
	set := false
	flag.Visit(func(f *flag.Flag) { set = set || f.Name == name })
	return set
}

// The model of the log is a plain list of records and where batches end.
type modelRec struct {
	topic string
	queue int
	body  string
}

type logModel struct {
	recs   []modelRec
	ends   []int // len(recs) after each batch
	synced int   // records acknowledged as synced
}

func (m *logModel) queue(topic string, q int) []string {
	var out []string
	for _, r := range m.recs {
		if r.topic == topic && r.queue == q {
			out = append(out, r.body)
		}
	}
	return out
}

var rapidTopics = []string{"t", "u"}

// emptied reports whether retention emptied a queue that has records.
func (m *logModel) emptied(s *Store) bool {
	for _, topic := range rapidTopics {
		for q := 0; q < 3; q++ {
			if n := int64(len(m.queue(topic, q))); n > 0 && s.MinOffset(topic, q) >= n {
				return true
			}
		}
	}
	return false
}

// TestLogMatchesModelUnderAppendsReopensAndCrashes drives the store with
// random appends (single and batch, several queues), reads, reopens,
// crashes (files closed without the store's final fsync or checkpoint, then
// the log cut at a random point past the last sync), failures of the Nth
// write, fsync, open or rename of a non-log file (with failed opens after
// it), and damage to derived files (checkpoint, index files: deleted,
// truncated, zeroed, bit-flipped, with failed opens in between), and checks
// it against the model: no acknowledged record is lost, offsets stay dense,
// nothing reads back different, and a crash never leaves part of a batch.
func TestLogMatchesModelUnderAppendsReopensAndCrashes(t *testing.T) {
	t.Parallel()
	if os.Getenv("BROKERCORE_LONG") == "" && !flagSet("rapid.checks") {
		// Every crash and reopen fsyncs: keep the default run short.
		require.NoError(t, flag.Set("rapid.checks", "30"))
		defer flag.Set("rapid.checks", "100")
	}
	rapid.Check(t, func(rt *rapid.T) {
		dir, err := os.MkdirTemp("", "store-rapid-")
		require.NoError(rt, err)
		defer os.RemoveAll(dir)
		o := Options{
			Sync:        rapid.SampledFrom([]SyncPolicy{SyncNone, SyncNone, SyncGroup}).Draw(rt, "sync"),
			SegmentSize: rapid.IntRange(200, 2000).Draw(rt, "segment"),
			MaxBytes:    rapid.SampledFrom([]int64{0, 1500, 4000}).Draw(rt, "max bytes"),
			RetainEvery: -1, // only the "retain" action drops segments
			fs:          &fsxtest.Faulty{},
		}
		faulty := o.fs.(*fsxtest.Faulty)
		s, err := Open(dir, o)
		require.NoError(rt, err)
		defer func() { s.Close() }()
		m := &logModel{}
		n := 0
		lastMin := map[string]int64{}

		check := func(rt *rapid.T) {
			for _, topic := range rapidTopics {
				for q := 0; q < 3; q++ {
					want := m.queue(topic, q)
					key := fmt.Sprint(topic, q)
					require.Equal(rt, int64(len(want)), s.MaxOffset(topic, q), "%s/%d", topic, q)
					minOff := s.MinOffset(topic, q)
					require.GreaterOrEqual(rt, minOff, lastMin[key], "MinOffset went backwards")
					require.LessOrEqual(rt, minOff, int64(len(want)))
					lastMin[key] = minOff
					if minOff > 0 {
						_, err := s.Read(topic, q, minOff-1, 1)
						require.ErrorIs(rt, err, ErrOffsetTooSmall)
					}
					got, err := s.Read(topic, q, minOff, MaxReadBatch)
					require.NoError(rt, err)
					want = want[minOff:]
					if len(want) == 0 {
						want = []string{}
					}
					require.Equal(rt, want, bodies(got), "%s/%d", topic, q)
					for i, g := range got {
						require.Equal(rt, minOff+int64(i), g.QueueOffset)
					}
				}
			}
		}

		newBatch := func(rt *rapid.T) []*Message {
			size := rapid.OneOf(rapid.Just(1), rapid.IntRange(1, 5)).Draw(rt, "batch")
			batch := make([]*Message, size)
			for i := range batch {
				n++
				batch[i] = &Message{
					Topic:   rapid.SampledFrom(rapidTopics).Draw(rt, "topic"),
					QueueID: rapid.IntRange(0, 2).Draw(rt, "queue"),
					Body:    []byte(fmt.Sprintf("m%d-%s", n, rapid.StringN(0, 40, -1).Draw(rt, "body"))),
					Keys:    []string{fmt.Sprint(n)},
				}
			}
			return batch
		}
		acked := func(rt *rapid.T, batch []*Message) {
			for _, b := range batch {
				require.Equal(rt, int64(len(m.recs)), b.LogOffset)
				require.Equal(rt, int64(len(m.queue(b.Topic, b.QueueID))), b.QueueOffset)
				m.recs = append(m.recs, modelRec{b.Topic, b.QueueID, string(b.Body)})
			}
			m.ends = append(m.ends, len(m.recs))
			if o.Sync == SyncGroup {
				m.synced = len(m.recs) // acknowledged means fsynced
			}
		}
		// reopenAfter opens again after a failure or damage with nothing
		// lost (no crash): every acknowledged record is there, and the batch
		// whose Append failed is there whole or not at all.
		reopenAfter := func(rt *rapid.T, failed []*Message) {
			var err error
			s, err = Open(dir, o)
			require.NoError(rt, err)
			kept := int(s.Stats().LogNext)
			if failed != nil && kept == len(m.recs)+len(failed) {
				for _, b := range failed {
					m.recs = append(m.recs, modelRec{b.Topic, b.QueueID, string(b.Body)})
				}
				m.ends = append(m.ends, len(m.recs))
			}
			require.Equal(rt, len(m.recs), kept, "acknowledged records kept, nothing else")
			m.synced = kept
		}

		rt.Repeat(map[string]func(*rapid.T){
			"append": func(rt *rapid.T) {
				batch := newBatch(rt)
				require.NoError(rt, s.Append(batch...))
				acked(rt, batch)
			},
			"fail the Nth write": func(rt *rapid.T) {
				op := rapid.SampledFrom([]fsxtest.Op{fsxtest.OpOpen, fsxtest.OpWrite, fsxtest.OpSync, fsxtest.OpRename}).Draw(rt, "op")
				faulty.Fail(op, rapid.IntRange(1, 4).Draw(rt, "nth"), fsxtest.ENOSPC)
				var failed []*Message
				for range rapid.IntRange(1, 12).Draw(rt, "appends") {
					batch := newBatch(rt)
					if err := s.Append(batch...); err != nil {
						require.ErrorIs(rt, err, ErrFailed)
						failed = batch
						break
					}
					acked(rt, batch)
				}
				_ = s.Close() // works; may answer the failure
				for range rapid.IntRange(0, 2).Draw(rt, "failed opens") {
					if s2, err := Open(dir, o); err == nil {
						s2.Close()
					} else {
						require.ErrorIs(rt, err, ErrFailed)
					}
				}
				faulty.Heal()
				reopenAfter(rt, failed)
			},
			"damage a derived file": func(rt *rapid.T) {
				spare := m.emptied(s)
				if rapid.Bool().Draw(rt, "crash first") {
					crash(rt, s) // nothing chopped: the page cache survives a process crash
				} else {
					require.NoError(rt, s.Close())
				}
				for range rapid.IntRange(1, 3).Draw(rt, "damages") {
					damageDerived(rt, dir, spare)
					if rapid.Bool().Draw(rt, "failed open") {
						faulty.Fail(fsxtest.OpWrite, rapid.IntRange(1, 3).Draw(rt, "nth"), fsxtest.ENOSPC)
						if s2, err := Open(dir, o); err == nil {
							s2.Close()
						} else {
							require.ErrorIs(rt, err, ErrFailed)
						}
						faulty.Heal()
					}
				}
				reopenAfter(rt, nil)
			},
			"retain": func(rt *rapid.T) {
				dropped, err := s.Retain()
				require.NoError(rt, err)
				if dropped > 0 {
					m.synced = len(m.recs) // it checkpointed, which syncs
				}
			},
			"sync": func(rt *rapid.T) {
				require.NoError(rt, s.Sync())
				m.synced = len(m.recs)
			},
			"read": func(rt *rapid.T) {
				topic := rapid.SampledFrom(rapidTopics).Draw(rt, "topic")
				q := rapid.IntRange(0, 2).Draw(rt, "queue")
				want := m.queue(topic, q)
				minOff := int(s.MinOffset(topic, q))
				off := rapid.IntRange(minOff, len(want)+1).Draw(rt, "offset")
				max := rapid.IntRange(1, 5).Draw(rt, "max")
				got, err := s.Read(topic, q, int64(off), max)
				require.NoError(rt, err)
				var exp []string
				if off < len(want) {
					exp = want[off:min(len(want), off+max)]
				}
				require.Equal(rt, len(exp), len(got))
				if len(exp) > 0 {
					require.Equal(rt, exp, bodies(got))
				}
			},
			"readAt": func(rt *rapid.T) {
				if int(s.Stats().LogMin) >= len(m.recs) {
					rt.Skip("nothing readable by log offset")
				}
				i := rapid.IntRange(int(s.Stats().LogMin), len(m.recs)-1).Draw(rt, "log offset")
				got, err := s.ReadAt(int64(i))
				require.NoError(rt, err)
				r := m.recs[i]
				require.Equal(rt, r.body, string(got.Body))
				require.Equal(rt, r.topic, got.Topic)
				require.Equal(rt, r.queue, got.QueueID)
			},
			"reopen": func(rt *rapid.T) {
				require.NoError(rt, s.Close())
				s, err = Open(dir, o)
				require.NoError(rt, err)
				m.synced = len(m.recs)
			},
			"crash": func(rt *rapid.T) {
				seg, pos := crash(rt, s)
				chop(rt, dir, seg, pos, func(n int64) int64 {
					return rapid.Int64Range(0, n).Draw(rt, "keep bytes")
				})
				s, err = Open(dir, o)
				require.NoError(rt, err)
				kept := int(s.Stats().LogNext)
				require.GreaterOrEqual(rt, kept, m.synced, "a synced record was lost")
				require.LessOrEqual(rt, kept, len(m.recs))
				if kept > 0 {
					require.True(rt, slices.Contains(m.ends, kept), "crash left part of a batch: %d records, batch ends %v", kept, m.ends)
				}
				m.recs = m.recs[:kept]
				for len(m.ends) > 0 && m.ends[len(m.ends)-1] > kept {
					m.ends = m.ends[:len(m.ends)-1]
				}
				m.synced = kept
			},
			"": check,
		})
	})
}
