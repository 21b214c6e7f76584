package replica

import (
	"errors"
	"fmt"
	"io"
	"log/slog"
	"os"
	"path/filepath"

	"github.com/brokercore/brokercore/examples/cluster/internal/fsx"
	"github.com/hashicorp/raft"
	raftboltdb "github.com/hashicorp/raft-boltdb/v2"
)

// The raft log stores Config.LogStore chooses from.
const (
	// LogStoreSegment is this module's log (raftlog.go): one write and
	// one fsync per StoreLogs, in dir/raftlog/. The default.
	LogStoreSegment = "segment"
	// LogStoreBolt is raft-boltdb/v2 in dir/raft.db: two fdatasyncs per
	// StoreLogs (bolt's data pages, then its meta page).
	LogStoreBolt = "bolt"
)

func raftLogDir(dir string) string   { return filepath.Join(dir, "raftlog") }
func raftBoltPath(dir string) string { return filepath.Join(dir, "raft.db") }

// existingLogStore names the log store dir holds, "" when none.
func existingLogStore(dir string) (string, error) {
	var found []string
	if _, err := os.Stat(raftBoltPath(dir)); err == nil {
		found = append(found, LogStoreBolt)
	} else if !errors.Is(err, os.ErrNotExist) {
		return "", err
	}
	if _, err := os.Stat(raftLogDir(dir)); err == nil {
		found = append(found, LogStoreSegment)
	} else if !errors.Is(err, os.ErrNotExist) {
		return "", err
	}
	switch len(found) {
	case 0:
		return "", nil
	case 1:
		return found[0], nil
	}
	return "", fmt.Errorf("%s holds both raft.db and raftlog/: which one is the log is unclear: %w", dir, ErrInvalid)
}

// openRaftStores opens raft's log and stable store of the kind asked for
// ("" = the one dir already holds, else LogStoreSegment). Asking for one
// kind on a directory holding the other is refused: raft would start on an
// empty log beside the real one.
func openRaftStores(dir, kind string, log *slog.Logger) (raft.LogStore, raft.StableStore, []io.Closer, error) {
	have, err := existingLogStore(dir)
	if err != nil {
		return nil, nil, nil, err
	}
	switch {
	case kind == "" && have != "":
		kind = have
	case kind == "":
		kind = LogStoreSegment
	case kind != LogStoreSegment && kind != LogStoreBolt:
		return nil, nil, nil, fmt.Errorf("config: LogStore %q: want %q or %q: %w", kind, LogStoreSegment, LogStoreBolt, ErrInvalid)
	case have != "" && have != kind:
		return nil, nil, nil, fmt.Errorf("config: LogStore %q, but %s holds a %q raft log: %w", kind, dir, have, ErrInvalid)
	}
	if kind == LogStoreBolt {
		bolt, err := raftboltdb.NewBoltStore(raftBoltPath(dir))
		if err != nil {
			return nil, nil, nil, fmt.Errorf("open raft log: %w", err)
		}
		return bolt, bolt, []io.Closer{bolt}, nil
	}
	ls, err := openLogStore(raftLogDir(dir), logStoreOptions{Logger: log})
	if err != nil {
		return nil, nil, nil, fmt.Errorf("open raft log: %w", err)
	}
	ss, err := openStableStore(fsx.OS, filepath.Join(raftLogDir(dir), "stable"))
	if err != nil {
		_ = ls.Close()
		return nil, nil, nil, fmt.Errorf("open raft stable store: %w", err)
	}
	return ls, ss, []io.Closer{ls}, nil
}

func (n *Node) closeRaftStores() error {
	var errs []error
	for _, c := range n.raftC {
		errs = append(errs, c.Close())
	}
	n.raftC = nil
	return errors.Join(errs...)
}

// HasState reports whether dir holds a node's raft log already (a node
// that starts on it rejoins with its state; a fresh one must be added).
func HasState(dir string) (bool, error) {
	have, err := existingLogStore(dir)
	return have != "", err
}
