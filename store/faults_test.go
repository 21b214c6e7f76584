package store

import (
	"errors"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/brokercore/brokercore/internal/fsx"
	"github.com/brokercore/brokercore/internal/fsx/fsxtest"
)

// faultWorkload appends to a store through fsys until done or the store
// fails, and returns what was acknowledged (queue -> offset -> body).
func faultWorkload(t *testing.T, dir string, fsys fsx.FS) map[string]string {
	t.Helper()
	acked := map[string]string{}
	s, err := Open(dir, Options{fs: fsys, SegmentSize: 2048})
	if err != nil {
		require.ErrorIs(t, err, ErrFailed)
		return acked
	}
	var failed error
	for i := 0; i < 150 && failed == nil; i++ {
		m := msg("t", i%3, fmt.Sprintf("m%d-%s", i, strings.Repeat("f", i%50)))
		if err := s.Append(m); err != nil {
			require.ErrorIs(t, err, ErrFailed, "a failing write answers ErrFailed")
			failed = err
			break
		}
		acked[fmt.Sprint(m.QueueID, "/", m.QueueOffset)] = string(m.Body)
		if i%40 == 39 {
			if err := s.Sync(); err != nil {
				require.ErrorIs(t, err, ErrFailed)
				failed = err
			}
		}
	}
	if failed == nil {
		failed = s.Sync()
	}
	if failed != nil {
		// Every later call answers it; Close still closes.
		require.ErrorIs(t, s.Append(msg("t", 0, "later")), ErrFailed)
		_, err := s.Read("t", 0, 0, 1)
		require.ErrorIs(t, err, ErrFailed)
		require.ErrorIs(t, s.Sync(), ErrFailed)
		assert.True(t, s.Stats().Failed)
	}
	closeErr := s.Close()
	if failed == nil && closeErr != nil {
		require.ErrorIs(t, closeErr, ErrFailed, "the fault fell in Close's checkpoint")
	}
	return acked
}

// checkAcked opens dir with a healthy FS and reads every acknowledged
// message back.
func checkAcked(t *testing.T, dir string, acked map[string]string) {
	t.Helper()
	s := openT(t, dir, Options{})
	defer s.Close()
	for key, body := range acked {
		var q int
		var off int64
		_, err := fmt.Sscanf(key, "%d/%d", &q, &off)
		require.NoError(t, err)
		got, err := s.Read("t", q, off, 1)
		require.NoError(t, err)
		require.Len(t, got, 1, "acknowledged %s lost", key)
		require.Equal(t, body, string(got[0].Body), key)
	}
	require.NoError(t, s.Append(msg("t", 0, "after")), "the store works again")
}

// TestFaultAtTheNthCallOfEveryNonLogFileFailsCleanly fails, in turn, every
// open, write, fsync and rename the store makes on its non-log files
// (index files, checkpoint) with ENOSPC: the failing call (or the next
// one, for a background checkpoint) answers ErrFailed, later calls too,
// Close works, nothing acknowledged is lost, and Open after the disk is
// freed recovers everything, also after several failed Opens while full.
func TestFaultAtTheNthCallOfEveryNonLogFileFailsCleanly(t *testing.T) {
	t.Parallel()
	clean := &fsxtest.Faulty{}
	acked := faultWorkload(t, t.TempDir(), clean)
	require.Len(t, acked, 150)
	ops := map[fsxtest.Op]string{fsxtest.OpOpen: "open", fsxtest.OpWrite: "write", fsxtest.OpSync: "fsync", fsxtest.OpRename: "rename"}
	scenarios := 0
	for op, name := range ops {
		calls := clean.Calls(op)
		require.Positive(t, calls, name)
		step := max(1, calls/12)
		for n := 1; n <= calls; n += step {
			t.Run(fmt.Sprintf("%s-%d", name, n), func(t *testing.T) {
				dir := t.TempDir()
				f := &fsxtest.Faulty{}
				f.Fail(op, n, fsxtest.ENOSPC)
				acked := faultWorkload(t, dir, f)
				for range 3 { // still full: Opens fail and change nothing
					if s, err := Open(dir, Options{fs: f}); err == nil {
						s.Close()
					} else {
						require.ErrorIs(t, err, ErrFailed)
					}
				}
				f.Heal()
				checkAcked(t, dir, acked)
			})
			scenarios++
		}
	}
	t.Logf("%d fault scenarios", scenarios)
}

