package store

import (
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	"github.com/tidwall/wal"
)

// writeThree appends three single-message batches and a 3-message batch and
// closes the store cleanly (so a checkpoint covers all of it).
func writeThree(t *testing.T, dir string, o Options) {
	t.Helper()
	s := openT(t, dir, o)
	for _, b := range []string{"a", "b", "c"} {
		require.NoError(t, s.Append(msg("t", 0, b)))
	}
	require.NoError(t, s.Append(msg("t", 0, "d"), msg("t", 1, "e"), msg("t", 0, "f")))
	require.NoError(t, s.Close())
}

func readAll(t *testing.T, s *Store, topic string, q int) []string {
	t.Helper()
	got, err := s.Read(topic, q, s.MinOffset(topic, q), MaxReadBatch)
	require.NoError(t, err)
	return bodies(got)
}

func TestOpenCutsGarbageAppendedToTheTail(t *testing.T) {
	dir := t.TempDir()
	writeThree(t, dir, Options{})
	f, err := os.OpenFile(tailSegment(t, dir), os.O_APPEND|os.O_WRONLY, 0)
	require.NoError(t, err)
	_, err = f.Write([]byte{0xff, 0xff, 0xff, 0x01, 0x02, 0x03, 'g', 'a', 'r', 'b'})
	require.NoError(t, err)
	require.NoError(t, f.Close())

	var logs logBuffer
	s := openT(t, dir, Options{Logger: logs.logger()})
	defer s.Close()
	assert.Equal(t, []string{"a", "b", "c", "d", "f"}, readAll(t, s, "t", 0))
	assert.Contains(t, logs.String(), "recovery cut the log tail")
	assert.Contains(t, logs.String(), "bytes=10")
	assert.Equal(t, int64(10), s.Stats().RecoveryCut)
	require.NoError(t, s.Append(msg("t", 0, "g")))
	assert.Equal(t, []string{"a", "b", "c", "d", "f", "g"}, readAll(t, s, "t", 0))
}

func TestOpenCutsARecordCutShortAndItsWholeBatch(t *testing.T) {
	dir := t.TempDir()
	writeThree(t, dir, Options{})
	path := tailSegment(t, dir)
	info, err := os.Stat(path)
	require.NoError(t, err)
	// Cut into the last record ("f"): the batch d, e, f must vanish whole,
	// although d and e are intact. The checkpoint written by Close now
	// claims more than the log holds, so the index is rebuilt.
	require.NoError(t, os.Truncate(path, info.Size()-3))

	var logs logBuffer
	s := openT(t, dir, Options{Logger: logs.logger()})
	defer s.Close()
	assert.Equal(t, []string{"a", "b", "c"}, readAll(t, s, "t", 0))
	assert.Empty(t, readAll(t, s, "t", 1))
	assert.Contains(t, logs.String(), "entries=3", "d, e and the torn f")
	// d, e and f were durable (Close): their offsets were handed out and
	// are never handed out again; the loss is reported.
	assert.Equal(t, int64(5), s.MaxOffset("t", 0))
	assert.Equal(t, int64(1), s.MaxOffset("t", 1))
	assert.Equal(t, uint64(3), s.Stats().LostRecords)
	assert.Contains(t, logs.String(), "level=ERROR")
	m := msg("t", 0, "d2")
	require.NoError(t, s.Append(m))
	assert.Equal(t, int64(5), m.QueueOffset, "no queue offset handed out twice")
	assert.Equal(t, int64(6), m.LogOffset, "no log offset handed out twice")
	assert.Equal(t, []string{"a", "b", "c", "d2"}, readAll(t, s, "t", 0))
}

