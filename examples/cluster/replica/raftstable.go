package replica

import (
	"encoding/binary"
	"errors"
	"fmt"
	"maps"
	"slices"
	"sync"

	"github.com/brokercore/brokercore/examples/cluster/internal/crc"
	"github.com/brokercore/brokercore/examples/cluster/internal/fsx"
)

// errKeyNotFound is raft's "not found": raft tells a missing key from a
// failure by this exact text (as raft-boltdb's ErrKeyNotFound).
var errKeyNotFound = errors.New("not found")

// stableStore is raft's StableStore (current term, vote): a small file of
// keys and values with a CRC, replaced atomically (temp file, fsync,
// rename, directory fsync) on every Set. raft writes it on elections only.
type stableStore struct {
	fs   fsx.FS
	path string

	mu sync.RWMutex
	kv map[string][]byte
}

func openStableStore(fsys fsx.FS, path string) (*stableStore, error) {
	kv, err := loadKV(fsys, path)
	if err != nil {
		return nil, err
	}
	return &stableStore{fs: fsys, path: path, kv: kv}, nil
}

// Set stores val under key durably; on error nothing changed.
func (s *stableStore) Set(key, val []byte) error {
	s.mu.Lock()
	defer s.mu.Unlock()
	kv := maps.Clone(s.kv)
	kv[string(key)] = slices.Clone(val)
	if err := saveKV(s.fs, s.path, kv); err != nil {
		return fmt.Errorf("raft stable store: %w", err)
	}
	s.kv = kv
	return nil
}

// Get returns the value of key, errKeyNotFound when there is none.
func (s *stableStore) Get(key []byte) ([]byte, error) {
	s.mu.RLock()
	defer s.mu.RUnlock()
	v, ok := s.kv[string(key)]
	if !ok {
		return nil, errKeyNotFound
	}
	return slices.Clone(v), nil
}

// SetUint64 stores val under key durably.
func (s *stableStore) SetUint64(key []byte, val uint64) error {
	return s.Set(key, binary.LittleEndian.AppendUint64(nil, val))
}

// GetUint64 returns the value of key, errKeyNotFound when there is none.
func (s *stableStore) GetUint64(key []byte) (uint64, error) {
	v, err := s.Get(key)
	if err != nil {
		return 0, err
	}
	if len(v) != 8 {
		return 0, fmt.Errorf("raft stable store: key %q holds %d bytes, not a uint64", key, len(v))
	}
	return binary.LittleEndian.Uint64(v), nil
}

// The key/value file:
//
//	"BCKV" | count uint32 | (key len uint32, key, value len uint32, value)* | crc uint32
//
// The CRC-32C covers everything before it; keys are in sorted order.
var kvMagic = []byte("BCKV")

func encodeKV(kv map[string][]byte) []byte {
	b := append([]byte(nil), kvMagic...)
	b = binary.LittleEndian.AppendUint32(b, uint32(len(kv)))
	for _, k := range slices.Sorted(maps.Keys(kv)) {
		b = binary.LittleEndian.AppendUint32(b, uint32(len(k)))
		b = append(b, k...)
		b = binary.LittleEndian.AppendUint32(b, uint32(len(kv[k])))
		b = append(b, kv[k]...)
	}
	return binary.LittleEndian.AppendUint32(b, crc.Checksum(b))
}

func decodeKV(b []byte) (map[string][]byte, error) {
	bad := func(why string) error { return fmt.Errorf("key/value file: %s: %w", why, ErrLogCorrupt) }
	if len(b) < len(kvMagic)+8 || string(b[:4]) != string(kvMagic) {
		return nil, bad("no header")
	}
	body, sum := b[:len(b)-4], binary.LittleEndian.Uint32(b[len(b)-4:])
	if crc.Checksum(body) != sum {
		return nil, bad("checksum mismatch")
	}
	n := binary.LittleEndian.Uint32(body[4:])
	p := body[8:]
	next := func() ([]byte, bool) {
		if len(p) < 4 {
			return nil, false
		}
		l := binary.LittleEndian.Uint32(p)
		if uint64(l) > uint64(len(p)-4) {
			return nil, false
		}
		v := p[4 : 4+l]
		p = p[4+l:]
		return v, true
	}
	kv := map[string][]byte{}
	for i := uint32(0); i < n; i++ {
		k, ok1 := next()
		v, ok2 := next()
		if !ok1 || !ok2 {
			return nil, bad("truncated entry")
		}
		if _, dup := kv[string(k)]; dup {
			return nil, bad("duplicate key")
		}
		kv[string(k)] = slices.Clone(v)
	}
	if len(p) != 0 {
		return nil, bad("trailing bytes")
	}
	return kv, nil
}

// loadKV reads the file at path; a missing file is an empty map.
func loadKV(fsys fsx.FS, path string) (map[string][]byte, error) {
	b, err := fsx.ReadFile(fsys, path)
	if fsx.IsNotExist(err) {
		return map[string][]byte{}, nil
	}
	if err != nil {
		return nil, err
	}
	kv, err := decodeKV(b)
	if err != nil {
		return nil, fmt.Errorf("%s: %w", path, err)
	}
	return kv, nil
}

func saveKV(fsys fsx.FS, path string, kv map[string][]byte) error {
	return fsx.WriteFile(fsys, path, encodeKV(kv), 0o644)
}
