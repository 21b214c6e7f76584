//go:build !linux

package replica

import "github.com/brokercore/brokercore/examples/cluster/internal/fsx"

// datasync is fsync where fdatasync is not available.
func datasync(f fsx.File) error { return f.Sync() }
