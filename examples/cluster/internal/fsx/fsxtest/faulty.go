// Package fsxtest is the fault layer of fsx, for tests only: a Faulty FS
// that fails the Nth open, write, fsync, rename, remove or truncate. No
// production file imports it, so it is never compiled into a binary.
package fsxtest

import (
	"errors"
	"os"
	"sync"
	"syscall"

	"github.com/brokercore/brokercore/examples/cluster/internal/fsx"
)

// Op names an operation a Faulty FS can fail.
type Op int

// The operations a Faulty FS counts.
const (
	OpOpen Op = iota
	OpWrite
	OpSync
	OpRename
	OpRemove
	OpTruncate
	numOps
)

// ErrInjected is the error a Faulty FS returns where no other was given.
var ErrInjected = errors.New("fsx: injected fault")

// ENOSPC is the error of a full disk, for Faulty.Fail.
var ENOSPC error = syscall.ENOSPC

// Faulty wraps an FS (nil = OS) and fails chosen calls: Fail(op, n, err)
// makes the nth call of op from now on (1 = the next one) and every later
// one return err, until Heal. It counts every call, so a test can first
// count the calls of a clean run and then fail each of them in turn. It is
// safe for concurrent use. Writes through WriteAt and Write both count as
// OpWrite.
type Faulty struct {
	Base fsx.FS

	mu     sync.Mutex
	calls  [numOps]int
	failAt [numOps]int // call number at which failing starts; 0 = never
	err    [numOps]error
}

// Fail makes the nth call of op from now on, and every one after it, fail
// with err (nil = ErrInjected). A short write is not simulated: the write
// does not happen.
func (f *Faulty) Fail(op Op, n int, err error) {
	if err == nil {
		err = ErrInjected
	}
	f.mu.Lock()
	defer f.mu.Unlock()
	f.failAt[op] = f.calls[op] + n
	f.err[op] = err
}

// Heal stops every injected fault (a freed disk).
func (f *Faulty) Heal() {
	f.mu.Lock()
	defer f.mu.Unlock()
	f.failAt = [numOps]int{}
}

// Calls returns how many calls of op were made so far.
func (f *Faulty) Calls(op Op) int {
	f.mu.Lock()
	defer f.mu.Unlock()
	return f.calls[op]
}

func (f *Faulty) check(op Op) error {
	f.mu.Lock()
	defer f.mu.Unlock()
	f.calls[op]++
	if f.failAt[op] != 0 && f.calls[op] >= f.failAt[op] {
		return f.err[op]
	}
	return nil
}

func (f *Faulty) base() fsx.FS {
	if f.Base == nil {
		return fsx.OS
	}
	return f.Base
}

// OpenFile opens through the base FS; the file's writes, syncs and
// truncates are counted and can fail.
func (f *Faulty) OpenFile(name string, flag int, perm os.FileMode) (fsx.File, error) {
	if err := f.check(OpOpen); err != nil {
		return nil, &os.PathError{Op: "open", Path: name, Err: err}
	}
	file, err := f.base().OpenFile(name, flag, perm)
	if err != nil {
		return nil, err
	}
	return &faultyFile{File: file, fs: f}, nil
}

// ReadFile is never failed: reads are not what a full disk breaks.
func (f *Faulty) ReadFile(name string) ([]byte, error) { return f.base().ReadFile(name) }

// Rename counts and may fail.
func (f *Faulty) Rename(oldpath, newpath string) error {
	if err := f.check(OpRename); err != nil {
		return &os.LinkError{Op: "rename", Old: oldpath, New: newpath, Err: err}
	}
	return f.base().Rename(oldpath, newpath)
}

// Remove counts and may fail.
func (f *Faulty) Remove(name string) error {
	if err := f.check(OpRemove); err != nil {
		return &os.PathError{Op: "remove", Path: name, Err: err}
	}
	return f.base().Remove(name)
}

// MkdirAll is passed through.
func (f *Faulty) MkdirAll(path string, perm os.FileMode) error { return f.base().MkdirAll(path, perm) }

// SyncDir counts as OpSync and may fail.
func (f *Faulty) SyncDir(dir string) error {
	if err := f.check(OpSync); err != nil {
		return &os.PathError{Op: "fsync", Path: dir, Err: err}
	}
	return f.base().SyncDir(dir)
}

type faultyFile struct {
	fsx.File
	fs *Faulty
}

func (f *faultyFile) Write(p []byte) (int, error) {
	if err := f.fs.check(OpWrite); err != nil {
		return 0, &os.PathError{Op: "write", Path: f.Name(), Err: err}
	}
	return f.File.Write(p)
}

func (f *faultyFile) WriteAt(p []byte, off int64) (int, error) {
	if err := f.fs.check(OpWrite); err != nil {
		return 0, &os.PathError{Op: "write", Path: f.Name(), Err: err}
	}
	return f.File.WriteAt(p, off)
}

func (f *faultyFile) Sync() error {
	if err := f.fs.check(OpSync); err != nil {
		return &os.PathError{Op: "fsync", Path: f.Name(), Err: err}
	}
	return f.File.Sync()
}

func (f *faultyFile) Truncate(size int64) error {
	if err := f.fs.check(OpTruncate); err != nil {
		return &os.PathError{Op: "truncate", Path: f.Name(), Err: err}
	}
	return f.File.Truncate(size)
}