func TestOpenCutsABadChecksumInTheLastRecord(t *testing.T) {
	dir := t.TempDir()
	writeThree(t, dir, Options{})
	path := tailSegment(t, dir)
	data, err := os.ReadFile(path)
	require.NoError(t, err)
	data[len(data)-1] ^= 0x40 // last byte of the body of "f"
	require.NoError(t, os.WriteFile(path, data, 0o640))

	var logs logBuffer
	s := openT(t, dir, Options{Logger: logs.logger()})
	defer s.Close()
	assert.Equal(t, []string{"a", "b", "c"}, readAll(t, s, "t", 0))
	assert.Contains(t, logs.String(), "checksum")
}

func TestCorruptionInTheMiddleOfTheLogIsAnErrorNamingSegmentAndPosition(t *testing.T) {
	dir := t.TempDir()
	writeThree(t, dir, Options{})
	path := tailSegment(t, dir)
	data, err := os.ReadFile(path)
	require.NoError(t, err)
	frames, _ := parseFrames(data, 0)
	require.Len(t, frames, 6)
	data[frames[1].pos+int64(frames[1].size)-1] ^= 0x01 // body of "b"; c..f follow intact
	require.NoError(t, os.WriteFile(path, data, 0o640))

	_, err = Open(dir, Options{})
	require.ErrorIs(t, err, ErrCorrupt)
	assert.Contains(t, err.Error(), filepath.Base(path))
	assert.Contains(t, err.Error(), "position")
	// Nothing was cut: fixing the byte makes the store whole again.
	data[frames[1].pos+int64(frames[1].size)-1] ^= 0x01
	require.NoError(t, os.WriteFile(path, data, 0o640))
	s := openT(t, dir, Options{})
	defer s.Close()
	assert.Equal(t, []string{"a", "b", "c", "d", "f"}, readAll(t, s, "t", 0))
}

func TestAPartialBatchSpanningSegmentsIsCutWhole(t *testing.T) {
	dir := t.TempDir()
	o := Options{SegmentSize: 300}
	s := openT(t, dir, o)
	require.NoError(t, s.Append(msg("t", 0, "first")))
	batch := make([]*Message, 8)
	for i := range batch {
		batch[i] = msg("t", 0, strings.Repeat("x", 60))
	}
	require.NoError(t, s.Append(batch...))
	require.Greater(t, s.Stats().Segments, 2, "the batch must span segments")
	require.NoError(t, s.Close())
	// Lose the last segments after a clean Close: the checkpoint vouches for
	// their records, so this is not a torn tail but lost acknowledged data:
	// Open refuses, and an explicit Repair cuts the batch whole (its first
	// records are intact in earlier segments, but it has no end marker any
	// more).
	require.NoError(t, os.Remove(tailSegment(t, dir)))
	require.NoError(t, os.Remove(tailSegment(t, dir)))
	_, err := Open(dir, o)
	require.ErrorIs(t, err, ErrCorrupt)
	rep, err := Repair(dir, RepairOptions{})
	require.NoError(t, err)
	require.NotEmpty(t, rep.Cuts)
	assert.Equal(t, int64(1), rep.Cuts[len(rep.Cuts)-1].From, "the whole batch goes, from its first record")

	s = openT(t, dir, o)
	defer s.Close()
	assert.Equal(t, []string{"first"}, readAll(t, s, "t", 0))
	m := msg("t", 0, "next")
	require.NoError(t, s.Append(m))
	assert.Equal(t, int64(9), m.QueueOffset, "the cut batch's offsets are never handed out again")
	assert.Equal(t, int64(9), m.LogOffset)
}

