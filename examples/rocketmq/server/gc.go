package server

import (
	"fmt"
	"os"
	"runtime/debug"
	"strconv"
)

// DefaultGCPercent is the garbage collector target the program runs with
// (its -gogc flag; GOGC in the environment is the flag's default when set).
// Go's own default, 100, runs a collection each time the heap grows by its
// live size. A broker's live heap is small next to what it allocates per
// second: the store's log (tidwall/wal) keeps the segment it is writing in
// memory and grows that buffer by a quarter at a time, about five bytes of
// garbage per byte stored. At 400 the heap may grow to five times the live
// size between collections, which cuts the collector's work per message;
// the price is a larger resident heap. Compare the two on your machine with
// go test -run '^$' -bench 'SyncSend16/(flush=async|flush=async,gogc=400)$' ./e2e.
const DefaultGCPercent = 400

// GCPercent is the program's default collector target: GOGC from the
// environment when set ("off" is -1), DefaultGCPercent otherwise. A GOGC
// that is neither a number nor "off" is an error.
func GCPercent() (int, error) {
	v, ok := os.LookupEnv("GOGC")
	if !ok || v == "" {
		return DefaultGCPercent, nil
	}
	if v == "off" {
		return -1, nil
	}
	n, err := strconv.Atoi(v)
	if err != nil {
		return 0, fmt.Errorf("GOGC=%q: not a number or \"off\"", v)
	}
	return n, nil
}

// SetGCPercent sets the process's collector target (debug.SetGCPercent;
// negative: off) and returns the previous one. The program calls it once
// at start; a library user's process keeps its own setting, since Start
// never calls it.
func SetGCPercent(percent int) int { return debug.SetGCPercent(percent) }
