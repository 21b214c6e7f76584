package replica

import (
	"fmt"
	"testing"

	"github.com/brokercore/brokercore/store"
	"github.com/brokercore/brokercore/txn"
)

// BenchmarkTransactions compares, on three nodes (raft over TCP on
// loopback, the segment log fsynced), a transaction prepared and committed
// (two fenced raft entries: the half, then the real message with its op
// record) with a plain produce of the same 1 KiB message (one entry, joined
// with concurrent ones by the batcher), in the same run.
func BenchmarkTransactions(b *testing.B) {
	for _, p := range []int{1, 16} {
		b.Run(fmt.Sprintf("kind=produce/producers=%d", p), func(b *testing.B) {
			nodes := benchClusterWith(b, LogStoreSegment, false, func(c *Config) { c.Transactions = &txn.Options{} })
			l := leaderOf(b, nodes)
			runProducers(b, p, func(m *store.Message) error { _, err := l.Produce(m); return err })
		})
		b.Run(fmt.Sprintf("kind=prepare+commit/producers=%d", p), func(b *testing.B) {
			nodes := benchClusterWith(b, LogStoreSegment, false, func(c *Config) { c.Transactions = &txn.Options{} })
			tm, err := leaderOf(b, nodes).Transactions()
			if err != nil {
				b.Fatal(err)
			}
			runProducers(b, p, func(m *store.Message) error {
				h, err := tm.Prepare(m, "pg")
				if err != nil {
					return err
				}
				return tm.Commit(h.QueueOffset)
			})
		})
	}
}
