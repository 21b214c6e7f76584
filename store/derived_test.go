package store

import (
	"fmt"
	"math/rand/v2"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/brokercore/brokercore/internal/fsx/fsxtest"
)

// derivedFixture is a closed store with two queues over several segments
// and what it holds.
type derivedFixture struct {
	dir    string
	bodies map[int][]string // queue -> bodies
	total  int
}

func newDerivedFixture(t *testing.T, o Options) *derivedFixture {
	t.Helper()
	fx := &derivedFixture{dir: t.TempDir(), bodies: map[int][]string{}}
	s := openT(t, fx.dir, o)
	for i := 0; i < 400; i++ {
		q := i % 2
		b := fmt.Sprintf("m%d-%s", i, strings.Repeat("p", i%37))
		require.NoError(t, s.Append(msg("t", q, b)))
		fx.bodies[q] = append(fx.bodies[q], b)
		fx.total++
	}
	require.NoError(t, s.Close())
	return fx
}

// check opens the store and reads every message back by queue and by log
// offset.
func (fx *derivedFixture) check(t *testing.T, o Options) *Store {
	t.Helper()
	s := openT(t, fx.dir, o)
	for q, want := range fx.bodies {
		var got []string
		for off := int64(0); off < int64(len(want)); {
			ms, err := s.Read("t", q, off, 50)
			require.NoError(t, err, "queue %d offset %d", q, off)
			require.NotEmpty(t, ms)
			got = append(got, bodies(ms)...)
			off += int64(len(ms))
		}
		require.Equal(t, want, got, "queue %d", q)
		assert.Equal(t, int64(len(want)), s.MaxOffset("t", q))
	}
	for i := 0; i < fx.total; i++ {
		m, err := s.ReadAt(int64(i))
		require.NoError(t, err, "log offset %d", i)
		require.Equal(t, fx.bodies[m.QueueID][m.QueueOffset], string(m.Body))
	}
	return s
}

// derivedFiles lists the derived files that exist now.
func (fx *derivedFixture) derivedFiles(t *testing.T) []string {
	t.Helper()
	var files []string
	if _, err := os.Stat(filepath.Join(fx.dir, ckptFile)); err == nil {
		files = append(files, filepath.Join(fx.dir, ckptFile))
	}
	ents, _ := os.ReadDir(filepath.Join(fx.dir, "index"))
	for _, e := range ents {
		if fi, err := e.Info(); err == nil && fi.Size() > 0 {
			files = append(files, filepath.Join(fx.dir, "index", e.Name()))
		}
	}
	return files
}

// damages are what may happen to a derived file between a crash and Open.
var damages = map[string]func(t *testing.T, r *rand.Rand, path string){
	"deleted": func(t *testing.T, _ *rand.Rand, path string) { require.NoError(t, os.Remove(path)) },
	"truncated": func(t *testing.T, r *rand.Rand, path string) {
		fi, err := os.Stat(path)
		require.NoError(t, err)
		require.NoError(t, os.Truncate(path, r.Int64N(fi.Size()+1)))
	},
	"halved": func(t *testing.T, _ *rand.Rand, path string) {
		fi, err := os.Stat(path)
		require.NoError(t, err)
		require.NoError(t, os.Truncate(path, fi.Size()/2))
	},
	"zeroed": func(t *testing.T, r *rand.Rand, path string) {
		b, err := os.ReadFile(path)
		require.NoError(t, err)
		from := r.IntN(len(b))
		to := from + r.IntN(len(b)-from+1)
		clear(b[from:to])
		require.NoError(t, os.WriteFile(path, b, 0o640))
	},
	"bit flipped": func(t *testing.T, r *rand.Rand, path string) {
		b, err := os.ReadFile(path)
		require.NoError(t, err)
		b[r.IntN(len(b))] ^= 1 << r.IntN(8)
		require.NoError(t, os.WriteFile(path, b, 0o640))
	},
}