func TestReopenReplaysOnlyTheLogPastTheCheckpoint(t *testing.T) {
	dir := t.TempDir()
	o := Options{Sync: SyncNone, SegmentSize: 2048}
	s := openT(t, dir, o)
	fillSegments(t, s, "t", 200)
	require.NoError(t, s.Close())
	s = openT(t, dir, o)
	assert.Zero(t, s.Stats().Replayed, "a clean close leaves nothing to replay")
	fillSegments(t, s, "t", 200)
	require.NoError(t, s.Sync())
	waitFor(t, func() bool { // the checkpoint of the last roll is written
		s.mu.RLock()
		due := s.ckptDue
		s.mu.RUnlock()
		if due || !s.ckptMu.TryLock() {
			return false
		}
		s.ckptMu.Unlock()
		return true
	})
	fillSegments(t, s, "u", 3)
	require.NoError(t, s.Sync())
	crash(t, s)

	s = openT(t, dir, o)
	defer s.Close()
	st := s.Stats()
	assert.Less(t, st.Replayed, int64(40), "only the records after the last segment roll's checkpoint")
	assert.Equal(t, int64(3), s.MaxOffset("u", 0))
	assert.Equal(t, int64(400), s.MaxOffset("t", 0))
	got, err := s.Read("t", 0, 350, 100)
	require.NoError(t, err)
	require.Len(t, got, 50)
	assert.Equal(t, int64(399), got[49].QueueOffset)
}

func TestCorruptCheckpointIsRebuiltFromTheLog(t *testing.T) {
	dir := t.TempDir()
	writeThree(t, dir, Options{})
	require.NoError(t, os.WriteFile(filepath.Join(dir, ckptFile), []byte("BCCKgarbage"), 0o640))
	var logs logBuffer
	s := openT(t, dir, Options{Logger: logs.logger()})
	defer s.Close()
	assert.Equal(t, []string{"a", "b", "c", "d", "f"}, readAll(t, s, "t", 0))
	assert.Equal(t, []string{"e"}, readAll(t, s, "t", 1))
	assert.Equal(t, int64(6), s.Stats().Replayed)
	assert.Contains(t, logs.String(), "unreadable checkpoint")
}

func TestCrashAfterUnsyncedAppendsKeepsEverySyncedRecord(t *testing.T) {
	dir := t.TempDir()
	o := Options{Sync: SyncNone}
	s := openT(t, dir, o)
	require.NoError(t, s.Append(msg("t", 0, "synced")))
	require.NoError(t, s.Sync())
	require.NoError(t, s.Append(msg("t", 0, "unsynced1"), msg("t", 0, "unsynced2")))
	seg, pos := crash(t, s)
	cut := chop(t, dir, seg, pos, func(n int64) int64 { return n / 2 })
	require.Positive(t, cut)

	s = openT(t, dir, o)
	defer s.Close()
	assert.Equal(t, []string{"synced"}, readAll(t, s, "t", 0))
}

func TestLostOrDamagedIndexIsRebuiltFromTheLog(t *testing.T) {
	dir := t.TempDir()
	writeThree(t, dir, Options{})
	ents, err := os.ReadDir(filepath.Join(dir, "index"))
	require.NoError(t, err)
	for _, e := range ents {
		require.NoError(t, os.Truncate(filepath.Join(dir, "index", e.Name()), 0))
	}
	var logs logBuffer
	s := openT(t, dir, Options{Logger: logs.logger()})
	defer s.Close()
	assert.Equal(t, []string{"a", "b", "c", "d", "f"}, readAll(t, s, "t", 0))
	assert.Equal(t, []string{"e"}, readAll(t, s, "t", 1))
	m, err := s.ReadAt(4)
	require.NoError(t, err)
	assert.Equal(t, "e", string(m.Body))
	assert.Contains(t, logs.String(), "index unusable")
}

// TestTornTailThatRawWalRefusesIsRepairedByOpen shows why the store repairs
// the tail itself: tidwall/wal v1.2.1 fails to open the very same files.
func TestTornTailThatRawWalRefusesIsRepairedByOpen(t *testing.T) {
	dir := t.TempDir()
	writeThree(t, dir, Options{})
	path := tailSegment(t, dir)
	info, err := os.Stat(path)
	require.NoError(t, err)
	require.NoError(t, os.Truncate(path, info.Size()-1))

	raw, err := wal.Open(filepath.Join(dir, "log"), &wal.Options{NoSync: true, AllowEmpty: true})
	if err == nil {
		raw.Close()
	}
	require.ErrorIs(t, err, wal.ErrCorrupt, "raw wal cannot open a torn tail")

	s := openT(t, dir, Options{})
	defer s.Close()
	assert.Equal(t, []string{"a", "b", "c"}, readAll(t, s, "t", 0))
}

