package store

import (
	"fmt"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	"pgregory.net/rapid"

	"github.com/brokercore/brokercore/internal/fsx/fsxtest"
)

// keyed is a message of topic with keys, its body naming it.
func keyed(topic string, q int, body string, keys ...string) *Message {
	return &Message{Topic: topic, QueueID: q, Body: []byte(body), Keys: keys}
}

func lookupBodies(t *testing.T, s *Store, topic, key string, begin, end time.Time, max int) []string {
	t.Helper()
	ms, err := s.LookupKey(topic, key, begin, end, max)
	require.NoError(t, err)
	for i := 1; i < len(ms); i++ {
		require.Less(t, ms[i-1].LogOffset, ms[i].LogOffset, "answers come in log order")
	}
	return bodies(ms)
}

func keyFiles(t *testing.T, dir string) []string {
	t.Helper()
	ents, err := os.ReadDir(filepath.Join(dir, keyDir))
	if os.IsNotExist(err) {
		return nil
	}
	require.NoError(t, err)
	var out []string
	for _, e := range ents {
		out = append(out, e.Name())
	}
	return out
}

// keyWorkload appends n messages over two topics and three queues, key
// "k<i%7>" each and every tenth also "even"; it returns the bodies per
// (topic, key), in log order.
func keyWorkload(t *testing.T, s *Store, n int) map[string][]string {
	t.Helper()
	want := map[string][]string{}
	for i := range n {
		topic := []string{"t", "u"}[i%2]
		body := fmt.Sprintf("%s-%d-%s", topic, i, strings.Repeat("x", i%40))
		keys := []string{fmt.Sprintf("k%d", i%7)}
		if i%10 == 0 {
			keys = append(keys, "even")
		}
		require.NoError(t, s.Append(keyed(topic, i%3, body, keys...)))
		for _, k := range keys {
			want[topic+"/"+k] = append(want[topic+"/"+k], body)
		}
	}
	return want
}

func newest(bs []string, max int) []string {
	if len(bs) > max {
		return bs[len(bs)-max:]
	}
	return bs
}

func checkLookups(t *testing.T, s *Store, want map[string][]string) {
	t.Helper()
	for tk, bs := range want {
		topic, key, _ := strings.Cut(tk, "/")
		assert.Equal(t, newest(bs, 1000), lookupBodies(t, s, topic, key, time.Time{}, time.Time{}, 1000), tk)
		assert.Equal(t, newest(bs, 3), lookupBodies(t, s, topic, key, time.Time{}, time.Time{}, 3), tk+" max 3")
	}
	assert.Empty(t, lookupBodies(t, s, "t", "nobody", time.Time{}, time.Time{}, 10))
	assert.Empty(t, lookupBodies(t, s, "v", "k1", time.Time{}, time.Time{}, 10))
}

func TestLookupKeyFindsEveryKeyInMemoryInFilesAndAfterReopen(t *testing.T) {
	dir := t.TempDir()
	s := openT(t, dir, Options{SegmentSize: 4096})
	want := keyWorkload(t, s, 400)
	checkLookups(t, s, want)
	require.NoError(t, s.checkpoint())
	require.NotEmpty(t, keyFiles(t, dir), "closed segments have key files")
	checkLookups(t, s, want)
	require.NoError(t, s.Close())

	s = openT(t, dir, Options{SegmentSize: 4096})
	defer s.Close()
	checkLookups(t, s, want)
	more := keyWorkload(t, s, 50)
	for k, bs := range more {
		want[k] = append(want[k], bs...)
	}
	checkLookups(t, s, want)
}

