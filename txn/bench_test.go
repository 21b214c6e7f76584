package txn

import (
	"path/filepath"
	"testing"

	"github.com/brokercore/brokercore/store"
	"github.com/stretchr/testify/require"
)

func benchStore(b *testing.B) *store.Store {
	log, err := store.Open(filepath.Join(b.TempDir(), "store"), store.Options{})
	require.NoError(b, err)
	b.Cleanup(func() { _ = log.Close() })
	return log
}

// BenchmarkPlainAppend is the baseline: one message appended (and fsynced
// under the default SyncGroup), sequentially.
func BenchmarkPlainAppend(b *testing.B) {
	log := benchStore(b)
	body := make([]byte, 256)
	b.ReportAllocs()
	for b.Loop() {
		if err := log.Append(&store.Message{Topic: "orders", Body: body}); err != nil {
			b.Fatal(err)
		}
	}
}

// BenchmarkPrepareCommit is one transaction: Prepare (one append) and
// Commit (one read of the half, one two-message append), sequentially.
func BenchmarkPrepareCommit(b *testing.B) {
	log := benchStore(b)
	m, err := New(log, Options{})
	require.NoError(b, err)
	defer m.Close()
	body := make([]byte, 256)
	b.ReportAllocs()
	for b.Loop() {
		h, err := m.Prepare(&store.Message{Topic: "orders", Body: body}, "pg")
		if err != nil {
			b.Fatal(err)
		}
		if err := m.Commit(h.QueueOffset); err != nil {
			b.Fatal(err)
		}
	}
}

// BenchmarkPlainAppendParallel and BenchmarkPrepareCommitParallel are the
// same under concurrent producers, where group commit shares fsyncs.
func BenchmarkPlainAppendParallel(b *testing.B) {
	log := benchStore(b)
	body := make([]byte, 256)
	b.ReportAllocs()
	b.SetParallelism(8)
	b.RunParallel(func(pb *testing.PB) {
		for pb.Next() {
			if err := log.Append(&store.Message{Topic: "orders", Body: body}); err != nil {
				b.Fatal(err)
			}
		}
	})
}

func BenchmarkPrepareCommitParallel(b *testing.B) {
	log := benchStore(b)
	m, err := New(log, Options{})
	require.NoError(b, err)
	defer m.Close()
	body := make([]byte, 256)
	b.ReportAllocs()
	b.SetParallelism(8)
	b.RunParallel(func(pb *testing.PB) {
		for pb.Next() {
			h, err := m.Prepare(&store.Message{Topic: "orders", Body: body}, "pg")
			if err != nil {
				b.Fatal(err)
			}
			if err := m.Commit(h.QueueOffset); err != nil {
				b.Fatal(err)
			}
		}
	})
}
