package store

import "github.com/brokercore/brokercore/internal/fsx"

// WithFS returns o writing every file that is not the log through fsys (a
// fault layer in tests): the seam is unexported, so only tests reach it.
func WithFS(o Options, fsys fsx.FS) Options {
	o.fs = fsys
	return o
}

// RepairWithFS returns o writing through fsys.
func RepairWithFS(o RepairOptions, fsys fsx.FS) RepairOptions {
	o.fs = fsys
	return o
}

// MinLogOffsetForTest is the oldest log offset still in a segment.
func (s *Store) MinLogOffsetForTest() int64 {
	s.mu.RLock()
	defer s.mu.RUnlock()
	return s.logMin
}