func TestLookupKeyTimeRangeIsInclusiveAndMaxKeepsTheNewest(t *testing.T) {
	clock := newClock()
	s := openT(t, t.TempDir(), Options{SegmentSize: 2048, Now: clock.Now})
	defer s.Close()
	t0 := clock.Now()
	for i := range 60 {
		require.NoError(t, s.Append(keyed("t", i%2, fmt.Sprint("m", i), "order-1")))
		clock.Advance(time.Second)
	}
	at := func(i int) time.Time { return t0.Add(time.Duration(i) * time.Second) }
	assert.Equal(t, []string{"m10", "m11", "m12"}, lookupBodies(t, s, "t", "order-1", at(10), at(12), 64))
	assert.Equal(t, []string{"m58", "m59"}, lookupBodies(t, s, "t", "order-1", at(10), time.Time{}, 2))
	assert.Equal(t, []string{"m0", "m1"}, lookupBodies(t, s, "t", "order-1", time.Time{}, at(1), 64))
	assert.Empty(t, lookupBodies(t, s, "t", "order-1", at(100), at(200), 64))
	got := lookupBodies(t, s, "t", "order-1", time.Time{}, time.Time{}, 10_000)
	assert.Len(t, got, 60, "max is clamped to MaxReadBatch, above 60")
}

func TestLookupKeyResolvesHashCollisionsByTheRecord(t *testing.T) {
	dir := t.TempDir()
	o := Options{SegmentSize: 2048}
	o.keyHash = func(string, string) uint64 { return 7 } // every key collides
	s := openT(t, dir, o)
	want := keyWorkload(t, s, 200)
	checkLookups(t, s, want)
	require.NoError(t, s.Close())
	s = openT(t, dir, o)
	defer s.Close()
	checkLookups(t, s, want)
}

func TestLookupKeyIndexesTheNamedProperties(t *testing.T) {
	s := openT(t, t.TempDir(), Options{KeyProperties: []string{"UNIQ_KEY"}})
	defer s.Close()
	m := keyed("t", 0, "a", "biz")
	m.Properties = map[string]string{"UNIQ_KEY": "ID1", "OTHER": "ID2"}
	require.NoError(t, s.Append(m))
	assert.Equal(t, []string{"a"}, lookupBodies(t, s, "t", "ID1", time.Time{}, time.Time{}, 4))
	assert.Equal(t, []string{"a"}, lookupBodies(t, s, "t", "biz", time.Time{}, time.Time{}, 4))
	assert.Empty(t, lookupBodies(t, s, "t", "ID2", time.Time{}, time.Time{}, 4), "only the named properties")
}

func TestLookupKeyRejectsBadInputAndAnOffIndex(t *testing.T) {
	dir := t.TempDir()
	s := openT(t, dir, Options{NoKeyIndex: true, SegmentSize: 2048})
	keyWorkload(t, s, 100)
	_, err := s.LookupKey("t", "k1", time.Time{}, time.Time{}, 1)
	require.ErrorIs(t, err, ErrInvalid)
	require.NoError(t, s.Close())
	assert.Empty(t, keyFiles(t, dir), "no key files when off")

	s = openT(t, dir, Options{SegmentSize: 2048})
	for _, c := range []struct{ topic, key string }{{"", "k"}, {"t", ""}} {
		_, err = s.LookupKey(c.topic, c.key, time.Time{}, time.Time{}, 1)
		require.ErrorIs(t, err, ErrInvalid)
	}
	_, err = s.LookupKey("t", "k", time.Time{}, time.Time{}, 0)
	require.ErrorIs(t, err, ErrInvalid)
	assert.Len(t, lookupBodies(t, s, "t", "even", time.Time{}, time.Time{}, 100), 10, "turned on, it is built from the log")
	require.NoError(t, s.Close())
	_, err = s.LookupKey("t", "k1", time.Time{}, time.Time{}, 1)
	require.ErrorIs(t, err, ErrClosed)
}