// Finding 2: a half-truncated per-queue index in a crash image made reads
// from offset 256 on fail with ErrCorrupt for good.
func TestHalfTruncatedQueueIndexInACrashImageIsRebuiltFromTheLog(t *testing.T) {
	dir := t.TempDir()
	s := openT(t, dir, Options{})
	want := make([]string, 600)
	for i := range want {
		want[i] = fmt.Sprintf("m%d", i)
		require.NoError(t, s.Append(msg("t", 0, want[i])))
	}
	require.NoError(t, s.checkpoint()) // the index files are written up to here
	img := crashImage(t, dir)
	require.NoError(t, s.Close())
	name := filepath.Join(img, "index", encodeQueueName("t", 0))
	fi, err := os.Stat(name)
	require.NoError(t, err)
	require.NoError(t, os.Truncate(name, fi.Size()/2))

	var logs logBuffer
	s = openT(t, img, Options{Logger: logs.logger()})
	defer s.Close()
	got, err := s.Read("t", 0, 256, MaxReadBatch)
	require.NoError(t, err)
	assert.Equal(t, want[256:], bodies(got))
	assert.Contains(t, logs.String(), "index unusable")
}

func TestDamagedIndexEntryMetAtReadIsRepairedFromTheLogAndCounted(t *testing.T) {
	fx := newDerivedFixture(t, Options{SegmentSize: 4096})
	q0 := filepath.Join(fx.dir, "index", encodeQueueName("t", 0))
	b, err := os.ReadFile(q0)
	require.NoError(t, err)
	clear(b[20*entrySize : 40*entrySize]) // zeroed entries 20..39
	b[100*entrySize+5] ^= 0x08            // a flipped bit in entry 100
	require.NoError(t, os.WriteFile(q0, b, 0o640))
	lidx := filepath.Join(fx.dir, "index", logIndexName)
	b, err = os.ReadFile(lidx)
	require.NoError(t, err)
	clear(b[7*entrySize : 8*entrySize])
	require.NoError(t, os.WriteFile(lidx, b, 0o640))

	var logs logBuffer
	s := fx.check(t, Options{Logger: logs.logger()})
	st := s.Stats()
	assert.Zero(t, st.IndexRebuilds, "the files looked whole: no rebuild at Open")
	assert.GreaterOrEqual(t, st.IndexRepairs, uint64(22), "20 zeroed + 1 flipped + 1 log index entry")
	assert.Contains(t, logs.String(), "repaired damaged index entries")
	require.NoError(t, s.Close())
	s = fx.check(t, Options{})
	assert.Zero(t, s.Stats().IndexRepairs, "the repair was written")
	require.NoError(t, s.Close())
}

// Every derived file may be deleted, truncated, zeroed or bit-flipped
// between a crash and Open, with failed Opens (a full disk) in between:
// Open rebuilds from the log and every message reads back the same.
func TestDamagedDerivedFilesWithFailedOpensInBetweenAreRebuiltFromTheLog(t *testing.T) {
	t.Parallel()
	r := rand.New(rand.NewPCG(1, 2))
	failed := 0
	defer func() { assert.Positive(t, failed, "some Opens must have failed") }()
	for name, damage := range damages {
		for file := 0; file < 5; file++ {
			t.Run(fmt.Sprintf("%s/%d", name, file), func(t *testing.T) {
				fx := newDerivedFixture(t, Options{SegmentSize: 4096, Sync: SyncNone})
				files := fx.derivedFiles(t)
				// checkpoint, log index, two queue indexes, and the index
				// journal unless every checkpoint found full blocks only
				require.GreaterOrEqual(t, len(files), 4)
				if file >= len(files) {
					t.Skip("no index journal was written")
				}
				damage(t, r, files[file])
				for n := 1; n <= 3; n++ {
					f := &fsxtest.Faulty{}
					f.Fail(fsxtest.Op(r.IntN(int(fsxtest.OpTruncate)+1)), r.IntN(4)+1, fsxtest.ENOSPC)
					if s, err := Open(fx.dir, Options{fs: f}); err == nil {
						s.Close() // the fault fell where Open writes nothing
					} else {
						require.ErrorIs(t, err, ErrFailed)
						failed++
					}
					if files := fx.derivedFiles(t); n == 2 && len(files) > 0 {
						damage(t, r, files[file%len(files)]) // damaged again after a failed open
					}
				}
				require.NoError(t, fx.check(t, Options{}).Close())
			})
		}
	}
}
