package store_test

// Damage after a clean Close: offsets never go backwards (no queue offset
// or log offset is handed out twice), and a damaged record costs exactly
// that record.

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"log/slog"
	"os"
	"path/filepath"
	"sort"
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/brokercore/brokercore/internal/testkit"
	"github.com/brokercore/brokercore/pop"
	"github.com/brokercore/brokercore/store"
)

type issuedSet struct {
	log    map[int64]bool
	queues map[string]map[int64]bool // "topic/queue" -> queue offsets
}

func newIssued() *issuedSet {
	return &issuedSet{log: map[int64]bool{}, queues: map[string]map[int64]bool{}}
}

// add records an assigned message and fails if its offsets were issued before.
func (is *issuedSet) add(t *testing.T, m *store.Message, ctx string) {
	t.Helper()
	k := fmt.Sprintf("%s/%d", m.Topic, m.QueueID)
	require.False(t, is.log[m.LogOffset], "%s: log offset %d handed out twice", ctx, m.LogOffset)
	require.False(t, is.queues[k][m.QueueOffset], "%s: %s queue offset %d handed out twice", ctx, k, m.QueueOffset)
	is.log[m.LogOffset] = true
	if is.queues[k] == nil {
		is.queues[k] = map[int64]bool{}
	}
	is.queues[k][m.QueueOffset] = true
}

func (is *issuedSet) clone() *issuedSet {
	c := newIssued()
	for k := range is.log {
		c.log[k] = true
	}
	for q, offs := range is.queues {
		c.queues[q] = map[int64]bool{}
		for o := range offs {
			c.queues[q][o] = true
		}
	}
	return c
}

func walSegments(t *testing.T, dir string) []string {
	t.Helper()
	ents, err := os.ReadDir(filepath.Join(dir, "log"))
	require.NoError(t, err)
	var out []string
	for _, e := range ents {
		if walSegmentName.MatchString(e.Name()) {
			out = append(out, filepath.Join(dir, "log", e.Name()))
		}
	}
	sort.Strings(out)
	return out
}

// appendAndCheck appends to every queue and checks no offset was issued
// before; every surviving record must read back as written.
func appendAndCheck(t *testing.T, s *store.Store, is *issuedSet, written map[int64]string, ctx string) {
	t.Helper()
	for q := 0; q < 3; q++ {
		for _, m := range readAll(t, s, "d", q) {
			if want, ok := written[m.LogOffset]; ok {
				require.Equal(t, want, string(m.Body), "%s: log offset %d", ctx, m.LogOffset)
			}
		}
	}
	for q := 0; q < 3; q++ {
		m := msg("d", q, ctx+" after")
		require.NoError(t, s.Append(m), ctx)
		is.add(t, m, ctx)
		written[m.LogOffset] = string(m.Body)
		got, err := s.ReadAt(m.LogOffset)
		require.NoError(t, err, ctx)
		require.Equal(t, m.Body, got.Body)
	}
	m := msg("new", 0, ctx+" new queue")
	require.NoError(t, s.Append(m), ctx)
	is.add(t, m, ctx)
}