func TestKeyIndexIsRebuiltWhenMissingOrDamaged(t *testing.T) {
	dir := t.TempDir()
	o := Options{SegmentSize: 2048}
	s := openT(t, dir, o)
	want := keyWorkload(t, s, 300)
	require.NoError(t, s.Close())
	files := keyFiles(t, dir)
	require.Greater(t, len(files), 3)

	damage := map[string]func(path string){
		"removed": func(p string) { require.NoError(t, os.Remove(p)) },
		"header": func(p string) {
			b, _ := os.ReadFile(p)
			b[20] ^= 0xff
			require.NoError(t, os.WriteFile(p, b, 0o640))
		},
		"entry": func(p string) {
			b, _ := os.ReadFile(p)
			if len(b) > keyHeaderSize {
				b[keyHeaderSize+3] ^= 0xff
			}
			require.NoError(t, os.WriteFile(p, b, 0o640))
		},
		"short": func(p string) {
			b, _ := os.ReadFile(p)
			require.NoError(t, os.WriteFile(p, b[:len(b)-5], 0o640))
		},
		"zeroed": func(p string) {
			b, _ := os.ReadFile(p)
			require.NoError(t, os.WriteFile(p, make([]byte, len(b)), 0o640))
		},
		"someone else's": func(p string) {
			other := filepath.Join(dir, keyDir, files[0])
			if other == p {
				other = filepath.Join(dir, keyDir, files[1])
			}
			b, _ := os.ReadFile(other)
			require.NoError(t, os.WriteFile(p, b, 0o640))
		},
	}
	for name, fn := range damage {
		t.Run(name, func(t *testing.T) {
			for _, f := range files {
				fn(filepath.Join(dir, keyDir, f))
			}
			var logs logBuffer
			o := o
			o.Logger = logs.logger()
			s := openT(t, dir, o)
			checkLookups(t, s, want)
			require.NoError(t, s.Close())
			for _, f := range files {
				b, err := os.ReadFile(filepath.Join(dir, keyDir, f))
				require.NoError(t, err)
				_, _, err = decodeKeyFile(b)
				require.NoError(t, err, "%s is whole again", f)
			}
		})
	}
}

func TestKeyFilesGoWithRetainedSegments(t *testing.T) {
	dir := t.TempDir()
	clock := newClock()
	s := openT(t, dir, Options{SegmentSize: 2048, MaxAge: time.Hour, RetainEvery: -1, Now: clock.Now})
	defer s.Close()
	keyWorkload(t, s, 200)
	clock.Advance(2 * time.Hour)
	n := len(keyFiles(t, dir))
	require.Positive(t, n)
	require.NoError(t, s.Append(keyed("t", 0, "new", "k1")))
	dropped, err := s.Retain()
	require.NoError(t, err)
	require.Positive(t, dropped)
	require.NoError(t, s.checkpoint())
	assert.Less(t, len(keyFiles(t, dir)), n, "the key files of retained segments are removed")
	ms, err := s.LookupKey("t", "k1", time.Time{}, time.Time{}, 100)
	require.NoError(t, err)
	require.NotEmpty(t, ms)
	assert.Equal(t, "new", string(ms[len(ms)-1].Body))
	for _, m := range ms {
		assert.GreaterOrEqual(t, m.LogOffset, s.MinLogOffsetForTest(), "nothing retention removed")
	}
}

// TestKeyIndexSurvivesAFaultAtEveryCallOfItsFiles fails, in turn, the
// opens, writes, fsyncs and renames the store makes while it writes key
// files: the store fails cleanly, and once the disk is healthy every
// acknowledged keyed message is found by its key again.
func TestKeyIndexSurvivesAFaultAtEveryCallOfItsFiles(t *testing.T) {
	t.Parallel()
	// acked: what Append acknowledged; tried: also the one that failed
	// (its record may be in the log).
	var tried map[string][]string
	run := func(f *fsxtest.Faulty, dir string) map[string][]string {
		acked := map[string][]string{}
		tried = map[string][]string{}
		s, err := Open(dir, Options{fs: f, SegmentSize: 1024})
		if err != nil {
			require.ErrorIs(t, err, ErrFailed)
			return acked
		}
		for i := range 120 {
			body := fmt.Sprint("m", i)
			key := fmt.Sprint("k", i%5)
			tried[key] = append(tried[key], body)
			if err := s.Append(keyed("t", i%2, body, key)); err != nil {
				require.ErrorIs(t, err, ErrFailed)
				break
			}
			acked[key] = append(acked[key], body)
			if i%30 == 29 {
				if err := s.checkpoint(); err != nil {
					require.ErrorIs(t, err, ErrFailed)
					break
				}
			}
		}
		_ = s.Close()
		return acked
	}
	clean := &fsxtest.Faulty{}
	run(clean, t.TempDir())
	scenarios := 0
	for _, op := range []fsxtest.Op{fsxtest.OpOpen, fsxtest.OpWrite, fsxtest.OpSync, fsxtest.OpRename} {
		calls := clean.Calls(op)
		require.Positive(t, calls)
		for n := 1; n <= calls; n += max(1, calls/15) {
			dir := t.TempDir()
			f := &fsxtest.Faulty{}
			f.Fail(op, n, fsxtest.ENOSPC)
			acked := run(f, dir)
			f.Heal()
			s := openT(t, dir, Options{SegmentSize: 1024})
			for key, bs := range tried {
				got := lookupBodies(t, s, "t", key, time.Time{}, time.Time{}, 1000)
				require.Subset(t, got, acked[key], "op %d call %d key %s: every acknowledged message", op, n, key)
				require.Subset(t, bs, got, "op %d call %d key %s: nothing else", op, n, key)
			}
			require.NoError(t, s.Close())
			scenarios++
		}
	}
	t.Logf("%d fault scenarios", scenarios)
}

