package store

import (
	"errors"
	"syscall"
)

// punchHole frees the disk blocks of [0, end) of an index file once
// retention made those entries unreachable; offsets (and the file size) stay
// as they are. Filesystems without hole punching just keep the blocks.
func punchHole(f any, end int64) error {
	fd, ok := f.(interface{ Fd() uintptr })
	if !ok {
		return nil // not an OS file (a test's FS)
	}
	end &^= 4095 // whole blocks only
	if end <= 0 {
		return nil
	}
	const punchHole, keepSize = 0x02, 0x01 // FALLOC_FL_PUNCH_HOLE, FALLOC_FL_KEEP_SIZE
	err := syscall.Fallocate(int(fd.Fd()), punchHole|keepSize, 0, end)
	if errors.Is(err, syscall.EOPNOTSUPP) || errors.Is(err, syscall.ENOSYS) {
		return nil
	}
	return err
}