func TestDamageAfterCleanCloseNeverHandsOutAnOffsetTwice(t *testing.T) {
	opts := store.Options{SegmentSize: 16 << 10, Sync: store.SyncNone}
	src := t.TempDir()
	s, err := store.Open(src, opts)
	require.NoError(t, err)
	is := newIssued()
	written := map[int64]string{}
	var older []byte // the last segment as it was before the last batches
	var olderName string
	lastSize := func() (string, int64) {
		segs := walSegments(t, src)
		fi, err := os.Stat(segs[len(segs)-1])
		require.NoError(t, err)
		return segs[len(segs)-1], fi.Size()
	}
	// Append until there are three segments and the last one holds more
	// than 12 KiB, copying it once it holds 8 KiB (the older copy).
	for i := 0; ; i++ {
		var batch []*store.Message
		for j := 0; j <= i%3; j++ {
			batch = append(batch, msg("d", (i+j)%3, fmt.Sprintf("m%04d.%d-%s", i, j, strings.Repeat("x", 60+i%50))))
		}
		require.NoError(t, s.Append(batch...))
		for _, m := range batch {
			is.add(t, m, "build")
			written[m.LogOffset] = string(m.Body)
		}
		name, size := lastSize()
		if len(walSegments(t, src)) < 3 {
			continue
		}
		if older == nil && size >= 8<<10 {
			olderName = name
			older, err = os.ReadFile(name)
			require.NoError(t, err)
		}
		if size >= 12<<10 {
			break
		}
	}
	require.NoError(t, s.Close())
	segs := walSegments(t, src)
	require.Greater(t, len(segs), 2)
	last := segs[len(segs)-1]
	require.Equal(t, olderName, last, "the last batches rolled a segment: make SegmentSize larger")
	rel := mustRelPath(t, src, last)
	full, err := os.ReadFile(last)
	require.NoError(t, err)

	damages := map[string]func([]byte) []byte{
		"flipped bit in the last record": func(b []byte) []byte { b[len(b)-3] ^= 0x10; return b },
		"100 bytes cut":                  func(b []byte) []byte { return b[:len(b)-100] },
		"half the segment cut":           func(b []byte) []byte { return b[:len(b)/2] },
		"last 4 KiB zeroed": func(b []byte) []byte {
			clear(b[len(b)-4096:])
			return b
		},
		"replaced by an older copy": func([]byte) []byte { return bytes.Clone(older) },
		"emptied":                   func([]byte) []byte { return nil },
	}
	for name, damage := range damages {
		t.Run(name, func(t *testing.T) {
			img := t.TempDir()
			require.NoError(t, testkit.CopyCrashImage(src, img))
			require.NoError(t, os.WriteFile(filepath.Join(img, rel), damage(bytes.Clone(full)), 0o640))
			is := is.clone()
			var lb logBuffer
			o := opts
			o.Logger = slog.New(slog.NewTextHandler(&lb, nil))
			s, err := store.Open(img, o)
			if err != nil {
				var ce *store.CorruptError
				require.ErrorAs(t, err, &ce, "refused, but not with a *CorruptError")
				return
			}
			require.Contains(t, lb.String(), "level=ERROR", "the loss is reported")
			require.Positive(t, s.Stats().LostRecords, "the loss is counted")
			appendAndCheck(t, s, is, written, "first open")
			require.NoError(t, s.Close())

			s = openT(t, img, opts)
			appendAndCheck(t, s, is, written, "reopen")
			require.NoError(t, s.Close())

			// Every derived file lost: the floors live in the log.
			require.NoError(t, os.RemoveAll(filepath.Join(img, "index")))
			require.NoError(t, os.Remove(filepath.Join(img, "checkpoint")))
			s = openT(t, img, opts)
			appendAndCheck(t, s, is, written, "rebuilt")
			require.NoError(t, s.Close())
		})
	}
}

func mustRelPath(t *testing.T, base, p string) string {
	t.Helper()
	r, err := filepath.Rel(base, p)
	require.NoError(t, err)
	return r
}

// damagedFixture writes n records of 1 KB to one queue over several
// segments, closes the store and flips one byte inside record victim (in an
// older, closed segment). It returns the directory and the segment.
func damagedFixture(t *testing.T, n, victim int, opts store.Options) (string, string) {
	t.Helper()
	dir := t.TempDir()
	s, err := store.Open(dir, opts)
	require.NoError(t, err)
	for i := 0; i < n; i += 100 {
		var batch []*store.Message
		for j := i; j < min(i+100, n); j++ {
			batch = append(batch, msg("big", 0, fmt.Sprintf("rec-%06d-%s", j, strings.Repeat("b", 1000))))
		}
		require.NoError(t, s.Append(batch...))
	}
	require.NoError(t, s.Close())
	segs := walSegments(t, dir)
	require.GreaterOrEqual(t, len(segs), 2)
	needle := []byte(fmt.Sprintf("rec-%06d-", victim))
	for _, p := range segs[:len(segs)-1] {
		b, err := os.ReadFile(p)
		require.NoError(t, err)
		if i := bytes.Index(b, needle); i >= 0 {
			b[i+len(needle)+500] ^= 0x04
			require.NoError(t, os.WriteFile(p, b, 0o640))
			return dir, p
		}
	}
	t.Fatalf("record %d is not in a closed segment", victim)
	return "", ""
}

