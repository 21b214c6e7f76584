// Package fsx is the one seam through which brokercore writes files that are
// not the log: atomic replacement (temp file, fsync, rename, fsync of the
// directory), directory fsync, and an FS interface a test can swap for a
// faulty one (fsxtest.Faulty, which fails the Nth write, fsync or rename) —
// so every file the library writes can be put under fault injection the
// same way.
package fsx

import (
	"errors"
	"io"
	"io/fs"
	"os"
	"path/filepath"
)

// File is the part of *os.File the library uses.
type File interface {
	io.Reader
	io.ReaderAt
	io.Writer
	io.WriterAt
	Sync() error
	Close() error
	Truncate(size int64) error
	Stat() (os.FileInfo, error)
	Name() string
}

// FS is the part of the os package the library uses for files that are not
// the log. OS is the real one.
type FS interface {
	OpenFile(name string, flag int, perm os.FileMode) (File, error)
	ReadFile(name string) ([]byte, error)
	Rename(oldpath, newpath string) error
	Remove(name string) error
	MkdirAll(path string, perm os.FileMode) error
	SyncDir(dir string) error
}

// OS is the FS of the operating system.
var OS FS = osFS{}

type osFS struct{}

func (osFS) OpenFile(name string, flag int, perm os.FileMode) (File, error) {
	f, err := os.OpenFile(name, flag, perm)
	if err != nil {
		return nil, err // a typed nil *os.File must not become a non-nil File
	}
	return f, nil
}
func (osFS) ReadFile(name string) ([]byte, error)         { return os.ReadFile(name) }
func (osFS) Rename(oldpath, newpath string) error         { return os.Rename(oldpath, newpath) }
func (osFS) Remove(name string) error                     { return os.Remove(name) }
func (osFS) MkdirAll(path string, perm os.FileMode) error { return os.MkdirAll(path, perm) }
func (osFS) SyncDir(dir string) error                     { return SyncDir(dir) }

// SyncDir makes created, renamed and removed entries of dir durable.
func SyncDir(dir string) error {
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

// WriteFile replaces path with data on fsys so that a crash at any point
// leaves either the old or the new content under path, never a mix: it
// writes path+".tmp", fsyncs it, renames it over path and fsyncs the
// directory. On error the temp file is removed and path is unchanged.
func WriteFile(fsys FS, path string, data []byte, perm os.FileMode) error {
	if fsys == nil {
		fsys = OS
	}
	tmp := path + ".tmp"
	f, err := fsys.OpenFile(tmp, os.O_WRONLY|os.O_CREATE|os.O_TRUNC, perm)
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
		werr = fsys.Rename(tmp, path)
	}
	if werr != nil {
		_ = fsys.Remove(tmp)
		return werr
	}
	return fsys.SyncDir(filepath.Dir(path))
}

// ReadFile reads path on fsys (nil = OS). A missing file answers an error
// for which errors.Is(err, fs.ErrNotExist) holds, so a caller can tell a
// first run from a damaged file.
func ReadFile(fsys FS, path string) ([]byte, error) {
	if fsys == nil {
		fsys = OS
	}
	return fsys.ReadFile(path)
}

// IsNotExist reports whether err says a file is missing.
func IsNotExist(err error) bool { return errors.Is(err, fs.ErrNotExist) }
