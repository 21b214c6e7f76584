//go:build !unix

package offset

import "time"

// cpuTime is not measured here; the ops/cpu-s metric is then left out.
func cpuTime() time.Duration { return 0 }