// TestFullDiskFailsTheLogForReal runs the store on a tiny tmpfs (root only;
// CI runs as root) until the log's own writes hit ENOSPC.
func TestFullDiskFailsTheLogForReal(t *testing.T) {
	if os.Geteuid() != 0 {
		t.Skip("needs root to mount a tmpfs (CI runs as root)")
	}
	mnt := t.TempDir()
	if out, err := exec.Command("mount", "-t", "tmpfs", "-o", "size=192k", "tmpfs", mnt).CombinedOutput(); err != nil {
		t.Skipf("cannot mount a tmpfs: %v %s", err, out)
	}
	t.Cleanup(func() { exec.Command("umount", mnt).Run() })
	dir := filepath.Join(mnt, "store")
	for _, pol := range []SyncPolicy{SyncGroup, SyncNone} {
		t.Run(pol.String(), func(t *testing.T) {
			require.NoError(t, os.RemoveAll(dir))
			require.NoError(t, exec.Command("mount", "-o", "remount,size=192k", mnt).Run())
			s, err := Open(dir, Options{Sync: pol, SegmentSize: 32 << 10})
			require.NoError(t, err)
			acked := map[string]string{}
			var failed error
			for i := 0; i < 10000; i++ {
				m := msg("t", i%3, fmt.Sprintf("m%d-%s", i, strings.Repeat("d", 1000)))
				if err := s.Append(m); err != nil {
					failed = err
					break
				}
				acked[fmt.Sprint(m.QueueID, "/", m.QueueOffset)] = string(m.Body)
			}
			require.ErrorIs(t, failed, ErrFailed, "the disk filled up")
			assert.True(t, errors.Is(failed, os.ErrNotExist) || strings.Contains(failed.Error(), "no space"), "%v", failed)
			require.ErrorIs(t, s.Append(msg("t", 0, "later")), ErrFailed)
			_, err = s.Read("t", 0, 0, 1)
			require.ErrorIs(t, err, ErrFailed)
			_ = s.Close() // works: returns the failure, releases the directory
			for range 3 {
				if s, err := Open(dir, Options{Sync: pol}); err == nil {
					s.Close()
				}
			}
			require.NoError(t, exec.Command("mount", "-o", "remount,size=16m", mnt).Run())
			t.Logf("%d appends acknowledged before the disk was full", len(acked))
			checkAcked(t, dir, acked)
		})
	}
}

// A log write whose framing or roll differs from what the store placed must
// put the store into its failed state before any entry pointing at it is
// used.
func TestWalThatFramesDifferentlyFailsTheStoreBeforeAnyRead(t *testing.T) {
	for _, pol := range []SyncPolicy{SyncGroup, SyncNone} {
		t.Run(pol.String(), func(t *testing.T) {
			s := openT(t, t.TempDir(), Options{Sync: pol})
			defer s.Close()
			require.NoError(t, s.Append(msg("t", 0, "fine")))
			s.mu.Lock()
			tail := s.segs[len(s.segs)-1].path
			inner := s.logWrite
			s.logWrite = func(fr *frames) error {
				if err := inner(fr); err != nil {
					return err
				}
				// A writer that adds a trailer to every write.
				f, err := os.OpenFile(tail, os.O_WRONLY|os.O_APPEND, 0)
				if err != nil {
					return err
				}
				defer f.Close()
				_, err = f.Write([]byte{0})
				return err
			}
			s.mu.Unlock()
			err := s.Append(msg("t", 0, "diverged"))
			if pol == SyncGroup {
				require.ErrorIs(t, err, ErrFailed, "caught at the group commit")
			} else {
				require.NoError(t, err, "SyncNone: caught before the first read")
			}
			got, err := s.Read("t", 0, 1, 1)
			require.ErrorIs(t, err, ErrFailed)
			assert.Nil(t, got)
			assert.Contains(t, err.Error(), "wal diverged")
			assert.True(t, s.Stats().Failed)
		})
	}
}

func TestWalThatRollsDifferentlyFailsTheStore(t *testing.T) {
	dir := t.TempDir()
	s := openT(t, dir, Options{SegmentSize: 4096})
	defer s.Close()
	require.NoError(t, s.Append(msg("t", 0, "fine")))
	// A writer that does not roll where the store placed a new segment.
	s.mu.Lock()
	inner := s.logWrite
	s.logWrite = func(fr *frames) error { return inner(&frames{buf: fr.buf}) }
	s.mu.Unlock()
	var failed error
	for i := 0; i < 100 && failed == nil; i++ {
		failed = s.Append(msg("t", 0, strings.Repeat("r", 100)))
	}
	require.ErrorIs(t, failed, ErrFailed)
	assert.Contains(t, failed.Error(), "wal diverged")
	visible := s.MaxOffset("t", 0)
	_, err := s.Read("t", 0, 0, int(visible)+1)
	require.ErrorIs(t, err, ErrFailed)
}
