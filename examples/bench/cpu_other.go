//go:build !unix

package main

import "time"

// processCPU is 0 where getrusage is not available: CPU columns print "—".
func processCPU() time.Duration { return 0 }
