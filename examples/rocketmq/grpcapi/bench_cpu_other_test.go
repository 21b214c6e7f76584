//go:build !unix

package grpcapi_test

import "time"

func processCPU() time.Duration { return 0 }

func procCPU(int) (time.Duration, bool) { return 0, false }
