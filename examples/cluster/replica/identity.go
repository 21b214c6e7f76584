package replica

import (
	"encoding/json"
	"errors"
	"fmt"
	"io/fs"
	"os"
	"path/filepath"

	"github.com/brokercore/brokercore/examples/cluster/internal/fsx"
)

// identity is node.json in the data directory: who owns it. A node refuses
// a directory written by another node id or another cluster, so a
// mistyped -data flag cannot graft one cluster's log onto another's.
type identity struct {
	NodeID    string `json:"node_id"`
	ClusterID string `json:"cluster_id,omitempty"`
}

func identityPath(dir string) string { return filepath.Join(dir, "node.json") }

func loadIdentity(dir string) (identity, bool, error) {
	var id identity
	b, err := os.ReadFile(identityPath(dir))
	if errors.Is(err, fs.ErrNotExist) {
		return id, false, nil
	}
	if err != nil {
		return id, false, err
	}
	if err := json.Unmarshal(b, &id); err != nil || id.NodeID == "" {
		return id, false, fmt.Errorf("%s: unreadable (%v): %w", identityPath(dir), err, ErrForeignDataDir)
	}
	return id, true, nil
}

// saveIdentity replaces node.json atomically.
func saveIdentity(dir string, id identity) error {
	b, err := json.Marshal(id)
	if err != nil {
		return err
	}
	return fsx.WriteFile(fsx.OS, identityPath(dir), b, 0o644)
}

// checkIdentity refuses a directory of another node or cluster and claims
// an unclaimed one for this node.
func checkIdentity(dir, nodeID, clusterID string) (identity, error) {
	id, ok, err := loadIdentity(dir)
	if err != nil {
		return id, err
	}
	if !ok {
		id = identity{NodeID: nodeID, ClusterID: clusterID}
		return id, saveIdentity(dir, id)
	}
	if id.NodeID != nodeID {
		return id, fmt.Errorf("%s belongs to node %q, not %q: %w", dir, id.NodeID, nodeID, ErrForeignDataDir)
	}
	if clusterID != "" && id.ClusterID != "" && id.ClusterID != clusterID {
		return id, fmt.Errorf("%s belongs to cluster %q, not %q: %w", dir, id.ClusterID, clusterID, ErrForeignDataDir)
	}
	return id, nil
}