func FuzzDecodeKeyFile(f *testing.F) {
	k := keyFile{start: 5, first: 4, end: 20}
	f.Add(encodeKeyFile(k, []keyEntry{{hash: 3, logOffset: 9, storedAt: 1}, {hash: 1, logOffset: 4, storedAt: 2}}))
	f.Add(encodeKeyFile(k, nil))
	f.Add([]byte("BCKX"))
	f.Fuzz(func(t *testing.T, b []byte) {
		k, entries, err := decodeKeyFile(b)
		if err != nil {
			require.ErrorIs(t, err, ErrCorrupt)
			return
		}
		// What decodes re-encodes to the same bytes.
		k.oldest, k.newest = 0, 0
		again := encodeKeyFile(k, slices.Clone(entries))
		k2, entries2, err := decodeKeyFile(again)
		require.NoError(t, err)
		require.Equal(t, entries, entries2)
		require.Equal(t, k.start, k2.start)
		_, herr := decodeKeyHeader(b)
		require.NoError(t, herr)
	})
}

// TestKeyIndexModel checks LookupKey against a model (every keyed message
// in memory) under random appends, clock moves, checkpoints, reopens,
// key-file losses and topic releases.
func TestKeyIndexModel(t *testing.T) {
	t.Parallel()
	rapid.Check(t, func(rt *rapid.T) {
		dir := t.TempDir()
		clock := newClock()
		o := Options{SegmentSize: rapid.SampledFrom([]int{512, 2048, 1 << 20}).Draw(rt, "segment"), Now: clock.Now}
		if rapid.Bool().Draw(rt, "collide") {
			o.keyHash = func(topic, key string) uint64 { return keyHash(topic, key) % 3 }
		}
		s := openT(t, dir, o)
		defer func() { s.Close() }()
		type rec struct {
			topic, body string
			keys        []string
			at          time.Time
		}
		var model []rec
		topics := []string{"a", "b"}
		keys := []string{"x", "y", "z"}
		n := 0
		rt.Repeat(map[string]func(*rapid.T){
			"append": func(rt *rapid.T) {
				topic := rapid.SampledFrom(topics).Draw(rt, "topic")
				ks := rapid.SliceOfNDistinct(rapid.SampledFrom(keys), 0, 2, rapid.ID).Draw(rt, "keys")
				n++
				body := fmt.Sprintf("%s%d%s", topic, n, strings.Repeat("p", rapid.IntRange(0, 200).Draw(rt, "pad")))
				require.NoError(rt, s.Append(keyed(topic, rapid.IntRange(0, 1).Draw(rt, "q"), body, ks...)))
				model = append(model, rec{topic, body, ks, clock.Now().Round(0).UTC()})
			},
			"tick":       func(rt *rapid.T) { clock.Advance(time.Duration(rapid.IntRange(0, 3).Draw(rt, "s")) * time.Second) },
			"checkpoint": func(rt *rapid.T) { require.NoError(rt, s.checkpoint()) },
			"reopen": func(rt *rapid.T) {
				require.NoError(rt, s.Close())
				if rapid.Bool().Draw(rt, "lose key files") {
					require.NoError(rt, os.RemoveAll(filepath.Join(dir, keyDir)))
				}
				s = openT(t, dir, o)
			},
			"delete": func(rt *rapid.T) {
				topic := rapid.SampledFrom(topics).Draw(rt, "topic")
				require.NoError(rt, s.DeleteTopic(topic))
				model = slices.DeleteFunc(model, func(r rec) bool { return r.topic == topic })
			},
			"lookup": func(rt *rapid.T) {
				topic := rapid.SampledFrom(topics).Draw(rt, "topic")
				key := rapid.SampledFrom(keys).Draw(rt, "key")
				max := rapid.IntRange(1, 5).Draw(rt, "max")
				var begin, end time.Time
				if len(model) > 0 && rapid.Bool().Draw(rt, "ranged") {
					begin = model[rapid.IntRange(0, len(model)-1).Draw(rt, "from")].at
					end = begin.Add(time.Duration(rapid.IntRange(0, 5).Draw(rt, "span")) * time.Second)
				}
				want := []string{}
				for _, r := range model {
					if r.topic == topic && slices.Contains(r.keys, key) &&
						(begin.IsZero() || !r.at.Before(begin)) && (end.IsZero() || !r.at.After(end)) {
						want = append(want, r.body)
					}
				}
				ms, err := s.LookupKey(topic, key, begin, end, max)
				require.NoError(rt, err)
				require.Equal(rt, newest(want, max), append([]string{}, bodies(ms)...))
			},
		})
	})
}

