package store_test

// Acceptance tests of the store: crash and recovery — torn and garbage tails,
// checksums, many segments and a killed process.

import (
	"bufio"
	"bytes"
	"fmt"
	"io/fs"
	"log/slog"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"sort"
	"strconv"
	"strings"
	"sync"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/brokercore/brokercore/internal/testkit"
	"github.com/brokercore/brokercore/store"
)

var walSegmentName = regexp.MustCompile(`^[0-9]{20}$`)

// lastWALSegment finds the newest tidwall/wal segment file under dir.
func lastWALSegment(t *testing.T, dir string) string {
	t.Helper()
	var segs []string
	require.NoError(t, filepath.WalkDir(dir, func(p string, d fs.DirEntry, err error) error {
		if err != nil {
			return err
		}
		if !d.IsDir() && walSegmentName.MatchString(d.Name()) {
			segs = append(segs, p)
		}
		return nil
	}))
	require.NotEmpty(t, segs, "no wal segment under %s", dir)
	sort.Strings(segs)
	return segs[len(segs)-1]
}

func TestAcceptOpenRepairsAGarbageTailAndLogsIt(t *testing.T) {
	for _, garbage := range [][]byte{
		[]byte("\x00"),
		[]byte("\xff\xff\xff"),
		[]byte(strings.Repeat("torn record", 7)),
		{0x05, 0x01, 0x02}, // a length prefix promising more than follows
	} {
		dir := t.TempDir()
		s, err := store.Open(dir, store.Options{})
		require.NoError(t, err)
		for i := 0; i < 5; i++ {
			require.NoError(t, s.Append(msg("t", 0, strconv.Itoa(i)), msg("t", 1, strconv.Itoa(i))))
		}
		require.NoError(t, s.Close())
		seg := lastWALSegment(t, dir)
		f, err := os.OpenFile(seg, os.O_WRONLY|os.O_APPEND, 0)
		require.NoError(t, err)
		_, err = f.Write(garbage)
		require.NoError(t, err)
		require.NoError(t, f.Close())

		var lb logBuffer
		s2, err := store.Open(dir, store.Options{Logger: slog.New(slog.NewTextHandler(&lb, nil))})
		require.NoError(t, err, "a torn tail is repaired, not an error (garbage %q)", garbage)
		assert.Contains(t, lb.String(), "level=WARN", "the recovery is logged")
		assert.Contains(t, lb.String(), filepath.Base(seg), "the recovery log names what was cut")
		for q := 0; q < 2; q++ {
			all := readAll(t, s2, "t", q)
			require.Len(t, all, 5, "no acknowledged record lost")
			for i, m := range all {
				assert.Equal(t, strconv.Itoa(i), string(m.Body))
			}
		}
		m := msg("t", 0, "after")
		require.NoError(t, s2.Append(m))
		assert.Equal(t, int64(5), m.QueueOffset)
		assert.Equal(t, int64(10), m.LogOffset)
		require.NoError(t, s2.Close())
		s3, err := store.Open(dir, store.Options{})
		require.NoError(t, err)
		assert.Len(t, readAll(t, s3, "t", 0), 6)
		require.NoError(t, s3.Close())
	}
}

func TestAcceptReopenAfterManySegmentsKeepsEverything(t *testing.T) {
	dir := t.TempDir()
	opts := store.Options{SegmentSize: 2048, Sync: store.SyncNone}
	s, err := store.Open(dir, opts)
	require.NoError(t, err)
	for i := 0; i < 300; i++ {
		require.NoError(t, s.Append(msg("t", i%3, strings.Repeat("s", 100)+strconv.Itoa(i))))
	}
	assert.Greater(t, s.Stats().Segments, 1, "SegmentSize rolls segments")
	require.NoError(t, s.Close())
	s2 := openT(t, dir, opts)
	for q := 0; q < 3; q++ {
		all := readAll(t, s2, "t", q)
		require.Len(t, all, 100)
		for i, m := range all {
			assert.Equal(t, int64(i), m.QueueOffset)
			assert.Equal(t, int64(i*3+q), m.LogOffset)
		}
	}
}

