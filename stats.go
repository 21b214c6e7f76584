package brokercore

import (
	"github.com/brokercore/brokercore/consumer"
	"github.com/brokercore/brokercore/lock"
	"github.com/brokercore/brokercore/offset"
	"github.com/brokercore/brokercore/pop"
	"github.com/brokercore/brokercore/schedule"
	"github.com/brokercore/brokercore/store"
	"github.com/brokercore/brokercore/txn"
)

// Stats is a snapshot of every piece's counters, for hosts to export as
// metrics (each piece's own Stats, under its package's name).
type Stats struct {
	Store    store.Stats    `json:"store"`    // Broker.Store().Stats()
	Pop      pop.Stats      `json:"pop"`      // Broker.Pop().Stats()
	Offset   offset.Stats   `json:"offset"`   // Broker.Offsets().Stats()
	Schedule schedule.Stats `json:"schedule"` // Broker.Scheduler().Stats()
	Lock     lock.Stats     `json:"lock"`     // Broker.Locks().Stats()
	Consumer consumer.Stats `json:"consumer"` // Broker.Consumers().Stats()
	Txn      txn.Stats      `json:"txn"`      // Broker.Transactions().Stats()
	Arrivals ArrivalStats   `json:"arrivals"` // Broker.Arrivals().Stats()
}

// Stats returns a snapshot of every piece's counters. Each is taken on its
// own: the snapshot is not one instant across pieces.
func (b *Broker) Stats() Stats {
	return Stats{
		Store:    b.store.Stats(),
		Pop:      b.pop.Stats(),
		Offset:   b.offsets.Stats(),
		Schedule: b.sched.Stats(),
		Lock:     b.locks.Stats(),
		Consumer: b.consumers.Stats(),
		Txn:      b.txns.Stats(),
		Arrivals: b.arrivals.Stats(),
	}
}
