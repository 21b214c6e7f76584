//go:build !unix

package pop

import "time"

func processCPU() time.Duration { return 0 }
