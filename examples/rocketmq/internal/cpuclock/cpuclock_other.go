//go:build !unix

package cpuclock

import "time"

func self() time.Duration { return 0 }

func process(int) (time.Duration, bool) { return 0, false }
