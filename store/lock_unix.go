//go:build unix

package store

import (
	"fmt"
	"os"
	"path/filepath"
	"syscall"
)

// lockDir takes an exclusive flock on dir/LOCK so two Stores (in one process
// or two) never write the same log. The kernel drops it when the process
// dies, so a crash never leaves the directory locked.
func (s *Store) lockDir() error {
	f, err := os.OpenFile(filepath.Join(s.dir, "LOCK"), os.O_CREATE|os.O_RDWR, 0o640)
	if err != nil {
		return err
	}
	if err := syscall.Flock(int(f.Fd()), syscall.LOCK_EX|syscall.LOCK_NB); err != nil {
		f.Close()
		return fmt.Errorf("store: %s is in use: %w", s.dir, err)
	}
	s.lockF = f
	return nil
}