func TestAcceptTornTailNeverExposesPartOfABatch(t *testing.T) {
	// Build one log, then for many cut points: copy it, chop the newest
	// segment there (damage after a clean Close), reopen. Every batch is
	// whole or absent, the survivors are a prefix, and appending goes on
	// above every offset ever handed out.
	src := t.TempDir()
	s, err := store.Open(src, store.Options{Sync: store.SyncNone})
	require.NoError(t, err)
	const batches, per = 6, 3
	for b := 0; b < batches; b++ {
		var batch []*store.Message
		for i := 0; i < per; i++ {
			batch = append(batch, msg("t", i%2, fmt.Sprintf("b%d-m%d", b, i)))
		}
		require.NoError(t, s.Append(batch...))
	}
	require.NoError(t, s.Close())
	seg, err := filepath.Rel(src, lastWALSegment(t, src))
	require.NoError(t, err)
	fi, err := os.Stat(filepath.Join(src, seg))
	require.NoError(t, err)
	size := fi.Size()
	for cut := int64(1); cut < size && cut < 400; cut += 11 {
		dir := t.TempDir()
		require.NoError(t, testkit.CopyCrashImage(src, dir))
		require.NoError(t, os.Truncate(filepath.Join(dir, seg), size-cut))
		s2, err := store.Open(dir, store.Options{Sync: store.SyncNone})
		require.NoError(t, err, "cut %d: a torn tail is repaired", cut)
		var bodies []string
		for q := 0; q < 2; q++ {
			for _, m := range readAll(t, s2, "t", q) {
				bodies = append(bodies, string(m.Body))
			}
		}
		count := map[int]int{}
		for _, b := range bodies {
			var bn, mn int
			_, err := fmt.Sscanf(b, "b%d-m%d", &bn, &mn)
			require.NoError(t, err)
			count[bn]++
		}
		whole := 0
		for b := 0; b < batches; b++ {
			if count[b] == 0 {
				break
			}
			assert.Equal(t, per, count[b], "cut %d: batch %d is partial", cut, b)
			whole++
		}
		assert.Equal(t, whole*per, len(bodies), "cut %d: survivors are a prefix of whole batches", cut)
		m := msg("t", 0, "next")
		require.NoError(t, s2.Append(m), "cut %d", cut)
		// Close recorded every batch as durable: a cut loses them, but their
		// offsets were handed out and are never handed out again.
		assert.Equal(t, int64(batches*per), m.LogOffset, "cut %d: no log offset handed out twice", cut)
		require.NoError(t, s2.Close())
	}
}

func TestAcceptChecksumCatchesAFlippedByteInsteadOfReturningWrongData(t *testing.T) {
	dir := t.TempDir()
	opts := store.Options{SegmentSize: 4096}
	s, err := store.Open(dir, opts)
	require.NoError(t, err)
	want := map[int64]string{}
	for i := 0; i < 40; i++ {
		m := msg("t", 0, fmt.Sprintf("payload-%03d-%s", i, strings.Repeat("z", 200)))
		require.NoError(t, s.Append(m))
		want[m.QueueOffset] = string(m.Body)
	}
	require.NoError(t, s.Close())
	// Flip one byte of message 5's body inside its (older, sealed) segment.
	needle := []byte("payload-005-")
	var hit string
	require.NoError(t, filepath.WalkDir(dir, func(p string, d fs.DirEntry, err error) error {
		if err != nil || d.IsDir() || hit != "" {
			return err
		}
		b, err := os.ReadFile(p)
		if err != nil {
			return err
		}
		if i := bytes.Index(b, needle); i >= 0 {
			b[i+len(needle)+3] ^= 0x01
			hit = p
			return os.WriteFile(p, b, 0o644)
		}
		return nil
	}))
	require.NotEmpty(t, hit, "body bytes found in a log file")

	s2, err := store.Open(dir, opts)
	if err != nil {
		// Refusing to open is acceptable: corruption in the middle is an error.
		assert.Contains(t, err.Error(), filepath.Base(hit), "the error names the segment")
		return
	}
	defer s2.Close()
	for off := int64(0); off < 40; off++ {
		got, err := s2.Read("t", 0, off, 1)
		if err != nil {
			continue // reported, fine
		}
		// A damaged record is stepped past (never returned as data): the
		// answer is the next intact record.
		if assert.Len(t, got, 1, "offset %d: nothing after it", off) {
			assert.GreaterOrEqual(t, got[0].QueueOffset, off)
			assert.Equal(t, want[got[0].QueueOffset], string(got[0].Body), "offset %d returned wrong data without an error", off)
			if got[0].QueueOffset != off {
				assert.Equal(t, int64(5), off, "only the damaged record is stepped past")
			}
		}
	}
}

