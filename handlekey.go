package brokercore

import (
	"crypto/rand"
	"fmt"

	"github.com/brokercore/brokercore/internal/fsx"
)

// loadHandleKey returns the receipt-handle key kept at path, creating it on
// first use. A file of the wrong length is ErrCorrupt, never regenerated
// silently.
func loadHandleKey(path string) ([]byte, error) {
	key, err := fsx.ReadFile(fsx.OS, path)
	switch {
	case err == nil && len(key) == HandleKeySize:
		return key, nil
	case err == nil:
		return nil, fmt.Errorf("%w: %s holds %d bytes, want %d (remove it to start with a new key)",
			ErrCorrupt, path, len(key), HandleKeySize)
	case !fsx.IsNotExist(err):
		return nil, fmt.Errorf("brokercore: handle key: %w", err)
	}
	key = make([]byte, HandleKeySize)
	_, _ = rand.Read(key) // crypto/rand.Read never fails (Go 1.24+)
	if err := fsx.WriteFile(fsx.OS, path, key, 0o600); err != nil {
		return nil, fmt.Errorf("brokercore: handle key: %w", err)
	}
	return key, nil
}