// TestLookupKeyRacingAppendsCheckpointsAndReleases looks keys up while
// appends roll segments (so checkpoints write key files) and a topic is
// released: every answer is a message with that key, in log order, and
// once the appends are done every acknowledged message is found.
func TestLookupKeyRacingAppendsCheckpointsAndReleases(t *testing.T) {
	s := openT(t, t.TempDir(), Options{SegmentSize: 1024, CheckpointEvery: time.Millisecond})
	defer s.Close()
	done := make(chan struct{})
	var wg sync.WaitGroup
	wg.Add(2)
	go func() {
		defer wg.Done()
		defer close(done)
		for i := range 600 {
			if !assert.NoError(t, s.Append(keyed("t", i%2, fmt.Sprint("t", i), fmt.Sprint("k", i%3)), keyed("gone", 0, "g", "k0"))) {
				return
			}
			if i == 300 {
				assert.NoError(t, s.DeleteTopic("gone"))
			}
		}
	}()
	go func() {
		defer wg.Done()
		for {
			select {
			case <-done:
				return
			default:
			}
			ms, err := s.LookupKey("t", "k1", time.Time{}, time.Time{}, 64)
			if !assert.NoError(t, err) {
				return
			}
			for i, m := range ms {
				assert.Equal(t, []string{"k1"}, m.Keys)
				if i > 0 {
					assert.Less(t, ms[i-1].LogOffset, m.LogOffset)
				}
			}
		}
	}()
	wg.Wait()
	ms, err := s.LookupKey("t", "k1", time.Time{}, time.Time{}, MaxReadBatch)
	require.NoError(t, err)
	assert.Len(t, ms, 200)
	gone, err := s.LookupKey("gone", "k0", time.Time{}, time.Time{}, MaxReadBatch)
	require.NoError(t, err)
	assert.Len(t, gone, 299, "only what came after the release")
}

func TestSortByHashIsStableAndSorted(t *testing.T) {
	rapid.Check(t, func(rt *rapid.T) {
		n := rapid.IntRange(0, 3000).Draw(rt, "n")
		hashes := rapid.SliceOfN(rapid.Uint64Range(0, 1<<rapid.IntRange(1, 63).Draw(rt, "bits")), n, n).Draw(rt, "hashes")
		es := make([]keyEntry, n)
		for i, h := range hashes {
			es[i] = keyEntry{hash: h, logOffset: int64(i)}
		}
		got := sortByHash(slices.Clone(es))
		want := slices.Clone(es)
		slices.SortStableFunc(want, func(a, b keyEntry) int {
			if a.hash != b.hash {
				if a.hash < b.hash {
					return -1
				}
				return 1
			}
			return 0
		})
		require.Equal(rt, want, got)
	})
}