// TestBadRecordWithIntactOnesAfterIsCorruptionEvenPastTheCheckpoint: a bad
// record followed by an intact one is corruption wherever it lies (the old
// rule cut it as a torn tail past the last checkpoint, which dropped
// acknowledged records); Repair is the explicit way out.
func TestBadRecordWithIntactOnesAfterIsCorruptionEvenPastTheCheckpoint(t *testing.T) {
	dir := t.TempDir()
	writeThree(t, dir, Options{}) // clean close: checkpoint at the end
	s := openT(t, dir, Options{Sync: SyncNone})
	for _, b := range []string{"g", "h", "i"} {
		require.NoError(t, s.Append(msg("t", 0, b)))
	}
	crash(t, s) // no checkpoint covers g, h, i
	path := tailSegment(t, dir)
	data, err := os.ReadFile(path)
	require.NoError(t, err)
	frames, _ := parseFrames(data, 0)
	require.Len(t, frames, 9)
	data[frames[7].pos+int64(frames[7].size)-1] ^= 0x01 // "h" bad, "i" intact after it
	require.NoError(t, os.WriteFile(path, data, 0o640))

	_, err = Open(dir, Options{})
	require.ErrorIs(t, err, ErrCorrupt)
	assert.Contains(t, err.Error(), "log offsets 7 to 8")
	assert.Contains(t, err.Error(), "Repair replaces only this record", "the framing is intact")
	rep, err := Repair(dir, RepairOptions{})
	require.NoError(t, err)
	require.Len(t, rep.Cuts, 1)
	assert.Equal(t, int64(1), rep.Lost)
	assert.Empty(t, rep.Cuts[0].Records, "h does not decode")
	s = openT(t, dir, Options{})
	defer s.Close()
	assert.Equal(t, []string{"a", "b", "c", "d", "f", "g", "i"}, readAll(t, s, "t", 0))
	m := msg("t", 0, "j")
	require.NoError(t, s.Append(m))
	assert.Equal(t, int64(8), m.QueueOffset)
	assert.Equal(t, int64(9), m.LogOffset)
}

// TestReplayAfterACrashIsBoundedByCheckpointBytes: without any segment
// roll, checkpoints by bytes keep what a recovery replays bounded.
func TestReplayAfterACrashIsBoundedByCheckpointBytes(t *testing.T) {
	dir := t.TempDir()
	o := Options{Sync: SyncNone, SegmentSize: 64 << 20, CheckpointBytes: 32 << 10}
	s := openT(t, dir, o)
	body := strings.Repeat("r", 200)
	for i := 0; i < 3000; i++ { // ~700 KiB, about 20 checkpoints' worth
		require.NoError(t, s.Append(msg("t", i%50, body)))
	}
	waitFor(t, func() bool {
		s.mu.RLock()
		due := s.ckptDue
		s.mu.RUnlock()
		if due || !s.ckptMu.TryLock() {
			return false
		}
		s.ckptMu.Unlock()
		return true
	})
	assert.Equal(t, 1, s.Stats().Segments, "no roll")
	assert.GreaterOrEqual(t, s.Stats().Checkpoints, uint64(2), "checkpoints by bytes")
	crash(t, s)
	s = openT(t, dir, o)
	defer s.Close()
	assert.Less(t, s.Stats().Replayed, int64(2*(32<<10)/200), "at most about CheckpointBytes of log replayed")
	assert.Equal(t, int64(60), s.MaxOffset("t", 0))
}
