package offset

import (
	"encoding/binary"
	"fmt"
	"os"
	"path/filepath"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/brokercore/brokercore/internal/crc"
	"github.com/brokercore/brokercore/internal/fsx"
)

// writeSample opens a file-backed manager, commits and resets a few keys,
// closes it and returns the file's bytes.
func writeSample(t testing.TB, path string) []byte {
	m, err := Open(Options{Path: path})
	require.NoError(t, err)
	require.NoError(t, m.Commit("group-a", "orders", 0, 17))
	require.NoError(t, m.Commit("group-a", "orders", 3, 1<<40))
	_, err = m.Reset("group-b", "payments", 1, 5)
	require.NoError(t, err)
	require.NoError(t, m.Commit("group-b", "payments", 1, 6))
	require.NoError(t, m.Close())
	data, err := os.ReadFile(path)
	require.NoError(t, err)
	return data
}

func TestEveryCutOfTheFileFailsOpenInsteadOfStartingFromZero(t *testing.T) {
	dir := t.TempDir()
	good := writeSample(t, filepath.Join(dir, "good"))
	path := filepath.Join(dir, "cut")
	for n := 0; n < len(good); n++ {
		require.NoError(t, os.WriteFile(path, good[:n], 0o644))
		_, err := Open(Options{Path: path})
		require.ErrorIs(t, err, ErrCorrupt, "file cut to %d of %d bytes", n, len(good))
	}
	// Extended, and the whole file with each byte changed.
	require.NoError(t, os.WriteFile(path, append(append([]byte{}, good...), 0), 0o644))
	_, err := Open(Options{Path: path})
	require.ErrorIs(t, err, ErrCorrupt, "a byte appended")
	for i := range good {
		bad := append([]byte{}, good...)
		bad[i] ^= 0x5a
		require.NoError(t, os.WriteFile(path, bad, 0o644))
		_, err := Open(Options{Path: path})
		require.Error(t, err, "byte %d changed", i)
		if i < 8 || i >= 12 { // bytes 8..11 are the version: changing it may say ErrVersion
			require.ErrorIs(t, err, ErrCorrupt, "byte %d changed", i)
		}
	}
}

func TestNewerFileVersionIsReportedAsSuch(t *testing.T) {
	path := filepath.Join(t.TempDir(), "offsets")
	data := writeSample(t, path)
	binary.LittleEndian.PutUint16(data[8:], fileVersion+1)
	require.NoError(t, os.WriteFile(path, data, 0o644))
	_, err := Open(Options{Path: path})
	require.ErrorIs(t, err, ErrVersion)
}

func TestCorruptFileLoadsBackupOnlyWhenAskedAndFencesEveryEpoch(t *testing.T) {
	path := filepath.Join(t.TempDir(), "offsets")
	m, err := Open(Options{Path: path})
	require.NoError(t, err)
	require.NoError(t, m.Commit("g", "t", 0, 10))
	require.NoError(t, m.Flush()) // becomes the backup at the next write
	e, err := m.Reset("g", "t", 0, 3)
	require.NoError(t, err)
	require.Equal(t, uint64(1), e)
	crash(m)

	data, err := os.ReadFile(path)
	require.NoError(t, err)
	require.NoError(t, os.WriteFile(path, data[:len(data)-1], 0o644)) // the reset's file is torn

	_, err = Open(Options{Path: path})
	require.ErrorIs(t, err, ErrCorrupt)

	log, buf := newTestLogger()
	m2, err := Open(Options{Path: path, FallbackToBackup: true, Logger: log})
	require.NoError(t, err)
	off, _ := m2.Committed("g", "t", 0)
	assert.Equal(t, int64(10), off, "the backup predates the reset")
	assert.Greater(t, m2.Epoch("g", "t", 0), e, "the lost reset's epoch can never be current again")
	require.ErrorIs(t, m2.CommitFenced("g", "t", 0, 50, e), ErrStaleEpoch)
	assert.Contains(t, buf.String(), "recovered from backup")
	require.NoError(t, m2.Commit("g", "t", 0, 11))
	require.NoError(t, m2.Close())

	// The first write after a fallback must not make the corrupt file the backup.
	bak, err := readSnapshot(fsx.OS, path+".bak")
	require.NoError(t, err)
	require.Len(t, bak.records, 1)
	m3 := openT(t, Options{Path: path})
	off, _ = m3.Committed("g", "t", 0)
	assert.Equal(t, int64(11), off)
}