const acceptCrashDirEnv = "BROKERCORE_ACCEPT_CRASH_DIR"

// acceptCrashChild is the child process of
// TestAcceptKilledProcessLosesNoAcknowledgedBatchAndExposesNoPartialOne: it
// appends batches of three from several goroutines and prints each
// acknowledged batch until it is killed.
func acceptCrashChild(dir string) {
	s, err := store.Open(dir, store.Options{}) // SyncGroup
	if err != nil {
		fmt.Println("open failed:", err)
		os.Exit(3)
	}
	var mu sync.Mutex
	var wg sync.WaitGroup
	for w := 0; w < 6; w++ {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for i := 0; ; i++ {
				var batch []*store.Message
				for j := 0; j < 3; j++ {
					batch = append(batch, msg("t", (w+j)%3, fmt.Sprintf("%d.%d.%d-%d-%s", os.Getpid(), w, i, j, strings.Repeat("c", 200))))
				}
				if err := s.Append(batch...); err != nil {
					return
				}
				mu.Lock()
				fmt.Printf("ok %d.%d.%d\n", os.Getpid(), w, i)
				mu.Unlock()
			}
		}()
	}
	wg.Wait()
}

func TestAcceptKilledProcessLosesNoAcknowledgedBatchAndExposesNoPartialOne(t *testing.T) {
	if dir := os.Getenv(acceptCrashDirEnv); dir != "" {
		acceptCrashChild(dir)
		return
	}
	dir := t.TempDir()
	acked := map[string]bool{}
	for round := 0; round < 4; round++ {
		cmd := exec.Command(os.Args[0], "-test.run=^TestAcceptKilledProcessLosesNoAcknowledgedBatchAndExposesNoPartialOne$", "-test.count=1")
		cmd.Env = append(os.Environ(), acceptCrashDirEnv+"="+dir)
		out, err := cmd.StdoutPipe()
		require.NoError(t, err)
		require.NoError(t, cmd.Start())
		sc := bufio.NewScanner(out)
		lines := 0
		for sc.Scan() && lines < 150+round*50 {
			if id, ok := strings.CutPrefix(sc.Text(), "ok "); ok {
				acked[id] = true
				lines++
			}
		}
		require.NoError(t, cmd.Process.Kill())
		// Acks printed before the kill landed are acknowledged too.
		for sc.Scan() {
			if id, ok := strings.CutPrefix(sc.Text(), "ok "); ok {
				acked[id] = true
			}
		}
		_ = cmd.Wait()
		require.Greater(t, lines, 0, "the child appended")

		s, err := store.Open(dir, store.Options{})
		require.NoError(t, err, "round %d: Open recovers by itself", round)
		parts := map[string]int{}
		seenLog := map[int64]bool{}
		for q := 0; q < 3; q++ {
			for i, m := range readAll(t, s, "t", q) {
				assert.Equal(t, int64(i), m.QueueOffset, "round %d: dense queue offsets", round)
				assert.False(t, seenLog[m.LogOffset])
				seenLog[m.LogOffset] = true
				id, _, _ := strings.Cut(string(m.Body), "-")
				parts[id]++
			}
		}
		for b, n := range parts {
			assert.Equal(t, 3, n, "round %d: batch %s is partial", round, b)
		}
		for b := range acked {
			assert.Equal(t, 3, parts[b], "round %d: acknowledged batch %s lost", round, b)
		}
		for i := int64(0); i < int64(len(seenLog)); i++ {
			assert.True(t, seenLog[i], "round %d: log offset %d missing", round, i)
		}
		require.NoError(t, s.Close())
	}
}
