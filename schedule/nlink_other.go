//go:build !unix

package schedule

import "os"

// linkCount is -1 where the platform does not say how many directory
// entries name a file.
func linkCount(os.FileInfo) int64 { return -1 }