func TestMissingFileWithBackupIsNotASilentReset(t *testing.T) {
	path := filepath.Join(t.TempDir(), "offsets")
	m, err := Open(Options{Path: path})
	require.NoError(t, err)
	require.NoError(t, m.Commit("g", "t", 0, 10))
	require.NoError(t, m.Flush())
	require.NoError(t, m.Commit("g", "t", 0, 11))
	require.NoError(t, m.Close())
	require.NoError(t, os.Remove(path))

	_, err = Open(Options{Path: path})
	require.ErrorIs(t, err, ErrCorrupt)
	m2 := openT(t, Options{Path: path, FallbackToBackup: true})
	off, ok := m2.Committed("g", "t", 0)
	assert.True(t, ok)
	assert.Equal(t, int64(10), off)
}

func TestLeftoverTempFileOfAnInterruptedWriteIsIgnored(t *testing.T) {
	path := filepath.Join(t.TempDir(), "offsets")
	writeSample(t, path)
	require.NoError(t, os.WriteFile(path+".tmp", []byte("half a fi"), 0o644))
	m := openT(t, Options{Path: path})
	off, _ := m.Committed("group-a", "orders", 0)
	assert.Equal(t, int64(17), off)
	_, err := os.Stat(path + ".tmp")
	assert.True(t, os.IsNotExist(err))
}

func TestFileRoundTripsEveryRecord(t *testing.T) {
	s := snapshot{writtenAt: 12345, floor: 9}
	for i := range 300 {
		s.records = append(s.records, record{key: key{fmt.Sprintf("g%d", i%7), fmt.Sprintf("topic-%d", i), i % 5}, offset: int64(i) << 20, epoch: uint64(i % 3)})
	}
	got, err := decodeFile(encodeFile(nil, s))
	require.NoError(t, err)
	assert.Equal(t, s, got)
}

func FuzzDecodeFile(f *testing.F) {
	good := encodeFile(nil, snapshot{writtenAt: 1, floor: 2, records: []record{
		{key: key{"g", "t", 0}, offset: 1, epoch: 0},
		{key: key{"group", "topic", 7}, offset: 1 << 40, epoch: 3},
	}})
	f.Add(good)
	f.Add(good[:len(good)-3])
	f.Add(encodeFile(nil, snapshot{}))
	f.Add([]byte{})
	f.Add([]byte(fileMagic))
	f.Fuzz(func(t *testing.T, data []byte) {
		s, err := decodeFile(data)
		if err != nil {
			return
		}
		// Whatever decodes must be valid and encode back to the same bytes.
		seen := map[key]bool{}
		for _, r := range s.records {
			if r.group == "" || r.topic == "" || r.queue < 0 || r.offset < 0 || seen[r.key] {
				t.Fatalf("decoded an invalid record %+v", r)
			}
			seen[r.key] = true
		}
		if again := encodeFile(nil, s); string(again) != string(data) {
			t.Fatalf("re-encoding differs: %x vs %x", again, data)
		}
	})
}

// FuzzDecodePayload fuzzes the record parser behind a valid header and
// checksum, which random bytes would almost never get past.
func FuzzDecodePayload(f *testing.F) {
	good := encodeFile(nil, snapshot{writtenAt: 1, floor: 2, records: []record{
		{key: key{"g", "t", 0}, offset: 1, epoch: 0},
		{key: key{"group", "topic", 7}, offset: 1 << 40, epoch: 3},
	}})
	f.Add(good[fileHeaderLen : len(good)-fileTrailer])
	f.Add([]byte{})
	f.Add(make([]byte, 17))
	f.Fuzz(func(t *testing.T, payload []byte) {
		data := []byte(fileMagic)
		data = binary.LittleEndian.AppendUint16(data, fileVersion)
		data = binary.LittleEndian.AppendUint16(data, 0)
		data = binary.LittleEndian.AppendUint64(data, uint64(len(payload)))
		data = append(data, payload...)
		data = binary.LittleEndian.AppendUint32(data, crc.Checksum(data))
		s, err := decodeFile(data)
		if err != nil {
			return
		}
		if again := encodeFile(nil, s); string(again) != string(data) {
			t.Fatalf("re-encoding differs: %x vs %x", again, data)
		}
	})
}