func TestDamagedRecordInAClosedSegmentCostsExactlyThatRecord(t *testing.T) {
	n, victim, seg := 3000, 1301, 1<<20
	if os.Getenv("BROKERCORE_LONG") == "1" {
		n, victim, seg = 24000, 7801, store.DefaultSegmentSize
	}
	opts := store.Options{Sync: store.SyncNone, SegmentSize: seg}
	dir, damagedSeg := damagedFixture(t, n, victim, opts)
	work := t.TempDir()
	require.NoError(t, testkit.CopyCrashImage(dir, work))

	var lb logBuffer
	o := opts
	o.Logger = slog.New(slog.NewTextHandler(&lb, nil))
	s := openT(t, dir, o)
	// Read pages through the queue as a consumer does.
	var got []int64
	for off := int64(0); off < s.MaxOffset("big", 0); {
		page, err := s.Read("big", 0, off, 32)
		require.NoError(t, err, "offset %d", off)
		require.NotEmpty(t, page, "offset %d: the queue stops below MaxOffset", off)
		for _, m := range page {
			require.Equal(t, fmt.Sprintf("rec-%06d-%s", m.QueueOffset, strings.Repeat("b", 1000)), string(m.Body))
			got = append(got, m.QueueOffset)
		}
		off = page[len(page)-1].QueueOffset + 1
	}
	require.Len(t, got, n-1, "every record but the damaged one")
	for i, off := range got {
		want := int64(i)
		if i >= victim {
			want++
		}
		require.Equal(t, want, off)
	}
	_, err := s.ReadAt(int64(victim))
	require.ErrorIs(t, err, store.ErrCorrupt, "the damaged record is never returned as data")
	page, err := s.Read("big", 0, int64(victim), 1)
	require.NoError(t, err)
	require.Len(t, page, 1)
	require.Equal(t, int64(victim+1), page[0].QueueOffset, "Read at the damaged record steps past it")
	require.Equal(t, uint64(1), s.Stats().CorruptRecords, "counted once")
	logs := lb.String()
	require.Contains(t, logs, "level=ERROR")
	require.Contains(t, logs, filepath.Base(damagedSeg))
	require.Contains(t, logs, "position=")
	require.Contains(t, logs, fmt.Sprintf("log_offset=%d", victim))

	// pop steps past the hole and commits past it.
	offs := pop.NewMemoryOffsets()
	svc := pop.New(s, pop.Options{Offsets: offs})
	delivered := 0
	ctx := context.Background()
	for delivered < n-1 {
		res, err := svc.Pop(ctx, pop.Request{Group: "g", Topic: "big", ClientID: "c", QueueID: 0, Max: 32, Invisible: time.Hour})
		require.NoError(t, err)
		require.NotEmpty(t, res.Messages, "pop stopped after %d", delivered)
		for _, d := range res.Messages {
			require.NotEqual(t, int64(victim), d.Message.QueueOffset)
			require.NoError(t, svc.Ack(d.Handle))
			delivered++
		}
	}
	committed, ok := offs.Committed("g", "big", 0)
	require.True(t, ok)
	require.Equal(t, int64(n), committed, "the commit passes the damaged record")
	require.NoError(t, svc.Close())
	require.NoError(t, s.Close())

	// Repair replaces exactly the damaged record.
	rep, err := store.Repair(work, store.RepairOptions{})
	require.NoError(t, err)
	require.Len(t, rep.Cuts, 1)
	require.Equal(t, int64(1), rep.Lost, "%+v", rep.Cuts)
	require.Equal(t, int64(victim), rep.Cuts[0].From)
	s = openT(t, work, opts)
	all := 0
	for off := int64(0); off < s.MaxOffset("big", 0); {
		page, err := s.Read("big", 0, off, store.MaxReadBatch)
		require.NoError(t, err)
		require.NotEmpty(t, page)
		all += len(page)
		off = page[len(page)-1].QueueOffset + 1
	}
	require.Equal(t, n-1, all)
	require.Equal(t, int64(n), s.MaxOffset("big", 0))
	m := msg("big", 0, "after repair")
	require.NoError(t, s.Append(m))
	require.Equal(t, int64(n), m.QueueOffset, "no queue offset handed out twice")
	require.Equal(t, int64(n), m.LogOffset, "no log offset handed out twice")
	_, err = s.ReadAt(int64(victim))
	require.True(t, errors.Is(err, store.ErrCorrupt))
	require.NoError(t, s.Close())
}
