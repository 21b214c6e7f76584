package testkit

import (
	"errors"
	"io/fs"
	"os"
	"path/filepath"
)

// CopyCrashImage copies the directory tree from into to while the files in
// it may still be written: what a crash at this moment would leave on disk
// (the page cache included). A file that vanishes between the listing and
// its copy — a temporary file renamed over its target — is one a crash at
// that moment would not have left either, so it is skipped; os.CopyFS
// fails on it instead.
func CopyCrashImage(from, to string) error {
	return filepath.WalkDir(from, func(path string, d fs.DirEntry, err error) error {
		if errors.Is(err, fs.ErrNotExist) && path != from {
			return nil
		}
		if err != nil {
			return err
		}
		rel, err := filepath.Rel(from, path)
		if err != nil {
			return err
		}
		dst := filepath.Join(to, rel)
		if d.IsDir() {
			return os.MkdirAll(dst, 0o755)
		}
		data, err := os.ReadFile(path)
		if errors.Is(err, fs.ErrNotExist) {
			return nil
		}
		if err != nil {
			return err
		}
		return os.WriteFile(dst, data, 0o644)
	})
}
