//go:build !unix

package store

import (
	"os"
	"path/filepath"
)

// lockDir only creates dir/LOCK where flock is not available: the caller
// must make sure a directory is opened by one Store at a time.
func (s *Store) lockDir() error {
	f, err := os.OpenFile(filepath.Join(s.dir, "LOCK"), os.O_CREATE|os.O_RDWR, 0o640)
	if err != nil {
		return err
	}
	s.lockF = f
	return nil
}
