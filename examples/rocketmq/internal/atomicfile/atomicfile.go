// Package atomicfile replaces small files atomically, for this example's
// state files (the topic table, the gRPC port's certificate): after a
// crash a reader finds the old contents or the new ones, never a mix.
package atomicfile

import (
	"os"
	"path/filepath"
)

// TmpSuffix names the temporary file WriteFile writes next to its target.
const TmpSuffix = ".tmp"

// WriteFile replaces path with data: it writes path+TmpSuffix, fsyncs it,
// renames it over path and fsyncs the directory, so the replacement
// survives a crash once WriteFile returns. On error the temporary file is
// removed and path is unchanged (or, if only the directory's fsync failed,
// already replaced).
func WriteFile(path string, data []byte, perm os.FileMode) error {
	tmp := path + TmpSuffix
	f, err := os.OpenFile(tmp, os.O_WRONLY|os.O_CREATE|os.O_TRUNC, perm)
	if err != nil {
		return err
	}
	_, werr := f.Write(data)
	if werr == nil {
		werr = f.Sync()
	}
	if cerr := f.Close(); werr == nil {
		werr = cerr
	}
	if werr == nil {
		werr = os.Rename(tmp, path)
	}
	if werr != nil {
		_ = os.Remove(tmp)
		return werr
	}
	return syncDir(filepath.Dir(path))
}

// syncDir fsyncs a directory, so a rename in it is durable.
func syncDir(dir string) error {
	d, err := os.Open(dir)
	if err != nil {
		return err
	}
	err = d.Sync()
	if cerr := d.Close(); err == nil {
		err = cerr
	}
	return err
}
