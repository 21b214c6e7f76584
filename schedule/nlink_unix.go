//go:build unix

package schedule

import (
	"os"
	"syscall"
)

// linkCount is the number of directory entries naming the file (0 once it
// was removed while open); -1 when the platform does not say.
func linkCount(fi os.FileInfo) int64 {
	if st, ok := fi.Sys().(*syscall.Stat_t); ok {
		return int64(st.Nlink)
	}
	return -1
}
