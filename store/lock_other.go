//go:build !unix

package store

import (
	"os"
	"path/filepath"
)

// lockDir only creates dir/LOCK where flock is not available: the caller
// must make sure a directory is opened by one Store at a time.
func lockDir(dir string) (*os.File, error) {
	return os.OpenFile(filepath.Join(dir, "LOCK"), os.O_CREATE|os.O_RDWR, 0o640)
}
