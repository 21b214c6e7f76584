package txn_test

import (
	"fmt"
	"os"
	"path/filepath"

	"github.com/brokercore/brokercore/store"
	"github.com/brokercore/brokercore/txn"
)

// A transaction: the half message is stored but not on its topic until the
// commit, which delivers it once however often it is repeated.
func Example() {
	dir, _ := os.MkdirTemp("", "txn")
	defer os.RemoveAll(dir)
	log, _ := store.Open(filepath.Join(dir, "store"), store.Options{})
	defer log.Close()
	m, _ := txn.New(log, txn.Options{ProgressPath: filepath.Join(dir, "txn.progress"),
		Checker: txn.CheckerFunc(func(c txn.Check) error {
			fmt.Println("check", c.ID, "with a producer of", c.Group) // the host asks a producer
			return nil
		})})
	defer m.Close()

	half, _ := m.Prepare(&store.Message{Topic: "orders", Body: []byte("paid")}, "shop")
	fmt.Println("on orders before the commit:", log.MaxOffset("orders", 0))
	_ = m.Commit(half.QueueOffset)
	_ = m.Commit(half.QueueOffset) // a retry: the effect of one
	fmt.Println("on orders after the commit:", log.MaxOffset("orders", 0))
	fmt.Println("rollback now:", m.Rollback(half.QueueOffset) != nil)
	// Output:
	// on orders before the commit: 0
	// on orders after the commit: 1
	// rollback now: true
}
